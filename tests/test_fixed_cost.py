"""The fixed cost of a streamed epoch: beta kept in memory, checkpoints on a time interval,
loads on a thread pool — none of which may change the model or what a checkpoint holds
(killed between commits: tests/test_outofcore.py)."""

import json
import logging
import re
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import pytest

import streamwww as sw
from streamwww.io import write_store
from streamwww.state.betas import DiskBetas
from streamwww.state.checkpoint import CheckpointDir, manifest_checksum

from .conftest import make_classification, no_room_for_scratch
from .reference import W_from_beta

KW = dict(C=[0.1, 1.0], tol=0.0, max_iter=12, random_state=7, prefetch=2)


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


@pytest.fixture
def store(tmp_path, rng):
    X, y = make_classification(rng, n=600, d=12, k=5, dtype=np.float32)
    write_store(tmp_path / "s.zarr", X, y, shard_rows=100)
    return tmp_path / "s.zarr"


def _beta_mode(caplog) -> str:
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("beta (")]
    assert len(lines) == 1, lines
    modes = [m for m, said in [("memory", "kept in memory"), ("scratch", "kept in a scratch file"),
                               ("versions", "written to disk every epoch")] if said in lines[0]]
    assert len(modes) == 1, lines
    return modes[0]


def _on_disk_versions(ck: Path) -> set[str]:
    return {p.name for p in (ck / "beta.zarr").iterdir() if re.fullmatch(r"s\d{6}-v\d{6}", p.name)}


def _spares(ck: Path) -> list[str]:
    """Superseded versions kept for their shard's next one (stream.betas: at most one a shard)."""
    return sorted(p.name for p in (ck / "beta.zarr").glob("spare-s*"))


def _named_versions(*manifests) -> set[str]:
    return {f"s{int(s):06d}-v{v:06d}" for m in manifests for s, v in m["beta"]["versions"].items() if v > 0}


def _check_invariant(ck: Path, store_path: Path, n_models: int) -> dict:
    """W on disk == W(beta) of the beta versions the manifest names, for every model."""
    with CheckpointDir(ck, lock=False) as cd:
        man = cd.load_manifest()
        W = cd.load_W(man)
    store = sw.open_store(store_path)
    betas = DiskBetas(ck, n_models, store.shard_rows, store.n_classes, versions=man["beta"]["versions"])
    X = np.vstack([store.read_shard(s)[0] for s in range(store.n_shards)])
    y = np.concatenate([store.read_shard(s)[1] for s in range(store.n_shards)])
    B = np.concatenate([betas.get(s) for s in range(store.n_shards)], axis=1)
    for j in range(n_models):
        np.testing.assert_allclose(W[j], W_from_beta(X, y, B[j], store.n_classes, bias=1.0), atol=1e-10)
    return man


def _same_models(runs, reference):
    for a, b in zip(runs, reference):
        assert a.coef_.tobytes() == b.coef_.tobytes() and a.intercept_.tobytes() == b.intercept_.tobytes()
        assert a.history_ == [dict(h, time=g["time"], wall_time=g["wall_time"])
                              for h, g in zip(b.history_, a.history_)]


@pytest.mark.parametrize("budget", ["auto", 90_000])  # all in memory; beta in memory, the store mostly not
def test_beta_in_memory_gives_the_model_of_beta_on_disk(tmp_path, store, caplog, budget, monkeypatch):
    """beta in memory, in a scratch file (beyond the budget) and, without room for that
    file, written as a version every epoch: the same model, history and checkpoint."""
    caplog.set_level(logging.INFO, logger="streamwww.engine.run")
    kept = sw.train(store, checkpoint_dir=tmp_path / "a", checkpoint_interval=0, memory_budget=budget, **KW)
    assert _beta_mode(caplog) == "memory"
    caplog.clear()
    scratch = sw.train(store, checkpoint_dir=tmp_path / "b", checkpoint_interval=0, memory_budget=0, **KW)
    assert _beta_mode(caplog) == "scratch"
    _same_models(scratch, kept)
    caplog.clear()
    no_room_for_scratch(monkeypatch)
    disk = sw.train(store, checkpoint_dir=tmp_path / "c", checkpoint_interval=0, memory_budget=0, **KW)
    assert _beta_mode(caplog) == "versions"
    _same_models(disk, kept)
    # only what the latest and the previous commit name is on disk
    for ck in (tmp_path / "a", tmp_path / "b"):
        man = _check_invariant(ck, store, 2)
        prev = json.loads((ck / "manifest.prev.json").read_text())
        assert man["step"] == KW["max_iter"] and prev["step"] == man["step"] - 1
        assert _on_disk_versions(ck) == _named_versions(man, prev)
        assert not _spares(ck) and sorted(p.name for p in (ck / "beta.zarr").iterdir()
                                          if not re.fullmatch(r"s\d{6}-v\d{6}", p.name)) == ["zarr.json"]


def test_checkpoint_interval_commits_less_and_changes_nothing(tmp_path, store):
    ck = tmp_path / "ck"
    every = sw.train(store, checkpoint_dir=tmp_path / "every", checkpoint_interval=0, **KW)
    once = sw.train(store, checkpoint_dir=ck, checkpoint_interval=1e6, **KW)
    for a, b in zip(every, once):
        assert a.coef_.tobytes() == b.coef_.tobytes()
    man = _check_invariant(ck, store, 2)
    assert man["step"] == 1 and man["finished"] is True  # the run's end only
    assert man["run"]["checkpoint_interval"] == 1e6
    assert not (ck / "manifest.prev.json").exists()
    assert _on_disk_versions(ck) == _named_versions(man)
    with CheckpointDir(tmp_path / "every", lock=False) as cd:
        assert cd.load_manifest()["step"] == KW["max_iter"]  # an epoch's end is the run's end: one commit
    for a, b in zip(sw.resume(ck), once):
        assert a.coef_.tobytes() == b.coef_.tobytes()


def test_beta_on_disk_does_not_grow_between_commits(tmp_path, store, no_scratch_room):
    """Written every epoch (memory_budget=0, no room for a scratch file) and committed once:
    only the current version of each shard (and writes in flight) is on disk, whatever the
    epochs since the commit."""
    ck = tmp_path / "ck"
    counts, spares = [], []

    def count(info):  # (a count per epoch)
        counts.append(len(_on_disk_versions(ck)))
        spares.append(len(_spares(ck)))

    sw.train(store, checkpoint_dir=ck, checkpoint_interval=1e6, memory_budget=0, eval_every=1, callback=count, **KW)
    assert len(counts) == KW["max_iter"] and max(counts) <= 6 + KW["prefetch"]
    assert max(spares) <= 6 and max(spares) > 0, spares  # one superseded version a shard, reused
    man = _check_invariant(ck, store, 2)
    assert man["step"] == 1 and _on_disk_versions(ck) == _named_versions(man)
    assert not _spares(ck)  # deleted at the run's end


def test_interval_bounds_lost_work_and_resume_continues_from_it(tmp_path, store):
    """Stopped by the callback at epoch 8 (the first evaluated at or after 7: with no rule
    to meet the schedule evaluates 1, 2, 4, 8, ...) with the interval unreached: the
    checkpoint is the run's end (the user's stop); training on from it equals the
    uninterrupted run."""
    kw = dict(KW, max_iter=14)
    reference = sw.train(store, **kw)
    ck = tmp_path / "ck"
    stopped = sw.train(store, checkpoint_dir=ck, checkpoint_interval=1e6,
                       callback=lambda info: info["epoch"] >= 7, **kw)
    assert [m.n_iter_ for m in stopped] == [8, 8] and [h["epoch"] for h in stopped[0].history_] == [1, 2, 4, 8]
    man = json.loads((ck / "manifest.json").read_text())
    assert man["step"] == 1 and man["cursor"]["epoch"] == 8
    # 'stopped' is a user decision: mark the models as running again (re-sealed) and go on
    for r in man["results"]:
        r["status"] = "running"
    man["finished"] = False
    man["checksum"] = manifest_checksum(man)
    (ck / "manifest.json").write_text(json.dumps(man))
    resumed = sw.train(store, checkpoint_dir=ck, checkpoint_interval=1e6, **kw)
    for a, b in zip(resumed, reference):
        assert a.n_iter_ == b.n_iter_ == 14
        assert a.coef_.tobytes() == b.coef_.tobytes()


def test_checkpoint_interval_is_validated_and_on_the_cli(tmp_path, store):
    with pytest.raises(ValueError, match="checkpoint_interval.*-1"):
        sw.train(store, checkpoint_interval=-1)
    from streamwww.cli import main

    ck = tmp_path / "ck"
    assert main(["train", str(store), "--C", "0.5", "--max-iter", "3", "--tol", "0", "--seed", "1", "-q",
                 "--checkpoint-dir", str(ck), "--checkpoint-interval", "0", "--model-out", str(tmp_path / "m.npz")]) == 0
    man = json.loads((ck / "manifest.json").read_text())
    assert man["run"]["checkpoint_interval"] == 0.0 and man["step"] == 3


def _history(m):
    return [{k: v for k, v in h.items() if k not in ("time", "wall_time")} for h in m.history_]


ONE = dict(C=0.5, random_state=3, prefetch=2)
RULES = [dict(tol=1e-3, max_iter=300), dict(tol=0.0, gap_decay=0.01, max_iter=300), dict(tol=0.0, max_iter=7),
         dict(tol=1e-4, eval_every=3, max_iter=40)]


@pytest.mark.parametrize("rule", range(len(RULES)))
def test_late_objectives_give_the_model_history_and_checkpoint_of_the_default_order(tmp_path, store, caplog, rule):
    """A store read from disk every epoch (memory_budget=0), one model: W_t certified from the
    rows of epoch t + 1, the stop one epoch late and rewound; everything as with a pass of
    its own after every epoch (checkpoint_every > 0 keeps that order)."""
    kw = dict(ONE, **RULES[rule])
    caplog.set_level(logging.INFO, logger="streamwww.engine.run")
    late = sw.train(store, memory_budget=0, checkpoint_dir=tmp_path / "late", checkpoint_interval=0, **kw)
    assert any("late" in r.getMessage() for r in caplog.records)
    after = sw.train(store, memory_budget=0, checkpoint_dir=tmp_path / "after", checkpoint_interval=0,
                     checkpoint_every=99, **kw)
    kept = sw.train(store, **kw)  # the store stays in memory: a pass of its own
    assert late.coef_.tobytes() == after.coef_.tobytes() == kept.coef_.tobytes()
    assert late.n_iter_ == after.n_iter_ == kept.n_iter_
    assert _history(late) == _history(after) == _history(kept)
    for ck in ("late", "after"):
        man = _check_invariant(tmp_path / ck, store, 1)
        assert man["cursor"]["epoch"] == late.n_iter_ and man["finished"] is True
        prev = json.loads((tmp_path / ck / "manifest.prev.json").read_text())
        assert _on_disk_versions(tmp_path / ck) == _named_versions(man, prev)


def test_each_certificate_copies_W_into_the_one_before(tmp_path, store, monkeypatch):
    """A late run holds two copies of W at most (the trained one and the certificate's): every
    certificate after the first is copied into the buffer of the one before it, which is done."""
    from streamwww.backends.cpu import CPUBackend

    copies = []
    real = CPUBackend.copy_W

    def spy(self, W, out=None):
        got = real(self, W, out=out)
        copies.append((out is not None, got is out, np.array_equal(got, W)))
        return got

    monkeypatch.setattr(CPUBackend, "copy_W", spy)
    m = sw.train(store, memory_budget=0, checkpoint_dir=tmp_path / "ck", checkpoint_interval=0,
                 **dict(ONE, tol=0.0, max_iter=12))
    # W_1, W_2, W_4, W_8 certified late (no rule to meet: the schedule's widest spacing); W_12 by a
    # pass of its own; the buffer of a certificate decided waits for the next one over epochs without
    assert [h["epoch"] for h in m.history_] == [1, 2, 4, 8, 12] and len(copies) == 4
    assert copies[0] == (False, False, True)
    assert all(c == (True, True, True) for c in copies[1:])


def test_a_late_run_stopped_and_resumed_either_way_gives_the_same_model(tmp_path, store):
    """Interrupted with a certificate pending (its checkpoint: W_e, history to e - 1), the run
    continues late, or with a pass of its own (the store now fits in memory), or stopped
    by a callback (rewound) and continued: the uninterrupted model each time."""
    kw = dict(ONE, tol=0.0, gap_decay=0.01, max_iter=300)
    reference = sw.train(store, **kw)

    evaluated = [h["epoch"] for h in reference.history_]
    at = min(e for e in evaluated if e >= 6)  # the first certificate at or after epoch 6
    assert at < reference.n_iter_

    def interrupt(info):
        if info["epoch"] == at:
            raise KeyboardInterrupt

    for again in (dict(memory_budget=0), dict(memory_budget="auto")):
        ck = tmp_path / f"ck-{again['memory_budget']}"
        with pytest.raises(KeyboardInterrupt):
            sw.train(store, memory_budget=0, checkpoint_dir=ck, checkpoint_interval=0, callback=interrupt, **kw)
        man = json.loads((ck / "manifest.json").read_text())
        # (the callback of epoch `at` ran after epoch at + 1 trained, before its commit)
        assert man["cursor"]["epoch"] == at
        assert man["results"][0]["history"][-1]["epoch"] == evaluated[evaluated.index(at) - 1]
        resumed = sw.train(store, checkpoint_dir=ck, checkpoint_interval=0, **again, **kw)
        assert resumed.coef_.tobytes() == reference.coef_.tobytes()
        assert _history(resumed) == _history(reference)
    ck = tmp_path / "stopped"
    stop = min(e for e in evaluated if e >= 9)
    assert stop < reference.n_iter_
    stopped = sw.train(store, memory_budget=0, checkpoint_dir=ck, checkpoint_interval=0,
                       callback=lambda info: info["epoch"] >= 9, **kw)
    assert stopped.n_iter_ == stop and stopped.history_[-1]["epoch"] == stop
    man = _check_invariant(ck, store, 1)
    assert man["cursor"]["epoch"] == stop
    man["results"][0]["status"] = "running"
    man["finished"] = False
    man["checksum"] = manifest_checksum(man)
    (ck / "manifest.json").write_text(json.dumps(man))
    resumed = sw.train(store, memory_budget=0, checkpoint_dir=ck, checkpoint_interval=0, **kw)
    assert resumed.coef_.tobytes() == reference.coef_.tobytes()


@pytest.mark.parametrize("shrinking", [True, False])
@pytest.mark.parametrize("rule", range(len(RULES)))
def test_objectives_overlapped_with_the_first_pass_give_the_default_model(monkeypatch, rule, shrinking):
    """In memory, one model: W_t's objective terms (and sets) are computed on a second thread,
    chunk by chunk of epoch t + 1's row order, while the pass trains the chunks already
    scored; model, history and epochs are those of a pass of its own after every epoch."""
    from streamwww.backends import cpu as cpu_backend

    monkeypatch.setattr(cpu_backend, "CHUNK_WORK", 200)  # many chunks even for these few rows
    monkeypatch.setattr(cpu_backend.CPUBackend, "threads", lambda self: 2)  # (a second thread, whatever the machine)
    chunks = []
    real = cpu_backend._chunks
    monkeypatch.setattr(cpu_backend, "_chunks", lambda block, k: chunks.append(real(block, k)) or chunks[-1])
    rng = np.random.default_rng(3)
    X = sp.random(500, 30, density=0.2, random_state=3, format="csr", dtype=np.float32)
    y = rng.integers(0, 5, size=500)
    kw = dict(C=0.5, random_state=2, shrinking=shrinking, **RULES[rule])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        late = sw.train((X, y), **kw)
        assert chunks and min(chunks) > 4  # the overlapped path ran
        after = sw.train((X, y), checkpoint_every=1, **kw)  # (not one-model-late: a pass of its own)
    assert late.coef_.tobytes() == after.coef_.tobytes() and late.intercept_.tobytes() == after.intercept_.tobytes()
    assert late.n_iter_ == after.n_iter_ and _history(late) == _history(after)


@pytest.mark.parametrize("mix", [1, 2])
def test_a_store_that_fits_is_prepared_once_when_it_trains_shard_by_shard(tmp_path, monkeypatch, mix):
    """Kept in memory and trained one shard at a time (one shard, or mix_shards=1), each
    shard is read, checked and prepared once for the whole run, and the loads hand no
    work to the loader threads; the model is the one of a store read every time."""
    from streamwww.stream.sources import StoreData

    rng = np.random.default_rng(5)
    X = sp.random(400, 20, density=0.3, random_state=5, format="csr", dtype=np.float32)
    y = rng.integers(0, 4, size=400)
    path = write_store(tmp_path / "s.zarr", X, y, shard_rows=100)
    made = []
    real = StoreData._make_block
    monkeypatch.setattr(StoreData, "_make_block", lambda self, ids, bias: made.append(tuple(ids)) or real(self, ids, bias))
    kw = dict(C=0.5, tol=0, max_iter=6, random_state=1, mix_shards=mix)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kept = sw.train(path, **kw)
        n_kept = len(made)
        made.clear()
        read = sw.train(path, memory_budget=0, **kw)
    assert kept.coef_.tobytes() == read.coef_.tobytes()
    if mix == 1:
        assert n_kept == 4  # each of the 4 shards once
    else:
        assert n_kept > 4 * 6  # mixed pairs differ per epoch: made each time (from memory)
    assert sum(len(u) for u in made) >= 4 * 6  # memory_budget=0: every shard read every epoch
