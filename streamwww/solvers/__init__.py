"""Exact and approximate solvers of the Weston-Watkins block subproblem.

``walrus``  exact, O(k log k) (Wang & Scott, ICML 2021, Algorithm 2).
``shark``   Shark's greedy iterative coordinate descent (approximate baseline).
"""

from streamwww.solvers.walrus import solve_subproblem, solve_subproblem_batch

# The block solver a backend kernel runs, by id (a compile-time branch in the kernels).
WALRUS = 0
SHARK = 1
SOLVER_IDS = {"walrus": WALRUS, "shark": SHARK}

__all__ = ["solve_subproblem", "solve_subproblem_batch", "WALRUS", "SHARK", "SOLVER_IDS"]
