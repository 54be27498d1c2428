"""Warm starts along a path of C against cold starts: epochs and fit time (docs/benchmarks.md, "Warm starts").

    python tools/bench_warm_start.py [--data-dir DIR] [--sets dna,letter] [--losses ww,cs]
        [--path 0.0625,0.125,0.25,0.5,1,2] [--jobs 1]

For each data set (``NAME.scale`` or ``NAME.scale.xz`` in ``--data-dir``, read by
``streamwww.io.load_libsvm`` in float64) and loss, one estimator with ``warm_start=True`` is
fitted along ``--path`` (each fit starts from the previous one's ``W`` and ``beta``) and a
fresh estimator is fitted cold at each ``C``; both with ``tol=1e-3`` (a certified relative duality gap), ``random_state=0``, ``fit_intercept``
at its default, ``n_jobs=--jobs``.  At each ``C`` the warm and the cold fit run one after the
other, their order switched from one ``C`` to the next; a two-epoch fit first loads or
compiles the kernels, so no compile is timed.  Reported per ``C``: epochs, ``fit`` wall
seconds (the warm fit's include hashing the data to check it is the one of the previous
fit), and the relative difference of the two primal objectives (both certified to 1e-3);
then the path's totals without its first ``C`` (where the warm fit has nothing to start
from).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from _benchenv import header  # noqa: E402


def _load(data_dir: str, name: str):
    """``(X, y)`` of ``NAME.scale`` (or ``NAME.scale.xz``), float64 as scikit-learn loads it."""
    import numpy as np

    from streamwww.io import load_libsvm

    plain = os.path.join(data_dir, f"{name}.scale")
    return load_libsvm(plain if os.path.exists(plain) else plain + ".xz", dtype=np.float64)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", default=os.environ.get("STREAMWWW_DATA", os.path.join(ROOT, "..", "shared", "data",
                                                                                       "libsvm")))
    p.add_argument("--sets", default="dna,letter")
    p.add_argument("--losses", default="ww,cs")
    p.add_argument("--path", default="0.0625,0.125,0.25,0.5,1,2", help="the values of C, in the order fitted")
    p.add_argument("--jobs", type=int, default=1, help="n_jobs of every fit")
    p.add_argument("--max-iter", type=int, default=5000)
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    from streamwww import CSClassifier, WWClassifier

    path = [float(c) for c in args.path.split(",")]
    common = {"tol": 1e-3, "random_state": 0, "n_jobs": args.jobs}
    print(header("Warm starts along a path of C"))
    print("| data | loss | C | warm epochs | cold epochs | warm s | cold s | primal, warm / cold - 1 |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    totals = []
    for name in args.sets.split(","):
        X, y = _load(args.data_dir, name)
        for loss in args.losses.split(","):
            cls = CSClassifier if loss == "cs" else WWClassifier
            cls(C=1.0, max_iter=2, **common).fit(X, y)  # (the kernels loaded or compiled, off the clock)
            warm = cls(C=path[0], warm_start=True, max_iter=args.max_iter, **common)
            sums = {"warm": [0, 0.0], "cold": [0, 0.0]}
            for i, C in enumerate(path):
                seconds, fitted = {}, {}
                for kind in ("warm", "cold") if i % 2 == 0 else ("cold", "warm"):
                    est = warm.set_params(C=C) if kind == "warm" else cls(C=C, max_iter=args.max_iter, **common)
                    t = time.perf_counter()
                    fitted[kind] = est.fit(X, y)
                    seconds[kind] = time.perf_counter() - t
                w, c = fitted["warm"], fitted["cold"]
                pw, pc = w.history_[-1]["primal"], c.history_[-1]["primal"]
                if i > 0:
                    for kind, est in fitted.items():
                        sums[kind][0] += est.n_iter_
                        sums[kind][1] += seconds[kind]
                print(f"| {name} | {loss.upper()} | {C:g} | {w.n_iter_} | {c.n_iter_} | {seconds['warm']:.3f} | "
                      f"{seconds['cold']:.3f} | {pw / pc - 1:+.1e} |", flush=True)
            totals.append((name, loss, sums))
    print()
    print(f"Totals over C = {', '.join(f'{c:g}' for c in path[1:])} (the first C left out):")
    print()
    print("| data | loss | warm epochs | cold epochs | warm / cold epochs | warm s | cold s | warm / cold s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for name, loss, s in totals:
        (ew, tw), (ec, tc) = s["warm"], s["cold"]
        print(f"| {name} | {loss.upper()} | {ew} | {ec} | {ew / ec:.2f} | {tw:.2f} | {tc:.2f} | {tw / tc:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
