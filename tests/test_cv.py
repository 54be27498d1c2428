"""Cross-validation in one pass (issue 17.5): WWClassifierCV and train(..., cv=k)."""

import json

import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV, KFold

import streamwww as sw
from streamwww import WWClassifier, WWClassifierCV
from streamwww.io import write_store
from streamwww.stream.folds import shard_folds, train_bits

from .conftest import make_classification, stop_in_epoch

TIGHT = dict(tol=1e-10, max_iter=5000, random_state=0, device="cpu")


def test_folds_are_stratified_seeded_and_complementary():
    y = np.random.default_rng(0).integers(0, 3, size=103)
    f = shard_folds(y, 0, 5, seed=7)
    assert np.array_equal(f, shard_folds(y, 0, 5, seed=7))
    assert not np.array_equal(f, shard_folds(y, 0, 5, seed=8))
    assert not np.array_equal(f, shard_folds(y, 1, 5, seed=7))  # each shard its own draw
    for c in range(3):
        counts = np.bincount(f[y == c], minlength=5)
        assert counts.max() - counts.min() <= 1
    bits = train_bits(f, 5)
    for s in range(5):
        assert np.array_equal(((bits >> s) & 1) == 0, f == s)


def test_fold_models_are_the_separate_fits_and_scores_match_gridsearch(rng):
    X, y = make_classification(rng, n=90, d=5, k=3)
    Cs = [0.05, 1.0]
    cv = WWClassifierCV(Cs=Cs, cv=3, **TIGHT).fit(X, y)
    folds = shard_folds(np.searchsorted(np.unique(y), y), 0, 3, cv.seed_)
    splits = [(np.flatnonzero(folds != s), np.flatnonzero(folds == s)) for s in range(3)]
    gs = GridSearchCV(WWClassifier(**TIGHT), {"C": Cs}, cv=splits).fit(X, y)
    for s in range(3):
        np.testing.assert_array_equal(cv.cv_results_[f"split{s}_test_score"], gs.cv_results_[f"split{s}_test_score"])
    assert set(cv.cv_results_) == set(gs.cv_results_)
    assert np.array_equal(cv.cv_results_["rank_test_score"], gs.cv_results_["rank_test_score"])
    assert cv.best_C_ == gs.best_params_["C"] and cv.best_score_ == pytest.approx(gs.best_score_)
    # the refitted model is the fit on all rows at the best C (same optimum, other row order)
    np.testing.assert_allclose(cv.coef_, gs.best_estimator_.coef_, rtol=1e-5, atol=1e-7)
    assert np.array_equal(cv.predict(X), gs.predict(X))


def test_splitter_and_sample_weight(rng):
    X, y = make_classification(rng, n=60, d=4, k=3)
    w = rng.integers(1, 3, size=60).astype(float)
    kf = KFold(3, shuffle=True, random_state=1)
    cv = WWClassifierCV(Cs=[0.5], cv=kf, **TIGHT).fit(X, y, sample_weight=w)
    for s, (train, test) in enumerate(kf.split(X, y)):
        m = WWClassifier(C=0.5, **TIGHT).fit(X[train], y[train], sample_weight=w[train])
        assert cv.cv_results_[f"split{s}_test_score"][0] == m.score(X[test], y[test])


def test_store_equals_arrays_and_resumes(rng, tmp_path):
    X, y = make_classification(rng, n=80, d=5, k=3, sparse=True, dtype=np.float32)
    one = write_store(tmp_path / "one.zarr", X, y, shard_rows=80)
    kw = dict(Cs=[0.1, 1.0], cv=4, tol=1e-3, max_iter=1000, random_state=3, device="cpu")
    a = WWClassifierCV(**kw).fit(X, y)
    b = WWClassifierCV(**kw).fit(one)
    for key in ("mean_test_score", "split3_test_score"):
        assert np.array_equal(a.cv_results_[key], b.cv_results_[key])
    assert np.array_equal(a.coef_, b.coef_)
    # a sharded store through train(..., cv=k), interrupted and resumed: the same result
    many = write_store(tmp_path / "many.zarr", X, y, shard_rows=20)
    run = dict(C=[0.1, 1.0], cv=4, tol=0, max_iter=6, random_state=3, device="cpu")
    with pytest.warns(Warning, match="did not converge") as caught:
        full = sw.train(many, **run)
    assert [w.filename for w in caught] == [__file__]  # one warning, naming this line
    with pytest.raises(KeyboardInterrupt):  # stopped in epoch 4: the commit of epoch 3 is kept
        sw.train(many, **run, checkpoint_dir=tmp_path / "ck", model_out=tmp_path / "m.npz", checkpoint_interval=0,
                 progress=stop_in_epoch(4))
    assert json.loads((tmp_path / "ck" / "manifest.json").read_text())["cursor"]["epoch"] == 3
    with pytest.warns(Warning, match="did not converge") as caught:
        resumed = sw.resume(tmp_path / "ck")
    assert [w.filename for w in caught] == [__file__]
    assert isinstance(resumed, WWClassifierCV)
    assert np.array_equal(resumed.coef_, full.coef_)
    assert np.array_equal(resumed.cv_results_["mean_test_score"], full.cv_results_["mean_test_score"])
    assert np.array_equal(sw.load_model(tmp_path / "m.npz").coef_, resumed.coef_)


def test_bad_parameters(rng, tmp_path):
    X, y = make_classification(rng, n=30, d=4, k=3)
    with pytest.raises(ValueError, match=r"'cv' parameter .* \[2, 62\]"):
        WWClassifierCV(Cs=[1.0], cv=1, device="cpu").fit(X, y)
    with pytest.raises(ValueError, match="'C'"):
        WWClassifierCV(Cs=[-1.0], device="cpu").fit(X, y)
    store = write_store(tmp_path / "s.zarr", X, y, shard_rows=30)
    with pytest.raises(ValueError, match="for a store, cv must be an int"):
        WWClassifierCV(Cs=[1.0], cv=KFold(3), device="cpu").fit(store)


def test_the_convergence_warning_names_the_callers_line(rng):
    X, y = make_classification(rng, n=60, d=4, k=3)
    with pytest.warns(Warning, match=r"WWClassifierCV: \d+ of 4 models did not converge after 2 epochs") as caught:
        WWClassifierCV(Cs=[1.0], cv=3, tol=0, max_iter=2, random_state=0, device="cpu").fit(X, y)
    assert [w.filename for w in caught] == [__file__]
