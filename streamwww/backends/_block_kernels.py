r"""The block pass: one model's exact BCD pass on several threads, the same bits for any count.

The sequential pass (:func:`streamwww.backends._kernels.bcd_pass`) visits rows one after
another: each row's scores read the ``W`` every earlier row wrote.  The block pass takes the
pass's row order in blocks of ``m`` rows ``i_1 .. i_m`` (DESIGN.md, "Parallel passes for one
model") and computes the same steps in three stages:

1. in parallel: each row's scores at the block's start, ``s0_j = W^T x_j``, and its Gram
   entries with the block's earlier rows, ``g_jl = x_j^T x_l + bias^2`` (``l < j``);
2. in order ``j = 1 .. m``: the exact scores ``s_j = s0_j + sum_{l<j} g_jl u_l`` (``u_l`` is
   row ``l``'s class-space step, only its changed classes added, ``l`` increasing), then
   the row's exact block step (Walrus, Shark, Crammer-Singer's simplex step, or Walrus on
   the shrunk coordinates) on ``s_j``, giving ``u_j``;
3. in parallel over fixed ranges of ``W``'s rows: ``W[f, :] += x_jf u_j`` for every row
   ``j`` of the block in order ``j`` (each entry of ``W`` gets the sequential pass's
   additions in its order).

In exact arithmetic this is the sequential pass.  In floating point the scores are summed in
another order, so the model differs from the sequential pass's by rounding; it depends on
``m`` and the block boundaries (each call starts a block at ``order[0]``), never on the
thread count: every value is computed by one thread, by a fixed formula, and no reduction
is split between threads (no parfor reduction; stage 1 writes per-row slots, stage 3 per-range
entries).  Stage 3's ranges may depend on the thread count (for balance): an entry's
additions do not.

Hand-written rather than a library's: no parallel library offers an exact, deterministic
coordinate-descent step; Numba's ``prange`` (OpenMP or TBB) gives the threads.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange, types
from numba.extending import overload

from streamwww.backends._kernels import (
    ROWS_AHEAD,
    _active_coords,
    _far,
    _far_w,
    _live,
    _n_classes,
    _objective_row,
    _prefetch_scored,
    _prefetch_w,
    _row_step,
    _row_step_some,
    row_scores_some,
    hold,
    row_scores,
)
from streamwww._jit import two_builds
from streamwww.backends.rowmath import c_index, row_weight
from streamwww.solvers import SHARK  # noqa: F401  (the solver id the kernel branches on)

__all__ = ["block_pass", "block_pass_serial", "hinge_rows_par", "RANGES_PER_THREAD"]

# Stage 3 splits W's rows into this many ranges per thread (the entries' sums do not depend
# on the split; more ranges even out features of unequal frequency).
RANGES_PER_THREAD = 8
RANGE_SAMPLE = 1 << 16  # nonzeros counted to balance the ranges


def _mark(X, i, buf):
    """CSR: ``buf[f] = x_if`` for row ``i``'s features (float64); dense rows need no mark."""
    raise NotImplementedError  # compiled only, through the overload below


def _unmark(X, i, buf):
    """Undo :func:`_mark` (only the row's entries: the buffer stays zero elsewhere)."""
    raise NotImplementedError


def _dot(X, i, l, buf, bias):
    """``x_i^T x_l + bias^2``: CSR with row ``i`` marked in ``buf``, summed over row ``l``'s
    nonzeros in storage order; dense over the features in order."""
    raise NotImplementedError


def _scatter_range(Wm, X, i, bias, u, cls, n, r, bounds, sp):
    """``Wm[f, c] += x_if * u[c]`` for row ``i``'s features in range ``r`` (rows
    ``bounds[r] <= f < bounds[r + 1]`` of ``Wm``, the intercept row ``D - 1`` among them;
    a CSR row's nonzeros there are ``sp[r]:sp[r + 1]``) and its changed classes
    ``cls[:n]``, each product rounded and then added, as the sequential scatter does."""
    raise NotImplementedError


def _split_row(X, i, bounds, sp):
    """CSR: ``sp[r]`` = the first nonzero of row ``i`` whose feature is at least
    ``bounds[r]`` (sorted indices: one walk); dense rows need none."""
    raise NotImplementedError


@overload(_mark, inline="always")
def _mark_impl(X, i, buf):
    if isinstance(X, types.BaseTuple):
        def csr(X, i, buf):
            data, indices, indptr = X[0], X[1], X[2]
            for p in range(indptr[i], indptr[i + 1]):
                buf[indices[p]] = np.float64(data[p])
            hold((buf, data, indices, indptr))
        return csr

    def dense(X, i, buf):
        hold((buf,))
    return dense


@overload(_unmark, inline="always")
def _unmark_impl(X, i, buf):
    if isinstance(X, types.BaseTuple):
        def csr(X, i, buf):
            indices, indptr = X[1], X[2]
            for p in range(indptr[i], indptr[i + 1]):
                buf[indices[p]] = 0.0
            hold((buf, indices, indptr))
        return csr

    def dense(X, i, buf):
        hold((buf,))
    return dense


@overload(_dot, inline="always")
def _dot_impl(X, i, l, buf, bias):
    if isinstance(X, types.BaseTuple):
        def csr(X, i, l, buf, bias):
            data, indices, indptr = X[0], X[1], X[2]
            acc = 0.0
            for p in range(indptr[l], indptr[l + 1]):
                acc += buf[indices[p]] * np.float64(data[p])
            hold((buf, data, indices, indptr))
            return acc + bias * bias
        return csr

    def dense(X, i, l, buf, bias):
        acc = 0.0
        for f in range(X.shape[1]):
            acc += np.float64(X[i, f]) * np.float64(X[l, f])
        hold((X,))
        return acc + bias * bias
    return dense


@njit(cache=True, nogil=True, inline="always")
def _add_classes(Wm, f, x, u, cls, n):
    for q in range(n):
        c = cls[q]
        Wm[f, c] += x * u[c]


@overload(_split_row, inline="always")
def _split_row_impl(X, i, bounds, sp):
    if isinstance(X, types.BaseTuple):
        def csr(X, i, bounds, sp):
            indices, indptr = X[1], X[2]
            p, hi = indptr[i], indptr[i + 1]
            for r in range(bounds.shape[0]):
                f = bounds[r]
                while p < hi and indices[p] < f:
                    p += 1
                sp[r] = p
            hold((indices, indptr, sp, bounds))
        return csr

    def dense(X, i, bounds, sp):
        hold((sp, bounds))
    return dense


@overload(_scatter_range, inline="always")
def _scatter_range_impl(Wm, X, i, bias, u, cls, n, r, bounds, sp):
    if isinstance(X, types.BaseTuple):
        def csr(Wm, X, i, bias, u, cls, n, r, bounds, sp):
            data, indices = X[0], X[1]
            for p in range(sp[r], sp[r + 1]):
                _add_classes(Wm, indices[p], data[p], u, cls, n)
            D = Wm.shape[0]
            if bias != 0.0 and bounds[r] <= D - 1 < bounds[r + 1]:
                _add_classes(Wm, D - 1, bias, u, cls, n)
            hold((Wm, u, cls, data, indices, sp, bounds))
        return csr

    def dense(Wm, X, i, bias, u, cls, n, r, bounds, sp):
        D = Wm.shape[0]
        f_lo, f_hi = bounds[r], bounds[r + 1]
        for f in range(f_lo, min(f_hi, X.shape[1])):
            x = X[i, f]
            if x != 0.0:
                _add_classes(Wm, f, x, u, cls, n)
        if bias != 0.0 and f_lo <= D - 1 < f_hi:
            _add_classes(Wm, D - 1, bias, u, cls, n)
        hold((Wm, u, cls, X, sp, bounds))
    return dense


def _ranges(X, D, R, bounds):
    """``bounds[0..R]``: ``R`` ranges of ``W``'s ``D`` rows with about equal nonzeros of ``X``
    each (CSR: counted on a sample of at most ``RANGE_SAMPLE`` nonzeros; dense: equal widths).
    Only the threads' shares of stage 3 depend on them, no result."""
    raise NotImplementedError


@overload(_ranges, inline="always")
def _ranges_impl(X, D, R, bounds):
    if isinstance(X, types.BaseTuple):
        def csr(X, D, R, bounds):
            indices = X[1]
            nnz = indices.shape[0]
            step = max(1, nnz // RANGE_SAMPLE)
            counts = np.zeros(D + 1, dtype=np.int64)
            for p in range(0, nnz, step):
                counts[indices[p]] += 1
            total = 0
            for f in range(D):
                total += counts[f]
            bounds[0] = 0
            r, acc = 1, 0
            for f in range(D):
                while r < R and acc * R >= r * total:
                    bounds[r] = f
                    r += 1
                acc += counts[f]
            while r < R:
                bounds[r] = D
                r += 1
            bounds[R] = D
            hold((indices, counts, bounds))
        return csr

    def dense(X, D, R, bounds):
        for r in range(R + 1):
            bounds[r] = (r * D) // R
        hold((bounds,))
    return dense


def _block_pass(W, X, y, sqnorms, weights, trains, beta, Cs, splits, models, order, near, bias, solver, eps,
                block_rows, n_threads, ktag):
    """The block pass (module docstring) over the rows ``order`` of ``X`` (dense, or a CSR
    ``(data, indices, indptr)`` tuple), for each model in ``models`` in turn.

    Rows, boxes, weights, splits and shrinking (``near``) as in
    :func:`streamwww.backends._kernels._bcd_pass`.  The rows that pass skips (held out and
    at 0, a zero row, no coordinate in play) are found first, from each row's own ``beta``
    (no other row of the pass changes it), and left out: the blocks are ``m`` consecutive
    rows of ``order`` that step.  A shrunk row scores its label's and its coordinates'
    classes only, as the sequential pass does.  ``block_rows`` is ``m``; ``n_threads`` the
    threads the stages are spread over (numba's ``get_num_threads()`` for the parallel
    build, 1 for the serial one; no result depends on it).
    """
    k = _n_classes(W, ktag)
    km = k - 1
    shrink = near.shape[1] > 0 and solver != SHARK
    m = max(1, block_rows)
    D = W.shape[1]
    T = max(1, n_threads)
    R = T * RANGES_PER_THREAD
    n_rows = order.shape[0]
    bufs = np.zeros((T, D + 8))  # CSR rows' marks, a line apart (a dense pass leaves them unused)
    # rows written by different threads in stage 1 are padded by a cache line, so that no two
    # share one (a score row accumulates in memory: a shared line would bounce between cores)
    kp = (k + 7) // 8 * 8 + 8
    S0 = np.empty((m, kp))
    AT = np.empty((m, kp), dtype=np.int64)
    CLS = np.empty((m, kp), dtype=np.int64)
    SP = np.empty((m, R + 9), dtype=np.int64)
    NA = np.empty((m, 16), dtype=np.int64)  # (column 0; rows two lines apart: written by different threads)
    G = np.empty((m, m + 8))
    bounds = np.empty(R + 1, dtype=np.int64)
    _ranges(X, D, R, bounds)
    U = np.zeros((m, k))
    N = np.zeros(m, dtype=np.int64)
    s = np.empty(k)
    v = np.empty(km)
    bnew = np.empty(km)
    grad = np.empty(km)
    idx = np.empty(km, dtype=np.int64)
    ats = np.empty((T, kp), dtype=np.int64)
    steps = np.empty(n_rows, dtype=np.int64)  # the rows of order that step, in order
    play = np.empty(n_rows, dtype=np.int64)
    for mi in range(models.shape[0]):
        mdl = models[mi]
        Wm = W[mdl]
        bm = beta[mdl]
        Cm = Cs[mdl]
        split = splits[mdl]
        # 0. which rows step (contiguous parts of order per thread)
        for t in prange(T):
            _liveness(near, mdl, bm, Cm, weights, trains, split, sqnorms, shrink, km, order, play, t, T, ats[t],
                      solver)
        n_live = 0
        for p in range(n_rows):
            if play[p] != 0:
                steps[n_live] = p
                n_live += 1
        for b0 in range(0, n_live, m):
            nb = min(m, n_live - b0)
            # 1. scores at the block's start, Gram entries, where each row's nonzeros split
            for t in prange(T):
                _prepare(Wm, X, y, bm, near, mdl, order, steps, play, b0, nb, t, T, bias, bounds, bufs[t], S0, AT,
                         CLS, SP, NA, G, ktag)
            # 2. in order: the exact scores (the earlier rows' steps added), the row's step
            for j in range(nb):
                i = order[steps[b0 + j]]
                for c in range(k):
                    s[c] = S0[j, c]
                for l in range(j):
                    g = G[j, l]
                    if N[l] > 0 and g != 0.0:
                        for q in range(N[l]):
                            c = CLS[l, q]
                            s[c] += g * U[l, c]
                C = Cm * row_weight(weights, trains, split, i)
                na = NA[j, 0]
                if na < km:
                    N[j] = _row_step_some(s, y[i], sqnorms[i], bm[i], C, AT[j], na, v, bnew, U[j], idx, CLS[j],
                                         solver)
                else:
                    N[j] = _row_step(s, y[i], sqnorms[i], bm[i], C, solver, eps, v, bnew, U[j], idx, grad, CLS[j],
                                     k)
            # 3. W += sum_j x_j u_j^T: each thread owns interleaved ranges of W's rows, rows j in order
            for t in prange(T):
                _update(Wm, X, order, steps, b0, nb, t, T, bias, bounds, SP, U, CLS, N)


# The stages' work per thread, compiled as functions of their own (not inlined into the
# parallel loops): inside them Numba prunes the per-row and per-feature reference counts of
# the shared arrays (``hold``), which in a parallel loop's body are atomic operations on
# lines every thread writes.

@njit(cache=True, nogil=True)
def _liveness(near, mdl, bm, Cm, weights, trains, split, sqnorms, shrink, km, order, play, t, T, at, solver):
    """Stage 0 for thread ``t`` of ``T``: ``play[p]`` (:func:`_live`) for its part of ``order``."""
    n_rows = order.shape[0]
    for p in range((t * n_rows) // T, ((t + 1) * n_rows) // T):
        i = order[p]
        play[p] = _live(near, mdl, i, bm, Cm * row_weight(weights, trains, split, i), sqnorms[i], shrink, km, at,
                        solver)
    hold((near, bm, weights, trains, sqnorms, order, play, at))


@njit(cache=True, nogil=True)
def _prepare(Wm, X, y, bm, near, mdl, order, steps, play, b0, nb, t, T, bias, bounds, buf, S0, AT, CLS, SP, NA, G,
             ktag):
    """Stage 1 for thread ``t`` of ``T``: rows ``j = t, t + T, ...`` of the block at ``b0``."""
    k = Wm.shape[1] if len(ktag) == 0 else len(ktag)
    km = k - 1
    for j in range(t, nb, T):
        p = steps[b0 + j]
        i = order[p]
        na = play[p]
        NA[j, 0] = na
        if na < km:
            _active_coords(near[mdl, i], bm[i], AT[j])
        if na < km and len(ktag) == 0:
            for q in range(na):
                CLS[j, q] = c_index(AT[j, q], y[i])
            row_scores_some(Wm, X, i, bias, S0[j], y[i], CLS[j], na, k)
        else:
            row_scores(Wm, X, i, bias, S0[j], k, ktag)
        _split_row(X, i, bounds, SP[j])
        if j > 0:
            _mark(X, i, buf)
            for l in range(j):
                G[j, l] = _dot(X, i, order[steps[b0 + l]], buf, bias)
            _unmark(X, i, buf)
    hold((Wm, y, bm, near, order, steps, play, bounds, buf, S0, AT, CLS, SP, NA, G))


@njit(cache=True, nogil=True)
def _update(Wm, X, order, steps, b0, nb, t, T, bias, bounds, SP, U, CLS, N):
    """Stage 3 for thread ``t`` of ``T``: its ranges ``r = t, t + T, ...`` of ``W``'s rows, the
    block's rows in order."""
    R = bounds.shape[0] - 1
    for r in range(t, R, T):
        for j in range(nb):
            if N[j] > 0:
                _scatter_range(Wm, X, order[steps[b0 + j]], bias, U[j], CLS[j], N[j], r, bounds, SP[j])
    hold((Wm, order, steps, bounds, SP, U, CLS, N))


# One source, two builds: threads for the pass's stages, and a serial build (prange acts as
# range) for one thread (no thread-pool region per block).  Both compute every value by the
# same formula, so they give the same bits.
block_pass, block_pass_serial = two_builds(_block_pass)


def _hinge_rows_par(W, X, y, weights, trains, splits, bias, models, rows, h, near, reach, cs_near, loss_id,
                    n_threads, ktag):
    """:func:`streamwww.backends._kernels._hinge_rows` with each model's rows spread over
    ``n_threads`` threads (contiguous parts of ``rows``): ``h[mi, i]`` and the near-flags of
    each row are computed by one thread, by the same formula, so the terms (and their sum in
    storage order, :func:`~streamwww.backends._kernels.ordered_sums`) are the same bits."""
    k = _n_classes(W, ktag)
    record = near.shape[1] > 0
    n = rows.shape[0]
    T = max(1, n_threads)
    kp = (k + 7) // 8 * 8 + 8
    sl = np.empty((T, kp))  # a score row per thread, a cache line apart
    far = _far_w(W, k, ktag)
    spread = _far(y.shape[0] * (k - 1))
    for mi in range(models.shape[0]):
        mdl = models[mi]
        for t in prange(T):
            s = sl[t]
            hi = ((t + 1) * n) // T
            ahead = hi - ROWS_AHEAD if spread else 0
            for q in range((t * n) // T, hi):
                i = rows[q]
                if q < ahead:
                    _prefetch_scored(X, y, weights, trains, near, mdl, h, mi, rows, q, record)
                if far and q + 1 < hi:
                    _prefetch_w(W[mdl], X, rows[q + 1], k)
                h[mi, i] = _objective_row(W[mdl], X, y, weights, trains, splits[mdl], bias, i, s, near, mdl,
                                          reach, cs_near, k, ktag, record, loss_id)[0]


hinge_rows_par = njit(cache=True, parallel=True)(_hinge_rows_par)
