r"""The per-row scalar mathematics of the GPU kernels, free of any CUDA import.

Everything here is plain Numba (``@njit``) or plain Python, so that one source
serves three callers: the CUDA kernels (numba-cuda compiles ``@njit`` functions
called from a kernel as device functions, and :mod:`._cuda_kernels` wraps the
plain functions with ``cuda.jit(device=True)``), the CUDA simulator (which runs
them as Python), and CPU tests that check them against the CPU reference
(:func:`streamwww.solvers.walrus.walrus_kernel`) on many vectors without a GPU.

Notation (DESIGN.md §2, 0-based): label ``y``, ``m = k - 1``, index map
``c(t) = t + 1`` if ``t + 1 != y`` else ``0``;
``v_t = (1 - (s_y - s_c(t))) / ||x||^2 + beta_t + sum_u beta_u``.

:func:`walrus_sweep` is steps 6-11 of Algorithm 2 of Wang & Scott (ICML 2021)
on entries that are already sorted: given the ``p`` positive entries of ``v``
listed in decreasing order (ties by increasing index) it returns the state
``(n_u, n_m, gamma)`` whose clipped point ``b = clip(v - gamma, 0, C)`` is the
exact minimizer of ``1/2 b^T (I + 11^T) b - v^T b`` over ``[0, C]^m``.  It is the
event sweep of :func:`~streamwww.solvers.walrus.walrus_kernel` operation for
operation (same Neumaier sums, same KKT fallback, same final recomputation of
``S``), so a GPU row and a CPU row that see the same ``v`` in the same order
agree to rounding (bitwise where the compiler contracts no multiply-add).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from streamwww.solvers.walrus import _add

__all__ = ["c_index", "v_entry", "walrus_sweep", "walrus_sweep_cpu"]


@njit(inline="always")
def c_index(t, y):
    """The class ``c(t)`` paired with coordinate ``t`` of ``beta_i`` for label ``y``."""
    return t + 1 if t + 1 != y else 0


@njit(inline="always")
def v_entry(s_y, s_c, sqnorm, beta_t, beta_sum):
    """``v_t = (1 - (s_y - s_c(t))) / ||x||^2 + beta_t + sum(beta)`` (step 2 of Algorithm 1)."""
    return (1.0 - (s_y - s_c)) / sqnorm + beta_t + beta_sum


def walrus_sweep(v, srt, p, C):
    """Walrus event sweep over the sorted positive entries ``v[srt[:p]]``.

    Parameters
    ----------
    v : 1-D float64 array
        The subproblem's linear term (length ``m``).
    srt : 1-D integer array
        ``srt[:p]`` indexes the positive entries of ``v`` by decreasing value.
    p : int
        Number of positive entries (``>= 1``).
    C : float

    Returns
    -------
    (n_u, n_m, gamma)
        ``b[srt[q]] = C`` for ``q < n_u``, ``clip(v - gamma, 0, C)`` for
        ``n_u <= q < n_u + n_m`` and ``0`` everywhere else.
    """
    n_u = 0
    n_m = 0
    S = 0.0
    Sc = 0.0
    best_viol = np.inf
    best_u = 0
    best_m = 0
    while True:
        has_up = n_m > 0 and v[srt[n_u]] > C
        has_dn = n_u + n_m < p
        if not has_up and not has_dn:
            break
        if has_up and ((not has_dn) or v[srt[n_u]] - C >= v[srt[n_u + n_m]]):
            S, Sc = _add(S, Sc, -v[srt[n_u]])
            n_u += 1
            n_m -= 1
        else:
            S, Sc = _add(S, Sc, v[srt[n_u + n_m]])
            n_m += 1
        gamma = (C * n_u + (S + Sc)) / (n_m + 1)
        viol = -np.inf
        if n_u > 0:
            viol = max(viol, C + gamma - v[srt[n_u - 1]])
        if n_m > 0:
            viol = max(viol, v[srt[n_u]] - C - gamma)
            viol = max(viol, gamma - v[srt[n_u + n_m - 1]])
        if n_u + n_m < p:
            viol = max(viol, v[srt[n_u + n_m]] - gamma)
        if viol < best_viol:
            best_viol = viol
            best_u = n_u
            best_m = n_m
        if viol <= 0.0:
            break
    S = 0.0
    Sc = 0.0
    for q in range(best_u, best_u + best_m):
        S, Sc = _add(S, Sc, v[srt[q]])
    gamma = (C * best_u + (S + Sc)) / (best_m + 1)
    return best_u, best_m, gamma


walrus_sweep_cpu = njit(cache=True)(walrus_sweep)
