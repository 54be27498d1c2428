"""Exception hierarchy of streamwww.

Every error also inherits the built-in exception a caller would already catch
(``ValueError`` for bad data, ``FileExistsError`` for refused overwrites, ...),
so ``except ValueError`` keeps working for code that does not know streamwww.
"""

from __future__ import annotations

__all__ = [
    "StreamwwwError",
    "DataFormatError",
    "LibsvmFormatError",
    "ShardFormatError",
    "ChecksumError",
    "StoreExistsError",
    "CheckpointError",
    "DeviceUnavailableError",
    "OutputPathError",
    "InputReadError",
    "StoreWriteError",
    "StorageURLError",
    "StorageError",
]


class StreamwwwError(Exception):
    """Base class of every error raised by streamwww."""


class DataFormatError(StreamwwwError, ValueError):
    """Input data that cannot be used (bad values, wrong shapes, bad labels)."""


class LibsvmFormatError(DataFormatError):
    """A malformed line in a LIBSVM text file.

    Parameters
    ----------
    path : str
        The file being parsed.
    line : int
        1-based line number of the offending line.
    message : str
        What is wrong with the line.
    """

    def __init__(self, path: str, line: int, message: str):
        self.path = str(path)
        self.line = int(line)
        self.reason = message
        super().__init__(f"{self.path}:{self.line}: {message}")


class ShardFormatError(DataFormatError):
    """A shard store that is incomplete, corrupt or of an unknown version."""


class ChecksumError(ShardFormatError):
    """Stored bytes that do not match their recorded checksum, or a chunk that is missing.

    Raised when a chunk's or file's content checksum (crc32c) differs from the
    one stored beside it or recorded in the metadata, or when a chunk that was
    written is gone: the data is damaged and must not be used.

    Parameters
    ----------
    path : str
        The damaged file (a chunk file or a whole Parquet shard).
    array : str
        The array (or column set) it belongs to, e.g. ``"data"``.
    chunk : str
        Which chunk of the array, e.g. ``"0"`` or ``"2.0"`` (``"file"`` for a whole file).
    reason : str
        What does not match.
    fix : str
        What to do about it.
    where : str, optional
        What the file belongs to (e.g. ``"STORE: shard 2 (shard-00002)"``), put first.
    """

    def __init__(self, path: str, array: str, chunk: str, reason: str, fix: str,
                 where: str | None = None):
        self.path, self.array, self.chunk = str(path), str(array), str(chunk)
        self.reason, self.fix = str(reason), str(fix)
        self.where = None if where is None else str(where)
        head = f"{self.where}: " if self.where else ""
        super().__init__(f"{head}{self.path}: {self.reason} (array {self.array!r}, chunk {self.chunk}); "
                         f"{self.fix}")

    def __reduce__(self):  # picklable, so that Dask hands the same error back from a worker
        return type(self), (self.path, self.array, self.chunk, self.reason, self.fix, self.where)


class StoreExistsError(StreamwwwError, FileExistsError):
    """An output that already exists and would be overwritten."""


class CheckpointError(StreamwwwError, RuntimeError):
    """A checkpoint that is missing pieces, corrupt, locked or incompatible."""


class DeviceUnavailableError(StreamwwwError, RuntimeError):
    """The requested compute device (e.g. ``device='cuda'``) cannot be used."""


class OutputPathError(StreamwwwError, OSError):
    """An output (a model file, a checkpoint directory) that cannot be written; found before any work."""


class InputReadError(StreamwwwError, OSError):
    """An input file that cannot be read to its end: truncated or corrupt
    gzip/bz2/xz data, or an I/O error. The message names the file, about where
    reading stopped (line and byte) and the cause."""


class StoreWriteError(StreamwwwError, OSError):
    """An output (store, staging area) that cannot be written: no permission,
    a full disk (``errno`` is then ``ENOSPC``), a read-only file system. Nothing
    half-written is left that opens as a store."""


class StorageURLError(StreamwwwError, ValueError):
    """A URL that cannot be used: an unknown protocol, one whose package is not
    installed (the message names it), or storage options its file system does
    not take."""


class StorageError(StreamwwwError, OSError):
    """An object store (or a remote file system) that cannot be reached or
    refused a request. The message names the URL and the request; what was
    committed before stays committed."""
