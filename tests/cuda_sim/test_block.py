"""The block pass on the device (``_cuda_block_kernels``) against the CPU's block pass and its
sequential pass: dense and CSR rows, the Walrus, simplex and Shark steps, shrinking, row weights
(some 0: held out), splits, a zero row, the intercept, two models, blocks of 2, 5 and 64 > n rows;
the same bits for any launch; ``train(device='cuda', block_rows=...)`` to the CPU's optimum."""

import logging

import numpy as np
import pytest
import scipy.sparse as sp

import streamwww as sw
from streamwww.backends import get_backend
from streamwww.backends.base import make_block
from streamwww.backends.cpu import CPUBackend
from streamwww.backends.cuda import CUDABackend
from streamwww.solvers import SHARK, SIMPLEX, WALRUS

from ..reference import W_from_beta
from .helpers import nontrivial, tiny

TOL = dict(rtol=1e-8, atol=1e-10)
ZERO = 3  # the row made all zeros


def _problem(seed, *, sparse, k, bias, n=24, d=14, weights=False, zero_row=False, splits=False):
    """Tiny data and its block: row weights (some 0) and split bits where asked, a zero row
    (``ZERO``; needs ``bias == 0``)."""
    rng = np.random.default_rng(seed)
    X, y = tiny(rng, n=n, d=d, k=k, sparse=sparse, density=0.3)
    if zero_row:
        X = sp.lil_matrix(X) if sparse else X
        X[ZERO, :] = 0
        if sparse:
            X = sp.csr_matrix(X)
            X.eliminate_zeros()
    w = rng.choice([0.0, 0.5, 1.0, 2.0], size=n) if weights else None
    if w is not None and zero_row:
        w[ZERO] = 0.5
    trains = rng.integers(0, 4, size=n).astype(np.int64) if splits else None  # bits of splits 0 and 1
    block = make_block(X, y, bias, w, trains)
    assert sp.issparse(block.X) == sparse  # (make_block densifies nearly dense CSR)
    return rng, X, y, block


def _gpu(tpb=8, launch="auto", grid=None, **kw):
    gpu = CUDABackend(threads_per_block=tpb, **kw)
    gpu._block_launch, gpu._block_grid = launch, grid
    return gpu


def _orders(rng, n, M, k, passes, shrink):
    """Each pass's row order and near-flags (shrinking: random flags from the second pass, as an
    objective pass would leave them: some rows skipped, some shrunk, some whole)."""
    out = []
    for e in range(passes):
        near = None
        if shrink and e:
            near = (rng.random((M, n, k - 1)) < (0.6, 0.25)[e % 2]).astype(np.uint8)
        out.append((rng.permutation(n), near))
    return out


def _device_passes(gpu, block, k, Cs, bias, solver, m, plan, splits=None):
    """The passes of ``plan`` on the device; ``(W, beta)`` on the host."""
    M, n = len(Cs), block.n_rows
    D = block.X.shape[1] + (1 if bias else 0)
    W, dblock, dbeta = gpu.allocate_W(M, D, k), gpu.put_block(block), gpu.put_beta(np.zeros((M, n, k - 1)))
    for order, near in plan:
        gpu.bcd_pass(W, dblock, dbeta, np.asarray(Cs, dtype=float), np.arange(M), order, bias, solver, 1e-4, splits,
                     near=None if near is None else near.copy(), block_rows=m)
    return gpu.to_host(W), gpu.get_beta(dbeta)


def _cpu_passes(block, k, Cs, bias, solver, m, plan, splits=None):
    M, n = len(Cs), block.n_rows
    W, beta = np.zeros((M, block.X.shape[1] + (1 if bias else 0), k)), np.zeros((M, n, k - 1))
    for order, near in plan:
        CPUBackend(1).bcd_pass(W, block, beta, np.asarray(Cs, dtype=float), np.arange(M), order, bias, solver, 1e-4,
                               splits, near=near, block_rows=m)
    return W, beta


CASES = [
    dict(sparse=True, k=4, bias=1.0, m=5, weights=True),  # held-out rows: weight 0
    dict(sparse=False, k=5, bias=0.0, m=2, weights=True, zero_row=True),
    dict(sparse=True, k=6, bias=0.0, m=64, zero_row=True, shrink=True),  # one block a pass
    dict(sparse=False, k=3, bias=1.5, m=5, shrink=True, splits=True),  # cross-validation's splits
    dict(sparse=True, k=5, bias=0.0, m=5, solver=SIMPLEX, weights=True, zero_row=True),
    dict(sparse=False, k=7, bias=1.0, m=64, solver=SIMPLEX, shrink=True),
    dict(sparse=True, k=5, bias=1.0, m=2, solver=SIMPLEX, shrink=True, weights=True),
    dict(sparse=True, k=4, bias=1.0, m=5, solver=SHARK),
]


def _ids(case):
    return "-".join(f"{key}={val}" for key, val in case.items())


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_block_pass_matches_the_cpu_block_and_sequential_passes(case):
    case = dict(case)
    m, solver, shrink = case.pop("m"), case.pop("solver", WALRUS), case.pop("shrink", False)
    k, bias = case["k"], case["bias"]
    rng, X, y, block = _problem(7 * k + m, **case)
    splits = np.array([0, 1]) if case.get("splits") else None
    Cs = [0.4, 2.0]
    plan = _orders(rng, block.n_rows, 2, k, 3 if shrink else 2, shrink)
    Wg, bg = _device_passes(_gpu(), block, k, Cs, bias, solver, m, plan, splits)
    Wb, bb = _cpu_passes(block, k, Cs, bias, solver, m, plan, splits)
    Ws, bs = _cpu_passes(block, k, Cs, bias, solver, 1, plan, splits)
    assert nontrivial(Wb, bb)
    np.testing.assert_allclose(Wg, Wb, **TOL)
    np.testing.assert_allclose(bg, bb, **TOL)
    np.testing.assert_allclose(Wg, Ws, **TOL)  # in exact arithmetic the sequential pass
    np.testing.assert_allclose(bg, bs, **TOL)
    for mdl in range(2):
        np.testing.assert_allclose(Wg[mdl], W_from_beta(X, y, bg[mdl], k, bias=bias), atol=1e-12)
    if case.get("zero_row"):  # its block minimizer: the box's corner, or the simplex's vertex
        want = [[C * (block.weights[ZERO] if block.weights is not None else 1.0)] * (k - 1) for C in Cs]
        if solver == SIMPLEX:
            want = [[row[0]] + [0.0] * (k - 2) for row in want]
        assert np.array_equal(bg[:, ZERO], want)
    if block.weights is not None:
        assert not bg[:, block.weights == 0].any()  # held out: never moved from 0
    if shrink:
        last = plan[-1][1]
        assert np.all(bg[(last == 0) & (bb == 0)] == 0)


def test_global_scratch_and_bitonic_sort():
    # k = 7 with 4 threads: the first rows have up to 6 > 4 positive v (bitonic sort), and with a
    # shared capacity of 4 the per-class vectors live in the global scratch.
    rng, X, y, block = _problem(5, sparse=True, k=7, bias=1.0)
    plan = _orders(rng, block.n_rows, 1, 7, 2, False)
    gpu = _gpu(tpb=4, shared_classes=4)
    assert not gpu._layout(7)[1]
    Wg, bg = _device_passes(gpu, block, 7, [1.0], 1.0, WALRUS, 5, plan)
    Wb, bb = _cpu_passes(block, 7, [1.0], 1.0, WALRUS, 5, plan)
    assert nontrivial(Wb, bb)
    np.testing.assert_allclose(Wg, Wb, **TOL)
    np.testing.assert_allclose(bg, bb, **TOL)


@pytest.mark.parametrize("sparse", [False, True])
def test_the_same_bits_for_any_launch(sparse):
    """One cooperative launch a pass or a launch a phase, one to three thread blocks a model,
    4, 8 or 16 threads a block: the same bits (every value by one thread, in a fixed order),
    and a run repeated gives them again."""
    rng, X, y, block = _problem(11 + int(sparse), sparse=sparse, k=5, bias=1.0, weights=True)
    plan = _orders(rng, block.n_rows, 2, 5, 3, True)
    runs = {}
    for name, kw in (("cooperative", {}), ("again", {}), ("stepped x1", dict(launch="stepped", grid=1)),
                     ("stepped x3", dict(launch="stepped", grid=3)), ("16 threads", dict(tpb=16)),
                     ("4 threads x2", dict(tpb=4, launch="stepped", grid=2))):
        runs[name] = _device_passes(_gpu(**kw), block, 5, [0.5, 3.0], 1.0, WALRUS, 4, plan)
    W0, b0 = runs["cooperative"]
    assert nontrivial(W0, b0)
    for name, (W, b) in runs.items():
        assert W.tobytes() == W0.tobytes() and b.tobytes() == b0.tobytes(), name


def test_a_refused_cooperative_launch_runs_phase_by_phase(monkeypatch, caplog):
    rng, X, y, block = _problem(13, sparse=True, k=4, bias=1.0)
    plan = _orders(rng, block.n_rows, 2, 4, 2, False)
    want = _device_passes(_gpu(), block, 4, [0.5, 3.0], 1.0, WALRUS, 5, plan)
    gpu = _gpu()

    def refused(*args):
        raise RuntimeError("cooperative launch too large")

    monkeypatch.setattr(gpu, "_coop_limit", refused)
    with caplog.at_level(logging.WARNING, logger="streamwww.backends.cuda"):
        got = _device_passes(gpu, block, 4, [0.5, 3.0], 1.0, WALRUS, 5, plan)
    assert "phase by phase" in caplog.text and gpu._block_launch == "stepped"
    assert got[0].tobytes() == want[0].tobytes() and got[1].tobytes() == want[1].tobytes()


def test_the_cooperative_grid_is_sized_on_the_launchs_types(monkeypatch):
    """On a GPU the cooperative grid's size is asked of the kernel compiled for the launch's
    argument types, typed on tiny arrays made once: they are the scratch's types."""
    rng, X, y, block = _problem(19, sparse=True, k=4, bias=1.0)
    gpu = _gpu()
    typed = []
    monkeypatch.setattr(gpu, "_coop_limit", lambda kernel, args, tpb: typed.append(args()))  # (None: one block)
    _device_passes(gpu, block, 4, [1.0], 1.0, WALRUS, 5, _orders(rng, block.n_rows, 1, 4, 1, False))
    sc = gpu._block_scratch_cache
    real = [sc[name] for name in ("play", "steps", "nz", "nlive", "S", "U", "G", "nxt", "head", "e2j", "e2p")]
    real += list(gpu._scratch_for(1, 4))
    assert len(typed) == 1 and len(typed[0]) == 34
    for a, b in zip(typed[0][20:33], real):
        assert (a.dtype, a.ndim) == (b.dtype, b.ndim)


def test_certify_pass_runs_the_block_pass():
    """``certify_pass(block_rows=m)``: the objective terms, then the block pass (the bits of
    ``bcd_pass(block_rows=m)``, not the sequential pass's)."""
    rng, X, y, block = _problem(17, sparse=True, k=4, bias=1.0)
    models, Cs = np.arange(1), np.array([1.0])
    gpu = _gpu()
    db = gpu.put_block(block)
    W = rng.normal(size=(1, 15, 4)) * 0.3
    beta = np.zeros((1, 24, 3))
    order = rng.permutation(24)
    Wa, ba = gpu.put_W(W), gpu.put_beta(beta)
    gpu.bcd_pass(Wa, db, ba, Cs, models, order, 1.0, WALRUS, 1e-4, block_rows=4)
    Wc, bc = gpu.put_W(W), gpu.put_beta(beta)
    h, _ = gpu.certify_pass(gpu.put_W(W), Wc, db, bc, Cs, models, order, 1.0, WALRUS, 1e-4, block_rows=4)
    np.testing.assert_allclose(h.sum(axis=1), CPUBackend(1).hinge_sums(W, block, 1.0, models), rtol=1e-12)
    assert gpu.to_host(Wc).tobytes() == gpu.to_host(Wa).tobytes()
    assert gpu.get_beta(bc).tobytes() == gpu.get_beta(ba).tobytes()
    Wseq, bseq = gpu.put_W(W), gpu.put_beta(beta)
    gpu.bcd_pass(Wseq, db, bseq, Cs, models, order, 1.0, WALRUS, 1e-4)
    assert gpu.to_host(Wseq).tobytes() != gpu.to_host(Wa).tobytes()  # (another summation order)


def test_device_cuda_takes_the_block_pass_auto_the_cpu():
    assert get_backend("cuda", block_rows=8).name == "cuda"
    assert get_backend("auto", n_models=10, n_classes=100, block_rows=8).name == "cpu"


@pytest.mark.parametrize("loss,seed", [("ww", 23), ("cs", 25)])
def test_train_with_block_rows_on_the_device_reaches_the_cpus_optimum(loss, seed):
    """``train(device='cuda', block_rows=4)``: the CPU's certified optimum (shrinking, the
    intercept, two C), the pass recorded in the model."""
    rng = np.random.default_rng(seed)
    X, y = tiny(rng, n=16, d=10, k=4, sparse=True, density=0.3)
    kw = dict(C=[0.05, 0.2], tol=1e-6, max_iter=300, random_state=0, block_rows=4, loss=loss)
    cpu = sw.train((X, y), device="cpu", **kw)
    gpu = sw.train((X, y), device="cuda", **kw)
    for mc, mg in zip(cpu, gpu):
        assert mc.converged_ and mg.converged_ and mg.device_ == "cuda" and mg.get_params()["block_rows"] == 4
        hc, hg = mc.history_[-1], mg.history_[-1]
        assert hg["primal"] == pytest.approx(hc["primal"], rel=1e-6)
        assert hg["dual"] == pytest.approx(hc["dual"], rel=1e-6)
        # the primal is 1-strongly convex: each W lies within sqrt(2 gap) of the optimum
        Wc, Wg = np.hstack([mc.coef_, mc.intercept_[:, None]]), np.hstack([mg.coef_, mg.intercept_[:, None]])
        assert np.linalg.norm(Wg - Wc) <= np.sqrt(2 * hc["gap"]) + np.sqrt(2 * hg["gap"])
        # the same predictions but where two classes tie at the optimum (Crammer-Singer's
        # margin rows), which the last bit of a rounding decides
        top = np.sort(mc.decision_function(X), axis=1)
        clear = top[:, -1] - top[:, -2] > 1e-9
        assert clear.sum() >= len(y) - 2 and np.array_equal(mg.predict(X)[clear], mc.predict(X)[clear])
