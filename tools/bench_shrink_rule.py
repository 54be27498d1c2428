"""Shrinking's rule 3 against rule 2, whole fits paired in one process.

    python tools/bench_shrink_rule.py [--sets satimage,letter] [--losses cs,ww] [--pairs 6]
                                      [--data-dir ../shared/data/libsvm]

Rule 3 (``streamwww.engine.shrink``, new runs from 0.8.0) is rule 2 with the rows settled
at their bounds skipped.  A checkpoint of rule 2 resumes with it, so this tree trains either:
new runs take ``streamwww.engine.run.SHRINK_RULE``, set here before each fit.  Each pair is
``train((X, y), C=1, loss=..., fit_intercept=False, tol=1e-3, random_state=0, n_jobs=1)``
under one rule, then the other (the order alternating pair by pair), after a warm-up fit of
each; on a VM whose speed drifts over minutes, fits seconds apart compare better than runs
minutes apart.  ``OMP_NUM_THREADS``/``NUMBA_NUM_THREADS`` are 1.  Prints per set and loss each
rule's epochs and final primal (the same in every pair: the runs are seeded), the median
time of each rule's ``train`` call and the median of the paired ratios rule 3 / rule 2.
"""

from __future__ import annotations

import argparse
import lzma
import os
import statistics
import sys
import time
import warnings

for _v in ("OMP_NUM_THREADS", "NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = "1"

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from _benchenv import header  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sets", default="satimage,letter")
    p.add_argument("--losses", default="cs,ww")
    p.add_argument("--pairs", type=int, default=6)
    p.add_argument("--data-dir", default=os.environ.get("STREAMWWW_DATA", os.path.join(ROOT, "..", "shared", "data",
                                                                                       "libsvm")))
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    from sklearn.datasets import load_svmlight_file

    import streamwww
    import streamwww.engine.run as run

    print(header("Shrinking rule 3 against rule 2"), flush=True)
    for name in args.sets.split(","):
        path = os.path.join(args.data_dir, f"{name}.scale")
        with (open(path, "rb") if os.path.exists(path) else lzma.open(path + ".xz")) as fh:
            X, y = load_svmlight_file(fh)
        for loss in args.losses.split(","):
            def fit(rule):
                run.SHRINK_RULE = rule
                t = time.perf_counter()
                m = streamwww.train((X, y), C=1.0, loss=loss, fit_intercept=False, tol=1e-3, random_state=0,
                                    n_jobs=1)
                return time.perf_counter() - t, m

            for rule in (2, 3):
                fit(rule)
            times = {2: [], 3: []}
            last = {}
            for r in range(args.pairs):
                for rule in ((2, 3) if r % 2 == 0 else (3, 2)):
                    t, last[rule] = fit(rule)
                    times[rule].append(t)
            ratios = [b / a for a, b in zip(times[2], times[3])]
            ends = {rule: f"{m.n_iter_} epochs, primal {m.history_[-1]['primal']:.8g}" for rule, m in last.items()}
            print(f"{name} {loss}: rule 2 {ends[2]}, median {statistics.median(times[2]):.4f} s; rule 3 {ends[3]}, "
                  f"median {statistics.median(times[3]):.4f} s; paired ratios 3/2 "
                  f"{', '.join(f'{x:.2f}' for x in ratios)}: median {statistics.median(ratios):.3f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
