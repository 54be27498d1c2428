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
from typing import Any

import numpy as np

from streamwww._params import AUTO_MEMORY_SHARE, resolve_memory_budget
from streamwww.backends.select import get_backend
from streamwww.engine import objective
from streamwww.engine.config import ModelResult, SolverConfig
from streamwww.engine.order import EpochPlan, row_order
from streamwww.engine.shrink import near_args, new_near, round_shrinks
from streamwww.solvers import SOLVER_IDS
from streamwww.stream.betas import DiskBetas, split_rows
from streamwww.stream.sources import StoreData

logger = logging.getLogger(__name__)

__all__ = ["ArrayParts", "ArraySpec", "PartitionSpec", "RoundsStart", "StoreParts", "array_round_task",
           "partition_rows", "partition_shards", "round_task", "run_rounds"]


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
    """What a round's task needs to find its data and ``beta`` (small and picklable).

    ``store`` is the store's path or its Location (a URL travels with its storage
    options to the workers, in memory only: they are never recorded)."""

    store: object
    fingerprint: str
    shards: tuple[int, ...]
    n_partitions: int
    cfg: SolverConfig
    beta_root: Any  # a local path (str), or a Location (a URL with its storage options)
    class_weights: tuple[float, ...] | None
    folds: tuple[int, int] | None
    device: str
    memory_budget: int | str = "auto"  # decoded shards a worker keeps between rounds (_worker_budget)


_STORES: dict[tuple[object, str], object] = {}  # per worker process: opened stores


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
    store.keep_decoded(_worker_budget(spec.memory_budget))
    return store


def release_stores() -> None:
    """Drop this process's opened stores and the shards they keep (run on every
    worker when a cluster run ends)."""
    for store in _STORES.values():
        store.keep_decoded(0)
    _STORES.clear()


def _worker_budget(memory_budget) -> int:
    """Bytes of decoded shards this worker process keeps between rounds (its partitions'
    shards are read from storage in the first round only when they fit): ``"auto"`` is
    half the Dask worker's memory limit (a LocalCluster gives each worker its share of
    the machine), or the in-process rule without a limit; an int is per worker."""
    if memory_budget != "auto":
        return resolve_memory_budget(memory_budget)
    try:
        from distributed import get_worker

        limit = get_worker().memory_manager.memory_limit
    except (ImportError, ValueError, AttributeError):
        limit = None
    return int(AUTO_MEMORY_SHARE * limit) if limit else resolve_memory_budget("auto")


class _Local:
    """One task's view of a round: the backend, ``W_t`` and the working copy, and the
    local step on a block (the certificate parts of ``W_t``, then the local passes)."""

    def __init__(self, cfg: SolverConfig, device: str, n_partitions: int, W: np.ndarray, train: bool):
        self.cfg, self.train = cfg, train
        self.backend = get_backend(device)
        self.sigma = float(n_partitions)
        M = len(cfg.Cs)
        self.every = np.arange(M, dtype=np.int64)
        self.splits = None if cfg.splits is None else np.asarray(cfg.splits, dtype=np.int64)
        self.Cs = np.asarray(cfg.Cs, dtype=np.float64) * self.sigma
        self.solver = SOLVER_IDS[cfg.subproblem]
        self.W = W
        self.W0 = self.backend.put_W(W)  # W_t, for the certificate
        self.Wl = self.backend.put_W(W) if train else None  # the working copy W_t + sigma' Delta W_k
        self.hinge = np.zeros(M)
        self.beta_sum = np.zeros(M)

    def step(self, block, beta: np.ndarray, t: int, first_shard: int, active: np.ndarray) -> np.ndarray | None:
        """Certificate sums of ``block`` at ``W_t`` and ``beta``; with ``train``, the local
        passes (row orders of ``(seed, t, first_shard, pass)``) and the block's new ``beta``.
        ``beta`` is the task's own array: it is scaled and trained in place."""
        backend, cfg = self.backend, self.cfg
        dblock = backend.put_block(block)
        # shrinking: the certificate's sweep at W_t also flags the coordinates the passes update
        near = new_near(len(cfg.Cs), block.n_rows, self.W.shape[2]) if \
            self.train and round_shrinks(cfg, backend, t) else None
        self.hinge += backend.hinge_sums(self.W0, dblock, cfg.bias, self.every, self.splits,
                                         **near_args(near))
        self.beta_sum += beta.sum(axis=(1, 2))
        if not self.train:
            return None
        if self.sigma != 1.0:
            beta *= self.sigma
        dbeta = backend.put_beta(beta)
        for p in range(cfg.inner_passes):
            order = row_order(cfg.seed, t, first_shard, p, block.n_rows)
            backend.bcd_pass(self.Wl, dblock, dbeta, self.Cs, active, order, cfg.bias, self.solver,
                             cfg.shark_eps, self.splits, **({} if near is None else {"near": near}))
        new = backend.get_beta(dbeta)
        if self.sigma != 1.0:
            new /= self.sigma
        return new

    def result(self) -> dict:
        out = {"hinge": self.hinge, "beta_sum": self.beta_sum, "device": self.backend.name}
        if self.train:
            Wh = self.backend.to_host(self.Wl)
            out["delta"] = Wh if self.sigma == 1.0 else (Wh - self.W) / self.sigma
        return out

    def close(self) -> None:
        self.backend.close()


def round_task(spec: PartitionSpec, W: np.ndarray, t: int, active: np.ndarray, train: bool = True,
               versions: tuple[int, ...] | None = None) -> dict:
    """Round ``t`` on one partition of a store: the certificate parts of ``W_t`` and
    (``train``) ``Delta W_k``.

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
    betas = DiskBetas(spec.beta_root, len(cfg.Cs), data.shard_rows, data.n_classes)
    shards = spec.shards
    version = dict(zip(shards, versions if versions is not None else [t] * len(shards)))
    new_sums = {}
    local = _Local(cfg, spec.device, spec.n_partitions, W, train)
    try:
        for ids in EpochPlan(cfg, len(shards)).groups(t):
            group = tuple(shards[i] for i in ids)
            block = data.block_of(group, cfg.bias)
            new = local.step(block, betas.read_group(group, [version[s] for s in group]), t, group[0], active)
            if new is None:
                continue
            for s, b in zip(group, split_rows(new, [int(data.shard_rows[s]) for s in group])):
                betas.write_version(s, version[s] + 1, b)
                new_sums[s] = b.sum(axis=(1, 2))
        return {**local.result(), "sums": new_sums}
    finally:
        local.close()


@dataclass(frozen=True)
class ArraySpec:
    """A round task's settings for partition ``k`` of in-memory arrays (its rows travel
    as a scattered :class:`~streamwww.backends.base.Block`, its ``beta`` with the task)."""

    k: int
    n_partitions: int
    cfg: SolverConfig
    device: str


def array_round_task(spec: ArraySpec, block, beta: np.ndarray, W: np.ndarray, t: int, active: np.ndarray,
                     train: bool = True) -> dict:
    """Round ``t`` on partition ``spec.k`` of arrays: as :func:`round_task`, with ``beta``
    (version ``t``) given and the new one returned as ``beta`` (the driver keeps it)."""
    local = _Local(spec.cfg, spec.device, spec.n_partitions, W, train)
    try:
        # a copy: the task must not change its argument (a threaded worker shares the driver's array)
        new = local.step(block, np.array(beta, dtype=np.float64), t, spec.k, active)
        out = local.result()
        if new is not None:
            out["beta"] = new
        return out
    finally:
        local.close()


def partition_rows(n_rows: int, n_partitions: int, seed: int) -> list[np.ndarray]:
    """``K`` partitions of ``n_rows`` in-memory rows: a seeded permutation cut into ``K``
    near-equal parts, each sorted (``K = 1``: every row, in order)."""
    K = int(n_partitions)
    if not 1 <= K <= n_rows:
        raise ValueError(f"{K} partitions for {n_rows} rows: need 1 <= partitions <= rows")
    perm = np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=(4,))).permutation(n_rows)
    return [np.sort(p) for p in np.array_split(perm, K)]


class StoreParts:
    """The partitions of a store: one :func:`round_task` per spec; ``beta`` versions on shared storage."""

    device = "cpu"  # the tasks' backend, once a round has run

    def __init__(self, specs: list[PartitionSpec], versions: dict[int, int]):
        self.specs, self.versions = specs, dict(versions)

    def submit(self, client, Wf, t, active, train, prefix):
        return [client.submit(round_task, spec, Wf, t, active, train, tuple(self.versions[s] for s in spec.shards),
                              key=f"{prefix}-{t}-{k}", pure=False, retries=3) for k, spec in enumerate(self.specs)]

    def advance(self, outs) -> None:
        """A training round is complete: its new versions are the current ones."""
        self.versions = {s: v + 1 for s, v in self.versions.items()}

    def sums(self, outs) -> dict:
        return {s: v for o in outs for s, v in o["sums"].items()}


class ArrayParts:
    """The partitions of in-memory arrays: scattered blocks; ``beta`` kept by the driver
    and sent with each task (a task is pure: it returns the next ``beta``)."""

    device = "cpu"  # the tasks' backend, once a round has run

    def __init__(self, specs: list[ArraySpec], blocks: list, betas: list[np.ndarray]):
        self.specs, self.blocks, self.betas = specs, blocks, betas

    def submit(self, client, Wf, t, active, train, prefix):
        return [client.submit(array_round_task, spec, block, beta, Wf, t, active, train, key=f"{prefix}-{t}-{k}",
                              pure=False, retries=3)
                for k, (spec, block, beta) in enumerate(zip(self.specs, self.blocks, self.betas))]

    def advance(self, outs) -> None:
        self.betas = [o["beta"] for o in outs]


@dataclass
class RoundsStart:
    """Where a run of rounds starts: round ``t`` from ``W`` (``W_t``) and the models' results so far."""

    t: int
    W: np.ndarray
    results: list[ModelResult]
    wall: float = 0.0


def run_rounds(client, parts, cfg: SolverConfig, start: RoundsStart, n_shards: int,
               callback=None, progress=None, superseded=None, checkpoint=None) -> list[ModelResult]:
    """Train by CoCoA+ rounds on ``client`` (a ``distributed.Client``); one task per partition
    of ``parts`` (:class:`StoreParts` or :class:`ArrayParts`).

    ``superseded(versions)`` is called once a round is complete with the store versions it
    read (no task reads them any more); ``checkpoint(t, W, versions, sums, wall)`` after
    round ``t - 1`` with ``W_t`` (finished models' rows: their certified ``W``) and the
    versions the round wrote.  The history and stopping rule are the sequential driver's;
    ``time`` in the history is the rounds' wall time.
    """
    results, W, t = start.results, start.W, start.t
    active = np.array([i for i, r in enumerate(results) if r.status == "running"], dtype=np.int64)
    t0 = time.perf_counter() - start.wall
    prefix = f"streamwww-round-{id(parts):x}-{time.time_ns():x}"
    while active.size:
        train = t < cfg.max_iter
        Wf = _broadcast(client, W)
        outs = client.gather(parts.submit(client, Wf, t, active, train, prefix))
        del Wf
        parts.device = outs[0]["device"]  # where the tasks ran (Fit.device)
        if t > 0 and cfg.evaluates(t) or not train:
            active = _certify(W, outs, cfg, results, active, t, time.perf_counter() - t0, callback)
        if progress is not None:
            progress(t + 1, n_shards, n_shards, 0)
        if not train or active.size == 0:  # the last round's passes are not needed: W_t is the model
            break
        if superseded is not None:
            superseded(parts.versions)
        W = outs[0]["delta"] if len(outs) == 1 else W + _ksum([o["delta"] for o in outs])
        parts.advance(outs)
        t += 1
        for i in active:
            results[i].n_iter = t
        if checkpoint is not None:
            done = [i for i, r in enumerate(results) if r.W is not None]
            Wc = W.copy() if done else W
            for i in done:
                Wc[i] = results[i].W
            checkpoint(t, Wc, parts.versions, parts.sums(outs), time.perf_counter() - t0)
    for i, r in enumerate(results):
        if r.W is None:
            r.W = W[i].copy()
        if r.status == "running":
            r.status = "max_iter"
    return results


def _broadcast(client, W):
    """``W`` for the round's tasks: scattered to every worker, or, when that fails (a worker
    died while receiving its copy, or the scatter did not finish in time), ``W`` itself,
    which then travels inside each task (through the scheduler, once per partition), so
    that the scheduler can run a task again anywhere: a SIGKILLed worker costs a slower
    round, never the run or a hang."""
    timeout = 30.0 + W.nbytes / (10 << 20)  # generous: 10 MiB/s to the slowest worker
    try:
        return client.scatter(W, broadcast=True, hash=False, timeout=timeout)
    except (OSError, TimeoutError) as exc:  # distributed's CommClosedError is an OSError
        logger.warning("broadcasting W failed (%s: %s); this round's tasks carry W themselves",
                       type(exc).__name__, exc)
        return W


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
