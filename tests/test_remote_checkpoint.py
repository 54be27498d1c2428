"""Checkpoints, beta and model files on object stores (issue 20): the commit protocol
without renames, create-only writes, the LOCK object, network faults, kill and resume.

memory:// tests exercise the protocol in-process; the S3 tests run against moto's
server on loopback (tests/conftest.py, ``s3_server``).
"""

import json
import os
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest

import streamwww as sw
from streamwww.storage.fsutil import ObjectLock, _host
from streamwww.storage.location import is_storage_failure, location, write_once
from streamwww.state.checkpoint import (
    MANIFEST,
    PREVIOUS,
    CheckpointDir,
    CheckpointFallbackWarning,
)
from streamwww.errors import CheckpointError, StorageError
from streamwww.io import open_store, write_store
from streamwww.state.betas import DiskBetas

from .conftest import kill_after_commits, make_classification

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


_RUNS = [0]


def _memory_dir(name: str) -> str:
    """A fresh memory:// directory (the memory file system is one per process)."""
    _RUNS[0] += 1
    return f"memory://ckpt-tests/{name}-{os.getpid()}-{_RUNS[0]}"


def _objects(url: str) -> list[str]:
    loc = location(url)
    base = loc.path.rstrip("/") + "/"
    return sorted(p[len(base):] for p in loc.fs.find(loc.path))


def _commit_two(ck: CheckpointDir, rng) -> tuple[DiskBetas, np.ndarray]:
    """Commits 1 (versions 1, 1) and 2 (versions 2, 1); returns the betas and shard 0's version 2."""
    betas = DiskBetas(ck.path, 1, [4, 4], 3)
    betas.put_group([(0, rng.normal(size=(1, 4, 2))), (1, rng.normal(size=(1, 4, 2)))])
    ck.commit(1, np.ones((1, 3, 3)), {"cursor": {"epoch": 1}}, betas)
    b2 = rng.normal(size=(1, 4, 2))
    betas.put(0, b2)
    ck.commit(2, np.full((1, 3, 3), 2.0), {"cursor": {"epoch": 2}}, betas, wait=True)
    return betas, b2


# ---------------------------------------------------------------------------- memory://
def test_commit_load_and_garbage_collection_on_an_object_store():
    """Same layout and rules as on disk: manifest last, the previous kept, stray objects of
    a killed run collected, superseded versions deleted once the next commit is made."""
    url = _memory_dir("commit")
    rng = np.random.default_rng(0)
    strays = {location(url).child("W-000009.npy"): b"killed",
              location(url).child("beta.zarr", "s000001-v000007", "zarr.json"): b"{}"}
    for loc, data in strays.items():
        loc.write_bytes(data)
    ck = CheckpointDir(url)
    try:
        assert not any(loc.exists() for loc in strays)  # no manifest: everything was a killed run's
        betas, b2 = _commit_two(ck, rng)
        man = ck.load_manifest()
        assert man["step"] == 2 and man["beta"]["versions"] == {"0": 2, "1": 1}
        assert ck.load_manifest(PREVIOUS)["step"] == 1
        assert np.array_equal(ck.load_W(man), np.full((1, 3, 3), 2.0))
        assert np.array_equal(betas.read(0, 2), b2)
        assert [o for o in _objects(url) if not o.endswith("zarr.json") or o.count("/") < 2] == [
            "LOCK", "W-000001.npy", "W-000002.npy",
            "beta.zarr/s000000-v000001/c.0.0.0", "beta.zarr/s000000-v000002/c.0.0.0",
            "beta.zarr/s000001-v000001/c.0.0.0", "beta.zarr/zarr.json", MANIFEST, PREVIOUS]
        # a third commit supersedes commit 1: its W and shard 0's version 1 go
        betas.put(0, rng.normal(size=(1, 4, 2)))
        ck.commit(3, np.full((1, 3, 3), 3.0), {"cursor": {"epoch": 3}}, betas)
        ck.wait()
        names = _objects(url)
        assert "W-000001.npy" not in names and not any(n.startswith("beta.zarr/s000000-v000001/") for n in names)
        assert {"W-000002.npy", "W-000003.npy", "beta.zarr/s000001-v000001/c.0.0.0"} <= set(names)
        betas.close()
    finally:
        ck.close()
    assert "LOCK" not in _objects(url)
    with CheckpointDir(url, lock=False) as reader:
        man, W = reader.load()
        assert man["step"] == 3 and W[0, 0, 0] == 3.0


def test_damaged_latest_falls_back_without_renames():
    url = _memory_dir("fallback")
    ck = CheckpointDir(url)
    try:
        _commit_two(ck, np.random.default_rng(1))
        previous = location(url).child(PREVIOUS).read_bytes()
    finally:
        ck.close()
    W2 = location(url).child("W-000002.npy")
    raw = bytearray(W2.read_bytes())
    raw[-3] ^= 0x40
    W2.write_bytes(bytes(raw))
    with CheckpointDir(url) as ck:
        with pytest.warns(CheckpointFallbackWarning, match="W-000002.npy.*resuming from the one before it"):
            man, W = ck.load()
        assert man["step"] == 1 and W[0, 0, 0] == 1.0
        names = _objects(url)
        # the previous manifest's bytes are the latest now; the damaged one is kept aside;
        # what only the damaged commit named is deleted (the resumed run writes those keys again)
        assert location(url).child(MANIFEST).read_bytes() == previous
        assert [n for n in names if n.startswith("manifest.damaged-")]
        assert "W-000002.npy" not in names and "beta.zarr/s000000-v000002/zarr.json" not in names
    with CheckpointDir(url, lock=False) as reader:  # no warning now: the latest is intact
        with warnings.catch_warnings():
            warnings.simplefilter("error", CheckpointFallbackWarning)
            assert reader.load()[0]["step"] == 1


def test_a_store_that_fails_during_load_is_not_damage(monkeypatch):
    """An unreachable store is a StorageError: never a fallback, and nothing set aside."""
    url = _memory_dir("unreachable")
    with CheckpointDir(url) as ck:
        _commit_two(ck, np.random.default_rng(2))
    fs = location(url).fs
    real = type(fs).cat_file

    def down(self, path, *a, **k):
        if path.endswith("W-000002.npy"):
            raise ConnectionError("connection refused")
        return real(self, path, *a, **k)

    monkeypatch.setattr(type(fs), "cat_file", down)
    with CheckpointDir(url) as ck:
        with pytest.raises(StorageError, match=r"W-000002\.npy: reading failed \(ConnectionError"):
            ck.load()
    assert not [n for n in _objects(url) if n.startswith("manifest.damaged-")]


def test_create_only_writes_accept_identical_bytes_and_refuse_others():
    url = _memory_dir("once")
    key = location(url).child("W-000001.npy")
    write_once({key: b"abc"})
    write_once({key: b"abc"})  # a task that ran again
    with pytest.raises(CheckpointError, match=r"W-000001\.npy: exists with other content"):
        write_once({key: b"abd"})
    assert key.read_bytes() == b"abc"
    with pytest.raises(FileExistsError):
        key.write_bytes(b"x", exclusive=True)
    # a beta version written twice by a re-run task: identical, then refused when different
    betas = DiskBetas(url, 2, [5], 4)
    beta = np.random.default_rng(3).normal(size=(2, 5, 3))
    betas.write_version(0, 1, beta)
    betas.write_version(0, 1, beta.copy())
    with pytest.raises(CheckpointError, match=r"s000000-v000001/.*exists with other content"):
        betas.write_version(0, 1, beta + 1.0)
    assert np.array_equal(betas.read(0, 1), beta)


def test_local_exclusive_write(tmp_path):
    target = location(tmp_path / "f")
    target.write_bytes(b"1", exclusive=True)
    with pytest.raises(FileExistsError):
        target.write_bytes(b"2", exclusive=True)
    assert target.read_bytes() == b"1" and os.listdir(tmp_path) == ["f"]


def _lock_record(url, **fields) -> None:
    record = {"host": _host(), "pid": os.getpid(), "token": "0123456789abcdef", "started": time.time(),
              "heartbeat": time.time(), "lease_s": 120.0, **fields}
    location(url).child("LOCK").write_bytes(json.dumps(record).encode())


def test_lock_is_exclusive_and_released():
    url = _memory_dir("lock")
    held = CheckpointDir(url)
    try:
        with pytest.raises(CheckpointError, match=f"another trainer holds.*pid {os.getpid()}"):
            CheckpointDir(url)
        record = json.loads(location(url).child("LOCK").read_bytes())
        assert set(record) == {"host", "pid", "token", "started", "heartbeat", "lease_s"}
        CheckpointDir(url, lock=False).close()  # readers take no lock
    finally:
        held.close()
    assert not location(url).child("LOCK").exists()
    CheckpointDir(url).close()


@pytest.mark.parametrize("record, taken", [
    ({"host": "elsewhere", "pid": 1}, False),  # another host, heartbeat live
    ({"host": "elsewhere", "pid": 1, "heartbeat": time.time() - 600}, True),  # lease expired
    ({"pid": 2 ** 22 + 12345}, True),  # a dead pid on this host
    ({}, True),  # this process, a token no CheckpointDir of it holds (released without deleting)
])
def test_stale_locks_are_taken_over_and_live_ones_refused(record, taken):
    url = _memory_dir("stale")
    _lock_record(url, **record)
    if not taken:
        with pytest.raises(CheckpointError, match="another trainer holds.*elsewhere"):
            CheckpointDir(url)
        return
    with CheckpointDir(url):
        assert json.loads(location(url).child("LOCK").read_bytes())["token"] != "0123456789abcdef"


def test_heartbeat_renews_the_lock_and_a_lost_lock_stops_the_commit():
    url = _memory_dir("heartbeat")
    lock = ObjectLock(location(url).child("LOCK"), lease_s=0.2)
    assert lock.try_acquire() is None
    try:
        first = json.loads(lock.where.read_bytes())["heartbeat"]
        time.sleep(0.3)
        assert json.loads(lock.where.read_bytes())["heartbeat"] > first
    finally:
        lock.release()
    assert not lock.where.exists()
    ck = CheckpointDir(url)
    try:
        betas = DiskBetas(ck.path, 1, [4], 3)
        betas.put(0, np.ones((1, 4, 2)))
        ck.commit(1, np.ones((1, 3, 3)), {"cursor": {"epoch": 1}}, betas, wait=True)
        _lock_record(url, host="elsewhere", token="another")  # taken over by someone else
        betas.put(0, np.zeros((1, 4, 2)))
        ck.commit(2, np.ones((1, 3, 3)), {"cursor": {"epoch": 2}}, betas)
        with pytest.raises(CheckpointError, match="lost the checkpoint's lock.*elsewhere.*step 2 was not committed"):
            ck.wait()
        assert ck.load_manifest()["step"] == 1
    finally:
        ck.close()
    assert location(url).child("LOCK").exists()  # not ours to delete


def test_storage_failures_are_told_from_answers():
    import botocore.exceptions

    assert is_storage_failure(ConnectionRefusedError())
    assert is_storage_failure(botocore.exceptions.EndpointConnectionError(endpoint_url="http://x"))
    assert not is_storage_failure(FileNotFoundError("gone"))
    assert not is_storage_failure(ValueError("bad"))


def test_checkpoint_and_beta_locations_pickle_for_cluster_tasks():
    import pickle

    url = _memory_dir("pickle")
    betas = DiskBetas(location(url), 1, [3], 2)
    betas.write_version(0, 1, np.arange(3.0).reshape(1, 3, 1))
    again = DiskBetas(pickle.loads(pickle.dumps(location(url))), 1, [3], 2)
    assert np.array_equal(again.read(0, 1), np.arange(3.0).reshape(1, 3, 1))


def test_model_file_on_an_object_store(rng):
    X, y = make_classification(rng, n=80, d=4, k=3)
    model = sw.WWClassifier(C=1.0, random_state=0, max_iter=20).fit(X, y)
    url = _memory_dir("model") + "/m.npz"
    assert sw.save_model(model, url).url == location(url).url
    back = sw.load_model(url)
    assert back.coef_.tobytes() == model.coef_.tobytes() and np.array_equal(back.classes_, model.classes_)
    assert _objects(url.rsplit("/", 1)[0]) == ["m.npz"]  # one object, nothing temporary
    with pytest.raises(FileNotFoundError):
        sw.load_model(url + ".missing")


# ---------------------------------------------------------------------------- S3 (moto)
SETTINGS = dict(C=[0.5, 4.0], tol=1e-6, max_iter=12, random_state=11, checkpoint_every=1, prefetch=2,
                checkpoint_interval=0.0)


@pytest.fixture(scope="module")
def s3_store(s3_server, tmp_path_factory):
    """A 3-shard store, written locally and uploaded: ``(local path, URL)``."""
    rng = np.random.default_rng(2024)
    X, y = make_classification(rng, n=420, d=12, k=5, dtype=np.float32)
    local = tmp_path_factory.mktemp("s3store") / "s.zarr"
    write_store(local, X, y, shard_rows=140)
    url = s3_server.url("store")
    s3_server.filesystem().put(str(local), url[len("s3://"):], recursive=True)
    return local, url


@pytest.fixture(scope="module")
def reference(s3_store):
    return sw.train(s3_store[0], **SETTINGS)  # uninterrupted, local, no checkpoints


def _same(models, reference):
    assert len(models) == len(reference)
    for a, b in zip(models, reference):
        assert a.n_iter_ == b.n_iter_
        assert a.coef_.tobytes() == b.coef_.tobytes() and a.intercept_.tobytes() == b.intercept_.tobytes()


# the training subprocess: store and checkpoint on S3, the options in the environment
_WORKER = """
import json, os, sys, warnings
import streamwww as sw
from streamwww.io import open_store
from streamwww.storage.location import location
warnings.simplefilter("ignore")
opts = json.loads(os.environ["STREAMWWW_TEST_S3"])
settings = json.loads(sys.argv[3])
sw.train(open_store(sys.argv[1], opts), checkpoint_dir=location(sys.argv[2], opts), **settings)
print("finished", flush=True)
"""


def test_sigkill_against_s3_then_resume_is_bitwise(s3_server, s3_store, reference):
    rng = np.random.default_rng(5)
    ck_url = s3_server.url("ckpt")
    ck = location(ck_url, s3_server.options)
    env = {**os.environ, "STREAMWWW_TEST_S3": json.dumps(s3_server.options)}

    def step():
        try:
            return json.loads(ck.child(MANIFEST).read_bytes())["step"]
        except (FileNotFoundError, ValueError):
            return 0

    def start():
        return subprocess.Popen([sys.executable, "-c", _WORKER, s3_store[1], ck_url, json.dumps(SETTINGS)],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def lock_left_behind(proc):  # the killed run's LOCK stays: it goes stale (dead pid on this host)
        assert json.loads(ck.child("LOCK").read_bytes())["pid"] == proc.pid

    kills, steps_seen = kill_after_commits(start, step, rng, tries=2, max_delay=0.4, on_kill=lock_left_behind)
    assert kills >= 1 and steps_seen - {0}
    store = open_store(s3_store[1], s3_server.options)
    resumed = sw.resume(ck_url, store=store, storage_options=s3_server.options)
    _same(resumed, reference)
    again = sw.resume(ck_url, storage_options=s3_server.options)  # the store recorded by its URL
    _same(again, reference)
    assert not ck.child("LOCK").exists()


def _fails_then_resumes(s3_server, s3_store, reference, stop_at: int):
    ck = location(s3_server.url("ckpt"), s3_server.options)
    store = open_store(s3_store[1], s3_server.options)

    def outage(info):
        if info["epoch"] == stop_at:
            s3_server.stop()

    try:
        with pytest.raises((StorageError, CheckpointError)) as caught:
            sw.train(store, checkpoint_dir=ck, callback=outage, **SETTINGS)
    finally:
        s3_server.start()
    message = str(caught.value)
    assert "\n" not in message and "s3://bucket-" in message and "testing" not in message
    return ck, store, message


def test_server_down_mid_run_is_one_error_and_resume_after_it_returns_is_bitwise(s3_server, s3_store, reference):
    ck, store, message = _fails_then_resumes(s3_server, s3_store, reference, stop_at=4)
    assert json.loads(ck.child(MANIFEST).read_bytes())["step"] >= 3  # commits before the outage stand
    _same(sw.resume(ck, store=store), reference)


@pytest.mark.parametrize("damage", ["W-flip", "beta-flip", "beta-missing"])
def test_damaged_objects_on_s3_fall_back_as_on_disk(s3_server, s3_store, damage):
    store = open_store(s3_store[1], s3_server.options)
    kw = dict(C=1.0, random_state=0, tol=0.0)
    reference = sw.train(s3_store[0], max_iter=5, **kw)
    ck = location(s3_server.url("ckpt"), s3_server.options)
    sw.train(store, max_iter=3, checkpoint_dir=ck, checkpoint_interval=0, **kw)
    man = json.loads(ck.child(MANIFEST).read_bytes())
    fs = s3_server.filesystem()
    if damage == "W-flip":
        target = ck.child(man["W"])
    else:
        array = ck.child("beta.zarr", f"s000001-v{man['beta']['versions']['1']:06d}")
        target = array.child("c.0.0.0")
    if damage == "beta-missing":
        fs.rm(array.path, recursive=True)
    else:
        raw = bytearray(fs.cat_file(target.path))
        raw[len(raw) // 2] ^= 0x01
        fs.pipe_file(target.path, bytes(raw))
    with pytest.warns(CheckpointFallbackWarning, match="damaged.*resuming from the one before it"):
        resumed = sw.train(store, max_iter=5, checkpoint_dir=ck, checkpoint_interval=0, **kw)
    assert resumed.coef_.tobytes() == reference.coef_.tobytes() and resumed.n_iter_ == 5
    assert [n for n in ck.listdir() if n.startswith("manifest.damaged-")]
    # both kept commits damaged: the same clear error as on disk
    for name in (MANIFEST, PREVIOUS):
        fs.rm(ck.child(json.loads(ck.child(name).read_bytes())["W"]).path)
    with pytest.raises(CheckpointError, match="no intact checkpoint left"):
        sw.train(store, max_iter=6, checkpoint_dir=ck, checkpoint_interval=0, **kw)


def test_model_and_checkpoint_on_s3_record_no_credentials(s3_server, s3_store, tmp_path):
    secret = "sEcReT-9f3a"
    options = {**s3_server.options, "key": "AKIA-streamwww-test", "secret": secret}
    store = open_store(s3_store[1], options)
    ck = location(s3_server.url("ckpt"), options)
    model = sw.train(store, C=1.0, random_state=0, max_iter=2, checkpoint_dir=ck)
    out = ck.child("model.npz")
    sw.save_model(model, out)
    back = sw.load_model(out)
    assert back.coef_.tobytes() == model.coef_.tobytes()
    fs = s3_server.filesystem()
    blobs = fs.cat(fs.find(ck.path))
    assert blobs and not [p for p, b in blobs.items() if secret.encode() in b or b"AKIA-streamwww" in b]
    assert json.loads(blobs[ck.child(MANIFEST).path])["data"]["path"] == s3_store[1]


def test_cluster_tasks_write_beta_to_an_s3_checkpoint(s3_server, s3_store):
    distributed = pytest.importorskip("distributed")
    kw = dict(C=[0.5, 2.0], tol=0, random_state=1, device="cpu", max_iter=3, partitions=2)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        plain = sw.train(s3_store[0], client=client, **kw)
        ck = location(s3_server.url("ckpt"), s3_server.options)
        checkpointed = sw.train(s3_store[0], client=client, checkpoint_dir=ck, **kw)
    for a, b in zip(plain, checkpointed):
        assert a.coef_.tobytes() == b.coef_.tobytes()
    man = json.loads(ck.child(MANIFEST).read_bytes())
    # 3 rounds: version 3, or later where a round's step was scaled (its mix is written by the next)
    versions = {int(s): int(v) for s, v in man["beta"]["versions"].items()}
    assert man["finished"] and set(versions) == {0, 1, 2} and min(versions.values()) >= 3
    assert {f"s00000{s}-v{v:06d}" for s, v in versions.items()} <= set(ck.child("beta.zarr").listdir())


def test_a_rerun_task_finds_its_beta_on_s3_identical(s3_server):
    """The conditional PUT of S3 (412 when the key exists): a task that ran again goes on,
    a different write of the same version is refused and leaves the first intact."""
    root = location(s3_server.url("ckpt"), s3_server.options)
    beta = np.random.default_rng(4).normal(size=(2, 6, 3))
    DiskBetas(root, 2, [6], 4).write_version(0, 1, beta)
    again = DiskBetas(root, 2, [6], 4)  # the re-run task's own object, as on a worker
    again.write_version(0, 1, beta.copy())
    with pytest.raises(CheckpointError, match=r"s3://bucket-\d+/ckpt/beta.zarr/s000000-v000001/.*other content"):
        again.write_version(0, 1, -beta)
    assert np.array_equal(again.read(0, 1), beta)
