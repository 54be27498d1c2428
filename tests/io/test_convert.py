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
from streamwww.io import convert as convert_module
from streamwww.io._staging import Bucket, MemoryAllowance, Rows, Scatter, shuffled_blocks
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


def test_the_default_shard_size_is_the_formats(generated, tmp_path, monkeypatch):
    """Without a shard size, Zarr shards hold up to 128 MiB and Parquet shards 16 MiB
    (written two at a time beside the one being collected); convert and write_store both
    take their format's (here scaled down: 40 KiB for Parquet, 4 MiB for Zarr)."""
    from streamwww.io import writer as store_module
    from streamwww.io import write_store

    assert store_module.DEFAULT_SHARD_MB == {"zarr": 128.0, "parquet": 16.0}
    assert store_module.resolve_shard_size(None, None, "t", "parquet") == (None, 16 * 2**20)
    assert store_module.resolve_shard_size(None, 2.0, "t", "parquet") == (None, 2 * 2**20)
    monkeypatch.setattr(store_module, "DEFAULT_SHARD_MB", {"zarr": 4.0, "parquet": 40 / 1024})
    path, X, y = generated  # 1,500 rows of 12 values: about 120 KiB once read
    for fmt, many in (("zarr", False), ("parquet", True)):
        converted = convert_libsvm(path, tmp_path / f"c-{fmt}", format=fmt)
        written = write_store(tmp_path / f"w-{fmt}", X, y, format=fmt)
        for st in (converted, written):
            assert (st.n_shards > 1) is many, (fmt, st.n_shards)
            if many:
                assert max(sh["rows"] for sh in st.metadata["shards"]) * (12 * 8 + 8) <= 40 * 1024


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



def _weighted_rows(ids: np.ndarray, per_row: int) -> Rows:
    n = len(ids)
    indptr = np.arange(n + 1, dtype=np.int64) * per_row
    values = np.repeat(ids, per_row).astype(np.float64)
    return Rows(ids.astype(np.float64), indptr, (np.arange(n * per_row) % 97).astype(np.int32), values,
                ids.astype(np.float64) / 10)


def _same_rows(a: Rows, b: Rows) -> None:
    for name in Rows._fields:
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            assert x.dtype == y.dtype and np.array_equal(x, y), name


def test_bucket_keeps_its_first_records_in_memory_then_writes_the_rest(tmp_path):
    """Records held while the allowance lasts, the rest in the file: the same records in the
    same order, and the same size, as a bucket that wrote them all; the allowance comes back."""
    blocks = [_weighted_rows(np.arange(a, a + n), per) for a, n, per in
              ((0, 5, 3), (5, 7, 1), (12, 3, 4), (15, 6, 2), (21, 4, 0))]
    parts = [Rows(r.labels[1:], r.indptr[1:] - r.indptr[1], r.indices[r.indptr[1]:], r.data[r.indptr[1]:],
                  r.weights[1:]) for r in blocks]  # what append(rows, 1) stages
    sizes = [16 + 20 * len(p.labels) + 12 * len(p.data) for p in parts]  # a record in the file
    memory = MemoryAllowance(sizes[0] + sizes[1] + sizes[2] // 2)  # two records fit, not three
    disk = Bucket(tmp_path / "disk.bin", np.float64, weighted=True)
    mixed = Bucket(tmp_path / "mixed.bin", np.float64, weighted=True, memory=memory)
    for k, rows in enumerate(blocks):
        for bucket in (disk, mixed):
            bucket.append(rows, 1)
        assert disk.nbytes == mixed.nbytes == sum(sizes[:k + 1])
    assert memory.used == sizes[0] + sizes[1]  # the third did not fit, nor any after it
    assert (tmp_path / "mixed.bin").stat().st_size == sum(sizes[2:])
    got, want = list(mixed.records()), list(disk.records())
    assert len(got) == len(want) == len(parts)
    for g, w, p in zip(got, want, parts):
        _same_rows(g, w)
        _same_rows(g, p)
    assert memory.used == 0  # let go as they were read

    for bucket in (disk, mixed):  # emptied, then filled again: held and file records as before
        bucket.remove()
        for rows in blocks:
            bucket.append(rows, 1)
    assert memory.used == sizes[0] + sizes[1] and mixed.nbytes == disk.nbytes
    _same_rows(mixed.read_all(), disk.read_all())
    assert memory.used == 0
    one = Bucket(tmp_path / "one.bin", np.float64, weighted=True, memory=MemoryAllowance(10**6))
    one.append(blocks[0], 1)
    _same_rows(one.read_all(), parts[0])  # all held: no file
    assert not (tmp_path / "one.bin").exists()
    for bucket in (disk, mixed, one):
        bucket.remove()
    assert list(tmp_path.iterdir()) == []


def test_split_buckets_held_in_memory_give_the_same_blocks(tmp_path):
    """shuffled_blocks over buckets held in memory (and those of their splits) gives the rows,
    in the same order and pieces, that the same buckets on disk give."""
    out = []
    for where, memory in (("disk", None), ("memory", MemoryAllowance(10**7)), ("part", MemoryAllowance(30_000))):
        rng = np.random.default_rng(5)
        scatter = Scatter(tmp_path / where, 3, np.float64, rng, weighted=True, memory=memory)
        for start in range(0, 3000, 300):
            scatter.add(_weighted_rows(np.arange(start, start + 300), 1 + start % 3))
        sizes = [b.nbytes for b in scatter.buckets]
        out.append((sizes, list(shuffled_blocks(scatter.buckets, rng, max_bucket_bytes=min(sizes) // 4))))
        assert memory is None or memory.used == 0
        assert list((tmp_path / where).iterdir()) == []
    (sizes, want), *others = out
    assert len(want) > 12  # the buckets were split
    for got_sizes, got in others:
        assert got_sizes == sizes and len(got) == len(want)
        for g, w in zip(got, want):
            _same_rows(g, w)


def _staged_to_disk(monkeypatch) -> list:
    """Record the staging files written (bytes per path) while a conversion runs."""
    written = []
    append = Bucket.append

    def spy(self, rows, start=0, stop=None):
        before = self.path.stat().st_size if self.path.exists() else 0
        append(self, rows, start, stop)
        after = self.path.stat().st_size if self.path.exists() else 0
        written.append(after - before)

    monkeypatch.setattr(Bucket, "append", spy)
    return written


@pytest.mark.parametrize("fmt,shuffle", [("zarr", True), ("parquet", False), ("parquet", True)])
def test_staging_in_memory_or_on_disk_gives_the_same_store(generated, tmp_path, monkeypatch, fmt, shuffle):
    """A conversion whose staged rows are held in memory (an input expected to fit the
    allowance), or written to the staging files (one expected not to), writes the same
    shards, byte for byte (their hashes and checksums)."""
    path, _, _ = generated
    written = _staged_to_disk(monkeypatch)
    records, on_disk = [], []
    for limit in (convert_module._STAGING_MEMORY_BYTES, 50_000):  # the file stages ~170 kB
        monkeypatch.setattr(convert_module, "_STAGING_MEMORY_BYTES", limit)
        written.clear()
        store = convert_libsvm(path, tmp_path / f"s{limit}", format=fmt, shuffle=shuffle, seed=3,
                               shard_rows=400)
        records.append((store.metadata["shards"], store.metadata["classes"]))
        on_disk.append(sum(written))
    assert len(records[0][0]) == 4
    assert records[0] == records[1]
    assert on_disk[0] == 0 and on_disk[1] > 150_000  # all in memory; all on disk


@pytest.mark.parametrize("shuffle", [False, True])
def test_staging_estimate_that_falls_short_spills_the_rest(tmp_path, monkeypatch, shuffle):
    """Rows of few values in long text first (~0.4 staged bytes a byte of text), then rows of
    many short ones (~1.7): the first block predicts an input that fits the allowance, the
    allowance runs out, and the rows beyond it go to the staging files -- the same store."""
    lines = [f"{1 + i % 3} " + " ".join(f"{40000 + j}:0.{i:06d}{j:06d}" for j in range(10)) + "\n"
             for i in range(300)]
    lines += [f"{1 + i % 3} " + " ".join(f"{j}:{(i * j) % 7 + 1}" for j in range(1, 61)) + "\n"
              for i in range(600)]
    path = tmp_path / "skewed.txt"
    path.write_text("".join(lines))
    written = _staged_to_disk(monkeypatch)
    records, on_disk = [], []
    for limit in (150_000, 0):
        monkeypatch.setattr(convert_module, "_STAGING_MEMORY_BYTES", limit)
        written.clear()
        store = convert_libsvm(path, tmp_path / f"s{limit}", format="parquet", shuffle=shuffle, seed=1,
                               shard_rows=200, block_bytes=4096)
        records.append(store.metadata["shards"])
        on_disk.append(sum(written))
    assert records[0] == records[1]
    total = on_disk[1]  # all of it, with nothing held
    assert total > 250_000 and 0 < on_disk[0] < total - 100_000  # some held, the rest spilled


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
    assert "--nnz-per-row must be <= features" in capsys.readouterr().err  # (the option typed)


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
