"""Crash-safe, versioned checkpoints: ``W``, per-shard ``beta``, cursor, history, config.

Layout of a checkpoint directory::

    LOCK                    held (flock) by the one trainer using the directory
    manifest.json           the commit record, replaced atomically; written last
    W-000012.npy            weights of step 12, float64 (n_models, D, k)
    beta.zarr/s000003-v000007   Zarr v3 array: shard 3's beta, version 7, (n_models, rows, k-1)

A shard's ``beta`` is never overwritten: each pass writes a new version, and
the manifest names the version of every shard that belongs with the ``W`` it
names.  A commit captures ``W``, the versions and the state, then, on a
background thread while training goes on, (1) waits for pending ``beta`` writes
and fsyncs them, (2) writes and fsyncs ``W``, (3) writes ``manifest.json.tmp``,
fsyncs it, renames it over ``manifest.json`` and fsyncs the directory, then (4)
deletes files no manifest names.  A process killed at any instant therefore
leaves the previous manifest and everything it names intact; stray files from
the killed step are ignored and collected by the next commit.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from streamwww._fsutil import fsync_path, fsync_tree, try_lock, unlock
from streamwww.errors import CheckpointError

logger = logging.getLogger(__name__)

__all__ = ["CheckpointDir", "DiskBetas", "FORMAT", "VERSION"]

FORMAT = "streamwww-checkpoint"
VERSION = 1
_MANIFEST = "manifest.json"
_BETA_NAME = re.compile(r"^s(\d{6})-v(\d{6})$")
_W_NAME = re.compile(r"^W-(\d{6})\.npy$")


class CheckpointDir:
    """A checkpoint directory: lock, commit and load.

    Parameters
    ----------
    path : str or Path
        Directory (created if missing).
    lock : bool, default=True
        Take the exclusive lock; a second trainer on the same directory gets a
        :class:`~streamwww.errors.CheckpointError`.
    """

    def __init__(self, path, lock: bool = True):
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self._lock_fd = None
        self._scanned = False  # garbage not yet collected by a full scan in this process
        self._last_W: str | None = None
        self._committer = None  # one background thread, created by the first commit
        self._inflight = None  # the commit in progress (a concurrent.futures.Future)
        if lock:
            fd = try_lock(self.path / "LOCK")
            if fd is None:
                raise CheckpointError(f"{self.path}: another trainer holds this checkpoint directory "
                                      f"(LOCK is taken); stop it or use another --checkpoint-dir")
            self._lock_fd = fd

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

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- reading ---------------------------------------------------------------
    def has_checkpoint(self) -> bool:
        return (self.path / _MANIFEST).exists()

    def load_manifest(self) -> dict[str, Any]:
        """The committed manifest, validated; raises CheckpointError when unusable."""
        mpath = self.path / _MANIFEST
        try:
            manifest = json.loads(mpath.read_text())
        except FileNotFoundError:
            raise CheckpointError(f"{self.path}: no checkpoint here (missing {_MANIFEST})") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise CheckpointError(f"{mpath}: corrupt manifest ({exc})") from None
        if manifest.get("format") != FORMAT:
            raise CheckpointError(f"{mpath}: not a streamwww checkpoint")
        if manifest.get("version") != VERSION:
            raise CheckpointError(f"{mpath}: checkpoint format version {manifest.get('version')} "
                                  f"is not supported (this streamwww reads version {VERSION})")
        return manifest

    def load_W(self, manifest: dict[str, Any]) -> np.ndarray:
        path = self.path / manifest["W"]
        try:
            W = np.load(path, allow_pickle=False)
        except FileNotFoundError:
            raise CheckpointError(f"{path}: missing weights named by {_MANIFEST}") from None
        except ValueError as exc:
            raise CheckpointError(f"{path}: corrupt weights ({exc})") from None
        if list(W.shape) != manifest["W_shape"] or W.dtype != np.float64:
            raise CheckpointError(f"{path}: weights of shape {W.shape}/{W.dtype}, expected "
                                  f"{tuple(manifest['W_shape'])}/float64")
        if manifest.get("W_sum") is not None and float(W.sum()) != manifest["W_sum"]:
            raise CheckpointError(f"{path}: weights do not match the checksum in {_MANIFEST}")
        return W

    # -- writing ---------------------------------------------------------------
    def commit(self, step: int, W: np.ndarray, state: dict[str, Any], betas: "DiskBetas", *,
               wait: bool = False) -> None:
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
        """
        self.wait()
        plan = betas.begin_commit()
        W = np.array(W, dtype=np.float64, order="C", copy=True)
        state = json.loads(json.dumps(state))  # a deep copy of what the caller goes on mutating
        if self._committer is None:
            from concurrent.futures import ThreadPoolExecutor

            self._committer = ThreadPoolExecutor(1, thread_name_prefix="streamwww-commit")
        self._inflight = self._committer.submit(self._commit, step, W, state, betas, plan, wait)
        if wait:
            self.wait()

    def wait(self) -> None:
        """Wait for the commit in progress (re-raising its failure)."""
        fut, self._inflight = self._inflight, None
        if fut is not None:
            fut.result()

    def _commit(self, step: int, W: np.ndarray, state: dict[str, Any], betas: "DiskBetas",
                plan: "BetaCommit", final: bool) -> None:
        t0 = time.perf_counter()
        beta = betas.end_commit(plan)
        wname = f"W-{step:06d}.npy"
        wpath = self.path / wname
        tmp = self.path / (wname + ".tmp")
        with open(tmp, "wb") as f:
            np.save(f, W, allow_pickle=False)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, wpath)
        manifest = {"format": FORMAT, "version": VERSION, "step": int(step), "W": wname,
                    "W_shape": list(W.shape), "W_sum": float(W.sum()),
                    "beta": beta, "created": time.time(), **state}
        mtmp = self.path / (_MANIFEST + ".tmp")
        with open(mtmp, "w") as f:
            json.dump(manifest, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(mtmp, self.path / _MANIFEST)
        fsync_path(self.path)
        # What the new manifest superseded is known exactly: no directory scan per
        # commit (that was O(shards) per commit). One scan per process clears what a
        # killed run left behind; while training goes on it spares beta versions
        # newer than the manifest's (they may be this run's writes in flight).
        if final or not self._scanned:
            self.collect_garbage(manifest, keep_newer=not final)
            self._scanned = True
        else:
            if self._last_W is not None and self._last_W != wname:
                (self.path / self._last_W).unlink(missing_ok=True)
            betas.drop_superseded(plan)
        betas.mark_committed(plan)
        self._last_W = wname
        logger.debug("checkpoint step %d committed in %.3fs", step, time.perf_counter() - t0)

    def collect_garbage(self, manifest: dict[str, Any], keep_newer: bool = False) -> None:
        """Delete weights and beta versions the manifest does not name (with ``keep_newer``,
        only beta versions older than the manifest's)."""
        for p in self.path.iterdir():
            if (_W_NAME.match(p.name) and p.name != manifest["W"]) or p.name.endswith(".tmp"):
                p.unlink(missing_ok=True)
        bdir = self.path / "beta.zarr"
        if bdir.exists():
            named = {int(s): int(v) for s, v in manifest["beta"]["versions"].items()}
            for p in bdir.iterdir():
                m = _BETA_NAME.match(p.name)
                if m is None:
                    continue
                s, v = int(m.group(1)), int(m.group(2))
                if v != named.get(s, 0) and not (keep_newer and v > named.get(s, 0)):
                    shutil.rmtree(p, ignore_errors=True)


class DiskBetas:
    """Per-shard dual variables in Zarr v3 arrays under ``<checkpoint>/beta.zarr``.

    Version 0 of every shard is implicit (all zeros).  ``put`` writes a new
    version, in the background when an executor (:class:`streamwww.feed.DaskExecutor`) is given.
    """

    def __init__(self, root, n_models: int, shard_rows, n_classes: int, executor=None,
                 versions: dict[int, int] | None = None, sums=None, max_pending: int = 2,
                 keep_superseded: bool = True, durable: bool = False):
        import zarr

        self.root = Path(root) / "beta.zarr"
        self.root.mkdir(parents=True, exist_ok=True)
        if not (self.root / "zarr.json").exists():
            zarr.open_group(str(self.root), mode="w", zarr_format=3)
        self.n_models = int(n_models)
        self.shard_rows = [int(r) for r in shard_rows]
        self.m = int(n_classes) - 1
        self.executor = executor
        self.versions = {s: 0 for s in range(len(self.shard_rows))}
        if versions:
            self.versions.update({int(s): int(v) for s, v in versions.items()})
        # sum(beta) per model: of the versions made durable so far (the manifest's), and
        # of versions written since, by shard and version (two writes of one shard may
        # finish out of order on several loader threads)
        self._durable_sums = (np.zeros((len(self.shard_rows), self.n_models)) if sums is None
                              else np.asarray(sums, dtype=np.float64).reshape(len(self.shard_rows), self.n_models))
        self._version_sums: dict[int, dict[int, np.ndarray]] = {s: {} for s in range(len(self.shard_rows))}
        self._committed = dict(self.versions)
        self._pending: dict[int, list[Any]] = {}  # shard -> its writes in flight, oldest first
        self._outbox: dict[tuple[int, int], np.ndarray] = {}  # versions being written
        self._lock = threading.Lock()
        self._dirty: set[tuple[int, int]] = set()
        self.max_pending = max(1, int(max_pending))
        # A checkpoint needs the committed versions until the next commit; without
        # one, a version is dropped as soon as its successor is written.
        self.keep_superseded = bool(keep_superseded)
        self._writing: set[tuple[int, int]] = set()  # (shard, version) being written
        self._newest_written: dict[int, int] = {}  # shard -> newest version on disk
        # Checkpointed runs fsync each version right after its background write, on
        # a thread of its own (fsync waits on the disk, not the CPU, and must not
        # hold up the loader's queue), so that a commit finds them durable.
        self._syncer = None
        if durable and executor is not None:
            from concurrent.futures import ThreadPoolExecutor

            self._syncer = ThreadPoolExecutor(1, thread_name_prefix="streamwww-fsync")
        self._syncs: dict[tuple[int, int], Any] = {}

    def _name(self, s: int, v: int) -> str:
        return f"s{s:06d}-v{v:06d}"

    def read(self, s: int, v: int, out: np.ndarray | None = None) -> np.ndarray:
        """Version ``v`` of shard ``s``'s ``beta`` (version 0: zeros), into ``out`` if given
        (a float64 view of shape ``(n_models, rows, k-1)``, e.g. a slice of a group's beta)."""
        shape = (self.n_models, self.shard_rows[s], self.m)
        if out is None:
            out = np.empty(shape, dtype=np.float64)
        if out.shape != shape or out.dtype != np.float64:
            raise ValueError(f"beta buffer of shape {out.shape}/{out.dtype}; expected {shape}/float64")
        if v == 0:
            out[...] = 0.0
            return out
        with self._lock:
            # A version still waiting for (or in) its background write is read from
            # memory: no wait for the write, no disk read. A version not in the
            # outbox has been written completely (the entry leaves after the write).
            pending = self._outbox.get((s, v))
            if pending is not None:
                out[...] = pending
                return out
        import zarr

        from streamwww.io._chunks import read_into

        path = self.root / self._name(s, v)
        try:
            arr = zarr.open_array(str(path), mode="r")
        except Exception as exc:  # zarr raises several types for missing/corrupt arrays
            raise CheckpointError(f"{path}: cannot read beta of shard {s} version {v} "
                                  f"({type(exc).__name__}: {exc})") from None
        if arr.shape != shape or arr.dtype != np.float64:
            raise CheckpointError(f"{path}: beta of shape {arr.shape}/{arr.dtype}, expected {shape}/float64")
        try:
            read_into(arr, path, out)
        except Exception as exc:
            raise CheckpointError(f"{path}: cannot read beta of shard {s} version {v} "
                                  f"({type(exc).__name__}: {exc})") from None
        return out

    def read_group(self, shards, versions) -> np.ndarray:
        """The ``beta`` of several shards (given versions), rows stacked in order, read
        straight into one array."""
        rows = [self.shard_rows[s] for s in shards]
        beta = np.empty((self.n_models, sum(rows), self.m), dtype=np.float64)
        r0 = 0
        for s, v, r in zip(shards, versions, rows):
            self.read(s, v, out=beta[:, r0:r0 + r])
            r0 += r
        return beta

    def _write(self, s: int, v: int, beta: np.ndarray) -> None:
        import zarr

        path = self.root / self._name(s, v)
        if not self.keep_superseded:
            with self._lock:
                self._writing.add((s, v))
        if path.exists():  # left by a killed run; never part of a committed step
            shutil.rmtree(path)
        rows_per_chunk = max(1, (64 << 20) // max(1, 8 * self.n_models * max(self.m, 1)))
        # Uncompressed: beta is rewritten every epoch, and zstd cost 3x the write
        # time and 4x the read time of raw chunks (25k x 19 float64: 27 vs 8 ms,
        # 12 vs 3 ms), which the prefetch thread could not hide.
        arr = zarr.create_array(store=str(path), shape=beta.shape, dtype="float64",
                                chunks=(self.n_models, min(beta.shape[1], rows_per_chunk) or 1, self.m),
                                zarr_format=3, overwrite=True, compressors=None,
                                # write_empty_chunks: skip Zarr's chunk == fill-value scan, a
                                # full extra pass over beta on Zarr's one I/O thread
                                config={"write_empty_chunks": True})
        arr[...] = beta
        if self._syncer is not None:
            with self._lock:
                self._syncs[(s, v)] = self._syncer.submit(fsync_tree, path)
        if not self.keep_superseded:
            # No reader needs a version once a newer one is on disk: the next read of
            # shard s is submitted after this write and reads the newest version. On
            # several loader threads v - 1 may still be being written: the later of
            # the two writes to finish deletes the older version.
            with self._lock:
                self._writing.discard((s, v))
                newest = self._newest_written.get(s, 0)
                self._newest_written[s] = max(newest, v)
                drop = v if newest > v else v - 1 if (s, v - 1) not in self._writing else 0
            if drop > 0:
                shutil.rmtree(self.root / self._name(s, drop), ignore_errors=True)

    def get(self, s: int) -> np.ndarray:
        """The current ``beta`` of shard ``s``."""
        return self.read(s, self.versions[s])

    def version(self, s: int) -> int:
        """The current version of shard ``s``: what a prefetch submitted now must read."""
        return self.versions[s]

    def put(self, s: int, beta: np.ndarray) -> None:
        """Store a new version of shard ``s``'s ``beta`` (in the background with a client)."""
        self.put_group([(s, beta)])

    def put_group(self, items) -> None:
        """Store new versions of several shards' ``beta``: ``items`` of ``(shard, beta)``,
        written by one background task (one scheduler round trip per group)."""
        keys = []
        for s, beta in items:
            v = self.versions[s] + 1
            self.versions[s] = v
            self._dirty.add((s, v))
            keys.append((s, v))
        if self.executor is None:
            for (s, v), (_, beta) in zip(keys, items):
                self._store(s, v, beta)
            return
        # Bound the memory held by earlier writes still in flight (max_pending shards,
        # or one group if larger), and forget finished writes at once: a live future
        # keeps its task alive.
        self._reap()
        while sum(map(len, self._pending.values())) >= max(self.max_pending, len(keys)):
            self._settle([next(iter(self._pending))])
            self._reap()
        # beta travels through an outbox, not as a task argument: distributed keeps
        # recent task events (with their arguments) in a log, which held every
        # beta array of a run in memory (7.6 MB per shard, measured). Readers
        # of (s, v) take it from the outbox until its write is complete.
        with self._lock:
            for key, (_, beta) in zip(keys, items):
                self._outbox[key] = beta
        fut = self.executor.submit(self, "_write_queued", tuple(keys))
        for s, _ in keys:
            self._pending.setdefault(s, []).append(fut)

    def _store(self, s: int, v: int, beta: np.ndarray) -> None:
        """Write version ``v`` of shard ``s`` and record its sum (on the loader when queued)."""
        total = beta.sum(axis=(1, 2))
        with self._lock:
            sums = self._version_sums[s]
            sums[v] = total
            if not self.keep_superseded:  # no commit will ask for older versions' sums
                for old in [u for u in sums if u < v]:
                    del sums[old]
        self._write(s, v, beta)

    def _write_queued(self, keys) -> None:
        for s, v in keys:
            try:
                self._store(s, v, self._outbox[(s, v)])
            finally:
                with self._lock:
                    del self._outbox[(s, v)]

    def _settle(self, shards) -> None:
        """Wait for the pending writes of ``shards`` and forget them (re-raising a failure)."""
        for s in shards:
            _wait(self._pending.pop(s, ()))

    def _reap(self) -> None:
        """Forget finished writes (re-raising a failed one)."""
        self._settle([s for s, futs in self._pending.items() if all(f.done() for f in futs)])

    def sums(self, s: int, models: np.ndarray) -> np.ndarray:
        """``sum(beta)`` of shard ``s``'s current version for each listed model."""
        self._settle([s])  # the background write computes the sum
        with self._lock:
            got = self._version_sums[s].get(self.versions[s])
            return (got if got is not None else self._durable_sums[s])[models]

    def begin_commit(self) -> "BetaCommit":
        """What a commit of the current versions needs (on the thread that puts).

        The returned plan names every shard's current version and the writes to
        wait for; :meth:`end_commit` completes it, on any thread, while new
        versions are put.
        """
        keys = sorted(self._dirty)
        self._dirty = set()
        shards = {s for s, _ in keys}
        futures = list({id(f): f for s in shards for f in self._pending.get(s, ())}.values())
        return BetaCommit(dict(self.versions), keys, futures)

    def end_commit(self, plan: "BetaCommit") -> dict[str, Any]:
        """Wait for the writes of ``plan``, fsync the versions it names; return the manifest's
        ``beta`` entry (versions and sums)."""
        _wait(plan.futures)
        with self._lock:
            syncs = {key: self._syncs.pop(key) for key in plan.keys if key in self._syncs}
        for s, v in plan.keys:
            synced = syncs.get((s, v))
            if plan.versions[s] == v:  # superseded versions are never committed
                if synced is not None:
                    synced.result()  # fsynced in the background (re-raises its error)
                else:
                    fsync_tree(self.root / self._name(s, v))
            elif synced is not None:  # not committed: let it finish before anything deletes it
                synced.exception()
        fsync_path(self.root)
        with self._lock:
            for s in {s for s, _ in plan.keys}:
                sums, v = self._version_sums[s], plan.versions[s]
                self._durable_sums[s] = sums[v]
                for old in [u for u in sums if u <= v]:
                    del sums[old]
            durable = self._durable_sums.tolist()
        return {"versions": {str(s): int(v) for s, v in plan.versions.items()}, "sums": durable}

    def flush(self) -> set[int]:
        """Wait for every pending write, fsync the written versions; return the shards written."""
        plan = self.begin_commit()
        self._settle(list(self._pending))
        self.end_commit(plan)
        return {s for s, _ in plan.keys}

    def close(self) -> None:
        """Stop the background fsync thread (after :meth:`flush`, or when abandoning the run)."""
        if self._syncer is not None:
            self._syncer.shutdown(wait=True)
            self._syncer = None

    def drop_superseded(self, plan: "BetaCommit") -> None:
        """Delete the versions that ``plan``'s (now committed) versions superseded."""
        for s in {s for s, _ in plan.keys}:
            for v in range(max(1, self._committed[s]), plan.versions[s]):
                shutil.rmtree(self.root / self._name(s, v), ignore_errors=True)

    def mark_committed(self, plan: "BetaCommit") -> None:
        """``plan``'s versions are now the committed ones."""
        self._committed = dict(plan.versions)


def _wait(futures) -> None:
    """Wait for background writes, re-raising a failure. ``result()`` costs a scheduler
    round trip: it is called only to wait or to re-raise."""
    for fut in futures:
        if not fut.done() or fut.status != "finished":
            fut.result()


@dataclass(frozen=True)
class BetaCommit:
    """A commit of :class:`DiskBetas` in progress: every shard's version, and the
    versions written since the last commit (``keys``) with their write futures."""

    versions: dict[int, int]
    keys: list[tuple[int, int]]
    futures: list[Any]
