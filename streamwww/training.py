"""The training driver: epochs x shards x inner passes, objectives, stopping.

This module reads like Algorithm 1 of Wang & Scott (ICML 2021) with the data
split into shards; all array arithmetic lives in the backend kernels and in
:mod:`streamwww.objective`.  Several models (one per ``C``) share every pass
over the data; each is updated, evaluated and stopped exactly as it would be
alone, so a model trained in a group equals its own single-``C`` run.

Randomness: the shard order of epoch ``e`` and the row order of pass ``p`` over
shard ``s`` come from ``SeedSequence(seed, spawn_key=...)`` of ``(e)`` and
``(e, s, p)``; they depend on nothing else, so a resumed run reproduces them
without saving generator state.
"""

from __future__ import annotations

import logging
import os
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from streamwww import objective
from streamwww.backends import _kernels
from streamwww.backends.base import Backend, make_block
from streamwww.data import split_rows
from streamwww.solvers.shark import SHARK_EPS

logger = logging.getLogger(__name__)

__all__ = ["SolverConfig", "ModelResult", "Cursor", "run_bcd", "shard_order", "row_order", "train", "resume"]

_SOLVERS = {"walrus": _kernels.WALRUS, "shark": _kernels.SHARK}


@dataclass(frozen=True)
class SolverConfig:
    """Everything that determines the optimization path (and so the model)."""

    Cs: tuple[float, ...]
    tol: float = 1e-3
    max_iter: int = 1000
    gap_decay: float | None = None
    fit_intercept: bool = True
    intercept_scaling: float = 1.0
    subproblem: str = "walrus"
    seed: int = 0
    inner_passes: int = 1
    eval_every: int = 1
    shark_eps: float = SHARK_EPS
    mix_shards: int = 1

    @property
    def bias(self) -> float:
        """Value of the appended constant feature (0.0: no intercept)."""
        return float(self.intercept_scaling) if self.fit_intercept else 0.0


@dataclass
class ModelResult:
    """Outcome of training one model (one value of ``C``)."""

    C: float
    W: np.ndarray | None = None
    n_iter: int = 0
    history: list[dict[str, float]] = field(default_factory=list)
    gap_1: float | None = None
    status: str = "running"  # 'converged', 'max_iter', 'stopped'

    @property
    def converged(self) -> bool:
        return self.status == "converged"


def _rng(seed: int, *key: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=key))


def shard_order(seed: int, epoch: int, n_shards: int) -> np.ndarray:
    """The seeded order in which epoch ``epoch`` visits the shards."""
    if n_shards == 1:  # the in-memory case; a generator costs ~20 us per epoch
        return np.zeros(1, dtype=np.int64)
    return _rng(seed, 1, epoch).permutation(n_shards)


def row_order(seed: int, epoch: int, shard: int, inner: int, n_rows: int) -> np.ndarray:
    """The seeded order of rows for inner pass ``inner`` over ``shard`` in ``epoch``."""
    return _rng(seed, 2, epoch, shard, inner).permutation(n_rows)


def shard_groups(order, mix: int) -> list[tuple[int, ...]]:
    """Consecutive groups of ``mix`` shards of an epoch's shard order: each group
    is trained as one block, its rows interleaved by :func:`row_order`."""
    order = [int(s) for s in order]
    return [tuple(order[i:i + mix]) for i in range(0, len(order), max(1, int(mix)))]


def _converged(res: ModelResult, cfg: SolverConfig, gap: float, rel_gap: float) -> bool:
    if rel_gap <= cfg.tol:
        return True
    return cfg.gap_decay is not None and res.gap_1 is not None and gap <= cfg.gap_decay * res.gap_1


@dataclass
class Cursor:
    """Where a run stands: ``pos`` shards of epoch ``epoch`` (0-based) are done."""

    epoch: int = 0
    pos: int = 0
    train_time: float = 0.0


def run_bcd(data, betas, cfg: SolverConfig, backend: Backend, *, feed=None, W0=None,
            cursor: Cursor | None = None, results: list[ModelResult] | None = None,
            checkpoint: Callable[[Any, Cursor, list[ModelResult]], None] | None = None,
            checkpoint_every: int = 0,
            callback: Callable[[dict[str, Any]], Any] | None = None,
            progress: Callable[[int, int, int, int], None] | None = None,
            estimator_name: str = "streamwww") -> list[ModelResult]:
    """Train one model per ``cfg.Cs`` by exact dual BCD over ``data``'s shards.

    Parameters
    ----------
    data : object
        Shards: ``n_shards``, ``shard_rows``, ``n_features``, ``n_classes`` and
        ``block(i, bias) -> Block``.
    betas : object
        Per-shard dual variables: ``get(i)``, ``put_group([(i, beta), ...])``, ``sums(i, models)``.
    cfg : SolverConfig
    backend : Backend
    feed : SyncFeed or DaskFeed, optional
        Delivers shards (and their ``beta``) in order; default: synchronous reads.
    W0, cursor, results : optional
        State to continue from (a resumed checkpoint); default: a fresh start.
    checkpoint : callable, optional
        ``checkpoint(W, cursor, results)`` is called every ``checkpoint_every``
        shards within an epoch and after every epoch; it must capture the state
        before returning (``W`` and ``results`` change afterwards) and may make
        it durable in the background.
    callback : callable, optional
        Called after each evaluated epoch with a dict (epoch, time, and per-model
        primal, dual, rel_gap lists, ``weights(j)``: the current ``(coef,
        intercept)`` of the j-th active model); a truthy return value stops training.
    progress : callable, optional
        ``progress(epoch, shards_done, n_shards, rows)`` after each shard (1-based epoch).

    Returns
    -------
    list of ModelResult
        One per ``C``, in order, with host weights ``W`` of shape (D, k).
    """
    from streamwww.feed import SyncFeed

    n_models = len(cfg.Cs)
    k = int(data.n_classes)
    n_weight_rows = int(data.n_features) + (1 if cfg.fit_intercept else 0)
    Cs = np.asarray(cfg.Cs, dtype=np.float64)
    bias = cfg.bias
    solver = _SOLVERS[cfg.subproblem]
    feed = feed if feed is not None else SyncFeed(data, betas, bias)
    results = results if results is not None else [ModelResult(C=float(C)) for C in cfg.Cs]
    cur = cursor if cursor is not None else Cursor()
    active = np.array([i for i, r in enumerate(results) if r.status == "running"], dtype=np.int64)
    W = backend.put_W(W0) if W0 is not None else backend.allocate_W(n_models, n_weight_rows, k)

    def evaluates(epoch: int) -> bool:  # is the objective computed after this (1-based) epoch?
        return (epoch == cfg.max_iter or epoch % cfg.eval_every == 0
                or (cfg.gap_decay is not None and epoch == 1))

    def next_groups(epoch: int) -> list[tuple[int, ...]]:  # what epoch (0-based) trains first, if it runs
        if epoch >= cfg.max_iter:
            return []
        return shard_groups(shard_order(cfg.seed, epoch, data.n_shards), cfg.mix_shards)

    eval_units = [(s,) for s in range(data.n_shards)]
    wall0 = time.perf_counter() - cur.train_time
    while cur.epoch < cfg.max_iter and active.size:
        # Checkpoints fall on group boundaries, so cur.pos starts a group.
        groups = shard_groups(shard_order(cfg.seed, cur.epoch, data.n_shards)[cur.pos:], cfg.mix_shards)
        t0 = time.perf_counter()
        rows = 0
        # What follows this epoch's stream (for prefetching): the evaluation pass or the next epoch.
        then = eval_units if evaluates(cur.epoch + 1) else next_groups(cur.epoch + 1)
        stream = feed.train_stream(groups, then, then_beta=not evaluates(cur.epoch + 1))
        nxt = _to_device(backend, next(stream, None))
        while nxt is not None:
            group, block, beta = nxt
            for p in range(cfg.inner_passes):
                rows_order = row_order(cfg.seed, cur.epoch, group[0], p, block.n_rows)
                backend.bcd_pass(W, block, beta, Cs, active, rows_order, bias, solver, cfg.shark_eps)
            n_rows = block.n_rows
            # This group is done with: drop its rows, and hand its beta over before
            # asking for the next group. The write is then queued ahead of the load
            # that the request starts, so the loader frees this beta before it
            # decodes another group (one group's beta less at the peak).
            nxt = block = None
            betas.put_group(list(zip(group, split_rows(backend.get_beta(beta), data.shard_rows[list(group)]))))
            del beta
            nxt = _to_device(backend, next(stream, None))
            rows += n_rows
            before = cur.pos
            cur.pos += len(group)
            if progress is not None:
                progress(cur.epoch + 1, cur.pos, data.n_shards, n_rows)
            if checkpoint is not None and checkpoint_every and cur.pos // checkpoint_every > before // checkpoint_every \
                    and cur.pos < data.n_shards:
                cur.train_time += time.perf_counter() - t0
                checkpoint(backend.to_host(W), cur, results)
                t0 = time.perf_counter()
        epoch_time = time.perf_counter() - t0
        cur.train_time += epoch_time
        cur.epoch += 1
        cur.pos = 0
        for i in active:
            results[i].n_iter = cur.epoch

        if evaluates(cur.epoch):
            active = _evaluate(data, betas, cfg, backend, feed, W, active, results, cur,
                               wall=time.perf_counter() - wall0, rows=rows, epoch_time=epoch_time,
                               callback=callback, then=next_groups(cur.epoch))
        if checkpoint is not None:
            checkpoint(backend.to_host(W), cur, results)

    Wh = backend.to_host(W)
    for i, res in enumerate(results):
        res.W = Wh[i]
        if res.status == "running":
            res.status = "max_iter"
            _warn_not_converged(res, cfg, estimator_name)
    return results


def _to_device(backend, item):
    if item is None:
        return None
    s, block, beta = item
    return s, backend.put_block(block), backend.put_beta(beta)


def _evaluate(data, betas, cfg, backend, feed, W, active, results, cur, *, wall, rows, epoch_time,
              callback, then=()) -> np.ndarray:
    """Primal, dual and gap of every active model (one streaming pass); stopping decisions."""
    bias = cfg.bias
    hinge = np.zeros(active.shape[0])
    beta_sum = np.zeros(active.shape[0])
    for (s,), block in feed.eval_stream(then):
        hinge += backend.hinge_sums(W, backend.put_block(block), bias, active)
        beta_sum += betas.sums(s, active)
    Cs = np.asarray(cfg.Cs, dtype=np.float64)
    wsq = backend.sq_frobenius(W)[active]
    P = objective.primal(wsq, hinge, Cs[active])
    D = objective.dual(wsq, beta_sum)
    G = objective.gap(P, D)
    R = np.atleast_1d(objective.relative_gap(P, D))
    rows_per_s = rows / epoch_time if epoch_time > 0 else float("inf")

    finished = set()
    for j, i in enumerate(active):
        res = results[i]
        if res.gap_1 is None:
            res.gap_1 = float(G[j])
        res.history.append({"epoch": cur.epoch, "time": cur.train_time, "wall_time": wall,
                            "primal": float(P[j]), "dual": float(D[j]),
                            "gap": float(G[j]), "rel_gap": float(R[j])})
        if _converged(res, cfg, float(G[j]), float(R[j])):
            res.status = "converged"
            finished.add(int(i))
        logger.info("epoch %d  C=%g  primal %.8g  dual %.8g  rel. gap %.3e  time %.3fs  %.0f rows/s",
                    cur.epoch, res.C, P[j], D[j], R[j], cur.train_time, rows_per_s)
    stop = False
    if callback is not None:
        def weights(j: int = 0):
            from .estimator import coef_intercept

            return coef_intercept(backend.to_host(W)[active[j]], data.n_features, cfg)  # to_host copies

        stop = bool(callback({"epoch": cur.epoch, "time": cur.train_time, "models": [int(i) for i in active],
                              "primal": P.tolist(), "dual": D.tolist(), "rel_gap": R.tolist(),
                              "rows_per_s": rows_per_s, "weights": weights}))
    active = np.array([i for i in active if int(i) not in finished], dtype=np.int64)
    if stop:
        for i in active:
            results[i].status = "stopped"
        active = active[:0]
    return active


def _warn_not_converged(res: ModelResult, cfg: SolverConfig, estimator_name: str) -> None:
    last = res.history[-1]
    crit = f"relative duality gap {last['rel_gap']:.3g} > tol {cfg.tol:g}"
    if cfg.gap_decay is not None:
        crit += f" and gap {last['gap']:.3g} > gap_decay {cfg.gap_decay:g} x gap_1 {res.gap_1:.3g}"
    warnings.warn(f"{estimator_name} did not converge after {res.n_iter} epochs (C={res.C:g}); "
                  f"{crit}. Increase max_iter or loosen tol.", ConvergenceWarning, stacklevel=4)


# --------------------------------------------------------------------------
# Data sources and the shared fit path (arrays, shard stores, checkpoints)
# --------------------------------------------------------------------------

class _ArraySource:
    """Validated in-memory arrays with class indices."""

    kind = "arrays"

    def __init__(self, X, y_index, classes):
        from streamwww.data import InMemoryData

        self.data = InMemoryData(X, y_index, n_classes=len(classes))
        self.classes = classes
        self.X, self.y = X, y_index

    @classmethod
    def from_labels(cls, X, y, owner: str) -> "_ArraySource":
        """Validated ``X`` and labels of any type (encoded here; >= 2 classes required)."""
        from streamwww.estimator import encode_labels

        classes, y_index = encode_labels(owner, y)
        return cls(X, y_index, classes)

    def fingerprint(self) -> str:
        import hashlib

        import scipy.sparse as sp

        h = hashlib.sha256()
        parts = (self.X.data, self.X.indices, self.X.indptr) if sp.issparse(self.X) else (self.X,)
        for a in (*parts, self.y):
            h.update(str((a.dtype.str, a.shape)).encode())
            h.update(np.ascontiguousarray(a).data)
        return "arrays:" + h.hexdigest()

    def describe(self) -> dict:
        return {"kind": self.kind, "n_rows": self.data.n_rows, "n_features": self.data.n_features}


class StoreData:
    """A shard store as training data (each ``block`` reads one shard)."""

    def __init__(self, store):
        self.store = store
        self.n_shards = int(store.n_shards)
        self.shard_rows = np.asarray(store.shard_rows, dtype=np.int64)
        self.n_features = int(store.n_features)
        self.n_classes = int(len(store.classes))

    @property
    def n_rows(self) -> int:
        return int(self.shard_rows.sum())

    def block(self, i: int, bias: float):
        return self.block_of((i,), bias)

    def block_of(self, shards, bias: float):
        """The rows of ``shards``, stacked in this order, as one prepared block."""
        X, y = self.store.read_shards([int(i) for i in shards])
        return make_block(X, y, bias)


class _StoreSource:
    kind = "store"

    def __init__(self, store):
        self.store = store
        self.data = StoreData(store)
        self.classes = np.asarray(store.classes)

    def fingerprint(self) -> str:
        return str(self.store.fingerprint)

    def describe(self) -> dict:
        return {"kind": self.kind, "path": str(Path(self.store.path).resolve()),
                "n_rows": self.data.n_rows, "n_features": self.data.n_features}


def _loader_threads(prefetch: int) -> int:
    """Dask worker threads for loads and writes: up to ``prefetch + 1``, leaving one
    core to the training thread. On 2 cores that is one thread: tasks then run one
    at a time in submission order, so a load never shares the loader's core with
    a beta write (measured: a concurrent load took 40-90 ms instead of 25-35)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 2
    return max(1, min(int(prefetch) + 1, cores - 1))


def _open_store(obj):
    """An opened store for a path or a store object; None for anything else."""
    if isinstance(obj, (str, os.PathLike)):
        from streamwww.io import open_store

        return open_store(obj)
    if hasattr(obj, "read_shards") and hasattr(obj, "n_shards"):
        return obj
    return None


def _config(est, Cs, seed, inner_passes=1, eval_every=1, mix_shards=1) -> SolverConfig:
    return SolverConfig(Cs=tuple(float(c) for c in Cs), tol=float(est.tol), max_iter=int(est.max_iter),
                        gap_decay=None if est.gap_decay is None else float(est.gap_decay),
                        fit_intercept=bool(est.fit_intercept),
                        intercept_scaling=float(est.intercept_scaling),
                        subproblem=est.subproblem, seed=int(seed),
                        inner_passes=int(inner_passes), eval_every=int(eval_every),
                        mix_shards=int(mix_shards))


def _results_to_json(results: list[ModelResult]) -> list[dict]:
    return [{"C": r.C, "n_iter": r.n_iter, "history": r.history, "gap_1": r.gap_1, "status": r.status}
            for r in results]


def _results_from_json(items) -> list[ModelResult]:
    return [ModelResult(C=float(d["C"]), n_iter=int(d["n_iter"]), history=list(d["history"]),
                        gap_1=d["gap_1"], status=str(d["status"])) for d in items]


def _fit_source(est, source, Cs=None, *, checkpoint_dir=None, checkpoint_every: int = 0,
                prefetch: int = 2, inner_passes: int = 1, eval_every: int = 1, mix_shards: int = 2,
                callback=None, progress=None, C_is_list: bool = False) -> list[dict]:
    """The one fit path: arrays or stores, with or without checkpoints."""
    from streamwww._fsutil import ScratchDir
    from streamwww._params import resolve_seed
    from streamwww.backends.base import get_backend
    from streamwww.checkpoint import CheckpointDir, DiskBetas
    from streamwww.data import InMemoryBetas
    from streamwww.estimator import _verbose_logging, fitted_attributes
    from streamwww.feed import DaskExecutor, DaskFeed, SyncFeed

    name = type(est).__name__
    Cs = (float(est.C),) if Cs is None else tuple(Cs)
    data = source.data
    backend = get_backend(est.device)
    streamed = source.kind == "store"
    ckpt = CheckpointDir(checkpoint_dir) if checkpoint_dir is not None else None
    scratch = executor = betas = None
    try:
        manifest = None
        if ckpt is not None and ckpt.has_checkpoint():
            manifest = ckpt.load_manifest()
        seed = (int(manifest["config"]["seed"]) if manifest is not None and est.random_state is None
                else resolve_seed(est.random_state))
        cfg = _config(est, Cs, seed, inner_passes, eval_every, mix_shards if streamed else 1)
        fingerprint = source.fingerprint() if (ckpt is not None) else None
        if manifest is not None:
            _check_compatible(ckpt.path, manifest, cfg, fingerprint)

        if streamed:
            executor = DaskExecutor(n_threads=_loader_threads(prefetch))
        if ckpt is not None or streamed:
            if ckpt is None:
                scratch = ScratchDir("streamwww-beta-")
            root = ckpt.path if ckpt is not None else scratch.path
            betas = DiskBetas(root, len(Cs), data.shard_rows, data.n_classes, executor=executor,
                              versions=(manifest["beta"]["versions"] if manifest else None),
                              sums=(manifest["beta"]["sums"] if manifest else None),
                              max_pending=max(1, prefetch), keep_superseded=ckpt is not None,
                              durable=ckpt is not None)
        else:
            betas = InMemoryBetas(len(Cs), data.shard_rows, data.n_classes)
        feed = DaskFeed(data, betas, cfg.bias, executor, prefetch) if executor else SyncFeed(data, betas, cfg.bias)

        cursor = Cursor()
        state = {}
        if manifest is not None:
            c = manifest["cursor"]
            cursor = Cursor(int(c["epoch"]), int(c["pos"]), float(c["train_time"]))
            results0 = _results_from_json(manifest["results"])
            for r in results0:  # a larger max_iter continues models that stopped at the old limit
                if r.status == "max_iter" and r.n_iter < cfg.max_iter:
                    r.status = "running"
            if any(r.status == "running" for r in results0):
                manifest["finished"] = False
            state = {"W0": ckpt.load_W(manifest), "results": results0}
            logger.info("resuming %s at epoch %d, shard %d of %d", ckpt.path, cursor.epoch + 1,
                        cursor.pos, data.n_shards)

        checkpoint = None
        if ckpt is not None:
            step = [int(manifest["step"]) if manifest else 0]
            header = {"config": {**asdict(cfg), "Cs": list(cfg.Cs)},
                      "estimator_params": {k: v for k, v in est.get_params().items() if k != "C"
                                           and not isinstance(v, np.random.RandomState)},
                      "run": {"prefetch": prefetch, "checkpoint_every": checkpoint_every,
                              "C_is_list": bool(C_is_list)},
                      "data": {**source.describe(), "fingerprint": fingerprint}}

            def checkpoint(W, cur, results, finished=False):
                step[0] += 1
                ckpt.commit(step[0], W, {**header, "finished": finished,
                                         "cursor": {"epoch": cur.epoch, "pos": cur.pos, "train_time": cur.train_time},
                                         "results": _results_to_json(results)}, betas, wait=finished)

        with _verbose_logging(int(est.verbose)):
            results = run_bcd(data, betas, cfg, backend, feed=feed, cursor=cursor, checkpoint=checkpoint,
                              checkpoint_every=checkpoint_every, callback=callback,
                              progress=progress, estimator_name=name, **state)
        if checkpoint is not None and not (manifest is not None and manifest.get("finished")):
            # Final statuses ('max_iter'), same W; resuming a finished run writes nothing.
            checkpoint(np.stack([r.W for r in results]), cursor, results, finished=True)
        if ckpt is not None:
            ckpt.wait()  # the last epoch's commit, when there was no final one
    finally:
        if ckpt is not None:
            ckpt.drain()  # a commit in progress still needs the beta writes and the executor
        if isinstance(betas, DiskBetas):
            betas.close()
        if executor is not None:
            executor.close()
        if ckpt is not None:
            ckpt.close()
        if scratch is not None:
            scratch.close()
    return [fitted_attributes(r, source.classes, data.n_features, cfg, seed) for r in results]


def _check_compatible(path, manifest, cfg: SolverConfig, fingerprint) -> None:
    from streamwww.errors import CheckpointError

    saved = manifest["config"]
    now = {**asdict(cfg), "Cs": list(cfg.Cs)}
    diffs = [f"{k}: checkpoint has {saved.get(k)!r}, now {now[k]!r}" for k in now
             if k != "max_iter" and saved.get(k) != now[k]]
    if diffs:
        raise CheckpointError(f"{path}: the checkpoint was made with other settings ("
                              + "; ".join(diffs) + "); use a new checkpoint directory or the same settings")
    if manifest["data"].get("fingerprint") != fingerprint:
        raise CheckpointError(f"{path}: the checkpoint belongs to other data (fingerprint "
                              f"{manifest['data'].get('fingerprint')!r}, now {fingerprint!r}); "
                              f"the data store changed since the checkpoint was written")


def _build_models(template, Cs, fitted, n_features_in, feature_names=None):
    from sklearn.base import clone

    models = []
    for c, attrs in zip(Cs, fitted):
        est = clone(template).set_params(C=c)
        est.n_features_in_ = n_features_in
        if feature_names is not None:
            est.feature_names_in_ = feature_names
        est._set_fitted(attrs)
        models.append(est)
    return models


def train(data, *, C=1.0, tol: float = 1e-3, max_iter: int = 1000, fit_intercept: bool = True,
          intercept_scaling: float = 1.0, gap_decay: float | None = None, subproblem: str = "walrus",
          random_state=None, device: str = "auto", verbose: int = 0, checkpoint_dir=None,
          checkpoint_every: int = 0, prefetch: int = 2, inner_passes: int = 1, eval_every: int = 1,
          mix_shards: int = 2, model_out=None, callback=None, progress=None):
    """Train Weston-Watkins linear SVM(s) and return fitted :class:`~streamwww.WWClassifier` (s).

    Parameters
    ----------
    data : tuple (X, y), str, Path or ShardStore
        In-memory rows (dense or sparse) and labels of any type, or a shard
        store (see :func:`streamwww.io.open_store`) that is streamed shard by
        shard.  Fitting arrays is streaming over one in-memory shard: a
        one-shard store of the same rows gives the bitwise-identical model.
    C : float or list of float, default=1.0
        Regularization.  A list trains one model per value in the same passes
        over the data; each equals the model a single-``C`` run would give.
    tol, max_iter, fit_intercept, intercept_scaling, gap_decay, subproblem, random_state, device, verbose
        As in :class:`~streamwww.WWClassifier`.
    checkpoint_dir : str or Path, optional
        Keep ``beta`` and crash-safe checkpoints here.  If it already holds a
        checkpoint of the same data and settings, training continues from it.
    checkpoint_every : int, default=0
        Also checkpoint every this many shards within an epoch (0: at epoch ends only).
    prefetch : int, default=2
        Shards (and their ``beta``) loaded ahead in the background.
    inner_passes : int, default=1
        Exact passes over each shard group while it is loaded (block minimization).
    eval_every : int, default=1
        Compute the objectives (a streaming pass) every this many epochs.
    mix_shards : int, default=2
        Shards trained together as one block, their rows interleaved in a seeded
        random order; the groups are cut anew every epoch from the shuffled
        shard order.  ``1`` trains shard by shard, which converges several times
        slower: with fixed shard membership (letter in 8 shards: not at
        0.0009 gap_1 after 300 epochs; 2 shards per group: 95; in memory: 89;
        docs/benchmarks.md, out-of-core part (e)).  Costs ``mix_shards`` shards of memory per group.  Ignored
        for in-memory data (one shard).
    model_out : str or Path, optional
        Save the model (or, with a list of ``C``, ``<stem>-C<value><suffix>`` per model).
    callback : callable, optional
        Called after each evaluated epoch with a dict (``epoch``, ``time``,
        ``models``, ``primal``, ``dual``, ``rel_gap``, ``rows_per_s``, and
        ``weights``: ``weights(j)`` returns copies of ``(coef, intercept)`` of
        the j-th model in ``models`` as they are now); a truthy return value
        stops training (status 'stopped').
    progress : callable, optional
        ``progress(epoch, shards_done, n_shards, rows)`` after each shard.

    Returns
    -------
    WWClassifier or list of WWClassifier
        A list exactly when ``C`` is a list (or tuple / array).
    """
    from sklearn.utils.validation import validate_data

    from streamwww._params import check_params
    from streamwww.estimator import WWClassifier

    Cs = check_params("train", C=C, tol=tol, max_iter=max_iter, fit_intercept=fit_intercept,
                      intercept_scaling=intercept_scaling, gap_decay=gap_decay, subproblem=subproblem,
                      random_state=random_state, device=device, verbose=verbose,
                      inner_passes=inner_passes, eval_every=eval_every, mix_shards=mix_shards,
                      allow_C_list=True)
    for pname, val, low in (("checkpoint_every", checkpoint_every, 0), ("prefetch", prefetch, 1)):
        if isinstance(val, bool) or not isinstance(val, (int, np.integer)) or val < low:
            raise ValueError(f"The {pname!r} parameter of train must be an int in [{low}, inf). Got {val!r} instead.")
    template = WWClassifier(C=Cs[0], tol=tol, max_iter=max_iter, fit_intercept=fit_intercept,
                            intercept_scaling=intercept_scaling, gap_decay=gap_decay,
                            subproblem=subproblem, random_state=random_state, device=device,
                            verbose=verbose)
    store = _open_store(data)
    feature_names = None
    if store is not None:
        source = _StoreSource(store)
        n_features_in = source.data.n_features
    elif isinstance(data, tuple) and len(data) == 2:
        X, y = validate_data(template, data[0], data[1], accept_sparse="csr",
                             dtype=[np.float64, np.float32], order="C", reset=True)
        source = _ArraySource.from_labels(X, y, "train")
        n_features_in = template.n_features_in_
        feature_names = getattr(template, "feature_names_in_", None)
    else:
        raise ValueError("The 'data' parameter of train must be an (X, y) tuple, a shard store or its "
                         f"path. Got {type(data).__name__} instead.")
    fitted = _fit_source(template, source, Cs, checkpoint_dir=checkpoint_dir,
                         checkpoint_every=checkpoint_every, prefetch=prefetch,
                         inner_passes=inner_passes, eval_every=eval_every, mix_shards=mix_shards,
                         callback=callback,
                         progress=progress, C_is_list=isinstance(C, (list, tuple, np.ndarray)))
    models = _build_models(template, Cs, fitted, n_features_in, feature_names)
    if model_out is not None:
        _save_models(models, model_out, many=len(models) > 1 or isinstance(C, (list, tuple, np.ndarray)))
    return models if isinstance(C, (list, tuple, np.ndarray)) else models[0]


def _save_models(models, model_out, many: bool) -> list[Path]:
    from streamwww.model_io import save_model

    out = Path(model_out)
    if not many:
        return [save_model(models[0], out)]
    return [save_model(m, out.with_name(f"{out.stem}-C{m.C:g}{out.suffix or '.npz'}")) for m in models]


def resume(checkpoint_dir, store=None, *, model_out=None, verbose: int = 0, callback=None,
           progress=None, max_iter: int | None = None):
    """Continue an interrupted run from its checkpoint directory.

    The run continues with its recorded settings and data; it ends with the
    model the uninterrupted run gives (bitwise on the CPU).  Resuming a
    finished run changes nothing and returns its model(s).

    Parameters
    ----------
    checkpoint_dir : str or Path
    store : str, Path or ShardStore, optional
        The data store, if it moved since the checkpoint was written (its
        fingerprint must match).
    model_out : str or Path, optional
        Save the model(s) as :func:`train` does.
    max_iter : int, optional
        A new epoch limit; models that stopped at the old limit continue.
    callback, progress : callable, optional
        As in :func:`train`.

    Returns
    -------
    WWClassifier or list of WWClassifier
        A list when the run trained several values of ``C``.
    """
    from streamwww.checkpoint import CheckpointDir
    from streamwww.errors import CheckpointError

    with CheckpointDir(checkpoint_dir, lock=False) as probe:
        manifest = probe.load_manifest()
    if manifest["data"]["kind"] != "store":
        raise CheckpointError(f"{checkpoint_dir}: this run trained on in-memory arrays; resume it by calling "
                              "train((X, y), checkpoint_dir=...) again with the same arrays and settings")
    store = _open_store(store if store is not None else manifest["data"]["path"])
    cfg = manifest["config"]
    params = {**manifest["estimator_params"], "random_state": int(cfg["seed"]), "verbose": verbose}
    if max_iter is not None:
        params["max_iter"] = max_iter
    Cs = cfg["Cs"]
    return train(store, C=Cs if manifest["run"].get("C_is_list", len(Cs) > 1) else Cs[0], **params,
                 checkpoint_dir=checkpoint_dir, checkpoint_every=manifest["run"]["checkpoint_every"],
                 prefetch=manifest["run"]["prefetch"], inner_passes=cfg["inner_passes"],
                 eval_every=cfg["eval_every"], mix_shards=cfg.get("mix_shards", 1), model_out=model_out,
                 callback=callback, progress=progress)
