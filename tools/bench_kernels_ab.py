"""Whole fits with this tree's CPU kernels against another revision's, paired in one process.

    python tools/bench_kernels_ab.py --before HEAD [--data sector] [--pairs 10] [--data-dir DIR]

For a change confined to ``streamwww/backends/_kernels.py`` (the arithmetic of the passes
and of the objective): the other revision's ``_kernels.py`` is loaded as a module of its
own, and the CPU backend is pointed at one set of kernels or the other before each fit
(``streamwww.backends.cpu.K``), so both run in the same process, on the same data, in
alternating order (``WWClassifier(C=1, fit_intercept=False, gap_decay=0.0009, tol=0)``,
seeds 0..4 in turn; a warm-up fit of each first).  On a VM whose speed drifts over minutes,
pairs taken seconds apart compare better than processes or runs taken minutes apart.
Prints each pair's training-pass (solver) time, whether the two models are bitwise the same
(primal objective, weights), and the paired ratios.
"""

from __future__ import annotations

import argparse
import lzma
import os
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from _benchenv import header  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--before", required=True, help="the git revision whose _kernels.py is compared")
    p.add_argument("--data", default="sector", help="a LIBSVM file NAME.scale(.xz) of --data-dir")
    p.add_argument("--data-dir", default=os.environ.get("STREAMWWW_DATA", os.path.join(ROOT, "..", "shared", "data",
                                                                                       "libsvm")))
    p.add_argument("--pairs", type=int, default=10)
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    from sklearn.datasets import load_svmlight_file

    import streamwww.backends.cpu as cpu
    from streamwww import WWClassifier
    from streamwww.backends import _kernels as new

    with tempfile.TemporaryDirectory() as tmp:
        # a module of its own name, importable by name (Numba's cache pickles the module's name)
        src = subprocess.run(["git", "-C", ROOT, "show", f"{args.before}:streamwww/backends/_kernels.py"],
                             check=True, capture_output=True, text=True).stdout
        with open(os.path.join(tmp, "kernels_before.py"), "w") as f:
            f.write(src)
        sys.path.insert(0, tmp)
        import kernels_before as old

        path = os.path.join(args.data_dir, f"{args.data}.scale")  # or, compressed, path + ".xz"
        with (open(path, "rb") if os.path.exists(path) else lzma.open(path + ".xz")) as fh:
            X, y = load_svmlight_file(fh)

        def fit(mod, max_iter, seed):
            cpu.K = mod
            clf = WWClassifier(C=1.0, fit_intercept=False, gap_decay=0.0009, tol=0.0, max_iter=max_iter,
                               random_state=seed)
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
    print(header(f"CPU kernels, this tree vs {args.before}: {args.data}"))
    print("| pair | seed | solver s before | solver s this | solver ratio | fit ratio | bitwise same model |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print(f"\nsolver ratio this / before: median {np.median(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f}); "
          f"fit ratio median {np.median(fit_ratios):.3f}; every model bitwise the same: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
