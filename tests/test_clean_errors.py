"""Faults seen from the command line: one line on stderr, a non-zero status, no traceback and
nothing from ``distributed`` (issue 15)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from streamwww.io import write_store


@pytest.fixture
def damaged_store(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(900, 20)).astype(np.float32)
    y = rng.integers(0, 4, size=900)
    path = tmp_path / "s.zarr"
    write_store(path, X, y, shard_rows=150)
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
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.returncode != 0
    assert len(lines) == 1, res.stderr
    assert "error:" in lines[0] and "shard 3" in lines[0] and "crc32c mismatch" in lines[0]
    assert not (tmp_path / "m.npz").exists()


def test_an_unwritable_model_path_is_refused_before_training(damaged_store, tmp_path):
    res = _cli("train", damaged_store, "--checkpoint-dir", tmp_path / "ck", "--model-out",
               tmp_path / "missing" / "m.npz")
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.returncode != 0 and len(lines) == 1, res.stderr
    assert "missing" in lines[0] and "does not exist" in lines[0]
