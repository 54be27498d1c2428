"""Batched prediction and evaluation over shard stores and LIBSVM files (streamed)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import numpy as np
import scipy.sparse as sp

from streamwww.errors import DataFormatError

__all__ = ["iter_batches", "predict_labels", "evaluate"]


def _is_store(path) -> bool:
    return Path(path).is_dir()


def _fit_width(X, n_features: int, where: str):
    """Pad rows with fewer columns than the model (LIBSVM files omit trailing zeros)."""
    if X.shape[1] == n_features:
        return X
    if X.shape[1] > n_features:
        raise DataFormatError(f"{where}: rows have {X.shape[1]} features but the model was trained "
                              f"with {n_features}")
    if sp.issparse(X):
        X = sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.shape[0], n_features))
    else:
        X = np.hstack([X, np.zeros((X.shape[0], n_features - X.shape[1]), dtype=X.dtype)])
    return X


def iter_batches(source, n_features: int, *, zero_based: bool = False) -> Iterator[tuple[object, np.ndarray]]:
    """Yield ``(X, true_labels)`` blocks of a store (per shard) or a LIBSVM file (per block).

    ``true_labels`` are the original label values (the store's ``classes`` applied).
    """
    if hasattr(source, "read_shard") or (isinstance(source, (str, os.PathLike)) and _is_store(source)):
        from streamwww.io import open_store

        store = source if hasattr(source, "read_shard") else open_store(source)
        for i in range(store.n_shards):
            X, y = store.read_shard(i)
            yield _fit_width(X, n_features, f"{store.path} shard {i}"), np.asarray(store.classes)[y]
    else:
        from streamwww.io import iter_libsvm_blocks

        for block in iter_libsvm_blocks(source, zero_based=zero_based, n_features=n_features):
            X = sp.csr_matrix((block.data, block.indices, block.indptr),
                              shape=(len(block.labels), n_features))
            yield X, block.labels


def predict_labels(model, source, **kw) -> Iterator[np.ndarray]:
    """Predicted labels for each block of ``source`` (store or LIBSVM file)."""
    for X, _ in iter_batches(source, model.n_features_in_, **kw):
        yield model.predict(X)


def _same_labels(pred: np.ndarray, true: np.ndarray) -> np.ndarray:
    if pred.dtype.kind in "fiu" and true.dtype.kind in "fiu":
        return pred.astype(np.float64) == true.astype(np.float64)
    return pred.astype(str) == true.astype(str)


def evaluate(model, source, *, confusion: bool = False, **kw) -> dict:
    """Accuracy (and optionally the confusion matrix) of ``model`` on a store or LIBSVM file.

    Returns
    -------
    dict
        ``n_rows``, ``n_correct``, ``accuracy`` (fraction) and, with
        ``confusion=True``, ``labels`` and ``confusion`` (rows: true, columns: predicted).
    """
    classes = np.asarray(model.classes_)
    n = correct = 0
    cm = None
    if confusion:
        cm = np.zeros((len(classes) + 1, len(classes) + 1), dtype=np.int64)  # last: unknown label
    for X, true in iter_batches(source, model.n_features_in_, **kw):
        pred = model.predict(X)
        ok = _same_labels(pred, true)
        n += len(true)
        correct += int(ok.sum())
        if confusion:
            lookup = {str(float(c)) if classes.dtype.kind in "fiu" else str(c): i for i, c in enumerate(classes)}
            key = (lambda v: str(float(v))) if classes.dtype.kind in "fiu" else str
            ti = np.array([lookup.get(key(t), len(classes)) for t in true])
            pi = np.array([lookup[key(p)] for p in pred])
            np.add.at(cm, (ti, pi), 1)
    out = {"n_rows": n, "n_correct": correct, "accuracy": correct / n if n else float("nan")}
    if confusion:
        out["labels"] = classes
        out["confusion"] = cm
    return out
