"""Exact and approximate solvers of the Weston-Watkins and Crammer-Singer block subproblems.

``walrus``   exact, O(k log k) (Wang & Scott, ICML 2021, Algorithm 2).
``shark``    Shark's greedy iterative coordinate descent (approximate baseline).
``simplex``  exact Crammer-Singer block step, O(k log k): the box replaced by the
             simplex ``b >= 0, sum(b) <= C`` (Blondel et al. 2014, Lemma 1).
"""

from streamwww.solvers.simplex import solve_cs_subproblem, solve_cs_subproblem_batch
from streamwww.solvers.walrus import solve_subproblem, solve_subproblem_batch

# The block solver a backend kernel runs, by id (a compile-time branch in the kernels).
WALRUS = 0
SHARK = 1
SIMPLEX = 2  # the Crammer-Singer block step; not a WW `subproblem` choice, so not in SOLVER_IDS
SOLVER_IDS = {"walrus": WALRUS, "shark": SHARK}

# The loss a model minimizes, by id: Weston-Watkins (a sum of hinges over the classes)
# or Crammer-Singer (their maximum); the hinge kernels branch on it.
WW_LOSS = 0
CS_LOSS = 1
LOSS_IDS = {"ww": WW_LOSS, "cs": CS_LOSS}

__all__ = ["solve_subproblem", "solve_subproblem_batch", "solve_cs_subproblem", "solve_cs_subproblem_batch",
           "WALRUS", "SHARK", "SIMPLEX", "SOLVER_IDS", "WW_LOSS", "CS_LOSS", "LOSS_IDS"]
