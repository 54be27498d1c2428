"""The block pass (one model on several threads): the sequential pass at one row a block,
the same bits for any thread count, exact steps (the reference's optimum), and the
row-parallel objective pass."""

import numpy as np
import pytest
import scipy.sparse as sp
from numba import njit

from streamwww.backends import _block_kernels as BK
from streamwww.backends import _kernels as K
from streamwww.backends.base import make_block
from streamwww.backends.cpu import CPUBackend, bcd_pass

from .conftest import make_classification
from .reference import W_from_beta, reference_pass

_NONE_F = np.zeros(0)
_NONE_I = np.zeros(0, dtype=np.int64)
_NONE_U8 = np.zeros((0, 0, 0), dtype=np.uint8)


def _problem(rng, *, sparse, k, bias, weighted=False, zero_rows=False, n=120, d=30, models=1):
    X, y = make_classification(rng, n=n, d=d, k=k, sparse=sparse, density=0.3)
    if zero_rows:
        X = sp.lil_matrix(X) if sparse else X.copy()
        X[5, :] = 0
        X[17, :] = 0
        X = sp.csr_matrix(X) if sparse else X
        if sparse:
            X.eliminate_zeros()
    weights = rng.uniform(0.2, 2.0, n) if weighted else None
    block = make_block(X, y, bias, weights=weights)
    W = np.zeros((models, block.X.shape[1] + (1 if bias else 0), k))
    beta = np.zeros((models, n, k - 1))
    return block, W, beta


def _rows(block):
    return (block.X.data, block.X.indices, block.X.indptr) if block.is_sparse else block.X


def _epochs(kernel, block, W, beta, *, Cs, bias, epochs=4, near=None, extra=(), seed=0, pin=True):
    """``epochs`` passes of ``kernel`` in seeded orders; ``near(epoch)`` gives shrinking's flags
    (``pin``: rows settled at their bounds skipped, engine.shrink's rule 3)."""
    k = W.shape[2]
    weights = _NONE_F if block.weights is None else block.weights
    models = np.arange(W.shape[0], dtype=np.int64)
    for e in range(epochs):
        order = np.random.default_rng((seed, e)).permutation(block.n_rows).astype(np.int64)
        flags = _NONE_U8 if near is None else near(e)
        kernel(W, _rows(block), block.y, block.sqnorms, weights, _NONE_I, beta, np.asarray(Cs, dtype=np.float64),
               np.full(W.shape[0], -1, dtype=np.int64), models, order, flags, pin, float(bias), 0, 1e-4, *extra,
               K.ktag(k))
    return W, beta


def _near(rng, models, n, k):
    """Shrinking's flags for each epoch: a fixed random pattern per epoch (some rows skipped,
    some shrunk, some whole), as an objective pass would leave them."""
    pats = [(rng.random((models, n, k - 1)) < p).astype(np.uint8) for p in (1.0, 0.5, 0.2, 0.0, 0.3)]
    return lambda e: pats[e % len(pats)]


CASES = [
    dict(sparse=True, k=12, bias=0.0),
    dict(sparse=True, k=12, bias=1.0, weighted=True),
    dict(sparse=True, k=5, bias=1.0),  # k <= SMALL_K: a lanes build
    dict(sparse=False, k=5, bias=0.5, zero_rows=True),
    dict(sparse=False, k=11, bias=0.0, weighted=True, zero_rows=True),
    dict(sparse=True, k=12, bias=1.0, zero_rows=True, shrink=True),
    dict(sparse=True, k=3, bias=0.0, shrink=True),
    dict(sparse=False, k=11, bias=1.0, shrink=True, models=2),
]


def _ids(case):
    return "-".join(f"{k}={v}" for k, v in case.items())


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_a_block_of_one_row_is_the_sequential_pass_bitwise(case, rng):
    case = dict(case)
    shrink, models = case.pop("shrink", False), case.pop("models", 1)
    block, W, beta = _problem(rng, models=models, **case)
    near = _near(rng, models, block.n_rows, W.shape[2]) if shrink else None
    Cs = np.linspace(0.5, 2.0, models)
    Ws, bs = _epochs(K.bcd_pass_serial, block, W.copy(), beta.copy(), Cs=Cs, bias=case["bias"], near=near)
    Wb, bb = _epochs(BK.block_pass, block, W.copy(), beta.copy(), Cs=Cs, bias=case["bias"], near=near,
                     extra=(1, 2))
    assert np.abs(Ws).max() > 0.05 and (bs > 0).mean() > 0.05  # non-trivial
    assert np.array_equal(Wb, Ws) and np.array_equal(bb, bs)


@pytest.mark.parametrize("case", CASES, ids=_ids)
@pytest.mark.parametrize("m", [2, 7, 32])
def test_the_block_pass_is_the_same_bits_for_any_thread_count(case, m, rng):
    case = dict(case)
    shrink, models = case.pop("shrink", False), case.pop("models", 1)
    block, W, beta = _problem(rng, models=models, **case)
    near = _near(rng, models, block.n_rows, W.shape[2]) if shrink else None
    Cs = np.linspace(0.5, 2.0, models)
    W1, b1 = _epochs(BK.block_pass_serial, block, W.copy(), beta.copy(), Cs=Cs, bias=case["bias"], near=near,
                     extra=(m, 1))
    assert np.abs(W1).max() > 0.05
    for threads in (1, 2, 3, 4):  # (the stages' split over threads; numba runs what the machine has)
        Wt, bt = _epochs(BK.block_pass, block, W.copy(), beta.copy(), Cs=Cs, bias=case["bias"], near=near,
                         extra=(m, threads))
        assert np.array_equal(Wt, W1) and np.array_equal(bt, b1), threads


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("bias", [0.0, 1.5])
def test_the_block_pass_takes_exact_steps(sparse, bias, rng):
    """In exact arithmetic the block pass is the sequential pass: against the NumPy
    reference (Algorithm 1 row by row) to rounding, and ``W == W(beta)``."""
    X, y = make_classification(rng, n=80, d=12, k=5, sparse=sparse, density=0.4)
    k, C = 5, 0.8
    D = X.shape[1] + (1 if bias else 0)
    W, beta = np.zeros((D, k)), np.zeros((80, k - 1))
    W_ref, beta_ref = W.copy(), beta.copy()
    for epoch in range(4):
        order = rng.permutation(80)
        bcd_pass(W, X, y, beta, C, order, bias=bias, block_rows=16)
        reference_pass(W_ref, X, y, beta_ref, C, order, bias=bias)
    assert np.abs(W).max() > 0.1 and (beta > 0).mean() > 0.1
    np.testing.assert_allclose(W, W_ref, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(beta, beta_ref, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(W, W_from_beta(X, y, beta, k, bias=bias), atol=1e-12)


@pytest.mark.parametrize("shrink", [False, True])
def test_rows_that_share_no_feature_give_the_same_bits_on_any_threads(shrink, rng):
    """Sparse rows, few features shared: stage 2 steps a block's independent rows on several
    threads at once (each waits only for the earlier rows it shares a feature with); the
    bits stay those of one thread, more threads than the machine's among them."""
    n, d, k = 600, 3000, 7
    X = sp.random(n, d, density=0.002, format="csr", random_state=np.random.RandomState(5)) + \
        sp.csr_matrix((np.ones(n), (np.arange(n), rng.integers(0, d, n))), shape=(n, d))
    y = rng.integers(0, k, n)
    block = make_block(X, y, 0.0)
    P = block.X.copy()
    P.data[:] = 1.0
    shared = (P @ P.T).toarray() > 0
    np.fill_diagonal(shared, False)
    assert shared.mean() < 0.05  # most pairs of rows are independent
    W = np.zeros((1, d, k))
    beta = np.zeros((1, n, k - 1))
    near = _near(rng, 1, n, k) if shrink else None
    W1, b1 = _epochs(BK.block_pass_serial, block, W.copy(), beta.copy(), Cs=[1.0], bias=0.0, near=near,
                     extra=(64, 1))
    assert np.abs(W1).max() > 0.05 and (b1 > 0).mean() > 0.05
    for threads in (2, 3, 4):
        Wt, bt = _epochs(BK.block_pass, block, W.copy(), beta.copy(), Cs=[1.0], bias=0.0, near=near,
                         extra=(64, threads))
        assert np.array_equal(Wt, W1) and np.array_equal(bt, b1), threads


def _fresh_build(cases, **patches):
    """The block pass compiled afresh with module globals patched (``K.FAR_ENTRIES=0``: every
    read-ahead hint on every row; ``BK.CHAIN_ENTRIES=0``: CSR rows' Gram entries by marks
    and dots), run on ``cases`` while patched, the globals then put back (Numba freezes a
    global into a build when it compiles it: the cached kernels must never see them)."""
    mods = {"FAR_ENTRIES": K, "CHAIN_ENTRIES": BK}
    before = {name: getattr(mods[name], name) for name in patches}
    mp = pytest.MonkeyPatch()
    for name, value in patches.items():
        mp.setattr(mods[name], name, value)
    try:
        kernel = njit(parallel=True)(BK._block_pass)
        return [case() for case in cases(kernel)]
    finally:
        mp.undo()
        assert all(getattr(mods[name], name) == v for name, v in before.items())


@pytest.mark.parametrize("patches", [dict(FAR_ENTRIES=0), dict(CHAIN_ENTRIES=0)], ids=["hints", "marks"])
def test_hints_and_either_way_to_the_gram_entries_leave_every_bit(patches):
    settings = [dict(sparse=True, k=12, bias=0.0, weighted=True, shrink=True),
                dict(sparse=True, k=5, bias=1.0, zero_rows=True),
                dict(sparse=False, k=5, bias=0.5, shrink=True)]

    def problems():
        out = []
        for i, case in enumerate(settings):
            case = dict(case)
            shrink = case.pop("shrink", False)
            r = np.random.default_rng(i)
            block, W, beta = _problem(r, **case)
            out.append((block, W, beta, _near(r, 1, block.n_rows, W.shape[2]) if shrink else None, case["bias"]))
        return out

    def runs(kernel):
        return [lambda b=b, W=W, beta=beta, near=near, bias=bias, t=t:
                _epochs(kernel, b, W.copy(), beta.copy(), Cs=[1.3], bias=bias, near=near, extra=(7, t))
                for (b, W, beta, near, bias) in problems() for t in (1, 3)]

    ours = [run() for run in runs(BK.block_pass)]  # (the cached builds first: compiled unpatched)
    theirs = _fresh_build(runs, **patches)
    for (Wa, ba), (Wb, bb) in zip(ours, theirs):
        assert np.abs(Wa).max() > 0.01 and (ba > 0).mean() > 0.05
        assert np.array_equal(Wa, Wb) and np.array_equal(ba, bb)


def test_the_block_pass_differs_from_the_sequential_pass_only_by_rounding(rng):
    """Whole blocks of rows that share features: the scores' other summation order changes
    the bits (so the test above is not comparing one pass with itself), not the values."""
    block, W, beta = _problem(rng, sparse=True, k=12, bias=1.0, n=200)
    Ws, bs = _epochs(K.bcd_pass_serial, block, W.copy(), beta.copy(), Cs=[1.0], bias=1.0, epochs=6)
    Wb, bb = _epochs(BK.block_pass_serial, block, W.copy(), beta.copy(), Cs=[1.0], bias=1.0, epochs=6,
                     extra=(64, 1))
    assert not np.array_equal(Wb, Ws)
    np.testing.assert_allclose(Wb, Ws, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("models", [1, 3])
def test_the_row_parallel_objective_pass_is_the_serial_sum_bitwise(sparse, models, rng):
    block, W, beta = _problem(rng, sparse=sparse, k=6, bias=1.0, n=301, models=models)
    _epochs(K.bcd_pass_serial, block, W, beta, Cs=np.ones(models), bias=1.0, epochs=2)
    serial, parallel = CPUBackend(n_threads=1), CPUBackend(n_threads=2)
    ms = np.arange(models, dtype=np.int64)
    near1 = np.zeros((models, block.n_rows, 5), dtype=np.uint8)
    near2 = near1.copy()
    h1 = serial.hinge_sums(W, block, 1.0, ms, near=near1, reach=0.1)
    h2 = parallel.hinge_sums(W, block, 1.0, ms, near=near2, reach=0.1)
    assert np.array_equal(h1, h2) and np.array_equal(near1, near2) and near1.any()
    rows = np.arange(block.n_rows, dtype=np.int64)
    t1, t2 = np.zeros((models, block.n_rows)), np.zeros((models, block.n_rows))
    BK.hinge_rows_par(W, _rows(block), block.y, _NONE_F, _NONE_I, np.full(models, -1), 1.0, ms, rows, t2,
                      _NONE_U8, 0.0, 0.1, 0, 3, K.ktag(6))
    K.hinge_rows_serial(W, _rows(block), block.y, _NONE_F, _NONE_I, np.full(models, -1), 1.0, ms, rows, t1,
                        _NONE_U8, 0.0, 0.1, 0, K.ktag(6))
    assert np.array_equal(t1, t2)


def test_certify_pass_with_the_block_pass_is_score_then_train(rng):
    """``certify_pass`` of the block pass: the objective terms of ``W_cert`` and the same pass
    ``bcd_pass`` makes, on one thread and on two."""
    block, W, beta = _problem(rng, sparse=True, k=12, bias=1.0, n=150)
    _epochs(K.bcd_pass_serial, block, W, beta, Cs=[1.0], bias=1.0, epochs=1)
    order = rng.permutation(block.n_rows).astype(np.int64)
    one = np.zeros(1, dtype=np.int64)
    W_ref, b_ref = W.copy(), beta.copy()
    CPUBackend(1).bcd_pass(W_ref, block, b_ref, np.ones(1), one, order, 1.0, 0, 1e-4, block_rows=16)
    h_ref = CPUBackend(1).hinge_sums(W, block, 1.0, one)
    for threads in (1, 2):
        Wt, bt = W.copy(), beta.copy()
        h, _ = CPUBackend(threads).certify_pass(W.copy(), Wt, block, bt, np.ones(1), one, order, 1.0, 0, 1e-4,
                                                block_rows=16)
        assert np.array_equal(Wt, W_ref) and np.array_equal(bt, b_ref)
        total = np.zeros(1)
        K.ordered_sums(h, 0, block.n_rows, total)
        assert np.array_equal(total, h_ref)


# --- through the API: n_jobs never changes the model -------------------------------------

def _fit_all(fit, jobs=(1, 2)):
    """``fit(n_jobs)`` for each count: the models, asserted bitwise equal; the first returned."""
    first = None
    for j in jobs:
        models = fit(j)
        models = models if isinstance(models, list) else [models]
        if first is None:
            first = models
            continue
        for a, b in zip(first, models):
            assert a.coef_.tobytes() == b.coef_.tobytes() and a.intercept_.tobytes() == b.intercept_.tobytes(), j
            assert a.n_iter_ == b.n_iter_ and a.history_[-1]["primal"] == b.history_[-1]["primal"]
    return first


@pytest.mark.parametrize("block_rows", [1, 8])
@pytest.mark.parametrize("case", ["plain", "weights", "no-intercept-no-shrinking", "several-C"])
def test_the_same_model_for_any_n_jobs_in_memory(case, block_rows, rng):
    import streamwww as sw

    X, y = make_classification(rng, n=300, d=40, k=7, sparse=True, density=0.2)
    kw = dict(C=[0.5, 3.0] if case == "several-C" else 1.0, tol=1e-4, max_iter=60, random_state=3,
              block_rows=block_rows)
    if case == "weights":
        kw["sample_weight"] = rng.uniform(0.5, 2.0, X.shape[0])
        kw["class_weight"] = "balanced"
    if case == "no-intercept-no-shrinking":
        kw.update(fit_intercept=False, shrinking=False)
    models = _fit_all(lambda j: sw.train((X, y), n_jobs=j, **kw))
    assert all(m.n_iter_ > 3 and np.abs(m.coef_).max() > 0.05 for m in models)


def test_the_same_model_for_any_n_jobs_streamed(tmp_path, rng):
    """A store read from disk every epoch (no memory budget), shard groups of two, and the
    store kept in memory: the block pass restarts at each group; one model whatever the threads."""
    import streamwww as sw
    from streamwww.io import write_store

    X, y = make_classification(rng, n=500, d=60, k=6, sparse=True, density=0.15)
    store = write_store(tmp_path / "s.zarr", X, y, shard_rows=90)
    kw = dict(C=2.0, tol=1e-4, max_iter=40, random_state=5, block_rows=16)
    streamed = _fit_all(lambda j: sw.train(store, n_jobs=j, memory_budget=0, **kw))
    kept = _fit_all(lambda j: sw.train(store, n_jobs=j, **kw))
    assert streamed[0].coef_.tobytes() == kept[0].coef_.tobytes()


def test_more_threads_than_cores_give_the_same_model(tmp_path):
    """1, 2, 3 and 4 threads in a process whose numba pool has 4 (whatever the machine's cores)."""
    import json
    import subprocess
    import sys

    code = """
import json, sys, numpy as np, streamwww as sw
rng = np.random.default_rng(7)
X = rng.normal(size=(400, 30)) * (rng.random((400, 30)) < 0.3)
y = (X[:, :5].argmax(1) + (rng.random(400) < 0.1)) % 5
out = {}
for j in (1, 2, 3, 4):
    m = sw.train((X, y), C=1.0, tol=1e-5, max_iter=50, random_state=1, block_rows=32, n_jobs=j)
    out[j] = m.coef_.tobytes().hex() + m.intercept_.tobytes().hex()
print(json.dumps(out))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                          env={**__import__("os").environ, "NUMBA_NUM_THREADS": "4"})
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(set(out.values())) == 1 and len(out) == 4


@pytest.mark.parametrize("C", [0.1, 2.0])
def test_the_block_pass_reaches_the_qp_optimum(C, rng):
    pytest.importorskip("cvxpy")
    import streamwww as sw

    from .test_qp import qp_primal

    X, y = make_classification(rng, n=60, d=8, k=4, sparse=True)
    model = sw.WWClassifier(C=C, tol=1e-10, max_iter=100_000, random_state=0, block_rows=16, n_jobs=2).fit(X, y)
    assert model.history_[-1]["rel_gap"] <= 1e-10 and model.score(X, y) > 0.5
    assert model.history_[-1]["primal"] == pytest.approx(qp_primal(X, y, C, 4, bias=1.0), rel=1e-6)


def test_epochs_to_the_gap_are_those_of_the_sequential_pass(rng):
    """Exact steps in another summation order: the path is the sequential one to rounding, so
    the stopping epoch is the same (here exactly; the issue's tolerance is 2 %)."""
    import streamwww as sw

    X, y = make_classification(rng, n=400, d=50, k=8, sparse=True, density=0.2)
    kw = dict(C=1.0, tol=0.0, gap_decay=0.0009, max_iter=500, random_state=2)
    seq = sw.WWClassifier(**kw).fit(X, y)
    blk = sw.WWClassifier(block_rows=16, n_jobs=2, **kw).fit(X, y)
    assert seq.n_iter_ == blk.n_iter_
    assert blk.history_[-1]["primal"] == pytest.approx(seq.history_[-1]["primal"], rel=1e-9)


def test_n_jobs_and_block_rows_are_checked():
    import streamwww as sw

    X, y = np.eye(4), np.arange(4)
    for bad in (0, 1.5, True, "2"):
        with pytest.raises(ValueError, match="'n_jobs' parameter"):
            sw.WWClassifier(n_jobs=bad).fit(X, y)
    for bad in (0, -1, "big", 10**6):
        with pytest.raises(ValueError, match="'block_rows' parameter"):
            sw.train((X, y), block_rows=bad)


def test_resolve_n_jobs_counts_usable_cores(monkeypatch):
    from streamwww._params import resolve_n_jobs, usable_cores

    cores = usable_cores()
    assert resolve_n_jobs(None) == resolve_n_jobs(-1) == cores
    assert resolve_n_jobs(-cores - 5) == 1 and resolve_n_jobs(1) == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert usable_cores() == 1 and resolve_n_jobs(None) == 1


def test_the_checkpoint_and_the_model_record_the_pass(tmp_path, rng):
    import json

    import streamwww as sw
    from streamwww.io import write_store

    X, y = make_classification(rng, n=200, d=30, k=5, sparse=True, density=0.2)
    store = write_store(tmp_path / "s.zarr", X, y, shard_rows=50)
    ck = tmp_path / "ck"
    m = sw.train(store, C=1.0, max_iter=4, tol=0, random_state=0, block_rows=8, n_jobs=2, checkpoint_dir=ck,
                 checkpoint_interval=0, model_out=tmp_path / "m.npz")
    assert json.loads((ck / "manifest.json").read_text())["config"]["block_rows"] == 8
    assert sw.load_model(tmp_path / "m.npz").get_params()["block_rows"] == 8 == m.get_params()["block_rows"]
    # the run continues with its pass, whatever this call's n_jobs; another pass is refused
    more = sw.resume(ck, max_iter=6, n_jobs=1)
    again = sw.train(store, C=1.0, max_iter=6, tol=0, random_state=0, block_rows=8, n_jobs=2)
    assert more.coef_.tobytes() == again.coef_.tobytes()
    with pytest.raises(Exception, match="block_rows"):
        sw.train(store, C=1.0, max_iter=6, tol=0, random_state=0, block_rows=4, checkpoint_dir=ck)


def test_the_command_line_takes_jobs_and_block_rows(tmp_path, rng):
    import subprocess
    import sys

    from streamwww.io import write_store

    X, y = make_classification(rng, n=200, d=30, k=5, sparse=True, density=0.2)
    write_store(tmp_path / "s.zarr", X, y, shard_rows=50)
    cli = [sys.executable, "-c", "import sys; from streamwww.cli import main; sys.exit(main(sys.argv[1:]))"]
    run = cli + ["train", str(tmp_path / "s.zarr"), "--max-iter", "3",
           "--checkpoint-dir", str(tmp_path / "ck"), "--model-out", str(tmp_path / "m.npz"), "-v"]
    ok = subprocess.run(run + ["--jobs", "2", "--block-rows", "8"], capture_output=True, text=True, timeout=600)
    assert ok.returncode == 0, ok.stderr
    assert "2 thread(s); the block pass of 8 rows" in ok.stderr
    bad = subprocess.run(run + ["--jobs", "0"], capture_output=True, text=True, timeout=600)
    assert bad.returncode != 0 and "--jobs must be an int other than 0" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_a_cgroup_quota_caps_the_usable_cores(monkeypatch):
    import builtins
    import io

    from streamwww import _params

    real = builtins.open
    files = {"/sys/fs/cgroup/cpu.max": "150000 100000\n"}
    monkeypatch.setattr(builtins, "open", lambda p, *a, **k: io.StringIO(files[p]) if p in files else real(p, *a, **k))
    assert _params._cgroup_quota() == 2
    files["/sys/fs/cgroup/cpu.max"] = "max 100000\n"
    assert _params._cgroup_quota() is None
    files["/sys/fs/cgroup/cpu.max"] = "50000 100000\n"
    monkeypatch.setattr(_params.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    assert _params._cgroup_quota() == 1 and _params.usable_cores() == 1


def test_the_block_pass_is_placed_on_the_cpu_unless_cuda_is_asked(monkeypatch):
    """One rule for every caller (a process's run, a cluster worker's): 'auto' takes the CPU
    for the block pass (not measured on a GPU yet), 'cuda' takes the GPU for it as for the
    sequential pass (tests/cuda_sim/test_block.py runs it)."""
    from streamwww.backends import cuda
    from streamwww.backends.select import get_backend
    from streamwww.errors import DeviceUnavailableError

    monkeypatch.setattr(cuda, "unavailable_reason", lambda auto=False: None)  # a usable GPU, said
    assert get_backend("auto", n_models=10, n_classes=100, block_rows=8).name == "cpu"
    monkeypatch.setattr(cuda, "unavailable_reason", lambda auto=False: "no GPU here")
    with pytest.raises(DeviceUnavailableError, match="no GPU here"):  # asked for the GPU, not refused the pass
        get_backend("cuda", block_rows=8)


def test_certify_pass_overlapped_or_not_gives_the_same_bits(rng):
    """The sequential pass on two threads: ``certify_pass`` overlaps its objective with the
    pass (first call), scores then trains (second call), then takes the way its measured
    costs say is faster; every way gives the terms, flags, ``W`` and ``beta`` of scoring
    ``W_cert`` and then running ``bcd_pass`` with those flags."""
    from streamwww.backends.cpu import _chunks

    block, W, beta = _problem(rng, sparse=True, k=12, bias=0.0, n=8000, d=80)
    assert _chunks(block, 12) >= 4  # (large enough for the overlap)
    _epochs(K.bcd_pass_serial, block, W, beta, Cs=[1.0], bias=0.0, epochs=2)
    one = np.zeros(1, dtype=np.int64)
    backend = CPUBackend(2)
    costs = backend._certify_costs
    for call in range(4):
        order = np.random.default_rng(call).permutation(block.n_rows).astype(np.int64)
        near_ref = np.zeros((1, block.n_rows, 11), dtype=np.uint8)
        h_ref = np.zeros((1, block.n_rows))
        backend._hinge_rows(W, block, 0.0, one, np.arange(block.n_rows), h_ref, None, near_ref, 0.0, 0, 0.1,
                            parallel=False)
        W_ref, b_ref = W.copy(), beta.copy()
        CPUBackend(1).bcd_pass(W_ref, block, b_ref, np.ones(1), one, order, 0.0, 0, 1e-4, near=near_ref)
        near = np.zeros_like(near_ref)
        Wt, bt = W.copy(), beta.copy()
        h, _ = backend.certify_pass(W.copy(), Wt, block, bt, np.ones(1), one, order, 0.0, 0, 1e-4, near=near)
        assert np.array_equal(h, h_ref) and np.array_equal(near, near_ref)
        assert np.array_equal(Wt, W_ref) and np.array_equal(bt, b_ref)
        if call == 0:  # overlapped: what the objective thread took was measured
            assert costs.scattered is not None and costs.parallel is None
        if call == 1:  # then scored on every thread, then trained
            assert costs.parallel is not None
        W, beta = Wt, bt
    backend.close()


def test_certify_pass_takes_the_way_its_costs_predict_faster():
    from streamwww.backends.cpu import _CertifyCosts

    costs = _CertifyCosts()
    assert costs.overlap_pays(1000, 1000)  # nothing measured: overlap first
    costs.measured(True, scoring=0.3, training=0.1, n_rows=1000, n_order=1000)
    assert not costs.overlap_pays(1000, 1000)  # then the other way once
    costs.measured(False, scoring=0.1, training=0.1, n_rows=1000, n_order=1000)
    # overlapped ~ max(0.3, 0.1) against 0.1 + 0.1: not
    assert not costs.overlap_pays(1000, 1000)
    costs.measured(False, scoring=0.1, training=0.25, n_rows=1000, n_order=1000)
    # the pass got heavier: max(0.3, 0.25) against 0.1 + 0.25: overlap
    assert costs.overlap_pays(1000, 1000)
    # per row: a block of half the rows, the same costs a row
    assert costs.overlap_pays(500, 500)


@pytest.mark.parametrize("block_rows", [1, 8])
def test_repeated_entries_of_a_row_are_summed_as_a_store_sums_them(block_rows, rng):
    """A CSR matrix may hold a row's feature twice (scipy allows it; a store's writer sums
    them): the model is that of the summed matrix, for either pass."""
    import streamwww as sw

    X, y = make_classification(rng, n=150, d=40, k=5, sparse=True, density=0.2)
    X = sp.csr_matrix(X)
    X.sum_duplicates()
    half = X.data / 2  # each entry listed twice, its two halves side by side
    data = np.empty(2 * X.nnz)
    data[0::2], data[1::2] = half, X.data - half
    twice = sp.csr_matrix((data, np.repeat(X.indices, 2), 2 * X.indptr), shape=X.shape)
    assert not twice.has_canonical_format and twice.nnz == 2 * X.nnz
    summed = twice.copy()
    summed.sum_duplicates()
    a = sw.WWClassifier(C=1.0, max_iter=30, block_rows=block_rows, n_jobs=2, random_state=0).fit(twice, y)
    b = sw.WWClassifier(C=1.0, max_iter=30, block_rows=block_rows, n_jobs=2, random_state=0).fit(summed, y)
    assert a.coef_.tobytes() == b.coef_.tobytes() and a.n_iter_ == b.n_iter_
    assert twice.nnz == 2 * X.nnz  # the caller's matrix is left as it was
