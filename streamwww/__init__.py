"""streamwww: exact Weston-Watkins linear multiclass SVMs on data larger than memory.

Public API
----------
WWClassifier       scikit-learn estimator
train              train one model or several (a list of C) in one pass over the data,
                   in memory or streamed from a shard store, with checkpoints
resume             continue an interrupted run from its checkpoint directory
open_store         open a shard store written by ``streamwww convert``
load_model, save_model   model files
solve_subproblem   exact Walrus solver of the block subproblem (and ``solve_subproblem_batch``)
objective          primal, dual and duality gap
"""

__version__ = "0.1.0"

from streamwww import objective
from streamwww.estimator import WWClassifier
from streamwww.solvers.walrus import solve_subproblem, solve_subproblem_batch
from streamwww.model_io import load_model, save_model
from streamwww.train import resume, train


def open_store(path):
    """Open a shard store (Zarr or Parquet); see :func:`streamwww.io.open_store`."""
    from streamwww.io import open_store as _open

    return _open(path)


__all__ = ["WWClassifier", "train", "resume", "open_store", "load_model", "save_model",
           "solve_subproblem", "solve_subproblem_batch", "objective", "__version__"]
