"""CPU backend: NumPy arrays in RAM and the Numba kernels of :mod:`._kernels`.

:meth:`CPUBackend.certify_pass` overlaps the objective pass of ``W_t`` with the
training pass from it on a second core: the kernels release the GIL, and the
pass walks its row order in chunks, each trained once the objective thread has
scored it (its near-flags decide what the chunk's rows update).  A thread and
events, not Dask: the hand-off is per chunk, a few per millisecond of work, where
a task graph's overhead would be the whole gain.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

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

    def copy_W(self, W: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        if out is None or out.shape != W.shape:
            return np.array(W, copy=True)
        np.copyto(out, W)
        return out

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

    def certify_pass(self, W_cert, W, block: Block, beta, Cs, models, order, bias, solver, eps, splits=None,
                     near=None, reach=0.0) -> tuple[np.ndarray, float]:
        """The objective terms of ``W_cert`` row by row (``h[len(models), n]``) with the
        near-flags ``near`` filled, and :meth:`bcd_pass` over ``order`` (a permutation of the
        block's rows) with those flags: the objective thread scores each chunk of
        ``order`` while the pass trains the one before.  Returns ``(h, seconds)``:
        ``seconds`` is the wall time the objective added (waiting for it)."""
        models = np.ascontiguousarray(models, dtype=np.int64)
        order = np.ascontiguousarray(order, dtype=np.int64)
        h = np.zeros((models.shape[0], block.n_rows), dtype=np.float64)
        # (a parallel kernel from two threads at once is not safe with every Numba threading layer)
        chunks = _chunks(block, W.shape[2]) if models.shape[0] == 1 and _cores() > 1 else 1
        cuts = np.linspace(0, order.shape[0], chunks + 1).astype(np.int64)
        score = lambda lo, hi: self._hinge_rows(W_cert, block, bias, models, order[lo:hi], h, splits, near, reach)  # noqa: E731
        train = lambda lo, hi: self.bcd_pass(W, block, beta, Cs, models, order[lo:hi], bias, solver, eps,  # noqa: E731
                                             splits, near=near)
        t0 = time.perf_counter()
        if chunks == 1:
            score(0, order.shape[0])
            waited = time.perf_counter() - t0
            train(0, order.shape[0])
            return h, waited
        scored = [threading.Event() for _ in range(chunks)]

        def objective():
            try:
                for c in range(chunks):
                    score(cuts[c], cuts[c + 1])
                    scored[c].set()
            finally:
                for e in scored:  # a failure must not leave the pass waiting
                    e.set()

        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="streamwww-objective")
        job = self._pool.submit(objective)
        waited = 0.0
        for c in range(chunks):
            t = time.perf_counter()
            scored[c].wait()
            waited += time.perf_counter() - t
            if job.done():
                job.result()  # re-raise the objective thread's failure
            train(cuts[c], cuts[c + 1])
        job.result()
        return h, waited

    def overlap_pays(self, work: int) -> bool:
        """Whether :meth:`certify_pass` gains by overlapping: a second core, and epochs of at
        least ``work`` multiply-adds (nonzeros times classes) that make several chunks."""
        return _cores() > 1 and int(work) >= MIN_CHUNKS * CHUNK_WORK

    def _hinge_rows(self, W, block: Block, bias, models, rows, h, splits, near, reach) -> None:
        kernel = K.hinge_rows_serial if models.shape[0] == 1 else K.hinge_rows
        kernel(W, _rows(block), block.y, *_row_weights(block), model_splits(splits, W.shape[0]), float(bias),
               models, rows, h, _NONE_U8 if near is None else near, float(reach), K.ktag(W.shape[2]))

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

    _pool: ThreadPoolExecutor | None = None  # certify_pass's objective thread, made at first use

    def close(self) -> None:
        """Stop :meth:`certify_pass`'s objective thread, if one was started."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


_NONE_F = np.zeros(0, dtype=np.float64)
_NONE_I = np.zeros(0, dtype=np.int64)
_NONE_U8 = np.zeros((0, 0, 0), dtype=np.uint8)


# certify_pass's chunks: about this many multiply-adds of the gather each (~0.3 ms), and
# at most MAX_CHUNKS; a smaller block is scored, then trained (no hand-off would pay).
CHUNK_WORK = 400_000
MAX_CHUNKS = 32
MIN_CHUNKS = 4  # fewer: the hand-offs and copies cost what the overlap gains (dna, satimage)


def _chunks(block: Block, k: int) -> int:
    nnz = block.X.nnz if block.is_sparse else block.X.size
    return int(min(MAX_CHUNKS, max(1, (int(nnz) * int(k)) // CHUNK_WORK)))


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


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
