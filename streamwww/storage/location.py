"""Where streamwww reads and writes: a local path or an fsspec URL, behind one small interface.

Every place that takes a path (stores, checkpoint directories, model files) turns
it into a :class:`Location` with :func:`location`. A local path keeps the local
file system's tools (atomic rename, fsync, flock, in-place chunk reads); a URL
(``s3://``, ``gs://``, ``az://``, ``memory://``, any fsspec protocol) goes through
the fsspec file system of its protocol, the same one Zarr (``FsspecStore``) and
pyarrow use for it. This module only resolves names and moves bytes; what to
write and in which order (the commit protocols) stays with the store and
checkpoint code.

Credentials and other options travel as ``storage_options`` (passed to the file
system, as in Zarr, pandas and Dask). They are never part of :attr:`Location.url`,
which is what gets recorded in manifests, model metadata and logs.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import os
import posixpath
import re
import secrets
import threading
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from streamwww.errors import CheckpointError, StorageError, StorageURLError
from streamwww.storage import obstore as _obstore

__all__ = ["Location", "location", "located", "is_url", "parse_storage_options", "is_storage_failure",
           "storage_error", "write_once", "PROTOCOL_PACKAGES"]

logger = logging.getLogger(__name__)

_URL = re.compile(r"^(?P<protocol>[A-Za-z][A-Za-z0-9+.\-]*)://")
# the package that brings each common protocol (fsspec's own registry names it too,
# in a sentence; this is for a one-line error with the pip command)
PROTOCOL_PACKAGES = {"s3": "s3fs", "s3a": "s3fs", "gs": "gcsfs", "gcs": "gcsfs", "az": "adlfs",
                     "abfs": "adlfs", "abfss": "adlfs", "adl": "adlfs", "hf": "huggingface_hub",
                     "sftp": "paramiko", "ssh": "paramiko", "oci": "ocifs", "hdfs": "pyarrow",
                     "http": "aiohttp", "https": "aiohttp"}


# Per-protocol options of batched reads: s3fs first HEADs every object to decide on a
# concurrent multipart download unless max_concurrency is 1; chunks are small enough
# for one GET, so that doubled the requests (and the round trips) of every read.
_CAT_OPTIONS: dict[str, dict[str, Any]] = {"s3": {"max_concurrency": 1}, "s3a": {"max_concurrency": 1}}


def is_url(path: Any) -> bool:
    """Whether ``path`` is a URL (``PROTOCOL://...``) rather than a local path."""
    return isinstance(path, str) and _URL.match(path) is not None


# OSErrors that say something about the object, not about the store: the callers decide
_ANSWERS = (FileNotFoundError, FileExistsError, IsADirectoryError, NotADirectoryError)
# where the clients of the object stores fsspec wraps, and those file systems themselves,
# keep their (non-OSError) errors: botocore's EndpointConnectionError is what s3fs raises
# when the endpoint is down, gcsfs's HttpError what it raises for a 5xx once its retries end
_CLIENT_ERROR_MODULES = ("botocore.", "aiobotocore.", "aiohttp.", "google.", "azure.", "requests.", "urllib3.",
                         "obstore.", "s3fs.", "gcsfs.", "adlfs.", "ocifs.", "oci.", "paramiko.", "fsspec.")


def _is_answer(exc: BaseException) -> bool:
    """Whether ``exc`` is a store's answer about the object itself (missing, existing, a
    folder or not), not a failure of the store."""
    if isinstance(exc, _ANSWERS):
        return True
    # (obstore's reads only GET: the one answer about the object they give)
    return type(exc).__module__.startswith("obstore") and type(exc).__name__ == "NotFoundError"


def is_storage_failure(exc: BaseException) -> bool:
    """Whether ``exc`` says that a store could not be reached or refused a request
    (an OSError other than a missing or existing object, or an error of the store's
    client library), as opposed to an answer about the object itself.

    For an exception whose origin is mixed (a Zarr read: the store's client or Zarr
    parsing what it got); a request of the file system alone is judged by
    :meth:`Location._request`, where every exception but an answer is the store's."""
    if isinstance(exc, StorageError):
        return True
    if _is_answer(exc):
        return False
    if isinstance(exc, OSError):
        return True
    return any(c.__module__.startswith(_CLIENT_ERROR_MODULES) for c in type(exc).__mro__[:-2])


def storage_error(where: str, doing: str, exc: BaseException) -> StorageError:
    """The one-line :class:`~streamwww.errors.StorageError` for ``exc``, raised while
    ``doing`` (e.g. ``"writing W-000003.npy"``) at ``where`` (a URL, never options).
    Callers let a StorageError pass as it is (it names its URL and request already)."""
    detail = str(exc).splitlines()[0] if str(exc) else ""
    return StorageError(f"{where}: {doing} failed ({type(exc).__name__}: {detail})")


def _supports_create(fs) -> bool:
    """Whether ``fs`` implements ``pipe_file(..., mode="create")`` (an object store's
    conditional PUT, or fsspec's own exists-check for in-process file systems). A file
    system whose method does not name ``mode`` would silently overwrite."""
    method = getattr(type(fs), "_pipe_file", None) if getattr(fs, "async_impl", False) else None
    method = method or getattr(type(fs), "pipe_file", None)
    try:
        return method is not None and "mode" in inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False


def _filesystem(protocol: str, url: str, storage_options: Mapping[str, Any]):
    import fsspec

    try:
        cls = fsspec.get_filesystem_class(protocol)
    except ImportError as exc:
        package = PROTOCOL_PACKAGES.get(protocol)
        hint = f"pip install {package}" if package else str(exc)
        raise StorageURLError(f"{url}: the {protocol}:// protocol needs a package that is not "
                              f"installed ({hint})") from None
    except ValueError:
        raise StorageURLError(f"{url}: unknown protocol {protocol!r} (no fsspec file system "
                              f"is registered for it)") from None
    try:
        return cls(**dict(storage_options))
    except TypeError as exc:
        raise StorageURLError(f"{url}: storage_options {sorted(storage_options)} do not fit the "
                              f"{protocol}:// file system ({exc})") from None


class Location:
    """A local path or a URL on an fsspec file system.

    Parameters
    ----------
    fs : fsspec.AbstractFileSystem or None
        ``None`` for the local file system (then ``path`` is absolute).
    path : str
        The path on ``fs`` (without the protocol).
    protocol : str
        ``"file"`` for local paths.
    storage_options : mapping
        What ``fs`` was made with (kept to make the file system again in
        another process; never recorded).

    Attributes
    ----------
    url : str
        The name to show and record: the absolute local path, or
        ``PROTOCOL://path``.
    is_local : bool
    """

    __slots__ = ("_fs", "path", "protocol", "storage_options")

    def __init__(self, fs, path: str, protocol: str, storage_options: Mapping[str, Any]):
        self._fs = fs
        self.path = path
        self.protocol = protocol
        self.storage_options = dict(storage_options)

    # ------------------------------------------------------------------ names
    @property
    def is_local(self) -> bool:
        return self.protocol == "file"

    @property
    def url(self) -> str:
        return self.path if self.is_local else f"{self.protocol}://{self.path}"

    @property
    def fs(self):
        """The fsspec file system (``LocalFileSystem`` for local paths)."""
        if self._fs is None:
            from fsspec.implementations.local import LocalFileSystem

            self._fs = LocalFileSystem()
        return self._fs

    @property
    def local_path(self) -> Path:
        """The :class:`~pathlib.Path` of a local location (ValueError for a URL)."""
        if not self.is_local:
            raise ValueError(f"{self.url} is not a local path")
        return Path(self.path)

    @property
    def name(self) -> str:
        return posixpath.basename(self.path.rstrip("/")) if not self.is_local else Path(self.path).name

    @property
    def parent(self) -> Location:
        if self.is_local:
            return Location(self._fs, str(Path(self.path).parent), "file", {})
        return Location(self._fs, posixpath.dirname(self.path.rstrip("/")), self.protocol,
                        self.storage_options)

    def child(self, *names: str) -> Location:
        """The location of ``names`` below this one (``/``-separated parts allowed)."""
        if self.is_local:
            return Location(self._fs, os.path.join(self.path, *names), "file", {})
        return Location(self._fs, posixpath.join(self.path, *names), self.protocol, self.storage_options)

    __truediv__ = child

    def __str__(self) -> str:
        return self.url

    def __fspath__(self) -> str:
        # code that needs a local path (open, Path, os.*) works on a local location
        # and fails loudly on a remote one instead of making a folder named "s3:"
        if not self.is_local:
            raise TypeError(f"{self.url} is on an object store; this operation needs a local path")
        return self.path

    def __repr__(self) -> str:
        return f"Location({self.url!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Location) and (self.protocol, self.path) == (other.protocol, other.path)

    def __hash__(self) -> int:
        return hash((self.protocol, self.path))

    def __reduce__(self):  # the file system is made again in the receiving process
        return Location, (None if self.is_local else self._fs, self.path, self.protocol, self.storage_options)

    @contextlib.contextmanager
    def _request(self, doing: str) -> Iterator[None]:
        """Turn a remote store's failure (unreachable, refused, timed out) into one
        :class:`~streamwww.errors.StorageError` naming this URL and ``doing``.

        What runs inside is a request of the file system alone, so every exception
        but an answer about the object (missing, existing) is the store's failure,
        whatever its type: none of them says anything about the bytes stored, and a
        reader that took one for damage would fall back from what may be intact."""
        try:
            yield
        except StorageError:
            raise
        except Exception as exc:
            if self.is_local or _is_answer(exc):
                raise
            raise storage_error(self.url, doing, exc) from exc

    # ------------------------------------------------------------------ queries
    def exists(self) -> bool:
        if self.is_local:
            return os.path.lexists(self.path)
        with self._request("checking that it exists"):
            return self.fs.exists(self.path)

    def isfile(self) -> bool:
        if self.is_local:
            return os.path.isfile(self.path)
        with self._request("checking that it is a file"):
            return self.fs.isfile(self.path)

    def isdir(self) -> bool:
        if self.is_local:
            return os.path.isdir(self.path)
        with self._request("checking that it is a folder"):
            return self.fs.isdir(self.path)

    def listdir(self) -> list[str]:
        """Names directly below this location ([] when there is nothing)."""
        if self.is_local:
            try:
                return sorted(os.listdir(self.path))
            except (FileNotFoundError, NotADirectoryError):
                return []
        try:
            with self._request("listing"):
                entries = self.fs.ls(self.path, detail=False, refresh=True)
        except FileNotFoundError:
            return []
        finally:
            # a kept listing would answer later exists() calls without asking the store,
            # blind to what other processes write (s3fs answers from its listing cache)
            self.fs.invalidate_cache(self.path)
        base = self.path.rstrip("/")
        return sorted(posixpath.basename(e.rstrip("/")) for e in entries if e.rstrip("/") != base)

    # ------------------------------------------------------------------ bytes
    def read_bytes(self) -> bytes:
        got = self.read_buffer()
        return got if isinstance(got, bytes) else bytes(got)

    def read_buffer(self):
        """The object's bytes as a read-only buffer (``bytes``, or obstore's ``Bytes`` on
        S3: no copy), for readers that take any buffer (``memoryview``, ``len``)."""
        if self.is_local:
            try:
                with open(self.path, "rb") as f:
                    return f.read()
            except OSError as exc:  # (a failed read names no file: the caller's message needs it)
                if exc.filename is None:
                    exc.filename = self.path
                raise
        fast = self._fast_reader()
        if fast is not None:
            return self.fast_read(lambda: fast.get(self.path), self._read_bytes_fsspec)
        return self._read_bytes_fsspec()

    def _read_bytes_fsspec(self) -> bytes:
        with self._request("reading"):  # one GET (s3fs would HEAD first: _CAT_OPTIONS)
            return self.fs.cat_file(self.path, **_CAT_OPTIONS.get(self.protocol, {}))

    def _fast_reader(self):
        """obstore's reader of this bucket, where it replaces s3fs's GETs (streamwww.storage.obstore)."""
        return _obstore.reader(self.protocol, self.path, self.storage_options)

    def fast_read(self, read, again):
        """``read()`` (a read through obstore); where it fails (not for a missing object),
        ``again()``, the same read through s3fs, and where that succeeds s3fs reads this
        bucket from now on (a region or endpoint obstore did not find)."""
        try:
            return read()
        except FileNotFoundError:
            raise
        except Exception as exc:
            result = again()
            _obstore.give_up(self.protocol, self.path, self.storage_options, exc)
            return result

    def read_text(self) -> str:
        return self.read_bytes().decode()

    def read_many(self, locations: Iterable[Location]) -> list:
        """The bytes of several objects below this file system (``bytes``, or read-only
        buffers as :meth:`read_buffer`'s), ``None`` for a missing one.

        On an object store the requests go out concurrently (one batch through
        the file system's ``cat``, or obstore's GETs on S3: streamwww.storage.obstore),
        which is what hides their latency.
        """
        locations = list(locations)
        if self.is_local or not locations:
            out = []
            for loc in locations:
                try:
                    out.append(loc.read_bytes())
                except FileNotFoundError:
                    out.append(None)
            return out
        paths = [loc.path for loc in locations]
        fast = self._fast_reader()
        if fast is not None and all(p.partition("/")[0] == fast.bucket for p in paths):
            return self.fast_read(lambda: fast.get_many(paths), lambda: self._read_many_fsspec(paths))
        return self._read_many_fsspec(paths)

    def _read_many_fsspec(self, paths: list[str]) -> list[bytes | None]:
        with self._request(f"reading {len(paths)} objects"):
            got = self.fs.cat(paths, on_error="return", **_CAT_OPTIONS.get(self.protocol, {}))
        if not isinstance(got, dict):  # a single path comes back as bytes
            got = {paths[0]: got}
        result = []
        for p in paths:
            value = got.get(p)
            if isinstance(value, FileNotFoundError) or value is None:
                result.append(None)
            elif isinstance(value, BaseException):
                with self._request(f"reading {p}"):
                    raise value
            else:
                result.append(value)
        return result

    def write_bytes(self, data: bytes, *, durable: bool = True, exclusive: bool = False) -> None:
        """Write ``data`` as the whole object, atomically: a reader sees the old
        content or the new, never a part. Local files go to a temporary name,
        are fsynced (``durable``) and renamed; an object store's single PUT is
        atomic already.

        With ``exclusive`` the object is only created: ``FileExistsError`` when it
        exists. Locally the temporary file is hard-linked to the name (refused
        atomically if taken); on an object store it is a conditional PUT
        (``If-None-Match``) where the file system offers one, else a check for
        the object before the PUT (not atomic against a concurrent writer).
        """
        if not self.is_local:
            with self._request("writing"):
                if not exclusive:
                    self.fs.pipe_file(self.path, bytes(data))
                elif _supports_create(self.fs):
                    self.fs.pipe_file(self.path, bytes(data), mode="create")
                elif self.fs.exists(self.path):
                    raise FileExistsError(f"{self.url} exists")
                else:
                    self.fs.pipe_file(self.path, bytes(data))
            return
        from streamwww.storage.fsutil import fsync_path

        tmp = f"{self.path}.tmp-{os.getpid()}-{secrets.token_hex(3)}"
        try:
            with open(tmp, "wb") as f:
                f.write(data)
                if durable:
                    f.flush()
                    os.fsync(f.fileno())
            if exclusive:
                os.link(tmp, self.path)
                os.unlink(tmp)
            else:
                os.replace(tmp, self.path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        if durable:
            fsync_path(os.path.dirname(self.path) or ".")

    def write_many(self, items: Mapping[Location, bytes], *, exclusive: bool = False) -> None:
        """Write several objects (each as :meth:`write_bytes` does). On an object
        store the PUTs go out concurrently, as one batch; with ``exclusive``,
        ``FileExistsError`` when any of them exists (the others may be written)."""
        if self.is_local or not items or (exclusive and not _supports_create(self.fs)):
            for loc, data in items.items():
                loc.write_bytes(data, exclusive=exclusive)
            return
        kwargs = {"mode": "create"} if exclusive else {}
        with self._request(f"writing {len(items)} objects"):
            self.fs.pipe({loc.path: bytes(data) for loc, data in items.items()}, **kwargs)

    def write_text(self, text: str, *, durable: bool = True) -> None:
        self.write_bytes(text.encode(), durable=durable)

    def makedirs(self) -> None:
        """Create the directory (object stores have none: nothing to do)."""
        if self.is_local:
            os.makedirs(self.path, exist_ok=True)

    def remove(self, recursive: bool = False, missing_ok: bool = True) -> None:
        """Delete this file (or, ``recursive``, everything below this prefix)."""
        try:
            if self.is_local:
                if recursive and os.path.isdir(self.path) and not os.path.islink(self.path):
                    import shutil

                    shutil.rmtree(self.path)
                else:
                    os.unlink(self.path)
            else:
                with self._request("deleting"):
                    self.fs.rm(self.path, recursive=recursive)
        except FileNotFoundError:
            if not missing_ok:
                raise

    def remove_many(self, locations: Iterable[Location], recursive: bool = False) -> None:
        """Delete several files (or, ``recursive``, prefixes) below this file system;
        missing ones are no error. On an object store: one batch of deletes."""
        locations = list(locations)
        if self.is_local or not locations:
            for loc in locations:
                loc.remove(recursive=recursive)
            return
        with self._request(f"deleting {len(locations)} objects"):
            try:
                self.fs.rm([loc.path for loc in locations], recursive=recursive)
            except FileNotFoundError:
                pass

    # ------------------------------------------------------------------ Zarr
    def zarr_read_root(self):
        """``(store, key)``: a read-only Zarr store at this bucket's root that reads through
        obstore (streamwww.storage.obstore) and this location's key in it; None where reads stay
        with s3fs (then :meth:`zarr_store`)."""
        fast = self._fast_reader()
        if fast is None or self.path.partition("/")[0] != fast.bucket:
            return None
        try:
            return fast.zarr_root(), fast.key(self.path)
        except ImportError:  # a Zarr without its obstore adapter
            return None

    def zarr_store(self, read_only: bool = False):
        """A Zarr v3 store rooted here: ``LocalStore`` for a local path, else
        ``FsspecStore`` over this protocol's asynchronous file system."""
        import zarr.storage

        if self.is_local:
            return zarr.storage.LocalStore(self.path, read_only=read_only)
        return zarr.storage.FsspecStore(_zarr_filesystem(self), path=self.path, read_only=read_only)


# Zarr's asynchronous file systems, one per protocol and options in this process.
# fsspec caches instances per thread, and each new s3fs instance builds a client on
# first use, which costs CPU (botocore loads its endpoint tables; docs/benchmarks.md,
# object storage, "One client per process"); the loader threads of every run are new
# threads. One instance serves them all: Zarr runs all its I/O in its own single event
# loop thread, where the client's session lives.
_ZARR_FS: dict[tuple, Any] = {}
_ZARR_FS_LOCK = threading.Lock()


def _close_zarr_filesystems() -> None:
    """At exit: close the S3 clients of Zarr's file systems (an asynchronous s3fs instance
    has no finalizer of its own; aiohttp would print "Unclosed client session")."""
    import zarr.core.sync

    for fs in list(_ZARR_FS.values()):
        s3 = getattr(fs, "_s3", None)
        close = getattr(type(fs), "close_session", None)
        if s3 is not None and close is not None:
            try:
                close(zarr.core.sync.loop[0], s3)
            except Exception:  # exiting: nothing left to report it to
                pass
    _ZARR_FS.clear()


def _zarr_filesystem(where: Location):
    import fsspec
    from fsspec.utils import tokenize

    options = {**_CAT_OPTIONS.get(where.protocol, {}), **where.storage_options}
    key = (os.getpid(), where.protocol, tokenize(sorted(options.items(), key=lambda kv: kv[0])))
    with _ZARR_FS_LOCK:
        fs = _ZARR_FS.get(key)
        if fs is None:
            if fsspec.get_filesystem_class(where.protocol).async_impl:
                # Zarr reads small objects (metadata, chunks): one GET each, as in read_many
                fs = fsspec.filesystem(where.protocol, asynchronous=True, skip_instance_cache=True,
                                       **options)
            else:
                from fsspec.implementations.asyn_wrapper import AsyncFileSystemWrapper

                fs = AsyncFileSystemWrapper(where.fs, asynchronous=True)
            if not _ZARR_FS:
                import atexit

                atexit.register(_close_zarr_filesystems)  # after Zarr's: runs before it stops its loop
            _ZARR_FS[key] = fs
        return fs


def location(path: str | os.PathLike | Location, storage_options: Mapping[str, Any] | None = None
             ) -> Location:
    """Resolve a local path or an fsspec URL to a :class:`Location`.

    Parameters
    ----------
    path : str, path-like or Location
        ``PROTOCOL://...`` names a location on that protocol's fsspec file
        system (``file://`` is local); anything else is a local path (made
        absolute).
    storage_options : mapping, optional
        Options of the file system (credentials, endpoint, ...). Not allowed
        with a local path that is not a ``file://`` URL, where they would be
        silently unused.

    Raises
    ------
    StorageURLError
        For an unknown protocol, one whose package is not installed (the
        message names it), or options the file system does not take.
    """
    if isinstance(path, Location):
        if storage_options and dict(storage_options) != path.storage_options:
            return location(path.url, storage_options)
        return path
    options = dict(storage_options or {})
    if not is_url(path):
        if options:
            raise StorageURLError(f"{os.fspath(path)}: storage_options {sorted(options)} were given "
                                  f"for a local path; they apply to URLs (s3://..., gs://...)")
        return Location(None, str(Path(os.fspath(path)).expanduser().absolute()), "file", {})
    protocol = _URL.match(path)["protocol"].lower()
    if protocol in ("file", "local"):
        rest = path[len(protocol) + 3:]
        return Location(None, str(Path(rest).expanduser().absolute()), "file", {})
    fs = _filesystem(protocol, path, options)
    stripped = fs._strip_protocol(path)
    if isinstance(stripped, list):
        stripped = stripped[0]
    return Location(fs, stripped.rstrip("/") or stripped, protocol, options)


def located(path: str | os.PathLike | Location, storage_options: Mapping[str, Any] | None = None
            ) -> Location:
    """:func:`location` for calls that name several paths with one set of
    ``storage_options`` (e.g. a local input and an ``s3://`` output): the
    options apply to the URLs among them and local paths ignore them."""
    if isinstance(path, Location) or is_url(path):
        return location(path, storage_options)
    return location(path)


def parse_storage_options(pairs: Iterable[str] | None) -> dict[str, Any] | None:
    """``KEY=VALUE`` texts (the CLI's ``--storage-option``) as a storage_options dict.

    A value is read as JSON when it is JSON (``true``, ``3``, ``{"a": 1}``), else
    kept as text; a dotted key nests (``client_kwargs.region_name=eu-west-1``).
    ``None`` when there are none.

    Raises
    ------
    ValueError
        For a text without ``=`` or with an empty key (naming it).
    """
    import json

    out: dict[str, Any] = {}
    for text in pairs or ():
        key, sep, raw = text.partition("=")
        if not sep or not key.strip() or any(not k for k in key.strip().split(".")):
            raise ValueError(f"--storage-option must be KEY=VALUE (e.g. endpoint_url=http://localhost:9000), "
                             f"got {text!r}")
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        *parents, leaf = key.strip().split(".")
        node = out
        for k in parents:
            node = node.setdefault(k, {})
            if not isinstance(node, dict):
                raise ValueError(f"--storage-option {text!r}: {k!r} is given both as a value and as a group")
        node[leaf] = value
    return out or None


def write_once(items: dict[Location, bytes]) -> None:
    """Create the objects ``items`` (all below one file system) with create-only
    writes: an object found with identical bytes is success (a task that ran again
    writes what it wrote before); one with other bytes is a
    :class:`~streamwww.errors.CheckpointError` naming it (checkpoints, and the
    ``beta`` versions cluster tasks write into them, are what is written this way)."""
    if not items:
        return
    first = next(iter(items))
    try:
        first.write_many(items, exclusive=True)
        return
    except FileExistsError:
        pass
    for loc, data in items.items():  # which ones exist: one at a time (a rare path)
        try:
            loc.write_bytes(data, exclusive=True)
        except FileExistsError:
            try:
                same = loc.read_bytes() == bytes(data)
            except FileNotFoundError:  # deleted in between: write it again
                loc.write_bytes(data, exclusive=True)
                continue
            if not same:
                raise CheckpointError(f"{loc.url}: exists with other content than this run writes there; "
                                      f"another trainer or task writes this checkpoint") from None
