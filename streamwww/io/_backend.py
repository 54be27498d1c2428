"""Storage backends: how one shard is laid out in one on-disk format.

A backend only writes and reads single shards, below a root that is a local
path or a :class:`~streamwww.storage.location.Location` (an object store); everything else (cutting rows
into shards, metadata, the commit marker, atomic rename, validation) is shared
by every format in :mod:`streamwww.io.store`. New formats register here.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from pathlib import Path
from typing import ClassVar

import numpy as np
import scipy.sparse as sp

from streamwww.io._format import FORMAT_VERSION, ShardData

__all__ = ["ShardBackend", "available_formats", "get_backend"]


class ShardBackend(ABC):
    """Write and read the shards of one on-disk format."""

    name: ClassVar[str]

    @abstractmethod
    def shard_relpath(self, i: int) -> str:
        """Path of shard ``i`` relative to the store root (file or directory)."""

    def init_root(self, root: Path, format_version: int = FORMAT_VERSION) -> None:  # noqa: B027
        """Prepare a new (temporary) store directory before any shard (optional hook)."""

    @abstractmethod
    def write_shard(self, root: Path, i: int, shard: ShardData, *, n_features: int,
                    row_offset: int) -> dict:
        """Write shard ``i`` under ``root`` (with its ``weight`` array when
        ``shard.weight`` is not None); return its content checksums,
        ``{CHECKSUM_KEY: {name: [crc32c, ...]}}`` (names as :meth:`checksum_names`),
        for the shard's record in the metadata."""

    @abstractmethod
    def checksum_names(self, layout: str, weights: bool = False) -> tuple[str, ...]:
        """The names under which a shard of ``layout`` (with weights or not)
        records its checksums."""

    def document_names(self, layout: str, weights: bool = False) -> tuple[str, ...]:
        """The arrays of a shard whose own metadata documents (outside the checksummed
        chunks or files) are checksummed in the store's metadata (format version 4 on);
        none by default: a format whose shard files are checksummed whole needs none."""
        return ()

    def document_checksums(self, root, shards: list[dict], layout: str,
                           weights: bool = False) -> list[dict] | None:
        """For each written shard (its record in ``shards``): ``{name: crc32c}`` of the
        documents :meth:`document_names` lists, read back from below ``root``; None when
        the format has none."""
        return None

    @abstractmethod
    def read_shard_into(self, root: Path, i: int, out: dict[str, np.ndarray], *, layout: str,
                        n_features: int, handles: dict | None = None,
                        checksums: dict | None = None,
                        documents: dict | None = None) -> np.ndarray | None:
        """Read shard ``i`` into preallocated arrays, with only that shard's files read.

        ``out`` holds writable arrays (views into one buffer when several shards
        are read as a group) of exactly the shard's size: sparse layout
        ``indices`` (nnz,), ``data`` (nnz,) and ``y`` (rows,); dense layout
        ``X`` (rows, n_features) and ``y``; and, for a store with weights,
        optionally ``weight`` (rows,) float64 -- alone (only the weights are
        wanted) or with the others. Reading straight into them avoids a
        second copy when a group of shards is trained as one block.

        ``handles``, if given, is the opened store's cache of per-shard handles
        (open arrays) that a backend may keep between reads.

        ``checksums``, if given (format version 2 on), is the shard's recorded
        checksums as :meth:`write_shard` returned them: every stored byte read
        must match them, and every chunk must exist, else
        :class:`~streamwww.errors.ChecksumError` (naming the file, the array and
        the chunk). Without it (version 1) nothing is verified.

        ``documents``, if given (format version 4 on), is the shard's recorded
        ``{name: crc32c}`` of the documents :meth:`document_names` lists: each
        one read must match before it is used, else
        :class:`~streamwww.errors.ChecksumError`.

        Returns the shard's CSR ``indptr`` (rows + 1 offsets from 0) when
        ``out`` holds the sparse layout's ``indices``, else None. The store validates shapes and ranges
        afterwards; a stored array of another length must raise.
        """


_BUILTIN = {
    "zarr": "streamwww.io._zarr:ZarrBackend",
    "parquet": "streamwww.io._parquet:ParquetBackend",
}
_LOADED: dict[str, ShardBackend] = {}


def available_formats() -> tuple[str, ...]:
    """Names of the registered formats."""
    return tuple(_BUILTIN)


def get_backend(name: str) -> ShardBackend:
    """Return the backend of format ``name`` (imported on first use)."""
    if name not in _BUILTIN:
        raise ValueError(f"The 'format' parameter must be one of {list(_BUILTIN)}. "
                         f"Got {name!r} instead.")
    if name not in _LOADED:
        module, cls = _BUILTIN[name].split(":")
        _LOADED[name] = getattr(importlib.import_module(module), cls)()
    return _LOADED[name]


def check_fits(name: str, shape: tuple, dtype, target: np.ndarray) -> None:
    """Raise ValueError unless a stored array of ``shape``/``dtype`` fits ``target`` exactly."""
    if tuple(shape) != target.shape or np.dtype(dtype) != target.dtype:
        raise ValueError(f"{name} has shape {tuple(shape)} and dtype {dtype}; "
                         f"expected {target.shape} and {target.dtype}")


def make_csr(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, rows: int,
             n_features: int, index_dtype: np.dtype) -> sp.csr_matrix:
    """CSR matrix from stored arrays, with sorted-index flag set (stored indices
    are sorted; no copies when dtypes already match)."""
    X = sp.csr_matrix((data, indices.astype(index_dtype, copy=False),
                       indptr.astype(index_dtype, copy=False)), shape=(rows, n_features))
    X.has_sorted_indices = True
    return X
