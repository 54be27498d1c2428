r"""Walrus: the exact solver of the Weston-Watkins block subproblem.

Problem (Wang & Scott, ICML 2021, eq. (4), Theorem 3.4)::

    minimize_b   1/2 b^T (I + 1 1^T) b - v^T b     subject to  0 <= b <= C,

with ``b, v`` of length ``m = k - 1``.  The minimizer is ``b = clip(v - gamma, 0, C)``
where ``gamma = sum(b)``.  Algorithm 2 sweeps ``gamma`` down through the
breakpoints ``{v_i} U {v_i - C}`` (Subroutine 3: descending, and at equal
``gamma`` every "up" event before every "dn" event), maintaining the number of
entries at the upper bound ``n_u``, strictly inside ``n_m`` and the sum ``S`` of
the inside entries (Subroutine 4), and stops at the first state whose candidate
``gamma_hat = (C n_u + S) / (n_m + 1)`` satisfies the KKT conditions
(Subroutine 5).  Both event lists are already sorted once ``v`` is, so the
sweep is a two-pointer merge: one sort, O(k log k) in all.

Notes on the paper's pseudo-code: in Subroutine 4 the "up" event removes the
*first* inside entry, ``v_<n_u^{t-1}+1>`` (1-based), from ``S``; the printed
index ``v_<n_u^{t-1}>`` is off by one.  Rounding can make every KKT test fail by
an ulp when two breakpoints nearly coincide; the sweep therefore remembers the
state with the smallest KKT violation and falls back to it (the candidates on
both sides of a breakpoint give the same ``b`` up to rounding, as ``b(gamma)`` is
continuous).  ``S`` is kept with Neumaier-compensated summation and recomputed
once for the chosen state: with many tied entries ``b = v - gamma`` is a small
difference of large numbers, and a plain running sum puts ``m`` roundings into
``gamma``, enough to fail the KKT tests with hundreds of ties.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from streamwww.solvers._rowsort import INSERTION_SORT_MAX as _INSERTION_SORT_MAX
from streamwww.solvers._rowsort import add_compensated as _add
from streamwww.solvers._rowsort import collect_positive as _collect_positive
from streamwww.solvers._rowsort import extend_sorted as _extend_sorted
from streamwww.solvers._rowsort import heapify as _heapify
from streamwww.solvers._rowsort import insertion_sort_desc as _insertion_sort_desc
from streamwww.solvers._rowsort import solve_one, solve_rows

__all__ = ["solve_subproblem", "solve_subproblem_batch", "walrus_kernel", "walrus_sweep"]

def walrus_sweep(v, srt, p, C):
    """Steps 6-11 of Algorithm 2: the event sweep over the sorted positive entries.

    ``srt[:p]`` indexes the ``p >= 1`` positive entries of ``v`` by decreasing
    value.  Returns ``(n_u, n_m, gamma, viol)``: ``b[srt[q]] = C`` for
    ``q < n_u``, ``clip(v - gamma, 0, C)`` for ``n_u <= q < n_u + n_m`` and 0
    elsewhere; ``viol <= 0`` when the sweep stopped at a state meeting the KKT
    conditions (else it is the smallest violation seen, the fallback state's).
    A plain function: compiled here for the CPU (``_sweep``) and as a CUDA
    device function by :mod:`streamwww.backends._cuda_kernels`, so both
    backends run the same sweep.
    """
    n_u = 0
    n_m = 0
    S = 0.0
    Sc = 0.0  # compensation term of S
    best_viol = np.inf
    best_u = 0
    best_m = 0
    while True:
        # Next "up" event: the first inside entry reaches C at gamma = v - C.
        has_up = n_m > 0 and v[srt[n_u]] > C
        # Next "dn" event: the next outside entry becomes positive at gamma = v.
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

        # Subroutine 5, as a violation (<= 0 means the KKT conditions hold).
        viol = -np.inf
        if n_u > 0:
            viol = max(viol, C + gamma - v[srt[n_u - 1]])
        if n_m > 0:
            viol = max(viol, v[srt[n_u]] - C - gamma)
            viol = max(viol, gamma - v[srt[n_u + n_m - 1]])
        if n_u + n_m < p:  # the largest entry at 0; non-positive ones are < gamma
            viol = max(viol, v[srt[n_u + n_m]] - gamma)
        if viol < best_viol:
            best_viol = viol
            best_u = n_u
            best_m = n_m
        if viol <= 0.0:
            break

    # S was updated incrementally (up to 2m additions and subtractions); recompute
    # it once for the chosen state so gamma carries only the rounding of one sum.
    S = 0.0
    Sc = 0.0
    for q in range(best_u, best_u + best_m):
        S, Sc = _add(S, Sc, v[srt[q]])
    gamma = (C * best_u + (S + Sc)) / (best_m + 1)
    return best_u, best_m, gamma, best_viol


_sweep = njit(cache=True, nogil=True, inline="always")(walrus_sweep)


@njit(cache=True, nogil=True)
def walrus_kernel(v, C, out, idx):
    """Solve the subproblem for ``v`` (length m) into ``out``; return gamma.

    ``idx`` is an int64 workspace of length >= m.  No input validation: this is
    the per-row kernel called from the BCD passes.
    """
    m = v.shape[0]
    for i in range(m):
        out[i] = 0.0
    # gamma = sum(b) > 0 as soon as some v_i > 0, so entries with v_i <= 0 end at
    # b_i = 0 and create no event (Subroutine 3 keeps only positive breakpoints):
    # only the p positive entries need sorting.
    p = _collect_positive(v, idx)
    if p == 0:
        return 0.0
    if p > _INSERTION_SORT_MAX:
        # Drop entries that cannot be positive at the optimum.  For any subset of
        # the entries, the root of g = sum_subset clip(v_i - g, 0, C) is <= gamma
        # (the subset's sum is never larger), and v_i <= gamma means b_i = 0.
        # The subset: the first entries found; the margin covers rounding.
        sample = idx[:_INSERTION_SORT_MAX]
        _insertion_sort_desc(v, sample, _INSERTION_SORT_MAX)
        s_u, s_m, g_low, _ = _sweep(v, sample, _INSERTION_SORT_MAX, C)
        g_low -= 1e-9 * max(g_low, C)
        q = 0
        for t in range(p):
            i = idx[t]
            if v[i] > g_low:
                idx[q] = i
                q += 1
        p = q
    if p <= _INSERTION_SORT_MAX:
        srt = idx[:p]
        _insertion_sort_desc(v, srt, p)
        best_u, best_m, gamma, viol = _sweep(v, srt, p, C)
    else:
        # The sweep reads the sorted entries from the largest down and usually
        # stops long before the end (b is sparse at the optimum), so sort lazily:
        # heapify (O(p)) and pop the largest entries into a sorted prefix kept
        # reversed at the heap's tail (srt[q] = idx[p - 1 - q]).  On the first
        # n_sorted entries the sweep passes through the same states as on all p
        # until it needs entry n_sorted; if it stopped before, at a KKT point,
        # that is the full sweep's answer, else more entries are sorted.
        _heapify(v, idx, p)
        srt = idx[p - 1::-1]
        n_sorted = 0
        target = _INSERTION_SORT_MAX
        while True:
            n_sorted = _extend_sorted(v, idx, p, n_sorted, target)
            best_u, best_m, gamma, viol = _sweep(v, srt, n_sorted, C)
            if n_sorted == p or (viol <= 0.0 and best_u + best_m < n_sorted):
                break
            target = min(p, 4 * n_sorted)
    for q in range(best_u + best_m):
        i = srt[q]
        if q < best_u:
            out[i] = C
        else:
            out[i] = min(max(v[i] - gamma, 0.0), C)
    return gamma


@njit(cache=True, nogil=True)
def _walrus_rows(V, Cs, out):
    m = V.shape[1]
    idx = np.empty(max(m, 1), dtype=np.int64)
    for r in range(V.shape[0]):
        walrus_kernel(V[r], Cs[r], out[r], idx)


def solve_subproblem(v, C: float) -> np.ndarray:
    """Exact minimizer of the Weston-Watkins subproblem (Walrus).

    Solves ``min_b 1/2 b^T (I + 11^T) b - v^T b`` subject to ``0 <= b <= C``.

    Parameters
    ----------
    v : array_like of shape (k - 1,)
        Linear term; must be finite.
    C : float
        Upper bound, ``C > 0``.

    Returns
    -------
    b : ndarray of shape (k - 1,), float64
        The unique minimizer.

    Raises
    ------
    ValueError
        If ``v`` is not a finite 1-D vector or ``C`` is not a finite positive float.
    """
    return solve_one(walrus_kernel, v, C)


def solve_subproblem_batch(V, C) -> np.ndarray:
    """Solve many subproblems at once, one per row of ``V``.

    Parameters
    ----------
    V : array_like of shape (n, k - 1)
        One linear term per row; must be finite.
    C : float or array_like of shape (n,)
        Upper bound(s), all ``> 0``.

    Returns
    -------
    B : ndarray of shape (n, k - 1), float64
        Row ``r`` is ``solve_subproblem(V[r], C[r])``.
    """
    return solve_rows(_walrus_rows, V, C)
