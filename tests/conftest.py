import os
from pathlib import Path

import numpy as np
import pytest

import streamwww
from streamwww.backends import _kernels

# Commands and scripts a test starts import the streamwww the tests import: ``python -m pytest``
# imports the checkout, and a console script, or a script run from another folder, would find
# the installed copy. One copy of the code under test, and one Numba cache of its kernels (a
# cache belongs to a source path), not a second compile of every kernel for the other copy.
_UNDER_TEST = str(Path(streamwww.__file__).resolve().parent.parent)
os.environ["PYTHONPATH"] = os.pathsep.join([_UNDER_TEST, *(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                                                          if p and p != _UNDER_TEST)])

DATA_DIR = Path(os.environ.get("STREAMWWW_DATA", Path(__file__).resolve().parents[1].parent / "shared" / "data" / "libsvm"))

# How long a test waits for a subprocess to reach its first step: on a cold Numba cache it
# compiles first, minutes on a slow machine whose other core compiles for another test. A
# bound on a wait, never on the result: a process that gets there sooner goes on at once.
STARTUP_S = 600.0

# The kernels have a build for each class count up to SMALL_K (backends/_lanes.py) besides
# the generic build, and each is compiled on its first use: about two minutes of compiling
# per class count and kind of rows on a slow 2-core machine, most of a cold run of this suite.
# In the test processes the small-k builds of LANES_K run, and the generic builds for the
# other class counts; a test marked ``all_builds`` runs the build a user's run takes. The
# small-k builds give the generic builds' bits (tests/test_shrinking.py, k = 2, 3, 6, 8, marked
# so), and commands a test starts in a process of its own run their usual builds.
# (tests/cuda_sim/conftest.py empties it: its CPU side runs the generic builds only)
LANES_K = (3, 5)
EVERY_BUILD = _kernels.ktag


def _suite_ktag(k: int) -> tuple:
    return EVERY_BUILD(k) if k in LANES_K else ()


def pytest_configure(config):
    _kernels.ktag = _suite_ktag


@pytest.fixture(autouse=True)
def _kernel_builds(request, monkeypatch):
    if request.node.get_closest_marker("all_builds") is not None:
        monkeypatch.setattr(_kernels, "ktag", EVERY_BUILD)


def command_lines(stderr: str) -> list[str]:
    """A command's stderr lines (the text stripped) but the note it prints once when it
    compiles the kernels: whether a command a test starts meets a cold Numba cache depends
    on the tests that ran before it."""
    from streamwww.cli import COMPILING_NOTE

    return [ln for ln in stderr.strip().splitlines() if ln != COMPILING_NOTE]


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


def write_libsvm(path, X, labels, zero_based=False):
    """Dense rows ``X`` and ``labels`` as LIBSVM text at ``path`` (gzip for ``.gz``)."""
    import gzip

    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wt") as f:
        for row, lab in zip(X, labels):
            f.write(f"{lab:g} " + " ".join(f"{j + (0 if zero_based else 1)}:{v:.9g}"
                                            for j, v in enumerate(row) if v != 0) + "\n")


def make_classification(rng, n=60, d=5, k=4, sparse=False, density=0.5, dtype=np.float64):
    """Small learnable multiclass data: class prototypes plus noise."""
    import scipy.sparse as sp

    protos = rng.normal(size=(k, d)) * 2.0
    y = rng.integers(0, k, size=n)
    y[:k] = np.arange(k)  # every class present
    X = protos[y] + rng.normal(size=(n, d))
    if sparse:
        X = X * (rng.random((n, d)) < density)
        return sp.csr_matrix(X.astype(dtype)), y
    return X.astype(dtype), y


def settled_rows(rng, n: int, k: int, C: float, cs: bool):
    """A shrinking state of one model with rows of three kinds (``kind = i % 3``), the
    near-flags and ``beta`` (``(1, n, k - 1)`` each): 0, settled at the bounds (engine.shrink's
    rule 3: every coordinate in play at ``C`` with its flag set; one such coordinate for
    Crammer-Singer, whose ``1^T beta_i <= C`` allows no second, two where WW can); 1, the same
    with one more flagged coordinate at 0; 2, the same with the flags of those at ``C`` unset."""
    beta = np.zeros((1, n, k - 1))
    near = np.zeros((1, n, k - 1), dtype=np.uint8)
    for i in range(n):
        at = rng.choice(k - 1, size=1 if cs else 2, replace=False)
        beta[0, i, at] = C
        near[0, i, at] = 0 if i % 3 == 2 else 1
        if i % 3 == 1:
            near[0, i, [t for t in range(k - 1) if t not in at][0]] = 1
    return beta, near


def check_an_old_rule_resumes(monkeypatch, store, ckpt, rule: int, stop_epoch: int, **settings) -> dict:
    """A run of ``settings`` on ``store`` as a version whose new runs took shrinking rule
    ``rule`` (engine.shrink) wrote it, interrupted after epoch ``stop_epoch`` into ``ckpt``,
    resumes to that version's whole run bitwise, which today's rule does not train (so the
    check can fail).  Returns the checkpoint's recorded config."""
    import json

    import streamwww.engine.run as run_module

    now = streamwww.train(str(store), **settings)
    with monkeypatch.context() as patch:
        patch.setattr(run_module, "SHRINK_RULE", rule)
        old = streamwww.train(str(store), **settings)

        def stop(info):
            if info["epoch"] == stop_epoch:
                raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            streamwww.train(str(store), checkpoint_dir=ckpt, checkpoint_interval=0, callback=stop, **settings)
    assert not np.array_equal(now.coef_, old.coef_)
    np.testing.assert_array_equal(streamwww.resume(ckpt).coef_, old.coef_)
    return json.loads((Path(ckpt) / "manifest.json").read_text())["config"]


class S3Server:
    """A real S3 API on loopback (moto's server), for one test session.

    ``url(name)`` gives a fresh bucket's URL and ``options`` the storage
    options that reach it; ``stop()``/``start()`` take it away and bring it
    back (on the same port, with its objects kept while the process lives).
    """

    def __init__(self):
        import logging

        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._server.start()
        self.host, self.port = self._server.get_host_and_port()
        self.endpoint = f"http://{self.host}:{self.port}"
        # retries kept short so that a stopped server is an error in seconds
        self.options = {"key": "testing", "secret": "testing", "endpoint_url": self.endpoint,
                        "config_kwargs": {"retries": {"max_attempts": 2, "mode": "standard"},
                                          "connect_timeout": 2, "read_timeout": 20}}
        self._buckets = 0

    def url(self, name: str = "data") -> str:
        import s3fs

        self._buckets += 1
        bucket = f"bucket-{self._buckets:04d}"
        s3fs.S3FileSystem(**self.options).mkdir(bucket)
        return f"s3://{bucket}/{name}"

    def filesystem(self):
        import s3fs

        return s3fs.S3FileSystem(**self.options)

    def stop(self):
        self._server.stop()

    def start(self):
        from moto.server import ThreadedMotoServer

        self._server = ThreadedMotoServer(ip_address=self.host, port=self.port, verbose=False)
        self._server.start()


def no_room_for_scratch(monkeypatch):
    """No room for scratch files (a full disk): a run's beta beyond the memory budget is
    then written as a version every epoch, and the rows' norms computed at every read."""
    import errno

    from streamwww.state import scratch

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(scratch.ShardScratch, "__init__", full)


@pytest.fixture
def no_scratch_room(monkeypatch):
    no_room_for_scratch(monkeypatch)


@pytest.fixture(scope="session")
def s3_server():
    pytest.importorskip("s3fs")
    pytest.importorskip("moto.server")
    server = S3Server()
    yield server
    server.stop()


def kill_after_commits(start, step, rng, tries: int, max_delay: float, on_kill=None):
    """SIGKILL training subprocesses at random moments after they commit.

    ``start()`` launches one (a ``subprocess.Popen``), ``step()`` reads the step of
    the newest committed manifest (0: none). Each try waits until its process has
    committed a checkpoint of its own (a cold Numba cache can take many seconds),
    then kills it up to ``max_delay`` seconds later; a process that finishes first
    ends the tries. ``on_kill(proc)`` runs after each kill. Returns
    ``(kills, steps seen at the kills)``.
    """
    import signal
    import time

    kills, steps_seen = 0, set()
    for _ in range(tries):
        proc = start()
        begin, deadline = step(), time.monotonic() + STARTUP_S
        while proc.poll() is None and step() <= begin and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(rng.uniform(0.0, max_delay))
        if proc.poll() is not None:
            break
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kills += 1
        steps_seen.add(step())
        if on_kill is not None:
            on_kill(proc)
    return kills, steps_seen


def auto_epochs(history, *, tol=1e-3, gap_decay=None, max_iter=1000):
    """The epochs version 2 of the ``"auto"`` schedule (engine.schedule) evaluates, replayed
    from a run's own ``history``: epoch 1, then each evaluation's spacing, up to the run's
    last epoch (its stop, or ``max_iter``, always evaluated)."""
    from streamwww.engine.config import SolverConfig
    from streamwww.engine.schedule import adaptive_spacing

    cfg = SolverConfig(Cs=(1.0,), tol=tol, gap_decay=gap_decay, max_iter=max_iter, eval_every="auto", schedule=2)
    gap_1, last = history[0]["gap"], history[-1]["epoch"]
    epochs = [1]
    while epochs[-1] < last:
        upto = [h for h in history if h["epoch"] <= epochs[-1]]
        epochs.append(min(max_iter, epochs[-1] + adaptive_spacing(cfg, upto, gap_1)))
    return epochs


def stop_in_epoch(n: int):
    """A ``progress`` callback that raises ``KeyboardInterrupt`` (as Ctrl-C would) once
    epoch ``n`` (1-based) has trained a group: the run keeps its last commit."""
    def progress(epoch, done, n_shards, rows):
        if epoch == n:
            raise KeyboardInterrupt
    return progress


def one_error_line(capsys, command: str, *needles: str) -> str:
    """The command's stderr: exactly one line, ``streamwww COMMAND: error: ...``, no
    traceback, holding every one of ``needles``."""
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"streamwww {command}: error: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, err
    return err


@pytest.fixture
def memory_root():
    """A fresh memory:// prefix, emptied afterwards (the memory file system is per process)."""
    import os

    import fsspec

    fs = fsspec.filesystem("memory")
    root = f"/t-{os.urandom(4).hex()}"
    yield f"memory://{root}"
    if fs.exists(root):
        fs.rm(root, recursive=True)
