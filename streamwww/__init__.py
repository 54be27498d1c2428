"""streamwww: exact Weston-Watkins linear multiclass SVMs on data larger than memory.

Public API
----------
WWClassifier       scikit-learn estimator
train              train one model or several (a list of C) in one pass over the data
solve_subproblem   exact Walrus solver of the block subproblem (and ``solve_subproblem_batch``)
objective          primal, dual and duality gap
"""

__version__ = "0.1.0"

from streamwww import objective
from streamwww.estimator import WWClassifier
from streamwww.solvers.walrus import solve_subproblem, solve_subproblem_batch
from streamwww.train import train

__all__ = ["WWClassifier", "train", "solve_subproblem", "solve_subproblem_batch", "objective",
           "__version__"]
