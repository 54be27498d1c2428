"""Row weights (issue 17.3): ``sample_weight`` and ``class_weight`` are exact.

A weight ``w_i`` is the per-row dual box ``[0, C w_i]`` and a ``w_i``-weighted
hinge term: integer weights give the optimum of the data with rows repeated.
"""

import json

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.utils.class_weight import compute_class_weight

import streamwww as sw
from streamwww import WWClassifier, load_model, save_model
from streamwww.io import write_store

from .conftest import make_classification, stop_in_epoch

TIGHT = dict(tol=1e-10, max_iter=3000, random_state=0, device="cpu")
SHORT = dict(tol=1e-2, max_iter=300, random_state=0, device="cpu")  # where models are compared bitwise


def _weighted_primal(model, X, y, w, C):
    """``1/2 ||W||^2 + C sum_i w_i sum_{j != y_i} max(0, 1 - (s_y - s_j))`` in NumPy."""
    Xd = X.toarray() if sp.issparse(X) else X
    S = Xd @ model.coef_.T + model.intercept_
    yi = np.searchsorted(model.classes_, y)
    H = np.maximum(0.0, 1.0 - (S[np.arange(len(y)), yi][:, None] - S))
    H[np.arange(len(y)), yi] = 0.0
    wsq = (model.coef_ ** 2).sum() + (model.intercept_ ** 2).sum()  # intercept_scaling = 1
    return 0.5 * wsq + C * float((w * H.sum(axis=1)).sum())


@pytest.mark.parametrize("sparse", [False, True])
def test_integer_weights_equal_repeated_rows(rng, sparse):
    X, y = make_classification(rng, n=50, d=6, k=4, sparse=sparse)
    if sparse:  # a zero row too: its exact beta is C w_i
        X = sp.lil_matrix(X)
        X[7, :] = 0
        X = sp.csr_matrix(X)
        X.eliminate_zeros()
    w = rng.integers(0, 4, size=50)
    w[:4] = [0, 1, 2, 3]
    reps = np.repeat(np.arange(50), w)
    weighted = WWClassifier(C=0.7, **TIGHT).fit(X, y, sample_weight=w)
    repeated = WWClassifier(C=0.7, **TIGHT).fit(X[reps], y[reps])
    assert weighted.converged_ and repeated.converged_
    np.testing.assert_allclose(weighted.coef_, repeated.coef_, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(weighted.intercept_, repeated.intercept_, rtol=1e-4, atol=1e-6)
    # the certificate is of the weighted problem: its primal, recomputed here, is the reported one
    P = _weighted_primal(weighted, X, y, w, 0.7)
    assert weighted.history_[-1]["primal"] == pytest.approx(P, rel=1e-9)
    assert weighted.history_[-1]["rel_gap"] <= 1e-10
    # and the weights matter: the unweighted optimum is another one
    plain = WWClassifier(C=0.7, **TIGHT).fit(X, y)
    assert not np.allclose(plain.coef_, weighted.coef_, rtol=1e-3)


def test_class_weight_equals_matching_sample_weight(rng):
    X, y = make_classification(rng, n=60, d=5, k=3)
    labels = np.array(["a", "b", "c"])[y]
    cw = {"a": 2.0, "c": 0.5}
    by_class = WWClassifier(C=1.0, class_weight=cw, **SHORT).fit(X, labels)
    by_row = WWClassifier(C=1.0, **SHORT).fit(X, labels, sample_weight=np.vectorize(lambda c: cw.get(c, 1.0))(labels))
    assert np.array_equal(by_class.coef_, by_row.coef_) and np.array_equal(by_class.intercept_, by_row.intercept_)
    # the two multiply
    sw_ = rng.uniform(0.5, 2.0, size=60)
    both = WWClassifier(C=1.0, class_weight=cw, **SHORT).fit(X, labels, sample_weight=sw_)
    rows = WWClassifier(C=1.0, **SHORT).fit(X, labels, sample_weight=sw_ * np.vectorize(lambda c: cw.get(c, 1.0))(labels))
    assert np.array_equal(both.coef_, rows.coef_)


def test_balanced_is_scikit_learns(rng):
    X, y = make_classification(rng, n=70, d=5, k=3)
    y[:30] = 0  # unbalanced
    expect = compute_class_weight("balanced", classes=np.unique(y), y=y)
    a = WWClassifier(C=1.0, class_weight="balanced", **SHORT).fit(X, y)
    b = WWClassifier(C=1.0, **SHORT).fit(X, y, sample_weight=expect[y])
    assert np.array_equal(a.coef_, b.coef_)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_unit_weights_are_the_unweighted_model(rng):
    X, y = make_classification(rng, n=40, d=5, k=3)
    a = WWClassifier(C=1.0, max_iter=5, tol=0, random_state=1, device="cpu").fit(X, y)
    b = WWClassifier(C=1.0, max_iter=5, tol=0, random_state=1, device="cpu",
                     class_weight={0: 1.0}).fit(X, y, sample_weight=np.ones(40))
    assert np.array_equal(a.coef_, b.coef_)


def test_store_class_weight_equals_arrays(rng, tmp_path):
    X, y = make_classification(rng, n=60, d=5, k=3, sparse=True, dtype=np.float32)  # as a store keeps it
    store = write_store(tmp_path / "s.zarr", X, y, shard_rows=60)
    cw = {0: 3.0, 2: 0.25}
    from_store = sw.train(store, C=0.5, class_weight=cw, **SHORT)
    from_arrays = sw.train((X, y), C=0.5, class_weight=cw, **SHORT)
    assert np.array_equal(from_store.coef_, from_arrays.coef_)
    balanced = sw.train(store, C=0.5, class_weight="balanced", **SHORT)
    expect = compute_class_weight("balanced", classes=np.unique(y), y=y)
    ref = sw.train((X, y), C=0.5, sample_weight=expect[y], **SHORT)
    np.testing.assert_allclose(balanced.coef_, ref.coef_, rtol=1e-12, atol=1e-14)


def test_store_weights_train_as_sample_weight(rng, tmp_path):
    """A store's weight array is the rows' sample_weight: same model as arrays (bitwise, one shard),
    and it multiplies class_weight as scikit-learn does."""
    X, y = make_classification(rng, n=60, d=5, k=3, sparse=True, dtype=np.float32)
    w = rng.choice([0.0, 0.5, 1.0, 3.0], size=60)
    store = write_store(tmp_path / "w.zarr", X, y, shard_rows=60, sample_weight=w)
    assert store.has_weights
    from_store = sw.train(store, C=0.5, **SHORT)
    from_arrays = sw.train((X, y), C=0.5, sample_weight=w, **SHORT)
    assert np.array_equal(from_store.coef_, from_arrays.coef_)
    unweighted = sw.train(write_store(tmp_path / "u.zarr", X, y, shard_rows=60), C=0.5, **SHORT)
    assert not np.array_equal(from_store.coef_, unweighted.coef_)
    cw = {1: 2.0}
    both = sw.train(store, C=0.5, class_weight=cw, **SHORT)
    ref = sw.train((X, y), C=0.5, class_weight=cw, sample_weight=w, **SHORT)
    assert np.array_equal(both.coef_, ref.coef_)
    sharded = sw.train(write_store(tmp_path / "w3.zarr", X, y, shard_rows=20, sample_weight=w),
                       C=0.5, **{**TIGHT, "tol": 1e-8})
    tight = sw.train((X, y), C=0.5, sample_weight=w, **{**TIGHT, "tol": 1e-8})
    np.testing.assert_allclose(sharded.coef_, tight.coef_, rtol=1e-5, atol=1e-6)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_weighted_checkpoint_resumes_and_refuses_other_weights(rng, tmp_path):
    X, y = make_classification(rng, n=80, d=5, k=3, sparse=True)
    store = write_store(tmp_path / "s.zarr", X, y, shard_rows=20)
    kw = dict(C=0.5, tol=0, max_iter=6, random_state=3, device="cpu")
    full = sw.train(store, class_weight={1: 2.0}, **kw)
    with pytest.raises(KeyboardInterrupt):  # stopped in epoch 4: the commit of epoch 3 is kept
        sw.train(store, class_weight={1: 2.0}, checkpoint_dir=tmp_path / "ck", checkpoint_interval=0,
                 progress=stop_in_epoch(4), **kw)
    assert json.loads((tmp_path / "ck" / "manifest.json").read_text())["cursor"]["epoch"] == 3
    resumed = sw.resume(tmp_path / "ck")
    assert np.array_equal(resumed.coef_, full.coef_)
    assert resumed.class_weight == {1: 2.0}
    with pytest.raises(sw.errors.CheckpointError, match="fingerprint|other data"):
        sw.train(store, class_weight={1: 3.0}, checkpoint_dir=tmp_path / "ck", **kw)


def test_model_file_keeps_class_weight(rng, tmp_path):
    X, y = make_classification(rng, n=40, d=4, k=3)
    m = WWClassifier(C=1.0, class_weight={np.int64(2): 2.5}, max_iter=50, device="cpu").fit(X, y)
    m2 = load_model(save_model(m, tmp_path / "m.npz"))
    assert m2.class_weight == {2: 2.5}
    assert np.array_equal(m2.predict(X), m.predict(X))


@pytest.mark.parametrize("bad, match", [
    (dict(sample_weight=-np.ones(30)), r"sample_weight\[0\] is -1.0"),
    (dict(sample_weight=np.ones(29)), r"shape \(29,\); expected \(30,\)"),
    (dict(sample_weight=np.zeros(30)), "every sample_weight is zero"),
    (dict(sample_weight=np.full(30, np.nan)), "finite"),
])
def test_bad_sample_weight(rng, bad, match):
    X, y = make_classification(rng, n=30, d=4, k=3)
    with pytest.raises(ValueError, match=match):
        WWClassifier(device="cpu").fit(X, y, **bad)


@pytest.mark.parametrize("cw, match", [
    ({7: 1.0}, "label 7, which is not a class"),
    ({0: -1.0}, r"class_weight\[0\] must be a finite number >= 0"),
    ("balance", "must be a dict, 'balanced' or None"),
    ({0: 0.0, 1: 0.0, 2: 0.0}, "every row has weight zero"),
])
def test_bad_class_weight(rng, cw, match):
    X, y = make_classification(rng, n=30, d=4, k=3)
    with pytest.raises(ValueError, match=match):
        WWClassifier(class_weight=cw, device="cpu").fit(X, y)


def test_store_rejects_sample_weight(rng, tmp_path):
    X, y = make_classification(rng, n=30, d=4, k=3)
    store = write_store(tmp_path / "s.zarr", X, y, shard_rows=30)
    with pytest.raises(ValueError, match="store carries its own row weights"):
        WWClassifier(device="cpu").fit(store, sample_weight=np.ones(30))
