"""Row weights: ``class_weight`` and ``sample_weight`` validated and combined.

A row of weight ``w_i`` has the dual box ``[0, C w_i]`` and counts ``w_i`` times
in the primal's hinge sum (DESIGN.md; the kernels apply it): an integer weight
is the same optimum as the row repeated that many times.  The conventions are
scikit-learn's (``class_weight`` a dict ``{label: weight}`` or ``"balanced"``,
``n_samples / (n_classes * count(label))``, computed from the unweighted label
counts as :class:`sklearn.svm.LinearSVC` does; the two multiply).
"""

from __future__ import annotations

import numpy as np

__all__ = ["class_weight_vector", "row_weights", "check_sample_weight", "first_bad_weight"]


def class_weight_vector(class_weight, classes, counts, owner: str) -> np.ndarray | None:
    """Per class index, its weight (float64), or None when every class weighs 1.

    Parameters
    ----------
    class_weight : dict, 'balanced' or None
    classes : ndarray of shape (n_classes,)
        The labels, in class-index order.
    counts : ndarray of shape (n_classes,)
        Rows per class (for 'balanced').
    owner : str
        Named in errors.
    """
    if class_weight is None:
        return None
    classes = np.asarray(classes)
    if isinstance(class_weight, (list, np.ndarray)):  # a resolved vector, as a checkpoint records it
        cw = np.asarray(class_weight, dtype=np.float64)
        if cw.shape != (len(classes),):
            raise ValueError(f"{owner}: class_weight vector of shape {cw.shape}, expected ({len(classes)},)")
        return None if np.all(cw == 1.0) else cw
    counts = np.asarray(counts, dtype=np.float64)
    if isinstance(class_weight, str):
        if class_weight != "balanced":
            raise ValueError(f"The 'class_weight' parameter of {owner} must be a dict, 'balanced' or None. "
                             f"Got {class_weight!r} instead.")
        present = counts > 0
        cw = np.zeros(len(classes))
        cw[present] = counts.sum() / (present.sum() * counts[present])
    elif isinstance(class_weight, dict):
        cw = np.ones(len(classes))
        index = {_key(c): j for j, c in enumerate(classes.tolist())}
        for label, w in class_weight.items():
            j = index.get(_key(label))
            if j is None:
                raise ValueError(f"{owner}: class_weight names the label {label!r}, which is not a class "
                                 f"of the data (classes: {classes.tolist()})")
            w = float(w)
            if not np.isfinite(w) or w < 0:
                raise ValueError(f"{owner}: class_weight[{label!r}] must be a finite number >= 0. Got {w!r}.")
            cw[j] = w
    else:
        raise ValueError(f"The 'class_weight' parameter of {owner} must be a dict, 'balanced' or None. "
                         f"Got {type(class_weight).__name__} instead.")
    return None if np.all(cw == 1.0) else cw


def _key(label):
    """Labels compare by value across NumPy and Python scalar types (``1 == np.int32(1)``)."""
    return label.item() if isinstance(label, np.generic) else label


def first_bad_weight(w: np.ndarray) -> int | None:
    """Index of the first weight that is not finite or is negative, or None."""
    bad = ~(np.isfinite(w) & (w >= 0))
    return int(np.argmax(bad)) if bad.any() else None


def check_sample_weight(sample_weight, n_rows: int, owner: str) -> np.ndarray | None:
    """``sample_weight`` as float64 of shape ``(n_rows,)``: finite, >= 0, not all 0; None stays None.
    A scalar weighs every row alike, as in scikit-learn."""
    if sample_weight is None:
        return None
    try:
        w = np.asarray(sample_weight, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{owner}: sample_weight must be numbers: {exc}") from None
    if w.ndim == 0:
        w = np.full(n_rows, float(w))
    if w.shape != (n_rows,):
        raise ValueError(f"{owner}: sample_weight has shape {w.shape}; expected ({n_rows},), one weight per row")
    if (bad := first_bad_weight(w)) is not None:
        raise ValueError(f"{owner}: sample_weight[{bad}] is {float(w[bad])!r}; weights must be finite and >= 0")
    if not np.any(w > 0):
        # "zero": scikit-learn's estimator checks look for the word
        raise ValueError(f"{owner}: every sample_weight is zero; at least one row needs a positive weight")
    return w


def row_weights(y_index, cw, sample_weight, owner: str) -> np.ndarray | None:
    """Each row's weight ``cw[y_i] * sample_weight_i`` (float64), or None when all are 1.

    ``cw`` is :func:`class_weight_vector`'s result (None: every class weighs 1).
    """
    y_index = np.asarray(y_index)
    sw = check_sample_weight(sample_weight, y_index.shape[0], owner)
    if cw is None and (sw is None or np.all(sw == 1.0)):
        return None
    w = np.ones(y_index.shape[0]) if sw is None else sw.copy()
    if cw is not None:
        w *= cw[y_index]
    if not np.any(w > 0):
        raise ValueError(f"{owner}: every row has weight zero (class_weight x sample_weight)")
    return w
