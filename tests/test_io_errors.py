"""I/O errors are never taken for damage (issue 56), in shard reads and on object stores.

A shard file that is there but cannot be read (no permission, EIO on open or on read, a
directory in its place) is a StorageError: one line that names the store, the shard and
the file and says it is an I/O error, not damage; ``info --verify`` says "cannot read",
never "damaged". A missing chunk stays damage (every chunk of a store was written). On an
object store, any failure of a request (permission denied, a connection error, a timeout,
an error of the store's client that is not "not found") is a StorageError too: never a
damaged shard, never damage that makes a checkpoint fall back to the commit before.

Failures are injected by replacing ``open`` (tests may run as root, where chmod 000 does
not stop a read) and the memory:// file system's reads.
"""

import errno
import os
import warnings

import fsspec
import numpy as np
import pytest

from streamwww.cli import main
from streamwww.errors import ChecksumError, ShardFormatError, StorageError
from streamwww.io import open_store, write_store
from streamwww.state.betas import DiskBetas
from streamwww.state.checkpoint import CheckpointDir, CheckpointFallbackWarning
from streamwww.storage import location as _location
from streamwww.storage.location import is_storage_failure, location

from .conftest import make_classification, one_error_line

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

_TARGET = {"zarr": "shard-00001/X/c/0/0", "parquet": "shard-00001.parquet"}
_IO = "an I/O error, not damage"


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """A Zarr and a Parquet store of four shards (dense rows)."""
    root = tmp_path_factory.mktemp("stores")
    X, y = make_classification(np.random.default_rng(3), n=120, d=6, k=3, dtype=np.float32)
    return {fmt: write_store(root / fmt, X, y, shard_rows=30, format=fmt).path for fmt in ("zarr", "parquet")}


@pytest.fixture
def store_copy(stores, tmp_path):
    """A private copy of a store of ``fmt`` (its files may be replaced)."""
    import shutil

    def make(fmt):
        dst = tmp_path / fmt
        shutil.copytree(stores[fmt], dst)
        return dst

    return make


class _Unreadable:
    """A file that opens but fails every read with EIO (as a bad sector does): the
    OSError of a failed read names no file."""

    def __init__(self, f):
        self._f = f

    def fileno(self):
        return self._f.fileno()

    def _fail(self, *args, **kwargs):
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    read = readinto = readall = _fail

    def close(self):
        self._f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _break(monkeypatch, target, fault: str) -> str:
    """Make the local file ``target`` unreadable by ``fault``; the strerror to expect."""
    import builtins

    if fault == "directory":
        target.unlink()
        (target / "inside").mkdir(parents=True)
        return os.strerror(errno.EISDIR)
    real_open = builtins.open

    def failing_open(path, *args, **kwargs):
        if isinstance(path, (str, os.PathLike)) and os.fspath(path) == os.fspath(target):
            if fault == "EIO-on-open":
                raise OSError(errno.EIO, os.strerror(errno.EIO), os.fspath(path))
            if fault == "EACCES":
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), os.fspath(path))
            return _Unreadable(real_open(path, *args, **kwargs))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", failing_open)
    return os.strerror(errno.EACCES if fault == "EACCES" else errno.EIO)


def _assert_io_error(exc: BaseException, *needles: str) -> str:
    text = str(exc)
    assert isinstance(exc, StorageError) and not isinstance(exc, ShardFormatError), repr(exc)
    assert "\n" not in text and "damaged" not in text and "checksum" not in text, text
    for needle in needles:
        assert needle in text, text
    return text


def _one_error_line(capsys, command: str, *needles: str) -> str:
    """:func:`one_error_line`, never calling an I/O error damage."""
    err = one_error_line(capsys, command, *needles)
    assert "damaged" not in err, err
    return err


# ------------------------------------------------------------------ local shard files
@pytest.mark.parametrize("fault", ["directory", "EIO-on-open", "EIO-on-read", "EACCES"])
@pytest.mark.parametrize("fmt", ["zarr", "parquet"])
def test_a_shard_file_that_cannot_be_read_is_an_io_error_naming_store_shard_and_file(store_copy, monkeypatch,
                                                                                      fmt, fault):
    path = store_copy(fmt)
    target = path / _TARGET[fmt]
    cause = _break(monkeypatch, target, fault)
    store = open_store(path)
    assert store.read_shard(0)[0].shape == (30, 6)  # (the others read)
    for read in (lambda: store.read_shard(1), store.verify, lambda: store.read_shards([1], weights=True),
                 lambda: store.read_shards([0, 1, 2])):
        with pytest.raises(StorageError) as info:
            read()
        _assert_io_error(info.value, f"{path}: shard 1 (shard-00001", str(target), "cannot read", cause, _IO)
        assert info.value.errno == (errno.EISDIR if fault == "directory" else
                                    errno.EACCES if fault == "EACCES" else errno.EIO)
        if fmt == "zarr":
            assert "chunk 0.0 of array 'X'" in str(info.value)
    monkeypatch.undo()
    if fault != "directory":  # nothing was changed: once the file reads, the store does
        assert open_store(path).verify() == 4


@pytest.mark.parametrize("fault", ["directory", "EIO-on-read"])
def test_an_array_metadata_file_that_cannot_be_read_is_an_io_error(store_copy, monkeypatch, fault):
    """The array's zarr.json (read and checked against its recorded crc32c before Zarr
    parses it), and the store's streamwww.json."""
    path = store_copy("zarr")
    target = path / "shard-00002" / "y" / "zarr.json"
    cause = _break(monkeypatch, target, fault)
    with pytest.raises(StorageError) as info:
        open_store(path).read_shard(2)
    _assert_io_error(info.value, f"{path}: shard 2 (shard-00002)", str(target), "cannot read", cause, _IO)
    monkeypatch.undo()

    marker = path / "streamwww.json"
    cause = _break(monkeypatch, marker, "EIO-on-open")
    with pytest.raises(StorageError) as info:
        open_store(path)
    _assert_io_error(info.value, str(marker), "cannot read the store's metadata", cause, _IO)


@pytest.mark.parametrize("fmt", ["zarr", "parquet"])
def test_a_missing_shard_file_stays_damage(store_copy, fmt):
    path = store_copy(fmt)
    (path / _TARGET[fmt]).unlink()
    with pytest.raises(ChecksumError, match="missing"):
        open_store(path).read_shard(1)


@pytest.mark.parametrize("fmt", ["zarr", "parquet"])
def test_info_verify_says_cannot_read_not_damaged(store_copy, monkeypatch, capsys, fmt):
    path = store_copy(fmt)
    target = path / _TARGET[fmt]
    _break(monkeypatch, target, "EIO-on-read")
    for extra in ([], ["--json"], ["-v"]):
        assert main(["info", str(path), "--verify", *extra]) == 1
        _one_error_line(capsys, "info", str(path), "shard 1", str(target), "cannot read", _IO)


def test_train_reports_an_unreadable_shard_from_its_loader_thread_in_one_line(store_copy, monkeypatch, capsys,
                                                                             tmp_path):
    """The loader thread's error reaches the command line as it is: no checkpoint is
    written as if the data were damaged, no traceback."""
    import builtins
    import threading

    path = store_copy("zarr")
    real_open = builtins.open
    threads = set()

    def failing_open(p, *args, **kwargs):  # every shard's X: the first read fails, wherever it runs
        if isinstance(p, (str, os.PathLike)) and "/X/c/" in os.fspath(p) and os.fspath(p).startswith(str(path)):
            threads.add(threading.current_thread().name)
            raise OSError(errno.EIO, os.strerror(errno.EIO), os.fspath(p))
        return real_open(p, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", failing_open)
    ck = tmp_path / "ck"
    assert main(["train", str(path), "--checkpoint-dir", str(ck), "--model-out", str(tmp_path / "m.npz"),
                 "--max-iter", "3", "-q"]) == 1
    _one_error_line(capsys, "train", f"{path}: shard ", "/X/c/0/0: cannot read chunk 0.0 of array 'X'",
                    "Input/output error", _IO)
    assert any(name.startswith("streamwww-loader") for name in threads), threads
    assert not (ck / "manifest.json").exists() and not (tmp_path / "m.npz").exists()


def test_a_parquet_page_checksum_failure_stays_damage():
    """What pyarrow raises as OSError about the bytes it parses carries no errno: damage."""
    from streamwww.storage.fsutil import is_read_failure

    assert not is_read_failure(OSError("could not verify page integrity, CRC checksum verification failed"))
    assert not is_read_failure(FileNotFoundError(errno.ENOENT, "No such file or directory", "x"))
    assert is_read_failure(IsADirectoryError(errno.EISDIR, "Is a directory", "x"))
    assert is_read_failure(OSError(errno.EIO, "Input/output error"))


# ------------------------------------------------------------------ object stores
def _fail_requests(monkeypatch, part: str, exc: BaseException) -> list[str]:
    """Every read of a memory:// object whose path contains ``part`` raises ``exc``
    (Zarr's file system is made again, over the patched reads); the paths refused."""
    fs = fsspec.filesystem("memory")
    real = type(fs).cat_file
    refused = []

    def failing(self, path, *args, **kwargs):
        if part in path:
            refused.append(path)
            raise exc
        return real(self, path, *args, **kwargs)

    monkeypatch.setattr(type(fs), "cat_file", failing)
    monkeypatch.setattr(_location, "_ZARR_FS", {})
    return refused


class _ClientError(Exception):
    """An error of an object store's client that is neither an OSError nor "not found"
    (gcsfs raises its HttpError for a 5xx once its retries end)."""


_ClientError.__module__ = "gcsfs.retry"
_STORE_FAILURES = {"permission": PermissionError(errno.EACCES, "Access Denied (403)"),
                   "connection": ConnectionError("connection refused"),
                   "timeout": fsspec.exceptions.FSTimeoutError(),
                   "client": _ClientError("503 Service Unavailable"),
                   "other": RuntimeError("the session was closed")}


@pytest.mark.parametrize("failure", list(_STORE_FAILURES))
@pytest.mark.parametrize("fmt", ["zarr", "parquet"])
def test_an_object_store_that_fails_a_shard_read_is_a_storage_error(memory_root, monkeypatch, fmt, failure):
    url = memory_root + "/s"
    X, y = make_classification(np.random.default_rng(4), n=80, d=5, k=3, dtype=np.float32)
    write_store(url, X, y, shard_rows=20, format=fmt)
    store = open_store(url)
    refused = _fail_requests(monkeypatch, _TARGET[fmt], _STORE_FAILURES[failure])
    with pytest.raises(StorageError) as info:
        store.read_shard(1)
    assert refused
    _assert_io_error(info.value, f"{url}: shard 1 (shard-00001", "the object store failed the request")
    if fmt == "zarr":  # the array's metadata before its chunks: refused on the first request
        refused = _fail_requests(monkeypatch, "shard-00002/y/zarr.json", _STORE_FAILURES[failure])
        with pytest.raises(StorageError) as info:
            open_store(url).read_shard(2)
        _assert_io_error(info.value, f"{url}: shard 2 (shard-00002)", "zarr.json")
    monkeypatch.undo()
    assert open_store(url).verify() == 4


def test_info_verify_of_a_store_that_fails_says_so(memory_root, monkeypatch, capsys):
    url = memory_root + "/s"
    write_store(url, np.arange(40.0).reshape(10, 4), np.arange(10) % 2, shard_rows=5, format="parquet")
    _fail_requests(monkeypatch, "shard-00001.parquet", PermissionError(errno.EACCES, "Access Denied (403)"))
    assert main(["info", url, "--verify"]) == 1
    _one_error_line(capsys, "info", f"{url}: shard 1", "failed the request", "PermissionError")


def test_store_client_errors_are_storage_failures():
    assert is_storage_failure(_ClientError("503"))
    assert is_storage_failure(fsspec.exceptions.FSTimeoutError())
    assert not is_storage_failure(FileNotFoundError("gone"))
    assert not is_storage_failure(ValueError("bad bytes"))  # (a mixed context: a parser's)


def _remote_checkpoint(rng):
    """A memory:// checkpoint with two commits (the latest and the one before it)."""
    url = f"memory://io-errors-ck/{os.urandom(4).hex()}"
    with CheckpointDir(url) as ck:
        betas = DiskBetas(ck.path, 1, [4, 4], 3)
        betas.put_group([(0, rng.normal(size=(1, 4, 2))), (1, rng.normal(size=(1, 4, 2)))])
        ck.commit(1, np.ones((1, 3, 3)), {"cursor": {"epoch": 1}}, betas)
        betas.put(0, rng.normal(size=(1, 4, 2)))
        ck.commit(2, np.full((1, 3, 3), 2.0), {"cursor": {"epoch": 2}}, betas, wait=True)
        betas.close()
    return url


def _objects(url):
    fs = fsspec.filesystem("memory")
    base = location(url).path
    return {p: fs.cat_file(p) for p in fs.find(base)}


@pytest.mark.parametrize("part, failure", [("W-000002.npy", "permission"), ("manifest.json", "connection"),
                                           ("W-000002.npy", "other"), ("manifest.json", "client")])
def test_an_object_store_that_fails_a_checkpoint_read_is_never_a_fallback(monkeypatch, part, failure):
    url = _remote_checkpoint(np.random.default_rng(5))
    before = _objects(url)
    refused = _fail_requests(monkeypatch, part, _STORE_FAILURES[failure])
    with warnings.catch_warnings():
        warnings.simplefilter("error", CheckpointFallbackWarning)
        with CheckpointDir(url) as ck:
            with pytest.raises(StorageError) as info:
                ck.load()
    assert refused
    _assert_io_error(info.value, part, "failed")
    monkeypatch.undo()
    after = {p: b for p, b in _objects(url).items() if not p.endswith("/LOCK")}
    assert after == {p: b for p, b in before.items() if not p.endswith("/LOCK")}  # nothing set aside or deleted
    with CheckpointDir(url, lock=False) as ck:
        assert ck.load()[0]["step"] == 2


@pytest.mark.parametrize("failure", ["connection", "timeout", "client"])
def test_an_object_store_that_fails_a_beta_read_is_a_storage_error(monkeypatch, failure):
    url = _remote_checkpoint(np.random.default_rng(6))
    betas = DiskBetas(location(url), 1, [4, 4], 3)
    try:
        expect = betas.read(1, 1)
        refused = _fail_requests(monkeypatch, "s000001-v000001", _STORE_FAILURES[failure])
        with pytest.raises(StorageError) as info:
            betas.read(1, 1)
        assert refused
        _assert_io_error(info.value, "s000001-v000001", "failed")
        monkeypatch.undo()
        assert np.array_equal(betas.read(1, 1), expect)
    finally:
        betas.close()


def test_obstore_and_s3fs_both_refused_is_a_storage_error_not_damage(tmp_path, s3_server, monkeypatch):
    """On S3 the reads go through obstore, then again through s3fs: a permission error
    from both is the store's failure, for a shard and for a checkpoint's weights."""
    pytest.importorskip("obstore")
    import obstore
    from obstore.exceptions import PermissionDeniedError

    opts = s3_server.options
    X, y = make_classification(np.random.default_rng(7), n=60, d=4, k=3, dtype=np.float32)
    url = s3_server.url("s")
    write_store(url, X, y, shard_rows=20, format="parquet", storage_options=opts)
    store = open_store(url, storage_options=opts)
    fs = location(url, opts).fs  # (the store's: one instance per options)
    real_get, real_cat = obstore.get_async, fs.cat_file
    asked = []

    async def denied_get(store_, key, *args, **kwargs):
        if "shard-00001" in key or "W-" in key:
            asked.append(key)
            raise PermissionDeniedError("403 Forbidden")
        return await real_get(store_, key, *args, **kwargs)

    def denied_cat(path, *args, **kwargs):
        if "shard-00001" in path or "W-" in path:
            raise PermissionError(errno.EACCES, "Access Denied")
        return real_cat(path, *args, **kwargs)

    ck_url = s3_server.url("ck")
    with CheckpointDir(location(ck_url, opts)) as ck:
        ck.commit(1, np.ones((1, 3, 3)), {"cursor": {"epoch": 1}}, DiskBetas(ck.path, 1, [4], 3), wait=True)
    monkeypatch.setattr(obstore, "get_async", denied_get)
    monkeypatch.setattr(fs, "cat_file", denied_cat)
    with pytest.raises(StorageError) as info:
        store.read_shard(1)
    _assert_io_error(info.value, f"{url}: shard 1 (shard-00001.parquet)", "failed the request", "PermissionError")
    assert store.read_shard(2)[0].shape == (20, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CheckpointFallbackWarning)
        with pytest.raises(StorageError) as info:
            CheckpointDir(location(ck_url, opts), lock=False).load()
    _assert_io_error(info.value, f"{ck_url}/W-000001.npy", "PermissionError")
    assert asked  # (obstore was asked first)


# ------------------------------------------------------------------ Parquet reads and interpreter exit
@pytest.mark.parametrize("remote", [False, True])
def test_parquet_reads_hand_arrow_only_memory_it_owns(stores, memory_root, monkeypatch, remote):
    """pyarrow decodes columns on its own threads, and a decode task may release the bytes
    it read from after the read returned: Python memory released there at interpreter exit
    aborted the process (``info --verify`` of a Parquet store: "terminate called without an
    active exception", exit status 134, in a few runs of a hundred). The bytes a read
    parses are Arrow's own, never wrapped Python memory."""
    import pyarrow as pa

    path = stores["parquet"]
    if remote:
        path = memory_root + "/s"
        X, y = make_classification(np.random.default_rng(8), n=90, d=4, k=3, dtype=np.float32)
        write_store(path, X, y, shard_rows=30, format="parquet")
    store = open_store(path)

    def refused(*args, **kwargs):
        raise AssertionError("Python memory handed to Arrow")

    monkeypatch.setattr(pa, "py_buffer", refused)
    monkeypatch.setattr(pa, "BufferReader", lambda source: _arrow_reader(source, refused))
    assert store.verify() == store.n_shards


def _arrow_reader(source, refused):
    import pyarrow as pa

    if not isinstance(source, pa.Buffer):
        refused()
    return pa.lib.BufferReader(source)
