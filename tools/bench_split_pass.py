"""Two experimental threaded passes for one model, with one spin barrier per row (issue 54).

    python tools/bench_split_pass.py [--data sector] [--data-dir ../shared/data/libsvm] [--epochs 30]
                                     [--reps 15] [--ranges 1,2,4] [--groups 1,8,64] [--threads 1,2]

Not product code: the passes below are written here only to measure whether a per-row
barrier pays, against the sequential pass (``CPUBackend.bcd_pass``, one thread).  Both run on
``P`` Python threads that each call a ``nogil`` Numba function, meet at a barrier (an atomic
counter, spinning with ``pause``, then ``sched_yield``) once per row that steps, and solve the
row's exact block step redundantly, each on its own copy of ``beta_i`` (thread 0 writes it):

``feature ranges`` (``--ranges R``)
    ``W``'s rows are cut into ``R`` ranges of about equal nonzeros (fixed by the data, not by
    ``P``); thread ``t`` sums each row's scores over the ranges ``t, t + P, ...`` into
    per-range partials, every thread adds the ``R`` partials in range order after the
    barrier, and updates ``W`` on its own ranges (so the next row's partials need no second
    barrier).  The model depends on ``R`` (another summation order), never on ``P``.
``classes`` (``--groups G``)
    thread ``t`` owns the classes ``c`` with ``(c // G) % P == t``: their scores, summed in the
    row's storage order as the sequential pass sums them, and their updates.  The model is
    bitwise the sequential pass's for any ``P`` and ``G``.

The state is a late one (``--epochs`` sequential epochs with shrinking, its sets from the last
objective pass), where a pass visits a few classes of most rows; every timed pass starts from
a copy of it, in the same row order for every variant.  Prints whether each variant's model
equals the sequential pass's bitwise (or by how much it differs) and equals itself across
``P``, then the median time of a pass.  A barrier per row needs every thread on a core of its
own: on a machine where another process runs, take the measurement under a real-time
priority (``chrt -f 50 python tools/bench_split_pass.py ...``) or read the numbers as
that machine's (docs/benchmarks.md, "Threads for one model").
"""

from __future__ import annotations

import argparse
import ctypes
import lzma
import os
import sys
import tempfile
import threading
import time

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from streamwww.backends._kernels import (  # noqa: E402
    PREFETCH_AHEAD,
    _active_coords,
    _prefetch,
    _row_step_some,
    _scores_some_csr,
)
from streamwww.backends.base import make_block  # noqa: E402
from streamwww.backends.cpu import CPUBackend  # noqa: E402
from streamwww.backends.rowmath import c_index  # noqa: E402
from streamwww.solvers import WALRUS, WW_LOSS  # noqa: E402


@intrinsic
def _atomic_add(typingctx, arr, i, v):
    def codegen(context, builder, sig, args):
        ary = context.make_array(sig.args[0])(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, sig.args[0], ary, [args[1]], wraparound=False)
        return builder.atomic_rmw("add", ptr, args[2], "seq_cst")
    return types.int64(arr, i, v), codegen


@intrinsic
def _atomic_load(typingctx, arr, i):
    def codegen(context, builder, sig, args):
        ary = context.make_array(sig.args[0])(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, sig.args[0], ary, [args[1]], wraparound=False)
        return builder.load_atomic(ptr, "acquire", 8)
    return types.int64(arr, i), codegen


@intrinsic
def _pause(typingctx):
    def codegen(context, builder, sig, args):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), []),
                                            "llvm.x86.sse2.pause")
        builder.call(fn, [])
        return context.get_dummy_value()
    return types.void(), codegen


_sched_yield = ctypes.CDLL(None).sched_yield
_sched_yield.restype = ctypes.c_int
_sched_yield.argtypes = ()


@njit(nogil=True, inline="always")
def _barrier(bar, nbar, P):
    """Arrive at barrier number ``nbar`` (1, 2, ...) of ``P`` threads and wait for the others."""
    _atomic_add(bar, 0, 1)
    spins = 0
    while _atomic_load(bar, 0) < nbar * P:
        spins += 1
        if spins < 2000:
            _pause()
        else:
            _sched_yield()


@njit(nogil=True, inline="always")
def _lower_bound(indices, lo, hi, f):
    while lo < hi:
        mid = (lo + hi) >> 1
        if indices[mid] < f:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(nogil=True, inline="always")
def _row_start(i, y, sqnorms, bm, near, at, cls, bl, t):
    """Row ``i``'s coordinates in play (``at[:na]``, their classes ``cls[:na]``; ``na == 0``:
    the row does not step) and the ``beta_i`` thread ``t`` steps on (thread 0 ``beta`` itself,
    the others a copy taken before the row's barrier, which thread 0 may write after)."""
    brow = bm[i]
    na = 0 if sqnorms[i] == 0.0 else _active_coords(near[i], brow, at)
    for q in range(na):
        cls[q] = c_index(at[q], y[i])
    if t != 0 and na:
        bl[:] = brow
        return na, bl
    return na, brow


@njit(nogil=True)
def ranges_part(Wm, data, indices, indptr, y, sqnorms, bm, C, order, near, bounds, t, P, bar, PART, solver):
    """Thread ``t``'s share of the feature-ranges pass (module docstring); CSR rows, shrinking on."""
    k = Wm.shape[1]
    km = k - 1
    R = bounds.shape[0] - 1
    s = np.empty(k)
    v = np.empty(km)
    bnew = np.empty(km)
    dk = np.empty(k)
    idx = np.empty(km, np.int64)
    cls = np.empty(k, np.int64)
    at = np.empty(km, np.int64)
    bl = np.empty(km)
    sp = np.empty((R, 2), np.int64)
    nbar = 0
    buf = 0
    for p in range(order.shape[0]):
        i = order[p]
        na, brow = _row_start(i, y, sqnorms, bm, near, at, cls, bl, t)
        if na == 0:
            continue
        yi, sq = y[i], sqnorms[i]
        lo, hi = indptr[i], indptr[i + 1]
        for r in range(t, R, P):
            a = _lower_bound(indices, lo, hi, bounds[r])
            b = _lower_bound(indices, a, hi, bounds[r + 1])
            sp[r, 0] = a
            sp[r, 1] = b
            _scores_some_csr(Wm, data, indices, a, b, 0.0, PART[buf, r], yi, cls, na, k)
        nbar += 1
        _barrier(bar, nbar, P)
        part = PART[buf]
        s[yi] = part[0, yi]
        for q in range(na):
            s[cls[q]] = part[0, cls[q]]
        for r in range(1, R):
            s[yi] += part[r, yi]
            for q in range(na):
                s[cls[q]] += part[r, cls[q]]
        n = _row_step_some(s, yi, sq, brow, C, at, na, v, bnew, dk, idx, cls, solver)
        if n:
            for r in range(t, R, P):
                for q in range(sp[r, 0], sp[r, 1]):
                    f = indices[q]
                    a = data[q]
                    for u in range(n):
                        c = cls[u]
                        Wm[f, c] += a * dk[c]
        buf ^= 1  # (a slow thread may still read the last row's partials)
    return nbar


@njit(nogil=True)
def classes_part(Wm, data, indices, indptr, y, sqnorms, bm, C, order, near, G, t, P, bar, SH, solver):
    """Thread ``t``'s share of the classes pass (module docstring); CSR rows, shrinking on."""
    k = Wm.shape[1]
    km = k - 1
    s = np.empty(k)
    v = np.empty(km)
    bnew = np.empty(km)
    dk = np.empty(k)
    idx = np.empty(km, np.int64)
    cls = np.empty(k, np.int64)
    at = np.empty(km, np.int64)
    mine = np.empty(k, np.int64)
    bl = np.empty(km)
    nbar = 0
    buf = 0
    for p in range(order.shape[0]):
        i = order[p]
        na, brow = _row_start(i, y, sqnorms, bm, near, at, cls, bl, t)
        if na == 0:
            continue
        yi, sq = y[i], sqnorms[i]
        nm = 0
        if (yi // G) % P == t:
            mine[nm] = yi
            nm += 1
        for q in range(na):
            if (cls[q] // G) % P == t:
                mine[nm] = cls[q]
                nm += 1
        lo, hi = indptr[i], indptr[i + 1]
        sh = SH[buf]
        for q in range(nm):
            sh[mine[q]] = 0.0
        ahead = hi - PREFETCH_AHEAD
        for pp in range(lo, hi):
            if pp < ahead:
                g = indices[pp + PREFETCH_AHEAD]
                for q in range(nm):
                    _prefetch(Wm, g, mine[q])
            f = indices[pp]
            a = data[pp]
            for q in range(nm):
                c = mine[q]
                sh[c] += a * Wm[f, c]
        nbar += 1
        _barrier(bar, nbar, P)
        s[yi] = sh[yi]
        for q in range(na):
            s[cls[q]] = sh[cls[q]]
        n = _row_step_some(s, yi, sq, brow, C, at, na, v, bnew, dk, idx, cls, solver)
        nm = 0
        for q in range(n):
            if (cls[q] // G) % P == t:
                mine[nm] = cls[q]
                nm += 1
        if nm:
            for pp in range(lo, hi):
                f = indices[pp]
                a = data[pp]
                for q in range(nm):
                    c = mine[q]
                    Wm[f, c] += a * dk[c]
        buf ^= 1
    return nbar


def _threaded(fn, args, tail, P):
    """``fn(*args, t, P, *tail)`` on ``P`` threads (this one is thread 0)."""
    ths = [threading.Thread(target=fn, args=(*args, t, P, *tail)) for t in range(1, P)]
    for th in ths:
        th.start()
    fn(*args, 0, P, *tail)
    for th in ths:
        th.join()


def feature_ranges(indices, D: int, R: int) -> np.ndarray:
    """``R + 1`` bounds of ranges of ``W``'s rows with about equal nonzeros."""
    cum = np.cumsum(np.bincount(indices, minlength=D))
    return np.array([0] + [int(np.searchsorted(cum, r * cum[-1] / R)) for r in range(1, R)] + [D], np.int64)


def load(name: str, data_dir: str):
    from sklearn.datasets import load_svmlight_file

    path = name if os.path.isfile(name) else os.path.join(data_dir, f"{name}.scale.xz")
    if path.endswith(".xz"):
        with lzma.open(path) as f, tempfile.NamedTemporaryFile(suffix=".libsvm") as g:
            g.write(f.read())
            g.flush()
            X, y = load_svmlight_file(g.name)
    else:
        X, y = load_svmlight_file(path)
    X.sort_indices()
    return X, np.unique(y, return_inverse=True)[1].astype(np.int32)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default="sector", help="a LIBSVM set's name in --data-dir, or a file")
    p.add_argument("--data-dir", default=os.path.join(HERE, "..", "..", "shared", "data", "libsvm"))
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--ranges", default="1,2,4")
    p.add_argument("--groups", default="1,8,64")
    p.add_argument("--threads", default="1,2")
    a = p.parse_args()
    X, y = load(a.data, a.data_dir)
    n, d = X.shape
    k = int(y.max()) + 1
    block = make_block(X, y, 0.0)
    Xc = (block.X.data, block.X.indices, block.X.indptr)
    cpu = CPUBackend(1)
    W = np.zeros((1, d, k))
    beta = np.zeros((1, n, k - 1))
    near = np.zeros((1, n, k - 1), np.uint8)
    one, models = np.array([1.0]), np.array([0])
    rng = np.random.default_rng(0)
    for ep in range(a.epochs):
        cpu.bcd_pass(W, block, beta, one, models, rng.permutation(n), 0.0, WALRUS, 0.0, near=near if ep else None)
        if ep % 5 == 0 or ep == a.epochs - 1:
            cpu.hinge_sums(W, block, 0.0, models, near=near, reach=0.0, loss=WW_LOSS)
    inplay = ((near[0] != 0) | (beta[0] != 0)).sum(1)
    print(f"{a.data}: n={n}, d={d}, k={k}, {X.nnz / n:.1f} nonzeros a row; after {a.epochs} epochs "
          f"{(inplay > 0).mean():.1%} of rows step, {inplay[inplay > 0].mean():.1f} coordinates each")
    threads = [int(t) for t in a.threads.split(",")]
    variants = {"sequential": None}
    for R in [int(r) for r in a.ranges.split(",") if r]:
        bounds = feature_ranges(Xc[1], d, R)
        for P in threads:
            variants[f"ranges R={R} P={P}"] = (ranges_part, bounds, P, R)
    for G in [int(g) for g in a.groups.split(",") if g]:
        for P in threads:
            variants[f"classes G={G} P={P}"] = (classes_part, G, P, None)

    def run(name, order):
        W2, b2 = W.copy(), beta.copy()
        t0 = time.perf_counter()
        if variants[name] is None:
            cpu.bcd_pass(W2, block, b2, one, models, order, 0.0, WALRUS, 0.0, near=near)
        else:
            fn, extra, P, R = variants[name]
            bar = np.zeros(16, np.int64)
            scratch = np.zeros((2, R, k + 8)) if R else np.zeros((2, k + 16))
            _threaded(fn, (W2[0], *Xc, y, block.sqnorms, b2[0], 1.0, order, near[0], extra), (bar, scratch, WALRUS),
                      P)
        return time.perf_counter() - t0, W2, b2

    order = rng.permutation(n)
    ref = run("sequential", order)
    by_kind = {}
    for name in variants:
        _, W2, b2 = run(name, order)
        kind = name.rsplit(" P=", 1)[0]
        same_as_P1 = kind in by_kind and np.array_equal(by_kind[kind][0], W2) and np.array_equal(by_kind[kind][1], b2)
        by_kind.setdefault(kind, (W2, b2))
        print(f"  {name:22s} bitwise the sequential pass: {np.array_equal(W2, ref[1]) and np.array_equal(b2, ref[2])}"
              f" (max |dW| {np.abs(W2 - ref[1]).max():.1e})" + (f"; bitwise its P=1 model: {same_as_P1}"
                                                                  if name.endswith(("P=2", "P=3", "P=4")) else ""))
    times = {name: [] for name in variants}
    for _ in range(a.reps):
        order = rng.permutation(n)
        for name in variants:
            times[name].append(run(name, order)[0])
    base = np.median(times["sequential"])
    for name, ts in times.items():
        print(f"  {name:22s} {np.median(ts) * 1e3:8.2f} ms a pass  {np.median(ts) / base:5.2f}x the sequential")


if __name__ == "__main__":
    main()
