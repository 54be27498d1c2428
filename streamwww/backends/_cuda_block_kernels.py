r"""numba-cuda kernels of the block pass: one model's exact BCD pass with many rows in flight.

The device form of :mod:`streamwww.backends._block_kernels` (DESIGN.md, "Parallel passes
for one model"), for dense or CSR rows, the Walrus, simplex and Shark steps, shrinking
(``near``), row weights and cross-validation splits (:func:`.rowmath.row_weight`), zero rows,
``C == 0`` rows and the intercept row ``D - 1``; ``W[M, D, k]`` and ``beta[M, n, k - 1]`` as
for :func:`._cuda_kernels.bcd_kernel`.  Per listed model (``blockIdx.y``), ``B`` thread
blocks of ``T`` threads (``blockIdx.x``; ``P = B T`` workers, worker ``w = blockIdx.x T +
threadIdx.x``) run the phases:

0. ``live`` (all workers, rows ``p = w, w + P, ...``): which rows of ``order`` step, by the
   rules of :func:`._kernels._live` (held out and at 0, a zero row -- set to its minimizer
   here --, a shrunk row with no coordinate in play: left out); ``scan`` (block 0): the rows
   that step, in order (``steps``), and their nonzeros' running count (``nz``; integer
   prefix sums, so exact whatever the tree).  The blocks are ``m`` consecutive rows of
   ``steps``: the CPU block pass's blocks;
1. ``prepare`` (all workers): the block's scores at its start, ``S[j, c] = W[:, c]^T x_j``
   (one thread an entry: a shrunk row's label and classes in play only, the others 0) and
   its Gram entries ``G[j, l] = x_j^T x_l + bias^2`` (``l < j``, one thread a pair: dense
   rows over the features in order, CSR rows merged over their sorted indices); a CSR merge
   also links each nonzero of row ``l`` to the same feature's next occurrence in the block
   (``nxt``: an integer ``atomic.min`` over the later rows' slots) and marks the first
   occurrences (``head``);
2. ``chain`` (block 0, its ``T`` threads; row ``j = 0, 1, ...`` in order): the row's exact
   scores are ``S[j]`` (the earlier rows' corrections already added), then
   :func:`._cuda_kernels._exact_block` (sort and Walrus sweep, or the simplex step) or
   Shark's solver gives ``b``; ``u_j`` (``u[c(t)] = -Delta_t``, ``u[y] = sum Delta``) is
   written to ``U[j]``, ``beta_i <- b``, and the step is pushed to the later rows:
   ``S[j', c] += G[j', j] u_j[c]`` for ``j' > j`` and the classes ``c`` the step changed,
   one thread an entry.  Each ``S[j', c]`` thus gets ``s0 + sum_{l < j'} g_{j'l} u_l[c]``
   with ``l`` increasing, the CPU's sum, whichever thread adds each term;
3. ``update`` (all workers): ``W += sum_j x_j u_j^T``: one thread an entry ``W[f, c]`` of the
   block's features (CSR: a first occurrence's slot; dense: every feature; and the intercept
   row), which adds the rows ``j`` that hold ``f`` in increasing ``j`` (CSR: along ``nxt``)
   in a register and stores once.

Every value is computed by one thread, by one formula, in a fixed order: no float atomics,
no warp intrinsics, no sum split between threads by the launch.  The model therefore depends
on ``m`` and on the block boundaries (the CPU block pass's), not on ``B``, ``T`` or the
order the hardware runs threads in: two runs give the same bits.  (The candidate and
changed-class lists are appended with a shared-memory integer counter in arbitrary order;
the sort's total order and the per-entry pushes and updates make the results independent
of it.)  Against the CPU block pass the results differ by rounding only: the scores' four
partial sums (:func:`._cuda_kernels._row_access`'s ``dot_col``), the beta sums' tree and the GPU's fused
multiply-adds.

``m`` is the pass's ``block_rows``, the setting recorded in checkpoints and model files:
the device runs the same algorithm as the CPU, not a block size of its own.  A shard of
``n <= m`` rows is one block.

Two launches of the same phases (the same device functions, so the same bits):

- :func:`block_pass_kernel` -- one cooperative launch per pass, the phases separated by
  grid-wide barriers (``cuda.cg.this_grid().sync()``: ``2 + 3 ceil(n_live / m)`` of them);
  its grid, ``(B, L)`` blocks for ``L`` models, must fit the device at once
  (``max_cooperative_grid_blocks``).  The simulator runs a grid's blocks one after another,
  so there a launch is one block of one model;
- :func:`block_step_kernel` -- one launch per phase (``phase`` one of :data:`LIVE`, ...,
  :data:`UPDATE`), for any ``B``: the host reads the live rows' count after ``SCAN`` and
  launches ``PREPARE``, ``CHAIN`` (``B = 1``) and ``UPDATE`` per block.  It serves where a
  cooperative launch is refused, and the tests (several blocks a model under the simulator).

Hand-written rather than a library's: no GPU library offers an exact, deterministic
coordinate-descent step, and the per-block chain of dependent rows needs one thread block
for its barriers, beside a grid of threads for the gathers and the scatter.

Arguments (both kernels; :meth:`streamwww.backends.cuda.CUDABackend.bcd_pass` makes them):
``W, data, indices, indptr, ncols, y, sqnorms, weights, trains, beta, Cs, splits, models,
order, bias, solver, eps, near, shrink`` as for :func:`._cuda_kernels.bcd_kernel`; ``m``;
the scratch ``play[L, >= n]`` (int32), ``steps[L, >= n]`` (int64), ``nz[L, >= n + 1]``
(int64), ``nlive[L]`` (int64), ``S[L, m, k]``, ``U[L, m, k]``, ``G[L, >= m (m - 1) / 2]``
(float64), and per CSR slot (a nonzero of a block's row; two buffers, blocks ``b`` and
``b + 1``) ``nxt, head, e2j[L, 2, slots]`` (int32) and ``e2p[L, 2, slots]`` (int64), with
``slots`` at least a block's nonzeros; ``scr_f[L, 4, kk], scr_i[L, 2, kk], use_shared`` as
for ``bcd_kernel`` (slot ``mi``).
"""

from __future__ import annotations

import functools
import math

from numba import cuda, float64, int32, int64

from streamwww.backends._cuda_kernels import _block_sum, _jit_block, _per_class, _row_score, _row_step, _row_weight
from streamwww.backends.rowmath import PINS, in_play, settled
from streamwww.solvers import SIMPLEX

__all__ = ["block_pass_kernel", "block_step_kernel", "LIVE", "SCAN", "PREPARE", "CHAIN", "UPDATE", "NONE",
           "shared_capacity"]

#: The phases of :func:`block_step_kernel`.
LIVE, SCAN, PREPARE, CHAIN, UPDATE = 0, 1, 2, 3, 4

#: ``nxt`` of a slot whose feature occurs in no later row of the block.
NONE = 2 ** 31 - 1


def shared_capacity(kc: int, tpb: int) -> int:
    """The per-class capacity that keeps the kernels' static shared memory within 48 KiB:
    3 float64 and 2 int32 vectors of it, a float64 and two int64 vectors of ``tpb`` (the
    beta sums' tree, the scan), a few scalars: ``32 kc + 24 tpb + 40`` bytes."""
    return max(1, min(int(kc), (48 * 1024 - 24 * int(tpb) - 64) // 32))


@functools.lru_cache(maxsize=None)
def _phases(dense: bool, tpb: int):
    """The phases as device functions for dense or CSR rows and ``tpb`` threads a block."""
    DENSE = dense
    TPB = tpb
    row_range, score = _row_score(dense)

    @cuda.jit(device=True)
    def live(w, P, mi, mdl, beta, Cs, splits, weights, trains, sqnorms, order, near, shrink, solver, play):
        """``play[mi, p]``: 0 (the row does not step), else its coordinates in play."""
        km = beta.shape[2]
        Cm = Cs[mdl]
        split = splits[mdl]
        for p in range(w, order.shape[0], P):
            i = order[p]
            C = Cm * _row_weight(weights, trains, split, i)
            brow = beta[mdl, i]
            total = 0.0
            for t in range(km):
                total += brow[t]
            state = km
            if C == 0.0 and total == 0.0:
                state = 0  # box {0}, already there
            elif sqnorms[i] == 0.0:
                # ||x_i|| = 0: W cannot move; the block minimizer (_kernels._zero_row)
                for t in range(km):
                    brow[t] = C if solver != SIMPLEX or t == 0 else 0.0
                state = 0
            elif shrink and C != 0.0:
                state = 0
                pinned = shrink == PINS  # a row settled at its bounds does not step (_kernels._active_coords)
                for t in range(km):
                    if in_play(near[mdl, i, t], brow[t]):
                        state += 1
                        if not settled(near[mdl, i, t], brow[t], C):
                            pinned = False
                if pinned:
                    state = 0
            play[mi, p] = state

    @cuda.jit(device=True)
    def scan(tid, mi, order, indptr, play, steps, nz, nlive, sc, sz):
        """Block 0: ``steps[mi, :n_live]`` the positions of the live rows in ``order``,
        ``nz[mi, q]`` the nonzeros of the live rows before the ``q``-th (and the total at
        ``n_live``), ``nlive[mi] = n_live``.  Thread ``tid`` takes a contiguous part."""
        n = order.shape[0]
        lo = tid * n // TPB
        hi = (tid + 1) * n // TPB
        cnt = 0
        tot = 0
        for p in range(lo, hi):
            if play[mi, p] != 0:
                cnt += 1
                if not DENSE:
                    i = order[p]
                    tot += indptr[i + 1] - indptr[i]
        sc[tid] = cnt
        sz[tid] = tot
        cuda.syncthreads()
        off = 1
        while off < TPB:  # inclusive prefix sums (Hillis-Steele)
            a = 0
            z = 0
            if tid >= off:
                a = sc[tid - off]
                z = sz[tid - off]
            cuda.syncthreads()
            sc[tid] += a
            sz[tid] += z
            cuda.syncthreads()
            off *= 2
        q = sc[tid] - cnt
        base = sz[tid] - tot
        for p in range(lo, hi):
            if play[mi, p] != 0:
                steps[mi, q] = p
                nz[mi, q] = base
                if not DENSE:
                    i = order[p]
                    base += indptr[i + 1] - indptr[i]
                q += 1
        if tid == TPB - 1:
            nlive[mi] = sc[tid]
            nz[mi, sc[tid]] = sz[tid]
        cuda.syncthreads()

    @cuda.jit(device=True)
    def init_slots(w, P, b, m, mi, order, indptr, steps, nz, nlive, nxt, head, e2j, e2p):
        """CSR: block ``b``'s slots (buffer ``b % 2``): each nonzero its row ``j`` and position,
        no next occurrence yet, a first occurrence until a merge finds an earlier one."""
        q0 = b * m
        nb = min(m, nlive[mi] - q0)
        buf = b % 2
        for j in range(w, nb, P):
            i = order[steps[mi, q0 + j]]
            s = nz[mi, q0 + j] - nz[mi, q0]
            for p in range(indptr[i], indptr[i + 1]):
                nxt[mi, buf, s] = NONE
                head[mi, buf, s] = 1
                e2j[mi, buf, s] = j
                e2p[mi, buf, s] = p
                s += 1

    @cuda.jit(device=True)
    def gram(mi, buf, data, indices, indptr, ncols, il, ij, offl, offj, nxt, head):
        """``x_j^T x_l`` (``l`` the earlier row; products ``x_j x_l``, features increasing);
        CSR: links row ``l``'s slots to row ``j``'s where they share a feature."""
        acc = 0.0
        if DENSE:
            bj = ij * ncols
            bl = il * ncols
            for f in range(ncols):
                acc += float64(data[bj + f]) * float64(data[bl + f])
        else:
            p = indptr[il]
            ph = indptr[il + 1]
            q = indptr[ij]
            qh = indptr[ij + 1]
            sl = offl - p  # slot of position p: sl + p
            sj = offj - q
            while p < ph and q < qh:
                fl = indices[p]
                fj = indices[q]
                if fl == fj:
                    acc += float64(data[q]) * float64(data[p])
                    cuda.atomic.min(nxt, (mi, buf, sl + p), int32(sj + q))
                    head[mi, buf, sj + q] = 0
                    p += 1
                    q += 1
                elif fl < fj:
                    p += 1
                else:
                    q += 1
        return acc

    @cuda.jit(device=True)
    def prepare(w, P, b, m, mi, mdl, W, data, indices, indptr, ncols, y, weights, trains, beta, Cs, splits, order,
                bias, near, shrink, steps, nz, nlive, S, G, nxt, head):
        """Phase 1 for block ``b``: scores at its start (``S``) and Gram entries (``G``)."""
        q0 = b * m
        nb = min(m, nlive[mi] - q0)
        if nb <= 0:
            return
        k = W.shape[2]
        nsc = nb * k
        npairs = nb * (nb - 1) // 2
        buf = b % 2
        Cm = Cs[mdl]
        split = splits[mdl]
        for e in range(w, nsc + npairs, P):
            if e < nsc:
                j = e // k
                c = e - j * k
                i = order[steps[mi, q0 + j]]
                yi = y[i]
                need = True
                if shrink and c != yi and Cm * _row_weight(weights, trains, split, i) != 0.0:
                    t = c - 1 if c != 0 else yi - 1  # c = c(t)
                    need = in_play(near[mdl, i, t], beta[mdl, i, t])
                if need:
                    lo, hi = row_range(indptr, ncols, i)
                    S[mi, j, c] = score(W, mdl, data, indices, lo, hi, bias, c)
                else:
                    S[mi, j, c] = 0.0  # a class out of play in a shrunk row: never read
            else:
                e2 = e - nsc  # pair (j, l), l < j: e2 = j (j - 1) / 2 + l
                j = int64((1.0 + math.sqrt(1.0 + 8.0 * e2)) * 0.5)
                while j * (j - 1) // 2 > e2:
                    j -= 1
                while (j + 1) * j // 2 <= e2:
                    j += 1
                l = e2 - j * (j - 1) // 2
                ij = order[steps[mi, q0 + j]]
                il = order[steps[mi, q0 + l]]
                offj = nz[mi, q0 + j] - nz[mi, q0]
                offl = nz[mi, q0 + l] - nz[mi, q0]
                G[mi, e2] = gram(mi, buf, data, indices, indptr, ncols, il, ij, offl, offj, nxt, head) + bias * bias

    @cuda.jit(device=True)
    def chain(tid, b, m, mi, mdl, y, sqnorms, weights, trains, beta, Cs, splits, order, solver, eps, near, shrink,
              steps, nlive, S, U, G, s, v, bn, cand, srt, red, ist, fst, grad):
        """Phase 2 for block ``b``, by the block's ``TPB`` threads: the rows' steps in order."""
        q0 = b * m
        nb = min(m, nlive[mi] - q0)
        km = beta.shape[2]
        k = km + 1
        Cm = Cs[mdl]
        split = splits[mdl]
        for j in range(nb):
            i = order[steps[mi, q0 + j]]
            C = Cm * _row_weight(weights, trains, split, i)
            sq = sqnorms[i]
            yi = y[i]
            brow = beta[mdl, i]
            if tid == 0:
                ist[0] = 0
                ist[3] = 0
            for c in range(tid, k, TPB):
                s[c] = S[mi, j, c]
            bp = 0.0
            for t in range(tid, km, TPB):
                bp += brow[t]
            bsum = _block_sum(red, bp, tid, TPB)  # (a barrier: s and ist are set)
            # the step (bcd_kernel's), u in s and the classes it changed in srt
            _row_step(s, v, bn, cand, srt, red, ist, fst, grad, brow, yi, sq, bsum, C, solver, eps, near, mdl, i,
                      shrink, True, tid, TPB)
            nchg = ist[3]
            for c in range(tid, k, TPB):
                U[mi, j, c] = s[c]
            # the later rows' scores: S[j', c] += G[j', j] u[c], one thread an entry
            for e in range(tid, (nb - j - 1) * nchg, TPB):
                r = e // nchg
                jj = j + 1 + r
                c = srt[e - r * nchg]
                g = G[mi, jj * (jj - 1) // 2 + j]
                if g != 0.0:
                    S[mi, jj, c] += g * s[c]
            cuda.syncthreads()

    @cuda.jit(device=True)
    def update(w, P, b, m, mi, mdl, W, data, indices, ncols, order, bias, steps, nz, nlive, U, nxt, head, e2j, e2p):
        """Phase 3 for block ``b``: ``W += sum_j x_j u_j^T``, one thread an entry of ``W``."""
        q0 = b * m
        nb = min(m, nlive[mi] - q0)
        if nb <= 0:
            return
        k = W.shape[2]
        D = W.shape[1]
        if DENSE:
            nf = ncols
        else:
            nf = nz[mi, q0 + nb] - nz[mi, q0]
        nitems = nf * k
        nbias = k if bias != 0.0 else 0
        buf = b % 2
        for e in range(w, nitems + nbias, P):
            if e < nitems:
                r = e // k
                c = e - r * k
                if DENSE:
                    wv = W[mdl, r, c]
                    moved = False
                    for j in range(nb):
                        u = U[mi, j, c]
                        if u != 0.0:
                            x = data[order[steps[mi, q0 + j]] * ncols + r]
                            if x != 0.0:
                                wv += x * u
                                moved = True
                    if moved:
                        W[mdl, r, c] = wv
                elif head[mi, buf, r] != 0:
                    f = indices[e2p[mi, buf, r]]
                    wv = W[mdl, f, c]
                    moved = False
                    sl = int64(r)
                    while sl != NONE:
                        u = U[mi, e2j[mi, buf, sl], c]
                        if u != 0.0:
                            wv += data[e2p[mi, buf, sl]] * u
                            moved = True
                        sl = nxt[mi, buf, sl]
                    if moved:
                        W[mdl, f, c] = wv
            else:
                c = e - nitems
                wv = W[mdl, D - 1, c]
                moved = False
                for j in range(nb):
                    u = U[mi, j, c]
                    if u != 0.0:
                        wv += bias * u
                        moved = True
                if moved:
                    W[mdl, D - 1, c] = wv

    return live, scan, init_slots, prepare, chain, update


@functools.lru_cache(maxsize=None)
def _kernels(dense: bool, tpb: int, kc: int):
    DENSE = dense
    TPB = tpb
    KC = kc
    live, scan, init_slots, prepare, chain, update = _phases(dense, tpb)

    @cuda.jit(device=True)
    def run(phase, b, bx, B, W, data, indices, indptr, ncols, y, sqnorms, weights, trains, beta, Cs, splits, models,
            order, bias, solver, eps, near, shrink, m, play, steps, nz, nlive, S, U, G, nxt, head, e2j, e2p, scr_f,
            scr_i, use_shared, sh_s, sh_v, sh_b, sh_c, sh_o, red, sc, sz, ist, fst):
        """Phase ``phase`` (of block ``b`` for the per-block ones) on thread block ``bx`` of ``B``."""
        tid = cuda.threadIdx.x
        mi = cuda.blockIdx.y
        mdl = models[mi]
        w = bx * TPB + tid
        P = B * TPB
        if phase == LIVE:
            live(w, P, mi, mdl, beta, Cs, splits, weights, trains, sqnorms, order, near, shrink, solver, play)
        elif phase == SCAN:
            if bx == 0:
                scan(tid, mi, order, indptr, play, steps, nz, nlive, sc, sz)
                if not DENSE:
                    init_slots(tid, TPB, 0, m, mi, order, indptr, steps, nz, nlive, nxt, head, e2j, e2p)
        elif phase == PREPARE:
            prepare(w, P, b, m, mi, mdl, W, data, indices, indptr, ncols, y, weights, trains, beta, Cs, splits,
                    order, bias, near, shrink, steps, nz, nlive, S, G, nxt, head)
        elif phase == CHAIN:
            if bx == 0:
                s, v, bn, cand, srt = _per_class(use_shared, sh_s, sh_v, sh_b, sh_c, sh_o, scr_f, scr_i, mi)
                chain(tid, b, m, mi, mdl, y, sqnorms, weights, trains, beta, Cs, splits, order, solver, eps, near,
                      shrink, steps, nlive, S, U, G, s, v, bn, cand, srt, red, ist, fst, scr_f[mi, 3])
        else:
            update(w, P, b, m, mi, mdl, W, data, indices, ncols, order, bias, steps, nz, nlive, U, nxt, head, e2j,
                   e2p)
            if not DENSE:
                init_slots(w, P, b + 1, m, mi, order, indptr, steps, nz, nlive, nxt, head, e2j, e2p)

    @_jit_block(tpb)
    def step_kernel(phase, b, W, data, indices, indptr, ncols, y, sqnorms, weights, trains, beta, Cs, splits, models,
                    order, bias, solver, eps, near, shrink, m, play, steps, nz, nlive, S, U, G, nxt, head, e2j, e2p,
                    scr_f, scr_i, use_shared):
        sh_s = cuda.shared.array(KC, float64)
        sh_v = cuda.shared.array(KC, float64)
        sh_b = cuda.shared.array(KC, float64)
        sh_c = cuda.shared.array(KC, int32)
        sh_o = cuda.shared.array(KC, int32)
        red = cuda.shared.array(TPB, float64)
        sc = cuda.shared.array(TPB, int64)
        sz = cuda.shared.array(TPB, int64)
        ist = cuda.shared.array(4, int64)
        fst = cuda.shared.array(1, float64)
        run(phase, b, cuda.blockIdx.x, cuda.gridDim.x, W, data, indices, indptr, ncols, y, sqnorms, weights, trains,
            beta, Cs, splits, models, order, bias, solver, eps, near, shrink, m, play, steps, nz, nlive, S, U, G, nxt,
            head, e2j, e2p, scr_f, scr_i, use_shared, sh_s, sh_v, sh_b, sh_c, sh_o, red, sc, sz, ist, fst)

    @_jit_block(tpb)
    def pass_kernel(W, data, indices, indptr, ncols, y, sqnorms, weights, trains, beta, Cs, splits, models, order,
                    bias, solver, eps, near, shrink, m, play, steps, nz, nlive, S, U, G, nxt, head, e2j, e2p, scr_f,
                    scr_i, use_shared):
        sh_s = cuda.shared.array(KC, float64)
        sh_v = cuda.shared.array(KC, float64)
        sh_b = cuda.shared.array(KC, float64)
        sh_c = cuda.shared.array(KC, int32)
        sh_o = cuda.shared.array(KC, int32)
        red = cuda.shared.array(TPB, float64)
        sc = cuda.shared.array(TPB, int64)
        sz = cuda.shared.array(TPB, int64)
        ist = cuda.shared.array(4, int64)
        fst = cuda.shared.array(1, float64)
        grid = cuda.cg.this_grid()
        bx = cuda.blockIdx.x
        B = cuda.gridDim.x
        for phase in range(SCAN + 1):  # LIVE, then SCAN
            run(phase, 0, bx, B, W, data, indices, indptr, ncols, y, sqnorms, weights, trains, beta, Cs, splits,
                models, order, bias, solver, eps, near, shrink, m, play, steps, nz, nlive, S, U, G, nxt, head, e2j,
                e2p, scr_f, scr_i, use_shared, sh_s, sh_v, sh_b, sh_c, sh_o, red, sc, sz, ist, fst)
            grid.sync()
        nblk = 0
        for q in range(models.shape[0]):  # the same count for every thread: each meets every barrier
            nq = (nlive[q] + m - 1) // m
            if nq > nblk:
                nblk = nq
        for b in range(nblk):
            for phase in range(PREPARE, UPDATE + 1):
                run(phase, b, bx, B, W, data, indices, indptr, ncols, y, sqnorms, weights, trains, beta, Cs, splits,
                    models, order, bias, solver, eps, near, shrink, m, play, steps, nz, nlive, S, U, G, nxt, head,
                    e2j, e2p, scr_f, scr_i, use_shared, sh_s, sh_v, sh_b, sh_c, sh_o, red, sc, sz, ist, fst)
                grid.sync()

    return step_kernel, pass_kernel


def block_step_kernel(dense: bool, tpb: int, kc: int):
    """The one-phase kernel for dense or CSR rows, ``tpb`` threads, shared capacity ``kc``
    (:func:`shared_capacity`).  Launch as ``kernel[(B, L), tpb, stream](phase, b, *args)``
    (module docstring); ``SCAN`` and ``CHAIN`` with ``B = 1``."""
    return _kernels(bool(dense), int(tpb), int(kc))[0]


def block_pass_kernel(dense: bool, tpb: int, kc: int):
    """The whole-pass cooperative kernel: ``kernel[(B, L), tpb, stream](*args)`` (module
    docstring), ``B L`` at most the device's ``max_cooperative_grid_blocks``."""
    return _kernels(bool(dense), int(tpb), int(kc))[1]
