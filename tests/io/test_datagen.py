"""The synthetic data generator."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from sklearn.linear_model import RidgeClassifier

from streamwww.errors import OutputPathError, StoreExistsError
from streamwww.io import load_libsvm, make_data


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_shape_and_determinism(tmp_path):
    a = make_data(tmp_path / "a.txt", rows=500, features=200, nnz_per_row=9, classes=4, seed=5)
    make_data(tmp_path / "b.txt", rows=500, features=200, nnz_per_row=9, classes=4, seed=5, n_threads=1)
    make_data(tmp_path / "c.txt", rows=500, features=200, nnz_per_row=9, classes=4, seed=6)
    assert a["bytes"] == (tmp_path / "a.txt").stat().st_size
    assert digest(tmp_path / "a.txt") == digest(tmp_path / "b.txt")  # thread count irrelevant
    assert digest(tmp_path / "a.txt") != digest(tmp_path / "c.txt")
    X, y = load_libsvm(tmp_path / "a.txt", n_features=200)
    assert X.shape == (500, 200)
    assert np.array_equal(np.diff(X.indptr), np.full(500, 9))  # distinct, sorted indices
    assert set(np.unique(y).tolist()) == {1.0, 2.0, 3.0, 4.0}


def test_prefix_does_not_depend_on_row_count(tmp_path):
    make_data(tmp_path / "small.txt", rows=10, features=50, nnz_per_row=5, classes=3, seed=1)
    make_data(tmp_path / "large.txt", rows=20000, features=50, nnz_per_row=5, classes=3, seed=1)
    small = (tmp_path / "small.txt").read_bytes()
    assert (tmp_path / "large.txt").read_bytes().startswith(small)


@pytest.mark.parametrize("nnz", [30, 40])  # dense, and more than half the features
def test_dense_and_dense_ish(tmp_path, nnz):
    make_data(tmp_path / "d.txt", rows=50, features=40, nnz_per_row=nnz, classes=2, seed=0)
    X, _ = load_libsvm(tmp_path / "d.txt", n_features=40)
    assert np.array_equal(np.diff(X.indptr), np.full(50, nnz))
    if nnz == 40:
        assert np.array_equal(X.indices, np.tile(np.arange(40), 50))


def test_learnable(tmp_path):
    """A linear model beats chance (1/5) by far on held-out rows."""
    make_data(tmp_path / "d.txt", rows=4000, features=500, nnz_per_row=20, classes=5, seed=3)
    X, y = load_libsvm(tmp_path / "d.txt", n_features=500)
    clf = RidgeClassifier(alpha=1.0).fit(X[:3000], y[:3000])
    assert clf.score(X[3000:], y[3000:]) > 0.8


def test_compressed_output_and_overwrite(tmp_path):
    out = tmp_path / "d.txt.xz"
    make_data(out, rows=100, features=20, nnz_per_row=3, classes=2)
    assert out.read_bytes()[:6] == b"\xfd7zXZ\x00"
    assert load_libsvm(out)[0].shape[0] == 100
    with pytest.raises(StoreExistsError, match="already exists"):
        make_data(out, rows=100, features=20, nnz_per_row=3, classes=2)
    make_data(out, rows=7, features=20, nnz_per_row=3, classes=2, overwrite=True)
    assert load_libsvm(out)[0].shape[0] == 7
    assert [p.name for p in tmp_path.iterdir()] == ["d.txt.xz"]


def test_a_directory_is_never_replaced(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "keep.txt").write_text("x")
    with pytest.raises(OutputPathError, match="d: is a directory; give a file name"):
        make_data(tmp_path / "d", rows=10, features=5, nnz_per_row=2, classes=2, overwrite=True)
    assert [p.name for p in (tmp_path / "d").iterdir()] == ["keep.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["d"]  # (no text made, nothing left beside it)


@pytest.mark.parametrize("kwargs,match", [
    ({"rows": 0}, "'rows' parameter"),
    ({"nnz_per_row": 50}, "'nnz_per_row' parameter of make_data must be <= features"),
    ({"classes": 1}, "'classes' parameter"),
    ({"seed": -1}, "'seed' parameter"),
    ({"noise": float("nan")}, "'noise' parameter"),
])
def test_parameters_are_checked(tmp_path, kwargs, match):
    params = {"rows": 10, "features": 20, "nnz_per_row": 3, "classes": 2, **kwargs}
    with pytest.raises(ValueError, match=match):
        make_data(tmp_path / "x.txt", **params)
    assert not (tmp_path / "x.txt").exists()


def test_an_output_that_cannot_be_written_names_itself(tmp_path):
    """The error names the file asked for, not the hidden temporary file beside it."""
    from streamwww.errors import OutputPathError

    out = tmp_path / "missing" / "d.txt"
    with pytest.raises(OutputPathError, match=r"missing/d\.txt: cannot write the file \(No such file or "
                                              r"directory\); check the output location") as info:
        make_data(out, rows=10, features=20, nnz_per_row=3, classes=2)
    assert "streamwww-tmp" not in str(info.value)


def test_int_parameters_say_what_they_take_as_every_other_parameter_does(tmp_path):
    """make_data's and the shard size's ints are checked by the one validator
    (streamwww._params.check_int): scikit-learn's wording."""
    from streamwww.io import convert_libsvm

    with pytest.raises(ValueError) as exc:
        make_data(tmp_path / "x.txt", rows=0, features=20, nnz_per_row=3, classes=2)
    assert str(exc.value) == "The 'rows' parameter of make_data must be an int in [1, inf). Got 0 instead."
    make_data(tmp_path / "d.txt", rows=10, features=20, nnz_per_row=3, classes=2)
    with pytest.raises(ValueError) as exc:
        convert_libsvm(tmp_path / "d.txt", tmp_path / "s.zarr", shard_rows=2.5)
    assert str(exc.value) == ("The 'shard_rows' parameter of convert_libsvm must be an int in [1, inf). "
                              "Got 2.5 instead.")
    assert not (tmp_path / "x.txt").exists() and not (tmp_path / "s.zarr").exists()
