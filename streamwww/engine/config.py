"""What a run is: its settings (:class:`SolverConfig`), where it stands (:class:`Cursor`),
what it produced (:class:`ModelResult`), and the stopping rule, stated once."""

from __future__ import annotations

import bisect
import math
import threading
import warnings
from dataclasses import asdict, dataclass, field

import numpy as np

from streamwww._params import MAX_ITER, UNMIXED
from streamwww.solvers import LOSS_IDS, SIMPLEX, SOLVER_IDS
from streamwww.solvers.shark import SHARK_EPS

__all__ = ["OMITTED", "SolverConfig", "ModelResult", "Cursor", "results_to_json", "results_from_json",
           "warn_not_converged", "not_converged"]


# eval_every="auto", schedule version 1 (a checkpoint without "schedule" in its config; new
# runs use version 2, engine.schedule.SCHEDULE): after epoch e, the next objective pass
# comes _auto_spacing(e) epochs later: every epoch at first, then spaced by about
# sqrt(e) / AUTO_DIVISOR.  The passes then cost ~4 sqrt(N) of N epochs' worth, and a stop
# comes at most ~sqrt(N) / 2 epochs after the first epoch that met the rule (a relative
# overshoot of 1 / (2 sqrt(N))).
AUTO_DIVISOR = 2


def _auto_spacing(e: int) -> int:
    return max(1, math.isqrt(int(e)) // AUTO_DIVISOR)


_AUTO_EPOCHS = [1]  # the schedule's epochs so far, in order (extended on demand)
_AUTO_LOCK = threading.Lock()


def evaluation_epoch(epoch: int) -> bool:
    """Whether the ``eval_every="auto"`` schedule computes the objectives after ``epoch``
    (1-based): epochs 1, 2, 3, ..., then spaced by ``max(1, isqrt(e) // 2)``, a function
    of the epoch alone, so a resumed run (or any run) evaluates at the same epochs."""
    epoch = int(epoch)
    if _AUTO_EPOCHS[-1] < epoch:
        with _AUTO_LOCK:
            while _AUTO_EPOCHS[-1] < epoch:
                _AUTO_EPOCHS.append(_AUTO_EPOCHS[-1] + _auto_spacing(_AUTO_EPOCHS[-1]))
    i = bisect.bisect_left(_AUTO_EPOCHS, epoch)
    return _AUTO_EPOCHS[i] == epoch


#: Settings a checkpoint's config leaves out at these values, and the value a config
#: without the key means (no cross-validation, no shrinking, version 1 of the row order
#: and of the "auto" schedule, the sequential pass, Weston-Watkins).
OMITTED = {"splits": None, "shrinking": False, "row_order": 1, "schedule": 1, "block_rows": 1, "loss": "ww",
           "shrink_rule": 1}


@dataclass(frozen=True)
class SolverConfig:
    """Everything that determines the optimization path (and so the model)."""

    Cs: tuple[float, ...]
    tol: float = 1e-3
    max_iter: int = MAX_ITER
    gap_decay: float | None = None
    fit_intercept: bool = True
    intercept_scaling: float = 1.0
    subproblem: str = "walrus"
    seed: int = 0
    inner_passes: int = 1
    eval_every: int | str = 1  # or "auto": evaluation_epoch's schedule
    shark_eps: float = SHARK_EPS
    mix_shards: int = UNMIXED
    splits: tuple[int, ...] | None = None  # per model, the cross-validation split it trains on (-1: all rows)
    shrinking: bool = False  # engine.shrink (False: a config without the key)
    row_order: int = 1  # engine.order's version (1: a config without the key; new runs: order.ROW_ORDER)
    schedule: int = 1  # the "auto" schedule's version (engine.schedule; 1: evaluation_epoch's)
    block_rows: int = 1  # the pass: 1 sequential, m > 1 the block pass of m rows (backends._block_kernels)
    loss: str = "ww"  # "ww" Weston-Watkins, "cs" Crammer-Singer (DESIGN.md: the same dual, another feasible set)
    shrink_rule: int = 1  # shrinking's sets (engine.shrink; 1: a config without the key; new runs: SHRINK_RULE)

    @property
    def solver_id(self) -> int:
        """The block step the kernels run (:mod:`streamwww.solvers`): Crammer-Singer's simplex
        step, or the Weston-Watkins solver ``subproblem`` names."""
        return SIMPLEX if self.loss == "cs" else SOLVER_IDS[self.subproblem]

    @property
    def loss_id(self) -> int:
        """The hinge the objective kernels sum (:mod:`streamwww.solvers`)."""
        return LOSS_IDS[self.loss]

    @property
    def bias(self) -> float:
        """Value of the appended constant feature (0.0: no intercept)."""
        return float(self.intercept_scaling) if self.fit_intercept else 0.0

    def n_weight_rows(self, n_features: int) -> int:
        """Rows of one model's ``W``: the features, plus the intercept's."""
        return int(n_features) + (1 if self.fit_intercept else 0)

    def evaluates(self, epoch: int) -> bool:
        """Are the objectives computed after (1-based) ``epoch``?  Always after the
        last, and after the first when the gap-decay rule needs ``gap_1``."""
        if epoch == self.max_iter or (self.gap_decay is not None and epoch == 1):
            return True
        if self.eval_every == "auto":
            if self.schedule >= 2:  # a function of the run's history: engine.schedule.Schedule
                raise ValueError("the adaptive 'auto' schedule needs the run's history (engine.schedule)")
            return evaluation_epoch(epoch)
        return epoch % int(self.eval_every) == 0

    def evaluates_round(self, t: int) -> bool:
        """:meth:`evaluates` for round ``t`` of a cluster run, where ``"auto"`` is every
        round: a round's task sweeps its rows at ``W_t`` for its shrinking sets in any
        case, so the certificate costs it no pass of its own (engine.cocoa)."""
        return True if self.eval_every == "auto" else self.evaluates(t)

    @property
    def sticky_sets(self) -> bool:
        """Whether shrinking's sets hold until the next objective pass (engine.shrink):
        with a schedule that leaves epochs without objectives."""
        return self.eval_every == "auto" or int(self.eval_every) > 1

    def converged(self, gap: float, rel_gap: float, gap_1: float | None) -> bool:
        """The stopping rule: ``rel_gap <= tol``, or ``gap <= gap_decay * gap_1``."""
        if rel_gap <= self.tol:
            return True
        return self.gap_decay is not None and gap_1 is not None and gap <= self.gap_decay * gap_1

    def coef_intercept(self, W, n_features: int) -> tuple[np.ndarray, np.ndarray]:
        """``coef_`` (k, d) and ``intercept_`` (k,) of one model's weights ``W`` (d [+ 1], k)."""
        coef = np.ascontiguousarray(W[:n_features].T)
        intercept = (self.intercept_scaling * W[n_features]) if self.fit_intercept else np.zeros(W.shape[1])
        return coef, np.asarray(intercept, dtype=np.float64)

    def to_json(self) -> dict:
        """The settings as a checkpoint records them; those at their :data:`OMITTED` value are
        left out: such a config is the one a checkpoint without the setting holds."""
        out = {**asdict(self), "Cs": list(self.Cs)}
        if self.splits is not None:
            out["splits"] = list(self.splits)
        return {k: v for k, v in out.items() if k not in OMITTED or v != OMITTED[k]}


@dataclass
class ModelResult:
    """Outcome of training one model (one value of ``C``)."""

    C: float
    W: object = None  # host weights (D, k) once training ends
    n_iter: int = 0
    history: list[dict[str, float]] = field(default_factory=list)
    gap_1: float | None = None
    status: str = "running"  # 'converged', 'max_iter', 'stopped'

    @property
    def converged(self) -> bool:
        return self.status == "converged"


@dataclass
class Cursor:
    """Where a run stands: ``pos`` shards of epoch ``epoch`` (0-based) are done."""

    epoch: int = 0
    pos: int = 0
    train_time: float = 0.0

    def to_json(self) -> dict:
        return {"epoch": self.epoch, "pos": self.pos, "train_time": self.train_time}

    @classmethod
    def from_json(cls, d: dict) -> "Cursor":
        return cls(int(d["epoch"]), int(d["pos"]), float(d["train_time"]))


def results_to_json(results: list[ModelResult]) -> list[dict]:
    return [{"C": r.C, "n_iter": r.n_iter, "history": r.history, "gap_1": r.gap_1, "status": r.status}
            for r in results]


def results_from_json(items) -> list[ModelResult]:
    return [ModelResult(C=float(d["C"]), n_iter=int(d["n_iter"]), history=list(d["history"]),
                        gap_1=d["gap_1"], status=str(d["status"])) for d in items]


def not_converged(results: list[ModelResult], cfg: SolverConfig, tol: str = "tol",
                  gap_decay: str = "gap_decay") -> list[tuple[ModelResult, str]]:
    """``(model, why)`` for each model that hit ``max_iter``: ``why`` names the stopping
    tests its last objectives failed, with the settings called ``tol`` and ``gap_decay``
    (one wording for the warning and the command line's flags)."""
    out = []
    for res in results:
        if res.status != "max_iter" or not res.history:
            continue
        last = res.history[-1]
        why = f"relative duality gap {last['rel_gap']:.3g} > {tol} {cfg.tol:g}"
        if cfg.gap_decay is not None:
            why += f" and gap {last['gap']:.3g} > {gap_decay} {cfg.gap_decay:g} x gap_1 {res.gap_1:.3g}"
        out.append((res, why))
    return out


def warn_not_converged(results: list[ModelResult], cfg: SolverConfig, owner: str, stacklevel: int = 2) -> None:
    """A :class:`~sklearn.exceptions.ConvergenceWarning` per model that hit ``max_iter``.

    Called by the public entry points themselves, so that ``stacklevel=2`` names
    the user's line (a warning raised deep in the driver would name a library line).
    """
    for res, why in not_converged(results, cfg):
        from sklearn.exceptions import ConvergenceWarning  # here: importing scikit-learn takes a second

        warnings.warn(f"{owner} did not converge after {res.n_iter} epochs (C={res.C:g}); "
                      f"{why}. Increase max_iter or loosen tol.", ConvergenceWarning, stacklevel=stacklevel + 1)
