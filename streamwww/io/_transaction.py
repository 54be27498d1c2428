"""Committing a written store (or any output directory): nothing half-written ever opens.

:class:`StoreTransaction` (local disk: a temporary sibling directory, fsync,
rename) and :class:`RemoteStoreTransaction` (an object store: no rename; the
shards go to their final keys and the marker is the last PUT); :func:`open_transaction`
picks one for a path or URL. Used by :mod:`streamwww.io.store`,
:mod:`streamwww.io.convert` and :func:`streamwww.write_predictions`.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import shutil
from pathlib import Path

from streamwww.errors import StoreExistsError
from streamwww.io._format import MARKER
from streamwww.storage.fsutil import ScratchDir, fsync_path, fsync_tree, remove_dead_temporaries
from streamwww.storage.location import Location, located, location

__all__ = ["StoreTransaction", "RemoteStoreTransaction", "open_transaction", "INCOMPLETE"]

logger = logging.getLogger(__name__)


class _Transaction:
    """A ``with`` block that aborts the write when it ends by an exception."""

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.abort()

    def abort(self) -> None:
        raise NotImplementedError


class StoreTransaction(_Transaction):
    """Write a store (or any output directory) atomically.

    Everything is written into a hidden sibling ``.NAME.streamwww-tmp-PID-XXXX``;
    :meth:`commit` writes the marker, fsyncs, and renames it to ``path``
    (replacing an old store only when ``overwrite``). An exception inside the
    ``with`` block removes the temporary directory; a killed process leaves it
    behind, where it never opens as a store and the next write to the same
    path removes it.

    Other outputs (predictions) commit with their own ``marker`` file; ``replaceable``
    (the names in a directory -> bool) also accepts, with ``overwrite``, a directory that
    an earlier version wrote without it.  Anything else at ``path`` is never replaced.
    """

    def __init__(self, path: str | os.PathLike, overwrite: bool, marker: str = MARKER, replaceable=None):
        self.path = Path(path).absolute()
        self.location = location(self.path)
        self.overwrite = bool(overwrite)
        self.marker = marker
        self._replaceable = replaceable
        self._check_target()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._clean_stale()
        self.tmp = self._sibling("tmp")
        self.tmp.mkdir()
        self.scratch = self.tmp  # local room for staging and spool files

    def _sibling(self, kind: str) -> Path:
        return self.path.parent / f".{self.path.name}.streamwww-{kind}-{os.getpid()}-{secrets.token_hex(4)}"

    def _check_target(self) -> None:
        if not (self.path.exists() or self.path.is_symlink()):
            return
        if not self.overwrite:
            raise StoreExistsError(f"{self.path} already exists; pass overwrite=True "
                                   f"(--overwrite) to replace it.")
        names = [p.name for p in self.path.iterdir()] if self.path.is_dir() and not self.path.is_symlink() else None
        replaceable = names is not None and (not names or (self.path / self.marker).is_file()
                                             or self._replaceable is not None and self._replaceable(names))
        if not replaceable:
            raise StoreExistsError(f"{self.path} exists and is not {_what(self.marker)}; "
                                   f"refusing to replace it even with overwrite=True.")

    def _clean_stale(self) -> None:
        remove_dead_temporaries(self.path, folders=True, pattern=rf"^\.{re.escape(self.path.name)}"
                                                                 r"\.streamwww-(?:tmp|old)-(?P<pid>\d+)-[0-9a-f]+$")

    def abort(self) -> None:
        """Remove the temporary directory."""
        shutil.rmtree(self.tmp, ignore_errors=True)

    def commit(self, metadata: dict | None) -> None:
        """Write ``metadata`` as the marker (if given), fsync, rename into place."""
        if metadata is not None:
            part = self.tmp / (self.marker + ".part")
            part.write_text(json.dumps(metadata, indent=1))
            os.replace(part, self.tmp / self.marker)
        fsync_tree(self.tmp)
        self._check_target()
        if self.path.exists() or self.path.is_symlink():
            old = self._sibling("old")
            os.rename(self.path, old)
            try:
                os.rename(self.tmp, self.path)
            except BaseException:  # (a failed write destroys nothing: the earlier store goes back)
                os.rename(old, self.path)
                raise
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(self.tmp, self.path)
        fsync_path(self.path.parent)


INCOMPLETE = "streamwww.incomplete"


def _what(marker: str) -> str:
    """What an output committed with ``marker`` is, in an error message."""
    return "a streamwww store" if marker == MARKER else f"an output of streamwww ({marker})"


class RemoteStoreTransaction(_Transaction):
    """Write a store on an object store, where there is no rename.

    The shards go straight to their final keys below the store's URL and the
    ``streamwww.json`` marker is the last PUT, so a reader sees the store
    complete or not at all (:func:`open_store` needs the marker; an object
    store's PUT is atomic). An ``streamwww.incomplete`` object, written first,
    marks the prefix as a write in progress: a later write to the same URL may
    clear what a killed one left (with or without ``overwrite``), while a prefix
    holding anything else is refused. Replacing a store (``overwrite``) deletes
    its marker first, so that it stops opening, then its objects: unlike on a
    local disk, the old store is gone as soon as the new write starts.

    Staging and spool files go to a local scratch directory (:attr:`scratch`);
    :attr:`tmp` is where shards are written (the store's own Location).
    Other outputs (predictions) commit with their own ``marker`` object, and
    ``replaceable`` as in :class:`StoreTransaction`.
    """

    def __init__(self, loc: Location, overwrite: bool, marker: str = MARKER, replaceable=None):
        import socket
        import time

        self.location = self.tmp = loc
        self.path = loc.url
        self.overwrite = bool(overwrite)
        self.marker = marker
        self._replaceable = replaceable
        self._check_target()
        self._scratch = ScratchDir(prefix="streamwww-convert-")
        self.scratch = self._scratch.path
        try:
            marker = loc.child(self.marker)
            if marker.exists():
                marker.remove()  # the old store stops opening before anything else changes
            loc.child(INCOMPLETE).write_text(json.dumps({
                "host": socket.gethostname(), "pid": os.getpid(), "started": time.time()}))
            for name in loc.listdir():
                if name != INCOMPLETE:
                    loc.child(name).remove(recursive=True)
        except BaseException:
            self._scratch.close()
            raise

    def _check_target(self) -> None:
        names = self.location.listdir()
        if not names or INCOMPLETE in names and self.marker not in names:
            return  # nothing there, or what a killed write left: cleared
        if self.marker not in names and not (self._replaceable is not None and self._replaceable(names)):
            raise StoreExistsError(f"{self.path} holds objects that are not {_what(self.marker)}; "
                                   f"refusing to replace them even with overwrite=True.")
        if not self.overwrite:
            raise StoreExistsError(f"{self.path} already exists; pass overwrite=True "
                                   f"(--overwrite) to replace it.")

    def abort(self) -> None:
        """Delete what this write put below the URL (the prefix was cleared for it)."""
        try:
            for name in self.location.listdir():
                if name != INCOMPLETE:
                    self.location.child(name).remove(recursive=True)
            self.location.child(INCOMPLETE).remove()
        except OSError as exc:  # the store is unreachable: the leftovers never open
            logger.warning("%s: could not remove a failed write's objects (%s); they never open "
                           "as a store and the next write to this URL clears them", self.path, exc)
        finally:
            self._scratch.close()

    def commit(self, metadata: dict | None) -> None:
        """Write ``metadata`` as the marker: the store is complete from this PUT on."""
        if metadata is None:
            raise ValueError(f"{self.path}: a store on an object store commits with its metadata")
        self.location.child(self.marker).write_text(json.dumps(metadata, indent=1))
        self.location.child(INCOMPLETE).remove()
        self._scratch.close()


def open_transaction(path, overwrite: bool, storage_options: dict | None = None, *, marker: str = MARKER,
                     replaceable=None):
    """The transaction that writes a store (or another output: ``marker``, ``replaceable``)
    at ``path``: :class:`StoreTransaction` (temporary sibling, fsync, rename) on a local disk,
    :class:`RemoteStoreTransaction` (marker written last) on an object store."""
    loc = located(path, storage_options)
    if loc.is_local:
        return StoreTransaction(loc.local_path, overwrite, marker=marker, replaceable=replaceable)
    return RemoteStoreTransaction(loc, overwrite, marker=marker, replaceable=replaceable)
