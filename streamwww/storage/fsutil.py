"""Durability and ownership helpers shared by store writers, checkpoints and scratch space."""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import stat
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from streamwww.errors import OutputPathError, StorageError

__all__ = ["not_regular", "same_or_inside", "fsync_path", "fsync_tree", "try_lock", "unlock", "lock_held",
           "read_failure", "is_read_failure", "write_failure", "ScratchDir", "ObjectLock", "temporary_beside",
           "remove_dead_temporaries"]

logger = logging.getLogger(__name__)


def not_regular(path) -> str | None:
    """What the local ``path`` is when something other than a regular file or a directory
    is there ("a symlink", "a FIFO", ...); None for a regular file, a directory or nothing.

    Outputs are written to a temporary name and renamed over ``path``: the rename would
    replace a link (not write its target) and a FIFO or device node with a regular file,
    so such a path is refused before any work instead. A symlink is reported as such
    whatever it points to (``lstat``: the link itself).
    """
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    for test, kind in ((stat.S_ISLNK, "a symlink"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return None


def same_or_inside(output, inputs) -> str | None:
    """The first of ``inputs`` (local paths; None entries skipped) that the local path
    ``output`` is, or lies inside (an input directory), following links; else None.

    Used before a command writes ``output``: a rename onto one of its own inputs would
    destroy the data it reads (``predict M T --output T``).
    """
    out = os.path.realpath(output)
    for given in inputs:
        if given is None:
            continue
        src = os.path.realpath(given)
        try:
            if os.path.exists(output) and os.path.samefile(output, given):  # (hard links too)
                return str(given)
        except OSError:
            pass
        if out == src or (os.path.isdir(src) and out.startswith(src.rstrip(os.sep) + os.sep)):
            return str(given)
    return None


def read_failure(path, exc: OSError, what: str = "", where: str | None = None) -> StorageError:
    """The one-line error for a local file that is there but cannot be read: no permission,
    EIO, a directory where a file should be (any ``OSError`` but ``FileNotFoundError``).

    Such a failure says nothing about the bytes: a reader must report it, never take it
    for damage and fall back (a fallback lets the next commit replace what may be intact).
    The error is a :class:`~streamwww.errors.StorageError` that keeps ``exc``'s ``errno``.

    Parameters
    ----------
    path : str or Path
        The file that could not be read (named first in the message).
    exc : OSError
        The failure. A StorageError already made here (by a lower layer, which named
        the file) is kept as it is, only ``where`` put before it.
    what : str, optional
        What the file holds (``"the weights"``), for the message.
    where : str, optional
        What the file belongs to (``"STORE: shard 2 (shard-00002)"``), put first.
    """
    from streamwww.errors import StorageError

    if isinstance(exc, StorageError):
        if where is None:
            return exc
        text = str(exc)
    else:
        text = (f"{path}: cannot read{' ' + what if what else ''} ({exc.strerror or exc}); an I/O error, "
                f"not damage: it was left as it is; fix its access or the disk and run again")
    err = StorageError(f"{where}: {text}" if where else text)
    err.errno = exc.errno
    return err


def is_read_failure(exc: BaseException) -> bool:
    """Whether ``exc``, raised while reading a local file, is :func:`read_failure`'s kind:
    the file is there but the system could not read it (an ``OSError`` that carries an
    ``errno``, but not ``FileNotFoundError``: a missing file is an answer about the data),
    or such an error made already.

    The ``errno`` tells a failed system call from what a parser raises as ``OSError``
    about the bytes it was given (pyarrow's for a Parquet page whose checksum does not
    match carries none): those are damage.
    """
    from streamwww.errors import StorageError

    return isinstance(exc, StorageError) or (isinstance(exc, OSError) and exc.errno is not None
                                             and not isinstance(exc, FileNotFoundError))


def write_failure(path, exc: OSError, what: str) -> OutputPathError:
    """The one-line error for an output that could not be written (a full disk, a read-only
    file system, a lost mount): ``PATH: cannot write WHAT (cause); nothing was written
    there``, naming the output the user gave, never the temporary it was written under
    (the writer removes that). An ``OSError`` from ``write`` names no file: the command
    line's generic line could not say which. The error keeps ``exc``'s ``errno``.
    """
    from streamwww.errors import OutputPathError

    err = OutputPathError(f"{path}: cannot write {what} ({exc.strerror or exc}); nothing was written there")
    err.errno = exc.errno
    return err


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


def lock_held(path) -> bool:
    """Whether a live process holds :func:`try_lock`'s lock on ``path`` (a reader's question:
    nothing is created or written; a missing or unopenable ``path`` is not held).

    The shared lock is taken and dropped at once; a trainer that tries its exclusive lock
    in that instant is refused as if another trainer held it.
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # (closing drops the shared lock)
    return False


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


def _host() -> str:
    """This machine: its host name and, on Linux, its boot id (a host name alone may be
    shared by machines; the boot id changes when the machine restarts)."""
    import socket

    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    except OSError:
        boot = ""
    return f"{socket.gethostname()}/{boot}" if boot else socket.gethostname()


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid is alive (another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def temporary_beside(path) -> Path:
    """The temporary name an output ``path`` is written under before it is renamed into
    place: ``.NAME.PID.tmp`` beside it (the writer's pid, so that a later writer can tell
    a dead process's leftover from a live one's, see :func:`remove_dead_temporaries`)."""
    path = Path(path)
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def remove_dead_temporaries(path, folders: bool = False, pattern: str | None = None) -> list[Path]:
    """Delete the :func:`temporary_beside` files of ``path`` whose writer is gone (a process
    killed by SIGKILL leaves its temporary behind); return them.  ``folders``: the output is
    a directory, and so are its temporaries (removed whole; never through a link).
    ``pattern``: a regular expression for another writer's names beside ``path``, with the
    writer's pid as its group ``pid`` (default: :func:`temporary_beside`'s).

    Only names of exactly that form with a pid no live process has are removed: a live
    writer's, or any other file, stays. A pid reused since by another process keeps its
    leftover until that process ends. Failures to list or delete are ignored (the output
    is written all the same).
    """
    import re

    path = Path(path)
    pattern = re.compile(pattern or rf"^\.{re.escape(path.name)}\.(?P<pid>\d+)\.tmp$")
    removed = []
    try:
        names = os.listdir(path.parent)
    except OSError:
        return removed
    for name in names:
        m = pattern.match(name)
        if m is None or int(m["pid"]) == os.getpid() or pid_alive(int(m["pid"])):
            continue
        leftover = path.parent / name
        try:
            mode = os.lstat(leftover).st_mode
            if stat.S_ISREG(mode) and not folders:  # (what this code wrote: never a link)
                leftover.unlink()
                removed.append(leftover)
            elif stat.S_ISDIR(mode) and folders:
                shutil.rmtree(leftover)
                removed.append(leftover)
        except OSError:
            pass
    if removed:
        logger.info("removed %s, left by a process that died while writing %s",
                    ", ".join(p.name for p in removed), path)
    return removed


_HELD_TOKENS: set[str] = set()  # tokens of the ObjectLocks this process holds now


class ObjectLock:
    """An exclusive lock on an object store, where there is no flock: a ``LOCK`` object.

    The lock is taken by creating the object with a conditional PUT (create only if
    absent; see :meth:`~streamwww.storage.location.Location.write_bytes`). It records its
    owner's ``host`` (host name and boot id), ``pid``, a random ``token``, when it was
    taken (``started``) and a ``heartbeat`` time, which a daemon thread renews every
    ``lease_s / 4`` seconds (and :meth:`check` at every commit). A lock is stale,
    and taken over, when its owner is a process of this host that is gone (or of this
    process, released without deleting it), or when its heartbeat is older than
    ``lease_s`` (clocks are assumed to agree to well within the lease).

    It is not a fencing lock: two processes that find one stale lock at the same
    instant may both take it; :meth:`check` then finds the token changed in one of
    them, which stops before its next commit. See docs/RELIABILITY.md.

    Parameters
    ----------
    where : Location
        The ``LOCK`` object.
    lease_s : float
        How long a heartbeat stays valid.
    """

    def __init__(self, where, lease_s: float):
        import secrets
        import threading

        self.where = where
        self.lease_s = float(lease_s)
        self.token = secrets.token_hex(8)
        self.started = time.time()
        self.lost: str | None = None  # why the lock is no longer ours, once found out
        self._stop = threading.Event()
        self._thread = None
        self._io = threading.Lock()  # one heartbeat PUT at a time (timer and commit)

    def _record(self) -> bytes:
        import json

        return json.dumps({"host": _host(), "pid": os.getpid(), "token": self.token,
                           "started": self.started, "heartbeat": time.time(),
                           "lease_s": self.lease_s}).encode()

    def holder(self) -> dict | None:
        """The lock's current record (None: no lock, or unreadable)."""
        import json

        try:
            record = json.loads(self.where.read_bytes())
        except FileNotFoundError:
            return None
        except ValueError:  # garbled: treated as absent (it then goes by its age)
            return {}
        return record if isinstance(record, dict) else {}

    def stale(self, record: dict) -> str | None:
        """Why the lock ``record`` describes is stale, or None while its owner may live."""
        if record.get("host") == _host() and isinstance(record.get("pid"), int):
            pid = record["pid"]
            if pid == os.getpid():
                if record.get("token") not in _HELD_TOKENS:
                    return f"left by this process (pid {pid}), which released it"
            elif not pid_alive(pid):
                return f"its owner, pid {pid} on this host, is gone"
        beat = record.get("heartbeat")
        if not isinstance(beat, (int, float)):
            return "it records no heartbeat"
        if time.time() - beat > float(record.get("lease_s", self.lease_s)):
            return f"its last heartbeat is {time.time() - beat:.0f} s old"
        return None

    def try_acquire(self) -> dict | None:
        """Take the lock: None when taken, else the live holder's record."""
        for _ in range(2):
            try:
                self.where.write_bytes(self._record(), exclusive=True)
            except FileExistsError:
                record = self.holder()
                if record is None:
                    continue  # released in between: try again
                why = self.stale(record)
                if why is None:
                    return record
                logger.warning("%s: taking over a stale lock (%s)", self.where, why)
                self.where.remove()
                continue
            _HELD_TOKENS.add(self.token)
            self._start()
            return None
        return self.holder() or {}

    def _start(self) -> None:
        import threading

        self._thread = threading.Thread(target=self._beat, name="streamwww-lock-heartbeat", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(self.lease_s / 4):
            try:
                self.check()
            except Exception as exc:  # an unreachable store: the next commit fails on it
                logger.warning("%s: the lock's heartbeat was not renewed (%s)", self.where, exc)
            if self.lost:
                return

    def check(self) -> None:
        """Make sure the lock is still ours and renew its heartbeat; sets :attr:`lost`
        (and returns) when another process holds it now. Store errors propagate."""
        with self._io:
            if self.lost:
                return
            record = self.holder()
            if not record or record.get("token") != self.token:
                owner = "nobody" if not record else f"pid {record.get('pid')} on {record.get('host')}"
                self.lost = f"the lock is now held by {owner}"
                return
            self.where.write_bytes(self._record())

    def release(self) -> None:
        """Stop the heartbeat and delete the lock if it is still ours (a failure is
        logged: a lock left behind goes stale)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        _HELD_TOKENS.discard(self.token)
        if self.lost:
            return
        try:
            with self._io:
                record = self.holder()
                if record and record.get("token") == self.token:
                    self.where.remove()
        except Exception as exc:
            logger.warning("%s: the lock was not deleted (%s); it goes stale when its lease ends",
                           self.where, exc)
