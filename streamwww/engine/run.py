"""Fit one source: pick the backend, set up ``beta``, the feed and the checkpoint, run the driver.

This is the one fit path for arrays and stores, with or without checkpoints,
fresh or resumed.  It knows no estimator: it takes the estimator's parameters
as a dict, the run's options as the objects of :mod:`streamwww.engine.options`,
and returns the driver's results with the settings they came from.
"""

from __future__ import annotations

import logging
import os
import signal
from contextlib import ExitStack
from dataclasses import dataclass, replace

import numpy as np

from streamwww import _buffers as buffers
from streamwww._logging import verbose_logging
from streamwww.storage.fsutil import ScratchDir
from streamwww.storage.location import Location
from streamwww._params import (
    DEFAULTS,
    UNMIXED,
    resolve_memory_budget,
    resolve_n_jobs,
    resolve_prefetch,
    resolve_seed,
)
from streamwww.backends.base import make_block
from streamwww.backends.select import get_backend
from streamwww.state.checkpoint import CheckpointDir, check_compatible
from streamwww.engine.config import (
    OMITTED,
    Cursor,
    ModelResult,
    SolverConfig,
    results_from_json,
    results_to_json,
)
from streamwww.engine.compiling import watch
from streamwww.engine.driver import Hooks, late_allowed, run_bcd
from streamwww.engine.interrupt import CtrlC, Interrupted
from streamwww.engine.options import Call, Placement, RunOptions
from streamwww.engine.order import ROW_ORDER
from streamwww.engine.schedule import SCHEDULE
from streamwww.engine.shrink import SHRINK_RULE
from streamwww.errors import CheckpointError, StreamwwwError
from streamwww.state.betas import DiskBetas, InMemoryBetas, beta_nbytes
from streamwww.state.versions import BetaVersions
from streamwww.stream.feed import LoaderPool, PrefetchFeed, SyncFeed

logger = logging.getLogger(__name__)

__all__ = ["Fit", "fit_distributed", "fit_placed", "fit_source", "solver_config"]


@dataclass
class Fit:
    """What :func:`fit_source` returns: one result per ``C``, and the settings used."""

    results: list[ModelResult]
    cfg: SolverConfig
    seed: int
    beta: np.ndarray | None = None  # in-memory data: the final beta[n_models, n, k-1] (for warm starts)
    device: str = "cpu"  # the backend that trained ('cpu' or 'cuda')


def solver_config(params: dict, Cs, seed: int, inner_passes: int = 1, eval_every: int | str = 1,
                  mix_shards: int = UNMIXED, splits=None, manifest: dict | None = None) -> SolverConfig:
    """The :class:`SolverConfig` of estimator parameters ``params`` (``get_params()``); with the
    ``manifest`` of the checkpoint it continues, that run's row-order version (engine.order)
    and objective-schedule version (engine.schedule)."""
    gap_decay = params["gap_decay"]
    return SolverConfig(Cs=tuple(float(c) for c in Cs), tol=float(params["tol"]),
                        max_iter=int(params["max_iter"]),
                        gap_decay=None if gap_decay is None else float(gap_decay),
                        fit_intercept=bool(params["fit_intercept"]),
                        intercept_scaling=float(params["intercept_scaling"]),
                        subproblem=params["subproblem"], seed=int(seed),
                        inner_passes=int(inner_passes),
                        eval_every=eval_every if eval_every == "auto" else int(eval_every),
                        mix_shards=int(mix_shards),
                        splits=None if splits is None else tuple(int(s) for s in splits),
                        shrinking=bool(params.get("shrinking", False)),
                        row_order=_version("row_order", ROW_ORDER, manifest),
                        schedule=_version("schedule", SCHEDULE, manifest),
                        shrink_rule=_version("shrink_rule", SHRINK_RULE, manifest),
                        block_rows=int(params.get("block_rows", 1)), loss=params.get("loss", "ww"))


def _version(key: str, new: int, manifest: dict | None) -> int:
    """A versioned rule of the run: ``new`` for a new run, a checkpoint's own otherwise (its
    config lacks the key where the rule is the version :data:`OMITTED` names)."""
    return new if manifest is None else int(manifest["config"].get(key, OMITTED[key]))


def check_manifest(path, manifest: dict, data) -> None:
    """A manifest checked against the data and the checkpoint's own contents, not trusted:
    shapes, cursor, model count, and every ``beta`` version it names (read and summed)."""
    n_models = len(manifest["config"]["Cs"])
    D = int(data.n_features) + (1 if manifest["config"]["fit_intercept"] else 0)
    where = f"{path}/manifest (step {manifest.get('step')})"
    if list(manifest["W_shape"]) != [n_models, D, int(data.n_classes)]:
        raise CheckpointError(f"{where}: W of shape {tuple(manifest['W_shape'])}, the data needs "
                              f"{(n_models, D, int(data.n_classes))}")
    cur = manifest["cursor"]
    if not (0 <= int(cur["epoch"]) and 0 <= int(cur["pos"]) <= data.n_shards) or \
            len(manifest["results"]) != n_models:
        raise CheckpointError(f"{where}: cursor {cur} or {len(manifest['results'])} results do not fit "
                              f"{data.n_shards} shards and {n_models} models")
    BetaVersions(path, n_models, data.shard_rows, int(data.n_classes) - 1).verify(
        manifest["beta"]["versions"], manifest["beta"]["sums"], where)


def _interrupted(signum: int | None, ckpt, checkpoint_dir, n_shards: int) -> Interrupted:
    """The exception an interrupted fit raises, once its last commit is complete: the signal,
    and where the work is kept (the checkpoint's latest commit, read back: what a resume
    continues from), also logged."""
    kept = None
    if ckpt is not None:
        try:
            m = ckpt.load_manifest()
            kept = {"epoch": int(m["cursor"]["epoch"]), "pos": int(m["cursor"]["pos"]),
                    "finished": bool(m.get("finished"))}
        except (StreamwwwError, OSError):  # none committed (or none readable): nothing to point at
            kept = None
    where = None if checkpoint_dir is None else getattr(checkpoint_dir, "url", None) or str(checkpoint_dir)
    exc = Interrupted(signum=signum or signal.SIGINT, checkpoint_dir=where, kept=kept, n_shards=n_shards)
    if exc.where() is not None:
        message = f"interrupted {exc.where()}: continue with streamwww.resume({where!r})"
    elif where is None:
        message = ("interrupted; nothing was kept (no checkpoint directory): streamwww.train(..., "
                   "checkpoint_dir=DIR) keeps the work of a run that is interrupted")
    else:
        message = f"interrupted before anything was kept in {where}: train again"
    logger.info("%s", message)
    exc.args = (message,)
    return exc


class _Told:
    """Around a fit (outside its :class:`CtrlC` and its stack): a ``KeyboardInterrupt``
    of any origin leaves it as the :class:`Interrupted` of :func:`_interrupted`, once the
    stack has closed (the commit in progress complete).  ``ckpt``: the fit's checkpoint
    directory, once open."""

    def __init__(self, ctrl_c: CtrlC, checkpoint_dir, n_shards: int):
        self.ctrl_c, self.checkpoint_dir, self.n_shards = ctrl_c, checkpoint_dir, n_shards
        self.ckpt = None

    def __enter__(self) -> "_Told":
        return self

    def __exit__(self, kind, exc, tb) -> bool:
        if kind is not None and issubclass(kind, KeyboardInterrupt):
            signum = getattr(getattr(self.ctrl_c, "stop", None), "signum", None)
            raise _interrupted(signum, self.ckpt, self.checkpoint_dir, self.n_shards).with_traceback(tb) from None
        return False


def loader_threads(prefetch: int, remote: bool = False) -> int:
    """Loader threads for loads and writes: up to ``prefetch + 1``, leaving one
    core to the training thread. On 2 cores that is one thread: tasks then run one
    at a time in submission order, so a load never shares the loader's core with
    a beta write (a load beside a write takes much longer; docs/TRAINING.md, "Data path
    and memory").
    A store on an object store (``remote``) gets ``prefetch + 1`` whatever the
    cores: its loads mostly wait for answers, and only loads in flight together
    hide the store's latency (docs/STORAGE.md)."""
    if remote:
        return int(prefetch) + 1
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 2
    return max(1, min(int(prefetch) + 1, cores - 1))


def fit_source(source, params: dict, Cs, options: RunOptions = RunOptions(), call: Call = Call()) -> Fit:
    """Train one model per ``Cs`` on ``source`` (:mod:`streamwww.stream.sources`) in this process.

    Parameters
    ----------
    source : ArraySource or StoreSource
        The data.
    params : dict
        The estimator's parameters (``tol``, ``max_iter``, ..., ``random_state``,
        ``device``, ``verbose``).
    Cs : sequence of float
        One model per value.
    options : RunOptions
        The run's options (:mod:`streamwww.engine.options`); in-memory data is one shard
        and trains unmixed.
    call : Call
        The hooks, what the checkpoint's ``run`` section records (``run_info``,
        ``C_is_list``), the cross-validation ``splits`` (one per ``Cs`` entry; -1: all
        rows) and a ``warm`` start (in-memory data without a checkpoint directory).

    Returns
    -------
    Fit
    """
    data = source.data
    checkpoint_dir, checkpoint_every = options.checkpoint_dir, options.checkpoint_every
    warm = call.warm
    watch()  # a first run's compilations: said once, and left out of the solver time (engine.compiling)
    budget = resolve_memory_budget(options.memory_budget)
    prefetch = resolve_prefetch(options.prefetch, getattr(source, "remote", False))
    # Ctrl-C and SIGTERM are watched from the start: a library callback running at that
    # instant may swallow the KeyboardInterrupt; while the driver trains with a checkpoint
    # directory the first one stops it at the next group, keeping the work (engine.interrupt).
    # The stack closes in reverse: the commit in progress first (it needs the beta writes and
    # the executor), the backend last; then an interrupted fit says where its work is.
    stop = CtrlC()
    with _Told(stop, checkpoint_dir, data.n_shards) as told, stop as interrupted, ExitStack() as stack:
        stack.enter_context(buffers.recycling())  # shard-sized arrays recycled during the run
        threads = resolve_n_jobs(params.get("n_jobs"))
        block_rows = int(params.get("block_rows", 1))
        backend = get_backend(params["device"], n_models=len(Cs), n_classes=int(data.n_classes), n_threads=threads,
                              block_rows=block_rows)
        stack.callback(backend.close)
        logger.info("%d thread(s); %s", threads,
                    "the sequential pass" if block_rows == 1 else f"the block pass of {block_rows} rows")
        # one model: the objectives of W_t may come with epoch t + 1's first pass: that pays
        # when a store is read from storage (one read per epoch, not two) and when the backend
        # overlaps the two passes (the CPU, on a second core)
        late = late_allowed(len(Cs), call.splits, checkpoint_every)
        copies = 3 if late else 2
        resident = _resident_betas(source, len(Cs), budget, copies=copies)
        kept = _keep_store(stack, source, budget - _beta_bytes(data, len(Cs)) if resident else budget)
        if source.streamed and not kept:
            data.spill_norms(True)  # the shards read every epoch: their norms computed once
            stack.callback(data.spill_norms, False)
        if kept and source.streamed and (data.n_shards == 1 or int(options.mix_shards) == UNMIXED):
            data.keep_blocks(True)  # the shards' prepared blocks are kept for the run ...
            stack.callback(data.keep_blocks, False)
            source.store.keep_decoded(0)  # ... in place of their decoded arrays (not both)
        late = late and (not kept or backend.overlap_pays(_epoch_work(source), block_rows))
        if late:
            logger.info("objectives late: W_t certified with the first pass of epoch t + 1")
        ckpt, manifest, W0 = _open_checkpoint(stack, checkpoint_dir, data)
        told.ckpt = ckpt
        seed = (int(manifest["config"]["seed"]) if manifest is not None and params["random_state"] is None
                else resolve_seed(params["random_state"]))
        cfg = solver_config(params, Cs, seed, options.inner_passes, options.eval_every,
                            options.mix_shards if source.streamed else UNMIXED, call.splits, manifest)
        fingerprint = source.fingerprint() if ckpt is not None else None
        if manifest is not None:
            check_compatible(ckpt.path, manifest, cfg.to_json(), fingerprint, OMITTED)
        betas, feed = _open_stream(stack, source, cfg, ckpt, manifest, prefetch,
                                   initial=None if warm is None else [warm[1]], resident=resident,
                                   sync_ahead=float(options.checkpoint_interval) == 0.0, copies=copies)
        cursor, start = _resume_state(ckpt, manifest, W0, cfg, data)
        if warm is not None:
            if ckpt is not None or source.streamed:
                raise ValueError("a warm start needs in-memory data without a checkpoint directory")
            start = {"W0": warm[0]}
        commit = None
        if ckpt is not None:
            stack.callback(ckpt.drain)
            run = {"prefetch": prefetch, "checkpoint_every": checkpoint_every,
                   "checkpoint_interval": float(options.checkpoint_interval), "C_is_list": bool(call.C_is_list),
                   **(call.run_info or {})}
            header = _header(cfg, params, source, fingerprint, run)
            commit = _committer(ckpt, betas, header, step=int(manifest["step"]) if manifest else 0)

        interrupted.keeps = commit is not None  # (a signal: the driver stops at the next group)
        with verbose_logging(int(params["verbose"])):
            results = run_bcd(data, betas, cfg, backend, feed=feed, cursor=cursor, late=late,
                              hooks=Hooks(checkpoint=commit, checkpoint_every=checkpoint_every,
                                          checkpoint_interval=float(options.checkpoint_interval),
                                          callback=call.callback, progress=call.progress, interrupted=interrupted),
                              **start)
        if commit is not None:
            interrupted.shielded = True  # the run's last commit is written whole
            if not (manifest is not None and manifest.get("finished")):
                # Final statuses ('max_iter'), same W; resuming a finished run writes nothing.
                commit(np.stack([r.W for r in results]), cursor, results, finished=True)
            ckpt.wait()  # the last epoch's commit, when there was no final one
        if interrupted.is_set():  # e.g. during the final commit: obeyed, the work kept
            raise Interrupted(signum=interrupted.signum)
    return Fit(results, cfg, seed, beta=betas.get(0) if isinstance(betas, InMemoryBetas) else None,
               device=backend.name)


def _epoch_work(source) -> int:
    """Multiply-adds of one gather of every row's scores: nonzeros times classes."""
    store = getattr(source, "store", None)
    if store is not None:
        nnz = int(store.nnz)
    else:
        X = source.data.X
        nnz = int(X.nnz) if hasattr(X, "nnz") else int(np.asarray(X).size)
    return nnz * int(source.data.n_classes)


def _beta_bytes(data, n_models: int) -> int:
    return beta_nbytes(n_models, data.n_rows, data.n_classes)


def _resident_betas(source, n_models: int, budget: int, copies: int = 2) -> bool:
    """Whether a store's ``beta`` stays in RAM for the run (written only by checkpoint
    commits): when ``copies`` times its size (the current versions, those a commit in
    progress writes, and with late objectives those of the epoch's start) fits the
    memory budget. It comes before the store's shards in the budget: ``beta`` is
    written every epoch, the shards only read. (Else it goes to a scratch file of as
    many copies, :class:`~streamwww.state.scratch.ShardScratch`, where there is room.)"""
    if not source.streamed:
        return False
    return copies * _beta_bytes(source.data, n_models) <= budget


_BETA_MODES = {"memory": "kept in memory",
               "scratch": "kept in a scratch file (the page cache, not the process's memory)",
               "versions": "written to disk every epoch"}


def _keep_store(stack: ExitStack, source, budget: int) -> bool:
    """Keep up to ``budget`` bytes of a store's decoded shards for the run (then as before).

    A store that fits is read from storage in the first epoch only: the later
    epochs and every objective pass copy its shards from memory, which takes
    the fixed cost of a streamed epoch (I/O, decompression, checksums, an object
    store's requests) off every epoch but the first. Returns whether all of it is kept."""
    store = getattr(source, "store", None)
    if not source.streamed or store is None or not hasattr(store, "keep_decoded"):
        return not source.streamed
    before = store.keep_budget
    store.keep_decoded(max(budget, before))
    total = sum(store.shard_nbytes(i) for i in range(store.n_shards))
    logger.info("keeping %s of %.1f MiB of decoded shards in memory (memory_budget %.0f MiB)",
                "all" if total <= store.keep_budget else "part", total / 2**20, store.keep_budget / 2**20)
    stack.callback(store.keep_decoded, before)
    return total <= store.keep_budget


def _listed(a):
    return None if a is None else [float(v) for v in a]


def _header(cfg: SolverConfig, params: dict, source, fingerprint, run: dict) -> dict:
    """The fixed part of every manifest of a run: settings, estimator parameters, run options, data."""
    return {"config": cfg.to_json(),
            "estimator_params": {**{k: v for k, v in params.items() if k not in ("C", "warm_start")
                                    and not isinstance(v, np.random.RandomState)},
                                 # resolved per class index (JSON keeps no label types)
                                 "class_weight": _listed(getattr(source, "class_weights", None))},
            "run": run, "data": {**source.describe(), "fingerprint": fingerprint}}


def _open_checkpoint(stack: ExitStack, checkpoint_dir, data):
    """The locked checkpoint directory (closed with ``stack``) and its latest intact
    ``(manifest, W)``, or ``(None, None, None)`` without a directory; ``(ckpt, None, None)`` when empty."""
    if checkpoint_dir is None:
        return None, None, None
    ckpt = CheckpointDir(checkpoint_dir)
    stack.callback(ckpt.close)
    if not ckpt.has_checkpoint():
        return ckpt, None, None
    manifest, W0 = ckpt.load(verify=lambda m: check_manifest(ckpt.path, m, data))
    return ckpt, manifest, W0


def _open_stream(stack: ExitStack, source, cfg: SolverConfig, ckpt, manifest, prefetch: int, initial=None,
                 resident: bool = False, sync_ahead: bool = True, copies: int = 2):
    """``beta`` storage and the feed: in RAM and synchronous for arrays without a
    checkpoint; on disk (the checkpoint's, or a scratch directory) with a
    prefetching feed (loader threads) for stores. ``sync_ahead``: a commit follows every
    epoch, so each version written is fsynced at once (else by the commit that names it).
    ``beta`` not ``resident`` (beyond the memory budget) goes to a scratch file of ``copies``
    slots a shard where there is room for it, else a version is written every epoch."""
    data = source.data
    executor = None
    if source.streamed:
        executor = LoaderPool(n_threads=loader_threads(prefetch, getattr(source, "remote", False)))
        stack.callback(executor.close)
    if ckpt is None and not source.streamed:
        betas = InMemoryBetas(len(cfg.Cs), data.shard_rows, data.n_classes, initial=initial)
    else:
        if ckpt is None:
            scratch = ScratchDir("streamwww-beta-")
            stack.callback(scratch.close)
        betas = DiskBetas(ckpt.path if ckpt is not None else scratch.path, len(cfg.Cs), data.shard_rows,
                          data.n_classes, executor=executor,
                          versions=(manifest["beta"]["versions"] if manifest else None),
                          sums=(manifest["beta"]["sums"] if manifest else None),
                          max_pending=max(1, prefetch), keep_superseded=ckpt is not None,
                          durable=ckpt is not None and sync_ahead, drop_uncommitted=ckpt is not None,
                          previous_versions=ckpt.previous_versions if ckpt is not None else None,
                          resident=resident,
                          scratch_copies=copies if source.streamed and not resident else 0)
        stack.callback(betas.close)
        if source.streamed:
            logger.info("beta (%.1f MiB) %s%s", _beta_bytes(data, len(cfg.Cs)) / 2**20, _BETA_MODES[betas.mode],
                        "" if betas.mode == "versions" else
                        ", written at checkpoints" if ckpt is not None else " (no checkpoint directory: never written)")
    feed = PrefetchFeed(data, betas, cfg.bias, executor, prefetch) if executor else SyncFeed(data, betas, cfg.bias)
    return betas, feed


def _resume_state(ckpt, manifest, W0, cfg: SolverConfig, data) -> tuple[Cursor, dict]:
    """The cursor and the driver's starting state: fresh, or a checkpoint's."""
    if manifest is None:
        return Cursor(), {}
    cursor = Cursor.from_json(manifest["cursor"])
    results = results_from_json(manifest["results"])
    for r in results:  # a larger max_iter continues models that stopped at the old limit
        if r.status == "max_iter" and r.n_iter < cfg.max_iter:
            r.status = "running"
    if any(r.status == "running" for r in results):
        manifest["finished"] = False
    logger.info("resuming %s at epoch %d, shard %d of %d", ckpt.path, cursor.epoch + 1, cursor.pos, data.n_shards)
    W_sets = ckpt.load_W_sets(manifest)  # a mid-epoch commit of a shrinking run (engine.shrink)
    return cursor, {"W0": W0, "results": results, **({} if W_sets is None else {"W_sets": W_sets})}


def _committer(ckpt, betas, header: dict, step: int):
    """The driver's checkpoint hook: commit ``W``, the beta versions and the run state."""
    steps = [step]

    def commit(W, cur: Cursor, results: list[ModelResult], finished: bool = False, W_sets=None) -> None:
        steps[0] += 1
        ckpt.commit(steps[0], W, {**header, "finished": finished, "cursor": cur.to_json(),
                                  "results": results_to_json(results)}, betas, wait=finished, W_sets=W_sets)

    return commit


def fit_distributed(source, params: dict, Cs, options: RunOptions, placement: Placement,
                    call: Call = Call()) -> Fit:
    """Train one model per ``Cs`` on a store by CoCoA+ rounds on a ``distributed.Client``
    (:mod:`streamwww.engine.cocoa`).

    Parameters
    ----------
    source, params, Cs, call
        As for :func:`fit_source` (no ``warm`` start).
    options : RunOptions
        The run's options; ``checkpoint_every``, ``checkpoint_interval`` and ``prefetch``
        do not apply (a commit follows every round), ``memory_budget`` is per worker.
    placement : Placement
        ``placement.client``: the connected ``distributed.Client``.  ``placement.partitions``
        (``K``; default: a checkpoint's, else the client's worker count, halved when the
        rounds are pipelined: :func:`~streamwww.engine.cocoa.pipelines`) is a model
        setting: the same store, seed, settings and ``K`` give the bitwise-same model
        wherever the tasks run.  ``beta`` lives in ``options.checkpoint_dir`` (committed
        after every round, resumed from as :func:`fit_source` does, also a sequential
        run's checkpoint), else in a temporary directory of this machine; every worker
        must be able to read and write it.

    Returns
    -------
    Fit
    """
    from streamwww.engine.cocoa import (
        PartitionSpec,
        RoundsStart,
        StoreParts,
        partition_shards,
        pipelines,
        run_rounds,
    )

    checkpoint_dir = options.checkpoint_dir
    if not source.streamed:
        if checkpoint_dir is not None:
            raise ValueError("in-memory arrays train on a cluster without a checkpoint directory (their beta "
                             "stays with the driver); write them to a store for checkpoints")
        return _fit_arrays_distributed(source, params, Cs, options, placement, call)
    data = source.data
    client, partitions = placement.client, placement.partitions
    callback, progress = call.callback, call.progress
    # (a round is not stopped within: each is committed, and a signal stops the run at once,
    # the commit in progress drained; the event stops it after a round where the exception was swallowed)
    stop = CtrlC()
    with _Told(stop, checkpoint_dir, data.n_shards) as told, stop as interrupted, ExitStack() as stack:
        ckpt, manifest, W0 = _open_checkpoint(stack, checkpoint_dir, data)
        told.ckpt = ckpt
        seed = (int(manifest["config"]["seed"]) if manifest is not None and params["random_state"] is None
                else resolve_seed(params["random_state"]))
        cfg = solver_config(params, Cs, seed, options.inner_passes, options.eval_every, options.mix_shards,
                            call.splits, manifest)
        fingerprint = source.fingerprint() if ckpt is not None else None
        if manifest is not None:
            check_compatible(ckpt.path, manifest, cfg.to_json(), fingerprint, OMITTED)
        if partitions is None:
            recorded = manifest["run"].get("partitions") if manifest is not None else None
            # pipelined rounds (engine.cocoa.pipelines): a partition's sweep and its training
            # run side by side, so two workers per partition
            share = 2 if pipelines(cfg) else 1
            partitions = recorded or max(1, _worker_count(client, data.n_shards * share) // share)
        parts = partition_shards(data.shard_rows, int(partitions), seed)
        stack.callback(_release_worker_stores, client)
        if ckpt is not None:
            beta_dir = ckpt.path
        else:
            scratch = ScratchDir("streamwww-beta-")
            stack.callback(scratch.close)
            beta_dir = scratch.path
        betas = DiskBetas(beta_dir, len(cfg.Cs), data.shard_rows, data.n_classes,
                          versions=manifest["beta"]["versions"] if manifest else None,
                          sums=manifest["beta"]["sums"] if manifest else None,
                          previous_versions=ckpt.previous_versions if ckpt is not None else None)
        shape = (len(cfg.Cs), cfg.n_weight_rows(data.n_features), int(data.n_classes))
        cursor, state = _resume_state(ckpt, manifest, W0, cfg, data)
        start = RoundsStart(t=cursor.epoch, W=np.array(state.get("W0", np.zeros(shape)), dtype=np.float64),
                            results=state.get("results", [ModelResult(C=float(C)) for C in cfg.Cs]),
                            wall=cursor.train_time, W_sets=state.get("W_sets"))
        commit = None
        if ckpt is not None:
            superseded = None  # (the checkpoint, not the round, decides which versions stay)
            stack.callback(ckpt.drain)
            # (the one-process options, recorded at their defaults: a sequential resume takes them)
            header = _header(cfg, params, source, fingerprint,
                             {"prefetch": DEFAULTS["prefetch"], "checkpoint_every": DEFAULTS["checkpoint_every"],
                              "C_is_list": bool(call.C_is_list), "partitions": len(parts),
                              **(call.run_info or {})})
            commit = _committer(ckpt, betas, header, step=int(manifest["step"]) if manifest else 0)

            def checkpoint(t, W, versions, sums, wall, W_sets=None):
                ckpt.wait()  # the commit before must have settled its beta sums before these are adopted
                betas.adopt(versions, sums)
                commit(W, Cursor(t, 0, wall), start.results, W_sets=W_sets)
                if interrupted.is_set():  # (a signal whose exception was swallowed: the round is kept)
                    raise Interrupted(signum=interrupted.signum)
        else:
            checkpoint = None

            def superseded(keys):
                for s, v in keys:
                    betas.drop_version(s, v)

            def progress(*args, progress=progress):
                if progress is not None:
                    progress(*args)
                if interrupted.is_set():  # (a signal whose exception was swallowed)
                    raise Interrupted(signum=interrupted.signum)

        cw = getattr(source, "class_weights", None)
        specs = [PartitionSpec(store=getattr(source.store, "location", None) or str(source.store.path),
                               fingerprint=str(source.store.fingerprint), shards=p,
                               n_partitions=len(parts), cfg=cfg,
                               beta_root=beta_dir if isinstance(beta_dir, Location) else str(beta_dir),
                               class_weights=None if cw is None else tuple(float(v) for v in cw),
                               folds=data.folds, device=params["device"], memory_budget=options.memory_budget)
                 for p in parts]
        logger.info("training on %d partitions of %s shards", len(parts), [len(p) for p in parts])
        with verbose_logging(int(params["verbose"])):
            store_parts = StoreParts(specs, betas.versions)
            results = run_rounds(client, store_parts, cfg, start, data.n_shards, data.n_rows,
                                 callback=callback, progress=progress, superseded=superseded, checkpoint=checkpoint)
        if commit is not None and not (manifest is not None and manifest.get("finished")):
            last = max(r.n_iter for r in results)
            wall = max((r.history[-1]["time"] for r in results if r.history), default=cursor.train_time)
            commit(np.stack([r.W for r in results]), Cursor(last, 0, wall), results, finished=True)
            ckpt.wait()
    return Fit(results, cfg, seed, device=store_parts.device)


def fit_placed(source, params: dict, Cs, options: RunOptions, placement: Placement | None = None,
               call: Call = Call()) -> Fit:
    """:func:`fit_source` in this process (``placement`` None), or :func:`fit_distributed` on
    the cluster that ``placement`` (:meth:`Placement.of <streamwww.engine.options.Placement.of>`)
    names: a user's client, a scheduler address, or a local cluster started for the fit."""
    if placement is None:
        return fit_source(source, params, Cs, options, call)
    from streamwww.engine.cluster import connect

    with connect(placement.client, placement.workers) as client:
        return fit_distributed(source, params, Cs, options, replace(placement, client=client), call)


def _release_worker_stores(client) -> None:
    """The workers drop the stores (and the shards they keep) opened for the run: a
    user's long-lived cluster must not hold them after it."""
    from streamwww.engine.cocoa import release_stores

    try:
        client.run(release_stores)
    except Exception as exc:  # a worker that died meanwhile took its memory with it
        logger.debug("releasing the workers' stores: %s", exc)


def _worker_count(client, most: int) -> int:
    """The default ``K``: the client's workers now (at least 1, at most ``most``)."""
    return max(1, min(len(client.scheduler_info().get("workers", {})) or 1, most))


def _fit_arrays_distributed(source, params: dict, Cs, options: RunOptions, placement: Placement, call: Call) -> Fit:
    """:func:`fit_distributed` for in-memory arrays: ``K`` row partitions (a seeded
    permutation cut in ``K``; ``K = 1``: every row, the sequential model bitwise) scattered
    to the workers as blocks; ``beta`` stays with the driver and goes with each task."""
    from streamwww.engine.cocoa import (
        ArrayParts,
        ArraySpec,
        RoundsStart,
        partition_rows,
        run_rounds,
    )

    data, client = source.data, placement.client
    seed = resolve_seed(params["random_state"])
    cfg = solver_config(params, Cs, seed, options.inner_passes, options.eval_every, UNMIXED, call.splits)
    n = data.n_rows
    rows = partition_rows(n, int(placement.partitions or _worker_count(client, n)), seed)
    blocks = []
    for idx in rows:
        def pick(a, idx=idx):
            return None if a is None else a[idx]
        blocks.append(make_block(data.X[idx], data.y[idx], cfg.bias, pick(data.weights), pick(data.trains)))
    futures = client.scatter(blocks, hash=False)
    M, m = len(cfg.Cs), int(data.n_classes) - 1
    parts = ArrayParts([ArraySpec(k=k, n_partitions=len(rows), cfg=cfg, device=params["device"])
                        for k in range(len(rows))], futures, [np.zeros((M, len(idx), m)) for idx in rows])
    shape = (M, cfg.n_weight_rows(data.n_features), int(data.n_classes))
    start = RoundsStart(t=0, W=np.zeros(shape), results=[ModelResult(C=float(C)) for C in cfg.Cs])
    logger.info("training on %d partitions of %s rows", len(rows), [len(r) for r in rows])
    with verbose_logging(int(params["verbose"])):
        results = run_rounds(client, parts, cfg, start, len(rows), n, callback=call.callback, progress=call.progress)
    return Fit(results, cfg, seed, device=parts.device)
