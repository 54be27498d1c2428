r"""Training on a Dask cluster: CoCoA rounds with the exact Walrus local solver and a
line search on their sum.

The shards are split into ``K`` partitions (:func:`partition_shards`, a pure
function of the shard sizes and the seed).  Round ``t``:

1. the driver broadcasts ``W_t``;
2. the task of partition ``k`` (:func:`round_task`, on any worker) makes its shards'
   ``beta_t`` (read; or, after a round whose step was scaled, mixed from the two
   versions it combines and written as a version of its own), sums the hinge loss of
   its rows at ``W_t`` and their ``beta_t`` (the certificate of ``W_t``, taken from the
   rows it has just loaded: no extra read), runs exact BCD passes over its rows from
   ``W_t`` as if they were the only rows that move (the local problem with
   ``sigma' = 1``), writes the result ``beta'`` as a new version and returns
   ``Delta W_k`` and the sums of ``beta_t`` and ``beta'``;
3. the driver takes the step ``gamma`` in ``[0, 1]`` (per model) that maximizes the dual
   along ``sum_k (beta' - beta_t)``: ``D`` is a concave quadratic on that segment,
   ``D(gamma) = D_t + gamma (sum(beta' - beta_t) - <W_t, Delta W>) - gamma^2 ||Delta W||^2 / 2``
   with ``Delta W = sum_k Delta W_k`` (in ``k`` order), so ``gamma`` is its clipped
   vertex; then ``W_{t+1} = W_t + gamma Delta W`` and
   ``beta_{t+1} = beta_t + gamma (beta' - beta_t)``.

``beta_t + gamma (beta' - beta_t)`` is in the box for any ``gamma`` in ``[0, 1]``
and ``gamma`` maximizes the dual on the segment, so the dual never decreases and
every round gains at least what CoCoA's averaging (``gamma = 1 / K``, Ma et al.
2015) gains, which converges.  It is used instead of CoCoA+'s adding with
``sigma' = K``, whose rounds the line search reaches at least as fast, and in fewer
rounds (docs/DISTRIBUTED.md, "What a round does" and "What a round costs").  With
``K = 1`` the step is 1 by definition and the working copy is ``W_{t+1}``: the
rounds are the sequential epochs, bitwise.  ``gamma = 1`` for a model leaves its
``beta'`` as it is (no arithmetic), so a round whose steps are all 1 leaves one
version per shard.

Tasks are pure and idempotent: task ``(t, k)`` reads the versions it is given and
writes versions numbered from them under their own names, so a task that Dask runs
again after its worker died rewrites the same values, and the run ends with the same
model.  The stop decision for ``W_t`` comes with round ``t``'s results (the
certificate of the broadcast ``W``); the model returned is the certified ``W_t``.
The driver never holds rows or ``beta`` of a store.

A checkpoint after round ``t`` is ``W_{t+1}`` with the versions the round wrote, or,
when a step was scaled (``beta_{t+1}`` is not written until round ``t + 1`` mixes
it), ``W_t`` with the ``beta_t`` round ``t`` read or wrote
(:class:`~streamwww.state.checkpoint.CheckpointDir`, the sequential format); either engine,
with any ``K``, continues from it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from streamwww import _buffers as buffers
from streamwww._params import AUTO_MEMORY_SHARE, resolve_memory_budget
from streamwww.backends.select import get_backend
from streamwww.engine.config import ModelResult, SolverConfig
from streamwww.engine.decision import decide
from streamwww.engine.epoch import train_group
from streamwww.engine.order import EpochPlan
from streamwww.engine.shrink import near_args, new_near, round_shrinks
from streamwww.solvers import SHARK
from streamwww.state.betas import DiskBetas, split_rows
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


# Per worker process, from a run's first task to release_stores(): the scope in which the
# tasks' shard-sized arrays are recycled (streamwww._buffers).  Every round reads the same
# groups and beta again; without it each would be fresh memory, and Dask's workers set
# MALLOC_TRIM_THRESHOLD_, which fixes glibc's mmap threshold: each such array would be new
# zeroed pages, most of a round's overhead (docs/DISTRIBUTED.md, "Pipelined rounds").
_RECYCLING: contextlib.ExitStack | None = None
_RECYCLING_LOCK = threading.Lock()


def _open(spec: PartitionSpec):
    global _RECYCLING
    with _RECYCLING_LOCK:
        if _RECYCLING is None:
            _RECYCLING = contextlib.ExitStack()
            _RECYCLING.enter_context(buffers.recycling())
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
    global _RECYCLING
    for store in _STORES.values():
        store.keep_decoded(0)
    _STORES.clear()
    with _RECYCLING_LOCK:
        if _RECYCLING is not None:
            _RECYCLING.close()  # (the pool is emptied with the last scope)
            _RECYCLING = None


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
    local step on a block (the certificate parts of ``W_t``, then the local passes).
    ``sweeps=False``: the sweep of ``W_t`` is another task's (:func:`cert_task`,
    pipelined rounds), so no copy of ``W_t`` is made for it."""

    def __init__(self, cfg: SolverConfig, device: str, n_partitions: int, W: np.ndarray, train: bool,
                 sweeps: bool = True):
        self.cfg, self.train, self.sweeps = cfg, train, sweeps
        # (the worker's own cores: numba's pool there)
        self.backend = get_backend(device, n_models=len(cfg.Cs), n_classes=int(W.shape[2]), block_rows=cfg.block_rows)
        self.alone = int(n_partitions) == 1  # the working copy is W_{t+1} itself
        M = len(cfg.Cs)
        self.every = np.arange(M, dtype=np.int64)
        self.splits = None if cfg.splits is None else np.asarray(cfg.splits, dtype=np.int64)
        self.Cs = np.asarray(cfg.Cs, dtype=np.float64)
        self.W = W
        self.W0 = self.backend.put_W(W) if sweeps else None  # W_t, for the certificate's sweep
        self.Wl = self.backend.put_W(W) if train else None  # the working copy W_t + Delta W_k
        self.hinge = np.zeros(M)
        self.beta_sum = np.zeros(M)
        self.local_sum = np.zeros(M)  # sum of the local passes' beta', for the line search

    def step(self, block, beta: np.ndarray, t: int, first_shard: int, active: np.ndarray,
             sets: np.ndarray | None = None) -> np.ndarray | None:
        """Certificate sums of ``block`` at ``W_t`` and ``beta``; with ``train``, the local
        passes (row orders of ``(seed, t, first_shard, pass)``) and the block's new ``beta``.
        ``beta`` is the task's own array: it is trained in place.  Without ``sweeps`` only
        ``beta``'s sum is taken here, and the passes shrink with ``sets`` (those of
        ``W_{t-1}``; None: every coordinate)."""
        backend, cfg = self.backend, self.cfg
        dblock = backend.put_block(block)
        if not self.sweeps:
            near = sets if self.train and sets is not None and round_shrinks(cfg, backend, t) else None
        else:
            # shrinking: the certificate's sweep at W_t also flags the coordinates the passes update
            near = new_near(len(cfg.Cs), block.n_rows, self.W.shape[2]) if \
                self.train and round_shrinks(cfg, backend, t) else None
            self.sweep(dblock, near)
        self.beta_sum += beta.sum(axis=(1, 2))
        if not self.train:
            return None
        dbeta = backend.put_beta(beta)
        train_group(backend, cfg, self.Wl, dblock, dbeta, active, t, first_shard, self.Cs, self.splits, near=near)
        new = backend.get_beta(dbeta)
        self.local_sum += new.sum(axis=(1, 2))
        return new

    def sweep(self, dblock, near=None) -> None:
        """Add the hinge sums of the (device) block ``dblock`` at ``W_t``; fill ``near``
        with its near-flags at ``W_t`` when given."""
        self.hinge += self.backend.hinge_sums(self.W0, dblock, self.cfg.bias, self.every, self.splits,
                                              loss=self.cfg.loss_id, **near_args(near, self.cfg))

    def result(self) -> dict:
        out = {"hinge": self.hinge, "beta_sum": self.beta_sum, "local_sum": self.local_sum,
               "device": self.backend.name}
        if self.train:
            Wh = self.backend.to_host(self.Wl)
            out["delta"] = Wh if self.alone else Wh - self.W
        return out

    def close(self) -> None:
        self.backend.close()


def mix(base: np.ndarray, local: np.ndarray, gamma) -> np.ndarray:
    """``beta_t + gamma (beta' - beta_t)`` per model (axis 0); a model whose ``gamma`` is 1
    takes ``beta'`` as it is (``b + (l - b)`` need not be ``l`` in floating point)."""
    out = np.array(local, dtype=np.float64, copy=True)
    for m, g in enumerate(np.asarray(gamma, dtype=np.float64)):
        if g != 1.0:
            out[m] = base[m] + g * (local[m] - base[m])
    return out


def round_task(spec: PartitionSpec, W: np.ndarray, t: int, active: np.ndarray, train: bool = True,
               versions: tuple[int, ...] | None = None, pending: tuple[int, ...] | None = None,
               gamma=None, swept: bool = False, sets: dict | None = None) -> dict:
    """Round ``t`` on one partition of a store: the certificate parts of ``W_t`` and
    (``train``) ``Delta W_k``.

    ``versions`` are the ``beta`` versions of ``spec.shards`` (default: all ``t``); with
    ``pending`` (the round before scaled its step by ``gamma``, per model), ``beta_t`` is
    :func:`mix` of versions ``versions`` and ``pending``, written first as version
    ``max(v, p) + 1``.  The local result goes to the version after ``beta_t``'s.
    Returns a dict: ``hinge`` and ``beta_sum`` (per model, of this partition's rows at
    ``W_t`` and ``beta_t``), ``made`` (``{shard: (version, per-model sum)}`` of ``beta_t``:
    the version read, or the mixed one written) and, when training, ``delta`` (``Delta W_k``, or
    ``W_{t+1}`` itself when ``K = 1``) and ``sums`` (``{shard: per-model sum}`` of the
    local versions).  Pipelined (``swept``): the hinge sums are :func:`cert_task`'s, and
    ``sets`` (the result of the partition's :func:`cert_task` of round ``t - 1``; None: no
    sets) gives the shrinking sets of ``W_{t-1}``.
    """
    cfg = spec.cfg
    store = _open(spec)
    cw = None if spec.class_weights is None else np.asarray(spec.class_weights)
    data = StoreData(store, cw, spec.folds)
    betas = DiskBetas(spec.beta_root, len(cfg.Cs), data.shard_rows, data.n_classes)
    shards = spec.shards
    version = dict(zip(shards, versions if versions is not None else [t] * len(shards)))
    mixed = dict(zip(shards, pending)) if pending is not None else None
    new_sums, made = {}, {}
    local = _Local(cfg, spec.device, spec.n_partitions, W, train, sweeps=not swept)
    try:
        for ids in EpochPlan(cfg, len(shards)).groups(t):
            group = tuple(shards[i] for i in ids)
            rows = [int(data.shard_rows[s]) for s in group]
            beta = betas.read_group(group, [version[s] for s in group])
            if mixed is not None:
                beta = mix(beta, betas.read_group(group, [mixed[s] for s in group]), gamma)
            for s, b in zip(group, split_rows(beta, rows)):
                if mixed is not None:
                    v = max(version[s], mixed[s]) + 1
                    betas.write_version(s, v, b)
                    made[s] = (v, b.sum(axis=(1, 2)))
                else:
                    made[s] = (version[s], b.sum(axis=(1, 2)))
            block = data.block_of(group, cfg.bias)
            near = None
            if swept and sets is not None and sets.get("near"):
                near = np.concatenate([sets["near"][s] for s in group], axis=1)
            new = local.step(block, beta, t, group[0], active, sets=near)
            if new is None:
                continue
            for s, b in zip(group, split_rows(new, rows)):
                betas.write_version(s, made[s][0] + 1, b)
                new_sums[s] = b.sum(axis=(1, 2))
        return {**local.result(), "sums": new_sums, "made": made}
    finally:
        local.close()


def cert_task(spec: PartitionSpec, W: np.ndarray, t: int, sets: bool) -> dict:
    """The sweep of round ``t`` on one partition, apart from its training (pipelined
    rounds, :func:`run_rounds`): the hinge sums of its rows at ``W_t`` (per model, its
    shards added in order, each swept where the worker keeps it: no copy) and, with
    ``sets`` and where the backend shrinks, each shard's near-flags at ``W_t`` (``near``:
    ``{shard: (n_models, rows, k - 1) uint8}``), the sets round ``t + 1`` trains with.
    Needs no ``beta``: it runs beside round ``t``'s training, on another worker."""
    cfg = spec.cfg
    store = _open(spec)
    cw = None if spec.class_weights is None else np.asarray(spec.class_weights)
    data = StoreData(store, cw, spec.folds)
    shards = spec.shards
    local = _Local(cfg, spec.device, spec.n_partitions, W, train=False)
    flags = sets and round_shrinks(cfg, local.backend, t + 1)
    near_out = {}
    try:
        for s in shards:  # shard by shard: a kept shard is swept where it is kept, with no copy
            block = data.block_of((s,), cfg.bias)
            near = new_near(len(cfg.Cs), block.n_rows, W.shape[2]) if flags else None
            local.sweep(local.backend.put_block(block), near)
            if near is not None:
                near_out[s] = near
        return {"hinge": local.hinge, "near": near_out}
    finally:
        local.close()


def _hinge_of(cert: dict) -> np.ndarray:
    """A :func:`cert_task` result's hinge sums (a task of its own: the driver gathers
    these, and the near-flags stay on the workers)."""
    return cert["hinge"]


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
    """The partitions of a store: one :func:`round_task` per spec; ``beta`` versions on shared storage.

    Per shard, ``versions`` names ``beta_t``, or, while ``pending`` is set (the last round's
    step was scaled by ``gamma``), the ``beta_{t-1}`` that round read, and ``pending`` its
    local result: ``beta_t`` is their :func:`mix`, which the next round's task writes."""

    device = "cpu"  # the tasks' backend, once a round has run

    def __init__(self, specs: list[PartitionSpec], versions: dict[int, int]):
        self.specs, self.versions = specs, dict(versions)
        self.pending: dict[int, int] | None = None
        self.gamma = None
        self.pipelined = bool(specs) and pipelines(specs[0].cfg)

    def submit(self, client, Wf, t, active, train, prefix, sets=None):
        """Round ``t``'s tasks; pipelined (``sets``: the futures of the round before's
        :func:`cert_task`, or ``None`` per partition), training only."""
        swept = sets is not None
        return [client.submit(round_task, spec, Wf, t, active, train, tuple(self.versions[s] for s in spec.shards),
                              None if self.pending is None else tuple(self.pending[s] for s in spec.shards),
                              self.gamma, swept, sets[k] if swept else None,
                              key=f"{prefix}-{t}-{k}", pure=False, retries=3)
                for k, spec in enumerate(self.specs)]

    def submit_certs(self, client, Wf, t, sets: bool, prefix):
        """The sweeps of ``W_t`` (:func:`cert_task`), one per partition."""
        return [client.submit(cert_task, spec, Wf, t, sets, key=f"{prefix}-cert-{t}-{k}", pure=False, retries=3)
                for k, spec in enumerate(self.specs)]

    def read(self, outs) -> tuple[dict[int, int], dict]:
        """The versions (and their per-model sums, where the round wrote them) that hold
        ``beta_t`` of the round that gave ``outs``."""
        made = {s: vs for o in outs for s, vs in o["made"].items()}
        return {s: made[s][0] for s in self.versions}, {s: made[s][1] for s in self.versions}

    def advance(self, outs, gamma) -> list[tuple[int, int]]:
        """A training round is complete and its steps are ``gamma``: the versions that hold
        ``beta_{t+1}`` become current.  Returns the versions no longer needed."""
        before = {(s, v) for s, v in self.versions.items()} | set((self.pending or {}).items())
        self.versions = self.read(outs)[0]
        local = {s: v + 1 for s, v in self.versions.items()}
        if np.all(np.asarray(gamma) == 1.0):
            self.versions, self.pending, self.gamma = local, None, None
        else:
            self.pending, self.gamma = local, np.asarray(gamma, dtype=np.float64)
        now = set(self.versions.items()) | set((self.pending or {}).items())
        return sorted(before - now)

    def settle(self, outs) -> None:
        """The round that gave ``outs`` wrote the mixed ``beta_t``: those versions are current."""
        self.versions, self.pending, self.gamma = self.read(outs)[0], None, None

    def sums(self, outs) -> dict:
        return {s: v for o in outs for s, v in o["sums"].items()}


class ArrayParts:
    """The partitions of in-memory arrays: scattered blocks; ``beta`` kept by the driver
    and sent with each task (a task is pure: it returns its local ``beta'``)."""

    device = "cpu"  # the tasks' backend, once a round has run
    pipelined = False  # (arrays: every round's task sweeps its rows itself)

    def __init__(self, specs: list[ArraySpec], blocks: list, betas: list[np.ndarray]):
        self.specs, self.blocks, self.betas = specs, blocks, betas
        self.pending = None

    def submit(self, client, Wf, t, active, train, prefix):
        return [client.submit(array_round_task, spec, block, beta, Wf, t, active, train, key=f"{prefix}-{t}-{k}",
                              pure=False, retries=3)
                for k, (spec, block, beta) in enumerate(zip(self.specs, self.blocks, self.betas))]

    def advance(self, outs, gamma) -> list:
        self.betas = [mix(b, o["beta"], gamma) for b, o in zip(self.betas, outs)]
        return []


def pipelines(cfg: SolverConfig) -> bool:
    """Whether a cluster run of a store pipelines its rounds (:func:`run_rounds`): with
    shrinking (an exact step) on the ``"auto"`` objective schedule, where the shrinking sets may
    come from an earlier ``W`` than the round's (as in one process, where they hold
    across the epochs without objectives)."""
    return bool(cfg.shrinking) and cfg.solver_id != SHARK and cfg.eval_every == "auto"


@dataclass
class RoundsStart:
    """Where a run of rounds starts: round ``t`` from ``W`` (``W_t``) and the models' results
    so far; ``W_sets``: the ``W`` whose shrinking sets round ``t`` trains with when the
    rounds are pipelined (a checkpoint's; None: ``W`` itself)."""

    t: int
    W: np.ndarray
    results: list[ModelResult]
    wall: float = 0.0
    W_sets: np.ndarray | None = None


def run_rounds(client, parts, cfg: SolverConfig, start: RoundsStart, n_shards: int, n_rows: int,
               callback=None, progress=None, superseded=None, checkpoint=None) -> list[ModelResult]:
    """Train by CoCoA rounds (module docstring) on ``client`` (a ``distributed.Client``); one
    task per partition of ``parts`` (:class:`StoreParts` or :class:`ArrayParts`), ``n_rows``
    rows in ``n_shards`` shards in all (the callback's ``rows_per_s`` and ``progress``'s rows,
    as in one process).

    ``superseded(keys)`` is called once a round is complete with the store versions
    ``(shard, version)`` no task reads any more; ``checkpoint(t, W, versions, sums, wall,
    W_sets)`` after each training round with ``W_t`` (finished models' rows: their certified
    ``W``) and the versions that hold its ``beta`` (module docstring: ``t`` is the round's
    own when its step was scaled, the next one otherwise), and, pipelined, the ``W`` whose
    shrinking sets round ``t`` trains with (else None).  The history and stopping rule are
    the sequential driver's; ``time`` in the history is the rounds' wall time.

    **Pipelined rounds** (:attr:`StoreParts.pipelined`, :func:`pipelines`): a round's
    sweep of ``W_t`` (the certificate's hinge sums, and the shrinking sets) is a task of
    its own (:func:`cert_task`) that runs beside the round's training on another worker,
    and the training of round ``t`` shrinks with the sets of ``W_{t-1}``, which the sweep
    of the round before made while that round trained (round 1, the first that shrinks,
    sweeps ``W_1`` itself: the sets of ``W_0`` leave nothing out).  With ``K`` partitions
    on ``2K`` workers a round then takes about the longer of the two instead of their sum.  The
    sets stay on the workers (a lost one is swept again by Dask from its ``W``); a
    checkpoint holds the ``W`` they come from (``W_sets``), and a resumed run sweeps it
    again before its first round, so it continues bitwise.
    """
    results, W, t = start.results, start.W, start.t
    active = np.array([i for i, r in enumerate(results) if r.status == "running"], dtype=np.int64)
    t0 = time.perf_counter() - start.wall
    prefix = f"streamwww-round-{id(parts):x}-{time.time_ns():x}"

    committed = [None]  # the round of the last commit
    pipelined = bool(getattr(parts, "pipelined", False))
    # pipelined: the W whose shrinking sets round t trains with (W_{t-1}; a resumed run's
    # checkpoint names it), and the futures of its sweeps, whose near-flags stay on the workers
    W_sets, certs, certs_scattered = None, None, False
    if pipelined and t > 1 and active.size and t < cfg.max_iter:
        W_sets = start.W if start.W_sets is None else start.W_sets
        certs = parts.submit_certs(client, W_sets, t - 1, True, prefix + "-resume")

    def commit(t, W, versions, sums, W_sets=None):
        if committed[0] == t:  # (W_t, beta_t) is the checkpoint already
            return
        committed[0] = t
        done = [i for i, r in enumerate(results) if r.W is not None]
        Wc = W.copy() if done else W
        for i in done:
            Wc[i] = results[i].W
        checkpoint(t, Wc, versions, sums, time.perf_counter() - t0, W_sets if pipelined else None)

    def run_round(Wf, t, train, prefix):
        """Round ``t``'s task results (pipelined: with the hinge sums of its sweeps, and
        those sweeps' futures, which round ``t + 1`` trains with)."""
        if not (pipelined and train):
            return client.gather(parts.submit(client, Wf, t, active, train, prefix)), None
        if t == 1:  # the first round that shrinks sweeps W_1 itself (W_0's sets leave nothing out) ...
            trained = parts.submit(client, Wf, t, active, train, prefix)
            new = parts.submit_certs(client, Wf, t, t + 1 < cfg.max_iter, prefix)  # ... beside round 2's sets
            return client.gather(trained), new
        # (training first: Dask then places it where its sets are, and the sweep on a free worker)
        trained = parts.submit(client, Wf, t, active, train, prefix,
                               sets=certs if certs is not None else [None] * len(parts.specs))
        # (the sweep of W_0 makes no sets: round 1 makes its own)
        new = parts.submit_certs(client, Wf, t, t + 1 < cfg.max_iter and t > 0, prefix)
        hinges = [client.submit(_hinge_of, c, key=f"{prefix}-hinge-{t}-{k}", pure=False) for k, c in enumerate(new)]
        got = client.gather(trained + hinges)  # (one round trip)
        outs = got[:len(trained)]
        for o, h in zip(outs, got[len(trained):]):
            o["hinge"] = h
        return outs, new

    rate = 0.0  # rows per second of the last round that trained (the callback's rows_per_s)
    while active.size:
        train = t < cfg.max_iter
        began = time.perf_counter()
        Wf = _round_W(client, W)
        try:
            outs, new_certs = run_round(Wf, t, train, prefix)
        except Exception as exc:  # noqa: BLE001 - a scattered W lost with its worker, or a task's own failure
            if Wf is W and not certs_scattered:
                raise
            logger.warning("round %d failed (%s: %s); running it again with W inside its tasks",
                           t, type(exc).__name__, exc)
            if certs is not None:  # (their lineage may hold the last round's scattered W)
                certs = parts.submit_certs(client, W_sets, t - 1, True, prefix + "-again")
            outs, new_certs = run_round(W, t, train, prefix + "-again")
        certs_scattered = Wf is not W
        del Wf
        parts.device = outs[0]["device"]  # where the tasks ran (Fit.device)
        if train:
            rate = n_rows / max(time.perf_counter() - began, 1e-9)
        if (t > 0 and cfg.evaluates_round(t) or not train) and not _certified(results, active, t):
            active = _certify(W, outs, cfg, results, active, t, time.perf_counter() - t0, rate, callback)
        if progress is not None:
            progress(t + 1, n_shards, n_shards, n_rows if train else 0)
        if not train or active.size == 0:  # the last round's passes are not needed: W_t is the model
            if getattr(parts, "pending", None) is not None:  # its tasks wrote the mixed beta_t: name it
                parts.settle(outs)
                if checkpoint is not None:
                    commit(t, W, parts.versions, parts.read(outs)[1], W_sets)
            break
        if len(outs) == 1:  # K = 1: the sequential epoch, its working copy W_{t+1} itself
            gamma, W_next = np.ones(W.shape[0]), outs[0]["delta"]
        else:
            delta = _ksum([o["delta"] for o in outs])
            gamma = line_search(W, delta, _ksum([o["beta_sum"] for o in outs]),
                                _ksum([o["local_sum"] for o in outs]), active)
            W_next = W + delta if np.all(gamma == 1.0) else W + gamma[:, None, None] * delta
        scaled = not np.all(gamma == 1.0)
        logger.debug("round %d: steps %s", t, np.array2string(gamma, precision=4))
        if checkpoint is not None and scaled:  # beta_{t+1} is not written yet: W_t and beta_t
            commit(t, W, *parts.read(outs), W_sets)
        obsolete = parts.advance(outs, gamma)
        if superseded is not None:
            superseded(obsolete)
        W_sets, certs = W, new_certs  # round t + 1 trains with the sets of W_t
        W = W_next
        t += 1
        for i in active:
            results[i].n_iter = t
        if checkpoint is not None and not scaled:
            commit(t, W, parts.versions, parts.sums(outs), W_sets)
    for i, r in enumerate(results):
        if r.W is None:
            r.W = W[i].copy()
        if r.status == "running":
            r.status = "max_iter"
    return results


def line_search(W: np.ndarray, delta: np.ndarray, beta_sum: np.ndarray, local_sum: np.ndarray,
                active: np.ndarray) -> np.ndarray:
    """Per model, the step ``gamma`` in ``[0, 1]`` that maximizes the dual along the round's
    direction: ``D(gamma) - D_t = gamma a - gamma^2 b / 2`` with
    ``a = sum(beta') - sum(beta_t) - <W_t, Delta W>`` and ``b = ||Delta W||^2``, so
    ``gamma = clip(a / b, 0, 1)`` (1 for a model that did not move or does not train).
    Sums by NumPy's pairwise reduction, never BLAS: the same bits on every machine."""
    gamma = np.ones(W.shape[0])
    for m in active:
        b = float((delta[m] * delta[m]).sum())
        if b > 0.0:
            a = float(local_sum[m] - beta_sum[m]) - float((W[m] * delta[m]).sum())
            gamma[m] = min(1.0, max(0.0, a / b))
    return gamma


def _certified(results, active, t: int) -> bool:
    """Is ``W_t`` certified already (a checkpoint taken after round ``t`` that scaled its step)?"""
    return all(results[i].history and results[i].history[-1]["epoch"] >= t for i in active)


# W up to this size travels inside each round's tasks; a larger one is scattered.
EMBED_BYTES = 16 << 20


def _round_W(client, W):
    """``W`` as a round's tasks get it.  Up to :data:`EMBED_BYTES` inside each task: the
    scheduler then holds it with the task and can run the task again on any worker,
    whatever worker dies (a broadcast scatter can hang for good when a worker dies
    during it: dask/distributed#5704).  A larger ``W`` is scattered to one worker, which
    the others fetch it from; if that worker dies, the round runs again with ``W``
    inside its tasks (:func:`run_rounds`)."""
    if W.nbytes <= EMBED_BYTES:
        return W
    try:
        return client.scatter(W, hash=False)
    except (OSError, TimeoutError) as exc:  # distributed's CommClosedError is an OSError
        logger.warning("scattering W failed (%s: %s); this round's tasks carry W themselves",
                       type(exc).__name__, exc)
        return W


def _ksum(deltas):
    total = deltas[0].copy()
    for d in deltas[1:]:
        total += d
    return total


def _certify(W, outs, cfg, results, active, t, wall, rows_per_s, callback) -> np.ndarray:
    """:func:`~streamwww.engine.decision.decide` for ``W_t`` (round ``t``) from the tasks'
    sums; a model that stops keeps ``W_t``. The models still active."""
    decision = decide(cfg, results, active, wsq=np.einsum("mdk,mdk->m", W, W)[active],
                      hinge=_ksum([o["hinge"] for o in outs])[active],
                      beta_sum=_ksum([o["beta_sum"] for o in outs])[active], epoch=t, time=wall, wall=wall,
                      rows_per_s=rows_per_s, callback=callback, W=W,
                      n_features=W.shape[1] - int(cfg.fit_intercept), to_host=np.array,  # (np.array copies)
                      unit="round")
    for i in active:
        if results[i].status != "running":  # converged now, or stopped by the callback
            results[i].W = W[i].copy()
    return decision.running(active)
