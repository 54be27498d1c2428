"""Slow, obviously-correct NumPy references for tests (lightning's PySAG pattern)."""

import numpy as np
import scipy.sparse as sp

from streamwww import objective, solve_subproblem


def c_index(t, y):
    return t + 1 if t + 1 != y else 0


def dense_with_bias(X, bias):
    Xd = X.toarray() if sp.issparse(X) else np.asarray(X)
    Xd = Xd.astype(np.float64)
    if bias:
        Xd = np.hstack([Xd, np.full((Xd.shape[0], 1), float(bias))])
    return Xd


def reference_pass(W, X, y, beta, C, order, bias=0.0):
    """Algorithm 1 of Wang & Scott written with explicit pi and sigma_y matrices."""
    Xd = dense_with_bias(X, bias)
    k = W.shape[1]
    pi = np.hstack([np.ones((k - 1, 1)), -np.eye(k - 1)])
    for i in order:
        x = Xd[i]
        sq = x @ x
        if sq == 0:
            beta[i] = C
            continue
        sigma = np.eye(k)
        sigma[[0, y[i]]] = sigma[[y[i], 0]]  # swaps entries 0 and y
        v = (1.0 - pi @ sigma @ (W.T @ x)) / sq + beta[i] + beta[i].sum()
        b = solve_subproblem(v, C)
        W += np.outer(x, (b - beta[i]) @ pi @ sigma)
        beta[i] = b


def W_from_beta(X, y, beta, k, bias=0.0):
    """W(beta) = sum_i x_i beta_i^T pi sigma_{y_i} (DESIGN.md §4)."""
    Xd = dense_with_bias(X, bias)
    W = np.zeros((Xd.shape[1], k))
    for i in range(Xd.shape[0]):
        coef = np.zeros(k)
        for t in range(k - 1):
            coef[y[i]] += beta[i, t]
            coef[c_index(t, y[i])] -= beta[i, t]
        W += np.outer(Xd[i], coef)
    return W


def dual_value(W, beta):
    return float(objective.dual(np.sum(W * W), beta.sum()))


def objectives_in_memory(W, X, y, beta, C, bias: float = 0.0) -> tuple[float, float]:
    """Reference ``(P, D)`` for one model, written independently of the kernels (NumPy, slow).

    ``W`` of shape (D, k), ``beta`` of shape (n, k-1).
    """
    S = dense_with_bias(X, bias) @ W
    y = np.asarray(y)
    margins = S[np.arange(len(y)), y][:, None] - S
    H = np.maximum(0.0, 1.0 - margins)
    H[np.arange(len(y)), y] = 0.0
    wsq = float(np.sum(W * W))
    return float(objective.primal(wsq, H.sum(), C)), float(objective.dual(wsq, float(np.sum(beta))))
