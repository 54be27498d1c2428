r"""Training on a Dask cluster: CoCoA+ rounds with the exact Walrus local solver.

The shards are split into ``K`` partitions (:func:`partition_shards`, a pure
function of the shard sizes and the seed).  Round ``t``:

1. the driver broadcasts ``W_t``;
2. the task of partition ``k`` (:func:`round_task`, on any worker) reads the
   current version ``v_s`` of its shards' ``beta`` (``t`` in a run that started
   on the cluster; a resumed sequential run's versions may differ by shard), sums the hinge loss of its rows at ``W_t`` and
   their ``beta`` (the certificate of ``W_t``, taken from the rows it has just
   loaded: no extra read), runs exact BCD passes over its rows on the CoCoA+
   local subproblem, writes version ``v_s + 1`` of its ``beta`` and returns
   ``Delta W_k`` (and the sums of the new versions, for the checkpoint);
3. the driver sets ``W_{t+1} = W_t + sum_k Delta W_k`` (in ``k`` order).

The local subproblem (Ma et al. 2015; Smith et al. 2018, "adding" with
``sigma' = K``) has the row curvature ``sigma' ||x_i||^2`` and scores from the
working copy ``W_t + sigma' Delta W_k``.  It is solved by the unchanged kernels:
the WW block problem scales (if ``b`` solves ``(v, C)``, ``sigma' b`` solves
``(sigma' v, sigma' C)``), so a pass over ``beta' = sigma' beta`` with the box
``[0, sigma' C w_i]`` on the working copy *is* the local pass, and
``beta = beta' / sigma'``, ``Delta W_k = (W_work - W_t) / sigma'``.  With
``K = 1`` every scale is 1 and ``W_work`` is ``W_{t+1}``: the rounds are the
sequential epochs, bitwise.

Tasks are pure and idempotent: task ``(t, k)`` reads versions ``v_s`` and writes
versions ``v_s + 1`` under its own names, so a task that Dask runs again after its
worker died rewrites the same values, and the run ends with the same model.
The stop decision for ``W_t`` comes with round ``t + 1``'s results (one round
late); the model returned is the certified ``W_t``.  The driver never holds
rows or ``beta``.

A checkpoint after round ``t`` is ``W_{t+1}`` with the versions the round wrote
(:class:`~streamwww.checkpoint.CheckpointDir`, the sequential format with
cursor ``(t + 1, 0)``); ``W_{t+1} = W(beta_{t+1})`` up to rounding, so either
engine, with any ``K``, continues from it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np

from streamwww.backends.select import get_backend
from streamwww.engine import objective
from streamwww.engine.config import ModelResult, SolverConfig
from streamwww.engine.order import EpochPlan, row_order
from streamwww.solvers import SOLVER_IDS
from streamwww.stream.betas import DiskBetas, split_rows
from streamwww.stream.sources import StoreData

logger = logging.getLogger(__name__)

__all__ = ["PartitionSpec", "RoundsStart", "partition_shards", "round_task", "run_rounds"]


def partition_shards(shard_rows, n_partitions: int, seed: int) -> list[tuple[int, ...]]:
    """``K`` partitions of whole shards, balanced by rows: shards in a seeded order, each
    to the partition with the fewest rows so far (the first on a tie); sorted within."""
    rows = np.asarray(shard_rows, dtype=np.int64)
    K = int(n_partitions)
    if not 1 <= K <= rows.shape[0]:
        raise ValueError(f"{K} partitions for {rows.shape[0]} shards: need 1 <= partitions <= shards")
    order = np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=(3,))).permutation(rows.shape[0])
    loads = np.zeros(K, dtype=np.int64)
    parts: list[list[int]] = [[] for _ in range(K)]
    for s in order:
        j = int(np.argmin(loads))
        parts[j].append(int(s))
        loads[j] += rows[s]
    return [tuple(sorted(p)) for p in parts]


@dataclass(frozen=True)
class PartitionSpec:
    """What a round's task needs to find its data and ``beta`` (small and picklable)."""

    store: str
    fingerprint: str
    shards: tuple[int, ...]
    n_partitions: int
    cfg: SolverConfig
    beta_root: str
    class_weights: tuple[float, ...] | None
    folds: tuple[int, int] | None
    device: str


_STORES: dict[tuple[str, str], object] = {}  # per worker process: opened stores


def _open(spec: PartitionSpec):
    key = (spec.store, spec.fingerprint)
    store = _STORES.get(key)
    if store is None:
        from streamwww.io import open_store

        store = open_store(spec.store)
        if str(store.fingerprint) != spec.fingerprint:
            raise ValueError(f"{spec.store}: the store on this worker has fingerprint {store.fingerprint}, "
                             f"the run's is {spec.fingerprint}; workers must see the same store")
        _STORES[key] = store
    return store


def round_task(spec: PartitionSpec, W: np.ndarray, t: int, active: np.ndarray, train: bool = True,
               versions: tuple[int, ...] | None = None) -> dict:
    """Round ``t`` on one partition: the certificate parts of ``W_t`` and (``train``) ``Delta W_k``.

    ``versions`` are the current ``beta`` versions of ``spec.shards`` (default: all ``t``).
    Returns a dict: ``hinge`` and ``beta_sum`` (per model, of this partition's rows at
    ``W_t`` and those versions) and, when training, ``delta`` (``Delta W_k``, or
    ``W_{t+1}`` itself when ``K = 1``) and ``sums`` (``{shard: per-model sum}`` of the
    new versions) after writing versions ``v_s + 1``.
    """
    cfg = spec.cfg
    store = _open(spec)
    cw = None if spec.class_weights is None else np.asarray(spec.class_weights)
    data = StoreData(store, cw, spec.folds)
    M = len(cfg.Cs)
    betas = DiskBetas(spec.beta_root, M, data.shard_rows, data.n_classes)
    backend = get_backend(spec.device)
    sigma = float(spec.n_partitions)
    every = np.arange(M, dtype=np.int64)
    splits = None if cfg.splits is None else np.asarray(cfg.splits, dtype=np.int64)
    Cs = np.asarray(cfg.Cs, dtype=np.float64) * sigma
    solver = SOLVER_IDS[cfg.subproblem]
    W0 = backend.put_W(W)  # W_t, for the certificate
    Wl = backend.put_W(W) if train else None  # the working copy W_t + sigma' Delta W_k
    hinge = np.zeros(M)
    beta_sum = np.zeros(M)
    shards = spec.shards
    version = dict(zip(shards, versions if versions is not None else [t] * len(shards)))
    new_sums = {}
    try:
        for local in EpochPlan(cfg, len(shards)).groups(t):
            group = tuple(shards[i] for i in local)
            block = data.block_of(group, cfg.bias)
            beta = betas.read_group(group, [version[s] for s in group])
            dblock = backend.put_block(block)
            hinge += backend.hinge_sums(W0, dblock, cfg.bias, every, splits)
            beta_sum += beta.sum(axis=(1, 2))
            if not train:
                continue
            if sigma != 1.0:
                beta *= sigma
            dbeta = backend.put_beta(beta)
            for p in range(cfg.inner_passes):
                order = row_order(cfg.seed, t, group[0], p, block.n_rows)
                backend.bcd_pass(Wl, dblock, dbeta, Cs, active, order, cfg.bias, solver, cfg.shark_eps, splits)
            new = backend.get_beta(dbeta)
            if sigma != 1.0:
                new /= sigma
            for s, b in zip(group, split_rows(new, [int(data.shard_rows[s]) for s in group])):
                betas.write_version(s, version[s] + 1, b)
                new_sums[s] = b.sum(axis=(1, 2))
        out = {"hinge": hinge, "beta_sum": beta_sum, "sums": new_sums}
        if train:
            Wh = backend.to_host(Wl)
            out["delta"] = Wh if sigma == 1.0 else (Wh - W) / sigma
        return out
    finally:
        backend.close()


@dataclass
class RoundsStart:
    """Where a run of rounds starts: round ``t`` from ``W`` (``W_t``), the models' results so
    far and every shard's current ``beta`` version (a checkpoint's; fresh: zeros)."""

    t: int
    W: np.ndarray
    results: list[ModelResult]
    versions: dict[int, int]
    wall: float = 0.0


def run_rounds(client, specs: list[PartitionSpec], cfg: SolverConfig, start: RoundsStart, n_shards: int,
               callback=None, progress=None, superseded=None, checkpoint=None) -> list[ModelResult]:
    """Train by CoCoA+ rounds on ``client`` (a ``distributed.Client``); one task per partition.

    ``superseded(versions)`` is called once a round is complete with the versions it read
    (no task reads them any more); ``checkpoint(t, W, versions, sums, wall)`` after round
    ``t - 1`` with ``W_t`` (finished models' rows: their certified ``W``) and the versions
    the round wrote.  The history and stopping rule are the sequential driver's; ``time``
    in the history is the rounds' wall time.
    """
    results, W, t, versions = start.results, start.W, start.t, dict(start.versions)
    active = np.array([i for i, r in enumerate(results) if r.status == "running"], dtype=np.int64)
    t0 = time.perf_counter() - start.wall
    prefix = f"streamwww-round-{id(specs):x}-{time.time_ns():x}"
    while active.size:
        train = t < cfg.max_iter
        Wf = client.scatter(W, broadcast=True, hash=False)
        futures = [client.submit(round_task, spec, Wf, t, active, train, tuple(versions[s] for s in spec.shards),
                                 key=f"{prefix}-{t}-{k}", pure=False, retries=3) for k, spec in enumerate(specs)]
        outs = client.gather(futures)
        del futures, Wf
        if t > 0 and cfg.evaluates(t) or not train:
            active = _certify(W, outs, cfg, results, active, t, time.perf_counter() - t0, callback)
        if progress is not None:
            progress(t + 1, n_shards, n_shards, 0)
        if not train or active.size == 0:  # the last round's passes are not needed: W_t is the model
            break
        if superseded is not None:
            superseded(versions)
        W = outs[0]["delta"] if len(outs) == 1 else W + _ksum([o["delta"] for o in outs])
        versions = {s: v + 1 for s, v in versions.items()}
        t += 1
        for i in active:
            results[i].n_iter = t
        if checkpoint is not None:
            done = [i for i, r in enumerate(results) if r.W is not None]
            Wc = W.copy() if done else W
            for i in done:
                Wc[i] = results[i].W
            checkpoint(t, Wc, versions, {s: v for o in outs for s, v in o["sums"].items()},
                       time.perf_counter() - t0)
    for i, r in enumerate(results):
        if r.W is None:
            r.W = W[i].copy()
        if r.status == "running":
            r.status = "max_iter"
    return results


def _ksum(deltas):
    total = deltas[0].copy()
    for d in deltas[1:]:
        total += d
    return total


def _certify(W, outs, cfg, results, active, t, wall, callback) -> np.ndarray:
    """The objectives of ``W_t`` (epoch ``t``) from the tasks' sums; who stops."""
    hinge = _ksum([o["hinge"] for o in outs])[active]
    beta_sum = _ksum([o["beta_sum"] for o in outs])[active]
    wsq = np.einsum("mdk,mdk->m", W, W)[active]
    P = objective.primal(wsq, hinge, np.asarray(cfg.Cs)[active])
    D = objective.dual(wsq, beta_sum)
    G = objective.gap(P, D)
    R = np.atleast_1d(objective.relative_gap(P, D))
    done = set()
    for j, i in enumerate(active):
        res = results[i]
        if res.gap_1 is None:
            res.gap_1 = float(G[j])
        res.history.append({"epoch": t, "time": wall, "wall_time": wall, "primal": float(P[j]),
                            "dual": float(D[j]), "gap": float(G[j]), "rel_gap": float(R[j])})
        if cfg.converged(float(G[j]), float(R[j]), res.gap_1):
            res.status = "converged"
            res.W = W[i].copy()
            done.add(int(i))
        logger.info("round %d  C=%g  primal %.8g  dual %.8g  rel. gap %.3e  time %.3fs", t, res.C, P[j], D[j],
                    R[j], wall)
    if callback is not None and callback({"epoch": t, "time": wall, "models": [int(i) for i in active],
                                          "primal": P.tolist(), "dual": D.tolist(), "rel_gap": R.tolist()}):
        for i in active:
            if int(i) not in done:
                results[i].status = "stopped"
                results[i].W = W[i].copy()
        return active[:0]
    return np.array([i for i in active if int(i) not in done], dtype=np.int64)
