"""The default epoch limit: one constant everywhere, large enough that models the default
stop certifies after more than 1000 epochs finish, and checkpoints keep the limit they
recorded (issue 57 item 4)."""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

import streamwww as sw
from streamwww._params import MAX_ITER
from tests.conftest import DATA_DIR


def _slow_problem():
    """A small problem whose certificate (tol=1e-3) at C = 10 needs about 2,300 epochs:
    noisy labels of a random linear model."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 10))
    y = np.argmax(X @ rng.normal(size=(10, 3)) + rng.gumbel(size=(300, 3)), axis=1)
    return X, y


def test_the_default_is_one_constant_everywhere():
    from streamwww.cli import build_parser
    from streamwww.engine.config import SolverConfig

    assert MAX_ITER > 1000
    for cls in (sw.WWClassifier, sw.CSClassifier, sw.WWClassifierCV, sw.CSClassifierCV):
        assert cls().max_iter == MAX_ITER, cls
    assert inspect.signature(sw.train).parameters["max_iter"].default == MAX_ITER
    assert SolverConfig(Cs=(1.0,)).max_iter == MAX_ITER
    parser = build_parser()
    args = parser.parse_args(["train", "store", "--checkpoint-dir", "ck", "--model-out", "m.npz"])
    assert args.max_iter == MAX_ITER
    train_parser = next(a for a in parser._actions if a.dest == "command").choices["train"]
    assert f"(default {MAX_ITER})" in train_parser.format_help().replace("\n", " ").replace("  ", " ")
    assert f"max_iter : int, default={MAX_ITER}\n" in sw.WWClassifier.__doc__


def test_a_model_past_1000_epochs_converges_by_default():
    X, y = _slow_problem()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = sw.WWClassifier(C=10.0, random_state=0, n_jobs=1).fit(X, y)
        cs = sw.CSClassifier(C=10.0, random_state=0, n_jobs=1).fit(X, y)
    assert model.converged_ and model.n_iter_ > 1000
    assert model.history_[-1]["rel_gap"] <= 1e-3
    assert cs.converged_


@pytest.mark.skipif(not (DATA_DIR / "dna.scale.xz").exists(), reason="LIBSVM data sets not available")
def test_dna_converges_at_the_defaults():
    """dna at C = 1 with the intercept needs about 1,100 epochs (docs/benchmarks.md)."""
    from streamwww.io import load_libsvm

    X, y = load_libsvm(DATA_DIR / "dna.scale.xz")
    for cls in (sw.WWClassifier, sw.CSClassifier):
        model = cls(random_state=0, n_jobs=1).fit(X, y)
        assert model.converged_, (cls.__name__, model.n_iter_)


def test_a_checkpoint_keeps_its_recorded_limit(tmp_path):
    """A checkpoint recorded with max_iter=1000 (the earlier default) resumes with that limit,
    not today's default (which would continue its model); train() on it with today's default
    continues it to the certificate."""
    from streamwww.io import write_store
    from streamwww.state.checkpoint import CheckpointDir

    X, y = _slow_problem()
    store = write_store(tmp_path / "s.zarr", X, y, shard_rows=100)
    ck = tmp_path / "ck"
    kw = dict(C=10.0, random_state=0, n_jobs=1)
    with pytest.warns(ConvergenceWarning, match="after 1000 epochs"):
        sw.train(store, max_iter=1000, checkpoint_dir=ck, **kw)
    with CheckpointDir(ck, lock=False) as probe:
        manifest = probe.load_settings()
    assert manifest["config"]["max_iter"] == 1000 and manifest["estimator_params"]["max_iter"] == 1000

    with pytest.warns(ConvergenceWarning, match="after 1000 epochs"):
        resumed = sw.resume(ck)
    assert resumed.n_iter_ == 1000 and not resumed.converged_ and resumed.max_iter == 1000

    more = sw.train(store, checkpoint_dir=ck, **kw)  # max_iter may change: today's default
    assert more.converged_ and more.n_iter_ > 1000 and more.max_iter == MAX_ITER


# -- the command line names the faster way (issue 57 item 8) ----------------------------------

def _small_store(tmp_path):
    from streamwww.io import write_store

    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 6))
    y = np.argmax(X @ rng.normal(size=(6, 3)), axis=1)
    return str(write_store(tmp_path / "s.zarr", X, y, shard_rows=100).path)


def _notes(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("streamwww train: note:")]


def test_train_names_the_faster_way_for_the_block_pass(tmp_path, capsys):
    from streamwww.cli import main

    store = _small_store(tmp_path)
    common = [store, "--max-iter", "3", "--block-rows", "16", "--jobs", "2"]
    assert main(["train", *common, "--checkpoint-dir", str(tmp_path / "a"), "--model-out",
                 str(tmp_path / "a.npz")]) == 0
    notes = _notes(capsys.readouterr().err)
    assert len(notes) == 1 and "drop --block-rows" in notes[0] and "2 thread(s)" in notes[0]
    assert main(["-q", "train", *common, "--checkpoint-dir", str(tmp_path / "b"), "--model-out",
                 str(tmp_path / "b.npz")]) == 0
    assert _notes(capsys.readouterr().err) == []  # (-q: warnings and errors only)
    assert main(["train", store, "--max-iter", "3", "--jobs", "2", "--checkpoint-dir", str(tmp_path / "c"),
                 "--model-out", str(tmp_path / "c.npz")]) == 0
    assert _notes(capsys.readouterr().err) == []  # the sequential pass on two threads: the default


def test_train_names_the_faster_way_for_a_local_cluster(tmp_path, monkeypatch):
    from streamwww.cli import commands
    from streamwww.cli import build_parser

    store = _small_store(tmp_path)
    args = build_parser().parse_args(["train", store, "--workers", "2"])
    note = commands._faster_way(args, store, None)
    assert "200 rows" in note and "drop --workers" in note
    monkeypatch.setattr(commands, "LOCAL_CLUSTER_SLOWER_ROWS", 199)
    assert commands._faster_way(args, store, None) is None
    args = build_parser().parse_args(["train", store, "--scheduler", "tcp://host:8786"])
    assert commands._faster_way(args, store, None) is None  # a cluster of other machines: no rule


def test_the_block_pass_note_is_about_the_cpu(tmp_path):
    from streamwww.cli import build_parser, commands

    store = _small_store(tmp_path)
    cpu = build_parser().parse_args(["train", store, "--block-rows", "16", "--jobs", "1"])
    assert "drop --block-rows" in commands._faster_way(cpu, store, None)
    gpu = build_parser().parse_args(["train", store, "--block-rows", "16", "--jobs", "1", "--device", "cuda"])
    assert commands._faster_way(gpu, store, None) is None  # the GPU's block pass: not the threads measured
