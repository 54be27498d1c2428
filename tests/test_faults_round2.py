"""Faults of issue 56's second round, as classes: damaged or inconsistent model files,
labels float64 cannot keep apart, outputs that are not regular files, outputs that are
an input of the same command, foreign files in a new checkpoint directory, I/O errors
taken for damage, tracebacks, a scheduler that never answers, temporaries of dead
processes, a live run's checkpoint reported as damaged, and Python warnings in the
command line.

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

from .conftest import make_classification, one_error_line as _one_error_line, write_libsvm as _write_libsvm

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


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
    from streamwww.state.checkpoint import LOCK_SIGNATURE

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


# ------------------------------------------------------------------ 6. I/O errors are not damage
@pytest.fixture(scope="module")
def trained_ck(files, tmp_path_factory):
    """A checkpoint of a 3-epoch run on ``files``' store (two commits, both intact)."""
    tmp = tmp_path_factory.mktemp("faults2ck")
    argv = ["train", str(files / "data.zarr"), "--checkpoint-dir", str(tmp / "ck"), "--model-out",
            str(tmp / "m.npz"), "--max-iter", "3", "--checkpoint-interval", "0", "-q"]
    assert main(argv) == 0
    return tmp / "ck"


def _copy_ck(trained_ck, tmp_path):
    import shutil

    ck = tmp_path / "ck"
    shutil.copytree(trained_ck, ck)
    return ck


def _tree(root):
    """Every entry below ``root``: a file's bytes, a directory as None (a directory in place
    of a file is part of what must stay as it was)."""
    return {p.relative_to(root): (None if p.is_dir() else p.read_bytes()) for p in sorted(root.rglob("*"))}


def _latest_chunk(ck):
    import json

    manifest = json.loads((ck / "manifest.json").read_text())
    return ck / "beta.zarr" / f"s000001-v{manifest['beta']['versions']['1']:06d}" / "c.0.0.0", manifest


@pytest.mark.parametrize("fault", ["W-directory", "beta-chunk-directory", "beta-chunk-EIO", "W-EIO"])
def test_an_io_error_reading_a_checkpoint_is_reported_never_taken_for_damage(files, trained_ck, tmp_path, capsys,
                                                                           monkeypatch, fault):
    """A read that fails for another reason than the bytes (a directory where a file should
    be, EIO) is one error line naming the file: no fallback, nothing set aside, the
    checkpoint's files exactly as they were (a fallback would let the next commit replace
    the intact latest one)."""
    import errno
    import shutil

    import streamwww.io._chunks as chunks

    ck = _copy_ck(trained_ck, tmp_path)
    chunk, manifest = _latest_chunk(ck)
    target = {"W-directory": ck / manifest["W"], "W-EIO": ck / manifest["W"]}.get(fault, chunk)
    if fault.endswith("directory"):
        target.unlink()
        (target / "inside").mkdir(parents=True)
    else:
        real_open = open

        def failing_open(path, *args, **kwargs):
            if os.fspath(path) == os.fspath(target):
                raise OSError(errno.EIO, os.strerror(errno.EIO), os.fspath(path))
            return real_open(path, *args, **kwargs)

        monkeypatch.setattr(chunks, "open", failing_open, raising=False)
        monkeypatch.setattr("builtins.open", failing_open)
    before = _tree(ck)
    assert main(["resume", str(ck), "--max-iter", "5", "-q"]) == 1
    err = _one_error_line(capsys, "resume", str(target), "cannot read")
    assert ("Input/output error" if fault.endswith("EIO") else "Is a directory") in err
    assert "damaged" not in err
    monkeypatch.undo()
    assert _tree(ck) == before and not list(ck.glob("manifest.damaged-*"))
    shutil.rmtree(ck)


# ------------------------------------------------------------------ 7. tracebacks that are one line
def test_a_manifest_or_lock_that_is_a_directory_and_resume_of_a_file_are_one_line(files, trained_ck, tmp_path,
                                                                                  capsys):
    ck = _copy_ck(trained_ck, tmp_path)
    (ck / "manifest.json").unlink()
    (ck / "manifest.json").mkdir()
    before = _tree(ck)
    train = ["train", str(files / "data.zarr"), "--checkpoint-dir", str(ck), "--model-out", str(tmp_path / "m.npz"),
             "--max-iter", "4", "--checkpoint-interval", "0", "-q"]
    for argv, command in ((["resume", str(ck), "-q"], "resume"), (["info", str(ck)], "info"),
                          (["info", str(ck), "--verify"], "info"), (train, "train")):
        assert main(argv) == 1, argv
        _one_error_line(capsys, command, str(ck / "manifest.json"), "Is a directory")
    assert _tree(ck) == before

    locked = tmp_path / "locked"
    import shutil

    shutil.copytree(trained_ck, locked)
    (locked / "LOCK").unlink()
    (locked / "LOCK").mkdir()
    for argv, command in ((["resume", str(locked), "-q"], "resume"), (train[:3] + [str(locked)] + train[4:], "train")):
        assert main(argv) == 1, argv
        _one_error_line(capsys, command, str(locked / "LOCK"), "Is a directory")
    assert main(["info", str(locked)]) == 0  # (a reader takes no lock: nothing to refuse)
    capsys.readouterr()

    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine\n")
    for argv, command in ((["resume", str(a_file), "-q"], "resume"), (["info", str(a_file)], "info")):
        assert main(argv) == 1, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"streamwww {command}: error: ") and str(a_file) in err, err
    assert a_file.read_text() == "mine\n"


def test_a_model_file_on_a_full_disk_is_one_line_and_leaves_no_temporary(files, tmp_path, capsys, monkeypatch):
    """ENOSPC while the model is written: one line naming the model file, no ``.tmp`` left,
    an earlier model at that path kept."""
    import errno

    from streamwww.errors import OutputPathError

    real_savez = np.savez

    def full_disk(f, **arrays):
        real_savez(f, **arrays)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    model = sw.load_model(files / "m.npz")
    (tmp_path / "kept.npz").write_bytes(b"an earlier model")
    monkeypatch.setattr(np, "savez", full_disk)
    with pytest.raises(OutputPathError, match="kept.npz: cannot write the model .No space left on device") as info:
        sw.save_model(model, tmp_path / "kept.npz")
    assert info.value.errno == errno.ENOSPC
    assert (tmp_path / "kept.npz").read_bytes() == b"an earlier model"
    argv = ["train", str(files / "data.zarr"), "--checkpoint-dir", str(tmp_path / "ck"), "--model-out",
            str(tmp_path / "m.npz"), "--max-iter", "2", "-q"]
    assert main(argv) == 1
    _one_error_line(capsys, "train", str(tmp_path / "m.npz"), "No space left on device")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck", "kept.npz"]


# ------------------------------------------------------------------ 8. a scheduler that never answers
def test_a_scheduler_that_accepts_and_never_answers_is_one_line_within_the_timeout(files, tmp_path, capsys,
                                                                                 monkeypatch):
    """A port that accepts connections and says nothing (loopback only): one line naming the
    address after STREAMWWW_SCHEDULER_TIMEOUT seconds, never a hang."""
    import time

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()
    address = f"tcp://127.0.0.1:{silent.getsockname()[1]}"
    monkeypatch.setenv("STREAMWWW_SCHEDULER_TIMEOUT", "2")
    try:
        t0 = time.monotonic()
        assert main(["train", str(files / "data.zarr"), "--scheduler", address, "--model-out",
                     str(tmp_path / "m.npz"), "--max-iter", "2", "-q"]) == 1
        elapsed = time.monotonic() - t0
    finally:
        silent.close()
    _one_error_line(capsys, "train", address, "no answer", "check --scheduler")
    assert elapsed < 30, elapsed
    assert not (tmp_path / "m.npz").exists()


# ------------------------------------------------------------------ 9. temporaries of dead processes
def _dead_pid() -> int:
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_temporaries_of_dead_processes_beside_an_output_are_removed(files, tmp_path, capsys):
    """What a predict (or a model save) killed by SIGKILL left beside its output is removed
    by the next one writing there; a live process's temporary and other files stay."""
    dead, live = _dead_pid(), os.getppid()
    leftovers = {n: tmp_path / n for n in (f".out.txt.{dead}.tmp", f".m.npz.{dead}.tmp")}
    stays = {n: tmp_path / n for n in (f".out.txt.{live}.tmp", ".out.txt.notes.tmp", f".m.npz.{live}.tmp",
                                       f"out.txt.{dead}.tmp")}
    for p in [*leftovers.values(), *stays.values()]:
        p.write_bytes(b"half")
    assert main(["predict", str(files / "m.npz"), str(files / "data.txt"), "--output", str(tmp_path / "out.txt")]) == 0
    capsys.readouterr()
    sw.save_model(sw.load_model(files / "m.npz"), tmp_path / "m.npz")
    assert not any(p.exists() for p in leftovers.values())
    assert all(p.read_bytes() == b"half" for p in stays.values())
    assert len((tmp_path / "out.txt").read_text().split()) == 120 and sw.load_model(tmp_path / "m.npz")


# ------------------------------------------------------------------ 10. a run in progress is not damage
def test_info_on_a_checkpoint_a_run_holds_says_so_and_reports_no_damage(trained_ck, tmp_path, capsys):
    """While a trainer holds LOCK, ``info`` checks a snapshot (tests/test_live_verify.py) and
    says a run is training; weights that the kept manifests name and that are gone are
    damage all the same (a run only deletes what the manifests no longer name)."""
    import json

    from streamwww.storage.fsutil import try_lock, unlock

    ck = _copy_ck(trained_ck, tmp_path)
    fd = try_lock(ck / "LOCK")
    try:
        for argv in (["info", str(ck)], ["info", str(ck), "--verify"]):
            assert main(argv) == 0
            out, err = capsys.readouterr()
            assert "DAMAGED" not in out + err and "damaged" not in out + err
            assert "a run is still training" in out and "intact (step" in out
        assert main(["info", str(ck), "--json"]) == 0
        health = json.loads(capsys.readouterr().out)["health"]
        assert health["in_progress"] is True and health["ok"] is True
        for name in ("manifest.json", "manifest.prev.json"):
            (ck / json.loads((ck / name).read_text())["W"]).unlink()
        assert main(["info", str(ck)]) == 1
        assert "DAMAGED" in capsys.readouterr().out
    finally:
        unlock(fd)


# ------------------------------------------------------------------ 11. Python warnings in the command line
def test_the_fallback_warning_is_one_line_and_silent_under_q(trained_ck, tmp_path):
    """The console script, as a terminal shows it: a Python warning is one
    ``streamwww resume: warning: ...`` line (no source line, no category), none under -q."""
    import json
    import subprocess
    import sys

    for quiet in (False, True):
        ck = _copy_ck(trained_ck, tmp_path / str(quiet))
        w = ck / json.loads((ck / "manifest.json").read_text())["W"]
        raw = bytearray(w.read_bytes())
        raw[-1] ^= 0xFF
        w.write_bytes(bytes(raw))
        argv = ["resume", str(ck), "--max-iter", "4", "--no-model"] + (["-q"] if quiet else [])
        proc = subprocess.run([sys.executable, "-m", "streamwww.cli", *argv], capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr
        err = proc.stderr
        warned = [ln for ln in err.splitlines() if "damaged" in ln]
        assert "warnings.warn" not in err and "CheckpointFallbackWarning" not in err, err
        if quiet:
            assert warned == [], err
        else:
            assert len(warned) == 1 and warned[0].startswith("streamwww resume: warning: "), err
            assert "resuming from the one before it" in warned[0]


def test_train_from_python_never_writes_the_model_onto_its_libsvm_file(tmp_path):
    """``sw.train(FILE, model_out=FILE)``: refused before the conversion, the file kept."""
    import streamwww as sw
    from streamwww.errors import OutputPathError

    text = tmp_path / "d.libsvm"
    text.write_text("1 1:0.5 2:1\n2 1:-0.5 3:1\n1 2:0.25\n2 3:0.75\n")
    before = text.read_bytes()
    with pytest.raises(OutputPathError, match="it is an input of this command"):
        sw.train(str(text), model_out=str(text), max_iter=2)
    assert text.read_bytes() == before
