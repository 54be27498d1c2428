"""The interface every compute backend implements, and the block of rows they consume.

The training driver (:mod:`streamwww.engine.driver`) only talks to a :class:`Backend`;
:mod:`streamwww.backends.select` picks one.  Arrays a backend
returns from ``allocate_W``/``put_*`` are opaque to the driver (NumPy arrays on
the CPU, device arrays on a GPU) and come back to the host only through
``to_host``/``get_beta``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import scipy.sparse as sp

from streamwww import _buffers as buffers
from streamwww.backends import _kernels as K
from streamwww.backends.rowmath import CS_NEAR

__all__ = ["Block", "Backend", "kernel_array", "make_block", "model_splits", "ordered_row_sums", "row_range"]


@dataclass
class Block:
    """One shard of training rows as a backend consumes it.

    Attributes
    ----------
    X : scipy.sparse.csr_matrix or ndarray of shape (n, d)
        Rows, float32 or float64; CSR with sorted indices or C-contiguous dense.
    y : ndarray of shape (n,), int32
        Class indices in ``[0, k)``.
    sqnorms : ndarray of shape (n,), float64
        ``||x_i||^2 + bias**2`` (the intercept feature included).
    weights : ndarray of shape (n,), float64, or None
        Row weights ``w_i >= 0`` (the box ``[0, C w_i]``); None: all 1.
    trains : ndarray of shape (n,), int64, or None
        Cross-validation: bit ``s`` of ``trains[i]`` is set when row ``i`` is a
        training row of split ``s``; None: no splits.
    """

    X: Any
    y: np.ndarray
    sqnorms: np.ndarray
    weights: np.ndarray | None = None
    trains: np.ndarray | None = None

    @property
    def n_rows(self) -> int:
        return int(self.y.shape[0])

    @property
    def is_sparse(self) -> bool:
        return sp.issparse(self.X)


def row_range(block: Block, r0: int, r1: int) -> Block:
    """Rows ``r0:r1`` of a host ``block`` as a block of their own, sharing its arrays (CSR:
    the values and indices are views; only the row pointers are new)."""
    X = block.X
    if sp.issparse(X):
        z0, z1 = int(X.indptr[r0]), int(X.indptr[r1])
        X = sp.csr_matrix((X.data[z0:z1], X.indices[z0:z1], X.indptr[r0:r1 + 1] - z0),
                          shape=(r1 - r0, X.shape[1]), copy=False)
        X.has_sorted_indices = True
    else:
        X = X[r0:r1]

    def part(a):
        return None if a is None else a[r0:r1]

    return Block(X=X, y=block.y[r0:r1], sqnorms=block.sqnorms[r0:r1], weights=part(block.weights),
                 trains=part(block.trains))


def _dense_is_smaller(X) -> bool:
    n, d = X.shape
    csr_bytes = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes
    return n * d * X.dtype.itemsize <= csr_bytes


def kernel_array(a, dtype) -> np.ndarray:
    """``a`` as an array a kernel takes: an ndarray of ``dtype``, C-contiguous, aligned and
    writable, copied only where it is not. Numba's type of an array includes its layout and
    its aligned and read-only flags, so a read-only one (a broadcast view, an array a caller
    froze, one unpickled by Dask) would compile every kernel it reaches once more. (A block's
    rows are the exception: a user's memory-mapped ``X`` is used as it is, not copied.)"""
    return np.require(a, dtype=dtype, requirements="CAWE")


def model_splits(splits, n_models: int) -> np.ndarray:
    """Per model, the cross-validation split it trains on (int64; -1: all rows)."""
    if splits is None:
        return np.full(n_models, -1, dtype=np.int64)
    return kernel_array(splits, np.int64)


def make_block(X, y, bias: float, weights=None, trains=None, sqnorms=None) -> Block:
    """Normalize ``(X, y)`` (and optional row ``weights``, split bits ``trains``) into a
    :class:`Block` (no copy when already in shape).  ``sqnorms``: the rows' squared norms
    with ``bias`` as this function computes them, when known (dense or CSR, the same bits:
    the features are added in the same order and a zero adds nothing)."""
    if sp.issparse(X) and _dense_is_smaller(X):
        # Nearly dense rows: the dense kernel skips zeros in the same feature
        # order, so the model is bitwise the same and the pass faster (docs/benchmarks.md,
        # "Reading the core numbers"), and the array is no larger than the CSR arrays it
        # replaces.
        X = X.toarray()
    if sp.issparse(X):
        X = sp.csr_matrix(X) if not isinstance(X, sp.csr_matrix) else X
        if X.dtype not in (np.float32, np.float64):
            X = X.astype(np.float64)
        if not X.has_canonical_format:
            # indices sorted and a row's repeated entries summed, as a store's writer does:
            # every pass reads ``x_f`` as one entry (the block pass's Gram entries need it)
            X = X.copy()
            X.sum_duplicates()
        sq = sqnorms
        if sq is None:
            sq = buffers.empty(X.shape[0], np.float64)
            K.row_sqnorms_csr(X.data, X.indptr, float(bias), sq)
    else:
        X = np.asarray(X)
        if X.dtype not in (np.float32, np.float64):
            X = X.astype(np.float64)
        X = np.ascontiguousarray(X)
        sq = sqnorms
        if sq is None:
            sq = buffers.empty(X.shape[0], np.float64)
            K.row_sqnorms_dense(X, float(bias), sq)
    y = kernel_array(y, np.int32)
    if weights is not None:
        weights = kernel_array(weights, np.float64)
    if trains is not None:
        trains = kernel_array(trains, np.int64)
    return Block(X=X, y=y, sqnorms=kernel_array(sq, np.float64), weights=weights, trains=trains)


def ordered_row_sums(h: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """``h[:, lo:hi]`` summed along rows, left to right (:meth:`Backend.hinge_sums`'s order)."""
    out = np.empty(h.shape[0], dtype=np.float64)
    K.ordered_sums(h, int(lo), int(hi), out)
    return out


class Backend(Protocol):
    """Operations the driver needs; CPU and CUDA implement the same signatures."""

    name: str

    def allocate_W(self, n_models: int, n_weight_rows: int, n_classes: int) -> Any:
        """Zero-initialised weights ``W[n_models, n_weight_rows, n_classes]`` (float64)."""

    def put_W(self, W: np.ndarray) -> Any:
        """Copy host weights (e.g. from a checkpoint) to the device."""

    def copy_W(self, W: Any, out: Any = None) -> Any:
        """A copy of device weights, on the device: into ``out`` (device weights of the
        same shape that nothing uses any more) where given, else into a new array."""

    def put_block(self, block: Block) -> Any:
        """Make a shard resident on the device for the coming passes."""

    def put_beta(self, beta: np.ndarray) -> Any:
        """Copy a shard's ``beta[n_models, n, k-1]`` (float64) to the device."""

    def get_beta(self, beta: Any) -> np.ndarray:
        """Copy a shard's ``beta`` back to the host."""

    shrinks: bool
    """Whether :meth:`bcd_pass` and :meth:`hinge_sums` take ``near`` (shrinking)."""

    def bcd_pass(self, W: Any, block: Any, beta: Any, Cs: np.ndarray, models: np.ndarray,
                 order: np.ndarray, bias: float, solver: int, eps: float,
                 splits: np.ndarray | None = None, near: np.ndarray | None = None,
                 block_rows: int = 1, pin: bool = False) -> None:
        """One exact BCD pass over ``order`` for each listed model, in place: sequential
        (``block_rows == 1``), or the block pass over blocks of ``block_rows`` rows of
        ``order`` (:mod:`streamwww.backends._block_kernels`; the same bits for any thread count).

        Row ``i``'s box is ``[0, Cs[mdl] * w_i]`` with ``w_i`` the block's row weight,
        0 when ``splits[mdl] >= 0`` and the row does not train in that split; with
        ``solver == SIMPLEX`` (Crammer-Singer) the simplex ``beta_i >= 0``,
        ``1^T beta_i <= Cs[mdl] * w_i`` replaces the box.  With
        ``near`` (host ``uint8``, ``(M, n, k - 1)``; exact steps only, not Shark's) row ``i`` updates only the
        coordinates ``t`` with ``near[mdl, i, t]`` or ``beta_it != 0``
        (:mod:`streamwww.engine.shrink`); with ``pin`` too (rule 3), a row none of whose
        coordinates in play is below the row's bound or lacks its flag is skipped."""

    def hinge_sums(self, W: Any, block: Any, bias: float, models: np.ndarray,
                   splits: np.ndarray | None = None, near: np.ndarray | None = None,
                   reach: float = 0.0, loss: int = 0, cs_near: float = CS_NEAR) -> np.ndarray:
        """Per model, the block's hinge loss (``loss``: ``WW_LOSS``, the sum over the classes,
        or ``CS_LOSS``, their maximum; :mod:`streamwww.solvers`), each row weighted as in
        :meth:`bcd_pass` (float64, host); with ``near``, also fills the listed models'
        near-flags: 1 where ``1 - (s_y - s_c(t)) > -reach`` and, for ``CS_LOSS``, the term is
        at least the row's loss minus ``cs_near`` (:func:`~streamwww.backends.rowmath.near_floor`)."""

    def certify_pass(self, W_cert: Any, W: Any, block: Any, beta: Any, Cs: np.ndarray, models: np.ndarray,
                     order: np.ndarray, bias: float, solver: int, eps: float,
                     splits: np.ndarray | None = None, near: np.ndarray | None = None,
                     reach: float = 0.0, block_rows: int = 1, loss: int = 0,
                     cs_near: float = CS_NEAR, pin: bool = False) -> tuple[np.ndarray, float]:
        """The objective terms (of ``loss``, as in :meth:`hinge_sums`) of ``W_cert`` row by row (``h[len(models), n]``, host; added in
        storage order by :func:`ordered_row_sums` they are :meth:`hinge_sums`), filling
        ``near``, and :meth:`bcd_pass` of ``W`` over ``order`` (a permutation of the rows)
        with those flags (and ``pin``).  Returns ``(h, seconds)``, ``seconds`` the wall time the
        objective added to the pass (the CPU overlaps the two on two cores)."""

    def overlap_pays(self, work: int, block_rows: int = 1) -> bool:
        """Whether :meth:`certify_pass` is faster than an objective pass of its own followed
        by the training pass, for epochs of ``work`` multiply-adds (nonzeros times classes)
        and the pass of ``block_rows``."""

    def sq_frobenius(self, W: Any) -> np.ndarray:
        """``||W_m||_F^2`` per model (float64, host)."""

    def to_host(self, W: Any) -> np.ndarray:
        """Copy the weights back to the host."""

    def synchronize(self) -> None:
        """Wait for the device work queued so far (for timing; results never need it)."""

    def close(self) -> None:
        """Release the device's resources (memory pools, streams); the backend is not used after."""
