"""``train`` and ``resume``: the Python API for runs (several ``C``, stores, checkpoints, model files).

Both build :class:`~streamwww.WWClassifier` models from one
:func:`~streamwww.engine.run.fit_placed` call, their keywords built once into the run's
options (:mod:`streamwww.engine.options`); ``resume`` reads the settings a checkpoint
recorded and trains again with them.  :func:`train_fitted` and
:func:`resume_fitted` do the same and return the models as plain records
(:class:`~streamwww.model.fitted.FittedModel`): the command line's path, which imports
no scikit-learn.
"""

from __future__ import annotations

import os
from dataclasses import replace

import numpy as np

from streamwww.storage.location import located
from streamwww._params import DEFAULTS, MAX_ITER, UNMIXED, check_params
from streamwww._textdata import text_as_store
from streamwww.engine.config import warn_not_converged
from streamwww.engine.options import OPTION_KEYS, Call, Placement, RunOptions, options_of
from streamwww.engine.run import fit_placed
from streamwww.errors import CheckpointError
from streamwww.labels import classification_targets
from streamwww.model.files import check_not_input, check_writable, model_paths, save_model
from streamwww.model.fitted import FittedModel, fitted_models, model_settings
from streamwww.state.checkpoint import CheckpointDir
from streamwww.stream.sources import ArraySource, StoreSource, as_store

__all__ = ["train", "resume", "train_fitted", "resume_fitted", "model_paths", "check_writable"]


def _locate(data, checkpoint_dir, model_out, storage_options):
    """Paths and URLs as :class:`~streamwww.storage.location.Location` (a store path opened),
    with ``storage_options`` for the URLs among them."""
    if isinstance(data, (str, os.PathLike)):
        data = as_store(data, storage_options)
    if checkpoint_dir is not None:
        checkpoint_dir = located(checkpoint_dir, storage_options)
    if model_out is not None and model_out is not False:
        model_out = located(model_out, storage_options)
    return data, checkpoint_dir, model_out


def train(data, *, C=1.0, tol: float = 1e-3, max_iter: int = MAX_ITER, fit_intercept: bool = True,
          intercept_scaling: float = 1.0, gap_decay: float | None = None, subproblem: str = "walrus",
          shrinking: bool = True,
          random_state=None, device: str = "auto", verbose: int = 0, checkpoint_dir=None,
          checkpoint_every: int = DEFAULTS["checkpoint_every"],
          checkpoint_interval: float = DEFAULTS["checkpoint_interval"], prefetch: int | str = DEFAULTS["prefetch"],
          inner_passes: int = DEFAULTS["inner_passes"], eval_every: int | str = DEFAULTS["eval_every"],
          mix_shards: int = DEFAULTS["mix_shards"], model_out=None, callback=None, progress=None,
          class_weight=None, sample_weight=None, cv=None, client=None, workers: int | None = None,
          partitions: int | None = None, storage_options: dict | None = None,
          memory_budget=DEFAULTS["memory_budget"], n_jobs: int | None = None, block_rows: int = 1,
          loss: str = "ww"):
    """Train Weston-Watkins (or Crammer-Singer) linear SVM(s) and return fitted
    :class:`~streamwww.WWClassifier` (s) (:class:`~streamwww.CSClassifier` (s)).

    Parameters
    ----------
    data : tuple (X, y), str, Path or ShardStore
        In-memory rows (dense or sparse) and labels of any type, or a shard
        store (see :func:`streamwww.io.open_store`; its path or URL, e.g.
        ``s3://bucket/store``) that is streamed shard by shard, or a LIBSVM
        text file (optionally .gz/.bz2/.xz), converted first as ``streamwww train
        FILE`` does (:func:`streamwww.convert` with its defaults): into
        ``checkpoint_dir/data.zarr`` when there is one, else into a temporary
        directory removed when training ends.  Fitting arrays is streaming over one in-memory shard: a
        one-shard store of the same rows gives the bitwise-identical model.
    C : float or list of float, default=1.0
        Regularization.  A list trains one model per value in the same passes
        over the data; each equals the model a single-``C`` run would give.
    tol, max_iter, fit_intercept, intercept_scaling, gap_decay, subproblem, shrinking, random_state, device, verbose
        As in :class:`~streamwww.WWClassifier`.
    checkpoint_dir : str or Path, optional
        Keep ``beta`` and crash-safe checkpoints here (a local directory, or a
        URL on an object store: docs/STORAGE.md, docs/RELIABILITY.md).  If it
        already holds a checkpoint of the same data and settings, training
        continues from it.
    checkpoint_every : int, default=0
        Also checkpoint every this many shards within an epoch (0: at epoch ends only).
    checkpoint_interval : float, default=60.0
        At least this many seconds between two checkpoints (at epoch ends, or every
        ``checkpoint_every`` shards), and always one at the end of the run: a run
        killed (or stopped with Ctrl-C) resumes from at most this long ago, to the
        same model.  ``0``: a checkpoint at every epoch end.  A store's ``beta``
        that fits the memory budget stays in RAM and is written only by
        checkpoints (docs/TRAINING.md).  Cluster runs commit after every round.
    prefetch : 'auto' or int, default='auto'
        Shards (and their ``beta``) loaded ahead in the background: ``'auto'``
        is 2, or 6 for a store on an object store (loads in flight together
        hide its latency; docs/STORAGE.md).
    inner_passes : int, default=1
        Exact passes over each shard group while it is loaded (block minimization).
    eval_every : int or 'auto', default='auto'
        When to compute the objectives (a pass over every row; a stop is decided only
        there, on the exact duality gap): every this many epochs, or ``'auto'``:
        spaced by each model's progress, after epochs 1 and 2, then after half the
        epochs its stopping rule is predicted away at its rate so far, at least 1
        and at most ``2 isqrt(e)`` after epoch ``e`` (:mod:`streamwww.engine.schedule`;
        a checkpoint of schedule version 1, without ``schedule`` in its config, resumes
        with version 1's fixed spacing).
        Shrinking's sets hold until the next objective pass.  A cluster run
        certifies every round with ``'auto'`` (docs/TRAINING.md).
    mix_shards : int, default=2
        Shards trained together as one block, their rows interleaved in a seeded
        random order; the groups are cut anew every epoch from the shuffled
        shard order.  ``1`` trains shard by shard, which converges several times
        slower in epochs, with fixed shard membership (docs/benchmarks.md, "(e)
        Convergence in epochs: one shuffled block vs 8 fixed shards").  Costs
        ``mix_shards`` shards of memory per group.  Ignored for in-memory data (one
        shard).
    model_out : str or Path, optional
        Save the model (or, with a list of ``C``, ``<stem>-C<value><suffix>`` per model);
        a path or a URL.
    callback : callable, optional
        Called after each evaluated epoch with a dict (``epoch``, ``time``,
        ``models``: the models evaluated then (with ``"auto"`` each model has its own
        epochs), ``primal``, ``dual``, ``rel_gap``, ``rows_per_s``, ``converged`` (per model
        in ``models``: did it meet the stopping rule there), the run's ``tol`` and ``max_iter``, and
        ``weights``: ``weights(j)`` returns copies of ``(coef, intercept)`` of
        the j-th model in ``models`` as they are now, during the callback only: a
        later call raises ``RuntimeError``); a truthy return value
        stops training, every model of the run (status 'stopped'). The same on
        a cluster (``client=``; ``rows_per_s``: all rows over the last round's wall time).
    progress : callable, optional
        ``progress(epoch, shards_done, n_shards, rows)`` after each group of shards.
        :class:`streamwww.ProgressBar` is both hooks: ``callback=bar, progress=bar`` draws
        one bar for the run (a widget in Jupyter).
    class_weight : dict, 'balanced' or None, optional
        As in :class:`~streamwww.WWClassifier`; for a store, 'balanced' uses its class counts.
    sample_weight : array-like of shape (n_samples,), optional
        Row weights for ``(X, y)`` data (a store carries its own: ``convert --weights``).
    cv : int, splitter or iterable, optional
        Cross-validate the values of ``C`` in the same passes (see
        :class:`~streamwww.WWClassifierCV`; for a store, an int: stratified
        seeded folds) and keep the best ``C``'s model trained on all rows.

    Returns
    -------
    WWClassifier, list of WWClassifier, or WWClassifierCV
        A list exactly when ``C`` is a list (or tuple / array); with ``cv``, the
        fitted :class:`~streamwww.WWClassifierCV` (its ``cv_results_``, ``best_C_``
        and the refitted model; ``model_out`` saves that model).
    client : distributed.Client or str, optional
        Train a store on this Dask cluster (or the scheduler at this address) by
        CoCoA+ rounds with the exact local solver (:mod:`streamwww.engine.cocoa`).
        Not a model setting: it is recorded nowhere.
    workers : int, optional
        Start a local cluster of this many single-threaded worker processes for the run.
    partitions : int, optional
        ``K``, the number of row partitions (whole shards) of a cluster run; default: half
        the workers for a store with shrinking on the ``"auto"`` schedule, whose rounds are
        pipelined (each partition's sweep of ``W`` runs beside its training, on a worker of
        its own; docs/DISTRIBUTED.md), else the number of workers.  A model setting: the
        same ``K`` gives the bitwise-same model on any cluster, and ``K = 1`` with
        ``eval_every=1`` is the sequential run's model.
    storage_options : dict, optional
        Options of the file system of the URLs among ``data``, ``checkpoint_dir``
        and ``model_out`` (endpoint, credentials, ...; docs/STORAGE.md). Never
        recorded: a checkpoint names URLs only, so :func:`resume` takes them again.
    memory_budget : 'auto' or int, default='auto'
        Bytes of a store's decoded shards kept in memory between epochs
        (:meth:`~streamwww.io.ShardStore.keep_decoded`): a store that fits is read
        from storage once, and every later epoch and objective pass copies its
        shards from memory.  ``'auto'``: half the memory available when the run
        starts; ``0``: read every shard from storage every time (memory stays at a
        few shards).  The model does not depend on it.  On a cluster it is per
        worker (``'auto'``: half the worker's Dask memory limit).
    n_jobs : int or None, default=None
        Threads of this process (:class:`~streamwww.WWClassifier`'s ``n_jobs``: None or
        -1 every usable core); the model does not depend on it.  On a cluster each
        worker uses its own cores.
    block_rows : int, default=1
        The pass (:class:`~streamwww.WWClassifier`'s ``block_rows``): 1 sequential,
        ``m > 1`` the block pass that spreads one model's epoch over ``n_jobs`` threads;
        recorded in the checkpoint and the model.
    loss : {'ww', 'cs'}, default='ww'
        The model: Weston-Watkins (:class:`~streamwww.WWClassifier`), or Crammer-Singer
        (:class:`~streamwww.CSClassifier`, LIBLINEAR's ``-s 4``), trained by the same engine
        with its exact simplex step; recorded in the checkpoint and the model file.
    """
    result, fit = train_fitted(**locals())  # every argument, as given
    _warn(result, fit, "train")
    return _estimators(result)


def _warn(result, fit, owner: str) -> None:
    """The convergence warning of :func:`train` or :func:`resume` (``owner``), naming the
    user's line: one per model that hit ``max_iter``, or one for a cross-validation run."""
    if hasattr(result, "cv_results_"):
        from streamwww.cv import warn_cv

        warn_cv(fit, owner, stacklevel=3)
    else:
        warn_not_converged(fit.results, fit.cfg, owner, stacklevel=3)


def train_fitted(data, **options):
    """:func:`train`, returning ``(models, fit)``: the models as
    :class:`~streamwww.model.fitted.FittedModel` records (one, or a list as :func:`train`
    returns), and the :class:`~streamwww.engine.run.Fit` (no convergence warning:
    the caller warns); with ``cv``, the :class:`~streamwww.WWClassifierCV` and its ``Fit``.
    Trained on a store without ``cv``, no scikit-learn is imported: the command
    line's path (:mod:`streamwww.model.fitted`). A LIBSVM text file as ``data`` is converted first,
    as ``streamwww train FILE`` does: into ``checkpoint_dir`` when one is given, else into a
    temporary directory removed when training ends (:func:`streamwww._textdata.text_as_store`)."""
    out = options.get("model_out")
    if isinstance(data, (str, os.PathLike)) and isinstance(out, (str, os.PathLike)):
        check_not_input(out, [data])  # (before a conversion: the model would replace the file it came from)
    with text_as_store(data, options.get("checkpoint_dir"), storage_options=options.get("storage_options")) as data:
        return _train_fitted(data, **options)


def _train_fitted(data, **options):
    """:func:`train_fitted` of arrays or a store."""
    defaults = train.__kwdefaults__
    unknown = sorted(set(options) - set(defaults))
    if unknown:
        raise TypeError(f"train() got unexpected keyword argument(s) {', '.join(map(repr, unknown))}")
    o = {**defaults, **options}
    data, o["checkpoint_dir"], model_out = _locate(data, o["checkpoint_dir"], o.pop("model_out"),
                                                   o.pop("storage_options"))
    run, placement, call = options_of({k: o.pop(k) for k in OPTION_KEYS}, "train")
    cv = o.pop("cv")
    if cv is not None:
        C, sample_weight = o.pop("C"), o.pop("sample_weight")
        return _train_cv(data, C=C, cv=cv, sample_weight=sample_weight, model_out=model_out, options=run,
                         placement=placement, call=call, **o)
    return _train(data, model_out=model_out, options=run, placement=placement, call=call, **o)


def _estimators(result):
    """``train_fitted``'s models as fitted :class:`~streamwww.WWClassifier` or
    :class:`~streamwww.CSClassifier`, as their loss says (a CV fit as it is)."""
    from streamwww.estimator import WWClassifier  # scikit-learn: imported for estimators only

    if isinstance(result, list):
        return [WWClassifier.from_fitted(m) for m in result]
    return WWClassifier.from_fitted(result) if isinstance(result, FittedModel) else result


def _train(data, *, C, tol, max_iter, fit_intercept, intercept_scaling, gap_decay, subproblem, shrinking, random_state,
           device, verbose, model_out, options: RunOptions, placement: Placement | None = None, call: Call = Call(),
           class_weight=None, sample_weight=None, n_jobs=None, block_rows=1, loss="ww"):
    """:func:`train` without the convergence warnings (its callers warn at the user's line);
    ``placement`` (:mod:`streamwww.engine.options`): on a Dask cluster."""
    Cs = check_params("train", C=C, tol=tol, max_iter=max_iter, fit_intercept=fit_intercept,
                      intercept_scaling=intercept_scaling, gap_decay=gap_decay, subproblem=subproblem,
                      shrinking=shrinking,
                      random_state=random_state, device=device, verbose=verbose,
                      n_jobs=n_jobs, block_rows=block_rows, loss=loss, allow_C_list=True)
    params = model_settings(C=Cs[0], tol=tol, max_iter=max_iter, fit_intercept=fit_intercept,
                            intercept_scaling=intercept_scaling, gap_decay=gap_decay, subproblem=subproblem,
                            shrinking=shrinking, random_state=random_state, device=device, verbose=verbose,
                            class_weight=class_weight, warm_start=False, n_jobs=n_jobs, block_rows=block_rows,
                            loss=loss)
    source, n_features_in, feature_names = _source(data, params, class_weight, sample_weight)
    many = isinstance(C, (list, tuple, np.ndarray))
    outs = model_paths(model_out, Cs, many=len(Cs) > 1 or many) if model_out is not None else []
    for out in outs:  # before any work: an unwritable model path found after a day's run loses it
        check_writable(out)
    fit = fit_placed(source, params, Cs, options, placement,
                     replace(call, C_is_list=many,
                             run_info={"model_out": located(model_out).url if model_out is not None else None}))
    models = fitted_models(fit, source, params, n_features_in, feature_names)
    for m, out in zip(models, outs):
        save_model(m, out)
    return (models if many else models[0]), fit


def _source(data, params: dict, class_weight, sample_weight):
    """``train``'s data as a source: ``(source, n_features_in, feature_names)``."""
    store = as_store(data)
    if store is not None:
        if sample_weight is not None:
            raise ValueError("train: a store carries its own row weights (streamwww convert --weights); "
                             "sample_weight is for (X, y) data")
        source = StoreSource(store, class_weight, owner="train")
        return source, source.data.n_features, None
    if isinstance(data, tuple) and len(data) == 2:
        from sklearn.utils.validation import validate_data  # arrays: checked as scikit-learn checks them

        from streamwww.estimator import estimator_from

        template = estimator_from(params)
        X, y = validate_data(template, data[0], data[1], accept_sparse="csr",
                             dtype=[np.float64, np.float32], order="C", reset=True)
        source = ArraySource.from_labels(X, classification_targets(y), "train", class_weight=class_weight,
                                         sample_weight=sample_weight)
        return source, template.n_features_in_, getattr(template, "feature_names_in_", None)
    raise ValueError("The 'data' parameter of train must be an (X, y) tuple, a shard store or its "
                     f"path. Got {type(data).__name__} instead.")


def _train_cv(data, *, C, cv, model_out, sample_weight, options: RunOptions, placement: Placement | None,
              call: Call, loss="ww", **params):
    """:func:`train` with ``cv``: a :class:`~streamwww.WWClassifierCV` (or, for ``loss='cs'``,
    :class:`~streamwww.CSClassifierCV`) fit (one pass for all folds and C), without its
    warning; ``(estimator, Fit)``."""
    from streamwww.cv import cv_class

    out = located(model_out) if model_out is not None else None
    if out is not None:
        check_writable(out)
    est = cv_class(loss)(Cs=list(np.atleast_1d(C)), cv=cv, **params)
    run = dict(options=options, placement=placement,
               call=replace(call, run_info={"model_out": out.url if out is not None else None}))
    if isinstance(data, tuple) and len(data) == 2:
        fit = est._fit_cv(data[0], data[1], sample_weight=sample_weight, **run)
    elif as_store(data) is not None:
        if sample_weight is not None:
            raise ValueError("train: a store carries its own row weights (streamwww convert --weights); "
                             "sample_weight is for (X, y) data")
        fit = est._fit_cv(as_store(data), **run)
    else:
        raise ValueError("The 'data' parameter of train must be an (X, y) tuple, a shard store or its "
                         f"path. Got {type(data).__name__} instead.")
    if out is not None:
        save_model(est.best_estimator_, out)
    return est, fit


def _recorded_class_weight(store, recorded):
    """A checkpoint's class weights (per class index) back as ``{label: weight}`` (None: none)."""
    if recorded is None:
        return None
    return {c: w for c, w in zip(store.classes.tolist(), recorded) if w != 1.0}


def _resumed_model_out(run: dict, model_out):
    """The model path a resume writes: ``model_out``, else the one train recorded; False: none."""
    return run.get("model_out") if model_out is None else None if model_out is False else model_out


def _located_or_none(path, storage_options):
    return None if path is None else located(path, storage_options)


def _placement(manifest: dict, client, workers, partitions) -> Placement | None:
    """Where :func:`resume` continues a run: ``None`` (this process) or the cluster options.
    A cluster run (its checkpoint records ``partitions``) continues on a cluster by default,
    on ``min(K, CPUs)`` local workers; ``partitions=1`` without a client: this process."""
    recorded_K = manifest["run"].get("partitions")
    if partitions == 1 and client is None and workers is None:  # K = 1 is the sequential engine
        return None
    if client is None and workers is None and partitions is None and recorded_K is None:
        return None
    if client is None and workers is None:
        workers = min(int(partitions or recorded_K), os.cpu_count() or 1)
    return Placement(client=client, workers=workers, partitions=partitions or recorded_K)


def _resume_cv(store, manifest, *, options: RunOptions, placement: Placement | None, call: Call, model_out,
               verbose, max_iter, storage_options=None, n_jobs=None):
    """:func:`resume` of a cross-validation run: the same :class:`~streamwww.WWClassifierCV` fit,
    continued, without its warning; ``(estimator, Fit)``."""
    from streamwww.cv import WWClassifierCV, cv_class

    cfg, run = manifest["config"], manifest["run"]
    params = {k: v for k, v in manifest["estimator_params"].items() if k in WWClassifierCV._get_param_names()}
    params.update(random_state=int(cfg["seed"]), verbose=verbose, n_jobs=n_jobs,
                  block_rows=int(cfg.get("block_rows", 1)))
    params.setdefault("shrinking", False)  # estimator params without it: a run that did not shrink
    params["class_weight"] = _recorded_class_weight(store, params.get("class_weight"))
    if max_iter is not None:
        params["max_iter"] = max_iter
    out = _resumed_model_out(run, model_out)
    out = None if out is None else located(out, storage_options)
    est = cv_class(cfg.get("loss", "ww"))(Cs=run["cv_Cs"], cv=int(run["cv"]), refit=bool(run.get("refit", True)),
                                         **params)
    fit = est._fit_cv(store, options=options, placement=placement,
                      call=replace(call, run_info={"model_out": None if out is None else out.url}))
    if out is not None and hasattr(est, "best_estimator_"):
        save_model(est.best_estimator_, out)
    return est, fit


def _recorded_options(manifest: dict, checkpoint_dir, memory_budget) -> RunOptions:
    """The options a checkpoint's run recorded, for :func:`resume` to continue it with;
    ``checkpoint_interval`` 0 (a commit every epoch) where the manifest has none, and
    ``memory_budget`` the caller's (it is not recorded: it does not change the model)."""
    cfg, run = manifest["config"], manifest["run"]
    options = RunOptions(checkpoint_dir=checkpoint_dir, checkpoint_every=run["checkpoint_every"],
                         checkpoint_interval=float(run.get("checkpoint_interval", 0.0)), prefetch=run["prefetch"],
                         inner_passes=cfg["inner_passes"], eval_every=cfg["eval_every"],
                         mix_shards=cfg.get("mix_shards", UNMIXED), memory_budget=memory_budget)
    options.check("resume")  # the caller's memory_budget; the recorded ones were checked when written
    return options


def resume(checkpoint_dir, store=None, *, model_out=None, verbose: int = 0, callback=None,
           progress=None, max_iter: int | None = None, client=None, workers: int | None = None,
           partitions: int | None = None, storage_options: dict | None = None,
           memory_budget=DEFAULTS["memory_budget"], n_jobs: int | None = None):
    """Continue an interrupted run from its checkpoint directory.

    The run continues with its recorded settings and data; it ends with the
    model the uninterrupted run gives (bitwise on the CPU).  Resuming a
    finished run changes nothing and returns its model(s).

    Parameters
    ----------
    checkpoint_dir : str, Path or Location
        A local directory, or a URL (``s3://bucket/run``) or
        :class:`~streamwww.storage.location.Location` on an object store.
    store : str, Path or ShardStore, optional
        The data store, if it moved since the checkpoint was written (its
        fingerprint must match).
    model_out : str, Path or False, optional
        Save the model(s) as :func:`train` does. By default the path(s) given to
        :func:`train` with this checkpoint directory; ``False``: save nothing.
    max_iter : int, optional
        A new epoch limit; models that stopped at the old limit continue.
    callback, progress : callable, optional
        As in :func:`train`.
    client, workers : optional
        Continue on this Dask cluster (as in :func:`train`; a client is never
        recorded). A run that trained on a cluster continues on one by default:
        a local cluster of ``min(K, CPU count)`` worker processes, ``K`` being
        its recorded partition count.
    partitions : int, optional
        Continue a cluster run with another ``K`` (or a sequential run on a
        cluster with this ``K``): the run goes on correctly from the stored
        ``beta``, but the model is then not bitwise the uninterrupted run's.
        ``partitions=1`` without a client or workers continues in this process.
    storage_options : dict, optional
        Options of the file system of URLs: the checkpoint directory, the store
        it recorded (or ``store``) and the model file(s) (docs/STORAGE.md).
    memory_budget : 'auto' or int, default='auto'
        As in :func:`train` (not recorded: it does not change the model).
    n_jobs : int or None, default=None
        As in :func:`train`: this machine's threads (not recorded; the run's pass,
        ``block_rows``, is, and the model is the same for any ``n_jobs``).

    Returns
    -------
    WWClassifier or list of WWClassifier
        A list when the run trained several values of ``C``.
    """
    result, fit = resume_fitted(**locals())  # every argument, as given
    _warn(result, fit, "resume")
    return _estimators(result)


def resume_fitted(checkpoint_dir, **options):
    """:func:`resume`, returning ``(models, fit)`` as :func:`train_fitted` does."""
    defaults = resume.__kwdefaults__
    unknown = sorted(set(options) - set(defaults) - {"store"})
    if unknown:
        raise TypeError(f"resume() got unexpected keyword argument(s) {', '.join(map(repr, unknown))}")
    o = {**defaults, "store": None, **options}
    store, model_out, storage_options = o["store"], o["model_out"], o["storage_options"]
    verbose, max_iter = o["verbose"], o["max_iter"]
    checkpoint_dir = located(checkpoint_dir, storage_options)
    with CheckpointDir(checkpoint_dir, lock=False) as probe:
        manifest = probe.load_settings()
    if manifest["data"]["kind"] != "store":
        raise CheckpointError(f"{checkpoint_dir}: this run trained on in-memory arrays; resume it by calling "
                              "train((X, y), checkpoint_dir=...) again with the same arrays and settings")
    try:
        store = as_store(store if store is not None else manifest["data"]["path"], storage_options)
    except FileNotFoundError:
        if store is not None:
            raise
        raise FileNotFoundError(f"{manifest['data']['path']}: the store {checkpoint_dir} trained on does not "
                                "exist; if it moved, give its new path (store=..., or --store)") from None
    cfg = manifest["config"]
    options = _recorded_options(manifest, checkpoint_dir, o["memory_budget"])
    placement = _placement(manifest, o["client"], o["workers"], o["partitions"])
    call = Call(callback=o["callback"], progress=o["progress"])
    if manifest["run"].get("cv"):
        return _resume_cv(store, manifest, options=options, placement=placement, call=call, model_out=model_out,
                          verbose=verbose, max_iter=max_iter, storage_options=storage_options, n_jobs=o["n_jobs"])
    params = {**manifest["estimator_params"], "random_state": int(cfg["seed"]), "verbose": verbose,
              "n_jobs": o["n_jobs"], "block_rows": int(cfg.get("block_rows", 1)),  # (the pass it resolved)
              "loss": cfg.get("loss", "ww")}
    params.setdefault("shrinking", False)  # estimator params without it: a run that did not shrink
    params["class_weight"] = _recorded_class_weight(store, params.get("class_weight"))
    if max_iter is not None:
        params["max_iter"] = max_iter
    Cs = cfg["Cs"]
    models, fit = _train(store, C=Cs if manifest["run"].get("C_is_list", len(Cs) > 1) else Cs[0], **params,
                         model_out=_located_or_none(_resumed_model_out(manifest["run"], model_out),
                                                    storage_options),
                         options=options, placement=placement, call=call)
    return models, fit
