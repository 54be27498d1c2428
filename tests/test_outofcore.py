"""Out-of-core training: stores, Dask prefetch, beta on disk, checkpoints, exact resume."""

import json
import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

import streamwww as sw
from streamwww.state.checkpoint import (
    CheckpointDir,
    CheckpointFallbackWarning,
    manifest_checksum,
)
from streamwww.errors import CheckpointError
from streamwww.io import write_store
from streamwww.state.versions import BetaVersions

from .conftest import kill_after_commits, make_classification, no_room_for_scratch
from .reference import W_from_beta
from .train_worker import ONE_MODEL, SETTINGS

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _data(rng, n=600, d=12, k=5, sparse=False):
    X, y = make_classification(rng, n=n, d=d, k=k, sparse=sparse, dtype=np.float32)
    return X, y


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("fmt", ["zarr", "parquet"])
def test_one_shard_store_equals_in_memory_fit(tmp_path, rng, sparse, fmt):
    X, y = _data(rng, sparse=sparse)
    store = write_store(tmp_path / f"one.{fmt}", X, y, shard_rows=len(y), format=fmt)
    assert store.n_shards == 1
    a = sw.train(tmp_path / f"one.{fmt}", C=0.05, random_state=5)
    b = sw.train((X, y), C=0.05, random_state=5)
    assert a.n_iter_ == b.n_iter_ > 1
    assert a.coef_.tobytes() == b.coef_.tobytes() and a.intercept_.tobytes() == b.intercept_.tobytes()
    est = sw.WWClassifier(C=0.05, random_state=5).fit(str(tmp_path / f"one.{fmt}"))
    assert est.coef_.tobytes() == b.coef_.tobytes()


def test_sharded_store_trains_and_invariant_holds_on_disk(tmp_path, rng):
    X, y = _data(rng)
    write_store(tmp_path / "s.zarr", X, y, shard_rows=100)
    ck = tmp_path / "ck"
    m = sw.train(tmp_path / "s.zarr", C=0.05, random_state=1, tol=1e-3, checkpoint_dir=ck, checkpoint_interval=0,
                 checkpoint_every=2, inner_passes=2)
    assert m.history_[-1]["rel_gap"] <= 1e-3 and m.score(X, y) > 0.8
    # W on disk equals sum_i x_i beta_i^T pi sigma_{y_i} for the beta versions the manifest names
    with CheckpointDir(ck, lock=False) as cd:
        man = cd.load_manifest()
        W = cd.load_W(man)[0]
    store = sw.open_store(tmp_path / "s.zarr")
    from streamwww.state.betas import DiskBetas

    betas = DiskBetas(ck, 1, store.shard_rows, store.n_classes, versions=man["beta"]["versions"])
    Xs, ys, Bs = [], [], []
    for s in range(store.n_shards):
        Xi, yi = store.read_shard(s)
        Xs.append(Xi), ys.append(yi), Bs.append(betas.get(s)[0])
    Xall, yall, Ball = np.vstack(Xs), np.concatenate(ys), np.vstack(Bs)
    assert Ball.min() >= 0 and Ball.max() <= 0.05 and Ball.max() > 0
    np.testing.assert_allclose(W, W_from_beta(Xall, yall, Ball, store.n_classes, bias=1.0), atol=1e-10)
    assert man["finished"] is True
    # garbage is collected as training goes: what the latest and the kept previous manifest
    # name (the fallback), nothing else
    prev = json.loads((ck / "manifest.prev.json").read_text())
    assert prev["step"] < man["step"]
    assert sorted(p.name for p in ck.glob("W-*.npy")) == sorted({man["W"], prev["W"]})
    named = {f"s{int(s):06d}-v{v:06d}" for m in (man, prev) for s, v in m["beta"]["versions"].items() if v > 0}
    assert {p.name for p in (ck / "beta.zarr").iterdir() if p.name.startswith("s")} == named
    assert len(named) >= store.n_shards and not list(ck.glob("*.tmp"))


def test_the_versions_no_manifest_names_are_the_ones_collected():
    """The rule both collectors (disk, object store) apply to ``beta.zarr``'s entries: a
    version no manifest names goes (with ``keep_newer``, only one older than the latest's);
    any other name (spares, Zarr's metadata, a stranger's) is never listed."""
    from streamwww.state.checkpoint import _unnamed_versions
    from streamwww.state.versions import beta_name, parse_beta_name

    assert parse_beta_name(beta_name(3, 12)) == (3, 12)
    for other in ("spare-s000003", "zarr.json", "s3-v12", "s000003-v000012.tmp", "xs000003-v000012"):
        assert parse_beta_name(other) is None
    latest, previous = {"beta": {"versions": {"0": 5, "1": 2}}}, {"beta": {"versions": {"0": 4, "1": 2}}}
    names = [beta_name(0, v) for v in (3, 4, 5, 6)] + [beta_name(1, 1), beta_name(1, 2), beta_name(2, 1),
                                                      "spare-s000000", "zarr.json"]
    assert _unnamed_versions(names, [latest, previous], False) == [
        beta_name(0, 3), beta_name(0, 6), beta_name(1, 1), beta_name(2, 1)]
    assert _unnamed_versions(names, [latest, previous], True) == [beta_name(0, 3), beta_name(1, 1)]
    assert _unnamed_versions(names, [], False) == names[:7]  # no manifest: every version was a killed run's


def test_list_of_C_streamed_equals_single_runs(tmp_path, rng):
    X, y = _data(rng, sparse=True)
    write_store(tmp_path / "s.zarr", X, y, shard_rows=150)
    models = sw.train(tmp_path / "s.zarr", C=[0.1, 2.0], random_state=4, max_iter=12)
    for m in models:
        single = sw.train(tmp_path / "s.zarr", C=m.C, random_state=4, max_iter=12)
        assert m.coef_.tobytes() == single.coef_.tobytes()


def _run_worker(store, ck, *options, env=None):
    return subprocess.Popen([sys.executable, str(ROOT / "tests" / "train_worker.py"), str(store), str(ck), *options],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=None if env is None else {**os.environ, **env})


# A commit at every shard; or at most every 0.05 s (kills between commits), with beta kept in
# memory (written by commits only), beyond the budget (memory_budget=0) in a scratch file or,
# without room for one, written every epoch; one model read from disk (its objectives late: a
# checkpoint holds W_e uncertified, a stop rewinds); the block pass on two threads, against
# the reference on one; Crammer-Singer
@pytest.mark.parametrize("options", [(), ("0.05", "auto"), ("0.05", "0"), ("0.05", "0", "versions"),
                                     ("0", "0", "0.5"), ("0.05", "0", "threads"), ("0.05", "0", "cs")])
def test_sigkill_at_random_moments_then_resume_is_bitwise_identical(tmp_path, options):
    env = None
    block = {}
    if options[-1:] == ("versions",):
        options, env = options[:-1], {"NO_SCRATCH_ROOM": "1"}
    if options[-1:] == ("threads",):
        options, env, block = options[:-1], {"TRAIN_BLOCK_ROWS": "8", "TRAIN_JOBS": "2"}, {"block_rows": 8}
    if options[-1:] == ("cs",):
        options, env, block = options[:-1], {"TRAIN_LOSS": "cs"}, {"loss": "cs"}
    rng = np.random.default_rng(2024)
    X, y = _data(rng, n=900, d=20, k=5)  # (k in conftest.LANES_K: the workers and the reference share builds)
    store = tmp_path / "s.zarr"
    write_store(store, X, y, shard_rows=100)
    settings = {k: v for k, v in SETTINGS.items() if k != "checkpoint_interval"}
    if len(options) > 2:
        settings.update(ONE_MODEL, C=float(options[2]))
    reference = sw.train(store, **settings, **block, n_jobs=1)
    reference = reference if isinstance(reference, list) else [reference]
    ck = tmp_path / "ck"

    def step():
        try:
            return json.loads((ck / "manifest.json").read_text())["step"]
        except (FileNotFoundError, json.JSONDecodeError):
            return 0

    kills, steps_seen = kill_after_commits(lambda: _run_worker(store, ck, *options, env=env), step, rng, tries=4,
                                           max_delay=0.5 if not options else 0.2)
    assert kills >= 1
    proc = _run_worker(store, ck, *options, env=env)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    if options[1:2] == ("0",):
        versions = env is not None and "NO_SCRATCH_ROOM" in env
        assert ("written to disk every epoch" if versions else "kept in a scratch file") in err, err
    resumed = sw.resume(ck)  # already finished: changes nothing, returns the models
    resumed = resumed if isinstance(resumed, list) else [resumed]
    assert len(resumed) == len(reference)
    for a, b in zip(resumed, reference):
        assert a.n_iter_ == b.n_iter_
        assert a.coef_.tobytes() == b.coef_.tobytes() and a.intercept_.tobytes() == b.intercept_.tobytes()
    assert len(steps_seen - {0}) >= 1  # the kills landed after committed checkpoints
    # what is on disk: the latest commit and its fallback, nothing else (no spare either: a
    # killed run's spares go when the run is resumed, the run's own at its end)
    man = json.loads((ck / "manifest.json").read_text())
    prev = json.loads((ck / "manifest.prev.json").read_text()) if (ck / "manifest.prev.json").exists() else man
    named = {f"s{int(s):06d}-v{v:06d}" for m in (man, prev) for s, v in m["beta"]["versions"].items() if v > 0}
    assert {p.name for p in (ck / "beta.zarr").iterdir() if p.name.startswith("s")} == named


def test_resume_in_process_after_interrupt_and_finished_run_unchanged(tmp_path, rng):
    X, y = _data(rng)
    store = tmp_path / "s.zarr"
    write_store(store, X, y, shard_rows=120)
    kw = dict(C=0.7, random_state=3, max_iter=30, tol=1e-6)
    reference = sw.train(store, **kw)
    ck = tmp_path / "ck"
    stopped = sw.train(store, checkpoint_dir=ck, checkpoint_interval=0, checkpoint_every=2,
                       callback=lambda info: info["epoch"] >= 7, **kw)
    # (the callback runs at the evaluated epochs: the first at or after 7 stops)
    assert stopped.n_iter_ == stopped.history_[-1]["epoch"] >= 7 and stopped.n_iter_ < reference.n_iter_
    # 'stopped' is a user decision: mark the run as running again by training with the same settings
    man = json.loads((ck / "manifest.json").read_text())
    man["results"][0]["status"] = "running"
    man["finished"] = False
    man["checksum"] = manifest_checksum(man)  # an edit the checksum does not accept unless re-sealed
    (ck / "manifest.json").write_text(json.dumps(man))
    resumed = sw.train(store, checkpoint_dir=ck, checkpoint_interval=0, checkpoint_every=2, **kw)
    assert resumed.coef_.tobytes() == reference.coef_.tobytes() and resumed.n_iter_ == reference.n_iter_
    before = sorted(os.listdir(ck))
    again = sw.resume(ck)
    assert again.coef_.tobytes() == reference.coef_.tobytes()
    assert sorted(os.listdir(ck)) == before


def test_changed_store_and_other_settings_are_refused(tmp_path, rng):
    X, y = _data(rng)
    store = tmp_path / "s.zarr"
    write_store(store, X, y, shard_rows=200)
    ck = tmp_path / "ck"
    sw.train(store, C=1.0, random_state=0, max_iter=3, checkpoint_dir=ck)
    with pytest.raises(CheckpointError, match="other settings.*C"):
        sw.train(store, C=2.0, random_state=0, max_iter=3, checkpoint_dir=ck)
    X2 = X.copy()
    X2[0, 0] += 1
    write_store(tmp_path / "t.zarr", X2, y, shard_rows=200)
    with pytest.raises(CheckpointError, match="other data|store changed"):
        sw.train(tmp_path / "t.zarr", C=1.0, random_state=0, max_iter=3, checkpoint_dir=ck)
    with pytest.raises(CheckpointError, match="other data|store changed"):
        sw.resume(ck, store=tmp_path / "t.zarr")
    # a store that moved: the error says how to give its new path, and that path resumes
    store.rename(tmp_path / "moved.zarr")
    with pytest.raises(FileNotFoundError, match=r"s\.zarr: the store .*ck trained on does not exist; if it "
                                                r"moved, give its new path \(store=\.\.\., or --store\)"):
        sw.resume(ck)
    assert sw.resume(ck, store=tmp_path / "moved.zarr", model_out=False).n_iter_ == 3


def test_lock_stops_a_second_trainer(tmp_path):
    held = CheckpointDir(tmp_path / "ck")
    try:
        with pytest.raises(CheckpointError, match="another trainer"):
            CheckpointDir(tmp_path / "ck")
    finally:
        held.close()
    CheckpointDir(tmp_path / "ck").close()  # free again


def _damage(ck, man, what: str) -> None:
    """Damage one piece of the commit ``man`` names in checkpoint directory ``ck``."""
    mfile = ck / ("manifest.json" if man["step"] == json.loads((ck / "manifest.json").read_text())["step"]
                  else "manifest.prev.json")
    if what == "manifest-json":
        mfile.write_text("{not json")
    elif what == "manifest-edit":  # valid JSON, edited without a new checksum
        edited = dict(man, cursor={**man["cursor"], "epoch": 0})
        mfile.write_text(json.dumps(edited))
    elif what == "W-missing":
        (ck / man["W"]).unlink()
    elif what == "W-flip":
        raw = bytearray((ck / man["W"]).read_bytes())
        raw[-3] ^= 0x40
        (ck / man["W"]).write_bytes(bytes(raw))
    elif what in ("beta-missing", "beta-chunk", "beta-flip"):
        v = man["beta"]["versions"]["1"]
        arr = ck / "beta.zarr" / f"s000001-v{v:06d}"
        chunks = sorted(p for p in arr.rglob("*") if p.is_file() and p.name != "zarr.json")
        if what == "beta-missing":
            import shutil

            shutil.rmtree(arr)
        elif what == "beta-chunk":
            chunks[0].unlink()
        else:  # any byte: the chunk's crc32c catches what the beta sums would miss
            raw = bytearray(chunks[0].read_bytes())
            raw[len(raw) // 2] ^= 0x01
            chunks[0].write_bytes(bytes(raw))
    elif what == "version":
        mfile.write_text(json.dumps(dict(man, version=99)))
    else:  # pragma: no cover
        raise KeyError(what)


DAMAGE = ["manifest-json", "manifest-edit", "W-missing", "W-flip", "beta-missing", "beta-chunk", "beta-flip",
          "version"]


@pytest.mark.parametrize("damage", DAMAGE)
def test_damaged_latest_checkpoint_falls_back_to_the_previous_one(tmp_path, rng, damage):
    """Damage to the latest commit is found at resume; training continues from the commit
    before it, says so, and ends with the uninterrupted run's model, bitwise."""
    X, y = _data(rng)
    store = tmp_path / "s.zarr"
    write_store(store, X, y, shard_rows=200)
    kw = dict(C=1.0, random_state=0, tol=0.0)
    reference = sw.train(store, max_iter=5, **kw)
    ck = tmp_path / "ck"
    sw.train(store, max_iter=3, checkpoint_dir=ck, checkpoint_interval=0, **kw)
    _damage(ck, json.loads((ck / "manifest.json").read_text()), damage)
    with pytest.warns(CheckpointFallbackWarning, match="damaged.*resuming from the one before it"):
        resumed = sw.train(store, max_iter=5, checkpoint_dir=ck, checkpoint_interval=0, **kw)
    assert resumed.coef_.tobytes() == reference.coef_.tobytes()
    assert resumed.n_iter_ == 5 and list(ck.glob("manifest.damaged-*.json"))


@pytest.mark.parametrize("damage", ["manifest-json", "W-flip", "beta-chunk", "beta-flip"])
def test_no_intact_checkpoint_is_a_clear_error(tmp_path, rng, damage):
    X, y = _data(rng)
    store = tmp_path / "s.zarr"
    write_store(store, X, y, shard_rows=200)
    ck = tmp_path / "ck"
    sw.train(store, C=1.0, random_state=0, max_iter=2, checkpoint_dir=ck, checkpoint_interval=0, tol=0.0)
    latest = json.loads((ck / "manifest.json").read_text())
    previous = json.loads((ck / "manifest.prev.json").read_text())
    _damage(ck, previous, damage)
    _damage(ck, latest, damage)
    with pytest.raises(CheckpointError, match="no intact checkpoint left"):
        sw.train(store, C=1.0, random_state=0, max_iter=4, checkpoint_dir=ck, checkpoint_interval=0, tol=0.0)


def test_model_file_round_trip(tmp_path, rng):
    X, y = _data(rng)
    labels = np.array(["a", "b", "c", "d", "e"])[y]
    m = sw.train((X, labels), C=0.2, random_state=0, model_out=tmp_path / "m.npz")
    loaded = sw.load_model(tmp_path / "m.npz")
    assert np.array_equal(loaded.predict(X), m.predict(X))
    assert loaded.coef_.tobytes() == m.coef_.tobytes() and loaded.history_ == m.history_
    assert loaded.get_params() == m.get_params()
    with pytest.raises(ValueError, match="not a streamwww model"):
        np.savez(tmp_path / "x.npz", a=np.zeros(2))
        sw.load_model(tmp_path / "x.npz")


def test_a_damaged_model_file_is_one_error_naming_it(tmp_path, rng):
    """A truncated model file, or one with a changed byte (the archive's CRC-32 of each
    member), is a ValueError naming the file, never a zipfile traceback or a model."""
    import zipfile

    X, y = _data(rng)
    sw.train((X, y), C=0.2, random_state=0, model_out=tmp_path / "m.npz")
    whole = (tmp_path / "m.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(whole[:len(whole) // 2])
    with zipfile.ZipFile(tmp_path / "m.npz") as z:
        member = z.getinfo("coef.npy")
        at = member.header_offset + 30 + len(member.filename) + member.file_size // 2
    flipped = bytearray(whole)
    flipped[at] ^= 0xFF
    (tmp_path / "flip.npz").write_bytes(bytes(flipped))
    for name, why in (("cut.npz", "BadZipFile"), ("flip.npz", "Bad CRC-32 for file 'coef.npy'")):
        with pytest.raises(ValueError, match=f"{name}: not a streamwww model file, or a damaged one .*{why}"):
            sw.load_model(tmp_path / name)
    with pytest.raises(FileNotFoundError, match=r"nope\.npz: no such model file$"):  # (not "[Errno 2] ...")
        sw.load_model(tmp_path / "nope.npz")


@pytest.mark.parametrize("prefetch,eval_every,mix,threads", [
    (1, 1, 1, 2), (2, 3, 1, 3), (3, 2, 1, 1), (2, 1, 2, 1), (1, 2, 3, 2), (4, 100, 2, 1), (4, 2, 2, 3),
    (6, 1, 2, 2)])
def test_prefetch_across_epochs_is_exact(tmp_path, rng, prefetch, eval_every, mix, threads):
    """The Dask feed loads the next epoch's (or the evaluation's) first units, with
    their beta when no shard of theirs is still to be trained, while an epoch ends;
    beta must still be each shard's latest version: with 3 shards an epoch often
    starts with a shard the previous one ended with."""
    from streamwww.backends import get_backend
    from streamwww.engine.config import SolverConfig
    from streamwww.engine.driver import run_bcd
    from streamwww.engine.order import shard_order
    from streamwww.state.betas import DiskBetas, InMemoryBetas
    from streamwww.stream.feed import LoaderPool, PrefetchFeed, SyncFeed
    from streamwww.stream.sources import StoreData

    X, y = _data(rng, sparse=True)
    write_store(tmp_path / "s.zarr", X, y, shard_rows=200)
    data = StoreData(sw.open_store(tmp_path / "s.zarr"))
    cfg = SolverConfig(Cs=(0.3, 1.0), tol=0.0, max_iter=9, seed=5, eval_every=eval_every, mix_shards=mix)
    orders = [tuple(shard_order(cfg.seed, e, data.n_shards)) for e in range(cfg.max_iter)]
    assert any(a[-1] == b[0] for a, b in zip(orders, orders[1:]))  # the case that matters occurs
    backend = get_backend("cpu")
    sync_betas = InMemoryBetas(2, data.shard_rows, data.n_classes)
    ref = run_bcd(data, sync_betas, cfg, backend, feed=SyncFeed(data, sync_betas, cfg.bias))
    with LoaderPool(n_threads=threads) as ex:
        betas = DiskBetas(tmp_path / "b", 2, data.shard_rows, data.n_classes, executor=ex, max_pending=prefetch)
        feed = PrefetchFeed(data, betas, cfg.bias, ex, prefetch)
        got = run_bcd(data, betas, cfg, backend, feed=feed)
        betas.flush()
    for r, g in zip(ref, got):
        assert r.W.tobytes() == g.W.tobytes()
        assert r.history == [{**h, "time": r_h["time"], "wall_time": r_h["wall_time"]}
                             for h, r_h in zip(g.history, r.history)]


@pytest.mark.parametrize("room", [False, True])
def test_without_checkpoints_old_beta_versions_are_deleted(tmp_path, rng, monkeypatch, room):
    """No checkpoint needs superseded beta versions: disk use must not grow per epoch
    (versions written every epoch: no room for a scratch file); with the scratch file,
    no version is written at all."""
    import tempfile

    X, y = _data(rng)
    write_store(tmp_path / "s.zarr", X, y, shard_rows=100)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    if not room:
        no_room_for_scratch(monkeypatch)
    counts, spares, taken = [], [], []
    take = BetaVersions._take_spare

    def counted_take(self, s, path):
        result = take(self, s, path)
        taken.append(result[0])
        return result

    monkeypatch.setattr(BetaVersions, "_take_spare", counted_take)

    def cb(info):
        (root,) = scratch.glob("streamwww-beta-*/beta.zarr")
        counts.append(len([p for p in root.iterdir() if re.fullmatch(r"s\d{6}-v\d{6}", p.name)]))
        spares.append(len(list(root.glob("spare-s*"))))

    n_shards = 6
    for options, most in [(dict(checkpoint_every=99), n_shards + 2), ({}, 2 * n_shards + 2)]:
        counts.clear()
        spares.clear()
        taken.clear()
        sw.train(tmp_path / "s.zarr", C=0.05, random_state=1, tol=0.0, max_iter=6, callback=cb, prefetch=2,
                 memory_budget=0, eval_every=1, **options)  # beta written every epoch (it would fit in memory)
        assert len(counts) == 6
        if room:
            assert counts == spares == [0] * 6, (counts, spares)
        else:
            # one version per shard, plus at most the writes still in flight (prefetch = 2); with
            # the objectives late (the default here: one model, a store read from disk) also
            # the version of the epoch's start, which a stop returns to
            assert all(c <= most for c in counts) and counts[-1] >= n_shards, counts
            # and at most one superseded version per shard kept for its next one (engine: no inodes
            # created or freed per version): on disk between its drop and its shard's next write
            # (how many at a callback depends on the loader's timing), taken by later writes
            assert all(c <= n_shards for c in spares), spares
            assert sum(taken) >= n_shards, (sum(taken), len(taken))
        assert not list(scratch.glob("streamwww-beta-*"))  # the temporary folder is removed at the end


def test_a_beta_being_written_is_read_from_memory(tmp_path, monkeypatch):
    """A prefetch reads a version whose background write has not finished: it gets
    the array that was put (from the outbox), and later the same values from disk."""
    import threading

    from streamwww.state.betas import DiskBetas
    from streamwww.stream.feed import LoaderPool

    release = threading.Event()
    orig = DiskBetas._write

    def slow_write(self, s, v, beta):
        assert release.wait(30)
        orig(self, s, v, beta)

    monkeypatch.setattr(DiskBetas, "_write", slow_write)
    rng = np.random.default_rng(0)
    with LoaderPool(n_threads=2) as ex:
        betas = DiskBetas(tmp_path, 2, [5, 3], 4, executor=ex, keep_superseded=False)
        b0, b1 = rng.normal(size=(2, 5, 3)), rng.normal(size=(2, 3, 3))
        betas.put_group([(0, b0), (1, b1)])
        assert betas.version(0) == betas.version(1) == 1
        assert not (tmp_path / "beta.zarr" / "s000000-v000001" / "zarr.json").exists()  # still unwritten
        got = betas.read_group((1, 0), (1, 1))
        assert np.array_equal(got, np.concatenate([b1, b0], axis=1))
        release.set()
        assert np.array_equal(betas.sums(0, np.arange(2)), b0.sum(axis=(1, 2)))  # waits for the write
        betas.flush()
        assert not betas._outbox
        assert np.array_equal(betas.read(0, 1), b0) and np.array_equal(betas.get(1), b1)
        out = np.full((2, 8, 3), np.nan)
        betas.read(1, 0, out=out[:, 5:])  # version 0: zeros, into a view
        assert np.all(out[:, 5:] == 0) and np.isnan(out[:, :5]).all()


def test_checkpointed_betas_are_fsynced_in_the_background(tmp_path, monkeypatch):
    """With a checkpoint, each written beta version is fsynced by the background thread
    (once), so a commit does not pay for it; a failed fsync fails the commit."""
    import threading

    from streamwww.state import betas as C
    from streamwww.stream.feed import LoaderPool

    calls = []
    real = C.fsync_tree

    def spy(path):
        calls.append((Path(path).name, threading.current_thread().name))
        real(path)

    monkeypatch.setattr(C, "fsync_tree", spy)
    rng = np.random.default_rng(1)
    with LoaderPool(n_threads=1) as ex:
        betas = C.DiskBetas(tmp_path, 1, [4, 4], 3, executor=ex, durable=True)
        betas.put_group([(0, rng.normal(size=(1, 4, 2))), (1, rng.normal(size=(1, 4, 2)))])
        betas.put_group([(0, rng.normal(size=(1, 4, 2)))])  # version 1 of shard 0 is superseded
        assert betas.flush() == {0, 1}
        synced = sorted(name for name, thread in calls)
        assert synced == ["s000000-v000001", "s000000-v000002", "s000001-v000001"]
        assert all(thread.startswith("streamwww-fsync") for _, thread in calls)

        def broken(path):
            raise OSError(5, "Input/output error")

        monkeypatch.setattr(C, "fsync_tree", broken)
        betas.put_group([(1, rng.normal(size=(1, 4, 2)))])
        with pytest.raises(OSError, match="Input/output"):
            betas.flush()
        betas.close()


def test_commit_in_the_background_captures_state_and_spares_newer_versions(tmp_path, monkeypatch):
    """A commit captures W, state and versions when called and completes on its own
    thread while new versions are written; its first garbage scan (which clears what
    a killed run left) must not delete those newer versions; the final (waited)
    commit deletes everything neither the manifest nor the previous one (the fallback) names."""
    import threading

    from streamwww.state import betas as C

    go = threading.Event()
    threads = []
    real_end = C.DiskBetas.end_commit

    def held_end(self, plan):
        threads.append(threading.current_thread().name)
        assert go.wait(30)
        return real_end(self, plan)

    monkeypatch.setattr(C.DiskBetas, "end_commit", held_end)
    rng = np.random.default_rng(3)
    ck = CheckpointDir(tmp_path)
    try:
        stray = tmp_path / "beta.zarr"
        betas = C.DiskBetas(tmp_path, 1, [4, 4], 3, durable=True)
        (stray / "s000001-v000007").mkdir()  # left by a killed run: no manifest names it
        (tmp_path / "W-000009.npy").write_bytes(b"killed")
        b1 = rng.normal(size=(1, 4, 2))
        betas.put_group([(0, b1), (1, rng.normal(size=(1, 4, 2)))])
        W = np.ones((1, 3, 3))
        state = {"cursor": {"epoch": 1}}
        ck.commit(1, W, state, betas)
        W[...] = 5.0  # training goes on: the commit has its own copies
        state["cursor"]["epoch"] = 2
        b2 = rng.normal(size=(1, 4, 2))
        betas.put(0, b2)  # version 2, written while commit 1 is in progress
        assert not ck.has_checkpoint()
        go.set()
        ck.wait()
        assert threads == ["streamwww-commit_0"]
        man = ck.load_manifest()
        assert man["cursor"] == {"epoch": 1} and man["beta"]["versions"] == {"0": 1, "1": 1}
        assert np.array_equal(ck.load_W(man), np.ones((1, 3, 3)))
        assert np.allclose(man["beta"]["sums"][0], b1.sum())
        assert not (tmp_path / "W-000009.npy").exists()  # the killed run's: collected
        # newer than the manifest: kept while training goes on (it may be this run's)
        assert np.array_equal(betas.read(0, 2), b2) and (stray / "s000001-v000007").exists()
        ck.commit(2, W, state, betas, wait=True)
        man = ck.load_manifest()
        assert man["beta"]["versions"] == {"0": 2, "1": 1} and np.allclose(man["beta"]["sums"][0], b2.sum())
        assert sorted(p.name for p in stray.iterdir() if p.name.startswith("s")) == \
            ["s000000-v000001", "s000000-v000002", "s000001-v000001"]
        assert sorted(p.name for p in tmp_path.glob("W-*")) == ["W-000001.npy", "W-000002.npy"]
        assert ck.load_manifest("manifest.prev.json")["step"] == 1
        betas.close()
    finally:
        ck.close()


def test_a_failed_background_commit_stops_training_and_the_last_commit_resumes(tmp_path, rng, monkeypatch):
    """An error in a background commit surfaces from train() at the next commit; the
    checkpoint on disk is the last complete one and resumes to the uninterrupted model."""
    from streamwww.state import checkpoint as C

    X, y = _data(rng)
    store = tmp_path / "s.zarr"
    write_store(store, X, y, shard_rows=100)
    kw = dict(C=0.5, random_state=2, max_iter=5, tol=0.0)
    reference = sw.train(store, **kw)
    real = C.CheckpointDir._commit

    def fail_third(self, step, *a):
        if step == 3:
            raise OSError(28, "No space left on device")
        return real(self, step, *a)

    monkeypatch.setattr(C.CheckpointDir, "_commit", fail_third)
    ck = tmp_path / "ck"
    with pytest.raises(OSError, match="No space left"):
        sw.train(store, checkpoint_dir=ck, checkpoint_interval=0, **kw)
    man = json.loads((ck / "manifest.json").read_text())
    assert man["step"] == 2 and man["cursor"]["epoch"] == 2 and not man["finished"]
    monkeypatch.setattr(C.CheckpointDir, "_commit", real)
    resumed = sw.resume(ck)
    assert resumed.coef_.tobytes() == reference.coef_.tobytes() and resumed.n_iter_ == reference.n_iter_


def test_sums_follow_versions_when_writes_finish_out_of_order(tmp_path, monkeypatch):
    """With several loader threads two versions of one shard can be written at once;
    the sum of beta reported (and committed) must be the current version's."""
    import threading

    from streamwww.state import betas as C
    from streamwww.stream.feed import LoaderPool

    second_done = threading.Event()
    real = C.DiskBetas._store

    def store(self, s, v, beta):  # sum and write
        if v == 1:
            assert second_done.wait(30)  # version 1 is stored after version 2
        real(self, s, v, beta)
        if v == 2:
            second_done.set()

    monkeypatch.setattr(C.DiskBetas, "_store", store)
    rng = np.random.default_rng(4)
    b1, b2 = rng.normal(size=(2, 1, 5, 2))
    with LoaderPool(n_threads=2) as ex:
        betas = C.DiskBetas(tmp_path, 1, [5], 3, executor=ex, max_pending=4)
        betas.put(0, b1)
        betas.put(0, b2)
        assert np.allclose(betas.sums(0, np.arange(1)), b2.sum())
        betas.flush()  # waits for both writes
        assert not betas._outbox
        assert np.allclose(betas.sums(0, np.arange(1)), b2.sum())
        assert np.array_equal(betas.get(0), b2)
        betas.close()


def test_a_spare_left_by_a_killed_run_goes_and_the_versions_stay(tmp_path):
    """A superseded version is kept as its shard's spare and becomes the shard's next version
    (its files overwritten in place); a killed run leaves its spares, which the next run on
    the directory deletes, and never a spare in place of a version."""
    from streamwww.state import betas as C
    from streamwww.stream.feed import LoaderPool

    rng = np.random.default_rng(8)
    b1, b2, b3, b4 = rng.normal(size=(4, 1, 7, 2))
    with LoaderPool(n_threads=1) as ex:
        betas = C.DiskBetas(tmp_path, 1, [7, 7], 3, executor=ex, keep_superseded=False)
        for b in (b1, b2, b3):
            betas.put(0, b)
        betas.put(1, b4)
        betas.flush()  # (a killed run: no close)
    root = tmp_path / "beta.zarr"
    assert sorted(p.name for p in root.iterdir() if p.name.startswith("s")) == \
        ["s000000-v000003", "s000001-v000001", "spare-s000000"]
    with LoaderPool(n_threads=1) as ex:
        again = C.DiskBetas(tmp_path, 1, [7, 7], 3, executor=ex, versions={0: 3, 1: 1}, keep_superseded=False)
        assert not (root / "spare-s000000").exists()
        assert np.array_equal(again.get(0), b3) and np.array_equal(again.get(1), b4)
        again.close()
    # an instance without the loader (a cluster task's) keeps no spares and deletes none
    (root / "spare-s000001").mkdir()
    C.DiskBetas(tmp_path, 1, [7, 7], 3, versions={0: 3, 1: 1})
    assert (root / "spare-s000001").exists()


def test_a_spare_of_an_own_version_keeps_its_zarr_json_and_another_gets_it_written(tmp_path):
    """A version this instance wrote is read without comparing its zarr.json again and its
    spare's zarr.json is not written again; a version of another instance (a resumed run's)
    is compared when read, and its spare's zarr.json is written anew. Every version still
    reads back as written, also in a new instance, and a damaged chunk is still found."""
    from streamwww.state import betas as C
    from streamwww.stream.feed import LoaderPool

    rng = np.random.default_rng(9)
    b = rng.normal(size=(6, 1, 7, 2))
    root = tmp_path / "beta.zarr"
    with LoaderPool(n_threads=1) as ex:
        first = C.DiskBetas(tmp_path, 1, [7], 3, executor=ex, keep_superseded=False)
        first.put(0, b[0])
        first.put(0, b[1])
        first.flush()  # v1 went to the spare, v2 on disk
        os.utime(root / "spare-s000000" / "zarr.json", ns=(10**9, 10**9))  # a write would change it
        first.put(0, b[2])
        first.flush()  # v3: the spare (an own version) taken, its zarr.json kept
        assert (root / "s000000-v000003" / "zarr.json").stat().st_mtime_ns == 10**9
        assert np.array_equal(first.get(0), b[2])
        first.close()
    with LoaderPool(n_threads=1) as ex:
        again = C.DiskBetas(tmp_path, 1, [7], 3, executor=ex, versions={0: 3}, keep_superseded=False)
        assert np.array_equal(again.get(0), b[2])
        (root / "s000000-v000003" / "zarr.json").write_bytes(b"{}")  # not this instance's any more
        again.put(0, b[3])
        again.flush()  # v3 (not its own) went to the spare
        again.put(0, b[4])
        again.flush()  # v5: that spare, its zarr.json written again
        again.close()
    again = C.DiskBetas(tmp_path, 1, [7], 3, versions={0: 5})
    assert np.array_equal(again.get(0), b[4])
    (root / "s000000-v000005" / "zarr.json").write_bytes(b"{}")
    with pytest.raises(CheckpointError, match="s000000-v000005"):
        C.DiskBetas(tmp_path, 1, [7], 3, versions={0: 5}).get(0)  # compared: not its own
    with LoaderPool(n_threads=1) as ex:
        own = C.DiskBetas(tmp_path, 1, [7], 3, executor=ex, versions={0: 5}, keep_superseded=False)
        own.put(0, b[5])
        own.flush()
        chunk = next(p for p in (root / "s000000-v000006").iterdir() if p.name != "zarr.json")
        data = bytearray(chunk.read_bytes())
        data[len(data) // 2] ^= 0xFF
        chunk.write_bytes(bytes(data))
        with pytest.raises(CheckpointError, match="s000000-v000006"):
            own.get(0)  # an own version's chunk is still checked
        own.close()


def test_no_spares_where_the_disk_lacks_room_for_them(tmp_path, monkeypatch):
    """Spares cost up to one version of every shard: a file system without SPARE_ROOM times
    that free deletes superseded versions instead (and still cleans a killed run's spares)."""
    from streamwww.state import betas as C
    from streamwww.stream.feed import LoaderPool

    one_version = 8 * 1 * 2 * 14  # n_models x (k - 1) x rows, float64
    (tmp_path / "beta.zarr").mkdir()
    (tmp_path / "beta.zarr" / "spare-s000000").mkdir()
    rng = np.random.default_rng(9)
    for free, spares in [(C.SPARE_ROOM * one_version - 1, []), (C.SPARE_ROOM * one_version, ["spare-s000000"])]:
        monkeypatch.setattr(C, "_free_bytes", lambda path, free=free: free)
        with LoaderPool(n_threads=1) as ex:
            betas = C.DiskBetas(tmp_path, 1, [7, 7], 3, executor=ex, keep_superseded=False)
            for b in rng.normal(size=(3, 1, 7, 2)):
                betas.put(0, b)
            betas.flush()
            got = sorted(p.name for p in betas.root.glob("spare-s*"))
            assert got == spares and np.array_equal(betas.get(0), b)
            betas.close()
        shutil.rmtree(tmp_path / "beta.zarr")


@pytest.mark.parametrize("older_first", [True, False])
def test_superseded_versions_are_deleted_whichever_write_finishes_last(tmp_path, monkeypatch, older_first):
    """Without a checkpoint only the newest version of a shard's beta stays on disk,
    also when two versions are written at once and the older one finishes last."""
    import threading

    from streamwww.state import betas as C
    from streamwww.stream.feed import LoaderPool

    first, last = (1, 2) if older_first else (2, 1)
    first_done = threading.Event()
    real = C.DiskBetas._write

    def write(self, s, v, beta):
        if v == last:
            assert first_done.wait(30)
        real(self, s, v, beta)
        if v == first:
            first_done.set()

    monkeypatch.setattr(C.DiskBetas, "_write", write)
    rng = np.random.default_rng(5)
    b1, b2 = rng.normal(size=(2, 1, 5, 2))
    with LoaderPool(n_threads=2) as ex:
        betas = C.DiskBetas(tmp_path, 1, [5], 3, executor=ex, max_pending=4, keep_superseded=False)
        betas.put(0, b1)
        betas.put(0, b2)
        betas.flush()
        assert sorted(p.name for p in betas.root.iterdir() if p.name.startswith("s")) == \
            ["s000000-v000002", "spare-s000000"]  # the version superseded, kept for the next one
        assert np.array_equal(betas.get(0), b2)
        spare = betas.root / "spare-s000000"
        inodes = {p.name: p.stat().st_ino for p in [spare, *spare.iterdir()]}
        inodes["s000000-v000003"] = inodes.pop(spare.name)  # the same directory and files, renamed
        b3 = rng.normal(size=(1, 5, 2))
        betas.put(0, b3)  # written into the spare, in place: the files the spare had
        betas.flush()
        assert sorted(p.name for p in betas.root.iterdir() if p.name.startswith("s")) == \
            ["s000000-v000003", "spare-s000000"]
        v3 = betas.root / "s000000-v000003"
        assert {p.name: p.stat().st_ino for p in [v3, *v3.iterdir()]} == inodes
        assert np.array_equal(betas.get(0), b3) and np.array_equal(betas.read(0, 3), b3)
        betas.close()
        assert sorted(p.name for p in betas.root.iterdir() if p.name.startswith("s")) == ["s000000-v000003"]


def test_scratch_dirs_of_dead_runs_are_removed(tmp_path, rng, monkeypatch):
    """A run without checkpoint_dir keeps beta in $TMPDIR/streamwww-beta-*; a SIGKILLed
    one leaves it behind. The next run removes such directories unless a live process
    holds their LOCK (or, without LOCK, unless they are new)."""
    import tempfile

    from streamwww.storage.fsutil import try_lock, unlock

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    dead = scratch / "streamwww-beta-dead"
    (dead / "beta.zarr").mkdir(parents=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom streamwww.storage.fsutil import try_lock\n"
         "assert try_lock(sys.argv[1]) is not None\nprint('locked', flush=True)\ntime.sleep(120)",
         str(dead / "LOCK")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        live = scratch / "streamwww-beta-live"
        live.mkdir()
        fd = try_lock(live / "LOCK")
        fresh = scratch / "streamwww-beta-fresh"  # no LOCK yet: maybe a run starting up
        fresh.mkdir()
        old = scratch / "streamwww-beta-old"  # no LOCK and an hour old: abandoned
        old.mkdir()
        os.utime(old, (0, 0))
        X, y = _data(rng)
        write_store(tmp_path / "s.zarr", X, y, shard_rows=200)
        sw.train(tmp_path / "s.zarr", C=0.5, random_state=0, max_iter=2)
        assert dead.exists() and live.exists() and fresh.exists() and not old.exists()
        holder.kill()  # the lock goes with its holder
        holder.wait()
        sw.train(tmp_path / "s.zarr", C=0.5, random_state=0, max_iter=2)
        # the dead run's directory is gone; both runs removed their own
        assert sorted(p.name for p in scratch.glob("streamwww-*")) == ["streamwww-beta-fresh", "streamwww-beta-live"]
        unlock(fd)
    finally:
        holder.kill()
        holder.wait()


def test_resume_writes_the_model_train_was_asked_for(tmp_path, rng):
    X, y = _data(rng)
    store = tmp_path / "s.zarr"
    write_store(store, X, y, shard_rows=200)
    ck, out = tmp_path / "ck", tmp_path / "model.npz"
    kw = dict(C=1.0, random_state=0, tol=1e-9)
    with pytest.raises(KeyboardInterrupt):  # killed mid-run: no model yet
        def interrupt(info):
            if info["epoch"] == 2:
                raise KeyboardInterrupt
        sw.train(store, max_iter=4, checkpoint_dir=ck, checkpoint_interval=0, model_out=out, callback=interrupt, **kw)
    assert not out.exists()
    with pytest.warns(ConvergenceWarning):
        resumed = sw.resume(ck)
    assert out.exists() and sw.load_model(out).coef_.tobytes() == resumed.coef_.tobytes()
    out.unlink()
    with pytest.warns(ConvergenceWarning):
        sw.resume(ck, model_out=False)  # told otherwise: nothing written
    assert not out.exists()


def test_unwritable_outputs_fail_before_any_work(tmp_path, rng, monkeypatch):
    from streamwww.errors import OutputPathError

    X, y = _data(rng)
    started = []
    monkeypatch.setattr("streamwww.engine.run.run_bcd", lambda *a, **k: started.append(1))
    with pytest.raises(OutputPathError, match="no-such-dir.*does not exist"):
        sw.train((X, y), model_out=tmp_path / "no-such-dir" / "m.npz")
    with pytest.raises(OutputPathError, match="is a directory"):
        sw.train((X, y), model_out=tmp_path)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(OutputPathError, match="cannot use this checkpoint directory"):
        sw.train((X, y), checkpoint_dir=blocker / "ck")
    with pytest.raises(OutputPathError, match="file: is a file, not a checkpoint directory; give a directory"):
        sw.train((X, y), checkpoint_dir=blocker)
    assert blocker.read_text() == "x"
    if os.geteuid() != 0:  # root writes anywhere
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        with pytest.raises(OutputPathError, match="cannot write the model"):
            sw.train((X, y), model_out=ro / "m.npz")
    assert not started and not list(tmp_path.rglob("*.tmp"))


@pytest.mark.parametrize("where", ["W", "beta"])
def test_a_full_disk_during_a_checkpoint_is_one_error_and_the_previous_checkpoint_stands(
        tmp_path, rng, monkeypatch, where):
    import errno

    from streamwww.state import checkpoint as ckmod
    from streamwww.state import betas as bmod

    X, y = _data(rng)
    store = tmp_path / "s.zarr"
    write_store(store, X, y, shard_rows=200)
    kw = dict(C=1.0, random_state=0, tol=0.0, max_iter=4)
    reference = sw.train(store, **kw)
    calls = []
    target, name = (ckmod.np, "save") if where == "W" else (bmod.DiskBetas, "_write_version")
    real = getattr(target, name)

    def full(*a, **k):
        calls.append(1)
        if len(calls) == 4:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(*a, **k)

    monkeypatch.setattr(target, name, full)
    ck = tmp_path / "ck"
    with pytest.raises(CheckpointError, match="No space left on device"):
        sw.train(store, checkpoint_dir=ck, checkpoint_interval=0, **kw)
    monkeypatch.setattr(target, name, real)
    assert not list(ck.glob("*.tmp"))
    with pytest.warns(ConvergenceWarning):
        resumed = sw.resume(ck)
    assert resumed.coef_.tobytes() == reference.coef_.tobytes()


def test_kept_shards_keep_their_row_norms(tmp_path, rng, monkeypatch):
    """A store that keeps its decoded shards keeps their row norms with them: a group of
    kept shards computes none, and its norms are bitwise those its rows give, whatever
    shards it is grouped with, as a CSR block or a dense one (the group's density decides)."""
    import scipy.sparse as sp

    from streamwww.backends import _kernels as K
    from streamwww.stream.sources import StoreData

    X = rng.normal(size=(600, 12)).astype(np.float32)
    X[200:][rng.random((400, 12)) < 0.9] = 0.0  # shard 0 dense, shards 1 and 2 sparse
    y = rng.integers(0, 3, size=600)
    write_store(tmp_path / "s.zarr", sp.csr_matrix(X), y, shard_rows=200, layout="sparse")
    groups = [(0, 1), (2,), (1, 2), (2, 0), (0,), (1, 2, 0)]
    fresh = StoreData(sw.open_store(tmp_path / "s.zarr"))
    ref = {(g, b): np.array(fresh.block_of(g, b).sqnorms) for g in groups for b in (0.0, 1.0)}
    kinds = {fresh.block_of(g, 0.0).X.__class__.__name__ for g in groups}
    assert kinds == {"ndarray", "csr_matrix"}  # both kinds of block occur

    calls = []
    for name in ("row_sqnorms_csr", "row_sqnorms_dense"):
        monkeypatch.setattr(K, name, lambda *a, _f=getattr(K, name): (calls.append(1), _f(*a))[1])
    store = sw.open_store(tmp_path / "s.zarr")
    store.keep_decoded(10**9)
    data = StoreData(store)
    for bias in (0.0, 1.0):
        for g in groups:
            assert data.block_of(g, bias).sqnorms.tobytes() == ref[(g, bias)].tobytes()
        assert len(calls) == (2 if bias == 0.0 else 4)  # (0, 1) and (2,) computed them, once per bias
    kept = store.kept_bytes
    assert store.kept_array(1, "sqnorms:1.0") is not None and kept > sum(
        store.read_shards([i])[0].data.nbytes for i in range(3))
    store.keep_decoded(0)  # dropped with the shards
    assert store.kept_array(1, "sqnorms:1.0") is None and store.kept_bytes == 0
    store.keep_array(1, "sqnorms:1.0", np.ones(200))  # not kept: the shard is not
    assert store.kept_array(1, "sqnorms:1.0") is None


def test_a_kept_shard_read_alone_is_lent_only_when_asked(tmp_path, rng):
    """read_shards(..., lend=True) of one kept shard returns its kept arrays (training's reads:
    no copy); a plain read, a group, or a shard not kept gets arrays of its own, equal."""
    X, y = _data(rng, sparse=True)
    w = rng.uniform(0.5, 2.0, size=len(y))
    store = write_store(tmp_path / "s.zarr", X, y, shard_rows=200, sample_weight=w, layout="sparse")
    ref = store.read_shards([1], weights=True)
    unkept = store.read_shards([1], weights=True, lend=True)  # nothing kept: a read of its own
    assert not np.shares_memory(unkept[0].data, ref[0].data) and (unkept[0] != ref[0]).nnz == 0
    store.keep_decoded(10**9)
    store.read_shards([0, 1], weights=True)  # reads and keeps both
    lent = store.read_shards([1], weights=True, lend=True)
    again = store.read_shards([1], weights=True, lend=True)
    assert np.shares_memory(lent[0].data, again[0].data) and np.shares_memory(lent[1], again[1])
    assert np.shares_memory(lent[2], again[2])
    own = store.read_shards([1], weights=True)
    assert not np.shares_memory(own[0].data, lent[0].data) and not np.shares_memory(own[1], lent[1])
    for got in (lent, own):
        assert (got[0] != ref[0]).nnz == 0 and np.array_equal(got[1], ref[1]) and np.array_equal(got[2], ref[2])
        assert got[0].indptr.dtype == ref[0].indptr.dtype == got[0].indices.dtype
