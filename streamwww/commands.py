"""Training-side subcommands of the ``streamwww`` CLI (``demo``).

Data conversion commands live in :mod:`streamwww.io.commands`.
"""

from __future__ import annotations

import logging
import time

import numpy as np

logger = logging.getLogger(__name__)


def register(sub) -> None:
    """Add this module's subcommands to the CLI's subparsers."""
    p = sub.add_parser("demo", help="train and evaluate on generated data (no data of yours needed)",
                       description="Generate a small multiclass data set, train a Weston-Watkins SVM "
                                   "on it and report the duality gap and test accuracy.")
    p.add_argument("--rows", type=int, default=20_000, help="training rows (default 20000)")
    p.add_argument("--classes", type=int, default=10, help="number of classes (default 10)")
    p.add_argument("--features", type=int, default=50, help="number of features (default 50)")
    p.add_argument("--C", type=float, default=0.01, help="regularization (default 0.01)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.set_defaults(func=run_demo)


def run_demo(args) -> int:
    """Generate data, train, evaluate; print a short report."""
    from sklearn.datasets import make_classification

    import streamwww as sw

    n_test = max(1, args.rows // 4)
    X, y = make_classification(n_samples=args.rows + n_test, n_features=args.features,
                               n_informative=min(args.features, 2 * args.classes),
                               n_redundant=0, n_classes=args.classes, n_clusters_per_class=1,
                               class_sep=2.0, random_state=args.seed)
    X = X.astype(np.float32)
    Xtr, ytr, Xte, yte = X[:args.rows], y[:args.rows], X[args.rows:], y[args.rows:]
    print(f"demo data: {args.rows} training rows, {n_test} test rows, "
          f"{args.features} features, {args.classes} classes (seed {args.seed})")
    t0 = time.perf_counter()
    model = sw.train((Xtr, ytr), C=args.C, random_state=args.seed, tol=1e-3, max_iter=1000,
                     verbose=1 if args.verbose else 0)
    elapsed = time.perf_counter() - t0
    h = model.history_[-1]
    print(f"trained in {elapsed:.2f} s: {model.n_iter_} epochs, primal {h['primal']:.6g}, "
          f"dual {h['dual']:.6g}, relative duality gap {h['rel_gap']:.2e}")
    print(f"accuracy: train {100 * model.score(Xtr, ytr):.2f} %, test {100 * model.score(Xte, yte):.2f} %")
    return 0
