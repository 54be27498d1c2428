"""Training data as a sequence of shards: in-memory arrays or a shard store.

The driver sees every data set through the same small interface (``n_shards``,
``shard_rows``, ``n_features``, ``n_classes``, ``block_of(shards, bias)``), so
fitting arrays is streaming over one in-memory shard.  A *source* adds what a
run records about its data: the classes, a fingerprint, a description.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from streamwww.backends.base import Block, make_block
from streamwww.labels import encode_labels

__all__ = ["InMemoryData", "StoreData", "ArraySource", "StoreSource", "as_store"]


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


class StoreData:
    """A shard store as training data (each ``block_of`` reads its shards)."""

    def __init__(self, store):
        self.store = store
        self.n_shards = int(store.n_shards)
        self.shard_rows = np.asarray(store.shard_rows, dtype=np.int64)
        self.n_features = int(store.n_features)
        self.n_classes = int(len(store.classes))

    @property
    def n_rows(self) -> int:
        return int(self.shard_rows.sum())

    def block(self, i: int, bias: float) -> Block:
        return self.block_of((i,), bias)

    def block_of(self, shards, bias: float) -> Block:
        """The rows of ``shards``, stacked in this order, as one prepared block."""
        X, y = self.store.read_shards([int(i) for i in shards])
        return make_block(X, y, bias)


class ArraySource:
    """Validated in-memory arrays with class indices (one shard)."""

    kind = "arrays"
    streamed = False

    def __init__(self, X, y_index, classes):
        self.data = InMemoryData(X, y_index, n_classes=len(classes))
        self.classes = classes
        self.X, self.y = X, y_index

    @classmethod
    def from_labels(cls, X, y, owner: str) -> "ArraySource":
        """Validated ``X`` and labels of any type (encoded here; >= 2 classes required)."""
        classes, y_index = encode_labels(y, who=owner, keep_dtype=True, min_classes=2)
        return cls(X, y_index, classes)

    def fingerprint(self) -> str:
        h = hashlib.sha256()
        parts = (self.X.data, self.X.indices, self.X.indptr) if sp.issparse(self.X) else (self.X,)
        for a in (*parts, self.y):
            h.update(str((a.dtype.str, a.shape)).encode())
            h.update(np.ascontiguousarray(a).data)
        return "arrays:" + h.hexdigest()

    def describe(self) -> dict:
        return {"kind": self.kind, "n_rows": self.data.n_rows, "n_features": self.data.n_features}


class StoreSource:
    """A shard store, streamed shard by shard."""

    kind = "store"
    streamed = True

    def __init__(self, store):
        self.store = store
        self.data = StoreData(store)
        self.classes = np.asarray(store.classes)

    def fingerprint(self) -> str:
        return str(self.store.fingerprint)

    def describe(self) -> dict:
        return {"kind": self.kind, "path": str(Path(self.store.path).resolve()),
                "n_rows": self.data.n_rows, "n_features": self.data.n_features}


def as_store(obj):
    """An opened store for a path or a store object; None for anything else."""
    if isinstance(obj, (str, os.PathLike)):
        from streamwww.io import (
            open_store,  # io loads zarr/pyarrow: only when a path is given
        )

        return open_store(obj)
    if hasattr(obj, "read_shards") and hasattr(obj, "n_shards"):
        return obj
    return None
