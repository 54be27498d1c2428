r"""Simplex: the exact solver of the Crammer-Singer block subproblem.

Problem (DESIGN.md, "Crammer-Singer"; Blondel et al. 2014, Lemma 1)::

    minimize_b   1/2 b^T (I + 1 1^T) b - v^T b     subject to  b >= 0,  1^T b <= C,

with ``b, v`` of length ``m = k - 1``: Walrus's objective over a simplex instead
of the box.  KKT: ``b = (v - theta)_+`` with ``theta = sum(b) + lambda`` (``lambda
>= 0`` the multiplier of ``1^T b <= C``), so ``theta = max(gamma, theta_C)``:
``gamma`` solves ``gamma = sum_t (v_t - gamma)_+`` (Walrus without the upper
bound) and ``theta_C`` solves ``sum_t (v_t - theta_C)_+ = C`` (the projection
onto the simplex).  Both are one equation: ``theta`` is the root of the strictly
decreasing ``F(x) = sum_t (v_t - x)_+ - min(x, C)``.  No positive ``v``: ``b = 0``.

On the positive entries sorted decreasingly, ``u_1 >= u_2 >= ...`` with prefix
sums ``S_r``, the root taken on the first ``r`` entries alone is
``theta_r = max(S_r / (r + 1), (S_r - C) / r)`` (the first term where
``S_r <= (r + 1) C``, else the second), and ``u_r > theta_r`` exactly when
``F(u_r) < 0``.  ``F`` decreases and ``u`` does, so that test holds on a prefix
``r = 1..r*`` and ``theta = theta_{r*}``.

Hand-written rather than a library projection because it is a per-row kernel
called inside the Numba passes on the CPU and inside CUDA kernels on the GPU,
where no library routine can be called; :func:`simplex_sweep` is the same plain
function in both.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from streamwww._jit import build
from streamwww.solvers._rowsort import INSERTION_SORT_MAX as _INSERTION_SORT_MAX
from streamwww.solvers._rowsort import add_compensated as _add
from streamwww.solvers._rowsort import collect_positive as _collect_positive
from streamwww.solvers._rowsort import extend_sorted as _extend_sorted
from streamwww.solvers._rowsort import heapify as _heapify
from streamwww.solvers._rowsort import insertion_sort_desc as _insertion_sort_desc
from streamwww.solvers._rowsort import solve_one, solve_rows

__all__ = ["solve_cs_subproblem", "solve_cs_subproblem_batch", "simplex_kernel", "simplex_sweep",
           "simplex_sweep_cpu", "simplex_write"]


def simplex_sweep(v, srt, p, C):
    """The threshold sweep over the sorted positive entries.

    ``srt[:p]`` indexes the ``p >= 1`` positive entries of ``v`` by decreasing
    value (ties by increasing index); ``C > 0``.  Returns ``(r, theta)``:
    ``b[srt[q]] = v[srt[q]] - theta > 0`` for ``q < r`` and 0 elsewhere.  ``r = 0``
    (``theta >= v[srt[0]]``) only where ``C`` is below the rounding of ``v``'s
    largest entry.  A plain function: compiled here for the CPU (``_sweep``) and
    as a CUDA device function by the GPU backend, so both run the same sweep.
    """
    # Entry r joins while u_r > theta_r, theta_r computed exactly as returned: a
    # single monotone test (no KKT fallback), it stops at the first failure, and
    # every returned entry is positive by construction (u_q >= u_r > theta).
    # Only additions, in srt order, enter S: the running sum is the sum of the
    # prefix computed once (a recomputation would repeat it bit for bit).
    r = 0
    theta = 0.0
    S = 0.0
    Sc = 0.0  # compensation term of S
    while r < p:
        u = v[srt[r]]
        S1, Sc1 = _add(S, Sc, u)
        D, Dc = _add(S1, Sc1, -C)  # S - C, compensated
        cand = max((S1 + Sc1) / (r + 2), (D + Dc) / (r + 1))
        if not u > cand:
            if r == 0:
                theta = cand  # >= u_1: every entry at 0
            break
        S = S1
        Sc = Sc1
        theta = cand
        r += 1
    return r, theta


def simplex_write(v, srt, r, theta, C, out):
    """Write ``b[srt[q]] = v[srt[q]] - theta`` for ``q < r`` into ``out`` (zeroed by the caller).

    Each ``b_q`` carries a rounding of the size of ``v``'s entries, which is large
    against ``C`` when ``C`` is small: where the rounded sum exceeds ``C``, ``b`` is
    scaled by ``C / sum``, so ``sum(b) <= C`` to a relative rounding of the order of
    ``r`` ulps, while ``b`` moves by no more than the excess.  A plain function,
    for both backends as :func:`simplex_sweep`.
    """
    S = 0.0
    Sc = 0.0
    for q in range(r):
        i = srt[q]
        b = v[i] - theta
        out[i] = b
        S, Sc = _add(S, Sc, b)
    S += Sc
    if S > C:
        f = C / S
        for q in range(r):
            out[srt[q]] *= f


_sweep = njit(cache=True, nogil=True, inline="always")(simplex_sweep)
_write = njit(cache=True, nogil=True, inline="always")(simplex_write)
simplex_sweep_cpu = build(simplex_sweep, "_cpu")  # (cache files of its own: streamwww._jit)


@njit(cache=True, nogil=True)
def simplex_kernel(v, C, out, idx):
    """Solve the subproblem for ``v`` (length m) into ``out``; return theta.

    ``idx`` is an int64 workspace of length >= m; ``C >= 0`` (``C == 0``: ``out = 0``
    and theta is the largest entry of ``v``, or 0).  No input validation: this is
    the per-row kernel called from the BCD passes.
    """
    m = v.shape[0]
    for i in range(m):
        out[i] = 0.0
    # theta >= 0, so entries with v_i <= 0 end at b_i = 0: only the p positive
    # entries need sorting.
    p = _collect_positive(v, idx)
    if p == 0:
        return 0.0
    if not C > 0.0:  # the only feasible point is 0; the smallest theta with (v - theta)_+ = 0
        top = 0.0
        for t in range(p):
            top = max(top, v[idx[t]])
        return top
    if p > _INSERTION_SORT_MAX:
        # Drop entries that cannot be positive at the optimum.  For any subset of
        # the entries F_subset <= F, so the subset's root is <= theta, and
        # v_i <= theta means b_i = 0.  The subset: the first entries found.  Its
        # root is at least half its largest entry (> 0), so a margin relative to
        # the root covers rounding.
        sample = idx[:_INSERTION_SORT_MAX]
        _insertion_sort_desc(v, sample, _INSERTION_SORT_MAX)
        _, t_low = _sweep(v, sample, _INSERTION_SORT_MAX, C)
        t_low -= 1e-9 * t_low
        q = 0
        for t in range(p):
            i = idx[t]
            if v[i] > t_low:
                idx[q] = i
                q += 1
        p = q
    if p <= _INSERTION_SORT_MAX:
        srt = idx[:p]
        _insertion_sort_desc(v, srt, p)
        r, theta = _sweep(v, srt, p, C)
    else:
        # The sweep reads the sorted entries from the largest down and stops at
        # the first entry r + 1 that fails its test (b is sparse at the optimum),
        # so sort lazily: heapify (O(p)) and pop the largest entries into a sorted
        # prefix kept reversed at the heap's tail (srt[q] = idx[p - 1 - q]).  The
        # prefix holds the n_sorted largest entries in order, and the sweep's
        # steps 1..r + 1 read entries 1..r + 1 only: when it stops with r <
        # n_sorted, the failing entry is in the prefix and the full sweep takes
        # the same steps to the same (r, theta); else more entries are sorted.
        # (Comparing the heap's top with the prefix's theta instead would be
        # right in exact arithmetic -- F at theta gains nothing from entries
        # <= theta -- but is another rounding than the full sweep's own test.)
        _heapify(v, idx, p)
        srt = idx[p - 1::-1]
        n_sorted = 0
        target = _INSERTION_SORT_MAX
        while True:
            n_sorted = _extend_sorted(v, idx, p, n_sorted, target)
            r, theta = _sweep(v, srt, n_sorted, C)
            if r < n_sorted or n_sorted == p:
                break
            target = min(p, 4 * n_sorted)
    _write(v, srt, r, theta, C, out)
    return theta


@njit(cache=True, nogil=True)
def _simplex_rows(V, Cs, out):
    m = V.shape[1]
    idx = np.empty(max(m, 1), dtype=np.int64)
    for r in range(V.shape[0]):
        simplex_kernel(V[r], Cs[r], out[r], idx)


def solve_cs_subproblem(v, C: float) -> np.ndarray:
    """Exact minimizer of the Crammer-Singer subproblem.

    Solves ``min_b 1/2 b^T (I + 11^T) b - v^T b`` subject to ``b >= 0`` and
    ``sum(b) <= C``.

    Parameters
    ----------
    v : array_like of shape (k - 1,)
        Linear term; must be finite.
    C : float
        Bound on the sum, ``C > 0``.

    Returns
    -------
    b : ndarray of shape (k - 1,), float64
        The unique minimizer, ``(v - theta)_+`` for a scalar ``theta >= 0``.

    Raises
    ------
    ValueError
        If ``v`` is not a finite 1-D vector or ``C`` is not a finite positive float.
    """
    return solve_one(simplex_kernel, v, C)


def solve_cs_subproblem_batch(V, C) -> np.ndarray:
    """Solve many Crammer-Singer subproblems at once, one per row of ``V``.

    Parameters
    ----------
    V : array_like of shape (n, k - 1)
        One linear term per row; must be finite.
    C : float or array_like of shape (n,)
        Bound(s) on the sum, all ``> 0``.

    Returns
    -------
    B : ndarray of shape (n, k - 1), float64
        Row ``r`` is ``solve_cs_subproblem(V[r], C[r])``.

    Raises
    ------
    ValueError
        If ``V`` is not a finite 2-D array or ``C`` is not finite and positive.
    """
    return solve_rows(_simplex_rows, V, C)
