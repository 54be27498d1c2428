"""The Crammer-Singer block solver against independent oracles, the KKT conditions, Walrus and cvxpy."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from streamwww.solvers import SIMPLEX, SOLVER_IDS, solve_cs_subproblem, solve_cs_subproblem_batch
from streamwww.solvers.simplex import simplex_kernel, simplex_sweep_cpu
from streamwww.solvers.walrus import walrus_kernel


def oracle_bisect(V, C, iters=110):
    """Rows of ``(V - theta)_+`` and ``theta``, by bisection, vectorized over the rows of ``V``.

    ``theta = max(gamma, theta_C)``: ``gamma`` the root of ``g(x) = sum (v - x)_+ - x``,
    ``theta_C`` that of ``h(x) = sum (v - x)_+ - C`` (0 where ``h(0) <= 0``), both on
    ``[0, max(v)_+]``, where ``g`` and ``h`` decrease.
    """
    V = np.asarray(V, dtype=np.float64)
    C = np.broadcast_to(np.asarray(C, dtype=np.float64), (V.shape[0],))
    top = np.maximum(V.max(axis=1), 0.0)

    def root(shift):
        lo, hi = np.zeros_like(top), top.copy()
        for _ in range(iters):
            x = 0.5 * (lo + hi)
            pos = np.maximum(V - x[:, None], 0.0).sum(axis=1) - shift(x) > 0
            lo = np.where(pos, x, lo)
            hi = np.where(pos, hi, x)
        return 0.5 * (lo + hi)

    theta = np.maximum(root(lambda x: x), root(lambda x: C))
    return np.maximum(V - theta[:, None], 0.0), theta


def oracle_sort(v, C):
    """``(v - theta)_+`` and ``theta`` by sorting: the largest support of each root taken apart.

    ``gamma = S_r / (r + 1)`` for the largest ``r`` with ``u_r > S_r / (r + 1)``; where
    ``gamma > C``, ``theta = (S_r - C) / r`` for the largest ``r`` with ``u_r > (S_r - C) / r``
    (Shalev-Shwartz & Singer's projection onto the simplex).
    """
    u = np.sort(v[v > 0])[::-1]
    if u.size == 0:
        return np.zeros_like(v), 0.0
    S = np.cumsum(u)
    r = np.arange(1, u.size + 1)
    j = np.flatnonzero(u > S / (r + 1))[-1]  # r = 1 always qualifies: u_1 > u_1 / 2
    theta = S[j] / (j + 2)
    if theta > C:
        ok = np.flatnonzero(u > (S - C) / r)
        j = ok[-1] if ok.size else 0
        theta = (S[j] - C) / (j + 1)
    return np.maximum(v - theta, 0.0), theta


def kkt_violation(b, v, C, theta):
    """Largest violation of the KKT conditions of min 1/2 b'(I+11')b - v'b, b >= 0, sum(b) <= C.

    ``b = (v - theta)_+`` with ``theta = sum(b) + lambda``, ``lambda >= 0`` and
    ``lambda (C - sum(b)) = 0``; feasibility of the sum is checked apart, relative to ``C``.
    """
    s = b.sum()
    return max(
        -b.min(initial=0.0),
        np.abs(b - np.maximum(v - theta, 0.0)).max(initial=0.0),  # stationarity
        s - theta,  # lambda >= 0
        min(theta - s, C - s),  # complementarity
    )


def solve_with_theta(v, C):
    out = np.empty_like(v)
    theta = simplex_kernel(v, C, out, np.empty(max(v.size, 1), dtype=np.int64))
    return out, theta


def random_batch(rng, n, m):
    """``n`` instances of size ``m`` of one kind; ``C`` per row, around the scale of ``v``."""
    s = 10.0 ** rng.uniform(-3, 3)
    kind = int(rng.integers(0, 8))
    if kind == 0:
        V = rng.normal(size=(n, m)) * s
    elif kind == 1:  # integer-valued: ties
        V = np.round(rng.normal(size=(n, m)) * 3.0) * s
    elif kind == 2:  # a few distinct values repeated
        V = np.take_along_axis(rng.normal(size=(n, 3)) * s, rng.integers(0, 3, size=(n, m)), axis=1)
    elif kind == 3:  # all equal
        V = np.repeat(rng.normal(size=(n, 1)) * s, m, axis=1)
    elif kind == 4:  # none positive, zeros among them
        V = -np.abs(rng.normal(size=(n, m))) * s * (rng.random((n, m)) < 0.7)
    elif kind == 5:  # mostly zeros
        V = rng.normal(size=(n, m)) * s * (rng.random((n, m)) < 0.3)
    elif kind == 6:  # a narrow band: many entries positive at the optimum
        V = s * (1.0 + 0.05 * rng.random((n, m)))
    else:  # equal up to a few ulps
        V = s * (1.0 + rng.integers(-3, 4, size=(n, m)) * 2.0**-52)
    C = s * 10.0 ** rng.uniform(-3, 3, size=n)
    C[rng.random(n) < 0.05] = 1e-12
    C[rng.random(n) < 0.05] = 1e12
    return V, C


def test_matches_oracles_on_10000_instances():
    rng = np.random.default_rng(0)
    n_active = n_inactive = n_heap = n_heap_deep = 0
    for batch in range(200):
        m = int(rng.integers(300, 2001)) if batch % 10 == 0 else int(rng.integers(1, 301))
        V, Cs = random_batch(rng, 50, m)
        B = solve_cs_subproblem_batch(V, Cs)
        ref, ref_theta = oracle_bisect(V, Cs)
        for j in range(V.shape[0]):
            v, C, b = V[j], Cs[j], B[j]
            scale = max(1.0, np.abs(v).max())  # tighter than max(1, C, |v|): C bounds nothing
            assert np.abs(b - ref[j]).max() <= 1e-12 * scale, (batch, j, m, C)
            b2, theta = solve_with_theta(v, C)
            assert np.array_equal(b, b2)
            assert abs(theta - ref_theta[j]) <= 1e-12 * scale
            assert kkt_violation(b, v, C, theta) <= 1e-12 * scale, (batch, j, m, C)
            assert b.sum() <= C * (1 + 1e-12)
            b3, theta3 = oracle_sort(v, C)
            assert np.abs(b - b3).max() <= 1e-12 * scale and abs(theta - theta3) <= 1e-12 * scale
            if b.any():
                active = C - b.sum() <= 1e-9 * C
                n_active += active
                n_inactive += not active
            nnz = np.count_nonzero(b)
            n_heap += nnz > 48  # the kernel's pruned list holds the support: the heap path
            n_heap_deep += nnz > 4 * 48  # and its lazily sorted prefix grew
    assert n_active > 1000 and n_inactive > 1000
    assert n_heap > 500 and n_heap_deep > 100


@pytest.mark.parametrize("m", [1, 2, 9, 99, 999, 9_999])
@pytest.mark.parametrize("C", [1e-12, 0.3, 5.0, 1e12])
def test_sizes_and_extreme_C(m, C, rng):
    v = rng.normal(size=m) * 3
    b, theta = solve_with_theta(v, C)
    scale = max(1.0, np.abs(v).max())
    assert kkt_violation(b, v, C, theta) <= 1e-12 * scale
    assert b.sum() <= C * (1 + 1e-12)
    assert np.abs(b - oracle_bisect(v[None], C)[0][0]).max() <= 1e-12 * scale


def test_equals_walrus_where_the_sum_is_free(rng):
    """Where the CS solution has sum(b) <= C, every b_t <= sum(b) <= C: it is Walrus's with box C."""
    n = 0
    for it in range(2000):
        m = int(rng.integers(1, 600)) if it % 20 == 0 else int(rng.integers(1, 40))
        v = rng.normal(size=m) * rng.uniform(0.1, 5.0)
        if it % 3 == 0:
            v = np.round(v)
        C = 10.0 ** rng.uniform(-1, 2)
        b, theta = solve_with_theta(v, C)
        if b.sum() > C * (1 - 1e-9):
            continue
        n += 1
        bw = np.empty_like(v)
        gamma = walrus_kernel(v, C, bw, np.empty(m, dtype=np.int64))
        scale = max(1.0, np.abs(v).max())
        assert np.abs(b - bw).max() <= 1e-12 * scale
        assert abs(theta - gamma) <= 1e-12 * scale
    assert n > 500


def test_against_cvxpy(rng):
    cp = pytest.importorskip("cvxpy")
    for it in range(12):
        m = int(rng.integers(1, 25))
        v = rng.normal(size=m) * 2 + (1.0 if it % 2 else 0.0)
        C = [0.2, 1.0, 5.0][it % 3]
        b = cp.Variable(m)
        obj = 0.5 * (cp.sum_squares(b) + cp.square(cp.sum(b))) - v @ b
        cp.Problem(cp.Minimize(obj), [b >= 0, cp.sum(b) <= C]).solve(solver=cp.CLARABEL)
        assert np.abs(solve_cs_subproblem(v, C) - b.value).max() <= 1e-7


def test_small_cases_by_hand():
    # m = 1: minimize b^2 - v b on [0, C] -> b = clip(v / 2, 0, C)
    for v in (-1.0, 0.5, 1.0, 3.0, 10.0):
        assert solve_cs_subproblem(np.array([v]), 2.0)[0] == pytest.approx(np.clip(v / 2, 0, 2.0), abs=1e-15)
    v = np.array([3.0, 1.0, -1.0, 2.0])
    assert np.allclose(solve_cs_subproblem(v, 100.0), [4 / 3, 0, 0, 1 / 3], rtol=0, atol=1e-15)  # gamma = 5/3
    assert np.array_equal(solve_cs_subproblem(v, 1.0), [1.0, 0, 0, 0])  # theta_C = 2
    assert np.array_equal(solve_cs_subproblem(np.array([-1.0, 0.0, -3.0]), 1.0), np.zeros(3))
    assert np.array_equal(solve_cs_subproblem(np.zeros(0), 1.0), np.zeros(0))


def test_C_zero_in_the_kernel():
    v = np.array([0.5, -1.0, 2.0])
    b, theta = solve_with_theta(v, 0.0)
    assert np.array_equal(b, np.zeros(3)) and theta == 2.0
    b, theta = solve_with_theta(-v, 0.0)
    assert np.array_equal(b, np.zeros(3)) and theta == 1.0
    b, theta = solve_with_theta(-np.abs(v), 0.0)
    assert np.array_equal(b, np.zeros(3)) and theta == 0.0


def _sorted_positive(v):
    pos = np.flatnonzero(v > 0)
    return pos[np.argsort(-v[pos], kind="stable")]


def test_sweep_keeps_only_positive_entries_under_rounding(rng):
    """Entries a few ulps apart, C at and below their rounding: the support's entries stay > theta."""
    for it in range(2000):
        m = int(rng.integers(1, 60))
        a = 10.0 ** rng.uniform(-5, 5)
        v = a * (1.0 + rng.integers(-4, 5, size=m) * 2.0**-52)
        C = a * 10.0 ** rng.uniform(-18, 1)
        srt = _sorted_positive(v)
        r, theta = simplex_sweep_cpu(v, srt, srt.size, C)
        assert 0 <= r <= srt.size
        assert np.all(v[srt[:r]] - theta > 0)
        if r == 0:
            assert theta >= v[srt[0]]
        b = solve_cs_subproblem(v, C)
        assert b.sum() <= C * (1 + 1e-12)
        assert np.abs(b - oracle_sort(v, C)[0]).max() <= 1e-12 * max(1.0, a)


@pytest.mark.parametrize("shift", [0.0, 1.0, 30.0])
def test_sweep_on_sorted_input_equals_the_kernel(shift, rng):
    """Insertion sort up to 48 positive entries, the lazily sorted heap prefix above."""
    for m in (5, 48, 49, 60, 500, 3000):
        for C in (0.01, 1.0, 1e3):
            v = rng.normal(size=m) + shift
            srt = _sorted_positive(v)
            if srt.size == 0:
                continue
            r, theta = simplex_sweep_cpu(v, srt, srt.size, C)
            b, theta_k = solve_with_theta(v, C)
            full = np.zeros(m)
            full[srt[:r]] = v[srt[:r]] - theta
            assert theta_k == theta and np.count_nonzero(b) == r  # distinct entries: the same sums
            if full.sum() <= C:
                assert np.array_equal(b, full)
            else:
                assert np.abs(b - full).max() <= 1e-15 * max(1.0, np.abs(v).max())
    # ties: the heap pops tied entries in another order, so sums may differ by rounding
    v = 20.0 + rng.integers(0, 8, size=2000) / 128
    srt = _sorted_positive(v)
    r, theta = simplex_sweep_cpu(v, srt, srt.size, 1e6)
    b, theta_k = solve_with_theta(v, 1e6)
    assert r > 4 * 48 and np.count_nonzero(b) == r and abs(theta_k - theta) <= 1e-12 * 20


def test_batch_equals_single(rng):
    V = rng.normal(size=(40, 7)) * 2
    Cs = rng.uniform(0.1, 3, size=40)
    B = solve_cs_subproblem_batch(V, Cs)
    for r in range(40):
        assert np.array_equal(B[r], solve_cs_subproblem(V[r], Cs[r]))
    assert np.array_equal(solve_cs_subproblem_batch(V, 0.5)[3], solve_cs_subproblem(V[3], 0.5))
    assert solve_cs_subproblem_batch(np.zeros((3, 0)), 1.0).shape == (3, 0)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nonfinite_v_raises(bad):
    with pytest.raises(ValueError, match="v must be finite"):
        solve_cs_subproblem(np.array([1.0, bad]), 1.0)
    with pytest.raises(ValueError, match="V must be finite"):
        solve_cs_subproblem_batch(np.array([[1.0, bad]]), 1.0)


@pytest.mark.parametrize("C", [0.0, -1.0, np.nan, np.inf])
def test_bad_C_raises(C):
    with pytest.raises(ValueError, match=r"C must be a finite float in \(0, inf\)"):
        solve_cs_subproblem(np.array([1.0, 2.0]), C)
    with pytest.raises(ValueError, match=r"C must be a finite float in \(0, inf\)"):
        solve_cs_subproblem_batch(np.ones((2, 2)), np.array([1.0, C]))


def test_wrong_shapes_raise():
    with pytest.raises(ValueError, match="v must be a 1-D array"):
        solve_cs_subproblem(np.ones((2, 2)), 1.0)
    with pytest.raises(ValueError, match="V must be a 2-D array"):
        solve_cs_subproblem_batch(np.ones(3), 1.0)
    with pytest.raises(ValueError, match="C must be a scalar"):
        solve_cs_subproblem(np.ones(3), np.ones(3))


def test_solver_id():
    assert SIMPLEX not in SOLVER_IDS.values() and "simplex" not in SOLVER_IDS


@settings(max_examples=300, deadline=None)
@given(
    v=arrays(np.float64, st.integers(1, 40),
             elements=st.sampled_from([-2.0, -1.0, 0.0, 0.5, 1.0, 1.5, 2.0, 3.0])
             | st.floats(-50, 50, allow_nan=False, allow_infinity=False)),
    C=st.sampled_from([0.5, 1.0, 2.0]) | st.floats(1e-6, 1e3),
)
def test_property_kkt(v, C):
    b, theta = solve_with_theta(v, C)
    scale = max(1.0, np.abs(v).max())
    assert kkt_violation(b, v, C, theta) <= 1e-12 * scale
    assert b.sum() <= C * (1 + 1e-12)
    b2, theta2 = oracle_sort(v, C)
    assert np.abs(b - b2).max() <= 1e-12 * scale and abs(theta - theta2) <= 1e-12 * scale
