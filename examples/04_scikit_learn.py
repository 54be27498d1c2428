"""Example 04 -- WWClassifier in scikit-learn: Pipeline, GridSearchCV, cross_val_score.

``streamwww.WWClassifier`` is a scikit-learn classifier (``fit``,
``predict``, ``decision_function``, ``score``, ``get_params``/``set_params``),
so the usual tools work with it unchanged:

1. a ``Pipeline`` that scales the features first (``MaxAbsScaler`` keeps sparse
   data sparse);
2. ``GridSearchCV`` over ``C`` with 5-fold stratified cross-validation;
3. model choice: other linear models tuned the same way, then
   ``cross_val_score`` of each tuned model on new folds, and the best one.

Everything here is in memory.  For data larger than memory, train on a store
with ``streamwww.train`` (examples 01-03).

Run:  python examples/04_scikit_learn.py [LIBSVM_FILE]   (a file that fits in memory)
"""
# smoke-test: chosen model:

from __future__ import annotations

import sys
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_val_score, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MaxAbsScaler
from sklearn.svm import LinearSVC

import streamwww as sw
from streamwww.io import load_libsvm
from _common import is_store, user_input


C_GRID = np.logspace(-3, 0, 4)  # 0.001 .. 1


def load_data():
    src = user_input()
    if src is None:
        from sklearn.datasets import make_classification

        return make_classification(n_samples=3000, n_features=100, n_informative=15, n_redundant=5,
                                   n_classes=5, n_clusters_per_class=1, class_sep=1.2, flip_y=0.02,
                                   random_state=0)
    if is_store(src):
        sys.exit(f"{src} is a store; this example needs in-memory data (a LIBSVM file)")
    return load_libsvm(src)  # (scipy CSR matrix, labels)


def main() -> int:
    X, y = load_data()
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, stratify=y,
                                                        random_state=0)
    print(f"data: {X_train.shape[0]} training rows, {X_test.shape[0]} test rows, "
          f"{X.shape[1]} features, {len(np.unique(y))} classes")

    # 1. scaling + the Weston-Watkins SVM, as one estimator
    pipe = make_pipeline(MaxAbsScaler(), sw.WWClassifier(tol=1e-2, random_state=0))

    # 2. choose C by 5-fold cross-validation (the step is named after its class, lower case)
    cv = StratifiedKFold(n_splits=5, shuffle=True, random_state=0)
    grid = GridSearchCV(pipe, {"wwclassifier__C": C_GRID}, cv=cv)  # refit=True: best C on all rows
    t0 = time.perf_counter()
    grid.fit(X_train, y_train)
    print(f"GridSearchCV: {len(C_GRID)} values of C x 5 folds "
          f"in {time.perf_counter() - t0:.1f} s")
    for params, mean, std in zip(grid.cv_results_["params"], grid.cv_results_["mean_test_score"],
                                 grid.cv_results_["std_test_score"]):
        print(f"  C = {params['wwclassifier__C']:8.3g}: accuracy {mean:.3f} +- {std:.3f}")
    best_C = grid.best_params_["wwclassifier__C"]
    print(f"best C = {best_C:g}; refitted on all training rows, "
          f"test accuracy {grid.score(X_test, y_test):.3f}")

    # 3. model choice: other linear models, each with its C tuned the same way (same grid,
    #    same folds); then cross_val_score compares the tuned models on other folds (a new
    #    shuffle), so that no model is scored on the folds that chose its C.
    tuned = {"Weston-Watkins SVM (streamwww)": grid.best_estimator_}
    others = {
        "Crammer-Singer SVM (LinearSVC)": ("linearsvc__C", make_pipeline(
            MaxAbsScaler(), LinearSVC(multi_class="crammer_singer", random_state=0))),
        "one-vs-rest SVM (LinearSVC)": ("linearsvc__C", make_pipeline(
            MaxAbsScaler(), LinearSVC(random_state=0))),
        "logistic regression": ("logisticregression__C", make_pipeline(
            MaxAbsScaler(), LogisticRegression(max_iter=1000))),
    }
    other_folds = StratifiedKFold(n_splits=5, shuffle=True, random_state=1)
    scores = {}
    print("model choice (C tuned on the first folds, scored on new ones):")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # LIBLINEAR's, on some folds
        for name, (param, est) in others.items():
            tuned[name] = GridSearchCV(est, {param: C_GRID}, cv=cv).fit(X_train, y_train).best_estimator_
        for name, est in tuned.items():
            s = cross_val_score(est, X_train, y_train, cv=other_folds)
            scores[name] = s.mean()
            C = est.steps[-1][1].C
            print(f"  {name:32s} C = {C:<6g} accuracy {s.mean():.3f} +- {s.std():.3f}")
        chosen = max(scores, key=scores.get)
        final = tuned[chosen].fit(X_train, y_train)
    print(f"chosen model: {chosen}; test accuracy {final.score(X_test, y_test):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
