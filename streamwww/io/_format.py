"""Pieces of the shard-store format shared by every backend (docs/FORMAT.md).

A store is a directory. ``streamwww.json`` in it holds the metadata and is the
commit marker: it is written last, and a directory without it (or with
``"complete": false``) is not a store. Each shard is one Zarr group or one
Parquet file, named by :func:`shard_name`, written by a backend of
:mod:`streamwww.io._backend`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import scipy.sparse as sp

FORMAT_NAME = "streamwww-shards"
# Version 4 is version 2 (no weights) or 3 (weights) plus metadata checksums
# (METADATA_HASH_KEY, DOCUMENT_CHECKSUM_KEY): every byte of metadata that decides
# what is read or how rows are weighted is checked, so that a reader that does not
# check them (versions 2 and 3 only) refuses the store instead of trusting it.
FORMAT_VERSION = 4
METADATA_VERSION = 4  # the first version whose metadata is checksummed
# Version 3 was version 2 plus a ``weight`` array per shard, so that a version-2
# reader refused it instead of training without its weights; from version 4 on
# ``"weights": true`` alone says so (docs/FORMAT.md, Sample weights).
WEIGHTS_FORMAT_VERSION = 3
# Versions this streamwww reads. Version 1 records no content checksums, versions
# 1 to 3 no metadata checksums: each is still read, with its own fingerprint
# (docs/FORMAT.md, Integrity).
READ_VERSIONS = (1, 2, 3, 4)
WEIGHT_ARRAY = "weight"  # per-row float64 sample weights (Zarr array / Parquet column)
WEIGHT_HASH_KEY = "weight_sha256"  # per-shard record: SHA-256 of its weights
CHECKSUM_KEY = "crc32c"  # per-shard record: {array name: [crc32c of each stored chunk]}
# per-shard record (Zarr, version 4): {array name: crc32c of the array's zarr.json},
# which decides how its chunks are decoded (dtype, byte order, codecs, shape, chunk grid)
DOCUMENT_CHECKSUM_KEY = "zarr_json_crc32c"
METADATA_HASH_KEY = "metadata_sha256"  # SHA-256 of streamwww.json (metadata_hash)
# Not covered by METADATA_HASH_KEY: the hash itself, and the time of the conversion,
# so that the same data converted twice has the same metadata hash.
_UNHASHED_FIELDS = (METADATA_HASH_KEY, "created")
DAMAGED_FIX = ("the store is damaged: convert it again from its source "
               "(streamwww convert ... --overwrite)")
MARKER = "streamwww.json"
LAYOUTS = ("sparse", "dense")
DTYPES = ("float32", "float64")
MAX_SHARD_NNZ = 2**31 - 1  # Parquet list offsets and CSR indices stay int32
# Fields of the metadata that the fingerprint covers: everything that changes
# what read_shard returns, and nothing else (not the format, not provenance).
_FINGERPRINT_FIELDS = ("format_version", "layout", "dtype", "n_rows", "n_features",
                       "nnz", "classes", "label_type")


def shard_name(i: int) -> str:
    """Return the base name of shard ``i`` (``shard-00000``, ...)."""
    return f"shard-{i:05d}"


def index_dtype(nnz: int, n_features: int) -> np.dtype:
    """Return the dtype of CSR ``indices``/``indptr`` that ``read_shard`` returns."""
    return np.dtype(np.int32 if max(nnz, n_features) < 2**31 else np.int64)


def format_version_for(weighted: bool) -> int:
    """The format version a store (or shard) is written with: :data:`FORMAT_VERSION`,
    with weights or without (``"weights": true`` tells them apart)."""
    return FORMAT_VERSION


def metadata_hash(meta: dict) -> str:
    """SHA-256 of the compact, key-sorted JSON of ``streamwww.json`` without
    ``metadata_sha256`` and ``created`` (docs/FORMAT.md, Integrity).

    Every other field is covered, those that decide what is read or how rows are
    weighted (``class_counts``, ``classes``, shapes, ``dtype``, shard records with
    their row counts, offsets and the checksums of chunks and ``zarr.json``
    documents, ``weights``) and provenance alike: the simplest list that leaves
    none out. The JSON of the parsed file equals that of the dict it was written
    from, so the hash is computed the same way on both sides.
    """
    body = {k: v for k, v in meta.items() if k not in _UNHASHED_FIELDS}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def shard_nbytes(layout: str, rows: int, nnz: int, n_features: int, dtype, weighted: bool = False) -> int:
    """Return the bytes of a shard once read: X (CSR or dense), ``y`` (int32) and, in a
    store with weights, ``weight`` (float64)."""
    itemsize = np.dtype(dtype).itemsize
    per_row = 4 + (8 if weighted else 0)
    if layout == "dense":
        return rows * n_features * itemsize + rows * per_row
    isize = index_dtype(nnz, n_features).itemsize
    return nnz * (itemsize + isize) + (rows + 1) * isize + rows * per_row


@dataclass
class ShardData:
    """The content of one shard: ``X`` (CSR with sorted indices, or a
    C-contiguous 2-D array), ``y`` (int32 class indices) and optionally
    ``weight`` (float64 per-row sample weights)."""

    X: sp.csr_matrix | np.ndarray
    y: np.ndarray
    weight: np.ndarray | None = None

    @property
    def layout(self) -> str:
        # (not scipy.sparse.issparse: this module is read to tell what a path holds, without SciPy)
        return "dense" if isinstance(self.X, np.ndarray) else "sparse"

    @property
    def rows(self) -> int:
        return int(self.X.shape[0])

    @property
    def nnz(self) -> int:
        return int(self.X.nnz) if self.layout == "sparse" else int(self.X.size)

    def content_hash(self) -> str:
        """SHA-256 of the shard's arrays in a canonical little-endian form."""
        h = hashlib.sha256()
        h.update(f"{self.layout}:{self.X.shape[0]}x{self.X.shape[1]}:{self.X.dtype.str}".encode())
        if self.layout == "sparse":
            arrays = (self.X.indptr.astype("<i8"), self.X.indices.astype("<i4"), self.X.data)
        else:
            arrays = (self.X,)
        for a in (*arrays, self.y.astype("<i4")):
            h.update(np.ascontiguousarray(a).view(np.uint8).data)
        return h.hexdigest()

    def weight_hash(self) -> str | None:
        """SHA-256 of the weights (see :func:`weight_hash`), or None without weights."""
        return None if self.weight is None else weight_hash(self.weight)


def weight_hash(weight: np.ndarray) -> str:
    """SHA-256 of a shard's weights: the text ``"weight:{rows}:<f8"``, then the
    weights as little-endian float64 (docs/FORMAT.md, Sample weights)."""
    h = hashlib.sha256(weight_hash_prefix(len(weight)))
    h.update(np.ascontiguousarray(weight, dtype="<f8").view(np.uint8).data)
    return h.hexdigest()


def weight_hash_prefix(rows: int) -> bytes:
    """What :func:`weight_hash` hashes before the values (for streamed hashing)."""
    return f"weight:{rows}:<f8".encode()


def labels_to_json(classes: np.ndarray) -> tuple[list, str]:
    """Return ``(list, label_type)`` for the ``classes`` field."""
    if classes.dtype.kind in "US":
        return [str(c) for c in classes], "str"
    return [float(c) for c in classes], "float64"


def labels_from_json(values: list, label_type: str) -> np.ndarray:
    """Inverse of :func:`labels_to_json`."""
    if label_type == "str":
        return np.asarray(values, dtype=str)
    return np.asarray(values, dtype=np.float64)


def fingerprint(meta: dict) -> str:
    """Stable SHA-256 identifying the data a store returns and the bytes that hold it.

    Covers the fields that change what ``read_shard`` returns (shapes, dtype,
    layout, classes) and each shard's rows, nnz and content hash; from format
    version 2 on also each shard's recorded crc32c checksums (the stored
    chunks, checked on every read), so a store whose checksums were edited
    has another fingerprint. Two conversions of the same text with the same
    options and format have the same fingerprint. Version-1 stores keep the
    fingerprint they were written with (no checksums). A store with weights
    (``"weights": true``, version 3) adds ``"weights": true`` and each shard's
    weight hash; the payload of a store without weights is exactly that of
    version 2, so its fingerprint is the one version 2 gives it.
    Version 4 has the payload of versions 2 and 3 (its own ``format_version``
    in it); its metadata checksums are checked on open instead
    (:func:`metadata_hash`).
    """
    payload = {k: meta[k] for k in _FINGERPRINT_FIELDS}
    if meta["format_version"] == 1:
        payload["shards"] = [[s["rows"], s["nnz"], s["sha256"]] for s in meta["shards"]]
    else:
        payload["shards"] = [[s["rows"], s["nnz"], s["sha256"], s[CHECKSUM_KEY]]
                             for s in meta["shards"]]
    if meta.get("weights") is True:
        payload["weights"] = True
        for entry, s in zip(payload["shards"], meta["shards"]):
            entry.append(s[WEIGHT_HASH_KEY])
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()
