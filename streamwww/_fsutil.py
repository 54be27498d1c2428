"""Durability and ownership helpers shared by store writers, checkpoints and scratch space."""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path

__all__ = ["fsync_path", "fsync_tree", "try_lock", "unlock", "ScratchDir"]

logger = logging.getLogger(__name__)


def fsync_path(path) -> None:
    """fsync one file or directory (a directory's fsync makes renames in it durable)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(root) -> None:
    """fsync every file and directory below ``root`` (and ``root`` itself)."""
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            fsync_path(os.path.join(dirpath, name))
        fsync_path(Path(dirpath))


def try_lock(path) -> int | None:
    """flock ``path`` (created if missing) exclusively without waiting: the open file
    descriptor, or None when another process holds it. The kernel drops the lock
    when the holder dies, SIGKILL included."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def unlock(fd: int) -> None:
    """Release a lock taken by :func:`try_lock`."""
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)


class ScratchDir:
    """A private temporary directory (``$TMPDIR/<prefix>*``), locked while it is in use.

    Creating one first removes the directories of earlier runs that died without
    cleaning up (a SIGKILLed run leaves its ``beta`` behind, as large as the
    data set's dual variables): those whose ``LOCK`` no live process holds.
    A directory without ``LOCK`` is removed only once it is an hour old (it may
    belong to a run being set up right now).
    """

    STALE_UNLOCKED_S = 3600.0

    def __init__(self, prefix: str = "streamwww-beta-"):
        self._remove_abandoned(Path(tempfile.gettempdir()), prefix)
        self.path = Path(tempfile.mkdtemp(prefix=prefix))
        self._fd = try_lock(self.path / "LOCK")

    @classmethod
    def _remove_abandoned(cls, base: Path, prefix: str) -> None:
        for old in base.glob(prefix + "*"):
            try:
                if not old.is_dir():
                    continue
                lock = old / "LOCK"
                if lock.exists():
                    fd = try_lock(lock)
                    if fd is None:
                        continue  # in use
                    try:
                        shutil.rmtree(old, ignore_errors=True)
                    finally:
                        unlock(fd)
                elif time.time() - old.stat().st_mtime > cls.STALE_UNLOCKED_S:
                    shutil.rmtree(old, ignore_errors=True)
                else:
                    continue
                logger.info("removed %s, left by a run that ended without cleaning up", old)
            except OSError as exc:  # another user's directory, a race with its owner: leave it
                logger.debug("left %s alone: %s", old, exc)

    def close(self) -> None:
        """Delete the directory and release its lock."""
        shutil.rmtree(self.path, ignore_errors=True)
        if self._fd is not None:
            unlock(self._fd)
            self._fd = None
