"""streamwww: exact Weston-Watkins (and Crammer-Singer) linear multiclass SVMs on data larger than memory.

Public API
----------
WWClassifier       scikit-learn estimator (Weston-Watkins)
CSClassifier       the same for Crammer-Singer (and ``CSClassifierCV``, as ``WWClassifierCV``)
train              train one model or several (a list of C) in one pass over the data,
                   in memory or streamed from a shard store, with checkpoints
resume             continue an interrupted run from its checkpoint directory
Interrupted        the KeyboardInterrupt a stopped fit raises: where its work is kept
ProgressBar        one progress bar for a run: ``train(..., callback=bar, progress=bar)``
open_store         open a shard store written by ``streamwww convert``
convert            convert a LIBSVM text file into a shard store (``streamwww convert``)
load_model, save_model   model files
write_predictions  labels or scores of every row of a store, written shard by shard
solve_subproblem   exact Walrus solver of the block subproblem (and ``solve_subproblem_batch``)
solve_cs_subproblem  exact Crammer-Singer block step, a simplex projection (and ``..._batch``)
objective          primal, dual and duality gap

Attributes are imported on first use, so ``import streamwww`` (and the CLI) stay fast.
"""

from __future__ import annotations

from streamwww._lazy import lazy_getattr

__version__ = "0.8.1"

# name -> (module, attribute); attribute None means the module itself.
_LAZY = {
    "WWClassifier": ("streamwww.estimator", "WWClassifier"),
    "WWClassifierCV": ("streamwww.cv", "WWClassifierCV"),
    "CSClassifier": ("streamwww.estimator", "CSClassifier"),
    "CSClassifierCV": ("streamwww.cv", "CSClassifierCV"),
    "train": ("streamwww.api", "train"),
    "resume": ("streamwww.api", "resume"),
    "ProgressBar": ("streamwww.progress", "ProgressBar"),
    "Interrupted": ("streamwww.engine.interrupt", "Interrupted"),
    "open_store": ("streamwww.io", "open_store"),
    "convert": ("streamwww.io", "convert_libsvm"),
    "load_model": ("streamwww.estimator", "load_model"),
    "write_predictions": ("streamwww.model.predict", "write_predictions"),
    "save_model": ("streamwww.model.files", "save_model"),
    "solve_subproblem": ("streamwww.solvers.walrus", "solve_subproblem"),
    "solve_subproblem_batch": ("streamwww.solvers.walrus", "solve_subproblem_batch"),
    "solve_cs_subproblem": ("streamwww.solvers.simplex", "solve_cs_subproblem"),
    "solve_cs_subproblem_batch": ("streamwww.solvers.simplex", "solve_cs_subproblem_batch"),
    "objective": ("streamwww.engine.objective", None),
}

__all__ = sorted(_LAZY) + ["__version__"]


__getattr__ = lazy_getattr(__name__, _LAZY)


def __dir__():
    return __all__
