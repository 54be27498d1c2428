"""Writing shard stores: :class:`ShardWriter` cuts a stream of row blocks into shards,
:func:`write_store` writes in-memory arrays as a store, :func:`build_metadata` is the
store's ``streamwww.json``. Writing goes through a transaction
(:mod:`streamwww.io._transaction`: on a local disk a temporary sibling directory, the
``streamwww.json`` commit marker written last, fsync, then a rename; on an object store
the marker as the last PUT) so that a failed or killed write leaves nothing that opens
as a store.
"""

from __future__ import annotations

import datetime as _dt
import logging
import os
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from streamwww import __version__
from streamwww._params import check_int
from streamwww.errors import DataFormatError
from streamwww.io._backend import get_backend
from streamwww.io._format import (
    DOCUMENT_CHECKSUM_KEY,
    DTYPES,
    FORMAT_NAME,
    LAYOUTS,
    MAX_SHARD_NNZ,
    METADATA_HASH_KEY,
    fingerprint,
    format_version_for,
    index_dtype,
    labels_to_json,
    metadata_hash,
)
from streamwww.io._progress import ProgressCallback, ProgressEvent
from streamwww.io._shardsink import ShardPool, open_sink
from streamwww.io._transaction import open_transaction
from streamwww.io._zarrcodec import local_codec
from streamwww.io._zarrwriter import Writers
from streamwww.io.store import ShardStore, open_store
from streamwww.labels import encode_labels
from streamwww.storage.location import Location, location
from streamwww.weights import check_sample_weight

__all__ = ["ShardWriter", "build_metadata", "write_store"]

logger = logging.getLogger(__name__)

# The default maximum in-memory MiB per shard, per format.  A Parquet shard is one row
# group, assembled whole in memory and written by pyarrow on one thread: at 16 MiB two
# are written beside the one being collected (ShardWriter's pool), where larger ones
# are written one at a time on the collecting thread, slower and with more peak memory
# (docs/benchmarks-convert.md, "Parquet's default shard size").
# Zarr shards are written chunk by chunk as their rows arrive, whatever their size.
DEFAULT_SHARD_MB = {"zarr": 128.0, "parquet": 16.0}
DENSE_THRESHOLD = 0.5  # layout="auto" stores dense at or above this density


def resolve_shard_size(shard_rows: int | None, shard_mb: float | None,
                       who: str, format: str = "zarr") -> tuple[int | None, int | None]:
    """Validate the shard size options; return ``(shard_rows, shard_bytes)`` (without either,
    the ``format``'s :data:`DEFAULT_SHARD_MB`)."""
    if shard_rows is not None and shard_mb is not None:
        raise ValueError(f"{who}: give 'shard_rows' or 'shard_mb', not both.")
    if shard_rows is not None:
        check_int(who, "shard_rows", shard_rows, low=1)
        return int(shard_rows), None
    mb = DEFAULT_SHARD_MB[format] if shard_mb is None else shard_mb
    if isinstance(mb, bool) or not isinstance(mb, (int, float, np.number)) or not mb > 0:
        raise ValueError(f"The 'shard_mb' parameter of {who} must be a float in (0, inf). "
                         f"Got {shard_mb!r} instead.")
    return None, max(1, int(mb * 2**20))


def resolve_layout(layout: str, n_rows: int, n_features: int, nnz: int, who: str) -> str:
    """Return ``"sparse"`` or ``"dense"`` for ``layout`` in auto/sparse/dense."""
    if layout not in ("auto", *LAYOUTS):
        raise ValueError(f"The 'layout' parameter of {who} must be one of "
                         f"['auto', 'sparse', 'dense']. Got {layout!r} instead.")
    if layout != "auto":
        return layout
    cells = n_rows * n_features
    return "dense" if cells and nnz / cells >= DENSE_THRESHOLD else "sparse"


def resolve_dtype(dtype, who: str) -> np.dtype:
    """Validate a value dtype (float32 or float64)."""
    try:
        dt = np.dtype(dtype)
    except TypeError:
        dt = None
    if dt is None or dt.name not in DTYPES:
        raise ValueError(f"The 'dtype' parameter of {who} must be float32 or float64. "
                         f"Got {dtype!r} instead.")
    return dt


def _row_slice(X, start: int, stop: int):
    """Rows ``start:stop`` of a CSR matrix (views of its index and value arrays,
    no copy: ``X[start:stop]`` copies them) or of an array."""
    if (start, stop) == (0, X.shape[0]):
        return X
    if not (sp.issparse(X) and X.format == "csr"):
        return X[start:stop]
    a, b = int(X.indptr[start]), int(X.indptr[stop])
    part = sp.csr_matrix((X.data[a:b], X.indices[a:b], X.indptr[start:stop + 1] - a),
                         shape=(stop - start, X.shape[1]), copy=False)
    part.has_sorted_indices = X.has_sorted_indices
    return part


# Bytes of buffered shards (Parquet) that may be written on threads beside the one
# being collected (streamwww.io._shardsink.ShardPool): two shards of Parquet's default
# size at a time; a larger shard is written on the collecting thread, so that memory
# holds one such shard.
_POOL_SHARD_BYTES = int(2 * DEFAULT_SHARD_MB["parquet"] * 2**20)


class ShardWriter:
    """Cut a stream of row blocks into shards and write them with a backend.

    ``push(X, y, weight)`` takes CSR or dense rows with ``n_features`` columns,
    int32 class indices and, for a store with weights (``weighted=True``), their
    float64 sample weights (checked finite and >= 0 by the caller); shards are cut by rows or by their in-memory bytes in
    the target layout (always at least one row, at most ``MAX_SHARD_NNZ``
    values). Each shard's rows go to a sink (:mod:`streamwww.io._shardsink`):
    Zarr chunks are written as soon as they are full, so memory stays at a few
    chunks whatever the shard size; other formats hold one shard.
    """

    def __init__(self, root: Path | Location, backend, *, layout: str, n_features: int,
                 dtype: np.dtype, n_classes: int, shard_rows: int | None, shard_bytes: int | None,
                 progress: ProgressCallback | None = None, total_rows: int | None = None,
                 weighted: bool = False, scratch: Path | None = None):
        self.root, self.backend = root, backend
        # local room for the streamed sinks' spool files (the root itself when it is local)
        self.scratch = location(root).local_path if scratch is None else scratch
        self.weighted = bool(weighted)
        self.layout, self.n_features, self.dtype = layout, n_features, dtype
        self.shard_rows, self.shard_bytes = shard_rows, shard_bytes
        self.progress, self.total_rows = progress, total_rows
        self.shards: list[dict] = []
        self.class_counts = np.zeros(n_classes, dtype=np.int64)
        # Bytes once read (see shard_nbytes): per row, y and the row's values
        # (+ one indptr entry); per shard, indptr's extra entry.
        self._isize = index_dtype(0, n_features).itemsize
        self._base = self._isize if layout == "sparse" else 0
        self._sink = None  # the shard being filled (streamwww.io._shardsink)
        self._class_counts_open = np.zeros(n_classes, dtype=np.int64)
        self._rows = self._nnz = 0
        self._bytes = self._base
        self._written_rows = 0
        # Zarr on a local disk: chunks encoded, written and hashed by two threads
        # (streamwww.io._zarrwriter); each closed shard's record waits for them
        self._codec = local_codec(root, backend, (np.int64, np.int32, dtype, np.float64))
        self._writers = None
        # other formats on a local disk: whole shards written on threads (small ones)
        self._pool = None
        if self._codec is None and backend.name != "zarr" and location(root).is_local:
            self._pool = ShardPool(max(1, min(2, os.cpu_count() or 1)), _POOL_SHARD_BYTES)
        self._closed: list[tuple] = []  # (index, offset, class counts, result or its future)

    _sink_options: dict = {}  # more arguments of open_sink (streamwww.io._early)

    def __enter__(self) -> ShardWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stop the writer thread, if any (after an error: the jobs not started are
        dropped). :meth:`finish` closes it too."""
        if self._writers is not None:
            self._writers.close()
            self._writers = None
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def _row_costs(self, X) -> tuple[np.ndarray, np.ndarray]:
        """Per-row (bytes once read, stored values) in the target layout."""
        n = X.shape[0]
        if self.layout == "dense":
            width = np.full(n, self.n_features, dtype=np.int64)
            return width * self.dtype.itemsize + 4, width
        nnz = np.diff(X.indptr) if sp.issparse(X) else np.count_nonzero(X, axis=1)
        nnz = nnz.astype(np.int64)
        return nnz * (self.dtype.itemsize + self._isize) + self._isize + 4, nnz

    def push(self, X, y: np.ndarray, weight: np.ndarray | None = None) -> None:
        n = X.shape[0]
        if X.shape[1] != self.n_features:
            raise ValueError(f"ShardWriter.push: rows have {X.shape[1]} columns; "
                             f"expected {self.n_features}")
        if (weight is not None) != self.weighted or (weight is not None and len(weight) != n):
            raise ValueError(f"ShardWriter.push: a writer with weighted={self.weighted} got "
                             f"{'no' if weight is None else len(weight)} weights for {n} rows")
        cost, nnz = self._row_costs(X)
        cum_bytes = np.concatenate([[0], np.cumsum(cost)])
        cum_nnz = np.concatenate([[0], np.cumsum(nnz)])
        start = 0
        while start < n:
            if self.shard_rows is not None:
                room = min(n - start, self.shard_rows - self._rows)
            else:
                room = int(np.searchsorted(cum_bytes, cum_bytes[start] + self.shard_bytes
                                           - self._bytes, side="right")) - 1 - start
            room = min(room, int(np.searchsorted(cum_nnz, cum_nnz[start] + MAX_SHARD_NNZ
                                                 - self._nnz, side="right")) - 1 - start)
            if room <= 0:
                if self._rows:
                    self._flush()
                    continue
                room = 1  # one row larger than a whole shard
            stop = start + room
            if self._sink is None:  # rows go to disk as they come (Zarr) or at the flush
                if self._codec is not None and self._writers is None:
                    self._writers = Writers(self._codec)
                self._sink = open_sink(self.root, self.backend, len(self._closed),
                                       layout=self.layout, n_features=self.n_features,
                                       dtype=self.dtype, row_offset=self._written_rows,
                                       weighted=self.weighted, spool_dir=self.scratch,
                                       writers=self._writers, pool=self._pool,
                                       **self._sink_options)
            ys = y[start:stop]
            self._sink.append(_row_slice(X, start, stop), ys,
                              None if weight is None else weight[start:stop])
            self._take(ys)
            self._rows += room
            self._bytes += int(cum_bytes[stop] - cum_bytes[start])
            self._nnz += int(cum_nnz[stop] - cum_nnz[start])
            start = stop
            if start < n or self._rows == self.shard_rows:
                self._flush()

    def _take(self, ys: np.ndarray) -> None:
        """Count the class indices of rows that went to the open shard."""
        self._class_counts_open += np.bincount(ys, minlength=len(self.class_counts))

    def _flush(self) -> None:
        if not self._rows:
            return
        i = len(self._closed)
        result = self._close_sink()  # (rows, nnz, hash, sums), or what gives them later
        self._sink = None
        counts = self._class_counts_open
        self.class_counts += counts
        self._closed.append((i, self._written_rows, counts, result))
        self._written_rows += self._rows
        self._rows, self._bytes, self._nnz = 0, self._base, 0
        self._class_counts_open = np.zeros_like(self.class_counts)
        logger.debug("closed shard %d", i)
        self._report(self._written_rows)

    def _close_sink(self):
        return self._sink.close()

    def _report(self, written_rows: int) -> None:
        if self.progress is not None:
            self.progress(ProgressEvent("write", written_rows, self.total_rows, written_rows))

    def finish(self) -> list[dict]:
        """Write the last partial shard, wait for the writer thread; return the shard records."""
        self._flush()
        try:
            for i, offset, counts, result in self._closed[len(self.shards):]:
                rows, nnz, content_hash, sums = (result if isinstance(result, tuple)
                                                 else result.result())
                self.shards.append({"name": self.backend.shard_relpath(i), "rows": rows,
                                    "offset": offset, "nnz": nnz, "sha256": content_hash,
                                    "classes_present": int(np.count_nonzero(counts)),
                                    **(sums or {})})
            if self._writers is not None:
                self._writers.drain()
            if self._pool is not None:
                self._pool.drain()
        finally:
            self.close()
        return self.shards


def build_metadata(*, format: str, layout: str, n_features: int, dtype: np.dtype,
                   classes: np.ndarray, writer: ShardWriter, provenance: dict) -> dict:
    """Assemble ``streamwww.json`` for a finished writer (format version 4, with
    ``"weights": true`` for a writer with weights): the checksums of the shards'
    metadata documents (read back from the writer's root) and, last, the
    metadata's own checksum (docs/FORMAT.md, Integrity)."""
    class_list, label_type = labels_to_json(classes)
    shards = writer.shards
    documents = writer.backend.document_checksums(writer.root, shards, layout, writer.weighted)
    for record, sums in zip(shards, documents or ()):
        record[DOCUMENT_CHECKSUM_KEY] = sums
    meta = {
        "streamwww_format": FORMAT_NAME,
        "format_version": format_version_for(writer.weighted),
        "complete": True,
        "format": format,
        "layout": layout,
        "dtype": dtype.name,
        "n_rows": sum(s["rows"] for s in shards),
        "n_features": int(n_features),
        "nnz": sum(s["nnz"] for s in shards),
        "n_classes": len(class_list),
        "classes": class_list,
        "label_type": label_type,
        "class_counts": [int(c) for c in writer.class_counts],
        "n_shards": len(shards),
        "shards": shards,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "streamwww_version": __version__,
        "provenance": provenance,
    }
    if writer.weighted:
        meta["weights"] = True
    meta["fingerprint"] = fingerprint(meta)
    meta[METADATA_HASH_KEY] = metadata_hash(meta)
    return meta


def write_store(path: str | os.PathLike, X, y, *, shard_rows: int | None = None,
                shard_mb: float | None = None, format: str = "zarr", layout: str = "auto",
                classes=None, dtype=np.float32, overwrite: bool = False,
                sample_weight=None, storage_options: dict | None = None) -> ShardStore:
    """Write in-memory data as a shard store.

    Parameters
    ----------
    path : str or path-like
        Output directory, or a URL (``s3://bucket/store``; docs/STORAGE.md);
        written atomically (see docs/FORMAT.md).
    X : array-like or scipy sparse matrix of shape (n_rows, n_features)
        Finite values.
    y : array-like of shape (n_rows,)
        Labels: numbers (stored as float64 classes) or strings.
    shard_rows : int, optional
        Rows per shard (the last shard may be shorter).
    shard_mb : float, optional
        Maximum in-memory size of a shard once read, in MiB (default 128 for
        Zarr, 16 for Parquet: :data:`DEFAULT_SHARD_MB`). Give at most one of
        ``shard_rows`` and ``shard_mb``.
    format : {"zarr", "parquet"}, default="zarr"
    layout : {"auto", "sparse", "dense"}, default="auto"
        ``"auto"`` stores dense when at least half of the values are nonzero.
    classes : array-like, optional
        All class labels (sorted on the way in); defaults to the labels in
        ``y``. A label of ``y`` outside ``classes`` is an error.
    dtype : {numpy.float32, numpy.float64}, default=numpy.float32
    overwrite : bool, default=False
        Replace an existing store at ``path``.
    sample_weight : array-like of shape (n_rows,), optional
        Per-row weights, finite and >= 0, not all zero; stored as float64
        (``"weights": true``, ``ShardStore.has_weights``). Without it the store
        holds no weights.
    storage_options : dict, optional
        Options of a URL's file system (endpoint, credentials, ...).

    Returns
    -------
    ShardStore
        The committed store.

    Raises
    ------
    StoreExistsError
        If ``path`` exists and ``overwrite`` is False.
    DataFormatError
        For non-finite values, mismatched lengths, unknown labels, or weights
        that are negative, not finite or all zero.
    """
    who = "write_store"
    backend = get_backend(format)
    rows_per_shard, shard_bytes = resolve_shard_size(shard_rows, shard_mb, who, backend.name)
    dt = resolve_dtype(dtype, who)
    if sp.issparse(X):
        X = sp.csr_matrix(X)
        X.sum_duplicates()  # also sorts the indices
        values = X.data
    else:
        X = np.asarray(X)
        if X.ndim != 2 or X.dtype.kind not in "biuf":
            raise DataFormatError(f"{who}: X must be a 2-D numeric array or sparse matrix. "
                                  f"Got {X.ndim}-D dtype {X.dtype} instead.")
        values = X
    if not np.all(np.isfinite(values)):
        raise DataFormatError(f"{who}: X contains NaN or infinite values.")
    n_rows, n_features = X.shape
    if n_rows == 0:
        raise DataFormatError(f"{who}: X has 0 rows; a store needs at least one.")
    cls, y_index = encode_labels(y, classes, who)
    if len(y_index) != n_rows:
        raise DataFormatError(f"{who}: X has {n_rows} rows but y has {len(y_index)} labels.")
    try:
        weight = check_sample_weight(sample_weight, n_rows, who)
    except ValueError as exc:  # one validation for arrays and stores; here it is the data's fault
        raise DataFormatError(str(exc)) from None
    nnz = X.nnz if sp.issparse(X) else int(np.count_nonzero(X))
    layout = resolve_layout(layout, n_rows, n_features, nnz, who)
    with open_transaction(path, overwrite, storage_options) as tx:
        backend.init_root(tx.tmp, format_version_for(weight is not None))
        with ShardWriter(tx.tmp, backend, layout=layout, n_features=n_features, dtype=dt,
                         n_classes=len(cls), shard_rows=rows_per_shard,
                         shard_bytes=shard_bytes, weighted=weight is not None,
                         scratch=tx.scratch) as writer:
            writer.push(X, y_index, weight)
            writer.finish()
        provenance = {"source": {"kind": "arrays"},
                      "options": {"shard_rows": shard_rows, "shard_mb": shard_mb,
                                  "layout": layout, "dtype": dt.name}}
        meta = build_metadata(format=backend.name, layout=layout, n_features=n_features,
                              dtype=dt, classes=cls, writer=writer, provenance=provenance)
        tx.commit(meta)
    return open_store(tx.location)

