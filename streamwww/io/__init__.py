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
    encode_chunks(data, chunk_shape[, keys, blosc]) -> the chunk objects Zarr writes (bytes[, blosc], crc32c)
    chunk_parts(data, chunk_shape[, keys, blosc]) -> the same objects as (payload, crc32c) parts
    blosc_of(array.metadata) -> numcodecs' Blosc that encodes the array's chunks as Zarr does

The on-disk format is described in docs/FORMAT.md.  Names are imported on first
use (as in ``streamwww``), so that the CLI's parser, ``--help`` and ``--version``
do not load Numba, SciPy and Zarr.
"""

from __future__ import annotations

from streamwww._lazy import lazy_getattr

_LAZY = {name: (module, name) for name, module in {
    "LibsvmBlock": "streamwww.io.libsvm",
    "LibsvmReader": "streamwww.io.libsvm",
    "LibsvmStats": "streamwww.io.libsvm",
    "ProgressEvent": "streamwww.io._progress",
    "ShardStore": "streamwww.io.store",
    "blosc_of": "streamwww.io._zarrcodec",
    "chunk_parts": "streamwww.io._chunks",
    "convert_libsvm": "streamwww.io.convert",
    "encode_chunks": "streamwww.io._chunks",
    "iter_libsvm_blocks": "streamwww.io.libsvm",
    "load_libsvm": "streamwww.io.libsvm",
    "make_data": "streamwww.io.datagen",
    "open_store": "streamwww.io.store",
    "read_into": "streamwww.io._chunks",
    "read_whole_chunks": "streamwww.io._chunks",
    "write_store": "streamwww.io.writer",
}.items()}

__all__ = sorted(_LAZY)
__getattr__ = lazy_getattr(__name__, _LAZY)


def __dir__():
    return __all__
