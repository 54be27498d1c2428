r"""The per-row scalar mathematics of both backends, free of any CUDA import.

Everything here is plain Numba (``@njit``) or plain Python, so that one source
serves four callers: the CPU kernels (:mod:`._kernels`), the CUDA kernels (numba-cuda compiles ``@njit`` functions
called from a kernel as device functions, and :mod:`._cuda_kernels` wraps the
plain functions with ``cuda.jit(device=True)``), the CUDA simulator (which runs
them as Python), and CPU tests that check them against the CPU reference
(:func:`streamwww.solvers.walrus.walrus_kernel`) on many vectors without a GPU.

Notation (DESIGN.md §2, 0-based): label ``y``, ``m = k - 1``, index map
``c(t) = t + 1`` if ``t + 1 != y`` else ``0``;
``v_t = (1 - (s_y - s_c(t))) / ||x||^2 + beta_t + sum_u beta_u``.

:func:`walrus_sweep` (defined in :mod:`streamwww.solvers.walrus`, re-exported here) is steps 6-11 of Algorithm 2 of Wang & Scott (ICML 2021)
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

from streamwww._jit import build
from streamwww.solvers import CS_LOSS
from streamwww.solvers.walrus import walrus_sweep  # one sweep for both backends

__all__ = ["c_index", "v_entry", "hinge_term", "near_floor", "CS_NEAR", "SETS", "PINS", "in_play", "settled",
           "row_weight", "walrus_sweep", "walrus_sweep_cpu"]


@njit(inline="always")
def c_index(t, y):
    """The class ``c(t)`` paired with coordinate ``t`` of ``beta_i`` for label ``y``."""
    return t + 1 if t + 1 != y else 0


@njit(inline="always")
def v_entry(s_y, s_c, sqnorm, beta_t, beta_sum):
    """``v_t = (1 - (s_y - s_c(t))) / ||x||^2 + beta_t + sum(beta)`` (step 2 of Algorithm 1)."""
    return (1.0 - (s_y - s_c)) / sqnorm + beta_t + beta_sum


@njit(inline="always")
def hinge_term(s_y, s_j):
    """``max(0, 1 - (s_y - s_j))``: one class's term of the WW hinge loss."""
    h = 1.0 - (s_y - s_j)
    return h if h > 0.0 else 0.0


#: Crammer-Singer's shrinking: a coordinate at 0 stays in the next epoch only if its term
#: ``1 - (s_y - s_c(t))`` is within this of the row's largest (engine.shrink explains why
#: that is exact, and why a margin rather than the largest term alone).
CS_NEAR = 0.1


@njit(inline="always")
def near_floor(hinge, loss_id, cs_near):
    """The least term ``1 - (s_y - s_c(t))`` a coordinate at 0 of a row with the hinge loss
    ``hinge`` (unweighted) needs to stay in the next epoch, besides being positive: none for
    WW (its coordinates are coupled by no constraint), ``hinge - cs_near`` for Crammer-Singer
    (the row's ``1^T beta_i <= C`` couples them; ``cs_near`` is :data:`CS_NEAR`, or ``inf``
    for a run that a checkpoint of shrinking rule 1 continues)."""
    return hinge - cs_near if loss_id == CS_LOSS else -np.inf


#: A pass's shrinking (the kernels' ``shrink``; 0: none): the coordinates :func:`in_play`
#: (SETS), and with PINS also the rows whose every coordinate in play is :func:`settled`
#: skipped (engine.shrink, rule 3).
SETS = 1
PINS = 2


@njit(inline="always")
def in_play(near_t, beta_t):
    """Does a shrinking pass update coordinate ``t`` of a row: flagged at the last objective
    pass (``near_t``), or off 0?"""
    return near_t != 0 or beta_t != 0.0


@njit(inline="always")
def settled(near_t, beta_t, C):
    """Is a coordinate in play settled at its bound (rule 3): at the row's bound ``C`` with
    its flag set, its term ``1 - (s_y - s_c(t))`` positive at the ``W`` of the flags?  A row
    whose every coordinate in play is settled satisfies its KKT conditions there."""
    return near_t != 0 and beta_t == C


@njit(inline="always")
def row_weight(weights, trains, split, i):
    """Row ``i``'s weight for a model trained on cross-validation split ``split``.

    ``weights[i]`` (1 when ``weights`` is empty), or 0 when bit ``split`` of
    ``trains[i]`` is clear (the row is not a training row of that split);
    ``split < 0``: every row trains.  The row's dual box is ``[0, C * weight]``
    and its hinge loss counts ``weight`` times in the primal.
    """
    w = 0.0
    if split < 0 or (trains[i] >> split) & 1 != 0:
        w = weights[i] if weights.shape[0] else 1.0
    # Both arrays used once more, outside the branches (a test always true): on the CPU,
    # inlined per row, an array whose last use sits in a branch keeps an atomic
    # incref/decref pair per call (backends._kernels.hold says more).
    return w if weights.shape[0] + trains.shape[0] >= 0 else 0.0


walrus_sweep_cpu = build(walrus_sweep, "_cpu")  # (cache files of its own: streamwww._jit)
