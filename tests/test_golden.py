"""Golden models: the bitwise trajectory of small runs, pinned by hash.

The hashes were recorded on the code before the engine redesign (issue 14) and
must keep passing: a refactor moves code, it does not change a single bit of a
model.  A later change that alters the trajectory on purpose (a new row order,
...) updates the hashes in the same commit and says why there.

``GOLDEN`` are those runs with ``shrinking=False`` and ``eval_every=1``: the
trajectory of every run before shrinking existed, unchanged by it.
``GOLDEN_SHRINKING`` pins the same runs with shrinking (engine/shrink.py): the
Shark run does not shrink, so its hash is the same in both.  ``GOLDEN_AUTO`` pins
them with the defaults since the objectives' ``"auto"`` schedule came
(engine.config.evaluation_epoch: shrinking, objectives spaced out, the sets held
between them).  The ``eval_every=2`` run keeps its setting in all three; with
shrinking its hash changed when sets began to hold across epochs without
objectives (it was ``55a20340c44f9e92d80b`` before).

Those three tables are runs with row-order version 1 (engine.order: NumPy's seeded
permutation), every run's before 2026-11-26 and the version a checkpoint written then
resumes with. ``GOLDEN_V2`` pins the defaults with version 2, the compiled shuffle
runs used from 2026-11-26; the hashes of the other tables did not change when it came.

All four use version 1 of the ``"auto"`` schedule (the epoch's function,
engine.config.evaluation_epoch), every run's before 2026-11-27. ``GOLDEN_V3`` pins the
defaults since then: row order 2 and schedule version 2 (engine.schedule: spaced by
the run's progress); only the runs that set ``eval_every`` themselves keep their hash.
The tables above run shrinking rule 2 (engine.shrink; rules 1 and 2 are the same for WW),
every run's before 0.8.0; ``GOLDEN_V4`` pins the defaults of 0.8.0 on, rule 3, whose passes
skip the rows settled at their bounds: the runs where no row settles there (and Shark's,
which does not shrink) keep their hash.

``GOLDEN_CS_RULE3`` pins Crammer-Singer runs with the defaults (rule 3, 0.8.0 on);
``GOLDEN_CS`` the same runs with rule 2 (new runs from 0.6.0 to 0.7.4), and
``GOLDEN_CS_RULE1`` with rule 1, every Crammer-Singer run's before: the rules older
checkpoints resume with.

Run ``python -m tests.test_golden`` to print the current hashes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import streamwww as sw
import streamwww.engine.run as engine_run
from streamwww.io import write_store

from .conftest import stop_in_epoch


def _data(seed: int, n: int, d: int, k: int, sparse: bool, dtype=np.float32):
    rng = np.random.default_rng(seed)
    protos = rng.normal(size=(k, d)) * 1.5
    y = rng.integers(0, k, size=n)
    y[:k] = np.arange(k)
    X = protos[y] + rng.normal(size=(n, d))
    if sparse:
        X = X * (rng.random((n, d)) < 0.3)
        return sp.csr_matrix(X.astype(dtype)), y
    return X.astype(dtype), y


def _digest(models) -> str:
    models = models if isinstance(models, list) else [models]
    h = hashlib.sha256()
    for m in models:
        h.update(m.coef_.tobytes())
        h.update(m.intercept_.tobytes())
        h.update(str(m.n_iter_).encode())
        # the objective trail too: the evaluation pass is part of the behaviour
        for e in m.history_:
            h.update(np.array([e["epoch"], e["primal"], e["dual"]], dtype=np.float64).tobytes())
    return h.hexdigest()[:20]


# the tables: the runs' settings beyond each run's own, and the row-order and schedule
# versions of new runs
MODES = {"GOLDEN": {"shrinking": False, "eval_every": 1, "row_order": 1, "schedule": 1, "shrink_rule": 2},
         "GOLDEN_SHRINKING": {"shrinking": True, "eval_every": 1, "row_order": 1, "schedule": 1, "shrink_rule": 2},
         "GOLDEN_AUTO": {"row_order": 1, "schedule": 1, "shrink_rule": 2},
         "GOLDEN_V2": {"row_order": 2, "schedule": 1, "shrink_rule": 2},
         "GOLDEN_V3": {"row_order": 2, "schedule": 2, "shrink_rule": 2},
         "GOLDEN_V4": {"row_order": 2, "schedule": 2, "shrink_rule": 3}}  # the defaults


@contextlib.contextmanager
def _new_runs_take(name: str, version: int):
    """New runs use ``version`` of engine.run's ``name`` inside the block."""
    saved = getattr(engine_run, name)
    setattr(engine_run, name, version)
    try:
        yield
    finally:
        setattr(engine_run, name, saved)


def row_order_of_new_runs(version: int):
    """New runs use row-order ``version`` (engine.order) inside the block."""
    return _new_runs_take("ROW_ORDER", version)


def schedule_of_new_runs(version: int):
    """New runs use the ``"auto"`` schedule's ``version`` (engine.schedule) inside the block."""
    return _new_runs_take("SCHEDULE", version)


def _run(name: str, tmp, mode: str) -> str:
    sh = dict(MODES[mode])
    with row_order_of_new_runs(sh.pop("row_order")), schedule_of_new_runs(sh.pop("schedule")), \
            _new_runs_take("SHRINK_RULE", sh.pop("shrink_rule")):
        return _run_settings(name, tmp, sh)


def _run_settings(name: str, tmp, sh: dict) -> str:
    every = {"eval_every": sh.pop("eval_every")} if "eval_every" in sh else {}

    def fit(X, y, **params):  # the estimator with the defaults; train() where eval_every is set
        if every:
            return sw.train((X, y), **params, **sh, **every)
        return sw.WWClassifier(**params, **sh).fit(X, y)

    if name == "memory-dense":
        X, y = _data(1, 300, 8, 5, False)
        return _digest(fit(X, y, C=0.5, random_state=3))
    if name == "memory-sparse-gapdecay":
        X, y = _data(2, 400, 30, 4, True)
        return _digest(fit(X, y, C=2.0, tol=0, gap_decay=0.0009, fit_intercept=False, max_iter=300,
                           random_state=4))
    if name == "memory-multiC":
        X, y = _data(3, 350, 20, 6, True)
        return _digest(sw.train((X, y), C=[0.1, 1.0, 10.0], tol=1e-4, random_state=5, **sh, **every,
                                max_iter=1000))  # (C = 10 stops at this limit, the default when pinned)
    if name == "memory-shark":
        X, y = _data(4, 250, 6, 4, False)
        return _digest(fit(X, y, C=1.0, subproblem="shark", tol=1e-3, random_state=6))
    if name == "memory-k12-binary":
        X, y = _data(5, 300, 10, 12, False, np.float64)
        Xb, yb = _data(6, 200, 5, 2, True)
        return _digest([fit(X, y, C=0.3, random_state=7),
                        fit(Xb, yb, C=0.3, random_state=7, intercept_scaling=2.0)])
    if name == "store-zarr-mix2":
        X, y = _data(7, 800, 25, 5, True)
        write_store(tmp / "a.zarr", X, y, shard_rows=150)
        return _digest(sw.train(tmp / "a.zarr", C=0.5, tol=1e-4, random_state=8, **sh, **every))
    if name == "store-checkpoint-mix1-multiC":
        X, y = _data(8, 700, 12, 4, False)
        write_store(tmp / "b.zarr", X, y, shard_rows=100)
        return _digest(sw.train(tmp / "b.zarr", C=[0.2, 3.0], tol=1e-4, random_state=9, mix_shards=1,
                                inner_passes=2, eval_every=2, checkpoint_dir=tmp / "ck",
                                checkpoint_every=1, **sh))
    if name == "store-parquet-resume":
        X, y = _data(9, 600, 10, 3, False)
        write_store(tmp / "c.parquet", X, y, shard_rows=130, format="parquet")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sw.train(tmp / "c.parquet", C=1.0, tol=1e-5, max_iter=3, random_state=10,
                     checkpoint_dir=tmp / "ck2", mix_shards=3, **sh, **every)
        return _digest(sw.resume(tmp / "ck2", max_iter=200))
    raise KeyError(name)


GOLDEN = {
    "memory-dense": "01f515e7f18b54fed046",
    "memory-sparse-gapdecay": "752b4f5381aca4e85469",
    "memory-multiC": "6b07f02a84efd642144e",
    "memory-shark": "b8a34c2857ee115086ac",
    "memory-k12-binary": "d2b82a8a35ee58f5e439",
    "store-zarr-mix2": "f314dc18da753bd70229",
    "store-checkpoint-mix1-multiC": "df3d5b4fd60325e8441c",
    "store-parquet-resume": "a38d45f4816e6215229a",
}


GOLDEN_SHRINKING = {
    "memory-dense": "f0726385227b6382c964",
    "memory-sparse-gapdecay": "86f91e25978a86259e7f",
    "memory-multiC": "02301485410b59601eb0",
    "memory-shark": "b8a34c2857ee115086ac",
    "memory-k12-binary": "19ecc3e6ea6b9a1e7ede",
    "store-zarr-mix2": "44aff69aaa9ab5c29cad",
    "store-checkpoint-mix1-multiC": "bb6fb8ca79146176038e",
    "store-parquet-resume": "edb49f333f16b09b3a25",
}


GOLDEN_AUTO = {
    "memory-dense": "9a9720434ac8c9dd1bf4",
    "memory-sparse-gapdecay": "95cddeabeb844de76058",
    "memory-multiC": "ada69adafa3d4481c37a",
    "memory-shark": "c4cd4a4c202ec09f10ca",
    "memory-k12-binary": "8aa71612ccd9c96a08f5",
    "store-zarr-mix2": "dfb7744a7609d215aeb6",
    "store-checkpoint-mix1-multiC": "bb6fb8ca79146176038e",
    "store-parquet-resume": "f448aaf210350078fcae",
}


GOLDEN_V2 = {
    "memory-dense": "bd149aa1fd2dfcd796d8",
    "memory-sparse-gapdecay": "cdf44f69ed1a5dad745e",
    "memory-multiC": "ba3eff8c00110566a2c8",
    "memory-shark": "8f0b92c38f0418854a14",
    "memory-k12-binary": "515fbadacdefff72c35e",
    "store-zarr-mix2": "75d13adf965ca42d4316",
    "store-checkpoint-mix1-multiC": "97a4c9ce6d6ec082fac7",
    "store-parquet-resume": "050d43045bb7eecb6fac",
}


GOLDEN_V3 = {
    "memory-dense": "3a6303a8a966c48a9390",
    "memory-sparse-gapdecay": "a0d5f3bf1f3531be8230",
    "memory-multiC": "f29abbff484fe1a73c06",
    "memory-shark": "39298820669afab2a062",
    "memory-k12-binary": "f6f2b94672be1c564491",
    "store-zarr-mix2": "1e94c43d92e5bd69da8b",
    "store-checkpoint-mix1-multiC": "97a4c9ce6d6ec082fac7",
    "store-parquet-resume": "3eda8a5a1e5f35a27a17",
}


GOLDEN_V4 = {
    "memory-dense": "a3969420352679540a52",
    "memory-sparse-gapdecay": "a0d5f3bf1f3531be8230",
    "memory-multiC": "762e88d21b18b0dc6bcb",
    "memory-shark": "39298820669afab2a062",
    "memory-k12-binary": "ae5af3e67d94a93a5111",
    "store-zarr-mix2": "cb2a77db75a032776964",
    "store-checkpoint-mix1-multiC": "fb53e0a76c05650e1d4e",
    "store-parquet-resume": "dd7b9c26bf241ecf83d3",
}


def _run_cs(name: str, tmp, shrink_rule: int) -> str:
    """Crammer-Singer runs with the defaults, their shrinking by ``shrink_rule``
    (engine.shrink: 3 for new runs since 0.8.0, 2 from 0.6.0, 1 before)."""
    with _new_runs_take("SHRINK_RULE", shrink_rule):
        if name == "cs-memory-sparse":
            X, y = _data(21, 400, 30, 6, True)
            return _digest(sw.CSClassifier(C=1.0, tol=1e-5, random_state=22).fit(X, y))
        if name == "cs-memory-multiC":
            X, y = _data(23, 300, 12, 5, False)
            return _digest(sw.train((X, y), C=[0.1, 2.0], loss="cs", tol=1e-5, random_state=24))
        if name == "cs-store-mix2":
            X, y = _data(25, 700, 20, 7, True)
            write_store(tmp / "cs.zarr", X, y, shard_rows=120)
            return _digest(sw.train(tmp / "cs.zarr", C=0.5, loss="cs", tol=1e-5, random_state=26))
    raise KeyError(name)


# Crammer-Singer (0.3.0 on; no table above runs it), with shrinking rules 3, 2 and 1;
# rule 1's hashes are those 0.5.0 trains (checked against c8691d9 when they were pinned)
GOLDEN_CS_RULE3 = {
    "cs-memory-sparse": "64c8d3ca844d07f02441",
    "cs-memory-multiC": "7bc2b5f4211146017d96",
    "cs-store-mix2": "7de447e2403f56f0db82",
}
GOLDEN_CS = {
    "cs-memory-sparse": "c371652ac47c0c67856b",
    "cs-memory-multiC": "7f4cc85024399c06bc94",
    "cs-store-mix2": "0f6e28fbc9b9b5da8329",
}
GOLDEN_CS_RULE1 = {
    "cs-memory-sparse": "8df414fb303355a34391",
    "cs-memory-multiC": "89cd1bb416bfb59e9a52",
    "cs-store-mix2": "e8fbebc500904362db82",
}


CS_TABLES = {3: GOLDEN_CS_RULE3, 2: GOLDEN_CS, 1: GOLDEN_CS_RULE1}


@pytest.mark.parametrize("rule", sorted(CS_TABLES))
@pytest.mark.parametrize("name", ["cs-memory-multiC", "cs-memory-sparse", "cs-store-mix2"])
def test_golden_crammer_singer_model(name, rule, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = _run_cs(name, tmp_path, rule)
    want = CS_TABLES[rule][name]
    assert got == want, f"{name} (shrink rule {rule}): the model changed bitwise (hash {got}, golden {want})"


def test_the_crammer_singer_rules_differ():
    assert all(len({table[name] for table in CS_TABLES.values()}) == 3 for name in GOLDEN_CS)


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden_model(name, mode, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = _run(name, tmp_path, mode)
    want = globals()[mode][name]
    assert got == want, f"{name} ({mode}): the model changed bitwise (hash {got}, golden {want})"


def test_shrinking_changes_the_trajectory():
    """The tables pin different runs: shrinking did something on each but Shark's, and the
    "auto" schedule on each but the run that sets ``eval_every`` itself."""
    for name in GOLDEN:
        assert (GOLDEN[name] == GOLDEN_SHRINKING[name]) == (name == "memory-shark"), name
        assert (GOLDEN_AUTO[name] == GOLDEN_SHRINKING[name]) == (name == "store-checkpoint-mix1-multiC"), name
        assert GOLDEN_V2[name] != GOLDEN_AUTO[name], name  # the row order is part of every run
        # the schedule, of every run on "auto"
        assert (GOLDEN_V3[name] == GOLDEN_V2[name]) == (name == "store-checkpoint-mix1-multiC"), name
        # rule 3, of every run where a row settles at its bounds
        assert (GOLDEN_V4[name] == GOLDEN_V3[name]) == (name in ("memory-shark", "memory-sparse-gapdecay")), name


def test_a_checkpoint_keeps_its_row_order(tmp_path):
    """A run checkpointed with version 1 resumes with version 1 (its settings lack the
    field): bitwise the run resumed with version 1 throughout; a new run takes version 2."""
    X, y = _data(11, 300, 10, 3, False)
    write_store(tmp_path / "d.zarr", X, y, shard_rows=100)
    kw = dict(C=1.0, tol=1e-5, random_state=12)

    def interrupted(ck, resume_version: int | None):
        sw.train(tmp_path / "d.zarr", **kw, max_iter=3, checkpoint_dir=tmp_path / ck)
        if resume_version is None:
            return sw.resume(tmp_path / ck)
        with row_order_of_new_runs(resume_version):
            return sw.resume(tmp_path / ck)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with row_order_of_new_runs(1):
            v1 = interrupted("ck1", 1)
            mixed = interrupted("ck", 2)  # resumed where new runs take version 2
        v2 = interrupted("ck2", None)
    assert _digest(mixed) == _digest(v1) != _digest(v2)
    manifest = json.loads((tmp_path / "ck2" / "manifest.json").read_text())
    assert manifest["config"]["row_order"] == 2
    assert "row_order" not in json.loads((tmp_path / "ck" / "manifest.json").read_text())["config"]


@pytest.mark.parametrize("budget", [{}, {"memory_budget": 0}])  # kept in memory; read every epoch (late)
def test_a_checkpoint_keeps_its_schedule(tmp_path, budget):
    """A run on version 1 of the "auto" schedule, interrupted and resumed where new runs
    take version 2, goes on with version 1 (its settings lack the field): bitwise the run
    on version 1 throughout, evaluated at version 1's epochs.  A run on version 2,
    interrupted after an epoch without objectives, resumes bitwise too (the spacing is
    read from the checkpoint's history)."""
    from streamwww.engine.config import evaluation_epoch

    X, y = _data(12, 400, 10, 4, True)
    write_store(tmp_path / "d.zarr", X, y, shard_rows=100)
    kw = dict(C=1.0, tol=1e-6, random_state=13, max_iter=90, checkpoint_interval=0, **budget)

    def interrupted(ck, first: int):
        with schedule_of_new_runs(first), pytest.raises(KeyboardInterrupt):
            sw.train(tmp_path / "d.zarr", **kw, checkpoint_dir=tmp_path / ck, progress=stop_in_epoch(21))
        assert json.loads((tmp_path / ck / "manifest.json").read_text())["cursor"]["epoch"] == 20
        return sw.resume(tmp_path / ck)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with schedule_of_new_runs(1):
            v1 = sw.train(tmp_path / "d.zarr", **kw)
        old = interrupted("ck1", 1)  # resumed where new runs take version 2
        v2 = sw.train(tmp_path / "d.zarr", **kw)
        new = interrupted("ck2", 2)
    assert _digest(old) == _digest(v1) != _digest(v2) == _digest(new)
    assert [h["epoch"] for h in v1.history_] == [e for e in range(1, v1.n_iter_ + 1)
                                                 if evaluation_epoch(e) or e == v1.n_iter_]
    assert 20 not in [h["epoch"] for h in v2.history_] and len(v2.history_) < len(v1.history_) / 2
    assert "schedule" not in json.loads((tmp_path / "ck1" / "manifest.json").read_text())["config"]
    assert json.loads((tmp_path / "ck2" / "manifest.json").read_text())["config"]["schedule"] == 2


if __name__ == "__main__":
    import tempfile
    from pathlib import Path

    for mode in MODES:
        print(f"{mode} = {{")
        for name in GOLDEN:
            with tempfile.TemporaryDirectory() as d:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    print(f'    "{name}": "{_run(name, Path(d), mode)}",', flush=True)
        print("}")
    for rule, table in CS_TABLES.items():
        table = next(k for k, v in globals().items() if v is table)
        print(f"{table} = {{")
        for name in ("cs-memory-sparse", "cs-memory-multiC", "cs-store-mix2"):
            with tempfile.TemporaryDirectory() as d:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    print(f'    "{name}": "{_run_cs(name, Path(d), rule)}",', flush=True)
        print("}")
