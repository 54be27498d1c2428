"""Per-row sample weights in shard stores (issue 17, item 3; docs/FORMAT.md, Sample weights).

A store may hold a float64 ``weight`` per row (a Zarr array / a Parquet column
per shard), written by ``write_store(..., sample_weight=)`` or ``streamwww
convert --weights FILE``, checksummed like every other array and covered by the
fingerprint. A store without weights is written as before weights existed
(the same fingerprint formula; format version 4 for both, which adds metadata
checksums).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp
import zarr

from streamwww.cli import main
from streamwww.errors import ChecksumError, DataFormatError, ShardFormatError
from streamwww.io import (
    _chunks,
    _weights,
    _zarr,
    convert_libsvm,
    make_data,
    open_store,
    write_store,
)
from streamwww.io._backend import get_backend
from streamwww.io._format import fingerprint
from streamwww.io._transaction import StoreTransaction
from streamwww.io.writer import ShardWriter, build_metadata
from tests.io.conftest import leftovers

FORMATS = ["zarr", "parquet"]
LAYOUTS = ["sparse", "dense"]


def _data(n=150, d=7, seed=0):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.6, format="csr", random_state=rng, dtype=np.float64)
    X.data = np.round(X.data * 4 - 2, 2) + 0.01
    y = rng.integers(0, 3, n)
    w = np.round(rng.random(n) * 3, 3)
    w[::7] = 0.0  # zero weights are allowed
    return X, y, w


@pytest.fixture
def small_chunks(monkeypatch):
    """Zarr arrays of a few chunks each (instead of 4 Mi elements per chunk)."""
    monkeypatch.setattr(_zarr, "_CHUNK_ELEMENTS", 16)


def _v2_fingerprint(meta: dict) -> str:
    """The fingerprint function as it was before weights existed (commit 183c1c4),
    frozen here: a store without weights must keep exactly this fingerprint."""
    keys = ("format_version", "layout", "dtype", "n_rows", "n_features", "nnz", "classes",
            "label_type")
    payload = {k: meta[k] for k in keys}
    payload["shards"] = [[s["rows"], s["nnz"], s["sha256"], s["crc32c"]] for s in meta["shards"]]
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


# --------------------------------------------------------------------------- write_store


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_round_trip(tmp_path, fmt, layout, small_chunks):
    X, y, w = _data()
    store = write_store(tmp_path / "s", X, y, shard_rows=40, format=fmt, layout=layout,
                        sample_weight=w)
    plain = write_store(tmp_path / "p", X, y, shard_rows=40, format=fmt, layout=layout)
    assert store.has_weights and not plain.has_weights
    assert store.metadata["weights"] is True and store.format_version == 4
    ids = list(range(store.n_shards))
    got = store.read_weights(ids)
    assert got.dtype == np.float64 and np.array_equal(got, w)
    # any order, as read_shards stacks X and y
    order = [2, 0, 3]
    expect = np.concatenate([w[store.shard_offsets[i]:store.shard_offsets[i + 1]] for i in order])
    assert np.array_equal(store.read_weights(order), expect)
    Xw, yw, ww = store.read_shards(order, weights=True)
    Xp, yp = plain.read_shards(order)
    assert np.array_equal(ww, expect) and np.array_equal(yw, yp)
    assert (abs(Xw - Xp).sum() if sp.issparse(Xw) else abs(Xw - Xp).sum()) == 0
    # the weights do not change what read_shard returns, nor its content hash
    assert len(store.read_shards(order)) == 2
    assert [s["sha256"] for s in store.metadata["shards"]] == \
           [s["sha256"] for s in plain.metadata["shards"]]
    assert store.fingerprint != plain.fingerprint
    assert store.verify() == store.n_shards
    reopened = open_store(store.path)
    assert reopened.has_weights and reopened.fingerprint == store.fingerprint


@pytest.mark.parametrize("fmt", FORMATS)
def test_weights_are_where_format_md_says(tmp_path, fmt):
    """Read with zarr / pyarrow alone, as docs/FORMAT.md shows."""
    X, y, w = _data()
    store = write_store(tmp_path / "s", X, y, shard_rows=100, format=fmt, sample_weight=w)
    if fmt == "zarr":
        got = zarr.open_group(str(store.path / "shard-00001"), mode="r")["weight"][:]
        assert zarr.open_group(str(store.path / "shard-00001"), mode="r").attrs[
            "streamwww"]["format_version"] == 4
    else:
        got = pq.read_table(store.path / "shard-00001.parquet")["weight"].to_numpy()
    assert got.dtype == np.float64 and np.array_equal(got, w[100:])


@pytest.mark.parametrize("fmt", FORMATS)
def test_store_without_weights_is_unchanged(tmp_path, fmt):
    """No 'weights' key, no weight array or column, and the fingerprint of the
    pre-weights formula (format version 4 in it); read_weights gives ones."""
    X, y, _ = _data()
    store = write_store(tmp_path / "s", X, y, shard_rows=40, format=fmt, layout="sparse")
    meta = store.metadata
    assert "weights" not in meta and meta["format_version"] == 4
    assert all("weight_sha256" not in s for s in meta["shards"])
    assert store.fingerprint == _v2_fingerprint(meta) == fingerprint(meta)
    if fmt == "zarr":
        assert set(meta["shards"][0]["crc32c"]) == {"indptr", "indices", "data", "y"}
        assert not (store.path / "shard-00000" / "weight").exists()
    else:
        assert "weight" not in pq.read_schema(store.path / "shard-00000.parquet").names
    assert not store.has_weights
    assert np.array_equal(store.read_weights([1, 0]), np.ones(80))
    assert np.array_equal(store.read_shards([1], weights=True)[2], np.ones(40))


def test_weighted_fingerprint_covers_the_weights(tmp_path):
    X, y, w = _data()
    a = write_store(tmp_path / "a", X, y, shard_rows=40, sample_weight=w)
    b = write_store(tmp_path / "b", X, y, shard_rows=40, sample_weight=w)
    w2 = w.copy()
    w2[-1] += 1.0
    c = write_store(tmp_path / "c", X, y, shard_rows=40, sample_weight=w2)
    ones = write_store(tmp_path / "d", X, y, shard_rows=40, sample_weight=np.ones(len(y)))
    plain = write_store(tmp_path / "e", X, y, shard_rows=40)
    assert a.fingerprint == b.fingerprint
    assert len({a.fingerprint, c.fingerprint, ones.fingerprint, plain.fingerprint}) == 4
    assert [s["weight_sha256"] for s in a.metadata["shards"][:-1]] == \
           [s["weight_sha256"] for s in c.metadata["shards"][:-1]]
    assert a.metadata["shards"][-1]["weight_sha256"] != c.metadata["shards"][-1]["weight_sha256"]


@pytest.mark.parametrize("bad, match", [
    (lambda w: np.where(np.arange(len(w)) == 5, -1.0, w), r"sample_weight\[5\] is -1.0"),
    (lambda w: np.where(np.arange(len(w)) == 9, np.nan, w), r"sample_weight\[9\] is nan"),
    (lambda w: np.where(np.arange(len(w)) == 0, np.inf, w), r"sample_weight\[0\] is inf"),
    (lambda w: w[:-1], r"shape \(149,\); expected \(150,\)"),
    (lambda w: np.zeros_like(w), "every sample_weight is zero"),
    (lambda w: ["a"] * len(w), "must be numbers"),
])
def test_write_store_refuses_bad_weights(tmp_path, bad, match):
    X, y, w = _data()
    with pytest.raises(DataFormatError, match=match) as info:
        write_store(tmp_path / "s", X, y, sample_weight=bad(w))
    assert "\n" not in str(info.value)
    assert not (tmp_path / "s").exists() and leftovers(tmp_path / "s") == []


def test_reader_refuses_bad_stored_weights(tmp_path):
    """Weights that slipped past the writer (checksummed as written) are refused on read."""
    X, y, w = _data()
    w[57] = -2.0
    backend = get_backend("zarr")
    with StoreTransaction(tmp_path / "s", False) as tx:
        backend.init_root(tx.tmp, 3)
        writer = ShardWriter(tx.tmp, backend, layout="sparse", n_features=X.shape[1],
                             dtype=np.dtype(np.float32), n_classes=3, shard_rows=50,
                             shard_bytes=None, weighted=True)
        writer.push(X, y.astype(np.int32), w)
        writer.finish()
        tx.commit(build_metadata(format="zarr", layout="sparse", n_features=X.shape[1],
                                 dtype=np.dtype(np.float32), classes=np.arange(3.0),
                                 writer=writer, provenance={}))
    store = open_store(tmp_path / "s")
    store.read_weights([0])
    with pytest.raises(ShardFormatError, match=r"shard 1 \(shard-00001\): the weight of its row 7 "
                                               r"\(row 57 of the store\) is -2.0"):
        store.read_weights([0, 1])
    with pytest.raises(ShardFormatError, match="row 57"):
        store.verify()


# --------------------------------------------------------------------------- integrity


def test_damaged_weight_chunk_names_the_chunk(tmp_path, small_chunks):
    X, y, w = _data()
    store = write_store(tmp_path / "s", X, y, shard_rows=50, sample_weight=w)
    assert len(store.metadata["shards"][1]["crc32c"]["weight"]) > 1  # several chunks
    chunk = store.path / "shard-00001" / "weight" / "c" / "2"
    raw = bytearray(chunk.read_bytes())
    raw[len(raw) // 2] ^= 0x10
    chunk.write_bytes(raw)
    for call in (lambda: store.read_weights([1]), lambda: store.read_shards([1], weights=True),
                 store.verify):
        with pytest.raises(ChecksumError) as info:
            call()
        err = info.value
        assert err.array == "weight" and err.chunk == "2" and err.path == str(chunk)
        msg = str(err)
        assert "\n" not in msg and "shard 1 (shard-00001)" in msg and "convert it again" in msg
    store.read_weights([0, 2])  # the others still read
    store.read_shard(1)  # X and y of the damaged shard are intact (weights not read)


def test_weight_chunk_rewritten_with_other_valid_data(tmp_path, small_chunks):
    """Valid bytes with a valid trailer: only the crc32c recorded in streamwww.json tells."""
    from numcodecs import blosc

    X, y, w = _data()
    store = write_store(tmp_path / "s", X, y, shard_rows=50, sample_weight=w)
    chunk = store.path / "shard-00000" / "weight" / "c" / "0"
    payload = blosc.compress(np.ones(16).tobytes(), b"lz4", 5, blosc.SHUFFLE, 8)
    chunk.write_bytes(payload + struct.pack("<I", _chunks.crc32c(payload)))
    with pytest.raises(ChecksumError, match="the metadata records") as info:
        store.read_weights([0])
    assert info.value.array == "weight" and info.value.chunk == "0"


def test_missing_weight_chunk_is_damage(tmp_path, small_chunks):
    X, y, w = _data()
    store = write_store(tmp_path / "s", X, y, shard_rows=50, sample_weight=w)
    victim = store.path / "shard-00002" / "weight" / "c" / "1"
    victim.unlink()
    with pytest.raises(ChecksumError, match="missing") as info:
        store.read_weights([2])
    assert info.value.path == str(victim)


def test_damaged_parquet_weight_column(tmp_path):
    X, y, w = _data()
    store = write_store(tmp_path / "s", X, y, shard_rows=50, format="parquet", sample_weight=w)
    path = store.path / "shard-00001.parquet"
    # the same file with other weights, written as streamwww writes it (valid page checksums)
    table = pq.read_table(path)
    table = table.set_column(table.schema.get_field_index("weight"), "weight",
                             pa.array(table["weight"].to_numpy() + 1.0))
    pq.write_table(table, path, compression="zstd", use_dictionary=False, write_statistics=False,
                   write_page_checksum=True)
    with pytest.raises(ChecksumError, match="crc32c mismatch") as info:
        store.read_weights([1])
    assert info.value.path == str(path) and "shard 1 (shard-00001.parquet)" in str(info.value)


@pytest.mark.parametrize("edit, match", [
    (lambda m: m.pop("weights"), "shard 0: field 'crc32c'"),  # (version 4: weights or not)
    (lambda m: m.update(format_version=2), "does not fit format version 2"),
    (lambda m: m.update(format_version=3, weights=False), "does not fit format version 3"),
    (lambda m: m.update(weights="yes"), "'weights' is not true or false"),
    (lambda m: m.update(weights=1), "'weights' is not true or false"),
    (lambda m: m["shards"][0].pop("weight_sha256"), "shard 0: field 'weight_sha256'"),
    (lambda m: m["shards"][0]["crc32c"].pop("weight"), "shard 0: field 'crc32c'"),
])
def test_metadata_of_weights_is_validated(tmp_path, edit, match):
    X, y, w = _data()
    store = write_store(tmp_path / "s", X, y, shard_rows=50, sample_weight=w)
    marker = store.path / "streamwww.json"
    meta = json.loads(marker.read_text())
    edit(meta)
    try:
        meta["fingerprint"] = fingerprint(meta)
    except KeyError:
        pass
    marker.write_text(json.dumps(meta))
    with pytest.raises(ShardFormatError, match=match):
        open_store(store.path)


def test_plain_store_claiming_weights_is_refused(tmp_path):
    X, y, _ = _data()
    store = write_store(tmp_path / "s", X, y, shard_rows=50)
    marker = store.path / "streamwww.json"
    meta = json.loads(marker.read_text())
    meta["weights"] = True
    marker.write_text(json.dumps(meta))
    with pytest.raises(ShardFormatError, match="shard 0: field 'weight_sha256' is missing"):
        open_store(store.path)


# --------------------------------------------------------------------------- convert


def _libsvm_with_ids(path: Path, n: int, seed: int = 0) -> np.ndarray:
    """LIBSVM rows whose feature 1 is the row's number (to follow rows through a
    shuffle), with comment and blank lines between; returns weights, one per row."""
    rng = np.random.default_rng(seed)
    lines = ["# a comment line is not a row", ""]
    for i in range(n):
        extra = " ".join(f"{j}:{rng.integers(1, 9)}" for j in sorted(rng.choice(range(2, 30), 3,
                                                                                 replace=False)))
        lines.append(f"{rng.integers(0, 4)} 1:{i + 1} {extra}")
        if i % 97 == 0:
            lines.append("   # another")
    path.write_text("\n".join(lines) + "\n")
    w = np.round(rng.random(n) * 5, 4)
    w[::11] = 0.0
    return w


def _write_weights(path: Path, w: np.ndarray, compress: bool = False) -> Path:
    text = "".join(f"{v!r}\n" for v in w.tolist()).encode()
    path.write_bytes(gzip.compress(text) if compress else text)
    return path


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_convert_round_trip(tmp_path, fmt, layout):
    src = tmp_path / "in.libsvm"
    w = _libsvm_with_ids(src, 3000)
    wfile = _write_weights(tmp_path / "w.txt", w, compress=(fmt == "parquet"))
    store = convert_libsvm(src, tmp_path / "s", weights=wfile, format=fmt, layout=layout,
                           shard_rows=700, block_bytes=8192)  # many blocks, several shards
    plain = convert_libsvm(src, tmp_path / "p", format=fmt, layout=layout, shard_rows=700,
                           block_bytes=8192)
    assert store.has_weights and store.format_version == 4 and not plain.has_weights
    ids = list(range(store.n_shards))
    X, y, got = store.read_shards(ids, weights=True)
    assert np.array_equal(got, w) and np.array_equal(store.read_weights(ids), w)
    Xp, yp = plain.read_shards(ids)
    assert np.array_equal(y, yp) and abs(sp.csr_matrix(X) - sp.csr_matrix(Xp)).sum() == 0
    prov = store.metadata["provenance"]["weights"]
    assert prov["path"] == str(wfile) and prov["lines"] == 3000 and prov["size"] == wfile.stat().st_size
    assert "weights" not in plain.metadata["provenance"] and "weights" not in plain.metadata
    assert store.verify() == store.n_shards


@pytest.mark.parametrize("fmt", FORMATS)
def test_shuffle_keeps_rows_and_weights_together(tmp_path, fmt, monkeypatch):
    from streamwww.io import convert

    monkeypatch.setattr(convert, "_MIN_BUCKET_BYTES", 2**12)
    monkeypatch.setattr(convert, "_MAX_BUCKET_BYTES", 2**13)  # many buckets, some split again
    src = tmp_path / "in.libsvm"
    w = _libsvm_with_ids(src, 4000, seed=1)
    wfile = _write_weights(tmp_path / "w.txt", w)
    store = convert_libsvm(src, tmp_path / "s", weights=wfile, format=fmt, shuffle=True, seed=5,
                           shard_rows=900, block_bytes=8192)
    X, _, got = store.read_shards(range(store.n_shards), weights=True)
    row_id = np.asarray(sp.csr_matrix(X)[:, 0].todense()).ravel().astype(int) - 1
    assert not np.array_equal(row_id, np.arange(4000))  # shuffled
    assert np.array_equal(np.sort(row_id), np.arange(4000))
    assert np.array_equal(got, w[row_id])  # each row kept its weight
    again = convert_libsvm(src, tmp_path / "t", weights=wfile, format=fmt, shuffle=True, seed=5,
                           shard_rows=900, block_bytes=8192)
    assert again.fingerprint == store.fingerprint  # deterministic


def _expect_weight_error(tmp_path, capsys, src, wfile, match):
    out = tmp_path / "s"
    with pytest.raises(DataFormatError, match=match) as info:
        convert_libsvm(src, out, weights=wfile, block_bytes=4096)
    assert "\n" not in str(info.value) and str(info.value).startswith(f"{wfile}:")
    assert not out.exists() and leftovers(out) == []
    # the CLI: one line, exit status 1, nothing left
    assert main(["convert", str(src), str(out), "--weights", str(wfile)]) == 1
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1 and f"{wfile}:" in err, err
    assert not out.exists() and leftovers(out) == []
    return str(info.value)


@pytest.mark.parametrize("line, value, match", [
    (500, "abc", r":500: 'abc' is not a number"),
    (1234, "-0.5", r":1234: weight '-0.5' is negative"),
    (7, "nan", r":7: weight 'nan' is not finite"),
    (1500, "inf", r":1500: weight 'inf' is not finite"),
    (3, "", r":3: the line is empty"),
    (42, "1 2", r":42: '1 2' is not a number"),
])
def test_bad_weight_line_names_file_and_line(tmp_path, capsys, line, value, match):
    src = tmp_path / "in.libsvm"
    w = _libsvm_with_ids(src, 2000)
    lines = [repr(v) for v in w.tolist()]
    lines[line - 1] = value
    wfile = tmp_path / "w.txt"
    wfile.write_text("\n".join(lines) + "\n")
    _expect_weight_error(tmp_path, capsys, src, wfile, match)


def test_too_few_weights(tmp_path, capsys):
    src = tmp_path / "in.libsvm"
    w = _libsvm_with_ids(src, 2000)
    wfile = _write_weights(tmp_path / "w.txt", w[:1999])
    msg = _expect_weight_error(tmp_path, capsys, src, wfile,
                               r":2000: the weight file ends after 1999 weight\(s\)")
    # the input line of the row without a weight: the last line of the input
    n_lines = len(src.read_text().splitlines())
    assert f"{src}:{n_lines} has none" in msg


def test_too_many_weights(tmp_path, capsys):
    src = tmp_path / "in.libsvm"
    w = _libsvm_with_ids(src, 2000)
    wfile = _write_weights(tmp_path / "w.txt", np.concatenate([w, [1.0]]))
    _expect_weight_error(tmp_path, capsys, src, wfile,
                         r":2001: the weight file has more lines than .* has data rows \(2000\)")


def test_all_zero_weights(tmp_path, capsys):
    src = tmp_path / "in.libsvm"
    _libsvm_with_ids(src, 300)
    wfile = _write_weights(tmp_path / "w.txt", np.zeros(300))
    with pytest.raises(DataFormatError, match="every weight is 0"):
        convert_libsvm(src, tmp_path / "s", weights=wfile)
    assert not (tmp_path / "s").exists()


def test_weights_refused_with_skip_bad_lines(tmp_path):
    src = tmp_path / "in.libsvm"
    w = _libsvm_with_ids(src, 10)
    wfile = _write_weights(tmp_path / "w.txt", w)
    with pytest.raises(ValueError, match="cannot be combined with 'skip_bad_lines'"):
        convert_libsvm(src, tmp_path / "s", weights=wfile, skip_bad_lines=True)
    with pytest.raises(FileNotFoundError, match="weight file"):
        convert_libsvm(src, tmp_path / "s", weights=tmp_path / "nope.txt")
    assert not (tmp_path / "s").exists() and leftovers(tmp_path / "s") == []


def test_cli_convert_weights_and_help(tmp_path, capsys):
    src = tmp_path / "in.libsvm"
    w = _libsvm_with_ids(src, 500)
    wfile = _write_weights(tmp_path / "w.txt", w)
    assert main(["convert", str(src), str(tmp_path / "s"), "--weights", str(wfile),
                 "--shuffle", "--seed", "1"]) == 0
    store = open_store(tmp_path / "s")
    X, _, got = store.read_shards(range(store.n_shards), weights=True)
    row_id = np.asarray(sp.csr_matrix(X)[:, 0].todense()).ravel().astype(int) - 1
    assert np.array_equal(got, w[row_id])
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["convert", "--help"])
    assert "--weights FILE" in capsys.readouterr().out


# --------------------------------------------------------------------------- memory


def test_weight_file_is_read_piece_by_piece(tmp_path, monkeypatch):
    """The converter asks for each block's weights as it parses it; the reader
    holds at most _PIECE_LINES lines at a time, never the whole file."""
    monkeypatch.setattr(_weights, "_PIECE_LINES", 100)
    wfile = _write_weights(tmp_path / "w.txt", np.arange(1000.0))
    seen = []
    real = _weights.WeightFile._read_lines

    def spy(self, n):
        seen.append(n)
        return real(self, n)

    monkeypatch.setattr(_weights.WeightFile, "_read_lines", spy)
    f = _weights.WeightFile(wfile, "input")
    assert np.array_equal(f.take(250), np.arange(250.0))
    assert seen == [100, 100, 50]
    assert np.array_equal(f.take(750), np.arange(250.0, 1000.0))
    assert max(seen) == 100
    f.finish()

    src = tmp_path / "in.libsvm"
    w = _libsvm_with_ids(src, 3000)
    wfile = _write_weights(tmp_path / "w2.txt", w)
    seen.clear()
    convert_libsvm(src, tmp_path / "s", weights=wfile, block_bytes=8192)
    assert max(seen) <= 100 and sum(seen) == 3000 + 1  # + the check for a line left over


_CHILD = textwrap.dedent("""
    import json, sys
    from streamwww.io import _staging, _zarr, convert, convert_libsvm
    _zarr._CHUNK_ELEMENTS = 2**18
    convert._MIN_BUCKET_BYTES, convert._MAX_BUCKET_BYTES = 2**20, 2**21
    convert._STAGING_MEMORY_BYTES = 2**21
    _staging._PIECE_BYTES = 2**19
    path, weights, out, shuffle = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
    convert_libsvm(path, out, shuffle=shuffle, seed=0, block_bytes=4 * 2**20, weights=weights)
    hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0]
    print(json.dumps({"peak_mib": int(hwm.split()[1]) / 1024}))
""")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc (Linux)")
@pytest.mark.parametrize("shuffle", [False, True])
def test_peak_memory_with_weights_does_not_grow_with_the_input(tmp_path, shuffle):
    """As tests/io/test_convert_faults.py's memory test, with a weight file: the
    peak RSS of a fresh process converting 10x the rows (and weights) stays
    within 1.2x."""
    peaks = []
    for rows in (15_000, 150_000):
        path = tmp_path / f"in-{rows}.libsvm"
        make_data(path, rows=rows, features=50_000, nnz_per_row=40, classes=20, seed=0)
        wfile = _write_weights(tmp_path / f"w-{rows}.txt",
                               np.random.default_rng(rows).random(rows))
        result = subprocess.run([sys.executable, "-c", _CHILD, str(path), str(wfile),
                                 str(tmp_path / f"store-{rows}"), str(int(shuffle))],
                                capture_output=True, text=True, check=True)
        peaks.append(json.loads(result.stdout.strip().splitlines()[-1])["peak_mib"])
        store = open_store(tmp_path / f"store-{rows}")
        assert store.has_weights and store.n_rows == rows
        path.unlink()
    assert peaks[1] <= 1.2 * peaks[0], peaks


def test_shard_nbytes_counts_the_weights(tmp_path):
    X, y, w = _data()
    weighted = write_store(tmp_path / "w", X, y, shard_rows=50, sample_weight=w)
    plain = write_store(tmp_path / "p", X, y, shard_rows=50)
    for i in range(plain.n_shards):
        Xs, ys, ws = weighted.read_shards((i,), weights=True)
        assert weighted.shard_nbytes(i) == plain.shard_nbytes(i) + ws.nbytes
