"""Cross-validation in one pass vs model selection one fit at a time (docs/benchmarks.md).

For each data set, the same 5 values of C and the same 5 stratified folds:

* ``WWClassifierCV(Cs, cv=5)``: every fold x C model (and the refit per C) in the same passes;
* ``GridSearchCV(WWClassifier)``: our fits one by one (n_jobs=1), then the refit;
* ``GridSearchCV(LinearSVC(multi_class="crammer_singer"))``: LIBLINEAR's multiclass SVM, the
  scikit-learn user's default (n_jobs=1);
* for a store, ``WWClassifierCV.fit(store)`` against the same fits one by one on the store.

Whole wall time as a user sees it (fits, scoring, refit), median of ``--repeats``.

Usage: python tools/bench_cv.py DIR [--repeats 3]   (DIR holds satimage.scale, letter.scale,
decompressed from ../shared/data/libsvm/*.xz)
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import time
import warnings

import numpy as np
import sklearn
from sklearn.datasets import load_svmlight_file
from sklearn.model_selection import GridSearchCV
from sklearn.svm import LinearSVC

import streamwww as sw
from streamwww.io import write_store
from streamwww.stream.folds import shard_folds

CS = [0.03125, 0.125, 0.5, 2.0, 8.0]
K = 5


def timed(fn, repeats):
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sets", default="satimage.scale,letter.scale")
    ap.add_argument("--no-store", action="store_true", help="skip the store comparison (slow: issue 18's tax)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    print(f"# {platform.processor() or platform.machine()}, Python {platform.python_version()}, "
          f"streamwww {sw.__version__}, scikit-learn {sklearn.__version__}; Cs={CS}, {K} folds, "
          f"median of {args.repeats}")
    for name in args.sets.split(","):
        X, y = load_svmlight_file(f"{args.dir}/{name}")
        X = X.astype(np.float32)  # as a store keeps it, so array and store runs see the same rows
        kw = dict(tol=1e-3, max_iter=1000, random_state=0, device="cpu")
        sw.WWClassifierCV(Cs=CS[:1], cv=2, **kw).fit(X[:200], y[:200])  # compile outside the timings
        t_one, cv = timed(lambda: sw.WWClassifierCV(Cs=CS, cv=K, **kw).fit(X, y), args.repeats)
        folds = shard_folds(np.searchsorted(np.unique(y), y), 0, K, cv.seed_)
        splits = [(np.flatnonzero(folds != s), np.flatnonzero(folds == s)) for s in range(K)]
        t_ours, gs = timed(lambda: GridSearchCV(sw.WWClassifier(**kw), {"C": CS}, cv=splits).fit(X, y),
                           args.repeats)
        t_lin, lin = timed(lambda: GridSearchCV(LinearSVC(multi_class="crammer_singer", tol=1e-3,
                                                          max_iter=1000, random_state=0),
                                                {"C": CS}, cv=splits).fit(X, y), args.repeats)
        same = np.array_equal(cv.cv_results_["rank_test_score"], gs.cv_results_["rank_test_score"])
        print(f"{name}: n={X.shape[0]} d={X.shape[1]} k={len(np.unique(y))}")
        print(f"  WWClassifierCV one pass      {t_one:8.2f} s  best C {cv.best_C_:g}  "
              f"score {cv.best_score_:.4f}")
        print(f"  GridSearchCV(WWClassifier)   {t_ours:8.2f} s  best C {gs.best_params_['C']:g}  "
              f"score {gs.best_score_:.4f}  (ranks identical: {same})  ratio {t_ours / t_one:.2f}x")
        print(f"  GridSearchCV(LinearSVC c-s)  {t_lin:8.2f} s  best C {lin.best_params_['C']:g}  "
              f"score {lin.best_score_:.4f}  ratio {t_lin / t_one:.2f}x")
        if args.no_store:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            store = write_store(f"{tmp}/s.zarr", X, y, shard_rows=max(1000, X.shape[0] // 8))
            t_store, cvs = timed(lambda: sw.WWClassifierCV(Cs=CS, cv=K, **kw).fit(store), args.repeats)

            def one_by_one():
                # the same models, one streamed fit each: a fold's training rows as zero-weight rows
                # are not expressible per fit, so each fold is its own store (written outside the timing)
                return [sw.WWClassifier(C=C, **kw).fit(fold_stores[s]) for s in range(K) for C in CS] + \
                       [sw.WWClassifier(C=cvs.best_C_, **kw).fit(store)]

            fold_stores = [write_store(f"{tmp}/f{s}.zarr", X[tr], y[tr], shard_rows=max(1000, X.shape[0] // 8))
                           for s, (tr, _) in enumerate(splits)]
            t_store_seq, _ = timed(one_by_one, 1)
            print(f"  store, WWClassifierCV one pass   {t_store:8.2f} s  ({store.n_shards} shards)")
            print(f"  store, the same fits one by one  {t_store_seq:8.2f} s  (fits only, no scoring; "
                  f"1 run)  ratio {t_store_seq / t_store:.2f}x")


if __name__ == "__main__":
    main()
