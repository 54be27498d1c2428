"""The streamwww command line, continued: --json, info on models and checkpoints, plot, train flags, help texts."""

import json

import numpy as np
import pytest

import streamwww as sw
from streamwww.cli import main
from streamwww.io import write_store

from .conftest import make_classification


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
               "--model-out", str(tmp / "m.npz"), "--seed", "3", "--max-iter", "4", "--tol", "1e-9", "-q"])
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
    assert obj["confusion_unknown_true"] == [0, 0, 0]
