"""Tests that need a real CUDA GPU (``pytest -m gpu``); skipped everywhere else."""

import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from streamwww.backends import cuda as cuda_backend

ROOT = Path(__file__).resolve().parents[1]
REASON = cuda_backend.unavailable_reason(auto=True)

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(REASON is not None, reason=f"no usable GPU: {REASON}")]

TOL = dict(rtol=1e-8, atol=1e-10)


def test_kernel_suite_on_the_gpu():
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["STREAMWWW_CUDA_SUITE"] = "1"
    res = subprocess.run([sys.executable, "-m", "pytest", "tests/cuda_sim", "-q", "-p", "no:cacheprovider",
                          "-o", "addopts=-ra"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    assert res.returncode == 0, res.stdout[-8000:] + res.stderr[-3000:]


def _problem(rng, n, d, k, sparse, density=0.05):
    protos = rng.normal(size=(k, d))
    y = rng.integers(0, k, size=n).astype(np.int32)
    X = protos[y] + 0.5 * rng.normal(size=(n, d))
    if sparse:
        X = sp.csr_matrix(X * (rng.random((n, d)) < density))
    return X, y


@pytest.mark.parametrize("sparse,n,d,k", [(False, 3000, 128, 1000), (True, 3000, 5000, 105),
                                          (False, 4000, 16, 26), (True, 500, 300, 2500)])
def test_exact_kernel_matches_cpu_on_realistic_shapes(sparse, n, d, k):
    from streamwww.backends.base import make_block
    from streamwww.backends.cpu import CPUBackend

    rng = np.random.default_rng(k)
    X, y = _problem(rng, n, d, k, sparse)
    bias, Cs = 1.0, np.array([0.1, 1.0])
    block = make_block(X, y, bias)
    cpu, gpu = CPUBackend(), cuda_backend.CUDABackend()
    Wc, bc = cpu.allocate_W(2, d + 1, k), np.zeros((2, n, k - 1))
    Wg, db, dbeta = gpu.allocate_W(2, d + 1, k), gpu.put_block(block), gpu.put_beta(bc)
    for _ in range(2):
        order = rng.permutation(n)
        cpu.bcd_pass(Wc, block, bc, Cs, np.arange(2), order, bias, 0, 1e-4)
        gpu.bcd_pass(Wg, db, dbeta, Cs, np.arange(2), order, bias, 0, 1e-4)
    assert np.abs(Wc).max() > 1e-3
    np.testing.assert_allclose(gpu.to_host(Wg), Wc, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(gpu.get_beta(dbeta), bc, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(gpu.hinge_sums(Wg, db, bias, np.arange(2)),
                               cpu.hinge_sums(Wc, block, bias, np.arange(2)), rtol=1e-9)


def test_cupy_and_numba_objective_paths_agree():
    pytest.importorskip("cupy")
    from streamwww.backends.base import make_block

    rng = np.random.default_rng(1)
    X, y = _problem(rng, 2000, 300, 50, True, density=0.1)
    block = make_block(X, y, 1.0)
    W = rng.normal(size=(2, 301, 50))
    with_cp, without = cuda_backend.CUDABackend(use_cupy=True), cuda_backend.CUDABackend(use_cupy=False)
    a, b = with_cp.put_block(block), without.put_block(block)
    Wa, Wb = with_cp.put_W(W), without.put_W(W)
    models = np.array([1, 0])
    np.testing.assert_allclose(with_cp.hinge_sums(Wa, a, 1.0, models), without.hinge_sums(Wb, b, 1.0, models),
                               rtol=1e-10)
    assert with_cp._cupy is not None  # the CuPy path did not fall back


def test_parallel_mode_reaches_the_tolerance_or_says_so():
    from streamwww.state.betas import InMemoryBetas
    from streamwww.stream.sources import InMemoryData
    from tests.reference import objectives_in_memory
    from streamwww.engine.config import SolverConfig
    from streamwww.engine.driver import run_bcd

    rng = np.random.default_rng(2)
    X, y = _problem(rng, 20000, 2000, 20, True, density=0.02)
    cfg = SolverConfig(Cs=(1.0,), tol=1e-3, max_iter=200, seed=0)
    data = InMemoryData(X, y, n_classes=20)
    betas = InMemoryBetas(1, data.shard_rows, 20)
    backend = cuda_backend.CUDABackend(parallel_blocks=64)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = run_bcd(data, betas, cfg, backend)[0]
    P, D = objectives_in_memory(res.W, X, y, betas.get(0)[0], 1.0, bias=1.0)
    rel = (P - D) / abs(P)
    if res.converged:
        assert rel <= 1e-3 * (1 + 1e-6)  # the certificate is true, recomputed from scratch
    else:
        assert any("did not converge" in str(w.message) for w in caught)


def test_cli_path_on_the_gpu_matches_the_cpu():
    """convert -> train --device cuda (SIGKILLed after its first checkpoint) -> resume ->
    evaluate against the CPU (tools/gpu_cli_check.py: objectives to 1e-8, same accuracy)."""
    data = os.environ.get("STREAMWWW_DATA", str(ROOT.parent / "shared" / "data" / "libsvm"))
    if not all(os.path.exists(os.path.join(data, f"{n}.scale{s}.xz")) for n in ("dna", "letter") for s in ("", ".t")):
        pytest.skip(f"dna and letter (.xz) not in {data}")
    res = subprocess.run([sys.executable, "tools/gpu_cli_check.py", "--data-dir", data, "--datasets", "letter,dna"],
                         cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0 and res.stdout.count("| ok |") == 2, res.stdout[-4000:] + res.stderr[-3000:]
