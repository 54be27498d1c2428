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

from streamwww.backends import _kernels as K

__all__ = ["Block", "Backend", "make_block"]


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
    """

    X: Any
    y: np.ndarray
    sqnorms: np.ndarray

    @property
    def n_rows(self) -> int:
        return int(self.y.shape[0])

    @property
    def is_sparse(self) -> bool:
        return sp.issparse(self.X)


def _dense_is_smaller(X) -> bool:
    n, d = X.shape
    csr_bytes = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes
    return n * d * X.dtype.itemsize <= csr_bytes


def make_block(X, y, bias: float) -> Block:
    """Normalize ``(X, y)`` into a :class:`Block` (no copy when already in shape)."""
    if sp.issparse(X) and _dense_is_smaller(X):
        # Nearly dense rows: the dense kernel skips zeros in the same feature
        # order, so the model is bitwise the same, ~10% faster (satimage, letter),
        # and the array is no larger than the CSR arrays it replaces.
        X = X.toarray()
    if sp.issparse(X):
        X = sp.csr_matrix(X) if not isinstance(X, sp.csr_matrix) else X
        if X.dtype not in (np.float32, np.float64):
            X = X.astype(np.float64)
        if not X.has_sorted_indices:
            X = X.sorted_indices()
        sq = np.empty(X.shape[0], dtype=np.float64)
        K.row_sqnorms_csr(X.data, X.indptr, float(bias), sq)
    else:
        X = np.asarray(X)
        if X.dtype not in (np.float32, np.float64):
            X = X.astype(np.float64)
        X = np.ascontiguousarray(X)
        sq = np.empty(X.shape[0], dtype=np.float64)
        K.row_sqnorms_dense(X, float(bias), sq)
    y = np.ascontiguousarray(y, dtype=np.int32)
    return Block(X=X, y=y, sqnorms=sq)


class Backend(Protocol):
    """Operations the driver needs; CPU and CUDA implement the same signatures."""

    name: str

    def allocate_W(self, n_models: int, n_weight_rows: int, n_classes: int) -> Any:
        """Zero-initialised weights ``W[n_models, n_weight_rows, n_classes]`` (float64)."""

    def put_W(self, W: np.ndarray) -> Any:
        """Copy host weights (e.g. from a checkpoint) to the device."""

    def put_block(self, block: Block) -> Any:
        """Make a shard resident on the device for the coming passes."""

    def put_beta(self, beta: np.ndarray) -> Any:
        """Copy a shard's ``beta[n_models, n, k-1]`` (float64) to the device."""

    def get_beta(self, beta: Any) -> np.ndarray:
        """Copy a shard's ``beta`` back to the host."""

    def bcd_pass(self, W: Any, block: Any, beta: Any, Cs: np.ndarray, models: np.ndarray,
                 order: np.ndarray, bias: float, solver: int, eps: float) -> None:
        """One exact sequential BCD pass over ``order`` for each listed model, in place."""

    def hinge_sums(self, W: Any, block: Any, bias: float, models: np.ndarray) -> np.ndarray:
        """Per model, the summed WW hinge loss of the block's rows (float64, host)."""

    def sq_frobenius(self, W: Any) -> np.ndarray:
        """``||W_m||_F^2`` per model (float64, host)."""

    def to_host(self, W: Any) -> np.ndarray:
        """Copy the weights back to the host."""

    def synchronize(self) -> None:
        """Wait for the device work queued so far (for timing; results never need it)."""

    def close(self) -> None:
        """Release the device's resources (memory pools, streams); the backend is not used after."""
