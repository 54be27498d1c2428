"""``streamwww train FILE``: a LIBSVM text file converted into the checkpoint directory, then
trained, in one command (and one process start-up)."""

import json
import re

import numpy as np
import pytest

import streamwww as sw
from streamwww.cli import main
from streamwww.cli.commands import TEXT_STORE
from streamwww.errors import ShardFormatError
from streamwww.io import convert_libsvm, open_store

from .conftest import make_classification, write_libsvm as _write_libsvm

FLAGS = ["--C", "0.5", "--seed", "4", "--max-iter", "40"]


@pytest.fixture
def text(tmp_path):
    rng = np.random.default_rng(5)
    X, y = make_classification(rng, n=400, d=12, k=3, dtype=np.float32)
    labels = np.array([-1.0, 3.0, 7.0])[y]
    path = tmp_path / "train.libsvm.gz"
    _write_libsvm(path, X, labels)
    return tmp_path, path


def test_a_libsvm_file_trains_as_convert_then_train(text, capsys):
    tmp, path = text
    ck = tmp / "ck"
    assert main(["train", str(path), *FLAGS, "--checkpoint-dir", str(ck), "--model-out", str(tmp / "a.npz")]) == 0
    err = capsys.readouterr().err
    # the conversion's line on stderr, naming the store it made in the checkpoint directory
    assert re.search(rf"{re.escape(str(ck / TEXT_STORE))}: 400 rows, 12 features, 3 classes", err)

    # the same as the two commands, store and model
    convert_libsvm(path, tmp / "s.zarr")
    assert open_store(ck / TEXT_STORE).fingerprint == open_store(tmp / "s.zarr").fingerprint
    assert main(["train", str(tmp / "s.zarr"), *FLAGS, "--checkpoint-dir", str(tmp / "ck2"),
                 "--model-out", str(tmp / "b.npz")]) == 0
    capsys.readouterr()
    a, b = sw.load_model(tmp / "a.npz"), sw.load_model(tmp / "b.npz")
    assert a.coef_.tobytes() == b.coef_.tobytes() and a.intercept_.tobytes() == b.intercept_.tobytes()
    assert list(a.classes_) == [-1.0, 3.0, 7.0]

    # resume reads the store in the checkpoint directory (nothing converted)
    assert main(["resume", str(ck), "--model-out", str(tmp / "r.npz")]) == 0
    assert TEXT_STORE not in capsys.readouterr().err
    assert sw.load_model(tmp / "r.npz").coef_.tobytes() == a.coef_.tobytes()


def test_the_same_command_again_continues_its_checkpoint(text, capsys):
    tmp, path = text
    ck = tmp / "ck"
    base = ["train", str(path), "--C", "0.5", "--seed", "4", "--checkpoint-dir", str(ck),
            "--model-out", str(tmp / "m.npz"), "--json"]
    assert main([*base, "--max-iter", "5"]) == 0
    first = capsys.readouterr()
    assert json.loads(first.out)["models"][0]["epochs"] == 5  # stdout: the JSON alone
    fingerprint = open_store(ck / TEXT_STORE).fingerprint
    assert main([*base, "--max-iter", "40", "-v"]) == 0
    again = capsys.readouterr()
    assert json.loads(again.out)["models"][0]["epochs"] == 40
    # converted again (the same store), then trained on from epoch 5: no epoch 1 logged
    assert TEXT_STORE in again.err and not re.search(r"epoch +1 ", again.err)
    assert re.search(r"epoch +(6|7|8|9) ", again.err)
    assert open_store(ck / TEXT_STORE).fingerprint == fingerprint
    # the model of the same two steps on a store converted apart (a finished run taken further
    # is a certified run of its own, not the run that never stopped: docs/TRAINING.md)
    convert_libsvm(path, tmp / "s.zarr")
    two = ["train", str(tmp / "s.zarr"), "--C", "0.5", "--seed", "4", "--checkpoint-dir", str(tmp / "ck2"),
           "--model-out", str(tmp / "two.npz"), "-q"]
    assert main([*two, "--max-iter", "5"]) == 0 and main([*two, "--max-iter", "40"]) == 0
    capsys.readouterr()
    assert sw.load_model(tmp / "m.npz").coef_.tobytes() == sw.load_model(tmp / "two.npz").coef_.tobytes()


def test_zero_based_files(tmp_path, capsys):
    rng = np.random.default_rng(6)
    X, y = make_classification(rng, n=400, d=12, k=3, dtype=np.float32)  # (the kernels above)
    X[3, 0] = 1.0  # (a line with column 0)
    _write_libsvm(tmp_path / "z.libsvm", X, y.astype(float), zero_based=True)
    args = ["--checkpoint-dir", str(tmp_path / "ck"), "--model-out", str(tmp_path / "m.npz"), "--max-iter", "5", "-q"]
    assert main(["train", str(tmp_path / "z.libsvm"), *args]) == 1  # index 0 in a one-based file
    err = capsys.readouterr().err
    # the file and line, and the flag this command takes for it
    assert re.search(r"streamwww train: error: .*z\.libsvm:\d+: index 0 .* use --zero-based", err), err
    assert not (tmp_path / "ck" / TEXT_STORE).exists()  # nothing half-written looks complete
    assert not (tmp_path / "ck").exists()  # the directory this command made goes with it
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "mine").write_text("x")
    assert main(["train", str(tmp_path / "z.libsvm"), *args]) == 1
    capsys.readouterr()
    assert sorted(p.name for p in (tmp_path / "ck").iterdir()) == ["LOCK", "mine"]  # one it did not make stays
    assert main(["train", str(tmp_path / "z.libsvm"), "--zero-based", *args]) == 0
    capsys.readouterr()
    assert open_store(tmp_path / "ck" / TEXT_STORE).n_features == 12
    # --zero-based describes a file: given with a store, it is an error
    assert main(["train", str(tmp_path / "ck" / TEXT_STORE), "--zero-based", "--checkpoint-dir",
                 str(tmp_path / "ck2"), "--model-out", str(tmp_path / "m2.npz")]) == 1
    assert "--zero-based applies to a LIBSVM file" in capsys.readouterr().err


def test_a_file_needs_a_checkpoint_directory_and_is_never_opened_as_a_store(text, capsys):
    tmp, path = text
    assert main(["train", str(path), "--workers", "1", "--model-out", str(tmp / "m.npz")]) == 1
    err = capsys.readouterr().err
    assert "is a file" in err and "--checkpoint-dir" in err and "streamwww convert" in err
    with pytest.raises(ShardFormatError, match="is a file, not a shard store"):
        open_store(path)
    # (the Python API converts it as the command line does: tests/test_first_day.py)


def test_a_missing_path_is_named_as_either_kind(tmp_path, capsys):
    missing = tmp_path / "train.libsvm"
    assert main(["train", str(missing), "--checkpoint-dir", str(tmp_path / "ck"), "--model-out",
                 str(tmp_path / "m.npz")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and (f"{missing} does not exist (give a shard store, or a LIBSVM file to "
                                      "convert first)") in err
    assert not (tmp_path / "ck").exists()


def test_a_directory_with_another_files_run_is_refused_and_kept(text, capsys):
    tmp, path = text
    ck = tmp / "ck"
    assert main(["train", str(path), *FLAGS, "--checkpoint-dir", str(ck), "--model-out", str(tmp / "a.npz"),
                 "-q"]) == 0
    before = open_store(ck / TEXT_STORE).fingerprint
    other = tmp / "other.libsvm"
    other.write_text("1 1:0.5 2:1\n2 3:1\n3 1:1 4:0.25\n")
    assert main(["train", str(other), *FLAGS, "--checkpoint-dir", str(ck), "--model-out", str(tmp / "b.npz")]) == 1
    err = capsys.readouterr().err
    assert re.search(rf"holds a run on the data of .*train\.libsvm\.gz.*{re.escape(str(other))} is other data: "
                     r"give another --checkpoint-dir \(nothing was changed\)", err), err
    # the run and its store as they were: resume continues it; no converted leftover
    assert open_store(ck / TEXT_STORE).fingerprint == before
    assert sorted(p.name for p in ck.iterdir() if TEXT_STORE in p.name) == [TEXT_STORE]
    assert main(["resume", str(ck), "--model-out", str(tmp / "r.npz"), "-q"]) == 0
    # a store there without a run is replaced by the file's
    fresh = tmp / "fresh"
    convert_libsvm(path, fresh / TEXT_STORE)
    assert main(["train", str(other), "--checkpoint-dir", str(fresh), "--model-out", str(tmp / "c.npz"),
                 "--max-iter", "2", "-q"]) == 0
    assert open_store(fresh / TEXT_STORE).n_rows == 3
