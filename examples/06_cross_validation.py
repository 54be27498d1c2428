"""Example 06 -- cross-validation and the choice of C, in one pass over the data.

``WWClassifierCV(Cs=[...], cv=5)`` trains every (fold, C) model -- and, with
``refit=True`` (the default), one model per C on all rows -- in the *same*
passes over the data: a model's held-out rows take part as rows of weight 0
(skipped by the kernels), so reading the data is paid once for all
``5 x len(Cs)`` models.  Each model is certified by its own duality gap and
scored on its own held-out rows.  The result has scikit-learn's
``GridSearchCV`` keys (``cv_results_["mean_test_score"]``, ``rank_test_score``,
``param_C``, ...), ``best_C_`` and ``best_estimator_``.

For a store the folds are row-level, stratified within each shard and seeded
(the same store and seed give the same folds); ``streamwww.train(store,
C=[...], cv=5)`` is the same with checkpoints and resume.

This script cross-validates 6 values of C on a store, prints the table, and
checks the chosen model on a held-out test store.

Run:  python examples/06_cross_validation.py [TRAIN [TEST]]   (LIBSVM files or stores)
"""
# smoke-test: best C =

from __future__ import annotations

import sys
import time

from streamwww import WWClassifierCV
from streamwww.io import convert_libsvm, open_store
from _common import as_store, example_data, is_store, user_input, workdir

CS = [1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 1e-2]


def main() -> int:
    with workdir("06_cross_validation") as work:
        src, test_src = user_input(1), user_input(2)
        if src is None:
            # a noisy problem with many features for the rows, so that C matters
            data = example_data(work / "all.libsvm", rows=12_000, features=5000, nnz_per_row=20,
                                classes=8, noise=1.5)
            lines = data.read_bytes().splitlines(keepends=True)
            (work / "train.libsvm").write_bytes(b"".join(lines[:8000]))
            (work / "test.libsvm").write_bytes(b"".join(lines[8000:]))
            src, test_src = work / "train.libsvm", work / "test.libsvm"
        train = as_store(src, work / "train.zarr", shard_rows=2000)
        test = None
        if test_src is not None:
            test = open_store(test_src) if is_store(test_src) else convert_libsvm(
                test_src, work / "test.zarr", like=train.path, overwrite=True)
        print(f"training store: {train.n_rows:,} rows, {train.n_features:,} features, "
              f"{len(train.classes)} classes, {train.n_shards} shards")

        t0 = time.perf_counter()
        cv = WWClassifierCV(Cs=CS, cv=5, tol=1e-2, max_iter=200, random_state=0).fit(train)
        print(f"{cv.n_splits_} folds x {len(CS)} values of C + {len(CS)} refits = "
              f"{cv.n_splits_ * len(CS) + len(CS)} models in one run: {time.perf_counter() - t0:.1f} s")

        res = cv.cv_results_
        print(f"{'C':>8} {'mean acc':>9} {'std':>7} {'rank':>5}")
        for C, mean, std, rank in zip(res["param_C"], res["mean_test_score"], res["std_test_score"],
                                      res["rank_test_score"]):
            print(f"{float(C):8.0e} {mean:9.4f} {std:7.4f} {rank:5d}")
        print(f"best C = {cv.best_C_:g} (mean held-out accuracy {cv.best_score_:.4f})")
        if test is not None:
            # best_estimator_ is the refit model with the best C, trained on all rows
            print(f"test accuracy of the chosen model: {cv.score(test):.4f}")
        return 0


if __name__ == "__main__":
    sys.exit(main())
