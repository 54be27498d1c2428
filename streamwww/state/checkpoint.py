"""Crash-safe, versioned checkpoints: commits of ``W``, the ``beta`` versions and the run state,
the manifest that names them, and the checks a resume makes against it.

The ``beta`` arrays themselves are :class:`~streamwww.state.betas.DiskBetas`'
(written as training goes); a commit names a consistent set of their versions.

Layout of a checkpoint directory::

    LOCK                    held (flock) by the one trainer using the directory, and signed
                            by it (what makes a directory without a manifest streamwww's)
    manifest.json           the latest commit record, replaced atomically; written last
    manifest.prev.json      the commit before it, kept (with all it names) as a fallback
    W-000012.npy            weights of step 12, float64 (n_models, D, k)
    Wsets-000012.npy        (a shrinking run's commit mid-epoch, or after an epoch without
                            objectives) the weights whose objective pass chose the sets
                            in force (engine.shrink)
    beta.zarr/s000003-v000007   Zarr v3 array: shard 3's beta, version 7, (n_models, rows, k-1)

Every manifest carries a blake2b checksum of itself and of the ``W`` it names,
and the per-model sum of every ``beta`` version it names; a resume checks all
three and falls back to the previous commit when the latest is damaged.

A shard's ``beta`` is never overwritten: each pass writes a new version, and
the manifest names the version of every shard that belongs with the ``W`` it
names.  A commit captures ``W``, the versions and the state, then, on a
background thread while training goes on, (1) waits for pending ``beta`` writes
and fsyncs them, (2) writes and fsyncs ``W``, (3) writes ``manifest.json.tmp``,
fsyncs it, moves the old ``manifest.json`` to ``manifest.prev.json``, renames
the new one into place and fsyncs the directory, then (4) deletes files neither
manifest names (the steps, in order, are :mod:`streamwww.state.commit`).  A
process killed at any instant therefore leaves the previous manifest and
everything it names intact; stray files from the killed step are ignored and
collected by the next commit.

On an object store (the directory given as a URL or a remote
:class:`~streamwww.storage.location.Location`), where there is no rename, no fsync and
no flock, the same layout is written under the same rules: every ``W`` and
``beta`` version is a new key, created only if absent (a conditional PUT; a key
found with identical bytes, as a re-run task leaves it, is success), the
manifest is written last as one PUT after the one it supersedes was copied to
``manifest.prev.json`` from the bytes in memory, readers trust nothing a
manifest does not name (so a lagging listing only delays garbage collection),
and ``LOCK`` is an :class:`~streamwww.storage.fsutil.ObjectLock`.  The locked trainer
deletes what no kept manifest names when it opens the checkpoint (what a killed
run left), and superseded versions after the next commit, as on disk.  See
docs/RELIABILITY.md, "Checkpoints on object stores".
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import re
import shutil
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from streamwww.storage.fsutil import ObjectLock, fsync_path, is_read_failure, read_failure, try_lock, unlock
from streamwww.storage.location import (
    is_storage_failure,
    is_url,
    location,
    write_once,
)
from streamwww.errors import CheckpointError, OutputPathError
from streamwww.state import commit as protocol
from streamwww.state.versions import parse_beta_name

if TYPE_CHECKING:
    from streamwww.state.betas import DiskBetas
    from streamwww.state.commit import BetaCommit

logger = logging.getLogger(__name__)

__all__ = ["MANIFEST", "PREVIOUS", "CheckpointDir", "CheckpointFallbackWarning", "check_compatible", "manifest_checksum",
           "array_digest", "FORMAT", "VERSION"]


def weight_files(manifest: dict[str, Any]) -> list[str]:
    """The weights files a manifest names: ``W``, and ``W_sets`` where it has one."""
    sets = manifest.get("W_sets")
    return [manifest["W"]] + ([sets["file"]] if sets else [])


class CheckpointFallbackWarning(UserWarning):
    """The latest checkpoint was damaged; training resumed from the one before it."""


def manifest_checksum(manifest: dict[str, Any]) -> str:
    """blake2b of a manifest's canonical JSON, its ``checksum`` field left out."""
    body = {k: v for k, v in manifest.items() if k != "checksum"}
    return hashlib.blake2b(json.dumps(body, sort_keys=True, separators=(",", ":")).encode(),
                           digest_size=16).hexdigest()


def array_digest(a: np.ndarray) -> str:
    """blake2b of an array's bytes (C order), its dtype and shape."""
    a = np.ascontiguousarray(a)
    h = hashlib.blake2b(f"{a.dtype.str}{a.shape}".encode(), digest_size=16)
    h.update(a.data)
    return h.hexdigest()

FORMAT = "streamwww-checkpoint"
VERSION = 2  # 2: blake2b of W and of the manifest, the previous commit kept
READS = (1, 2)
MANIFEST = "manifest.json"  # the latest commit
PREVIOUS = "manifest.prev.json"  # the one before it, kept as the fallback
_W_NAME = re.compile(r"^W(sets)?-(\d{6})\.npy$")  # the weights files of a commit
LEASE_S = 120.0  # a remote LOCK whose heartbeat is older than this is stale
_TMP_NAME = re.compile(r"^(W(sets)?-\d{6}\.npy|manifest\.json)\.tmp$")  # a commit's temporaries
#: the start of a checkpoint's LOCK: what tells a directory of a run that died before its
#: first commit (streamwww's, to clean up) from someone's files under the same names
LOCK_SIGNATURE = b"streamwww checkpoint lock"


def _checkpoint_name(name: str) -> bool:
    """Whether ``name`` (a top-level entry) is one a checkpoint writes, deletes or replaces:
    weights and their temporaries, the ``beta`` arrays, the store ``train FILE`` converts."""
    return bool(_W_NAME.match(name) or _TMP_NAME.match(name)) or name in (
        "beta.zarr", "data.zarr", ".data.zarr.incoming")


class CheckpointDir:
    """A checkpoint directory: lock, commit and load.

    Parameters
    ----------
    path : str, Path or Location
        Directory (created if missing), or an fsspec URL (``s3://bucket/run``)
        or a :class:`~streamwww.storage.location.Location` (which carries its storage
        options) on an object store.
    lock : bool, default=True
        Take the exclusive lock; a second trainer on the same directory gets a
        :class:`~streamwww.errors.CheckpointError`.
    lease_s : float, optional
        On an object store: how long the lock's heartbeat stays valid
        (default :data:`LEASE_S`); the lock is renewed every quarter of it.

    Attributes
    ----------
    path : Path or Location
        The local directory, or the remote Location (its ``str`` is the URL).
    location : Location
    """

    def __init__(self, path, lock: bool = True, lease_s: float | None = None):
        self.location = location(path)
        self.remote = not self.location.is_local
        if self.remote:
            self.path = self.location
        else:
            self.path = Path(path) if isinstance(path, os.PathLike) or (isinstance(path, str) and not is_url(path)) \
                else self.location.local_path
        self._lock_fd = None
        self._object_lock: ObjectLock | None = None
        self._latest_bytes: bytes | None = None  # remote: the latest manifest as stored (the next prev)
        self.doing = ""  # remote: the request of a commit in progress, for its error message
        self._scanned = False  # garbage not yet collected by a full scan in this process
        self._latest: dict[str, Any] | None = None  # the latest committed manifest (loaded or written)
        self._W_names: list[str] = []  # weights files the kept manifests name
        self._previous: dict[str, Any] | None = None  # the kept commit before the latest, once loaded
        self._committer = None  # one background thread, created by the first commit
        self._inflight = None  # the commit in progress (a concurrent.futures.Future)
        if self.remote:
            if lock:
                self._lock_remote(LEASE_S if lease_s is None else lease_s)
            return
        if not lock:
            return  # a reader creates nothing (`resume` of a mistyped path left an empty directory)
        if self.path.is_file():  # (mkdir's "File exists" says it less plainly)
            raise OutputPathError(f"{self.path}: is a file, not a checkpoint directory; give a directory "
                                  f"(a new one, or one of an earlier run to continue)")
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            probe = self.path / f".write-probe-{os.getpid()}"
            probe.touch()
            probe.unlink()
        except OSError as exc:
            raise OutputPathError(f"{self.path}: cannot use this checkpoint directory "
                                  f"({exc.strerror or exc})") from None
        self._refuse_foreign()
        try:
            fd = try_lock(self.path / "LOCK")
        except OSError as exc:  # (a directory, no permission: not a lock this trainer can take)
            raise OutputPathError(f"{self.path / 'LOCK'}: cannot take this checkpoint's lock "
                                  f"({exc.strerror or exc}); it must be a regular file") from None
        if fd is None:
            raise CheckpointError(f"{self.path}: another trainer holds this checkpoint directory "
                                  f"(LOCK is taken); stop it or use another --checkpoint-dir")
        os.ftruncate(fd, 0)  # (the mark that this directory is streamwww's: see _refuse_foreign)
        os.pwrite(fd, LOCK_SIGNATURE + f", pid {os.getpid()}\n".encode(), 0)
        self._lock_fd = fd

    def _refuse_foreign(self) -> None:
        """Refuse a local directory that is not a streamwww checkpoint and holds files by
        the names a checkpoint writes, deletes or overwrites (:func:`_checkpoint_name`).

        A directory is a checkpoint when it has a manifest, or a ``LOCK`` that a
        trainer signed (every trainer signs it before it writes anything, so what a
        run killed before its first commit left counts as its own). Anything else in
        it (a user's notes, a store elsewhere) is never touched, since garbage
        collection deletes only those names; files by those names could be
        anyone's (``W-000123.npy``), so they are neither deleted nor overwritten.
        """
        if self.has_checkpoint():
            return
        try:
            with open(self.path / "LOCK", "rb") as f:
                if f.read(len(LOCK_SIGNATURE)) == LOCK_SIGNATURE:
                    return
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise OutputPathError(f"{self.path}: cannot use this checkpoint directory "
                                  f"(reading LOCK: {exc.strerror or exc})") from None
        from streamwww.io.sniff import is_store  # (what `train FILE` itself asks)

        # (a complete store as data.zarr is one `train FILE` may replace by design, see
        # docs/TRAINING.md; any other data.zarr would be lost to its conversion)
        clash = sorted(n for n in os.listdir(self.path) if _checkpoint_name(n)
                       and not (n == "data.zarr" and is_store(self.location.child(n))))
        if clash:
            shown = ", ".join(clash[:3]) + (f" and {len(clash) - 3} more" if len(clash) > 3 else "")
            raise OutputPathError(f"{self.path}: not a streamwww checkpoint (no manifest.json, LOCK not "
                                  f"streamwww's), yet it holds {shown}, names a checkpoint writes and "
                                  f"deletes; nothing was changed: give a new or empty --checkpoint-dir")

    def _lock_remote(self, lease_s: float) -> None:
        """Take the object store's LOCK, then delete what a killed run left when no
        manifest is there yet (with one, :meth:`load` collects what it does not name)."""
        lock = ObjectLock(self.location.child("LOCK"), lease_s)
        holder = lock.try_acquire()
        if holder is not None:
            who = f"pid {holder.get('pid')} on {holder.get('host')}" if holder else "an unknown owner"
            raise CheckpointError(f"{self.path}: another trainer holds this checkpoint directory (LOCK "
                                  f"is taken by {who} and its heartbeat is live); stop it or use another "
                                  f"--checkpoint-dir")
        self._object_lock = lock
        try:
            if not self.has_checkpoint():
                self.collect_garbage([])
        except BaseException:
            self.close()
            raise

    def drain(self) -> None:
        """Let the commit in progress finish; log (not raise) its failure. For cleanup
        paths: the previous checkpoint stays the committed one if it failed."""
        try:
            self.wait()
        except Exception as exc:
            logger.error("%s: the last checkpoint commit failed (%s: %s); the previous one stands",
                         self.path, type(exc).__name__, exc)
        if self._committer is not None:
            self._committer.shutdown(wait=True)
            self._committer = None

    def close(self) -> None:
        """Finish the commit in progress (see :meth:`drain`) and release the lock."""
        self.drain()
        if self._lock_fd is not None:
            unlock(self._lock_fd)
            self._lock_fd = None
        if self._object_lock is not None:
            self._object_lock.release()
            self._object_lock = None

    @property
    def locked(self) -> bool:
        """Whether this object holds the directory's lock."""
        return self._lock_fd is not None or self._object_lock is not None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- reading ---------------------------------------------------------------
    def has_checkpoint(self) -> bool:
        return (self.path / MANIFEST).exists() or (self.path / PREVIOUS).exists()

    def _read(self, name: str) -> bytes:
        """The bytes of ``name`` in the directory (remote: failures are StorageError)."""
        if self.remote:
            return self.location.child(name).read_bytes()
        return (self.path / name).read_bytes()

    def load_manifest(self, name: str = MANIFEST) -> dict[str, Any]:
        """A committed manifest (the latest by default), validated and its checksum checked;
        raises CheckpointError when unusable, StorageError when it is there but cannot be
        read (an I/O error: no fallback)."""
        mpath = self.path / name
        try:
            raw = self._read(name)
            manifest = json.loads(raw.decode())
        except FileNotFoundError:
            raise CheckpointError(f"{self.path}: no checkpoint here (missing {name})") from None
        except OSError as exc:  # an I/O error, not damage: reported, never fallen back from
            if self.remote:
                raise
            if isinstance(exc, NotADirectoryError) and self.path.is_file():
                raise CheckpointError(f"{self.path}: is a file, not a checkpoint directory; give the "
                                      f"directory a run was given as --checkpoint-dir") from None
            if not is_read_failure(exc):  # (an OSError about the bytes, with no errno: damage)
                raise CheckpointError(f"{mpath}: corrupt manifest ({exc})") from None
            raise read_failure(mpath, exc, "the manifest") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise CheckpointError(f"{mpath}: corrupt manifest ({exc})") from None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise CheckpointError(f"{mpath}: not a streamwww checkpoint")
        if manifest.get("version") not in READS:
            raise CheckpointError(f"{mpath}: checkpoint format version {manifest.get('version')} "
                                  f"is not supported (this streamwww reads versions "
                                  f"{', '.join(map(str, READS))})")
        if manifest["version"] >= 2 and manifest.get("checksum") != manifest_checksum(manifest):
            raise CheckpointError(f"{mpath}: the manifest does not match its checksum (edited or damaged)")
        if self.remote and name == MANIFEST:
            self._latest_bytes = raw
        return manifest

    def load_W(self, manifest: dict[str, Any]) -> np.ndarray:
        """The weights a manifest names, checked against its hash (its sum for version 1)."""
        return self._load_weights(manifest["W"], manifest["W_shape"], manifest.get("W_blake2b"),
                                  manifest.get("W_sum"))

    def load_W_sets(self, manifest: dict[str, Any]) -> np.ndarray | None:
        """The weights whose objective pass chose the sets in force (a shrinking run's
        commit mid-epoch or after an epoch without objectives,
        :mod:`streamwww.engine.shrink`), or None."""
        sets = manifest.get("W_sets")
        if not sets:
            return None
        return self._load_weights(sets["file"], manifest["W_shape"], sets["blake2b"], None)

    def _load_weights(self, name: str, shape, digest, total) -> np.ndarray:
        path = self.path / name
        try:
            # (locally the file is opened here: what fails to open or read is an I/O error;
            # only what np.load makes of the bytes can be damage)
            source = io.BytesIO(self._read(name)) if self.remote else open(path, "rb")
            with source:
                W = np.load(source, allow_pickle=False)
        except FileNotFoundError:
            raise CheckpointError(f"{path}: missing weights named by the manifest") from None
        except OSError as exc:
            if self.remote:
                if is_storage_failure(exc):
                    raise
                raise CheckpointError(f"{path}: corrupt weights ({exc})") from None
            if not is_read_failure(exc):  # (an OSError about the bytes, with no errno: damage)
                raise CheckpointError(f"{path}: corrupt weights ({exc})") from None
            raise read_failure(path, exc, "the weights") from None
        except (ValueError, EOFError) as exc:
            if self.remote and is_storage_failure(exc):
                raise
            raise CheckpointError(f"{path}: corrupt weights ({exc})") from None
        if list(W.shape) != list(shape) or W.dtype != np.float64:
            raise CheckpointError(f"{path}: weights of shape {W.shape}/{W.dtype}, expected "
                                  f"{tuple(shape)}/float64")
        if digest is not None:
            if array_digest(W) != digest:
                raise CheckpointError(f"{path}: the weights do not match their hash in the manifest (damaged)")
        elif total is not None and float(W.sum()) != total:
            raise CheckpointError(f"{path}: weights do not match the checksum in the manifest")
        return W

    def load_settings(self) -> dict[str, Any]:
        """The newest readable manifest, for the run's settings (no ``W`` or ``beta`` checked)."""
        try:
            return self.load_manifest(MANIFEST)
        except CheckpointError:
            if not (self.path / PREVIOUS).exists():
                raise
            return self.load_manifest(PREVIOUS)

    def load(self, verify: Callable[[dict[str, Any]], None] | None = None, repair: bool = True
             ) -> tuple[dict[str, Any], np.ndarray]:
        """The latest intact checkpoint: ``(manifest, W)``.

        The latest commit is checked (manifest checksum, ``W`` hash, and
        ``verify(manifest)``, e.g. the ``beta`` it names); if it is damaged the
        previous commit, which is kept until the next one is committed, is used
        instead, with a warning that names the damage.  With ``repair`` (the
        locked trainer) the damaged manifest is set aside as
        ``manifest.damaged-<time>.json`` so that the next commit keeps the intact one.

        Raises
        ------
        CheckpointError
            When no intact checkpoint remains; the message names every damage found.
        StorageError
            When a file is there but cannot be read (no permission, EIO, a directory in
            its place; on an object store, a store that fails): not damage, so no
            fallback and nothing set aside.
        """
        damage = []
        for name in (MANIFEST, PREVIOUS):
            if not (self.path / name).exists():
                continue
            try:
                manifest = self.load_manifest(name)
                W = self.load_W(manifest)
                self.load_W_sets(manifest)  # (checked here: damage falls back like W's)
                if verify is not None:
                    verify(manifest)
            except CheckpointError as exc:
                damage.append((name, str(exc)))
                continue
            if damage:
                warnings.warn(f"{self.path}: the latest checkpoint is damaged ({damage[0][1]}); "
                              f"resuming from the one before it (step {manifest['step']}, epoch "
                              f"{manifest['cursor']['epoch']})", CheckpointFallbackWarning, stacklevel=2)
                if repair and self.locked:
                    self._set_aside_damaged()
            if manifest.get("version", 1) < 2:
                logger.warning("%s: checkpoint format version 1 carries no checksums for W and the manifest; "
                               "it resumes, and the next commit writes version %d", self.path, VERSION)
            self._latest = manifest
            self._W_names = weight_files(manifest)
            if not damage and (self.path / PREVIOUS).exists():
                try:
                    self._previous = self.load_manifest(PREVIOUS)
                    self._W_names += weight_files(self._previous)
                except CheckpointError:
                    self._previous = None
            if repair and self.locked:
                # What a killed run (even one killed in its final clean-up) or the damaged
                # commit left is deleted now, before this run writes anything (on an object
                # store: before it creates the same keys, create-only).
                kept = [manifest] + ([self._previous] if self._previous is not None else [])
                self.collect_garbage(kept)
                self._scanned = True
            return manifest, W
        if not damage:
            raise CheckpointError(f"{self.path}: no checkpoint here (missing {MANIFEST})")
        raise CheckpointError(f"{self.path}: no intact checkpoint left: "
                              + "; ".join(msg for _, msg in damage)
                              + "; train again with a new --checkpoint-dir")

    def _set_aside_damaged(self) -> None:
        """Keep the damaged latest manifest as ``manifest.damaged-<time>.json`` and make
        the previous one the latest (on disk by renames; remote by copies, the new
        latest written last: killed in between, the next load falls back again)."""
        damaged = f"manifest.damaged-{int(time.time())}.json"
        if not self.remote:
            os.replace(self.path / MANIFEST, self.path / damaged)
            os.replace(self.path / PREVIOUS, self.path / MANIFEST)
            fsync_path(self.path)
            return
        try:
            self.location.child(damaged).write_bytes(self._read(MANIFEST))
        except FileNotFoundError:
            pass
        previous = self._read(PREVIOUS)
        self.location.child(MANIFEST).write_bytes(previous)
        self._latest_bytes = previous

    @property
    def previous_versions(self) -> dict[int, int] | None:
        """The ``beta`` versions of the kept previous commit (after :meth:`load`), or None."""
        if self._previous is None:
            return None
        return {int(s): int(v) for s, v in self._previous["beta"]["versions"].items()}

    # -- writing ---------------------------------------------------------------
    def commit(self, step: int, W: np.ndarray, state: dict[str, Any], betas: "DiskBetas", *,
               wait: bool = False, W_sets: np.ndarray | None = None) -> None:
        """Make ``(W, betas' current versions, state)`` the checkpoint, atomically.

        The arrays and state are captured now; the commit itself (waiting for
        ``beta`` writes, fsyncs, the manifest) runs on a background thread while
        training goes on, one commit at a time.  A commit that fails raises from
        the next :meth:`commit` or :meth:`wait`; until a commit completes, the
        previous one is the checkpoint.

        Parameters
        ----------
        step : int
            Commit counter (names the weights file).
        W : ndarray
            Host weights (copied).
        state : dict
            JSON-serializable fields of the manifest (copied).
        betas : DiskBetas
        wait : bool, default=False
            For a run's last commit: return only when it is durable. It then
            also deletes everything the manifest does not name, so no ``beta``
            may be put while it runs.
        W_sets : ndarray, optional
            A shrinking run's commit mid-epoch or after an epoch without objectives:
            the weights whose objective pass chose the sets in force (copied; written
            beside ``W``).
        """
        self.wait()
        plan, W, state, W_sets = protocol.capture(betas, W, state, W_sets)
        if self._committer is None:
            from concurrent.futures import ThreadPoolExecutor

            self._committer = ThreadPoolExecutor(1, thread_name_prefix="streamwww-commit")
        self._inflight = self._committer.submit(self._commit, step, W, state, betas, plan, wait, W_sets)
        if wait:
            self.wait()

    def wait(self) -> None:
        """Wait for the commit in progress (re-raising its failure)."""
        fut, self._inflight = self._inflight, None
        if fut is not None:
            fut.result()

    def _commit(self, step: int, W: np.ndarray, state: dict[str, Any], betas: "DiskBetas",
                plan: "BetaCommit", final: bool, W_sets: np.ndarray | None = None) -> None:
        self.doing = ""
        try:
            self._write_commit(step, W, state, betas, plan, final, W_sets)
        except Exception as exc:  # a full disk, a lost mount, a store out of reach: the previous commit stands
            if not (isinstance(exc, OSError) or (self.remote and is_storage_failure(exc))):
                raise
            if not self.remote:
                for tmp in self.path.glob("*.tmp"):  # (its own: never a user's)
                    if _TMP_NAME.match(tmp.name):
                        tmp.unlink(missing_ok=True)
            stands = ("no checkpoint was committed yet: nothing to resume" if self._latest is None else
                      f"the previous checkpoint (step {self._latest['step']}, epoch "
                      f"{self._latest['cursor']['epoch']}) stands")
            doing = f", {self.doing}" if self.doing else ""
            reason = getattr(exc, "strerror", None) or (str(exc).splitlines() or [type(exc).__name__])[0]
            raise CheckpointError(f"{self.path}: cannot write checkpoint step {step}{doing} "
                                  f"({reason}); {stands}") from None

    def _write_commit(self, step: int, W: np.ndarray, state: dict[str, Any], betas: "DiskBetas",
                      plan: "BetaCommit", final: bool, W_sets: np.ndarray | None = None) -> None:
        t0 = time.perf_counter()
        protocol.complete(self, step, W, state, betas, plan, final, W_sets)
        logger.debug("checkpoint step %d committed in %.3fs", step, time.perf_counter() - t0)

    def write_manifest(self, step: int, W: np.ndarray, state: dict[str, Any], beta: dict[str, Any],
                       W_sets: np.ndarray | None, rotate: bool) -> dict[str, Any]:
        """Steps 3 and 4 of a commit (:mod:`streamwww.state.commit`): the weights, then the
        manifest naming them, ``beta``'s entry and ``state``; the latest one becomes the
        previous where ``rotate`` (the commit has new ``beta``). Returns the manifest."""
        wname = f"W-{step:06d}.npy"
        manifest = {"format": FORMAT, "version": VERSION, "step": int(step), "W": wname,
                    "W_shape": list(W.shape), "W_blake2b": array_digest(W),
                    "beta": beta, "created": time.time(), **state}
        arrays = {wname: W}
        if W_sets is not None:  # (a key only where there is one: older readers' manifests stay as they were)
            sname = f"Wsets-{step:06d}.npy"
            manifest["W_sets"] = {"file": sname, "blake2b": array_digest(W_sets)}
            arrays[sname] = W_sets
        manifest["checksum"] = manifest_checksum(manifest)
        if self.remote:
            self._write_remote(arrays, manifest, rotate)
        else:
            self._write_local(arrays, manifest, rotate)
        self._latest = manifest
        return manifest

    def drop_superseded(self, manifest: dict[str, Any], betas: "DiskBetas", plan: "BetaCommit",
                        final: bool) -> None:
        """Step 5 of a commit: delete what neither ``manifest`` (just committed) nor the
        previous one names."""
        self.doing = "deleting superseded objects"
        previous = self._previous
        # What the new manifest superseded is known exactly: no directory scan per
        # commit (a scan is O(shards)). One scan per process clears what a
        # killed run left behind; while training goes on it spares beta versions
        # newer than the manifest's (they may be this run's writes in flight).
        kept = [m for m in (manifest, previous) if m is not None]
        if final or not self._scanned:
            self.collect_garbage(kept, keep_newer=not final)
            self._scanned = True
        else:
            named = {n for m in kept for n in weight_files(m)}
            self._remove_files([old for old in self._W_names if old not in named])
            betas.drop_superseded(plan)
        self._W_names = [n for m in kept for n in weight_files(m)]

    def _write_remote(self, arrays: dict[str, np.ndarray], manifest: dict[str, Any], rotate: bool) -> None:
        """Object store: the weights under their new keys (create-only), the lock checked, the
        latest manifest's bytes copied to ``manifest.prev.json``, the new manifest last."""
        blobs = {}
        for name, W in arrays.items():
            buf = io.BytesIO()
            np.save(buf, W, allow_pickle=False)
            blobs[self.location.child(name)] = buf.getvalue()
        self.doing = f"writing {', '.join(arrays)}"
        write_once(blobs)
        data = json.dumps(manifest, indent=1, sort_keys=True).encode()
        if self._object_lock is not None:
            self.doing = "renewing LOCK"
            self._object_lock.check()
            if self._object_lock.lost:
                raise CheckpointError(f"{self.path}: this trainer lost the checkpoint's lock "
                                      f"({self._object_lock.lost}); step {manifest['step']} was not committed")
        # Killed between the two PUTs, both manifests name the latest commit: it stays
        # the checkpoint (this one was not committed), with no older fallback.
        if rotate and self._latest is not None and self._latest_bytes is not None:
            self.doing = f"writing {PREVIOUS}"
            self.location.child(PREVIOUS).write_bytes(self._latest_bytes)
            self._previous = self._latest
        self.doing = f"writing {MANIFEST}"
        self.location.child(MANIFEST).write_bytes(data)
        self._latest_bytes = data

    def _write_local(self, arrays: dict[str, np.ndarray], manifest: dict[str, Any], rotate: bool) -> None:
        """Local disk: the weights and the manifest each written to a temporary name, fsynced
        and renamed, the old manifest moved to ``manifest.prev.json`` in between."""
        for wname, W in arrays.items():
            tmp = self.path / (wname + ".tmp")
            with open(tmp, "wb") as f:
                np.save(f, W, allow_pickle=False)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path / wname)
        mtmp = self.path / (MANIFEST + ".tmp")
        with open(mtmp, "w") as f:
            json.dump(manifest, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        # The latest commit becomes the previous one (kept, with everything it names,
        # until this one is superseded); killed between the renames, the previous
        # one is the checkpoint, which is right: this one was not committed yet.
        # A commit with no new beta (a run's final commit, which only records the
        # statuses) replaces the latest in place: the fallback stays a different state.
        if rotate and self._latest is not None and (self.path / MANIFEST).exists():
            os.replace(self.path / MANIFEST, self.path / PREVIOUS)
            self._previous = self._latest
        os.replace(mtmp, self.path / MANIFEST)
        fsync_path(self.path)

    def _remove_files(self, names: list[str]) -> None:
        """Delete files of the directory (one batch of deletes on an object store)."""
        if self.remote:
            self.location.remove_many([self.location.child(n) for n in names])
            return
        for name in names:
            (self.path / name).unlink(missing_ok=True)

    def collect_garbage(self, manifests: list[dict[str, Any]], keep_newer: bool = False) -> None:
        """Delete weights and beta versions no manifest of ``manifests`` (the latest first)
        names (with ``keep_newer``, only beta versions older than the latest's).

        On an object store the listing may lag (objects just written may be missing
        from it): what it misses is collected by a later scan, and nothing is read
        by listing."""
        if self.remote:
            self._collect_remote(manifests, keep_newer)
            return
        weights = {n for m in manifests for n in weight_files(m)}
        for p in self.path.iterdir():
            if (_W_NAME.match(p.name) and p.name not in weights) or _TMP_NAME.match(p.name):
                p.unlink(missing_ok=True)
        bdir = self.path / "beta.zarr"
        if bdir.exists():
            for name in _unnamed_versions([p.name for p in bdir.iterdir()], manifests, keep_newer):
                shutil.rmtree(bdir / name, ignore_errors=True)

    def _collect_remote(self, manifests: list[dict[str, Any]], keep_newer: bool) -> None:
        weights = {n for m in manifests for n in weight_files(m)}
        self._remove_files([n for n in self.location.listdir() if _W_NAME.match(n) and n not in weights])
        bdir = self.location.child("beta.zarr")
        bdir.remove_many([bdir.child(name) for name in _unnamed_versions(bdir.listdir(), manifests, keep_newer)],
                         recursive=True)


def _unnamed_versions(names, manifests: list[dict[str, Any]], keep_newer: bool) -> list[str]:
    """The beta versions among the entry ``names`` of ``beta.zarr`` that no manifest of
    ``manifests`` (the latest first) names; with ``keep_newer``, only those older than the
    latest's version of their shard.  Other names are never listed."""
    named = [{int(s): int(v) for s, v in m["beta"]["versions"].items()} for m in manifests]
    drop = []
    for name in names:
        parsed = parse_beta_name(name)
        if parsed is None:
            continue
        s, v = parsed
        newest = named[0].get(s, 0) if named else 0
        if all(v != n.get(s, 0) for n in named) and not (keep_newer and v > newest):
            drop.append(name)
    return drop


def check_compatible(path, manifest: dict[str, Any], config: dict[str, Any], fingerprint,
                     omitted: dict[str, Any] | None = None) -> None:
    """Refuse to continue a checkpoint with other settings (``max_iter`` may change) or other
    data.  ``omitted``: the value of each setting a config may leave out (either side)."""
    saved = manifest["config"]
    omitted = omitted or {}
    diffs = [f"{k}: checkpoint has {saved.get(k, omitted.get(k))!r}, now {config.get(k, omitted.get(k))!r}"
             for k in dict.fromkeys([*config, *saved])
             if k != "max_iter" and saved.get(k, omitted.get(k)) != config.get(k, omitted.get(k))]
    if diffs:
        raise CheckpointError(f"{path}: the checkpoint was made with other settings ("
                              + "; ".join(diffs) + "); use a new checkpoint directory or the same settings")
    if manifest["data"].get("fingerprint") != fingerprint:
        raise CheckpointError(f"{path}: the checkpoint belongs to other data (fingerprint "
                              f"{manifest['data'].get('fingerprint')!r}, now {fingerprint!r}); "
                              f"the data store changed since the checkpoint was written")
