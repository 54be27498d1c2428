"""CPU backend: NumPy arrays in RAM and the Numba kernels of :mod:`._kernels`."""

from __future__ import annotations

import numpy as np

from streamwww.backends import _kernels as K
from streamwww.backends.base import Block, make_block, model_splits
from streamwww.solvers import SOLVER_IDS
from streamwww.solvers.shark import SHARK_EPS

__all__ = ["CPUBackend", "bcd_pass"]


class CPUBackend:
    """Weights in RAM, exact sequential kernels compiled with Numba."""

    name = "cpu"

    def allocate_W(self, n_models: int, n_weight_rows: int, n_classes: int) -> np.ndarray:
        return np.zeros((n_models, n_weight_rows, n_classes), dtype=np.float64)

    def put_W(self, W: np.ndarray) -> np.ndarray:
        return np.array(W, dtype=np.float64, order="C", copy=True)

    def put_block(self, block: Block) -> Block:
        return block

    def put_beta(self, beta: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(beta, dtype=np.float64)

    def get_beta(self, beta: np.ndarray) -> np.ndarray:
        return beta

    shrinks = True

    def bcd_pass(self, W, block: Block, beta, Cs, models, order, bias, solver, eps, splits=None,
                 near=None) -> None:
        Cs = np.ascontiguousarray(Cs, dtype=np.float64)
        models = np.ascontiguousarray(models, dtype=np.int64)
        order = np.ascontiguousarray(order, dtype=np.int64)
        kernel = K.bcd_pass_serial if models.shape[0] == 1 else K.bcd_pass
        kernel(W, _rows(block), block.y, block.sqnorms, *_row_weights(block), beta, Cs,
               model_splits(splits, W.shape[0]), models, order, _NONE_U8 if near is None else near,
               float(bias), int(solver), float(eps), K.ktag(W.shape[2]))

    def hinge_sums(self, W, block: Block, bias, models, splits=None, near=None, reach=0.0) -> np.ndarray:
        models = np.ascontiguousarray(models, dtype=np.int64)
        out = np.zeros(models.shape[0], dtype=np.float64)
        kernel = K.hinge_sum_serial if models.shape[0] == 1 else K.hinge_sum
        kernel(W, _rows(block), block.y, *_row_weights(block), model_splits(splits, W.shape[0]),
               float(bias), models, out, _NONE_U8 if near is None else near, float(reach),
               K.ktag(W.shape[2]))
        return out

    def sq_frobenius(self, W) -> np.ndarray:
        return np.einsum("mdk,mdk->m", W, W)

    def to_host(self, W) -> np.ndarray:
        return np.array(W, copy=True)

    def synchronize(self) -> None:
        """Nothing queued: CPU kernels finish before they return."""

    def close(self) -> None:
        """Nothing to release: the CPU backend holds no resources."""


_NONE_F = np.zeros(0, dtype=np.float64)
_NONE_I = np.zeros(0, dtype=np.int64)
_NONE_U8 = np.zeros((0, 0, 0), dtype=np.uint8)


def _row_weights(block: Block) -> tuple[np.ndarray, np.ndarray]:
    """The kernels' ``(weights, trains)``: empty arrays stand for "all 1" and "no splits"."""
    return (_NONE_F if block.weights is None else block.weights,
            _NONE_I if block.trains is None else block.trains)


def _rows(block: Block):
    """The kernels' view of a block's rows: the dense array, or a CSR ``(data, indices, indptr)``."""
    X = block.X
    return (X.data, X.indices, X.indptr) if block.is_sparse else X


def bcd_pass(W, X, y, beta, C, order, *, bias: float = 0.0, subproblem: str = "walrus",
             shark_eps: float = SHARK_EPS, sqnorms=None) -> None:
    """One exact block-coordinate-descent pass over a block of rows, in place.

    This is the unit the streaming trainer and the GPU backend build on: it
    visits ``order`` sequentially and, for each row, solves its block
    subproblem exactly (Walrus) and updates ``W`` and ``beta``.

    Parameters
    ----------
    W : ndarray of shape (D, k) or (M, D, k), float64, C-contiguous
        Weights, one row per feature; ``D = d + 1`` when ``bias != 0`` (the last
        row holds the intercept weights).  Updated in place.
    X : ndarray or scipy.sparse matrix of shape (n, d), float32 or float64
        The block's rows.
    y : ndarray of shape (n,)
        Class indices in ``[0, k)``.
    beta : ndarray of shape (n, k - 1) or (M, n, k - 1), float64, C-contiguous
        The block's dual variables, updated in place.
    C : float or ndarray of shape (M,)
        Regularization per model.
    order : ndarray of int
        Row indices into the block, visited in this order.
    bias : float, default=0.0
        Value of the appended constant feature (0 means no intercept).
    subproblem : {'walrus', 'shark'}, default='walrus'
        Exact (Walrus) or Shark's iterative block solver.
    shark_eps : float, default=1e-4
        KKT-violation threshold of the Shark solver (margin units).
    sqnorms : ndarray of shape (n,), optional
        Precomputed ``||x_i||^2 + bias**2``.
    """
    if subproblem not in ("walrus", "shark"):
        raise ValueError(f"The 'subproblem' parameter must be 'walrus' or 'shark'. Got {subproblem!r} instead.")
    single = W.ndim == 2
    W3 = W[None] if single else W
    B3 = beta[None] if single else beta
    for name, arr in (("W", W3), ("beta", B3)):
        if arr.dtype != np.float64 or not arr.flags.c_contiguous:
            raise ValueError(f"{name} must be a C-contiguous float64 array.")
    block = make_block(X, y, bias)
    if sqnorms is not None:
        block.sqnorms = np.ascontiguousarray(sqnorms, dtype=np.float64)
    Cs = np.atleast_1d(np.asarray(C, dtype=np.float64))
    models = np.arange(W3.shape[0], dtype=np.int64)
    solver = SOLVER_IDS[subproblem]
    CPUBackend().bcd_pass(W3, block, B3, np.broadcast_to(Cs, (W3.shape[0],)), models,
                          np.asarray(order), bias, solver, shark_eps)
