"""Parquet backend: each shard is one Parquet file, one row per sample.

Columns (docs/FORMAT.md)::

    y        int32                        class index
    indices  list<int32>                  sparse layout: sorted 0-based columns
    values   list<float32|float64>        sparse layout: values of those columns
    x        fixed_size_list<float, n_features>   dense layout

The file's key-value metadata ``streamwww`` (JSON) describes the shard. Pages
are zstd-compressed, without dictionary encoding.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from streamwww.io._backend import ShardBackend, make_csr
from streamwww.io._format import FORMAT_VERSION, ShardData, shard_name


def _writeable(a: np.ndarray) -> np.ndarray:
    # Arrow buffers are immutable; hand out arrays the caller may modify, like
    # the other formats do.
    return a if a.flags.writeable else a.copy()


def _list_parts(column: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """Offsets (from 0) and flat values of a list column."""
    arr = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    offsets = arr.offsets.to_numpy()
    values = arr.values.to_numpy(zero_copy_only=False)[offsets[0]:offsets[-1]]
    return offsets - offsets[0], _writeable(values)


class ParquetBackend(ShardBackend):
    """Shards as Parquet files."""

    name = "parquet"

    def shard_relpath(self, i: int) -> str:
        return shard_name(i) + ".parquet"

    def write_shard(self, root: Path, i: int, shard: ShardData, *, n_features: int,
                    row_offset: int) -> None:
        y = pa.array(shard.y.astype(np.int32, copy=False))
        if shard.layout == "sparse":
            X = shard.X
            offsets = pa.array(X.indptr.astype(np.int32, copy=False))
            columns = {
                "y": y,
                "indices": pa.ListArray.from_arrays(offsets, pa.array(
                    X.indices.astype(np.int32, copy=False))),
                "values": pa.ListArray.from_arrays(offsets, pa.array(X.data)),
            }
        else:
            flat = pa.array(shard.X.reshape(-1))
            columns = {"y": y, "x": pa.FixedSizeListArray.from_arrays(flat, n_features)}
        table = pa.table(columns)
        info = {"format_version": FORMAT_VERSION, "shard": i, "row_offset": row_offset,
                "layout": shard.layout, "n_features": n_features}
        table = table.replace_schema_metadata({"streamwww": json.dumps(info)})
        pq.write_table(table, str(root / self.shard_relpath(i)), compression="zstd",
                       use_dictionary=False, write_statistics=False,
                       row_group_size=max(1, shard.rows))

    def read_shard(self, root: Path, i: int, *, layout: str, n_features: int,
                   index_dtype: np.dtype, handles: dict | None = None):
        table = pq.read_table(str(root / self.shard_relpath(i)), memory_map=False)
        y = _writeable(table.column("y").to_numpy())
        rows = len(y)
        if layout == "dense":
            x = table.column("x")
            arr = x.combine_chunks() if x.num_chunks != 1 else x.chunk(0)
            flat = arr.flatten().to_numpy(zero_copy_only=False)
            return _writeable(flat).reshape(rows, n_features), y
        indptr, indices = _list_parts(table.column("indices"))
        _, data = _list_parts(table.column("values"))
        return make_csr(data, indices, indptr, rows, n_features, index_dtype), y
