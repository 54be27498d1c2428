"""Ctrl-C and SIGTERM during a streamed, checkpointed run: the run stops within seconds,
keeping the work done (a commit at the next group boundary, whatever
``checkpoint_interval`` says), and resuming its checkpoint gives the uninterrupted run's
model, bitwise.  Real signals at random instants in a subprocess; signals raised at chosen
places in this process (a group, an epoch's last group, an objective pass) for each kind
of run: several C with partial objective passes, sets every epoch, the late certificates
(with and without one pending), cross-validation splits."""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import numpy as np
import pytest

import streamwww as sw
from streamwww.engine.interrupt import CtrlC, Interrupted
from streamwww.io import write_store

from .conftest import STARTUP_S

SCRIPT = textwrap.dedent("""
    import sys, time, warnings
    import streamwww as sw
    warnings.simplefilter("ignore")
    open(sys.argv[3], "w").close()  # imported: the clock starts
    sw.train(sys.argv[1], C=0.5, tol=0.0, max_iter=int(sys.argv[4]), random_state=7,
             checkpoint_dir=sys.argv[2], checkpoint_every=1, checkpoint_interval=0.0, prefetch=2)
    open(sys.argv[3] + ".done", "w").write(repr(time.time()))
""")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1800, 40)).astype(np.float32)
    y = rng.integers(0, 5, size=1800)
    path = tmp_path_factory.mktemp("ctrlc") / "s.zarr"
    write_store(path, X, y, shard_rows=150)
    return path


MAX_ITER = 100  # about 4 s of training in the child: set-up, first epoch, later epochs


@pytest.fixture(scope="module")
def reference(store):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sw.train(store, C=0.5, tol=0.0, max_iter=MAX_ITER, random_state=7, prefetch=2)


@pytest.mark.parametrize("instant", range(6))
def test_ctrl_c_at_a_random_instant_stops_and_resumes_bitwise(store, reference, tmp_path, instant):
    max_iter = MAX_ITER
    ck, started = tmp_path / "ck", tmp_path / "started"
    # SIG_DFL in the child: a test runner started in the background (`pytest &`, nohup) has
    # SIGINT ignored, and its children would inherit that, as a user's `nohup streamwww` does
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(store), str(ck), str(started), str(max_iter)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + STARTUP_S
    while not started.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    delay = np.random.default_rng(instant).uniform(0.0, 4.0)
    time.sleep(delay)
    sent, sent_wall = time.monotonic(), time.time()
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:  # pragma: no cover - the failure this test exists for
        proc.kill()
        pytest.fail(f"Ctrl-C {delay:.2f}s into training was not obeyed within 15 s")
    stopped_in = time.monotonic() - sent
    done = tmp_path / "started.done"
    if proc.returncode == 0 or done.exists():
        # (a signal during the interpreter's exit, after the run, ends it with status -2)
        assert done.exists() and float(done.read_text()) < sent_wall, \
            f"Ctrl-C {delay:.2f}s into the run was swallowed: it went on to the end"
        pytest.skip(f"the run finished before Ctrl-C at {delay:.2f}s")  # pragma: no cover
    # (in the fit, a KeyboardInterrupt saying where the work is; before it, Python's own)
    assert "Interrupted: interrupted" in err or "\nKeyboardInterrupt" in err, err[-2000:]
    assert stopped_in < 5, f"took {stopped_in:.1f}s to stop"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        resumed = sw.resume(ck) if (ck / "manifest.json").exists() else \
            sw.train(store, C=0.5, tol=0.0, max_iter=max_iter, random_state=7, checkpoint_dir=ck,
                     checkpoint_every=1, checkpoint_interval=0.0, prefetch=2)
    assert resumed.coef_.tobytes() == reference.coef_.tobytes()
    assert resumed.n_iter_ == max_iter


# -- a signal in the first seconds, with the default checkpoint_interval (60 s) ------------

KEEPING = textwrap.dedent("""
    import sys, time, warnings
    import streamwww as sw
    from streamwww.engine.interrupt import Interrupted
    warnings.simplefilter("ignore")
    store, ck, started, max_iter, settings = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), eval(sys.argv[5])

    def progress(epoch, done, n_shards, rows):
        if epoch == 1 and done <= 2:
            open(started, "w").close()  # a group has trained: the clock starts
        time.sleep(0.01)  # (a run of seconds, as a larger store's: the model does not depend on it)

    # the kernels compiled first: a signal during a compilation waits for it (Numba cannot be
    # interrupted), which on a cold cache can take longer than the stop this test times
    sw.train(store, tol=0.0, max_iter=2, random_state=7, prefetch=2, **settings)
    try:  # the default checkpoint_interval: no commit in the first minute but the stop's
        sw.train(store, tol=0.0, max_iter=max_iter, random_state=7, checkpoint_dir=ck, prefetch=2,
                 progress=progress, **settings)
    except Interrupted as exc:  # (what a script does that wants the command line's status)
        print(exc, file=sys.stderr)
        sys.exit(exc.exit_status)
    open(started + ".done", "w").write(repr(time.time()))
""")


@pytest.fixture(scope="module")
def references(store):
    """The uninterrupted run of ``settings`` (seed 7), trained once per module."""
    cache = {}

    def reference(settings: dict):
        key = repr(sorted(settings.items()))
        if key not in cache:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cache[key] = sw.train(store, random_state=7, prefetch=2, **settings)
        return cache[key]

    return reference


def _models(m):
    return m if isinstance(m, list) else [m]


def _same(a, b) -> bool:
    return all(x.coef_.tobytes() == y.coef_.tobytes() and x.intercept_.tobytes() == y.intercept_.tobytes()
               and x.n_iter_ == y.n_iter_ for x, y in zip(_models(a), _models(b), strict=True))


@pytest.mark.parametrize("sig, settings", [
    (signal.SIGINT, {"C": [0.5, 4.0]}),
    (signal.SIGTERM, {"C": [0.5, 4.0]}),
    (signal.SIGINT, {"C": 0.5, "memory_budget": 0}),  # one model, read from disk: late certificates
], ids=["sigint-two-C", "sigterm-two-C", "sigint-late"])
def test_a_signal_in_the_first_seconds_keeps_the_work_and_resumes_bitwise(store, references, tmp_path, sig,
                                                                          settings):
    ck, started = tmp_path / "ck", tmp_path / "started"
    proc = subprocess.Popen([sys.executable, "-c", KEEPING, str(store), str(ck), str(started), str(MAX_ITER),
                             repr(settings)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + STARTUP_S
    while not started.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert started.exists(), proc.communicate()[1][-2000:]
    time.sleep(np.random.default_rng(int(sig)).uniform(0.0, 1.0))
    sent = time.monotonic()
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:  # pragma: no cover - the failure this test exists for
        proc.kill()
        pytest.fail("the signal was not obeyed within 15 s")
    stopped_in = time.monotonic() - sent
    if (tmp_path / "started.done").exists():  # pragma: no cover
        pytest.skip("the run finished before the signal")
    assert proc.returncode == 128 + sig, err[-2000:]
    assert stopped_in < 5, f"took {stopped_in:.1f}s to stop"
    m = json.loads((ck / "manifest.json").read_text())
    assert m["cursor"]["epoch"] + m["cursor"]["pos"] > 0  # work, kept although no interval had passed
    assert f"interrupted at epoch {m['cursor']['epoch'] + 1} (shard {m['cursor']['pos']} of 12); " \
           f"the work is kept in {ck}" in err
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert _same(sw.resume(ck), references(dict(settings, tol=0.0, max_iter=MAX_ITER)))


# -- a signal raised at a chosen place of the run, in this process -------------------------

@pytest.fixture
def handlers():
    """SIGINT and SIGTERM at their defaults (a runner in the background ignores SIGINT), so a
    fit's handler takes them."""
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    for s, h in old.items():
        signal.signal(s, h)


def _send(sig) -> None:
    """Send ``sig`` to this process's main thread (as a terminal's Ctrl-C reaches it, even while
    it waits), only where a fit's handler takes it (SIGTERM's default ends the process)."""
    assert signal.getsignal(sig) not in (signal.SIG_DFL, signal.SIG_IGN, signal.default_int_handler)
    signal.pthread_kill(threading.main_thread().ident, sig)


RUNS = {  # settings, and the epoch (1-based) whose objective pass is interrupted
    # several C: the models' passes part ways (epoch 7 scores C=0.01 alone; the others keep their sets)
    "several-C": (dict(C=[0.01, 0.5, 20.0], tol=1e-3, max_iter=14), 7),
    "sets-every-epoch": (dict(C=[0.5, 4.0], tol=0.0, max_iter=8, eval_every=1), 3),
    # one model read from disk: W_t certified with epoch t + 1's first pass (epoch 5's: W_4's, rewound)
    "late": (dict(C=0.5, tol=0.0, max_iter=8, memory_budget=0), 8),
    # ... its epoch 5 without a certificate pending: the sets of W_3's certificate in force
    "late-every-3": (dict(C=0.5, tol=0.0, max_iter=8, memory_budget=0, eval_every=3), 8),
    "cv": (dict(C=[0.5, 4.0], cv=3, tol=0.0, max_iter=8), 4),
}


@pytest.mark.parametrize("where", ["group", "epoch-end", "objective-pass"])
@pytest.mark.parametrize("run", list(RUNS))
def test_a_signal_at_each_kind_of_place_keeps_the_work_and_resumes_bitwise(store, references, tmp_path,
                                                                           monkeypatch, handlers, caplog, run, where):
    from streamwww.state.betas import DiskBetas

    settings, pass_epoch = RUNS[run]
    reference = references(settings)
    settings = dict(settings, random_state=7, prefetch=2)
    epoch = {"group": 5, "epoch-end": 4, "objective-pass": pass_epoch}[where]
    armed = []

    def progress(e, done, n_shards, rows):
        if e == epoch and not armed and (where == "group" or done == n_shards):
            armed.append(True)
            if where != "objective-pass":
                _send(signal.SIGINT)

    sums = DiskBetas.sums

    def sums_then_signal(self, s, active):
        if armed == [True] and where == "objective-pass":
            armed.append(False)
            _send(signal.SIGINT)
        return sums(self, s, active)

    monkeypatch.setattr(DiskBetas, "sums", sums_then_signal)
    ck = tmp_path / "ck"
    with caplog.at_level("INFO", logger="streamwww.engine.run"), pytest.raises(Interrupted) as caught:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sw.train(store, checkpoint_dir=ck, progress=progress, **settings)
    assert ("objectives late" in caplog.text) == run.startswith("late")
    exc = caught.value
    m = json.loads((ck / "manifest.json").read_text())
    assert exc.kept == {"epoch": m["cursor"]["epoch"], "pos": m["cursor"]["pos"], "finished": False}
    assert exc.signum == signal.SIGINT and exc.n_shards == 12 and exc.checkpoint_dir == str(ck)
    assert str(exc) == f"interrupted {exc.where()}: continue with streamwww.resume({str(ck)!r})"
    assert str(exc) in caplog.text  # (logged, at INFO)
    # kept: the epochs before the stop (a pending late certificate: the epoch's start, W_t uncertified)
    assert m["cursor"]["epoch"] == epoch - (where != "objective-pass")
    assert m["cursor"]["pos"] > 0 or where == "objective-pass" or run.startswith("late")
    if run == "several-C" and where == "objective-pass":  # C=0.01 scored alone: the others' sets kept
        assert "W_sets" in m
    monkeypatch.setattr(DiskBetas, "sums", sums)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert _same(sw.resume(ck), reference)


def test_a_second_signal_while_the_stop_commits_does_not_cut_the_commit(store, tmp_path, monkeypatch, handlers):
    from streamwww.state.checkpoint import CheckpointDir

    # (beta beyond the memory budget, in a scratch file, which the commit reads: the fit must not close it first)
    settings = dict(C=[0.5, 4.0], tol=0.0, max_iter=6, random_state=7, prefetch=2, memory_budget=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = sw.train(store, **settings)
    write = CheckpointDir._write_commit
    signals = []

    def write_with_signals(self, *args, **kwargs):  # (on the commit's thread: the handler runs on the main one)
        signals.append(time.monotonic())
        for sig in (signal.SIGINT, signal.SIGTERM):
            _send(sig)
            time.sleep(0.2)
        return write(self, *args, **kwargs)

    def progress(e, done, n_shards, rows):
        if e == 3 and done == 4:
            monkeypatch.setattr(CheckpointDir, "_write_commit", write_with_signals)
            _send(signal.SIGINT)

    ck = tmp_path / "ck"
    with pytest.raises(Interrupted) as caught, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sw.train(store, checkpoint_dir=ck, progress=progress, **settings)
    assert len(signals) == 1 and caught.value.signum == signal.SIGINT
    m = json.loads((ck / "manifest.json").read_text())
    assert m["cursor"]["epoch"] == 2 and m["cursor"]["pos"] == 4  # the stop's commit, whole
    monkeypatch.setattr(CheckpointDir, "_write_commit", write)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert _same(sw.resume(ck), reference)


def test_the_handler_keeps_the_first_signal_for_the_driver_and_obeys_a_second_at_once(handlers):
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Interrupted) as caught, CtrlC():
        _send(signal.SIGTERM)  # not keeping (no checkpoint directory): at once
    assert caught.value.signum == signal.SIGTERM
    with CtrlC() as stop:
        stop.keeps = True
        _send(signal.SIGTERM)
        assert stop.is_set() and stop.signum == signal.SIGTERM  # for the driver, at the next group
        with pytest.raises(Interrupted) as caught:
            _send(signal.SIGINT)  # again: at once
        assert caught.value.signum == signal.SIGTERM and caught.value.exit_status == 143
        assert stop.shielded
        _send(signal.SIGINT)  # the fit unwinds, its commit in progress drained: recorded only
    assert signal.getsignal(signal.SIGTERM) is before


def test_the_command_line_says_where_the_work_is_and_exits_with_the_signals_status(store, tmp_path, monkeypatch,
                                                                                 handlers, capsys):
    from streamwww import cli
    from streamwww.engine import epoch, run

    order, calls = epoch.row_order, []

    def row_order_then(sig):
        def row_order(*args):
            calls.append(1)
            if len(calls) == 15:  # the 15th group of two shards: epoch 3, 6 of 12 shards done at its end
                _send(sig)
            return order(*args)
        return row_order

    ck = tmp_path / "ck"
    monkeypatch.setattr(epoch, "row_order", row_order_then(signal.SIGTERM))
    common = ["--C", "0.5,4", "--tol", "0", "--max-iter", "6", "--seed", "7", "--model-out", str(tmp_path / "m.npz")]
    assert cli.main(["train", str(store), "--checkpoint-dir", str(ck), *common]) == 143
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"streamwww train: interrupted at epoch 3 (shard 6 of 12); the work is kept in {ck}: "
        f"continue with `streamwww resume {ck}`")
    assert not list(tmp_path.glob("m*.npz"))
    monkeypatch.setattr(epoch, "row_order", order)
    assert cli.main(["resume", str(ck)]) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = sw.train(store, C=[0.5, 4.0], tol=0.0, max_iter=6, random_state=7)
    assert all(sw.load_model(tmp_path / f"m-C{c}.npz").coef_.tobytes() == r.coef_.tobytes()
               for c, r in zip(("0.5", "4"), reference))

    # a signal while the run sets up: nothing kept yet, and the command says what to run
    opened = run._open_stream

    def open_stream_then_signal(*args, **kwargs):
        _send(signal.SIGINT)
        return opened(*args, **kwargs)

    monkeypatch.setattr(run, "_open_stream", open_stream_then_signal)
    fresh = [str(store), "--checkpoint-dir", str(tmp_path / "ck2"), *common]
    assert cli.main(["train", *fresh]) == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"streamwww train: interrupted before anything was kept in {tmp_path / 'ck2'}: "
        "run the same `streamwww train` command again")
    monkeypatch.setattr(run, "_open_stream", opened)
    assert cli.main(["train", *fresh]) == 0  # (what the message says to run)
    # a cluster run without --checkpoint-dir keeps nothing (beta in a temporary directory)
    assert cli._interrupted_line(Interrupted(), argparse.Namespace(command="train", checkpoint_dir=None)) == (
        "interrupted; nothing was kept (no --checkpoint-dir): run `streamwww train` again with "
        "--checkpoint-dir DIR to keep the work of a run that is interrupted")


def test_without_a_checkpoint_directory_the_exception_says_nothing_was_kept(store, monkeypatch, handlers):
    from streamwww.engine import epoch

    order = epoch.row_order
    calls = []

    def row_order(*args):
        calls.append(1)
        if len(calls) == 3:
            _send(signal.SIGINT)
        return order(*args)

    monkeypatch.setattr(epoch, "row_order", row_order)
    with pytest.raises(Interrupted) as caught:
        sw.train(store, C=0.5, tol=0.0, max_iter=4, random_state=7)
    assert caught.value.kept is None and caught.value.checkpoint_dir is None
    assert str(caught.value) == ("interrupted; nothing was kept (no checkpoint directory): streamwww.train(..., "
                                 "checkpoint_dir=DIR) keeps the work of a run that is interrupted")


def test_a_cluster_run_keeps_every_round_it_committed(tmp_path, handlers):
    """A cluster run commits after every round (no interval): a signal stops it at once (a
    round's tasks are not stopped within), the commit in progress drained; it says where the
    work is, and resumes to the undisturbed model, bitwise."""
    distributed = pytest.importorskip("distributed")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(240, 6)).astype(np.float32)
    store = write_store(tmp_path / "s.zarr", X, X[:, :3].argmax(1), shard_rows=30)
    kw = dict(C=[0.5, 2.0], tol=0.0, max_iter=6, random_state=1, device="cpu", partitions=2)

    def progress(t, done, n_shards, rows):
        if t == 4:
            _send(signal.SIGTERM)

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reference = sw.train(store, client=client, **kw)
            with pytest.raises(Interrupted) as caught:
                sw.train(store, client=client, checkpoint_dir=tmp_path / "ck", progress=progress, **kw)
            m = json.loads((tmp_path / "ck" / "manifest.json").read_text())
            resumed = sw.resume(tmp_path / "ck", client=client)
        assert caught.value.signum == signal.SIGTERM and 1 <= m["cursor"]["epoch"] <= 3
        assert caught.value.where() == (f"at epoch {m['cursor']['epoch'] + 1} (shard 0 of 8); "
                                        f"the work is kept in {tmp_path / 'ck'}")
        assert _same(resumed, reference)
