"""Stores in the Python API: predict, decision_function and score read a store shard by shard,
and write_predictions writes labels or scores for every row (issue 17, item 2)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import streamwww as sw
from streamwww.io import write_store


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    rng = np.random.default_rng(0)
    protos = rng.normal(size=(4, 12)) * 2
    y = rng.integers(0, 4, size=700)
    X = sp.csr_matrix((protos[y] + rng.normal(size=(700, 12))).astype(np.float32))
    labels = np.array([10.0, 20.0, 30.0, 40.0])[y]
    root = tmp_path_factory.mktemp("api")
    write_store(root / "s.zarr", X, labels, shard_rows=150)
    model = sw.WWClassifier(C=0.5, random_state=0).fit(X, labels)
    return model, X, labels, root


@pytest.mark.parametrize("fmt", ["zarr", "parquet"])
def test_predict_score_decision_function_take_a_store(fitted, fmt, tmp_path):
    model, X, labels, root = fitted
    path = root / "s.zarr" if fmt == "zarr" else tmp_path / "s.parquet"
    if fmt == "parquet":
        write_store(path, X, labels, shard_rows=150, format="parquet")
    np.testing.assert_array_equal(model.predict(path), model.predict(X))
    np.testing.assert_allclose(model.decision_function(sw.open_store(path)), model.decision_function(X),
                               rtol=1e-12, atol=1e-12)
    assert model.score(path) == pytest.approx(model.score(X, labels))


def test_a_store_with_more_features_is_refused(fitted, tmp_path):
    model, X, labels, _ = fitted
    wide = sp.hstack([X, sp.csr_matrix(np.ones((X.shape[0], 1), dtype=np.float32))]).tocsr()
    write_store(tmp_path / "w.zarr", wide, labels, shard_rows=150)
    with pytest.raises(ValueError, match="13 features but WWClassifier was fitted with 12"):
        model.predict(tmp_path / "w.zarr")


def test_a_store_given_with_y_is_one_clear_error(fitted):
    """A store carries its labels: fit and score with a store (or its path) and y say so,
    instead of scikit-learn's "could not convert string to float"."""
    model, _, labels, root = fitted
    store = sw.open_store(root / "s.zarr")
    for call, who in ((lambda X: sw.WWClassifier(max_iter=2).fit(X, labels), "WWClassifier.fit"),
                      (lambda X: model.score(X, labels), "WWClassifier.score"),
                      (lambda X: sw.WWClassifierCV(Cs=[1.0], cv=2, max_iter=2).fit(X, labels), "WWClassifierCV.fit")):
        for X in (root / "s.zarr", str(root / "s.zarr"), store):
            with pytest.raises(ValueError, match=f"{who}: X is a shard store .*s.zarr.*own labels; give it without y"):
                call(X)


@pytest.mark.parametrize("fmt", ["zarr", "parquet"])
@pytest.mark.parametrize("scores", [False, True])
def test_write_predictions_one_chunk_per_shard(fitted, tmp_path, fmt, scores):
    import pyarrow.parquet as pq
    import zarr

    model, X, labels, root = fitted
    out = sw.write_predictions(model, root / "s.zarr", tmp_path / "pred", scores=scores, format=fmt)
    want = model.decision_function(X) if scores else model.predict(X)
    if fmt == "zarr":
        g = zarr.open_group(str(out), mode="r")
        got = np.concatenate([g[f"shard-{i:05d}"][...] for i in range(g.attrs["n_shards"])])
        assert g.attrs["kind"] == ("scores" if scores else "labels")
    else:
        parts = sorted(out.glob("part-*.parquet"))
        tables = [pq.read_table(p).to_pandas().to_numpy() for p in parts]
        got = np.concatenate(tables)
        got = got if scores else got[:, 0]
        assert len(parts) == 5
    np.testing.assert_allclose(got, want, rtol=1e-12)
    with pytest.raises(FileExistsError, match="already exists"):
        sw.write_predictions(model, root / "s.zarr", out, format=fmt)
    assert not list(tmp_path.glob(".pred.*"))  # (no temporary left beside it)
