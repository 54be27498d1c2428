r"""Primal and dual objectives and the duality gap: the one source of truth.

Primal (P):   ``P(W) = 1/2 ||W||_F^2 + C * L(W)``,
              ``L(W) = sum_i sum_{j != y_i} max(0, 1 - (w_{y_i} - w_j)^T x_i)``.
Dual (D2):    ``D(beta) = sum_i 1^T beta_i - 1/2 ||W(beta)||_F^2``
              (to be maximized; ``W(beta)`` is the ``W`` the BCD passes maintain).

Both are sums over rows plus a ``||W||_F^2`` term, so a streaming pass
accumulates ``L`` and ``sum 1^T beta`` shard by shard and calls these functions
once at the end.  Logs, stopping rules, benchmarks and tests all use them.
"""

from __future__ import annotations

import numpy as np

__all__ = ["primal", "dual", "gap", "relative_gap"]


def primal(w_sqnorm, hinge_sum, C):
    """``1/2 ||W||^2 + C * hinge_sum`` (elementwise over models)."""
    return 0.5 * np.asarray(w_sqnorm) + np.asarray(C) * np.asarray(hinge_sum)


def dual(w_sqnorm, beta_sum):
    """``sum(beta) - 1/2 ||W||^2`` (elementwise over models)."""
    return np.asarray(beta_sum) - 0.5 * np.asarray(w_sqnorm)


def gap(primal_value, dual_value):
    """Duality gap ``P - D`` (>= 0 up to rounding)."""
    return np.asarray(primal_value) - np.asarray(dual_value)


def relative_gap(primal_value, dual_value):
    """``(P - D) / |P|``; ``0`` when both are zero (e.g. an empty problem)."""
    p = np.asarray(primal_value, dtype=np.float64)
    d = np.asarray(dual_value, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = (p - d) / np.abs(p)
    r = np.where((p == 0) & (d == 0), 0.0, r)
    return r if r.ndim else float(r)
