"""A trained model as plain data: its settings and fitted attributes, without scikit-learn.

:class:`FittedModel` holds what a :class:`~streamwww.WWClassifier` holds after ``fit``
(``coef_``, ``intercept_``, ``classes_``, ``history_``, ...) and its settings (``params``,
``get_params()`` without ``client``).  :func:`streamwww.api.train_fitted` returns these
records and :func:`streamwww.model.files.save_model` writes them; the estimators are built
from them (``WWClassifier.from_fitted``) only where a user asks for estimators.  Why a second form: importing
scikit-learn is slow (it imports SciPy's statistics and, when installed, pandas), which the
command line would pay before every small job only to write a model file
(docs/benchmarks.md, "Everyday commands").
"""

from __future__ import annotations

import numpy as np

__all__ = ["FittedModel", "SETTINGS", "model_settings", "model_params", "fitted_attributes", "fitted_models",
           "all_class_scores", "class_scores", "predicted_labels"]

#: The model settings of :class:`~streamwww.WWClassifier`: its constructor's
#: parameters without ``client`` (a connection, not a setting), in ``get_params()``
#: order. ``tests/test_fitted.py`` checks this against the estimator.
SETTINGS = ("C", "block_rows", "class_weight", "device", "fit_intercept", "gap_decay", "intercept_scaling",
            "max_iter", "n_jobs", "random_state", "shrinking", "subproblem", "tol", "verbose", "warm_start")


def model_settings(loss: str = "ww", **values) -> dict:
    """The settings dict of a model with these values (every name of :data:`SETTINGS`), and
    ``loss`` where it is not Weston-Watkins (:func:`model_params`)."""
    if set(values) != set(SETTINGS):
        missing, extra = sorted(set(SETTINGS) - set(values)), sorted(set(values) - set(SETTINGS))
        raise TypeError(f"model_settings: missing {missing}, unknown {extra}")
    return {**{k: values[k] for k in SETTINGS}, **({} if loss == "ww" else {"loss": loss})}


def all_class_scores(coef: np.ndarray, intercept: np.ndarray, X) -> np.ndarray:
    """Every class's score ``X @ coef.T + intercept`` (float64, n_rows x n_classes)."""
    return np.asarray(X @ coef.T, dtype=np.float64) + intercept


def class_scores(coef: np.ndarray, intercept: np.ndarray, X) -> np.ndarray:
    """Class scores :func:`all_class_scores`; with two classes the one column ``s_1 - s_0``
    (scikit-learn's binary convention)."""
    scores = all_class_scores(coef, intercept, X)
    if scores.shape[1] == 2:
        return scores[:, 1] - scores[:, 0]
    return scores


def predicted_labels(classes, scores: np.ndarray) -> np.ndarray:
    """The class with the largest score of each row (:func:`class_scores`' layout)."""
    classes = np.asarray(classes)
    if scores.ndim == 1:
        return classes[(scores > 0).astype(np.intp)]
    return classes[np.argmax(scores, axis=1)]


def model_params(model) -> dict:
    """An estimator's ``get_params()`` without what is not a model setting (``client``):
    what fits, manifests and model files take.  The loss is its class's (``WWClassifier``,
    ``CSClassifier``), named as ``"loss"`` only where it is not Weston-Watkins: records
    without it are Weston-Watkins models."""
    params = {k: v for k, v in model.get_params().items() if k != "client"}
    loss = getattr(model, "_loss", "ww")
    return params if loss == "ww" else {**params, "loss": loss}


def _fitted_vars(obj) -> dict:
    """The fitted attributes of ``obj``: its public names that end in ``_``."""
    return {k: v for k, v in vars(obj).items() if k.endswith("_") and not k.startswith("_")}


def fitted_attributes(fit, j: int, source) -> dict:
    """The estimator attributes of the ``j``-th model of ``fit`` (a
    :class:`~streamwww.engine.run.Fit`) on ``source``."""
    result = fit.results[j]
    coef, intercept = fit.cfg.coef_intercept(result.W, source.data.n_features)
    return {"classes_": source.classes, "coef_": coef, "intercept_": intercept,
            "n_iter_": int(result.n_iter), "history_": list(result.history),
            "converged_": bool(result.converged), "seed_": int(fit.seed), "device_": fit.device}


class FittedModel:
    """A trained model's settings (``params``) and fitted attributes, as plain data.

    The attributes are the estimator's: ``classes_``, ``coef_``, ``intercept_``,
    ``n_iter_``, ``history_``, ``converged_``, ``seed_``, ``n_features_in_``, and where
    known ``device_`` and ``feature_names_in_``; ``C`` is ``params["C"]``.
    """

    def __init__(self, params: dict, attributes: dict):
        self.params = dict(params)
        for name, value in attributes.items():
            setattr(self, name, value)

    @property
    def C(self) -> float:
        return self.params["C"]

    @property
    def loss(self) -> str:
        """``'ww'`` (Weston-Watkins) or ``'cs'`` (Crammer-Singer)."""
        return self.params.get("loss", "ww")

    def attributes(self) -> dict:
        """The fitted attributes (the names that end in ``_``)."""
        return _fitted_vars(self)

    @classmethod
    def of(cls, estimator) -> "FittedModel":
        """The record of a fitted estimator (``NotFittedError`` if it is not fitted)."""
        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(estimator)
        return cls(model_params(estimator), _fitted_vars(estimator))

    def decision_function(self, X) -> np.ndarray:
        """Class scores of rows ``X`` already read and checked (a CSR matrix or an ndarray):
        :func:`class_scores`, as the estimator's ``decision_function`` gives them."""
        if X.ndim != 2 or X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[-1]} features, but the model is expecting "
                             f"{self.n_features_in_} features as input")
        return class_scores(self.coef_, self.intercept_, X)

    def predict(self, X) -> np.ndarray:
        """Predicted class labels of rows ``X`` (as in :meth:`decision_function`)."""
        return predicted_labels(self.classes_, self.decision_function(X))

    def __repr__(self) -> str:
        loss = "" if self.loss == "ww" else f"loss={self.loss!r}, "
        return (f"FittedModel({loss}C={self.C:g}, classes={len(np.asarray(self.classes_))}, "
                f"n_features_in={self.n_features_in_}, n_iter={self.n_iter_})")


def fitted_models(fit, source, params: dict, n_features_in: int, feature_names=None) -> list[FittedModel]:
    """One :class:`FittedModel` per ``C`` of ``fit`` (a :class:`~streamwww.engine.run.Fit`)."""
    models = []
    for j, c in enumerate(fit.cfg.Cs):
        attrs = {**fitted_attributes(fit, j, source), "n_features_in_": int(n_features_in)}
        if feature_names is not None:
            attrs["feature_names_in_"] = feature_names
        models.append(FittedModel({**params, "C": c}, attrs))
    return models
