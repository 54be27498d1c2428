"""The versions of every shard's ``beta`` on disk or on an object store: their names, writing
and reading one, the spare directories, removal and verification.

One Zarr v3 array per shard and version under ``<root>/beta.zarr`` (``s000003-v000007``),
never overwritten: :class:`~streamwww.state.betas.DiskBetas` decides which version is
current, and when versions are written and dropped; this module only stores them. On an
object store each version is encoded by Zarr in memory and its objects created with
create-only PUTs (:func:`~streamwww.storage.location.write_once`), and read back through
Zarr's ``FsspecStore`` with the same checks.
"""

from __future__ import annotations

import os
import re
import shutil
import threading
from pathlib import Path
from typing import Any

import numpy as np

from streamwww import _buffers as buffers
from streamwww.errors import CheckpointError, StorageError
from streamwww.storage.fsutil import is_read_failure, read_failure
from streamwww.storage.location import (
    is_storage_failure,
    is_url,
    location,
    storage_error,
    write_once,
)

__all__ = ["BetaVersions", "beta_name", "parse_beta_name"]


_NAME = "s{:06d}-v{:06d}"
_NAME_PATTERN = re.compile(r"^s(\d{6})-v(\d{6})$")  # what _NAME writes, and nothing else
_SPARE_PREFIX = "spare-s"  # a superseded version kept for its shard's next one (never a version name)
_SPARE = _SPARE_PREFIX + "{:06d}"
_FIX = "the checkpoint is damaged: resuming falls back to the commit before, or train again"


# beta's chunks: Blosc with lz4 at level 1, no shuffle. beta is mostly zeros (a row away
# from the margin has all its coordinates at 0), and lz4 finds the runs of zero bytes of
# whole float64 values, which a byte shuffle breaks up: smaller than with a shuffle, and
# faster to encode than zstd. Raw, beta is as many bytes as the shards' (compressed) data
# or more; compressed, a checkpoint's beta is many times smaller and an epoch beyond the
# memory budget spends less system CPU (docs/TRAINING.md, "Data path and memory";
# docs/benchmarks-archive.md, "`beta` compressed with Blosc lz4").
_BETA_BLOSC = {"cname": "lz4", "clevel": 1, "shuffle": "noshuffle"}


def _beta_compressors(compressed: bool = True) -> list:
    """The codecs after ``bytes`` of a beta array: Blosc (:data:`_BETA_BLOSC`; not with
    ``compressed=False``), then crc32c (checked on every read; every chunk is written, so a
    missing chunk file is damage)."""
    from zarr.codecs import BloscCodec, Crc32cCodec

    return [BloscCodec(**_BETA_BLOSC), Crc32cCodec()] if compressed else [Crc32cCodec()]



def beta_name(shard: int, version: int) -> str:
    """The array name of ``version`` of ``shard``'s beta under ``beta.zarr``."""
    return _NAME.format(shard, version)


def parse_beta_name(name: str) -> tuple[int, int] | None:
    """``(shard, version)`` of a :func:`beta_name`; ``None`` for any other name."""
    match = _NAME_PATTERN.match(name)
    return None if match is None else (int(match.group(1)), int(match.group(2)))



class BetaVersions:
    """The stored versions of every shard's ``beta``, float64 ``(n_models, rows, m)`` each.

    ``root`` is the checkpoint (or scratch) directory, or a URL or
    :class:`~streamwww.storage.location.Location` on an object store (picklable: cluster
    tasks get it as it is); the versions live in its ``beta.zarr`` group, created if missing.
    """

    def __init__(self, root, n_models: int, shard_rows, m: int):
        import zarr

        self.location = location(root).child("beta.zarr")
        self.remote = not self.location.is_local
        if self.remote:
            self.root = self.location  # str() is its URL; / names an array below it
            try:
                zarr.open_group(store=self.location.zarr_store(), mode="a", zarr_format=3)
            except StorageError:
                raise
            except Exception as exc:
                if is_storage_failure(exc):
                    raise storage_error(self.location.url, "opening the beta group", exc) from exc
                raise
        else:
            self.root = (Path(root) if isinstance(root, os.PathLike) or (isinstance(root, str) and not is_url(root))
                         else Path(self.location.path).parent) / "beta.zarr"
            self.root.mkdir(parents=True, exist_ok=True)
            if not (self.root / "zarr.json").exists():
                zarr.open_group(str(self.root), mode="w", zarr_format=3)
        self.n_models = int(n_models)
        self.shard_rows = [int(r) for r in shard_rows]
        self.m = int(m)
        self._lock = threading.Lock()  # the spares' and own versions' state, the layouts
        # shape -> its zarr.json, its zarr.Array, the numcodecs Blosc of its chunks (or None: raw)
        self._meta: dict[tuple[int, ...], tuple[bytes, Any, Any]] = {}
        # Local versions written by this process's loader: a superseded version is not
        # deleted but renamed to its shard's spare, and the shard's next version is the
        # spare renamed again and its files overwritten in place. Creating and deleting a
        # version's directory and files (three inodes) is most of a version's cost on
        # ext4 (its inode allocator scans past recently freed inodes), and every shard
        # writes one version per epoch beyond the memory budget (docs/TRAINING.md,
        # "Checkpoints"). Only the owner with the loader (its checkpoint directory is
        # locked, or a scratch one) turns spares on (:attr:`reuse`, where the disk has
        # room, :data:`~streamwww.state.betas.SPARE_ROOM`); :meth:`close` deletes them, and
        # the next such owner deletes those a killed run left (:meth:`delete_leftover_spares`).
        self.reuse = False
        self._spares: set[int] = set()  # shards whose spare is on disk
        # Local versions this instance wrote, (shard, version), until removed: their
        # zarr.json is this class's for the shard's shape, so a read skips comparing it and
        # a spare made of one keeps it (an epoch beyond the memory budget reads and writes
        # one version of every shard: two file opens fewer each, docs/benchmarks.md).
        self._own: set[tuple[int, int]] = set()
        self._own_spares: set[int] = set()  # shards whose spare is one of those

    def path(self, s: int, v: int):
        """Where version ``v`` of shard ``s`` is stored (a Path, or a remote Location)."""
        return self.root / beta_name(s, v)

    def delete_leftover_spares(self) -> None:
        """Delete the spares a killed run left (local only)."""
        for leftover in self.root.glob(_SPARE_PREFIX + "*"):
            shutil.rmtree(leftover, ignore_errors=True)

    def read(self, s: int, v: int, out: np.ndarray) -> np.ndarray:
        """Stored version ``v`` (> 0) of shard ``s`` into ``out`` (float64, its shape checked
        by the caller); a damaged or missing version is a :class:`~streamwww.errors.CheckpointError`
        naming it, an unreadable one a :class:`~streamwww.errors.StorageError`."""
        import zarr

        from streamwww.io import read_into

        shape = out.shape
        path = self.path(s, v)
        if not self.remote and self._read_direct(path, shape, out, own=(s, v) in self._own):
            return out
        try:
            arr = zarr.open_array(path.zarr_store(read_only=True) if self.remote else str(path), mode="r")
        except Exception as exc:  # zarr raises several types for missing/corrupt arrays
            self._raise_unreachable(exc, path, f"reading beta of shard {s} version {v}")
            raise CheckpointError(f"{path}: cannot read beta of shard {s} version {v} "
                                  f"({type(exc).__name__}: {exc})") from None
        if arr.shape != shape or arr.dtype != np.float64:
            raise CheckpointError(f"{path}: beta of shape {arr.shape}/{arr.dtype}, expected {shape}/float64")
        try:
            read_into(arr, path, out, missing="error", fix=_FIX)
        except Exception as exc:
            self._raise_unreachable(exc, path, f"reading beta of shard {s} version {v}")
            raise CheckpointError(f"{path}: cannot read beta of shard {s} version {v} "
                                  f"({type(exc).__name__}: {exc})") from None
        return out

    def _read_direct(self, path: Path, shape: tuple[int, ...], out: np.ndarray, own: bool = False) -> bool:
        """Read a local version whose ``zarr.json`` is byte for byte the one this class writes
        for ``shape`` (``own``: written by this instance, not compared again), with the
        metadata of :meth:`_layout` (no Zarr open per version); the chunks
        are read and checked (crc32c) from ``path``. False: Zarr opens it (another layout, or
        damage to report)."""
        from streamwww.io import read_whole_chunks

        meta, array, _ = self._layout(shape)
        try:
            if not own and (path / "zarr.json").read_bytes() != meta:
                return False
            return read_whole_chunks(array, path, out, missing="error", fix=_FIX)
        except FileNotFoundError:
            return False  # Zarr names what is missing
        except Exception as exc:
            self._raise_unreachable(exc, path, "reading beta")
            raise CheckpointError(f"{path}: cannot read beta ({type(exc).__name__}: {exc})") from None

    def _raise_unreachable(self, exc: BaseException, path, doing: str) -> None:
        """A remote store that failed, or a local file that is there but cannot be read (no
        permission, EIO, a directory where a file should be), is a
        :class:`~streamwww.errors.StorageError` (not damage: the checkpoint may be intact),
        never a fallback to an older commit."""
        if not self.remote and is_read_failure(exc):
            raise read_failure(exc.filename or path, exc, "beta") from None
        if self.remote and is_storage_failure(exc):
            if isinstance(exc, StorageError):
                raise exc
            raise storage_error(str(path), doing, exc) from exc


    def write(self, s: int, v: int, beta: np.ndarray):
        """Write version ``v`` of shard ``s`` (a spare of the shard, if any, becomes it);
        return where it is."""
        path = self.path(s, v)
        if self.remote:
            self._write_remote(s, v, beta)
            return path
        if path.exists():  # left by a killed run; never part of a committed step
            shutil.rmtree(path)
        taken, own = self._take_spare(s, path)
        self._write_local(path, beta, in_place=taken, keep_meta=own)
        with self._lock:
            self._own.add((s, v))
        return path

    def write_failed(self, s: int, v: int, exc: BaseException) -> CheckpointError | None:
        """The one-line error for a failed write of version ``v`` of shard ``s`` (a full disk,
        a store out of reach), its partial files deleted, never a half version in use;
        None where ``exc`` is no storage failure (re-raised as it is)."""
        if self.remote and is_storage_failure(exc):
            # what reached the store is never named by a manifest; a retry finds it identical
            return CheckpointError(f"{self.path(s, v)}: cannot write beta of shard {s} "
                                   f"({type(exc).__name__}: {(str(exc).splitlines() or [''])[0]})")
        if not isinstance(exc, OSError):
            return None
        shutil.rmtree(self.path(s, v), ignore_errors=True)
        return CheckpointError(f"{self.path(s, v)}: cannot write beta of shard {s} ({exc.strerror or exc})")

    def _create_array(self, store, shape: tuple[int, ...], compressed: bool = True):
        """An empty beta array on ``store``: one chunk of up to 64 MiB per row block
        (``compressed=False``: without Blosc)."""
        import zarr

        rows_per_chunk = max(1, (64 << 20) // max(1, 8 * self.n_models * max(self.m, 1)))
        # Chunk keys c.0.0.0 rather than c/0/0/0: a version is then one directory and
        # two files, not four directories and two files. Creating inodes is what a
        # version costs on ext4 without a journal (each new inode scans past those deleted
        # in the last minute, a large share of a run's CPU beyond the memory budget;
        # docs/TRAINING.md, "Checkpoints").
        return zarr.create_array(store=store, shape=shape, dtype="float64",
                                 chunks=(self.n_models, min(shape[1], rows_per_chunk) or 1, self.m),
                                 chunk_key_encoding={"name": "default", "separator": "."},
                                 zarr_format=3, overwrite=True,
                                 compressors=_beta_compressors(compressed),
                                 # write_empty_chunks: skip Zarr's chunk == fill-value scan, a
                                 # full extra pass over beta on Zarr's one I/O thread
                                 config={"write_empty_chunks": True})

    def _objects(self, beta: np.ndarray) -> dict[str, tuple]:
        """A version's objects as Zarr writes them, each as the parts to write one after the
        other: its ``zarr.json`` (made by Zarr, once per shape) and its chunks
        (:func:`~streamwww.io.chunk_parts`: Zarr's bytes without Zarr's per-write cost)."""
        from streamwww.io import chunk_parts

        meta, array, blosc = self._layout(tuple(beta.shape))
        return {"zarr.json": (meta,), **chunk_parts(beta, tuple(array.metadata.chunk_grid.chunk_shape),
                                                    array.metadata.chunk_key_encoding, blosc)}

    def _layout(self, shape: tuple[int, ...]):
        """The ``zarr.json`` (made by Zarr) of a version of ``shape``, the (empty, in-memory)
        Zarr array it describes (its metadata, for writing and reading versions) and the
        numcodecs ``Blosc`` that encodes its chunks as Zarr would."""
        with self._lock:
            meta = self._meta.get(shape)
        if meta is None:
            import zarr.storage

            from streamwww.io import blosc_of

            objects: dict[str, Any] = {}
            array = self._create_array(zarr.storage.MemoryStore(objects), shape)
            # numcodecs' Blosc as Zarr configured it for this array (one codec, one set of
            # bytes); None where this chain is not one written here (a big-endian machine):
            # then versions are written raw, as their zarr.json says
            blosc = blosc_of(array.metadata)
            if blosc is None:
                objects = {}
                array = self._create_array(zarr.storage.MemoryStore(objects), shape, compressed=False)
            meta = (objects["zarr.json"].to_bytes(), array, blosc)
            with self._lock:
                self._meta[shape] = meta
        return meta

    def _write_remote(self, s: int, v: int, beta: np.ndarray) -> None:
        """The version's objects (chunks and ``zarr.json``) are created in one concurrent
        batch of create-only PUTs."""
        where = self.path(s, v)
        write_once({where.child(key): b"".join(parts) for key, parts in sorted(self._objects(beta).items())})

    def _write_local(self, path: Path, beta: np.ndarray, in_place: bool = False, keep_meta: bool = False) -> None:
        """The version's files under ``path``; ``in_place``: ``path`` is a spare of the same
        shard (the same files), overwritten and truncated to the new sizes without creating
        files; ``keep_meta``: the spare's ``zarr.json`` is already this version's."""
        for key, parts in self._objects(beta).items():
            if keep_meta and key == "zarr.json":
                continue
            target = path / key
            if in_place:
                try:
                    with open(target, "r+b") as f:
                        for part in parts:
                            f.write(part)
                        f.truncate()
                    continue
                except FileNotFoundError:
                    pass
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "wb") as f:
                for part in parts:
                    f.write(part)

    def _spare_path(self, s: int) -> Path:
        return self.root / _SPARE.format(s)

    def _retire(self, s: int, v: int, path: Path) -> bool:
        """Keep the superseded version ``v`` at ``path`` as shard ``s``'s spare (False: not
        kept, e.g. the shard has one already)."""
        with self._lock:  # (a rename: microseconds; the spare's state changes with it)
            own = (s, v) in self._own
            self._own.discard((s, v))
            if not self.reuse or s in self._spares:
                return False
            try:
                os.rename(path, self._spare_path(s))
            except OSError:
                return False
            self._spares.add(s)
            if own:
                self._own_spares.add(s)
            return True

    def _take_spare(self, s: int, path: Path) -> tuple[bool, bool]:
        """Rename shard ``s``'s spare to ``path`` (which does not exist): ``(taken, own)``,
        ``own``: the spare was a version this instance wrote."""
        with self._lock:
            if s not in self._spares:
                return False, False
            self._spares.discard(s)
            own = s in self._own_spares
            self._own_spares.discard(s)
            try:
                os.rename(self._spare_path(s), path)
                return True, own
            except OSError:
                shutil.rmtree(self._spare_path(s), ignore_errors=True)
                return False, False


    def remove(self, keys) -> None:
        """Delete versions ``keys`` (``(shard, version)``; one batch on an object store); a
        local one becomes its shard's spare where spares are on."""
        if self.remote:
            self.location.remove_many([self.path(s, v) for s, v in keys], recursive=True)
            return
        for s, v in keys:
            path = self.path(s, v)
            if not self._retire(s, v, path):
                shutil.rmtree(path, ignore_errors=True)

    def close(self) -> None:
        """Delete the spares and keep no more (a removal after this deletes its version)."""
        with self._lock:
            self.reuse, spares, self._spares = False, sorted(self._spares), set()
            self._own_spares = set()
        for s in spares:
            shutil.rmtree(self._spare_path(s), ignore_errors=True)

    def verify(self, versions, sums, where) -> None:
        """Read every named version and compare its per-model sum with ``sums`` (a
        manifest's): a damaged, missing or zeroed chunk changes the sum.  Raises
        :class:`~streamwww.errors.CheckpointError` naming the shard, the version and ``where``."""
        n = len(self.shard_rows)
        names = {str(s) for s in range(n)}
        if set(map(str, versions)) != names:
            raise CheckpointError(f"{where}: names beta of {len(versions)} shards; the data has {n}")
        want = np.asarray(sums, dtype=np.float64)
        if want.size != n * self.n_models:
            raise CheckpointError(f"{where}: {want.size} beta sums for {n} shards x {self.n_models} models")
        want = want.reshape(n, self.n_models)
        for s in range(n):
            v = int(versions[str(s)] if str(s) in versions else versions[s])
            shape = (self.n_models, self.shard_rows[s], self.m)
            got = self.read(s, v, buffers.empty(shape, np.float64)).sum(axis=(1, 2)) if v else np.zeros(self.n_models)
            # Summation order may differ from the writer's (a view vs a fresh array): not bitwise.
            if not np.all(np.abs(got - want[s]) <= 1e-9 * np.maximum(1.0, np.abs(want[s]))):
                raise CheckpointError(f"{self.path(s, v)}: beta of shard {s} version {v} does not "
                                      f"match its sum in {where} ({got.tolist()} vs {want[s].tolist()}): damaged")
