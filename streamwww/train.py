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
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from streamwww import objective
from streamwww.backends import _kernels
from streamwww.backends.base import Backend
from streamwww.solvers.shark import SHARK_EPS

logger = logging.getLogger(__name__)

__all__ = ["SolverConfig", "ModelResult", "run_bcd", "shard_order", "row_order"]

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
    return _rng(seed, 1, epoch).permutation(n_shards)


def row_order(seed: int, epoch: int, shard: int, inner: int, n_rows: int) -> np.ndarray:
    """The seeded order of rows for inner pass ``inner`` over ``shard`` in ``epoch``."""
    return _rng(seed, 2, epoch, shard, inner).permutation(n_rows)


def _stop_reason(res: ModelResult, cfg: SolverConfig, gap: float, rel_gap: float) -> bool:
    if rel_gap <= cfg.tol:
        return True
    return cfg.gap_decay is not None and res.gap_1 is not None and gap <= cfg.gap_decay * res.gap_1


def run_bcd(data, betas, cfg: SolverConfig, backend: Backend, *,
            callback: Callable[[dict[str, Any]], Any] | None = None,
            estimator_name: str = "streamwww") -> list[ModelResult]:
    """Train one model per ``cfg.Cs`` by exact dual BCD over ``data``'s shards.

    Parameters
    ----------
    data : object
        Shards: ``n_shards``, ``shard_rows``, ``n_features``, ``n_classes`` and
        ``block(i, bias) -> Block``.
    betas : object
        Per-shard dual variables: ``get(i)``, ``put(i, beta)``, ``sums(i, models)``.
    cfg : SolverConfig
    backend : Backend
    callback : callable, optional
        Called after each evaluated epoch with a dict (epoch, time, and per-model
        primal, dual, gap, rel_gap lists); a truthy return value stops training.

    Returns
    -------
    list of ModelResult
        One per ``C``, in order, with host weights ``W`` of shape (D, k).
    """
    n_models = len(cfg.Cs)
    k = int(data.n_classes)
    n_weight_rows = int(data.n_features) + (1 if cfg.fit_intercept else 0)
    Cs = np.asarray(cfg.Cs, dtype=np.float64)
    bias = cfg.bias
    solver = _SOLVERS[cfg.subproblem]
    results = [ModelResult(C=float(C)) for C in cfg.Cs]
    active = np.arange(n_models, dtype=np.int64)

    W = backend.allocate_W(n_models, n_weight_rows, k)
    train_time = 0.0
    wall0 = time.perf_counter()
    for epoch in range(cfg.max_iter):
        t0 = time.perf_counter()
        for s in shard_order(cfg.seed, epoch, data.n_shards):
            block = backend.put_block(data.block(int(s), bias))
            beta = backend.put_beta(betas.get(int(s)))
            for p in range(cfg.inner_passes):
                order = row_order(cfg.seed, epoch, int(s), p, block.n_rows)
                backend.bcd_pass(W, block, beta, Cs, active, order, bias, solver, cfg.shark_eps)
            betas.put(int(s), backend.get_beta(beta))
        train_time += time.perf_counter() - t0
        n_done = epoch + 1
        for i in active:
            results[i].n_iter = n_done

        last = n_done == cfg.max_iter
        need_gap1 = cfg.gap_decay is not None and epoch == 0
        if not (need_gap1 or last or n_done % cfg.eval_every == 0):
            continue

        # Objectives: one streaming pass for the hinge loss; beta sums from the store.
        hinge = np.zeros(active.shape[0])
        beta_sum = np.zeros(active.shape[0])
        for s in range(data.n_shards):
            block = backend.put_block(data.block(s, bias))
            hinge += backend.hinge_sums(W, block, bias, active)
            beta_sum += betas.sums(s, active)
        wsq = backend.sq_frobenius(W)[active]
        P = objective.primal(wsq, hinge, Cs[active])
        D = objective.dual(wsq, beta_sum)
        G = objective.gap(P, D)
        R = objective.relative_gap(P, D)
        wall = time.perf_counter() - wall0

        finished = []
        for j, i in enumerate(active):
            res = results[i]
            if res.gap_1 is None:
                res.gap_1 = float(G[j])
            res.history.append({"epoch": n_done, "time": train_time, "wall_time": wall,
                                "primal": float(P[j]), "dual": float(D[j]),
                                "gap": float(G[j]), "rel_gap": float(R[j])})
            if _stop_reason(res, cfg, float(G[j]), float(R[j])):
                res.status = "converged"
                finished.append(i)
            logger.info("epoch %d  C=%g  primal %.8g  dual %.8g  rel. gap %.3e  time %.3fs",
                        n_done, res.C, P[j], D[j], R[j], train_time)

        stop = False
        if callback is not None:
            info = {"epoch": n_done, "time": train_time, "models": [int(i) for i in active],
                    "primal": P.tolist(), "dual": D.tolist(), "rel_gap": np.atleast_1d(R).tolist()}
            stop = bool(callback(info))
        if finished:
            active = np.array([i for i in active if i not in set(finished)], dtype=np.int64)
        if stop:
            for i in active:
                results[i].status = "stopped"
            active = active[:0]
        if active.size == 0:
            break

    Wh = backend.to_host(W)
    for i, res in enumerate(results):
        res.W = Wh[i]
        if res.status == "running":
            res.status = "max_iter"
            last = res.history[-1]
            crit = (f"relative duality gap {last['rel_gap']:.3g} > tol {cfg.tol:g}")
            if cfg.gap_decay is not None:
                crit += f" and gap {last['gap']:.3g} > gap_decay {cfg.gap_decay:g} x gap_1 {res.gap_1:.3g}"
            warnings.warn(f"{estimator_name} did not converge after {res.n_iter} epochs "
                          f"(C={res.C:g}); {crit}. Increase max_iter or loosen tol.",
                          ConvergenceWarning, stacklevel=3)
    return results


def fit_arrays(estimator, X, y, Cs: tuple[float, ...] | None = None) -> list[dict]:
    """Train ``estimator``'s settings on validated arrays; return fitted attributes per ``C``.

    ``Cs`` defaults to the estimator's own ``C``; with several values all
    models share each pass over the data.
    """
    from streamwww.backends.base import get_backend
    from streamwww.data import InMemoryBetas, InMemoryData
    from streamwww.estimator import _verbose_logging, encode_labels, fitted_attributes

    from streamwww._params import resolve_seed

    name = type(estimator).__name__
    if Cs is None:
        Cs = (float(estimator.C),)
    classes, y_index = encode_labels(name, y)
    seed = resolve_seed(estimator.random_state)
    cfg = SolverConfig(Cs=tuple(Cs), tol=float(estimator.tol), max_iter=int(estimator.max_iter),
                       gap_decay=None if estimator.gap_decay is None else float(estimator.gap_decay),
                       fit_intercept=bool(estimator.fit_intercept),
                       intercept_scaling=float(estimator.intercept_scaling),
                       subproblem=estimator.subproblem, seed=seed)
    backend = get_backend(estimator.device)
    data = InMemoryData(X, y_index, n_classes=len(classes))
    betas = InMemoryBetas(len(Cs), data.shard_rows, data.n_classes)
    with _verbose_logging(int(estimator.verbose)):
        results = run_bcd(data, betas, cfg, backend, estimator_name=name)
    return [fitted_attributes(r, classes, data.n_features, cfg, seed) for r in results]


def train(data, *, C=1.0, tol: float = 1e-3, max_iter: int = 1000, fit_intercept: bool = True,
          intercept_scaling: float = 1.0, gap_decay: float | None = None, subproblem: str = "walrus",
          random_state=None, device: str = "auto", verbose: int = 0):
    """Train Weston-Watkins linear SVM(s) and return fitted :class:`~streamwww.WWClassifier` (s).

    Parameters
    ----------
    data : tuple (X, y)
        Training rows (dense or sparse) and labels of any type.
    C : float or list of float, default=1.0
        Regularization.  A list trains one model per value in the same passes
        over the data; each equals the model a single-``C`` run would give.
    tol, max_iter, fit_intercept, intercept_scaling, gap_decay, subproblem, random_state, device, verbose
        As in :class:`~streamwww.WWClassifier`.

    Returns
    -------
    WWClassifier or list of WWClassifier
        A list exactly when ``C`` is a list (or tuple / array).
    """
    from sklearn.base import clone
    from sklearn.utils.validation import validate_data

    from streamwww._params import check_params
    from streamwww.estimator import WWClassifier

    Cs = check_params("train", C=C, tol=tol, max_iter=max_iter, fit_intercept=fit_intercept,
                      intercept_scaling=intercept_scaling, gap_decay=gap_decay, subproblem=subproblem,
                      random_state=random_state, device=device, verbose=verbose, allow_C_list=True)
    if not (isinstance(data, tuple) and len(data) == 2):
        raise ValueError("The 'data' parameter of train must be an (X, y) tuple. "
                         f"Got {type(data).__name__} instead.")
    X, y = data
    template = WWClassifier(C=Cs[0], tol=tol, max_iter=max_iter, fit_intercept=fit_intercept,
                            intercept_scaling=intercept_scaling, gap_decay=gap_decay,
                            subproblem=subproblem, random_state=random_state, device=device,
                            verbose=verbose)
    X, y = validate_data(template, X, y, accept_sparse="csr", dtype=[np.float64, np.float32],
                         order="C", reset=True)
    fitted = fit_arrays(template, X, y, Cs)
    models = []
    for c, attrs in zip(Cs, fitted):
        est = clone(template).set_params(C=c)
        est.n_features_in_ = template.n_features_in_
        if hasattr(template, "feature_names_in_"):
            est.feature_names_in_ = template.feature_names_in_
        est._set_fitted(attrs)
        models.append(est)
    return models if isinstance(C, (list, tuple, np.ndarray)) else models[0]
