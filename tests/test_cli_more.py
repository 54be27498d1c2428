"""The streamwww command line, continued: --json, info on models and checkpoints, plot, train flags, help texts."""

import json

import numpy as np
import pytest

import streamwww as sw
from streamwww.cli import main
from streamwww.io import write_store

from .conftest import command_lines, make_classification

# the runs are a few epochs long on purpose
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A small store pair and one finished two-C training run (checkpoint and model files)."""
    tmp = tmp_path_factory.mktemp("cli_more")
    rng = np.random.default_rng(7)
    X, y = make_classification(rng, n=600, d=8, k=3, dtype=np.float32)
    labels = np.array([1.0, 2.0, 5.0])[y]
    write_store(tmp / "train.zarr", X[:450], labels[:450], shard_rows=150)
    write_store(tmp / "test.zarr", X[450:], labels[450:], shard_rows=150,
                classes=sw.open_store(tmp / "train.zarr").classes)
    rc = main(["train", str(tmp / "train.zarr"), "--C", "0.1,1", "--checkpoint-dir", str(tmp / "ck"),
               "--model-out", str(tmp / "m.npz"), "--seed", "3", "--max-iter", "4", "--tol", "1e-9", "-q",
               "--checkpoint-interval", "0"])  # a commit every epoch: a previous commit to inspect
    assert rc == 0
    return tmp, X, labels


def _json_out(capsys):
    out = capsys.readouterr().out
    return json.loads(out)  # the whole of stdout is one JSON object


def test_train_and_resume_json(run, capsys):
    tmp, _, _ = run
    capsys.readouterr()
    rc = main(["train", str(tmp / "train.zarr"), "--C", "0.5", "--checkpoint-dir", str(tmp / "ck1"),
               "--model-out", str(tmp / "one.npz"), "--seed", "5", "--max-iter", "3", "--json"])
    assert rc == 0
    cap = capsys.readouterr()
    obj = json.loads(cap.out)
    assert "epoch" in cap.err  # the per-epoch lines still come, on stderr
    (m,) = obj["models"]
    model = sw.load_model(tmp / "one.npz")
    assert m["C"] == 0.5 and m["epochs"] == model.n_iter_ == 3 and m["seed"] == 5 == obj["seed"]
    assert m["converged"] is model.converged_
    assert m["rel_gap"] == model.history_[-1]["rel_gap"] and m["primal"] == model.history_[-1]["primal"]
    assert m["model"] == str(tmp / "one.npz") and obj["model_paths"] == [str(tmp / "one.npz")]

    rc = main(["resume", str(tmp / "ck"), "--model-out", str(tmp / "r.npz"), "--json", "-q"])
    assert rc == 0
    obj = _json_out(capsys)
    assert [m["C"] for m in obj["models"]] == [0.1, 1.0]
    assert obj["model_paths"] == [str(tmp / "r-C0.1.npz"), str(tmp / "r-C1.npz")]
    assert [m["epochs"] for m in obj["models"]] == [4, 4]

    rc = main(["resume", str(tmp / "ck"), "--no-model", "--json", "-q"])
    obj = _json_out(capsys)
    assert rc == 0 and obj["model_paths"] == [] and obj["models"][0]["model"] is None


def test_evaluate_json(run, capsys):
    tmp, X, labels = run
    capsys.readouterr()
    assert main(["evaluate", str(tmp / "m-C0.1.npz"), str(tmp / "test.zarr"), "--json"]) == 0
    obj = _json_out(capsys)
    model = sw.load_model(tmp / "m-C0.1.npz")
    pred = model.predict(X[450:])
    assert obj["n_rows"] == 150 and obj["n_correct"] == int(np.sum(pred == labels[450:]))
    assert obj["accuracy"] == pytest.approx(obj["n_correct"] / 150)
    assert "confusion" not in obj

    assert main(["evaluate", str(tmp / "m-C0.1.npz"), str(tmp / "test.zarr"), "--json", "--confusion"]) == 0
    obj = _json_out(capsys)
    assert obj["labels"] == [1, 2, 5]
    cm = np.array(obj["confusion"])
    assert cm.shape == (3, 3) and cm.sum() == 150 and np.trace(cm) == obj["n_correct"]
    assert cm[1, 2] == int(np.sum((labels[450:] == 2) & (pred == 5)))
    assert obj["confusion_unknown_true"] == [0, 0, 0] and obj["n_unknown"] == 0


def test_evaluate_names_the_labels_the_model_never_saw(run, tmp_path, capsys):
    """A test file with labels the model has no class for (another data set's file, say):
    those rows count as wrong, and evaluate says so in one line, naming some of them."""
    from streamwww.model.predict import UNKNOWN_SHOWN, evaluate

    tmp, _, _ = run
    model = tmp / "m-C0.1.npz"
    few = tmp_path / "few.txt"
    few.write_text("1 1:0.5\n7 2:1\n9 3:1\n7 1:1\n5 4:0.25\n")
    capsys.readouterr()
    assert main(["evaluate", str(model), str(few)]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and ("warning: 3 of 5 rows have labels the model was not trained on: "
                                      "[7, 9] (its 3 classes: [1, 2, 5]); counted as wrong") in err
    res = evaluate(sw.load_model(model), str(few))
    assert res["n_unknown"] == 3 and res["unknown_labels"] == [7.0, 9.0] and not res["more_unknown"]
    many = tmp_path / "many.txt"
    many.write_text("".join(f"{100 + i} 1:1\n" for i in range(UNKNOWN_SHOWN + 1)) + "2 1:1\n")
    assert main(["evaluate", str(model), str(many), "--json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["n_unknown"] == UNKNOWN_SHOWN + 1
    shown = ", ".join(str(100 + i) for i in range(UNKNOWN_SHOWN))
    assert f": [{shown}, ...] (its 3 classes" in out.err
    res = evaluate(sw.load_model(model), str(many))
    assert res["unknown_labels"] == [100.0 + i for i in range(UNKNOWN_SHOWN)] and res["more_unknown"]
    assert main(["evaluate", str(model), str(tmp / "test.zarr")]) == 0
    assert "warning" not in capsys.readouterr().err


def test_info_reads_a_model_file(run, capsys):
    tmp, _, _ = run
    capsys.readouterr()
    path = tmp / "m-C1.npz"
    model = sw.load_model(path)
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "classes      3: 1, 2, 5" in out and "features     8" in out and "C            1" in out
    assert "4 epochs, not converged, seed 3" in out and f"{model.history_[-1]['rel_gap']:.3e}" in out
    assert main(["info", str(path), "--json"]) == 0
    obj = _json_out(capsys)
    assert obj["kind"] == "model" and obj["classes"] == [1, 2, 5] and obj["n_features"] == 8
    assert obj["C"] == 1.0 and obj["epochs"] == 4 and obj["converged"] is False and obj["seed"] == 3
    assert obj["final"]["rel_gap"] == model.history_[-1]["rel_gap"]
    assert obj["settings"]["tol"] == 1e-9 and obj["class_weight"] is None


def _copy_checkpoint(tmp, name):
    import shutil

    shutil.copytree(tmp / "ck", tmp / name)
    (tmp / name / "LOCK").unlink(missing_ok=True)
    return tmp / name


def test_info_reads_a_checkpoint_and_its_health(run, capsys):
    tmp, _, _ = run
    ck = _copy_checkpoint(tmp, "ck_info")
    capsys.readouterr()
    assert main(["info", str(ck), "--json", "--verify"]) == 0
    obj = _json_out(capsys)
    manifest = json.loads((ck / "manifest.json").read_text())
    assert obj["kind"] == "checkpoint" and obj["Cs"] == [0.1, 1.0] and obj["settings"]["seed"] == 3
    assert obj["cursor"]["epoch"] == manifest["cursor"]["epoch"] and obj["finished"] is manifest["finished"]
    assert [m["last"]["rel_gap"] for m in obj["models"]] == [r["history"][-1]["rel_gap"] for r in manifest["results"]]
    assert [m["history_length"] for m in obj["models"]] == [len(r["history"]) for r in manifest["results"]]
    assert obj["model_files"] == [str(tmp / "m-C0.1.npz"), str(tmp / "m-C1.npz")]
    h = obj["health"]
    assert h["ok"] and h["latest"]["intact"] and h["latest"]["beta"] == "verified"
    assert h["previous"]["present"] and h["previous"]["intact"] and h["resumes_from"] == "manifest.json"
    assert main(["info", str(ck)]) == 0
    out = capsys.readouterr().out
    assert "C values     0.1, 1" in out and "latest       intact" in out and "previous     intact" in out

    # damaged weights of the latest commit: named, the fallback said, exit status 1
    w = ck / manifest["W"]
    raw = bytearray(w.read_bytes())
    raw[-3] ^= 0xFF
    w.write_bytes(bytes(raw))
    assert main(["info", str(ck)]) == 1
    cap = capsys.readouterr()
    assert "latest       DAMAGED" in cap.out and manifest["W"] in cap.out
    assert "previous     intact" in cap.out and "resume uses  manifest.prev.json" in cap.out
    assert cap.err.count("\n") == 1 and "damaged" in cap.err and "falls back to manifest.prev.json" in cap.err
    assert main(["info", str(ck), "--json"]) == 1
    obj = json.loads(capsys.readouterr().out)
    assert obj["health"]["ok"] is False and obj["health"]["resumes_from"] == "manifest.prev.json"


def test_info_checks_beta_only_with_verify(run, capsys):
    tmp, _, _ = run
    ck = _copy_checkpoint(tmp, "ck_beta")
    manifest = json.loads((ck / "manifest.json").read_text())
    shard, version = next((s, v) for s, v in manifest["beta"]["versions"].items() if v)
    import zarr

    arr = zarr.open_array(str(ck / "beta.zarr" / f"s{int(shard):06d}-v{int(version):06d}"), mode="r+")
    arr[...] = arr[...] + 1.0
    capsys.readouterr()
    assert main(["info", str(ck)]) == 0  # manifest and W are intact; beta is not read
    capsys.readouterr()
    assert main(["info", str(ck), "--verify"]) == 1
    cap = capsys.readouterr()
    assert f"beta of shard {shard} version {version}" in cap.out and "DAMAGED" in cap.out


def test_info_of_something_else_is_one_clear_line(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    (tmp_path / "notes.txt").write_text("x")
    for path in (tmp_path / "empty", tmp_path / "notes.txt"):
        assert main(["info", str(path)]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and str(path) in err
        assert "not a shard store" in err and "checkpoint directory" in err and "model file (.npz)" in err
    assert main(["info", str(tmp_path / "missing")]) == 1
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    assert main(["info", str(tmp_path / "bad.npz")]) == 1
    assert "not a streamwww model file" in capsys.readouterr().err


def test_info_reads_a_model_file_by_its_content_and_a_damaged_one_is_one_line(run, tmp_path, capsys):
    """`train --model-out NAME` keeps NAME as given: `info` knows the model file by its content
    (a zip archive), not by an .npz suffix; a truncated one is one error line (exit 1)."""
    tmp, _, _ = run
    model = tmp_path / "run.model"
    model.write_bytes(sorted(tmp.glob("m*.npz"))[0].read_bytes())  # (one file per C)
    capsys.readouterr()
    assert main(["info", str(model)]) == 0
    assert capsys.readouterr().out.splitlines()[0].split() == ["model", str(model)]
    model.write_bytes(model.read_bytes()[:300])
    for command in (["info", str(model)], ["evaluate", str(model), str(tmp / "test.zarr")]):
        assert main(command) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"{model}: not a streamwww model file, or a damaged one" in err


def test_predict_writes_its_output_file_whole_or_not_at_all(run, tmp_path, capsys):
    """`predict --output FILE`: the labels go to a temporary file beside FILE, renamed when all
    are written; a failure on the way (a bad line) leaves FILE as it was and nothing else, and
    an output that cannot be written is one error line before any work."""
    tmp, _, _ = run
    model = str(tmp / "m-C0.1.npz")
    good, bad = tmp_path / "good.txt", tmp_path / "bad.txt"
    good.write_text("1 1:0.5\n2 2:1\n5 3:0.25\n")
    bad.write_text("1 1:0.5\n2 2:1\nbad line\n")
    out = tmp_path / "out" / "labels.txt"
    out.parent.mkdir()
    out.write_text("the last run's labels\n")
    capsys.readouterr()
    assert main(["predict", model, str(bad), "--output", str(out)]) == 1
    assert "bad.txt:3:" in capsys.readouterr().err
    assert out.read_text() == "the last run's labels\n" and sorted(p.name for p in out.parent.iterdir()) == [
        "labels.txt"]
    assert main(["predict", model, str(good), "--output", str(out)]) == 0
    from sklearn.datasets import load_svmlight_file

    X, _ = load_svmlight_file(str(good), n_features=8)
    assert out.read_text().split() == [str(int(v)) for v in sw.load_model(model).predict(X)]
    assert sorted(p.name for p in out.parent.iterdir()) == ["labels.txt"]
    capsys.readouterr()
    assert main(["predict", model, str(good), "--output", "-"]) == 0  # '-': standard output
    assert capsys.readouterr().out == out.read_text()
    for where, why in ((out.parent, "cannot write the predictions there: it is a directory"),
                       (tmp_path / "nowhere" / "l.txt",
                        f"cannot write the predictions: the folder {tmp_path / 'nowhere'} does not exist")):
        assert main(["predict", model, str(good), "--output", str(where)]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"{where}: {why}" in err, err


def test_a_directory_given_as_the_model_is_named_for_what_it_is(run, tmp_path, capsys):
    """`evaluate CK TEST` (a checkpoint directory, or a store, where the model file goes) is one
    error line that says what the directory is, not Python's IsADirectoryError."""
    tmp, _, _ = run
    (tmp_path / "empty").mkdir()
    test = str(tmp / "test.zarr")
    capsys.readouterr()
    for model, what in ((tmp / "ck", "a checkpoint directory, not a model file (.npz); its run writes the "
                                     "model to its --model-out file"),
                        (tmp / "test.zarr", "a shard store, not a model file (.npz)"),
                        (tmp_path / "empty", "a directory, not a model file (.npz)")):
        for command in (["evaluate", str(model), test], ["predict", str(model), test, "--output",
                                                           str(tmp_path / "p.txt")]):
            assert main(command) == 1
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and f"{model}: {what}" in err, err
            assert not (tmp_path / "p.txt").exists()
    from streamwww import load_model

    with pytest.raises(ValueError, match="a checkpoint directory, not a model file"):
        load_model(tmp / "ck")


def test_plot_writes_an_image(run, capsys, tmp_path):
    pytest.importorskip("matplotlib")
    tmp, _, _ = run
    capsys.readouterr()
    for source, out in ((tmp / "ck", tmp_path / "ck.png"), (tmp / "m-C0.1.npz", tmp_path / "model.png")):
        assert main(["plot", str(source), "--output", str(out)]) == 0
        assert out.is_file() and out.stat().st_size > 1000
        assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert str(out) in capsys.readouterr().out
    assert main(["plot", str(tmp / "ck"), "--output", str(tmp_path / "gaps")]) == 0  # no suffix: .png
    assert f"written to {tmp_path / 'gaps.png'}" in capsys.readouterr().out
    assert (tmp_path / "gaps.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and not (tmp_path / "gaps").exists()
    assert main(["plot", str(tmp / "train.zarr"), "--output", str(tmp_path / "x.png")]) == 1
    assert "not a checkpoint directory" in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()


def test_plot_without_matplotlib_names_the_extra(run, capsys, tmp_path, monkeypatch):
    import sys

    tmp, _, _ = run
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    capsys.readouterr()
    assert main(["plot", str(tmp / "ck"), "--output", str(tmp_path / "p.png")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and 'pip install "streamwww[plot]"' in err and "matplotlib" in err
    assert not (tmp_path / "p.png").exists()


def test_train_cv_prints_best_C_and_the_table(run, capsys):
    import re
    import warnings

    tmp, _, _ = run
    capsys.readouterr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rc = main(["train", str(tmp / "train.zarr"), "--C", "0.01,1", "--cv", "3", "--checkpoint-dir",
                   str(tmp / "ckcv"), "--model-out", str(tmp / "cv.npz"), "--seed", "2", "--max-iter", "3"])
    assert rc == 0
    cap = capsys.readouterr()
    assert "cross-validation, 3 folds: best C=" in cap.out
    assert "fold 2 C=1" in cap.err  # epoch lines name the fold models
    # models stopped by --max-iter: one line in the command line's words, no Python warning
    assert re.search(r"^streamwww train: warning: \d of 8 models did not converge after 3 epochs \(C in \[.*"
                     r"> --tol 0\.001\); increase --max-iter or loosen --tol$", cap.err, re.M), cap.err
    assert not [w for w in caught if "did not converge" in str(w.message)]
    # (the command line shows Python warnings as lines of their own: the estimator's is not one)
    assert len([line for line in cap.err.splitlines() if "did not converge" in line]) == 1, cap.err
    best = sw.load_model(tmp / "cv.npz")
    assert f"best C={best.C:g}" in cap.out
    assert main(["info", str(tmp / "ckcv"), "--json"]) == 0
    info = _json_out(capsys)
    assert info["run"]["cv"] == 3 and info["model_files"] == [str(tmp / "cv.npz")] and len(info["models"]) == 8

    rc = main(["resume", str(tmp / "ckcv"), "--json", "-q"])
    obj = _json_out(capsys)
    assert rc == 0 and obj["cv"]["folds"] == 3 and obj["cv"]["best_C"] == best.C
    assert [row["C"] for row in obj["cv"]["table"]] == [0.01, 1.0]
    assert {row["rank"] for row in obj["cv"]["table"]} <= {1, 2}
    assert obj["models"][0]["C"] == best.C and obj["model_paths"] == [str(tmp / "cv.npz")]


def test_train_class_weight(run, capsys):
    tmp, _, _ = run
    rc = main(["train", str(tmp / "train.zarr"), "--C", "0.5", "--class-weight", "1:2,5:0.5", "--checkpoint-dir",
               str(tmp / "ckw"), "--model-out", str(tmp / "w.npz"), "--seed", "4", "--max-iter", "2", "-q"])
    assert rc == 0
    model = sw.load_model(tmp / "w.npz")
    assert model.class_weight == {1.0: 2.0, 5.0: 0.5}
    ref = sw.train(str(tmp / "train.zarr"), C=0.5, class_weight={1: 2.0, 5: 0.5}, random_state=4, max_iter=2)
    assert ref.coef_.tobytes() == model.coef_.tobytes()
    capsys.readouterr()

    # labels are the store's: a number that is no class, a word for numeric classes
    for bad, message in (("3:2", "'3' is not a class of"), ("a:2", "'a' is not a number")):
        rc = main(["train", str(tmp / "train.zarr"), "--class-weight", bad, "--checkpoint-dir", str(tmp / "ckx"),
                   "--model-out", str(tmp / "x.npz")])
        err = capsys.readouterr().err
        assert rc == 1 and message in err and "[1, 2, 5]" in err and err.count("\n") == 1
    with pytest.raises(SystemExit) as exc:
        main(["train", str(tmp / "train.zarr"), "--class-weight", "1=2", "--checkpoint-dir", "c", "--model-out", "m"])
    assert exc.value.code == 2 and "--class-weight must be 'balanced' or LABEL:WEIGHT" in capsys.readouterr().err


def test_train_class_weight_string_labels(tmp_path, capsys):
    rng = np.random.default_rng(1)
    X, y = make_classification(rng, n=120, d=4, k=3, dtype=np.float32)
    write_store(tmp_path / "s.zarr", X, np.array(["cat", "dog", "a:b"])[y], shard_rows=60)
    rc = main(["train", str(tmp_path / "s.zarr"), "--class-weight", "dog:3,a:b:0.25", "--checkpoint-dir",
               str(tmp_path / "ck"), "--model-out", str(tmp_path / "m.npz"), "--max-iter", "2", "-q"])
    assert rc == 0
    assert sw.load_model(tmp_path / "m.npz").class_weight == {"dog": 3.0, "a:b": 0.25}
    assert main(["train", str(tmp_path / "s.zarr"), "--class-weight", "balanced", "--checkpoint-dir",
                 str(tmp_path / "ck2"), "--model-out", str(tmp_path / "b.npz"), "--max-iter", "2", "-q"]) == 0
    assert sw.load_model(tmp_path / "b.npz").class_weight == "balanced"


def test_train_cluster_flags_reach_the_api(run, capsys, monkeypatch):
    tmp, _, _ = run
    seen = {}

    def fake_train(store, **kw):
        seen.update(kw)
        raise ValueError("stop here")

    monkeypatch.setattr("streamwww.api.train_fitted", fake_train)  # what the CLI calls
    capsys.readouterr()
    rc = main(["train", str(tmp / "train.zarr"), "--workers", "3", "--partitions", "6", "--model-out", "m.npz"])
    assert rc == 1 and "stop here" in capsys.readouterr().err
    assert seen["workers"] == 3 and seen["partitions"] == 6 and seen["client"] is None
    assert seen["checkpoint_dir"] is None and seen["cv"] is None
    seen.clear()
    main(["train", str(tmp / "train.zarr"), "--scheduler", "tcp://127.0.0.1:1", "--model-out", "m.npz"])
    assert seen["client"] == "tcp://127.0.0.1:1" and seen["workers"] is None and seen["partitions"] is None
    capsys.readouterr()
    # what only a cluster run can do is a one-line error before any work
    seen.clear()
    rc = main(["train", str(tmp / "train.zarr"), "--model-out", "m.npz", "--partitions", "2", "--checkpoint-dir", "c"])
    assert rc == 1 and "--partitions applies to cluster runs" in capsys.readouterr().err and not seen
    main(["train", str(tmp / "train.zarr"), "--model-out", "m.npz"])
    assert seen["checkpoint_dir"] == "m.ckpt"  # a local run without one: named after the model (test_cli_defaults)
    capsys.readouterr()
    seen.clear()
    main(["train", str(tmp / "train.zarr"), "--workers", "2", "--checkpoint-dir", "c", "--model-out", "m.npz"])
    assert seen["workers"] == 2 and seen["checkpoint_dir"] == "c"  # cluster runs checkpoint too
    seen.clear()
    main(["train", str(tmp / "train.zarr"), "--workers", "2", "--cv", "3", "--model-out", "m.npz"])
    assert seen["workers"] == 2 and seen["cv"] == 3  # and cross-validate
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["train", str(tmp / "train.zarr"), "--workers", "2", "--scheduler", "x", "--model-out", "m"])
    assert "not allowed with argument" in capsys.readouterr().err


def test_demo_names_no_file_that_is_gone(tmp_path, capsys):
    import re
    from pathlib import Path

    small = ["--rows", "600", "--test-rows", "200", "--features", "20", "--nnz-per-row", "5", "--classes", "3",
             "--shard-rows", "300"]
    assert main(["demo", *small]) == 0
    out = capsys.readouterr().out
    assert "checkpoints in a temporary directory, removed at exit" in out and "--workdir DIR keeps them" in out
    assert "checkpoints/" not in out and not re.search(r"(^|\s)/\S+", out)  # no path is named

    assert main(["demo", *small, "--workdir", str(tmp_path / "w")]) == 0
    out = capsys.readouterr().out
    named = [Path(p.rstrip(":;,)")) for p in re.findall(r"(/\S+)", out)]
    assert named and all(p.exists() for p in named)
    assert (tmp_path / "w" / "checkpoints" / "manifest.json").exists() and (tmp_path / "w" / "model.npz").exists()


def test_every_option_has_a_help_text():
    import argparse

    from streamwww.cli import build_parser

    missing, seen = [], 0

    def walk(parser, name):
        nonlocal seen
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            if isinstance(action, argparse._SubParsersAction):
                for sub, subparser in action.choices.items():
                    walk(subparser, f"{name} {sub}")
                continue
            seen += 1
            if not (action.help and action.help.strip()) or action.help == argparse.SUPPRESS:
                missing.append(f"{name} {'/'.join(action.option_strings) or action.dest}")

    walk(build_parser(), "streamwww")
    assert seen > 60  # every subcommand was walked
    assert not missing, "options without a help text: " + ", ".join(missing)


def test_info_store_json_verify(tmp_path, capsys):
    rng = np.random.default_rng(2)
    X, y = make_classification(rng, n=60, d=4, k=3, dtype=np.float32)
    store = write_store(tmp_path / "s.zarr", X, y, shard_rows=30)
    assert main(["info", str(store.path), "--json", "--verify"]) == 0
    assert _json_out(capsys)["n_rows"] == 60
    (store.path / "shard-00001" / "y" / "c" / "0").unlink()
    assert main(["info", str(store.path), "--json", "--verify"]) == 1
    cap = capsys.readouterr()
    assert cap.out == "" and "shard 1" in cap.err and cap.err.count("\n") == 1


def test_train_on_a_local_cluster(run, tmp_path):
    """The command as a user runs it, in a process of its own. Without -q it prints one line
    per epoch on stderr: a cluster's rounds too (their callback info has no rows/s), none of
    distributed's INFO lines (its loggers take their levels from Dask's config when it is
    imported, in this process and in each worker), and no warning that Dask's default HTTP
    port is taken; --json's object alone on stdout."""
    pytest.importorskip("distributed")
    import os
    import socket
    import subprocess
    import sys

    tmp, _, _ = run
    env = {k: v for k, v in os.environ.items() if not k.startswith("DASK_")}
    # Dask's default HTTP port taken (as by another run at the same time): no warning either
    taken = socket.socket()
    try:
        taken.bind(("", 8787))
        taken.listen()
    except OSError:
        pass  # taken already
    with taken:
        proc = subprocess.run([sys.executable, "-m", "streamwww.cli", "train", str(tmp / "train.zarr"), "--C", "0.1",
                               "--workers", "1", "--partitions", "1", "--seed", "3", "--max-iter", "2",
                               "--model-out", str(tmp_path / "m.npz"), "--json"],
                              capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = command_lines(proc.stderr)
    assert sum(ln.startswith("streamwww train: note: ") for ln in lines) == 1, proc.stderr  # (one process is faster)
    lines = [ln for ln in lines if not ln.startswith("streamwww train: note: ")]
    assert [ln.split()[:2] for ln in lines[:2]] == [["epoch", "1"], ["epoch", "2"]], proc.stderr
    assert all(ln.startswith(("epoch ", "streamwww train: warning: did not converge")) for ln in lines), proc.stderr
    # stdout: the one JSON object of a run without a checkpoint directory (allowed on a cluster)
    obj = json.loads(proc.stdout)
    assert obj["checkpoint_dir"] is None and obj["models"][0]["epochs"] == 2
    assert obj["models"][0]["seed"] == 3 and sw.load_model(tmp_path / "m.npz").n_iter_ == 2


def test_cluster_run_checkpoints_and_resumes_from_the_cli(run, capsys):
    pytest.importorskip("distributed")
    tmp, _, _ = run
    ck = tmp / "ck-cluster"
    rc = main(["train", str(tmp / "train.zarr"), "--C", "0.1", "--workers", "1", "--partitions", "1", "--seed", "3",
               "--max-iter", "2", "--eval-every", "1", "--checkpoint-dir", str(ck), "--model-out", str(tmp / "c2.npz"),
               "-q"])
    assert rc == 0 and (ck / "manifest.json").exists()
    capsys.readouterr()
    rc = main(["resume", str(ck), "--max-iter", "4", "--workers", "1", "--json", "-q"])
    assert rc == 0
    obj = _json_out(capsys)
    assert obj["models"][0]["epochs"] == 4 and sw.load_model(tmp / "c2.npz").n_iter_ == 4
    ref = sw.train(tmp / "train.zarr", C=0.1, random_state=3, max_iter=4, device="auto", eval_every=1)
    # K = 1 with objectives every epoch (fused rounds): the sequential model
    assert np.array_equal(ref.coef_, sw.load_model(tmp / "c2.npz").coef_)


def test_train_eval_every_takes_auto_or_a_count(run, capsys, tmp_path):
    """--eval-every: 'auto' (the default) or an int >= 1, recorded in the checkpoint; anything
    else is one usage line naming the option and the value."""
    tmp, _, _ = run
    for value, recorded in (("auto", "auto"), ("2", 2)):
        ck = tmp_path / f"ck-{value}"
        assert main(["train", str(tmp / "train.zarr"), "--C", "1", "--checkpoint-dir", str(ck), "--max-iter", "3",
                     "--eval-every", value, "-q", "--model-out", str(tmp_path / f"m-{value}.npz")]) == 0
        assert json.loads((ck / "manifest.json").read_text())["config"]["eval_every"] == recorded
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["train", str(tmp / "train.zarr"), "--eval-every", "0", "--checkpoint-dir", str(tmp_path / "x"),
              "--model-out", str(tmp_path / "x.npz")])
    assert exc.value.code == 2
    assert "--eval-every must be 'auto' or an int >= 1, got '0'" in capsys.readouterr().err
    for value in ("1", "63", "five"):  # --cv: the option's own words, not the estimator's parameter's
        with pytest.raises(SystemExit) as exc:
            main(["train", str(tmp / "train.zarr"), "--cv", value, "--checkpoint-dir", str(tmp_path / "x"),
                  "--model-out", str(tmp_path / "x.npz")])
        assert exc.value.code == 2
        assert f"--cv must be an int from 2 to 62 (folds), got {value!r}" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_help_and_version_load_no_numerical_library():
    """The parser (``--help``, ``--version``, a usage error) imports neither Numba, SciPy, Zarr
    nor scikit-learn: ``streamwww.io`` names its members lazily (0.8 s -> 0.2 s here)."""
    import subprocess
    import sys

    code = ("import sys\nfrom streamwww.cli import main\n"
            "for argv in (['--version'], ['--help'], ['train', '--help']):\n"
            "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
            "print(sorted(m for m in ('numba', 'scipy', 'zarr', 'sklearn', 'dask') if m in sys.modules))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip().splitlines()[-1] == "[]", res.stdout[-500:]


def _trained_store(tmp_path):
    """A store of 40 rows, 3 features and 3 classes, and a model the command line trained on it
    (3 epochs): the paths of the store, the model file and the checkpoint directory."""
    write_store(tmp_path / "s.zarr", np.random.default_rng(0).random((40, 3)), np.arange(40) % 3)
    assert main(["train", str(tmp_path / "s.zarr"), "--checkpoint-dir", str(tmp_path / "ck"), "--max-iter", "3",
                 "--tol", "0", "-q", "--model-out", str(tmp_path / "m.npz")]) == 0
    return tmp_path / "s.zarr", tmp_path / "m.npz", tmp_path / "ck"


def _fresh_main(argv, modules):
    """Run the command line with ``argv`` in a fresh interpreter: its output, and which of
    ``modules`` it imported (a list's repr, the output's last line)."""
    import subprocess
    import sys

    code = ("import sys\nfrom streamwww.cli import main\nassert main(sys.argv[1:]) == 0\n"
            f"print(sorted(m for m in {tuple(modules)!r} if m in sys.modules))")
    res = subprocess.run([sys.executable, "-c", code, *map(str, argv)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout, res.stdout.strip().splitlines()[-1]


def test_info_of_a_model_or_a_checkpoint_loads_no_numerical_library(tmp_path):
    """``info`` of a model file or a checkpoint directory reads JSON and a small archive:
    it imports neither Numba (the training engine), SciPy, Zarr nor scikit-learn (0.45 s
    -> 0.16 s here); ``info`` of a store still opens the store."""
    store, model, ckpt = _trained_store(tmp_path)
    libraries = ("numba", "scipy", "zarr", "sklearn", "dask")
    for path in (model, ckpt):
        out, imported = _fresh_main(["info", path], libraries)
        assert imported == "[]", (path, out[-500:])
    out, _ = _fresh_main(["info", store], libraries)
    assert "rows         40" in out, out


def test_a_terminal_is_told_once_when_kernels_compile(tmp_path, monkeypatch):
    """The first run after installing compiles Numba's kernels (tens of seconds): on a
    terminal the command line says so, once, when a compile starts; nothing on a cache hit,
    and nothing once the command is over."""
    import io

    import numba

    from streamwww import cli

    out = io.StringIO()
    listener = cli._announce_compiling(out)
    try:
        @numba.njit(cache=False)
        def first(x):
            return x + 1

        @numba.njit(cache=False)
        def second(x):
            return first(x) * 2

        assert second(1) == 4 and first(2) == 3  # two compiles (and a nested one)
    finally:
        numba.core.event.unregister("numba:compile", listener)
    assert out.getvalue() == cli.COMPILING_NOTE + "\n"

    @numba.njit(cache=False)
    def third(x):
        return x - 1

    assert third(1) == 0 and out.getvalue() == cli.COMPILING_NOTE + "\n"  # unregistered: silent

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    calls = []
    monkeypatch.setattr(cli, "_announce_compiling", lambda: calls.append(1))
    monkeypatch.setattr("sys.stderr", Terminal())
    data = tmp_path / "d.txt"
    flags = ["--rows", "20", "--features", "5", "--nnz-per-row", "2", "--classes", "3"]
    assert main(["make-data", str(data), *flags]) == 0
    assert main(["make-data", str(data), *flags, "--overwrite", "-q"]) == 0  # -q: no terminal output
    assert main(["info", str(tmp_path / "nothing")]) == 1  # no kernels
    assert calls == [1]


def test_scoring_a_store_loads_no_training_kernels(tmp_path):
    """``evaluate`` and ``predict`` of a model on a shard store score with SciPy's product:
    they import neither Numba (the training kernels) nor scikit-learn (0.72 s -> 0.55 s
    and 120 -> 64 MiB for ``evaluate`` on dna's store here)."""
    store, model, _ = _trained_store(tmp_path)
    for argv in (["evaluate", model, store], ["predict", model, store, "--output", tmp_path / "p.txt"]):
        out, imported = _fresh_main(argv, ("numba", "sklearn"))
        assert imported == "[]", (argv[0], out[-500:])
    assert len((tmp_path / "p.txt").read_text().split()) == 40
