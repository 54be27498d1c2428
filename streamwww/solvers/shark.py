r"""Shark's approximate solver of the Weston-Watkins block subproblem (baseline).

Same problem as :mod:`streamwww.solvers.walrus`::

    minimize_b   1/2 b^T (I + 1 1^T) b - v^T b     subject to  0 <= b <= C,

solved the way Shark's ``QpMcLinearWW::solveSub`` does (Igel, Heidrich-Meisner &
Glasmachers, JMLR 2008; re-implemented by Wang & Scott, ICML 2021, §5 and A.6.1):
greedy coordinate descent that starts from the current ``beta``, repeatedly
picks the coordinate with the largest KKT violation, takes the exact clipped
Newton step on it (the diagonal of ``I + 11^T`` is 2), and stops when the
largest violation is below ``eps`` or after ``10 k`` steps.

Violations are measured in margin units, as Shark does: the negative gradient
of the block objective w.r.t. ``beta_t`` is ``1 - (s_y - s_c(t))`` for the
current scores, i.e. ``||x||^2 (v - (I + 11^T) b)_t`` here.  Shark's default
accuracy (``QpStoppingCondition.minAccuracy = 1e-3``) gives ``eps = 1e-4``.
"""

from __future__ import annotations

from numba import njit

__all__ = ["shark_kernel", "SHARK_EPS"]

SHARK_EPS = 1e-4
_MAXITER_MULTIPLIER = 10


@njit(cache=True, nogil=True)
def shark_kernel(v, beta, C, sqnorm, eps, out, grad):
    """Approximately solve the subproblem from the start point ``beta``.

    ``out`` receives the new block (length m), ``grad`` is a float64 workspace
    of length m.  Returns the number of coordinate steps taken.
    """
    m = v.shape[0]
    total = 0.0
    for t in range(m):
        out[t] = beta[t]
        total += beta[t]
    # grad = v - (I + 11^T) b  (negative gradient, per unit ||x||^2)
    for t in range(m):
        grad[t] = v[t] - out[t] - total
    maxiter = _MAXITER_MULTIPLIER * (m + 1)
    steps = 0
    for _ in range(maxiter):
        idx = -1
        kkt = 0.0
        for t in range(m):
            g = grad[t] * sqnorm
            if g > kkt and out[t] < C:
                kkt = g
                idx = t
            elif -g > kkt and out[t] > 0.0:
                kkt = -g
                idx = t
        if idx < 0 or kkt < eps:
            break
        a_new = out[idx] + 0.5 * grad[idx]
        if a_new <= 0.0:
            a_new = 0.0
        elif a_new >= C:
            a_new = C
        delta = a_new - out[idx]
        out[idx] = a_new
        for t in range(m):
            grad[t] -= delta
        grad[idx] -= delta
        steps += 1
    return steps
