"""Reading shard stores: :func:`open_store` returns a :class:`ShardStore` whatever the
format (Zarr v3 or Parquet, docs/FORMAT.md), its metadata validated, its shards read
and checked. Writing is :mod:`streamwww.io.writer`'s.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from streamwww import __version__
from streamwww import _buffers as buffers
from streamwww.storage.fsutil import is_read_failure, read_failure
from streamwww.storage.location import (
    Location,
    is_storage_failure,
    location,
    storage_error,
)
from streamwww.errors import (
    ChecksumError,
    ShardFormatError,
    StorageError,
)
from streamwww.io._backend import available_formats, get_backend, make_csr
from streamwww.io._format import (
    CHECKSUM_KEY,
    DAMAGED_FIX,
    DOCUMENT_CHECKSUM_KEY,
    DTYPES,
    FORMAT_NAME,
    LAYOUTS,
    MARKER,
    METADATA_HASH_KEY,
    METADATA_VERSION,
    READ_VERSIONS,
    WEIGHT_ARRAY,
    WEIGHT_HASH_KEY,
    WEIGHTS_FORMAT_VERSION,
    fingerprint,
    index_dtype,
    labels_from_json,
    metadata_hash,
    shard_nbytes,
)
from streamwww.weights import first_bad_weight

__all__ = ["ShardStore", "open_store"]

logger = logging.getLogger(__name__)

_DERIVED = "derived:"  # the prefix of keep_array's names among a kept shard's arrays


# --------------------------------------------------------------------------- reading


class ShardStore:
    """A read-only view of a complete shard store.

    Use :func:`open_store` to get one. Reading shard ``i`` reads only that
    shard's files.

    Attributes
    ----------
    path : pathlib.Path or str
        The store directory (a URL, as a str, for a store on an object store).
    location : Location
        Where the store is (with the storage options it was opened with).
    format : {"zarr", "parquet"}
    layout : {"sparse", "dense"}
    n_rows, n_features, nnz : int
        Shape of the whole data set and its stored values (dense: rows * features).
    dtype : numpy.dtype
        Type of the values of ``X`` (float32 unless converted otherwise).
    classes : ndarray
        Original label values, sorted (float64 for numeric labels, str otherwise);
        ``y`` from :meth:`read_shard` indexes into it.
    n_classes, n_shards : int
    shard_rows : ndarray of int64, shape (n_shards,)
    shard_offsets : ndarray of int64, shape (n_shards + 1,)
        Global index of each shard's first row, then ``n_rows``.
    metadata : dict
        The whole ``streamwww.json`` (JSON-able), provenance included.
    fingerprint : str
        SHA-256 identifying what the store returns (shapes, dtype, layout,
        classes, shard boundaries and each shard's content hash) and, from
        format version 2 on, each shard's recorded checksums.
    format_version : int
        1 (no content checksums), 2 or 3 (no metadata checksums), or 4.
    verified : bool
        Whether reads verify content checksums (format version 2 on): every
        stored chunk (Zarr) or file (Parquet) is checked against the crc32c
        recorded at conversion, and a missing chunk is an error.
    metadata_verified : bool
        Whether the metadata is checksummed (format version 4 on): ``streamwww.json``
        was checked against its ``metadata_sha256`` on open, and each Zarr array's
        ``zarr.json`` is checked against its recorded crc32c when its shard is first read.
    has_weights : bool
        Whether the store holds per-row sample weights (``"weights": true``,
        format version 3 or 4); :meth:`read_weights` reads them.
    """

    def __init__(self, path: Path | Location, metadata: dict):
        self.location = location(path)
        self.path = self.location.local_path if self.location.is_local else self.location.url
        self.metadata = metadata
        self._backend = get_backend(metadata["format"])
        self._handles: dict = {}  # the backend's open per-shard handles
        self.format: str = metadata["format"]
        self.layout: str = metadata["layout"]
        self.n_rows: int = metadata["n_rows"]
        self.n_features: int = metadata["n_features"]
        self.nnz: int = metadata["nnz"]
        self.dtype = np.dtype(metadata["dtype"])
        self.classes = labels_from_json(metadata["classes"], metadata["label_type"])
        self.n_classes = len(self.classes)
        shards = metadata["shards"]
        self.n_shards = len(shards)
        self.shard_rows = np.array([s["rows"] for s in shards], dtype=np.int64)
        self.shard_offsets = np.concatenate([[0], np.cumsum(self.shard_rows)]).astype(np.int64)
        self._shard_nnz = np.array([s["nnz"] for s in shards], dtype=np.int64)
        self.fingerprint: str = metadata["fingerprint"]
        self.format_version: int = metadata["format_version"]
        self.verified: bool = self.format_version >= 2
        self._checksums = [s.get(CHECKSUM_KEY) if self.verified else None for s in shards]
        self.metadata_verified: bool = self.format_version >= METADATA_VERSION
        self._documents = [s.get(DOCUMENT_CHECKSUM_KEY) if self.metadata_verified else None
                           for s in shards]
        self.has_weights: bool = metadata.get("weights") is True
        self._kept: dict[int, dict[str, np.ndarray]] = {}  # shard -> its decoded arrays (keep_decoded)
        self._kept_bytes = 0
        self._keep_budget = 0
        self._keep_lock = threading.Lock()

    def keep_decoded(self, budget_bytes: int) -> None:
        """Keep shards once read (decoded and verified) in memory, up to ``budget_bytes``.

        Later reads of a kept shard copy its arrays instead of reading and decoding
        its files again: a store that fits the budget is read from storage once per
        process (an epoch after the first costs no I/O, no decompression and no
        object-store requests). Shards are kept in the order they are first read
        until the budget is spent; ``0`` drops them all. What is kept was checked
        against the recorded checksums when it was read.
        """
        with self._keep_lock:
            self._keep_budget = max(0, int(budget_bytes))
            if self._keep_budget == 0:
                self._kept.clear()
                self._kept_bytes = 0

    @property
    def keep_budget(self) -> int:
        """The budget :meth:`keep_decoded` set (bytes; 0: nothing is kept)."""
        return self._keep_budget

    @property
    def kept_bytes(self) -> int:
        """Bytes of the shards :meth:`keep_decoded` holds now."""
        return self._kept_bytes

    def kept_array(self, i: int, name: str) -> np.ndarray | None:
        """The array :meth:`keep_array` keeps under ``name`` with shard ``i`` (None: none)."""
        kept = self._kept.get(i)
        return None if kept is None else kept.get(_DERIVED + name)

    def keep_array(self, i: int, name: str, array: np.ndarray) -> None:
        """Keep a copy of ``array``, derived from shard ``i``'s rows (e.g. their norms),
        beside the shard's decoded arrays while :meth:`keep_decoded` keeps them (it is
        dropped with them, and counted in :attr:`kept_bytes`); nothing when the shard
        is not kept."""
        with self._keep_lock:
            kept = self._kept.get(i)
            if kept is None or _DERIVED + name in kept:
                return
            kept[_DERIVED + name] = np.array(array, copy=True)
            self._kept_bytes += array.nbytes

    def _keep(self, i: int, arrays: dict[str, np.ndarray]) -> None:
        nbytes = sum(a.nbytes for a in arrays.values())
        with self._keep_lock:
            if i in self._kept or self._kept_bytes + nbytes > self._keep_budget:
                return
            self._kept[i] = {name: np.array(a, copy=True) for name, a in arrays.items()}
            self._kept_bytes += nbytes

    def __len__(self) -> int:
        return self.n_shards

    def __repr__(self) -> str:
        return (f"ShardStore({str(self.path)!r}, format={self.format!r}, layout={self.layout!r}, "
                f"n_rows={self.n_rows}, n_features={self.n_features}, "
                f"n_classes={self.n_classes}, n_shards={self.n_shards})")

    def _check_index(self, i) -> int:
        if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)):
            raise TypeError(f"{self.path}: shard index must be an int. Got {i!r} instead.")
        if not 0 <= i < self.n_shards:
            raise ShardFormatError(f"{self.path}: shard {i} does not exist; the store has "
                                   f"{self.n_shards} shard(s) (0..{self.n_shards - 1}).")
        return int(i)

    def shard_nbytes(self, i: int) -> int:
        """Bytes of shard ``i`` once read (``X``, ``y`` and its weights, if any)."""
        i = self._check_index(i)
        return shard_nbytes(self.layout, int(self.shard_rows[i]), int(self._shard_nnz[i]),
                            self.n_features, self.dtype, self.has_weights)

    def read_shard(self, i: int) -> tuple[sp.csr_matrix | np.ndarray, np.ndarray]:
        """Read shard ``i``.

        Returns
        -------
        X : scipy.sparse.csr_matrix or ndarray of shape (shard_rows[i], n_features)
            CSR with sorted indices (int32 indices unless the shard needs
            int64) or a C-contiguous array, of type :attr:`dtype`.
        y : ndarray of int32 of shape (shard_rows[i],)
            Class indices into :attr:`classes`.

        Raises
        ------
        ChecksumError
            For a shard whose stored bytes do not match the checksums recorded
            at conversion, or a missing chunk (format version 2 on).
        ShardFormatError
            For a bad index, or a shard that is missing or does not match the
            store's metadata.
        StorageError
            For a shard file that is there but cannot be read (no permission, EIO,
            a directory in its place) or an object store that fails the request: an
            I/O error, not damage (the message names the shard and the file, and says so).
        """
        return self.read_shards((i,))

    def read_weights(self, ids) -> np.ndarray:
        """The sample weights of several shards, stacked in the order of ``ids``.

        Only the weights are decoded (a Parquet shard's whole file is still read
        to check its checksum); ``read_shards(ids, weights=True)`` reads them in
        the same pass as ``X`` and ``y``.

        Parameters
        ----------
        ids : sequence of int
            Shard indices (at least one), as for :meth:`read_shards`.

        Returns
        -------
        ndarray of float64 of shape (sum(shard_rows[ids]),)
            Finite, non-negative weights, row for row as :meth:`read_shards`
            returns ``X`` and ``y``; all ones for a store without weights
            (:attr:`has_weights` False).

        Raises
        ------
        ChecksumError
            For weights whose stored bytes do not match the recorded checksums
            (the message names the file, the array ``weight`` and the chunk).
        ShardFormatError
            For a bad index, or weights that are missing, of another length or
            not finite and non-negative (the message names the shard).
        StorageError
            For a shard file that is there but cannot be read (no permission, EIO,
            a directory in its place) or an object store that fails the request: an
            I/O error, not damage (the message names the shard and the file, and says so).
        """
        ids = [self._check_index(i) for i in ids]
        if not ids:
            raise ValueError(f"{self.path}: read_weights needs at least one shard index")
        rows = self.shard_rows[ids]
        if not self.has_weights:
            return np.ones(int(rows.sum()), dtype=np.float64)
        w = np.empty(int(rows.sum()), dtype=np.float64)
        r0 = 0
        for i, r in zip(ids, rows.tolist()):
            self._read_into(i, {WEIGHT_ARRAY: w[r0:r0 + r]})
            r0 += r
        return w

    def _read_into(self, i: int, out: dict) -> np.ndarray | None:
        """Shard ``i``'s arrays into ``out`` (see ShardBackend.read_shard_into); errors
        name the shard. Weights are checked here, X and y by the caller."""
        where = f"{self.path}: shard {i} ({self._backend.shard_relpath(i)})"
        try:
            ptr = self._backend.read_shard_into(self.location, i, out, layout=self.layout,
                                                n_features=self.n_features, handles=self._handles,
                                                checksums=self._checksums[i],
                                                documents=self._documents[i])
        except ChecksumError as exc:  # names the file, the array and the chunk; add the shard
            raise ChecksumError(exc.path, exc.array, exc.chunk, exc.reason, exc.fix,
                                where=where) from None
        except Exception as exc:  # any other backend failure is a broken store ...
            if self.location.is_local and is_read_failure(exc):  # ... or a file the system cannot read
                raise read_failure(getattr(exc, "filename", None) or self.location.child(
                    self._backend.shard_relpath(i)).url, exc, where=where) from None
            if not self.location.is_local and is_storage_failure(exc):  # ... or a store out of reach
                reason = str(exc) if isinstance(exc, StorageError) else f"{type(exc).__name__}: {exc}"
                raise StorageError(f"{where} cannot be read: the object store failed the request "
                                   f"({reason}); nothing was changed: try again once it is reachable "
                                   f"(and the credentials allow reading)") from exc
            raise ShardFormatError(f"{where} cannot be read: {type(exc).__name__}: {exc}") from exc
        if WEIGHT_ARRAY in out and (bad := first_bad_weight(out[WEIGHT_ARRAY])) is not None:
            raise ShardFormatError(f"{where}: the weight of its row {bad} (row "
                                   f"{int(self.shard_offsets[i]) + bad} of the store) is "
                                   f"{float(out[WEIGHT_ARRAY][bad])!r}; weights must be finite and >= 0; "
                                   f"{DAMAGED_FIX}")
        return ptr

    def read_shards(self, ids, *, weights: bool = False, lend: bool = False) -> tuple:
        """Read several shards as one matrix, their rows stacked in the order of ``ids``.

        The shards are decoded straight into one buffer (no stacking copy) and
        each is validated as :meth:`read_shard` does; the result equals stacking
        ``read_shard(i)`` for each ``i``.

        Parameters
        ----------
        ids : sequence of int
            Shard indices (at least one).
        weights : bool, default=False
            Also return the rows' sample weights, read in the same pass (as
            :meth:`read_weights`: all ones for a store without weights).
        lend : bool, default=False
            For one shard that :meth:`keep_decoded` keeps: return its kept arrays
            themselves, not a copy (training's reads; the caller must not write to them).

        Returns
        -------
        X, y
            As for :meth:`read_shard`, with ``sum(shard_rows[ids])`` rows (int64
            CSR indices only when the group needs them).
        w : ndarray of float64
            Only with ``weights=True``: ``(X, y, w)``.

        Raises
        ------
        ChecksumError
            For a shard whose stored bytes do not match the checksums recorded
            at conversion, or a missing chunk (the message names the file, the
            array and the chunk).
        ShardFormatError
            For a bad index, or a shard that is missing or does not match the
            store's metadata (the message names the shard).
        StorageError
            For a shard file that is there but cannot be read (no permission, EIO,
            a directory in its place) or an object store that fails the request: an
            I/O error, not damage (the message names the shard and the file, and says so).
        """
        ids = [self._check_index(i) for i in ids]
        if not ids:
            raise ValueError(f"{self.path}: read_shards needs at least one shard index")
        if lend and len(ids) == 1 and (lent := self._lend_kept(ids[0], weights)) is not None:
            return lent
        rows, nnz = self.shard_rows[ids], self._shard_nnz[ids]
        n = int(rows.sum())
        y = np.empty(n, dtype=np.int32)
        w = np.ones(n, dtype=np.float64) if weights else None
        # (pooled: every epoch reads groups of the same sizes again, streamwww._buffers)
        if self.layout == "dense":
            X = buffers.empty((n, self.n_features), self.dtype)
        else:
            itype = index_dtype(int(nnz.sum()), self.n_features)
            indptr = buffers.empty(n + 1, itype)
            indptr[0] = 0
            # stored indices are int32; a group too large for them is read via int32 and widened
            indices = buffers.empty(int(nnz.sum()), np.int32)
            data = buffers.empty(int(nnz.sum()), self.dtype)
        r0 = z0 = 0
        for i, r, z in zip(ids, rows.tolist(), nnz.tolist()):
            where = f"{self.path}: shard {i} ({self._backend.shard_relpath(i)})"
            ys = y[r0:r0 + r]
            out = ({"X": X[r0:r0 + r], "y": ys} if self.layout == "dense" else
                   {"indices": indices[z0:z0 + z], "data": data[z0:z0 + z], "y": ys})
            if weights and self.has_weights:
                out[WEIGHT_ARRAY] = w[r0:r0 + r]
            kept = self._kept.get(i)
            if kept is not None and all(name in kept for name in out):
                # (checked when it was read and kept: a private copy nothing writes to)
                for name, target in out.items():
                    target[...] = kept[name]
                ptr = kept.get("indptr")
                if ptr is not None:  # (added in the group's dtype: a kept int32 one may not hold the sum)
                    indptr[r0 + 1:r0 + r + 1] = ptr[1:]
                    indptr[r0 + 1:r0 + r + 1] += z0
                r0, z0 = r0 + r, z0 + z
                continue
            ptr = self._read_into(i, out)
            if self.layout == "dense":
                problem = self._check_shard(i, ys)
            else:
                ptr = np.asarray(ptr)
                if ptr.shape != (r + 1,) or ptr[0] != 0 or ptr[-1] != z:
                    raise ShardFormatError(f"{where}: X's row pointers (shape {ptr.shape}) do not "
                                           f"describe {r} rows with {z} stored values")
                # (no CSR matrix of the shard's slice: scipy would copy its arrays, views of the group's)
                problem = self._check_shard(i, ys, out["indices"])
                indptr[r0 + 1:r0 + r + 1] = ptr[1:] + z0
            if problem:
                raise ShardFormatError(f"{where}: {problem}")
            if self._keep_budget:  # (row pointers in the dtype a read of the shard alone returns)
                self._keep(i, {**out, **({"indptr": ptr.astype(index_dtype(z, self.n_features), copy=False)}
                                         if ptr is not None else {})})
            r0, z0 = r0 + r, z0 + z
        if self.layout != "dense":
            X = make_csr(data, indices, indptr, n, self.n_features, indptr.dtype)
        return (X, y, w) if weights else (X, y)

    def _lend_kept(self, i: int, weights: bool) -> tuple | None:
        """:meth:`read_shards` of kept shard ``i`` alone with ``lend``: its kept arrays
        themselves (no copy; ``None`` when it is not kept with all that is asked), which the
        caller must not write to (not flagged read-only: Numba would compile every kernel
        again for read-only arrays)."""
        kept = self._kept.get(i)
        names = (["X"] if self.layout == "dense" else ["data", "indices", "indptr"]) + ["y"]
        if weights and self.has_weights:
            names.append(WEIGHT_ARRAY)
        if kept is None or any(n not in kept for n in names):
            return None
        a = {n: kept[n] for n in names}
        r, z = int(self.shard_rows[i]), int(self._shard_nnz[i])
        X = a["X"] if self.layout == "dense" else \
            make_csr(a["data"], a["indices"], a["indptr"], r, self.n_features, index_dtype(z, self.n_features))
        if not weights:
            return X, a["y"]
        return X, a["y"], a[WEIGHT_ARRAY] if self.has_weights else np.ones(r, dtype=np.float64)

    def _check_shard(self, i: int, y, indices=None) -> str | None:
        """What is wrong with the values of shard ``i`` as read (``None``: nothing): its class
        indices ``y`` and, for CSR rows, its column ``indices``.  (Shapes and dtypes need no
        check: the shard was read into arrays of the store's, each array checked to fit.)"""
        if y.size and (y.min() < 0 or y.max() >= self.n_classes):
            return f"class index out of range [0, {self.n_classes})"
        if indices is not None and indices.size and (indices.min() < 0 or indices.max() >= self.n_features):
            return f"column index out of range [0, {self.n_features})"
        return None

    def verify(self, progress=None) -> int:
        """Read every shard once, as training does, checking all it checks
        (the weights too, in a store with weights).

        Parameters
        ----------
        progress : callable, optional
            Called with the index of each shard once it is verified.

        Returns
        -------
        int
            The number of shards read.

        Raises
        ------
        ChecksumError
            The first shard whose stored bytes do not match their recorded
            checksums, or that lacks a chunk (format version 2 on), or whose
            arrays' ``zarr.json`` does not match its recorded crc32c (version 4 on;
            ``streamwww.json`` itself was checked when the store was opened).
        ShardFormatError
            The first shard that is damaged otherwise or does not match the metadata.
        StorageError
            The first shard file that cannot be read (an I/O error: no permission, EIO,
            a directory in its place; or an object store's failure), which is not damage.
        """
        for i in range(self.n_shards):
            self.read_shards((i,), weights=self.has_weights)
            if progress is not None:
                progress(i)
        return self.n_shards

    def iter_shards(self) -> Iterator[tuple[sp.csr_matrix | np.ndarray, np.ndarray]]:
        """Yield ``read_shard(i)`` for every shard in order."""
        for i in range(self.n_shards):
            yield self.read_shard(i)


def _require(cond: bool, path: Path, what: str) -> None:
    if not cond:
        raise ShardFormatError(f"{path}: invalid {MARKER}: {what}")


def _validate_metadata(path: Path, meta) -> None:
    _require(isinstance(meta, dict) and meta.get("streamwww_format") == FORMAT_NAME, path,
             f"not a {FORMAT_NAME} metadata file")
    version = meta.get("format_version")
    if isinstance(version, bool) or version not in READ_VERSIONS:
        raise ShardFormatError(f"{path}: format version {version!r} is not supported; this "
                               f"streamwww ({__version__}) reads versions "
                               f"{', '.join(map(str, READ_VERSIONS))}: convert the data again "
                               f"with this streamwww (streamwww convert ... --overwrite).")
    _require(meta.get("complete") is True, path, "the store is marked incomplete")
    for key, kind in (("format", str), ("layout", str), ("dtype", str), ("n_rows", int),
                      ("n_features", int), ("nnz", int), ("classes", list),
                      ("label_type", str), ("shards", list), ("fingerprint", str)):
        _require(isinstance(meta.get(key), kind), path, f"field {key!r} is missing or not {kind.__name__}")
    _require(meta["format"] in available_formats(), path, f"unknown format {meta['format']!r}")
    _require(meta["layout"] in LAYOUTS, path, f"unknown layout {meta['layout']!r}")
    _require(meta["dtype"] in DTYPES, path, f"unsupported dtype {meta['dtype']!r}")
    for s in meta["shards"]:
        _require(isinstance(s, dict) and all(isinstance(s.get(k), int) for k in ("rows", "nnz"))
                 and isinstance(s.get("sha256"), str), path, "bad shard record")
    weighted = meta.get("weights", False)
    _require(isinstance(weighted, bool), path, "field 'weights' is not true or false")
    if version < METADATA_VERSION:  # (from version 4 on, either)
        _require(weighted == (version == WEIGHTS_FORMAT_VERSION), path,
                 f"'weights': {str(weighted).lower()} does not fit format version {version} "
                 f"(version {WEIGHTS_FORMAT_VERSION} is exactly the stores with weights)")
    if weighted:
        for i, s in enumerate(meta["shards"]):
            _require(isinstance(s.get(WEIGHT_HASH_KEY), str), path,
                     f"shard {i}: field {WEIGHT_HASH_KEY!r} is missing or not str")
    if version >= 2:
        names = set(get_backend(meta["format"]).checksum_names(meta["layout"], weighted))
        for i, s in enumerate(meta["shards"]):
            sums = s.get(CHECKSUM_KEY)
            _require(isinstance(sums, dict) and set(sums) == names
                     and all(isinstance(v, list) and all(isinstance(c, int) and not isinstance(c, bool)
                                                         and 0 <= c < 2**32 for c in v)
                             for v in sums.values()),
                     path, f"shard {i}: field {CHECKSUM_KEY!r} is missing or not "
                     f"{{{', '.join(sorted(names))}}} -> lists of crc32c values")
    if version >= METADATA_VERSION:
        names = set(get_backend(meta["format"]).document_names(meta["layout"], weighted))
        for i, s in enumerate(meta["shards"]):
            docs = s.get(DOCUMENT_CHECKSUM_KEY)
            _require(docs is None if not names else
                     isinstance(docs, dict) and set(docs) == names
                     and all(isinstance(c, int) and not isinstance(c, bool) and 0 <= c < 2**32
                             for c in docs.values()),
                     path, f"shard {i}: field {DOCUMENT_CHECKSUM_KEY!r} is not "
                     + (f"{{{', '.join(sorted(names))}}} -> crc32c values" if names
                        else f"absent (format {meta['format']!r} has none)"))
        _require(isinstance(meta.get(METADATA_HASH_KEY), str), path,
                 f"field {METADATA_HASH_KEY!r} is missing or not str")
    _require(sum(s["rows"] for s in meta["shards"]) == meta["n_rows"], path,
             "shard rows do not add up to n_rows")
    _require(sum(s["nnz"] for s in meta["shards"]) == meta["nnz"], path,
             "shard nnz do not add up to nnz")
    _require(fingerprint(meta) == meta["fingerprint"], path,
             "fingerprint does not match the metadata (edited or corrupt)")
    # last: a more specific problem found above is the one reported
    if version >= METADATA_VERSION and metadata_hash(meta) != meta[METADATA_HASH_KEY]:
        raise ShardFormatError(f"{_join(path, MARKER)}: the metadata does not match its checksum "
                               f"({METADATA_HASH_KEY}): the file was edited or damaged; {DAMAGED_FIX}")


def _join(path, name: str) -> str:
    """``path/name`` for a local path or a URL, as shown in messages."""
    return f"{str(path).rstrip('/')}/{name}"


def open_store(path: str | os.PathLike | Location,
               storage_options: dict | None = None) -> ShardStore:
    """Open a complete shard store (Zarr or Parquet).

    Parameters
    ----------
    path : str or path-like
        The store directory written by ``streamwww convert``, :func:`convert_libsvm`
        or :func:`write_store`, or its URL (``s3://bucket/store``, any fsspec
        protocol; docs/STORAGE.md).
    storage_options : dict, optional
        Options of a URL's file system (endpoint, credentials, ...), as in
        ``fsspec.filesystem(protocol, **storage_options)``.

    Returns
    -------
    ShardStore

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ShardFormatError
        If ``path`` is not a complete store (no ``streamwww.json`` commit
        marker, e.g. an interrupted conversion), or its metadata is invalid or
        of an unsupported version.
    StorageURLError
        For a URL whose protocol is unknown or whose package is not installed.
    StorageError
        For a ``streamwww.json`` that is there but cannot be read (no permission,
        EIO, a directory in its place), or an object store that fails the request.
    """
    loc = location(path, storage_options)
    shown = loc.url
    marker = loc.child(MARKER)
    try:
        text = marker.read_text()
    except FileNotFoundError:
        if not loc.exists():
            raise FileNotFoundError(f"shard store {shown} does not exist.") from None
        raise ShardFormatError(f"{shown} is not a complete streamwww store: {MARKER} (written "
                               f"last, when a conversion commits) is missing.") from None
    except NotADirectoryError:  # (a local file: a store is a directory)
        raise ShardFormatError(f"{shown} is a file, not a shard store (a directory); a LIBSVM text "
                               f"file is converted into one by `streamwww convert FILE STORE` or "
                               f"streamwww.io.convert_libsvm") from None
    except UnicodeDecodeError as exc:
        raise ShardFormatError(f"{shown}: cannot read {MARKER}: {exc}") from exc
    except StorageError:  # a Location's, naming the URL and the request already
        raise
    except Exception as exc:
        if loc.is_local and is_read_failure(exc):  # there but unreadable (EIO, a directory): not damage
            raise read_failure(marker.url, exc, "the store's metadata") from None
        if loc.is_local or not is_storage_failure(exc):
            raise
        raise storage_error(shown, f"reading {MARKER}", exc) from exc
    try:
        meta = json.loads(text)
    except ValueError as exc:
        raise ShardFormatError(f"{shown}: cannot read {MARKER}: {exc}") from exc
    _validate_metadata(shown, meta)
    if meta["format_version"] < METADATA_VERSION:
        _warn_unverified(shown, meta["format_version"])
    return ShardStore(loc, meta)


_WARNED: set[str] = set()


def _warn_unverified(path: Path, version: int) -> None:
    """Say once per store and process what its reads cannot verify."""
    key = str(path)
    if key in _WARNED:
        return
    _WARNED.add(key)
    if version < 2:
        logger.warning("%s: store format version %d carries no content checksums, so damaged shards "
                       "cannot be detected (nor edited metadata); convert it again with this "
                       "streamwww to add them (streamwww convert ... --overwrite; its fingerprint "
                       "changes, so checkpoints of the old store do not resume on the new one).",
                       path, version)
        return
    logger.warning("%s: store format version %d carries no metadata checksums, so an edit of "
                   "%s (class counts, shard records) or of a Zarr array's zarr.json (dtype, byte "
                   "order, codecs) cannot be detected; convert it again with this streamwww to "
                   "add them (streamwww convert ... --overwrite; its fingerprint changes, so "
                   "checkpoints of the old store do not resume on the new one).",
                   path, version, MARKER)
