"""Cross-validation in one pass: every fold x ``C`` model trains in the same passes over the data.

``WWClassifierCV(Cs, cv=k)`` trains ``k * len(Cs)`` models (plus, with
``refit``, one model per ``C`` on all rows) together, as :func:`streamwww.train`
trains several ``C``: one read of the data per epoch serves them all.  Model
``(s, C)`` sees the rows outside fold ``s`` with their weights and the rows of
fold ``s`` with weight 0 (box ``{0}``: skipped by the kernels, absent from its
objectives), so each is exactly the model a separate fit on its training rows
would give, certified by its own duality gap.  Each model is then scored on its
held-out rows with its own ``W`` (one more streaming pass for a store).

Folds for ``cv=k`` are row-level, stratified and seeded (:mod:`streamwww.stream.folds`),
the same for arrays and stores; for arrays ``cv`` may also be any scikit-learn
splitter or an iterable of ``(train, test)`` index arrays.
"""

from __future__ import annotations

import numbers
import time
import warnings
from contextlib import nullcontext
from dataclasses import replace

import numpy as np
from scipy.stats import rankdata
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import check_scoring
from sklearn.model_selection import check_cv
from sklearn.utils.validation import check_is_fitted, validate_data

from streamwww._params import MAX_ITER, check_params, resolve_seed
from streamwww._textdata import text_as_store
from streamwww.engine.options import Call, Placement, RunOptions, options_of
from streamwww.engine.run import fit_placed
from streamwww.estimator import WWClassifier, estimator_class, estimator_from
from streamwww.labels import classification_targets
from streamwww.model.fitted import fitted_attributes
from streamwww.stream.folds import MAX_SPLITS, shard_folds, train_bits
from streamwww.stream.sources import ArraySource, StoreSource, store_without_y

__all__ = ["WWClassifierCV", "CSClassifierCV", "cv_class", "cv_plan", "cv_results", "score_store"]


def _Cs(Cs, owner: str) -> list:
    """The grid of ``C``: an int ``n`` means ``n`` values log-spaced in [1e-4, 1e4] (checked later)."""
    if isinstance(Cs, numbers.Integral) and not isinstance(Cs, bool):
        if Cs < 1:
            raise ValueError(f"The 'Cs' parameter of {owner} must be an int >= 1 or a list of floats. Got {Cs!r}.")
        return [float(c) for c in np.logspace(-4, 4, int(Cs))]
    return list(np.atleast_1d(Cs))


def cv_plan(Cs, n_splits: int, refit: bool) -> tuple[list[float], list[int]]:
    """The models of a cross-validation run: ``(C of each, split of each)``, split-major,
    then (``refit``) one model per ``C`` on all rows (split -1)."""
    C_all = [c for _ in range(n_splits) for c in Cs] + (list(Cs) if refit else [])
    splits = [s for s in range(n_splits) for _ in Cs] + ([-1] * len(Cs) if refit else [])
    return C_all, splits


def score_store(store, fit, n_splits: int, seed: int, n_C: int) -> tuple[np.ndarray, np.ndarray]:
    """Held-out accuracy of each (split, C) model on a store: ``(scores[n_splits, n_C], seconds[n_splits])``.

    One streaming pass; the folds are recomputed per shard (:func:`shard_folds`).
    """
    d = int(store.n_features)
    coefs = [[fit.cfg.coef_intercept(fit.results[s * n_C + c].W, d) for c in range(n_C)] for s in range(n_splits)]
    correct = np.zeros((n_splits, n_C))
    total = np.zeros(n_splits)
    seconds = np.zeros(n_splits)
    for i in range(store.n_shards):
        X, y = store.read_shard(i)
        folds = shard_folds(y, i, n_splits, seed)
        for s in range(n_splits):
            t0 = time.perf_counter()
            rows = np.flatnonzero(folds == s)
            if rows.size == 0:
                continue
            Xs, ys = X[rows], y[rows]
            for c, (coef, intercept) in enumerate(coefs[s]):
                pred = np.argmax(np.asarray(Xs @ coef.T, dtype=np.float64) + intercept, axis=1)
                correct[s, c] += np.count_nonzero(pred == ys)
            total[s] += rows.size
            seconds[s] += time.perf_counter() - t0
    with np.errstate(invalid="ignore", divide="ignore"):
        return correct / total[:, None], seconds


def cv_results(Cs, scores: np.ndarray, fit_times: np.ndarray, score_times: np.ndarray) -> dict:
    """scikit-learn's ``GridSearchCV.cv_results_`` layout for one parameter, ``C``.

    ``scores[s, c]``: split ``s``'s held-out score of ``Cs[c]``; ``fit_times[s, c]`` the
    solver seconds until that model stopped (the models share the passes, so
    these overlap); ``score_times[s]`` the seconds spent scoring split ``s``.
    """
    n_splits = scores.shape[0]
    out = {"mean_fit_time": fit_times.mean(axis=0), "std_fit_time": fit_times.std(axis=0),
           "mean_score_time": np.full(len(Cs), score_times.mean() / len(Cs)),
           "std_score_time": np.full(len(Cs), score_times.std() / len(Cs)),
           "param_C": np.ma.MaskedArray(np.asarray(Cs, dtype=np.float64), mask=False),
           "params": [{"C": c} for c in Cs]}
    for s in range(n_splits):
        out[f"split{s}_test_score"] = scores[s]
    mean = scores.mean(axis=0)
    out["mean_test_score"] = mean
    out["std_test_score"] = scores.std(axis=0)
    ranked = np.where(np.isnan(mean), -np.inf, mean)
    out["rank_test_score"] = rankdata(-ranked, method="min").astype(np.int32)
    return out


def cv_not_converged(fit, tol: str = "tol") -> str | None:
    """The models of a cross-validation run that hit ``max_iter``, in one clause (a clause
    per model would be ``k * len(Cs)`` of them): how many, the ``C`` values and the largest
    relative gap against the setting called ``tol``; None when every model converged (one
    wording for the warning and the command line's flags)."""
    late = [r for r in fit.results if r.status == "max_iter"]
    if not late:
        return None
    where = sorted({float(r.C) for r in late})
    gaps = [r.history[-1]["rel_gap"] for r in late if r.history]
    worst = max(gaps) if gaps else float("nan")
    return (f"{len(late)} of {len(fit.results)} models did not converge after {fit.cfg.max_iter} epochs "
            f"(C in {where}; largest relative duality gap {worst:.3g} > {tol} {fit.cfg.tol:g})")


def warn_cv(fit, owner: str, stacklevel: int = 2) -> None:
    """One :class:`~sklearn.exceptions.ConvergenceWarning` for the models that hit ``max_iter``;
    ``stacklevel`` as for :func:`~streamwww.engine.config.warn_not_converged` (2: the line that
    called the caller, the user's)."""
    note = cv_not_converged(fit)
    if note is not None:
        warnings.warn(f"{owner}: {note}. Increase max_iter or loosen tol.", ConvergenceWarning,
                      stacklevel=stacklevel + 1)


class WWClassifierCV(WWClassifier):
    """Weston-Watkins linear SVM with ``C`` chosen by cross-validation, all folds in one pass.

    Every (fold, ``C``) model, and with ``refit`` one model per ``C`` on all the
    rows, trains in the same passes over the data: ``k * len(Cs)`` models for
    about the reading cost of one.  Each is exact (its own duality gap) and is
    scored on its held-out rows with its own weights.

    Parameters
    ----------
    Cs : int or list of float, default=10
        Values of ``C``; an int ``n`` means ``n`` values log-spaced in ``[1e-4, 1e4]``.
    cv : int, splitter or iterable, default=5
        ``k``: stratified, seeded row-level folds (also for stores).  For arrays
        also a scikit-learn splitter (``KFold(...)``, ``GroupKFold``...) or an
        iterable of ``(train, test)`` index arrays (at most 62 splits).
    scoring : str, callable or None, default=None
        A scikit-learn scorer for arrays; None is accuracy (the only choice for a store).
    refit : bool, default=True
        Keep the model of the best ``C`` trained on all rows (trained in the same
        passes) as this estimator's ``coef_``/``intercept_``.
    tol, max_iter, fit_intercept, intercept_scaling, gap_decay, subproblem, shrinking, random_state, device, verbose, class_weight, n_jobs, block_rows
        As in :class:`~streamwww.WWClassifier`; ``random_state`` also seeds the folds.

    Attributes
    ----------
    cv_results_ : dict of ndarray
        ``GridSearchCV``'s keys: ``param_C``, ``params``, ``split<i>_test_score``,
        ``mean_test_score``, ``std_test_score``, ``rank_test_score``,
        ``mean_fit_time``, ``std_fit_time``, ``mean_score_time``, ``std_score_time``
        (fit times overlap: the models share the passes).
    best_C_, C_ : float
        The ``C`` with the best mean held-out score (the smallest such ``C`` on a tie).
    best_index_ : int
    best_score_ : float
    best_estimator_ : WWClassifier
        The refitted model as a plain :class:`~streamwww.WWClassifier` (``refit=True``;
        what ``train(..., cv=k, model_out=...)`` saves).
    n_splits_ : int
    classes_, coef_, intercept_, n_iter_, history_, converged_ : as in WWClassifier
        Of the refitted model (``refit=True``).
    """

    def __init__(self, Cs=10, cv=5, scoring=None, refit=True, tol=1e-3, max_iter=MAX_ITER, fit_intercept=True,
                 intercept_scaling=1.0, gap_decay=None, subproblem="walrus", shrinking=True, random_state=None,
                 device="auto", verbose=0, class_weight=None, n_jobs=None, block_rows=1):
        self.Cs = Cs
        self.cv = cv
        self.scoring = scoring
        self.refit = refit
        self.tol = tol
        self.max_iter = max_iter
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.gap_decay = gap_decay
        self.subproblem = subproblem
        self.shrinking = shrinking
        self.random_state = random_state
        self.device = device
        self.verbose = verbose
        self.class_weight = class_weight
        self.n_jobs = n_jobs
        self.block_rows = block_rows

    def _solver_params(self, seed: int) -> dict:
        return {"C": 1.0, "tol": self.tol, "max_iter": self.max_iter, "fit_intercept": self.fit_intercept,
                "intercept_scaling": self.intercept_scaling, "gap_decay": self.gap_decay,
                "subproblem": self.subproblem, "shrinking": self.shrinking, "random_state": seed,
                "device": self.device,
                "verbose": self.verbose, "class_weight": self.class_weight, "warm_start": False,
                "n_jobs": self.n_jobs, "block_rows": self.block_rows,
                **({} if self._loss == "ww" else {"loss": self._loss})}

    def fit(self, X, y=None, sample_weight=None, groups=None, **train_options):
        """Train every (fold, ``C``) model in the same passes, score them, keep the best.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features), or str, Path, ShardStore
            Rows; a shard store; or a LIBSVM text file (with ``y=None``), converted as
            :meth:`WWClassifier.fit` converts it (into ``checkpoint_dir`` when given).
        y : array-like of shape (n_samples,), or None for a store or a file
        sample_weight : array-like of shape (n_samples,), optional
            Training weights (held-out rows are scored unweighted, as GridSearchCV does).
        groups : array-like, optional
            Group labels for a group splitter given as ``cv``.
        **train_options
            :func:`streamwww.train`'s run options (``checkpoint_dir``, ``prefetch``,
            ``mix_shards``, ``callback``, ...).

        Returns
        -------
        self : WWClassifierCV
        """
        options, placement, call = options_of(train_options, type(self).__name__)
        # a LIBSVM text file: converted as WWClassifier.fit converts it (into checkpoint_dir
        # when one is given, else a temporary store removed after the fit)
        with text_as_store(X, options.checkpoint_dir) if y is None else nullcontext(X) as X:
            fit = self._fit_cv(X, y, sample_weight, groups, options=options, placement=placement, call=call)
        warn_cv(fit, type(self).__name__)
        return self

    def _fit_cv(self, X, y=None, sample_weight=None, groups=None, *, options: RunOptions = RunOptions(),
                placement: Placement | None = None, call: Call = Call()):
        """:meth:`fit` without the convergence warning (its callers warn at the user's line), its
        options built (:mod:`streamwww.engine.options`); returns the run's
        :class:`~streamwww.engine.run.Fit`."""
        owner = type(self).__name__
        Cs = _Cs(self.Cs, owner)
        if not isinstance(self.refit, (bool, np.bool_)):
            raise ValueError(f"The 'refit' parameter of {owner} must be a bool. Got {self.refit!r} instead.")
        Cs = list(check_params(owner, C=Cs, tol=self.tol, max_iter=self.max_iter, fit_intercept=self.fit_intercept,
                     intercept_scaling=self.intercept_scaling, gap_decay=self.gap_decay,
                     subproblem=self.subproblem, random_state=self.random_state, device=self.device,
                     verbose=self.verbose, shrinking=self.shrinking, n_jobs=self.n_jobs,
                     block_rows=self.block_rows, loss=self._loss, allow_C_list=True))
        seed = resolve_seed(self.random_state)
        store = store_without_y(X, y, f"{owner}.fit")
        if store is not None:
            n_splits = self._int_cv(owner, store=True)
            if self.scoring is not None and self.scoring != "accuracy":
                raise ValueError(f"{owner}: a store is scored by accuracy only; got scoring={self.scoring!r}")
            if sample_weight is not None:
                raise ValueError(f"{owner}.fit: a store carries its own row weights; sample_weight is for arrays")
            source = StoreSource(store, self.class_weight, owner=owner, folds=(n_splits, seed))
            n_features = int(store.n_features)
        else:
            X, y = validate_data(self, X, y, accept_sparse="csr", dtype=[np.float64, np.float32],
                                 order="C", reset=True)
            base = ArraySource.from_labels(X, classification_targets(y), owner, class_weight=self.class_weight,
                                           sample_weight=sample_weight)
            tests, trains, n_splits = self._array_splits(owner, X, y, base.y, groups, seed)
            source = ArraySource(X, base.y, base.classes, weights=base.weights, trains=trains,
                                 class_weights=base.class_weights)
            n_features = X.shape[1]
        C_all, splits = cv_plan(Cs, n_splits, bool(self.refit))
        run_info = {**(call.run_info or {}), "cv": n_splits, "cv_Cs": Cs, "refit": bool(self.refit)}
        fit = fit_placed(source, self._solver_params(seed), C_all, options, placement,
                         replace(call, splits=splits, C_is_list=True, run_info=run_info))
        if store is not None:
            scores, score_times = score_store(store, fit, n_splits, seed, len(Cs))
        else:
            scores, score_times = self._score_arrays(fit, source, tests, X, y, len(Cs), n_features)
        fit_times = np.array([[fit.results[s * len(Cs) + c].history[-1]["time"] if fit.results[s * len(Cs) + c].history
                               else 0.0 for c in range(len(Cs))] for s in range(n_splits)])
        results = cv_results(Cs, scores, fit_times, score_times)
        best = int(np.argmin(results["rank_test_score"]))
        fitted = {"cv_results_": results, "best_index_": best, "best_C_": Cs[best], "C_": Cs[best],
                  "best_score_": float(results["mean_test_score"][best]), "n_splits_": n_splits,
                  "Cs_": np.asarray(Cs), "seed_": seed}
        if self.refit:
            j = n_splits * len(Cs) + best
            fitted.update(fitted_attributes(fit, j, source))
            fitted["n_features_in_"] = n_features
            best_est = estimator_from({**self._solver_params(seed), "C": Cs[best]})
            best_est._set_fitted({**fitted_attributes(fit, j, source), "n_features_in_": n_features})
            fitted["best_estimator_"] = best_est
        else:
            fitted["classes_"] = source.classes
        self._set_fitted(fitted)
        return fit

    def _int_cv(self, owner: str, store: bool) -> int:
        cv = self.cv
        if isinstance(cv, numbers.Integral) and not isinstance(cv, bool):
            if not 2 <= cv <= MAX_SPLITS:
                raise ValueError(f"The 'cv' parameter of {owner} must be an int in [2, {MAX_SPLITS}]. Got {cv!r}.")
            return int(cv)
        if store:
            raise ValueError(f"{owner}: for a store, cv must be an int (stratified seeded folds). Got {cv!r}.")
        return -1

    def _array_splits(self, owner, X, y, y_index, groups, seed):
        """``(test indices per split, train bits per row, n_splits)``."""
        n = X.shape[0]
        k = self._int_cv(owner, store=False)
        if k > 0:
            folds = shard_folds(y_index, 0, k, seed)
            return [np.flatnonzero(folds == s) for s in range(k)], train_bits(folds, k), k
        pairs = list(check_cv(self.cv, y, classifier=True).split(X, y, groups))
        if not 1 <= len(pairs) <= MAX_SPLITS:
            raise ValueError(f"{owner}: cv gave {len(pairs)} splits; 1 to {MAX_SPLITS} are supported")
        bits = np.zeros(n, dtype=np.int64)
        for s, (train, _) in enumerate(pairs):
            bits[np.asarray(train)] |= np.int64(1) << s
        return [np.asarray(test) for _, test in pairs], bits, len(pairs)

    def _score_arrays(self, fit, source, tests, X, y, n_C, n_features):
        scorer = check_scoring(WWClassifier(), scoring=self.scoring)
        scores = np.zeros((len(tests), n_C))
        seconds = np.zeros(len(tests))
        for s, test in enumerate(tests):
            t0 = time.perf_counter()
            for c in range(n_C):
                est = estimator_class(self._loss)(C=fit.cfg.Cs[s * n_C + c])
                est._set_fitted({**fitted_attributes(fit, s * n_C + c, source), "n_features_in_": n_features})
                scores[s, c] = scorer(est, X[test], y[test])
            seconds[s] = time.perf_counter() - t0
        return scores, seconds

    def decision_function(self, X):
        check_is_fitted(self, "coef_")
        return super().decision_function(X)


class CSClassifierCV(WWClassifierCV):
    """Crammer-Singer linear SVM with ``C`` chosen by cross-validation, all folds in one pass.

    :class:`WWClassifierCV` for the loss of :class:`~streamwww.CSClassifier`: the same
    parameters, attributes and single pass over the data; ``best_estimator_`` is a
    ``CSClassifier``.  A class of its own rather than a ``loss`` parameter, as the
    estimators are (``WWClassifier``, ``CSClassifier``): the class names the model.
    """

    _loss = "cs"


def cv_class(loss: str) -> type[WWClassifierCV]:
    """The cross-validating estimator of a loss: ``'ww'`` :class:`WWClassifierCV`, ``'cs'`` :class:`CSClassifierCV`."""
    return CSClassifierCV if loss == "cs" else WWClassifierCV
