"""The block pass of this tree against another revision's, pass by pass, in one process.

    python tools/bench_block_ab.py --before HEAD [--data sector | --gen-rows 1000000]
        [--configs 16:1,16:2,64:1,64:2] [--epochs 3] [--repeats 3]

For a change confined to ``streamwww/backends/_block_kernels.py``: the other revision's file
is loaded as a module of its own and both blocks passes run in the same process on the same
data, in turn (a VM whose speed drifts over minutes compares pairs taken seconds apart
better than runs taken minutes apart).  Each configuration ``m:P`` (``m`` rows a block, ``P``
threads; ``P = 1`` runs the serial build) trains ``--epochs`` whole passes from ``W = 0``,
``beta = 0`` (``C = 1``, no intercept unless ``--bias``, no shrinking: every row steps, as in
a first epoch), in the same seeded order for both; the time of a configuration is its
fastest pass after the first (which compiles).  The sequential pass (``seq``, one thread) runs
beside them.  Prints each repeat's times, whether the two revisions' models are bitwise the
same (they must be, for a change that is not meant to change the model), and the medians.
First it prints the data's structure that decides what the block pass's threads can do
(on the first 2,048 rows of the order): the share of pairs of rows with a feature in common,
and for each ``m`` the mean length of the longest chain of a block's rows that must step one
after another (each row after the last earlier row it shares a feature with); with an
intercept every pair shares it.  ``--structure-only`` stops there.

Data: ``--data NAME`` (``NAME.scale.xz`` of ``--data-dir``, or a path), or ``--gen-rows N``:
the generated class-specific set of tools/bench_threads.py (``streamwww make-data``: 100,000
features, 40 nonzeros a row, 20 classes, seed 0), made once into ``--work``.
"""

from __future__ import annotations

import argparse
import inspect
import os
import statistics
import sys
import tempfile
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from _benchenv import header, module_at  # noqa: E402


def _data(args):
    import scipy.sparse as sp

    from streamwww.io import load_libsvm

    if args.gen_rows:
        from streamwww.io.datagen import make_data

        os.makedirs(args.work, exist_ok=True)
        base = os.path.join(args.work, f"gen-class-{args.gen_rows}")
        if not os.path.exists(base + ".X.npz"):
            make_data(base + ".libsvm", rows=args.gen_rows, features=100_000, nnz_per_row=40, classes=20, seed=0,
                      overwrite=True)
            X, y = load_libsvm(base + ".libsvm")[:2]
            sp.save_npz(base + ".X.npz", X)
            np.save(base + ".y.npy", y)
            os.unlink(base + ".libsvm")
        return sp.load_npz(base + ".X.npz").tocsr(), np.load(base + ".y.npy")
    path = args.data if os.path.exists(args.data) else os.path.join(args.data_dir, args.data + ".scale.xz")
    X, y = load_libsvm(path)[:2]
    return X, y


def _structure(block, order, ms, sample=2048) -> str:
    """The share of pairs of rows that share a feature, and each ``m``'s mean longest chain."""
    import scipy.sparse as sp

    rows = order[:sample]
    P = sp.csr_matrix(block.X[rows] if block.is_sparse else np.asarray(block.X)[rows], copy=True)
    P.data[:] = 1.0
    shared = (P @ P.T).toarray() > 0
    np.fill_diagonal(shared, False)
    cells = [f"pairs of rows sharing a feature: {shared.mean():.3f}"]
    for m in ms:
        chains = []
        for b in range(0, len(rows) - m + 1, m):
            depth = np.zeros(m, dtype=np.int64)
            for j in range(m):
                before = np.nonzero(shared[b + j, b:b + j])[0]
                depth[j] = 1 + (depth[before].max() if before.size else 0)
            chains.append(depth.max())
        cells.append(f"m={m}: longest chain {np.mean(chains):.1f} rows")
    return "structure: " + "; ".join(cells)


def _pin(kernel) -> tuple:
    """The ``pin`` argument (no shrinking here: False) of a pass that takes one; the
    passes before 0.8.0 take none."""
    return (False,) if "pin" in inspect.signature(kernel.py_func).parameters else ()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--before", required=True, help="the git revision whose _block_kernels.py is compared")
    p.add_argument("--data", default="sector")
    p.add_argument("--data-dir", default=os.environ.get("STREAMWWW_DATA", os.path.join(ROOT, "..", "shared", "data",
                                                                                       "libsvm")))
    p.add_argument("--gen-rows", type=int, default=0)
    p.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "streamwww-bench-block"))
    p.add_argument("--configs", default="16:1,16:2,64:1,64:2")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--bias", type=float, default=0.0)
    p.add_argument("--structure-only", action="store_true")
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    import numba

    from streamwww.backends import _block_kernels as new
    from streamwww.backends import _kernels as K
    from streamwww.backends.base import make_block, model_splits
    from streamwww.backends.cpu import _NONE_U8, _row_weights, _rows
    from streamwww.solvers import WALRUS

    configs = [tuple(int(v) for v in c.split(":")) for c in args.configs.split(",")]
    X, y = _data(args)
    y = np.unique(np.asarray(y), return_inverse=True)[1].astype(np.int32)
    k = int(y.max()) + 1
    block = make_block(X, y, args.bias)
    n, D = block.n_rows, block.X.shape[1] + (1 if args.bias else 0)
    order = np.random.default_rng(0).permutation(n).astype(np.int64)
    print(header(f"The block pass, this tree vs {args.before}"), flush=True)
    print(f"data: {args.data if not args.gen_rows else f'gen-class {args.gen_rows}'}: {n} rows, {D} weight rows, "
          f"{k} classes, bias {args.bias}; before: {args.before}", flush=True)
    print(_structure(block, order, sorted({m for m, _ in configs})), flush=True)
    if args.structure_only:
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        old = module_at(args.before, "streamwww/backends/_block_kernels.py", "block_kernels_before", tmp)

        def run(which, m, threads):
            numba.set_num_threads(threads)
            W = np.zeros((1, D, k))
            beta = np.zeros((1, n, k - 1))
            if which == "seq":
                kernel, extra = K.bcd_pass_serial, ()
            else:
                mod = old if which == "before" else new
                kernel, extra = (mod.block_pass if threads > 1 else mod.block_pass_serial), (m, threads)
            times = []
            for _ in range(args.epochs):
                t = time.perf_counter()
                kernel(W, _rows(block), block.y, block.sqnorms, *_row_weights(block), beta, np.ones(1),
                       model_splits(None, 1), np.zeros(1, dtype=np.int64), order, _NONE_U8, *_pin(kernel),
                       float(args.bias), WALRUS, 1e-12, *extra, K.ktag(k))
                times.append(time.perf_counter() - t)
            return min(times[1:]), W, beta

        table: dict[str, list[float]] = {}
        for rep in range(args.repeats):
            cells = []
            t_seq = run("seq", 1, 1)[0]
            table.setdefault("seq", []).append(t_seq)
            cells.append(f"seq {t_seq:.3f}")
            for m, threads in configs:
                runs = {}
                for which in (("before", "after") if rep % 2 == 0 else ("after", "before")):
                    runs[which] = run(which, m, threads)
                same = all(np.array_equal(a, b) for a, b in zip(runs["before"][1:], runs["after"][1:]))
                for which in ("before", "after"):
                    table.setdefault(f"{which} {m}:{threads}", []).append(runs[which][0])
                cells.append(f"{m}:{threads} before {runs['before'][0]:.3f} after {runs['after'][0]:.3f}"
                             + ("" if same else " MODELS DIFFER"))
            print(f"repeat {rep + 1}: " + "; ".join(cells), flush=True)
        print("medians (s a pass): " + "; ".join(f"{name} {statistics.median(v):.3f}" for name, v in table.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
