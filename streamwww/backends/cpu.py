"""CPU backend: NumPy arrays in RAM and the Numba kernels of :mod:`._kernels` and
:mod:`._block_kernels`.

Threads (``n_threads``, numba's thread pool): several models train in parallel (one model
a thread); one model's block pass (``block_rows > 1``) spreads each block's scores, Gram
entries and update over them, with the same bits for any count; where asked for
(``STREAMWWW_FLOW_PASS=1``), one model's sequential pass runs as the flow pass
(:mod:`._flow_kernels`), its bits on any count; an objective pass of one model scores its
rows in parallel and adds them in storage order.

:meth:`CPUBackend.certify_pass` overlaps the objective pass of ``W_t`` with the
training pass from it on a second core: the kernels release the GIL, and the
pass walks its row order in chunks, each trained once the objective thread has
scored it (its near-flags decide what the chunk's rows update).  A thread and
events, not Dask: the hand-off is per chunk, a few per millisecond of work, where
a task graph's overhead would be the whole gain.  Where the overlap costs more than it
hides (:class:`_CertifyCosts`), the objective scores every row on all threads first.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

# The block pass opens three parallel regions a block, with a short serial step between them.
# GNU OpenMP's idle threads spin GOMP_SPINCOUNT times before they sleep; on a busy machine
# its default lets them fall asleep between regions, and every region then waits for them
# to wake (two threads can be slower than one).  A spin count is set where the user set
# neither it nor OMP_WAIT_POLICY (read when the OpenMP runtime loads: at the first parallel
# kernel); docs/TRAINING.md, "Threads"; docs/benchmarks.md, "Threads for one model".
if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
    os.environ["GOMP_SPINCOUNT"] = "300000"

import numba  # noqa: E402
import numpy as np  # noqa: E402

from streamwww.backends import _block_kernels as BK  # noqa: E402
from streamwww.backends import _flow_kernels as FK  # noqa: E402
from streamwww.backends import _kernels as K  # noqa: E402
from streamwww.backends.base import Block, kernel_array, make_block, model_splits, ordered_row_sums  # noqa: E402
from streamwww.backends.rowmath import CS_NEAR  # noqa: E402
from streamwww.solvers import LOSS_IDS, SIMPLEX, SOLVER_IDS, WW_LOSS  # noqa: E402
from streamwww.solvers.shark import SHARK_EPS  # noqa: E402

__all__ = ["CPUBackend", "bcd_pass"]


class CPUBackend:
    """Weights in RAM, exact kernels compiled with Numba, on ``n_threads`` threads.

    Parameters
    ----------
    n_threads : int, optional
        Threads for the parallel kernels (at most numba's ``NUMBA_NUM_THREADS``); None:
        numba's current setting.  No result depends on it.
    """

    name = "cpu"

    def __init__(self, n_threads: int | None = None):
        self.n_threads = None if n_threads is None else max(1, min(int(n_threads), numba.config.NUMBA_NUM_THREADS))
        self._certify_costs = _CertifyCosts()
        self._flow_costs = _FlowCosts()

    def threads(self) -> int:
        """The threads the parallel kernels use from this thread (set here: numba's setting
        is per calling thread)."""
        if self.n_threads is None:
            return numba.get_num_threads()
        if numba.get_num_threads() != self.n_threads:
            numba.set_num_threads(self.n_threads)
        return self.n_threads

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
                 near=None, block_rows: int = 1, pin: bool = False) -> None:
        """The backend's pass (:meth:`Backend.bcd_pass <streamwww.backends.base.Backend.bcd_pass>`).
        One model's sequential pass runs on every thread as the flow pass where it is asked
        for and may run (:meth:`_flows`; the same bits) and is faster (:class:`_FlowCosts`)."""
        self._pass(W, block, beta, Cs, models, order, bias, solver, eps, splits, near, block_rows, True, pin)

    def _pass(self, W, block: Block, beta, Cs, models, order, bias, solver, eps, splits, near, block_rows,
              flow: bool, pin: bool = False) -> None:
        """:meth:`bcd_pass`; ``flow=False`` keeps one model's sequential pass on this thread
        (another thread is busy: :meth:`certify_pass`)."""
        Cs, models, order = kernel_array(Cs, np.float64), kernel_array(models, np.int64), kernel_array(order, np.int64)
        args = (W, _rows(block), block.y, block.sqnorms, *_row_weights(block), beta, Cs,
                model_splits(splits, W.shape[0]), models, order, _NONE_U8 if near is None else near,
                bool(pin), float(bias), int(solver), float(eps))
        threads = self.threads()
        if int(block_rows) > 1:
            kernel = BK.block_pass if threads > 1 else BK.block_pass_serial
            kernel(*args, int(block_rows), threads, K.ktag(W.shape[2]))
            return
        if flow and models.shape[0] == 1 and self._flows(block, order, bias, W.shape[2]):
            costs = self._flow_costs
            way = costs.choose()
            t0 = time.perf_counter()
            if way:
                FK.flow_pass(*args, threads, K.ktag(W.shape[2]))
            else:
                K.bcd_pass_serial(*args, K.ktag(W.shape[2]))
            costs.measured(way, time.perf_counter() - t0, order.shape[0])
            return
        kernel = K.bcd_pass_serial if models.shape[0] == 1 or threads == 1 else K.bcd_pass
        kernel(*args, K.ktag(W.shape[2]))

    def _flows(self, block: Block, order: np.ndarray, bias: float, k: int) -> bool:
        """Whether one model's sequential pass over ``order`` may run as the flow pass
        (:mod:`._flow_kernels`: the same bits on every thread): asked for (the environment
        variable ``STREAMWWW_FLOW_PASS=1``: on the 2-core machines it was measured on, it was
        slower than one thread; docs/TRAINING.md, "Threads"), more than one thread, CSR rows,
        no intercept, a pass of at least ``FLOW_MIN_WORK`` multiply-adds (nonzeros times
        classes: below, the thread hand-offs cost what the threads gain, and a small run
        would pay the flow kernels' first compilation for nothing), and at most
        ``FLOW_SHARED`` of ``FLOW_SAMPLE`` pairs of consecutive rows sharing a feature (a
        row's thread would wait that often)."""
        if os.environ.get(FLOW_ENV, "").strip().lower() not in ("1", "true", "yes", "on"):
            return False
        if self.threads() == 1 or not block.is_sparse or float(bias) != 0.0:
            return False
        if block.X.nnz * int(k) * order.shape[0] < FLOW_MIN_WORK * max(1, block.n_rows):
            return False
        return FK.shared_pairs(_rows(block), order, FLOW_SAMPLE) <= FLOW_SHARED

    def certify_pass(self, W_cert, W, block: Block, beta, Cs, models, order, bias, solver, eps, splits=None,
                     near=None, reach=0.0, block_rows: int = 1, loss: int = WW_LOSS,
                     cs_near: float = CS_NEAR, pin: bool = False) -> tuple[np.ndarray, float]:
        """The objective terms of ``W_cert`` row by row (``h[len(models), n]``) with the
        near-flags ``near`` filled, and :meth:`bcd_pass` over ``order`` (a permutation of the
        block's rows) with those flags.  The sequential pass of one model with a second
        thread: the objective thread scores each chunk of ``order`` while the pass trains
        the one before; else the rows are scored (in parallel, with threads), then trained.
        Returns ``(h, seconds)``: ``seconds`` is the wall time the objective added."""
        models, order = kernel_array(models, np.int64), kernel_array(order, np.int64)
        h = np.zeros((models.shape[0], block.n_rows), dtype=np.float64)
        overlap = models.shape[0] == 1 and int(block_rows) == 1 and self.threads() > 1
        # (a parallel kernel from two threads at once is not safe with every Numba threading layer:
        # the objective thread runs the serial kernels)
        chunks = _chunks(block, W.shape[2]) if overlap else 1
        costs = self._certify_costs
        if chunks > 1 and not costs.overlap_pays(block.n_rows, order.shape[0]):
            chunks = 1
        cuts = np.linspace(0, order.shape[0], chunks + 1).astype(np.int64)
        # a chunk's rows are scored in storage order (each row's terms and flags are its own,
        # whatever the order): fewer of their reads miss the caches than in the visiting order;
        # one chunk is every row (order is a permutation of them)
        stored = lambda lo, hi: (np.arange(block.n_rows, dtype=np.int64) if chunks == 1  # noqa: E731
                                 else np.sort(order[lo:hi]))
        score = lambda lo, hi: self._hinge_rows(W_cert, block, bias, models, stored(lo, hi), h,  # noqa: E731
                                                splits, near, reach, loss, cs_near, parallel=chunks == 1)
        train = lambda lo, hi: self._pass(W, block, beta, Cs, models, order[lo:hi], bias, solver, eps,  # noqa: E731
                                          splits, near, block_rows, chunks == 1, pin)
        t0 = time.perf_counter()
        if chunks == 1:
            score(0, order.shape[0])
            waited = time.perf_counter() - t0
            train(0, order.shape[0])
            if overlap:
                costs.measured(False, waited, time.perf_counter() - t0 - waited, block.n_rows, order.shape[0])
            return h, waited
        scored = [threading.Event() for _ in range(chunks)]
        scoring = [0.0]

        def objective():
            try:
                for c in range(chunks):
                    t = time.perf_counter()
                    score(cuts[c], cuts[c + 1])
                    scoring[0] += time.perf_counter() - t
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
        costs.measured(True, scoring[0], time.perf_counter() - t0 - waited, block.n_rows, order.shape[0])
        return h, waited

    def overlap_pays(self, work: int, block_rows: int = 1) -> bool:
        """Whether :meth:`certify_pass` gains by overlapping: the sequential pass, a second
        thread, and epochs of at least ``work`` multiply-adds (nonzeros times classes) that
        make several chunks."""
        return int(block_rows) == 1 and self.threads() > 1 and int(work) >= MIN_CHUNKS * CHUNK_WORK

    def _hinge_rows(self, W, block: Block, bias, models, rows, h, splits, near, reach, loss, cs_near,
                    parallel=True) -> None:
        args = (W, _rows(block), block.y, *_row_weights(block), model_splits(splits, W.shape[0]), float(bias),
                models, rows, h, _NONE_U8 if near is None else near, float(reach), float(cs_near), int(loss))
        threads = self.threads() if parallel else 1
        if threads == 1:
            K.hinge_rows_serial(*args, K.ktag(W.shape[2]))
        elif models.shape[0] >= threads:
            K.hinge_rows(*args, K.ktag(W.shape[2]))
        else:  # fewer models than threads: each model's rows in parallel
            BK.hinge_rows_par(*args, threads, K.ktag(W.shape[2]))

    def hinge_sums(self, W, block: Block, bias, models, splits=None, near=None, reach=0.0,
                   loss: int = WW_LOSS, cs_near: float = CS_NEAR) -> np.ndarray:
        models = kernel_array(models, np.int64)
        threads = self.threads()
        if 1 < threads and models.shape[0] < threads:  # rows in parallel, added in storage order
            h = np.zeros((models.shape[0], block.n_rows), dtype=np.float64)
            self._hinge_rows(W, block, bias, models, np.arange(block.n_rows, dtype=np.int64), h, splits, near,
                             reach, loss, cs_near)
            return ordered_row_sums(h, 0, block.n_rows)
        out = np.zeros(models.shape[0], dtype=np.float64)
        kernel = K.hinge_sum_serial if models.shape[0] == 1 or threads == 1 else K.hinge_sum
        kernel(W, _rows(block), block.y, *_row_weights(block), model_splits(splits, W.shape[0]),
               float(bias), models, out, _NONE_U8 if near is None else near, float(reach), float(cs_near),
               int(loss), K.ktag(W.shape[2]))
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


# The flow pass for one model's sequential pass (CPUBackend._flows): where the environment
# variable asks for it, passes of at least this many multiply-adds, and at most this share of
# the sampled pairs of consecutive rows sharing a feature (docs/TRAINING.md, "Threads").
FLOW_ENV = "STREAMWWW_FLOW_PASS"
FLOW_MIN_WORK = 1 << 26
FLOW_SAMPLE = 256
FLOW_SHARED = 0.25

# certify_pass's chunks: about this many multiply-adds of the gather each, and
# at most MAX_CHUNKS; a smaller block is scored, then trained (no hand-off would pay;
# docs/TRAINING.md, "Objectives one epoch late").
CHUNK_WORK = 400_000
MAX_CHUNKS = 32
MIN_CHUNKS = 4  # fewer: the hand-offs and copies cost what the overlap gains


class _CertifyCosts:
    """What :meth:`CPUBackend.certify_pass` measured, to choose between its two ways.

    Overlapped, the pass waits for an objective thread that scores each chunk's rows on one
    core, scattered over the block, so the pair costs about ``max(S_r, P)``; else the
    objective scores the rows on every thread, in storage order, then the pass runs:
    ``S_p + P``.  An objective pass scores every row whatever shrinking leaves, so ``S_r``
    and ``S_p`` hold through a run, while ``P`` falls as shrinking skips rows: early in a
    run, or with heavy rows, the overlap pays; late, on large sparse data, it can cost more
    than it hides (its scattered reads miss the caches).  The first call overlaps, the
    second does not, then each call takes the way its latest costs predict faster.  Costs
    are kept per row (the blocks of a streamed run differ in size).  Both ways compute the
    same terms, flags and pass: the choice changes the time, never a bit.
    """

    def __init__(self):
        self.scattered = self.parallel = self.per_pass_row = None

    def overlap_pays(self, n_rows: int, n_order: int) -> bool:
        if self.scattered is None:
            return True
        if self.parallel is None:
            return False
        return self.scattered * n_rows < (self.parallel * n_rows + self.per_pass_row * n_order)

    def measured(self, overlapped: bool, scoring: float, training: float, n_rows: int, n_order: int) -> None:
        """A call's seconds: the objective's (one way or the other) and the pass's."""
        if overlapped:
            self.scattered = scoring / max(1, n_rows)
        else:
            self.parallel = scoring / max(1, n_rows)
        self.per_pass_row = training / max(1, n_order)


class _FlowCosts:
    """Which way one model's sequential pass runs (:meth:`CPUBackend.bcd_pass`): as the flow
    pass on every thread or on one thread.  Both give the same bits; which is faster depends
    on the machine as much as on the data (on a machine whose memory serves a second thread's
    misses no faster, the flow pass's own work is not repaid).  The first call runs the flow
    pass, the second the one-thread pass; then each call takes the way with the lower
    seconds per row, and every ``PROBE``-th call the other way, to follow a run whose passes
    change (shrinking skips more rows as it goes).  The choice changes the time, never a bit.
    """

    PROBE = 16

    def __init__(self):
        self.per_row = [None, None]  # one thread, flow
        self.calls = 0

    def choose(self) -> bool:
        one, flow = self.per_row
        if flow is None:
            return True
        if one is None:
            return False
        faster = flow < one
        self.calls += 1
        return (not faster) if self.calls % self.PROBE == 0 else faster

    def measured(self, flow: bool, seconds: float, n_rows: int) -> None:
        self.per_row[int(flow)] = seconds / max(1, n_rows)


def _chunks(block: Block, k: int) -> int:
    nnz = block.X.nnz if block.is_sparse else block.X.size
    return int(min(MAX_CHUNKS, max(1, (int(nnz) * int(k)) // CHUNK_WORK)))


def _row_weights(block: Block) -> tuple[np.ndarray, np.ndarray]:
    """The kernels' ``(weights, trains)``: empty arrays stand for "all 1" and "no splits"."""
    return (_NONE_F if block.weights is None else block.weights,
            _NONE_I if block.trains is None else block.trains)


def _rows(block: Block):
    """The kernels' view of a block's rows: the dense array, or a CSR ``(data, indices, indptr)``."""
    X = block.X
    return (X.data, X.indices, X.indptr) if block.is_sparse else X


def bcd_pass(W, X, y, beta, C, order, *, bias: float = 0.0, subproblem: str = "walrus",
             shark_eps: float = SHARK_EPS, sqnorms=None, block_rows: int = 1, loss: str = "ww") -> None:
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
    block_rows : int, default=1
        1: the sequential pass; ``m > 1``: the block pass over blocks of ``m`` rows of
        ``order`` (:mod:`streamwww.backends._block_kernels`), on numba's threads, the same
        bits for any thread count.
    loss : {'ww', 'cs'}, default='ww'
        Weston-Watkins (``beta_i`` in the box ``[0, C]``), or Crammer-Singer (``beta_i >= 0``,
        ``1^T beta_i <= C``; its exact simplex step, whatever ``subproblem`` says).
    """
    if subproblem not in ("walrus", "shark"):
        raise ValueError(f"The 'subproblem' parameter must be 'walrus' or 'shark'. Got {subproblem!r} instead.")
    if loss not in LOSS_IDS:
        raise ValueError(f"The 'loss' parameter must be 'ww' or 'cs'. Got {loss!r} instead.")
    single = W.ndim == 2
    W3 = W[None] if single else W
    B3 = beta[None] if single else beta
    for name, arr in (("W", W3), ("beta", B3)):
        if arr.dtype != np.float64 or not arr.flags.c_contiguous:
            raise ValueError(f"{name} must be a C-contiguous float64 array.")
    block = make_block(X, y, bias, sqnorms=sqnorms)
    Cs = np.atleast_1d(np.asarray(C, dtype=np.float64))
    models = np.arange(W3.shape[0], dtype=np.int64)
    solver = SIMPLEX if loss == "cs" else SOLVER_IDS[subproblem]
    CPUBackend().bcd_pass(W3, block, B3, np.broadcast_to(Cs, (W3.shape[0],)), models,
                          np.asarray(order), bias, solver, shark_eps, block_rows=block_rows)
