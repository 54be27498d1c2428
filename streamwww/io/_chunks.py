"""Read whole chunks of a local Zarr v3 array straight into a caller's buffer.

Zarr's codec pipeline reads each chunk into a bytes object, decodes it into a
new buffer, then copies that into the destination: two shard-sized transient
allocations per chunk, made on Zarr's worker threads, so they land in several
glibc heaps that keep them resident (docs/benchmarks.md, out-of-core (b)).
Handing them back to the OS instead makes each one fresh pages, which cost
more time than the decode (about 1 ms per MiB on the benchmark machine).

This reader covers the layout streamwww writes: a regular chunk grid split along
the first axis only, default chunk keys, and the codecs ``bytes`` (little endian)
optionally followed by ``blosc``. The compressed chunk is read into one reusable
buffer per thread and Blosc decodes it into the destination (numcodecs, the
decoder Zarr itself calls). Anything else returns ``False`` so that the caller
uses Zarr's own path (:func:`read_into` does both); the two give the same bytes
(tests/io/test_chunks.py).
"""

from __future__ import annotations

import os
import struct
import sys
import threading
from pathlib import Path

import numpy as np

_local = threading.local()
_BLOSC_HEADER = 16  # c-blosc frame: version, versionlz, flags, typesize, nbytes, blocksize, cbytes


def _scratch(nbytes: int) -> memoryview:
    """This thread's reusable read buffer, grown to ``nbytes`` when needed."""
    buf = getattr(_local, "buf", None)
    if buf is None or len(buf) < nbytes:
        buf = _local.buf = bytearray(nbytes + nbytes // 4)
    return memoryview(buf)[:nbytes]


def _codecs(metadata) -> str | None:
    """``"raw"``, ``"blosc"``, or ``None`` for a codec chain this reader does not cover."""
    from zarr.codecs import BloscCodec, BytesCodec

    codecs = list(metadata.codecs)
    if not codecs or not isinstance(codecs[0], BytesCodec):
        return None
    endian = codecs[0].endian
    if endian is not None and (endian.value != "little" or sys.byteorder != "little"):
        return None
    if len(codecs) == 1:
        return "raw"
    if len(codecs) == 2 and isinstance(codecs[1], BloscCodec):
        return "blosc"
    return None


def read_whole_chunks(array, directory: str | Path, out: np.ndarray) -> bool:
    """Read all of the Zarr v3 ``array`` stored in ``directory`` into ``out``.

    Parameters
    ----------
    array : zarr.Array
        The opened array (its metadata decides whether this reader applies).
    directory : str or Path
        The array's directory on the local file system.
    out : numpy.ndarray
        C-contiguous, of the array's shape and dtype.

    Returns
    -------
    bool
        ``False`` (nothing read) when the array's layout or codecs are not covered;
        the caller then reads through Zarr.

    Raises
    ------
    ValueError
        A chunk whose size or Blosc header does not match the metadata (the
        message names the chunk's file).
    """
    from zarr.core.chunk_grids import RegularChunkGrid
    from zarr.core.metadata import ArrayV3Metadata

    md = array.metadata
    if (not isinstance(md, ArrayV3Metadata) or not isinstance(md.chunk_grid, RegularChunkGrid)
            or out.shape != array.shape or out.dtype != array.dtype or not out.flags.c_contiguous
            or out.ndim == 0 or out.dtype.hasobject):
        return False
    chunk = tuple(md.chunk_grid.chunk_shape)
    if chunk[1:] != tuple(array.shape[1:]) or (kind := _codecs(md)) is None:
        return False
    from numcodecs import blosc

    row_bytes = out.dtype.itemsize * int(np.prod(out.shape[1:], dtype=np.int64))
    chunk_bytes = chunk[0] * row_bytes
    flat = out.reshape(-1).view(np.uint8)
    rows = out.shape[0]
    for i, r0 in enumerate(range(0, rows, chunk[0])):
        r1 = min(rows, r0 + chunk[0])
        dest = flat[r0 * row_bytes:r1 * row_bytes]
        path = os.path.join(directory, md.encode_chunk_key((i,) + (0,) * (out.ndim - 1)))
        try:
            f = open(path, "rb", buffering=0)
        except FileNotFoundError:  # never written: all fill value (Zarr's rule)
            out[r0:r1] = md.fill_value
            continue
        with f:
            size = os.fstat(f.fileno()).st_size
            if kind == "raw":
                # an edge chunk is stored full size; only its first rows are data
                if size != chunk_bytes or f.readinto(dest) != dest.nbytes:
                    raise ValueError(f"{path}: {size} bytes, expected {chunk_bytes}")
                continue
            src = _scratch(size)
            if f.readinto(src) != size or size < _BLOSC_HEADER:
                raise ValueError(f"{path}: cannot read {size} bytes")
        nbytes, cbytes = struct.unpack_from("<I", src, 4)[0], struct.unpack_from("<I", src, 12)[0]
        if nbytes != chunk_bytes or cbytes != size:
            raise ValueError(f"{path}: Blosc frame of {nbytes} bytes ({cbytes} compressed, file {size}); "
                             f"expected {chunk_bytes}")
        if r1 - r0 == chunk[0]:
            blosc.decompress(src, dest)
        else:  # edge chunk: decode in full, keep the rows inside the array
            dest[...] = np.frombuffer(blosc.decompress(src), np.uint8, dest.nbytes)
    return True


def read_into(array, directory: str | Path, out: np.ndarray) -> np.ndarray:
    """Read all of ``array`` into ``out`` (same shape and dtype): whole chunks in place
    when :func:`read_whole_chunks` covers the layout, else through Zarr (which decodes
    each chunk into a buffer of its own and copies it here). Returns ``out``."""
    if not read_whole_chunks(array, directory, out):
        from zarr.core.buffer.cpu import NDBuffer

        array.get_basic_selection(Ellipsis, out=NDBuffer.from_numpy_array(out))
    return out
