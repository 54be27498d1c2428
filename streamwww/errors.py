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
    "StoreExistsError",
    "CheckpointError",
    "DeviceUnavailableError",
    "InputReadError",
    "StoreWriteError",
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


class StoreExistsError(StreamwwwError, FileExistsError):
    """An output that already exists and would be overwritten."""


class CheckpointError(StreamwwwError, RuntimeError):
    """A checkpoint that is missing pieces, corrupt, locked or incompatible."""


class DeviceUnavailableError(StreamwwwError, RuntimeError):
    """The requested compute device (e.g. ``device='cuda'``) cannot be used."""


class InputReadError(StreamwwwError, OSError):
    """An input file that cannot be read to its end: truncated or corrupt
    gzip/bz2/xz data, or an I/O error. The message names the file, about where
    reading stopped (line and byte) and the cause."""


class StoreWriteError(StreamwwwError, OSError):
    """An output (store, staging area) that cannot be written: no permission,
    a full disk (``errno`` is then ``ENOSPC``), a read-only file system. Nothing
    half-written is left that opens as a store."""
