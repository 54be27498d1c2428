"""Zarr shards on a local disk, their chunks encoded, written and hashed by two threads.

:class:`~streamwww.io._shardsink.ZarrStreamSink` hands every chunk to Zarr
(``Array.__setitem__``, or ``write_shard`` for a shard of one chunk per array):
per shard, Zarr's sync-to-async bridge, codec pipeline and store cost CPU
beyond the compression itself, its crc32c codec copies every chunk (it appends
by concatenating), the chunk files are read back for their crc32c, and all of
it runs on the converting thread -- a large part of pass 2
(docs/benchmarks-convert.md, "What changed"). Hand-written here instead:

* :class:`~streamwww.io._zarrcodec.ChunkCodec` makes the chunk objects with the library calls Zarr's
  codec chain makes for the arrays streamwww writes: ``bytes`` (little
  endian), numcodecs ``Blosc`` with the parameters Zarr's Blosc codec takes for
  the dtype, then the little-endian crc32c of the compressed bytes that Zarr's
  ``crc32c`` codec appends. The crc32c recorded for a chunk is computed from
  the bytes written (no chunk is read back from the page cache);
* :class:`~streamwww.io._zarrcodec.ZarrDocs` serializes ``zarr.json`` documents with Zarr's own metadata
  classes, from templates Zarr creates once per conversion (in memory);
* the shard's chunk grid, chunk keys, edge-chunk padding and content hash are
  those of :class:`~streamwww.io._shardsink.ZarrStreamSink` and ``write_shard``;
  tests/io/test_zarrwriter.py compares the files byte for byte;
* an *encoder* :class:`WriterThread` compresses and writes the chunks while
  a *hasher* one computes the content hash (spooling full chunks, as the hash
  covers ``indptr`` first), both while the converting thread reads and cuts
  the next rows. Blosc is called off the main thread, as Zarr calls it:
  numcodecs then compresses with one thread, so the bytes do not depend on
  timing.

Used for a local root whose arrays Zarr encodes as ``bytes`` -> ``blosc`` ->
``crc32c`` (``_zarr._compressors()``); anything else goes through Zarr.
"""

from __future__ import annotations

import hashlib
import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np

from streamwww.storage.location import location
from streamwww.io._format import (
    CHECKSUM_KEY,
    WEIGHT_ARRAY,
    WEIGHT_HASH_KEY,
    format_version_for,
    weight_hash_prefix,
)
from streamwww.io._zarrcodec import ChunkCodec, ZarrDocs

__all__ = ["ChunkedColumn", "EarlyShard", "LocalZarrSink", "ShardResult", "WriterThread", "Writers",
           "append_rows"]


class WriterThread:
    """One thread running jobs in the order submitted.

    At most ``depth`` jobs wait behind the running one (``submit`` blocks
    until one finishes), which bounds the chunk buffers in flight. The first
    job that fails makes the later ones fail at once with its exception, which
    the next ``submit`` or ``drain`` raises (and every later job's future).
    """

    def __init__(self, name: str, depth: int = 1):
        self._pool = ThreadPoolExecutor(1, thread_name_prefix=f"streamwww-zarr-{name}")
        self._queued: deque[Future] = deque()
        self._depth = depth
        self._failed = threading.Event()
        self._error: BaseException | None = None

    def _run(self, fn, args):
        if self._failed.is_set():  # every later job reports the first failure (a full disk...)
            raise self._error or RuntimeError("the writer thread was closed")
        try:
            return fn(*args)
        except BaseException as exc:
            self._error = exc
            self._failed.set()
            raise

    def submit(self, fn, *args) -> Future:
        """Run ``fn(*args)`` on the thread after the jobs before it."""
        while len(self._queued) > self._depth:
            self._queued.popleft().result()
        future = self._pool.submit(self._run, fn, args)
        self._queued.append(future)
        return future

    def drain(self) -> None:
        """Wait for every job; raise the first failure."""
        while self._queued:
            self._queued.popleft().result()

    def close(self) -> None:
        """Drop the jobs not started, wait for the running one, stop the thread
        (nothing is raised: for cleaning up after an error)."""
        self._failed.set()
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._queued.clear()


class Writers:
    """The encoder and hasher threads and the codec a conversion's shards share."""

    def __init__(self, codec: ChunkCodec):
        self.codec = codec
        self.docs = ZarrDocs(codec.compressors)
        self.encoder = WriterThread("encoder")
        self.hasher = WriterThread("hasher")

    def drain(self) -> None:
        self.encoder.drain()
        self.hasher.drain()

    def close(self) -> None:
        self.encoder.close()
        self.hasher.close()


class ChunkedColumn:
    """One array of a shard, filled row by row into a chunk buffer on the converting
    thread; a subclass says what happens to each full chunk (:meth:`_chunk_full`).

    The content hash covers ``indptr`` before ``indices``, so the full chunks are
    also kept raw in a spool file (``sink.spool_dir``) and read back at the close."""

    def __init__(self, sink, name: str, dtype, width: int | None, chunk_rows: int):
        self.sink, self.name = sink, name
        self.dtype = np.dtype(dtype)
        self.tail = () if width is None else (width,)
        self.chunk_rows = chunk_rows
        self.buf = self._new_buffer()
        self.filled = 0  # rows in buf
        self.spool = None  # raw copy of the full chunks, for the content hash
        self.spool_path = sink.spool_dir / f".spool-{sink.i:05d}-{name}"

    def _new_buffer(self) -> np.ndarray:
        return np.empty((self.chunk_rows, *self.tail), dtype=self.dtype)

    def append(self, values: np.ndarray) -> None:
        start, n = 0, len(values)
        while start < n:
            take = min(self.chunk_rows - self.filled, n - start)
            self.buf[self.filled:self.filled + take] = values[start:start + take]
            self.filled += take
            start += take
            if self.filled == self.chunk_rows:
                self._chunk_full()

    def _chunk_full(self) -> None:
        raise NotImplementedError

    def spool_chunk(self, values: np.ndarray) -> None:
        """Append a full chunk's values, little-endian, to the spool file."""
        if self.spool is None:
            self.spool = open(self.spool_path, "w+b")
        self.spool.write(np.ascontiguousarray(values, dtype=self.dtype.newbyteorder("<")).data)

    def hash_into(self, h, partial: np.ndarray, filled: int) -> None:
        """Feed every value to ``h`` as little-endian bytes: the full chunks from
        the spool file (then deleted), the rest from ``partial[:filled]``."""
        if self.spool is not None:
            self.spool.seek(0)
            block = bytearray(2**22)
            view = memoryview(block)
            while n := self.spool.readinto(block):
                h.update(view[:n])
            self.discard()
        h.update(np.ascontiguousarray(partial[:filled], dtype=self.dtype.newbyteorder("<")).data)

    def discard(self) -> None:
        """Close and delete the spool file, if there is one."""
        if self.spool is not None:
            self.spool.close()
            self.spool = None
            self.spool_path.unlink(missing_ok=True)


class _Column(ChunkedColumn):
    """One array of a shard: the chunk being filled on the converting thread;
    the encoder thread writes full chunks, the hasher thread spools them."""

    def __init__(self, sink: LocalZarrSink, name: str, dtype, width: int | None,
                 chunk_rows: int):
        super().__init__(sink, name, dtype, width, chunk_rows)
        self.full = 0  # full chunks handed to the threads
        self.crcs: list[int] = []  # per chunk written (encoder thread; the hasher thread spools)

    def _chunk_full(self) -> None:
        # a fresh buffer (pages touched as rows arrive): the full one belongs to the threads now
        buf, self.buf, self.filled = self.buf, self._new_buffer(), 0
        self.sink.writers.encoder.submit(self.write_chunk, self.full, buf)
        self.sink.writers.hasher.submit(self.spool_chunk, buf)
        self.full += 1

    # ---- encoder thread
    def write_chunk(self, index: int, values: np.ndarray) -> None:
        data, crc = self.sink.writers.codec.encode(values)
        key = (index,) + (0,) * len(self.tail)
        write_file(self.sink.directory / self.name / "c" / "/".join(map(str, key)),
                   data, crc.to_bytes(4, "little"))
        self.crcs.append(crc)

    def finish(self, partial: np.ndarray, filled: int) -> None:
        """Write the last chunk and the array's zarr.json."""
        from streamwww.io import _zarr

        total = self.full * self.chunk_rows + filled
        shape = (total, *self.tail)
        if self.full == 0:  # one chunk of exactly the data, as write_shard makes it
            chunks = _zarr._chunks(shape)
            if total:
                self.write_chunk(0, partial[:filled])
        else:  # the edge chunk, padded with the fill value as Zarr pads it
            chunks = (self.chunk_rows, *self.tail)
            if filled:
                partial[filled:] = 0  # the hasher reads only partial[:filled]
                self.write_chunk(self.full, partial)
        write_file(self.sink.directory / self.name / "zarr.json",
                   self.sink.writers.docs.array(self.dtype, shape, chunks))


def write_file(path: Path, *parts) -> None:
    """Write ``parts`` as the file ``path`` (creating its directory)."""
    try:
        f = open(path, "wb")
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        f = open(path, "wb")
    with f:
        for part in parts:
            f.write(part)


def append_rows(sink, X, y: np.ndarray, weight: np.ndarray | None) -> None:
    """Add rows to a Zarr sink's arrays (``sink.arrays``: objects with ``append``),
    counting ``sink.rows`` and ``sink.nnz``."""
    import scipy.sparse as sp

    n = X.shape[0]
    if sink.layout == "sparse":
        if not sp.issparse(X):
            X = sp.csr_matrix(X)
        if not X.has_sorted_indices:
            X = X.copy()
            X.sort_indices()
        a, b = int(X.indptr[0]), int(X.indptr[-1])
        ptr = X.indptr[1:].astype(np.int64) + (sink.nnz - a)
        sink.arrays["indptr"].append(ptr)
        sink.arrays["indices"].append(X.indices[a:b])
        sink.arrays["data"].append(X.data[a:b])  # cast on the way into the chunk buffer
        sink.nnz += b - a
    else:
        step = max(1, 2**22 // max(1, sink.n_features))  # bounded dense pieces
        for s in range(0, n, step):
            part = X[s:s + step]
            sink.arrays["X"].append(part.toarray() if sp.issparse(part) else part)
        sink.nnz += n * sink.n_features
    if "y" in sink.arrays:  # not in a shard whose class indices come later (streamwww.io._early)
        sink.arrays["y"].append(y)
    if sink.weighted:
        sink.arrays[WEIGHT_ARRAY].append(weight)
    sink.rows += n


class ShardResult:
    """What :meth:`LocalZarrSink.close` returns: ``result()`` waits for both threads
    and gives ``(rows, nnz, content_hash, record)``."""

    def __init__(self, rows: int, nnz: int, encoded: Future, hashed: Future):
        self.rows, self.nnz = rows, nnz
        self._encoded, self._hashed = encoded, hashed

    def result(self) -> tuple[int, int, str, dict]:
        crcs = self._encoded.result()
        content_hash, weight_hash = self._hashed.result()
        record = {CHECKSUM_KEY: crcs}
        if weight_hash is not None:
            record[WEIGHT_HASH_KEY] = weight_hash
        return self.rows, self.nnz, content_hash, record


class LocalZarrSink:
    """Write a Zarr shard on a local disk chunk by chunk through :class:`Writers`
    (see the module docstring)."""

    def __init__(self, root, backend, i: int, *, layout: str, n_features: int,
                 dtype: np.dtype, row_offset: int, weighted: bool = False,
                 spool_dir: Path | None = None, writers: Writers, labels_later: bool = False):
        from streamwww.io import _zarr

        root = location(root)
        self.i = i
        self.directory = Path(root.local_path) / backend.shard_relpath(i)
        self.spool_dir = Path(spool_dir) if spool_dir is not None else root.local_path
        self.layout, self.n_features, self.dtype = layout, n_features, np.dtype(dtype)
        self.row_offset, self.weighted = row_offset, weighted
        self.writers = writers
        self.labels_later = labels_later  # y and the group's zarr.json come with complete()
        self.rows = self.nnz = 0
        flat = _zarr._CHUNK_ELEMENTS
        if layout == "sparse":
            self.arrays = {"indptr": _Column(self, "indptr", np.int64, None, flat),
                           "indices": _Column(self, "indices", np.int32, None, flat),
                           "data": _Column(self, "data", self.dtype, None, flat)}
            self.arrays["indptr"].append(np.zeros(1, dtype=np.int64))
        else:
            self.arrays = {"X": _Column(self, "X", self.dtype, n_features,
                                        max(1, flat // max(1, n_features)))}
        if not labels_later:
            self.arrays["y"] = _Column(self, "y", np.int32, None, flat)
        if weighted:
            self.arrays[WEIGHT_ARRAY] = _Column(self, WEIGHT_ARRAY, np.float64, None, flat)

    def append(self, X, y: np.ndarray, weight: np.ndarray | None = None) -> None:
        """Add rows (CSR or dense, ``n_features`` columns), their class indices
        and (a sink for a store with weights) their float64 weights."""
        append_rows(self, X, y, weight)

    def close(self) -> ShardResult | EarlyShard:
        """Hand the last chunks to the threads."""
        # the columns as of now (EarlyShard.complete adds y while these jobs may wait)
        last = {name: (col, col.buf, col.filled) for name, col in self.arrays.items()}
        for col in self.arrays.values():
            col.buf = None
        encoded = self.writers.encoder.submit(self._write_rest, last)
        hashed = self.writers.hasher.submit(self._hash, last)
        if self.labels_later:
            return EarlyShard(self, encoded, hashed)
        return ShardResult(self.rows, self.nnz, encoded, hashed)

    def prefix(self) -> bytes:
        """What the content hash hashes before the arrays (as ShardData.content_hash)."""
        return f"{self.layout}:{self.rows}x{self.n_features}:{self.dtype.str}".encode()

    @staticmethod
    def checksums(columns: dict) -> dict:
        names = ("indptr", "indices", "data", "X", "y", WEIGHT_ARRAY)  # write_shard's order
        return {name: columns[name].crcs for name in names if name in columns}

    def write_group(self) -> None:
        attrs = {"streamwww": {"format_version": format_version_for(self.weighted),
                               "shard": self.i, "row_offset": self.row_offset,
                               "layout": self.layout, "n_features": self.n_features}}
        write_file(self.directory / "zarr.json", self.writers.docs.group(attrs))

    def _write_rest(self, last: dict) -> dict:
        if not self.labels_later:
            self.write_group()
        for col, buf, filled in last.values():
            col.finish(buf, filled)
        return self.checksums({name: col for name, (col, _, _) in last.items()})

    def _hash(self, last: dict):
        try:
            h = hashlib.sha256(self.prefix())
            order = ("indptr", "indices", "data", "y") if self.layout == "sparse" else ("X", "y")
            for name in order:
                if name in last:
                    col, buf, filled = last[name]
                    col.hash_into(h, buf, filled)
            weight_hash = None
            if self.weighted:  # as ShardData.weight_hash
                wh = hashlib.sha256(weight_hash_prefix(self.rows))
                col, buf, filled = last[WEIGHT_ARRAY]
                col.hash_into(wh, buf, filled)
                weight_hash = wh.hexdigest()
            if self.labels_later:  # y comes later: the hash so far, and what it started with
                return h, self.prefix(), weight_hash
            return h.hexdigest(), weight_hash
        finally:
            for col, _, _ in last.values():
                col.discard()


class EarlyShard:
    """A sparse shard closed before its class indices were known (``labels_later``):
    everything but ``y`` and the group's zarr.json is written, and its content
    hash has covered ``indptr``, ``indices`` and ``data`` after a prefix with
    the ``n_features`` of the close (see :mod:`streamwww.io._early`)."""

    def __init__(self, sink: LocalZarrSink, encoded: Future, hashed: Future):
        self.sink, self.encoded, self.hashed = sink, encoded, hashed
        self.rows, self.nnz = sink.rows, sink.nnz

    def complete(self, y: np.ndarray, n_features: int) -> ShardResult:
        """Write ``y`` (int32 class indices) and the group's zarr.json with the final
        ``n_features``; finish the content hash (again from the written chunks if
        the prefix changed)."""
        from streamwww.io import _zarr

        sink = self.sink
        sink.n_features = n_features
        col = sink.arrays["y"] = _Column(sink, "y", np.int32, None, _zarr._CHUNK_ELEMENTS)
        col.append(y)  # full chunks go to the threads now
        last = (col.buf, col.filled)
        col.buf = None
        encoded = sink.writers.encoder.submit(self._write_y, col, last)
        hashed = sink.writers.hasher.submit(self._hash_y, col, last)
        return ShardResult(self.rows, self.nnz, encoded, hashed)

    def _write_y(self, col: _Column, last: tuple) -> dict:
        col.finish(*last)
        self.sink.write_group()
        return self.sink.checksums(self.sink.arrays)

    def _hash_y(self, col: _Column, last: tuple) -> tuple[str, str | None]:
        try:
            h, prefix, weight_hash = self.hashed.result()
            if prefix != self.sink.prefix():  # n_features grew after the close: hash again
                h = hashlib.sha256(self.sink.prefix())
                self.encoded.result()  # the arrays are on disk
                for name in ("indptr", "indices", "data"):
                    h.update(self.read(name).astype(self.read_dtype(name)).data)
            col.hash_into(h, *last)
            return h.hexdigest(), weight_hash
        finally:
            col.discard()

    def read_dtype(self, name: str) -> np.dtype:
        return self.sink.arrays[name].dtype.newbyteorder("<")

    def read(self, name: str) -> np.ndarray:
        """Array ``name`` as written (chunks checked against their crc32c)."""
        import zarr

        from streamwww.io._chunks import read_into

        self.encoded.result()
        where = self.sink.directory / name
        array = zarr.open_array(str(where), mode="r", zarr_format=3)
        out = np.empty(array.shape, dtype=array.dtype)
        return read_into(array, where, out, missing="error",
                         checksums=self.sink.arrays[name].crcs)
