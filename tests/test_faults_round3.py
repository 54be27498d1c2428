"""Faults of issue 56's third round: further cases of the classes of the second
(tests/test_faults_round2.py), each held to its class's one rule.

- Tracebacks: a failure ends in one line, ``streamwww CMD: error: ...``, naming the file
  (an output that cannot be written: ``_fsutil.write_failure``), and what was there
  before stays.
- Hangs: a ``--scheduler`` that is not one, or that stops answering, is one line within
  ``STREAMWWW_SCHEDULER_TIMEOUT`` seconds saying what it did.
- Leftovers: the temporaries of a killed command carry their writer's PID; the next run
  of the command writing there removes those of dead processes, and only those.
- Warnings: a warning the command line shows (a Python warning, a library's log record)
  is one line, ``streamwww CMD: warning: ...``, and ``-q`` silences it.

Sockets and servers listen on loopback only; every file is made under ``tmp_path``.
"""

import errno
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import streamwww as sw
from streamwww.cli import main
from streamwww.io import write_store

from .conftest import STARTUP_S, make_classification, one_error_line as _one_error_line, write_libsvm as _write_libsvm

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A small LIBSVM file, a store of it, a model and a checkpoint of a 3-epoch run."""
    tmp = tmp_path_factory.mktemp("faults3")
    X, y = make_classification(np.random.default_rng(3), n=120, d=6, k=3, dtype=np.float32)
    labels = np.array([1.0, 2.0, 5.0])[y]
    _write_libsvm(tmp / "data.txt", X, labels)
    write_store(tmp / "data.zarr", X, labels, shard_rows=60)
    sw.save_model(sw.train((X, labels), C=1.0, max_iter=3, random_state=0), tmp / "m.npz")
    assert main(["train", str(tmp / "data.zarr"), "--checkpoint-dir", str(tmp / "ck"), "--model-out",
                 str(tmp / "ck-m.npz"), "--max-iter", "3", "--checkpoint-interval", "0", "-q"]) == 0
    return tmp


def _full_disk(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _hidden(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


# ------------------------------------------------------------------ 1. tracebacks that are one line
@pytest.mark.parametrize("scores", [False, True])
def test_predict_output_on_a_full_disk_is_one_line_naming_it(files, tmp_path, capsys, monkeypatch, scores):
    """ENOSPC from a write of ``predict --output``: one line naming the output (not the
    temporary), no temporary left, an earlier file there kept."""
    import streamwww.cli.commands as commands

    out = tmp_path / "pred.txt"
    out.write_text("earlier predictions\n")
    real_open = commands._open_predictions

    class FullDisk:
        """The temporary file, on a disk that fills up after its first bytes."""

        def __init__(self, f):
            self.f, self.name = f, f.name

        def write(self, text):
            self.f.write(text[:3] if isinstance(text, str) else next(iter(text))[:3])
            self.f.flush()
            _full_disk()

        writelines = write

        def close(self):
            self.f.close()

    monkeypatch.setattr(commands, "_open_predictions", lambda path: FullDisk(real_open(path)))
    argv = ["predict", str(files / "m.npz"), str(files / "data.txt"), "--output", str(out)]
    assert main(argv + (["--scores"] if scores else [])) == 1
    monkeypatch.undo()
    _one_error_line(capsys, "predict", f"{out}: cannot write the predictions", "No space left on device")
    assert out.read_text() == "earlier predictions\n" and _hidden(tmp_path) == []


def test_make_data_on_a_full_disk_is_one_line_naming_it(tmp_path, capsys, monkeypatch):
    import streamwww.io.datagen as datagen

    out = tmp_path / "gen.txt"
    out.write_text("earlier text\n")
    monkeypatch.setattr(datagen, "_write", _full_disk)
    argv = ["make-data", str(out), "--rows", "500", "--features", "8", "--nnz-per-row", "3", "--classes", "3",
            "--overwrite"]
    assert main(argv) == 1
    _one_error_line(capsys, "make-data", f"{out}: cannot write the file", "No space left on device")
    assert out.read_text() == "earlier text\n" and _hidden(tmp_path) == []


@pytest.mark.parametrize("at", ["metadata", "rename"])
def test_convert_on_a_full_disk_at_its_end_keeps_the_earlier_store(files, tmp_path, capsys, monkeypatch, at):
    """ENOSPC while the marker is written (metadata) or at the rename that replaces the
    earlier store (``--overwrite``): one line naming the store; the earlier store is
    still there and opens, and no temporary is left."""
    import streamwww.io._transaction as transaction

    out = tmp_path / "st.zarr"
    assert main(["convert", str(files / "data.txt"), str(out), "-q"]) == 0
    capsys.readouterr()
    before = sw.io.open_store(out).fingerprint
    if at == "metadata":
        monkeypatch.setattr(transaction, "fsync_tree", _full_disk)
    else:
        real_rename = os.rename

        def rename(src, dst):
            if os.fspath(dst) == os.fspath(out) and ".streamwww-tmp-" in os.fspath(src):
                _full_disk()
            return real_rename(src, dst)

        monkeypatch.setattr(transaction.os, "rename", rename)
    assert main(["convert", str(files / "data.txt"), str(out), "--overwrite", "--shard-rows", "30"]) == 1
    monkeypatch.undo()
    _one_error_line(capsys, "convert", str(out), "No space left on device")
    assert sw.io.open_store(out).fingerprint == before and _hidden(tmp_path) == []


@pytest.mark.parametrize("fault", ["EROFS-beta", "ENOSPC-weights"])
def test_a_checkpoint_directory_that_cannot_be_written_at_the_first_commit_is_one_line(files, tmp_path, capsys,
                                                                                      monkeypatch, fault):
    """A read-only or full file system under the checkpoint directory at the first commit:
    one line naming the directory and saying nothing was committed (there is no earlier
    checkpoint to stand, when the commit is what failed); no manifest, no temporary."""
    import streamwww.state.checkpoint as checkpoint
    from streamwww.state.versions import BetaVersions

    if fault == "EROFS-beta":  # (the beta write names its version; the commit did not start)
        def read_only(*args, **kwargs):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))

        monkeypatch.setattr(BetaVersions, "_write_local", read_only)
        needles = ("Read-only file system", "beta")
    else:
        monkeypatch.setattr(checkpoint.np, "save", _full_disk)
        needles = ("No space left on device", "no checkpoint was committed")
    ck = tmp_path / "ck"
    argv = ["train", str(files / "data.zarr"), "--checkpoint-dir", str(ck), "--model-out", str(tmp_path / "m.npz"),
            "--max-iter", "2", "--checkpoint-interval", "0", "-q"]
    assert main(argv) == 1
    monkeypatch.undo()
    _one_error_line(capsys, "train", str(ck), *needles)
    assert not (ck / "manifest.json").exists() and not list(ck.glob("*.tmp"))
    assert not (tmp_path / "m.npz").exists()


def _flip(path, at=40):
    raw = bytearray(path.read_bytes())
    raw[at] ^= 0x55
    path.write_bytes(bytes(raw))


def test_plot_of_a_damaged_checkpoint_is_one_line_or_uses_the_intact_commit(files, tmp_path, capsys):
    """Only the latest manifest damaged: the previous commit's histories are what is drawn
    (as a resume would use it). Both damaged: one line naming a manifest, no image."""
    import json
    import shutil

    from streamwww.cli.runinfo import gap_histories

    ck = tmp_path / "ck"
    shutil.copytree(files / "ck", ck)
    previous = json.loads((ck / "manifest.prev.json").read_text())
    _flip(ck / "manifest.json")
    series, title = gap_histories(ck)
    assert f"epoch {previous['cursor']['epoch']})" in title
    assert len(series[0]["rel_gap"]) == len(previous["results"][0]["history"])
    _flip(ck / "manifest.prev.json")
    assert main(["plot", str(ck), "-o", str(tmp_path / "none.png")]) == 1
    _one_error_line(capsys, "plot", str(ck / "manifest"), "does not match its checksum")
    assert not (tmp_path / "none.png").exists()


def test_info_of_a_directory_that_is_neither_store_nor_checkpoint_is_one_line(tmp_path, capsys):
    """An empty directory, one of someone's files, and one a run left before its first
    commit (a LOCK only): one line naming it and what it is not; nothing changed."""
    empty, notes, killed = tmp_path / "empty", tmp_path / "notes", tmp_path / "killed"
    for d in (empty, notes, killed):
        d.mkdir()
    (notes / "readme.txt").write_text("mine\n")
    (killed / "LOCK").write_bytes(b"streamwww checkpoint lock, pid 1\n")
    for d in (empty, notes, killed):
        for argv in (["info", str(d)], ["info", str(d), "--verify", "--json"], ["plot", str(d)]):
            assert main(argv) == 1, argv
            _one_error_line(capsys, argv[0], str(d), "not a")
    assert (notes / "readme.txt").read_text() == "mine\n" and sorted(os.listdir(killed)) == ["LOCK"]


# ------------------------------------------------------------------ 2. a scheduler that is not one
def _train_on(files, tmp_path, address, capsys):
    t0 = time.monotonic()
    rc = main(["train", str(files / "data.zarr"), "--scheduler", address, "--model-out", str(tmp_path / "m.npz"),
               "--max-iter", "2", "-q"])
    elapsed = time.monotonic() - t0
    assert rc == 1
    err = _one_error_line(capsys, "train", address, "check --scheduler")
    assert "not an address" not in err and "()" not in err, err
    assert elapsed < 20, elapsed
    assert not (tmp_path / "m.npz").exists()
    return err


def test_a_scheduler_address_where_an_http_server_answers_is_one_line(files, tmp_path, capsys, monkeypatch):
    import http.server

    class Hello(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"hello")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("STREAMWWW_SCHEDULER_TIMEOUT", "2")
    try:
        err = _train_on(files, tmp_path, f"tcp://127.0.0.1:{server.server_address[1]}", capsys)
    finally:
        server.shutdown()
        server.server_close()
    assert "as a Dask scheduler" in err, err


def test_a_scheduler_address_that_answers_garbage_is_one_line_not_a_bad_address(files, tmp_path, capsys,
                                                                                monkeypatch):
    """Bytes that are no Dask handshake: it answered, not as a scheduler (never "not an
    address": the address was fine)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def serve():
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.sendall(b"\xff" * 64 + b"HTTP/1.1 400 Bad Request\r\n\r\n" * 4)

    threading.Thread(target=serve, daemon=True).start()
    monkeypatch.setenv("STREAMWWW_SCHEDULER_TIMEOUT", "2")
    try:
        err = _train_on(files, tmp_path, f"tcp://127.0.0.1:{listener.getsockname()[1]}", capsys)
    finally:
        listener.close()
    assert "not as a Dask scheduler" in err or "no answer as a Dask scheduler" in err, err


def test_a_scheduler_that_takes_the_handshake_then_says_nothing_is_one_line(files, tmp_path, capsys, monkeypatch):
    """distributed's own listener (the handshake is a real one), whose handler then never
    answers: one line within the timeout that says so."""
    import asyncio

    from distributed.comm import listen

    ready, box = threading.Event(), {}

    async def serve():
        async def silent(comm):
            await asyncio.sleep(3600)

        box["listener"] = listener = listen("tcp://127.0.0.1:0", silent)
        await listener.start()
        box["address"], box["loop"] = listener.contact_address, asyncio.get_running_loop()
        box["stop"] = stop = asyncio.Event()
        ready.set()
        await stop.wait()
        listener.stop()

    thread = threading.Thread(target=lambda: asyncio.run(serve()), daemon=True)
    thread.start()
    assert ready.wait(30)
    monkeypatch.setenv("STREAMWWW_SCHEDULER_TIMEOUT", "2")
    try:
        err = _train_on(files, tmp_path, box["address"], capsys)
    finally:
        box["loop"].call_soon_threadsafe(box["stop"].set)
        thread.join(10)
    assert "no answer in 2 s" in err, err


# ------------------------------------------------------------------ 3. temporaries of killed commands
def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _killed_when(argv, cwd, appears):
    """Run ``streamwww ARGV`` and SIGKILL it once ``appears()`` is true (its temporary is there)."""
    proc = subprocess.Popen([sys.executable, "-m", "streamwww.cli", *argv], cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + STARTUP_S
        while not appears():
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "its temporary never appeared"
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL, "it ended before it was killed"


def test_the_temporary_of_a_killed_make_data_goes_with_the_next_make_data(tmp_path, capsys):
    """A make-data killed while it writes leaves its temporary beside the output; the next
    make-data of that output removes it. A live writer's temporary and other files stay."""
    out = tmp_path / "gen.txt"
    big = ["make-data", str(out), "--rows", "50000000", "--features", "1000", "--nnz-per-row", "50",
           "--classes", "10", "-q"]
    _killed_when(big, tmp_path, lambda: any(n.startswith(".gen.txt.") for n in os.listdir(tmp_path)))
    (left,) = _hidden(tmp_path)
    live, foreign = tmp_path / f".gen.txt.{os.getppid()}.tmp", tmp_path / ".gen.txt.notes"
    live.write_text("a live writer's")
    foreign.write_text("mine")
    assert main(["make-data", str(out), "--rows", "50", "--features", "5", "--nnz-per-row", "2",
                 "--classes", "2"]) == 0
    capsys.readouterr()
    assert left not in _hidden(tmp_path) and sorted(_hidden(tmp_path)) == sorted([live.name, foreign.name])
    assert len(out.read_text().splitlines()) == 50


def test_the_staging_directory_of_a_killed_convert_goes_with_the_next_convert(tmp_path, capsys):
    """A convert killed while it stages rows leaves ``.OUT.streamwww-tmp-PID-*`` beside its
    output; the next convert to that output removes it; a live writer's stays."""
    from streamwww.io import make_data

    text = tmp_path / "big.txt"
    make_data(text, rows=300_000, features=200, nnz_per_row=30, classes=5, seed=1)
    out = tmp_path / "st.zarr"
    _killed_when(["convert", str(text), str(out), "--shuffle", "-q"], tmp_path,
                 lambda: any(".st.zarr.streamwww-tmp-" in n for n in os.listdir(tmp_path)))
    (left,) = _hidden(tmp_path)
    live = tmp_path / f".st.zarr.streamwww-tmp-{os.getppid()}-0a0b0c0d"
    live.mkdir()
    small = tmp_path / "small.txt"
    small.write_text("1 1:0.5\n2 2:0.5\n")
    assert main(["convert", str(small), str(out), "-q"]) == 0
    assert _hidden(tmp_path) == [live.name] and sw.io.open_store(out).n_rows == 2


def test_the_temporary_of_a_killed_model_save_goes_with_the_next_train(files, tmp_path, capsys):
    """``train --model-out M``: the temporary a save killed by SIGKILL left beside M (its
    PID gone) is removed when the next run writes M; a live writer's stays."""
    dead, live = tmp_path / f".m.npz.{_dead_pid()}.tmp", tmp_path / f".m.npz.{os.getppid()}.tmp"
    for p in (dead, live):
        p.write_bytes(b"half a model")
    assert main(["train", str(files / "data.zarr"), "--checkpoint-dir", str(tmp_path / "ck"), "--model-out",
                 str(tmp_path / "m.npz"), "--max-iter", "2", "-q"]) == 0
    capsys.readouterr()
    assert not dead.exists() and live.read_bytes() == b"half a model"
    assert sw.load_model(tmp_path / "m.npz").n_iter_ == 2


def test_the_folder_of_a_killed_write_predictions_goes_with_the_next_one(files, tmp_path):
    """``write_predictions`` writes a folder under ``.NAME.streamwww-tmp-PID-HEX`` (a store's
    transaction): one a dead process left is removed whole by the next write of that
    output; a live writer's folder and other names stay."""
    dead = tmp_path / f".pred.streamwww-tmp-{_dead_pid()}-0123abcd"
    stays = [tmp_path / f".pred.streamwww-tmp-{os.getppid()}-0123abcd", tmp_path / ".pred.notes.tmp"]
    for d in (dead, *stays):
        d.mkdir()
        (d / "part").write_bytes(b"half")
    model = sw.load_model(files / "m.npz")
    sw.write_predictions(model, files / "data.zarr", tmp_path / "pred")
    assert not dead.exists()
    assert all((d / "part").read_bytes() == b"half" for d in stays)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".pred.")) == sorted(d.name for d in stays)


def test_overwriting_predictions_never_replaces_a_folder_of_other_files(files, tmp_path):
    """``overwrite=True`` replaces an earlier predictions output (this version's, marked by
    ``_predictions.json``, or an earlier version's unmarked one), never a folder that holds
    anything else: a mistyped ``--output`` does not delete a user's files."""
    model = sw.load_model(files / "m.npz")
    mine = tmp_path / "results"
    mine.mkdir()
    (mine / "notes.txt").write_text("a day's work")
    with pytest.raises(FileExistsError, match=r"results exists and is not an output of streamwww "
                                              r"\(_predictions\.json\); refusing to replace it"):
        sw.write_predictions(model, files / "data.zarr", mine, overwrite=True)
    assert (mine / "notes.txt").read_text() == "a day's work" and sorted(os.listdir(mine)) == ["notes.txt"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".results.")]
    out = sw.write_predictions(model, files / "data.zarr", tmp_path / "pred", format="parquet")
    (out / "_predictions.json").unlink()  # as 0.6 wrote it on a local disk: no marker
    sw.write_predictions(model, files / "data.zarr", out, format="zarr", overwrite=True)
    assert (out / "_predictions.json").is_file() and (out / "zarr.json").is_file()
    assert not list(out.glob("part-*"))


# ------------------------------------------------------------------ 4. warnings in the command line
def _console(*argv, cwd=None):
    proc = subprocess.run([sys.executable, "-m", "streamwww.cli", *argv], capture_output=True, text=True,
                          timeout=300, cwd=cwd)
    return proc


def test_the_old_store_version_warning_is_one_line_and_silent_under_q(tmp_path):
    """A store of format version 1 (no checksums): ``info`` says so in one
    ``streamwww info: warning: ...`` line; ``-q`` silences it."""
    import shutil
    from pathlib import Path

    store = tmp_path / "v1.zarr"
    shutil.copytree(Path(__file__).parent / "io" / "data" / "v1-zarr", store)
    proc = _console("info", str(store))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("streamwww info: warning: "), proc.stderr
    assert "format version 1" in lines[0] and str(store) in lines[0]
    proc = _console("info", str(store), "-q")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


def test_a_library_warning_of_convert_is_one_line_and_silent_under_q(tmp_path):
    """``convert --skip-bad-lines``: the reader's warning about the lines it skipped is one
    ``streamwww convert: warning: ...`` line, none under ``-q``."""
    text = tmp_path / "bad.txt"
    text.write_text("1 1:0.5\nnot a row\n2 2:0.5\n")
    proc = _console("convert", str(text), str(tmp_path / "a.zarr"), "--skip-bad-lines")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("streamwww convert: warning: "), proc.stderr
    assert "skipped 1 malformed line" in lines[0]
    proc = _console("convert", str(text), str(tmp_path / "b.zarr"), "--skip-bad-lines", "-q")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
