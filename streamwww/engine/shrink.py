"""Shrinking: the coordinates of ``beta`` an epoch's passes leave out, decided by the
objective pass before it.

Near the optimum most coordinates ``beta_it`` of the Weston-Watkins dual sit at 0
with the margin of their class ``c(t)`` well above 1: most rows have every margin
above 1 at the optimum, and with many classes a row has only a handful within reach
of the hinge.  A pass spends most of its time gathering scores (``nnz(x_i) * k``
multiply-adds per row) for coordinates whose step would leave them at 0.

The objective pass after epoch ``t`` computes every row's scores at ``W_t`` anyway.
It records, per model, row and coordinate, whether the margin of ``c(t)`` is below
``1 + REACH`` (:meth:`CPUBackend.hinge_sums` with ``near=``).  Epoch ``t + 1`` then
updates coordinate ``t`` of row ``i`` only if it was near or ``beta_it != 0``; the
row's step is the exact minimizer of its subproblem over those coordinates
with the others held at 0 (a block-coordinate step on a sub-block: the dual still
rises monotonically), and a row with none is skipped without touching ``W``.  A
left-out coordinate satisfied its KKT condition at ``W_t`` (``beta = 0``, margin
``>= 1``): one that ``W``'s later moves make violated is near at the next objective
pass and comes back in the epoch after, so only satisfied coordinates stay out,
and a fixed point is the optimum.  Nothing about the certificate changes: the
duality gap is computed over every row at every evaluation, exactly, so a stop is
decided on the true gap whatever was left out.

What decides the sets is the state at an evaluated epoch end (``W_t``), which an
epoch-end checkpoint holds; a mid-epoch checkpoint also holds ``W_t`` (as
``W_sets``, :class:`~streamwww.state.checkpoint.CheckpointDir`).  A resumed run
recomputes the sets with one pass over the data
(:func:`streamwww.engine.driver.run_bcd`) and continues bitwise, so the model does
not depend on when checkpoints are taken.  The sets wait for the next epoch in
memory (1/8 of ``beta``, ``uint8``) where ``beta`` is in memory, in an anonymous local
temporary file (no name on POSIX, so a killed run leaves none) where ``beta`` is on disk, and not at all with the late
objectives or on a cluster, which make each group's sets right before it trains.
Shrinking needs an exact step (Walrus, or Crammer-Singer's simplex step) and a backend
that implements it (the CPU's and the CUDA backend's).  The first epoch passes over every coordinate.

Crammer-Singer's coordinates of a row are coupled by ``1^T beta_i <= C``, and its rule is
sharper.  With ``m_t = s_y - s_c(t)``, the optimum has a multiplier ``lambda_i >= 0`` per row
with ``1 - m_t = lambda_i`` where ``beta_it > 0`` and ``1 - m_t <= lambda_i`` where it is 0:
``lambda_i`` is the row's hinge loss ``max(0, max_t 1 - m_t)``, and a coordinate at 0 whose
term ``1 - m_t`` lies below it is settled even with a margin below 1.  So the objective pass
keeps a coordinate at 0 only if its term is positive and at least the row's loss minus
:data:`~streamwww.backends.rowmath.CS_NEAR` (:func:`~streamwww.backends.rowmath.near_floor`),
from ``W_t`` alone as for WW (a resumed run remakes the sets bitwise).  A fixed point is
still the optimum: the term that attains the row's loss is kept, and at the optimum of the
kept coordinates its condition gives ``lambda_i >= max_t (1 - m_t)``, so every coordinate
left out satisfies its own.  The margin ``CS_NEAR`` keeps the terms close to the largest:
with the largest alone a row far from the optimum moves about one class per epoch
(docs/TRAINING.md, "Shrinking").

Rows settled at their bounds (rule 3, new runs since 0.8.0).  A row whose every coordinate
in play (flagged or off 0) sits at its upper bound ``C`` with its flag set satisfies its KKT
conditions at ``W_t``: each such coordinate's term ``1 - m_t`` is positive (the flag), so its
gradient pushes against the bound, and the others are at 0 and settled.  For WW the box
bounds coordinates one by one; for Crammer-Singer a coordinate at ``C`` is the whole of
``1^T beta_i <= C``, the one flagged coordinate attains the row's largest term (any larger
term would be flagged too), and ``lambda_i`` is that term.  The passes skip such a row as they
skip one with no coordinate in play (``pin``; :func:`~streamwww.backends._kernels._active_coords`):
near the optimum most rows with a loss are bound support vectors of this kind (letter: 7,300 of
the 10,500 rows a Crammer-Singer pass stepped), and LIBLINEAR shrinks them the same way.  The
decision reads the row's ``beta`` at its visit and the flags of ``W_t``, as rule 2 does, so a
resumed run makes it again bitwise; a fixed point is still the optimum (a row that ``W``'s
later moves unsettle loses its flag, or its place at the top, at the next objective pass).
Checkpoints of rule 2 or 1 resume with their rule.

The sets of an objective pass hold until the next one (``eval_every > 1`` or
``"auto"``; :attr:`~streamwww.engine.config.SolverConfig.sticky_sets`): epochs
without objectives leave out the same coordinates.  An epoch-end checkpoint after
such an epoch then holds ``W_sets`` too, and with the late objectives the sets that
each certificate's sweep makes are kept (:meth:`NearSets.keep`) for those epochs.
A fused cluster round makes its sets from ``W_t`` and keeps none: there an epoch
after one without objectives (an integer ``eval_every > 1``) passes over every
coordinate; with ``"auto"`` (every round evaluated) a store's rounds are pipelined
and train with the sets of the ``W`` before, which the previous round's sweep made
on another worker (:func:`streamwww.engine.cocoa.run_rounds`).
"""

from __future__ import annotations

import math
import tempfile

import numpy as np

from streamwww.backends.rowmath import CS_NEAR
from streamwww.solvers import SHARK

__all__ = ["REACH", "SHRINK_RULE", "NearSets", "near_args", "new_near", "pass_args", "pins",
           "round_shrinks", "shrinking_applies"]

# The margin, above 1, within which a coordinate at 0 stays in the next epoch.
# 0 keeps exactly the coordinates the KKT conditions at W_t do not settle.
REACH = 0.0

# The sets' rule for new runs: 3 is 2, and the passes skip the rows settled at their bounds
# (pins); 2 keeps a Crammer-Singer coordinate only near its row's largest term (CS_NEAR);
# 1, the rule of checkpoints without "shrink_rule", keeps every coordinate with a margin
# below 1 for both losses.  Rules 1 and 2 are the same for WW.
SHRINK_RULE = 3


def shrinking_applies(cfg, backend) -> bool:
    """Whether a run with these settings on ``backend`` shrinks (see the module docstring)."""
    return (bool(getattr(cfg, "shrinking", False)) and cfg.solver_id != SHARK
            and bool(getattr(backend, "shrinks", False)))


def round_shrinks(cfg, backend, t: int) -> bool:
    """Whether round ``t`` of a cluster run shrinks (:mod:`streamwww.engine.cocoa`).

    A fused round's task sweeps its rows at ``W_t`` for the certificate before its
    local passes, so it makes the sets right before it uses them, as the late
    objectives do (a pipelined round trains with those its predecessor's sweep made).  As in one process, the first epoch
    and an epoch after one without objectives (``eval_every > 1``) pass over every
    coordinate; one partition trains the sequential run's epochs bitwise with
    ``eval_every=1`` (the sequential run holds its sets across epochs without
    objectives)."""
    return shrinking_applies(cfg, backend) and int(t) > 0 and cfg.evaluates_round(int(t))


def new_near(n_models: int, n_rows: int, n_classes: int) -> np.ndarray:
    """An unfilled ``(n_models, n_rows, n_classes - 1)`` array of near-flags."""
    return np.empty((int(n_models), int(n_rows), int(n_classes) - 1), dtype=np.uint8)


def near_args(near: np.ndarray | None, cfg) -> dict:
    """The keyword arguments of ``hinge_sums`` that fill ``near`` (none without) by the
    rule of ``cfg.shrink_rule``."""
    if near is None:
        return {}
    cs_near = CS_NEAR if cfg.shrink_rule >= 2 else math.inf
    return {"near": near, "reach": REACH, "cs_near": cs_near}


def pins(cfg) -> bool:
    """Whether the passes skip the rows settled at their bounds (rule 3 on; the module docstring)."""
    return cfg.shrink_rule >= 3


def pass_args(near, cfg) -> dict:
    """The keyword arguments of ``bcd_pass`` that shrink with the sets ``near`` (none
    without) by the rule of ``cfg.shrink_rule``."""
    return {} if near is None else {"near": near, "pin": pins(cfg)}


class NearSets:
    """Per shard, the ``(n_models, rows, k - 1)`` ``uint8`` near-flags of the last
    objective pass, held until the shard's group trains in the next epoch.

    With ``spill`` (a run whose ``beta`` is on disk: the sets, 1/8 of it, would not
    stay within the memory budget either) each shard's flags go to a local
    temporary file once filled and come back when its group trains. The file is
    mapped once, each shard at a fixed place in it: a spill is a copy into the page
    cache, which the kernel may write out and evict, not a file created and deleted
    per shard and epoch on the training thread (docs/benchmarks-archive.md, "Shrinking's sets
    in one mapped file")."""

    def __init__(self, n_models: int, n_classes: int, shard_rows, spill: bool = False):
        self._shape = (int(n_models), int(n_classes) - 1)
        self._rows = np.asarray(shard_rows, dtype=np.int64)
        self._sets: dict[int, np.ndarray] = {}
        self._spilled: set[int] = set()
        self._fh = self._file = None  # the spill file, and its mapping
        if spill:
            # shard s's flags at bytes [start[s], start[s + 1]), shaped (n_models, rows, k - 1)
            self._start = np.concatenate([[0], np.cumsum(self._rows)]) * self._shape[0] * self._shape[1]
            # an anonymous file (no name on POSIX): a killed run leaves nothing behind
            self._fh = tempfile.TemporaryFile(prefix="streamwww-near-")
            self._file = np.memmap(self._fh, dtype=np.uint8, mode="w+", shape=(max(1, int(self._start[-1])),))

    def buffer(self, shard: int, keep: bool = False) -> np.ndarray:
        """The array the objective pass of ``shard`` fills (then :meth:`filled`); with
        ``keep`` (a pass over some of the models) it holds the shard's sets so far, which
        the models not scored keep."""
        shard = int(shard)
        if keep and shard in self._sets:  # in memory: filled in place, the others' flags untouched
            return self._sets[shard]
        out = new_near(self._shape[0], int(self._rows[shard]), self._shape[1] + 1)
        if keep and shard in self._spilled:
            out[...] = self._slot(shard)
        self._sets[shard] = out
        self._spilled.discard(shard)
        return out

    def filled(self, shard: int) -> None:
        """``shard``'s flags are complete: kept until its group trains (spilled to disk with ``spill``)."""
        if self._file is not None:
            self._spill(int(shard), self._sets.pop(int(shard)))

    def _spill(self, shard: int, flags: np.ndarray) -> None:
        """``flags`` copied to ``shard``'s place in the file, which now holds its sets."""
        self._slot(shard)[...] = flags
        self._spilled.add(shard)

    def _slot(self, shard: int) -> np.ndarray:
        """``shard``'s place in the spill file, shaped as its flags (a view of the file)."""
        return self._file[self._start[shard]:self._start[shard + 1]].reshape(
            self._shape[0], int(self._rows[shard]), self._shape[1])

    def _get(self, shard: int, drop: bool) -> np.ndarray | None:
        """``shard``'s flags (``None``: it has none); forgotten after with ``drop``."""
        shard = int(shard)
        if shard in self._spilled:  # a view of the file: take() copies it out
            if drop:
                self._spilled.discard(shard)
            return self._slot(shard)
        return self._sets.pop(shard, None) if drop else self._sets.get(shard)

    def take(self, group, keep: bool = False) -> np.ndarray | None:
        """The flags of ``group``'s rows (its shards' rows in group order), or ``None``
        (a full pass) when a shard of it has none; they are used up unless ``keep``."""
        parts = [self._get(s, drop=not keep) for s in group]
        if any(p is None for p in parts):
            return None
        if len(parts) > 1:
            return np.concatenate(parts, axis=1).view(np.ndarray)  # (one copy, spilled or not)
        return np.array(parts[0], subok=False) if isinstance(parts[0], np.memmap) else parts[0]

    def keep(self, group, flags: np.ndarray) -> None:
        """Hold ``flags`` (``group``'s rows in group order, as :meth:`take` returns them)
        shard by shard, in place of any earlier sets (spilled with ``spill``)."""
        lo = 0
        for s in group:
            s, n = int(s), int(self._rows[s])
            if self._file is None:
                self.buffer(s)[...] = flags[:, lo:lo + n]
            else:  # straight into the file
                self._sets.pop(s, None)
                self._spill(s, flags[:, lo:lo + n])
            lo += n

    def close(self) -> None:
        """Drop every set (and close the spill file)."""
        self._sets.clear()
        self._spilled.clear()
        self._file = None  # (no view of it escapes: the mapping closes with it)
        if self._fh is not None:
            self._fh.close()
