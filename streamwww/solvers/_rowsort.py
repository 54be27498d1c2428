"""Row-sized helpers of the exact block solvers (:mod:`.walrus`, :mod:`.simplex`): the
positive entries of ``v``, their sort (insertion sort, or a heap for a lazily sorted
prefix), Neumaier-compensated sums, and the public functions' checks and calls
(:func:`solve_one`, :func:`solve_rows`)."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

__all__ = ["INSERTION_SORT_MAX", "add_compensated", "check_C", "check_v", "collect_positive", "extend_sorted",
           "heapify", "insertion_sort_desc", "sift_down", "solve_one", "solve_rows"]

# Up to this many positive entries an insertion sort; above, a heap and a
# lazily sorted prefix that starts with this many entries.
INSERTION_SORT_MAX = 48


@njit(cache=True, nogil=True, inline="always")
def collect_positive(v, idx):
    """Write the indices of the positive entries of ``v`` to ``idx[:p]``; return ``p``."""
    p = 0
    for i in range(v.shape[0]):
        if v[i] > 0.0:
            idx[p] = i
            p += 1
    return p


@njit(cache=True, nogil=True, inline="always")
def insertion_sort_desc(v, idx, p):
    """Sort ``idx[:p]`` by decreasing ``v[idx]``."""
    for i in range(1, p):
        j = idx[i]
        key = v[j]
        q = i - 1
        while q >= 0 and v[idx[q]] < key:
            idx[q + 1] = idx[q]
            q -= 1
        idx[q + 1] = j


@njit(cache=True, nogil=True, inline="always")
def sift_down(v, heap, root, n):
    """Restore the max-heap property (by ``v[heap]``) of ``heap[:n]`` below ``root``."""
    j = heap[root]
    key = v[j]
    while True:
        child = 2 * root + 1
        if child >= n:
            break
        if child + 1 < n and v[heap[child + 1]] > v[heap[child]]:
            child += 1
        if v[heap[child]] <= key:
            break
        heap[root] = heap[child]
        root = child
    heap[root] = j


@njit(cache=True, nogil=True, inline="always")
def heapify(v, idx, p):
    """Make ``idx[:p]`` a max-heap by ``v[idx]`` (O(p))."""
    for root in range(p // 2 - 1, -1, -1):
        sift_down(v, idx, root, p)


@njit(cache=True, nogil=True, inline="always")
def extend_sorted(v, idx, p, n_sorted, target):
    """Pop the largest entries of the heap ``idx[:p - n_sorted]`` into the sorted prefix kept
    reversed at the tail (``idx[p - 1 - q]`` the ``q``-th largest) until it holds ``target``;
    return the new count."""
    while n_sorted < target:
        last = p - 1 - n_sorted
        top = idx[0]
        idx[0] = idx[last]
        idx[last] = top
        n_sorted += 1
        sift_down(v, idx, 0, p - n_sorted)
    return n_sorted


@njit(cache=True, nogil=True, inline="always")
def add_compensated(s, c, x):
    """Neumaier-compensated ``s + x``; the running error term is ``c``."""
    t = s + x
    if abs(s) >= abs(x):
        c += (s - t) + x
    else:
        c += (x - t) + s
    return t, c


def check_v(v, ndim: int, name: str) -> np.ndarray:
    v = np.ascontiguousarray(v, dtype=np.float64)
    if v.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-D array. Got an array of shape {v.shape} instead.")
    if not np.all(np.isfinite(v)):
        raise ValueError(f"{name} must be finite; it contains NaN or infinity.")
    return v


def check_C(C) -> np.ndarray:
    if isinstance(C, (float, int)) and not isinstance(C, bool):  # fast path: no NumPy conversion
        if math.isfinite(C) and C > 0:
            return np.float64(C)
        raise ValueError(f"C must be a finite float in (0, inf). Got {C!r} instead.")
    Cs = np.asarray(C, dtype=np.float64)
    if not np.all(np.isfinite(Cs)) or np.any(Cs <= 0):
        raise ValueError(f"C must be a finite float in (0, inf). Got {C!r} instead.")
    return Cs


def solve_one(kernel, v, C) -> np.ndarray:
    """``kernel(v, C, out, idx)`` (a per-row solver) on a checked vector ``v`` and scalar ``C``."""
    v = check_v(v, 1, "v")
    Cs = check_C(C)
    if Cs.ndim != 0:
        raise ValueError(f"C must be a scalar. Got an array of shape {Cs.shape} instead.")
    out = np.empty_like(v)
    if v.size:
        kernel(v, float(Cs), out, np.empty(v.size, dtype=np.int64))
    return out


def solve_rows(rows, V, C) -> np.ndarray:
    """``rows(V, Cs, out)`` (a per-row solver over the rows of ``V``) on a checked ``V`` and
    ``C`` broadcast to one bound per row."""
    V = check_v(V, 2, "V")
    Cs = np.ascontiguousarray(np.broadcast_to(check_C(C), (V.shape[0],)), dtype=np.float64)
    out = np.empty_like(V)
    if V.size:
        rows(V, Cs, out)
    return out
