"""Warm starts along a path of C vs cold starts: epochs and fit wall time (docs/benchmarks.md).

Usage: python tools/bench_warm_start.py DIR   (DIR holds dna.scale and letter.scale, decompressed
from ../shared/data/libsvm/*.xz)
"""
import numpy as np, warnings, time, sys, platform
import streamwww as sw, numba, sklearn
from sklearn.datasets import load_svmlight_file
warnings.simplefilter("ignore")
for name in ("dna.scale", "letter.scale"):
    X, y = load_svmlight_file(f"{sys.argv[1]}/{name}")
    path = [0.0625, 0.125, 0.25, 0.5, 1.0, 2.0]
    w = sw.WWClassifier(C=path[0], tol=1e-3, random_state=0, warm_start=True, max_iter=5000)
    rows = []
    for C in path:
        t = time.perf_counter(); w.set_params(C=C).fit(X, y); tw = time.perf_counter() - t
        t = time.perf_counter(); c = sw.WWClassifier(C=C, tol=1e-3, random_state=0, max_iter=5000).fit(X, y); tc = time.perf_counter() - t
        rows.append((C, w.n_iter_, c.n_iter_, tw, tc, w.history_[-1]["primal"], c.history_[-1]["primal"]))
    for r in rows: print(name, "C=%g warm %d epochs %.2fs, cold %d epochs %.2fs, primal %.6g vs %.6g" % (r[0], r[1], r[3], r[2], r[4], r[5], r[6]))
    print(name, "total warm", sum(r[1] for r in rows[1:]), "cold", sum(r[2] for r in rows[1:]))
