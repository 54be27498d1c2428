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
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from streamwww import _buffers as buffers
from streamwww.errors import DataFormatError
from streamwww.labels import check_n_classes, encode_labels
from streamwww.stream.folds import shard_folds, train_bits
from streamwww.weights import class_weight_vector, row_weights

if TYPE_CHECKING:
    from streamwww.backends.base import Block

__all__ = ["InMemoryData", "StoreData", "ArraySource", "StoreSource", "as_store", "store_shards"]


class InMemoryData:
    """``(X, y)`` arrays held in memory as a single shard.

    Parameters
    ----------
    X : ndarray or scipy.sparse matrix of shape (n, d)
    y : ndarray of shape (n,)
        Class indices in ``[0, n_classes)``.
    n_classes : int
    weights : ndarray of shape (n,), optional
        Row weights (:mod:`streamwww.weights`); None: all 1.
    trains : ndarray of shape (n,), int64, optional
        Cross-validation split bits (see :class:`~streamwww.backends.base.Block`).
    """

    n_shards = 1

    def __init__(self, X, y, n_classes: int, weights=None, trains=None):
        self.X = X
        self.y = np.asarray(y)
        self.weights = weights
        self.trains = trains
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
            from streamwww.backends.base import make_block

            self._block = make_block(self.X, self.y, bias, self.weights, self.trains)
            self._bias = bias
        return self._block


class StoreData:
    """A shard store as training data (each ``block_of`` reads its shards)."""

    def __init__(self, store, class_weights=None, folds: tuple[int, int] | None = None):
        self.store = store
        self.folds = folds  # cross-validation: (n_splits, seed), or None
        self.n_shards = int(store.n_shards)
        self.shard_rows = np.asarray(store.shard_rows, dtype=np.int64)
        self.n_features = int(store.n_features)
        self.n_classes = int(len(store.classes))
        self.class_weights = class_weights  # per class index, or None
        self._blocks: dict | None = None  # keep_blocks: (shard, bias) -> its prepared Block
        # spill_norms: the scratch file of the rows' norms; shard -> the norms its slot holds
        self._norms = None
        self._norms_in: dict[int, str] = {}

    @property
    def n_rows(self) -> int:
        return int(self.shard_rows.sum())

    def keep_blocks(self, keep: bool) -> None:
        """Keep each shard's prepared block once made (``False``: drop them).

        For a store that fits in memory and trains shard by shard (one shard, or
        ``mix_shards=1``): an epoch after the first then reads, copies, checks and
        prepares nothing, which on a small store is most of an epoch's time."""
        self._blocks = {} if keep else None

    def spill_norms(self, keep: bool) -> None:
        """Keep the rows' squared norms of each shard, once computed, in a scratch file
        (:class:`~streamwww.state.scratch.ShardScratch`; ``False``: close it).

        For a store whose shards are read from storage every epoch (beyond the memory
        budget): each read then takes them from the file (8 bytes a row, from the page
        cache) instead of computing them again from the rows (part of the loader thread's
        work; docs/benchmarks.md, "beta in a scratch file"). Not made where the temporary
        directory has no room for it (the norms are then computed every time)."""
        if self._norms is not None:
            self._norms.close()
            self._norms = None
        self._norms_in = {}
        if not keep:
            return
        from streamwww.state.scratch import ShardScratch

        try:
            self._norms = ShardScratch(None, self.shard_rows, 1, 1, 1)
        except OSError:
            self._norms = None

    def _known_norms(self, i: int, name: str) -> np.ndarray | None:
        """Shard ``i``'s row norms ``name`` if they were kept: with its decoded arrays (a
        store that fits), or in the norms' scratch file (:meth:`spill_norms`); else None."""
        kept = self.store.kept_array(i, name)
        if kept is not None or self._norms is None or self._norms_in.get(i) != name:
            return kept
        try:
            return self._norms.read(i, 0, buffers.empty((1, int(self.shard_rows[i]), 1), np.float64)).reshape(-1)
        except OSError:  # (a cache: computed again from the rows)
            return None

    def _keep_norms(self, i: int, name: str, sq: np.ndarray) -> None:
        """Keep shard ``i``'s row norms where :meth:`_known_norms` finds them."""
        self.store.keep_array(i, name, sq)  # (nothing unless the store keeps the shard)
        if self._norms is None or self._norms_in.get(i) == name:
            return
        try:
            self._norms.write(i, 0, sq.reshape(1, -1, 1))
        except OSError:  # (a cache: this shard's are computed at every read)
            return
        self._norms_in[i] = name  # (after the write: a reader on another loader thread sees it complete)

    def has_block(self, shards, bias: float) -> bool:
        """Is ``shards``' block kept (:meth:`keep_blocks`)?"""
        return self._blocks is not None and (tuple(int(i) for i in shards), float(bias)) in self._blocks

    def block(self, i: int, bias: float) -> Block:
        return self.block_of((i,), bias)

    def block_of(self, shards, bias: float) -> Block:
        """The rows of ``shards``, stacked in this order, as one prepared block."""
        ids = [int(i) for i in shards]
        key = (tuple(ids), float(bias))
        if self._blocks is not None and key in self._blocks:
            return self._blocks[key]
        block = self._make_block(ids, bias)
        if self._blocks is not None and len(ids) == 1:
            self._blocks[key] = block
        return block

    def _make_block(self, ids: list[int], bias: float) -> Block:
        # (the backends, Numba's kernels, load here: scoring a store's shards, store_shards, needs none)
        from streamwww.backends.base import make_block

        # (a kept shard read alone is lent, not copied: blocks are only read)
        if self.store.has_weights:
            X, y, w = self.store.read_shards(ids, weights=True, lend=True)
        else:
            (X, y), w = self.store.read_shards(ids, lend=True), None
        if self.class_weights is not None:
            cw = self.class_weights[y]
            w = cw if w is None else w * cw
        trains = None
        if self.folds is not None:
            n_splits = self.folds[0]
            trains = np.concatenate([train_bits(f, n_splits) for f in self.shard_folds(ids, y)])
        # each shard's row norms are computed once where they can be kept: with its decoded
        # arrays (a store that fits: not every epoch, or cluster round, for each new group),
        # or in a scratch file (a store read from storage every epoch)
        name = f"sqnorms:{float(bias)!r}"
        known = [self._known_norms(i, name) for i in ids]
        if all(k is not None for k in known):  # (one shard's kept ones are lent as its arrays are)
            sq = known[0] if len(known) == 1 else np.concatenate(known, out=buffers.empty(len(y), np.float64))
            return make_block(X, y, bias, w, trains, sqnorms=sq)
        block = make_block(X, y, bias, w, trains)
        for i, lo, hi in self._row_ranges(ids):
            self._keep_norms(i, name, block.sqnorms[lo:hi])
        return block

    def _row_ranges(self, ids):
        """``(shard, first row, end row)`` of each of ``ids`` in their stacked rows."""
        bounds = np.cumsum([0] + [int(self.shard_rows[i]) for i in ids])
        return zip(ids, bounds[:-1], bounds[1:])

    def shard_folds(self, ids, y) -> list[np.ndarray]:
        """The cross-validation fold of each row of shards ``ids`` (``y``: their stacked labels)."""
        n_splits, seed = self.folds
        return [shard_folds(y[a:b], i, n_splits, seed) for i, a, b in self._row_ranges(ids)]


class ArraySource:
    """Validated in-memory arrays with class indices (one shard)."""

    kind = "arrays"
    streamed = False

    def __init__(self, X, y_index, classes, weights=None, trains=None, class_weights=None):
        self.data = InMemoryData(X, y_index, n_classes=len(classes), weights=weights, trains=trains)
        self.classes = classes
        self.X, self.y = X, y_index
        self.weights, self.trains = weights, trains
        self.class_weights = class_weights  # per class index (recorded), already in ``weights``

    @classmethod
    def from_labels(cls, X, y, owner: str, class_weight=None, sample_weight=None) -> "ArraySource":
        """Validated ``X`` and labels of any type (encoded here; >= 2 classes required),
        with the rows' weights from ``class_weight`` and ``sample_weight``."""
        classes, y_index = encode_labels(y, who=owner, keep_dtype=True, min_classes=2)
        cw = class_weight_vector(class_weight, classes, np.bincount(y_index, minlength=len(classes)), owner)
        return cls(X, y_index, classes, weights=row_weights(y_index, cw, sample_weight, owner), class_weights=cw)

    def fingerprint(self) -> str:
        h = hashlib.sha256()
        parts = (self.X.data, self.X.indices, self.X.indptr) if sp.issparse(self.X) else (self.X,)
        extra = tuple(a for a in (self.weights, self.trains) if a is not None)  # none: the hash of data without them
        for a in (*parts, self.y, *extra):
            h.update(str((a.dtype.str, a.shape)).encode())
            h.update(np.ascontiguousarray(a).data)
        return "arrays:" + h.hexdigest()

    def describe(self) -> dict:
        return {"kind": self.kind, "n_rows": self.data.n_rows, "n_features": self.data.n_features}


class StoreSource:
    """A shard store, streamed shard by shard."""

    kind = "store"
    streamed = True

    def __init__(self, store, class_weight=None, owner: str = "train", folds: tuple[int, int] | None = None):
        self.store = store
        self.classes = np.asarray(store.classes)
        check_n_classes(self.classes, owner, where=str(getattr(store, "path", store)))
        counts = getattr(store, "metadata", {}).get("class_counts")
        if counts is None:  # dict weights need no counts; 'balanced' fails with a clear message
            counts = np.ones(len(self.classes)) if isinstance(class_weight, dict) or class_weight is None \
                else _no_counts(store, owner)
        self.class_weights = class_weight_vector(class_weight, self.classes, counts, owner)
        self.data = StoreData(store, self.class_weights, folds)

    @property
    def remote(self) -> bool:
        """Whether the store is on an object store (or another remote file system)."""
        where = getattr(self.store, "location", None)
        return where is not None and not where.is_local

    def fingerprint(self) -> str:
        fp = str(self.store.fingerprint)
        if self.data.folds is not None:  # the folds' seed is the run's (checked with its settings)
            fp += f":cv{self.data.folds[0]}"
        if self.class_weights is not None:  # the rows' weights are part of the problem
            fp += ":class_weight:" + hashlib.sha256(self.class_weights.tobytes()).hexdigest()[:16]
        return fp

    def describe(self) -> dict:
        where = getattr(self.store, "location", None)  # a URL stays a URL (never its options)
        path = where.url if where is not None and not where.is_local else str(Path(self.store.path).resolve())
        return {"kind": self.kind, "path": path,
                "n_rows": self.data.n_rows, "n_features": self.data.n_features}


def _no_counts(store, owner):
    raise ValueError(f"{owner}: class_weight='balanced' needs the store's class counts, which "
                     f"{getattr(store, 'path', store)} does not record; convert it again")


def as_store(obj, storage_options: dict | None = None):
    """An opened store for a path, a URL (with ``storage_options``) or a store
    object; None for anything else."""
    if isinstance(obj, (str, os.PathLike)):
        from streamwww.storage.location import located
        from streamwww.io import (
            open_store,  # io loads zarr/pyarrow: only when a path is given
        )

        return open_store(located(obj, storage_options))
    if _is_store_object(obj):
        return obj
    return None


def _is_store_object(obj) -> bool:
    return hasattr(obj, "read_shards") and hasattr(obj, "n_shards")


def store_without_y(X, y, who: str):
    """:func:`as_store` of ``X`` when ``y`` is None; None for rows; a store (or a path,
    which only a store can be) given with ``y`` is an error naming ``who``: its labels are
    its own."""
    if y is None:
        return as_store(X)
    if isinstance(X, (str, os.PathLike)) or _is_store_object(X):
        raise ValueError(f"{who}: X is a shard store ({getattr(X, 'path', X)}), which carries its own labels; "
                         "give it without y")
    return None


def store_shards(store, n_features: int, owner: str = "the model"):
    """``(X, labels)`` of each shard of ``store`` for a model of ``n_features`` features
    (a store converted with fewer features gets zero columns; more is an error naming
    ``owner``: the estimator's class, or the model file's record for the commands)."""
    d = int(n_features)
    if store.n_features > d:
        raise DataFormatError(f"{store.path}: the store has {store.n_features} features but "
                              f"{owner} was fitted with {d}")
    classes = np.asarray(store.classes)
    for i in range(store.n_shards):
        X, y = store.read_shard(i)
        if X.shape[1] < d:
            X = sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], d)) if sp.issparse(X) \
                else np.hstack([X, np.zeros((X.shape[0], d - X.shape[1]), dtype=X.dtype)])
        yield X, classes[y]
