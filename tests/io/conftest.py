"""Fixtures and slow-but-obvious references for the I/O tests."""

from __future__ import annotations

import lzma
import os
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

DATA_DIR = Path(os.environ.get(
    "STREAMWWW_DATA", Path(__file__).resolve().parents[2].parent / "shared" / "data" / "libsvm"))


def reference_parse(text: str, zero_based: bool = False):
    """Parse LIBSVM text line by line with plain Python (the test oracle).

    Returns ``(rows, labels)``: ``rows`` a list of sorted ``[(column, float)]``.
    """
    rows, labels = [], []
    for line in text.split("\n"):
        tokens = line.split("#", 1)[0].split()
        if not tokens:
            continue
        labels.append(float(tokens[0]))
        row = {}
        for token in tokens[1:]:
            key, value = token.split(":", 1)
            if key == "qid":
                continue
            row[int(key) - (0 if zero_based else 1)] = float(value)
        rows.append(sorted(row.items()))
    return rows, np.array(labels, dtype=np.float64)


def rows_to_csr(rows, n_features: int, dtype=np.float32) -> sp.csr_matrix:
    indptr = np.cumsum([0] + [len(r) for r in rows])
    indices = np.array([c for r in rows for c, _ in r], dtype=np.int64)
    data = np.array([v for r in rows for _, v in r], dtype=np.float64).astype(dtype)
    return sp.csr_matrix((data, indices, indptr), shape=(len(rows), n_features))


def assert_same_csr(A: sp.csr_matrix, B: sp.csr_matrix) -> None:
    """Exact equality of structure (explicit zeros included) and values."""
    assert A.shape == B.shape
    assert np.array_equal(A.indptr, B.indptr)
    assert np.array_equal(A.indices, B.indices)
    assert np.array_equal(A.data, B.data)


def read_all(store):
    """Concatenate every shard of a store: ``(X, labels)`` with X CSR."""
    Xs, ys = [], []
    for X, y in store.iter_shards():
        Xs.append(sp.csr_matrix(X) if not sp.issparse(X) else X)
        ys.append(y)
    return sp.vstack(Xs, format="csr"), store.classes[np.concatenate(ys)]


def leftovers(path: Path) -> list[str]:
    """Temporary siblings a write to ``path`` may have left."""
    return [p.name for p in path.parent.iterdir() if p.name.startswith(f".{path.name}.")]


@pytest.fixture
def write_text(tmp_path):
    """Write text (str or bytes) to a file in tmp_path and return its path."""
    def write(text, name="data.libsvm"):
        path = tmp_path / name
        path.write_bytes(text.encode() if isinstance(text, str) else text)
        return path
    return write


@pytest.fixture(scope="session")
def libsvm_files(tmp_path_factory):
    """Decompressed copies of ../shared/data/libsvm (skips when absent)."""
    if not DATA_DIR.is_dir():
        pytest.skip(f"{DATA_DIR} not found")
    out = tmp_path_factory.mktemp("libsvm")
    files = {}
    for xz in sorted(DATA_DIR.glob("*.xz")):
        target = out / xz.stem
        target.write_bytes(lzma.decompress(xz.read_bytes()))
        files[xz.stem] = target
    return files
