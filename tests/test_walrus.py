"""Walrus against an independent oracle (bisection on gamma) and the KKT conditions."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from streamwww import solve_subproblem, solve_subproblem_batch


def oracle(v, C):
    """b = clip(v - g, 0, C) with g the root of g = sum(clip(v - g, 0, C)) (DESIGN.md §2)."""
    lo, hi = 0.0, max(0.0, float(v.max()))
    for _ in range(200):
        g = 0.5 * (lo + hi)
        if g - np.clip(v - g, 0.0, C).sum() > 0:
            hi = g
        else:
            lo = g
    return np.clip(v - 0.5 * (lo + hi), 0.0, C)


def kkt_violation(b, v, C):
    """Largest violation of the KKT conditions of min 1/2 b'(I+11')b - v'b, 0<=b<=C."""
    g = b + b.sum() - v  # gradient
    viol = np.zeros_like(b)
    inner = (b > 0) & (b < C)
    viol[inner] = np.abs(g[inner])
    viol[b <= 0] = np.maximum(0, -g[b <= 0])
    viol[b >= C] = np.maximum(0, g[b >= C])
    feas = np.maximum(0, np.maximum(-b, b - C))
    return max(viol.max(initial=0), feas.max(initial=0))


def random_instance(rng, m):
    C = 10.0 ** rng.uniform(-4, 4)
    kind = rng.integers(0, 4)
    v = rng.normal(size=m) * C * rng.uniform(0.05, 4.0)
    if kind == 1:  # heavy ties, including entries exactly C apart
        v = np.round(v / C * 2) / 2 * C
    elif kind == 2:  # a few distinct values repeated
        v = rng.choice(rng.normal(size=3) * C, size=m)
    elif kind == 3:  # shifted so that many entries exceed C
        v = v + C * rng.uniform(0, 3)
    return v, C


def test_walrus_matches_oracle_on_10000_instances():
    rng = np.random.default_rng(0)
    n_nontrivial = 0
    for it in range(10_000):
        m = int(rng.integers(1, 2000)) if it % 10 == 0 else int(rng.integers(1, 60))
        v, C = random_instance(rng, m)
        b = solve_subproblem(v, C)
        scale = max(1.0, C, np.abs(v).max())
        assert kkt_violation(b, v, C) <= 1e-12 * scale, (it, m, C)
        np.testing.assert_allclose(b, oracle(v, C), rtol=0, atol=1e-12 * scale)
        n_nontrivial += bool(((b > 0) & (b < C)).any())
    assert n_nontrivial > 1000  # the instances exercise the inside (n_m > 0) branch


@pytest.mark.parametrize("m", [1, 2, 9, 99, 999, 9_999])
def test_sizes_up_to_k_10000(m, rng):
    v, C = rng.normal(size=m) * 3, 0.7
    b = solve_subproblem(v, C)
    assert kkt_violation(b, v, C) <= 1e-12 * 10
    assert np.abs(b - oracle(v, C)).max() <= 1e-12


def test_nonpositive_v_gives_zero():
    assert np.array_equal(solve_subproblem(np.array([-1.0, 0.0, -3.0]), 1.0), np.zeros(3))


def test_k2_closed_form():
    # m = 1: minimize b^2 - v b on [0, C] -> b = clip(v / 2, 0, C)
    for v in (-1.0, 0.5, 1.0, 3.0, 10.0):
        assert solve_subproblem(np.array([v]), 2.0)[0] == pytest.approx(np.clip(v / 2, 0, 2.0), abs=1e-15)


def test_all_ties_and_exactly_C_apart():
    C = 1.0
    for v in ([2.0, 2.0, 2.0], [3.0, 2.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0, 2.0, 2.0], [5.0, 4.0, 4.0, 3.0]):
        v = np.array(v)
        b = solve_subproblem(v, C)
        assert kkt_violation(b, v, C) <= 1e-14
        assert np.allclose(b, oracle(v, C), atol=1e-14)


@pytest.mark.parametrize("C", [1e-12, 1e-6, 1e6, 1e12])
def test_tiny_and_huge_C(C, rng):
    v = rng.normal(size=50) * max(C, 1.0)
    b = solve_subproblem(v, C)
    scale = max(1.0, C, np.abs(v).max())
    assert kkt_violation(b, v, C) <= 1e-12 * scale
    assert np.abs(b - oracle(v, C)).max() <= 1e-12 * scale


def test_batch_equals_single(rng):
    V = rng.normal(size=(40, 7)) * 2
    Cs = rng.uniform(0.1, 3, size=40)
    B = solve_subproblem_batch(V, Cs)
    for r in range(40):
        assert np.array_equal(B[r], solve_subproblem(V[r], Cs[r]))
    assert np.array_equal(solve_subproblem_batch(V, 0.5)[3], solve_subproblem(V[3], 0.5))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nonfinite_v_raises(bad):
    with pytest.raises(ValueError, match="finite"):
        solve_subproblem(np.array([1.0, bad]), 1.0)
    with pytest.raises(ValueError, match="finite"):
        solve_subproblem_batch(np.array([[1.0, bad]]), 1.0)


@pytest.mark.parametrize("C", [0.0, -1.0, np.nan, np.inf])
def test_bad_C_raises(C):
    with pytest.raises(ValueError, match="C must be"):
        solve_subproblem(np.array([1.0, 2.0]), C)


@settings(max_examples=300, deadline=None)
@given(
    v=arrays(np.float64, st.integers(1, 40),
             elements=st.sampled_from([-2.0, -1.0, 0.0, 0.5, 1.0, 1.5, 2.0, 3.0])
             | st.floats(-50, 50, allow_nan=False, allow_infinity=False)),
    C=st.sampled_from([0.5, 1.0, 2.0]) | st.floats(1e-3, 1e3),
)
def test_property_kkt(v, C):
    b = solve_subproblem(v, C)
    scale = max(1.0, C, np.abs(v).max())
    assert kkt_violation(b, v, C) <= 1e-12 * scale
    assert np.abs(b - oracle(v, C)).max() <= 1e-12 * scale


@pytest.mark.parametrize("shift", [0.0, 2.0, 6.0])
def test_lazily_sorted_prefix_equals_the_full_sort(shift, rng):
    """Above 48 positive entries the kernel sorts a growing prefix by heap selection;
    shifted v puts many entries at C, so the sweep runs deep and the prefix must grow."""
    from streamwww.backends.rowmath import walrus_sweep_cpu

    for m in (49, 60, 500, 3000):
        for C in (0.01, 1.0):
            v = (rng.normal(size=m) + shift) * C
            pos = np.flatnonzero(v > 0)
            srt = pos[np.argsort(-v[pos], kind="stable")]
            nu, nm, gamma, viol = walrus_sweep_cpu(v, srt, srt.size, C)
            full = np.zeros(m)
            full[srt[:nu]] = C
            full[srt[nu:nu + nm]] = np.clip(v[srt[nu:nu + nm]] - gamma, 0.0, C)
            b = solve_subproblem(v, C)
            assert viol <= 0.0 and (b == C).sum() == nu
            np.testing.assert_allclose(b, full, rtol=0, atol=1e-14 * max(1.0, np.abs(v).max()))
