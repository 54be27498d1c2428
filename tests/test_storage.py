"""Stores at URLs: fsspec locations, memory:// and a real S3 API on loopback (moto's server).

Checkpoints and model files on object stores are tested in test_remote_checkpoint.py.
"""

import contextlib
import json
import os

import fsspec
import numpy as np
import pytest
import scipy.sparse as sp

import streamwww as sw
from streamwww.cli import main
from streamwww.storage.location import location, parse_storage_options
from streamwww.errors import (
    ChecksumError,
    ShardFormatError,
    StorageError,
    StorageURLError,
    StoreExistsError,
)
from streamwww.io import convert_libsvm, open_store, write_store
from streamwww.io._format import MARKER
from streamwww.io._transaction import INCOMPLETE

from .conftest import make_classification

pytestmark = pytest.mark.filterwarnings("ignore:.*did not converge")


@pytest.fixture
def data(tmp_path):
    rng = np.random.default_rng(7)
    X, y = make_classification(rng, n=700, d=12, k=3, sparse=True, density=0.6, dtype=np.float32)
    from sklearn.datasets import dump_svmlight_file

    text = tmp_path / "d.libsvm"
    dump_svmlight_file(X, y, str(text), zero_based=False)
    return X, y, text


def _same(a, b):
    Xa, ya = a.read_shards(range(a.n_shards))
    Xb, yb = b.read_shards(range(b.n_shards))
    assert a.fingerprint == b.fingerprint
    dense = (lambda M: M.toarray() if sp.issparse(M) else M)
    assert np.array_equal(dense(Xa), dense(Xb)) and np.array_equal(ya, yb)


# --------------------------------------------------------------------------- locations


def test_location_names_and_errors(tmp_path):
    loc = location("memory://bucket/a/b")
    assert not loc.is_local and loc.url == "memory:///bucket/a/b" and loc.name == "b"
    assert loc.child("c", "d").url == "memory:///bucket/a/b/c/d" and loc.parent.name == "a"
    local = location(tmp_path / "x")
    assert local.is_local and local.url == str(tmp_path / "x") and os.fspath(local) == str(tmp_path / "x")
    assert location(f"file://{tmp_path}/y").url == str(tmp_path / "y")
    with pytest.raises(TypeError, match="object store"):
        os.fspath(loc)  # code that needs a local path never makes a folder named "memory:"
    with pytest.raises(StorageURLError, match="unknown protocol 'nosuch'"):
        location("nosuch://x/y")
    with pytest.raises(StorageURLError, match="for a local path"):
        location(tmp_path / "z", {"anon": True})


def test_missing_protocol_package_is_named(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    try:
        import gcsfs  # noqa: F401
        pytest.skip("gcsfs is installed here")
    except ImportError:
        pass
    with pytest.raises(StorageURLError, match=r"gs:// protocol needs .*pip install gcsfs"):
        open_store("gs://bucket/store")
    with pytest.raises(StorageURLError, match="pip install gcsfs"):
        write_store("gs://bucket/store", np.eye(3), [0, 1, 2])
    assert list(tmp_path.iterdir()) == []  # no local folder named "gs:"


def test_zarr_reads_share_one_file_system_across_threads(s3_server):
    """Each loader thread used to build its own S3 client (fsspec caches instances per
    thread); Zarr's file system is one per protocol and options in a process."""
    import threading

    url = location("s3://bench/x", s3_server.options)
    together = threading.Barrier(3)  # three live threads at once: three thread idents
    stores = []

    def open_one():
        together.wait(timeout=30)
        stores.append(url.zarr_store(read_only=True))

    threads = [threading.Thread(target=open_one) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(stores) == 3 and len({id(st.fs) for st in stores}) == 1
    other = location("s3://bench/x", {**s3_server.options, "anon": False})
    assert other.zarr_store(read_only=True).fs is not stores[0].fs


def test_parse_storage_options():
    assert parse_storage_options(None) is None
    assert parse_storage_options(["anon=true", "endpoint_url=http://h:9000", "client_kwargs.region_name=eu",
                                  "n=3", "key=a=b"]) == {
        "anon": True, "endpoint_url": "http://h:9000", "client_kwargs": {"region_name": "eu"}, "n": 3,
        "key": "a=b"}
    for bad in ("novalue", "=x", "a..b=1"):
        with pytest.raises(ValueError, match="KEY=VALUE"):
            parse_storage_options([bad])


# --------------------------------------------------------------------------- memory://


@pytest.mark.parametrize("fmt", ["zarr", "parquet"])
def test_write_and_read_a_store_at_a_url(tmp_path, memory_root, fmt):
    rng = np.random.default_rng(1)
    X, y = make_classification(rng, n=500, d=9, k=4, sparse=True, dtype=np.float32)
    w = rng.random(500) + 0.5
    local = write_store(tmp_path / "s", X, y, shard_rows=120, format=fmt, sample_weight=w)
    remote = write_store(memory_root + "/s", X, y, shard_rows=120, format=fmt, sample_weight=w)
    assert remote.path == memory_root.replace("memory://", "memory:///", 1).replace("////", "///") + "/s" \
        or str(remote.path).endswith("/s")
    _same(local, remote)
    assert np.array_equal(remote.read_weights(range(remote.n_shards)), w)
    reopened = open_store(memory_root + "/s")
    _same(local, reopened)
    assert reopened.verify() == local.n_shards


def test_convert_to_and_from_urls(data, tmp_path, memory_root):
    X, y, text = data
    ref = convert_libsvm(text, tmp_path / "ref", shard_rows=150, shuffle=True, seed=4)
    out = convert_libsvm(text, memory_root + "/st", shard_rows=150, shuffle=True, seed=4)
    _same(ref, out)
    fs = fsspec.filesystem("memory")
    fs.put(str(text), location(memory_root + "/in.libsvm").path)
    back = convert_libsvm(memory_root + "/in.libsvm", tmp_path / "back", shard_rows=150, shuffle=True, seed=4)
    _same(ref, back)
    assert back.metadata["provenance"]["source"]["path"].startswith("memory://")
    # nothing but the store's own objects: staging and spool files stayed local
    names = location(memory_root + "/st").listdir()
    assert MARKER in names and INCOMPLETE not in names
    assert all(n in (MARKER, "zarr.json") or n.startswith("shard-") for n in names)


def test_remote_overwrite_rules(tmp_path, memory_root):
    X, y = np.eye(4), [0, 1, 2, 3]
    url = memory_root + "/s"
    write_store(url, X, y)
    with pytest.raises(StoreExistsError, match="already exists"):
        write_store(url, X, y)
    new = write_store(url, 2 * X, y, overwrite=True)
    assert np.array_equal(new.read_shard(0)[0].toarray() if sp.issparse(new.read_shard(0)[0])
                          else new.read_shard(0)[0], 2 * X)
    foreign = location(memory_root + "/foreign")
    foreign.child("notes.txt").write_text("mine")
    with pytest.raises(StoreExistsError, match="not a streamwww store"):
        write_store(foreign.url, X, y, overwrite=True)
    assert foreign.child("notes.txt").read_text() == "mine"


def test_killed_remote_write_never_opens_and_is_cleared(tmp_path, memory_root, monkeypatch):
    from streamwww.io import _zarr

    url = memory_root + "/s"
    calls = {"n": 0}
    real = _zarr.ZarrBackend.write_shard

    def dies_on_second(self, *a, **k):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt  # like a kill between two shards (not an error the writer handles)
        return real(self, *a, **k)

    monkeypatch.setattr(_zarr.ZarrBackend, "write_shard", dies_on_second)
    with pytest.raises(KeyboardInterrupt):
        write_store(url, np.eye(6), np.arange(6) % 3, shard_rows=2)
    monkeypatch.undo()
    # an interrupted write that could not clean up: simulate the process dying by
    # leaving what a kill leaves (the incomplete marker and a shard)
    loc = location(url)
    loc.child(INCOMPLETE).write_text("{}")
    loc.child("shard-00000", "zarr.json").write_text("{}")
    with pytest.raises(ShardFormatError, match="not a complete streamwww store"):
        open_store(url)
    store = write_store(url, np.eye(6), np.arange(6) % 3, shard_rows=2)  # no overwrite needed
    assert store.n_shards == 3 and INCOMPLETE not in loc.listdir()


def test_failed_remote_write_leaves_nothing(memory_root, monkeypatch):
    from streamwww.io import _zarr

    url = memory_root + "/s"

    def fails(self, *a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_zarr.ZarrBackend, "write_shard", fails)
    with pytest.raises(OSError):
        write_store(url, np.eye(3), [0, 1, 2])
    assert location(url).listdir() == []


def test_damaged_remote_object_is_refused_naming_the_url(memory_root):
    url = memory_root + "/s"
    write_store(url, np.arange(40.0).reshape(10, 4), np.arange(10) % 2, shard_rows=5)
    fs = fsspec.filesystem("memory")
    key = next(p for p in fs.find(location(url).path) if "shard-00001/X/c" in p)
    raw = bytearray(fs.cat_file(key))
    raw[len(raw) // 2] ^= 0xFF
    fs.pipe_file(key, bytes(raw))
    store = open_store(url)
    store.read_shard(0)
    with pytest.raises(ChecksumError, match=r"memory:///.*shard-00001/X/c/0/0: crc32c mismatch"):
        store.read_shard(1)
    fs.rm(key)
    with pytest.raises(ChecksumError, match="missing"):
        open_store(url).read_shard(1)


def test_train_from_a_url_equals_local(tmp_path, memory_root):
    rng = np.random.default_rng(5)
    X, y = make_classification(rng, n=600, d=8, k=3, dtype=np.float32)
    local = write_store(tmp_path / "s", X, y, shard_rows=150)
    write_store(memory_root + "/s", X, y, shard_rows=150)
    kw = dict(C=0.5, random_state=3, max_iter=30, tol=1e-4)
    a = sw.train(local, checkpoint_dir=tmp_path / "ck1", **kw)
    b = sw.train(memory_root + "/s", checkpoint_dir=tmp_path / "ck2", model_out=tmp_path / "m.npz", **kw)
    assert np.array_equal(a.coef_, b.coef_) and np.array_equal(a.intercept_, b.intercept_)
    manifest = json.loads((tmp_path / "ck2" / "manifest.json").read_text())
    assert manifest["data"]["path"].startswith("memory:///")
    c = sw.resume(tmp_path / "ck2")  # reopens the store from its recorded URL
    assert np.array_equal(c.coef_, b.coef_)


# --------------------------------------------------------------------------- S3 (moto server)


def test_s3_convert_train_evaluate_cli(data, tmp_path, s3_server, capsys):
    X, y, text = data
    url = s3_server.url("train")
    opts = []
    for k, v in (("key", "testing"), ("secret", "testing"), ("endpoint_url", s3_server.endpoint)):
        opts += ["--storage-option", f"{k}={v}"]
    assert main(["convert", str(text), url, "--shard-rows", "200", "--shuffle", "--seed", "2", *opts]) == 0
    assert url in capsys.readouterr().out
    assert main(["info", url, *opts]) == 0
    assert "fingerprint" in capsys.readouterr().out
    assert main(["train", url, "--checkpoint-dir", str(tmp_path / "ck"), "--model-out", str(tmp_path / "m.npz"),
                 "--seed", "1", "--max-iter", "40", "-q", *opts]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(tmp_path / "m.npz"), url, "--json", *opts]) == 0
    acc = json.loads(capsys.readouterr().out)["accuracy"]
    # the same run on a local copy of the store gives the same model
    local = convert_libsvm(text, tmp_path / "local", shard_rows=200, shuffle=True, seed=2)
    remote = open_store(url, storage_options=s3_server.options)
    _same(local, remote)
    m = sw.train(local, checkpoint_dir=tmp_path / "ck2", random_state=1, max_iter=40)
    assert np.array_equal(m.coef_, sw.load_model(tmp_path / "m.npz").coef_)
    assert acc == pytest.approx(m.score(remote))
    # no credentials in what was recorded
    for f in (tmp_path / "ck" / "manifest.json",):
        assert "testing" not in f.read_text() and "endpoint" not in f.read_text()


def test_s3_unreachable_is_one_clear_error(tmp_path, s3_server):
    rng = np.random.default_rng(2)
    X, y = make_classification(rng, n=200, d=5, k=2)
    url = s3_server.url("s")
    write_store(url, X, y, shard_rows=100, storage_options=s3_server.options)
    store = open_store(url, storage_options=s3_server.options)
    s3_server.stop()
    try:
        with pytest.raises(StorageError, match=r"s3://bucket-\d+/s: shard 0 .*failed the request"):
            store.read_shard(0)
    finally:
        s3_server.start()
    assert store.read_shard(0)[0].shape == (100, 5)  # back: reads go on


def test_s3_store_on_a_cluster_equals_local(tmp_path, s3_server):
    """Worker processes open the store at its URL with the run's storage options
    (carried in memory with the task, never recorded): the same model as from disk."""
    rng = np.random.default_rng(4)
    X, y = make_classification(rng, n=400, d=6, k=3, dtype=np.float32)
    local = write_store(tmp_path / "s", X, y, shard_rows=100)
    url = s3_server.url("s")
    write_store(url, X, y, shard_rows=100, storage_options=s3_server.options)
    kw = dict(C=0.5, random_state=2, max_iter=15, tol=1e-4, partitions=2, workers=2)
    a = sw.train(local, checkpoint_dir=tmp_path / "ck1", **kw)
    b = sw.train(url, checkpoint_dir=tmp_path / "ck2", storage_options=s3_server.options, **kw)
    assert np.array_equal(a.coef_, b.coef_)
    assert "testing" not in (tmp_path / "ck2" / "manifest.json").read_text()


@pytest.mark.parametrize("fmt", ["zarr", "parquet"])
def test_write_predictions_to_a_url(tmp_path, memory_root, fmt):
    rng = np.random.default_rng(6)
    X, y = make_classification(rng, n=300, d=5, k=3)
    labels = np.array(["a", "b", "c"])[y]
    store = write_store(memory_root + "/s", X, labels, shard_rows=100)
    model = sw.WWClassifier(C=1.0, random_state=0, max_iter=20).fit(X, labels)
    url = memory_root + "/pred"
    assert sw.write_predictions(model, memory_root + "/s", url, format=fmt).endswith("/pred")
    local = sw.write_predictions(model, store, tmp_path / "pred", format=fmt)
    loc = location(url)
    meta = json.loads(loc.child("_predictions.json").read_text())
    assert meta["n_shards"] == 3 and meta["kind"] == "labels" and INCOMPLETE not in loc.listdir()
    assert json.loads((local / "_predictions.json").read_text()) == meta
    for i in range(3):
        if fmt == "zarr":
            import zarr

            a = zarr.open_array(store=loc.zarr_store(read_only=True), path=f"shard-{i:05d}", mode="r")[:]
            b = zarr.open_array(str(local / f"shard-{i:05d}"), mode="r")[:]
        else:
            import io

            import pyarrow.parquet as pq

            a = pq.read_table(io.BytesIO(loc.child(f"part-{i:05d}.parquet").read_bytes())).column("label").to_numpy()
            b = pq.read_table(local / f"part-{i:05d}.parquet").column("label").to_numpy()
        assert np.array_equal(a, b)
    with pytest.raises(StoreExistsError):
        sw.write_predictions(model, store, url, format=fmt)
    sw.write_predictions(model, store, url, format=fmt, scores=True, overwrite=True)
    assert json.loads(loc.child("_predictions.json").read_text())["kind"] == "scores"
    if fmt == "parquet":  # the marker is no part of the dataset: the folder reads as one table
        import pyarrow.parquet as pq

        assert pq.read_table(local).num_rows == 300
    # an earlier version's output (its marker predictions.json) is replaced with overwrite
    loc.child("_predictions.json").write_text(loc.child("_predictions.json").read_text())
    loc.child("predictions.json").write_text(loc.child("_predictions.json").read_text())
    loc.child("_predictions.json").remove()
    sw.write_predictions(model, store, url, format=fmt, overwrite=True)
    assert "predictions.json" not in loc.listdir() and "_predictions.json" in loc.listdir()


def test_keep_decoded_reads_storage_once_and_changes_nothing(tmp_path, s3_server):
    rng = np.random.default_rng(8)
    X, y = make_classification(rng, n=600, d=10, k=3, sparse=True, density=0.3, dtype=np.float32)
    url = s3_server.url("s")
    write_store(url, X, y, shard_rows=100, sample_weight=rng.random(600) + 0.5,
                storage_options=s3_server.options)
    plain = open_store(url, storage_options=s3_server.options)
    kept = open_store(url, storage_options=s3_server.options)
    kept.keep_decoded(10**8)
    kw = dict(C=0.3, random_state=1, max_iter=6, tol=0.0)
    a = sw.train(plain, checkpoint_dir=tmp_path / "a", **kw)
    assert kept.kept_bytes == 0
    fs = s3_server.filesystem()
    calls = []
    from streamwww.storage.location import Location

    real = Location.read_many

    def counting(self, locations):
        locations = list(locations)
        calls.append(locations)
        return real(self, locations)

    import unittest.mock

    with unittest.mock.patch.object(Location, "read_many", counting):
        b = sw.train(kept, checkpoint_dir=tmp_path / "b", **kw)
    assert np.array_equal(a.coef_, b.coef_)
    assert kept.kept_bytes > 0 and len(kept._kept) == kept.n_shards
    # each shard's chunks fetched once, for 6 epochs and their objective passes (and its arrays'
    # zarr.json, checked against the store's metadata checksums, once before that: docs/FORMAT.md)
    chunks = [c for c in calls if any(not loc.name.endswith("zarr.json") for loc in c)]
    docs = [c for c in calls if all(loc.name.endswith("zarr.json") for loc in c)]
    assert len(chunks) == kept.n_shards and len(docs) <= kept.n_shards
    kept.keep_decoded(0)
    assert kept.kept_bytes == 0 and fs.exists(url)


def test_memory_budget_of_a_run(tmp_path, caplog):
    rng = np.random.default_rng(9)
    X, y = make_classification(rng, n=500, d=7, k=3, dtype=np.float32)
    store = write_store(tmp_path / "s", X, y, shard_rows=100)
    kw = dict(C=0.4, random_state=5, max_iter=5, tol=0.0)
    a = sw.train(store, checkpoint_dir=tmp_path / "a", memory_budget=0, **kw)
    assert store.keep_budget == 0 and store.kept_bytes == 0
    import logging

    with caplog.at_level(logging.INFO, logger="streamwww.engine.run"):
        b = sw.train(store, checkpoint_dir=tmp_path / "b", **kw)  # "auto": the store fits
    assert "keeping all of" in caplog.text
    assert np.array_equal(a.coef_, b.coef_)
    assert store.keep_budget == 0 and store.kept_bytes == 0  # released with the run
    c = sw.train(store, checkpoint_dir=tmp_path / "c", memory_budget=2 * store.shard_nbytes(0), **kw)
    assert np.array_equal(a.coef_, c.coef_)  # part of the store kept: the same model
    for bad in (-1, 1.5, "lots", True):
        with pytest.raises(ValueError, match="memory_budget"):
            sw.train(store, memory_budget=bad, **kw)
    assert main(["train", str(tmp_path / "s"), "--checkpoint-dir", str(tmp_path / "d"), "--model-out",
                 str(tmp_path / "m.npz"), "--seed", "5", "--max-iter", "5", "--tol", "0", "--C", "0.4",
                 "--memory-budget", "64M", "-q"]) == 0
    assert np.array_equal(sw.load_model(tmp_path / "m.npz").coef_, a.coef_)


def test_s3_everything_through_the_cli(data, tmp_path, s3_server, capsys):
    """Store, checkpoint directory and model file all on S3: train, info, plot's data,
    resume and evaluate through the CLI, with the options given on the command line only."""
    X, y, text = data
    store, ckpt, model = s3_server.url("st"), s3_server.url("ck"), s3_server.url("m.npz")
    opts = []
    for k, v in (("key", "testing"), ("secret", "testing"), ("endpoint_url", s3_server.endpoint)):
        opts += ["--storage-option", f"{k}={v}"]
    assert main(["convert", str(text), store, "--shard-rows", "250", *opts]) == 0
    capsys.readouterr()
    assert main(["train", store, "--checkpoint-dir", ckpt, "--model-out", model, "--seed", "3",
                 "--max-iter", "8", "--json", *opts]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model_paths"] == [model] and out["checkpoint_dir"] == ckpt
    assert main(["info", ckpt, "--verify", "--json", *opts]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["health"]["ok"] and info["health"]["latest"]["beta"] == "verified"
    assert info["data"]["path"] == store and info["model_files"] == [model]
    assert main(["info", model, "--json", *opts]) == 0
    assert json.loads(capsys.readouterr().out)["epochs"] == 8
    assert main(["resume", ckpt, "--max-iter", "12", "--json", *opts]) == 0
    capsys.readouterr()
    assert main(["evaluate", model, store, "--json", *opts]) == 0
    acc = json.loads(capsys.readouterr().out)["accuracy"]
    m = sw.load_model(location(model, s3_server.options))
    assert m.n_iter_ == 12 and acc == pytest.approx(m.score(open_store(store, storage_options=s3_server.options)))
    from streamwww.cli.runinfo import gap_histories

    series, _ = gap_histories(ckpt, s3_server.options)
    assert list(series[0]["epoch"]) == [h["epoch"] for h in m.history_] and series[0]["epoch"][-1] == 12
    everything = b"".join(s3_server.filesystem().cat(s3_server.filesystem().find(ckpt)).values())
    assert b"testing" not in everything and s3_server.endpoint.encode() not in everything


def test_s3_checkpoint_directory_takes_a_libsvm_file(data, tmp_path, s3_server, capsys):
    """`train FILE` with the checkpoint directory on S3: the store converted there, the same
    command again continues (converted beside it, compared, the copy removed), other data is
    refused, resume reads it; the same model as on a local disk."""
    X, y, text = data
    ckpt = s3_server.url("ckfile")
    opts = []
    for k, v in (("key", "testing"), ("secret", "testing"), ("endpoint_url", s3_server.endpoint)):
        opts += ["--storage-option", f"{k}={v}"]
    run = ["train", str(text), "--checkpoint-dir", ckpt, "--seed", "3", "--model-out", str(tmp_path / "m.npz"),
           "-q", *opts]
    assert main([*run, "--max-iter", "3"]) == 0 and main([*run, "--max-iter", "6"]) == 0
    fs = s3_server.filesystem()
    names = sorted(p.rsplit("/", 1)[-1] for p in fs.ls(ckpt.split("://", 1)[1]))
    assert "data.zarr" in names and not [n for n in names if "incoming" in n], names
    other = tmp_path / "other.libsvm"
    other.write_text("1 1:1\n2 2:1\n")
    assert main(["train", str(other), *run[2:], "--max-iter", "6"]) == 1
    assert "is other data" in capsys.readouterr().err
    assert main(["resume", ckpt, "--max-iter", "8", "-q", *opts]) == 0
    # the same two steps on a local disk
    local = ["train", str(text), "--checkpoint-dir", str(tmp_path / "ck"), "--seed", "3",
             "--model-out", str(tmp_path / "l.npz"), "-q"]
    assert main([*local, "--max-iter", "3"]) == 0 and main([*local, "--max-iter", "6"]) == 0
    assert main(["resume", str(tmp_path / "ck"), "--max-iter", "8", "-q"]) == 0
    assert sw.load_model(tmp_path / "m.npz").coef_.tobytes() == sw.load_model(tmp_path / "l.npz").coef_.tobytes()


@contextlib.contextmanager
def _server_requests():
    """The HTTP requests the loopback server answers meanwhile (its werkzeug log lines)."""
    import logging

    seen: list[str] = []

    class Catch(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())

    log = logging.getLogger("werkzeug")
    handler, level = Catch(), log.level
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        yield seen
    finally:
        log.removeHandler(handler)
        log.setLevel(level)


@pytest.mark.parametrize("client", ["obstore", "s3fs"])
def test_one_object_read_is_one_request_on_s3(tmp_path, s3_server, monkeypatch, client):
    """A whole-object read (a Parquet shard, a model file) is one GET: s3fs would ask for
    the object's size first (HEAD) to decide on a multipart download, pyarrow's S3 file
    system would too; obstore's GET is the read (streamwww.storage.obstore), s3fs's the fallback."""
    pytest.importorskip("obstore")
    if client == "s3fs":
        monkeypatch.setenv("STREAMWWW_S3_CLIENT", "s3fs")
    rng = np.random.default_rng(9)
    X, y = make_classification(rng, n=200, d=6, k=3, dtype=np.float32)
    url = s3_server.url("p")
    write_store(url, X, y, shard_rows=100, format="parquet", storage_options=s3_server.options)
    store = open_store(url, storage_options=s3_server.options)
    where = location(url, s3_server.options)
    calls = []
    real = where.fs._call_s3

    async def spy(method, *args, **kwargs):
        calls.append(method)
        return await real(method, *args, **kwargs)

    where.fs._call_s3 = spy  # fsspec caches the file system: the store's reads go through it
    try:
        with _server_requests() as requests:
            Xs, ys = store.read_shard(1)
    finally:
        where.fs._call_s3 = real
    assert np.array_equal(ys, y[100:])
    assert calls == ([] if client == "obstore" else ["get_object"])
    assert [r.split('"')[1].split()[0] for r in requests if '"' in r] == ["GET"], requests


def test_obstore_settings_follow_the_s3fs_options():
    """s3fs's options become obstore's; one it cannot express keeps the reads with s3fs."""
    from datetime import timedelta

    from streamwww.storage.obstore import s3_config

    got = s3_config({"key": "K", "secret": "S", "token": "T", "endpoint_url": "http://127.0.0.1:9",
                     "client_kwargs": {"region_name": "eu-west-3"},
                     "config_kwargs": {"retries": {"max_attempts": 2, "mode": "standard"},
                                       "connect_timeout": 2, "read_timeout": 20}})
    assert got["config"] == {"endpoint": "http://127.0.0.1:9", "region": "eu-west-3", "access_key_id": "K",
                             "secret_access_key": "S", "session_token": "T"}
    assert got["client_options"] == {"allow_http": True, "connect_timeout": timedelta(seconds=2),
                                     "timeout": timedelta(seconds=20)}
    assert got["retry_config"]["max_retries"] == 1 and not got["signed"]
    anon = s3_config({"anon": True, "client_kwargs": {"endpoint_url": "minio:9000"}, "use_ssl": False})
    assert anon["config"] == {"endpoint": "http://minio:9000", "skip_signature": True}
    chain = s3_config({"profile": "research"})  # botocore's credential chain, with its profile
    assert chain["signed"] and chain["profile"] == "research" and chain["config"].get("access_key_id") is None
    assert s3_config({"requester_pays": True}) is None
    assert s3_config({"key": "K"}) is None  # a key without its secret: s3fs decides
    assert s3_config({"config_kwargs": {"signature_version": "s3v4"}}) is None
    assert s3_config({"max_concurrency": 1, "skip_instance_cache": True}) is not None


def test_obstore_errors_are_storage_failures_or_answers():
    """A failed obstore request is the store's failure (one StorageError); a missing object
    is an answer about the object."""
    exceptions = pytest.importorskip("obstore.exceptions")
    from streamwww.storage.location import is_storage_failure

    assert is_storage_failure(exceptions.GenericError("Error performing GET: connection refused"))
    assert is_storage_failure(exceptions.PermissionDeniedError("403"))
    assert not is_storage_failure(exceptions.NotFoundError("no such key"))


def test_obstore_reads_equal_s3fs_reads_and_fall_back_to_s3fs(s3_server, monkeypatch, caplog):
    """The same bytes (and None for a missing object) through obstore as through s3fs; a
    failed obstore read is made again through s3fs, which reads that bucket from then on."""
    pytest.importorskip("obstore")
    from streamwww.storage import obstore as _obstore

    root = location(s3_server.url("objects"), s3_server.options)
    blobs = {f"o{i}": np.random.default_rng(i).bytes(1000 * (i + 1)) for i in range(5)}
    for name, blob in blobs.items():
        root.child(name).write_bytes(blob)
    wanted = [root.child(n) for n in [*blobs, "missing"]]
    expect = [*blobs.values(), None]
    assert _obstore.reader(root.protocol, root.path, root.storage_options) is not None
    assert root.read_many(wanted) == expect
    with pytest.raises(FileNotFoundError):
        root.child("missing").read_bytes()
    monkeypatch.setenv("STREAMWWW_S3_CLIENT", "s3fs")
    assert _obstore.reader(root.protocol, root.path, root.storage_options) is None
    assert root.read_many(wanted) == expect
    monkeypatch.delenv("STREAMWWW_S3_CLIENT")

    def broken(self, paths):
        raise RuntimeError("no route to the bucket's region")

    monkeypatch.setattr(_obstore.Reader, "get_many", broken)
    with caplog.at_level("WARNING", logger="streamwww.storage.obstore"):
        assert root.read_many(wanted) == expect
    assert "go through s3fs from now on" in caplog.text
    assert _obstore.reader(root.protocol, root.path, root.storage_options) is None
    assert root.child("o1").read_bytes() == blobs["o1"]
