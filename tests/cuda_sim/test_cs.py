"""Crammer-Singer on the device: the simplex step (both sorts), its zero rows, row weights,
its hinge (objective and certificate), shrinking, the row-parallel mode and a fit, against
the CPU backend."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from numba import cuda

import streamwww as sw
from streamwww.backends import _cuda_kernels as K
from streamwww.backends.base import make_block
from streamwww.backends.cpu import CPUBackend
from streamwww.backends.cuda import CUDABackend
from streamwww.solvers import CS_LOSS, SIMPLEX, WW_LOSS, solve_cs_subproblem
from streamwww.solvers.simplex import simplex_sweep

from ..reference import W_from_beta, dense_with_bias
from .helpers import nontrivial, tiny

TOL = dict(rtol=1e-12, atol=1e-12)
ZERO = 3  # the row made all zeros


def _problem(seed, k, sparse, n=12, bias=0.0, zero_row=True):
    """Data with a zero row (``ZERO``; a zero row needs ``bias == 0``), row weights (some 0)
    and its block, CSR where ``sparse``."""
    rng = np.random.default_rng(seed)
    X, y = tiny(rng, n=n, d=5, k=k, sparse=sparse, density=0.4)
    if zero_row:
        if sparse:
            X = sp.lil_matrix(X)
            X[ZERO, :] = 0
            X = sp.csr_matrix(X)
            X.eliminate_zeros()
        else:
            X[ZERO] = 0.0
    weights = rng.choice([0.0, 0.5, 1.0, 3.0], size=n)
    weights[ZERO] = 0.5
    block = make_block(X, y, bias, weights)
    assert sp.issparse(block.X) == sparse  # (make_block densifies nearly dense CSR)
    return rng, X, y, weights, block


def _hinges(X, y, W, bias, weights):
    """Per model, the weighted WW and CS hinge sums (numpy, from the definitions)."""
    Xd = dense_with_bias(X, bias)
    n = Xd.shape[0]
    out = []
    for Wm in W:
        S = Xd @ Wm
        H = np.maximum(0.0, 1.0 - (S[np.arange(n), y][:, None] - S))
        H[np.arange(n), y] = 0.0
        out.append(((H.sum(axis=1) * weights).sum(), (H.max(axis=1) * weights).sum()))
    return np.array(out).T


def _check_feasible(beta, Cs, weights):
    box = Cs[:, None] * weights[None, :]
    assert np.all(beta >= 0.0)
    assert np.all(beta.sum(axis=2) <= box * (1 + 1e-12))
    assert not beta[:, weights == 0].any()


@cuda.jit
def _step_kernel(v, cand, srt, bn, ist, fst, p, C):
    K._exact_block(v, cand, srt, bn, ist, fst, p, C, SIMPLEX, cuda.threadIdx.x, cuda.blockDim.x)


@pytest.mark.parametrize("p", [1, 6, 8, 13, 30])  # rank sort (p <= 8 threads), bitonic sort
def test_block_simplex_step_is_the_cpu_step(p):
    # The device step (sort, sweep and write in one block) on the candidates listed in any
    # order gives the CPU's simplex_kernel bit for bit: ties, entries <= 0, and large entries
    # against a small C, where the write rescales b (rounding put its sum above C).
    rng = np.random.default_rng(p)
    m, rescaled = 40, 0
    for trial in range(8):
        if trial < 2:
            v = (np.round(np.abs(rng.normal(size=m)), 1) + 0.1) * (3.0 if trial else 0.5)  # many ties
            C = [0.7, 2.5][trial]
        else:
            v = 1e8 + rng.integers(0, 8, size=m) * 4.5e-8
            C = 1e-7
        v[rng.choice(m, size=m - p, replace=False)] = -rng.random(m - p)  # p positive entries
        pos = np.flatnonzero(v > 0).astype(np.int32)
        assert pos.shape[0] == p
        cand = np.full(64, 99, dtype=np.int32)
        cand[:p] = rng.permutation(pos)
        bn = np.zeros(m)
        _step_kernel[1, 8](v, cand, np.full(64, -7, dtype=np.int32), bn, np.zeros(4, dtype=np.int64),
                           np.zeros(1), p, C)
        want = solve_cs_subproblem(v, C)
        assert np.array_equal(bn, want), (trial, bn, want)
        srt = np.array(sorted(pos, key=lambda t: (-v[t], t)))
        r, theta = simplex_sweep(v, srt, p, C)
        rescaled += (v[srt[:r]] - theta).sum() > C
        assert want.sum() <= C * (1 + 1e-15) and np.all(want >= 0)
    assert rescaled or p == 1


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("k", [3, 40])
def test_simplex_pass_matches_cpu(sparse, k):
    # k = 40 with 8 threads: the first rows have p = 39 > 8 positive v (bitonic sort);
    # later rows and k = 3 take the rank sort.  Two models (different C), row weights
    # (some 0) and a zero row, whose block minimizer is (C w, 0, ..., 0).
    rng, X, y, weights, block = _problem(k + int(sparse), k, sparse)
    n, M, Cs = X.shape[0], 2, np.array([0.3, 2.0])
    cpu, gpu = CPUBackend(), CUDABackend(threads_per_block=8)
    Wc, bc = cpu.allocate_W(M, 5, k), np.zeros((M, n, k - 1))
    Wg, db, dbeta = gpu.allocate_W(M, 5, k), gpu.put_block(block), gpu.put_beta(bc)
    models = np.arange(M)
    for _ in range(2):
        order = rng.permutation(n)
        cpu.bcd_pass(Wc, block, bc, Cs, models, order, 0.0, SIMPLEX, 1e-4)
        gpu.bcd_pass(Wg, db, dbeta, Cs, models, order, 0.0, SIMPLEX, 1e-4)
    Wh, bg = gpu.to_host(Wg), gpu.get_beta(dbeta)
    assert nontrivial(Wc, bc)
    np.testing.assert_allclose(Wh, Wc, **TOL)
    np.testing.assert_allclose(bg, bc, **TOL)
    for m in range(M):
        assert np.array_equal(bg[m, ZERO], [Cs[m] * weights[ZERO]] + [0.0] * (k - 2))
    _check_feasible(bg, Cs, weights)
    sums = bc.sum(axis=2)
    assert np.any(np.isclose(sums[0], Cs[0] * weights) & (weights > 0))  # the simplex's face is reached
    for m in range(M):
        np.testing.assert_allclose(Wh[m], W_from_beta(X, y, bg[m], k), atol=1e-12)


@pytest.mark.parametrize("sparse", [False, True])
def test_cs_hinge_certificate_and_shrunk_pass_match_cpu(sparse):
    # hinge_sums with loss=CS_LOSS (without and with near-flags), certify_pass with it (the
    # rows' terms, then the shrunk simplex pass with those flags): the CPU's, and the hinge
    # the definition gives.
    k, bias = 5, 1.0
    rng, X, y, weights, block = _problem(31 + int(sparse), k, sparse, n=16, bias=bias, zero_row=False)
    n, models = X.shape[0], np.arange(2)
    cpu, gpu = CPUBackend(), CUDABackend(threads_per_block=8)
    W = rng.normal(size=(2, 6, k)) * 0.8
    beta = np.where(rng.random((2, n, k - 1)) < 0.2, 0.05, 0.0) * (weights > 0)[None, :, None]  # feasible
    dW, db = gpu.put_W(W), gpu.put_block(block)
    ww, cs = _hinges(X, y, W, bias, weights)
    assert np.all(cs < ww - 0.1)
    for loss, want in ((CS_LOSS, cs), (WW_LOSS, ww)):
        np.testing.assert_allclose(gpu.hinge_sums(dW, db, bias, models, loss=loss), want, rtol=1e-12)
        np.testing.assert_allclose(gpu.hinge_sums(dW, db, bias, models, loss=loss),
                                   cpu.hinge_sums(W, block, bias, models, loss=loss), rtol=1e-12)
    near_c = np.empty((2, n, k - 1), dtype=np.uint8)
    near_g = np.full((2, n, k - 1), 7, dtype=np.uint8)
    h_c = cpu.hinge_sums(W, block, bias, models, near=near_c, reach=0.0, loss=CS_LOSS)
    h_g = gpu.hinge_sums(dW, db, bias, models, near=near_g, reach=0.0, loss=CS_LOSS)
    np.testing.assert_allclose(h_g, cs, rtol=1e-12)
    np.testing.assert_allclose(h_c, cs, rtol=1e-12)
    assert np.array_equal(near_g, near_c) and 0 < near_c.mean() < 1  # some in play, some not

    # the certificate's pass: terms of W, then the shrunk simplex pass from (W, beta)
    Cs, order = np.array([0.5, 2.0]), rng.permutation(n)
    Wc, bc = W.copy(), beta.copy()
    near_c[:], near_g[:] = 0, 7
    hc, _ = cpu.certify_pass(W, Wc, block, bc, Cs, models, order, bias, SIMPLEX, 1e-4, near=near_c, reach=0.0,
                             loss=CS_LOSS)
    Wg, bg = gpu.put_W(W), gpu.put_beta(beta)
    hg, _ = gpu.certify_pass(dW, Wg, db, bg, Cs, models, order, bias, SIMPLEX, 1e-4, near=near_g, reach=0.0,
                             loss=CS_LOSS)
    np.testing.assert_allclose(hg, hc, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(hg.sum(axis=1), cs, rtol=1e-12)
    assert np.array_equal(near_g, near_c)
    np.testing.assert_allclose(gpu.to_host(Wg), Wc, **TOL)
    bg = gpu.get_beta(bg)
    np.testing.assert_allclose(bg, bc, **TOL)
    assert np.all(bc[(near_c == 0) & (beta == 0)] == 0)  # left out: still 0
    assert not np.array_equal(bc, beta)
    _check_feasible(bg, Cs, weights)


def _dual(W, beta):
    return beta.sum(axis=(1, 2)) - 0.5 * (W ** 2).sum(axis=(1, 2))


def test_parallel_mode_runs_the_simplex_step():
    # The row-parallel kernel with the simplex step: W == W(beta), the dual ascends, beta is
    # feasible (under the simulator blocks run one after another: exact ascent).
    k, bias = 4, 1.0
    rng, X, y, weights, block = _problem(41, k, True, n=14, bias=bias, zero_row=False)
    gpu = CUDABackend(threads_per_block=8, parallel_blocks=3)
    Cs = np.array([0.5, 2.0])
    W, db, dbeta = gpu.allocate_W(2, 6, k), gpu.put_block(block), gpu.put_beta(np.zeros((2, 14, k - 1)))
    last = np.full(2, -np.inf)
    for _ in range(2):
        gpu.bcd_pass(W, db, dbeta, Cs, np.arange(2), rng.permutation(14), bias, SIMPLEX, 1e-4)
        Wh, bh = gpu.to_host(W), gpu.get_beta(dbeta)
        for m in range(2):
            np.testing.assert_allclose(Wh[m], W_from_beta(X, y, bh[m], k, bias=bias), atol=1e-12)
        d = _dual(Wh, bh)
        assert np.all(d >= last - 1e-12)
        last = d
    _check_feasible(bh, Cs, weights)
    assert nontrivial(Wh, bh) and gpu.fallbacks == 0


def test_train_cs_cuda_matches_cpu_to_convergence():
    # End to end, to tol=1e-6 (objective passes with the CS hinge and their near-flags,
    # shrunk passes, the driver's loss= keyword, several C): the CPU's models and stops.
    rng = np.random.default_rng(41)
    X, y = tiny(rng, n=10, d=4, k=4, sparse=True, density=0.5)  # converges in 9 and 16 epochs
    kw = dict(C=[0.05, 0.3], tol=1e-6, max_iter=60, fit_intercept=False, random_state=0, loss="cs")
    cpu = sw.train((X, y), device="cpu", **kw)
    gpu = sw.train((X, y), device="cuda", **kw)
    for mc, mg in zip(cpu, gpu):
        assert type(mg) is type(mc) is sw.CSClassifier and mc.converged_ and mg.converged_
        assert mg.n_iter_ == mc.n_iter_ and len(mg.history_) == len(mc.history_)
        assert mg.history_[-1]["primal"] == pytest.approx(mc.history_[-1]["primal"], rel=1e-9)
        np.testing.assert_allclose(mg.coef_, mc.coef_, rtol=1e-8, atol=1e-10)
        assert np.array_equal(mg.predict(X), mc.predict(X))


def test_cs_estimator_cuda_matches_cpu():
    # The estimator, dense rows with an intercept, a few epochs (as the WW estimator test):
    # the same coefficients and the same primal, dual and gap at every evaluation.
    rng = np.random.default_rng(3)
    X, y = tiny(rng, n=16, d=4, k=3)
    kw = dict(C=0.7, tol=1e-12, max_iter=3, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # both stop at max_iter with a ConvergenceWarning
        cpu = sw.CSClassifier(device="cpu", **kw).fit(X, y)
        gpu = sw.CSClassifier(device="cuda", **kw).fit(X, y)
    assert np.abs(cpu.coef_).max() > 0.05 and gpu.n_iter_ == cpu.n_iter_ == 3
    np.testing.assert_allclose(gpu.coef_, cpu.coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(gpu.intercept_, cpu.intercept_, rtol=1e-9, atol=1e-12)
    for hg, hc in zip(gpu.history_, cpu.history_):
        for key in ("primal", "dual", "gap"):
            assert hg[key] == pytest.approx(hc[key], rel=1e-9, abs=1e-12)
