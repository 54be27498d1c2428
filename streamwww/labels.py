"""Labels: the one mapping of label values to class indices, and how labels are shown.

Used by the estimator (arrays: ``classes_`` keeps the labels' dtype) and by
the store writers (numbers as float64, strings as ``str``).
"""

from __future__ import annotations

import numpy as np

from streamwww.errors import DataFormatError

__all__ = ["check_n_classes", "classification_targets", "encode_labels", "format_label", "summarize_classes"]


def classification_targets(y) -> np.ndarray:
    """``y`` as 1-D labels under scikit-learn's rules for classifiers (not continuous)."""
    # scikit-learn loads on first use: convert, info and predict of a store need it not
    # (its import would be a large part of every command's start-up; docs/benchmarks.md,
    # "Everyday commands")
    from sklearn.utils.multiclass import check_classification_targets
    from sklearn.utils.validation import column_or_1d

    y = column_or_1d(y, warn=True)
    check_classification_targets(y)
    return y


def encode_labels(y, classes=None, who: str = "write_store", *, keep_dtype: bool = False,
                  min_classes: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Map label values to class indices: the one rule for arrays and stores.

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels: numbers or strings, finite.
    classes : array-like, optional
        The allowed classes; a label outside them is an error that names it.
    who : str
        The caller, named in error messages.
    keep_dtype : bool, default=False
        Keep the labels' own dtype for ``classes`` (scikit-learn's ``classes_``);
        by default numbers become float64 and strings ``str`` (what a store holds).
    min_classes : int, default=1
        Fewer distinct classes is an error (an estimator needs two).

    Returns
    -------
    classes : ndarray
        The sorted unique classes.
    y_index : ndarray of int32
        Indices of ``y`` into ``classes``.
    """
    y = np.asarray(y)
    if y.ndim != 1:
        raise DataFormatError(f"{who}: y must be 1-D. Got an array of shape {y.shape} instead.")

    def as_labels(a, name):
        a = np.asarray(a)
        if a.dtype.kind in "biuf":
            if a.dtype.kind == "f" and not np.all(np.isfinite(a)):
                raise DataFormatError(f"{who}: {name} contains NaN or infinite labels.")
            if a.dtype.kind in "iu" and not keep_dtype:  # (float64 merges integers beyond 2**53)
                big = np.flatnonzero((a > 2**53) | (a < -(2**53)))
                if len(big):
                    raise DataFormatError(
                        f"{who}: label {a[big[0]]} (row {big[0]}) of {name} is beyond 2**53 = "
                        f"9007199254740992: a store keeps numeric labels as float64, which cannot "
                        f"tell such integers apart; number the classes with smaller labels.")
            return a if keep_dtype else a.astype(np.float64)
        if a.dtype.kind in "USO":
            try:
                return a if keep_dtype else a.astype(str)
            except (TypeError, ValueError) as exc:
                raise DataFormatError(f"{who}: {name} must hold numbers or strings.") from exc
        raise DataFormatError(f"{who}: {name} must hold numbers or strings. "
                              f"Got dtype {a.dtype} instead.")

    values = as_labels(y, "y")
    if classes is None:
        cls = np.unique(values)
    else:
        cls = as_labels(classes, "classes")
        if cls.ndim != 1 or len(np.unique(cls)) != len(cls):
            raise DataFormatError(f"{who}: classes must be 1-D without repeated values.")
        if cls.dtype.kind != values.dtype.kind and len(values):
            raise DataFormatError(f"{who}: y holds {values.dtype.kind!r}-kind labels but "
                                  f"classes holds {cls.dtype.kind!r}-kind ones.")
        cls = np.sort(cls)
    idx = np.searchsorted(cls, values)
    bad = (idx >= len(cls)) | (cls[np.minimum(idx, len(cls) - 1)] != values) if len(cls) \
        else np.ones(len(values), dtype=bool)
    check_n_classes(cls, who, min_classes)
    if bad.any():
        first = int(np.argmax(bad))
        raise DataFormatError(f"{who}: label {format_label(values[first])} (row {first}) is not "
                              f"one of the classes {summarize_classes(cls)}.")
    return cls, idx.astype(np.int32)


def check_n_classes(classes, who: str, min_classes: int = 2, where: str | None = None) -> None:
    """Raise scikit-learn's ``ValueError`` when ``classes`` are fewer than ``min_classes``
    (``who`` needs them; ``where``: the store they come from, for a message that names it)."""
    if len(classes) >= min_classes:
        return
    text = (f"the number of classes has to be greater than one; got {len(classes)} class"
            + (f" (label {format_label(classes[0])})" if len(classes) else "")
            + f". {who} needs at least {min_classes} classes.")
    raise ValueError(f"{where}: {text}" if where is not None else text[0].upper() + text[1:])


def format_label(value) -> str:
    """Label as a user wrote it: ``3`` rather than ``3.0``."""
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return repr(value.item() if isinstance(value, np.generic) else value)


def summarize_classes(classes, limit: int = 8, more: bool = False) -> str:
    """``[1, 2, 3, ... 26]``-style summary of a class list; ``more``: the list is the start
    of a longer one whose end is not known (``[4, 5, 6, ...]``)."""
    shown = [format_label(c) for c in classes[:limit]]
    if more:
        shown.append("...")
    elif len(classes) > limit:
        shown.append(f"... {format_label(classes[-1])}")
    return "[" + ", ".join(shown) + "]"
