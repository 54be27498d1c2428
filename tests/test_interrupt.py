"""Ctrl-C at random instants of a streamed, checkpointed run (in a subprocess): the run stops
within seconds, and resuming its checkpoint gives the uninterrupted run's model, bitwise."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest

import streamwww as sw
from streamwww.io import write_store

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
    deadline = time.monotonic() + 60
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
    assert "KeyboardInterrupt" in err, err[-2000:]
    assert stopped_in < 5, f"took {stopped_in:.1f}s to stop"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        resumed = sw.resume(ck) if (ck / "manifest.json").exists() else \
            sw.train(store, C=0.5, tol=0.0, max_iter=max_iter, random_state=7, checkpoint_dir=ck,
                     checkpoint_every=1, checkpoint_interval=0.0, prefetch=2)
    assert resumed.coef_.tobytes() == reference.coef_.tobytes()
    assert resumed.n_iter_ == max_iter
