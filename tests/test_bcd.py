"""The exact BCD pass against the NumPy reference, and the DESIGN.md invariants."""

import numpy as np
import pytest
import scipy.sparse as sp

import streamwww as sw

from streamwww.backends.base import make_block
from streamwww.backends.cpu import bcd_pass
from streamwww.io import write_store

from .conftest import make_classification
from .reference import W_from_beta, dual_value, objectives_in_memory, reference_pass


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bias", [0.0, 1.5])
def test_pass_matches_reference(sparse, dtype, bias, rng):
    X, y = make_classification(rng, n=50, d=6, k=5, sparse=sparse, dtype=dtype)
    k, C = 5, 0.8
    D = X.shape[1] + (1 if bias else 0)
    W, beta = np.zeros((D, k)), np.zeros((50, k - 1))
    W_ref, beta_ref = W.copy(), beta.copy()
    for epoch in range(3):
        order = rng.permutation(50)
        bcd_pass(W, X, y, beta, C, order, bias=bias)
        reference_pass(W_ref, X, y, beta_ref, C, order, bias=bias)
    assert np.abs(W).max() > 0.1 and (beta > 0).mean() > 0.1  # non-trivial
    np.testing.assert_allclose(W, W_ref, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(beta, beta_ref, rtol=1e-10, atol=1e-12)


def test_given_squared_norms_are_the_ones_the_pass_uses(rng):
    """``sqnorms=``: the pass takes the given squared norms (read-only ones too); the norms it
    would compute give its model bit for bit, other norms another model."""
    X, y = make_classification(rng, n=50, d=6, k=5, sparse=True)
    sq = make_block(X, y, 1.5).sqnorms.copy()
    sq.flags.writeable = False
    orders = [rng.permutation(50) for _ in range(2)]
    models = []
    for given in (None, sq, 2 * sq):
        W, beta = np.zeros((7, 5)), np.zeros((50, 4))
        for order in orders:
            bcd_pass(W, X, y, beta, 0.8, order, bias=1.5, sqnorms=given)
        models.append(W)
    assert models[0].tobytes() == models[1].tobytes()
    assert not np.array_equal(models[0], models[2])

@pytest.mark.parametrize("sparse", [False, True])
def test_invariants_within_epochs(sparse, rng):
    X, y = make_classification(rng, n=40, d=5, k=4, sparse=sparse)
    C, k = 0.5, 4
    W, beta = np.zeros((X.shape[1] + 1, k)), np.zeros((40, k - 1))
    last = dual_value(W, beta)
    for epoch in range(4):
        for i in rng.permutation(40):  # row by row: the dual never decreases
            bcd_pass(W, X, y, beta, C, np.array([i]), bias=1.0)
            now = dual_value(W, beta)
            assert now >= last - 1e-12 * max(1.0, abs(last))
            last = now
        assert beta.min() >= 0.0 and beta.max() <= C
        np.testing.assert_allclose(W, W_from_beta(X, y, beta, k, bias=1.0), atol=1e-12)


def test_zero_rows_do_not_move_W_and_keep_gap_exact(rng):
    X, y = make_classification(rng, n=30, d=4, k=3, sparse=True)
    X = sp.lil_matrix(X)
    X[3, :] = 0
    X[7, :] = 0
    X = sp.csr_matrix(X)
    X.eliminate_zeros()
    C = 1.0
    W, beta = np.zeros((4, 3)), np.zeros((30, 2))
    for _ in range(200):
        bcd_pass(W, X, y, beta, C, rng.permutation(30))
    assert np.array_equal(beta[3], [C, C]) and np.array_equal(beta[7], [C, C])
    P, D = objectives_in_memory(W, X, y, beta, C)
    assert (P - D) / abs(P) < 1e-6  # zero rows contribute C(k-1) to both sides


def test_multi_model_equals_single(rng):
    X, y = make_classification(rng, n=40, d=5, k=4)
    Cs = np.array([0.1, 1.0, 10.0])
    W3, B3 = np.zeros((3, 6, 4)), np.zeros((3, 40, 3))
    singles = [(np.zeros((6, 4)), np.zeros((40, 3))) for _ in Cs]
    for epoch in range(3):
        order = rng.permutation(40)
        bcd_pass(W3, X, y, B3, Cs, order, bias=1.0)
        for (W, B), C in zip(singles, Cs):
            bcd_pass(W, X, y, B, C, order, bias=1.0)
    for m, (W, B) in enumerate(singles):
        assert np.array_equal(W3[m], W) and np.array_equal(B3[m], B)


def test_shark_reaches_same_optimum(rng):
    X, y = make_classification(rng, n=60, d=5, k=6)
    kw = dict(C=1.0, max_iter=100_000, random_state=0)
    walrus = sw.WWClassifier(tol=1e-9, **kw).fit(X, y)
    # Shark stops each block at a KKT violation of 1e-4 (margin units), so the
    # whole problem cannot be solved much below a relative gap of ~1e-4.
    shark = sw.WWClassifier(tol=1e-3, subproblem="shark", **kw).fit(X, y)
    assert walrus.history_[-1]["rel_gap"] <= 1e-9
    assert shark.history_[-1]["rel_gap"] <= 1e-3
    assert shark.history_[-1]["primal"] == pytest.approx(walrus.history_[-1]["primal"], rel=1e-3)
    assert shark.history_[-1]["dual"] <= walrus.history_[-1]["primal"]  # weak duality
    # the first epoch sees the same start, and the paper's DG_1 ratio is ~1
    assert shark.history_[0]["gap"] == pytest.approx(walrus.history_[0]["gap"], rel=0.05)


def test_bad_arrays_rejected(rng):
    X, y = make_classification(rng, n=10, d=3, k=3)
    with pytest.raises(ValueError, match="float64"):
        bcd_pass(np.zeros((3, 3), dtype=np.float32), X, y, np.zeros((10, 2)), 1.0, np.arange(10))
    with pytest.raises(ValueError, match="subproblem"):
        bcd_pass(np.zeros((3, 3)), X, y, np.zeros((10, 2)), 1.0, np.arange(10), subproblem="x")


def test_callback_weights_are_the_model_of_that_epoch(rng):
    """The callback's weights(j) after epoch t equal the model trained with max_iter = t."""
    X, y = make_classification(rng, n=120, d=7, k=4)
    seen = {}

    def cb(info):
        seen[info["epoch"]] = [info["weights"](j) for j in range(len(info["models"]))]

    kw = dict(C=[0.5, 2.0], tol=0.0, random_state=3, fit_intercept=True, eval_every=1)  # (a callback every epoch)
    sw.train((X, y), max_iter=4, callback=cb, **kw)
    assert sorted(seen) == [1, 2, 3, 4]
    for j, m in enumerate(sw.train((X, y), max_iter=2, **kw)):
        coef, intercept = seen[2][j]
        np.testing.assert_array_equal(coef, m.coef_)
        np.testing.assert_array_equal(intercept, m.intercept_)
    assert not np.array_equal(seen[2][0][0], seen[4][0][0])


@pytest.mark.parametrize("data", ["arrays", "store"])
def test_callback_weights_are_refused_after_the_callback(rng, tmp_path, data):
    """``info["weights"]`` reads the arrays training goes on in (or, certified late, a buffer
    the next certificate reuses): called after its callback it raises, never another epoch's."""
    X, y = make_classification(rng, n=120, d=7, k=4)
    source = (X, y)
    if data == "store":  # one model read from disk: its objectives certified one epoch late
        write_store(tmp_path / "s.zarr", X, y, shard_rows=40)
        source = tmp_path / "s.zarr"
    kept, during = [], []

    def cb(info):
        kept.append(info["weights"])
        during.append(info["weights"](0))

    m = sw.train(source, C=1.0, tol=0.0, max_iter=3, random_state=3, eval_every=1, memory_budget=0, callback=cb)
    assert len(kept) == 3 and np.array_equal(during[-1][0], m.coef_)
    for weights in kept:
        with pytest.raises(RuntimeError, match="valid only while the callback"):
            weights(0)
