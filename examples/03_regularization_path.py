"""Example 03 -- a regularization path: many values of C in the same passes.

``streamwww.train(store, C=[c1, c2, ...])`` trains one model per value of C,
all in the same passes over the data: each shard is read once per epoch and
every model takes its step on it; each model stops on its own when its
duality gap is small enough, and equals the model a run with that C alone
would give (bitwise).  Reading the data is paid once for the whole path.

The script trains 13 values of C, scores each model on a held-out store
(``WWClassifier.score`` reads a store shard by shard), prints the table, picks
the best C, and plots test accuracy against C when matplotlib is installed
(it is optional: ``pip install matplotlib`` or ``pip install "streamwww[bench]"``)
into ``$STREAMWWW_EXAMPLES_OUT/03_regularization_path/`` (without that variable set,
nothing is kept).

Data: ``sklearn.datasets.make_classification`` (5 classes, 300 features of
which 10 informative), few rows for the features, so that a large C
overfits and a tiny C underfits.

Run:  python examples/03_regularization_path.py [TRAIN [TEST]]
      TRAIN, TEST: LIBSVM files or stores; without TEST, a LIBSVM TRAIN file is
      split 80/20 at random, line by line.
"""
# smoke-test: best C =

from __future__ import annotations

import sys
import time

import numpy as np

import streamwww as sw
from streamwww.io import convert_libsvm, open_store, write_store
from _common import OUT_ENV, as_store, is_store, results_dir, user_input, workdir

CS = np.logspace(-5, -2, 13)  # 1e-5 .. 0.01


def split_lines(src, train, test, test_fraction=0.2, seed=0) -> None:
    """Split a LIBSVM text file into two, each line to ``test`` with probability ``test_fraction``."""
    rng = np.random.default_rng(seed)
    with open(src, "rb") as f, open(train, "wb") as a, open(test, "wb") as b:
        for line in f:
            (b if rng.random() < test_fraction else a).write(line)


def generated_stores(work):
    from sklearn.datasets import make_classification
    from sklearn.model_selection import train_test_split

    X, y = make_classification(n_samples=3000, n_features=300, n_informative=10, n_redundant=5,
                               n_classes=5, n_clusters_per_class=1, class_sep=1.5, flip_y=0.02,
                               random_state=0)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0)
    # in-memory arrays -> shard stores (dense layout, float32); 3 shards for the training set
    train = write_store(work / "train.zarr", X_train, y_train, shard_rows=750)
    test = write_store(work / "test.zarr", X_test, y_test, classes=train.classes)
    return train, test


def user_stores(work, src, test_src):
    if test_src is None:
        if is_store(src):
            sys.exit(f"{src} is a store: give a test file or store as the second argument")
        split_lines(src, work / "train.libsvm", work / "test.libsvm")
        src, test_src = work / "train.libsvm", work / "test.libsvm"
    train = as_store(src, work / "train.zarr")
    test = open_store(test_src) if is_store(test_src) else convert_libsvm(
        test_src, work / "test.zarr", like=train.path, overwrite=True)
    return train, test


def main() -> int:
    with workdir("03_regularization_path") as work:
        src, test_src = user_input(1), user_input(2)
        train, test = generated_stores(work) if src is None else user_stores(work, src, test_src)
        print(f"training store: {train.n_rows:,} rows, {train.n_features} features, "
              f"{len(train.classes)} classes, {train.n_shards} shards")

        t0 = time.perf_counter()
        models = sw.train(train, C=list(CS), tol=1e-2, max_iter=300, random_state=0)
        seconds = time.perf_counter() - t0
        print(f"{len(models)} models trained in the same passes in {seconds:.1f} s")

        print(f"{'C':>10} {'epochs':>6} {'rel. gap':>9} {'train acc':>9} {'test acc':>8}")
        train_acc = [m.score(train) for m in models]  # a store is scored shard by shard
        test_acc = [m.score(test) for m in models]
        for m, a, b in zip(models, train_acc, test_acc):
            print(f"{m.C:10.2e} {m.n_iter_:6d} {m.history_[-1]['rel_gap']:9.1e} {a:9.3f} {b:8.3f}")
        best = int(np.argmax(test_acc))
        print(f"best C = {models[best].C:.3g} (test accuracy {test_acc[best]:.3f})")

        try:
            import matplotlib
        except ImportError:
            print("matplotlib is not installed: no plot (it is optional; pip install matplotlib)")
            return 0
        results = results_dir("03_regularization_path")
        if results is None:  # (a plot in a temporary directory would be removed, or left behind)
            print(f"no plot kept: set {OUT_ENV}=DIR to keep it as DIR/03_regularization_path/accuracy_vs_C.png")
            return 0
        matplotlib.use("Agg")  # files only, no window
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(5, 3.5))
        ax.semilogx(CS, test_acc, "o-", label="test")
        ax.semilogx(CS, train_acc, "s--", alpha=0.6, label="train")
        ax.axvline(models[best].C, color="grey", lw=0.8)
        ax.set_xlabel("C")
        ax.set_ylabel("accuracy")
        ax.set_title("Weston-Watkins SVM: accuracy vs C")
        ax.legend()
        fig.tight_layout()
        png = results / "accuracy_vs_C.png"
        fig.savefig(png, dpi=120)
        print(f"plot saved to {png}")
        return 0


if __name__ == "__main__":
    sys.exit(main())
