"""Whole fits with this tree's CPU kernels against another revision's, paired in one process.

    python tools/bench_kernels_ab.py --before HEAD [--data sector] [--pairs 10] [--data-dir DIR] [--late-pass E]
        [--loss ww|cs] [--stop paper|tol] [--jobs N]

For a change confined to ``streamwww/backends/_kernels.py`` (the arithmetic of the passes
and of the objective): the other revision's ``_kernels.py`` is loaded as a module of its
own, and the CPU backend is pointed at one set of kernels or the other before each fit
(``streamwww.backends.cpu.K``), so both run in the same process, on the same data, in
alternating order (``WWClassifier(C=1, fit_intercept=False, gap_decay=0.0009, tol=0)``,
seeds 0..4 in turn; a warm-up fit of each first; ``--loss cs``: ``CSClassifier``; ``--stop tol``:
``tol=1e-3`` instead, the certified relative gap; ``--jobs``: ``n_jobs``, default all cores).  On a VM whose speed drifts over minutes,
pairs taken seconds apart compare better than processes or runs taken minutes apart.
Prints each pair's training-pass (solver) time, whether the two models are bitwise the same
(primal objective, weights), and the paired ratios.  ``--late-pass E`` times single passes
instead: a training pass and an objective pass from the state after ``E`` epochs, where
shrinking skips most rows of a large set.
"""

from __future__ import annotations

import argparse
import lzma
import os
import sys
import tempfile
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from _benchenv import header, module_at  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--before", required=True, help="the git revision whose _kernels.py is compared")
    p.add_argument("--data", default="sector", help="a LIBSVM file NAME.scale(.xz) of --data-dir")
    p.add_argument("--data-dir", default=os.environ.get("STREAMWWW_DATA", os.path.join(ROOT, "..", "shared", "data",
                                                                                       "libsvm")))
    p.add_argument("--pairs", type=int, default=10)
    p.add_argument("--late-pass", type=int, default=0, metavar="E",
                   help="instead of fits: one training pass and one objective pass (one thread) from the state "
                        "after E epochs with shrinking, each kernel in turn from copies of that state")
    p.add_argument("--loss", choices=("ww", "cs"), default="ww", help="WWClassifier or CSClassifier (fits only)")
    p.add_argument("--stop", choices=("paper", "tol"), default="paper",
                   help="paper: gap <= 0.0009 gap_1 (tol=0); tol: a certified relative gap of 1e-3 (fits only)")
    p.add_argument("--jobs", type=int, default=None, help="n_jobs of the fits (default: all cores)")
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    from sklearn.datasets import load_svmlight_file

    import streamwww.backends.cpu as cpu
    from streamwww import CSClassifier, WWClassifier
    from streamwww.backends import _kernels as new

    with tempfile.TemporaryDirectory() as tmp:
        old = module_at(args.before, "streamwww/backends/_kernels.py", "kernels_before", tmp)

        path = os.path.join(args.data_dir, f"{args.data}.scale")  # or, compressed, path + ".xz"
        with (open(path, "rb") if os.path.exists(path) else lzma.open(path + ".xz")) as fh:
            X, y = load_svmlight_file(fh)

        if args.late_pass:
            return _late_pass(cpu, old, new, X, y, args)

        def fit(mod, max_iter, seed):
            cpu.K = mod
            stop = dict(gap_decay=0.0009, tol=0.0) if args.stop == "paper" else dict(tol=1e-3)
            cls = CSClassifier if args.loss == "cs" else WWClassifier
            clf = cls(C=1.0, fit_intercept=False, max_iter=max_iter, random_state=seed, n_jobs=args.jobs, **stop)
            t = time.perf_counter()
            clf.fit(X, y)
            return clf, time.perf_counter() - t

        for mod in (old, new):
            fit(mod, 3, 0)
        rows, ratios, fit_ratios, same = [], [], [], True
        for r in range(args.pairs):
            seed = r % 5
            order = ((old, "before"), (new, "this")) if r % 2 == 0 else ((new, "this"), (old, "before"))
            got = {}
            for mod, tag in order:
                clf, wall = fit(mod, 3000, seed)
                got[tag] = (clf.history_[-1]["time"], wall, clf.history_[-1]["primal"], clf.coef_)
            b, t = got["before"], got["this"]
            bitwise = b[2] == t[2] and np.array_equal(b[3], t[3])
            same &= bitwise
            ratios.append(t[0] / b[0])
            fit_ratios.append(t[1] / b[1])
            rows.append(f"| {r + 1} | {seed} | {b[0]:.3f} | {t[0]:.3f} | {ratios[-1]:.3f} | {fit_ratios[-1]:.3f} | "
                        f"{'yes' if bitwise else 'NO'} |")
            print(rows[-1], flush=True)
    print()
    print(header(f"CPU kernels, this tree vs {args.before}: {args.data}, loss {args.loss}, stop {args.stop}, "
                 f"n_jobs {args.jobs}"))
    print("| pair | seed | solver s before | solver s this | solver ratio | fit ratio | bitwise same model |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print(f"\nsolver ratio this / before: median {np.median(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f}); "
          f"fit ratio median {np.median(fit_ratios):.3f}; every model bitwise the same: {same}")
    return 0 if same else 1


def _late_pass(cpu, old, new, X, y, args) -> int:
    """``--late-pass``: a training pass (``bcd_pass``, shrinking) and an objective pass
    (``hinge_sums``, recording the flags) of one model on one thread, from the state after
    ``args.late_pass`` epochs (the epochs run by this tree's kernels, the flags from an
    objective pass every 5 epochs and after the last, as a run's stopping rule leaves them),
    each kernel in turn from a copy of that state, in the same random row order."""
    from streamwww.backends.base import make_block
    from streamwww.solvers import WALRUS, WW_LOSS

    X.sort_indices()
    y = np.unique(y, return_inverse=True)[1].astype(np.int32)
    n, d = X.shape
    k = int(y.max()) + 1
    block = make_block(X, y, 0.0)
    backend = cpu.CPUBackend(1)
    W, beta = np.zeros((1, d, k)), np.zeros((1, n, k - 1))
    near = np.zeros((1, n, k - 1), np.uint8)
    one, models = np.array([1.0]), np.array([0])
    rng = np.random.default_rng(0)
    cpu.K = new
    for ep in range(args.late_pass):
        backend.bcd_pass(W, block, beta, one, models, rng.permutation(n), 0.0, WALRUS, 0.0, near=near if ep else None)
        if ep % 5 == 0 or ep == args.late_pass - 1:
            backend.hinge_sums(W, block, 0.0, models, near=near, reach=0.0, loss=WW_LOSS)
    live = ((near[0] != 0) | (beta[0] != 0)).sum(1)
    times = {"before": ([], []), "this": ([], [])}
    same = True
    for r in range(args.pairs + 1):  # (the first pair compiles and is not kept)
        order = rng.permutation(n)
        got = {}
        for mod, tag in ((old, "before"), (new, "this")) if r % 2 == 0 else ((new, "this"), (old, "before")):
            cpu.K = mod
            W2, b2, f2 = W.copy(), beta.copy(), near.copy()
            t0 = time.perf_counter()
            backend.bcd_pass(W2, block, b2, one, models, order, 0.0, WALRUS, 0.0, near=f2)
            t1 = time.perf_counter()
            h = backend.hinge_sums(W2, block, 0.0, models, near=f2, reach=0.0, loss=WW_LOSS)
            t2 = time.perf_counter()
            if r:
                times[tag][0].append(t1 - t0)
                times[tag][1].append(t2 - t1)
            got[tag] = (W2, b2, f2, h)
        same &= all(np.array_equal(a, b) for a, b in zip(got["before"], got["this"]))
    print(header(f"CPU kernels, this tree vs {args.before}: {args.data}, one pass after {args.late_pass} epochs"))
    print(f"n = {n}, d = {d}, k = {k}, {X.nnz / n:.1f} nonzeros a row; {(live > 0).mean():.1%} of rows step, "
          f"{live[live > 0].mean():.1f} coordinates each; {args.pairs} pairs, medians")
    print("| pass | before ms | this ms | this / before |")
    print("|---|---|---|---|")
    for q, name in enumerate(("training pass (shrinking)", "objective pass")):
        b, t = np.median(times["before"][q]) * 1e3, np.median(times["this"][q]) * 1e3
        print(f"| {name} | {b:.2f} | {t:.2f} | {t / b:.3f} |")
    print(f"every state bitwise the same: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
