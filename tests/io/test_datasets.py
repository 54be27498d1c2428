"""Round trips of the real LIBSVM files in ../shared/data/libsvm against
scikit-learn's ``load_svmlight_file`` (values compared after float32 rounding)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_svmlight_file

from streamwww.io import convert_libsvm
from tests.io.conftest import DATA_DIR, assert_same_csr, read_all

pytestmark = pytest.mark.data

SMALL = ["dna.scale", "dna.scale.t", "glass.scale", "iris.scale", "letter.scale",
         "letter.scale.t", "pendigits", "pendigits.t", "satimage.scale", "satimage.scale.t",
         "segment.scale", "svmguide2", "vehicle.scale", "vowel.scale", "wine.scale"]
BIG = ["sector.scale", "sector.scale.t"]
SHARDINGS = [{"shard_rows": 1000}, {"shard_mb": 0.05}, {}]


def check(path, store):
    X_ref, y_ref = load_svmlight_file(str(path), zero_based=False, dtype=np.float64)
    X, labels = read_all(store)
    X_ref = sp.csr_matrix(X_ref.astype(np.float32))
    assert X.shape == X_ref.shape
    if store.layout == "sparse":
        assert_same_csr(X, X_ref)
    else:
        assert np.array_equal(X.toarray(), X_ref.toarray())
    assert np.array_equal(labels, y_ref)
    assert store.n_rows == X_ref.shape[0] and store.n_classes == len(np.unique(y_ref))


def test_every_file_is_covered(libsvm_files):
    assert sorted(libsvm_files) == sorted(SMALL + BIG)


@pytest.mark.parametrize("name", SMALL)
@pytest.mark.parametrize("fmt", ["zarr", "parquet"])
@pytest.mark.parametrize("sharding", SHARDINGS, ids=["rows1000", "mb0.05", "default"])
def test_small_files(libsvm_files, tmp_path, name, fmt, sharding):
    path = libsvm_files[name]
    check(path, convert_libsvm(path, tmp_path / "s", format=fmt, **sharding))


@pytest.mark.parametrize("name", ["iris.scale", "letter.scale"])
def test_sparse_layout_and_xz_input(libsvm_files, tmp_path, name):
    """Forced CSR layout, read straight from the .xz file."""
    store = convert_libsvm(DATA_DIR / f"{name}.xz", tmp_path / "s", layout="sparse",
                           shard_rows=1000)
    assert store.layout == "sparse"
    check(libsvm_files[name], store)


@pytest.mark.parametrize("name,fmt", [("sector.scale", "zarr"), ("sector.scale.t", "parquet")])
def test_sector(libsvm_files, tmp_path, name, fmt):
    path = libsvm_files[name]
    store = convert_libsvm(path, tmp_path / "s", format=fmt, shard_mb=2)
    assert store.n_shards > 1 and store.n_classes == 105
    check(path, store)
