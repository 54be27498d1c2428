"""Content checksums of shard stores (issue 15): damage is refused, never read.

Every case damages a store the way a disk, a copy or a careless edit would and
expects :class:`~streamwww.errors.ChecksumError` naming the file, the array, the
chunk and the fix -- from ``read_shard``, from ``open_store`` (tampered
metadata) and from ``streamwww.train`` (whose shard reads run on a Dask worker).
Version-1 stores (tests/io/data, written before checksums) still open, train
and resume, with their old fingerprint.
"""

from __future__ import annotations

import json
import logging
import pickle
import shutil
import struct
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp
import zarr

import streamwww
from streamwww.errors import CheckpointError, ChecksumError, ShardFormatError
from streamwww.io import _chunks, _zarr, open_store, write_store
from streamwww.io import store as store_mod
from streamwww.io._format import METADATA_HASH_KEY, fingerprint, metadata_hash

DATA = Path(__file__).parent / "data"
V1_FINGERPRINT = "b648fc430bace2013f25c8f298d66bc88611bb687fe7bb78f823e761dee1a366"
FIX = "convert it again from its source"
# shrinking=False: the expected models (tests/io/data) were recorded before shrinking existed
TRAIN = dict(C=1.0, tol=1e-12, random_state=0, device="cpu", shrinking=False)


def _data(n=120, d=9, layout="sparse", seed=0):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.5 if layout == "sparse" else 0.9, format="csr", random_state=rng,
                  dtype=np.float64)
    X.data = np.round(X.data * 4 - 2, 2) + 0.01
    y = rng.integers(0, 3, n)
    y[:3] = [0, 1, 2]
    return (X if layout == "sparse" else X.toarray()), y


@pytest.fixture
def small_chunks(monkeypatch):
    """Zarr arrays of a few chunks each (instead of 4 Mi elements per chunk)."""
    monkeypatch.setattr(_zarr, "_CHUNK_ELEMENTS", 16)


def _store(path, fmt="zarr", layout="sparse", shard_rows=40, **kw):
    X, y = _data(layout=layout, **kw)
    return write_store(path, X, y, shard_rows=shard_rows, format=fmt, layout=layout)


def _rewrite_metadata(path: Path, edit) -> None:
    """Edit streamwww.json as a forger would: fingerprint and metadata checksum recomputed."""
    marker = path / "streamwww.json"
    meta = json.loads(marker.read_text())
    edit(meta)
    meta["fingerprint"] = fingerprint(meta)
    meta[METADATA_HASH_KEY] = metadata_hash(meta)
    marker.write_text(json.dumps(meta))


def _expect(match_chunk: str, fn, *args):
    with pytest.raises(ChecksumError, match=FIX) as info:
        fn(*args)
    msg = str(info.value)
    assert "\n" not in msg and match_chunk in msg, msg
    return info.value


# --------------------------------------------------------------------------- Zarr


@pytest.mark.parametrize("layout, array", [("sparse", "data"), ("sparse", "indices"),
                                           ("sparse", "indptr"), ("sparse", "y"), ("dense", "X")])
def test_zarr_chunk_rewritten_with_other_valid_data(tmp_path, small_chunks, layout, array):
    """A chunk replaced by validly compressed (and validly checksummed) other data: only
    the crc32c recorded in streamwww.json tells, and it does."""
    store = _store(tmp_path / "s", layout=layout)
    arr = zarr.open_array(str(store.path / "shard-00001" / array), mode="r+")
    assert len(store.metadata["shards"][1]["crc32c"][array]) > 1  # several chunks
    sel = (slice(0, arr.chunks[0]),) + (slice(None),) * (arr.ndim - 1)
    old = arr[sel]
    arr[sel] = old[::-1] if array != "X" else old + 1  # other values, same chunk grid
    assert not np.array_equal(arr[sel], old)  # zarr itself reads the forgery happily
    err = _expect("chunk 0", store.read_shard, 1)
    assert err.path.endswith(f"shard-00001/{array}/c/0" + ("/0" if array == "X" else ""))
    assert err.array == array and "the metadata records" in err.reason
    assert "shard 1 (shard-00001)" in str(err)
    store.read_shard(0), store.read_shard(2)  # the others still read


@pytest.mark.parametrize("where", ["payload", "trailer"])
def test_zarr_flipped_byte(tmp_path, small_chunks, where):
    store = _store(tmp_path / "s")
    chunk = store.path / "shard-00002" / "data" / "c" / "1"
    raw = bytearray(chunk.read_bytes())
    raw[len(raw) // 2 if where == "payload" else -1] ^= 0x10
    chunk.write_bytes(raw)
    err = _expect("chunk 1", store.read_shard, 2)
    assert err.array == "data" and "crc32c mismatch" in err.reason


def test_zarr_chunk_recompressed_with_fixed_trailer(tmp_path, small_chunks):
    """Other bytes that decompress fine, with a correct crc32c trailer appended."""
    from numcodecs import blosc

    store = _store(tmp_path / "s")
    chunk = store.path / "shard-00000" / "indices" / "c" / "0"
    arr = zarr.open_array(str(store.path / "shard-00000" / "indices"), mode="r")
    values = np.zeros(arr.chunks[0], dtype=np.int32)
    payload = blosc.compress(values.tobytes(), b"lz4", 5, blosc.SHUFFLE, 4)
    chunk.write_bytes(payload + struct.pack("<I", _chunks.crc32c(payload)))
    err = _expect("chunk 0", store.read_shard, 0)
    assert "the metadata records" in err.reason


@pytest.mark.parametrize("layout, array", [("sparse", "indices"), ("dense", "X"), ("sparse", "y")])
def test_zarr_missing_chunk_is_damage_not_zeros(tmp_path, small_chunks, layout, array):
    store = _store(tmp_path / "s", layout=layout)
    chunks = sorted((store.path / "shard-00001" / array / "c").rglob("*"))
    victim = [c for c in chunks if c.is_file()][-1]
    victim.unlink()
    err = _expect("missing", store.read_shard, 1)
    assert err.path == str(victim) and err.array == array


def test_zarr_all_zero_chunks_are_written(tmp_path, small_chunks):
    """Chunks equal to the fill value are stored too (write_empty_chunks), so that
    a missing chunk file can only mean damage."""
    X = np.zeros((200, 3))
    X[:, 0] = 1.0
    store = write_store(tmp_path / "s", X, np.zeros(200, int) + np.arange(200) % 2 * 0,
                        classes=[0, 1], shard_rows=200, layout="dense")
    n = len(store.metadata["shards"][0]["crc32c"]["y"])
    assert n > 1 and len(list((store.path / "shard-00000" / "y" / "c").iterdir())) == n
    assert np.array_equal(store.read_shard(0)[0], X)


def test_zarr_array_rewritten_without_checksums(tmp_path):
    store = _store(tmp_path / "s")
    g = zarr.open_group(str(store.path / "shard-00000"), mode="r+")
    y = g["y"][:]
    del g["y"]
    g.create_array("y", data=y, chunks=(len(y),))  # same values, zarr's default codecs
    err = _expect("chunk metadata", store.read_shard, 0)  # its zarr.json tells first (version 4)
    assert "zarr.json hashes to" in err.reason
    doc = (store.path / "shard-00000" / "y" / "zarr.json").read_bytes()
    _rewrite_metadata(store.path, lambda m: m["shards"][0]["zarr_json_crc32c"].__setitem__(
        "y", _chunks.crc32c(doc)))  # that forged too: the codecs still tell
    err = _expect("chunk *", open_store(store.path).read_shard, 0)
    assert "codecs carry none" in err.reason


# --------------------------------------------------------------------------- Parquet


def test_parquet_file_rewritten_with_other_valid_data(tmp_path):
    store = _store(tmp_path / "s", fmt="parquet")
    path = store.path / "shard-00001.parquet"
    t = pq.read_table(path)
    t = t.set_column(0, "y", pa.array(np.zeros(t.num_rows, np.int32)))
    pq.write_table(t, path, write_page_checksum=True)
    err = _expect("chunk file", store.read_shard, 1)
    assert err.path == str(path) and "the metadata records" in err.reason
    assert "shard 1 (shard-00001.parquet)" in str(err)


def test_parquet_edited_page(tmp_path):
    store = _store(tmp_path / "s", fmt="parquet")
    path = store.path / "shard-00000.parquet"
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 3] ^= 0x01  # inside the column chunks
    path.write_bytes(raw)
    _expect("crc32c mismatch", store.read_shard, 0)


def test_parquet_page_checksums_are_written_and_verified(tmp_path):
    """With the whole-file crc32c forged to match, Parquet's own page CRCs still refuse."""
    store = _store(tmp_path / "s", fmt="parquet", n=400)
    path = store.path / "shard-00000.parquet"
    meta = pq.ParquetFile(path).metadata.row_group(0).column(0)
    start = meta.data_page_offset
    raw = bytearray(path.read_bytes())
    raw[start + meta.total_compressed_size - 3] ^= 0x01  # last bytes of y's data page
    path.write_bytes(raw)
    _rewrite_metadata(store.path, lambda m: m["shards"][0].__setitem__(
        "crc32c", {"file": [_chunks.crc32c(bytes(raw))]}))
    with pytest.raises(ShardFormatError, match=r"shard 0 .*(?i:crc|checksum)"):
        open_store(store.path).read_shard(0)


def test_parquet_missing_file(tmp_path):
    store = _store(tmp_path / "s", fmt="parquet")
    (store.path / "shard-00002.parquet").unlink()
    _expect("shard file is missing", store.read_shard, 2)


# --------------------------------------------------------------------------- metadata


@pytest.mark.parametrize("fmt", ["zarr", "parquet"])
def test_tampered_metadata_checksums(tmp_path, fmt):
    store = _store(tmp_path / "s", fmt=fmt)
    marker = store.path / "streamwww.json"
    meta = json.loads(marker.read_text())
    sums = meta["shards"][1]["crc32c"]
    name = sorted(sums)[0]
    sums[name][0] ^= 1
    marker.write_text(json.dumps(meta))
    with pytest.raises(ShardFormatError, match="fingerprint does not match"):
        open_store(store.path)  # edited without the fingerprint
    meta["fingerprint"] = fingerprint(meta)
    marker.write_text(json.dumps(meta))
    with pytest.raises(ShardFormatError, match="does not match its checksum.*edited or damaged"):
        open_store(store.path)  # edited without the metadata checksum (format version 4)
    meta[METADATA_HASH_KEY] = metadata_hash(meta)
    marker.write_text(json.dumps(meta))
    forged = open_store(store.path)  # opens, with another fingerprint ...
    assert forged.fingerprint != store.fingerprint
    _expect("the metadata records", forged.read_shard, 1)  # ... and the shard is refused
    del meta["shards"][1]["crc32c"]
    meta["fingerprint"] = "0" * 64
    marker.write_text(json.dumps(meta))
    with pytest.raises(ShardFormatError, match="shard 1: field 'crc32c' is missing"):
        open_store(store.path)


def test_fingerprint_covers_checksums():
    meta = json.loads((DATA / "v1-zarr" / "streamwww.json").read_text())
    assert fingerprint(meta) == V1_FINGERPRINT
    v2 = {**meta, "format_version": 2,
          "shards": [{**s, "crc32c": {"y": [7]}} for s in meta["shards"]]}
    other = {**v2, "shards": [{**s, "crc32c": {"y": [8]}} for s in meta["shards"]]}
    assert len({fingerprint(v2), fingerprint(other), V1_FINGERPRINT}) == 3


def test_checksum_error_is_picklable():
    """Dask hands a worker's exception back pickled: the same one-line error."""
    err = ChecksumError("/s/shard-00001/data/c/0", "data", "0", "crc32c mismatch", "fix it",
                        where="/s: shard 1")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is ChecksumError and str(back) == str(err) and back.chunk == "0"
    assert isinstance(back, ShardFormatError) and isinstance(back, ValueError)


# --------------------------------------------------------------------------- training


def test_train_on_damaged_store_raises_the_clean_error(tmp_path, small_chunks):
    store = _store(tmp_path / "s", n=200)
    chunk = store.path / "shard-00003" / "data" / "c" / "0"
    raw = bytearray(chunk.read_bytes())
    raw[20] ^= 0xFF
    chunk.write_bytes(raw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ChecksumError, match=r"shard 3 \(shard-00003\): .*data/c/0: crc32c "
                                                r"mismatch.*array 'data', chunk 0\); the store is damaged"):
            streamwww.train(store.path, max_iter=2, **TRAIN)


def test_resume_refuses_an_edited_shard(tmp_path, small_chunks):
    store = _store(tmp_path / "s", n=200)
    ck = tmp_path / "ck"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        streamwww.train(store.path, max_iter=1, checkpoint_dir=ck, **TRAIN)
        arr = zarr.open_array(str(store.path / "shard-00002" / "data"), mode="r+")
        arr[:4] = arr[:4] * 2  # an edit in place: valid chunk, metadata untouched
        with pytest.raises(ChecksumError, match=r"shard 2 \(shard-00002\).*array 'data', chunk 0"):
            streamwww.resume(ck, max_iter=2)
        # the same edit with the metadata's checksums updated: another fingerprint
        new = _chunks.chunk_checksums(arr, store.path / "shard-00002" / "data")
        _rewrite_metadata(store.path, lambda m: m["shards"][2]["crc32c"].__setitem__("data", new))
        with pytest.raises(CheckpointError, match="fingerprint"):
            streamwww.resume(ck, max_iter=2)


# --------------------------------------------------------------------------- version 1


def _v1_arrays():
    a = np.load(DATA / "v1-arrays.npz")
    X = sp.csr_matrix((a["data"], a["indices"], a["indptr"]), shape=(60, 7)).astype(np.float32)
    return X, a["y"]


@pytest.mark.parametrize("fmt", ["zarr", "parquet"])
def test_v1_store_opens_reads_and_warns_once(fmt, monkeypatch, caplog):
    monkeypatch.setattr(store_mod, "_WARNED", set())
    with caplog.at_level(logging.WARNING, logger="streamwww.io.store"):
        s = open_store(DATA / f"v1-{fmt}")
        open_store(DATA / f"v1-{fmt}")
    warned = [r for r in caplog.records if "carries no content checksums" in r.getMessage()]
    assert len(warned) == 1 and "convert it again" in warned[0].getMessage()
    assert s.format_version == 1 and not s.verified and s.fingerprint == V1_FINGERPRINT
    X, y = _v1_arrays()
    Xs, ys = s.read_shards(range(s.n_shards))
    assert (Xs != X).nnz == 0 and np.array_equal(s.classes[ys], y)


def test_v1_store_trains_the_same_model_and_its_checkpoint_resumes(tmp_path, monkeypatch):
    """The model recorded with the version-1 code: a new run with that code's row order
    (version 1; new runs take version 2, engine.order) and the run's old checkpoint,
    which resumes with the row order it recorded (none: version 1)."""
    expected = np.load(DATA / "v1-expected.npz")
    ck = tmp_path / "ck"
    shutil.copytree(DATA / "v1-zarr-ckpt", ck)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = streamwww.resume(ck, store=DATA / "v1-zarr", max_iter=3)
        monkeypatch.setattr("streamwww.engine.run.ROW_ORDER", 1)
        m = streamwww.train(DATA / "v1-zarr", max_iter=3, **TRAIN)
    for model in (m, r):
        assert np.array_equal(model.coef_, expected["coef"])
        assert np.array_equal(model.intercept_, expected["intercept"])


def test_v2_store_trains_the_same_model_as_v1(tmp_path, monkeypatch):
    """Checksums change no model: the same rows as a store of this version (content and
    metadata checksums) train bitwise alike (with the row order the expected model was
    recorded with, version 1)."""
    monkeypatch.setattr("streamwww.engine.run.ROW_ORDER", 1)
    X, y = _v1_arrays()
    s = write_store(tmp_path / "s", X, y, shard_rows=25)
    assert s.format_version == 4 and s.verified and s.fingerprint != V1_FINGERPRINT
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = streamwww.train(s, max_iter=3, **TRAIN)
    assert np.array_equal(m.coef_, np.load(DATA / "v1-expected.npz")["coef"])


# --------------------------------------------------------------------------- the _chunks API


@pytest.mark.parametrize("chunks", [(3, 50, 4), (2, 25, 4)])  # in place / through Zarr
def test_checksummed_array_api(tmp_path, rng, chunks):
    data = rng.normal(size=(7, 50, 4))
    data[3:6] = 0.0  # chunks equal to the fill value are written too
    g = zarr.open_group(str(tmp_path / "g"), mode="w", zarr_format=3)
    arr = _chunks.create_checksummed_array(g, "b", data=data, chunks=chunks)
    where = tmp_path / "g" / "b"
    sums = _chunks.chunk_checksums(arr, where)
    assert len(sums) == len(_chunks._grid(arr)) and _chunks.has_checksums(arr)
    out = _chunks.read_into(arr, where, np.empty_like(data), missing="error", checksums=sums)
    assert np.array_equal(out, data)
    assert _chunks.read_whole_chunks(arr, where, np.empty_like(data)) == (chunks[1:] == (50, 4))

    victim = where / "c" / "1" / "0" / "0"
    victim.unlink()
    assert np.array_equal(_chunks.read_into(arr, where, np.empty_like(data))[chunks[0]:2 * chunks[0], :chunks[1]],
                          np.zeros((chunks[0], chunks[1], 4)))  # missing="fill": Zarr's rule
    with pytest.raises(ChecksumError, match=r"chunk file is missing \(.*\(array 'b', chunk 1.0.0\); redo"):
        _chunks.read_into(arr, where, np.empty_like(data), missing="error", checksums=sums, fix="redo")
    arr[chunks[0]:2 * chunks[0]] = data[chunks[0]:2 * chunks[0]] + 1  # rewritten, valid trailers
    with pytest.raises(ChecksumError, match="the metadata records"):
        _chunks.read_into(arr, where, np.empty_like(data), checksums=sums)
    with pytest.raises(ChecksumError, match="chunk checksums are recorded"):
        _chunks.read_into(arr, where, np.empty_like(data), checksums=sums[:-1])
    with pytest.raises(ValueError, match="'missing' parameter"):
        _chunks.read_into(arr, where, np.empty_like(data), missing="zeros")


# --------------------------------------------------------------------------- CLI


def test_cli_info_verify(tmp_path, capsys, small_chunks):
    from streamwww.cli import main

    store = _store(tmp_path / "s", fmt="zarr")
    assert main(["info", str(store.path), "--verify"]) == 0
    out = capsys.readouterr().out
    assert "crc32c of every stored chunk" in out and "verified     3 shard(s), checksums" in out
    (store.path / "shard-00002" / "y" / "c" / "1").unlink()
    assert main(["info", str(store.path), "--verify"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("streamwww info: error: ")
    assert "shard 2 (shard-00002)" in err[0] and "y/c/1: chunk file is missing" in err[0]
    assert main(["info", str(DATA / "v1-parquet"), "--verify"]) == 0
    out = capsys.readouterr().out
    assert "none (format version 1): convert again" in out and "metadata only" in out
