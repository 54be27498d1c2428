"""A scratch file of fixed float64 slots per shard: ``beta``'s working copies beyond the
memory budget, and the rows' norms of shards not kept in memory.

Writing a new, checksummed, compressed version of every shard's ``beta`` every epoch
and reading it back the next (:class:`~streamwww.state.betas.DiskBetas`) is a large
part of the loader thread's work on a store of small shards, and the loader is the
critical path of a run whose ``beta`` does not fit its memory budget (docs/benchmarks.md,
"beta in a scratch file").  Between checkpoint commits nothing needs those versions to
survive the process: a killed run resumes from its last commit.  So such a run's
current versions go to a scratch file instead, each shard at fixed places in it
(``copies`` slots per shard: the current version, the epoch start's kept for a rewind,
the one a commit in progress writes), with plain ``pwrite``/``preadv`` calls: a copy into
and out of the kernel's page cache, which writes the pages out and evicts them under
memory pressure, so they are not the process's memory (the file is read and written, not
mapped).  Commits write the checkpoint's versions
(:class:`~streamwww.state.betas.DiskBetas`) from it.  The rows' squared norms of a
store's shards (8 bytes a row), computed at every read of a shard not kept in memory, are kept
the same way (:meth:`streamwww.stream.sources.StoreData.spill_norms`).

The file has no name (``tempfile.TemporaryFile``: a killed run leaves nothing behind)
and its blocks are reserved when it is made (``posix_fallocate``, where the system has
it), so a full disk is found before training starts, never by a write in the middle of
an epoch: the caller then goes on without it.  No checksum: the bytes never outlive the
process (as the shrinking sets' spill file, :mod:`streamwww.engine.shrink`).
"""

from __future__ import annotations

import errno
import os
import tempfile

import numpy as np

__all__ = ["ShardScratch"]


class ShardScratch:
    """``copies`` slots per shard, each a float64 array ``(n_models, rows, m)``, in one file.

    Parameters
    ----------
    directory : str or path, or None
        Where the file's blocks live (e.g. the checkpoint directory); None: the
        system's temporary directory.
    shard_rows : sequence of int
    n_models, m : int
        A slot's first and last dimensions (``beta``: models and classes - 1).
    copies : int
        Slots per shard.

    Raises
    ------
    OSError
        When the file cannot be made or its blocks reserved (e.g. ``ENOSPC``).
    """

    def __init__(self, directory, shard_rows, n_models: int, m: int, copies: int):
        if not (hasattr(os, "pwrite") and hasattr(os, "preadv")):  # (Windows: the caller does without)
            raise OSError(errno.ENOTSUP, "positioned reads and writes (pwrite, preadv) are not available here")
        self.n_models, self.m, self.copies = int(n_models), int(m), int(copies)
        self.shard_rows = [int(r) for r in shard_rows]
        row_bytes = 8 * self.n_models * self.m
        # shard s's slot c starts at copies * start[s] + c * rows[s] rows (in row_bytes)
        self._start = np.concatenate([[0], np.cumsum(self.shard_rows)]).astype(np.int64) * row_bytes * self.copies
        self.nbytes = int(self._start[-1])
        self._row_bytes = row_bytes
        self.where = str(directory if directory is not None else tempfile.gettempdir())
        self._file = tempfile.TemporaryFile(prefix="streamwww-scratch-", dir=directory)
        try:
            self._reserve(self.nbytes)
        except BaseException:
            self._file.close()
            raise
        self._fd = self._file.fileno()

    def _reserve(self, nbytes: int) -> None:
        fd = self._file.fileno()
        if nbytes == 0:
            return
        try:
            os.posix_fallocate(fd, 0, nbytes)
            return
        except AttributeError:  # (macOS has no posix_fallocate)
            pass
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                raise
        # a file system (or system) without fallocate: a sparse file (the caller checked the free space)
        os.ftruncate(fd, nbytes)

    def _offset(self, s: int, c: int) -> int:
        if not 0 <= c < self.copies:
            raise IndexError(f"scratch slot {c} of shard {s}: {self.copies} slots a shard")
        return int(self._start[s]) + c * self.shard_rows[s] * self._row_bytes

    def write(self, s: int, c: int, a: np.ndarray) -> None:
        """Write ``a`` (shape ``(n_models, rows[s], m)``, float64) to shard ``s``'s slot ``c``."""
        shape = (self.n_models, self.shard_rows[s], self.m)
        if a.shape != shape or a.dtype != np.float64:
            raise ValueError(f"array of shape {a.shape}/{a.dtype} for shard {s}; expected {shape}/float64")
        offset = self._offset(s, c)
        # one call for a contiguous array, else one per model (rows of one model are contiguous
        # in a group's beta; a slice of its rows is not across models)
        parts = [a] if a.flags.c_contiguous else [np.ascontiguousarray(a[j]) for j in range(shape[0])]
        try:
            for part in parts:
                view = memoryview(part.reshape(-1).view(np.uint8))
                while view:
                    done = os.pwrite(self._fd, view, offset)
                    view, offset = view[done:], offset + done
        except OSError as exc:
            raise self._failed(exc, "write", s, c) from None

    def read(self, s: int, c: int, out: np.ndarray) -> np.ndarray:
        """Shard ``s``'s slot ``c`` into ``out`` (float64, shape ``(n_models, rows[s], m)``;
        each model's rows contiguous, as in a slice of a group's beta)."""
        shape = (self.n_models, self.shard_rows[s], self.m)
        if out.shape != shape or out.dtype != np.float64:
            raise ValueError(f"buffer of shape {out.shape}/{out.dtype} for shard {s}; expected {shape}/float64")
        offset = self._offset(s, c)
        parts = [out] if out.flags.c_contiguous else [out[j] for j in range(shape[0])]
        if any(not part.flags.c_contiguous for part in parts):
            raise ValueError(f"buffer of shard {s}: a model's rows are not contiguous")
        try:
            for part in parts:
                view = memoryview(part.reshape(-1).view(np.uint8))
                while view:
                    got = os.preadv(self._fd, [view], offset)
                    if got <= 0:
                        raise OSError(errno.EIO, "the file ends early")
                    view, offset = view[got:], offset + got
        except OSError as exc:
            raise self._failed(exc, "read", s, c) from None
        return out

    def _failed(self, exc: OSError, doing: str, s: int, c: int) -> OSError:
        """One line naming the file (by its directory: it has no name), the shard and the slot."""
        return OSError(exc.errno, f"scratch file in {self.where}: cannot {doing} shard {s} (slot {c}): "
                                  f"{exc.strerror or exc}")

    def close(self) -> None:
        """Close (and so delete) the file."""
        self._file.close()
