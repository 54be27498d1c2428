"""Exact and approximate solvers of the Weston-Watkins block subproblem.

``walrus``  exact, O(k log k) (Wang & Scott, ICML 2021, Algorithm 2).
``shark``   Shark's greedy iterative coordinate descent (approximate baseline).
"""

from streamwww.solvers.walrus import solve_subproblem, solve_subproblem_batch

__all__ = ["solve_subproblem", "solve_subproblem_batch"]
