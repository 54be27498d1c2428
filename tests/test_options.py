"""The run's options travel as one object (streamwww.engine.options): built once where a call
enters, a misspelling stopped there, the defaults train's, and resume rebuilding what a
checkpoint recorded."""

from __future__ import annotations

import inspect
from dataclasses import fields

import numpy as np
import pytest

import streamwww as sw
from streamwww.engine.options import RunOptions
from streamwww.io import write_store
from streamwww.state.checkpoint import CheckpointDir
from tests.conftest import make_classification


def test_a_misspelled_option_stops_the_call_before_any_work(rng):
    X, y = make_classification(rng, n=80)
    seen = []
    with pytest.raises(TypeError, match="'prefech'"):
        sw.WWClassifierCV(Cs=[1.0], cv=2, random_state=0).fit(X, y, prefech=2, callback=seen.append)
    assert not seen  # not one epoch trained
    with pytest.raises(TypeError, match="'checkpoint_intervall'"):
        RunOptions(checkpoint_intervall=5.0)


@pytest.mark.parametrize("bad, message", [
    ({"inner_passes": 0}, "The 'inner_passes' parameter of {owner} must be an int in [1, inf). Got 0 instead."),
    ({"eval_every": 0}, "The 'eval_every' parameter of {owner} must be an int in [1, inf) or 'auto'. Got 0 instead."),
    ({"checkpoint_every": -1}, "The 'checkpoint_every' parameter of {owner} must be an int in [0, inf). "
                               "Got -1 instead."),
    ({"checkpoint_interval": -1.0}, "The 'checkpoint_interval' parameter of {owner} must be a float in [0, inf). "
                                    "Got -1.0 instead."),
])
def test_a_cross_validation_run_checks_its_options_as_train_does(rng, bad, message):
    """The options are checked where they are built, with or without ``cv`` (a cross-validation
    run once took ``inner_passes=0`` and returned untrained models)."""
    X, y = make_classification(rng, n=80)
    seen = []
    for owner, run in (("train", lambda: sw.train((X, y), C=[1.0], random_state=0, callback=seen.append, **bad)),
                       ("train", lambda: sw.train((X, y), C=[1.0], cv=2, random_state=0, callback=seen.append,
                                                  **bad)),
                       ("WWClassifierCV", lambda: sw.WWClassifierCV(Cs=[1.0], cv=2, random_state=0).fit(
                           X, y, callback=seen.append, **bad))):
        with pytest.raises(ValueError) as info:
            run()
        assert str(info.value) == message.format(owner=owner)
    assert not seen


def test_the_options_defaults_are_those_of_train_and_resume():
    train = inspect.signature(sw.train).parameters
    for f in fields(RunOptions):
        assert getattr(RunOptions(), f.name) == train[f.name].default, f.name
    assert RunOptions().memory_budget == inspect.signature(sw.resume).parameters["memory_budget"].default


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # (runs cut at max_iter)
def test_resume_continues_with_the_options_the_checkpoint_recorded(rng, tmp_path):
    X, y = make_classification(rng, n=120)
    store = write_store(tmp_path / "s.zarr", X, y, shard_rows=30)
    kw = dict(C=1.0, random_state=0, checkpoint_every=1, checkpoint_interval=0.0, prefetch=1, inner_passes=2,
              eval_every=1, mix_shards=1, n_jobs=1)
    ref = sw.train(store, max_iter=6, **kw)
    ck = tmp_path / "ck"
    sw.train(store, max_iter=3, checkpoint_dir=ck, **kw)
    resumed = sw.resume(ck, max_iter=6)
    with CheckpointDir(ck, lock=False) as probe:
        m = probe.load_settings()
    assert {k: m["run"][k] for k in ("checkpoint_every", "checkpoint_interval", "prefetch")} == \
        {"checkpoint_every": 1, "checkpoint_interval": 0.0, "prefetch": 1}
    assert (m["config"]["inner_passes"], m["config"]["eval_every"], m["config"]["mix_shards"]) == (2, 1, 1)
    assert resumed.n_iter_ == ref.n_iter_ and np.array_equal(resumed.coef_, ref.coef_)
