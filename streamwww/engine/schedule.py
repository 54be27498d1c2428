"""When a run computes its objectives: the epochs whose exact objective pass certifies
``W_t`` (docs/TRAINING.md, "When the objectives are computed").

``eval_every=k`` and version 1 of ``"auto"`` are functions of the epoch alone
(:meth:`~streamwww.engine.config.SolverConfig.evaluates`).  Version 2 of ``"auto"``
(:data:`SCHEDULE`, new runs; a checkpoint without ``schedule`` in its config keeps
version 1) spaces the passes by the run's own progress: after an objective pass at epoch ``e`` it predicts, from the model's history
of evaluated epochs, how many epochs the stopping rule is still away at the rate the
gap has fallen so far, and skips half of them, at most ``2 isqrt(e)`` (four times
version 1's spacing).  Far from the stop the passes are sparse; near it they come
every epoch or two, so the first evaluated epoch that meets the rule is about as early
as with every epoch evaluated.  The spacing is a function of the history, which a
checkpoint holds, so a resumed run evaluates at the same epochs; a stop is decided
only on the exact gap of an evaluated epoch, as always.
"""

from __future__ import annotations

import math

import numpy as np

from streamwww.engine.config import ModelResult, SolverConfig

__all__ = ["SCHEDULE", "Schedule", "adaptive_spacing"]

SCHEDULE = 2  # the "auto" schedule's version for new runs (a checkpoint keeps its own)


def _distance(cfg: SolverConfig, entry: dict, gap_1: float | None) -> float:
    """How far (natural log) an evaluated epoch's gap is from meeting the stopping rule;
    ``inf`` without a rule that can be met, ``-inf`` at or past it."""
    d = math.inf
    if cfg.tol > 0:
        d = _log_ratio(float(entry["rel_gap"]), cfg.tol)
    if cfg.gap_decay is not None and gap_1 is not None and cfg.gap_decay * gap_1 > 0:
        d = min(d, _log_ratio(float(entry["gap"]), cfg.gap_decay * gap_1))
    return d


def _log_ratio(value: float, threshold: float) -> float:
    return math.log(value / threshold) if value > 0 else -math.inf


def _widest(e: int) -> int:
    return max(1, 2 * math.isqrt(e))


def adaptive_spacing(cfg: SolverConfig, history: list[dict], gap_1: float | None, *, fraction: float = 0.5,
                     widest=_widest) -> int:
    """Epochs from the last evaluated epoch of ``history`` to the next objective pass
    (version 2 of ``"auto"``): half the epochs the rule is predicted to be away at the
    average rate since the first evaluated epoch, between 1 and ``2 isqrt(e)``.
    (``fraction`` and ``widest(e)`` other than those: the candidates
    tools/bench_schedule.py replays.)"""
    e = int(history[-1]["epoch"])
    cap = widest(e)
    if len(history) < 2:
        return 1  # a second point for a rate
    d_first, d_last = _distance(cfg, history[0], gap_1), _distance(cfg, history[-1], gap_1)
    if d_last == math.inf:  # no rule to meet (tol=0, no gap_decay): only max_iter stops
        return cap
    if not d_last > 0:  # met (a stop decides it)
        return 1
    rate = (d_first - d_last) / (e - int(history[0]["epoch"]))
    if not rate > 0:  # no progress measured yet: as far as allowed
        return cap
    half = fraction * d_last / rate
    return cap if not half < cap else max(1, int(half))


class Schedule:
    """The evaluated epochs of one run of :func:`~streamwww.engine.driver.run_bcd`, per
    model, read from the models' histories (``results``, updated as the run goes).

    With the adaptive schedule each model has its own epochs, from its own history: a
    model trained beside others (a list of ``C``, cross-validation) is evaluated, and
    its shrinking sets made, at the epochs its single run would use, so it stays that
    run's model bitwise.  An objective pass scores the models due at its epoch."""

    def __init__(self, cfg: SolverConfig, results: list[ModelResult]):
        if cfg.schedule not in (1, 2):
            raise ValueError(f"objective schedule version {cfg.schedule!r} is not known to this streamwww (1 or 2)")
        self.cfg, self.results = cfg, results
        self.adaptive = cfg.eval_every == "auto" and cfg.schedule >= 2
        self._read: list[tuple] = [(-1, 0, 0)] * len(results)  # per model: (history length, last epoch, next)

    def due(self, epoch: int, models) -> np.ndarray:
        """The models among ``models`` whose objectives are computed after (1-based) ``epoch``."""
        models = np.asarray(models, dtype=np.int64)
        if not self.adaptive:
            return models if self.cfg.evaluates(epoch) else models[:0]
        return models[[self._evaluates(int(i), int(epoch)) for i in models]] if models.size else models

    def evaluates(self, epoch: int) -> bool:
        """Whether any running model's objectives are computed after (1-based) ``epoch``."""
        if not self.adaptive:
            return self.cfg.evaluates(epoch)
        return any(self._evaluates(i, int(epoch)) for i, r in enumerate(self.results) if r.status == "running")

    def _evaluates(self, i: int, epoch: int) -> bool:
        """Model ``i``: epoch 1, the last (``max_iter``), its last evaluated epoch, and the
        next one its spacing names (known once the evaluation before it is decided).  (The
        driver asks about the epoch just trained and the one after it, no earlier.)"""
        if epoch in (1, self.cfg.max_iter):
            return True
        r = self.results[i]
        n, last, upcoming = self._read[i]
        if n != len(r.history):
            last = int(r.history[-1]["epoch"]) if r.history else 0
            upcoming = last + adaptive_spacing(self.cfg, r.history, r.gap_1) if r.history else 1
            self._read[i] = (len(r.history), last, upcoming)
        return epoch == upcoming or epoch == last
