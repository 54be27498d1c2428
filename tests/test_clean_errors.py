"""Faults seen from the command line: one line on stderr, a non-zero status, no traceback and
nothing from ``distributed`` (issue 15)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from streamwww.io import write_store

from .conftest import STARTUP_S, command_lines


def _write(path, seed: int, rows: int, features: int, classes: int, shard_rows: int):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(rows, features)).astype(np.float32)
    write_store(path, X, rng.integers(0, classes, size=rows), shard_rows=shard_rows)
    return path


@pytest.fixture
def damaged_store(tmp_path):
    path = _write(tmp_path / "s.zarr", 0, 900, 20, 5, 150)  # (k in conftest.LANES_K: builds the suite has)
    chunk = path / "shard-00003" / "y" / "c" / "0"
    raw = bytearray(chunk.read_bytes())
    raw[len(raw) // 2] ^= 1
    chunk.write_bytes(bytes(raw))
    return path


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "streamwww.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=300)


def test_a_damaged_shard_read_by_a_dask_worker_is_one_line(damaged_store, tmp_path):
    res = _cli("train", damaged_store, "--checkpoint-dir", tmp_path / "ck", "--model-out", tmp_path / "m.npz")
    lines = [ln for ln in command_lines(res.stderr) if ln.strip()]
    assert res.returncode != 0
    assert len(lines) == 1, res.stderr
    assert "error:" in lines[0] and "shard 3" in lines[0] and "crc32c mismatch" in lines[0]
    assert not (tmp_path / "m.npz").exists()


def test_an_unwritable_model_path_is_refused_before_training(damaged_store, tmp_path):
    res = _cli("train", damaged_store, "--checkpoint-dir", tmp_path / "ck", "--model-out",
               tmp_path / "missing" / "m.npz")
    lines = [ln for ln in command_lines(res.stderr) if ln.strip()]
    assert res.returncode != 0 and len(lines) == 1, res.stderr
    assert "missing" in lines[0] and "does not exist" in lines[0]


@pytest.fixture
def store(tmp_path):
    return _write(tmp_path / "s.zarr", 1, 600, 10, 3, 200)


def test_train_names_the_files_it_wrote_and_the_seed(store, tmp_path):
    res = _cli("train", store, "--C", "0.5,2", "--checkpoint-dir", tmp_path / "ck",
               "--model-out", tmp_path / "m.npz", "--max-iter", "3", "-q")
    assert res.returncode == 0, res.stderr
    line = [ln for ln in res.stdout.splitlines() if "model written to" in ln][0]
    for name in ("m-C0.5.npz", "m-C2.npz"):
        assert name in line and (tmp_path / name).exists()
    assert line.startswith("seed ")


def test_resume_writes_the_recorded_model_and_says_where(store, tmp_path):
    ck, out = tmp_path / "ck", tmp_path / "m.npz"
    assert _cli("train", store, "--checkpoint-dir", ck, "--model-out", out, "--max-iter", "2",
                "--seed", "3").returncode == 0
    out.unlink()
    res = _cli("resume", ck, "--max-iter", "4")
    assert res.returncode == 0, res.stderr
    assert f"model written to {out}" in res.stdout and out.exists()
    out.unlink()
    res = _cli("resume", ck, "--max-iter", "5", "--no-model")
    assert res.returncode == 0 and "no model file written" in res.stdout and not out.exists()


def test_ctrl_c_names_the_last_checkpoint(store, tmp_path):
    import re
    import signal
    import time

    ck = tmp_path / "ck"
    proc = subprocess.Popen([sys.executable, "-m", "streamwww.cli", "train", str(store), "--checkpoint-dir",
                             str(ck), "--model-out", str(tmp_path / "m.npz"), "--max-iter", "100000",
                             "--tol", "0", "--seed", "1", "--checkpoint-interval", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            # Ctrl-C enabled even when this runner runs in the background (SIGINT ignored)
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + STARTUP_S
    while not (ck / "manifest.json").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert re.fullmatch(rf"streamwww train: interrupted at epoch \d+ \(shard \d+ of \d+\); the work is kept in "
                        rf"{re.escape(str(ck))}: continue with `streamwww resume {re.escape(str(ck))}`",
                        err.strip().splitlines()[-1])


def test_piped_into_head_ends_quietly(tmp_path):
    import warnings

    import streamwww as sw

    rng = np.random.default_rng(2)
    X = rng.normal(size=(40_000, 3)).astype(np.float32)
    y = rng.integers(0, 3, size=40_000)
    write_store(tmp_path / "big.zarr", X, y, shard_rows=10_000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sw.save_model(sw.WWClassifier(max_iter=1, random_state=0).fit(X[:500], y[:500]), tmp_path / "m.npz")
    # 40,000 labels: more than a pipe holds, so the writer is cut off
    for args in (f"predict {tmp_path / 'm.npz'} {tmp_path / 'big.zarr'}", f"info {tmp_path / 'big.zarr'}"):
        cmd = f"{sys.executable} -m streamwww.cli {args} | head -1"
        res = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], capture_output=True, text=True, timeout=120)
        assert res.stdout.strip() and res.stderr == "", res.stderr[-2000:]
        assert res.returncode in (0, 141)


def test_a_store_wider_than_the_model_is_one_line_naming_both(store, tmp_path):
    model = tmp_path / "m.npz"
    assert _cli("train", store, "--checkpoint-dir", tmp_path / "ck", "--model-out", model, "--max-iter", "2",
                "-q").returncode == 0
    wide = _write(tmp_path / "wide.zarr", 2, 300, 11, 3, 100)
    for command in ("evaluate", "predict"):
        args = (command, model, wide) + (("--output", tmp_path / "p.zarr") if command == "predict" else ())
        res = _cli(*args)
        lines = [ln for ln in command_lines(res.stderr) if ln.strip()]
        assert res.returncode != 0 and len(lines) == 1, res.stderr
        # the command line's user has a model file, not an estimator: no class name
        assert "the store has 11 features but the model was fitted with 10" in lines[0], lines[0]
        assert "WWClassifier" not in lines[0] and "error:" in lines[0]
