"""Metadata checksums of shard stores (format version 4, issue 56).

Every byte of metadata that decides what is read or how rows are weighted is
covered: ``streamwww.json`` by its ``metadata_sha256`` (checked on open) and
each Zarr array's ``zarr.json`` by the crc32c its shard record holds (checked
before Zarr parses it, so by every first read and by ``info --verify``). An
edit of either is refused in one line naming the file; stores of versions 1 to
3 still open with their fingerprints and say once that their metadata is not
covered.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import streamwww
from streamwww.cli import main
from streamwww.errors import ChecksumError, ShardFormatError
from streamwww.io import open_store, write_store
from streamwww.io import store as store_mod
from streamwww.io._format import (
    DOCUMENT_CHECKSUM_KEY,
    FORMAT_VERSION,
    METADATA_HASH_KEY,
    fingerprint,
    metadata_hash,
)

DATA = Path(__file__).parent / "data"
V1_FINGERPRINT = "b648fc430bace2013f25c8f298d66bc88611bb687fe7bb78f823e761dee1a366"
EDITED = r"streamwww\.json: the metadata does not match its checksum \(metadata_sha256\): the file " \
         r"was edited or damaged; the store is damaged: convert it again"


def _data(n=120, d=9, layout="sparse", seed=0):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.5 if layout == "sparse" else 0.9, format="csr", random_state=rng,
                  dtype=np.float64)
    X.data = np.round(X.data * 4 - 2, 2) + 0.01
    y = rng.integers(0, 3, n)
    y[:3] = [0, 1, 2]
    return (X if layout == "sparse" else X.toarray()), y


def _store(path, fmt="zarr", layout="sparse", weights=False):
    X, y = _data(layout=layout)
    # (powers of two: their bytes swapped read as tiny positive numbers, valid weights)
    w = np.resize([0.5, 1.0, 2.0], len(y)) if weights else None
    return write_store(path, X, y, shard_rows=40, format=fmt, layout=layout, sample_weight=w)


def _edit_json(path: Path, edit) -> None:
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc, indent=1))


def _cli_verify_error(path, capsys) -> str:
    capsys.readouterr()
    assert main(["info", str(path), "--verify"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("streamwww info: error: "), err
    return err[0]


# --------------------------------------------------------------------------- streamwww.json


@pytest.mark.parametrize("fmt", ["zarr", "parquet"])
def test_edited_class_counts_are_refused_on_open_and_by_info_verify(tmp_path, capsys, fmt):
    """class_counts decide the weights of --class-weight balanced, and sit outside the
    fingerprint: an edit opened, verified and trained another model."""
    store = _store(tmp_path / "s", fmt=fmt)
    marker = store.path / "streamwww.json"
    _edit_json(marker, lambda m: m.__setitem__("class_counts", m["class_counts"][::-1]))
    with pytest.raises(ShardFormatError, match=EDITED) as info:
        open_store(store.path)
    assert str(info.value).startswith(f"{marker}: ") and "\n" not in str(info.value)
    with pytest.raises(ShardFormatError, match=EDITED):
        streamwww.train(store.path, class_weight="balanced", max_iter=1, device="cpu")
    assert str(marker) in _cli_verify_error(store.path, capsys)


@pytest.mark.parametrize("edit", [
    pytest.param(lambda m: m["shards"][1].__setitem__("offset", m["shards"][1]["offset"] + 1),
                 id="shard-offset"),
    pytest.param(lambda m: m.__setitem__("n_classes", m["n_classes"] + 1), id="n_classes"),
    pytest.param(lambda m: m["shards"][0].__setitem__("classes_present", 1), id="classes_present"),
    pytest.param(lambda m: m["provenance"]["options"].__setitem__("shard_rows", 41),
                 id="provenance"),
])
def test_other_fields_outside_the_fingerprint_are_refused(tmp_path, edit):
    store = _store(tmp_path / "s")
    _edit_json(store.path / "streamwww.json", edit)
    with pytest.raises(ShardFormatError, match=EDITED):
        open_store(store.path)


def test_an_edit_that_recomputes_the_fingerprint_is_refused(tmp_path):
    """A shard's rows moved to another (the sums still add up), the fingerprint recomputed:
    what the fingerprint alone let through."""
    store = _store(tmp_path / "s")

    def move_a_row(m):
        m["shards"][0]["rows"] -= 1
        m["shards"][1]["rows"] += 1
        m["fingerprint"] = fingerprint(m)

    _edit_json(store.path / "streamwww.json", move_a_row)
    with pytest.raises(ShardFormatError, match=EDITED):
        open_store(store.path)


def test_reformatted_metadata_still_opens_and_created_is_not_covered(tmp_path):
    """The checksum covers the content, not the layout of the JSON text; nor the time of
    the conversion, so that the same data converted twice has the same checksum."""
    store = _store(tmp_path / "s")
    marker = store.path / "streamwww.json"
    meta = json.loads(marker.read_text())
    meta["created"] = "2000-01-01T00:00:00+00:00"
    marker.write_text(json.dumps(dict(reversed(list(meta.items()))), indent=4))
    assert open_store(store.path).fingerprint == store.fingerprint
    again = _store(tmp_path / "t")
    assert again.fingerprint == store.fingerprint
    assert again.metadata[METADATA_HASH_KEY] == store.metadata[METADATA_HASH_KEY] == metadata_hash(meta)


def test_missing_metadata_checksums_are_refused(tmp_path):
    store = _store(tmp_path / "s")
    marker = store.path / "streamwww.json"
    _edit_json(marker, lambda m: m.pop(METADATA_HASH_KEY))
    with pytest.raises(ShardFormatError, match="field 'metadata_sha256' is missing"):
        open_store(store.path)
    store = _store(tmp_path / "t")
    _edit_json(store.path / "streamwww.json", lambda m: m["shards"][2].pop(DOCUMENT_CHECKSUM_KEY))
    with pytest.raises(ShardFormatError, match="shard 2: field 'zarr_json_crc32c' is not"):
        open_store(store.path)


# --------------------------------------------------------------------------- zarr.json


def _expect_refused(store, shard: int, array: str, capsys):
    doc = store.path / f"shard-{shard:05d}" / array / "zarr.json"
    again = open_store(store.path)  # (a store opened before the edit keeps its handles)
    with pytest.raises(ChecksumError, match="zarr.json hashes to .* the metadata records .* edited or "
                                            "damaged") as info:
        again.read_shards([shard], weights=True)
    err = info.value
    assert err.path == str(doc) and err.array == array and "\n" not in str(err)
    assert f"shard {shard} (shard-{shard:05d})" in str(err)
    with pytest.raises(ChecksumError, match="zarr.json"):
        open_store(store.path).verify()
    line = _cli_verify_error(store.path, capsys)
    assert str(doc) in line and "edited or damaged" in line
    # the other shards still read
    open_store(store.path).read_shards([i for i in range(store.n_shards) if i != shard])


def _byte_order(doc):
    doc["codecs"][0]["configuration"]["endian"] = "big"


def test_byte_order_of_data_in_zarr_json_is_refused(tmp_path, capsys):
    """Values read as 4.6e-41 (1.0 with its bytes swapped), checked chunks and all."""
    store = _store(tmp_path / "s")
    _edit_json(store.path / "shard-00001" / "data" / "zarr.json", _byte_order)
    _expect_refused(store, 1, "data", capsys)


def test_byte_order_of_the_weights_in_zarr_json_is_refused(tmp_path, capsys):
    """Weights of 1e-320 or so: finite and >= 0, so no check of the values tells."""
    store = _store(tmp_path / "s", weights=True)
    _edit_json(store.path / "shard-00002" / "weight" / "zarr.json", _byte_order)
    _expect_refused(store, 2, "weight", capsys)


def test_a_transpose_codec_added_to_dense_x_is_refused(tmp_path, capsys):
    """The same chunks, crc32c and all, decoded as another arrangement of the values."""
    store = _store(tmp_path / "s", layout="dense")
    _edit_json(store.path / "shard-00000" / "X" / "zarr.json", lambda d: d["codecs"].insert(
        0, {"name": "transpose", "configuration": {"order": [1, 0]}}))
    _expect_refused(store, 0, "X", capsys)


def test_missing_zarr_json_is_damage(tmp_path):
    store = _store(tmp_path / "s")
    (store.path / "shard-00001" / "y" / "zarr.json").unlink()
    with pytest.raises(ChecksumError, match="zarr.json is missing"):
        open_store(store.path).read_shard(1)


def test_parquet_records_no_documents(tmp_path):
    """The whole-file crc32c of a Parquet shard covers its schema and footer."""
    store = _store(tmp_path / "s", fmt="parquet")
    assert store.format_version == FORMAT_VERSION and store.metadata_verified
    assert all(DOCUMENT_CHECKSUM_KEY not in s for s in store.metadata["shards"])
    assert store.verify() == store.n_shards


def test_store_on_an_object_store(tmp_path):
    """Recorded and checked through the object store's reads (memory://)."""
    import fsspec

    url = f"memory:///t-{np.random.default_rng().integers(2**62):x}/s"
    X, y = _data()
    store = write_store(url, X, y, shard_rows=40, layout="sparse")
    try:
        local = _store(tmp_path / "s")
        assert store.metadata["shards"][0][DOCUMENT_CHECKSUM_KEY] == \
               local.metadata["shards"][0][DOCUMENT_CHECKSUM_KEY]
        assert open_store(url).verify() == store.n_shards
        fs = fsspec.filesystem("memory")
        doc = url.removeprefix("memory://") + "/shard-00001/data/zarr.json"
        text = fs.cat_file(doc).decode().replace('"little"', '"big"')
        fs.pipe_file(doc, text.encode())
        with pytest.raises(ChecksumError, match="zarr.json hashes to"):
            open_store(url).read_shard(1)
    finally:
        fsspec.filesystem("memory").rm(url.removeprefix("memory://").rsplit("/", 1)[0], recursive=True)


# --------------------------------------------------------------------------- older versions


def test_new_store_is_version_4_with_every_document_recorded(tmp_path, capsys):
    store = _store(tmp_path / "s", weights=True)
    assert store.format_version == 4 and store.metadata_verified and store.has_weights
    for s in store.metadata["shards"]:
        assert set(s[DOCUMENT_CHECKSUM_KEY]) == {"indptr", "indices", "data", "y", "weight"}
    assert main(["info", str(store.path), "--verify"]) == 0
    assert "metadata     sha256 of streamwww.json, checked on open" in capsys.readouterr().out


@pytest.mark.parametrize("weights", [False, True])
def test_version_2_and_3_stores_open_with_their_fingerprint_and_warn_once(tmp_path, monkeypatch,
                                                                          caplog, capsys, weights):
    """A store as versions 2 and 3 wrote it (no metadata checksums): it opens and reads with
    the fingerprint it had, says once that its metadata is not covered, and an edit of its
    class counts is not detected (as before)."""
    store = _store(tmp_path / "s", weights=weights)
    version = 3 if weights else 2
    marker = store.path / "streamwww.json"

    def as_old_version(m):
        m["format_version"] = version
        m.pop(METADATA_HASH_KEY)
        for s in m["shards"]:
            s.pop(DOCUMENT_CHECKSUM_KEY)
        m["fingerprint"] = fingerprint(m)

    _edit_json(marker, as_old_version)
    old = json.loads(marker.read_text())
    monkeypatch.setattr(store_mod, "_WARNED", set())
    with caplog.at_level(logging.WARNING, logger="streamwww.io.store"):
        s = open_store(store.path)
        open_store(store.path)
    warned = [r.getMessage() for r in caplog.records if "no metadata checksums" in r.getMessage()]
    assert len(warned) == 1 and f"format version {version}" in warned[0]
    assert "convert it again" in warned[0]
    assert s.format_version == version and s.verified and not s.metadata_verified
    assert s.fingerprint == old["fingerprint"] == fingerprint(old) != store.fingerprint
    assert s.verify() == s.n_shards
    assert main(["info", str(store.path)]) == 0
    assert f"metadata     not checksummed (format version {version})" in capsys.readouterr().out


def test_version_1_fixture_still_opens_with_the_warning(monkeypatch, caplog):
    monkeypatch.setattr(store_mod, "_WARNED", set())
    with caplog.at_level(logging.WARNING, logger="streamwww.io.store"):
        s = open_store(DATA / "v1-zarr")
    assert s.fingerprint == V1_FINGERPRINT and not s.metadata_verified
    assert any("carries no content checksums" in r.getMessage() for r in caplog.records)
    assert s.read_shards(range(s.n_shards))[0].shape == (60, 7)
