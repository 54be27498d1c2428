"""scikit-learn estimators for the Weston-Watkins and Crammer-Singer linear SVMs: one
class, the loss a class attribute (``_loss``) that the engine reads from the settings."""

from __future__ import annotations

import copy
import warnings
from contextlib import nullcontext
from typing import TYPE_CHECKING

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from streamwww._params import MAX_ITER, check_params
from streamwww._textdata import text_as_store
from streamwww.labels import classification_targets
from streamwww.model.fitted import FittedModel, class_scores, fitted_attributes, model_params, predicted_labels
from streamwww.stream.sources import ArraySource, StoreSource, as_store, store_shards, store_without_y

if TYPE_CHECKING:
    from streamwww.engine.run import Fit

__all__ = ["WWClassifier", "CSClassifier", "estimator_class", "estimator_from"]

class WWClassifier(ClassifierMixin, BaseEstimator):
    """Linear Weston-Watkins multiclass SVM, trained exactly by dual block coordinate descent.

    Solves ``min_W 1/2 ||W||_F^2 + C sum_i sum_{j != y_i} max(0, 1 - (w_{y_i} - w_j)^T x_i)``
    by block coordinate descent on the reparametrized dual, each block solved
    exactly by Walrus (Wang & Scott, ICML 2021).

    Parameters
    ----------
    C : float, default=1.0
        Regularization parameter, ``C > 0``.
    tol : float, default=1e-3
        Stop when the relative duality gap ``(P - D) / |P|`` is at most ``tol``.
    max_iter : int, default=10000
        Maximum number of epochs (passes over the data): a limit for runs that do
        not reach the stopping rule, which then warn.  The epochs a certificate
        needs grow about in proportion to ``C``; the default lets every model of
        ``C <= 10`` measured reach ``tol`` with a margin (docs/benchmarks.md,
        "Epochs to the default stop").
    fit_intercept : bool, default=True
        Append a constant feature ``intercept_scaling`` (LIBLINEAR's
        convention); its weights are regularized like any other.
    intercept_scaling : float, default=1.0
        Value of the constant feature; ``intercept_ = intercept_scaling * w_bias``.
    gap_decay : float in (0, 1) or None, default=None
        Also stop when the duality gap falls to ``gap_decay`` times the gap after
        the first epoch (the paper's rule; its authors used 0.0009).  Set
        ``tol=0`` to stop by this rule alone.
    subproblem : {'walrus', 'shark'}, default='walrus'
        Block solver: exact Walrus, or Shark's iterative solver (baseline).
    shrinking : bool, default=True
        Leave out of each epoch's passes the dual coordinates that the objective
        pass before it found at 0 with their margin at least 1 (docs/TRAINING.md,
        "Shrinking"). The stopping rule still uses the exact duality gap over every
        row; the model is another point within the same certified gap.  CPU and
        GPU, one process or a cluster; the Shark solver does not shrink.
    random_state : int, RandomState instance or None, default=None
        Seed of the shard and row orders.  Same seed, data and settings give a
        bitwise-identical model on the CPU.
    device : {'auto', 'cpu', 'cuda', 'cuda-async'}, default='auto'
        Compute device; 'auto' uses a usable GPU for runs of 10 or more models
        (C values x folds) with 100 or more classes, where its exact kernel was
        measured faster than the CPU, and the CPU otherwise (docs/gpu.md).
        'cuda-async': the GPU's row-parallel pass (many rows of one model at once,
        their updates added with atomics; docs/gpu.md, "Row-parallel mode"): its stop
        is certified by the duality gap like every run's, but the model is **not
        reproducible** bit for bit and a resumed run is not the uninterrupted one's;
        never chosen by 'auto'.
    verbose : int, default=0
        Log one line per epoch (to stderr unless logging is configured).
    class_weight : dict, 'balanced' or None, default=None
        Weight of each class's rows, ``{label: weight}``, as in scikit-learn
        (LIBLINEAR's ``-wi``): a row of weight ``w`` has the dual box ``[0, C w]``
        and counts ``w`` times in the hinge loss. ``'balanced'`` weighs class ``c``
        by ``n_samples / (n_classes * count(c))``.  Multiplies ``sample_weight``
        and a store's own weights.
    warm_start : bool, default=False
        Start the next ``fit`` on the same data from this fit's solution, with
        ``beta`` (and so ``W``) rescaled into the new box ``[0, C]``: the same
        optimum, usually in fewer epochs (e.g. along a path of ``C``). The dual
        variables belong to the rows, so a fit on other data (or with another
        intercept setting) starts cold and warns. In-memory data only; for
        stores, resume a checkpoint.
    client : distributed.Client, str or None, default=None
        Train on this Dask cluster (a client, or a scheduler address) by CoCoA+
        rounds, with as many partitions ``K`` as it has workers now (half as many
        for a store, whose rounds are pipelined: :func:`streamwww.train`): arrays are
        scattered to the workers, a store is read by them (every worker must
        reach it; docs/DISTRIBUTED.md). ``K`` is part of the model: the same data,
        seed and ``K`` give the bitwise-same model on any cluster, and ``K = 1`` the
        model of ``client=None`` (for a store, with ``eval_every=1``); for a fixed ``K`` on any cluster use
        :func:`streamwww.train` (``partitions``). The client is not a model
        setting: :func:`~sklearn.base.clone` shares it (a live client cannot be
        copied), pickles and model files leave it out. ``warm_start`` does not
        apply on a cluster.
    n_jobs : int or None, default=None
        Threads for one fit: None or -1 every usable core (CPU affinity and cgroup
        quota counted, capped by ``OMP_NUM_THREADS``), -k all but k - 1, k > 0 that
        many; 0 is an error.  No model depends on it.  The block pass
        (``block_rows``) spreads one model's epoch over them; several models
        (a list of ``C``, folds) run one a thread; the sequential pass of one model
        certifies its epochs on a second thread.
    block_rows : int, default=1
        The pass: 1 the sequential pass (row after row); ``m > 1`` the block pass,
        exact and the same model for any ``n_jobs``, whose blocks of ``m`` rows are
        scored, paired and updated by all threads and stepped in order
        (docs/TRAINING.md, "Threads"; CPU only).  The models of different
        ``block_rows`` differ by rounding; checkpoints and model files record it.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        Class labels.
    coef_ : ndarray of shape (n_classes, n_features)
        Weight vector of each class (also for two classes).
    intercept_ : ndarray of shape (n_classes,)
        Intercept of each class (zeros when ``fit_intercept=False``).
    n_iter_ : int
        Epochs run.
    history_ : list of dict
        Per evaluated epoch (1 and 2, then spaced by the model's progress, and
        the last: ``eval_every="auto"``, docs/TRAINING.md): ``epoch``,
        ``time`` (solver seconds, objective evaluation excluded), ``wall_time``,
        ``primal``, ``dual``, ``gap``, ``rel_gap``.
    n_features_in_ : int
        Number of features seen during fit.
    converged_ : bool
        Whether the relative duality gap reached ``tol``.
    seed_ : int
        The seed the fit used (drawn when ``random_state=None``; pass it back
        to repeat the fit bitwise).
    device_ : {'cpu', 'cuda', 'cuda-async'}
        Where the fit ran (``device='auto'`` logs why it did not use a GPU,
        at level INFO of the ``streamwww`` logger).

    Notes
    -----
    For two classes, ``decision_function`` returns ``s_1 - s_0`` of shape
    ``(n_samples,)`` as scikit-learn requires, while ``coef_`` keeps one row
    per class.
    """

    _loss = "ww"  # the loss this class trains (fitted.model_params names it where it is not WW)

    def __init__(self, C=1.0, tol=1e-3, max_iter=MAX_ITER, fit_intercept=True, intercept_scaling=1.0,
                 gap_decay=None, subproblem="walrus", shrinking=True, random_state=None, device="auto",
                 verbose=0, class_weight=None, warm_start=False, client=None, n_jobs=None, block_rows=1):
        self.C = C
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
        self.warm_start = warm_start
        self.client = client
        self.n_jobs = n_jobs
        self.block_rows = block_rows

    def __sklearn_clone__(self):
        # scikit-learn's clone deep-copies every parameter; a live Client cannot be
        # copied (nor should it be: the clone trains on the same cluster)
        if "client" not in self._get_param_names():  # a subclass without the parameter
            return super().__sklearn_clone__()
        client, self.client = self.client, None
        try:
            new = super().__sklearn_clone__()
        finally:
            self.client = client
        new.client = client
        return new

    def __getstate__(self):
        state = super().__getstate__()
        if state.get("client") is not None and not isinstance(state["client"], str):
            state = {**state, "client": None}  # a live client does not travel with the model
        return state

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def _check_params(self, allow_C_list: bool = False) -> tuple[float, ...]:
        if not isinstance(self.warm_start, (bool, np.bool_)):
            raise ValueError(f"The 'warm_start' parameter of {type(self).__name__} must be an instance of "
                             f"'bool'. Got {self.warm_start!r} instead.")
        return check_params(type(self).__name__, C=self.C, tol=self.tol, max_iter=self.max_iter,
                            fit_intercept=self.fit_intercept, intercept_scaling=self.intercept_scaling,
                            gap_decay=self.gap_decay, subproblem=self.subproblem, shrinking=self.shrinking,
                            random_state=self.random_state, device=self.device,
                            verbose=self.verbose, n_jobs=self.n_jobs, block_rows=self.block_rows,
                            loss=self._loss, allow_C_list=allow_C_list)

    def fit(self, X, y=None, sample_weight=None):
        """Fit the model to ``X`` (dense or sparse) and labels ``y``, or to a shard store.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features), or str, Path, ShardStore
            Training rows; or a shard store (with ``y=None``), streamed from disk
            with ``beta`` kept in a temporary directory; or a LIBSVM text file
            (optionally .gz/.bz2/.xz, with ``y=None``), converted into a temporary
            store first as ``streamwww train FILE`` does.  For checkpoints and
            several values of ``C`` use :func:`streamwww.train`.
        y : array-like of shape (n_samples,)
            Labels of any type (ints, floats, strings); at least two classes.
        sample_weight : array-like of shape (n_samples,), optional
            Row weights (finite, >= 0): exactly the optimum of the data with each
            row repeated ``sample_weight`` times, for integer weights.  A store
            carries its own weights (``streamwww convert --weights``).

        Returns
        -------
        self : WWClassifier
        """
        self._check_params()
        # a LIBSVM text file: converted into a temporary store, removed after the fit
        with text_as_store(X) if y is None else nullcontext(X) as X:
            return self._fit_data(X, y, sample_weight)

    def _fit_data(self, X, y, sample_weight):
        """:meth:`fit` of arrays or a store."""
        store = store_without_y(X, y, f"{type(self).__name__}.fit")
        if store is not None:  # a shard store (or its path): streamed shard by shard
            if sample_weight is not None:
                raise ValueError(f"{type(self).__name__}.fit: a store carries its own row weights "
                                 "(streamwww convert --weights); sample_weight is for arrays")
            source = StoreSource(store, self.class_weight, owner=type(self).__name__)
            fit = self._fit(source)
            self._set_fitted({**fitted_attributes(fit, 0, source), "n_features_in_": int(store.n_features)})
        else:
            X, y = validate_data(self, X, y, accept_sparse="csr", dtype=[np.float64, np.float32],
                                 order="C", y_numeric=False, multi_output=False, reset=True)
            source = ArraySource.from_labels(X, classification_targets(y), type(self).__name__,
                                             class_weight=self.class_weight, sample_weight=sample_weight)
            key = (source.fingerprint(), bool(self.fit_intercept), float(self.intercept_scaling)) \
                if self.warm_start and self.client is None else None
            fit = self._fit(source, warm=self._warm_state(key))
            self._set_fitted(fitted_attributes(fit, 0, source))
            self._warm = (key, float(self.C), fit.results[0].W, fit.beta[0]) if key is not None else None
        from streamwww.engine.config import warn_not_converged

        warn_not_converged(fit.results, fit.cfg, type(self).__name__, stacklevel=3)  # (at fit's caller)
        return self

    def _fit(self, source, warm=None) -> Fit:
        """One fit of ``source``: in this process, or on the cluster of ``client``."""
        # (the engine, Numba's kernels, loads here: a model loaded to predict needs none)
        from streamwww.engine.options import Call, Placement, RunOptions
        from streamwww.engine.run import fit_placed

        placement = Placement.of(self.client, None, None, type(self).__name__)
        return fit_placed(source, model_params(self), (float(self.C),), RunOptions(), placement, Call(warm=warm))

    def _warm_state(self, key):
        """``(W, beta)`` of the previous fit rescaled to this ``C``, or None (cold start)."""
        prev = getattr(self, "_warm", None)
        if key is None or prev is None:
            return None
        if prev[0] != key:
            warnings.warn(f"{type(self).__name__}: warm_start=True but the data (or the intercept setting) "
                          "changed since the last fit; starting from zero", UserWarning, stacklevel=3)
            return None
        # beta in [0, C_old] stays feasible for a larger C; for a smaller one it is scaled
        # into [0, C] (and W with it: W(beta) is linear in beta).
        scale = min(1.0, float(self.C) / prev[1])
        return prev[2][None] * scale, prev[3][None] * scale

    @classmethod
    def from_fitted(cls, model: FittedModel) -> "WWClassifier":
        """The fitted estimator of a :class:`~streamwww.model.fitted.FittedModel` (its settings
        copied, as scikit-learn's ``clone`` copies them): a :class:`WWClassifier` or a
        :class:`CSClassifier` as the model's loss says, whichever class is asked."""
        est = estimator_from(copy.deepcopy(model.params))
        est._set_fitted(model.attributes())
        return est

    def _set_fitted(self, fitted) -> None:
        """Install the fitted attributes all at once (a failed fit sets none)."""
        for name, value in fitted.items():
            setattr(self, name, value)

    def decision_function(self, X):
        """Class scores ``X @ coef_.T + intercept_``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features), or str, Path, ShardStore
            Rows; or a shard store, read shard by shard (memory: one shard and the scores).

        Returns
        -------
        scores : ndarray of shape (n_samples, n_classes), or (n_samples,) for two classes
        """
        check_is_fitted(self)
        store = as_store(X)
        if store is not None:
            return np.concatenate([self._scores(Xs) for Xs, _ in store_shards(store, self.n_features_in_, type(self).__name__)])
        X = validate_data(self, X, accept_sparse="csr", dtype=[np.float64, np.float32], reset=False)
        return self._scores(X)

    def _scores(self, X):
        return class_scores(self.coef_, self.intercept_, X)

    def predict(self, X):
        """Predicted class labels (the class with the largest score); ``X`` as in :meth:`decision_function`."""
        scores = self.decision_function(X)  # (first: NotFittedError before classes_ is read)
        return predicted_labels(self.classes_, scores)

    def score(self, X, y=None, sample_weight=None):
        """Mean accuracy on ``(X, y)``, or on a shard store given as ``X`` (its labels; ``y=None``),
        read shard by shard."""
        store = store_without_y(X, y, f"{type(self).__name__}.score")
        if store is None:
            return super().score(X, y, sample_weight=sample_weight)
        check_is_fitted(self)
        correct = total = 0.0
        for Xs, labels in store_shards(store, self.n_features_in_, type(self).__name__):
            hit = self.predict(Xs) == labels
            w = None if sample_weight is None else np.asarray(sample_weight)[int(total):int(total) + len(hit)]
            correct += float(np.sum(hit if w is None else hit * w))
            total += len(hit)
        n = total if sample_weight is None else float(np.sum(sample_weight))
        return correct / n if n else float("nan")


class CSClassifier(WWClassifier):
    """Linear Crammer-Singer multiclass SVM, trained exactly by dual block coordinate descent.

    Solves ``min_W 1/2 ||W||_F^2 + C sum_i max(0, max_{j != y_i} 1 - (w_{y_i} - w_j)^T x_i)``,
    the problem of LIBLINEAR's ``-s 4`` and of scikit-learn's
    ``LinearSVC(multi_class="crammer_singer")``, by the engine of :class:`WWClassifier`:
    the same dual variables and passes, each row's block step the exact projection onto a
    simplex (``beta_i >= 0``, ``1^T beta_i <= C w_i``; :mod:`streamwww.solvers.simplex`),
    so streamed stores, checkpoints, several ``C``, weights, shrinking, clusters and GPUs
    work as they do for WW, and every stop is certified by the duality gap.

    Parameters and attributes are :class:`WWClassifier`'s; ``subproblem`` names WW's
    block solver and must stay ``'walrus'`` (the exact step).  Model files record the
    loss; :func:`streamwww.load_model` returns a ``CSClassifier`` for them.

    Examples
    --------
    >>> import numpy as np, streamwww as sw
    >>> X = np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0], [0.0, 0.0]])
    >>> clf = sw.CSClassifier(C=10.0, random_state=0).fit(X, [0, 1, 2, 0])
    >>> clf.predict(X).tolist()
    [0, 1, 2, 0]
    """

    _loss = "cs"


def estimator_class(loss: str) -> type[WWClassifier]:
    """The estimator class of a loss: ``'ww'`` :class:`WWClassifier`, ``'cs'`` :class:`CSClassifier`."""
    return CSClassifier if loss == "cs" else WWClassifier


def estimator_from(params: dict) -> WWClassifier:
    """The (unfitted) estimator of a settings dict (:func:`~streamwww.model.fitted.model_params`'s
    form): of the class its ``"loss"`` names (none: Weston-Watkins), with the other settings."""
    return estimator_class(params.get("loss", "ww"))(**{k: v for k, v in params.items() if k != "loss"})


def load_model(path) -> WWClassifier:
    """Read a model written by :func:`~streamwww.save_model`; returns a fitted
    :class:`~streamwww.WWClassifier` (a :class:`~streamwww.CSClassifier` for a Crammer-Singer model).

    ``path`` is a local path, or a URL or :class:`~streamwww.storage.location.Location`
    on an object store.

    Raises
    ------
    ValueError
        If the file is not a streamwww model or has an unsupported version.
    StorageError
        If the object store cannot be reached.
    """
    from streamwww.model.files import load_fitted

    return WWClassifier.from_fitted(load_fitted(path))
