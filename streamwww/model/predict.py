"""Batched prediction and evaluation over shard stores and LIBSVM files (streamed), and
:func:`write_predictions` for stores larger than memory."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator

import numpy as np
import scipy.sparse as sp

from streamwww.model.fitted import all_class_scores, predicted_labels

__all__ = ["iter_batches", "predict_labels", "predict_scores", "evaluate", "write_predictions"]


def iter_batches(source, n_features: int, *, zero_based: bool = False,
                 storage_options: dict | None = None) -> Iterator[tuple[object, np.ndarray]]:
    """Yield ``(X, true_labels)`` blocks of a store (per shard) or a LIBSVM file (per block).

    ``source`` is a store object, or the path or URL (with ``storage_options``)
    of a store or a LIBSVM file. ``true_labels`` are the original label values
    (the store's ``classes`` applied).
    """
    source = opened(source, storage_options)
    if hasattr(source, "read_shard"):
        from streamwww.stream.sources import store_shards

        yield from store_shards(source, n_features)
    else:
        from streamwww.io import iter_libsvm_blocks

        for block in iter_libsvm_blocks(source, zero_based=zero_based, n_features=n_features):
            X = sp.csr_matrix((block.data, block.indices, block.indptr),
                              shape=(len(block.labels), n_features))
            yield X, block.labels


def opened(source, storage_options: dict | None = None):
    """``source`` as :func:`iter_batches` reads it: a store object (opened here from its path
    or URL), or the Location of a LIBSVM file."""
    if hasattr(source, "read_shard"):
        return source
    from streamwww.storage.location import located

    where = located(source, storage_options)
    if not where.isdir():
        return where
    from streamwww.io import open_store

    return open_store(where)


def predict_labels(model, source, **kw) -> Iterator[np.ndarray]:
    """Predicted labels for each block of ``source`` (store or LIBSVM file)."""
    for X, _ in iter_batches(source, model.n_features_in_, **kw):
        yield model.predict(X)


def predict_scores(model, source, **kw) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """``(labels, scores)`` for each block of ``source``: the predicted labels and every
    class's score ``x . coef_[c] + intercept_[c]`` (n_rows, n_classes, in ``classes_``
    order; two columns for two classes, where ``decision_function`` gives their difference)."""
    for X, _ in iter_batches(source, model.n_features_in_, **kw):
        scores = all_class_scores(model.coef_, model.intercept_, X)
        yield predicted_labels(model.classes_, scores), scores


def _class_index(classes: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Index of each label in the sorted ``classes``; ``len(classes)`` for a label the model does not know."""
    if classes.dtype.kind in "fiu":
        classes, labels = classes.astype(np.float64), np.asarray(labels).astype(np.float64)
    else:
        classes, labels = classes.astype(str), np.asarray(labels).astype(str)
    pos = np.minimum(np.searchsorted(classes, labels), len(classes) - 1)
    return np.where(classes[pos] == labels, pos, len(classes))


# the labels the model never saw that evaluate() names (the count covers all of them)
UNKNOWN_SHOWN = 10


def evaluate(model, source, *, confusion: bool = False, **kw) -> dict:
    """Accuracy (and optionally the confusion matrix) of ``model`` on a store or LIBSVM file.

    Returns
    -------
    dict
        ``n_rows``, ``n_correct``, ``accuracy`` (fraction), ``n_unknown`` (rows whose
        label the model never saw: counted as wrong), ``unknown_labels`` (those labels,
        sorted, at most :data:`UNKNOWN_SHOWN` of them: the smallest of those seen until
        there were more), ``more_unknown`` (whether there are others), ``n_features``
        (a store's feature count, which may differ from the model's: the model's
        features it lacks are 0; None for a LIBSVM file, whose indices beyond the
        model's are refused as it is read) and, with
        ``confusion=True``, ``labels`` and ``confusion`` (rows: true label, with a
        last row for labels the model never saw; columns: predicted).
    """
    classes = np.asarray(model.classes_)
    k = len(classes)
    source = opened(source, kw.get("storage_options"))  # (once: its metadata checked once)
    n_features = int(source.n_features) if hasattr(source, "read_shard") else None
    n = correct = n_unknown = 0
    unknown: set = set()
    cm = np.zeros((k + 1, k), dtype=np.int64) if confusion else None
    for X, true in iter_batches(source, model.n_features_in_, **kw):
        ti = _class_index(classes, true)
        pi = _class_index(classes, model.predict(X))
        n += len(true)
        correct += int(np.count_nonzero(ti == pi))
        new = ti == k
        if new.any():
            n_unknown += int(np.count_nonzero(new))
            if len(unknown) <= UNKNOWN_SHOWN:  # (one more than shown: are there others)
                unknown.update(np.unique(np.asarray(true)[new]).tolist()[:UNKNOWN_SHOWN + 1])
        if confusion:
            np.add.at(cm, (ti, pi), 1)
    out = {"n_rows": n, "n_correct": correct, "accuracy": correct / n if n else float("nan"),
           "n_unknown": n_unknown, "unknown_labels": sorted(unknown)[:UNKNOWN_SHOWN],
           "more_unknown": len(unknown) > UNKNOWN_SHOWN, "n_features": n_features}
    if confusion:
        out["labels"] = classes
        out["confusion"] = cm
    return out


# The mark of a complete predictions output, written last.  Its leading underscore keeps it
# out of a Parquet dataset's files (pyarrow, pandas and Spark skip such names), so the
# output folder reads as one dataset.
PREDICTIONS_MARKER = "_predictions.json"
# What an output of an earlier version holds (marked by predictions.json on object stores,
# by nothing on a local disk): replaceable with overwrite.
_EARLIER_OUTPUT = re.compile(r"^(?:zarr\.json|shard-\d{5}|part-\d{5}\.parquet|_?predictions\.json)$")


def _earlier_output(names) -> bool:
    """Whether a folder holding ``names`` is a predictions output (of any version)."""
    return bool(names) and all(_EARLIER_OUTPUT.match(n) for n in names)


def write_predictions(model, store, output, *, scores: bool = False, format: str = "zarr",
                      overwrite: bool = False, storage_options: dict | None = None):
    """Write the predicted labels (or class scores) of every row of a shard store, shard by shard.

    Memory holds one shard and its output; the store may be larger than memory.

    Parameters
    ----------
    model : WWClassifier
        A fitted model.
    store : str, Path or ShardStore
        The store (a path or a URL).
    output : str or Path
        A directory, written under a temporary name and renamed when complete;
        or a URL (``s3://...``): there the parts go to their final keys.  Either way
        ``_predictions.json`` (kind, format, shards, classes) is written last, the
        mark of a complete output (docs/STORAGE.md); Parquet readers skip it.
    scores : bool, default=False
        Write ``decision_function`` values (n_rows, n_classes; (n_rows,) for two
        classes) instead of labels.
    format : {'zarr', 'parquet'}, default='zarr'
        ``zarr``: a Zarr v3 group with one array per shard, ``shard-00000``, ...
        (labels as float64 for numeric classes, else as int32 indices into the
        group attribute ``classes``). ``parquet``: one file per shard,
        ``part-00000.parquet``, with a column ``label`` or ``score_<class>`` per class.
    overwrite : bool, default=False
        Replace an earlier predictions output at ``output`` (never anything else: a
        folder holding other files is refused).
    storage_options : dict, optional
        Options of the file system of URLs among ``store`` and ``output``.

    Returns
    -------
    Path or str
        ``output`` (its URL for an object store). Row ``r`` of shard ``s`` is row
        ``r`` of the store's shard ``s``.
    """
    from streamwww.io import open_store

    if format not in ("zarr", "parquet"):
        raise ValueError(f"The 'format' parameter of write_predictions must be 'zarr' or 'parquet'. "
                         f"Got {format!r} instead.")
    from streamwww.storage.location import located

    store = store if hasattr(store, "read_shard") else open_store(located(store, storage_options))
    where = located(output, storage_options)
    return _write_predictions(model, store, where, scores=scores, format=format, overwrite=overwrite)


def _write_part(where, i: int, out: np.ndarray, classes: np.ndarray, scores: bool, format: str) -> None:
    """Shard ``i``'s predictions: an array of the Zarr group ``where``, or a Parquet file
    in the directory (Path or Location) ``where``."""
    if format == "zarr":
        if not scores and classes.dtype.kind not in "biuf":
            out = np.searchsorted(classes, out).astype(np.int32)
        dtype = np.float64 if scores or classes.dtype.kind in "biuf" else np.int32
        where.create_array(f"shard-{i:05d}", data=np.asarray(out, dtype=dtype), chunks=out.shape or (1,))
        return
    import pyarrow as pa
    import pyarrow.parquet as pq

    from streamwww._arrow import from_numpy
    from streamwww.labels import format_label

    if scores:
        cols = {"score": out} if out.ndim == 1 else \
            {f"score_{format_label(c)}": out[:, j] for j, c in enumerate(classes)}
    else:
        cols = {"label": out}
    table = pa.table({key: from_numpy(col) for key, col in cols.items()})
    name = f"part-{i:05d}.parquet"
    if isinstance(where, Path):
        pq.write_table(table, where / name)
        return
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    where.child(name).write_bytes(sink.getvalue().to_pybytes())


def _write_predictions(model, store, where, *, scores: bool, format: str, overwrite: bool):
    """:func:`write_predictions` through a store's transaction (io._transaction): on a local
    disk a temporary sibling folder, fsynced and renamed into place; on an object store the
    parts at their final keys; the ``_predictions.json`` marker last either way."""
    import zarr

    from streamwww.io.writer import open_transaction
    from streamwww.stream.sources import store_shards

    classes = np.asarray(model.classes_)
    meta = {"kind": "scores" if scores else "labels", "format": format, "n_shards": int(store.n_shards),
            "classes": [c.item() if hasattr(c, "item") else c for c in classes]}
    local = where.is_local
    with open_transaction(where, overwrite, marker=PREDICTIONS_MARKER, replaceable=_earlier_output) as tx:
        group = None
        if format == "zarr":
            group = zarr.open_group(str(tx.tmp) if local else where.zarr_store(), mode="w" if local else "a",
                                    zarr_format=3)
            group.attrs.update({k: meta[k] for k in ("kind", "n_shards", "classes")})
        for i, (X, _) in enumerate(store_shards(store, model.n_features_in_)):
            out = model.decision_function(X) if scores else model.predict(X)
            _write_part(group if format == "zarr" else tx.tmp, i, out, classes, scores, format)
        tx.commit(meta)
    return where.local_path if local else where.url
