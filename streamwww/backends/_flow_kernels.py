r"""The flow pass: the sequential pass of one model on several threads, bit for bit.

A row's visit in the sequential pass (:func:`streamwww.backends._kernels.step_row`: its
scores, its exact block step, its update) reads and writes only the rows of ``W`` of the
row's features.  Two rows that share no feature therefore commute, and the pass's rows may
step on different threads at once provided each row steps after every earlier row of the
pass that shares a feature with it (and so before every later one): then every row of ``W``
sees the same reads and additions in the same order as in the sequential pass, and the
pass's result is the sequential pass's, bit for bit, on any number of threads (serial
equivalence, as in CYCLADES: Pan, Lam, Tu, Papailiopoulos, Zhang, Jordan, Ramchandran, Ré,
NeurIPS 2016, which runs a sample's connected components of conflicting rows on separate
cores; here a dataflow over each row's latest earlier row per feature).

The rows that step are taken in windows of ``WINDOW`` rows (with shrinking, the rows that
step are listed first, as in the block pass: :func:`streamwww.backends._block_kernels._liveness`;
else every row is handed out and its visit tests it as the sequential pass's does), and
each window in chunks of ``CHUNK`` consecutive rows:

1. in parallel over ranges of features (:func:`_deps`), rows in order: for each row, the
   place of the latest row of an earlier chunk with one of its features (``last[f]``, the
   latest row with feature ``f`` so far, read, then set to the row);
2. the threads take the window's chunks in order from an atomic counter (:func:`_flow`); a
   row waits until the chunk of that latest row, and every chunk before it, has stepped
   (``done``), then steps.  A chunk's rows step in order on one thread, so a row need not
   wait for an earlier row of its own chunk, nor for the earlier rows that row waited for.
   A chunk waits only for chunks handed out before it, so the window ends on any number of
   threads (one among them).

It pays where rows rarely share a feature (sparse rows, class-specific features): the backend
takes it for CSR rows without an intercept (every row updates the intercept's row of ``W``)
when few pairs of consecutive rows share a feature (:func:`shared_pairs`), and the
sequential pass otherwise.  Either way the model is the same bits.

Hand-written rather than a library's: no parallel library runs an exact coordinate-descent
pass in its serial order; Numba's ``prange`` gives the threads, :mod:`._atomics` the hand-offs.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from streamwww._jit import build
from streamwww.backends._atomics import fetch_add, store_release, wait_for
from streamwww.backends._block_kernels import _liveness, _ranges
from streamwww.backends._kernels import (
    ROWS_AHEAD,
    _active_coords,
    _at_zero,
    _far,
    _n_classes,
    _prefetch_start,
    _prefetch_visit,
    _prefetch_x,
    _zero_row,
    hold,
    shrink_mode,
    step_row,
)
from streamwww.backends.rowmath import PINS, row_weight

__all__ = ["flow_pass", "shared_pairs", "WINDOW", "CHUNK"]

WINDOW = 2048  # rows a window at most (a parallel region each for stages 1 and 2)
CHUNK = 8  # consecutive rows a thread takes at a time (fewer hand-offs; a chunk's rows wait for no one in it)


def _flow_pass(W, X, y, sqnorms, weights, trains, beta, Cs, splits, models, order, near, pin, bias, solver, eps,
               n_threads, ktag):
    """The flow pass (module docstring) over the rows ``order`` of the CSR matrix ``X``
    (``(data, indices, indptr)``), for each model in ``models`` in turn: the arguments and
    the result of :func:`streamwww.backends._kernels.bcd_pass` (``bias`` must be 0).
    ``n_threads``: the threads (numba's ``get_num_threads()``); no result depends on it."""
    k = _n_classes(W, ktag)
    km = k - 1
    shrink = shrink_mode(near, solver, pin)
    D = W.shape[1]
    T = max(1, n_threads)
    n_rows = order.shape[0]
    kp = (k + 7) // 8 * 8 + 8  # per-thread rows a cache line apart
    bounds = np.empty(T + 1, dtype=np.int64)
    _ranges(X, D, T, bounds)
    last = np.empty(D, dtype=np.int64)  # the place of the latest row with feature f so far
    MX = np.empty((T, WINDOW + 8), dtype=np.int64)  # stage 1: a row's latest earlier row, each thread's features
    done = np.zeros(WINDOW // CHUNK + 8, dtype=np.int64)  # done[c] == stamp: chunk c of this window has stepped
    turn = np.zeros(16, dtype=np.int64)  # the window's next chunk to hand out
    stamp = np.int64(0)
    SC = np.empty((T, 5, kp))  # s, dk, v, bnew, grad
    IX = np.empty((T, 3, kp), dtype=np.int64)  # idx, cls, at
    steps = np.empty(n_rows, dtype=np.int64)  # the places in order of the rows that step, in order
    play = np.empty(n_rows, dtype=np.int64)
    for mi in range(models.shape[0]):
        mdl = models[mi]
        bm = beta[mdl]
        far = _far(bm.shape[0] * bm.shape[1])
        # 0. shrinking: the rows that step (late in a run most rows skip: they get no turn);
        #    else every row, each row's visit testing it as the sequential pass's does
        n_live = np.int64(0)  # (not a literal: a literal argument compiles the callees once more)
        if shrink:
            for t in prange(T):
                _liveness(near, mdl, bm, Cs[mdl], weights, trains, splits[mdl], sqnorms, y, shrink, km, order, play,
                          np.int64(t), T, IX[t, 2], solver, far)
            for p in range(n_rows):
                if play[p] != 0:
                    steps[n_live] = p
                    n_live += 1
        else:
            for p in range(n_rows):
                steps[p] = p
            n_live = n_rows
        last[:] = -1
        for w0 in range(0, n_live, WINDOW):
            nw = min(WINDOW, n_live - w0)
            stamp += 1
            # 1. each row's latest earlier row with one of its features, each thread its features
            for t in prange(T):
                _deps(X, order, steps, w0, nw, bounds[t], bounds[t + 1], last, MX[t])
            # 2. the rows' steps, each after the earlier rows it shares a feature with
            turn[0] = 0
            for t in prange(T):
                _flow(W[mdl], X, y, sqnorms, weights, trains, splits[mdl], bm, Cs[mdl], near, mdl, order, steps, w0,
                      nw, n_live, MX, turn, done, stamp, SC[t], IX[t], bias, solver, eps, k, ktag, shrink, far)


flow_pass = build(_flow_pass, "_parallel", parallel=True)


# The stages' work per thread, compiled as functions of their own (not inlined into the
# parallel loops), as in the block pass: inside them Numba prunes the reference counts of the
# shared arrays (``hold``).

@njit(cache=True, nogil=True)
def _deps(X, order, steps, w0, nw, lo, hi, last, mx):
    """Stage 1 for the features ``lo <= f < hi``: ``mx[j]``, the place of the latest row of
    an earlier chunk that has one of row ``j``'s features in the range (-1: none), rows in
    order.  A feature whose latest row is in row ``j``'s own chunk is left out: that row
    steps before row ``j`` on the same thread, after the earlier rows with the feature."""
    indices, indptr = X[1], X[2]
    for j in range(nw):
        if j + ROWS_AHEAD < nw:
            _prefetch_start(X, order[steps[w0 + j + ROWS_AHEAD]])
        if j + ROWS_AHEAD // 2 < nw:
            _prefetch_x(X, order[steps[w0 + j + ROWS_AHEAD // 2]])
        i = order[steps[w0 + j]]
        a, b = indptr[i], indptr[i + 1]
        # the row's first nonzero at or after lo (its indices sorted; searched here, not by
        # np.searchsorted on a view: a view per row counts references on a line every thread writes)
        p, q = a, b
        while p < q:
            h = (p + q) // 2
            if indices[h] < lo:
                p = h + 1
            else:
                q = h
        place = w0 + j
        first = w0 + j - j % CHUNK  # the place of the row's chunk's first row
        latest = -1
        while p < b and indices[p] < hi:
            f = indices[p]
            if last[f] < first:
                latest = max(latest, last[f])
            last[f] = place
            p += 1
        mx[j] = latest
    hold((indices, indptr, order, steps, last, mx))


@njit(cache=True, nogil=True)
def _flow(Wm, X, y, sqnorms, weights, trains, split, bm, Cm, near, mdl, order, steps, w0, nw, n_live, MX, turn, done,
          stamp, sc, ix, bias, solver, eps, k, ktag, shrink, far):
    """Stage 2 on one thread: takes the window's chunks of ``CHUNK`` rows in order (``turn``),
    each once.  Row ``j`` waits until the chunk of its latest row of an earlier chunk with
    one of its features (stage 1) and every chunk before it have stepped (``done``; the
    thread remembers how far it has seen them done), then steps as in the sequential pass
    (its rules; its visit, :func:`~streamwww.backends._kernels.step_row`); the chunk is
    marked done after its last row.  On ``far`` data it asks for the lines of the row ``ROWS_AHEAD`` on (the threads
    together ask for every row's, as the sequential pass does)."""
    km = k - 1
    T = MX.shape[0]
    s, dk, v, bnew, grad = sc[0, :k], sc[1, :k], sc[2, :km], sc[3, :km], sc[4, :km]
    idx, cls, at = ix[0, :km], ix[1, :k], ix[2, :km]
    front = 0  # the chunks before it are done
    while True:
        c = fetch_add(turn, 0, 1)
        if c * CHUNK >= nw:
            break
        for j in range(c * CHUNK, min((c + 1) * CHUNK, nw)):
            if far:
                q = w0 + j + ROWS_AHEAD
                if q < n_live:
                    _prefetch_visit(bm, near, mdl, sqnorms, y, weights, trains, order[steps[q]], shrink)
                    _prefetch_x(X, order[steps[q - ROWS_AHEAD // 2]])
            latest = -1
            for t in range(T):
                latest = max(latest, MX[t, j])
            while front * CHUNK + w0 <= latest:
                wait_for(done, front, stamp)
                front += 1
            i = order[steps[w0 + j]]
            # (the rules of _live, spelled out as in the sequential pass's row loop: see there)
            C = Cm * row_weight(weights, trains, split, i)
            if C == 0.0 and _at_zero(bm[i]):
                continue
            sq = sqnorms[i]
            if sq == 0.0:
                _zero_row(bm[i], C, solver)
                continue
            na = km
            if shrink and C != 0.0:
                na = _active_coords(near[mdl, i], bm[i], at, C, shrink == PINS)
                if na == 0:
                    continue
            step_row(Wm, X, i, y[i], sq, bm[i], C, bias, solver, eps, na, k, ktag, s, dk, v, bnew, grad, idx, cls, at)
        store_release(done, c, stamp)
    hold((Wm, y, sqnorms, weights, trains, bm, near, order, steps, MX, turn, done, sc, ix))


@njit(cache=True, nogil=True)
def shared_pairs(X, order, n_pairs):
    """The share of the first ``n_pairs`` pairs of consecutive rows of ``order`` with a
    feature in common (CSR rows, indices sorted): the flow pass's threads wait about that
    often for one another."""
    indices, indptr = X[1], X[2]
    n = min(n_pairs, order.shape[0] - 1)
    if n <= 0:
        return 1.0
    shared = 0
    for p in range(n):
        a, b = indptr[order[p]], indptr[order[p] + 1]
        c, d = indptr[order[p + 1]], indptr[order[p + 1] + 1]
        while a < b and c < d:
            if indices[a] == indices[c]:
                shared += 1
                break
            if indices[a] < indices[c]:
                a += 1
            else:
                c += 1
    hold((indices, indptr, order))
    return shared / n
