"""`streamwww train DATA` with nothing else, as LIBLINEAR's `train data`: the model file
DATA.model.npz in the current directory, its checkpoints beside it in DATA.model.ckpt
(said on stderr), and the same command run again continues that run."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import streamwww as sw
from streamwww.cli import main
from streamwww.io import write_store

from .conftest import make_classification


@pytest.fixture
def work(tmp_path, monkeypatch):
    """A store in data/, and the current directory work/."""
    X, y = make_classification(np.random.default_rng(5), n=400, d=6, k=3, dtype=np.float32)
    (tmp_path / "data").mkdir()
    write_store(tmp_path / "data" / "s.zarr", X, y, shard_rows=100)
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    return tmp_path, X, y


def _contents(path) -> dict:
    """A model file's arrays, and its metadata as data (its JSON's key order aside)."""
    with np.load(path, allow_pickle=False) as f:
        out = {k: f[k].tobytes() for k in f.files if k != "meta"}
        out["meta"] = json.loads(f["meta"].tobytes().decode())
    return out


def test_train_without_dirs_says_where_and_the_same_command_continues(work, capsys):
    tmp, X, y = work
    store = str(tmp / "data" / "s.zarr")
    assert main(["train", store, "--max-iter", "2", "--seed", "3"]) == 0
    err = capsys.readouterr().err
    model, ck = tmp / "work" / "s.zarr.model.npz", tmp / "work" / "s.zarr.model.ckpt"
    assert "streamwww train: checkpoints in s.zarr.model.ckpt (continue with: streamwww resume " \
           "s.zarr.model.ckpt)" in err
    assert model.is_file() and (ck / "manifest.json").is_file()
    first, manifest = _contents(model), (ck / "manifest.json").read_bytes()

    # the same command again: the finished run continued, nothing trained, the same model written
    assert main(["train", store, "--max-iter", "2", "--seed", "3"]) == 0
    err = capsys.readouterr().err
    assert "continuing the run in s.zarr.model.ckpt" in err and "epoch " not in err
    assert _contents(model) == first
    assert (ck / "manifest.json").read_bytes() == manifest  # nothing committed
    assert sw.load_model(model).n_iter_ == 2

    # a longer limit continues from epoch 2, to the model of a run trained so far at once
    assert main(["train", store, "--max-iter", "4", "--seed", "3", "-q"]) == 0
    assert main(["train", store, "--max-iter", "4", "--seed", "3", "--checkpoint-dir", str(tmp / "once"),
                 "--model-out", str(tmp / "once.npz"), "-q"]) == 0
    continued, once = sw.load_model(model), sw.load_model(tmp / "once.npz")
    assert continued.n_iter_ == once.n_iter_ == 4
    assert continued.coef_.tobytes() == once.coef_.tobytes()

    # `resume` of the directory it printed continues it too, into the same model file
    capsys.readouterr()
    assert main(["resume", "s.zarr.model.ckpt", "--max-iter", "5", "-q"]) == 0
    assert sw.load_model(model).n_iter_ == 5
    assert "model written to " + str(model) in capsys.readouterr().out


def test_a_libsvm_file_alone_is_converted_into_the_default_directory(work, capsys):
    tmp, X, y = work
    path = tmp / "data" / "d.libsvm"
    with open(path, "w") as f:
        for row, label in zip(X, y):
            f.write(f"{label} " + " ".join(f"{j + 1}:{v:.6g}" for j, v in enumerate(row)) + "\n")
    assert main(["train", str(path), "--max-iter", "2", "-q"]) == 0
    assert "checkpoints in" not in capsys.readouterr().err  # (-q: nothing but warnings and errors)
    assert (tmp / "work" / "d.libsvm.model.ckpt" / "data.zarr").is_dir()
    assert sw.load_model(tmp / "work" / "d.libsvm.model.npz").n_iter_ == 2


def test_the_default_directory_follows_model_out(work, capsys):
    tmp, _, _ = work
    assert main(["train", str(tmp / "data" / "s.zarr"), "--model-out", str(tmp / "m.npz"), "--max-iter", "1"]) == 0
    assert f"checkpoints in {tmp / 'm.ckpt'} " in capsys.readouterr().err
    assert (tmp / "m.ckpt" / "manifest.json").is_file() and not list((tmp / "work").iterdir())


def test_a_default_directory_that_cannot_be_one_is_refused_in_one_line(work, capsys, monkeypatch):
    tmp, _, _ = work
    store = str(tmp / "data" / "s.zarr")
    ck = tmp / "work" / "s.zarr.model.ckpt"
    ck.write_text("mine")
    assert main(["train", store, "--max-iter", "1"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(ck) in err and "not a directory" in err and "--checkpoint-dir" in err
    assert ck.read_text() == "mine" and not (tmp / "work" / "s.zarr.model.npz").exists()

    ck.unlink()
    ck.mkdir()
    if os.geteuid() == 0:  # (root writes anywhere: the permission check is asked as it would be)
        import streamwww.cli.commands

        monkeypatch.setattr(streamwww.cli.commands.os, "access", lambda p, mode: os.fspath(p) != str(ck))
    else:
        ck.chmod(0o555)
    try:
        assert main(["train", store, "--max-iter", "1"]) == 1
    finally:
        ck.chmod(0o755)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(ck) in err and "permission" in err and "--checkpoint-dir" in err
    assert list(ck.iterdir()) == []


def test_other_settings_in_the_default_directory_name_the_option_to_choose_another(work, capsys):
    tmp, _, _ = work
    store = str(tmp / "data" / "s.zarr")
    assert main(["train", store, "--max-iter", "1", "-q"]) == 0
    capsys.readouterr()
    assert main(["train", store, "--max-iter", "1", "--C", "2", "-q"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "other settings" in err and "--checkpoint-dir DIR" in err


def test_help_says_the_defaults(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "MODEL.ckpt" in out and ".model.npz in the current directory" in out
