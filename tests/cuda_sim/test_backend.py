"""The CUDA backend end to end: transfers, resident shards, estimator, several C, parallel mode."""

import gc
import warnings

import numpy as np
import pytest

import streamwww as sw
from streamwww.backends import get_backend, make_block
from streamwww.backends.cpu import CPUBackend
from streamwww.backends.cuda import CUDABackend, simulator_enabled, unavailable_reason
from streamwww.solvers import SIMPLEX, WALRUS

from ..conftest import settled_rows
from ..reference import W_from_beta
from .helpers import nontrivial, tiny

TOL = dict(rtol=1e-8, atol=1e-10)


SIMULATED = simulator_enabled()


@pytest.mark.skipif(not SIMULATED, reason="simulator-specific")
def test_device_selection_under_the_simulator():
    assert unavailable_reason() is None
    assert "simulator" in unavailable_reason(auto=True)
    assert get_backend("cuda").name == "cuda"
    assert get_backend("auto").name == "cpu"  # never the simulator


def _shards(rng, k, bias):
    specs = [(9, True), (6, False), (11, True)]
    shards = [tiny(rng, n=n, d=4, k=k, sparse=s) for n, s in specs]
    return [make_block(X, y, bias) for X, y in shards]


def test_streamed_shards_with_lookahead_match_cpu():
    # Several shards, each copied in through 64-byte pinned chunks (many chunks per
    # array), nothing kept resident, and the next shard put *before* the current
    # shard's beta is fetched: the overlap pattern of a prefetching driver.
    rng = np.random.default_rng(1)
    k, bias, Cs = 4, 1.0, np.array([0.5, 3.0])
    blocks = _shards(rng, k, bias)
    gpu = CUDABackend(threads_per_block=8, chunk_bytes=64, resident_bytes=0)
    cpu = CPUBackend()
    M, D = 2, 5
    Wc, Wg = cpu.allocate_W(M, D, k), gpu.allocate_W(M, D, k)
    betas_c = [np.zeros((M, b.n_rows, k - 1)) for b in blocks]
    betas_g = [b.copy() for b in betas_c]
    models = np.arange(M)
    for epoch in range(2):
        seq = rng.permutation(len(blocks))
        orders = [rng.permutation(blocks[s].n_rows) for s in seq]
        for s, order in zip(seq, orders):
            cpu.bcd_pass(Wc, blocks[s], betas_c[s], Cs, models, order, bias, 0, 1e-4)
        nxt = (gpu.put_block(blocks[seq[0]]), gpu.put_beta(betas_g[seq[0]]))
        for j, s in enumerate(seq):
            db, dbeta = nxt
            gpu.bcd_pass(Wg, db, dbeta, Cs, models, orders[j], bias, 0, 1e-4)
            if j + 1 < len(seq):
                nxt = (gpu.put_block(blocks[seq[j + 1]]), gpu.put_beta(betas_g[seq[j + 1]]))
            betas_g[s] = gpu.get_beta(dbeta)
            del db, dbeta
    assert nontrivial(Wc, betas_c[0])
    np.testing.assert_allclose(gpu.to_host(Wg), Wc, **TOL)
    for bg, bc in zip(betas_g, betas_c):
        np.testing.assert_allclose(bg, bc, **TOL)
    assert gpu._pool._free, "device buffers of finished shards go back to the pool"


def test_resident_shards_are_reused_and_forgotten():
    rng = np.random.default_rng(2)
    X, y = tiny(rng, n=8, d=3, k=3)
    gpu = CUDABackend(threads_per_block=8)
    a, b = make_block(X, y, 1.0), make_block(X, y, 1.0)
    da = gpu.put_block(a)
    assert gpu.put_block(a) is da  # same host block: no new copy
    assert gpu.put_block(b) is not da
    del a
    gc.collect()
    assert len(gpu._resident) == 1
    small = CUDABackend(threads_per_block=8, resident_bytes=10)
    assert small.put_block(b) is not small.put_block(b)  # over budget: copied each time


def test_beta_round_trip_and_shape_checks():
    gpu = CUDABackend(threads_per_block=8, chunk_bytes=40)
    beta = np.random.default_rng(0).random((2, 7, 3))
    back = gpu.get_beta(gpu.put_beta(beta))
    assert back is not beta and np.array_equal(back, beta)
    with pytest.raises(ValueError, match="n_models, n_rows"):
        gpu.put_beta(beta[0])
    W = np.arange(24, dtype=float).reshape(2, 3, 4)
    assert np.array_equal(gpu.to_host(gpu.put_W(W)), W)
    assert not gpu.to_host(gpu.allocate_W(2, 3, 4)).any()


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_estimator_cuda_matches_cpu(sparse, fit_intercept):
    rng = np.random.default_rng(3)
    X, y = tiny(rng, n=16, d=4, k=3, sparse=sparse)
    labels = np.array(["a", "b", "c"])[y]
    kw = dict(C=0.7, tol=1e-12, max_iter=3, fit_intercept=fit_intercept, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # both stop at max_iter with a ConvergenceWarning
        cpu = sw.WWClassifier(device="cpu", **kw).fit(X, labels)
        gpu = sw.WWClassifier(device="cuda", **kw).fit(X, labels)
    assert np.abs(cpu.coef_).max() > 0.05
    np.testing.assert_allclose(gpu.coef_, cpu.coef_, **TOL)
    np.testing.assert_allclose(gpu.intercept_, cpu.intercept_, **TOL)
    assert gpu.n_iter_ == cpu.n_iter_ == 3
    for hg, hc in zip(gpu.history_, cpu.history_):
        for key in ("primal", "dual", "gap"):
            assert hg[key] == pytest.approx(hc[key], rel=1e-8, abs=1e-10)
    assert np.array_equal(gpu.predict(X), cpu.predict(X))


def test_train_several_C_cuda_matches_cpu():
    rng = np.random.default_rng(4)
    X, y = tiny(rng, n=15, d=4, k=4, sparse=True)
    Cs = [2.0 ** -3, 1.0, 8.0]
    kw = dict(C=Cs, tol=1e-12, max_iter=2, random_state=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cpu = sw.train((X, y), device="cpu", **kw)
        gpu = sw.train((X, y), device="cuda", **kw)
    for mc, mg in zip(cpu, gpu):
        assert mg.C == mc.C
        np.testing.assert_allclose(mg.coef_, mc.coef_, **TOL)
        np.testing.assert_allclose(mg.intercept_, mc.intercept_, **TOL)


def _dual(W, beta):
    return beta.sum(axis=(1, 2)) - 0.5 * (W ** 2).sum(axis=(1, 2))


def test_parallel_mode_keeps_W_of_beta_and_the_dual_ascending():
    # Under the simulator blocks run one after another, so this checks the
    # bookkeeping of the row-parallel kernel (strided rows per block, atomic
    # updates, per-block scratch), not its behaviour under real concurrency.
    rng = np.random.default_rng(5)
    k, bias = 4, 1.0
    X, y = tiny(rng, n=14, d=4, k=k, sparse=True)
    gpu = CUDABackend(threads_per_block=8, parallel_blocks=3)
    block = make_block(X, y, bias)
    Cs = np.array([0.5, 2.0])
    W, db, dbeta = gpu.allocate_W(2, 5, k), gpu.put_block(block), gpu.put_beta(np.zeros((2, 14, k - 1)))
    last = np.full(2, -np.inf)
    for _ in range(3):
        gpu.bcd_pass(W, db, dbeta, Cs, np.arange(2), rng.permutation(14), bias, 0, 1e-4)
        Wh, bh = gpu.to_host(W), gpu.get_beta(dbeta)
        for m in range(2):
            np.testing.assert_allclose(Wh[m], W_from_beta(X, y, bh[m], k, bias=bias), atol=1e-12)
        d = _dual(Wh, bh)
        assert np.all(d >= last - 1e-12)
        last = d
    assert nontrivial(Wh, bh)
    if SIMULATED:  # blocks run one after another: every pass is an exact ascent
        assert gpu.fallbacks == 0 and gpu.parallel_blocks == 3


def test_parallel_mode_falls_back_to_exact_when_the_dual_decreases(monkeypatch, caplog):
    rng = np.random.default_rng(6)
    k, bias = 3, 1.0
    X, y = tiny(rng, n=10, d=3, k=k)
    block = make_block(X, y, bias)
    Cs, order = np.array([1.0]), rng.permutation(10)
    exact = CUDABackend(threads_per_block=8)
    W1, db1, dbeta1 = exact.allocate_W(1, 4, k), exact.put_block(block), exact.put_beta(np.zeros((1, 10, 2)))
    exact.bcd_pass(W1, db1, dbeta1, Cs, np.arange(1), order, bias, 0, 1e-4)

    par = CUDABackend(threads_per_block=8, parallel_blocks=2)
    calls = []
    real = par._dual_parts

    def lying(W, beta, models):  # pretend the parallel pass lost dual value
        wsq, bs = real(W, beta, models)
        calls.append(1)
        return (wsq, bs - 1.0) if len(calls) == 2 else (wsq, bs)

    monkeypatch.setattr(par, "_dual_parts", lying)
    W2, db2, dbeta2 = par.allocate_W(1, 4, k), par.put_block(block), par.put_beta(np.zeros((1, 10, 2)))
    with caplog.at_level("WARNING", logger="streamwww.backends.cuda"):
        par.bcd_pass(W2, db2, dbeta2, Cs, np.arange(1), order, bias, 0, 1e-4)
    assert "decreased the dual" in caplog.text
    assert par.fallbacks == 1 and par.parallel_blocks is None
    np.testing.assert_allclose(par.to_host(W2), exact.to_host(W1), **TOL)
    np.testing.assert_allclose(par.get_beta(dbeta2), exact.get_beta(dbeta1), **TOL)


@pytest.mark.parametrize("loss", ["ww", "cs"])
def test_cuda_async_trains_to_a_certified_gap_through_the_public_api(loss):
    # device='cuda-async' is the row-parallel backend; its stop is the exact duality gap
    # of W(beta), so the model is within tol of the optimum the CPU certifies.
    rng = np.random.default_rng(11)
    X, y = tiny(rng, n=24, d=4, k=3, sparse=True)
    kw = dict(C=0.1, random_state=0, loss=loss)
    best = sw.train((X, y), device="cpu", tol=1e-9, max_iter=2000, **kw).history_[-1]  # the optimum, tight
    gpu = sw.train((X, y), device="cuda-async", tol=0.02, max_iter=30, **kw)  # (the simulator is slow)
    assert gpu.device_ == "cuda-async"
    assert gpu.converged_ and gpu.history_[-1]["rel_gap"] <= 0.02
    opt = best["dual"]
    assert opt - 1e-9 <= gpu.history_[-1]["primal"] <= opt * (1 + 0.021)  # P - P* <= gap <= tol * P
    assert gpu.history_[-1]["dual"] <= best["primal"] + 1e-9
    assert np.abs(gpu.coef_).max() > 0.05


def test_store_with_late_objectives_cuda_matches_cpu(tmp_path):
    """A store read from disk every epoch (memory_budget=0), one model: the objectives of W_t
    summed from the next epoch's rows on the device, a stop rewound; the CPU's model."""
    from streamwww.io import write_store

    rng = np.random.default_rng(6)
    X, y = tiny(rng, n=24, d=4, k=3, sparse=True)
    write_store(tmp_path / "s.zarr", X, y, shard_rows=6)
    kw = dict(C=0.7, tol=0.6, max_iter=8, random_state=0, memory_budget=0)  # stops at epoch 5
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cpu = sw.train(tmp_path / "s.zarr", device="cpu", **kw)
        gpu = sw.train(tmp_path / "s.zarr", device="cuda", **kw)
    assert gpu.n_iter_ == cpu.n_iter_ < 8 and cpu.converged_ and len(gpu.history_) == len(cpu.history_) >= 2
    np.testing.assert_allclose(gpu.coef_, cpu.coef_, **TOL)
    for hg, hc in zip(gpu.history_, cpu.history_):
        assert hg["gap"] == pytest.approx(hc["gap"], rel=1e-8, abs=1e-10)


@pytest.mark.parametrize("sparse", [False, True])
def test_shrinking_flags_and_shrunk_pass_match_cpu(sparse):
    """engine.shrink on the device: the objective pass's near-flags are the CPU's, and a pass
    with them (rows skipped, coordinates held at 0) gives the CPU's W and beta."""
    rng = np.random.default_rng(11)
    k, bias = 5, 1.0
    X, y = tiny(rng, n=20, d=4, k=k, sparse=sparse)
    block = make_block(X, y, bias)
    cpu, gpu = CPUBackend(), CUDABackend(threads_per_block=8)
    W = rng.normal(size=(2, 5, k)) * 0.8
    beta = np.where(rng.random((2, 20, k - 1)) < 0.2, 0.3, 0.0)
    models = np.arange(2)
    near_c = np.empty((2, 20, k - 1), dtype=np.uint8)
    near_g = np.full((2, 20, k - 1), 7, dtype=np.uint8)
    h_c = cpu.hinge_sums(W, block, bias, models, near=near_c, reach=0.0)
    h_g = gpu.hinge_sums(gpu.put_W(W), gpu.put_block(block), bias, models, near=near_g, reach=0.0)
    np.testing.assert_allclose(h_g, h_c, **TOL)
    assert np.array_equal(near_g, near_c) and 0 < near_c.mean() < 1  # some in play, some not
    Cs, order = np.array([0.5, 2.0]), rng.permutation(20)
    Wc, bc = W.copy(), beta.copy()
    cpu.bcd_pass(Wc, block, bc, Cs, models, order, bias, 0, 1e-4, near=near_c)
    Wg, bg = gpu.put_W(W), gpu.put_beta(beta)
    gpu.bcd_pass(Wg, gpu.put_block(block), bg, Cs, models, order, bias, 0, 1e-4, near=near_g)
    np.testing.assert_allclose(gpu.to_host(Wg), Wc, **TOL)
    np.testing.assert_allclose(gpu.get_beta(bg), bc, **TOL)
    assert np.all(bc[(near_c == 0) & (beta == 0)] == 0)  # left out: still 0
    assert not np.array_equal(bc, beta)


@pytest.mark.parametrize("block_rows", [1, 3])
@pytest.mark.parametrize("solver", [WALRUS, SIMPLEX])
def test_a_pass_that_skips_rows_settled_at_their_bounds_matches_cpu(solver, block_rows):
    """Rule 3 of engine.shrink on the device (the sequential kernel and the block pass's
    phases): with ``pin`` the rows settled at their bounds do not step, the others do, and
    ``W`` and ``beta`` are the CPU's; without ``pin`` those rows step too."""
    rng = np.random.default_rng(12)
    n, k, C = 18, 5, 0.8
    X, y = tiny(rng, n=n, d=4, k=k)
    block = make_block(X, y, 0.0)
    beta, near = settled_rows(rng, n, k, C, solver == SIMPLEX)
    W = rng.normal(size=(1, 4, k))
    order = rng.permutation(n)
    cpu, gpu = CPUBackend(1), CUDABackend(threads_per_block=8)
    out = {}
    for pin in (False, True):
        Wc, bc = W.copy(), beta.copy()
        cpu.bcd_pass(Wc, block, bc, np.array([C]), np.arange(1), order, 0.0, solver, 1e-4, near=near,
                     block_rows=block_rows, pin=pin)
        Wg, bg = gpu.put_W(W), gpu.put_beta(beta)
        gpu.bcd_pass(Wg, gpu.put_block(block), bg, np.array([C]), np.arange(1), order, 0.0, solver, 1e-4,
                     near=near, block_rows=block_rows, pin=pin)
        np.testing.assert_allclose(gpu.to_host(Wg), Wc, **TOL)
        np.testing.assert_allclose(gpu.get_beta(bg), bc, **TOL)
        out[pin] = bc
    assert np.array_equal(out[True][0, ::3], beta[0, ::3])  # settled: skipped
    assert not np.array_equal(out[False][0, ::3], beta[0, ::3])  # stepped without pin


def test_a_compiler_that_cannot_build_kernels_is_an_unavailable_device(monkeypatch):
    """numba-cuda that cannot compile (seen: 0.30.4 under numpy 2.5) fails when the backend is
    made, with the reason, not at the first pass of a fit."""
    from streamwww.backends import _cuda_kernels as KC
    from streamwww.errors import DeviceUnavailableError

    def broken():
        raise AttributeError("module 'numpy' has no attribute 'row_stack'")

    monkeypatch.setattr(KC, "fill_kernel", broken)
    with pytest.raises(DeviceUnavailableError, match=r"cannot compile a kernel here \(AttributeError: .*row_stack"):
        CUDABackend()
    with pytest.raises(DeviceUnavailableError, match="row_stack"):
        get_backend("cuda")
