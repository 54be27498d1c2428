"""Crammer-Singer on the engine: the optimum, the certificate, and everything WW's runs do.

The block step itself is tested against an oracle in ``tests/test_simplex.py``; here whole
problems are checked against a generic QP solver and a NumPy primal, and the engine's
features (weights, several C, stores, checkpoints, resume, CV, threads, clusters, model
files, the command line) are run with ``loss="cs"``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp

import streamwww as sw
from streamwww.backends.cpu import bcd_pass
from streamwww.io import write_store

from .conftest import check_an_old_rule_resumes, make_classification


def cs_primal(X, y, W, b, C, weights=None):
    """``1/2 ||[W; b]||^2 + C sum_i w_i max(0, max_{j != y_i} 1 - (s_y - s_j))`` in NumPy,
    ``W`` (k, d) and the intercept row ``b`` (k,) of a model with bias 1."""
    S = np.asarray(X @ W.T) + b
    n = S.shape[0]
    sy = S[np.arange(n), y]
    M = 1.0 - (sy[:, None] - S)
    M[np.arange(n), y] = -np.inf
    hinge = np.maximum(0.0, M.max(axis=1))
    w = np.ones(n) if weights is None else np.asarray(weights)
    return 0.5 * (np.sum(W * W) + np.sum(b * b)) + C * np.sum(w * hinge)


def qp_cs_primal(X, y, C, k, bias, weights=None):
    cp = pytest.importorskip("cvxpy")
    Xd = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    if bias:
        Xd = np.hstack([Xd, np.full((Xd.shape[0], 1), bias)])
    n, d = Xd.shape
    W = cp.Variable((d, k))
    xi = cp.Variable(n)
    S = Xd @ W
    Y = np.eye(k)[y]
    sy = cp.sum(cp.multiply(S, Y), axis=1)
    cons = [xi >= 0]
    for j in range(k):
        mask = y != j
        cons.append(xi[mask] >= 1 - (sy[mask] - S[mask, j]))
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    prob = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(W) + C * (w @ xi)), cons)
    prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    return prob.value


@pytest.mark.parametrize("C", [0.05, 1.0, 5.0])
@pytest.mark.parametrize("sparse", [False, True])
def test_optimum_matches_qp_solver(C, sparse, rng):
    X, y = make_classification(rng, n=40, d=4, k=4, sparse=sparse)
    model = sw.CSClassifier(C=C, tol=1e-10, max_iter=100_000, random_state=0).fit(X, y)
    last = model.history_[-1]
    assert last["rel_gap"] <= 1e-10
    assert model.score(X, y) > 0.5
    P_np = cs_primal(X, y, model.coef_, model.intercept_, C)
    assert last["primal"] == pytest.approx(P_np, rel=1e-12)  # the engine's hinge is CS's
    assert last["primal"] == pytest.approx(qp_cs_primal(X, y, C, 4, bias=1.0), rel=1e-6)


def test_weighted_optimum_matches_qp_solver(rng):
    X, y = make_classification(rng, n=40, d=4, k=3)
    w = rng.uniform(0.0, 3.0, size=40)
    w[:3] = [0.0, 0.5, 2.0]
    model = sw.CSClassifier(C=0.7, tol=1e-10, max_iter=100_000, random_state=0).fit(X, y, sample_weight=w)
    assert model.history_[-1]["rel_gap"] <= 1e-10
    assert model.history_[-1]["primal"] == pytest.approx(cs_primal(X, y, model.coef_, model.intercept_, 0.7, w),
                                                         rel=1e-12)
    assert model.history_[-1]["primal"] == pytest.approx(qp_cs_primal(X, y, 0.7, 3, 1.0, w), rel=1e-6)


def test_differs_from_ww(rng):
    X = rng.normal(size=(60, 5))
    y = rng.integers(0, 5, size=60)  # overlapping classes: rows with several margins violated
    cs = sw.CSClassifier(C=1.0, tol=1e-8, max_iter=100_000, random_state=0).fit(X, y)
    ww = sw.WWClassifier(C=1.0, tol=1e-8, max_iter=100_000, random_state=0).fit(X, y)
    assert not np.allclose(cs.coef_, ww.coef_, atol=1e-6)
    assert cs.history_[-1]["primal"] < ww.history_[-1]["primal"]  # max <= sum of the hinges


def test_feasible_set_and_dual_monotone(rng):
    """``beta_i >= 0``, ``1^T beta_i <= C w_i``, W == W(beta), and the dual rises pass by pass."""
    X, y = make_classification(rng, n=50, d=4, k=5)
    k, C = 5, 0.8
    D = X.shape[1] + 1
    W = np.zeros((D, k))
    beta = np.zeros((50, k - 1))
    duals = []
    for e in range(6):
        bcd_pass(W, X, y, beta, C, rng.permutation(50), bias=1.0, loss="cs")
        assert np.all(beta >= 0.0)
        assert np.all(beta.sum(axis=1) <= C * (1 + 1e-12))
        duals.append(beta.sum() - 0.5 * np.sum(W * W))
    assert all(b >= a - 1e-12 for a, b in zip(duals, duals[1:]))
    # W(beta) = sum_i x_i u_i^T, u_i[y] = sum_t beta_t, u_i[c(t)] = -beta_t
    Xb = np.hstack([X, np.ones((50, 1))])
    U = np.zeros((50, k))
    for i in range(50):
        U[i, y[i]] = beta[i].sum()
        for t in range(k - 1):
            c = t + 1 if t + 1 != y[i] else 0
            U[i, c] -= beta[i, t]
    np.testing.assert_allclose(W, Xb.T @ U, atol=1e-10)


def test_zero_rows_close_the_gap(rng):
    X, y = make_classification(rng, n=30, d=4, k=3)
    X[[3, 7]] = 0.0
    model = sw.CSClassifier(C=1.0, tol=1e-10, max_iter=100_000, fit_intercept=False, random_state=0).fit(X, y)
    assert model.history_[-1]["rel_gap"] <= 1e-10


def test_several_C_equal_single_runs(rng):
    X, y = make_classification(rng, n=80, d=6, k=4, sparse=True)
    many = sw.train((X, y), C=[0.1, 2.0], loss="cs", tol=1e-6, random_state=3)
    for m, C in zip(many, (0.1, 2.0)):
        one = sw.train((X, y), C=C, loss="cs", tol=1e-6, random_state=3)
        assert type(m) is sw.CSClassifier
        np.testing.assert_array_equal(m.coef_, one.coef_)
        np.testing.assert_array_equal(m.intercept_, one.intercept_)


def test_threads_and_block_pass_same_model(rng):
    X, y = make_classification(rng, n=200, d=8, k=6, sparse=True)
    base = dict(C=1.0, loss="cs", tol=1e-4, random_state=1)
    one = sw.train((X, y), n_jobs=1, **base)
    two = sw.train((X, y), n_jobs=2, **base)
    np.testing.assert_array_equal(one.coef_, two.coef_)
    b1 = sw.train((X, y), n_jobs=1, block_rows=16, **base)
    b2 = sw.train((X, y), n_jobs=2, block_rows=16, **base)
    np.testing.assert_array_equal(b1.coef_, b2.coef_)
    for m in (one, b1):
        assert m.history_[-1]["rel_gap"] <= 1e-4
    assert b1.history_[-1]["primal"] == pytest.approx(one.history_[-1]["primal"], rel=2e-4)


def test_shrinking_reaches_the_same_certificate(rng):
    X, y = make_classification(rng, n=300, d=10, k=5, sparse=True)
    on = sw.CSClassifier(C=1.0, tol=1e-5, shrinking=True, max_iter=5000, random_state=0).fit(X, y)
    off = sw.CSClassifier(C=1.0, tol=1e-5, shrinking=False, max_iter=5000, random_state=0).fit(X, y)
    assert on.history_[-1]["rel_gap"] <= 1e-5 and off.history_[-1]["rel_gap"] <= 1e-5
    assert on.history_[-1]["primal"] == pytest.approx(off.history_[-1]["primal"], rel=2e-5)


@pytest.mark.parametrize("sparse", [False, True])
def test_cs_keeps_only_the_terms_near_the_rows_largest(sparse, rng):
    """Shrinking's flags (engine.shrink): WW keeps every coordinate whose term
    ``1 - (s_y - s_c(t))`` is positive; Crammer-Singer only those also within ``CS_NEAR`` of
    the row's largest term (its hinge loss), computed here from the scores in NumPy."""
    from streamwww.backends.base import make_block
    from streamwww.backends.cpu import CPUBackend
    from streamwww.backends.rowmath import CS_NEAR
    from streamwww.solvers import CS_LOSS, WW_LOSS

    n, d, k = 300, 12, 7
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < 0.6)
    y = rng.integers(0, k, size=n).astype(np.int32)
    W = rng.normal(size=(1, d, k)) * 0.4
    block = make_block(sp.csr_matrix(X) if sparse else X, y, 0.0)
    S = X @ W[0]
    terms = np.empty((n, k - 1))
    for t in range(k - 1):
        c = np.where(t + 1 != y, t + 1, 0)
        terms[:, t] = 1.0 - (S[np.arange(n), y] - S[np.arange(n), c])
    largest = np.maximum(0.0, terms.max(axis=1))
    flags = {}
    for loss in (WW_LOSS, CS_LOSS):
        near = np.full((1, n, k - 1), 7, dtype=np.uint8)
        CPUBackend(n_threads=1).hinge_sums(W, block, 0.0, np.array([0]), near=near, reach=0.0, loss=loss)
        flags[loss] = near[0].astype(bool)
    np.testing.assert_array_equal(flags[WW_LOSS], terms > 0)
    np.testing.assert_array_equal(flags[CS_LOSS], (terms > 0) & (terms >= largest[:, None] - CS_NEAR))
    assert flags[CS_LOSS].sum() < 0.8 * flags[WW_LOSS].sum()  # sharper: rows with a margin below 1 lose some
    assert np.all(flags[CS_LOSS][terms == largest[:, None]] | (largest[:, None] == 0))  # the largest stays


def test_shark_is_refused_with_cs(rng):
    X, y = make_classification(rng, n=20, d=3, k=3)
    with pytest.raises(ValueError, match="subproblem='shark'.*Crammer-Singer"):
        sw.CSClassifier(subproblem="shark").fit(X, y)
    with pytest.raises(ValueError, match="'loss'"):
        sw.train((X, y), loss="hinge")


def test_store_checkpoint_resume_and_model_file(tmp_path, rng):
    X, y = make_classification(rng, n=300, d=8, k=5, sparse=True)
    write_store(tmp_path / "s.zarr", X, y, shard_rows=64)
    settings = dict(C=1.0, loss="cs", tol=1e-8, max_iter=40, random_state=5, eval_every=1)
    full = sw.train(str(tmp_path / "s.zarr"), **settings)
    assert type(full) is sw.CSClassifier

    def stop(info):
        if info["epoch"] == 3:
            raise KeyboardInterrupt  # as Ctrl-C: the run commits where it stands and stops

    ck = tmp_path / "ck"
    with pytest.raises(KeyboardInterrupt):
        sw.train(str(tmp_path / "s.zarr"), checkpoint_dir=ck, checkpoint_interval=0, callback=stop, **settings)
    manifest = json.loads((ck / "manifest.json").read_text())
    done = sw.resume(ck, model_out=tmp_path / "m.npz")
    assert type(done) is sw.CSClassifier
    np.testing.assert_array_equal(done.coef_, full.coef_)
    np.testing.assert_array_equal(done.intercept_, full.intercept_)
    loaded = sw.load_model(tmp_path / "m.npz")
    assert type(loaded) is sw.CSClassifier
    np.testing.assert_array_equal(loaded.coef_, full.coef_)
    np.testing.assert_array_equal(loaded.predict(X), full.predict(X))
    assert manifest["config"]["loss"] == "cs"


def test_a_checkpoint_of_shrink_rule_1_resumes_with_that_rule(tmp_path, rng, monkeypatch):
    """A Crammer-Singer checkpoint written before the sharper sets (no "shrink_rule" in its
    config: 0.5 and earlier) resumes to the model that rule trains, bitwise; new runs record
    rule 3, and rules 1 and 3 train different models."""
    X, y = make_classification(rng, n=300, d=8, k=6, sparse=True)
    write_store(tmp_path / "s.zarr", X, y, shard_rows=64)
    config = check_an_old_rule_resumes(monkeypatch, tmp_path / "s.zarr", tmp_path / "old", 1, 4, C=1.0, loss="cs",
                                       tol=1e-8, max_iter=30, random_state=5, eval_every=1)
    assert "shrink_rule" not in config
    sw.train(str(tmp_path / "s.zarr"), checkpoint_dir=tmp_path / "new", max_iter=2, tol=1e-8, C=1.0, loss="cs",
             random_state=5)
    assert json.loads((tmp_path / "new" / "manifest.json").read_text())["config"]["shrink_rule"] == 3


def test_ww_records_no_loss(rng):
    """WW models and checkpoints are written as before Crammer-Singer existed."""
    from streamwww.model.fitted import FittedModel, model_params

    X, y = make_classification(rng, n=30, d=3, k=3)
    ww = sw.WWClassifier(max_iter=5).fit(X, y)
    assert "loss" not in model_params(ww)
    cs = sw.CSClassifier(max_iter=5).fit(X, y)
    assert model_params(cs)["loss"] == "cs"
    rec = FittedModel.of(cs)
    assert rec.loss == "cs" and type(sw.WWClassifier.from_fitted(rec)) is sw.CSClassifier
    assert FittedModel.of(ww).loss == "ww"


def test_cv_class(rng):
    X, y = make_classification(rng, n=120, d=5, k=4)
    cv = sw.CSClassifierCV(Cs=[0.1, 1.0], cv=3, tol=1e-6, random_state=0).fit(X, y)
    assert type(cv.best_estimator_) is sw.CSClassifier
    one = sw.CSClassifier(C=cv.best_C_, tol=1e-6, random_state=0).fit(X, y)
    np.testing.assert_allclose(cv.coef_, one.coef_, atol=1e-4)
    via_train = sw.train((X, y), C=[0.1, 1.0], cv=3, loss="cs", tol=1e-6, random_state=0)
    assert type(via_train) is sw.CSClassifierCV
    np.testing.assert_array_equal(via_train.coef_, cv.coef_)


def test_command_line(tmp_path, rng, capsys):
    from streamwww.cli import main

    X, y = make_classification(rng, n=400, d=10, k=4, sparse=True)
    write_store(tmp_path / "s.zarr", X, y, shard_rows=100)
    args = ["--tol", "1e-6", "--seed", "2", "--max-iter", "60", "-q"]
    assert main(["train", str(tmp_path / "s.zarr"), "--loss", "cs", "--model-out", str(tmp_path / "m.npz"),
                 "--checkpoint-dir", str(tmp_path / "ck"), *args]) == 0
    api = sw.train(str(tmp_path / "s.zarr"), loss="cs", tol=1e-6, random_state=2, max_iter=60)
    loaded = sw.load_model(tmp_path / "m.npz")
    assert type(loaded) is sw.CSClassifier
    np.testing.assert_array_equal(loaded.coef_, api.coef_)
    capsys.readouterr()
    assert main(["info", str(tmp_path / "m.npz"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["loss"] == "cs"
    assert main(["info", str(tmp_path / "ck")]) == 0
    assert "Crammer-Singer" in capsys.readouterr().out
    assert main(["evaluate", str(tmp_path / "m.npz"), str(tmp_path / "s.zarr")]) == 0
    assert "accuracy" in capsys.readouterr().out
    assert main(["resume", str(tmp_path / "ck"), "-q"]) == 0  # finished: the same model again
    np.testing.assert_array_equal(sw.load_model(tmp_path / "m.npz").coef_, api.coef_)


def test_a_checkpoint_continues_with_its_own_loss_only(tmp_path, rng):
    X, y = make_classification(rng, n=200, d=6, k=4, sparse=True)
    write_store(tmp_path / "s.zarr", X, y, shard_rows=50)
    for first, second in (("cs", "ww"), ("ww", "cs")):
        ck = tmp_path / f"ck-{first}"
        sw.train(str(tmp_path / "s.zarr"), loss=first, max_iter=3, random_state=0, checkpoint_dir=ck)
        with pytest.raises(sw.errors.CheckpointError, match="loss: checkpoint has"):
            sw.train(str(tmp_path / "s.zarr"), loss=second, max_iter=5, random_state=0, checkpoint_dir=ck)


def test_a_checkpoint_refuses_another_shrinking_setting(tmp_path, rng):
    """Settings a config leaves out at their default are compared too (either side)."""
    X, y = make_classification(rng, n=200, d=6, k=4, sparse=True)
    write_store(tmp_path / "s.zarr", X, y, shard_rows=50)
    ck = tmp_path / "ck"
    sw.train(str(tmp_path / "s.zarr"), shrinking=True, max_iter=3, random_state=0, checkpoint_dir=ck)
    with pytest.raises(sw.errors.CheckpointError, match="shrinking: checkpoint has True, now False"):
        sw.train(str(tmp_path / "s.zarr"), shrinking=False, max_iter=5, random_state=0, checkpoint_dir=ck)
