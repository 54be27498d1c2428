"""Golden models: the bitwise trajectory of small runs, pinned by hash.

The hashes were recorded on the code before the engine redesign (issue 14) and
must keep passing: a refactor moves code, it does not change a single bit of a
model.  A later change that alters the trajectory on purpose (a new row order,
...) updates the hashes in the same commit and says why there.

``GOLDEN`` are those runs with ``shrinking=False``: the trajectory of every run
before shrinking existed, unchanged by it.  ``GOLDEN_SHRINKING`` pins the same
runs with shrinking (the default since it was added; engine/shrink.py): the
Shark run does not shrink, so its hash is the same in both.

Run ``python -m tests.test_golden`` to print the current hashes.
"""

from __future__ import annotations

import hashlib
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import streamwww as sw
from streamwww.io import write_store


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


def _run(name: str, tmp, shrinking: bool) -> str:
    sh = {"shrinking": shrinking}
    if name == "memory-dense":
        X, y = _data(1, 300, 8, 5, False)
        return _digest(sw.WWClassifier(C=0.5, random_state=3, **sh).fit(X, y))
    if name == "memory-sparse-gapdecay":
        X, y = _data(2, 400, 30, 4, True)
        return _digest(sw.WWClassifier(C=2.0, tol=0, gap_decay=0.0009, fit_intercept=False,
                                       max_iter=300, random_state=4, **sh).fit(X, y))
    if name == "memory-multiC":
        X, y = _data(3, 350, 20, 6, True)
        return _digest(sw.train((X, y), C=[0.1, 1.0, 10.0], tol=1e-4, random_state=5, **sh))
    if name == "memory-shark":
        X, y = _data(4, 250, 6, 4, False)
        return _digest(sw.WWClassifier(C=1.0, subproblem="shark", tol=1e-3, random_state=6, **sh).fit(X, y))
    if name == "memory-k12-binary":
        X, y = _data(5, 300, 10, 12, False, np.float64)
        Xb, yb = _data(6, 200, 5, 2, True)
        return _digest([sw.WWClassifier(C=0.3, random_state=7, **sh).fit(X, y),
                        sw.WWClassifier(C=0.3, random_state=7, intercept_scaling=2.0, **sh).fit(Xb, yb)])
    if name == "store-zarr-mix2":
        X, y = _data(7, 800, 25, 5, True)
        write_store(tmp / "a.zarr", X, y, shard_rows=150)
        return _digest(sw.train(tmp / "a.zarr", C=0.5, tol=1e-4, random_state=8, **sh))
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
                     checkpoint_dir=tmp / "ck2", mix_shards=3, **sh)
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
    "store-checkpoint-mix1-multiC": "55a20340c44f9e92d80b",
    "store-parquet-resume": "edb49f333f16b09b3a25",
}


@pytest.mark.parametrize("shrinking", [False, True])
@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden_model(name, shrinking, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = _run(name, tmp_path, shrinking)
    want = (GOLDEN_SHRINKING if shrinking else GOLDEN)[name]
    assert got == want, f"{name} (shrinking={shrinking}): the model changed bitwise (hash {got}, golden {want})"


def test_shrinking_changes_the_trajectory():
    """The two tables pin different runs: shrinking did something on each but Shark's."""
    for name in GOLDEN:
        assert (GOLDEN[name] == GOLDEN_SHRINKING[name]) == (name == "memory-shark"), name


if __name__ == "__main__":
    import tempfile
    from pathlib import Path

    for shrinking in (False, True):
        print("GOLDEN_SHRINKING = {" if shrinking else "GOLDEN = {")
        for name in GOLDEN:
            with tempfile.TemporaryDirectory() as d:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    print(f'    "{name}": "{_run(name, Path(d), shrinking)}",', flush=True)
        print("}")
