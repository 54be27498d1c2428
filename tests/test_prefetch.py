"""Software prefetch is a hint: the kernels' builds that ask for the next rows' lines give
the bits of the builds that do not.

The passes ask for the per-row state and the first lines of the rows some places ahead in
their visiting order, and the objective passes for the next row's rows of ``W``, only on
data larger than the caches (``_kernels.FAR_ENTRIES``).  The data of a test is small, so
the cached builds here run without those hints; builds compiled afresh with the threshold
at 0 run every hint on every row, and must leave every ``W``, ``beta``, loss and near-flag
bitwise the same, for CSR and dense rows, shrinking, weights, cross-validation splits, an
intercept, zero rows and both losses.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from numba import njit

from streamwww.backends import _block_kernels as BK
from streamwww.backends import _kernels as K
from streamwww.backends.base import make_block
from streamwww.backends.cpu import _row_weights, _rows
from streamwww.solvers import CS_LOSS, SIMPLEX, WALRUS, WW_LOSS

from .conftest import make_classification

N, D, MODELS = 90, 14, 2
# Each kind of rows once and each family of builds once: k = 5 runs the builds for k <= SMALL_K
# (rows scored in pairs), k = 11 the generic ones.  The hints are the same code for both
# families (overloads by the kind of rows), and every build compiled here is compiled afresh
# in every run of the suite.
CASES = ((True, 5), (False, 11))  # (CSR rows, k)
FAR = K.FAR_ENTRIES
CACHED = (K.bcd_pass_serial, K.hinge_sum_serial, K.hinge_rows_serial, BK.hinge_rows_par)


def _case(seed, sparse, weighted, bias, KC):
    rng = np.random.default_rng(seed)
    X, y = make_classification(rng, n=N, d=D, k=KC, sparse=sparse, density=0.4)
    keep = np.ones(N)
    keep[[5, 17]] = 0.0  # zero rows: their beta is set where the pass lists the rows that step
    X = sp.csr_matrix(sp.diags(keep) @ X) if sparse else X * keep[:, None]
    if sparse:
        X.eliminate_zeros()
    return make_block(X, y, bias, weights=rng.uniform(0.2, 2.0, N) if weighted else None), rng


def _run(kernels, block, rng, *, solver, loss, splits, bias, epochs=6):
    """``epochs`` passes of ``kernels``' pass (shrinking from the second), each followed by
    the three objective passes; every state and result, epoch by epoch."""
    bcd, hinge_sum, hinge_rows, hinge_rows_par = kernels
    KC = int(block.y.max()) + 1
    weights, trains = _row_weights(block)
    split = np.full(MODELS, -1, dtype=np.int64)
    if splits:  # cross-validation: model 0 trains on the rows whose bit 0 is set, model 1 on all
        trains = rng.integers(0, 2, N).astype(np.int64)
        split[0] = 0
    Cs, models, rows = np.array([0.7, 3.0]), np.arange(MODELS, dtype=np.int64), np.arange(N, dtype=np.int64)
    W = np.zeros((MODELS, block.X.shape[1] + (1 if bias else 0), KC))
    beta = np.zeros((MODELS, N, KC - 1))
    near = np.zeros((MODELS, N, KC - 1), dtype=np.uint8)
    X = _rows(block)
    seen = []
    for epoch in range(epochs):
        order = rng.permutation(N).astype(np.int64)
        bcd(W, X, block.y, block.sqnorms, weights, trains, beta, Cs, split, models, order,
            near if epoch else np.zeros((0, 0, 0), dtype=np.uint8), True, bias, solver, 1e-4, K.ktag(KC))
        total, h, hp = np.zeros(MODELS), np.zeros((MODELS, N)), np.zeros((MODELS, N))
        common = (X, block.y, weights, trains, split, bias, models)
        hinge_sum(W, *common, total, near, 0.25, 0.1, loss, K.ktag(KC))
        hinge_rows(W, *common, rows, h, near, 0.25, 0.1, loss, K.ktag(KC))
        hinge_rows_par(W, *common, rows, hp, near, 0.25, 0.1, loss, 3, K.ktag(KC))
        seen.append([W.copy(), beta.copy(), near.copy(), total, h, hp])
    return seen


@pytest.fixture(scope="module")
def eager():
    """The four kernels compiled afresh with the threshold at 0 (every hint on every row),
    for CSR and dense rows, then the threshold put back (Numba freezes a global into a
    build when it compiles it: the cached kernels must never see 0)."""
    mp = pytest.MonkeyPatch()
    mp.setattr(K, "FAR_ENTRIES", 0)  # (the one threshold: the block kernels ask _kernels' helpers)
    try:
        kernels = (njit(nogil=True)(K._bcd_pass), njit(nogil=True)(K._hinge_sum), njit(nogil=True)(K._hinge_rows),
                   njit(nogil=True)(BK._hinge_rows_par))
        for sparse, KC in CASES:  # every signature the tests call
            block, rng = _case(0, sparse, True, 1.0, KC)
            _run(kernels, block, rng, solver=WALRUS, loss=WW_LOSS, splits=True, bias=1.0, epochs=1)
    finally:
        mp.undo()
    assert K.FAR_ENTRIES == FAR
    return kernels


@pytest.mark.parametrize("sparse,KC", CASES)
@pytest.mark.parametrize("solver,loss", [(WALRUS, WW_LOSS), (SIMPLEX, CS_LOSS)])
@pytest.mark.parametrize("weighted,splits,bias", [(False, False, 0.0), (True, True, 1.0)])
def test_hints_leave_every_bit(eager, sparse, solver, loss, weighted, splits, bias, KC):
    block, _ = _case(7, sparse, weighted, bias, KC)
    # the cached builds run without the hints on data this small
    assert N * (KC - 1) < FAR and (D + 1) * KC < FAR
    settings = dict(solver=solver, loss=loss, splits=splits, bias=bias)
    ours = _run(CACHED, block, np.random.default_rng(3), **settings)
    theirs = _run(eager, block, np.random.default_rng(3), **settings)
    for epoch, (a, b) in enumerate(zip(ours, theirs)):
        for x, z in zip(a, b):
            np.testing.assert_array_equal(x, z, err_msg=f"epoch {epoch}")
        np.testing.assert_array_equal(a[4], a[5])  # the row-parallel objective's terms too
    assert np.count_nonzero(ours[-1][1]) and np.count_nonzero(ours[-1][2])  # the runs moved and shrank
    # every build of the eager kernels was compiled with the threshold at 0 (none was made
    # by a call with new argument types after the fixture put the threshold back)
    marks = (f" {FAR}\n", f" {FAR - 1}\n")  # LLVM writes ``x >= T`` as ``x > T - 1``
    for kernel in eager:
        assert len(kernel.signatures) == len(CASES)
        for sig in kernel.signatures:
            assert not any(m in kernel.inspect_llvm(sig) for m in marks)


def test_a_build_made_now_holds_the_threshold():
    """What the check above looks for is there in a build that keeps the threshold."""
    block, rng = _case(1, True, False, 0.0, 11)
    lazy = njit(nogil=True)(K._bcd_pass)
    _run((lazy, K.hinge_sum_serial, K.hinge_rows_serial, BK.hinge_rows_par), block, rng, solver=WALRUS,
         loss=WW_LOSS, splits=False, bias=0.0, epochs=1)
    marks = (f" {FAR}\n", f" {FAR - 1}\n")
    assert any(m in lazy.inspect_llvm(lazy.signatures[0]) for m in marks)
