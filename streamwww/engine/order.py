"""The seeded orders of a run: shards per epoch, shard groups, rows per pass.

The shard order of epoch ``e`` comes from ``SeedSequence(seed, spawn_key=(1, e))``
and the row order of pass ``p`` over shard ``s`` from the key ``(seed, 2, e, s, p)``;
they depend on nothing else, so a resumed run reproduces them without saving
generator state.  Row orders have two versions, recorded in a run's settings
(``SolverConfig.row_order``): 1, NumPy's ``Generator.permutation`` of that
``SeedSequence`` (a checkpoint without ``row_order`` in its config), and 2
(:data:`ROW_ORDER`, new runs), the compiled shuffle of :mod:`streamwww.engine._shuffle`,
far cheaper per pass (docs/TRAINING.md, "The loop", row orders). A resumed run keeps
its checkpoint's version, so it ends bitwise where the uninterrupted run would have.
"""

from __future__ import annotations

import numpy as np

from streamwww.engine._shuffle import permutation

__all__ = ["shard_order", "row_order", "shard_groups", "EpochPlan", "ROW_ORDER"]

#: The row-order version new runs use (a checkpoint without one: version 1).
ROW_ORDER = 2


def _rng(seed: int, *key: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=key))


def shard_order(seed: int, epoch: int, n_shards: int) -> np.ndarray:
    """The seeded order in which epoch ``epoch`` visits the shards."""
    if n_shards == 1:  # the in-memory case: no generator made every epoch
        return np.zeros(1, dtype=np.int64)
    return _rng(seed, 1, epoch).permutation(n_shards)


def row_order(seed: int, epoch: int, shard: int, inner: int, n_rows: int, version: int) -> np.ndarray:
    """The seeded order of rows for inner pass ``inner`` over ``shard`` in ``epoch``
    (``version``: 1 or 2, see the module's docstring)."""
    if version == 2:
        return permutation((seed, 2, epoch, shard, inner), n_rows)
    if version == 1:
        return _rng(seed, 2, epoch, shard, inner).permutation(n_rows)
    raise ValueError(f"row order version {version!r} is not known to this streamwww (1 or 2)")


def shard_groups(order, mix: int) -> list[tuple[int, ...]]:
    """Consecutive groups of ``mix`` shards of an epoch's shard order: each group
    is trained as one block, its rows interleaved by :func:`row_order`."""
    order = [int(s) for s in order]
    return [tuple(order[i:i + mix]) for i in range(0, len(order), max(1, int(mix)))]


class EpochPlan:
    """The blocks (shard groups) of each epoch of a run, and what follows them.

    Parameters
    ----------
    cfg : SolverConfig
    n_shards : int
    evaluates : callable, optional
        Whether the objectives follow an epoch (default ``cfg.evaluates``; a run's
        :class:`~streamwww.engine.schedule.Schedule` with the adaptive schedule).
    """

    def __init__(self, cfg, n_shards: int, evaluates=None):
        self.cfg = cfg
        self.n_shards = int(n_shards)
        self.evaluates = evaluates if evaluates is not None else cfg.evaluates

    def groups(self, epoch: int, start: int = 0) -> list[tuple[int, ...]]:
        """The groups epoch ``epoch`` (0-based) trains from shard position ``start``
        (checkpoints fall on group boundaries, so ``start`` begins a group)."""
        order = shard_order(self.cfg.seed, epoch, self.n_shards)[start:]
        return shard_groups(order, self.cfg.mix_shards)

    def next_groups(self, epoch: int) -> list[tuple[int, ...]]:
        """What epoch ``epoch`` (0-based) trains first, if it runs."""
        return [] if epoch >= self.cfg.max_iter else self.groups(epoch)

    def after_training(self, epoch: int, late: bool = False) -> tuple[list[tuple[int, ...]], bool]:
        """What follows the training stream of epoch ``epoch`` (0-based), for
        prefetching: the evaluation pass, or the next epoch's groups; and whether
        that next stream trains (needs ``beta``). ``late``: the objectives come with
        the next epoch's training, and a pass of their own only after the last epoch."""
        if self.evaluates(epoch + 1) and not (late and epoch + 1 < self.cfg.max_iter):
            return [(s,) for s in range(self.n_shards)], False
        return self.next_groups(epoch + 1), True
