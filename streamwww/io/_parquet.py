"""Parquet backend: each shard is one Parquet file, one row per sample.

Columns (docs/FORMAT.md)::

    y        int32                        class index
    indices  list<int32>                  sparse layout: sorted 0-based columns
    values   list<float32|float64>        sparse layout: values of those columns
    x        fixed_size_list<float, n_features>   dense layout
    weight   double                       sample weight (stores with weights)

The file's key-value metadata ``streamwww`` (JSON) describes the shard. Pages
are zstd-compressed, without dictionary encoding, and carry Parquet's page
checksums (CRC32), verified on read. From format version 2 on the crc32c of the
whole file is recorded in the store's metadata and checked before the file is
parsed (docs/FORMAT.md, Integrity).
"""

from __future__ import annotations

import json
import os
import threading

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from streamwww._arrow import column_to_numpy, from_numpy, to_numpy
from streamwww.errors import ChecksumError
from streamwww.io._backend import ShardBackend, check_fits
from streamwww.io._chunks import crc32c
from streamwww.storage.fsutil import read_failure
from streamwww.storage.location import location
from streamwww.io._format import (
    CHECKSUM_KEY,
    DAMAGED_FIX,
    WEIGHT_ARRAY,
    ShardData,
    format_version_for,
    shard_name,
)

_PIECE = 16 * 2**20
# the columns that hold each array read_shard_into fills, per layout
_COLUMNS = {"sparse": {"y": ["y"], "indices": ["indices"], "data": ["values"],
                       WEIGHT_ARRAY: [WEIGHT_ARRAY]},
            "dense": {"y": ["y"], "X": ["x"], WEIGHT_ARRAY: [WEIGHT_ARRAY]}}


def _list_parts(column: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """Offsets (from 0) and flat values of a list column."""
    arr = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    offsets = to_numpy(arr.offsets)
    values = to_numpy(arr.values)[offsets[0]:offsets[-1]]
    return offsets - offsets[0], values


_local = threading.local()


def _arrow_scratch(nbytes: int) -> tuple[pa.Buffer, np.ndarray]:
    """This thread's reusable read buffer for a whole Parquet file, in memory Arrow owns:
    ``(the first nbytes as an Arrow buffer, the same bytes as a writable uint8 array)``.

    Arrow's memory, never Python's (``pa.py_buffer``): pyarrow decodes a file's columns on
    its own threads, and a decode task may drop the last reference to the bytes it read
    after the read has returned. Releasing Python memory takes the GIL, which a thread can
    no longer take once the interpreter is exiting: it then unwinds through a C++
    destructor and the process aborts ("terminate called without an active exception",
    exit status 134). Arrow's memory is released without it. A larger file gets a new
    buffer, never a resize of the old one, which a decode task may still hold.
    """
    buf = getattr(_local, "buf", None)
    if buf is None or buf.size < nbytes:
        buf = _local.buf = pa.allocate_buffer(nbytes + nbytes // 4)
    return buf.slice(0, nbytes), np.frombuffer(buf, dtype=np.uint8, count=nbytes)


def _read_table(source, columns: list[str]) -> pa.Table:
    """The columns of a Parquet file (a buffer reader), its page checksums checked;
    not ``pq.read_table``, which imports ``pyarrow.dataset`` and with it pandas (streamwww._arrow)."""
    with pq.ParquetFile(source, memory_map=False, page_checksum_verification=True) as f:
        return f.read(columns=columns)


class ParquetBackend(ShardBackend):
    """Shards as Parquet files."""

    name = "parquet"

    def shard_relpath(self, i: int) -> str:
        return shard_name(i) + ".parquet"

    def checksum_names(self, layout: str, weights: bool = False) -> tuple[str, ...]:
        return ("file",)  # the whole file, weight column included

    def write_shard(self, root, i: int, shard: ShardData, *, n_features: int,
                    row_offset: int) -> dict:
        y = from_numpy(shard.y.astype(np.int32, copy=False))
        if shard.layout == "sparse":
            X = shard.X
            offsets = from_numpy(X.indptr.astype(np.int32, copy=False))
            columns = {
                "y": y,
                "indices": pa.ListArray.from_arrays(offsets, from_numpy(
                    X.indices.astype(np.int32, copy=False))),
                "values": pa.ListArray.from_arrays(offsets, from_numpy(X.data)),
            }
        else:
            flat = from_numpy(shard.X.reshape(-1))
            columns = {"y": y, "x": pa.FixedSizeListArray.from_arrays(flat, n_features)}
        if shard.weight is not None:
            columns[WEIGHT_ARRAY] = from_numpy(np.asarray(shard.weight, dtype=np.float64))
        table = pa.table(columns)
        info = {"format_version": format_version_for(shard.weight is not None), "shard": i, "row_offset": row_offset,
                "layout": shard.layout, "n_features": n_features}
        table = table.replace_schema_metadata({"streamwww": json.dumps(info)})
        import google_crc32c

        where = location(root).child(self.shard_relpath(i))
        options = dict(compression="zstd", use_dictionary=False, write_statistics=False,
                       row_group_size=max(1, shard.rows), write_page_checksum=True)
        if not where.is_local:  # one PUT of the finished file; its bytes are what is recorded
            sink = pa.BufferOutputStream()
            pq.write_table(table, sink, **options)
            data = sink.getvalue()
            where.write_bytes(data.to_pybytes())
            return {CHECKSUM_KEY: {"file": [crc32c(data)]}}
        pq.write_table(table, where.path, **options)
        crc = 0
        with open(where.path, "rb") as f:  # read back: what is recorded is what is on disk
            while piece := f.read(_PIECE):
                crc = google_crc32c.extend(crc, piece)
        return {CHECKSUM_KEY: {"file": [int(crc)]}}

    def read_shard_into(self, root, i: int, out: dict[str, np.ndarray], *, layout: str,
                        n_features: int, handles: dict | None = None,
                        checksums: dict | None = None,
                        documents: dict | None = None) -> np.ndarray | None:
        # (no documents: the file's crc32c covers its schema and footer too)
        where = location(root).child(self.shard_relpath(i))
        path = where.url
        # only the columns asked for are decoded (the whole file is checked)
        columns = [c for name in out for c in _COLUMNS[layout][name]]
        # The file's bytes are read here (so that a failure to read them is told from
        # damage, which only the parsing below can find), checked, then parsed from the
        # same buffer: this thread's reusable one (fresh pages cost more than the check,
        # see _chunks; an object's bytes are copied into it, see _arrow_scratch). Nothing
        # returned refers to it: every part is copied into ``out``.
        try:
            if where.is_local:
                with open(path, "rb", buffering=0) as f:
                    size = os.fstat(f.fileno()).st_size
                    buf, view = _arrow_scratch(size)
                    if f.readinto(view) != size:
                        raise ChecksumError(path, "file", "file", f"cannot read {size} bytes",
                                            DAMAGED_FIX)
            else:  # an object store: the whole file in one request
                data = where.read_buffer()
                size = len(data)
                buf, view = _arrow_scratch(size)
                view[...] = np.frombuffer(data, dtype=np.uint8)
        except FileNotFoundError:
            raise ChecksumError(path, "file", "file", "shard file is missing", DAMAGED_FIX) from None
        except OSError as exc:  # there but unreadable (EIO, a directory): an I/O error, not damage
            if not where.is_local:
                raise  # (the store reports an object store's failure)
            raise read_failure(path, exc, "the shard file") from None
        if checksums is not None:  # (version 1 recorded none: only the pages' own are checked)
            expected = int(checksums["file"][0])
            if (got := crc32c(view)) != expected:
                raise ChecksumError(path, "file", "file", f"crc32c mismatch: the file hashes to "
                                    f"{got:#010x}, the metadata records {expected:#010x} "
                                    f"({size} bytes)", DAMAGED_FIX)
        table = _read_table(pa.BufferReader(buf), columns)
        parts = {}
        indptr = None
        if "y" in out:
            parts["y"] = column_to_numpy(table.column("y"))
        if WEIGHT_ARRAY in out:
            parts[WEIGHT_ARRAY] = column_to_numpy(table.column(WEIGHT_ARRAY))
        if "X" in out:
            x = table.column("x")
            arr = x.combine_chunks() if x.num_chunks != 1 else x.chunk(0)
            parts["X"] = to_numpy(arr.flatten()).reshape(table.num_rows, n_features)
        if "indices" in out:
            indptr, parts["indices"] = _list_parts(table.column("indices"))
        if "data" in out:
            _, parts["data"] = _list_parts(table.column("values"))
        for name, target in out.items():
            check_fits(name, parts[name].shape, parts[name].dtype, target)
            target[...] = parts[name]  # out of Arrow's immutable buffers, into the caller's
        return indptr
