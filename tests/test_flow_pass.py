"""The flow pass (one model's sequential pass on several threads): the sequential pass's
bits on any thread count, whatever the rows share; how the backend takes it."""

import numpy as np
import pytest
import scipy.sparse as sp

from streamwww.backends import _flow_kernels as FK
from streamwww.backends import _kernels as K
from streamwww.backends import cpu as cpu_mod
from streamwww.backends.base import make_block
from streamwww.backends.cpu import CPUBackend
from streamwww.solvers import SIMPLEX, SOLVER_IDS

_NONE_I = np.zeros(0, dtype=np.int64)
_NONE_U8 = np.zeros((0, 0, 0), dtype=np.uint8)


def _banded(rng, n, d, k, nnz, shared=0):
    """CSR rows whose features lie in their class's band of ``d // k`` features (rows of two
    classes share none), plus ``shared`` features of ``[0, 8)`` each (rows of any class share
    those): from rare to constant dependencies between rows."""
    y = rng.integers(0, k, n).astype(np.int32)
    band = d // k
    rows = []
    for i in range(n):
        own = rng.choice(np.arange(8, band), nnz, replace=False) + y[i] * band
        common = rng.choice(8, shared, replace=False) if shared else np.zeros(0, dtype=np.int64)
        rows.append(np.sort(np.concatenate([common, own])))
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in rows])])
    X = sp.csr_matrix((rng.uniform(0.1, 1.0, indptr[-1]), np.concatenate(rows), indptr), shape=(n, d))
    return X, y


def _pass(kernel, block, W, beta, order, *, solver, Cs=(1.0,), weights=None, trains=_NONE_I, splits=None,
          near=_NONE_U8, extra=(), pin=True):
    M = W.shape[0]
    kernel(W, (block.X.data, block.X.indices, block.X.indptr), block.y, block.sqnorms,
           np.zeros(0) if weights is None else weights, trains, beta, np.asarray(Cs, dtype=np.float64),
           np.full(M, -1, dtype=np.int64) if splits is None else splits, np.arange(M, dtype=np.int64), order, near,
           pin, 0.0, SIMPLEX if solver == "simplex" else SOLVER_IDS[solver], 1e-4, *extra, K.ktag(W.shape[2]))


CASES = [
    dict(k=12, shared=0, solver="walrus"),
    dict(k=12, shared=2, solver="walrus", weighted=True),  # every row waits for the one before
    dict(k=5, shared=0, solver="walrus", shrink=True),  # k <= SMALL_K: a lanes build
    dict(k=9, shared=1, solver="simplex", shrink=True, zero_rows=True),  # Crammer-Singer
    dict(k=10, shared=0, solver="shark"),
    dict(k=11, shared=1, solver="walrus", folds=True, shrink=True),  # held-out rows: C = 0
]


def _ids(case):
    return "-".join(f"{a}={b}" for a, b in case.items())


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_the_flow_pass_is_the_sequential_pass_bitwise_on_any_threads(case, rng):
    """Windows and chunks cut anywhere (n is not a multiple of either), rows with and without
    shared features, shrinking flags that skip, shrink and keep rows: 2, 3 and 4 threads (more
    than this machine's cores) give the sequential pass's ``W`` and ``beta``, epoch by epoch."""
    k = case["k"]
    n = 2 * FK.WINDOW + 3 * FK.CHUNK + 5
    X, y = _banded(rng, n, d=k * 60, k=k, nnz=6, shared=case["shared"])
    if case.get("zero_rows"):
        X = X.tolil()
        X[[3, 700, n - 1], :] = 0
        X = sp.csr_matrix(X)
        X.eliminate_zeros()
    weights = rng.uniform(0.2, 2.0, n) if case.get("weighted") else None
    block = make_block(X, y, 0.0, weights=weights)
    trains, splits, Cs = _NONE_I, None, (1.0,)
    if case.get("folds"):  # two models' splits, the rows of split s held out of model s
        trains = np.where(rng.random(n) < 0.8, 3, rng.choice([1, 2], n)).astype(np.int64)
        splits, Cs = np.array([0, 1]), (0.5, 2.0)
    M = len(Cs)
    flags = [(rng.random((M, n, k - 1)) < p).astype(np.uint8) for p in (1.0, 0.4, 0.1, 0.0)]
    W0, b0 = np.zeros((M, X.shape[1], k)), np.zeros((M, n, k - 1))
    runs = {}
    for T in (1, 2, 3, 4):
        W, beta = W0.copy(), b0.copy()
        for e in range(4):
            order = np.random.default_rng((5, e)).permutation(n).astype(np.int64)
            near = flags[e] if case.get("shrink") else _NONE_U8
            kw = dict(solver=case["solver"], Cs=Cs, weights=block.weights, trains=trains, splits=splits, near=near)
            if T == 1:
                _pass(K.bcd_pass_serial, block, W, beta, order, **kw)
            else:
                _pass(FK.flow_pass, block, W, beta, order, extra=(T,), **kw)
        runs[T] = (W, beta)
    W1, b1 = runs[1]
    assert np.abs(W1).max() > 0.01 and (b1 != 0).mean() > 0.01  # (the passes stepped)
    for T in (2, 3, 4):
        assert runs[T][0].tobytes() == W1.tobytes() and runs[T][1].tobytes() == b1.tobytes(), T


def test_shared_pairs_counts_consecutive_rows_with_a_feature_in_common(rng):
    X, y = _banded(rng, 300, d=240, k=4, nnz=5, shared=0)
    order = rng.permutation(300).astype(np.int64)
    rows = [set(X.indices[X.indptr[i]:X.indptr[i + 1]]) for i in range(300)]
    expect = np.mean([bool(rows[order[p]] & rows[order[p + 1]]) for p in range(100)])
    got = FK.shared_pairs((X.data, X.indices, X.indptr), order, 100)
    assert got == expect and 0.0 < got < 0.5
    X2, _ = _banded(rng, 50, d=240, k=4, nnz=5, shared=1)
    X2 = sp.csr_matrix(sp.hstack([sp.csr_matrix(np.ones((50, 1))), X2[:, 1:]]))  # feature 0 in every row
    assert FK.shared_pairs((X2.data, X2.indices, X2.indptr), np.arange(50, dtype=np.int64), 49) == 1.0


def test_the_backend_takes_the_flow_pass_where_it_may_and_keeps_the_bits(monkeypatch, rng):
    """Asked for, two threads, one model, CSR rows without an intercept that rarely share a
    feature: ``bcd_pass`` runs the flow pass (first call), the one-thread pass (second), then
    the faster; every call the sequential pass's bits.  Not asked for, with an intercept,
    dense rows, several models or rows that all share a feature it never does."""
    monkeypatch.setenv(cpu_mod.FLOW_ENV, "1")
    monkeypatch.setattr(cpu_mod, "FLOW_MIN_WORK", 0)
    calls = []
    real = FK.flow_pass
    monkeypatch.setattr(FK, "flow_pass", lambda *a: (calls.append(1), real(*a))[1])
    X, y = _banded(rng, 3000, d=600, k=10, nnz=8)
    block = make_block(X, y, 0.0)
    one = np.zeros(1, dtype=np.int64)
    backend, serial = CPUBackend(2), CPUBackend(1)
    W, beta = np.zeros((1, 600, 10)), np.zeros((1, 3000, 9))
    Wr, br = W.copy(), beta.copy()
    for e in range(3):
        order = np.random.default_rng(e).permutation(3000).astype(np.int64)
        backend.bcd_pass(W, block, beta, np.ones(1), one, order, 0.0, 0, 1e-4)
        serial.bcd_pass(Wr, block, br, np.ones(1), one, order, 0.0, 0, 1e-4)
        assert W.tobytes() == Wr.tobytes() and beta.tobytes() == br.tobytes()
        if e == 1:
            assert len(calls) == 1  # flow first, then the one-thread pass
    assert backend._flow_costs.per_row[0] is not None and backend._flow_costs.per_row[1] is not None
    order = np.arange(3000, dtype=np.int64)
    assert backend._flows(block, order, 0.0, 10)
    assert not backend._flows(block, order, 1.0, 10)  # an intercept: every row shares its row of W
    assert not serial._flows(block, order, 0.0, 10)
    assert not backend._flows(make_block(X.toarray(), y, 0.0), order, 0.0, 10)
    Xs, ys = _banded(rng, 300, d=600, k=10, nnz=8, shared=1)
    Xs = sp.csr_matrix(sp.hstack([sp.csr_matrix(np.ones((300, 1))), Xs[:, 1:]]))
    assert not backend._flows(make_block(Xs, ys, 0.0), np.arange(300, dtype=np.int64), 0.0, 10)
    monkeypatch.setattr(cpu_mod, "FLOW_MIN_WORK", 1 << 40)
    assert not backend._flows(block, order, 0.0, 10)  # a pass too small to pay
    monkeypatch.setattr(cpu_mod, "FLOW_MIN_WORK", 0)
    for off in ("", "0", "no"):
        monkeypatch.setenv(cpu_mod.FLOW_ENV, off)
        assert not backend._flows(block, order, 0.0, 10)  # not asked for


def test_the_flow_costs_take_the_faster_way_and_probe_the_other():
    costs = cpu_mod._FlowCosts()
    assert costs.choose() is True  # nothing measured: the flow pass first
    costs.measured(True, 0.5, 1000)
    assert costs.choose() is False  # then the one-thread pass
    costs.measured(False, 1.0, 1000)
    ways = [costs.choose() for _ in range(2 * costs.PROBE)]
    assert ways.count(True) == 2 * costs.PROBE - 2 and ways.count(False) == 2  # faster, probing the other
    costs.measured(True, 2.0, 1000)  # the flow pass got slower
    assert costs.choose() is False


def test_the_same_model_for_any_n_jobs_with_the_flow_pass(monkeypatch, rng):
    """Whole fits (shrinking, objectives overlapped or not, the default stop) with 1, 2 and 3
    threads: the flow pass takes the sequential pass's place, the model is the same bits."""
    import streamwww as sw

    monkeypatch.setenv(cpu_mod.FLOW_ENV, "1")
    monkeypatch.setattr(cpu_mod, "FLOW_MIN_WORK", 0)
    used = []
    real = FK.flow_pass
    monkeypatch.setattr(FK, "flow_pass", lambda *a: (used.append(1), real(*a))[1])
    X, y = _banded(rng, 2500, d=900, k=9, nnz=10)
    models = [sw.train((X, y), C=1.0, fit_intercept=False, tol=1e-4, max_iter=30, random_state=2, n_jobs=j)
              for j in (1, 2, 3)]
    assert used  # (the flow pass ran)
    assert models[0].n_iter_ > 3 and np.abs(models[0].coef_).max() > 0.05
    for m in models[1:]:
        assert m.coef_.tobytes() == models[0].coef_.tobytes() and m.n_iter_ == models[0].n_iter_
