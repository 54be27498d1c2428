"""Chunk objects and ``zarr.json`` documents byte for byte as Zarr writes them.

For :mod:`streamwww.io._zarrwriter`, which writes a conversion's Zarr shards
itself instead of through Zarr's asynchronous store and codec pipeline (see
there why). Everything Zarr decides is taken from Zarr: the Blosc parameters
per dtype come from the codecs Zarr chooses for an in-memory array of that
dtype, and the documents are serialized by Zarr's metadata classes from
templates Zarr made. Only the calls are ours; tests/io/test_zarrwriter.py
compares the files with Zarr's.
"""

from __future__ import annotations

import dataclasses
import sys

import numpy as np

from streamwww.storage.location import location

__all__ = ["ChunkCodec", "ZarrDocs", "blosc_of", "local_codec"]

_SHUFFLE = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}


def _template_array(compressors, dtype: np.dtype, ndim: int):
    """An array as ``create_checksummed_array`` makes it, in memory (its metadata)."""
    import zarr

    from streamwww.io._chunks import create_checksummed_array

    group = zarr.open_group(zarr.storage.MemoryStore(), mode="w", zarr_format=3)
    return create_checksummed_array(group, "a", shape=(1,) * ndim, dtype=dtype,
                                    chunks=(1,) * ndim, compressors=compressors)


class ChunkCodec:
    """Encode a chunk as Zarr's ``bytes`` -> ``blosc`` -> ``crc32c`` chain does.

    The Blosc parameters per dtype are read from the codecs Zarr chooses for an
    array of that dtype (``typesize``, and ``shuffle`` when not given, follow
    the dtype).
    """

    def __init__(self, compressors):
        self.compressors = compressors
        self._codecs: dict[np.dtype, object] = {}

    def blosc(self, dtype) -> object | None:
        """numcodecs ``Blosc`` configured as Zarr's codec chain for ``dtype``, or None
        if that chain is not ``bytes`` (little endian), ``blosc``, ``crc32c``."""
        dtype = np.dtype(dtype)
        if dtype not in self._codecs:
            self._codecs[dtype] = _zarr_blosc(self.compressors, dtype)
        return self._codecs[dtype]

    def encode(self, values: np.ndarray) -> tuple[bytes, int]:
        """The compressed bytes of ``values`` (C order) and their crc32c: the chunk
        object is the bytes followed by the crc32c, little endian."""
        from streamwww.io._chunks import blosc_encode, crc32c

        data = blosc_encode(self.blosc(values.dtype), np.ascontiguousarray(values))
        return data, crc32c(data)


def _zarr_blosc(compressors, dtype: np.dtype):
    if dtype.byteorder not in "=<|":  # (the machine's byte order: blosc_of)
        return None
    return blosc_of(_template_array(compressors, dtype, 1).metadata)


def blosc_of(metadata):
    """numcodecs ``Blosc`` that encodes the chunks of an array with this Zarr v3 ``metadata``
    exactly as Zarr does, or None unless its codecs are ``bytes`` (little endian, on a
    little-endian machine), ``blosc``, ``crc32c``."""
    from numcodecs import Blosc
    from zarr.codecs import BloscCodec, BytesCodec, Crc32cCodec

    codecs = list(metadata.codecs)
    if (sys.byteorder != "little" or len(codecs) != 3 or not isinstance(codecs[0], BytesCodec)
            or (codecs[0].endian is not None and codecs[0].endian.value != "little")
            or not isinstance(codecs[1], BloscCodec) or not isinstance(codecs[2], Crc32cCodec)):
        return None
    b = codecs[1]
    return Blosc(cname=b.cname.value, clevel=int(b.clevel), shuffle=_SHUFFLE[b.shuffle.value],
                 blocksize=int(b.blocksize), typesize=int(b.typesize))


class ZarrDocs:
    """``zarr.json`` of shard groups and arrays, serialized by Zarr's metadata classes
    from templates Zarr made (one per dtype and rank): no event-loop round trip per
    document (a wait each, beside the converting thread)."""

    def __init__(self, compressors):
        self.compressors = compressors
        self._arrays: dict[tuple, object] = {}
        self._group = None

    @staticmethod
    def _bytes(metadata) -> bytes:
        from zarr.core.buffer import default_buffer_prototype

        return metadata.to_buffer_dict(default_buffer_prototype())["zarr.json"].to_bytes()

    def array(self, dtype, shape: tuple[int, ...], chunks: tuple[int, ...]) -> bytes:
        from zarr.core.chunk_grids import RegularChunkGrid

        key = (np.dtype(dtype), len(shape))
        if key not in self._arrays:
            self._arrays[key] = _template_array(self.compressors, *key).metadata
        return self._bytes(dataclasses.replace(self._arrays[key], shape=tuple(shape),
                                               chunk_grid=RegularChunkGrid(chunk_shape=chunks)))

    def group(self, attributes: dict) -> bytes:
        import zarr

        if self._group is None:
            self._group = zarr.open_group(zarr.storage.MemoryStore(), mode="w",
                                          zarr_format=3).metadata
        return self._bytes(dataclasses.replace(self._group, attributes=attributes))


def local_codec(root, backend, dtypes) -> ChunkCodec | None:
    """The codec for :class:`LocalZarrSink` when it can write this store's arrays
    (of ``dtypes``), else None."""
    from streamwww.io import _zarr

    if backend.name != "zarr" or not location(root).is_local:
        return None
    codec = ChunkCodec(_zarr._compressors())
    return codec if all(codec.blosc(dt) is not None for dt in dtypes) else None
