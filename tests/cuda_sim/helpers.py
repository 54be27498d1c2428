"""Tiny problems and a side-by-side CPU/CUDA runner for the kernel suite."""

import numpy as np
import scipy.sparse as sp

from streamwww.backends.base import make_block
from streamwww.backends.cpu import CPUBackend


def tiny(rng, n=16, d=5, k=3, sparse=False, dtype=np.float64, density=0.6):
    """Learnable data (class prototypes plus noise); every class present when ``n >= k``."""
    protos = rng.normal(size=(k, d)) * 2.0
    y = rng.integers(0, k, size=n)
    y[:min(n, k)] = np.arange(min(n, k))
    X = protos[y] + rng.normal(size=(n, d))
    if sparse:
        X = X * (rng.random((n, d)) < density)
        return sp.csr_matrix(X.astype(dtype)), y.astype(np.int32)
    return X.astype(dtype), y.astype(np.int32)


def side_by_side(gpu, X, y, k, Cs, bias=0.0, passes=2, solver=0, seed=0, beta0=None):
    """Run the same passes (same orders) on the CPU backend and on ``gpu``.

    Returns ``(W_cpu, beta_cpu, W_gpu, beta_gpu)`` on the host.
    """
    rng = np.random.default_rng(seed)
    Cs = np.asarray(Cs, dtype=np.float64)
    M, n = Cs.shape[0], X.shape[0]
    D = X.shape[1] + (1 if bias else 0)
    cpu = CPUBackend()
    block = make_block(X, y, bias)
    Wc = cpu.allocate_W(M, D, k)
    bc = np.zeros((M, n, k - 1)) if beta0 is None else beta0.copy()
    Wg = gpu.allocate_W(M, D, k)
    dblock = gpu.put_block(block)
    dbeta = gpu.put_beta(bc)
    models = np.arange(M)
    for _ in range(passes):
        order = rng.permutation(n)
        cpu.bcd_pass(Wc, block, bc, Cs, models, order, bias, solver, 1e-4)
        gpu.bcd_pass(Wg, dblock, dbeta, Cs, models, order, bias, solver, 1e-4)
    return Wc, bc, gpu.to_host(Wg), gpu.get_beta(dbeta)


def nontrivial(W, beta):
    return np.abs(W).max() > 0.05 and (beta > 0).mean() > 0.05
