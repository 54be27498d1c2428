"""LIBSVM -> store conversion: round trips, shuffle, --like, atomicity, CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import load_svmlight_file

from streamwww.cli import main
from streamwww.errors import DataFormatError, LibsvmFormatError, ShardFormatError, StoreExistsError
from streamwww.io import ProgressEvent, convert_libsvm, load_libsvm, make_data, open_store
from streamwww.io._staging import Rows, Scatter, shuffled_blocks
from tests.io.conftest import assert_same_csr, leftovers, read_all


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """A small make_data file and scikit-learn's reading of it."""
    path = tmp_path_factory.mktemp("gen") / "train.libsvm"
    make_data(path, rows=1500, features=300, nnz_per_row=12, classes=5, seed=7)
    X, y = load_svmlight_file(str(path), zero_based=False, dtype=np.float64)
    return path, X.astype(np.float32), y


def id_text(n=400, classes=4):
    """Label-sorted rows; feature 1 holds the row id, so order can be traced."""
    lines = []
    for i in range(n):
        label = 1 + i * classes // n
        lines.append(f"{label} 1:{i} {2 + i % 7}:{(i % 13) / 4}\n")
    return "".join(lines)


def row_ids(store) -> np.ndarray:
    X, _ = read_all(store)
    return X[:, 0].toarray().ravel().astype(int)


@pytest.mark.parametrize("fmt", ["zarr", "parquet"])
@pytest.mark.parametrize("size", [{"shard_rows": 37}, {"shard_rows": 5000}, {"shard_mb": 0.01},
                                  {}])
def test_round_trip_matches_sklearn(generated, tmp_path, fmt, size):
    path, X_ref, y_ref = generated
    store = convert_libsvm(path, tmp_path / "s", format=fmt, **size)
    assert store.layout == "sparse" and store.format == fmt
    X, labels = read_all(store)
    assert_same_csr(X, X_ref)
    assert np.array_equal(labels, y_ref)
    if "shard_rows" in size:
        assert store.shard_rows.max() == min(size["shard_rows"], 1500)
    source = store.metadata["provenance"]["source"]
    assert source["size"] == path.stat().st_size and source["lines"] == 1500
    assert len(source["sha256"]) == 64


def test_fingerprint_does_not_depend_on_input_compression(generated, tmp_path):
    """Same text, same options: same store bytes and fingerprint. Zarr and Parquet
    hold the same content (per-shard content hashes) in other bytes, whose
    checksums the fingerprint covers (format version 2, docs/FORMAT.md)."""
    import gzip

    path, _, _ = generated
    gz = tmp_path / "train.libsvm.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    a = convert_libsvm(path, tmp_path / "a", format="zarr", shard_rows=100)
    b = convert_libsvm(gz, tmp_path / "b", format="parquet", shard_rows=100)
    c = convert_libsvm(gz, tmp_path / "c", format="zarr", shard_rows=100)
    assert a.fingerprint == c.fingerprint and a.fingerprint != b.fingerprint
    assert [s["sha256"] for s in a.metadata["shards"]] == [s["sha256"] for s in b.metadata["shards"]]
    assert (a.metadata["provenance"]["source"]["sha256"]
            == b.metadata["provenance"]["source"]["sha256"])
    assert b.metadata["provenance"]["source"]["compression"] == "gzip"


def test_options_dtype_zero_based_n_features_layout(write_text, tmp_path):
    path = write_text("1 0:1.5 2:2\n2 1:0.1\n")
    store = convert_libsvm(path, tmp_path / "s", zero_based=True, n_features=6,
                           dtype="float64", layout="dense")
    assert (store.n_features, store.dtype, store.layout) == (6, np.float64, "dense")
    X, y = store.read_shard(0)
    assert np.array_equal(X, [[1.5, 0, 2, 0, 0, 0], [0, 0.1, 0, 0, 0, 0]])
    assert store.classes[y].tolist() == [1.0, 2.0]
    opts = store.metadata["provenance"]["options"]
    assert opts["zero_based"] and opts["n_features"] == 6 and opts["dtype"] == "float64"


def test_empty_input_is_an_error(write_text, tmp_path):
    path = write_text("# nothing here\n\n")
    with pytest.raises(DataFormatError, match="no data rows"):
        convert_libsvm(path, tmp_path / "s")
    assert not (tmp_path / "s").exists() and leftovers(tmp_path / "s") == []


def test_existing_output_needs_overwrite(write_text, tmp_path):
    path = write_text("1 1:1\n2 2:2\n")
    convert_libsvm(path, tmp_path / "s")
    with pytest.raises(StoreExistsError, match="already exists"):
        convert_libsvm(path, tmp_path / "s")
    assert convert_libsvm(path, tmp_path / "s", overwrite=True, format="parquet").format == "parquet"


def test_skip_bad_lines_is_recorded(write_text, tmp_path):
    path = write_text("1 1:1\n1 0:1\n2 2:2\n")
    store = convert_libsvm(path, tmp_path / "s", skip_bad_lines=True)
    assert store.n_rows == 2
    source = store.metadata["provenance"]["source"]
    assert source["skipped_lines"] == 1 and source["skipped_examples"][0].startswith("line 2:")


def test_progress_events(generated, tmp_path):
    path, _, _ = generated
    events: list[ProgressEvent] = []
    convert_libsvm(path, tmp_path / "s", shard_rows=500, progress=events.append)
    stages = [e.stage for e in events]
    assert stages[0] == "read" and stages[-1] == "write" and "write" not in stages[:stages.index("write")]
    reads = [e for e in events if e.stage == "read"]
    assert reads[-1].done == reads[-1].total == path.stat().st_size
    writes = [e for e in events if e.stage == "write"]
    assert [e.done for e in writes] == [500, 1000, 1500] and writes[-1].total == 1500


# ------------------------------------------------------------------ shuffle

@pytest.mark.parametrize("fmt", ["zarr", "parquet"])
def test_shuffle_is_a_deterministic_global_permutation(write_text, tmp_path, fmt):
    path = write_text(id_text())
    plain = convert_libsvm(path, tmp_path / "plain", shard_rows=50, format=fmt)
    assert row_ids(plain).tolist() == list(range(400))
    assert max(s["classes_present"] for s in plain.metadata["shards"]) == 1  # label-sorted

    a = convert_libsvm(path, tmp_path / "a", shard_rows=50, shuffle=True, seed=3, format=fmt)
    ids = row_ids(a)
    assert sorted(ids) == list(range(400)) and ids.tolist() != list(range(400))
    # every row keeps its label and values
    X_plain, y_plain = read_all(plain)
    X_a, y_a = read_all(a)
    assert_same_csr(X_a, X_plain[ids])
    assert np.array_equal(y_a, y_plain[ids])
    # rows from everywhere in every shard
    assert min(s["classes_present"] for s in a.metadata["shards"]) == 4
    assert a.metadata["provenance"]["options"]["seed"] == 3

    b = convert_libsvm(path, tmp_path / "b", shard_rows=50, shuffle=True, seed=3, format=fmt)
    assert np.array_equal(row_ids(b), ids) and b.fingerprint == a.fingerprint
    c = convert_libsvm(path, tmp_path / "c", shard_rows=50, shuffle=True, seed=4, format=fmt)
    assert not np.array_equal(row_ids(c), ids)


def test_shuffle_without_seed_records_the_seed(write_text, tmp_path):
    path = write_text(id_text(50))
    a = convert_libsvm(path, tmp_path / "a", shuffle=True)
    seed = a.metadata["provenance"]["options"]["seed"]
    assert isinstance(seed, int)
    b = convert_libsvm(path, tmp_path / "b", shuffle=True, seed=seed)
    assert a.fingerprint == b.fingerprint


def _rows(ids: np.ndarray) -> Rows:
    n = len(ids)
    return Rows(ids.astype(np.float64), np.arange(n + 1, dtype=np.int64),
                np.zeros(n, dtype=np.int32), ids.astype(np.float32))


def test_oversized_buckets_are_split(tmp_path):
    rng = np.random.default_rng(0)
    scatter = Scatter(tmp_path / "b", 2, np.float32, rng)
    for start in range(0, 5000, 500):
        scatter.add(_rows(np.arange(start, start + 500)))
    sizes = [b.nbytes for b in scatter.buckets]
    blocks = list(shuffled_blocks(scatter.buckets, rng, max_bucket_bytes=min(sizes) // 5))
    assert len(blocks) > 10  # the two buckets were split (recursively)
    ids = np.concatenate([b.labels for b in blocks])
    assert sorted(ids.tolist()) == list(range(5000))
    for b in blocks:  # CSR parts travel with their labels
        assert np.array_equal(b.data, b.labels.astype(np.float32))
    assert list((tmp_path / "b").iterdir()) == []


def test_bucket_shuffle_is_uniform(tmp_path):
    """All 3! orders of 3 rows over 2 buckets come out equally often."""
    trials = 600
    counts = Counter()
    for t in range(trials):
        rng = np.random.default_rng(t)
        scatter = Scatter(tmp_path / f"t{t}", 2, np.float32, rng)
        scatter.add(_rows(np.arange(3)))
        order = np.concatenate([b.labels for b in shuffled_blocks(scatter.buckets, rng, 10**6)])
        counts[tuple(order.astype(int))] += 1
    assert len(counts) == 6
    expected = trials / 6
    chi2 = sum((c - expected) ** 2 / expected for c in counts.values())
    assert chi2 < 25.7  # 5 degrees of freedom, p ~ 1e-4



@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_take_rows_is_a_row_gather(dtype):
    """The staging's compiled gather equals SciPy's row indexing: rows of every length
    (empty ones too), in any order, repeated, and none."""
    import scipy.sparse as sp

    from streamwww.io._staging import take_rows

    rng = np.random.default_rng(11)
    X = sp.random(300, 50, density=0.1, format="csr", random_state=3, dtype=dtype)
    for r in range(0, 300, 7):  # some empty rows
        X.data[X.indptr[r]:X.indptr[r + 1]] = 0.0
    X.eliminate_zeros()
    assert (np.diff(X.indptr) == 0).sum() >= 300 // 7
    for order in (rng.permutation(300), rng.integers(0, 300, 500), np.arange(300)[::-1], np.arange(0)):
        order = order.astype(np.int64)
        indptr, indices, data = take_rows(X.indptr.astype(np.int64), X.indices.astype(np.int32), X.data, order)
        want = X[order]
        assert np.array_equal(indptr, want.indptr) and np.array_equal(indices, want.indices)
        assert np.array_equal(data, want.data) and data.dtype == dtype


# ------------------------------------------------------------------ --like

def test_like_uses_the_training_classes_and_features(write_text, tmp_path):
    train = write_text("1 1:1 10:1\n2 2:1\n3 3:1\n7 4:1\n", name="train.txt")
    test = write_text("7 1:1\n3 8:2\n7 2:1\n", name="test.txt")
    tr = convert_libsvm(train, tmp_path / "train", format="parquet", dtype="float64")
    te = convert_libsvm(test, tmp_path / "test", like=tmp_path / "train")
    assert np.array_equal(te.classes, tr.classes) and te.n_features == 10
    assert (te.format, te.dtype) == ("parquet", np.float64)  # inherited
    _, labels = read_all(te)
    assert labels.tolist() == [7.0, 3.0, 7.0]
    assert te.metadata["provenance"]["options"]["like"]["fingerprint"] == tr.fingerprint


def test_like_rejects_unseen_labels_and_features(write_text, tmp_path):
    train = write_text("1 1:1 5:1\n2 2:1\n", name="train.txt")
    convert_libsvm(train, tmp_path / "train")
    unseen = write_text("1 1:1\n2 1:1\n4 2:1\n", name="unseen.txt")
    with pytest.raises(LibsvmFormatError, match=r"unseen.txt:3: label 4 is not one of the 2 "
                                                r"classes of .*train \[1, 2\]"):
        convert_libsvm(unseen, tmp_path / "t", like=tmp_path / "train")
    wide = write_text("1 1:1\n2 6:1\n", name="wide.txt")
    with pytest.raises(LibsvmFormatError, match=r"wide.txt:2: index in '6:1' is out of range: "
                                                r"n_features is 5"):
        convert_libsvm(wide, tmp_path / "t", like=tmp_path / "train")
    with pytest.raises(ValueError, match="contradicts"):
        convert_libsvm(wide, tmp_path / "t", like=tmp_path / "train", n_features=9)
    assert not (tmp_path / "t").exists() and leftovers(tmp_path / "t") == []


# ------------------------------------------------------------------ killed mid-way

def test_killed_conversion_leaves_no_store(tmp_path):
    src = tmp_path / "in.libsvm"
    make_data(src, rows=3000, features=50, nnz_per_row=5, classes=3, seed=1)
    out = tmp_path / "out"
    code = ("import sys; from streamwww.io import convert_libsvm; "
            "convert_libsvm(sys.argv[1], sys.argv[2], shard_rows=5)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(src), str(out)],
                            cwd=Path(__file__).resolve().parents[2])
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            tmp = [p for p in tmp_path.iterdir() if p.name.startswith(".out.streamwww-tmp-")]
            if tmp and (tmp[0] / "shard-00010").exists():  # in the middle of pass 2
                break
            time.sleep(0.005)
        assert proc.poll() is None, "conversion ended before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert not out.exists()
    with pytest.raises(FileNotFoundError):
        open_store(out)
    (tmp,) = [tmp_path / n for n in leftovers(out)]
    with pytest.raises(ShardFormatError, match="not a complete streamwww store"):
        open_store(tmp)
    store = convert_libsvm(src, out, shard_rows=1000)  # cleans the dead process's leftovers
    assert store.n_rows == 3000 and leftovers(out) == []


# ------------------------------------------------------------------ command line

def test_cli_make_data_convert_info(tmp_path, capsys):
    data = tmp_path / "d.libsvm"
    assert main(["make-data", str(data), "--rows", "300", "--features", "40",
                 "--nnz-per-row", "6", "--classes", "3", "--seed", "2"]) == 0
    assert "300 rows" in capsys.readouterr().out
    store = tmp_path / "s"
    assert main(["-q", "convert", str(data), str(store), "--shard-rows", "100", "--format",
                 "parquet", "--shuffle", "--seed", "5"]) == 0
    assert "300 rows, 40 features, 3 classes, 3 sparse parquet shard(s)" in capsys.readouterr().out
    assert main(["info", str(store)]) == 0
    out = capsys.readouterr().out
    assert "fingerprint" in out and "shard-00002.parquet" in out and "seed=5" in out
    assert main(["info", str(store), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n_rows"] == 300
    X, y = load_libsvm(data)
    assert X.shape == (300, 40) and set(y.tolist()) == {1.0, 2.0, 3.0}

    assert main(["convert", str(data), str(store)]) == 1
    assert "already exists" in capsys.readouterr().err
    assert main(["convert", str(data), str(tmp_path / "t"), "--seed", "1"]) == 1
    assert "--seed only applies with --shuffle" in capsys.readouterr().err
    bad = tmp_path / "bad.libsvm"
    bad.write_text("1 1:1\n2 x:1\n")
    assert main(["convert", str(bad), str(tmp_path / "t")]) == 1
    assert "bad.libsvm:2:" in capsys.readouterr().err
    assert not (tmp_path / "t").exists()
    assert main(["make-data", str(data), "--rows", "3", "--features", "4", "--nnz-per-row", "5",
                 "--classes", "2"]) == 1
    assert "'nnz_per_row' parameter" in capsys.readouterr().err


def test_cli_shard_size_options_are_exclusive(tmp_path):
    with pytest.raises(SystemExit):
        main(["convert", "a", "b", "--shard-rows", "3", "--shard-mb", "1"])


def test_fast_enough_to_be_useful(tmp_path):
    """Not a benchmark (see tools/bench_convert.py): a sanity floor only."""
    src = tmp_path / "in.libsvm"
    info = make_data(src, rows=20000, features=5000, nnz_per_row=40, classes=10, seed=0)
    start = time.perf_counter()
    convert_libsvm(src, tmp_path / "s", shard_mb=4)
    mb_s = info["bytes"] / 2**20 / (time.perf_counter() - start)
    assert mb_s > 5, f"conversion ran at {mb_s:.1f} MiB/s"
