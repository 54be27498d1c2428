r"""Numba CPU kernels: one exact block-coordinate-descent pass, and the hinge loss.

Notation (DESIGN.md §2, 0-based): ``W`` has shape ``(D, k)`` with one row per
feature (row ``d`` holds the intercept weights when ``bias != 0``); ``beta_i`` has
length ``m = k - 1`` and ``c(t) = t + 1`` if ``t + 1 != y`` else ``0``.  One inner
step on row ``i`` (Algorithm 1 of Wang & Scott, ICML 2021):

1. ``s = W^T x_i``;
2. ``v_t = (1 - (s_y - s_c(t))) / ||x_i||^2 + beta_it + sum_u beta_iu``;
3. ``b = walrus(v, C)`` (or Shark's iterative solver; Crammer-Singer: ``b`` the
   simplex step, :mod:`streamwww.solvers.simplex`, the box replaced by ``b >= 0``,
   ``1^T b <= C``);
4. ``W[:, y] += x_i sum_t (b_t - beta_it)``, ``W[:, c(t)] -= x_i (b_t - beta_it)``;
   ``beta_i <- b``.

A row with ``||x_i|| = 0`` cannot move ``W``; its exact block minimizer is
``beta_i = C`` (the dual gains ``C (k-1)`` for free, matching the constant hinge
loss ``k - 1`` such a row has in the primal), so the duality gap stays exact.
Crammer-Singer's hinge of such a row is 1 and its dual term ``1^T beta_i`` is at
most ``C``: ``beta_i = (C, 0, ..., 0)``, exact in floating point.

Weights (DESIGN.md's per-row box): row ``i`` with weight ``w_i`` has the box
``[0, C w_i]`` in the dual and its hinge counts ``w_i`` times in the primal;
``C`` above is then ``C w_i`` throughout (``C * 1.0`` is ``C`` bitwise, so
unweighted runs are unchanged).  Cross-validation trains one model per (split,
``C``) in the same passes: a row outside a model's training split has weight 0
for that model (box ``{0}``), costs nothing, and does not enter its objectives.

All kernels handle several models at once (``W[M, D, k]``, ``beta[M, n, m]``,
one ``C`` per model) and update only the models listed in ``models``; models
are independent, so they run in parallel without changing any result.  The
row gather and scatter (:func:`row_scores`, :func:`row_scatter`, resolved at
compile time for a dense array or a CSR tuple) are the only parts that differ
between dense and CSR rows: one pass and one hinge sum serve both.  The scalar
row formulas (``c(t)``, ``v_t``, the hinge term) come from :mod:`.rowmath`,
shared with the CUDA kernels.  With at most ``SMALL_K`` classes the gather and the
scatter work on all k classes at once as one LLVM vector (:mod:`._lanes`), lane by
lane the scalar loops' operations: the same bits.

Software prefetch (:func:`_prefetch`, LLVM's ``llvm.prefetch``, which Numba does not
expose): a CSR row's gather reads ``Wm[f, :]`` for features ``f`` the hardware cannot
predict, and with many classes ``W`` is far larger than the caches (sector: 46 MB,
840 bytes per feature).  The gather asks for the rows of the feature
``PREFETCH_AHEAD`` places further on; the sums, their order and every result are
unchanged (docs/benchmarks-archive.md, "Software prefetch in the CSR gather").  On data
larger than a core's L2 cache (``FAR_ENTRIES``) the passes also look ahead across rows: a
shrinking pass first lists the rows that step, in the visiting order (a row's liveness
depends only on its own ``beta`` and flags, which only its own step changes, so the list
made at the start is the one the row loop would find), and the row loop asks for the
state of the row ``ROWS_AHEAD`` places on; an objective pass asks for the next row's rows
of ``W``.  Every step reads and writes what it did, in the same order: the same bits
(docs/benchmarks.md, "Large data late in a run").
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from streamwww.backends._lanes import (lanes, lanes_load, lanes_load_row, lanes_madd, lanes_store, lanes_store_row,
                                       lanes_zero)
from streamwww._jit import two_builds
from streamwww.backends.rowmath import (PINS, SETS, c_index, hinge_term, in_play, near_floor, row_weight, settled,
                                        v_entry)
from streamwww.solvers import CS_LOSS, SHARK, SIMPLEX  # noqa: F401  (the ids the kernels branch on)
from streamwww.solvers.shark import shark_kernel
from streamwww.solvers.simplex import simplex_kernel
from streamwww.solvers.walrus import walrus_kernel

# Up to this many classes the kernels are compiled once per k (see ``ktag``):
# with k a compile-time constant a row's k scores, and the row of W a step adds
# to, are one vector (_lanes), and a shrunk step scores and scatters all k classes
# rather than the few in play.  Beyond it one generic build serves all k: there k lanes
# with whole-row shrunk steps are slower than the generic loops over the classes in play
# (docs/benchmarks-archive.md, "k classes as one vector").
SMALL_K = 8

@njit(cache=True, nogil=True, inline="always")
def shrink_mode(near, solver, pin):
    """A pass's ``shrink``: 0 without near-flags (or with Shark's inexact step), else
    :data:`~.rowmath.SETS`, or :data:`~.rowmath.PINS` with ``pin``."""
    if near.shape[1] == 0 or solver == SHARK:
        return 0
    return PINS if pin else SETS


def ktag(k: int) -> tuple:
    """The tag that selects the kernel build for ``k`` classes: ``(0,) * k`` or ``()``."""
    return (0,) * k if k <= SMALL_K else ()


@intrinsic
def hold(typingctx, arrays):
    """Nothing: a use of the arrays in the tuple ``arrays`` where the call stands.

    Numba inlines the row helpers (``inline="always"``) into each pass's row loop, and a
    helper's array argument is a reference of its own, taken at the call (``NRT_incref``,
    an atomic add) and dropped after its last use (``NRT_decref``).  Numba's pruning of
    such pairs fails when that last use sits inside a branch (a decref on each path):
    then every row pays them, a large part of a small-k ``fit`` (docs/benchmarks-archive.md,
    "No reference counting per row in the objective pass").  A helper that ends with
    ``hold((a, b))`` uses its arrays once more after every branch, and the pairs are pruned.  An intrinsic
    that emits no instruction: a compiled function would be a call wherever LLVM cannot
    inline it (a kernel loaded from Numba's cache calls it as an external symbol), and a
    call takes references to the tuple's arrays -- atomic operations on lines that every
    thread of a parallel pass writes.  (``rowmath.row_weight``, shared with CUDA, cannot
    call a CPU function: it ends with an always-true test on its arrays' shapes instead.)
    """
    def codegen(context, builder, sig, args):
        return context.get_dummy_value()
    return types.void(arrays), codegen


# Prefetch W's row of the feature this many nonzeros ahead in a CSR gather, when the
# row holds more than SMALL_K classes (with fewer, W is small or the row is one line).
PREFETCH_AHEAD = 8


@intrinsic
def _prefetch_at(typingctx, arr, index):
    """Ask the CPU to bring ``arr[index]``'s cache line in (``index`` a tuple of one
    integer per dimension; a hint: no result, no fault, no bounds check)."""
    def codegen(context, builder, sig, args):
        aryty, idxty = sig.args
        ary = context.make_array(aryty)(context, builder, args[0])
        idx = [context.cast(builder, a, t, types.intp)
               for a, t in zip(cgutils.unpack_tuple(builder, args[1], len(idxty)), idxty)]
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, idx, wraparound=False)
        i8p, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]),
                                            "llvm.prefetch.p0i8")
        builder.call(fn, [builder.bitcast(ptr, i8p), i32(0), i32(3), i32(1)])  # read, keep, data
        return context.get_dummy_value()
    if not isinstance(arr, types.Array) or not isinstance(index, types.BaseTuple) or len(index) != arr.ndim:
        return None
    return types.void(arr, index), codegen


@njit(cache=True, nogil=True, inline="always")
def _prefetch(arr, i, j):
    """Ask the CPU to bring ``arr[i, j]``'s cache line in."""
    _prefetch_at(arr, (i, j))


# A pass's row loops ask for the per-row state (``beta_i``, the shrinking flags,
# ``||x_i||^2``, ``y_i``, the weight, where the row starts) of the row this many places
# further on in the visiting order, and for that row's first lines half as far on: the
# order is a random permutation, so on large data each of those reads misses the caches,
# and late in a run, when most rows are skipped after reading them, the misses were most
# of a pass.  Only where ``beta`` (for an objective pass's next-row hint, ``W``) has at
# least ``FAR_ENTRIES`` entries (256 KiB, half of the 512 KiB L2 cache of the AMD cores it was
# measured on): larger, its rows read in a random order miss the L2 cache even where the L3
# cache holds them all (docs/benchmarks.md, "Row hints from 256 KiB of `beta`"); smaller, they stay in it.
ROWS_AHEAD = 16
X_LINES = 4  # (of a CSR row's values: at most this many lines of 8 of them asked for)
FAR_ENTRIES = 1 << 15


@njit(cache=True, nogil=True, inline="always")
def _far(entries):
    """Whether an array of ``entries`` entries is larger than the caches (the hints pay)."""
    return entries >= FAR_ENTRIES


@njit(cache=True, nogil=True, inline="always")
def _far_w(W, k, ktag):
    """Whether an objective pass asks for the next row's lines of ``W``: the generic builds
    (with at most ``SMALL_K`` classes a row of ``W`` is one line), ``W`` far."""
    return len(ktag) == 0 and _far(W.shape[1] * k)


@njit(cache=True, nogil=True, inline="always")
def _prefetch_visit(bm, near, mdl, sqnorms, y, weights, trains, i, shrink):
    """Every cache line a pass's liveness test of row ``i`` reads (a hint)."""
    _prefetch_at(sqnorms, (i,))
    _prefetch_at(y, (i,))
    if weights.shape[0]:
        _prefetch_at(weights, (i,))
    if trains.shape[0]:
        _prefetch_at(trains, (i,))
    m = bm.shape[1]
    for t in range(0, m, 8):
        _prefetch_at(bm, (i, t))
    _prefetch_at(bm, (i, m - 1))
    if shrink:
        _prefetch_at(near, (mdl, i, 0))
        _prefetch_at(near, (mdl, i, m - 1))
    hold((bm, near, sqnorms, y, weights, trains))


def _prefetch_start(X, i):
    """Where row ``i`` of ``X`` starts (a CSR row's ``indptr`` entry; nothing for a dense row)."""
    raise NotImplementedError  # compiled only, through the overload below


def _prefetch_x(X, i):
    """The first cache lines of row ``i`` of ``X`` (a CSR row's ``indptr`` entry is read:
    :func:`_prefetch_start` asks for it some rows before)."""
    raise NotImplementedError  # compiled only, through the overload below


@overload(_prefetch_start, inline="always")
def _prefetch_start_impl(X, i):
    if isinstance(X, types.BaseTuple):
        def csr(X, i):
            _prefetch_at(X[2], (i,))
        return csr

    def dense(X, i):
        pass
    return dense


@overload(_prefetch_x, inline="always")
def _prefetch_x_impl(X, i):
    if isinstance(X, types.BaseTuple):
        def csr(X, i):
            lo = X[2][i]
            hi = min(X[2][i + 1], lo + X_LINES * 8)
            for p in range(lo, hi, 8):
                _prefetch_at(X[1], (p,))
                _prefetch_at(X[0], (p,))
            if hi > lo:
                _prefetch_at(X[1], (hi - 1,))
                _prefetch_at(X[0], (hi - 1,))
        return csr

    def dense(X, i):
        _prefetch_at(X, (i, 0))
    return dense


def _prefetch_w(Wm, X, i, k):
    """The rows of ``Wm`` of row ``i``'s first ``PREFETCH_AHEAD`` features (a CSR row's
    gather asks for the later ones itself); nothing for a dense row."""
    raise NotImplementedError  # compiled only, through the overload below


@overload(_prefetch_w, inline="always")
def _prefetch_w_impl(Wm, X, i, k):
    if isinstance(X, types.BaseTuple):
        def csr(Wm, X, i, k):
            lo = X[2][i]
            for p in range(lo, min(X[2][i + 1], lo + PREFETCH_AHEAD)):
                _prefetch_row(Wm, X[1][p], k)
        return csr

    def dense(Wm, X, i, k):
        pass
    return dense


@njit(cache=True, nogil=True, inline="always")
def _prefetch_scored(X, y, weights, trains, near, mdl, h, mi, rows, q, record):
    """The lines an objective pass over ``rows`` reads and writes for the row
    ``ROWS_AHEAD`` places after ``q`` (its label, weight, flags and term, where it starts),
    and the first lines of the row half as far on (a hint)."""
    i = rows[q + ROWS_AHEAD]
    _prefetch_at(y, (i,))
    _prefetch_at(h, (mi, i))
    if weights.shape[0]:
        _prefetch_at(weights, (i,))
    if trains.shape[0]:
        _prefetch_at(trains, (i,))
    if record:
        _prefetch_at(near, (mdl, i, 0))
        _prefetch_at(near, (mdl, i, near.shape[2] - 1))
    _prefetch_start(X, i)
    _prefetch_x(X, rows[q + ROWS_AHEAD // 2])
    hold((X, y, weights, trains, near, h, rows))


@njit(cache=True, nogil=True, inline="always")
def _prefetch_row(Wm, f, k):
    """Every cache line of ``Wm[f, :]`` (8 doubles a line; the row need not start on one)."""
    for j in range(0, k, 8):
        _prefetch(Wm, f, j)
    _prefetch(Wm, f, k - 1)


@njit(cache=True, nogil=True, inline="always")
def _prefetch_end(lo, hi, k):
    """The nonzeros ``lo <= p <`` this of a CSR row prefetch the row of ``p + PREFETCH_AHEAD``:
    none with k <= SMALL_K (a compile-time constant there: the test folds away)."""
    return hi - PREFETCH_AHEAD if k > SMALL_K else lo


@njit(cache=True, nogil=True, inline="always")
def _n_classes(W, ktag):
    """k as a compile-time constant when the tag carries it, else from W's shape."""
    return W.shape[2] if len(ktag) == 0 else len(ktag)


@njit(cache=True, nogil=True, inline="always")
def _gather(s, Wm, f, a, k):
    """``s += a * Wm[f, :]`` (one feature's share of the scores)."""
    for j in range(k):
        s[j] += a * Wm[f, j]


@njit(cache=True, nogil=True, inline="always")
def _add_row(Wm, f, a, dk, k):
    """``Wm[f, :] += a * dk`` (one feature's share of step 4)."""
    for j in range(k):
        Wm[f, j] += a * dk[j]


@njit(cache=True, nogil=True, inline="always")
def _add_row_some(Wm, f, a, dk, cls, n):
    """``Wm[f, j] += a * dk[j]`` for the classes ``j`` in ``cls[:n]`` (the others' ``dk`` is 0)."""
    for q in range(n):
        j = cls[q]
        Wm[f, j] += a * dk[j]


def _scores_csr(Wm, data, indices, lo, hi, bias, s, k, ktag):
    """``s = Wm^T x`` for a CSR row (nonzeros ``lo:hi``), plus the intercept."""
    raise NotImplementedError  # compiled only, through the overload below


@overload(_scores_csr, inline="always")
def _scores_csr_impl(Wm, data, indices, lo, hi, bias, s, k, ktag):
    if lanes(ktag):  # k <= SMALL_K: the k sums in one vector (_lanes: the same bits)
        def vector(Wm, data, indices, lo, hi, bias, s, k, ktag):
            acc = lanes_zero(ktag)
            for p in range(lo, hi):
                acc = lanes_madd(acc, data[p], lanes_load_row(Wm, indices[p], ktag))
            if bias != 0.0:
                acc = lanes_madd(acc, bias, lanes_load_row(Wm, Wm.shape[0] - 1, ktag))
            lanes_store(acc, s)
            hold((Wm, data, indices))
        return vector

    def scalar(Wm, data, indices, lo, hi, bias, s, k, ktag):
        for j in range(k):
            s[j] = 0.0
        ahead = _prefetch_end(lo, hi, k)
        for p in range(lo, hi):
            if p < ahead:
                _prefetch_row(Wm, indices[p + PREFETCH_AHEAD], k)
            _gather(s, Wm, indices[p], data[p], k)
        if bias != 0.0:
            _gather(s, Wm, Wm.shape[0] - 1, bias, k)
        hold((Wm, data, indices, s))
    return scalar


def _scores_dense(Wm, x, bias, s, k, ktag):
    """``s = Wm^T x`` for a dense row (its zeros skipped), plus the intercept."""
    raise NotImplementedError  # compiled only, through the overload below


@overload(_scores_dense, inline="always")
def _scores_dense_impl(Wm, x, bias, s, k, ktag):
    if lanes(ktag):
        def vector(Wm, x, bias, s, k, ktag):
            acc = lanes_zero(ktag)
            for f in range(x.shape[0]):
                if x[f] != 0.0:
                    acc = lanes_madd(acc, x[f], lanes_load_row(Wm, f, ktag))
            if bias != 0.0:
                acc = lanes_madd(acc, bias, lanes_load_row(Wm, Wm.shape[0] - 1, ktag))
            lanes_store(acc, s)
            hold((Wm, x))
        return vector

    def scalar(Wm, x, bias, s, k, ktag):
        for j in range(k):
            s[j] = 0.0
        for f in range(x.shape[0]):
            if x[f] != 0.0:
                _gather(s, Wm, f, x[f], k)
        if bias != 0.0:
            _gather(s, Wm, Wm.shape[0] - 1, bias, k)
        hold((Wm, x, s))
    return scalar


@njit(cache=True, nogil=True, inline="always")
def _pair_end(Wm, bias, acc1, acc2, s1, s2, ktag):
    """:func:`_scores_pair`'s last step for both rows: the intercept added, the scores stored."""
    if bias != 0.0:
        last = lanes_load_row(Wm, Wm.shape[0] - 1, ktag)
        acc1 = lanes_madd(acc1, bias, last)
        acc2 = lanes_madd(acc2, bias, last)
    lanes_store(acc1, s1)
    lanes_store(acc2, s2)
    hold((Wm, s1, s2))


def _scores_pair(Wm, X, i1, i2, bias, s1, s2, ktag):
    """The scores of rows ``i1`` and ``i2`` of ``X`` for the objective pass (``k <= SMALL_K``:
    lanes), each row's sums in the order :func:`row_scores` adds them, two chains at once.

    A CSR row's scores are :func:`row_scores`' bits.  A dense row's zeros are added rather
    than skipped (``0 * w``: a branch per value costs more than the add; docs/benchmarks-archive.md,
    "The objective pass"), which can change only the sign of a score that is zero: every
    hinge term and near-flag, ``1 - (s_y - s_c)``, is the same bits either way (``x - (+-0) = x``,
    ``(+-0) - x = -x``, ``1 - (+-0) = 1``; ``W`` and ``x`` are finite)."""
    raise NotImplementedError  # compiled only, through the overload below


@overload(_scores_pair, inline="always")
def _scores_pair_impl(Wm, X, i1, i2, bias, s1, s2, ktag):
    # An objective pass scores rows at a fixed W, so rows are independent; one row's
    # gather is a chain of dependent adds (its accumulator), which leaves the CPU's adders
    # idle between them: two rows' chains interleaved keep them busier (CSR rows; on dense
    # rows adding the zeros without a branch is what counts, docs/benchmarks-archive.md, "The
    # objective pass").
    if not lanes(ktag):  # the callers' `if len(ktag):` is pruned before typing in the generic build
        return None
    if isinstance(X, types.BaseTuple):
        def csr(Wm, X, i1, i2, bias, s1, s2, ktag):
            data, indices, indptr = X[0], X[1], X[2]
            lo1, hi1, lo2, hi2 = indptr[i1], indptr[i1 + 1], indptr[i2], indptr[i2 + 1]
            both = min(hi1 - lo1, hi2 - lo2)
            acc1 = lanes_zero(ktag)
            acc2 = lanes_zero(ktag)
            for q in range(both):
                acc1 = lanes_madd(acc1, data[lo1 + q], lanes_load_row(Wm, indices[lo1 + q], ktag))
                acc2 = lanes_madd(acc2, data[lo2 + q], lanes_load_row(Wm, indices[lo2 + q], ktag))
            for p in range(lo1 + both, hi1):
                acc1 = lanes_madd(acc1, data[p], lanes_load_row(Wm, indices[p], ktag))
            for p in range(lo2 + both, hi2):
                acc2 = lanes_madd(acc2, data[p], lanes_load_row(Wm, indices[p], ktag))
            _pair_end(Wm, bias, acc1, acc2, s1, s2, ktag)
            hold((Wm, data, indices, indptr))
        return csr

    def dense(Wm, X, i1, i2, bias, s1, s2, ktag):
        acc1 = lanes_zero(ktag)
        acc2 = lanes_zero(ktag)
        for f in range(X.shape[1]):  # zeros added, not skipped (no branch; see the docstring)
            w = lanes_load_row(Wm, f, ktag)
            acc1 = lanes_madd(acc1, X[i1, f], w)
            acc2 = lanes_madd(acc2, X[i2, f], w)
        _pair_end(Wm, bias, acc1, acc2, s1, s2, ktag)
        hold((Wm, X))
    return dense


@njit(cache=True, nogil=True, inline="always")
def _add_feature(Wm, f, a, dk, cls, n, k, few, ktag):
    """Feature ``f``'s share of step 4: all classes, or only ``cls[:n]`` when ``few``."""
    if few:
        _add_row_some(Wm, f, a, dk, cls, n)
    else:
        _add_rows(Wm, f, a, dk, k, ktag)


def _add_rows(Wm, f, a, dk, k, ktag):
    """``Wm[f, :] += a * dk`` (all classes): k lanes in one vector when ``k <= SMALL_K``."""
    raise NotImplementedError  # compiled only, through the overload below


@overload(_add_rows, inline="always")
def _add_rows_impl(Wm, f, a, dk, k, ktag):
    if lanes(ktag):
        def vector(Wm, f, a, dk, k, ktag):
            lanes_store_row(lanes_madd(lanes_load_row(Wm, f, ktag), a, lanes_load(dk, ktag)), Wm, f)
        return vector

    def scalar(Wm, f, a, dk, k, ktag):
        _add_row(Wm, f, a, dk, k)
    return scalar


@njit(cache=True, nogil=True, inline="always")
def _scatter_csr(Wm, data, indices, lo, hi, bias, dk, cls, n, k, few, ktag):
    """Step 4 for a CSR row (``few`` tested once per row, not per feature)."""
    if few:
        for p in range(lo, hi):
            _add_row_some(Wm, indices[p], data[p], dk, cls, n)
    else:
        for p in range(lo, hi):
            _add_rows(Wm, indices[p], data[p], dk, k, ktag)
    if bias != 0.0:
        _add_feature(Wm, Wm.shape[0] - 1, bias, dk, cls, n, k, few, ktag)


@njit(cache=True, nogil=True, inline="always")
def _scatter_dense(Wm, x, bias, dk, cls, n, k, few, ktag):
    """Step 4 for a dense row (its zeros skipped)."""
    if few:
        for f in range(x.shape[0]):
            if x[f] != 0.0:
                _add_row_some(Wm, f, x[f], dk, cls, n)
    else:
        for f in range(x.shape[0]):
            if x[f] != 0.0:
                _add_rows(Wm, f, x[f], dk, k, ktag)
    if bias != 0.0:
        _add_feature(Wm, Wm.shape[0] - 1, bias, dk, cls, n, k, few, ktag)


@njit(cache=True, nogil=True, inline="always")
def _row_step(s, y, sq, brow, C, solver, eps, v, bnew, dk, idx, grad, cls, k):
    """Steps 2-4 of the inner iteration; returns how many classes' weights change.

    On return ``dk`` (length k) holds the change of ``W^T``'s row multiplier:
    ``W[f, :] += x_f * dk`` applies step 4; ``dk`` is non-zero only at the
    classes ``cls[:n]`` (``n`` the return value; 0: ``beta_i`` did not change).
    """
    m = k - 1
    sy = s[y]
    bsum = 0.0
    for t in range(m):
        bsum += brow[t]
    for t in range(m):
        v[t] = v_entry(sy, s[c_index(t, y)], sq, brow[t], bsum)
    if C == 0.0:  # a zero-weight (or held-out) row: its box is {0}
        for t in range(m):
            bnew[t] = 0.0
    elif solver == SHARK:
        shark_kernel(v, brow, C, sq, eps, bnew, grad)
    else:
        _exact_step(v, C, bnew, idx, solver)
    n = 0
    total = 0.0
    for t in range(m):
        d = bnew[t] - brow[t]
        c = c_index(t, y)
        if d != 0.0:
            cls[n] = c
            n += 1
        dk[c] = -d
        total += d
        brow[t] = bnew[t]
    dk[y] = total
    if total != 0.0:
        cls[n] = y
        n += 1
    return n


@njit(cache=True, nogil=True, inline="always")
def _exact_step(v, C, out, idx, solver):
    """The exact block step for ``v`` into ``out``: Walrus over the box, or for Crammer-Singer
    (``solver == SIMPLEX``) the simplex step."""
    if solver == SIMPLEX:
        simplex_kernel(v, C, out, idx)
    else:
        walrus_kernel(v, C, out, idx)


@njit(cache=True, nogil=True, inline="always")
def _zero_row(brow, C, solver):
    """The exact block minimizer of a row with ``||x_i|| = 0``: the box's corner ``C``, or
    for Crammer-Singer (``solver == SIMPLEX``) the simplex's vertex ``(C, 0, ..., 0)``."""
    for t in range(brow.shape[0]):
        brow[t] = C if t == 0 or solver != SIMPLEX else 0.0


@njit(cache=True, nogil=True, inline="always")
def _live(near, mdl, i, bm, C, sq, shrink, km, at, solver, test_only=False):
    """Row ``i``'s coordinates in play this pass, from its own ``beta``: 0 (skipped: held out
    and at 0, a zero row, whose ``beta`` is set to its minimizer here, or none in play, or
    settled at its bounds with ``shrink == PINS``), ``km`` (the full step), or fewer
    (``at[:na]``, shrinking): the block pass's stage 0 and the sequential pass's list of the
    rows that step (:func:`_live_rows`; ``test_only``: 1 for a row that steps, else 0, ``at`` unset).
    The sequential pass (:func:`_bcd_pass`) and the flow pass
    (:func:`streamwww.backends._flow_kernels._flow`) spell the same rules out in their row
    loops, calling :func:`_active_coords` as this helper does: there an inlined call of this
    helper makes the row loop slower.  A change of the rules is made in all three."""
    if C == 0.0 and _at_zero(bm[i]):
        return 0
    if sq == 0.0:
        _zero_row(bm[i], C, solver)
        return 0
    if shrink and C != 0.0:
        if test_only:
            return _any_active(near[mdl, i], bm[i], C, shrink == PINS)
        return _active_coords(near[mdl, i], bm[i], at, C, shrink == PINS)
    return km


@njit(cache=True, nogil=True, inline="always")
def _any_active(near_row, brow, C, pin):
    """1 if the row steps (:func:`_active_coords` names some coordinate), else 0; it stops at
    the first coordinate in play that is not :func:`settled` (any, without ``pin``)."""
    for t in range(brow.shape[0]):
        if in_play(near_row[t], brow[t]) and not (pin and settled(near_row[t], brow[t], C)):
            return 1
    return 0


@njit(cache=True, nogil=True, inline="always")
def _few(n, k, ktag):
    """Scatter only the changed classes?  When at most half change, for generic k.

    Skipping the classes whose ``dk`` is 0 leaves ``W`` bitwise the same: adding
    ``x * 0.0`` never changes a float (``W`` is never ``-0.0``).  Near the
    optimum few of the k classes change per row, as the authors' C++
    implementation also exploits.
    """
    return len(ktag) == 0 and 0 < n and 2 * n <= k


@njit(cache=True, nogil=True, inline="always")
def _gather_some(s, Wm, f, a, y, cls, na):
    """``s[j] += a * Wm[f, j]`` for ``j = y`` and the classes ``cls[:na]``."""
    s[y] += a * Wm[f, y]
    for q in range(na):
        j = cls[q]
        s[j] += a * Wm[f, j]


@njit(cache=True, nogil=True, inline="always")
def _scores_some_csr(Wm, data, indices, lo, hi, bias, s, y, cls, na, k):
    """The scores of ``y`` and ``cls[:na]`` only: each is the same sum, in the same
    order, as :func:`_scores_csr` forms (bitwise the same value)."""
    s[y] = 0.0
    for q in range(na):
        s[cls[q]] = 0.0
    ahead = _prefetch_end(lo, hi, k)
    whole = 8 * (na + 1) > k  # more classes in play than lines: the whole row
    for p in range(lo, hi):
        if p < ahead:
            g = indices[p + PREFETCH_AHEAD]
            if whole:
                _prefetch_row(Wm, g, k)
            else:
                _prefetch(Wm, g, y)
                for q in range(na):
                    _prefetch(Wm, g, cls[q])
        _gather_some(s, Wm, indices[p], data[p], y, cls, na)
    if bias != 0.0:
        _gather_some(s, Wm, Wm.shape[0] - 1, bias, y, cls, na)


@njit(cache=True, nogil=True, inline="always")
def _scores_some_dense(Wm, x, bias, s, y, cls, na, k):
    s[y] = 0.0
    for q in range(na):
        s[cls[q]] = 0.0
    for f in range(x.shape[0]):
        if x[f] != 0.0:
            _gather_some(s, Wm, f, x[f], y, cls, na)
    if bias != 0.0:
        _gather_some(s, Wm, Wm.shape[0] - 1, bias, y, cls, na)


@njit(cache=True, nogil=True, inline="always")
def _active_coords(near_row, brow, at, C, pin):
    """Shrinking: the coordinates ``t`` of ``beta_i`` this pass updates (into ``at``;
    returns how many): those not at 0, and those whose margin was within reach of
    the hinge (``near_row[t]``) at the last objective pass.  The others are at 0 and
    were satisfied with room to spare; the row's step keeps them at 0.

    With ``pin``, none (0) when every coordinate in play sits at the row's bound ``C``
    with its flag set: the row's KKT conditions held at the ``W`` of the flags (a
    coordinate at its upper bound whose term ``1 - (s_y - s_c(t))`` is positive, the others
    at 0 with their flags unset), so its step is left out as a settled coordinate's is
    (engine.shrink, rule 3)."""
    na = 0
    pinned = pin
    for t in range(brow.shape[0]):
        if in_play(near_row[t], brow[t]):
            at[na] = t
            na += 1
            if not settled(near_row[t], brow[t], C):
                pinned = False
    return 0 if pinned else na


@njit(cache=True, nogil=True, inline="always")
def _row_step_some(s, y, sq, brow, C, at, na, v, bnew, dk, idx, cls, solver):
    """:func:`_row_step` (Walrus, or the simplex step) on the coordinates ``at[:na]``, the others held at 0:
    the exact minimizer of the row's subproblem restricted to them (the same problem
    on fewer coordinates, since the held ones are 0).  ``cls[:na]`` must hold their
    classes ``c(at[q])``; on return ``cls[:n]`` holds the changed classes as in
    :func:`_row_step`, whose ``dk`` is set (the scatter must be the partial one)."""
    sy = s[y]
    bsum = 0.0
    for t in range(brow.shape[0]):
        bsum += brow[t]
    for q in range(na):
        t = at[q]
        v[q] = v_entry(sy, s[c_index(t, y)], sq, brow[t], bsum)
    _exact_step(v[:na], C, bnew[:na], idx[:na], solver)
    n = 0
    total = 0.0
    for q in range(na):
        t = at[q]
        d = bnew[q] - brow[t]
        if d != 0.0:
            c = c_index(t, y)
            cls[n] = c
            n += 1
            dk[c] = -d
            total += d
            brow[t] = bnew[q]
    dk[y] = total
    if total != 0.0:
        cls[n] = y
        n += 1
    return n


def row_scores_some(Wm, X, i, bias, s, y, cls, na, k):
    """The scores of class ``y`` and classes ``cls[:na]`` of row ``i`` (the others untouched)."""
    raise NotImplementedError  # compiled only, through the overload below


@overload(row_scores_some, inline="always")
def _row_scores_some_impl(Wm, X, i, bias, s, y, cls, na, k):
    if isinstance(X, types.BaseTuple):
        def csr(Wm, X, i, bias, s, y, cls, na, k):
            _scores_some_csr(Wm, X[0], X[1], X[2][i], X[2][i + 1], bias, s, y, cls, na, k)
        return csr

    def dense(Wm, X, i, bias, s, y, cls, na, k):
        _scores_some_dense(Wm, X[i], bias, s, y, cls, na, k)
    return dense


def row_scores(Wm, X, i, bias, s, k, ktag):
    """``s = Wm^T x_i`` (plus the intercept); ``X`` a dense array or a CSR ``(data, indices, indptr)``."""
    raise NotImplementedError  # compiled only, through the overload below


def row_scatter(Wm, X, i, bias, dk, cls, n, k, few, ktag):
    """``Wm[f, :] += x_if * dk`` for the row's features (only classes ``cls[:n]`` when ``few``)."""
    raise NotImplementedError


@overload(row_scores, inline="always")
def _row_scores_impl(Wm, X, i, bias, s, k, ktag):
    if isinstance(X, types.BaseTuple):
        def csr(Wm, X, i, bias, s, k, ktag):
            _scores_csr(Wm, X[0], X[1], X[2][i], X[2][i + 1], bias, s, k, ktag)
        return csr

    def dense(Wm, X, i, bias, s, k, ktag):
        _scores_dense(Wm, X[i], bias, s, k, ktag)
    return dense


@overload(row_scatter, inline="always")
def _row_scatter_impl(Wm, X, i, bias, dk, cls, n, k, few, ktag):
    if isinstance(X, types.BaseTuple):
        def csr(Wm, X, i, bias, dk, cls, n, k, few, ktag):
            _scatter_csr(Wm, X[0], X[1], X[2][i], X[2][i + 1], bias, dk, cls, n, k, few, ktag)
        return csr

    def dense(Wm, X, i, bias, dk, cls, n, k, few, ktag):
        _scatter_dense(Wm, X[i], bias, dk, cls, n, k, few, ktag)
    return dense


@njit(cache=True, nogil=True, inline="always")
def _at_zero(brow):
    """Is ``beta_i`` zero (``beta >= 0``, so a zero sum says so)?"""
    total = 0.0
    for t in range(brow.shape[0]):
        total += brow[t]
    return total == 0.0


@njit(cache=True, nogil=True, inline="always")
def _live_rows(order, rows, bm, near, mdl, sqnorms, y, weights, trains, split, Cm, solver, shrink, at):
    """The rows of ``order`` that step in a shrinking pass, in order, into ``rows`` (how many
    returned); a zero row's ``beta`` is set here (:func:`_live`'s rules)."""
    nr = 0
    ahead = order.shape[0] - ROWS_AHEAD
    for p in range(order.shape[0]):
        i = order[p]
        if p < ahead:
            _prefetch_visit(bm, near, mdl, sqnorms, y, weights, trains, order[p + ROWS_AHEAD], True)
        C = Cm * row_weight(weights, trains, split, i)
        if _live(near, mdl, i, bm, C, sqnorms[i], shrink, 1, at, solver, True):
            rows[nr] = i
            nr += 1
    hold((order, rows, bm, near, sqnorms, y, weights, trains, at))
    return nr


@njit(cache=True, nogil=True, inline="always")
def step_row(Wm, X, i, yi, sq, brow, C, bias, solver, eps, na, k, ktag, s, dk, v, bnew, grad, idx, cls, at):
    """Row ``i``'s exact block step and its update of ``Wm``, the sequential pass's visit of a
    row that steps: its scores at ``Wm``, the step of ``brow`` (``beta_i``; box ``C``), and
    ``Wm += x_i dk^T`` over the changed classes.  ``na`` coordinates in play: ``k - 1`` (the
    full step) or fewer, named by ``at[:na]`` (shrinking: the step on them, the others held
    at 0).  Reads and writes only the rows of ``Wm`` of row ``i``'s features (and the
    intercept's, ``bias != 0``)."""
    if na < k - 1:
        for q in range(na):
            cls[q] = c_index(at[q], yi)
        if len(ktag):  # k lanes in one vector: all k sums cost what a few would
            row_scores(Wm, X, i, bias, s, k, ktag)
            for j in range(k):
                dk[j] = 0.0  # the step sets the changed classes': all k scatter
        else:
            row_scores_some(Wm, X, i, bias, s, yi, cls, na, k)
        n = _row_step_some(s, yi, sq, brow, C, at, na, v, bnew, dk, idx, cls, solver)
        if n:
            row_scatter(Wm, X, i, bias, dk, cls, n, k, len(ktag) == 0, ktag)
        return
    row_scores(Wm, X, i, bias, s, k, ktag)
    n = _row_step(s, yi, sq, brow, C, solver, eps, v, bnew, dk, idx, grad, cls, k)
    if n:
        row_scatter(Wm, X, i, bias, dk, cls, n, k, _few(n, k, ktag), ktag)


def _bcd_pass(W, X, y, sqnorms, weights, trains, beta, Cs, splits, models, order, near, pin, bias, solver, eps,
              ktag):
    """One exact BCD pass over the rows ``order`` of ``X`` (dense, or a CSR
    ``(data, indices, indptr)`` tuple) for each model in ``models``.

    Row ``i`` of model ``mdl`` has the box ``[0, Cs[mdl] * w]``, ``w`` its
    :func:`row_weight` for the model's split ``splits[mdl]``; a row whose box is
    ``{0}`` and whose ``beta_i`` is already 0 is skipped (cross-validation's held-out rows).

    Shrinking (``near`` of shape ``(M, n, m)``; shape ``(0, 0, 0)``: none): row ``i``
    of model ``mdl`` updates only the coordinates :func:`_active_coords` names from
    ``near[mdl, i]`` (with ``pin``, none for a row settled at its bounds); a row with none
    is skipped, a row with all takes the full step.
    Exact steps only (the Shark solver ignores ``near``).  On data larger than the caches a
    shrinking pass lists the rows that step first (:func:`_live_rows`), then steps them.
    """
    k = _n_classes(W, ktag)
    m = k - 1
    shrink = shrink_mode(near, solver, pin)
    for mi in prange(models.shape[0]):
        mdl = models[mi]
        Wm = W[mdl]
        bm = beta[mdl]
        Cm = Cs[mdl]
        split = splits[mdl]
        s = np.empty(k)
        dk = np.empty(k)
        v = np.empty(m)
        bnew = np.empty(m)
        grad = np.empty(m)
        idx = np.empty(m, dtype=np.int64)
        cls = np.empty(k, dtype=np.int64)
        at = np.empty(m, dtype=np.int64)
        far = _far(bm.shape[0] * bm.shape[1])
        rows = order
        nr = order.shape[0]
        if far and shrink:
            rows = np.empty_like(order)
            nr = _live_rows(order, rows, bm, near, mdl, sqnorms, y, weights, trains, split, Cm, solver, shrink, at)
        ahead = nr - ROWS_AHEAD if far else 0
        for p in range(nr):
            i = rows[p]
            if p < ahead:
                _prefetch_visit(bm, near, mdl, sqnorms, y, weights, trains, rows[p + ROWS_AHEAD], shrink)
                _prefetch_start(X, rows[p + ROWS_AHEAD])
                _prefetch_x(X, rows[p + ROWS_AHEAD // 2])
            C = Cm * row_weight(weights, trains, split, i)
            # (the rules of _live, spelled out: see there)
            if C == 0.0 and _at_zero(bm[i]):
                continue
            sq = sqnorms[i]
            if sq == 0.0:
                _zero_row(bm[i], C, solver)
                continue
            na = m
            if shrink and C != 0.0:
                na = _active_coords(near[mdl, i], bm[i], at, C, shrink == PINS)
                if na == 0:
                    continue
            step_row(Wm, X, i, y[i], sq, bm[i], C, bias, solver, eps, na, k, ktag, s, dk, v, bnew, grad, idx, cls,
                     at)


# One implementation, two compilations: the parallel build runs models on
# separate threads; the serial build (prange acts as range) avoids opening a
# thread-pool region per pass when there is a single model.
bcd_pass, bcd_pass_serial = two_builds(_bcd_pass)


@njit(cache=True, nogil=True, inline="always")
def _row_hinge(s, y, k, loss_id):
    """Row hinge at scores ``s``: WW's sum over the classes ``j != y`` of
    ``max(0, 1 - (s_y - s_j))``, or Crammer-Singer's maximum of them."""
    sy = s[y]
    cs = loss_id == CS_LOSS
    loss = 0.0
    # (one loop, the loss chosen per term on scalars: a branch around the loop's reads of
    # ``s`` would cost reference counts per row)
    for j in range(k):
        if j != y:
            h = hinge_term(sy, s[j])
            loss = max(loss, h) if cs else loss + h
    return loss


@njit(cache=True, nogil=True, inline="always")
def _objective_row(Wm, X, y, weights, trains, split, bias, i, s, near, mdl, reach, cs_near, k, ktag, record,
                   loss_id):
    """Row ``i``'s weighted hinge loss at ``Wm`` (0.0 and ``False`` for a row of weight 0,
    which is not scored); with ``record``, its near-flags ``near[mdl, i, t]``: 1 where the
    margin of class ``c(t)`` is below ``1 + reach`` and, for Crammer-Singer, its term
    ``1 - (s_y - s_c(t))`` within ``cs_near`` of the row's largest (:func:`near_floor`;
    engine.shrink), 0 elsewhere and for an unscored row."""
    w = row_weight(weights, trains, split, i)
    if w != 0.0:
        row_scores(Wm, X, i, bias, s, k, ktag)
    hold((Wm, X))
    return _objective_of(w, s, y, i, near, mdl, reach, cs_near, k, record, loss_id)


@njit(cache=True, nogil=True, inline="always")
def _objective_pair(Wm, X, y, weights, trains, split, bias, i1, i2, s1, s2, near, mdl, reach, cs_near, k, ktag,
                    record, loss_id):
    """:func:`_objective_row` of rows ``i1`` and ``i2`` (``k <= SMALL_K``), scored together by
    :func:`_scores_pair`: ``(loss1, scored1, loss2, scored2)``, the one-row results' bits."""
    _scores_pair(Wm, X, i1, i2, bias, s1, s2, ktag)
    loss1, scored1 = _objective_of(row_weight(weights, trains, split, i1), s1, y, i1, near, mdl, reach, cs_near, k,
                                   record, loss_id)
    loss2, scored2 = _objective_of(row_weight(weights, trains, split, i2), s2, y, i2, near, mdl, reach, cs_near, k,
                                   record, loss_id)
    hold((Wm, X))
    return loss1, scored1, loss2, scored2


@njit(cache=True, nogil=True, inline="always")
def _objective_of(w, s, y, i, near, mdl, reach, cs_near, k, record, loss_id):
    """:func:`_objective_row` once row ``i``'s scores are in ``s`` (unread when ``w`` is 0)."""
    m = k - 1
    loss = 0.0
    if w == 0.0:
        if record:
            for t in range(m):
                near[mdl, i, t] = 0
    else:
        hinge = _row_hinge(s, y[i], k, loss_id)
        if record:
            sy = s[y[i]]
            floor = near_floor(hinge, loss_id, cs_near)
            for t in range(m):
                h = 1.0 - (sy - s[c_index(t, y[i])])
                near[mdl, i, t] = 1 if h > -reach and h >= floor else 0
        loss = w * hinge
    hold((s, y, near))  # one exit, every array held to it: no refcounts per row
    return loss, w != 0.0


def _hinge_sum(W, X, y, weights, trains, splits, bias, models, out, near, reach, cs_near, loss_id, ktag):
    """``out[mi] = sum_i w_i sum_{j != y_i} max(0, 1 - (s_y - s_j))`` for model ``models[mi]``
    (``w_i`` the row's :func:`row_weight`; rows of weight 0 are not scored), the rows added
    in storage order; with ``loss_id == CS_LOSS`` the maximum over ``j`` replaces the sum.

    With ``near`` of shape ``(M, n, m)`` (else ``(0, 0, 0)``) it also records, for
    shrinking, ``near[models[mi], i, t] = 1`` where ``1 - (s_y - s_c(t)) > -reach``:
    the margin of class ``c(t)`` is below ``1 + reach`` (for Crammer-Singer also within
    ``cs_near`` of the row's largest term: :func:`_objective_row`; 0 for unscored rows)."""
    k = _n_classes(W, ktag)
    record = near.shape[1] > 0
    n = y.shape[0]
    for mi in prange(models.shape[0]):
        mdl = models[mi]
        s = np.empty(k)
        s2 = np.empty(k)
        total = 0.0
        start = 0
        if len(ktag):  # k <= SMALL_K: two rows scored at once (_scores_pair), added in order
            start = n - n % 2
            for i in range(0, start, 2):
                loss, scored, loss2, scored2 = _objective_pair(W[mdl], X, y, weights, trains, splits[mdl], bias, i,
                                                               i + 1, s, s2, near, mdl, reach, cs_near, k, ktag,
                                                               record, loss_id)
                if scored:
                    total += loss
                if scored2:
                    total += loss2
        far = _far_w(W, k, ktag)
        for i in range(start, n):
            if far and i + 1 < n:
                _prefetch_w(W[mdl], X, i + 1, k)
            loss, scored = _objective_row(W[mdl], X, y, weights, trains, splits[mdl], bias, i, s, near, mdl,
                                          reach, cs_near, k, ktag, record, loss_id)
            if scored:
                total += loss
        out[mi] = total


def _hinge_rows(W, X, y, weights, trains, splits, bias, models, rows, h, near, reach, cs_near, loss_id, ktag):
    """:func:`_hinge_sum`'s terms, row by row: ``h[mi, i]`` for the rows ``rows`` (0.0 for an
    unscored row), and their near-flags.  Added in storage order (:func:`ordered_sum`) they
    are :func:`_hinge_sum`'s total, bitwise (adding 0.0 changes no sum)."""
    k = _n_classes(W, ktag)
    record = near.shape[1] > 0
    n = rows.shape[0]
    # (the rows may be any subset in any order: each row's lines are asked for ahead)
    ahead = n - ROWS_AHEAD if _far(y.shape[0] * (k - 1)) else 0
    for mi in prange(models.shape[0]):
        mdl = models[mi]
        s = np.empty(k)
        s2 = np.empty(k)
        start = 0
        if len(ktag):  # k <= SMALL_K: two rows scored at once, as in _hinge_sum
            start = n - n % 2
            for q in range(0, start, 2):
                if q + 1 < ahead:
                    _prefetch_scored(X, y, weights, trains, near, mdl, h, mi, rows, q, record)
                    _prefetch_scored(X, y, weights, trains, near, mdl, h, mi, rows, q + 1, record)
                i, i2 = rows[q], rows[q + 1]
                loss, _, loss2, _ = _objective_pair(W[mdl], X, y, weights, trains, splits[mdl], bias, i, i2, s, s2,
                                                    near, mdl, reach, cs_near, k, ktag, record, loss_id)
                h[mi, i] = loss
                h[mi, i2] = loss2
        far = _far_w(W, k, ktag)
        for q in range(start, n):
            i = rows[q]
            if q < ahead:
                _prefetch_scored(X, y, weights, trains, near, mdl, h, mi, rows, q, record)
            if far and q + 1 < n:
                _prefetch_w(W[mdl], X, rows[q + 1], k)
            h[mi, i] = _objective_row(W[mdl], X, y, weights, trains, splits[mdl], bias, i, s, near, mdl,
                                      reach, cs_near, k, ktag, record, loss_id)[0]


# As for the passes: models in parallel, and a serial build for one model (a
# thread-pool region per shard can cost more than the evaluation on a busy machine).
hinge_sum, hinge_sum_serial = two_builds(_hinge_sum)
hinge_rows, hinge_rows_serial = two_builds(_hinge_rows)


@njit(cache=True, nogil=True)
def ordered_sums(h, lo, hi, out):
    """``out[mi] = h[mi, lo] + h[mi, lo + 1] + ... + h[mi, hi - 1]``, added left to right."""
    for mi in range(h.shape[0]):
        total = 0.0
        for i in range(lo, hi):
            total += h[mi, i]
        out[mi] = total


# Serial and GIL-free: shards are prepared on loader threads while a pass runs.
@njit(cache=True, nogil=True)
def row_sqnorms_csr(data, indptr, bias, out):
    """Squared row norms of a CSR matrix (plus ``bias**2``), accumulated in float64."""
    for i in range(indptr.shape[0] - 1):
        acc = bias * bias
        for p in range(indptr[i], indptr[i + 1]):
            a = np.float64(data[p])
            acc += a * a
        out[i] = acc


@njit(cache=True, nogil=True)
def row_sqnorms_dense(X, bias, out):
    """Squared row norms of a dense matrix (plus ``bias**2``), accumulated in float64."""
    for i in range(X.shape[0]):
        acc = bias * bias
        for f in range(X.shape[1]):
            a = np.float64(X[i, f])
            acc += a * a
        out[i] = acc
