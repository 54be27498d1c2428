import os
from pathlib import Path

import numpy as np
import pytest

DATA_DIR = Path(os.environ.get("STREAMWWW_DATA", Path(__file__).resolve().parents[1].parent / "shared" / "data" / "libsvm"))


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


def make_classification(rng, n=60, d=5, k=4, sparse=False, density=0.5, dtype=np.float64):
    """Small learnable multiclass data: class prototypes plus noise."""
    import scipy.sparse as sp

    protos = rng.normal(size=(k, d)) * 2.0
    y = rng.integers(0, k, size=n)
    y[:k] = np.arange(k)  # every class present
    X = protos[y] + rng.normal(size=(n, d))
    if sparse:
        X = X * (rng.random((n, d)) < density)
        return sp.csr_matrix(X.astype(dtype)), y
    return X.astype(dtype), y
