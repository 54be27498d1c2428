"""Scratch files beyond the memory budget (streamwww.state.scratch): beta's working copies
between commits, and the rows' norms of shards read from storage every epoch."""

import errno
import logging
import re

import numpy as np
import pytest

import streamwww as sw
from streamwww.io import write_store
from streamwww.state import betas as B
from streamwww.state.checkpoint import CheckpointDir
from streamwww.state.scratch import ShardScratch

from .conftest import make_classification


def test_slots_round_trip_whole_and_by_model(tmp_path, rng):
    f = ShardScratch(tmp_path, [3, 5, 0, 2], n_models=2, m=4, copies=3)
    assert f.nbytes == 3 * 10 * 2 * 4 * 8
    want = {(s, c): rng.normal(size=(2, r, 4)) for s, r in enumerate([3, 5, 0, 2]) for c in range(3)}
    for (s, c), a in want.items():
        f.write(s, c, a)
    group = np.empty((2, 7, 4))  # a group of shards 1 and 3: each model's rows contiguous, not across models
    f.read(1, 2, group[:, :5])
    f.read(3, 0, group[:, 5:])
    assert np.array_equal(group, np.concatenate([want[1, 2], want[3, 0]], axis=1))
    f.write(1, 1, group[:, :5])  # from a group's slice (not contiguous across models)
    want[1, 1] = want[1, 2]
    for (s, c), a in want.items():
        assert f.read(s, c, np.empty_like(a)).tobytes() == a.tobytes()
    with pytest.raises(ValueError, match="shard 0"):
        f.write(0, 0, np.zeros((2, 4, 4)))
    with pytest.raises(ValueError, match="shard 0"):
        f.read(0, 0, np.zeros((2, 3, 4), dtype=np.float32))
    with pytest.raises(IndexError, match="slot 3 of shard 0"):
        f.read(0, 3, np.zeros((2, 3, 4)))
    with pytest.raises(ValueError, match="not contiguous"):
        f.read(0, 0, np.zeros((2, 4, 8))[:, :3, ::2])
    f.close()
    assert list(tmp_path.iterdir()) == []  # no name: nothing left behind


def test_no_room_is_found_when_the_file_is_made(tmp_path, monkeypatch):
    def full(fd, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("os.posix_fallocate", full)
    with pytest.raises(OSError, match="No space"):
        ShardScratch(tmp_path, [10], 1, 3, 2)

    def unsupported(fd, offset, length):
        raise OSError(errno.EOPNOTSUPP, "Operation not supported")

    monkeypatch.setattr("os.posix_fallocate", unsupported)  # a file system without it: a sparse file
    f = ShardScratch(tmp_path, [10], 1, 3, 2)
    a = np.arange(30.0).reshape(1, 10, 3)
    f.write(0, 1, a)
    assert np.array_equal(f.read(0, 1, np.empty_like(a)), a)
    f.close()
    monkeypatch.delattr("os.posix_fallocate")  # a system without it (macOS): the same
    f = ShardScratch(tmp_path, [10], 1, 3, 2)
    f.write(0, 0, a)
    assert np.array_equal(f.read(0, 0, np.empty_like(a)), a)
    f.close()
    monkeypatch.delattr("os.preadv")  # none of it (Windows): not made, the caller does without
    with pytest.raises(OSError, match="not available"):
        ShardScratch(tmp_path, [10], 1, 3, 2)


def _betas(tmp_path, copies=3, **kw):
    return B.DiskBetas(tmp_path, 1, [4, 6], 4, scratch_copies=copies, keep_superseded=True,
                       drop_uncommitted=True, **kw)


def test_versions_held_or_being_committed_keep_their_slots(tmp_path, rng):
    """A put never overwrites the slot of the version held for a rewind nor of the one a
    commit in progress writes; the commit writes what was current when it began."""
    betas = _betas(tmp_path)
    assert betas.mode == "scratch" and betas.resident and not betas.in_memory
    b = {v: rng.normal(size=(1, 4, 3)) for v in range(1, 6)}
    betas.put(0, b[1])
    betas.hold()  # the epoch's start: version 1
    betas.put(0, b[2])
    plan = betas.begin_commit()  # names version 2 of shard 0 (and 0 of shard 1)
    assert plan.versions == {0: 2, 1: 0} and plan.keys == [(0, 2)]
    betas.put(0, b[3])  # neither version 1's slot nor version 2's
    betas.put(0, b[4])
    assert np.array_equal(betas.get(0), b[4])
    entry = betas.end_commit(plan)
    assert entry["versions"] == {"0": 2, "1": 0}
    assert np.array_equal(betas.read(0, 2), b[2])  # from disk: the commit wrote version 2
    assert np.allclose(entry["sums"][0], b[2].sum()) and entry["sums"][0][0] == b[2].sum(axis=(1, 2))[0]
    betas.put(0, b[5])  # version 2's slot is free again
    betas.rewind()
    assert betas.version(0) == 1 and np.array_equal(betas.get(0), b[1])
    betas.close()


def test_a_put_with_every_slot_taken_is_an_error(tmp_path, rng):
    betas = _betas(tmp_path, copies=2)
    betas.put(0, rng.normal(size=(1, 4, 3)))
    betas.hold()
    betas.put(0, rng.normal(size=(1, 4, 3)))
    betas.begin_commit()
    with pytest.raises(RuntimeError, match="no free slot for shard 0"):
        betas.put(0, rng.normal(size=(1, 4, 3)))
    betas.close()


def test_without_room_versions_are_written_every_epoch(tmp_path, caplog, monkeypatch):
    monkeypatch.setattr(B, "_free_bytes", lambda path: 100)
    with caplog.at_level(logging.INFO, logger="streamwww.state.betas"):
        betas = _betas(tmp_path)
    assert betas.mode == "versions" and not betas.resident
    assert re.search(r"beta scratch file \(0\.0 MiB\) not made: 0\.0 MiB free", caplog.text)
    betas.close()


@pytest.fixture
def store(tmp_path, rng):
    X, y = make_classification(rng, n=600, d=12, k=5, dtype=np.float32)
    write_store(tmp_path / "s.zarr", X, y, shard_rows=100)
    return tmp_path / "s.zarr"


KW = dict(C=0.5, tol=0.0, max_iter=8, random_state=3, eval_every=1)


def test_beyond_the_budget_nothing_is_written_between_commits(tmp_path, store):
    """beta in the scratch file: no version written, no spare, until a commit; the commit
    names what it wrote and resumes to the uninterrupted model."""
    ck = tmp_path / "ck"
    seen = []

    def count(info):
        seen.append(sorted(p.name for p in (ck / "beta.zarr").iterdir()))

    m = sw.train(store, checkpoint_dir=ck, checkpoint_interval=1e6, memory_budget=0, callback=count, **KW)
    assert seen == [["zarr.json"]] * KW["max_iter"]
    with CheckpointDir(ck, lock=False) as cd:
        man = cd.load_manifest()
    assert man["step"] == 1 and man["finished"]
    named = {f"s{int(s):06d}-v{v:06d}" for s, v in man["beta"]["versions"].items()}
    assert {p.name for p in (ck / "beta.zarr").iterdir()} == named | {"zarr.json"}
    assert m.coef_.tobytes() == sw.train(store, **KW).coef_.tobytes()


def test_norms_of_shards_read_every_epoch_are_computed_once(store, monkeypatch):
    from streamwww.backends import _kernels as K

    calls = []
    for name in ("row_sqnorms_csr", "row_sqnorms_dense"):
        real = getattr(K, name)
        monkeypatch.setattr(K, name, lambda *args, real=real: calls.append(1) or real(*args))
    spilled = sw.train(store, memory_budget=0, mix_shards=1, **KW)
    assert len(calls) == 6  # the six shards, once each, for 8 epochs and their objective passes
    calls.clear()
    from .conftest import no_room_for_scratch

    no_room_for_scratch(monkeypatch)
    again = sw.train(store, memory_budget=0, mix_shards=1, **KW)
    assert len(calls) >= 6 * KW["max_iter"]  # without the file: at every read
    assert spilled.coef_.tobytes() == again.coef_.tobytes()


def test_a_failed_copy_names_the_file_shard_and_slot(tmp_path, monkeypatch):
    f = ShardScratch(tmp_path, [4], 1, 2, 2)

    def broken(*args):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr("os.pwrite", broken)
    monkeypatch.setattr("os.preadv", broken)
    with pytest.raises(OSError, match=rf"scratch file in {re.escape(str(tmp_path))}: cannot write shard 0 "
                                      r"\(slot 1\): Input/output error"):
        f.write(0, 1, np.zeros((1, 4, 2)))
    with pytest.raises(OSError, match=r"cannot read shard 0 \(slot 0\): Input/output error"):
        f.read(0, 0, np.zeros((1, 4, 2)))
    f.close()
