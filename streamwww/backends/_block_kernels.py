r"""The block pass: one model's exact BCD pass on several threads, the same bits for any count.

The sequential pass (:func:`streamwww.backends._kernels.bcd_pass`) visits rows one after
another: each row's scores read the ``W`` every earlier row wrote.  The block pass takes the
pass's row order in blocks of ``m`` rows ``i_1 .. i_m`` (DESIGN.md, "Parallel passes for one
model") and computes the same steps in three stages:

1. in parallel: each row's scores at the block's start, ``s0_j = W^T x_j``, and its Gram
   entries with the block's earlier rows, ``g_jl = x_j^T x_l + bias^2`` (``l < j``); for CSR
   rows the Gram entries come from the block's nonzeros listed by feature (listed in
   parallel over ranges of features, summed in stage 2), else by dotting the rows;
2. the exact scores ``s_j = s0_j + sum_{l<j} g_jl u_l`` (``u_l`` is row ``l``'s class-space
   step, only its changed classes added, ``l`` increasing), then the row's exact block step
   (Walrus, Shark, Crammer-Singer's simplex step, or Walrus on the shrunk coordinates) on
   ``s_j``, giving ``u_j``.  Row ``j`` needs only the rows ``l`` with ``g_jl != 0``: the
   threads take the rows in order, and each row waits for those (a dataflow over the
   Gram entries), so rows that share no feature step at once on different threads.  With
   an intercept every ``g_jl`` is nonzero, dense rows share every feature, and in a block
   where more than half the rows share a feature with the row before the dataflow would
   hand each row to another core for nothing: there the rows step in order on the calling
   thread, their Gram entries summed on all threads first (stage 1c);
3. in parallel over fixed ranges of ``W``'s rows: ``W[f, :] += x_jf u_j`` for every row
   ``j`` of the block in order ``j`` (each entry of ``W`` gets the sequential pass's
   additions in its order).

In exact arithmetic this is the sequential pass.  In floating point the scores are summed in
another order, so the model differs from the sequential pass's by rounding; it depends on
``m`` and the block boundaries (each call starts a block at ``order[0]``), never on the
thread count: every value is computed by one thread, by a fixed formula, and no reduction
is split between threads (no parfor reduction; stages 1 and 2 write per-row slots, stage 3
per-range entries).  Stage 3's ranges may depend on the thread count (for balance): an
entry's additions do not.  Stage 2's hand-off is atomic operations on ``int64`` slots
(:mod:`._atomics`).  A row waits only for earlier rows, which were handed out before it,
so the pass finishes however many threads run the stage's iterations (one among them).

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
    _prefetch_start,
    _prefetch_visit,
    _prefetch_w,
    _prefetch_x,
    _row_step,
    _row_step_some,
    row_scores_some,
    hold,
    row_scores,
    shrink_mode,
)
from streamwww._jit import two_builds
from streamwww.backends._atomics import fetch_add, store_release, wait_for
from streamwww.backends.rowmath import c_index, row_weight

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
            R = bounds.shape[0] - 1
            sp[0] = p  # (bounds[0] is 0 and bounds[R] is D: no walk for them)
            for r in range(1, R):
                f = bounds[r]
                while p < hi and indices[p] < f:
                    p += 1
                sp[r] = p
            sp[R] = hi
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


# Gram entries of CSR rows from the block's nonzeros listed by feature: each nonzero with the
# block's previous nonzero of the same feature (``head``, one slot a feature of ``W``: the
# stamp of the block that wrote it and its latest nonzero).  The lists are made by the
# threads over the ranges of features (stage 3's: disjoint slots), and row ``j``'s entries
# are then sums over its nonzeros of the products along the lists.  On sparse rows few
# features are shared: a nonzero costs about one insertion, where dotting row ``j`` with
# each earlier row costs ``j`` rows' nonzeros (dense rows are dotted).

CHAIN_ENTRIES = 1 << 20  # at most this many nonzeros a block listed (else: marks and dots)


def _chain_range(X, order, steps, b0, nb, r, SP, e0, head, ent, entx, stamp, adj):
    """List the block's nonzeros (the block at ``b0``, rows in order) whose feature lies in
    range ``r``: nonzero ``e = e0[j] + (its place in row j)`` gets ``ent[e] = (the block's
    previous nonzero of its feature, or -1; j)`` and ``entx[e]`` its value as float64; a
    slot of ``head`` holds ``stamp << 32 | (latest nonzero + 1)`` (earlier stamps: none).
    ``adj[j] = 1`` where row ``j`` shares a feature of the range with row ``j - 1``."""
    raise NotImplementedError  # compiled only, through the overload below


@overload(_chain_range, inline="always")
def _chain_range_impl(X, order, steps, b0, nb, r, SP, e0, head, ent, entx, stamp, adj):
    if not isinstance(X, types.BaseTuple):
        def dense(X, order, steps, b0, nb, r, SP, e0, head, ent, entx, stamp, adj):
            pass  # (never called: dense rows are dotted)
        return dense

    def csr(X, order, steps, b0, nb, r, SP, e0, head, ent, entx, stamp, adj):
        data, indices, indptr = X[0], X[1], X[2]
        for j in range(nb):
            i = order[steps[b0 + j]]
            base = e0[j] - indptr[i]
            for p in range(SP[j, r], SP[j, r + 1]):
                f = indices[p]
                e = base + p
                slot = head[f]
                q = (slot & 0xFFFFFFFF) - 1 if (slot >> 32) == stamp else -1
                ent[e, 0] = q
                if q >= 0 and ent[q, 1] == j - 1:
                    adj[j] = 1
                ent[e, 1] = j
                entx[e] = np.float64(data[p])
                head[f] = (stamp << 32) | (e + 1)
        hold((data, indices, indptr, order, steps, SP, e0, head, ent, entx, adj))
    return csr


def _widest_row(X, order):
    """The most nonzeros of a CSR row among ``order``'s; 0 for dense rows (never chained)."""
    raise NotImplementedError  # compiled only, through the overload below


@overload(_widest_row, inline="always")
def _widest_row_impl(X, order):
    if isinstance(X, types.BaseTuple):
        def csr(X, order):
            indptr = X[2]
            w = 0
            for p in range(order.shape[0]):
                i = order[p]
                w = max(w, indptr[i + 1] - indptr[i])
            hold((indptr, order))
            return w
        return csr

    def dense(X, order):
        return 0
    return dense


def _offsets(X, order, steps, b0, nb, e0):
    """``e0[j]``: where row ``j``'s nonzeros start in the block's list (CSR rows)."""
    raise NotImplementedError  # compiled only, through the overload below


@overload(_offsets, inline="always")
def _offsets_impl(X, order, steps, b0, nb, e0):
    if isinstance(X, types.BaseTuple):
        def csr(X, order, steps, b0, nb, e0):
            indptr = X[2]
            e = 0
            for j in range(nb):
                i = order[steps[b0 + j]]
                e0[j] = e
                e += indptr[i + 1] - indptr[i]
            e0[nb] = e
            hold((indptr, order, steps, e0))
        return csr

    def dense(X, order, steps, b0, nb, e0):
        pass
    return dense


@njit(cache=True, nogil=True, inline="always")
def _chained_to_previous(ADJ, nb):
    """How many of the block's rows share a feature with the row before (any thread's flag)."""
    n = 0
    for j in range(1, nb):
        for t in range(ADJ.shape[0]):
            if ADJ[t, j] != 0:
                n += 1
                break
    return n


@njit(cache=True, nogil=True, inline="always")
def _gram_chained(X, j, bias, G, ent, entx, e0):
    """``G[j, l]`` for ``l < j`` from :func:`_chain`'s lists: the products of the features
    rows ``j`` and ``l`` share, added in row ``j``'s storage order (increasing feature),
    then ``bias^2``.  :func:`_dot` adds the same products in row ``l``'s storage order (the
    same order: indices sorted) and ``+-0.0`` for the others, which leaves a sum unchanged:
    the same bits."""
    for l in range(j):
        G[j, l] = 0.0
    for e in range(e0[j], e0[j + 1]):
        x = entx[e]
        q = ent[e, 0]
        while q >= 0:
            l = ent[q, 1]
            G[j, l] += x * entx[q]
            q = ent[q, 0]
    b2 = bias * bias
    for l in range(j):
        G[j, l] = G[j, l] + b2
    hold((G, ent, entx, e0))



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


def _block_pass(W, X, y, sqnorms, weights, trains, beta, Cs, splits, models, order, near, pin, bias, solver, eps,
                block_rows, n_threads, ktag):
    """The block pass (module docstring) over the rows ``order`` of ``X`` (dense, or a CSR
    ``(data, indices, indptr)`` tuple), for each model in ``models`` in turn.

    Rows, boxes, weights, splits and shrinking (``near``, ``pin``) as in
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
    shrink = shrink_mode(near, solver, pin)
    m = max(1, block_rows)
    D = W.shape[1]
    T = max(1, n_threads)
    R = T * RANGES_PER_THREAD if T > 1 else 1  # (one thread: one range, nothing to balance)
    n_rows = order.shape[0]
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
    # the chained Gram entries' lists (CSR rows; a block's nonzeros at most CHAIN_ENTRIES)
    widest = _widest_row(X, order)
    chained = 0 < m * widest <= CHAIN_ENTRIES
    head = np.zeros(D if chained else 0, dtype=np.int64)
    ent = np.empty((m * widest if chained else 0, 2), dtype=np.int64)
    entx = np.empty(m * widest if chained else 0)
    e0 = np.empty(m + 8, dtype=np.int64)
    # CSR rows' marks when not chained, a line apart (dense rows are dotted without them)
    bufs = np.zeros((T, D + 8 if widest > 0 and not chained else 8))
    U = np.zeros((m, kp))  # (rows a line apart: stage 2 writes them from different threads)
    N = np.zeros(m, dtype=np.int64)
    # stage 2's per-thread scratch (s; v, bnew, grad; the sort's indices), a line apart
    SC = np.empty((T, kp))
    VB = np.empty((T, 3, kp))
    IDX = np.empty((T, kp), dtype=np.int64)
    done = np.zeros(m + 8, dtype=np.int64)  # done[j] == stamp: row j of this block has stepped
    ADJ = np.zeros((T, m + 8), dtype=np.int64)  # stage 1b's flags, a thread's row each
    turn = np.zeros(16, dtype=np.int64)  # the next row of the block to hand out
    stamp = np.int64(0)
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
        far = _far(bm.shape[0] * bm.shape[1])
        # (np.int64(t): prange's index is a uint64 in the parallel build, an int64 in the serial
        # one; one type compiles each callee once for both)
        for t in prange(T):
            _liveness(near, mdl, bm, Cm, weights, trains, split, sqnorms, y, shrink, km, order, play, np.int64(t),
                      T, ats[t], solver, far)
        n_live = np.int64(0)  # (not a literal: a literal argument compiles the callees once more)
        for p in range(n_rows):
            if play[p] != 0:
                steps[n_live] = p
                n_live += 1
        for b0 in range(0, n_live, m):
            nb = min(m, n_live - b0)
            stamp += 1
            # 1. scores at the block's start, Gram entries, where each row's nonzeros split
            for t in prange(T):
                _prepare(Wm, X, y, bm, near, mdl, order, steps, play, b0, nb, n_live, np.int64(t), T, bias, bounds,
                         bufs[t], S0, AT, CLS, SP, NA, G, ktag, far, sqnorms, weights, trains, shrink, chained)
            flow = False
            if chained:
                # 1b. the block's nonzeros listed by feature, each thread its ranges
                _offsets(X, order, steps, b0, nb, e0)
                for t in prange(T):
                    _chain_ranges(X, order, steps, b0, nb, np.int64(t), T, bounds, SP, e0, head, ent, entx, stamp,
                                  ADJ[t])
                flow = bias == 0.0 and T > 1 and 2 * _chained_to_previous(ADJ, nb) <= nb
            # 2. the rows' steps, each on the exact scores (the earlier rows' steps added, in
            #    order): a row steps once the rows before it that share a feature with it have
            #    (a dataflow over the block's Gram entries, the rows handed out in order), where
            #    at most half the rows share a feature with the row before; else on this
            #    thread, in order (handing each row to another core would only add the hand-off)
            turn[0] = 0
            if flow:
                for t in prange(T):
                    _steps(X, y, sqnorms, weights, trains, split, bm, Cm, order, steps, b0, nb, S0, G, NA, AT, U, CLS,
                           N, turn, done, stamp, SC[t], VB[t], IDX[t], solver, eps, k, chained, bias, ent, entx, e0)
            else:
                if chained:  # (the Gram entries first, on every thread)
                    for t in prange(T):
                        _gram_rows(X, nb, np.int64(t), T, bias, G, ent, entx, e0)
                _steps(X, y, sqnorms, weights, trains, split, bm, Cm, order, steps, b0, nb, S0, G, NA, AT, U, CLS, N,
                       turn, done, stamp, SC[0], VB[0], IDX[0], solver, eps, k, np.bool_(False), bias, ent, entx, e0)
            # 3. W += sum_j x_j u_j^T: each thread owns interleaved ranges of W's rows, rows j in order
            for t in prange(T):
                _update(Wm, X, order, steps, b0, nb, np.int64(t), T, bias, bounds, SP, U, CLS, N)


# The stages' work per thread, compiled as functions of their own (not inlined into the
# parallel loops): inside them Numba prunes the per-row and per-feature reference counts of
# the shared arrays (``hold``), which in a parallel loop's body are atomic operations on
# lines every thread writes.

@njit(cache=True, nogil=True)
def _liveness(near, mdl, bm, Cm, weights, trains, split, sqnorms, y, shrink, km, order, play, t, T, at, solver, far):
    """Stage 0 for thread ``t`` of ``T``: ``play[p]`` (:func:`_live`) for its part of ``order``
    (on ``far`` data the lines of the row ``ROWS_AHEAD`` on asked for, as the sequential pass
    does)."""
    n_rows = order.shape[0]
    hi = ((t + 1) * n_rows) // T
    ahead = hi - ROWS_AHEAD if far else 0
    for p in range((t * n_rows) // T, hi):
        if p < ahead:
            _prefetch_visit(bm, near, mdl, sqnorms, y, weights, trains, order[p + ROWS_AHEAD], shrink)
        i = order[p]
        play[p] = _live(near, mdl, i, bm, Cm * row_weight(weights, trains, split, i), sqnorms[i], shrink, km, at,
                        solver)
    hold((near, bm, weights, trains, sqnorms, y, order, play, at))


@njit(cache=True, nogil=True)
def _prepare(Wm, X, y, bm, near, mdl, order, steps, play, b0, nb, n_live, t, T, bias, bounds, buf, S0, AT, CLS, SP,
             NA, G, ktag, far, sqnorms, weights, trains, shrink, chained):
    """Stage 1 for thread ``t`` of ``T``: rows ``j = t, t + T, ...`` of the block at ``b0``.
    On ``far`` data it asks for the lines of the rows ``ROWS_AHEAD`` threads' turns on (of
    ``steps[:n_live]``, the next block's among them): where their ``X`` rows start, their
    first values, and what stage 2 reads of them (``beta_i``, ``y_i``, ``||x_i||^2``), which
    on large data would miss the caches at each row, as the sequential pass's reads do
    without its read-ahead.

    Gram entries: unless ``chained`` (stage 2 computes them then, :func:`_gram_chained`),
    row ``j`` is marked in ``buf`` and dotted with each earlier row."""
    k = Wm.shape[1] if len(ktag) == 0 else len(ktag)
    km = k - 1
    for j in range(t, nb, T):
        if far:
            q = b0 + j + ROWS_AHEAD * T
            if q < n_live:
                _prefetch_visit(bm, near, mdl, sqnorms, y, weights, trains, order[steps[q]], shrink)
                _prefetch_start(X, order[steps[q]])
            q = b0 + j + (ROWS_AHEAD // 2) * T
            if q < n_live:
                _prefetch_x(X, order[steps[q]])
        p = steps[b0 + j]
        i = order[p]
        na = play[p]
        NA[j, 0] = na
        if na < km:
            _active_coords(near[mdl, i], bm[i], AT[j], 0.0, False)  # (a row that steps: its list alone)
        if na < km and len(ktag) == 0:
            for q in range(na):
                CLS[j, q] = c_index(AT[j, q], y[i])
            row_scores_some(Wm, X, i, bias, S0[j], y[i], CLS[j], na, k)
        else:
            row_scores(Wm, X, i, bias, S0[j], k, ktag)
        _split_row(X, i, bounds, SP[j])
        if not chained and j > 0:
            _mark(X, i, buf)
            for l in range(j):
                G[j, l] = _dot(X, i, order[steps[b0 + l]], buf, bias)
            _unmark(X, i, buf)
    hold((Wm, y, bm, near, order, steps, play, bounds, buf, S0, AT, CLS, SP, NA, G, sqnorms, weights, trains))


@njit(cache=True, nogil=True)
def _steps(X, y, sqnorms, weights, trains, split, bm, Cm, order, steps, b0, nb, S0, G, NA, AT, U, CLS, N, turn, done,
           stamp, s, vb, idx, solver, eps, k, chained, bias, ent, entx, e0):
    """Stage 2 on one thread: takes the block's rows in order (``turn``), each once; row
    ``j`` waits for each earlier row ``l`` with ``G[j, l] != 0`` to have stepped
    (``done[l] == stamp``), adds their steps to its scores in order ``l``, steps, and marks
    itself done.  Every row's scores are the same sum whichever thread computes it (or
    waits), so no result depends on the threads; rows are handed out in order and wait only
    on earlier ones, so the pass ends on any number of threads, one among them."""
    km = k - 1
    v, bnew, grad, idx_ = vb[0, :km], vb[1, :km], vb[2, :km], idx[:km]
    while True:
        j = fetch_add(turn, 0, 1)
        if j >= nb:
            break
        i = order[steps[b0 + j]]
        if chained:
            _gram_chained(X, j, bias, G, ent, entx, e0)
        for c in range(k):
            s[c] = S0[j, c]
        for l in range(j):
            g = G[j, l]
            if g != 0.0:
                wait_for(done, l, stamp)
                if N[l] > 0:
                    for q in range(N[l]):
                        c = CLS[l, q]
                        s[c] += g * U[l, c]
        C = Cm * row_weight(weights, trains, split, i)
        na = NA[j, 0]
        if na < km:
            N[j] = _row_step_some(s, y[i], sqnorms[i], bm[i], C, AT[j], na, v, bnew, U[j, :k], idx_, CLS[j], solver)
        else:
            N[j] = _row_step(s, y[i], sqnorms[i], bm[i], C, solver, eps, v, bnew, U[j, :k], idx_, grad, CLS[j], k)
        store_release(done, j, stamp)
    hold((y, sqnorms, weights, trains, bm, order, steps, S0, G, NA, AT, U, CLS, N, turn, done, s, vb, idx, ent, entx,
          e0))


@njit(cache=True, nogil=True)
def _chain_ranges(X, order, steps, b0, nb, t, T, bounds, SP, e0, head, ent, entx, stamp, adj):
    """Stage 1b for thread ``t`` of ``T``: :func:`_chain_range` for its ranges, a contiguous
    run of them (``r = t R / T .. (t + 1) R / T - 1``): a row's nonzeros in the thread's
    features are then one run of the list, not pieces of a line shared with other threads.
    ``adj``: the thread's flags of the rows that share one of its features with the row
    before."""
    R = bounds.shape[0] - 1
    for j in range(nb):
        adj[j] = 0
    for r in range((t * R) // T, ((t + 1) * R) // T):
        _chain_range(X, order, steps, b0, nb, r, SP, e0, head, ent, entx, stamp, adj)
    hold((order, steps, bounds, SP, e0, head, ent, entx, adj))


@njit(cache=True, nogil=True)
def _gram_rows(X, nb, t, T, bias, G, ent, entx, e0):
    """Stage 1c for thread ``t`` of ``T`` (where stage 2 runs on one thread): the Gram
    entries (:func:`_gram_chained`) of rows ``j = t, t + T, ...`` of the block."""
    for j in range(t, nb, T):
        _gram_chained(X, j, bias, G, ent, entx, e0)
    hold((G, ent, entx, e0))


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
