"""Per-shard dual variables ``beta[n_models, rows, k-1]``: in RAM, or versioned on disk.

:class:`InMemoryBetas` keeps them in RAM (in-memory data); :class:`DiskBetas`
owns the current state of versioned ``beta``: which version of each shard is current,
where it lives between commits and which stored versions may go. The versions themselves
(one Zarr v3 array per shard and version under ``<root>/beta.zarr``, locally or on an
object store) are stored by :class:`~streamwww.state.versions.BetaVersions`, written in
the background, so that a checkpoint (:mod:`streamwww.state.checkpoint`) can name a
consistent set of versions while training goes on. Between commits the current versions
stay in RAM when they fit the memory budget, else in a scratch file
(:mod:`streamwww.state.scratch`), and only commits write versions; without room for that
file a version is written every epoch.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
from typing import Any

import numpy as np

from streamwww import _buffers as buffers
from streamwww.errors import CheckpointError
from streamwww.storage.fsutil import fsync_path, fsync_tree
from streamwww.state.commit import BetaCommit
from streamwww.state.versions import BetaVersions

__all__ = ["InMemoryBetas", "DiskBetas", "beta_nbytes", "stack_rows", "split_rows"]


logger = logging.getLogger(__name__)


# Spares (DiskBetas) only where the file system has this many times one version of every
# shard free: they cost up to one version of every shard, never a full disk.
SPARE_ROOM = 4
# A beta scratch file only where the file system has this many times its size free.
SCRATCH_ROOM = 2


def _free_bytes(path) -> int:
    """Free bytes of the file system of ``path`` (0 when it cannot be asked)."""
    try:
        return int(shutil.disk_usage(path).free)
    except OSError:
        return 0


def beta_nbytes(n_models: int, n_rows: int, n_classes: int) -> int:
    """Bytes of one version of every shard's ``beta`` (float64, ``n_models x n_rows x (k-1)``)."""
    return 8 * int(n_models) * int(n_rows) * max(1, int(n_classes) - 1)



def stack_rows(arrays) -> np.ndarray:
    """Per-shard ``beta[n_models, rows, k-1]`` arrays as one, rows in order (no copy for one)."""
    return arrays[0] if len(arrays) == 1 else np.concatenate(arrays, axis=1)


def split_rows(beta: np.ndarray, rows) -> list[np.ndarray]:
    """Inverse of :func:`stack_rows`: views of ``beta`` with ``rows[j]`` rows each."""
    if len(rows) == 1:
        return [beta]
    return np.split(beta, np.cumsum(rows)[:-1], axis=1)


class InMemoryBetas:
    """Dual variables ``beta[n_models, n_rows_s, k-1]`` per shard, kept in RAM."""

    def __init__(self, n_models: int, shard_rows, n_classes: int, initial=None):
        self._arrays = [np.zeros((n_models, int(n), n_classes - 1), dtype=np.float64) for n in shard_rows]
        for a, b in zip(self._arrays, initial or ()):  # a warm start's beta, per shard
            a[...] = b

    def get(self, i: int) -> np.ndarray:
        return self._arrays[i]

    def put(self, i: int, beta: np.ndarray) -> None:
        self._arrays[i] = beta

    def put_group(self, items) -> None:
        """``put`` each ``(shard, beta)`` of ``items``."""
        for i, beta in items:
            self.put(i, beta)

    def sums(self, i: int, models: np.ndarray) -> np.ndarray:
        """``sum(beta)`` of shard ``i`` for each listed model."""
        return self._arrays[i].sum(axis=(1, 2))[models]  # no copy of beta

    resident = True

    def hold(self) -> None:
        """Keep a copy of every shard's ``beta``: :meth:`rewind` returns to it (the start of an
        epoch whose predecessor's certificate is still to come; the passes train in place)."""
        self._held = None  # (the copy before goes back to the pool first: this one reuses its pages)
        self._held = [_pooled_copy(a) for a in self._arrays]

    def rewind(self) -> None:
        """Make the held copies the current ``beta`` again."""
        self._arrays = self._held
        self._held = [_pooled_copy(a) for a in self._arrays]


def _pooled_copy(a: np.ndarray) -> np.ndarray:
    """A copy of ``a`` in a recycled buffer (every epoch copies every shard's ``beta``)."""
    out = buffers.empty(a.shape, a.dtype)
    np.copyto(out, a)
    return out


class DiskBetas:
    """Per-shard dual variables in Zarr v3 arrays under ``<checkpoint>/beta.zarr``.

    Version 0 of every shard is implicit (all zeros).  ``put`` writes a new
    version, in the background when an executor (:class:`streamwww.stream.feed.LoaderPool`) is given.
    With ``resident=True`` (the run's betas fit its memory budget) the current
    versions stay in RAM and only those a commit names are written, by the
    commit (:meth:`end_commit`): training between commits does no ``beta`` I/O.
    With ``scratch_copies=c`` (they do not fit) they are kept so too, but in a
    :class:`~streamwww.state.scratch.ShardScratch` file of ``c`` slots a shard, beside
    the versions (or in the system's temporary directory for a root on an object
    store); where that file cannot be made (no room for it), versions are written every
    epoch (:attr:`mode` says which).
    ``root`` is a local directory, or a URL or :class:`~streamwww.storage.location.Location`
    on an object store (picklable: cluster tasks get it as it is). The stored versions
    are a :class:`~streamwww.state.versions.BetaVersions`'; this class decides which
    version is current and which stored ones may go, and does ``beta``'s steps of a
    commit (:mod:`streamwww.state.commit`).
    """

    def __init__(self, root, n_models: int, shard_rows, n_classes: int, executor=None,
                 versions: dict[int, int] | None = None, sums=None, max_pending: int = 2,
                 keep_superseded: bool = True, durable: bool = False,
                 previous_versions: dict[int, int] | None = None, resident: bool = False,
                 drop_uncommitted: bool = False, scratch_copies: int = 0):
        self._disk = BetaVersions(root, n_models, shard_rows, int(n_classes) - 1)
        self.remote, self.root = self._disk.remote, self._disk.root
        if self.remote:
            durable = False  # an object store's PUT is durable when it returns
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
        # the versions of the commit before (kept on disk as the checkpoint's fallback)
        self._previous = dict(self._committed)
        if previous_versions:
            self._previous.update({int(s): int(v) for s, v in previous_versions.items()})
        self._pending: dict[int, list[Any]] = {}  # shard -> its writes in flight, oldest first
        self._outbox: dict[tuple[int, int], np.ndarray] = {}  # versions being written
        self._lock = threading.Lock()
        self._dirty: set[tuple[int, int]] = set()
        self.max_pending = max(1, int(max_pending))
        # A checkpoint needs the committed versions until the next commit; without
        # one, a version is dropped as soon as its successor is written. With
        # drop_uncommitted (a checkpointed run of this process, committing at most every
        # checkpoint_interval seconds) so is every version no commit names (the latest,
        # the previous, the one in progress): disk use does not grow between commits.
        self.keep_superseded = bool(keep_superseded)
        self.drop_uncommitted = bool(drop_uncommitted) and self.keep_superseded
        self._pinned: dict[int, int] = {}  # the versions of the commit in progress
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
        # resident: shard -> [version, beta, its per-model sum or None] of the current
        # version (beta: an array, or with a scratch file the index of its slot there),
        # and the version of each shard on disk (a commit writes the others)
        self._scratch = self._open_scratch(int(scratch_copies)) if scratch_copies and not resident else None
        self.resident = bool(resident) or self._scratch is not None
        self._committing: dict[int, int] = {}  # scratch: shard -> the slot a commit in progress writes
        self._ram: dict[int, list] = {}
        self._written = dict(self.versions)
        # hold() and rewind(): the versions of an epoch's start, kept (on disk or in RAM)
        self._held: dict[int, int] = {}
        self._held_ram: dict[int, list] = {}
        self._rewound = False
        # Spares (BetaVersions) only on the instance with the loader, and only with SPARE_ROOM:
        # a spare lives from its version's drop to its shard's next write, so at an epoch's
        # start the spares take as much disk as one version of every shard.
        if executor is not None and not self.remote:
            self._disk.delete_leftover_spares()
            self._disk.reuse = _free_bytes(self.root) >= SPARE_ROOM * beta_nbytes(self.n_models, sum(self.shard_rows),
                                                                                   self.m + 1)

    def _open_scratch(self, copies: int):
        """The scratch file for the current versions, or None (no room: versions every epoch)."""
        from streamwww.state.scratch import ShardScratch

        where = None if self.remote else self.root
        need = copies * beta_nbytes(self.n_models, sum(self.shard_rows), self.m + 1)
        free = _free_bytes(where if where is not None else tempfile.gettempdir())
        # (the file takes its bytes from the disk the versions use: leave them room too)
        if free < SCRATCH_ROOM * need:
            logger.info("beta scratch file (%.1f MiB) not made: %.1f MiB free", need / 2**20, free / 2**20)
            return None
        try:
            return ShardScratch(where, self.shard_rows, self.n_models, self.m, copies)
        except OSError as exc:
            logger.info("beta scratch file (%.1f MiB) not made: %s", need / 2**20, exc)
            return None

    @property
    def mode(self) -> str:
        """Where the current versions live between commits: ``"memory"``, ``"scratch"`` (a
        scratch file) or ``"versions"`` (a version written every epoch)."""
        return "scratch" if self._scratch is not None else "memory" if self.resident else "versions"

    @property
    def in_memory(self) -> bool:
        """Whether the current versions are held in RAM."""
        return self.mode == "memory"

    def _copy_out(self, s: int, held, out: np.ndarray) -> np.ndarray:
        """A version held by :meth:`put_group` (an array, or a scratch slot) into ``out``."""
        if isinstance(held, np.ndarray):
            out[...] = held
            return out
        try:
            return self._scratch.read(s, held, out)
        except OSError as exc:  # (the message names the file's directory, the shard and the slot)
            raise CheckpointError(str(exc)) from None

    def _free_slot(self, s: int) -> int:
        """A scratch slot of shard ``s`` that neither the held version nor a commit in
        progress uses (the current version's may be taken: it is being superseded; its
        copy there is done, :meth:`_put_scratch` waits for it)."""
        held = self._held_ram.get(s)
        busy = {held[1] if held is not None else None, self._committing.get(s)}
        for c in range(self._scratch.copies):
            if c not in busy:
                return c
        raise RuntimeError(f"beta scratch: no free slot for shard {s} ({self._scratch.copies} a shard)")

    def read(self, s: int, v: int, out: np.ndarray | None = None) -> np.ndarray:
        """Version ``v`` of shard ``s``'s ``beta`` (version 0: zeros), into ``out`` if given
        (a float64 view of shape ``(n_models, rows, k-1)``, e.g. a slice of a group's beta)."""
        shape = (self.n_models, self.shard_rows[s], self.m)
        if out is None:
            out = buffers.empty(shape, np.float64)
        if out.shape != shape or out.dtype != np.float64:
            raise ValueError(f"beta buffer of shape {out.shape}/{out.dtype}; expected {shape}/float64")
        if v == 0:
            out[...] = 0.0
            return out
        with self._lock:
            # A version still waiting for (or in) its background write is read from
            # memory: no wait for the write, no disk read. A version not in the
            # outbox has been written completely (the entry leaves after the write).
            ram = self._ram.get(s)
            pending = self._outbox.get((s, v))
            if ram is not None and ram[0] == v and pending is None:
                return self._copy_out(s, ram[1], out)
            if pending is not None:
                out[...] = pending
                return out
        return self._disk.read(s, v, out)

    def read_group(self, shards, versions) -> np.ndarray:
        """The ``beta`` of several shards (given versions), rows stacked in order, read
        straight into one array."""
        rows = [self.shard_rows[s] for s in shards]
        beta = buffers.empty((self.n_models, sum(rows), self.m), np.float64)
        r0 = 0
        for s, v, r in zip(shards, versions, rows):
            self.read(s, v, out=beta[:, r0:r0 + r])
            r0 += r
        return beta

    def _write(self, s: int, v: int, beta: np.ndarray) -> None:
        try:
            self._write_version(s, v, beta)
        except Exception as exc:  # a full disk: one line naming the array, never a half version in use
            error = self._disk.write_failed(s, v, exc)
            if error is None:
                raise
            raise error from None

    def _write_version(self, s: int, v: int, beta: np.ndarray) -> None:
        """Write version ``v`` of shard ``s``, have it fsynced (durable runs), and drop the
        version it superseded where no commit, rewind or reader needs that any more."""
        drops = not self.keep_superseded or self.drop_uncommitted
        if drops:
            with self._lock:
                self._writing.add((s, v))
        path = self._disk.write(s, v, beta)
        if self._syncer is not None:
            with self._lock:
                self._syncs[(s, v)] = self._syncer.submit(fsync_tree, path)
        if drops:
            # No reader needs a version once a newer one is on disk: the next read of
            # shard s is submitted after this write and reads the newest version. On
            # several loader threads v - 1 may still be being written: the later of
            # the two writes to finish deletes the older version. A version that a
            # commit names (or is about to) stays.
            with self._lock:
                self._writing.discard((s, v))
                newest = self._newest_written.get(s, 0)
                self._newest_written[s] = max(newest, v)
                drop = v if newest > v else v - 1 if (s, v - 1) not in self._writing else 0
                if drop in self._protected(s):
                    drop = 0
            if drop > 0:
                self._disk.remove([(s, drop)])

    def _protected(self, s: int) -> tuple:
        """Versions of shard ``s`` that stay on disk when superseded: the held one (a rewind
        may return to it) and, with ``drop_uncommitted``, those a commit names or is about to."""
        held = self._held.get(s)
        if self.drop_uncommitted:
            return held, self._committed[s], self._previous[s], self._pinned.get(s)
        return (held,)

    def hold(self) -> None:
        """Keep the current versions until the next ``hold``: :meth:`rewind` returns to them
        (the start of an epoch whose predecessor's certificate is still to come)."""
        with self._lock:
            old, self._held = self._held, dict(self.versions)
            if self.resident:
                self._held_ram = dict(self._ram)
                return
            # held before and superseded since: no rewind needs them any more
            drop = [(s, v) for s, v in sorted(old.items())
                    if 0 < v != self.versions[s] and v not in self._protected(s)]
        if drop and (not self.keep_superseded or self.drop_uncommitted):
            if self.executor is not None:  # on the loader, after the writes queued so far
                self.executor.submit(self._disk.remove, drop)
            else:
                self._disk.remove(drop)

    def rewind(self) -> None:
        """Make the held versions the current ones again. Versions put since are abandoned:
        the next commit names the held ones (a run's final commit deletes the rest; without
        a checkpoint the scratch directory goes)."""
        self._settle(list(self._pending))
        with self._lock:
            self.versions = dict(self._held)
            if self.resident:
                self._ram = dict(self._held_ram)
            # what the next commit writes (resident) or fsyncs is known once the commit in
            # progress, if any, is complete: begin_commit works it out
            self._rewound = True

    def write_version(self, s: int, v: int, beta: np.ndarray) -> None:
        """Write version ``v`` of shard ``s`` now, in this thread (a distributed round's task).

        Idempotent: a task run again (its worker died) replaces its own earlier,
        possibly partial, write of the same version with the same values (on an
        object store: finds the objects it wrote identical and creates the others).
        """
        self._write(s, v, np.ascontiguousarray(beta, dtype=np.float64))

    def adopt(self, versions: dict[int, int], sums: dict[int, np.ndarray]) -> None:
        """Make versions written by other processes (a cluster round's tasks) the current
        ones, with their per-model sums, so that the next commit names them."""
        with self._lock:
            for s, v in versions.items():
                s, v = int(s), int(v)
                self.versions[s] = v
                self._dirty.add((s, v))
                self._version_sums[s][v] = np.asarray(sums[s], dtype=np.float64)

    def drop_version(self, s: int, v: int) -> None:
        """Delete version ``v`` of shard ``s`` (superseded; nothing names it any more)."""
        if v > 0:
            self._disk.remove([(s, v)])

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
        if self._scratch is not None:
            self._put_scratch(items)
            return
        if self.resident:
            with self._lock:
                for s, beta in items:
                    self.versions[s] += 1
                    self._ram[s] = [self.versions[s], beta, None]
            return
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
        self._make_room(len(keys))
        # Readers of (s, v) take it from the outbox until its write is complete.
        with self._lock:
            for key, (_, beta) in zip(keys, items):
                self._outbox[key] = beta
        self._queue(self._write_queued, tuple(keys), [s for s, _ in keys])

    def _make_room(self, n: int) -> None:
        """Bound the memory held by earlier writes still in flight (``max_pending`` shards,
        or ``n``, one group, if larger), and forget finished writes at once: a live future
        keeps its task alive."""
        self._reap()
        while sum(map(len, self._pending.values())) >= max(self.max_pending, n):
            self._settle([next(iter(self._pending))])
            self._reap()

    def _queue(self, write, args, shards) -> None:
        """``write(args)`` on the loader, pending for each of ``shards`` until done."""
        fut = self.executor.submit(write, args)
        for s in shards:
            self._pending.setdefault(s, []).append(fut)

    def _put_scratch(self, items) -> None:
        """:meth:`put_group` with a scratch file: each version takes a free slot of its shard,
        and is copied there, with its sum made (as :meth:`_store` makes it), by a background
        task on the loader; until then readers copy it from the outbox."""
        if self.executor is not None:
            # (a shard's previous copy, an epoch old, is done before its slot may be taken again)
            self._settle([s for s, _ in items if s in self._pending])
            self._make_room(len(items))
        entries = []
        with self._lock:
            for s, beta in items:
                v = self.versions[s] + 1
                self.versions[s] = v
                entry = self._ram[s] = [v, self._free_slot(s), None]
                self._outbox[(s, v)] = beta
                entries.append((s, entry))
        if self.executor is None:
            self._write_slots(entries)
        else:
            self._queue(self._write_slots, tuple(entries), [s for s, _ in entries])

    def _write_slots(self, entries) -> None:
        """Copy queued versions to their scratch slots (no reader reads a slot while its
        version is in the outbox; no put takes a slot whose write is pending)."""
        for s, entry in entries:
            v, slot = entry[0], entry[1]
            beta = self._outbox[(s, v)]
            total = beta.sum(axis=(1, 2))
            try:  # (a failure leaves it in the outbox: reads stay right until the error is raised
                self._scratch.write(s, slot, beta)  # where the write is waited for)
            except OSError as exc:
                raise CheckpointError(str(exc)) from None
            entry[2] = total
            with self._lock:
                del self._outbox[(s, v)]

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
        if self.resident:
            ram = self._ram.get(s)
            if ram is not None and ram[0] == self.versions[s]:
                if ram[2] is None and self._scratch is not None:
                    self._settle([s])  # its background write makes it
                if ram[2] is None:  # as _store computes it, from the array that was put
                    ram[2] = ram[1].sum(axis=(1, 2))
                return ram[2][models]
            return self._durable_sums[s][models]
        self._settle([s])  # the background write computes the sum
        with self._lock:
            got = self._version_sums[s].get(self.versions[s])
            return (got if got is not None else self._durable_sums[s])[models]

    def begin_commit(self) -> BetaCommit:
        """What a commit of the current versions needs (on the thread that puts).

        The returned plan names every shard's current version and the writes to
        wait for; :meth:`end_commit` completes it, on any thread, while new
        versions are put.
        """
        with self._lock:
            if self._rewound and not self.resident:  # after a rewind: the versions not committed
                self._dirty = {(s, v) for s, v in self.versions.items() if 0 < v != self._committed[s]}
            self._rewound = False
        if self.resident:  # the current versions not on disk yet (the commit before is complete), written by end_commit
            with self._lock:
                keys = sorted((s, v) for s, v in self.versions.items() if self._written.get(s) != v)
                arrays = {(s, v): self._ram[s] for s, v in keys}
                if self._scratch is not None:  # their slots stay as they are until end_commit
                    self._committing = {s: ram[1] for (s, _), ram in arrays.items()}
            # (scratch: end_commit reads a version once its copy to the file is done)
            futures = list({id(f): f for s, _ in keys for f in self._pending.get(s, ())}.values())
            return BetaCommit(dict(self.versions), keys, futures, arrays)
        keys = sorted(self._dirty)
        self._dirty = set()
        shards = {s for s, _ in keys}
        futures = list({id(f): f for s in shards for f in self._pending.get(s, ())}.values())
        with self._lock:
            self._pinned = dict(self.versions)
        return BetaCommit(dict(self.versions), keys, futures)

    def end_commit(self, plan: BetaCommit) -> dict[str, Any]:
        """Wait for the writes of ``plan``, fsync the versions it names; return the manifest's
        ``beta`` entry (versions and sums)."""
        _wait(plan.futures)
        try:
            for (s, v), ram in (plan.arrays or {}).items():  # resident: written now, by the commit
                total = ram[2] if ram[2] is not None else ram[1].sum(axis=(1, 2))
                with self._lock:
                    self._version_sums[s][v] = total
                beta = ram[1]
                if not isinstance(beta, np.ndarray):  # its scratch slot, kept for this commit
                    beta = self._copy_out(s, beta, buffers.empty((self.n_models, self.shard_rows[s], self.m),
                                                                 np.float64))
                self._write(s, v, beta)
                beta = None
                with self._lock:
                    self._written[s] = v
                    self._committing.pop(s, None)
        finally:
            with self._lock:
                self._committing = {}
        with self._lock:
            syncs = {key: self._syncs.pop(key) for key in plan.keys if key in self._syncs}
        for s, v in plan.keys:
            synced = syncs.get((s, v))
            if self.remote:  # a PUT is durable when it returns
                continue
            if plan.versions[s] == v:  # superseded versions are never committed
                if synced is not None:
                    synced.result()  # fsynced in the background (re-raises its error)
                else:
                    fsync_tree(self._disk.path(s, v))
            elif synced is not None:  # not committed: let it finish before anything deletes it
                synced.exception()
        if not self.remote:
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
        """Stop the background fsync thread (after :meth:`flush`, or when abandoning the run)
        and delete the spares (a removal queued on the loader after this deletes its version)."""
        if self._syncer is not None:
            self._syncer.shutdown(wait=True)
            self._syncer = None
        if self._scratch is not None:
            for fut in [f for futs in self._pending.values() for f in futs]:
                if not fut.cancel():  # (closing: a copy not started is not needed)
                    fut.exception()
            self._pending = {}
            self._scratch.close()
        self._disk.close()

    def drop_superseded(self, plan: BetaCommit) -> None:
        """Delete the versions that ``plan``'s (now committed) versions superseded, except
        the ones of the commit before it, which stay as the fallback."""
        if self.resident or self.drop_uncommitted:
            # only committed versions are on disk (resident: only they were written;
            # drop_uncommitted: the others went when their successor was written): the
            # one before the fallback goes
            self._disk.remove([(s, v) for s, v in sorted(self._previous.items())
                          if v > 0 and v != self._committed[s] and v != plan.versions[s]])
            return
        self._disk.remove([(s, v) for s in sorted({s for s, _ in plan.keys})
                      for v in range(max(1, self._previous[s]), plan.versions[s]) if v != self._committed[s]])

    def mark_committed(self, plan: BetaCommit) -> None:
        """``plan``'s versions are now the committed ones; the committed ones become the previous."""
        with self._lock:
            self._previous, self._committed = self._committed, dict(plan.versions)
            self._pinned = {}


def _wait(futures) -> None:
    """Wait for background writes, re-raising a failure."""
    for fut in futures:
        fut.result()
