"""The flow pass against the sequential pass, pass by pass in one process, and what the machine's
memory gives a second thread.

    python tools/bench_flow.py [--data sector | --gen-rows 1000000 | --banded N,D,K,NNZ]
        [--threads 2] [--epochs 9] [--probe] [--fits N]

Each epoch runs the sequential pass (one thread) and the flow pass (``--threads`` threads) from
the same state in the same seeded order, in alternating order (a VM whose speed drifts over
minutes compares pairs taken seconds apart better than runs taken minutes apart), and checks
that the two leave the same bits (they must: the flow pass is the sequential pass).  Epochs
from ``W = 0``, ``beta = 0``, C = 1, no intercept, no shrinking (every row steps, as in the
first epochs).  Prints each epoch's two times and the median of the paired ratios, leaving
out the first epoch (which compiles).  Also prints the share of 1,024 sampled pairs of
consecutive rows with a feature in common (what the backend's choice reads).

Data: ``--data NAME`` (``NAME.scale.xz`` of ``--data-dir``, or a path); ``--gen-rows N``, the
generated class-specific set of tools/bench_threads.py (made once into ``--work``);
``--banded N,D,K,NNZ``: N rows of K classes, each row NNZ features of its class's band of
D / K features (rows of two classes share none).

``--fits N``: then N pairs of whole fits as a user runs them, ``streamwww.train((X, y),
fit_intercept=False, random_state=0)`` at the defaults otherwise (every usable core, the
default stop), with the backend free to take the flow pass (``STREAMWWW_FLOW_PASS=1``) and kept
from it (the sequential pass and its objective thread, the default), alternating; the
fit's wall time, its epochs, and whether the two models are the same bits.

``--probe``: the memory's answer to a second thread, without streamwww: random reads of a
256 MiB array by one thread and by two (nanoseconds a read, all threads together), and a
chain of dependent reads (each thread's latency).  A pass over data larger than the caches
gains from threads only as far as the memory serves more misses at once.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from _benchenv import header  # noqa: E402
from bench_block_ab import _data  # noqa: E402


def _banded(spec: str):
    import scipy.sparse as sp

    n, d, k, nnz = (int(v) for v in spec.split(","))
    rng = np.random.default_rng(0)
    y = rng.integers(0, k, n).astype(np.int32)
    band = d // k
    ind = np.argsort(rng.random((n, band)), axis=1)[:, :nnz]
    ind = np.sort(ind, axis=1) + (y * band)[:, None]
    X = sp.csr_matrix((rng.random(n * nnz), ind.ravel(), np.arange(0, n * nnz + 1, nnz)), shape=(n, d))
    return X, y


def _probe() -> None:
    from numba import njit, prange

    @njit(parallel=True, cache=False)
    def gather(x, idx, out, T):
        n = idx.shape[0]
        for t in prange(T):
            s = 0.0
            for p in range(t * n // T, (t + 1) * n // T):
                s += x[idx[p]]
            out[t] = s

    @njit(parallel=True, cache=False)
    def chase(nxt, out, T, n):
        for t in prange(T):
            i = t * 7919
            for _ in range(n):
                i = nxt[i]
            out[t] = i

    rng = np.random.default_rng(0)
    x = rng.random(1 << 25)
    idx = rng.integers(0, 1 << 25, 20_000_000)
    N = 1 << 24
    perm = rng.permutation(N)
    nxt = np.empty(N, dtype=np.int64)
    nxt[perm] = np.roll(perm, 1)
    out = np.zeros(8)
    for T in (1, 2, 1, 2):
        gather(x, idx, out, T)
        t = time.perf_counter()
        gather(x, idx, out, T)
        g = (time.perf_counter() - t) / idx.shape[0] * 1e9
        chase(nxt, out, T, 10)
        t = time.perf_counter()
        chase(nxt, out, T, 2_000_000)
        c = (time.perf_counter() - t) / 2e6 * 1e9
        print(f"probe: {T} thread(s): random reads {g:.2f} ns a read (all threads together); "
              f"dependent reads {c:.0f} ns each (per thread)", flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default="sector")
    p.add_argument("--data-dir", default=os.environ.get("STREAMWWW_DATA", os.path.join(ROOT, "..", "shared", "data",
                                                                                       "libsvm")))
    p.add_argument("--gen-rows", type=int, default=0)
    p.add_argument("--banded", default="")
    p.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "streamwww-bench-block"))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--epochs", type=int, default=9)
    p.add_argument("--probe", action="store_true")
    p.add_argument("--fits", type=int, default=0)
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    import numba

    from streamwww.backends import _flow_kernels as FK
    from streamwww.backends import _kernels as K
    from streamwww.backends.base import make_block, model_splits
    from streamwww.backends.cpu import _NONE_U8, _row_weights, _rows
    from streamwww.solvers import WALRUS

    print(header("The flow pass against the sequential pass"), flush=True)
    if args.probe:
        _probe()
    X, y = _banded(args.banded) if args.banded else _data(args)
    y = np.unique(np.asarray(y), return_inverse=True)[1].astype(np.int32)
    k = int(y.max()) + 1
    block = make_block(X, y, 0.0)
    if not block.is_sparse:
        print("dense rows: the flow pass takes CSR rows only")
        return 1
    n, D = block.n_rows, block.X.shape[1]
    name = f"banded {args.banded}" if args.banded else (f"gen-class {args.gen_rows}" if args.gen_rows else args.data)
    shared = FK.shared_pairs(_rows(block), np.random.default_rng(0).permutation(n).astype(np.int64), 1024)
    print(f"data: {name}: {n} rows, {D} features, {k} classes, {block.X.nnz} nonzeros; pairs of consecutive "
          f"rows sharing a feature: {shared:.3f}; flow pass on {args.threads} threads", flush=True)
    numba.set_num_threads(max(args.threads, 1))
    one = np.zeros(1, dtype=np.int64)

    def call(kernel, W, beta, order, *extra):
        kernel(W, _rows(block), block.y, block.sqnorms, *_row_weights(block), beta, np.ones(1),
               model_splits(None, 1), one, order, _NONE_U8, False, 0.0, WALRUS, 1e-4, *extra, K.ktag(k))

    Ws, bs = np.zeros((1, D, k)), np.zeros((1, n, k - 1))
    Wf, bf = Ws.copy(), bs.copy()
    seq, flow = [], []
    same = True
    for e in range(args.epochs):
        order = np.random.default_rng(e).permutation(n).astype(np.int64)
        runs = [("seq", lambda: call(K.bcd_pass_serial, Ws, bs, order)),
                ("flow", lambda: call(FK.flow_pass, Wf, bf, order, args.threads))]
        times = {}
        for which, fn in (runs if e % 2 == 0 else runs[::-1]):
            t = time.perf_counter()
            fn()
            times[which] = time.perf_counter() - t
        seq.append(times["seq"])
        flow.append(times["flow"])
        same = same and Ws.tobytes() == Wf.tobytes() and bs.tobytes() == bf.tobytes()
        print(f"epoch {e}: seq {times['seq']:.3f} s, flow {times['flow']:.3f} s, ratio "
              f"{times['flow'] / times['seq']:.3f}", flush=True)
    r = np.array(flow[1:]) / np.array(seq[1:])
    print(f"medians (s a pass, first epoch left out): seq {np.median(seq[1:]):.3f}, flow {np.median(flow[1:]):.3f}; "
          f"paired ratio flow / seq {np.median(r):.3f} (quartiles {np.quantile(r, 0.25):.3f}-"
          f"{np.quantile(r, 0.75):.3f}); the same bits every epoch: {same}", flush=True)
    if args.fits:
        same = _fits(X, y, args.fits) and same
    return 0 if same else 1


def _fits(X, y, pairs: int) -> bool:
    import streamwww as sw
    from streamwww.backends import cpu

    os.environ[cpu.FLOW_ENV] = "1"
    allowed = cpu.FLOW_SHARED
    sw.train((X[:2000], y[:2000]), fit_intercept=False, random_state=0, max_iter=2)  # (compiled kernels loaded)
    walls = {True: [], False: []}
    same = True
    for r in range(pairs):
        models = {}
        for flow in ((True, False) if r % 2 == 0 else (False, True)):
            cpu.FLOW_SHARED = allowed if flow else -1.0
            t = time.perf_counter()
            models[flow] = sw.train((X, y), fit_intercept=False, random_state=0)
            walls[flow].append(time.perf_counter() - t)
        cpu.FLOW_SHARED = allowed
        same = same and models[True].coef_.tobytes() == models[False].coef_.tobytes()
        print(f"fit pair {r}: flow allowed {walls[True][-1]:.2f} s, kept from it {walls[False][-1]:.2f} s; epochs "
              f"{models[True].n_iter_} / {models[False].n_iter_}; the same bits: {same}", flush=True)
    ratio = np.array(walls[True]) / np.array(walls[False])
    print(f"fits: median wall flow allowed {np.median(walls[True]):.2f} s, kept from it {np.median(walls[False]):.2f} s;"
          f" paired ratio {np.median(ratio):.3f}", flush=True)
    return same


if __name__ == "__main__":
    sys.exit(main())
