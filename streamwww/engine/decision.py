"""The decision at an evaluated epoch, for the driver and the cluster's rounds alike.

From the summed hinge loss and ``beta`` of the models evaluated: the primal, the dual
and the duality gap (:mod:`streamwww.engine.objective`), one history entry per model,
the stopping rule (:meth:`~streamwww.engine.config.SolverConfig.converged`), a log
line and the user's callback, which may stop the run. What the caller does with the
weights of the models that stop is its own (the driver keeps training in place; the
cluster's driver copies the certified ``W_t``).

A history entry is ``{"epoch", "time", "wall_time", "primal", "dual", "gap",
"rel_gap"}``: ``time`` is the training time up to that epoch, ``wall_time`` the time
since the run started, both in seconds. In one process the training time is the solver
time (objective passes, commits and Numba's compiling left out); on a cluster the
driver cannot see the workers' solver time, and a round is its tasks' work, so the
training time is the rounds' wall time.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from streamwww.engine import objective
from streamwww.engine.callback import call_back
from streamwww.engine.config import ModelResult, SolverConfig

logger = logging.getLogger(__name__)

__all__ = ["Decision", "decide"]


@dataclass(frozen=True)
class Decision:
    """What an evaluation decided: ``finished``, the models (indices into the run's
    models) that met the stopping rule, and ``stop``, whether the callback asked to stop."""

    finished: frozenset
    stop: bool

    def running(self, active: np.ndarray) -> np.ndarray:
        """The models of ``active`` that go on (none where the callback stopped the run)."""
        if self.stop:
            return active[:0]
        return np.array([i for i in active if int(i) not in self.finished], dtype=np.int64)


def decide(cfg: SolverConfig, results: list[ModelResult], active: np.ndarray, *, wsq: np.ndarray,
           hinge: np.ndarray, beta_sum: np.ndarray, epoch: int, time: float, wall: float, rows_per_s: float,
           callback: Callable[[dict[str, Any]], Any] | None, W, n_features: int, to_host: Callable,
           unit: str = "epoch") -> Decision:
    """Decide at epoch ``epoch`` for the models ``active``.

    Parameters
    ----------
    cfg : SolverConfig
    results : list of ModelResult
        Every model of the run; those of ``active`` get a history entry, their first
        gap (``gap_1``) and, where the stopping rule holds, the status 'converged'.
    active : ndarray of int
        The models evaluated.
    wsq, hinge, beta_sum : ndarray
        Per model of ``active``: ``||W_m||^2``, the (weighted) hinge loss summed over
        every row, and the sum of ``beta``.
    epoch : int
        The epoch (round) whose ``W`` was evaluated.
    time, wall : float
        The history entry's ``time`` and ``wall_time`` (module docstring).
    rows_per_s : float
        The training speed of the epoch, for the log and the callback.
    callback : callable or None
        The user's callback; a truthy return value stops the run: every running model of
        ``results``, evaluated now or not, gets the status 'stopped'.
    W, n_features, to_host
        For the callback's ``weights(j)`` (:class:`~streamwww.engine.callback.CallbackWeights`).
    unit : str
        'epoch' or 'round', in the log line.

    Returns
    -------
    Decision
    """
    P = objective.primal(wsq, hinge, np.asarray(cfg.Cs, dtype=np.float64)[active])
    D = objective.dual(wsq, beta_sum)
    G = objective.gap(P, D)
    R = np.atleast_1d(objective.relative_gap(P, D))
    finished = set()
    for j, i in enumerate(active):
        res = results[i]
        if res.gap_1 is None:
            res.gap_1 = float(G[j])
        res.history.append({"epoch": epoch, "time": time, "wall_time": wall, "primal": float(P[j]),
                            "dual": float(D[j]), "gap": float(G[j]), "rel_gap": float(R[j])})
        if cfg.converged(float(G[j]), float(R[j]), res.gap_1):
            res.status = "converged"
            finished.add(int(i))
        logger.info("%s %d  C=%g  primal %.8g  dual %.8g  rel. gap %.3e  time %.3fs  %.0f rows/s",
                    unit, epoch, res.C, P[j], D[j], R[j], time, rows_per_s)
    stop = callback is not None and call_back(
        callback, {"epoch": epoch, "time": time, "models": [int(i) for i in active], "primal": P.tolist(),
                   "dual": D.tolist(), "rel_gap": R.tolist(), "rows_per_s": rows_per_s,
                   "converged": [int(i) in finished for i in active], "tol": cfg.tol, "max_iter": cfg.max_iter},
        cfg, W, active, n_features, to_host)
    if stop:
        for res in results:
            if res.status == "running":
                res.status = "stopped"
    return Decision(frozenset(finished), bool(stop))
