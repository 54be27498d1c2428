"""The streamwww command line: demo, train, resume, predict, evaluate."""

import re

import numpy as np
import pytest

import streamwww as sw
from streamwww.cli import main
from streamwww.io import write_store

from .conftest import make_classification


def test_demo_runs_the_whole_path(capsys):
    rc = main(["demo", "--rows", "3000", "--test-rows", "1000", "--features", "50", "--nnz-per-row", "8",
               "--classes", "4", "--shard-rows", "1000"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "3 shuffled Zarr shards" in out
    acc = float(re.search(r"test accuracy ([0-9.]+) %", out).group(1))
    assert acc > 80.0


@pytest.fixture
def stores(tmp_path):
    rng = np.random.default_rng(3)
    X, y = make_classification(rng, n=900, d=10, k=4, dtype=np.float32)
    labels = np.array([2.0, 4.0, 6.0, 8.0])[y]
    write_store(tmp_path / "train.zarr", X[:600], labels[:600], shard_rows=200)
    write_store(tmp_path / "test.zarr", X[600:], labels[600:], shard_rows=200,
                classes=sw.open_store(tmp_path / "train.zarr").classes)
    return tmp_path, X, labels


def test_train_evaluate_predict_resume(stores, capsys):
    tmp, X, labels = stores
    rc = main(["train", str(tmp / "train.zarr"), "--C", "0.1,1", "--checkpoint-dir", str(tmp / "ck"),
               "--model-out", str(tmp / "m.npz"), "--seed", "1", "--max-iter", "50"])
    assert rc == 0
    out = capsys.readouterr()
    assert "C=0.1:" in out.out and "C=1:" in out.out
    assert re.search(r"epoch +1 +C=[0-9.e+-]+ +primal", out.err)  # one line per epoch, labelled by C
    model = sw.load_model(tmp / "m-C0.1.npz")
    assert (tmp / "m-C1.npz").exists()

    assert main(["evaluate", str(tmp / "m-C0.1.npz"), str(tmp / "test.zarr"), "--confusion"]) == 0
    out = capsys.readouterr().out
    acc = float(re.search(r"accuracy: ([0-9.]+) %", out).group(1))
    expected = 100 * np.mean(model.predict(X[600:]) == labels[600:])
    assert acc == pytest.approx(expected, abs=0.005) and acc > 80
    assert "confusion matrix" in out and out.count("\n") >= 6

    assert main(["predict", str(tmp / "m-C0.1.npz"), str(tmp / "test.zarr"), "--output", str(tmp / "p.txt")]) == 0
    lines = (tmp / "p.txt").read_text().split()
    assert len(lines) == 300 and set(lines) <= {"2", "4", "6", "8"}
    assert np.array_equal(np.array(lines, dtype=float), model.predict(X[600:]))

    # LIBSVM input for predict
    libsvm = tmp / "test.libsvm"
    with open(libsvm, "w") as f:
        for row, lab in zip(X[600:610], labels[600:610]):
            f.write(f"{lab:g} " + " ".join(f"{j + 1}:{v:.9g}" for j, v in enumerate(row) if v != 0) + "\n")
    assert main(["predict", str(tmp / "m-C0.1.npz"), str(libsvm)]) == 0
    pred = capsys.readouterr().out.split()
    assert np.array_equal(np.array(pred, dtype=float), model.predict(X[600:610]))

    # resuming the finished run changes nothing
    assert main(["resume", str(tmp / "ck"), "--model-out", str(tmp / "r.npz")]) == 0
    capsys.readouterr()
    again = sw.load_model(tmp / "r-C0.1.npz")
    assert again.coef_.tobytes() == model.coef_.tobytes()


def test_bad_input_is_a_clear_error(stores, capsys):
    tmp, _, _ = stores
    with pytest.raises(SystemExit) as exc:
        main(["train", str(tmp / "train.zarr"), "--C", "abc", "--checkpoint-dir", "x", "--model-out", "m"])
    assert exc.value.code == 2
    assert "--C must be a comma-separated list" in capsys.readouterr().err
    rc = main(["train", str(tmp / "nope.zarr"), "--checkpoint-dir", str(tmp / "c2"), "--model-out", str(tmp / "m")])
    assert rc == 1
    err = capsys.readouterr().err
    assert "streamwww train: error:" in err and "nope.zarr" in err
    rc = main(["train", str(tmp / "train.zarr"), "--C", "-1", "--checkpoint-dir", str(tmp / "c3"),
               "--model-out", str(tmp / "m")])
    assert rc == 1 and "--C must be a float in (0, inf)" in capsys.readouterr().err
    # one class: one line before anything is written (with a checkpoint directory, training
    # reached its first beta commit and failed there with a ZeroDivisionError traceback)
    write_store(tmp / "one.zarr", np.eye(3, dtype=np.float32), np.array([4.0, 4.0, 4.0]), shard_rows=3)
    rc = main(["train", str(tmp / "one.zarr"), "--checkpoint-dir", str(tmp / "c4"), "--model-out", str(tmp / "m")])
    err = capsys.readouterr().err
    assert rc == 1 and err.count("\n") == 1 and "one.zarr: the number of classes has to be greater than one" in err
    assert not (tmp / "c4").exists() and not (tmp / "m").exists()
    with pytest.raises(ValueError, match=r"one\.zarr: the number of classes has to be greater than one; got 1 class "
                                         r"\(label 4\)\. train needs at least 2 classes\."):
        sw.train(tmp / "one.zarr")  # (without a checkpoint directory it returned a one-class model)
    # the row-parallel GPU pass by name: without a usable GPU one line, nothing written
    from streamwww.backends.cuda import unavailable_reason
    if unavailable_reason() is not None:
        rc = main(["train", str(tmp / "train.zarr"), "--device", "cuda-async", "--checkpoint-dir", str(tmp / "c5"),
                   "--model-out", str(tmp / "m5")])
        err = capsys.readouterr().err
        assert rc == 1 and err.count("\n") == 1 and "device='cuda-async' was requested but cannot be used" in err
        assert not (tmp / "m5").exists()
    # reading commands create nothing: a mistyped checkpoint directory stays absent
    for command in (["resume", str(tmp / "typo")], ["info", str(tmp / "typo")], ["plot", str(tmp / "typo")]):
        assert main(command) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and str(tmp / "typo") in err
        assert not (tmp / "typo").exists(), command


@pytest.fixture
def collector():
    """The cyclic garbage collector as it was, after a test that runs the console script."""
    import gc

    was = gc.isenabled()
    yield gc
    if was:
        gc.enable()


def test_console_script_exits_with_mains_code_and_skips_the_final_collections(monkeypatch, capsys, collector):
    """The installed ``streamwww`` script is ``cli.run``: main's exit code, the heap frozen first."""
    from importlib.metadata import entry_points

    from streamwww import cli

    (script,) = entry_points(group="console_scripts", name="streamwww")
    assert script.value == "streamwww.cli:run"
    frozen = []
    monkeypatch.setattr(cli.gc, "freeze", lambda: frozen.append(True))
    monkeypatch.setattr("sys.argv", ["streamwww", "info", "/nonexistent-streamwww-store.zarr"])
    with pytest.raises(SystemExit) as exc:
        cli.run()
    assert exc.value.code == 1 and frozen == [True]
    assert "does not exist" in capsys.readouterr().err


def test_console_script_collects_no_cycles_during_start_up_only(monkeypatch, collector):
    """The collector is off for a command's first STARTUP_SECONDS, then what is alive is
    frozen and it is on again; a command shorter than that ends with it off (and no timer)."""
    import threading
    import time

    from streamwww import cli

    frozen = []
    monkeypatch.setattr(collector, "freeze", lambda: frozen.append(collector.isenabled()))
    monkeypatch.setattr(cli, "STARTUP_SECONDS", 0.05)
    seen = {}

    def long_command():
        seen["at start"] = collector.isenabled()
        deadline = time.monotonic() + 10.0
        while not collector.isenabled() and time.monotonic() < deadline:
            time.sleep(0.01)
        seen["later"] = collector.isenabled()
        return 0

    monkeypatch.setattr(cli, "main", long_command)
    with pytest.raises(SystemExit) as exc:
        cli.run()
    # frozen while still off (start-up's objects), then again at exit
    assert exc.value.code == 0 and seen == {"at start": False, "later": True} and frozen == [False, True]

    frozen.clear()
    collector.enable()
    monkeypatch.setattr(cli, "STARTUP_SECONDS", 30.0)
    monkeypatch.setattr(cli, "main", lambda: 3 if not collector.isenabled() else 4)
    timers = len([t for t in threading.enumerate() if isinstance(t, threading.Timer)])
    with pytest.raises(SystemExit) as exc:
        cli.run()
    assert exc.value.code == 3 and frozen == [False] and not collector.isenabled()
    time.sleep(0.05)  # the cancelled timer's thread ends
    assert len([t for t in threading.enumerate() if isinstance(t, threading.Timer)]) == timers
