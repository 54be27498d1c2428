"""Whole problems against a generic QP solver (cvxpy + Clarabel)."""

import numpy as np
import pytest

import streamwww as sw

from .conftest import make_classification

cp = pytest.importorskip("cvxpy")


def qp_primal(X, y, C, k, bias):
    Xd = X.toarray() if hasattr(X, "toarray") else np.asarray(X, dtype=np.float64)
    if bias:
        Xd = np.hstack([Xd, np.full((Xd.shape[0], 1), bias)])
    n, d = Xd.shape
    W = cp.Variable((d, k))
    S = Xd @ W
    terms = []
    for j in range(k):
        mask = y != j
        if mask.any():
            sy = cp.sum(cp.multiply(S[mask], np.eye(k)[y[mask]]), axis=1)
            terms.append(cp.sum(cp.pos(1 - (sy - S[mask, j]))))
    prob = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(W) + C * sum(terms)))
    prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-12, tol_gap_rel=1e-12, tol_feas=1e-12)
    return prob.value


@pytest.mark.parametrize("C", [0.05, 1.0, 5.0])
@pytest.mark.parametrize("sparse", [False, True])
def test_primal_matches_qp_solver(C, sparse, rng):
    X, y = make_classification(rng, n=40, d=4, k=4, sparse=sparse)
    model = sw.WWClassifier(C=C, tol=1e-10, max_iter=100_000, random_state=0).fit(X, y)
    P = model.history_[-1]["primal"]
    assert model.history_[-1]["rel_gap"] <= 1e-10
    assert model.score(X, y) > 0.5  # a real solution, not a trivial one
    P_qp = qp_primal(X, y, C, 4, bias=1.0)
    assert P == pytest.approx(P_qp, rel=1e-6)
