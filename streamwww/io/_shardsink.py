"""Where :class:`~streamwww.io.writer.ShardWriter` puts the rows of the shard it is filling.

A *sink* receives one shard's rows piece by piece and writes them when the
shard is closed. Two kinds:

* :class:`BufferedSink` (any backend, used for Parquet, whose single row group
  per shard needs every row at once): keeps the pieces and hands one
  :class:`~streamwww.io._format.ShardData` to the backend's ``write_shard`` --
  memory grows with the shard size.
* :class:`ZarrStreamSink`: writes each Zarr chunk as soon as it is full, so a
  shard never sits in memory whole; memory is one chunk per array (at most
  ``_zarr._CHUNK_ELEMENTS`` elements each), whatever ``--shard-mb``. The bytes
  on disk are those ``ZarrBackend.write_shard`` writes for the whole shard
  (same chunk grid, codecs and metadata: an array that ends within its first
  chunk is written in one call exactly as there; a longer one is created with
  full chunks, grown chunk by chunk and given its final length at the end).
  The content hash covers ``indptr`` before ``indices`` (complete only at the
  end), so each full chunk is also appended, raw, to a spool file next to the
  shard, read back for the hash at the close and deleted (decoding the written
  chunks again took several times longer). A shard whose arrays all fit in
  one chunk never leaves memory before its close and is written by
  ``write_shard`` itself, like any other format's.

  Keep :meth:`ZarrStreamSink.group` and :meth:`_StreamedArray._chunk_full`
  in step with ``ZarrBackend.write_shard`` (group attributes, ``create_array``
  arguments): the codecs come from ``_zarr._compressors()`` and the chunk
  shapes from ``_zarr._chunks``, the rest is repeated here.

Memory bound in numbers: for float32 CSR, at most 16 MiB each of ``indices``,
``data`` and ``y``, 32 MiB of ``indptr`` and (a store with weights) 32 MiB of
``weight`` (pages only touched as rows arrive), and one chunk being encoded.
"""

from __future__ import annotations

import hashlib
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from streamwww.io._chunks import chunk_checksums, create_checksummed_array
from streamwww.storage.location import location
from streamwww.io._format import (
    CHECKSUM_KEY,
    WEIGHT_ARRAY,
    WEIGHT_HASH_KEY,
    ShardData,
    format_version_for,
    weight_hash_prefix,
)
from streamwww.io._zarrwriter import ChunkedColumn, LocalZarrSink, append_rows

__all__ = ["BufferedSink", "ShardPool", "ZarrStreamSink", "open_sink"]


class ShardPool:
    """Threads that write whole buffered shards (Parquet), so that the next shard
    is collected -- and, with small shards, another written -- meanwhile.

    Parquet's writer compresses on the calling thread only (most of pass 2 for
    a Parquet store); it releases the GIL. At most ``budget`` bytes of shards
    are in flight beside the one being collected: a larger shard is written on
    the collecting thread, so that memory stays one shard at the default shard
    size.
    """

    def __init__(self, threads: int, budget: int):
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="streamwww-shard-writer")
        self._flight: deque[tuple[Future, int]] = deque()
        self.budget = budget

    def submit(self, fn, nbytes: int) -> Future | None:
        """Run ``fn()`` on a thread, or return None (too large: the caller runs it)."""
        while self._flight and (nbytes > self.budget
                                or sum(b for _, b in self._flight) + nbytes > self.budget):
            self._flight.popleft()[0].result()
        if nbytes > self.budget:
            return None
        future = self._pool.submit(fn)
        self._flight.append((future, nbytes))
        return future

    def drain(self) -> None:
        """Wait for every shard; raise the first failure."""
        while self._flight:
            self._flight.popleft()[0].result()

    def close(self) -> None:
        """Drop the shards not started, wait for the others (nothing is raised)."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._flight.clear()


class BufferedSink:
    """Collect a shard's pieces in memory; write them with ``backend.write_shard``
    (on a :class:`ShardPool` thread when given one)."""

    def __init__(self, root, backend, i: int, *, layout: str, n_features: int,
                 dtype: np.dtype, row_offset: int, weighted: bool = False,
                 spool_dir: Path | None = None, pool: ShardPool | None = None):
        self.root, self.backend, self.i = root, backend, i
        self.layout, self.n_features, self.dtype = layout, n_features, dtype
        self.row_offset = row_offset
        self.weighted = weighted
        self.pool = pool
        self._pending: list[tuple] = []
        self._nbytes = 0

    def append(self, X, y: np.ndarray, weight: np.ndarray | None = None) -> None:
        """Add rows (CSR or dense, ``n_features`` columns), their class indices
        and (a sink for a store with weights) their float64 weights."""
        self._pending.append((X, y, weight))
        parts = (X.data, X.indices, X.indptr) if sp.issparse(X) else (X,)
        self._nbytes += sum(a.nbytes for a in parts) + y.nbytes

    def close(self):
        """Write the shard; return ``(rows, nnz, content_hash, record)`` -- or a future
        of it, written by the pool: ``record`` holds the checksums (and the weight
        hash) for the shard's metadata."""
        if self.pool is not None:
            future = self.pool.submit(self._write, self._nbytes)
            if future is not None:
                return future
        return self._write()

    def _write(self) -> tuple[int, int, str, dict | None]:
        parts = [p[0] for p in self._pending]
        y = np.concatenate([p[1] for p in self._pending]).astype(np.int32, copy=False)
        weight = (np.concatenate([p[2] for p in self._pending]).astype(np.float64, copy=False)
                  if self.weighted else None)
        self._pending = []
        if self.layout == "sparse":
            parts = [p if sp.issparse(p) else sp.csr_matrix(p) for p in parts]
            X = parts[0] if len(parts) == 1 else sp.vstack(parts, format="csr")
            X = sp.csr_matrix(X, dtype=self.dtype)
            if not X.has_sorted_indices:
                X.sort_indices()
        else:
            parts = [p.toarray() if sp.issparse(p) else p for p in parts]
            X = np.ascontiguousarray(np.concatenate(parts) if len(parts) > 1 else parts[0],
                                     dtype=self.dtype)
        del parts
        shard = ShardData(X, y, weight)
        sums = self.backend.write_shard(self.root, self.i, shard, n_features=self.n_features,
                                        row_offset=self.row_offset)
        return shard.rows, shard.nnz, shard.content_hash(), _with_weight_hash(sums, shard)


def _with_weight_hash(sums: dict | None, shard: ShardData) -> dict | None:
    """The shard record's extra fields: the backend's checksums, plus the weight hash."""
    if shard.weight is None:
        return sums
    return {**(sums or {}), WEIGHT_HASH_KEY: shard.weight_hash()}


class _StreamedArray(ChunkedColumn):
    """One Zarr array written chunk by chunk (see the module docstring)."""

    def __init__(self, sink: ZarrStreamSink, name: str, dtype, width: int | None,
                 chunk_rows: int, compressors):
        super().__init__(sink, name, dtype, width, chunk_rows)
        self.compressors = compressors
        self.written = 0  # rows already in full chunks on disk
        self.array = None

    def _chunk_full(self) -> None:  # written here, the buffer reused
        end = self.written + self.chunk_rows
        if self.array is None:
            self.array = create_checksummed_array(
                self.sink.group(), self.name, shape=(end, *self.tail), dtype=self.dtype,
                chunks=(self.chunk_rows, *self.tail), compressors=self.compressors)
        else:
            self.array.resize((end, *self.tail))
        self.array[self.written:end] = self.buf
        self.spool_chunk(self.buf)
        self.written, self.filled = end, 0

    def close(self, chunks_for) -> None:
        """Write what is left (an array that never filled a chunk is written
        whole, as ``write_shard`` does)."""
        total = self.written + self.filled
        if self.array is None:
            data = self.buf[:total]
            self.array = create_checksummed_array(self.sink.group(), self.name, data=data,
                                                  chunks=chunks_for(data.shape), compressors=self.compressors)
        elif self.filled:
            self.array.resize((total, *self.tail))
            self.array[self.written:total] = self.buf[:self.filled]

    def checksums(self) -> list[int]:
        """The crc32c of every chunk, read back from the files written (docs/FORMAT.md, Integrity)."""
        return chunk_checksums(self.array, self.sink.root.child(self.sink.backend.shard_relpath(self.sink.i),
                                                                  self.name))

    def values(self) -> np.ndarray:
        """The values of an array that never filled a chunk (still in memory)."""
        return self.buf[:self.filled]

    def hash_into(self, h) -> None:
        """:meth:`ChunkedColumn.hash_into` with the chunk buffer's rows, then free the buffer."""
        super().hash_into(h, self.buf, self.filled)
        self.buf = None


class ZarrStreamSink:
    """Write a Zarr shard chunk by chunk as rows arrive (see the module docstring)."""

    def __init__(self, root, backend, i: int, *, layout: str, n_features: int,
                 dtype: np.dtype, row_offset: int, weighted: bool = False, spool_dir: Path | None = None):
        from streamwww.io import _zarr

        self.weighted = weighted
        self.root, self.backend, self.i = location(root), backend, i
        # the spool files stay on local disk even when the store is on an object store
        self.spool_dir = Path(spool_dir) if spool_dir is not None else self.root.local_path
        self.layout, self.n_features, self.dtype = layout, n_features, np.dtype(dtype)
        self.row_offset = row_offset
        self.rows = self.nnz = 0
        self._group = None
        self._chunks = _zarr._chunks
        comp = _zarr._compressors()
        flat = _zarr._CHUNK_ELEMENTS

        def column(name, dt, width=None, chunk_rows=flat):
            return _StreamedArray(self, name, dt, width, chunk_rows, comp)

        if layout == "sparse":
            self.arrays = {"indptr": column("indptr", np.int64),
                           "indices": column("indices", np.int32),
                           "data": column("data", self.dtype)}
            self.arrays["indptr"].append(np.zeros(1, dtype=np.int64))
        else:
            self.arrays = {"X": column("X", self.dtype, n_features,
                                       max(1, flat // max(1, n_features)))}
        self.arrays["y"] = column("y", np.int32)
        if weighted:
            self.arrays[WEIGHT_ARRAY] = column(WEIGHT_ARRAY, np.float64)

    def group(self):
        """The shard's Zarr group, created when the first chunk is written."""
        if self._group is None:
            from streamwww.io._zarr import _group

            attrs = {"streamwww": {"format_version": format_version_for(self.weighted),
                                   "shard": self.i,
                                   "row_offset": self.row_offset, "layout": self.layout,
                                   "n_features": self.n_features}}
            self._group = _group(self.root, self.backend.shard_relpath(self.i), "w-", attributes=attrs)
        return self._group

    def append(self, X, y: np.ndarray, weight: np.ndarray | None = None) -> None:
        """Add rows (CSR or dense, ``n_features`` columns), their class indices
        and (a sink for a store with weights) their float64 weights."""
        append_rows(self, X, y, weight)

    def close(self) -> tuple[int, int, str, dict]:
        """Finish the arrays; return ``(rows, nnz, content_hash, checksums)`` (the hash as
        :meth:`ShardData.content_hash`, read back from disk; the crc32c of every chunk)."""
        if self._group is None:  # no chunk filled: one write_shard call, as for any format
            a = {name: array.values() for name, array in self.arrays.items()}
            if self.layout == "sparse":
                X = sp.csr_matrix((a["data"], a["indices"], a["indptr"]),
                                  shape=(self.rows, self.n_features))
                X.has_sorted_indices = True
            else:
                X = a["X"]
            shard = ShardData(X, a["y"], a.get(WEIGHT_ARRAY))
            sums = self.backend.write_shard(self.root, self.i, shard, n_features=self.n_features,
                                            row_offset=self.row_offset)
            self.arrays = None
            return shard.rows, shard.nnz, shard.content_hash(), _with_weight_hash(sums, shard)
        for array in self.arrays.values():
            array.close(self._chunks)
        h = hashlib.sha256()
        h.update(f"{self.layout}:{self.rows}x{self.n_features}:{self.dtype.str}".encode())
        order = ("indptr", "indices", "data", "y") if self.layout == "sparse" else ("X", "y")
        for name in order:
            self.arrays[name].hash_into(h)
        record = {CHECKSUM_KEY: {name: array.checksums() for name, array in self.arrays.items()}}
        if self.weighted:  # as ShardData.weight_hash
            wh = hashlib.sha256(weight_hash_prefix(self.rows))
            self.arrays[WEIGHT_ARRAY].hash_into(wh)
            record[WEIGHT_HASH_KEY] = wh.hexdigest()
        return self.rows, self.nnz, h.hexdigest(), record


def open_sink(root, backend, i: int, *, writers=None, pool=None, **kwargs):
    """The sink for shard ``i``: for Zarr on a local disk, written by ``writers``
    (:class:`~streamwww.io._zarrwriter.Writers`, when
    :func:`~streamwww.io._zarrcodec.local_codec` allows); otherwise streamed
    through Zarr, or buffered (other formats; written by ``pool`` if given)."""
    if writers is not None:
        return LocalZarrSink(root, backend, i, writers=writers, **kwargs)
    if backend.name == "zarr":
        return ZarrStreamSink(root, backend, i, **kwargs)
    return BufferedSink(root, backend, i, pool=pool, **kwargs)
