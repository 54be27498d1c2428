"""Cross-validation folds for rows that arrive shard by shard: stratified, seeded, streamable.

A row's fold depends only on its shard's labels, the shard's index, the number
of folds and the seed, so a store's folds are known when a shard is read (no
pass over the labels first, nothing held per row).  Within a shard, each
class's rows (in a seeded random order) take the folds in turn from a seeded
random start: per class and shard the fold sizes differ by at most one, so a
shard is stratified on its own, and in-memory data (one shard) is stratified
exactly as :class:`sklearn.model_selection.StratifiedKFold` would be.

Split ``s`` trains on the rows whose fold is not ``s`` and is scored on the rows
whose fold is ``s``; the kernels read the training splits of a row from the
bits of :func:`train_bits` (see :func:`streamwww.backends.rowmath.row_weight`).
"""

from __future__ import annotations

import numpy as np

__all__ = ["shard_folds", "train_bits", "MAX_SPLITS"]

MAX_SPLITS = 62  # split bits live in an int64 per row


def shard_folds(y, shard: int, n_splits: int, seed: int) -> np.ndarray:
    """The fold (``0 .. n_splits-1``, int64) of each row of shard ``shard`` with class indices ``y``."""
    y = np.asarray(y)
    n = y.shape[0]
    rng = np.random.default_rng([int(seed), int(shard), 0xF01D])
    perm = rng.permutation(n)
    n_classes = int(y.max()) + 1 if n else 0
    starts = rng.integers(n_splits, size=n_classes)
    order = perm[np.argsort(y[perm], kind="stable")]  # by class; within a class, seeded order
    ys = y[order]
    first = np.searchsorted(ys, ys, side="left")  # where each row's class begins in ``order``
    rank = np.arange(n) - first
    folds = np.empty(n, dtype=np.int64)
    folds[order] = (starts[ys] + rank) % n_splits
    return folds


def train_bits(folds: np.ndarray, n_splits: int) -> np.ndarray:
    """Per row, the int64 whose bit ``s`` is set when the row trains in split ``s`` (fold != s)."""
    full = (1 << int(n_splits)) - 1
    return (full & ~np.left_shift(np.int64(1), np.asarray(folds, dtype=np.int64))).astype(np.int64)
