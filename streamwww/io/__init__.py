"""Data input and output: LIBSVM parsing, shard stores (Zarr v3 / Parquet),
conversion and synthetic data.

Public API::

    open_store(path) -> ShardStore
    write_store(path, X, y, ...) -> ShardStore
    convert_libsvm(input, output, ...) -> ShardStore
    make_data(output, rows=..., features=..., nnz_per_row=..., classes=..., seed=...) -> dict
    LibsvmReader(path, ...), iter_libsvm_blocks(path, ...), load_libsvm(path, ...)
    read_into(array, path, out)  -> a local Zarr array's chunks decoded into a caller's buffer
    read_whole_chunks(array, path, out) -> the same, False for a layout it does not cover
    encode_raw_chunks(data, chunk_shape) -> the chunk objects Zarr writes for an uncompressed array

The on-disk format is described in docs/FORMAT.md.
"""

from streamwww.io._chunks import encode_raw_chunks, read_into, read_whole_chunks
from streamwww.io._progress import ProgressEvent
from streamwww.io.convert import convert_libsvm
from streamwww.io.datagen import make_data
from streamwww.io.libsvm import (
    LibsvmBlock,
    LibsvmReader,
    LibsvmStats,
    iter_libsvm_blocks,
    load_libsvm,
)
from streamwww.io.store import ShardStore, open_store, write_store

__all__ = [
    "LibsvmBlock",
    "LibsvmReader",
    "LibsvmStats",
    "ProgressEvent",
    "ShardStore",
    "convert_libsvm",
    "encode_raw_chunks",
    "iter_libsvm_blocks",
    "load_libsvm",
    "make_data",
    "open_store",
    "read_into",
    "read_whole_chunks",
    "write_store",
]
