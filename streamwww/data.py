"""Training data as a sequence of shards, and per-shard dual variables.

The driver sees every data set, in memory or on disk, through the same small
interface (``n_shards``, ``shard_rows``, ``n_features``, ``n_classes``,
``block(i, bias)``), so fitting arrays is streaming over one in-memory shard.
"""

from __future__ import annotations

import numpy as np

from streamwww.backends.base import Block, make_block

__all__ = ["InMemoryData", "InMemoryBetas", "stack_rows", "split_rows"]


def stack_rows(arrays) -> np.ndarray:
    """Per-shard ``beta[n_models, rows, k-1]`` arrays as one, rows in order (no copy for one)."""
    return arrays[0] if len(arrays) == 1 else np.concatenate(arrays, axis=1)


def split_rows(beta: np.ndarray, rows) -> list[np.ndarray]:
    """Inverse of :func:`stack_rows`: views of ``beta`` with ``rows[j]`` rows each."""
    if len(rows) == 1:
        return [beta]
    return np.split(beta, np.cumsum(rows)[:-1], axis=1)


class InMemoryData:
    """``(X, y)`` arrays held in memory as a single shard.

    Parameters
    ----------
    X : ndarray or scipy.sparse matrix of shape (n, d)
    y : ndarray of shape (n,)
        Class indices in ``[0, n_classes)``.
    n_classes : int
    """

    n_shards = 1

    def __init__(self, X, y, n_classes: int):
        self.X = X
        self.y = np.asarray(y)
        self.n_features = int(X.shape[1])
        self.n_classes = int(n_classes)
        self.shard_rows = np.array([X.shape[0]], dtype=np.int64)
        self._block: Block | None = None
        self._bias: float | None = None

    @property
    def n_rows(self) -> int:
        return int(self.shard_rows.sum())

    def block_of(self, shards, bias: float) -> Block:
        """The block of ``shards`` (here always ``(0,)``)."""
        if len(shards) != 1:
            raise IndexError(f"in-memory data has 1 shard; got the group {tuple(shards)}")
        return self.block(shards[0], bias)

    def block(self, i: int, bias: float) -> Block:
        """The prepared shard ``i`` (computed once, then reused every epoch)."""
        if i != 0:
            raise IndexError(f"shard index {i} out of range for 1 shard")
        if self._block is None or self._bias != bias:
            self._block = make_block(self.X, self.y, bias)
            self._bias = bias
        return self._block


class InMemoryBetas:
    """Dual variables ``beta[n_models, n_rows_s, k-1]`` per shard, kept in RAM."""

    def __init__(self, n_models: int, shard_rows, n_classes: int):
        self._arrays = [np.zeros((n_models, int(n), n_classes - 1), dtype=np.float64) for n in shard_rows]

    def get(self, i: int) -> np.ndarray:
        return self._arrays[i]

    def put(self, i: int, beta: np.ndarray) -> None:
        self._arrays[i] = beta

    def put_group(self, items) -> None:
        """``put`` each ``(shard, beta)`` of ``items``."""
        for i, beta in items:
            self.put(i, beta)

    def sums(self, i: int, models: np.ndarray) -> np.ndarray:
        """``sum(beta)`` of shard ``i`` for each listed model."""
        return self._arrays[i].sum(axis=(1, 2))[models]  # no copy of beta
