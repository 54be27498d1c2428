"""The CUDA kernels against the CPU backend (exact sequential semantics, several models)."""

import numpy as np
import pytest
import scipy.sparse as sp
from numba import cuda

from streamwww.backends import _cuda_kernels as K
from streamwww.backends.base import make_block
from streamwww.backends.cpu import CPUBackend
from streamwww.backends.cuda import CUDABackend

from .helpers import nontrivial, side_by_side, tiny

TOL = dict(rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("k", [2, 3, 7])
@pytest.mark.parametrize("bias", [0.0, 1.5])
def test_pass_matches_cpu(sparse, k, bias):
    rng = np.random.default_rng(k + 10 * int(sparse) + int(bias))
    X, y = tiny(rng, n=14, d=5, k=k, sparse=sparse)
    gpu = CUDABackend(threads_per_block=8)
    Wc, bc, Wg, bg = side_by_side(gpu, X, y, k, Cs=[0.3, 2.0], bias=bias, passes=2)
    assert nontrivial(Wc, bc)
    np.testing.assert_allclose(Wg, Wc, **TOL)
    np.testing.assert_allclose(bg, bc, **TOL)


@pytest.mark.parametrize("sparse", [False, True])
def test_float32_rows(sparse):
    rng = np.random.default_rng(3)
    X, y = tiny(rng, n=12, d=4, k=4, sparse=sparse, dtype=np.float32)
    Wc, bc, Wg, bg = side_by_side(CUDABackend(threads_per_block=8), X, y, 4, Cs=[1.0], bias=1.0)
    assert nontrivial(Wc, bc)
    np.testing.assert_allclose(Wg, Wc, **TOL)
    np.testing.assert_allclose(bg, bc, **TOL)


@pytest.mark.parametrize("sparse", [False, True])
def test_k_larger_than_block_global_scratch_and_bitonic(sparse):
    # k = 300 with 16 threads: classes strided over threads, the first rows have
    # p = 299 > 16 positive v (bitonic sort of 512 slots), and with a shared
    # capacity of 64 every per-class vector lives in the global scratch arrays.
    rng = np.random.default_rng(11)
    k = 300
    X, y = tiny(rng, n=8, d=3, k=k, sparse=sparse)
    gpu = CUDABackend(threads_per_block=16, shared_classes=64)
    assert gpu._layout(k) == (512, False)
    Wc, bc, Wg, bg = side_by_side(gpu, X, y, k, Cs=[0.5, 4.0], bias=1.0, passes=1)
    assert np.abs(Wc).max() > 0.05 and (bc > 0).mean() > 0.05
    np.testing.assert_allclose(Wg, Wc, **TOL)
    np.testing.assert_allclose(bg, bc, **TOL)


def test_global_scratch_small_k_and_rank_sort():
    rng = np.random.default_rng(5)
    X, y = tiny(rng, n=14, d=4, k=7, sparse=True)
    gpu = CUDABackend(threads_per_block=8, shared_classes=4)
    assert gpu._layout(7) == (8, False)
    Wc, bc, Wg, bg = side_by_side(gpu, X, y, 7, Cs=[1.0], bias=1.0, passes=2)
    assert nontrivial(Wc, bc)
    np.testing.assert_allclose(Wg, Wc, **TOL)
    np.testing.assert_allclose(bg, bc, **TOL)


def test_groups_split_nonzeros_when_k_is_small():
    # k = 3 with 32 threads: G = 10 groups share each row's 6 features.
    rng = np.random.default_rng(8)
    X, y = tiny(rng, n=10, d=6, k=3)
    Wc, bc, Wg, bg = side_by_side(CUDABackend(threads_per_block=32), X, y, 3, Cs=[1.0], bias=1.0, passes=2)
    assert nontrivial(Wc, bc)
    np.testing.assert_allclose(Wg, Wc, **TOL)
    np.testing.assert_allclose(bg, bc, **TOL)


def test_shark_solver_matches_cpu():
    rng = np.random.default_rng(9)
    X, y = tiny(rng, n=12, d=4, k=5, sparse=True)
    Wc, bc, Wg, bg = side_by_side(CUDABackend(threads_per_block=8), X, y, 5, Cs=[1.0], bias=1.0,
                                  passes=2, solver=K.SHARK)
    assert nontrivial(Wc, bc)
    np.testing.assert_allclose(Wg, Wc, **TOL)
    np.testing.assert_allclose(bg, bc, **TOL)


def test_zero_rows_get_beta_C_and_subset_of_models():
    rng = np.random.default_rng(4)
    X, y = tiny(rng, n=12, d=4, k=4, sparse=True)
    X = sp.lil_matrix(X)
    X[2, :] = 0
    X[5, :] = 0
    X = sp.csr_matrix(X)
    X.eliminate_zeros()
    Cs = np.array([0.5, 1.0, 2.0])
    cpu, gpu = CPUBackend(), CUDABackend(threads_per_block=8)
    block = make_block(X, y, 0.0)
    Wc, bc = cpu.allocate_W(3, 4, 4), np.zeros((3, 12, 3))
    Wg, db, dbeta = gpu.allocate_W(3, 4, 4), gpu.put_block(block), gpu.put_beta(bc)
    models = np.array([0, 2])  # model 1 is frozen (e.g. converged): untouched
    order = rng.permutation(12)
    cpu.bcd_pass(Wc, block, bc, Cs, models, order, 0.0, 0, 1e-4)
    gpu.bcd_pass(Wg, db, dbeta, Cs, models, order, 0.0, 0, 1e-4)
    bg, Wh = gpu.get_beta(dbeta), gpu.to_host(Wg)
    assert np.array_equal(bg[0, 2], [0.5] * 3) and np.array_equal(bg[2, 5], [2.0] * 3)
    assert not bg[1].any() and not Wh[1].any()
    np.testing.assert_allclose(Wh, Wc, **TOL)
    np.testing.assert_allclose(bg, bc, **TOL)


@pytest.mark.parametrize("sparse", [False, True])
def test_objective_and_prediction_kernels(sparse):
    rng = np.random.default_rng(2)
    k, bias = 5, 1.0
    X, y = tiny(rng, n=13, d=4, k=k, sparse=sparse)
    cpu, gpu = CPUBackend(), CUDABackend(threads_per_block=8)
    block = make_block(X, y, bias)
    W = rng.normal(size=(2, 5, k))
    W[1, :, 2] = W[1, :, 3]  # tied scores: argmax must take the first
    dW, db = gpu.put_W(W), gpu.put_block(block)
    models = np.array([1, 0])
    np.testing.assert_allclose(gpu.hinge_sums(dW, db, bias, models),
                               cpu.hinge_sums(W, block, bias, models), rtol=1e-12)
    np.testing.assert_allclose(gpu.sq_frobenius(dW), (W ** 2).sum(axis=(1, 2)), rtol=1e-12)
    Xd = np.hstack([X.toarray() if sparse else X, np.full((13, 1), bias)])
    S = np.stack([Xd @ W[1], Xd @ W[0]])
    y1 = np.asarray(y)
    H = np.maximum(0.0, 1.0 - (S[:, np.arange(13), y1][:, :, None] - S))
    H[:, np.arange(13), y1] = 0.0
    np.testing.assert_allclose(gpu.hinge_sums(dW, db, bias, models), H.sum(axis=(1, 2)), rtol=1e-12)


def _lexsorted(v, cand):
    return np.array(sorted(cand, key=lambda t: (-v[t], t)), dtype=np.int32)


@cuda.jit
def _sort_kernel(v, cand, out, p, bitonic):
    tid = cuda.threadIdx.x
    if bitonic:
        K._bitonic_sort(cand, v, p, tid, cuda.blockDim.x)
        for q in range(tid, p, cuda.blockDim.x):
            out[q] = cand[q]
    else:
        K._rank_sort(cand, out, v, p, tid)


@pytest.mark.parametrize("bitonic,p", [(False, 1), (False, 8), (True, 9), (True, 16), (True, 23)])
def test_block_sorts_order_by_value_then_index(bitonic, p):
    rng = np.random.default_rng(p)
    v = np.round(rng.normal(size=40), 1)  # many ties
    cand = rng.choice(40, size=p, replace=False).astype(np.int32)
    want = _lexsorted(v, cand)
    buf = np.full(64, 99, dtype=np.int32)
    buf[:p] = cand
    out = np.full(64, -7, dtype=np.int32)
    _sort_kernel[1, 8](v, buf, out, p, bitonic)
    assert np.array_equal(out[:p], want)


def test_models_in_one_launch_equal_their_own_runs():
    rng = np.random.default_rng(12)
    X, y = tiny(rng, n=12, d=4, k=4, sparse=True)
    gpu = CUDABackend(threads_per_block=8)
    block = make_block(X, y, 1.0)
    Cs = np.array([0.25, 1.0, 4.0])
    W3, db = gpu.allocate_W(3, 5, 4), gpu.put_block(block)
    B3 = gpu.put_beta(np.zeros((3, 12, 3)))
    singles = [(gpu.allocate_W(1, 5, 4), gpu.put_beta(np.zeros((1, 12, 3)))) for _ in Cs]
    for _ in range(2):
        order = rng.permutation(12)
        gpu.bcd_pass(W3, db, B3, Cs, np.arange(3), order, 1.0, 0, 1e-4)
        for (W, B), C in zip(singles, Cs):
            gpu.bcd_pass(W, db, B, np.array([C]), np.arange(1), order, 1.0, 0, 1e-4)
    W3h, B3h = gpu.to_host(W3), gpu.get_beta(B3)
    for m, (W, B) in enumerate(singles):  # blocks are independent: bitwise equal
        assert np.array_equal(W3h[m], gpu.to_host(W)[0]) and np.array_equal(B3h[m], gpu.get_beta(B)[0])


def test_csr_with_duplicate_entries_is_made_canonical():
    rng = np.random.default_rng(13)
    X, y = tiny(rng, n=10, d=4, k=3, sparse=True)
    X = sp.csr_matrix(X)
    # the same row written with a split entry: (0, f) twice, summing to the original
    data, indices, indptr = list(X.data), list(X.indices), list(X.indptr)
    data = [data[0] / 2, data[0] / 2] + data[1:]
    indices = [indices[0], indices[0]] + indices[1:]
    indptr = [0] + [p + 1 for p in indptr[1:]]
    Xd = sp.csr_matrix((data, indices, indptr), shape=X.shape)
    assert not Xd.has_canonical_format
    Wc, bc, Wg, bg = side_by_side(CUDABackend(threads_per_block=8), Xd, y, 3, Cs=[1.0], bias=1.0)
    assert nontrivial(Wc, bc)
    np.testing.assert_allclose(Wg, Wc, **TOL)
    np.testing.assert_allclose(bg, bc, **TOL)


@pytest.mark.parametrize("sparse", [False, True])
def test_row_weights_and_splits_match_cpu(sparse):
    # Per-row boxes [0, C w_i] (zero weights and zero rows included) and cross-validation
    # splits (a model skips the rows outside its split): passes and weighted hinge sums.
    rng = np.random.default_rng(21 + int(sparse))
    k, n, bias = 4, 14, 1.0
    X, y = tiny(rng, n=n, d=4, k=k, sparse=sparse)
    if sparse:
        X = sp.lil_matrix(X)
        X[3, :] = 0
        X = sp.csr_matrix(X)
        X.eliminate_zeros()
    weights = rng.choice([0.0, 0.5, 1.0, 3.0], size=n)
    trains = rng.integers(0, 4, size=n).astype(np.int64)  # bits of splits 0 and 1
    block = make_block(X, y, bias, weights, trains)
    Cs, splits = np.array([0.7, 0.7, 2.0]), np.array([0, 1, -1])
    cpu, gpu = CPUBackend(), CUDABackend(threads_per_block=8)
    Wc, bc = cpu.allocate_W(3, 5, k), np.zeros((3, n, k - 1))
    Wg, db, dbeta = gpu.allocate_W(3, 5, k), gpu.put_block(block), gpu.put_beta(bc)
    models = np.arange(3)
    for p in range(2):
        order = rng.permutation(n)
        cpu.bcd_pass(Wc, block, bc, Cs, models, order, bias, 0, 1e-4, splits)
        gpu.bcd_pass(Wg, db, dbeta, Cs, models, order, bias, 0, 1e-4, splits)
    bg, Wh = gpu.get_beta(dbeta), gpu.to_host(Wg)
    np.testing.assert_allclose(Wh, Wc, **TOL)
    np.testing.assert_allclose(bg, bc, **TOL)
    for m, s in enumerate(splits):
        w = weights * (((trains >> s) & 1) if s >= 0 else 1)
        assert np.all(bc[m] <= Cs[m] * w[:, None] + 1e-12) and not bc[m][w == 0].any()
        assert bc[m].any()
    np.testing.assert_allclose(gpu.hinge_sums(Wg, db, bias, models, splits),
                               cpu.hinge_sums(Wc, block, bias, models, splits), rtol=1e-12)
