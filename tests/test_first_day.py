"""A first day with streamwww (issue 57): what a new user runs into.

The Python API takes the LIBSVM file the command line takes (item 6); a file of the wrong
kind is named for what it is (item 3); small things (item 7); ``-v`` prints each epoch
once (item 5).
"""

import lzma
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

import streamwww as sw
from streamwww.cli import main
from streamwww.io import write_store

from .conftest import make_classification

ROOT = Path(__file__).resolve().parents[1]
FIT = dict(C=0.5, max_iter=30, random_state=0)

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def _libsvm_text(X, labels) -> str:
    return "".join(f"{lab:g} " + " ".join(f"{j + 1}:{v:.9g}" for j, v in enumerate(row) if v != 0) + "\n"
                   for row, lab in zip(X, labels))


@pytest.fixture
def text(tmp_path):
    """A small LIBSVM file, xz-compressed as the shipped data sets are."""
    rng = np.random.default_rng(57)
    X, y = make_classification(rng, n=300, d=6, k=3, dtype=np.float32)
    path = tmp_path / "train.libsvm.xz"
    path.write_bytes(lzma.compress(_libsvm_text(X, np.array([-1.0, 2.0, 5.0])[y]).encode()))
    return path


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """The temporary directory every ``tempfile`` call of the test uses: empty at the start."""
    where = tmp_path / "scratch"
    where.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(where))
    return where


def _one_line_error(capsys, command: str) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"streamwww {command}: error: ") and "\n" not in err, err
    return err


# ---- item 6: the Python API takes the LIBSVM file the command line takes ----


def test_train_converts_a_libsvm_file_into_a_temporary_store_removed_afterwards(text, tmp_path, scratch):
    model = sw.train(text, **FIT)
    assert list(scratch.iterdir()) == []  # the converted store went with the run
    ref = sw.train(sw.convert(text, tmp_path / "ref.zarr"), **FIT)  # convert, then train: the CLI's two steps
    assert np.array_equal(model.classes_, [-1.0, 2.0, 5.0])
    assert np.array_equal(model.coef_, ref.coef_) and model.n_iter_ == ref.n_iter_


def test_train_converts_a_libsvm_file_into_the_checkpoint_dir_as_the_cli_does(text, tmp_path):
    ck = tmp_path / "ck"
    model = sw.train(str(text), checkpoint_dir=ck, **FIT)
    store = sw.open_store(ck / "data.zarr")  # where `streamwww train FILE --checkpoint-dir ck` puts it
    assert store.fingerprint == sw.convert(text, tmp_path / "ref.zarr").fingerprint
    again = sw.resume(ck)  # the run is resumable from the store it keeps
    assert np.array_equal(again.coef_, model.coef_)
    with_cv = sw.train(text, C=[0.1, 1.0], cv=2, random_state=0, max_iter=5, checkpoint_dir=tmp_path / "ckcv")
    assert with_cv.best_C_ in (0.1, 1.0) and (tmp_path / "ckcv" / "data.zarr").is_dir()


def test_wwclassifier_fits_a_libsvm_file(text, tmp_path, scratch):
    clf = sw.WWClassifier(**FIT).fit(text)
    assert list(scratch.iterdir()) == []
    ref = sw.WWClassifier(**FIT).fit(sw.convert(text, tmp_path / "ref.zarr").path)
    assert np.array_equal(clf.coef_, ref.coef_) and clf.n_features_in_ == 6
    assert clf.score(sw.open_store(tmp_path / "ref.zarr")) > 0.5


def test_the_cv_estimators_fit_a_libsvm_file(text, tmp_path, scratch):
    for cls in (sw.WWClassifierCV, sw.CSClassifierCV):
        cv = cls(Cs=[0.1, 1.0], cv=2, random_state=0, max_iter=5).fit(text)
        assert list(scratch.iterdir()) == []  # the converted store went with the fit
        store = sw.convert(text, tmp_path / f"{cls.__name__}.zarr")
        ref = cls(Cs=[0.1, 1.0], cv=2, random_state=0, max_iter=5).fit(store.path)
        assert np.array_equal(cv.coef_, ref.coef_) and cv.best_C_ == ref.best_C_


def test_convert_is_exported():
    from streamwww.io import convert_libsvm

    assert sw.convert is convert_libsvm and "convert" in sw.__all__ and "convert" in dir(sw)


def test_the_readme_python_example_reads_the_shipped_xz_files(text):
    """The README's first lines of Python (its imports and its loader) on an .xz file."""
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"## Use from Python\s+```python\n(.*?)```", readme, re.S).group(1)
    lines = block.splitlines()
    upto = next(i for i, line in enumerate(lines) if line.startswith("X, y = "))
    code = "\n".join(lines[:upto + 1])
    assert ".xz" in lines[upto]  # the example names the files users have
    code = re.sub(r'"[^"]+"', repr(str(text)), code, count=1)
    env = {}
    exec(code, env)
    assert env["X"].shape == (300, 6) and sorted(set(env["y"])) == [-1.0, 2.0, 5.0]
    assert "sw.convert(" in block and re.search(r"sw\.train\(\"[^\"]+\.libsvm", block)


# ---- item 3: the wrong file gets the right words ----


@pytest.fixture
def files(tmp_path):
    """A model, its LIBSVM data, and files of other kinds."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(3)
    X, y = make_classification(rng, n=60, d=3, k=3)
    (tmp_path / "data.libsvm").write_text(_libsvm_text(X, y))
    sw.train((X, y), C=1.0, max_iter=5, random_state=0, model_out=tmp_path / "model.npz")
    pq.write_table(pa.table({"a": [1.0, 2.0], "label": [0, 1]}), tmp_path / "plain.parquet")
    (tmp_path / "plain.csv").write_text("a,b,c,label\n1,2,3,0\n4,5,6,1\n")
    write_store(tmp_path / "data.zarr", X, y)
    return tmp_path


def test_predict_with_liblinears_argument_order_says_so(files, capsys):
    assert main(["predict", str(files / "data.libsvm"), str(files / "model.npz")]) == 1
    err = _one_line_error(capsys, "predict")
    assert f"{files / 'data.libsvm'}: a LIBSVM data file, not a model file (.npz)" in err
    assert "the order is `streamwww predict MODEL DATA`" in err and "pickle" not in err
    assert main(["evaluate", str(files / "data.zarr"), str(files / "model.npz")]) == 1
    err = _one_line_error(capsys, "evaluate")
    assert f"{files / 'data.zarr'}: a shard store, not a model file (.npz)" in err and "evaluate MODEL DATA" in err
    assert main(["predict", str(files / "model.npz"), str(files / "data.libsvm")]) == 0  # the right order


def test_load_model_of_data_says_what_the_file_is(files):
    with pytest.raises(ValueError, match=r"data.libsvm: a LIBSVM data file, not a model file") as e:
        sw.load_model(files / "data.libsvm")
    assert "pickle" not in str(e.value)
    with pytest.raises(ValueError, match=r"plain.parquet: a Parquet file, not a model file"):
        sw.load_model(files / "plain.parquet")


def test_train_of_a_parquet_file_says_it_is_parquet(files, capsys):
    ck = files / "ck"
    assert main(["train", str(files / "plain.parquet"), "--checkpoint-dir", str(ck),
                 "--model-out", str(files / "m.npz"), "-q"]) == 1
    err = _one_line_error(capsys, "train")
    assert "plain.parquet: a Parquet file, not LIBSVM text" in err and "PAR1" not in err
    assert not ck.exists()  # the directory the command made went with the failed conversion


def test_convert_of_a_csv_file_says_it_is_csv(files, capsys):
    assert main(["convert", str(files / "plain.csv"), str(files / "c.zarr")]) == 1
    err = _one_line_error(capsys, "convert")
    assert "plain.csv: a CSV file, not LIBSVM text" in err and "multi-label" not in err
    assert main(["convert", str(files / "model.npz"), str(files / "c.zarr")]) == 1
    assert "model.npz: a streamwww model file (.npz), not LIBSVM text" in _one_line_error(capsys, "convert")


def test_a_malformed_libsvm_file_keeps_its_line_error(files, capsys):
    (files / "bad.libsvm").write_text("garbage here\n1 1:2\n")
    assert main(["convert", str(files / "bad.libsvm"), str(files / "c.zarr")]) == 1
    assert re.search(r"bad.libsvm:1: label 'garbage' is not a number", _one_line_error(capsys, "convert"))


# ---- item 7: small things ----


def test_info_of_a_weighted_store_mentions_its_weights(tmp_path, capsys):
    rng = np.random.default_rng(1)
    X, y = make_classification(rng, n=40, d=3, k=2)
    write_store(tmp_path / "w.zarr", X, y, sample_weight=np.arange(40) % 3 + 1.0)
    write_store(tmp_path / "u.zarr", X, y)
    assert main(["info", str(tmp_path / "w.zarr")]) == 0
    assert re.search(r"^weights +per row, stored with the rows; train uses them", capsys.readouterr().out, re.M)
    assert main(["info", str(tmp_path / "u.zarr")]) == 0
    assert "weights" not in capsys.readouterr().out


def test_examples_keep_no_results_in_a_temporary_folder(scratch, monkeypatch):
    """examples/README.md: files go to a temporary directory that is removed, or to
    $STREAMWWW_EXAMPLES_OUT (kept); example 03's plot went to a kept temporary folder."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_examples_common", ROOT / "examples" / "_common.py")
    common = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(common)
    monkeypatch.delenv(common.OUT_ENV, raising=False)
    assert common.results_dir("03_regularization_path") is None
    assert list(scratch.iterdir()) == []
    monkeypatch.setenv(common.OUT_ENV, str(scratch / "out"))
    assert common.results_dir("03_regularization_path") == scratch / "out" / "03_regularization_path"


# ---- item 5: -v into a pipe prints every epoch once ----


def test_verbose_prints_each_epoch_once(tmp_path):
    rng = np.random.default_rng(2)
    X, y = make_classification(rng, n=90, d=4, k=3)
    write_store(tmp_path / "s.zarr", X, y)
    proc = subprocess.run([sys.executable, "-m", "streamwww.cli", "train", str(tmp_path / "s.zarr"), "-v",
                           "--checkpoint-dir", str(tmp_path / "ck"), "--model-out", str(tmp_path / "m.npz"),
                           "--max-iter", "3", "--seed", "0", "--eval-every", "1"],
                          capture_output=True, text=True, timeout=300)  # stderr: a pipe (the code under test: conftest)
    assert proc.returncode == 0, proc.stderr
    epochs = re.findall(r"^epoch +(\d+) ", proc.stderr, re.M)
    assert epochs == ["1", "2", "3"], proc.stderr
    assert "device=" in proc.stderr  # -v still adds the library's other events


def test_evaluate_says_when_the_store_has_fewer_features_than_the_model(tmp_path, capsys):
    """A 36-feature model on a 16-feature store: the accuracy, and one line saying which
    features were taken as 0 (none for a store of the model's features)."""
    import json

    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 36))
    y = X[:, :3].argmax(1)
    sw.train((X, y), max_iter=5, tol=1e-2, model_out=tmp_path / "m.npz")
    write_store(tmp_path / "s16.zarr", X[:, :16], y)
    write_store(tmp_path / "s36.zarr", X, y)
    capsys.readouterr()
    assert main(["evaluate", str(tmp_path / "m.npz"), str(tmp_path / "s16.zarr")]) == 0
    err = capsys.readouterr().err
    assert "s16.zarr has 16 features, the model 36: features 17 to 36 are taken as 0" in err, err
    assert main(["evaluate", str(tmp_path / "m.npz"), str(tmp_path / "s36.zarr"), "--json"]) == 0
    cap = capsys.readouterr()
    assert "features" not in cap.err and json.loads(cap.out)["n_features"] == 36


# ---- item 7: predict writes decision values from the command line ----


@pytest.mark.parametrize("k", [2, 4])
def test_predict_writes_every_class_score(tmp_path, capsys, k):
    rng = np.random.default_rng(k)
    X, y = make_classification(rng, n=120, d=5, k=k)
    labels = np.array([-3, 7, 9, 11])[:k][y]
    write_store(tmp_path / "s.zarr", X, labels, shard_rows=50)
    model = sw.train(str(tmp_path / "s.zarr"), model_out=tmp_path / "m.npz", **FIT)
    out = tmp_path / "scores.txt"
    assert main(["predict", str(tmp_path / "m.npz"), str(tmp_path / "s.zarr"), "--scores", "--output", str(out)]) == 0
    head, *rows = out.read_text().splitlines()
    assert head == "labels " + " ".join(str(int(c)) for c in model.classes_)  # (integral labels as ints)
    got = np.array([[float(v) for v in r.split()[1:]] for r in rows])
    Xs = sw.open_store(tmp_path / "s.zarr").read_shards(range(3))[0]
    want = np.asarray(Xs @ model.coef_.T) + model.intercept_  # every class's score, also for two classes
    np.testing.assert_array_equal(got, want)  # repr: the float64 values exactly
    assert [int(r.split()[0]) for r in rows] == model.predict(Xs).tolist()


# ---- item 7: the command line's errors name its options, not Python's parameters ----


@pytest.mark.parametrize("args, option", [(["--C", "-1"], "--C"), (["--tol", "-1"], "--tol"),
                                          (["--max-iter", "0"], "--max-iter"),
                                          (["--intercept-scaling", "0"], "--intercept-scaling")])
def test_cli_errors_name_the_option_typed(tmp_path, capsys, args, option):
    rng = np.random.default_rng(0)
    X, y = make_classification(rng, n=40, d=3, k=3)
    write_store(tmp_path / "s.zarr", X, y, shard_rows=20)
    assert main(["train", str(tmp_path / "s.zarr"), "--model-out", str(tmp_path / "m.npz"),
                 "--checkpoint-dir", str(tmp_path / "ck"), *args]) == 1
    err = _one_line_error(capsys, "train")
    assert f"error: {option} must be " in err and "parameter of" not in err, err
