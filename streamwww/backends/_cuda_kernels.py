r"""numba-cuda kernels: exact BCD passes, hinge loss, reductions.

Imported only by :class:`streamwww.backends.cuda.CUDABackend` (never by
``import streamwww``).  Kernels are built by small factories, one compilation
per (dense/CSR, threads per block, shared capacity), and compiled lazily by
numba-cuda at their first launch for the argument types it sees (float32 or
float64 rows, int32 or int64 indices).  Every kernel also runs under Numba's
CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``): only shared memory, ``syncthreads``
and atomics are used, no warp intrinsics.

Exact pass (:func:`bcd_kernel`) — DESIGN.md §2, Algorithm 1 of Wang & Scott
(ICML 2021), 0-based: ``W[M, D, k]``, ``beta[M, n, m]`` with ``m = k - 1``.
One thread block per listed model (``blockIdx.x`` indexes ``models``) walks
the rows of ``order`` one after another, exactly as the CPU kernel does; the
``T`` threads of the block cooperate on each row:

1. scores ``s = W^T x`` — thread ``j`` owns class ``j`` (coalesced reads of a
   row of ``W``) and sums over the row's nonzeros, four independent loads in
   flight; when ``2k <= T`` the nonzeros are split among ``G = T // k`` groups
   whose partial sums are added in group order.  At the same time the block sums
   ``beta_i``;
2. ``v_t`` for all ``t`` in parallel (:func:`.rowmath.v_entry`); the
   indices of positive ``v_t`` are appended to a candidate list with a
   shared-memory atomic counter (order arbitrary);
3. the candidates are sorted by decreasing ``v``, ties by increasing index — a
   total order, so the result does not depend on the arbitrary append order.
   ``p <= T`` candidates: rank sort (each thread counts the entries before its
   own: ``O(p)`` time, one barrier).  ``p > T``: bitonic sort of the
   ``next_pow2(p)`` padded list, ``O(log^2 p)`` barriers, ``p / T``
   compare-exchanges per thread per stage;
4. Weston-Watkins (``solver=WALRUS``): thread 0 runs the Walrus event sweep
   (:func:`.rowmath.walrus_sweep`, the CPU kernel's sweep: ``O(n_u + n_m)``
   steps, usually far fewer than ``k``); the block writes ``b`` in parallel.
   Crammer-Singer (``solver=SIMPLEX``: ``b`` the minimizer over the simplex
   ``b >= 0, 1^T b <= C`` instead of the box ``[0, C]^m``): thread 0 runs the
   threshold sweep (:func:`streamwww.solvers.simplex.simplex_sweep`, ``O(r)``
   steps for the ``r`` positive entries of ``b``) and writes ``b = v - theta``
   on them (:func:`~streamwww.solvers.simplex.simplex_write`, which rescales
   ``b`` where rounding made its sum exceed ``C``) -- the CPU kernel's two
   plain functions, compiled as device functions;
5. ``Delta = b - beta_i`` in parallel; ``dk[c(t)] = -Delta_t`` and
   ``dk[y] = sum Delta`` (block reduction); ``beta_i <- b``;
6. ``W[f, :] += x_f dk`` for the row's nonzeros ``f`` (and the intercept row),
   skipping classes with ``dk[j] == 0`` and the whole update when ``beta_i`` did
   not change (as on the CPU).

A row with ``||x_i|| = 0`` cannot move ``W``: it is set to its exact block minimizer,
``beta_i = C`` (WW: the box's corner) or ``beta_i = (C, 0, ..., 0)`` (CS: a vertex of
the simplex), as on the CPU (``_kernels._zero_row``).

Results equal the CPU kernels' up to rounding (summation order, FMA contraction).

Per-class vectors (scores/``dk``, ``v``, ``b``, candidate and sorted lists) live
in shared memory when ``k`` and ``next_pow2(k - 1)`` fit the compile-time
capacity ``KC`` (default 1024 classes, about 34 KiB), otherwise in a per-model
global scratch array — the same code on both.  Shark's iterative block solver
(``solver=SHARK``, a WW baseline) runs serially in thread 0.

Objective (:func:`hinge_kernel`): one thread per row sums the row's hinge terms
``max(0, 1 - (s_y - s_j))`` over ``j != y`` (``loss_id=WW_LOSS``) or takes their
maximum (``loss_id=CS_LOSS``, the Crammer-Singer hinge).

The kernels read ``W`` and update it in place; results are exact per model
(no atomics, no cross-block communication), so several models — a grid of
``C`` values, folds — run as independent blocks of one launch and share every
read of a shard.
"""

from __future__ import annotations

import functools

from numba import cuda, float64, int32, int64

from streamwww.backends.rowmath import (
    PINS,
    c_index,
    hinge_term,
    in_play,
    near_floor,
    row_weight,
    settled,
    v_entry,
    walrus_sweep,
)
from streamwww.solvers import CS_LOSS, SHARK, SIMPLEX, WALRUS, WW_LOSS
from streamwww.solvers.shark import shark_kernel
from streamwww.solvers.simplex import simplex_sweep, simplex_write

__all__ = ["bcd_kernel", "parallel_bcd_kernel", "hinge_kernel", "sum_kernel", "fill_kernel", "next_pow2", "WALRUS",
           "SHARK", "SIMPLEX", "WW_LOSS", "CS_LOSS"]

_sweep = cuda.jit(device=True)(walrus_sweep)
_simplex_sweep = cuda.jit(device=True)(simplex_sweep)
_simplex_write = cuda.jit(device=True)(simplex_write)
_shark = cuda.jit(device=True)(shark_kernel.py_func)
_row_weight = cuda.jit(device=True)(row_weight.py_func)  # takes arrays: a device function, not @njit


def _simulated() -> bool:
    try:
        from numba.cuda.core import config
    except ImportError:  # older numba-cuda
        from numba.core import config
    return bool(config.ENABLE_CUDASIM)


def _jit_block(tpb: int):
    """``cuda.jit`` for a kernel always launched with ``tpb`` threads per block.

    The launch bound lets ptxas fit the registers to the block size (the exact
    kernels need about 250 registers per thread unbounded: one 256-thread block per
    SM).  The simulator's ``cuda.jit`` has no ``launch_bounds``.
    """
    if _simulated():
        return cuda.jit
    try:
        return cuda.jit(launch_bounds=(int(tpb),))
    except TypeError:  # numba-cuda without launch_bounds
        return cuda.jit


def next_pow2(n: int) -> int:
    """Smallest power of two ``>= max(n, 1)``."""
    return 1 << max(int(n) - 1, 0).bit_length()


@cuda.jit(device=True)
def _block_sum(red, val, tid, nthreads):
    """Sum of ``val`` over the block (tree in shared ``red``); every thread gets it.

    ``nthreads`` must be a power of two.  The caller must pass a barrier before
    writing ``red`` again.
    """
    red[tid] = val
    cuda.syncthreads()
    stride = nthreads // 2
    while stride > 0:
        if tid < stride:
            red[tid] += red[tid + stride]
        cuda.syncthreads()
        stride //= 2
    return red[0]


@cuda.jit(device=True)
def _before(v, a, b):
    """Whether entry ``a`` precedes ``b``: larger ``v`` first, then smaller index; ``-1`` pads."""
    if a < 0:
        return False
    if b < 0:
        return True
    va = v[a]
    vb = v[b]
    return va > vb or (va == vb and a < b)


@cuda.jit(device=True)
def _rank_sort(cand, out, v, p, tid):
    """``out[:p]`` = ``cand[:p]`` sorted by :func:`_before`; needs ``p <= nthreads``."""
    if tid < p:
        e = cand[tid]
        r = 0
        for u in range(p):
            if _before(v, cand[u], e):
                r += 1
        out[r] = e
    cuda.syncthreads()


@cuda.jit(device=True)
def _bitonic_sort(lst, v, p, tid, nthreads):
    """Sort ``lst[:p]`` in place by :func:`_before` (bitonic network on ``next_pow2(p)`` slots)."""
    n = 1
    while n < p:
        n *= 2
    for q in range(p + tid, n, nthreads):
        lst[q] = -1
    cuda.syncthreads()
    size = 2
    while size <= n:
        stride = size // 2
        while stride > 0:
            for a in range(tid, n // 2, nthreads):
                lo = (a // stride) * 2 * stride + a % stride
                hi = lo + stride
                x = lst[lo]
                z = lst[hi]
                if (lo & size) == 0:
                    swap = _before(v, z, x)
                else:
                    swap = _before(v, x, z)
                if swap:
                    lst[lo] = z
                    lst[hi] = x
            cuda.syncthreads()
            stride //= 2
        size *= 2


@cuda.jit(device=True)
def _exact_block(v, cand, srt, bn, ist, fst, p, C, solver, tid, nthreads):
    """Steps 3-4 for one row, by the whole block: sort the ``p >= 1`` positive
    candidates, then the exact step into ``bn`` (zeroed by the caller).  Walrus
    (``solver == WALRUS``): the sweep in thread 0, ``b`` written in parallel.  The
    simplex step (``solver == SIMPLEX``, Crammer-Singer): the sweep and the write in
    thread 0, as the CPU's :func:`~streamwww.solvers.simplex.simplex_kernel` (the
    write's rescaling needs the sum of ``b`` in sorted order).  Every thread of the
    block must call it (it synchronizes)."""
    if p <= nthreads:
        _rank_sort(cand, srt, v, p, tid)
        lst = srt
    else:
        _bitonic_sort(cand, v, p, tid, nthreads)
        lst = cand
    if solver == SIMPLEX:
        if tid == 0:
            r, theta = _simplex_sweep(v, lst, p, C)
            _simplex_write(v, lst, r, theta, C, bn)
        cuda.syncthreads()
        return
    if tid == 0:
        nu, nm, gamma, _ = _sweep(v, lst, p, C)
        ist[1] = nu
        ist[2] = nm
        fst[0] = gamma
    cuda.syncthreads()
    nu = ist[1]
    nm = ist[2]
    gamma = fst[0]
    for q in range(tid, nu + nm, nthreads):
        t = lst[q]
        if q < nu:
            bn[t] = C
        else:
            bn[t] = min(max(v[t] - gamma, 0.0), C)
    cuda.syncthreads()


@cuda.jit(device=True)
def _per_class(use_shared, sh_s, sh_v, sh_b, sh_c, sh_o, scr_f, scr_i, slot):
    """A row step's per-class vectors ``(s, v, bn, cand, srt)``: the kernel's shared arrays
    when ``k`` fits their capacity (``use_shared``), else scratch slot ``slot`` in global memory."""
    if use_shared:
        return sh_s, sh_v, sh_b, sh_c, sh_o
    return scr_f[slot, 0], scr_f[slot, 1], scr_f[slot, 2], scr_i[slot, 0], scr_i[slot, 1]


@cuda.jit(device=True)
def _row_step(s, v, bn, cand, srt, red, ist, fst, grad, brow, yi, sq, bsum, C, solver, eps, near, mdl, i, shrink,
              listed, tid, nthreads):
    """Steps 2-5 for row ``i`` of model ``mdl``, by the whole block, from its scores ``s`` and
    ``bsum = sum(beta_i)``: ``v`` and its positive candidates (with ``shrink``, those in play
    only), the step into ``bn``, ``beta_i <- b`` (``brow``), and ``u`` in ``s``:
    ``s[c(t)] = -Delta_t``, ``s[y] = sum(Delta)`` (block reduction).  ``ist[0]`` and ``ist[3]``
    must be 0 on entry; on return ``ist[3] != 0`` iff ``beta_i`` changed, and with ``listed``
    ``srt[:ist[3]]`` lists the classes whose ``u`` is not 0 (in any order).  Every thread of
    the block must call it (it synchronizes)."""
    m = brow.shape[0]
    sy = s[yi]
    for t in range(tid, m, nthreads):
        vt = v_entry(sy, s[c_index(t, yi)], sq, brow[t], bsum)
        v[t] = vt
        bn[t] = 0.0
        if vt > 0.0 and (not shrink or in_play(near[mdl, i, t], brow[t])):
            cand[cuda.atomic.add(ist, 0, 1)] = t
    cuda.syncthreads()
    p = ist[0]

    # 3-4. the block subproblem: b -> bn
    if C == 0.0:
        pass  # bn stays 0: the box is {0}
    elif solver == WALRUS or solver == SIMPLEX:
        if p > 0:
            _exact_block(v, cand, srt, bn, ist, fst, p, C, solver, tid, nthreads)
    else:
        if tid == 0:
            _shark(v[:m], brow, C, sq, eps, bn[:m], grad[:m])
        cuda.syncthreads()

    # 5. Delta = b - beta_i; u (in s): u[c(t)] = -Delta_t, u[y] = sum(Delta)
    dp = 0.0
    for t in range(tid, m, nthreads):
        d = bn[t] - brow[t]
        c = c_index(t, yi)
        if d != 0.0:
            if listed:
                srt[cuda.atomic.add(ist, 3, 1)] = c
            else:
                ist[3] = 1
        brow[t] = bn[t]
        s[c] = -d
        dp += d
    total = _block_sum(red, dp, tid, nthreads)
    if tid == 0:
        s[yi] = total
        if listed and total != 0.0:
            srt[cuda.atomic.add(ist, 3, 1)] = yi
    cuda.syncthreads()


@functools.lru_cache(maxsize=None)
def _row_access(dense: bool):
    """Device functions that read a row: its nonzero range, the feature of nonzero ``q``, and
    the two column operations of a pass (``x^T W[:, j]`` and ``W[:, j] += x * d``).

    Both column operations visit nonzeros ``start, start + step, ... < hi`` four at a
    time with independent loads (four memory requests in flight per thread: a row's
    gather is latency-bound, not bandwidth-bound).  ``base`` is the row's first
    nonzero (dense rows: the feature of ``q`` is ``q - base``).  ``axpy_col`` loads
    four entries of ``W`` before storing any: correct because a row's features are
    distinct (CSR rows are made canonical before upload).
    """
    if dense:
        @cuda.jit(device=True)
        def row_range(indptr, ncols, i):
            lo = i * ncols
            return lo, lo + ncols

        @cuda.jit(device=True)
        def feature(indices, base, q):
            return q - base
    else:
        @cuda.jit(device=True)
        def row_range(indptr, ncols, i):
            return indptr[i], indptr[i + 1]

        @cuda.jit(device=True)
        def feature(indices, base, q):
            return indices[q]

    @cuda.jit(device=True)
    def dot_col(W, mdl, data, indices, base, start, hi, step, j):
        a0 = 0.0
        a1 = 0.0
        a2 = 0.0
        a3 = 0.0
        q = start
        while q + 3 * step < hi:
            a0 += data[q] * W[mdl, feature(indices, base, q), j]
            a1 += data[q + step] * W[mdl, feature(indices, base, q + step), j]
            a2 += data[q + 2 * step] * W[mdl, feature(indices, base, q + 2 * step), j]
            a3 += data[q + 3 * step] * W[mdl, feature(indices, base, q + 3 * step), j]
            q += 4 * step
        while q < hi:
            a0 += data[q] * W[mdl, feature(indices, base, q), j]
            q += step
        return (a0 + a1) + (a2 + a3)

    @cuda.jit(device=True)
    def axpy_col(W, mdl, data, indices, base, start, hi, step, j, d):
        q = start
        while q + 3 * step < hi:
            f0 = feature(indices, base, q)
            f1 = feature(indices, base, q + step)
            f2 = feature(indices, base, q + 2 * step)
            f3 = feature(indices, base, q + 3 * step)
            w0 = W[mdl, f0, j]
            w1 = W[mdl, f1, j]
            w2 = W[mdl, f2, j]
            w3 = W[mdl, f3, j]
            W[mdl, f0, j] = w0 + data[q] * d
            W[mdl, f1, j] = w1 + data[q + step] * d
            W[mdl, f2, j] = w2 + data[q + 2 * step] * d
            W[mdl, f3, j] = w3 + data[q + 3 * step] * d
            q += 4 * step
        while q < hi:
            f0 = feature(indices, base, q)
            W[mdl, f0, j] += data[q] * d
            q += step

    return row_range, feature, dot_col, axpy_col


@functools.lru_cache(maxsize=None)
def bcd_kernel(dense: bool, tpb: int, kc: int, parallel: bool = False):
    """The pass kernel for dense or CSR rows, ``tpb`` threads, shared capacity ``kc``.

    Launch as ``kernel[(n_blocks, len(models)), tpb, stream](W, data, indices, indptr, ncols, y,
    sqnorms, weights, trains, beta, Cs, splits, models, order, bias, solver, eps, scr_f, scr_i,
    use_shared, near, shrink)``; dense rows pass ``X.ravel()`` as ``data`` and their width as ``ncols``, CSR rows
    their three arrays; ``weights``/``trains`` (empty: none) and ``splits`` as in
    :func:`.rowmath.row_weight`.
    ``scr_f[len(models) * n_blocks, 4, kk]`` / ``scr_i[len(models) * n_blocks, 2, kk]``
    (``kk >= max(k, next_pow2(k-1))``) hold the per-class vectors when ``use_shared`` is false,
    and Shark's gradient always; block ``b`` of model ``mi`` uses slot ``mi * n_blocks + b``.

    ``solver``: ``WALRUS`` (WW, the box ``[0, C w_i]``), ``SIMPLEX`` (Crammer-Singer, the
    simplex ``beta_i >= 0``, ``1^T beta_i <= C w_i``) or ``SHARK`` (WW, approximate).

    Shrinking (``shrink``: :data:`.rowmath.SETS`, or :data:`.rowmath.PINS` to skip rows
    settled at their bounds as well, as :func:`._kernels._active_coords` does; with ``WALRUS`` or ``SIMPLEX``; ``near[M, n, m]`` the near-flags of
    the last objective pass, see :mod:`streamwww.engine.shrink`): row ``i`` updates only the
    coordinates ``t`` with ``near[mdl, i, t]`` set or ``beta_it != 0``, the others held at 0 --
    they are left out of the candidate list, which is the same restricted problem
    (``b_t = clip(v_t - gamma, 0, C)``, or ``(v_t - theta)_+``, with ``b_t = 0`` where ``v_t``
    is taken as ``-inf``); a row with none is skipped.

    ``parallel=False`` is the exact sequential pass: one block per model (``n_blocks = 1``)
    visits ``order`` in turn.  ``parallel=True`` is the row-parallel (PASSCoDe-style) pass:
    block ``b`` takes the rows ``order[b], order[b + n_blocks], ...``; each row is solved
    exactly (Walrus or the simplex step) from the scores it reads, which other blocks may be
    changing at the same time, and its update is added to ``W`` with atomics, so
    ``W == W(beta)`` holds up to rounding whatever the interleaving and the duality gap stays
    a true certificate.  One
    body, two compilations (``parallel`` is a compile-time constant): the row steps exist once.
    """
    TPB = tpb
    KC = kc
    PARALLEL = parallel
    row_range, feature, dot_col, axpy_col = _row_access(dense)

    @_jit_block(tpb)
    def kernel(W, data, indices, indptr, ncols, y, sqnorms, weights, trains, beta, Cs, splits, models,
               order, bias, solver, eps, scr_f, scr_i, use_shared, near, shrink):
        tid = cuda.threadIdx.x
        blk = cuda.blockIdx.x
        nblk = cuda.gridDim.x
        mi = cuda.blockIdx.y
        mdl = models[mi]
        Cm = Cs[mdl]
        split = splits[mdl]
        k = W.shape[2]
        m = k - 1
        D = W.shape[1]
        sh_s = cuda.shared.array(KC, float64)
        sh_v = cuda.shared.array(KC, float64)
        sh_b = cuda.shared.array(KC, float64)
        sh_c = cuda.shared.array(KC, int32)
        sh_o = cuda.shared.array(KC, int32)
        part = cuda.shared.array(TPB, float64)
        red = cuda.shared.array(TPB, float64)
        ist = cuda.shared.array(4, int64)
        fst = cuda.shared.array(1, float64)
        slot = mi * nblk + blk
        s, v, bn, cand, srt = _per_class(use_shared, sh_s, sh_v, sh_b, sh_c, sh_o, scr_f, scr_i, slot)
        grad = scr_f[slot, 3]
        G = TPB // k
        if G < 2:
            G = 1

        for pp in range(blk, order.shape[0], nblk):
            i = order[pp]
            C = Cm * _row_weight(weights, trains, split, i)
            sq = sqnorms[i]
            brow = beta[mdl, i]
            if C == 0.0:
                # box {0} (zero weight, or held out): nothing to do once beta_i is 0
                bp = 0.0
                for t in range(tid, m, TPB):
                    bp += brow[t]
                at_zero = _block_sum(red, bp, tid, TPB) == 0.0
                cuda.syncthreads()
                if at_zero:
                    continue
            if sq == 0.0:
                # ||x_i|| = 0: W cannot move; the exact block minimizer is beta_i = C (WW),
                # or (C, 0, ..., 0) (Crammer-Singer; _kernels._zero_row).
                for t in range(tid, m, TPB):
                    brow[t] = C if solver != SIMPLEX or t == 0 else 0.0
                cuda.syncthreads()
                continue
            if shrink and C != 0.0:
                # shrinking: skip a row none of whose coordinates is in play, or (PINS) every
                # one of them settled at its bound (_kernels._active_coords)
                ap = 0.0
                for t in range(tid, m, TPB):
                    nt = near[mdl, i, t]
                    if in_play(nt, brow[t]) and (shrink != PINS or not settled(nt, brow[t], C)):
                        ap += 1.0
                none_in_play = _block_sum(red, ap, tid, TPB) == 0.0
                cuda.syncthreads()
                if none_in_play:
                    continue
            yi = y[i]
            lo, hi = row_range(indptr, ncols, i)

            # 1. scores s = W^T x (and the partial sums of beta_i)
            if tid == 0:
                ist[0] = 0
                ist[3] = 0
            if G == 1:
                for j in range(tid, k, TPB):
                    acc = dot_col(W, mdl, data, indices, lo, lo, hi, 1, j)
                    if bias != 0.0:
                        acc += bias * W[mdl, D - 1, j]
                    s[j] = acc
            elif tid < G * k:
                g = tid // k
                part[tid] = dot_col(W, mdl, data, indices, lo, lo + g, hi, G, tid - g * k)
            bp = 0.0
            for t in range(tid, m, TPB):
                bp += brow[t]
            bsum = _block_sum(red, bp, tid, TPB)
            if G > 1:
                for j in range(tid, k, TPB):
                    acc = 0.0
                    for g in range(G):
                        acc += part[g * k + j]
                    if bias != 0.0:
                        acc += bias * W[mdl, D - 1, j]
                    s[j] = acc
                cuda.syncthreads()

            # 2-5. v, the block subproblem b, Delta = b - beta_i; dk (in s): dk[c(t)] = -Delta_t,
            #      dk[y] = sum(Delta)
            _row_step(s, v, bn, cand, srt, red, ist, fst, grad, brow, yi, sq, bsum, C, solver, eps, near, mdl, i,
                      shrink, False, tid, TPB)

            # 6. W[f, :] += x_f * dk over the row's nonzeros (and the intercept row); columns
            #    with dk[j] == 0 (most of them once beta_i sits at its bounds) are skipped.
            if ist[3] != 0:
                if PARALLEL:  # other blocks update W at the same time: atomics
                    for j in range(tid, k, TPB):
                        dj = s[j]
                        if dj != 0.0:
                            for q in range(lo, hi):
                                a = data[q]
                                if a != 0:
                                    cuda.atomic.add(W, (mdl, feature(indices, lo, q), j), a * dj)
                    if bias != 0.0:
                        for j in range(tid, k, TPB):
                            cuda.atomic.add(W, (mdl, D - 1, j), bias * s[j])
                else:
                    if G == 1:
                        for j in range(tid, k, TPB):
                            dj = s[j]
                            if dj != 0.0:
                                axpy_col(W, mdl, data, indices, lo, lo, hi, 1, j, dj)
                    elif tid < G * k:
                        g = tid // k
                        j = tid - g * k
                        dj = s[j]
                        if dj != 0.0:
                            axpy_col(W, mdl, data, indices, lo, lo + g, hi, G, j, dj)
                    if bias != 0.0:
                        for j in range(tid, k, TPB):
                            W[mdl, D - 1, j] += bias * s[j]
            cuda.syncthreads()

    return kernel


def parallel_bcd_kernel(dense: bool, tpb: int, kc: int):
    """The row-parallel pass kernel: :func:`bcd_kernel` with ``parallel=True``."""
    return bcd_kernel(dense, tpb, kc, True)


@functools.lru_cache(maxsize=None)
def _row_score(dense: bool):
    row_range, feature, dot_col, axpy_col = _row_access(dense)

    @cuda.jit(device=True)
    def score(W, mdl, data, indices, lo, hi, bias, j):
        """``s_j = W[:, j]^T x`` (plus the intercept term)."""
        acc = dot_col(W, mdl, data, indices, lo, lo, hi, 1, j)
        if bias != 0.0:
            acc += bias * W[mdl, W.shape[1] - 1, j]
        return acc

    return row_range, score


@functools.lru_cache(maxsize=None)
def hinge_kernel(dense: bool, tpb: int):
    """Per-block partial sums of the weighted hinge loss: ``out[mi, blk]``; grid ``(ceil(n / tpb), L)``.

    One thread per row: ``s_y`` first, then ``sum_{j != y} max(0, 1 - (s_y - s_j))`` one class at
    a time (no per-row storage, any ``k``); with ``loss_id == CS_LOSS`` the maximum of those terms
    (the Crammer-Singer hinge) instead of their sum.  Deterministic: fixed tree per block, host sums blocks.
    With ``record``, also the near-flags of shrinking: ``near[mdl, i, t] = 1`` where
    ``1 - (s_y - s_c(t)) > -reach`` and, for Crammer-Singer, at least
    :func:`~streamwww.backends.rowmath.near_floor` (0 for a row of weight 0), as the CPU kernel; with
    ``keep_rows``, each row's weighted loss in ``h[mi, i]`` as well.
    """
    TPB = tpb
    row_range, score = _row_score(dense)

    @cuda.jit
    def kernel(W, data, indices, indptr, ncols, y, weights, trains, splits, n, bias, models, out, h, near, reach,
               cs_near, record, keep_rows, loss_id):
        tid = cuda.threadIdx.x
        blk = cuda.blockIdx.x
        mi = cuda.blockIdx.y
        red = cuda.shared.array(TPB, float64)
        mdl = models[mi]
        k = W.shape[2]
        i = blk * TPB + tid
        loss = 0.0
        w = _row_weight(weights, trains, splits[mdl], i) if i < n else 0.0
        if w != 0.0:
            lo, hi = row_range(indptr, ncols, i)
            yi = y[i]
            sy = score(W, mdl, data, indices, lo, hi, bias, yi)
            for j in range(k):
                if j != yi:
                    sj = score(W, mdl, data, indices, lo, hi, bias, j)
                    if loss_id == CS_LOSS:
                        loss = max(loss, hinge_term(sy, sj))
                    else:
                        loss += hinge_term(sy, sj)
                    if record:  # t with c(t) = j
                        near[mdl, i, j - 1 if j != 0 else yi - 1] = 1 if 1.0 - (sy - sj) > -reach else 0
            if record and loss_id == CS_LOSS:  # the floor needs the row's loss: the flagged classes again
                floor = near_floor(loss, loss_id, cs_near)
                for j in range(k):
                    t = j - 1 if j != 0 else yi - 1
                    if j != yi and near[mdl, i, t] != 0:
                        if 1.0 - (sy - score(W, mdl, data, indices, lo, hi, bias, j)) < floor:
                            near[mdl, i, t] = 0
            loss *= w
        elif record and i < n:
            for t in range(k - 1):
                near[mdl, i, t] = 0
        if keep_rows and i < n:
            h[mi, i] = loss
        total = _block_sum(red, loss, tid, TPB)
        if tid == 0:
            out[mi, blk] = total

    return kernel


@functools.lru_cache(maxsize=None)
def sum_kernel(tpb: int, square: bool):
    """Per-block partial sums of ``A[mi]`` (or of its squares) for a 3-D array: ``out[mi, blk]``.

    Grid ``(n_blocks, A.shape[0])``; the host adds the blocks (deterministic).  Serves
    ``||W_m||_F^2`` and ``sum(beta_m)``.
    """
    TPB = tpb
    SQUARE = square

    @cuda.jit
    def kernel(A, out):
        tid = cuda.threadIdx.x
        blk = cuda.blockIdx.x
        mi = cuda.blockIdx.y
        red = cuda.shared.array(TPB, float64)
        k = A.shape[2]
        acc = 0.0
        for e in range(blk * TPB + tid, A.shape[1] * k, cuda.gridDim.x * TPB):
            f = e // k
            w = A[mi, f, e - f * k]
            if SQUARE:
                acc += w * w
            else:
                acc += w
        total = _block_sum(red, acc, tid, TPB)
        if tid == 0:
            out[mi, blk] = total

    return kernel


@functools.lru_cache(maxsize=None)
def fill_kernel():
    """``a[:] = value`` for a 1-D array (grid-stride loop)."""

    @cuda.jit
    def kernel(a, value):
        start = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        for e in range(start, a.shape[0], cuda.gridDim.x * cuda.blockDim.x):
            a[e] = value

    return kernel

