"""Training on a Dask cluster (issue 16): overhead per round, rounds and time to a gap as K grows.

Three measurements, each printed as a table (docs/benchmarks.md and docs/DISTRIBUTED.md
quote them):

1. **Fixed cost per round**: a store of tiny shards (no compute to speak of) trained
   for ``--rounds`` rounds on ``K`` workers: the wall time per round is the scheduling,
   the broadcast of ``W``, the reduce of ``Delta W`` and the tasks' set-up (opening the
   store, ``beta`` I/O of a few rows).
2. **Rounds and time to the same relative gap** on a generated store: the sequential
   in-process run (``K = 0`` in the table), then ``K = 1, 2, 4`` partitions on
   ``min(K, --max-workers)`` worker processes. Whole ``train`` wall time with the client
   already started (its start-up is reported on its own), and the rounds needed.
3. The bytes each round moves: ``W`` to every partition and ``Delta W`` back.

Usage: python tools/bench_cluster.py [--rows 400000] [--features 2000] [--classes 20]
       [--nnz 30] [--shard-rows 25000] [--tol 1e-2] [--C 0.1] [--max-workers 2] [--ks 1,2,4]
       (--ks 1x1f,1x1,1x2: K = 1 with fused rounds and pipelined on 1 worker, pipelined on 2)
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
import warnings

import numpy as np


def _client(workers: int):
    from distributed import Client, LocalCluster

    t = time.perf_counter()
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
    client = Client(cluster)
    return cluster, client, time.perf_counter() - t


def _task_alone(store, tmp: str, rounds: int) -> float:
    """ms per call of one partition's round task over every shard, called directly (K = 1)."""
    from streamwww.engine.cocoa import PartitionSpec, round_task
    from streamwww.engine.run import solver_config
    from streamwww.estimator import WWClassifier

    cfg = solver_config(WWClassifier(C=1.0, random_state=0, device="cpu").get_params(), [1.0], 0)
    spec = PartitionSpec(store=str(store.path), fingerprint=str(store.fingerprint),
                         shards=tuple(range(store.n_shards)), n_partitions=1, cfg=cfg, beta_root=f"{tmp}/alone",
                         class_weights=None, folds=None, device="cpu")
    W = np.zeros((1, store.n_features + 1, len(store.classes)))
    active = np.arange(1)
    W = round_task(spec, W, 0, active)["delta"]  # compile, open
    t = time.perf_counter()
    for r in range(1, rounds + 1):
        W = round_task(spec, W, r, active, True, (r,) * store.n_shards)["delta"]
    return (time.perf_counter() - t) / rounds * 1e3


def fixed_cost(tmp: str, rounds: int, Ks, max_workers: int) -> None:
    import streamwww as sw
    from streamwww.io import write_store

    rng = np.random.default_rng(0)
    X = rng.normal(size=(800, 20)).astype(np.float32)
    y = X[:, :4].argmax(1)
    store = write_store(f"{tmp}/tiny.zarr", X, y, shard_rows=50)  # 16 shards of 50 rows
    print(f"\n1. fixed cost per round: {store.n_shards} shards of 50 rows, d=20, k=4, {rounds} rounds")
    print(f"one round's task alone, in this process (no Dask): {_task_alone(store, tmp, rounds):.1f} ms")
    print(f"{'K':>3} {'workers':>7} {'start-up s':>10} {'ms/round':>9} {'in process ms/epoch':>20}")
    sw.train(store, C=1.0, tol=0, max_iter=2, random_state=0, device="cpu")  # compile, warm caches
    t = time.perf_counter()
    sw.train(store, C=1.0, tol=0, max_iter=rounds, random_state=0, device="cpu")
    seq = (time.perf_counter() - t) / rounds * 1e3  # start-up of the in-process Dask client included
    for K in Ks:
        w = min(K, max_workers)
        cluster, client, startup = _client(w)
        try:
            sw.train(store, C=1.0, tol=0, max_iter=2, random_state=0, device="cpu", client=client, partitions=K)
            t = time.perf_counter()
            sw.train(store, C=1.0, tol=0, max_iter=rounds, random_state=0, device="cpu", client=client,
                     partitions=K)
            per = (time.perf_counter() - t) / (rounds + 1) * 1e3  # rounds + the certificate-only round
        finally:
            client.close()
            cluster.close()
        print(f"{K:3d} {w:7d} {startup:10.2f} {per:9.1f} {seq:20.1f}")


def _run_spec(text: str, max_workers: int) -> tuple[int, int, bool]:
    """``K``, ``KxP`` (K partitions on P workers) or either with ``f`` (fused rounds:
    ``eval_every=1``, each round's task sweeps and trains): ``(K, P, fused)``."""
    fused = text.endswith("f")
    K, _, P = text.rstrip("f").partition("x")
    return int(K), int(P) if P else min(int(K), max_workers), fused


def to_gap(tmp: str, args) -> None:
    import streamwww as sw
    from streamwww.io import convert_libsvm, make_data

    text = f"{tmp}/data.libsvm"
    make_data(text, rows=args.rows, features=args.features, nnz_per_row=args.nnz, classes=args.classes,
              seed=0, noise=1.0, overwrite=True)
    store = convert_libsvm(text, f"{tmp}/data.zarr", shard_rows=args.shard_rows, shuffle=True, seed=0,
                           overwrite=True)
    os.unlink(text)
    nbytes = sum(p.stat().st_size for p in store.path.rglob("*") if p.is_file())
    D, k = store.n_features + 1, len(store.classes)
    print(f"\n2. to a relative gap of {args.tol:g}, C={args.C:g}, inner_passes={args.inner_passes}: {store.n_rows:,} rows, {store.n_features:,} "
          f"features, {k} classes, {args.nnz} non-zeros per row, {store.n_shards} shards, "
          f"{nbytes / 2**20:.0f} MiB on disk")
    print(f"{'K':>3} {'workers':>7} {'rounds':>6} {'wall s':>8} {'s/round':>8} {'primal':>14} {'vs K=0':>7}")
    kw = dict(C=args.C, tol=args.tol, max_iter=args.max_iter, random_state=0, device="cpu",
              inner_passes=args.inner_passes)
    t = time.perf_counter()
    seq = sw.train(store, **kw)
    t_seq = time.perf_counter() - t
    print(f"{0:3d} {'-':>7} {seq.n_iter_:6d} {t_seq:8.2f} {t_seq / seq.n_iter_:8.3f} "
          f"{seq.history_[-1]['primal']:14.6g} {1.0:7.2f}")
    for K, w, fused in (_run_spec(r, args.max_workers) for r in args.ks.split(",")):
        cluster, client, startup = _client(w)
        try:
            t = time.perf_counter()
            m = sw.train(store, client=client, partitions=K, **kw, **({"eval_every": 1} if fused else {}))
            wall = time.perf_counter() - t
        finally:
            client.close()
            cluster.close()
        rounds = "fused (eval_every=1)" if fused else "pipelined"
        print(f"{K:3d} {w:7d} {m.n_iter_:6d} {wall:8.2f} {wall / max(1, m.n_iter_ + 1):8.3f} "
              f"{m.history_[-1]['primal']:14.6g} {wall / t_seq:7.2f}   (cluster start-up {startup:.1f} s; {rounds})")
    print(f"\n3. bytes per round and partition: W {D * k * 8:,} B out, Delta W {D * k * 8:,} B back "
          f"(d+1 = {D:,}, k = {k}, float64, one model)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=400_000, help="rows of the generated store")
    ap.add_argument("--features", type=int, default=2000, help="features")
    ap.add_argument("--classes", type=int, default=20, help="classes")
    ap.add_argument("--nnz", type=int, default=30, help="non-zeros per row")
    ap.add_argument("--shard-rows", type=int, default=25_000, help="rows per shard")
    ap.add_argument("--C", type=float, default=0.1, help="regularization")
    ap.add_argument("--tol", type=float, default=1e-2, help="relative duality gap to reach")
    ap.add_argument("--max-iter", type=int, default=500, help="epoch / round limit")
    ap.add_argument("--max-workers", type=int, default=os.cpu_count() or 1, help="most worker processes")
    ap.add_argument("--rounds", type=int, default=30, help="rounds of the fixed-cost measurement")
    ap.add_argument("--skip-gap", action="store_true", help="only the fixed cost per round")
    ap.add_argument("--inner-passes", type=int, default=1, help="local passes per round (and per epoch)")
    ap.add_argument("--ks", default="1,2,4", help="partition counts K to run, comma-separated: K (on "
                    "min(K, --max-workers) workers), KxP (on P workers) and either with a trailing f (fused "
                    "rounds, eval_every=1)")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    import dask
    import distributed

    import streamwww as sw

    print(f"# {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, streamwww "
          f"{sw.__version__}, dask {dask.__version__}, distributed {distributed.__version__}")
    with tempfile.TemporaryDirectory(prefix="streamwww-bench-cluster-") as tmp:
        fixed_cost(tmp, args.rounds, (1, 2, 4), args.max_workers)
        if not args.skip_gap:
            to_gap(tmp, args)


if __name__ == "__main__":
    main()
