"""Read whole chunks of a Zarr v3 array straight into a caller's buffer.

Zarr's codec pipeline reads each chunk into a bytes object, decodes it into a
new buffer, then copies that into the destination: two shard-sized transient
allocations per chunk, made on Zarr's worker threads, so they land in several
glibc heaps that keep them resident (docs/benchmarks.md, "(b) Peak RSS, streamed
with checkpoints"). Handing them back to the OS instead makes each one fresh pages,
which cost more time than the decode (docs/benchmarks.md, "Memory settings of
streamed training").

This reader covers the layout streamwww writes: a regular chunk grid split along
the first axis only, default chunk keys, and the codecs ``bytes`` (little endian)
optionally followed by ``blosc``, optionally followed by ``crc32c``. The stored
chunk is read into one reusable buffer per thread, its crc32c trailer checked,
and Blosc decodes it into the destination (numcodecs, the decoder Zarr itself
calls). Anything else returns ``False`` so that the caller uses Zarr's own path
(:func:`read_into` does both); the two give the same bytes (tests/io/test_chunks.py).
What the reader works out from an array's metadata (the chunk files, codecs, sizes
and recorded checksums) is a :class:`ChunkPlan`, which a caller reading the same
array every epoch keeps (the shard store's backend does).

The array may also live on an object store (``directory`` a remote
:class:`~streamwww.storage.location.Location`): then all of an array's chunks are
fetched in one concurrent batch (what hides the store's latency) and decoded
the same way, with the same checks.

The writing counterpart, :func:`encode_chunks`, gives the chunk objects Zarr
itself writes for an array with codecs ``bytes``, optionally ``blosc``, then ``crc32c``
(C order, edge chunks padded with the fill value 0): ``beta`` is rewritten every epoch, and
Zarr's write of one version (its sync-to-async bridge, the codec pipeline, one
task per chunk) costs several times the write of the same bytes with their crc32c
(docs/benchmarks-archive.md, "A store larger than the memory budget"); the objects are byte for byte Zarr's (tests/io/test_chunks.py),
and the array's ``zarr.json`` comes from Zarr.

Integrity (docs/FORMAT.md, "Integrity"): an array made by
:func:`create_checksummed_array` ends its codec chain with ``crc32c`` (each
stored chunk carries the crc32c of its compressed bytes) and has every chunk
written, even one equal to the fill value. :func:`chunk_checksums` returns those
crc32c values once written, for the caller to record; :func:`read_into` with
``checksums=`` (the recorded values) and ``missing="error"`` then refuses a
chunk whose bytes changed, one rewritten with other (validly compressed) data,
and a missing one, raising :class:`~streamwww.errors.ChecksumError`.
"""

from __future__ import annotations

import math
import os
import struct
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import product
from pathlib import Path
from typing import Any

import numpy as np

from streamwww.errors import ChecksumError
from streamwww.storage.fsutil import read_failure
from streamwww.storage.location import Location

_local = threading.local()
_BLOSC_HEADER = 16  # c-blosc frame: version, versionlz, flags, typesize, nbytes, blocksize, cbytes
_CRC_BYTES = 4  # the crc32c codec appends the little-endian crc32c of the bytes before it
MISSING = ("fill", "error")
DEFAULT_FIX = "the data is damaged: write it again from its source"


def _scratch(nbytes: int) -> memoryview:
    """This thread's reusable read buffer, grown to ``nbytes`` when needed."""
    buf = getattr(_local, "buf", None)
    if buf is None or len(buf) < nbytes:
        buf = _local.buf = bytearray(nbytes + nbytes // 4)
    return memoryview(buf)[:nbytes]


def crc32c(buf) -> int:
    """crc32c (Castagnoli) of a bytes-like object, as an unsigned 32-bit int (google-crc32c,
    the library Zarr's ``crc32c`` codec uses; hardware-accelerated where the CPU has it)."""
    import google_crc32c

    if not isinstance(buf, bytes):
        buf = np.frombuffer(buf, dtype=np.uint8)  # zero-copy; google-crc32c takes bytes or arrays
    return int(google_crc32c.value(buf))


def has_checksums(array) -> bool:
    """Whether ``array``'s codec chain ends with Zarr v3's ``crc32c`` codec."""
    from zarr.codecs import Crc32cCodec

    codecs = list(getattr(array.metadata, "codecs", ()))
    return bool(codecs) and isinstance(codecs[-1], Crc32cCodec)


def _codecs(metadata) -> tuple[str, bool] | None:
    """``(kind, crc)``: kind ``"raw"`` or ``"blosc"``, ``crc`` whether a ``crc32c``
    codec ends the chain; ``None`` for a codec chain this reader does not cover."""
    from zarr.codecs import BloscCodec, BytesCodec, Crc32cCodec

    codecs = list(metadata.codecs)
    if not codecs or not isinstance(codecs[0], BytesCodec):
        return None
    endian = codecs[0].endian
    if endian is not None and (endian.value != "little" or sys.byteorder != "little"):
        return None
    crc = isinstance(codecs[-1], Crc32cCodec)
    if crc:
        codecs = codecs[:-1]
    if len(codecs) == 1:
        return "raw", crc
    if len(codecs) == 2 and isinstance(codecs[1], BloscCodec):
        return "blosc", crc
    return None


def _grid(array) -> list[tuple[int, ...]]:
    """Coordinates of every chunk of ``array``'s regular grid, in C order."""
    shape = tuple(array.shape)
    chunk = tuple(array.metadata.chunk_grid.chunk_shape)
    return list(product(*(range(-(-s // c)) for s, c in zip(shape, chunk))))


def _chunk_path(array, directory, coords: tuple[int, ...]) -> str:
    return os.path.join(directory, array.metadata.encode_chunk_key(coords))


def _split(directory) -> tuple[str, Location | None]:
    """``(name to show, remote location or None)`` of an array's directory: a local
    path (str, Path or local Location) or a Location on an object store."""
    if isinstance(directory, Location):
        return (directory.url, None) if directory.is_local else (directory.url, directory)
    return os.fspath(directory), None


def _fetch(remote: Location, array, grid) -> list[bytes | None]:
    """Every chunk of ``array`` below ``remote``, fetched concurrently (None: missing)."""
    return remote.read_many([remote.child(array.metadata.encode_chunk_key(c)) for c in grid])


def _read_file(path: str) -> bytes | None:
    """A local chunk file's bytes (None: missing). One that is there but cannot be read
    is an I/O error (:func:`~streamwww.storage.fsutil.read_failure`), never damage."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise read_failure(path, exc, "the chunk") from None


def _label(coords: tuple[int, ...]) -> str:
    return ".".join(map(str, coords))


def _check_args(missing: str, checksums, n_chunks: int, array, directory, fix: str) -> None:
    if missing not in MISSING:
        raise ValueError(f"The 'missing' parameter must be one of {list(MISSING)}. "
                         f"Got {missing!r} instead.")
    if checksums is None:
        return
    directory, _ = _split(directory)
    name = os.path.basename(directory)
    if not has_checksums(array):
        raise ChecksumError(directory, name, "*", "checksums are recorded for this array but its "
                            "codecs carry none (it was rewritten)", fix)
    if len(checksums) != n_chunks:
        raise ChecksumError(directory, name, "*", f"{len(checksums)} chunk checksums are recorded "
                            f"but the array has {n_chunks} chunks", fix)


def _verify(path: str, name: str, coords, buf: memoryview, expected: int | None, fix: str) -> memoryview:
    """Check a stored chunk's crc32c trailer (and the recorded value); return its payload."""
    size = len(buf)
    if size < _CRC_BYTES:
        raise ChecksumError(path, name, _label(coords), f"chunk of {size} bytes has no crc32c", fix)
    stored = struct.unpack_from("<I", buf, size - _CRC_BYTES)[0]
    payload = buf[:size - _CRC_BYTES]
    computed = crc32c(payload)
    if computed != stored:
        raise ChecksumError(path, name, _label(coords), f"crc32c mismatch: the chunk's bytes hash "
                            f"to {computed:#010x}, its stored checksum is {stored:#010x}", fix)
    if expected is not None and stored != int(expected):
        raise ChecksumError(path, name, _label(coords), f"crc32c mismatch: the chunk holds "
                            f"{stored:#010x}, the metadata records {int(expected):#010x} "
                            f"(the chunk was rewritten)", fix)
    return payload


def _missing_chunk(path: str, name: str, coords, fix: str) -> ChecksumError:
    return ChecksumError(path, name, _label(coords), "chunk file is missing (every chunk was "
                         "written, so this is damage, not a chunk of fill values)", fix)


def read_whole_chunks(array, directory: str | Path, out: np.ndarray, *, missing: str = "fill",
                      checksums: Sequence[int] | None = None, fix: str = DEFAULT_FIX,
                      fetched: list | None = None) -> bool:
    """Read all of the Zarr v3 ``array`` stored in ``directory`` into ``out``.

    Parameters
    ----------
    array : zarr.Array
        The opened array (its metadata decides whether this reader applies).
    directory : str, Path or Location
        The array's directory: a local path, or a Location (local or on an
        object store).
    out : numpy.ndarray
        C-contiguous, of the array's shape and dtype.
    missing : {"fill", "error"}, default="fill"
        A chunk file that does not exist: ``"fill"`` reads it as the fill value
        (Zarr's rule, for arrays written without every chunk); ``"error"``
        raises :class:`~streamwww.errors.ChecksumError`.
    checksums : sequence of int, optional
        The crc32c of every chunk in C order of the chunk grid, as recorded by
        :func:`chunk_checksums` when the array was written; each chunk's stored
        crc32c must equal it. Chunks' own crc32c trailers are checked whenever
        the codecs end with ``crc32c``, recorded values or not.
    fix : str
        What to do about damage, ending the error message.
    fetched : list of (bytes or None), optional
        For an array on an object store: its chunks' stored bytes, already
        fetched (:func:`fetch_arrays`, which batches several arrays' requests).

    Returns
    -------
    bool
        ``False`` (nothing read) when the array's layout or codecs are not covered;
        the caller then reads through Zarr.

    Raises
    ------
    ChecksumError
        A chunk whose crc32c does not match, a missing chunk with
        ``missing="error"``, or recorded checksums that do not fit the array.
    ValueError
        A chunk (without crc32c) whose size or Blosc header does not match the
        metadata (the message names the chunk's file).
    StorageError
        A local chunk file that is there but cannot be read (no permission, EIO, a
        directory in its place): an I/O error, not damage (the message names the file).
    """
    plan = plan_whole_chunks(array, directory, missing=missing, checksums=checksums, fix=fix)
    if plan is None or not plan.fits(out):
        return False
    plan.read(out, fetched)
    return True


@dataclass(frozen=True, slots=True)
class ChunkPlan:
    """What :func:`read_whole_chunks` works out from an array's metadata, once: the
    chunk files, their codecs and sizes, the checks.  A reader that reads the same
    array again (a shard every epoch) keeps it: :meth:`read` then only opens, checks
    and decodes the chunks (working it out again is a sizeable share of the CPU of
    reading a small shard; docs/benchmarks.md, "beta in a scratch file")."""

    array: Any  # the zarr.Array (its chunks fetched from an object store through it)
    shape: tuple[int, ...]
    dtype: np.dtype
    kind: str  # "raw" or "blosc"
    crc: bool  # a crc32c trailer on every chunk
    name: str  # the array's name, for messages
    remote: Location | None
    chunk_rows: int
    row_bytes: int
    chunk_bytes: int
    grid: list
    paths: list
    missing: str
    checksums: Sequence[int] | None
    fix: str
    fill_value: Any

    def fits(self, out: np.ndarray) -> bool:
        """Whether ``out`` can take the array (its shape and dtype, C-contiguous)."""
        return out.shape == self.shape and out.dtype == self.dtype and out.flags.c_contiguous

    def read(self, out: np.ndarray, fetched: list | None = None) -> np.ndarray:
        """Read every chunk into ``out`` (see :func:`read_whole_chunks`; ``out`` fits)."""
        from numcodecs import blosc

        kind, crc, name, fix = self.kind, self.crc, self.name, self.fix
        rows, chunk_rows, row_bytes, chunk_bytes = out.shape[0], self.chunk_rows, self.row_bytes, self.chunk_bytes
        flat = out.reshape(-1).view(np.uint8)
        if self.remote is not None and fetched is None:
            fetched = _fetch(self.remote, self.array, self.grid)
        elif self.remote is None:
            fetched = None
        for i, r0 in enumerate(range(0, rows, chunk_rows)):
            r1 = min(rows, r0 + chunk_rows)
            dest = flat[r0 * row_bytes:r1 * row_bytes]
            path = self.paths[i]
            if fetched is not None:
                f = fetched[i]
            else:
                try:
                    f = open(path, "rb", buffering=0)
                except FileNotFoundError:
                    f = None
                except OSError as exc:  # there but unreadable (EIO, a directory): not damage
                    raise read_failure(path, exc, f"chunk {_label(self.grid[i])} of array {name!r}") from None
            if f is None:  # never written: all fill value (Zarr's rule)
                if self.missing == "error":
                    raise _missing_chunk(path, name, self.grid[i], fix) from None
                out[r0:r1] = self.fill_value
                continue
            if fetched is not None:
                src, size = memoryview(f), len(f)
                if kind == "raw" and not crc:
                    if size != chunk_bytes:
                        raise ValueError(f"{path}: {size} bytes, expected {chunk_bytes}")
                    dest[...] = np.frombuffer(src, np.uint8, dest.nbytes)
                    continue
            else:
                with f:
                    try:
                        size = os.fstat(f.fileno()).st_size
                        if kind == "raw" and not crc:
                            # an edge chunk is stored full size; only its first rows are data
                            if size != chunk_bytes or f.readinto(dest) != dest.nbytes:
                                raise ValueError(f"{path}: {size} bytes, expected {chunk_bytes}")
                            continue
                        src = _scratch(size)
                        got = f.readinto(src)
                    except OSError as exc:
                        raise read_failure(path, exc, f"chunk {_label(self.grid[i])} of array {name!r}") from None
                    if got != size:
                        raise ValueError(f"{path}: cannot read {size} bytes")
            if crc:
                src = _verify(path, name, self.grid[i], src, None if self.checksums is None else self.checksums[i],
                              fix)
                size = len(src)
            if kind == "raw":
                if size != chunk_bytes:
                    raise ChecksumError(path, name, _label(self.grid[i]), f"{size} bytes, expected {chunk_bytes}", fix)
                dest[...] = np.frombuffer(src, np.uint8, dest.nbytes)
                continue
            if size < _BLOSC_HEADER:
                raise ValueError(f"{path}: cannot read {size} bytes")
            nbytes, cbytes = struct.unpack_from("<I", src, 4)[0], struct.unpack_from("<I", src, 12)[0]
            if nbytes != chunk_bytes or cbytes != size:
                raise ValueError(f"{path}: Blosc frame of {nbytes} bytes ({cbytes} compressed, file {size}); "
                                 f"expected {chunk_bytes}")
            if r1 - r0 == chunk_rows:
                blosc.decompress(src, dest)
            else:  # edge chunk: decode in full, keep the rows inside the array
                dest[...] = np.frombuffer(blosc.decompress(src), np.uint8, dest.nbytes)
        return out


def plan_whole_chunks(array, directory: str | Path, *, missing: str = "fill",
                      checksums: Sequence[int] | None = None, fix: str = DEFAULT_FIX) -> ChunkPlan | None:
    """The :class:`ChunkPlan` of reading ``array`` whole (arguments as for
    :func:`read_whole_chunks`); ``None`` when its layout or codecs are not covered.

    Raises
    ------
    ChecksumError
        Recorded checksums that do not fit the array (see :func:`read_whole_chunks`).
    """
    from zarr.core.chunk_grids import RegularChunkGrid
    from zarr.core.metadata import ArrayV3Metadata

    md = array.metadata
    shape, dtype = tuple(array.shape), array.dtype
    if (not isinstance(md, ArrayV3Metadata) or not isinstance(md.chunk_grid, RegularChunkGrid)
            or len(shape) == 0 or dtype.hasobject):
        return None
    chunk = tuple(md.chunk_grid.chunk_shape)
    if chunk[1:] != shape[1:] or (codecs := _codecs(md)) is None:
        return None
    kind, crc = codecs
    n_chunks = -(-shape[0] // chunk[0])
    _check_args(missing, checksums, n_chunks, array, directory, fix)
    directory, remote = _split(directory)
    row_bytes = dtype.itemsize * math.prod(shape[1:])
    grid = [(i,) + (0,) * (len(shape) - 1) for i in range(n_chunks)]
    return ChunkPlan(array=array, shape=shape, dtype=dtype, kind=kind, crc=crc, name=os.path.basename(directory),
                     remote=remote, chunk_rows=chunk[0], row_bytes=row_bytes, chunk_bytes=chunk[0] * row_bytes,
                     grid=grid, paths=[os.path.join(directory, md.encode_chunk_key(c)) for c in grid],
                     missing=missing, checksums=checksums, fix=fix, fill_value=md.fill_value)


def _verify_files(array, directory, *, missing: str, checksums, fix: str, fetched=None) -> None:
    """Check every chunk file of ``array`` (existence, crc32c trailer, recorded value)
    ahead of a read through Zarr, which would read a missing chunk as fill values and
    cannot compare with recorded checksums."""
    grid = _grid(array)
    _check_args(missing, checksums, len(grid), array, directory, fix)
    directory, remote = _split(directory)
    name = os.path.basename(directory)
    crc = has_checksums(array)
    if remote is not None and fetched is None:
        fetched = _fetch(remote, array, grid)
    elif remote is None:
        fetched = None
    for i, coords in enumerate(grid):
        path = _chunk_path(array, directory, coords)
        data = fetched[i] if fetched is not None else _read_file(path)
        if data is None:
            if missing == "error":
                raise _missing_chunk(path, name, coords, fix) from None
            continue
        if crc:
            _verify(path, name, coords, memoryview(data), None if checksums is None else checksums[i], fix)


def fetch_arrays(arrays: Sequence[tuple[object, Location]]) -> list[list] | None:
    """Every chunk of several arrays on one object store, in one concurrent batch.

    ``arrays`` holds ``(zarr array, its Location)`` pairs; returns, per array,
    its chunks' stored bytes in C order of its grid (None: missing), for
    :func:`read_into`'s ``fetched``. One round trip for a shard's arrays
    instead of one per array is what keeps a streamed epoch from an object
    store near the local one. ``None`` when the arrays are local.
    """
    if not arrays or arrays[0][1].is_local:
        return None
    grids = [_grid(a) for a, _ in arrays]
    keys = [loc.child(a.metadata.encode_chunk_key(c)) for (a, loc), g in zip(arrays, grids) for c in g]
    got = arrays[0][1].read_many(keys)
    out, i = [], 0
    for g in grids:
        out.append(got[i:i + len(g)])
        i += len(g)
    return out


def read_into(array, directory: str | Path, out: np.ndarray, *, missing: str = "fill",
              checksums: Sequence[int] | None = None, fix: str = DEFAULT_FIX,
              fetched: list | None = None) -> np.ndarray:
    """Read all of ``array`` into ``out`` (same shape and dtype), verifying checksums.

    Whole chunks are decoded in place when :func:`read_whole_chunks` covers the
    layout, else the array is read through Zarr (which decodes each chunk into a
    buffer of its own and copies it here), after every chunk file was checked as
    :func:`read_whole_chunks` checks it. ``missing``, ``checksums`` and ``fix``
    are as there; ``fetched``: the chunks' bytes of an array on an object store,
    fetched beforehand (:func:`fetch_arrays`). Returns ``out``.

    Raises
    ------
    ChecksumError
        A damaged or (with ``missing="error"``) missing chunk; the message names
        the chunk's file, the array, the chunk and ``fix``.
    StorageError
        A local chunk file that cannot be read (see :func:`read_whole_chunks`).
    """
    if not read_whole_chunks(array, directory, out, missing=missing, checksums=checksums, fix=fix,
                             fetched=fetched):
        from zarr.core.buffer.cpu import NDBuffer

        if checksums is not None or missing != "fill" or has_checksums(array):
            _verify_files(array, directory, missing=missing, checksums=checksums, fix=fix, fetched=fetched)
        array.get_basic_selection(Ellipsis, out=NDBuffer.from_numpy_array(out))
    return out


def chunk_checksums(array, directory: str | Path) -> list[int]:
    """The crc32c of every chunk of a checksummed ``array``, in C order of its chunk grid.

    Read back from the chunk files just written (each one's trailer checked
    against its bytes, so a write that went wrong is caught here). Record the
    list with the array and pass it as ``checksums=`` to :func:`read_into`.

    Parameters
    ----------
    array : zarr.Array
        An array made by :func:`create_checksummed_array` (codecs ending with
        ``crc32c``), every chunk written.
    directory : str, Path or Location
        The array's directory (as for :func:`read_whole_chunks`).

    Returns
    -------
    list of int
        Unsigned 32-bit values (JSON-able).

    Raises
    ------
    ValueError
        If the array's codecs do not end with ``crc32c``.
    ChecksumError
        If a chunk is missing or does not match its own trailer.
    """
    if not has_checksums(array):
        raise ValueError(f"{directory}: the array's codecs do not end with crc32c")
    directory, remote = _split(directory)
    name = os.path.basename(directory)
    grid = _grid(array)
    fetched = _fetch(remote, array, grid) if remote is not None else None
    out = []
    for i, coords in enumerate(grid):
        path = _chunk_path(array, directory, coords)
        data = fetched[i] if fetched is not None else _read_file(path)
        if data is None:
            raise _missing_chunk(path, name, coords, "write the array again")
        buf = memoryview(data)
        payload = _verify(path, name, coords, buf, None, "write the array again")
        out.append(struct.unpack_from("<I", buf, len(payload))[0])
    return out


def blosc_encode(blosc, data) -> bytes:
    """``blosc.encode(data)`` (numcodecs' ``Blosc``) compressed by one thread, as Zarr calls it.

    numcodecs lets c-blosc use its own threads when called from the main thread, and
    c-blosc's threads place the compressed blocks in the order they finish: the bytes
    would then depend on timing (a task run again must write the same objects,
    :func:`~streamwww.storage.location.write_once`). Off the main thread numcodecs compresses
    with one thread, so a call from the main thread runs on a short-lived thread of its own
    (the rare path: background writers and Zarr's codec threads are not the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return blosc.encode(data)
    result: list = []

    def run() -> None:
        try:
            result.append(blosc.encode(data))
        except BaseException as exc:  # re-raised on the caller's thread
            result.append(exc)

    worker = threading.Thread(target=run, name="streamwww-blosc")
    worker.start()
    worker.join()
    if isinstance(result[0], BaseException):
        raise result[0]
    return result[0]


def encode_chunks(data: np.ndarray, chunk_shape: tuple[int, ...], chunk_key_encoding=None,
                  blosc=None) -> dict[str, bytes]:
    """The chunk objects (key -> bytes) of a Zarr v3 array of ``data`` with chunk shape
    ``chunk_shape``, codecs ``bytes`` (little endian), then ``blosc`` if given, then
    ``crc32c``, fill value 0: exactly what Zarr writes (every chunk, C order, edge chunks
    padded with zeros), without its codec pipeline. ``blosc`` is numcodecs' ``Blosc`` as
    Zarr's codec configures it for the array (:func:`streamwww.io.blosc_of`). The keys are
    ``chunk_key_encoding``'s (an array's ``metadata.chunk_key_encoding``; default: Zarr's
    default, ``c/i/j/...``)."""
    return {key: b"".join(parts) for key, parts in chunk_parts(data, chunk_shape, chunk_key_encoding,
                                                                blosc).items()}


def chunk_parts(data: np.ndarray, chunk_shape: tuple[int, ...], chunk_key_encoding=None,
                blosc=None) -> dict[str, tuple]:
    """:func:`encode_chunks`'s objects in two parts each, ``(payload, trailer)``: the
    chunk's stored bytes (without ``blosc``: a view of ``data`` where it is contiguous, so a
    file can be written from it without a copy) and their 4-byte crc32c."""
    if chunk_key_encoding is None:
        from zarr.core.chunk_key_encodings import DefaultChunkKeyEncoding

        chunk_key_encoding = DefaultChunkKeyEncoding()
    shape = tuple(data.shape)
    chunk = tuple(int(c) for c in chunk_shape)
    dtype = data.dtype.newbyteorder("<")
    out = {}
    for coords in product(*(range(-(-s // c)) for s, c in zip(shape, chunk))):
        index = tuple(slice(i * c, min((i + 1) * c, s)) for i, c, s in zip(coords, chunk, shape))
        part = data[index]
        if part.shape != chunk:  # an edge chunk: stored at full size, padded with the fill value
            full = np.zeros(chunk, dtype=dtype)
            full[tuple(slice(0, n) for n in part.shape)] = part
            part = full
        payload = np.ascontiguousarray(part, dtype=dtype).reshape(-1).view(np.uint8)
        if blosc is not None:
            payload = blosc_encode(blosc, payload)
        out[chunk_key_encoding.encode_chunk_key(coords)] = (payload, struct.pack("<I", crc32c(payload)))
    return out


def create_checksummed_array(parent, name: str, *, data: np.ndarray | None = None,
                             shape: tuple[int, ...] | None = None, dtype=None,
                             chunks: tuple[int, ...], compressors: Sequence = (), **kwargs):
    """Create a Zarr v3 array whose chunks carry a crc32c and are all written.

    The codec chain is ``bytes``, then ``compressors``, then ``crc32c``; the
    array's config has ``write_empty_chunks=True``, so every chunk written is
    stored even when it equals the fill value, and a missing chunk file can be
    treated as damage (``missing="error"`` in :func:`read_into`).

    Parameters
    ----------
    parent : zarr.Group
        Where to create it.
    name : str
        The array's name in ``parent``.
    data : numpy.ndarray, optional
        Initial content (then ``shape`` and ``dtype`` come from it).
    shape, dtype : optional
        For an array without ``data`` (write every chunk before recording
        :func:`chunk_checksums`).
    chunks : tuple of int
        Chunk shape (split along the first axis only for in-place reads).
    compressors : sequence of zarr BytesBytesCodec, default=()
        E.g. ``[BloscCodec(...)]``.
    **kwargs
        Passed to :meth:`zarr.Group.create_array`.

    Returns
    -------
    zarr.Array
    """
    from zarr.codecs import Crc32cCodec

    config = {**kwargs.pop("config", {}), "write_empty_chunks": True}
    if data is not None:
        kwargs["data"] = data
    else:
        kwargs["shape"], kwargs["dtype"] = shape, dtype
    return parent.create_array(name, chunks=chunks, compressors=[*compressors, Crc32cCodec()],
                               config=config, **kwargs)
