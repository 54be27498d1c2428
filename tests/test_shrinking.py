"""Shrinking (streamwww.engine.shrink): what a pass leaves out, the step on the rest,
the optimum, and bitwise resume."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import streamwww as sw
from streamwww.backends.base import make_block
from streamwww.backends.cpu import CPUBackend
from streamwww.io import write_store
from streamwww.solvers import SIMPLEX, SOLVER_IDS

from .conftest import auto_epochs, check_an_old_rule_resumes, make_classification, settled_rows, stop_in_epoch


def _pass(W, X, y, beta, C, near=None, seed=0):
    block = make_block(X, y, 0.0)
    order = np.random.default_rng(seed).permutation(len(y)).astype(np.int64)
    CPUBackend().bcd_pass(W, block, beta, np.array([C]), np.array([0]), order, 0.0,
                          SOLVER_IDS["walrus"], 1e-4, near=near)


@pytest.mark.parametrize("block_rows", [1, 3])
@pytest.mark.parametrize("loss", ["ww", "cs"])
def test_rows_settled_at_their_bounds_do_not_step_with_pin(loss, block_rows, rng):
    """Rule 3 (engine.shrink): with ``pin`` a row whose every coordinate in play sits at its
    bound with its flag set is skipped; rows with a flagged coordinate at 0, or a coordinate
    at its bound whose flag is unset, step as without ``pin``.  One row at a time, from one
    state, in the sequential pass and the block pass."""
    n, d, k, C = 45, 6, 5, 0.8
    X, y = make_classification(rng, n=n, d=d, k=k)
    block = make_block(X, y, 0.0)
    W0 = rng.normal(size=(1, d, k))
    beta0, near = settled_rows(rng, n, k, C, loss == "cs")
    solver = SIMPLEX if loss == "cs" else SOLVER_IDS["walrus"]
    moved = 0
    for i in range(n):
        out = {}
        for pin in (False, True):
            W, beta = W0.copy(), beta0.copy()
            CPUBackend(1).bcd_pass(W, block, beta, np.array([C]), np.array([0]), np.array([i]), 0.0, solver,
                                   1e-4, near=near, block_rows=block_rows, pin=pin)
            out[pin] = W, beta
        if i % 3 == 0:
            assert np.array_equal(out[True][0], W0) and np.array_equal(out[True][1], beta0), i
            moved += not np.array_equal(out[False][1], beta0)
        else:
            assert all(np.array_equal(a, b) for a, b in zip(out[True], out[False])), i
    assert moved >= 3  # some of them would have stepped: the test tells a skip from a visit


@pytest.mark.parametrize("sparse", [False, True])
def test_near_flags_decide_what_a_pass_updates(sparse, rng):
    X, y = make_classification(rng, n=80, d=6, k=5, sparse=sparse)
    W0 = rng.normal(size=(1, 6, 5)) * 0.3
    # every coordinate near: exactly the full pass
    W1, b1 = W0.copy(), np.zeros((1, 80, 4))
    W2, b2 = W0.copy(), np.zeros((1, 80, 4))
    _pass(W1, X, y, b1, 1.0)
    _pass(W2, X, y, b2, 1.0, near=np.ones((1, 80, 4), dtype=np.uint8))
    assert np.array_equal(W1, W2) and np.array_equal(b1, b2)
    # nothing near and beta at 0: every row is skipped
    W3, b3 = W0.copy(), np.zeros((1, 80, 4))
    _pass(W3, X, y, b3, 1.0, near=np.zeros((1, 80, 4), dtype=np.uint8))
    assert np.array_equal(W3, W0) and not b3.any()
    # a coordinate off 0 is updated whatever its flag (here: all rows at C / 2)
    W4, b4 = W0.copy(), np.full((1, 80, 4), 0.5)
    _pass(W4, X, y, b4, 1.0, near=np.zeros((1, 80, 4), dtype=np.uint8))
    assert not np.array_equal(b4, np.full((1, 80, 4), 0.5))


def test_a_shrunk_step_is_the_exact_minimizer_over_its_coordinates(rng):
    """One row at a time (order of one row): the new beta satisfies the KKT conditions of
    the row's subproblem restricted to the near coordinates, the others stay 0."""
    X, y = make_classification(rng, n=200, d=5, k=7)
    C = 0.7
    for i in range(200):
        W = rng.normal(size=(1, 5, 7))
        beta = np.zeros((1, 200, 6))
        beta[0, i] = np.where(rng.random(6) < 0.3, rng.uniform(0, C, 6), 0.0)
        near = (rng.random((1, 200, 6)) < 0.4).astype(np.uint8)
        act = (near[0, i] != 0) | (beta[0, i] != 0)
        s = X[i] @ W[0]
        sq = float(X[i] @ X[i])
        yi = int(y[i])
        cls = np.array([t + 1 if t + 1 != yi else 0 for t in range(6)])
        old = beta[0, i].copy()
        block = make_block(X, y, 0.0)
        CPUBackend().bcd_pass(W, block, beta, np.array([C]), np.array([0]), np.array([i]), 0.0,
                              SOLVER_IDS["walrus"], 1e-4, near=near)
        b = beta[0, i]
        assert np.all(b[~act] == 0.0)
        if not act.any():
            continue
        v = (1.0 - (s[yi] - s[cls])) / sq + old + old.sum()  # v_t of the step, before it
        target = np.clip(v - b.sum(), 0.0, C)  # b_t = clip(v_t - sum(b), 0, C) on the active set
        assert np.allclose(b[act], target[act], atol=1e-10)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("intercept", [False, True])
def test_shrinking_reaches_the_same_optimum(sparse, intercept, rng):
    X, y = make_classification(rng, n=300, d=12, k=6, sparse=sparse)
    kw = dict(C=0.5, tol=1e-9, max_iter=20_000, random_state=1, fit_intercept=intercept)
    shrunk = sw.WWClassifier(**kw).fit(X, y)
    full = sw.WWClassifier(shrinking=False, **kw).fit(X, y)
    assert shrunk.converged_ and full.converged_
    assert shrunk.history_[-1]["primal"] == pytest.approx(full.history_[-1]["primal"], rel=1e-8)
    assert not np.array_equal(shrunk.coef_, full.coef_)  # shrinking did change the path
    dual = [e["dual"] for e in shrunk.history_]
    assert all(b >= a - 1e-9 * abs(a) for a, b in zip(dual, dual[1:]))  # the dual still rises


def test_several_C_each_equal_their_own_shrunk_run(rng):
    X, y = make_classification(rng, n=200, d=8, k=4, sparse=True)
    many = sw.train((X, y), C=[0.1, 2.0], tol=1e-4, random_state=2)
    for m in many:
        one = sw.train((X, y), C=m.C, tol=1e-4, random_state=2)
        assert np.array_equal(m.coef_, one.coef_) and m.n_iter_ == one.n_iter_


@pytest.mark.parametrize("budget", ["auto", 0])  # beta in memory / on disk (the sets spilled)
def test_several_C_keep_their_own_schedules_through_a_resume(budget, tmp_path, rng):
    """Each model of a list of ``C`` is evaluated at its own epochs (the adaptive schedule
    reads its own history): killed after an epoch where one model's objectives were computed
    and the other's not, the run resumes with each model's sets made from its own ``W``,
    and each model is its single run's, bitwise."""
    X, y = make_classification(rng, n=500, d=10, k=4, sparse=True)
    store = write_store(tmp_path / "s.zarr", X, y, shard_rows=100)
    kw = dict(tol=1e-5, random_state=5, memory_budget=budget, checkpoint_interval=0, max_iter=150)
    Cs = [0.05, 5.0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        single = [sw.train(store, C=C, **kw) for C in Cs]
        epochs = [{h["epoch"] for h in m.history_} for m in single]
        # an epoch end where one model was evaluated and the other was not, both running
        split = min(e for e in (epochs[0] ^ epochs[1]) if e < min(m.n_iter_ for m in single))
        with pytest.raises(KeyboardInterrupt):
            sw.train(store, C=Cs, checkpoint_dir=tmp_path / "ck", progress=stop_in_epoch(split + 1), **kw)
        manifest = json.loads((tmp_path / "ck" / "manifest.json").read_text())
        assert manifest["cursor"]["epoch"] == split and manifest.get("W_sets")
        both = sw.resume(tmp_path / "ck")
    for m, one in zip(both, single):
        assert np.array_equal(m.coef_, one.coef_) and m.n_iter_ == one.n_iter_
        assert [h["epoch"] for h in m.history_] == [h["epoch"] for h in one.history_]


@pytest.mark.parametrize("budget", ["auto", 0])  # beta in memory / objectives one epoch late
def test_a_shrunk_store_run_resumes_bitwise(budget, tmp_path, rng):
    X, y = make_classification(rng, n=600, d=10, k=5, sparse=True)
    store = write_store(tmp_path / "s.zarr", X, y, shard_rows=100)
    kw = dict(C=0.5, tol=0, random_state=3, memory_budget=budget, checkpoint_interval=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole = sw.train(store, max_iter=12, checkpoint_dir=tmp_path / "a", **kw)
        with pytest.raises(KeyboardInterrupt):  # killed in epoch 6 (the 5th ends without objectives)
            sw.train(store, max_iter=12, checkpoint_dir=tmp_path / "b", progress=stop_in_epoch(6), **kw)
        resumed = sw.resume(tmp_path / "b")
        full = sw.train(store, max_iter=12, shrinking=False, **kw)
    assert np.array_equal(whole.coef_, resumed.coef_)
    assert [e["primal"] for e in whole.history_] == [e["primal"] for e in resumed.history_]
    assert 5 not in [e["epoch"] for e in whole.history_]
    assert not np.array_equal(whole.coef_, full.coef_)  # the store run did shrink


def test_shrinking_is_a_recorded_setting(tmp_path, rng):
    X, y = make_classification(rng, n=200, d=6, k=3)
    store = write_store(tmp_path / "s.zarr", X, y, shard_rows=100)
    m = sw.train(store, C=1.0, tol=1e-3, random_state=0, shrinking=False, checkpoint_dir=tmp_path / "c",
                 model_out=tmp_path / "m.npz")
    assert sw.load_model(tmp_path / "m.npz").get_params()["shrinking"] is False
    again = sw.resume(tmp_path / "c")  # a finished run: the same model, without shrinking
    assert np.array_equal(again.coef_, m.coef_)
    with pytest.raises(ValueError, match="shrinking"):
        sw.WWClassifier(shrinking="yes").fit(X, y)


def test_sets_spilled_to_disk_give_the_model_of_sets_in_memory(tmp_path, rng):
    """Several models on a store whose beta stays on disk (memory_budget=0): the objectives
    follow the epoch and the sets wait in a temporary directory; the model is the one of
    beta (and sets) in memory, bitwise, and it did shrink."""
    X, y = make_classification(rng, n=500, d=10, k=5, sparse=True)
    store = write_store(tmp_path / "s.zarr", X, y, shard_rows=100)
    kw = dict(C=[0.3, 3.0], tol=0, max_iter=8, random_state=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        disk = sw.train(store, memory_budget=0, **kw)
        memory = sw.train(store, memory_budget="auto", **kw)
        full = sw.train(store, memory_budget=0, shrinking=False, **kw)
    for a, b, c in zip(disk, memory, full):
        assert np.array_equal(a.coef_, b.coef_) and np.array_equal(a.intercept_, b.intercept_)
        assert not np.array_equal(a.coef_, c.coef_)


def test_a_mid_epoch_checkpoint_holds_the_W_of_its_sets_and_resumes_bitwise(tmp_path, rng):
    """Killed between two shards of an epoch that shrinks: the commit names Wsets-<step>.npy
    (the W whose objective pass chose the epoch's coordinates) and the resumed run ends with
    the uninterrupted model, bitwise; a damaged Wsets falls back to the previous commit."""
    import json

    X, y = make_classification(rng, n=600, d=10, k=4, sparse=True)
    store = write_store(tmp_path / "s.zarr", X, y, shard_rows=100)
    kw = dict(C=0.5, tol=0, max_iter=7, random_state=6, mix_shards=1, checkpoint_every=1, checkpoint_interval=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole = sw.train(store, **kw)

        def stop_mid_epoch(epoch, done, n_shards, rows):
            if epoch == 4 and done == 4:
                raise KeyboardInterrupt

        ck = tmp_path / "ck"
        with pytest.raises(KeyboardInterrupt):
            sw.train(store, checkpoint_dir=ck, progress=stop_mid_epoch, **kw)
        man = json.loads((ck / "manifest.json").read_text())
        assert man["cursor"]["epoch"] == 3 and 0 < man["cursor"]["pos"] < 6
        assert man["W_sets"]["file"].startswith("Wsets-") and (ck / man["W_sets"]["file"]).exists()
        resumed = sw.resume(ck)
    assert np.array_equal(resumed.coef_, whole.coef_) and resumed.n_iter_ == whole.n_iter_

    # the same interruption, then the latest Wsets flipped: the previous commit is used, same model
    ck2 = tmp_path / "ck2"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(KeyboardInterrupt):
            sw.train(store, checkpoint_dir=ck2, progress=stop_mid_epoch, **kw)
        sets = ck2 / json.loads((ck2 / "manifest.json").read_text())["W_sets"]["file"]
        raw = bytearray(sets.read_bytes())
        raw[-3] ^= 0xFF
        sets.write_bytes(bytes(raw))
        with pytest.warns(UserWarning, match="damaged"):
            again = sw.resume(ck2)
    assert np.array_equal(again.coef_, whole.coef_)


def test_a_mid_epoch_checkpoint_continued_with_late_objectives_keeps_its_sets(tmp_path, rng):
    """A run with mid-epoch commits, stopped inside an epoch and continued by ``train`` with
    commits at epoch ends on a store read every epoch (the objectives then come late): the
    rest of that epoch still leaves out the coordinates its sets name; the model is the
    uninterrupted one."""
    import json

    X, y = make_classification(rng, n=600, d=10, k=4, sparse=True)
    store = write_store(tmp_path / "s.zarr", X, y, shard_rows=100)
    kw = dict(C=0.5, tol=0, max_iter=6, random_state=8, mix_shards=1, checkpoint_interval=0, memory_budget=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole = sw.train(store, checkpoint_every=1, **kw)

        def stop_mid_epoch(epoch, done, n_shards, rows):
            if epoch == 3 and done == 3:
                raise KeyboardInterrupt

        ck = tmp_path / "ck"
        with pytest.raises(KeyboardInterrupt):
            sw.train(store, checkpoint_dir=ck, checkpoint_every=1, progress=stop_mid_epoch, **kw)
        assert json.loads((ck / "manifest.json").read_text())["cursor"]["pos"] > 0
        go_on = sw.train(store, checkpoint_dir=ck, checkpoint_every=0, **kw)
    assert np.array_equal(go_on.coef_, whole.coef_) and go_on.n_iter_ == whole.n_iter_


def test_auto_schedule_version_1_is_the_epochs_alone():
    """Version 1 of ``eval_every="auto"`` (a checkpoint written before 2026-11-27 resumes
    with it): epochs 1-16, then every isqrt(e) // 2 epochs, a function of the epoch alone."""
    from streamwww.engine.config import SolverConfig, evaluation_epoch

    got = [e for e in range(1, 80) if evaluation_epoch(e)]
    assert got[:16] == list(range(1, 17))
    assert got[16:] == [18, 20, 22, 24, 26, 28, 30, 32, 34, 36, 39, 42, 45, 48, 51, 54, 57, 60, 63, 66, 70, 74,
                        78]
    cfg = SolverConfig(Cs=(1.0,), max_iter=37, eval_every="auto")
    assert cfg.evaluates(37) and not cfg.evaluates(35) and cfg.sticky_sets
    assert not SolverConfig(Cs=(1.0,)).sticky_sets  # eval_every=1: nothing to hold sets across
    with pytest.raises(ValueError, match="needs the run's history"):
        SolverConfig(Cs=(1.0,), eval_every="auto", schedule=2).evaluates(5)


def test_auto_schedule_spacing_follows_the_progress():
    """Version 2: after one evaluation the next epoch; then half the epochs the rule is
    predicted away at the average rate so far, between 1 and 2 isqrt(e)."""
    from streamwww.engine.config import SolverConfig
    from streamwww.engine.schedule import Schedule, adaptive_spacing

    def hist(*points):
        return [{"epoch": e, "gap": g, "rel_gap": r} for e, g, r in points]

    tol = SolverConfig(Cs=(1.0,), tol=1e-3, eval_every="auto", schedule=2)
    assert adaptive_spacing(tol, hist((1, 1.0, 0.5)), 1.0) == 1
    # rel_gap 0.5 -> 0.005 in 15 epochs: log(500 / 5) / 15 per epoch, log(5) to go: 5.2 epochs, half 2
    assert adaptive_spacing(tol, hist((1, 1.0, 0.5), (16, 0.1, 0.005)), 1.0) == 2
    # 0.5 -> 0.05 in 15 epochs: 25 to go, half 12, capped at 2 isqrt(16) = 8
    assert adaptive_spacing(tol, hist((1, 1.0, 0.5), (16, 0.1, 0.05)), 1.0) == 8
    assert adaptive_spacing(tol, hist((1, 1.0, 0.5), (4, 1.2, 0.6)), 1.0) == 4  # no progress yet: the cap
    assert adaptive_spacing(tol, hist((1, 1.0, 0.5), (4, 0.0, 0.0)), 1.0) == 1  # met (a stop decides)
    decay = SolverConfig(Cs=(1.0,), tol=0, gap_decay=1e-3, eval_every="auto", schedule=2)
    # gap 2 -> 0.03 in 8 epochs against 0.002: log(1000 / 15) / 8 per epoch, log(15) to go: 5.2, half 2
    assert adaptive_spacing(decay, hist((1, 2.0, 0.9), (9, 0.03, 0.9)), 2.0) == 2
    both = SolverConfig(Cs=(1.0,), tol=0.5, gap_decay=1e-3, eval_every="auto", schedule=2)
    assert adaptive_spacing(both, hist((1, 2.0, 0.9), (9, 0.03, 0.9)), 2.0) == 6  # tol nearer: 0.4 of 9
    never = SolverConfig(Cs=(1.0,), tol=0, eval_every="auto", schedule=2)
    assert adaptive_spacing(never, hist((1, 2.0, 0.9), (9, 0.03, 0.9)), 2.0) == 6  # no rule: the cap
    # a checkpoint of a later streamwww's schedule is refused, not run on another one
    with pytest.raises(ValueError, match="objective schedule version 3 is not known to this streamwww"):
        Schedule(SolverConfig(Cs=(1.0,), eval_every="auto", schedule=3), [])


def test_the_auto_schedule_evaluates_the_epochs_its_spacing_names(rng):
    """``eval_every="auto"`` (the default): the history has exactly epoch 1, the epochs the
    spacing names from the history before them, and the last."""
    from streamwww.engine.schedule import SCHEDULE

    assert SCHEDULE == 2
    X, y = make_classification(rng, n=300, d=8, k=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = sw.WWClassifier(C=1.0, tol=0, max_iter=45, random_state=0).fit(X, y)
        g = sw.WWClassifier(C=1.0, tol=0, gap_decay=1e-3, max_iter=400, random_state=0).fit(X, y)
    got = [h["epoch"] for h in m.history_]
    assert got == auto_epochs(m.history_, tol=0, max_iter=45) and got[-1] == 45 and len(got) < 15
    got = [h["epoch"] for h in g.history_]
    assert got == auto_epochs(g.history_, tol=0, gap_decay=1e-3) and g.n_iter_ < 400 and len(got) < g.n_iter_ / 3
    for bad in ("sometimes", 0, 2.5, True):
        with pytest.raises(ValueError, match=r"'eval_every' parameter of train must be an int in \[1, inf\) or 'auto'"):
            sw.train((X, y), eval_every=bad)


def test_sets_hold_until_the_next_objective_pass(monkeypatch, rng):
    """With objectives every 3 epochs every epoch after the first objective pass (epoch 3)
    shrinks: the sets of the last objective pass serve the epochs without one (before, those epochs passed over every
    coordinate); the optimum is the full run's."""
    calls = []
    real = CPUBackend.bcd_pass

    def spy(self, *args, near=None, **kw):
        calls.append(near is not None)
        return real(self, *args, near=near, **kw)

    monkeypatch.setattr(CPUBackend, "bcd_pass", spy)
    X, y = make_classification(rng, n=300, d=8, k=4)
    m = sw.train((X, y), C=1.0, tol=1e-6, max_iter=2000, random_state=0, eval_every=3)
    assert not any(calls[:3]) and all(calls[3:]) and len(calls) == m.n_iter_ > 6
    full = sw.train((X, y), C=1.0, tol=1e-6, max_iter=2000, random_state=0, eval_every=1, shrinking=False)
    held, every = m.history_[-1]["primal"], full.history_[-1]["primal"]  # both within 1e-6 of the optimum
    assert abs(held - every) <= 1e-5 * abs(every)


@pytest.mark.parametrize("first,then", [("auto", "auto"), (0, 0), (0, "auto"), ("auto", 0)])
def test_a_run_killed_after_an_epoch_without_objectives_resumes_bitwise(tmp_path, rng, first, then):
    """Killed in epoch 18 (the "auto" schedule evaluated 16, not 17): the last commit, at the
    end of epoch 17, holds the W of epoch 16 whose sets epoch 18 uses; resumed with the
    objectives in their own pass (memory_budget="auto") or late (0), either way, the run
    ends with the uninterrupted model, history and epochs."""
    import json

    X, y = make_classification(rng, n=600, d=10, k=5, sparse=True)
    store = write_store(tmp_path / "s.zarr", X, y, shard_rows=100)
    kw = dict(C=0.5, tol=0, max_iter=24, random_state=3, checkpoint_interval=0)

    def stop(epoch, done, n_shards, rows):
        if epoch == 18 and done >= 2:
            raise KeyboardInterrupt

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole = sw.train(store, memory_budget=first, **kw)
        ck = tmp_path / "ck"
        with pytest.raises(KeyboardInterrupt):
            sw.train(store, memory_budget=first, checkpoint_dir=ck, progress=stop, **kw)
        man = json.loads((ck / "manifest.json").read_text())
        assert man["cursor"] == {**man["cursor"], "epoch": 17, "pos": 0}
        assert man["W_sets"]["file"].startswith("Wsets-")
        resumed = sw.train(store, memory_budget=then, checkpoint_dir=ck, **kw)
    assert resumed.coef_.tobytes() == whole.coef_.tobytes() and resumed.n_iter_ == whole.n_iter_ == 24
    assert [h["primal"] for h in resumed.history_] == [h["primal"] for h in whole.history_]


def test_spilled_sets_come_back_as_filled_from_one_mapped_file(rng):
    """NearSets(spill=True): each shard's flags at their own place in one temporary file;
    what comes back is what was filled (shards of unequal rows, kept and used up); the file
    stays one file of the sets' size whatever the number of shards and epochs, it has no
    name (a SIGKILLed run leaves nothing in the temporary folder), and close() closes it."""
    import os
    import tempfile

    from streamwww.engine.shrink import NearSets

    rows = [7, 3, 11, 5]
    def named():  # the temporary folder's entries a spill file could have made
        return {n for n in os.listdir(tempfile.gettempdir()) if n.startswith("streamwww-near-")}

    before = named()
    sets = NearSets(2, 4, rows, spill=True)
    fh = sets._fh
    assert named() <= before
    if os.name == "posix":
        assert os.fstat(fh.fileno()).st_nlink == 0
    for epoch in range(3):
        flags = {s: rng.integers(0, 2, (2, r, 3)).astype(np.uint8) for s, r in enumerate(rows)}
        for s in (2, 0, 3, 1):
            sets.buffer(s)[...] = flags[s]
            sets.filled(s)
        assert os.fstat(fh.fileno()).st_size == 2 * sum(rows) * 3
        pair = sets.take([1, 2], keep=True)
        assert np.array_equal(pair, np.concatenate([flags[1], flags[2]], axis=1))
        one = sets.take([1], keep=True)
        assert type(one) is np.ndarray and np.array_equal(one, flags[1])
        assert np.array_equal(sets.take([3]), flags[3])
        assert sets.take([3]) is None  # used up
        sets.keep([0, 1], np.concatenate([flags[1][:, :1].repeat(7, axis=1), flags[0][:, :3]], axis=1))
        assert np.array_equal(sets.take([1]), flags[0][:, :3])
        # what was taken is a copy: the sets kept since did not change it
        assert np.array_equal(one, flags[1]) and np.array_equal(pair[:, :3], flags[1])
    sets.close()
    assert fh.closed


@pytest.mark.parametrize("near_share", [0.03, 0.5, 1.0])
def test_many_classes_csr_rows_give_the_dense_rows_bits(near_share, rng):
    """Beyond SMALL_K classes a CSR row's gather prefetches W's rows ahead of it (every line,
    or only the lines of the classes in play): the passes and the objective must still give,
    bit for bit, what the same rows stored dense give (the dense gather prefetches nothing)."""
    from streamwww.backends import _kernels as K

    k, n, d = 3 * K.SMALL_K, 120, 60
    X, y = make_classification(rng, n=n, d=d, k=k, sparse=True, density=0.3)
    sparse, dense = make_block(X, y, 0.0), make_block(X.toarray(), y, 0.0)
    assert sparse.is_sparse and not dense.is_sparse
    assert np.diff(X.indptr).min() > K.PREFETCH_AHEAD  # every row reaches past the look-ahead
    be, models, C = CPUBackend(), np.array([0]), np.array([0.7])
    near = (rng.random((1, n, k - 1)) < near_share).astype(np.uint8)
    out = []
    for block in (sparse, dense):
        W, beta = np.zeros((1, d, k)), np.zeros((1, n, k - 1))
        for seed in range(3):  # full passes, then shrunk ones (a few classes, or many, per row)
            order = np.random.default_rng(seed).permutation(n).astype(np.int64)
            be.bcd_pass(W, block, beta, C, models, order, 0.0, SOLVER_IDS["walrus"], 1e-4,
                        near=None if seed == 0 else near)
        flags = np.zeros_like(near)
        hinge = be.hinge_sums(W, block, 0.0, models, near=flags, reach=0.1)
        out.append((W, beta, hinge, flags))
    (W1, b1, h1, f1), (W2, b2, h2, f2) = out
    assert np.abs(W1).max() > 0.1 and f1.any() and not f1.all()
    assert np.array_equal(W1, W2) and np.array_equal(b1, b2)
    assert np.array_equal(h1, h2) and np.array_equal(f1, f2)


@pytest.mark.all_builds
@pytest.mark.parametrize("k, sparse, dtype, bias", [(2, False, np.float64, 1.0), (3, True, np.float64, 0.0),
                                                    (6, False, np.float32, 0.5), (8, True, np.float32, 1.0)])
def test_small_k_vector_builds_give_the_generic_builds_bits(k, sparse, dtype, bias, monkeypatch, rng):
    """Up to SMALL_K classes the kernels hold a row's k scores, and the row of W they add
    to, in one vector (backends/_lanes.py), and a shrunk step scores and scatters all k
    classes: full and shrunk passes, the objective and its near-flags must give, bit for
    bit, what the generic build's scalar loops give for the same k (its shrunk steps score
    and scatter only the classes in play)."""
    from streamwww.backends import _kernels as K

    n, d = 150, 12
    X, y = make_classification(rng, n=n, d=d, k=k, sparse=sparse, density=0.6, dtype=dtype)
    if not sparse:
        X[rng.random((n, d)) < 0.2] = 0.0  # the dense gather and scatter skip zeros
    block = make_block(X, y, bias)
    near = (rng.random((1, n, k - 1)) < 0.5).astype(np.uint8)
    be, models, C = CPUBackend(), np.array([0]), np.array([0.7])
    out = []
    for generic in (False, True):
        if generic:
            monkeypatch.setattr(K, "ktag", lambda k: ())
        W, beta = np.zeros((1, d + (bias != 0.0), k)), np.zeros((1, n, k - 1))
        for seed in range(4):  # full passes, then shrunk ones
            order = np.random.default_rng(seed).permutation(n).astype(np.int64)
            be.bcd_pass(W, block, beta, C, models, order, bias, SOLVER_IDS["walrus"], 1e-4,
                        near=None if seed < 2 else near)
        flags = np.zeros_like(near)
        hinge = be.hinge_sums(W, block, bias, models, near=flags, reach=0.1)
        out.append((W, beta, hinge, flags))
    (W1, b1, h1, f1), (W2, b2, h2, f2) = out
    assert np.abs(W1).max() > 0.1 and f1.any() and not f1.all()
    assert np.array_equal(W1, W2) and np.array_equal(b1, b2)
    assert np.array_equal(h1, h2) and np.array_equal(f1, f2)


@pytest.mark.all_builds
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("n", [151, 150])
def test_objective_pairs_of_rows_give_the_one_row_bits(sparse, n, monkeypatch, rng):
    """Up to SMALL_K classes the objective pass scores two rows at once (two chains of adds
    interleaved, each row's in its own order): the hinge sums, the per-row terms and the
    near-flags must be, bit for bit, the generic build's, one row at a time -- with an odd
    row count, rows of weight 0 (not scored), CSR rows of different lengths, an
    intercept, two models (the parallel build) and the rows of a partial pass in any order.
    (A dense pair adds its zeros: only the sign of a zero score may differ, which no hinge
    term or flag sees -- here class 0's scores are all zero, and row 3 is empty.)"""
    from streamwww.backends import _kernels as K

    k, d = 5, 14
    X, y = make_classification(rng, n=n, d=d, k=k, sparse=sparse, density=0.5)
    if not sparse:
        X[rng.random((n, d)) < 0.3] = 0.0
    X[3] = 0.0
    if sparse:
        X.eliminate_zeros()
    weights = rng.random(n) * (rng.random(n) > 0.2)
    weights[3] = 1.0
    block = make_block(X, y, 1.0, weights=weights)
    if sparse:
        assert len(set(np.diff(block.X.indptr))) > 3
    W = rng.normal(size=(2, d + 1, k)) * 0.3
    W[:, :, 0] = 0.0
    models = np.array([0, 1])
    rows = rng.permutation(n)[: n - 20].astype(np.int64)
    be, out = CPUBackend(), []
    for generic in (False, True):
        if generic:
            monkeypatch.setattr(K, "ktag", lambda k: ())
        flags = np.zeros((2, n, k - 1), dtype=np.uint8)
        sums = [be.hinge_sums(W, block, 1.0, models[:m], near=flags[:m] if m == 1 else flags, reach=0.05)
                for m in (1, 2)]
        h, rflags = np.full((2, n), -1.0), np.zeros_like(flags)
        be._hinge_rows(W, block, 1.0, models, rows, h, None, rflags, 0.05, 0, 0.1)
        out.append((sums, flags, h, rflags))
    (s1, f1, h1, r1), (s2, f2, h2, r2) = out
    assert f1.any() and not f1.all() and (h1[:, rows] == 0.0).any() and (h1[:, rows] > 0).any()
    assert all(np.array_equal(a, b) for a, b in zip(s1, s2))
    assert np.array_equal(f1, f2) and np.array_equal(h1, h2) and np.array_equal(r1, r2)
    assert s1[0][0] == s1[1][0]  # one model alone (the serial build) and beside another


@pytest.mark.parametrize("sparse", [False, True])
def test_objective_kernel_takes_no_reference_per_row(sparse, rng, monkeypatch):
    """The objective pass's row helpers end with every array held (backends._kernels.hold):
    Numba then prunes their per-row NRT_incref/NRT_decref pairs (atomic operations that
    were a quarter of a small fit's time), and the compiled kernel increfs its array
    arguments once, at entry, and nowhere in its row loop."""
    from numba import njit, types

    from streamwww.backends import _kernels as K

    X, y = make_classification(rng, n=40, d=6, k=4, sparse=sparse)
    block = make_block(X, y, 1.0)
    near = np.zeros((1, 40, 3), dtype=np.uint8)
    kernel, calls = K.hinge_sum_serial, []
    monkeypatch.setattr(K, "hinge_sum_serial", lambda *args: (calls.append(args), kernel(*args))[1])
    # (one thread: the serial kernel; with more, one model's rows are scored in parallel)
    CPUBackend(n_threads=1).hinge_sums(np.zeros((1, 7, 4)), block, 1.0, np.array([0]), near=near, reach=0.1)
    # the signature of this call (not every one the process compiled: in a full run, earlier
    # tests' dtypes and class counts made a fresh compilation of each take a minute)
    sig = tuple(kernel.typeof_pyval(a) for a in calls[0])
    assert sig in kernel.signatures
    flat = [t for a in sig for t in (a.types if isinstance(a, types.BaseTuple) else (a,))]
    n_arrays = sum(isinstance(t, types.Array) for t in flat)
    fresh = njit(nogil=True)(K._hinge_sum)  # not from Numba's cache, whose code cannot be inspected
    fresh.compile(sig)
    increfs = fresh.inspect_llvm(sig).count("call void @NRT_incref")
    assert 0 < increfs <= n_arrays, (increfs, n_arrays, sig)


def test_a_checkpoint_of_shrink_rule_2_resumes_with_that_rule(tmp_path, rng, monkeypatch):
    """A checkpoint written before the passes skipped rows settled at their bounds
    ("shrink_rule": 2, 0.6 to 0.7) resumes to the model rule 2 trains, bitwise; new runs record
    rule 3, and the two rules train different models."""
    X, y = make_classification(rng, n=300, d=8, k=6, sparse=True)
    y[rng.random(300) < 0.2] = 0  # label noise: rows at their bounds
    write_store(tmp_path / "s.zarr", X, y, shard_rows=64)
    config = check_an_old_rule_resumes(monkeypatch, tmp_path / "s.zarr", tmp_path / "old", 2, 6, C=1.0, tol=1e-8,
                                       max_iter=30, random_state=5, eval_every=2)
    assert config["shrink_rule"] == 2
    sw.train(str(tmp_path / "s.zarr"), checkpoint_dir=tmp_path / "new", max_iter=2, C=1.0, random_state=5)
    assert json.loads((tmp_path / "new" / "manifest.json").read_text())["config"]["shrink_rule"] == 3
