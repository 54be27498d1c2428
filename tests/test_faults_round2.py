"""Faults of issue 56's second round, as classes: damaged or inconsistent model files,
labels float64 cannot keep apart, outputs that are not regular files, outputs that are
an input of the same command, and foreign files in a new checkpoint directory.

Every case ends in one error line that names the file (``streamwww <command>: error:``)
or in the correct result, and nothing that was there before is changed. FIFOs, links and
sockets are made under each test's own ``tmp_path``, never under ``/dev``.
"""

import os
import socket
import stat

import numpy as np
import pytest

import streamwww as sw
from streamwww.cli import main
from streamwww.errors import DataFormatError, LibsvmFormatError, OutputPathError
from streamwww.io import load_libsvm, write_store

from .conftest import make_classification

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def _write_libsvm(path, X, labels):
    with open(path, "w") as f:
        for row, lab in zip(X, labels):
            f.write(f"{lab:g} " + " ".join(f"{j + 1}:{v:.9g}" for j, v in enumerate(row) if v != 0) + "\n")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A small LIBSVM file, a store of it and a model trained on it."""
    tmp = tmp_path_factory.mktemp("faults2")
    rng = np.random.default_rng(11)
    X, y = make_classification(rng, n=120, d=6, k=3, dtype=np.float32)
    labels = np.array([1.0, 2.0, 5.0])[y]
    _write_libsvm(tmp / "data.txt", X, labels)
    write_store(tmp / "data.zarr", X, labels, shard_rows=60)
    model = sw.train((X, labels), C=1.0, max_iter=3, random_state=0)
    sw.save_model(model, tmp / "m.npz")
    return tmp


def _one_error_line(capsys, command: str, *needles: str) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"streamwww {command}: error: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, err
    return err


def _edited_model(src, dst, **arrays):
    with np.load(src) as z:
        saved = {k: z[k] for k in z.files}
    saved.update(arrays)
    with open(dst, "wb") as f:
        np.savez(f, **saved)
    return dst


# ------------------------------------------------------------------ 1. model files
def _bad_models(files, tmp_path):
    with np.load(files / "m.npz") as z:
        coef, intercept, classes = z["coef"].copy(), z["intercept"].copy(), z["classes"]
    nan = coef.copy()
    nan[1, 2] = np.nan
    inf = intercept.copy()
    inf[0] = np.inf
    src = files / "m.npz"
    return {  # name: (file, what the message says)
        "nan_coef": (_edited_model(src, tmp_path / "nan.npz", coef=nan), "coef[1, 2] is nan"),
        "inf_intercept": (_edited_model(src, tmp_path / "inf.npz", intercept=inf), "intercept[0] is inf"),
        "few_classes": (_edited_model(src, tmp_path / "few.npz", classes=classes[:2]), "2 classes for the 3 rows"),
        "many_classes": (_edited_model(src, tmp_path / "many.npz", classes=np.append(classes, 9.0)),
                         "4 classes for the 3 rows"),
        "short_intercept": (_edited_model(src, tmp_path / "short.npz", intercept=intercept[:2]),
                            "intercept has 2 values"),
        "flat_coef": (_edited_model(src, tmp_path / "flat.npz", coef=coef.ravel()), "not a 2-d numeric one"),
        "unsorted_classes": (_edited_model(src, tmp_path / "unsorted.npz", classes=classes[::-1].copy()),
                             "not distinct labels in sorted order"),
    }


def test_an_inconsistent_or_non_finite_model_is_refused_on_load(files, tmp_path):
    for name, (path, says) in _bad_models(files, tmp_path).items():
        with pytest.raises(DataFormatError, match="not a streamwww model file, or a damaged one") as info:
            sw.load_model(path)
        assert str(path) in str(info.value) and says in str(info.value), (name, info.value)
    assert sw.load_model(files / "m.npz").coef_.shape == (3, 6)  # the intact one still loads


def test_a_model_with_nan_or_too_few_classes_is_one_line_in_evaluate_and_predict(files, tmp_path, capsys):
    bad = _bad_models(files, tmp_path)
    for name in ("nan_coef", "few_classes"):
        path, says = bad[name]
        for command in (["evaluate", str(path), str(files / "data.txt")],
                        ["predict", str(path), str(files / "data.zarr"), "--output", str(tmp_path / "p.txt")],
                        ["info", str(path)]):
            capsys.readouterr()
            assert main(command) == 1, (name, command)
            _one_error_line(capsys, command[0], str(path), says)
        assert not (tmp_path / "p.txt").exists()


def test_model_metadata_that_disagrees_with_the_arrays_is_refused(files, tmp_path):
    import json

    with np.load(files / "m.npz") as z:
        meta = json.loads(z["meta"].tobytes().decode())
    for key, value, says in (("n_features_in", 7, "says 7 features, coef has 6"),
                             ("n_iter", None, "no 'n_iter'")):
        edited = {**meta, key: value}
        path = _edited_model(files / "m.npz", tmp_path / f"{key}.npz",
                             meta=np.frombuffer(json.dumps(edited).encode(), dtype=np.uint8))
        with pytest.raises(DataFormatError, match=says):
            sw.load_model(path)


# ------------------------------------------------------------------ 2. labels beyond 2**53
def test_integer_labels_beyond_2_53_are_refused_naming_file_and_line(tmp_path, capsys):
    path = tmp_path / "big.txt"
    path.write_text("1 1:0.5\n9007199254740993 1:1\n9007199254740992 1:2\n")
    with pytest.raises(LibsvmFormatError, match=r"big\.txt:2: label '9007199254740993' is too large") as info:
        load_libsvm(path)
    assert "float64" in str(info.value) and "2**53" in str(info.value)
    negative = tmp_path / "neg.txt"
    negative.write_text("-9007199254740993 1:1\n2 1:2\n")
    with pytest.raises(LibsvmFormatError, match=r"neg\.txt:1: label '-9007199254740993'"):
        load_libsvm(negative)
    # skipping malformed lines does not skip them: the label is well formed, it cannot be kept
    with pytest.raises(LibsvmFormatError, match="too large"):
        load_libsvm(path, skip_bad_lines=True)
    # the command line: one line, no store left behind
    assert main(["convert", str(path), str(tmp_path / "big.zarr")]) == 1
    _one_error_line(capsys, "convert", f"{path}:2", "too large")
    assert not (tmp_path / "big.zarr").exists()
    # the largest labels that stay apart still work
    ok = tmp_path / "ok.txt"
    ok.write_text("9007199254740991 1:1\n9007199254740990 1:2\n")
    assert sorted(load_libsvm(ok)[1].tolist()) == [9007199254740990.0, 9007199254740991.0]


def test_integer_label_arrays_beyond_2_53_are_refused_by_a_store(tmp_path):
    X = np.ones((2, 3), dtype=np.float32)
    with pytest.raises(DataFormatError, match=r"label 9007199254740993 \(row 0\).*2\*\*53"):
        write_store(tmp_path / "s.zarr", X, np.array([2**53 + 1, 2**53], dtype=np.int64))
    assert not (tmp_path / "s.zarr").exists()
    # the estimator keeps integer labels as they are: they stay apart
    Xa = np.array([[1.0, 0.0], [0.0, 1.0]] * 5)
    model = sw.train((Xa, np.array([2**53 + 1, 2**53] * 5, dtype=np.int64)), C=1.0, max_iter=2)
    assert model.classes_.tolist() == [2**53, 2**53 + 1]


# ------------------------------------------------------------------ 3. special files
def _specials(tmp_path):
    """A symlink to a file, a dangling symlink, a FIFO and (where the path is short
    enough for a socket address) a Unix socket, under ``tmp_path``."""
    target = tmp_path / "target.txt"
    target.write_text("precious\n")
    nodes = {"link": tmp_path / "link.out", "dangling": tmp_path / "dangling.out", "fifo": tmp_path / "fifo.out"}
    nodes["link"].symlink_to(target)
    nodes["dangling"].symlink_to(tmp_path / "missing-target.txt")
    os.mkfifo(nodes["fifo"])
    sock = None
    if len(str(tmp_path / "sock.out")) < 100:
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(tmp_path / "sock.out"))
        nodes["socket"] = tmp_path / "sock.out"
    return target, nodes, sock


def _untouched(target, nodes):
    assert target.read_text() == "precious\n"
    assert nodes["link"].is_symlink() and os.readlink(nodes["link"]) == str(target)
    assert nodes["dangling"].is_symlink() and not (nodes["dangling"].parent / "missing-target.txt").exists()
    assert stat.S_ISFIFO(os.lstat(nodes["fifo"]).st_mode)
    if "socket" in nodes:
        assert stat.S_ISSOCK(os.lstat(nodes["socket"]).st_mode)


_KIND = {"link": "a symlink", "dangling": "a symlink", "fifo": "a FIFO", "socket": "a socket"}


def test_outputs_that_are_not_regular_files_are_never_replaced(files, tmp_path, capsys):
    target, nodes, sock = _specials(tmp_path)
    try:
        for name, node in nodes.items():
            commands = {
                "predict": ["predict", str(files / "m.npz"), str(files / "data.zarr"), "--output", str(node)],
                "train": ["train", str(files / "data.zarr"), "--checkpoint-dir", str(tmp_path / f"ck-{name}"),
                          "--model-out", str(node), "--max-iter", "2", "-q"],
                "make-data": ["make-data", str(node), "--rows", "10", "--features", "3", "--nnz-per-row", "2",
                              "--classes", "2", "--overwrite"],
            }
            for command, argv in commands.items():
                capsys.readouterr()
                assert main(argv) == 1, (name, command)
                _one_error_line(capsys, command, str(node), f"{_KIND[name]}, not a regular file; give a regular file")
            assert not (tmp_path / f"ck-{name}").exists()  # refused before any work
            with pytest.raises(OutputPathError, match=f"it is {_KIND[name]}"):  # the API as well
                sw.save_model(sw.load_model(files / "m.npz"), node)
            with pytest.raises(OutputPathError, match=f"it is {_KIND[name]}"):
                sw.train(str(files / "data.zarr"), C=1.0, max_iter=1, model_out=node)
        _untouched(target, nodes)
        assert not list(tmp_path.glob(".*tmp*")) and not list(tmp_path.glob("*.tmp"))
    finally:
        if sock is not None:
            sock.close()


def test_make_data_through_a_symlink_to_a_directory_is_refused(tmp_path, capsys):
    (tmp_path / "dir").mkdir()
    (tmp_path / "to-dir").symlink_to(tmp_path / "dir")
    assert main(["make-data", str(tmp_path / "to-dir"), "--rows", "5", "--features", "2", "--nnz-per-row", "1",
                 "--classes", "2", "--overwrite"]) == 1
    _one_error_line(capsys, "make-data", "a symlink")
    assert (tmp_path / "to-dir").is_symlink() and list((tmp_path / "dir").iterdir()) == []


# ------------------------------------------------------------------ 4. outputs that are inputs
def test_an_output_that_is_an_input_of_the_same_command_is_refused(files, tmp_path, capsys):
    import shutil

    d = tmp_path / "d"
    d.mkdir()
    shutil.copy(files / "m.npz", d / "m.npz")
    shutil.copy(files / "data.txt", tmp_path / "data.txt")
    shutil.copytree(files / "data.zarr", tmp_path / "data.zarr")
    (tmp_path / "hard.txt").hardlink_to(tmp_path / "data.txt")
    before = {p: p.read_bytes() for p in (d / "m.npz", tmp_path / "data.txt")}
    model, text, store = str(d / "m.npz"), str(tmp_path / "data.txt"), str(tmp_path / "data.zarr")
    cases = [
        ("predict", [model, text, "--output", text], text),                       # predict M T --output T
        ("predict", [model, text, "--output", model], model),                     # predict DIR/M T --output DIR/M
        ("predict", [model, text, "--output", str(d / ".." / "d" / "m.npz")], model),  # another spelling
        ("predict", [model, text, "--output", str(tmp_path / "hard.txt")], text),  # a hard link to it
        ("predict", [model, store, "--output", str(tmp_path / "data.zarr" / "streamwww.json")], store),  # inside
        # train D --model-out D
        ("train", [text, "--checkpoint-dir", str(tmp_path / "ck1"), "--model-out", text], text),
        ("train", [store, "--checkpoint-dir", str(tmp_path / "ck2"), "--model-out", store], store),
        ("train", [store, "--checkpoint-dir", str(tmp_path / "ck3"), "--model-out",
                   str(tmp_path / "data.zarr" / "m.npz")], store),
    ]
    for command, argv, named in cases:
        capsys.readouterr()
        extra = ["--max-iter", "2", "-q"] if command == "train" else []
        assert main([command, *argv, *extra]) == 1, argv
        _one_error_line(capsys, command, "is an input of this command", named)
    for p, data in before.items():
        assert p.read_bytes() == data
    assert sw.open_store(store).n_rows == 120  # the store is whole, nothing written into it
    assert not (tmp_path / "data.zarr" / "m.npz").exists()
    assert not any((tmp_path / f"ck{i}").exists() for i in (1, 2, 3))  # refused before any work
    # a different file beside the inputs is fine
    assert main(["predict", model, text, "--output", str(tmp_path / "p.txt")]) == 0
    assert len((tmp_path / "p.txt").read_text().split()) == 120


# ------------------------------------------------------------------ 5. foreign files in a checkpoint directory
def _snapshot(root):
    return {p.relative_to(root): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_files_that_merely_look_like_a_checkpoints_are_never_deleted(files, tmp_path, capsys):
    ck = tmp_path / "ck"
    (ck / "beta.zarr" / "s000000-v000009").mkdir(parents=True)
    (ck / "beta.zarr" / "s000000-v000009" / "zarr.json").write_text("someone's\n")
    (ck / "W-000123.npy").write_bytes(b"someone's weights")
    (ck / "W-000001.npy.tmp").write_bytes(b"someone's temporary")
    before = _snapshot(ck)
    argv = ["train", str(files / "data.zarr"), "--checkpoint-dir", str(ck), "--model-out", str(tmp_path / "m.npz"),
            "--max-iter", "3", "--checkpoint-interval", "0", "-q"]
    assert main(argv) == 1
    _one_error_line(capsys, "train", str(ck), "not a streamwww checkpoint", "W-000001.npy.tmp, W-000123.npy, beta.zarr")
    with pytest.raises(OutputPathError, match="not a streamwww checkpoint"):  # the API as well
        sw.train(str(files / "data.zarr"), C=1.0, max_iter=2, checkpoint_dir=ck)
    # a LIBSVM file is converted into CHECKPOINT_DIR/data.zarr: someone's data.zarr is never replaced
    other = tmp_path / "other"
    (other / "data.zarr").mkdir(parents=True)
    (other / "data.zarr" / "notes").write_text("mine\n")
    assert main(["train", str(files / "data.txt"), "--checkpoint-dir", str(other), "--model-out",
                 str(tmp_path / "m2.npz"), "--max-iter", "2", "-q"]) == 1
    _one_error_line(capsys, "train", "data.zarr", "not a streamwww checkpoint")
    assert (other / "data.zarr" / "notes").read_text() == "mine\n"
    assert _snapshot(ck) == before and not (ck / "LOCK").exists() and not (tmp_path / "m.npz").exists()


def test_other_files_in_a_checkpoint_directory_stay_through_training(files, tmp_path, capsys):
    """Files by names a checkpoint does not use are left alone, whatever they end in (a
    commit deleted every ``*.tmp`` of the directory); the run trains and resumes."""
    ck = tmp_path / "ck"
    ck.mkdir()
    mine = {"notes.tmp": b"draft", "mine.txt": b"mine", "W-1.npy": b"not six digits", "beta.txt": b"b"}
    for name, data in mine.items():
        (ck / name).write_bytes(data)
    argv = ["train", str(files / "data.zarr"), "--checkpoint-dir", str(ck), "--model-out", str(tmp_path / "m.npz"),
            "--max-iter", "4", "--checkpoint-interval", "0", "-q"]
    assert main(argv) == 0
    assert main(["resume", str(ck), "--max-iter", "6", "-q"]) == 0
    capsys.readouterr()
    assert {name: (ck / name).read_bytes() for name in mine} == mine
    assert (ck / "manifest.json").exists() and sw.load_model(tmp_path / "m.npz").n_iter_ == 6


def test_a_run_killed_before_its_first_commit_is_still_cleaned_up(files, tmp_path, capsys):
    """What a trainer left before its first commit is its own (it signed LOCK first): the
    next run on the directory collects it and trains."""
    from streamwww.checkpoint import LOCK_SIGNATURE

    ck = tmp_path / "ck"
    ck.mkdir()
    (ck / "LOCK").write_bytes(LOCK_SIGNATURE + b", pid 999999\n")
    (ck / "W-000007.npy.tmp").write_bytes(b"half")
    argv = ["train", str(files / "data.zarr"), "--checkpoint-dir", str(ck), "--model-out", str(tmp_path / "m.npz"),
            "--max-iter", "2", "--checkpoint-interval", "0", "-q"]
    assert main(argv) == 0
    capsys.readouterr()
    assert not (ck / "W-000007.npy.tmp").exists() and (ck / "manifest.json").exists()
    assert (ck / "LOCK").read_bytes().startswith(LOCK_SIGNATURE)
