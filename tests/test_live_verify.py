"""``info`` and ``info --verify`` of a checkpoint that a run is training into (issue 56).

The reader checks a snapshot: the commit that ``manifest.json`` names when it is read,
and a failure counts as damage only if that commit is still one of the two the run
keeps once the read is over (``runinfo._settled``). What the run replaces meanwhile
is read again, never reported as damage; damage to a commit it keeps is reported.
"""

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from streamwww.cli import main
from streamwww.io import write_store

from .conftest import STARTUP_S, make_classification

# A run that commits at every shard for as long as the test lets it (it is killed at the
# end), streaming every epoch with no scratch file: every epoch writes a new beta version
# of each shard and the superseded ones are deleted or overwritten in place (spares), the
# most a reader can find changed under it.
TRAINER = textwrap.dedent("""
    import errno, sys, warnings
    warnings.simplefilter("ignore")
    from streamwww.state import scratch

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    scratch.ShardScratch.__init__ = full
    import streamwww as sw
    sw.train(sys.argv[1], checkpoint_dir=sys.argv[2], C=[0.5, 4.0], tol=0.0, max_iter=10**6, random_state=3,
             checkpoint_every=1, checkpoint_interval=0.0, memory_budget=0)
""")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("live")
    X, y = make_classification(np.random.default_rng(5), n=3000, d=20, k=5)
    write_store(tmp / "s.zarr", X, y, shard_rows=100)
    return tmp / "s.zarr"


@contextlib.contextmanager
def live_run(store, ck):
    """A trainer in a subprocess, from its first commit on; SIGKILLed at the end."""
    proc = subprocess.Popen([sys.executable, "-c", TRAINER, str(store), str(ck)], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + STARTUP_S
        while not (ck / "manifest.prev.json").exists():
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, f"no commit in {STARTUP_S:g} s"
            time.sleep(0.05)
        yield proc
        assert proc.poll() is None, "the run ended while the test read it"
    finally:
        proc.kill()
        proc.wait()
        proc.stderr.close()


def _info(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["info", *argv])
    return rc, out.getvalue(), err.getvalue()


def test_info_verify_of_a_live_run_checks_a_snapshot_and_never_reports_false_damage(store, tmp_path):
    """24 ``info --verify`` runs (and 4 without --verify) while the run commits at every
    shard: no damage reported, each either verifies a commit or says it could not get a
    stable one; most verify, at steps that advance."""
    ck = tmp_path / "ck"
    results = []
    with live_run(store, ck):
        for i in range(28):
            argv = [str(ck), "--json"] + (["--verify"] if i % 7 else [])
            rc, out, err = _info(*argv)
            assert "damaged" not in (out + err).lower(), out + err
            assert rc == 0, err
            health = json.loads(out)["health"]
            assert health["in_progress"] is True
            for c in (health["latest"], health["previous"]):
                assert c.get("intact") is True or c.get("checked") is False, c
                assert c["tries"] >= 1
            results.append(health)
        rc, out, err = _info(str(ck), "--verify")  # the words, once
    verified = [h for h in results if h["ok"] is True]
    assert len(verified) >= 20, [h["latest"] for h in results]
    assert all(h["latest"]["beta"] == "verified" for i, h in enumerate(results) if h["ok"] and i % 7)
    assert len({h["latest"]["step"] for h in verified}) > 1  # (the run went on while it was read)
    assert rc == 0 and "a run is still training" in out and "DAMAGED" not in out, out
    assert "intact (step" in out or "not checked: the run was replacing it" in out


def _stopped_between_commits(proc, ck):
    """SIGSTOP the trainer at a moment its commit is complete (manifest.json in place)."""
    for _ in range(200):
        proc.send_signal(signal.SIGSTOP)
        while open(f"/proc/{proc.pid}/stat").read().rsplit(")", 1)[1].split()[0] != "T":
            time.sleep(0.001)  # (a signal is delivered later: the trainer runs until then)
        if (ck / "manifest.json").exists() and (ck / "manifest.prev.json").exists():
            return json.loads((ck / "manifest.json").read_text())
        proc.send_signal(signal.SIGCONT)
        time.sleep(0.01)
    raise AssertionError("the trainer was never between commits")


def _flip(path, at=-1):
    raw = bytearray(path.read_bytes())
    raw[at] ^= 0xFF
    path.write_bytes(bytes(raw))


def test_damage_in_a_live_checkpoint_is_found(store, tmp_path):
    """A flipped byte in a beta chunk, then in the W, that the latest commit names and that
    did not change while it was read: DAMAGED, exit status 1, though a run holds LOCK."""
    ck = tmp_path / "ck"
    with live_run(store, ck) as proc:
        manifest = _stopped_between_commits(proc, ck)  # (stopped, LOCK held: the run is live)
        shard, version = next((s, v) for s, v in manifest["beta"]["versions"].items() if v)
        chunk = ck / "beta.zarr" / f"s{int(shard):06d}-v{version:06d}" / "c.0.0.0"
        _flip(chunk, 100)
        rc, out, err = _info(str(ck))  # (no --verify: the beta is not read)
        assert rc == 0 and "DAMAGED" not in out, out + err
        rc, out, err = _info(str(ck), "--verify")
        assert rc == 1, out + err
        assert "a run is still training" in out and f"step {manifest['step']}" in out, out
        assert "latest       DAMAGED" in out and str(chunk.parent) in out, out
        assert err.count("\n") == 1 and "is damaged" in err, err
        _flip(ck / manifest["W"])
        rc, out, err = _info(str(ck), "--json")
        health = json.loads(out)["health"]
        assert rc == 1 and health["ok"] is False and health["in_progress"] is True
        assert "do not match their hash" in health["latest"]["error"] and manifest["W"] in health["latest"]["error"]
        assert health["latest"]["tries"] == 1


def test_a_commit_replaced_while_it_is_read_is_read_again(tmp_path, monkeypatch):
    """The run moves on while the reader reads the latest commit (its weights are deleted,
    the manifests name another commit): the reader reads the newer commit and reports it
    intact; the same missing weights, with the manifests left as they were, are damage."""
    import shutil

    from streamwww.state.checkpoint import CheckpointDir

    X, y = make_classification(np.random.default_rng(1), n=120, d=6, k=3)
    write_store(tmp_path / "d.zarr", X, y, shard_rows=60)
    assert main(["train", str(tmp_path / "d.zarr"), "--checkpoint-dir", str(tmp_path / "src"), "--model-out",
                 str(tmp_path / "m.npz"), "--max-iter", "3", "--checkpoint-interval", "0", "-q"]) == 0
    for moves_on in (True, False):
        ck = tmp_path / f"ck-{moves_on}"
        shutil.copytree(tmp_path / "src", ck)
        latest = json.loads((ck / "manifest.json").read_text())
        previous = json.loads((ck / "manifest.prev.json").read_text())
        real_load_W = CheckpointDir.load_W

        def load_W(self, manifest, moves_on=moves_on, ck=ck):
            if manifest["step"] == latest["step"] and (ck / latest["W"]).exists():
                # what a run does between the reader's reads: the commit it read goes
                if moves_on:
                    shutil.copy(ck / "manifest.prev.json", ck / "manifest.json.tmp")
                    os.replace(ck / "manifest.json.tmp", ck / "manifest.json")
                (ck / latest["W"]).unlink()
            return real_load_W(self, manifest)

        monkeypatch.setattr(CheckpointDir, "load_W", load_W)
        rc, out, err = _info(str(ck), "--verify", "--json")
        monkeypatch.undo()
        health = json.loads(out)["health"]
        if moves_on:
            assert rc == 0 and health["ok"] is True, out + err
            assert health["latest"]["step"] == previous["step"] and health["latest"]["tries"] == 2
        else:
            assert rc == 1 and health["ok"] is False, out + err
            assert "missing weights" in health["latest"]["error"] and health["latest"]["tries"] == 1
            assert health["resumes_from"] == "manifest.prev.json"


@pytest.mark.parametrize("live", [False, True])
def test_a_manifest_missing_for_a_moment_is_read_again(tmp_path, monkeypatch, live):
    """Between a commit's two renames ``manifest.json`` is absent (for as long as the
    trainer is paused there): a reader that finds it so looks again rather than report
    the latest commit absent. With LOCK held it keeps looking while it stays absent (here
    for two whole tries; for all of them, it says it could not check it); without, once
    it reappears."""
    import shutil

    from streamwww.cli import runinfo
    from streamwww.storage.fsutil import try_lock, unlock

    X, y = make_classification(np.random.default_rng(1), n=120, d=6, k=3)
    write_store(tmp_path / "d.zarr", X, y, shard_rows=60)
    ck = tmp_path / "ck"
    assert main(["train", str(tmp_path / "d.zarr"), "--checkpoint-dir", str(ck), "--model-out",
                 str(tmp_path / "m.npz"), "--max-iter", "2", "--checkpoint-interval", "0", "-q"]) == 0
    aside = tmp_path / "manifest.json"
    shutil.move(ck / "manifest.json", aside)
    real_kept = runinfo._kept
    calls = []
    back_at = 5 if live else 2  # (each try looks twice: before and after its read)

    def kept(ckpt):
        calls.append(1)
        if len(calls) == back_at:
            shutil.move(aside, ck / "manifest.json")
        return real_kept(ckpt)

    monkeypatch.setattr(runinfo, "_kept", kept)
    fd = try_lock(ck / "LOCK") if live else None
    try:
        info = runinfo.describe_checkpoint(ck, verify=False)
    finally:
        if fd is not None:
            unlock(fd)
    latest = info["health"]["latest"]
    assert info["health"]["in_progress"] is live
    assert latest["intact"] is True and latest["tries"] == (3 if live else 2), latest
    assert info["health"]["ok"] is True


def test_a_run_paused_between_the_renames_of_a_commit_is_not_damage(tmp_path):
    """LOCK held, ``manifest.prev.json`` there and no ``manifest.json`` on every try (a
    trainer stopped between a commit's renames): not checked, exit status 0, no damage."""
    import shutil

    from streamwww.storage.fsutil import try_lock, unlock

    X, y = make_classification(np.random.default_rng(1), n=120, d=6, k=3)
    write_store(tmp_path / "d.zarr", X, y, shard_rows=60)
    ck = tmp_path / "ck"
    assert main(["train", str(tmp_path / "d.zarr"), "--checkpoint-dir", str(ck), "--model-out",
                 str(tmp_path / "m.npz"), "--max-iter", "2", "--checkpoint-interval", "0", "-q"]) == 0
    shutil.move(ck / "manifest.json", ck / "manifest.prev.json")
    fd = try_lock(ck / "LOCK")
    try:
        rc, out, err = _info(str(ck))
        rc_json, out_json, _ = _info(str(ck), "--json")
    finally:
        unlock(fd)
    assert rc == 0 and "damaged" not in (out + err).lower(), out + err
    assert "latest       not checked: the run was replacing it" in out, out
    health = json.loads(out_json)["health"]
    assert rc_json == 0 and health["ok"] is None and health["latest"]["checked"] is False
    assert health["previous"]["intact"] is True
