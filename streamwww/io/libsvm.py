"""Streaming reader of LIBSVM / SVMlight text files.

The file is read in large pieces (32 MiB of text by default) that end at a line
boundary; a background thread reads and decompresses the next piece while a
Numba kernel (:mod:`streamwww.io._libsvm_kernels`) parses the one after the
piece whose rows are being handed out, into CSR arrays. Memory is bounded by
three pieces and the parse arrays of two, whatever the file size.

Accepted text: one sample per line, ``label index:value index:value ...``;
``#`` starts a comment; blank lines, ``qid:N`` fields, CRLF line ends and extra
spaces or tabs are ignored; labels are numbers such as ``+1``, ``-1``, ``2.0``,
smaller than 2**53 in magnitude (read as float64, larger integers would merge);
indices are 1-based unless ``zero_based=True`` and may come in any order within
a row (they are sorted on the way in). gzip, bz2 and xz files are recognised by
their magic bytes. Anything else stops with a
:class:`~streamwww.errors.LibsvmFormatError` that names the file and the line.
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
import logging
import lzma
import os
import queue
import threading
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from streamwww.errors import DataFormatError, InputReadError, LibsvmFormatError
from streamwww.io import _libsvm_kernels as K
from streamwww.io._progress import ProgressCallback, ProgressEvent
from streamwww.io.sniff import misplaced
from streamwww.storage.location import Location, is_url, location

__all__ = [
    "LibsvmBlock",
    "LibsvmReader",
    "LibsvmStats",
    "iter_libsvm_blocks",
    "load_libsvm",
    "open_compressed",
]

logger = logging.getLogger(__name__)

DEFAULT_BLOCK_BYTES = 32 * 2**20
_PARALLEL_MIN_BYTES = 2 * 2**20  # pieces at least this large are parsed by several threads
_MAX_SKIP_EXAMPLES = 10

_MAGIC = ((b"\x1f\x8b", "gzip"), (b"BZh", "bz2"), (b"\xfd7zXZ\x00", "xz"))
_OPENERS = {
    "gzip": lambda raw, mode: gzip.GzipFile(fileobj=raw, mode=mode, compresslevel=6),
    "bz2": lambda raw, mode: bz2.BZ2File(raw, mode=mode),
    "xz": lambda raw, mode: lzma.LZMAFile(raw, mode=mode),
}
_EXTENSIONS = {".gz": "gzip", ".bz2": "bz2", ".xz": "xz"}


def _open_raw(path, mode: str):
    """The file itself: a local file, or (a URL or remote Location) fsspec's buffered
    file on the object store, read ahead in large blocks."""
    if isinstance(path, Location) or is_url(path):
        loc = location(path)
        if not loc.is_local:
            return loc.fs.open(loc.path, mode, block_size=2**23, cache_type="readahead") \
                if mode == "rb" else loc.fs.open(loc.path, mode)
        path = loc.path
    return open(path, mode)


def detect_compression(path: str | os.PathLike | Location) -> str | None:
    """Return ``"gzip"``, ``"bz2"``, ``"xz"`` or None from the file's magic bytes."""
    with _open_raw(path, "rb") as f:
        head = f.read(6)
    for magic, name in _MAGIC:
        if head.startswith(magic):
            return name
    return None


def compression_from_extension(path: str | os.PathLike) -> str | None:
    """Return the compression implied by a ``.gz``, ``.bz2`` or ``.xz`` suffix."""
    return _EXTENSIONS.get(Path(str(path)).suffix.lower())


def open_compressed(path: str | os.PathLike, mode: str = "rb", *,
                    compression: str | None = None):
    """Open a possibly compressed file in binary mode.

    For reading, the compression is taken from the magic bytes; for writing
    (``mode="wb"``), from ``compression`` (``"gzip"``, ``"bz2"``, ``"xz"``),
    else from the extension of ``path``.

    Returns
    -------
    f : binary file object
        The decompressed (or compressing) stream.
    raw : binary file object
        The file on disk under it (``raw.tell()`` gives the bytes consumed).
        Close ``f`` first, then ``raw``.
    """
    if mode == "rb":
        kind = detect_compression(path)
    elif mode == "wb":
        kind = compression or compression_from_extension(path)
    else:
        raise ValueError(f"open_compressed: mode must be 'rb' or 'wb'. Got {mode!r} instead.")
    if kind not in (None, *_OPENERS):
        raise ValueError(f"open_compressed: compression must be one of {list(_OPENERS)} or "
                         f"None. Got {kind!r} instead.")
    raw = _open_raw(path, mode)
    if kind is None:
        return raw, raw
    try:
        return _OPENERS[kind](raw, mode), raw
    except BaseException:
        raw.close()
        raise


@dataclass
class LibsvmBlock:
    """Rows parsed from one piece of a LIBSVM file.

    Attributes
    ----------
    indptr : ndarray of int64, shape (n_rows + 1,)
    indices : ndarray of int32, shape (nnz,)
        0-based columns, sorted and unique within each row.
    data : ndarray of float32 or float64, shape (nnz,)
    labels : ndarray of float64, shape (n_rows,)
        Label values as written in the file.
    lines : ndarray of int64, shape (n_rows,)
        1-based line number of each row.
    input_offset : int
        Bytes of the input file (as stored, compressed or not) consumed when
        this block was read; with the file size it gives the progress.
    """

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    labels: np.ndarray
    lines: np.ndarray
    input_offset: int = 0

    @property
    def n_rows(self) -> int:
        return len(self.labels)

    def to_csr(self, n_features: int | None = None) -> sp.csr_matrix:
        """Return the rows as a CSR matrix with ``n_features`` columns
        (default: just enough for this block)."""
        if n_features is None:
            n_features = int(self.indices.max()) + 1 if len(self.indices) else 0
        X = sp.csr_matrix((self.data, self.indices, self.indptr),
                          shape=(self.n_rows, n_features))
        X.has_sorted_indices = True
        return X


@dataclass
class LibsvmStats:
    """What a complete pass over a LIBSVM file saw.

    Attributes
    ----------
    path : str
        Absolute path of the file.
    size : int
        Bytes of the file on disk.
    compression : str or None
        ``"gzip"``, ``"bz2"``, ``"xz"`` or None.
    text_bytes : int
        Bytes of (decompressed) text.
    sha256 : str
        SHA-256 of the decompressed text (empty until the pass ends).
    n_lines, n_rows, nnz : int
        Lines read, rows (samples) produced, stored values.
    max_column : int
        Largest 0-based column seen, -1 if none.
    skipped_lines : int
        Malformed lines skipped with ``skip_bad_lines=True``.
    skipped_examples : list of str
        Messages of the first skipped lines.
    """

    path: str
    size: int
    compression: str | None
    text_bytes: int = 0
    sha256: str = ""
    n_lines: int = 0
    n_rows: int = 0
    nnz: int = 0
    max_column: int = -1
    skipped_lines: int = 0
    skipped_examples: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        """Return the statistics as a JSON-able dict."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


# What decompressors and reads raise on truncated or corrupt input: EOFError
# (truncated gzip/bz2/xz), gzip.BadGzipFile and bz2's "Invalid data stream"
# (OSError), lzma.LZMAError, zlib.error, and I/O errors (OSError).
_READ_ERRORS = (EOFError, OSError, lzma.LZMAError, zlib.error)
_TEST_COMMAND = {"gzip": "gzip -t", "bz2": "bzip2 -t", "xz": "xz -t"}


class _ReadFailure(Exception):
    """A read error of the prefetch thread, with how far reading had got."""

    def __init__(self, cause: BaseException, text_bytes: int, raw_pos: int, lines: int):
        super().__init__(str(cause))
        self.cause, self.text_bytes, self.raw_pos = cause, text_bytes, raw_pos
        self.lines = lines  # complete lines read but not handed on


class _Prefetcher:
    """Read (and decompress) the file in a background thread, in pieces of
    about ``block_bytes`` that end at a line boundary (the last piece may
    lack its final newline).

    Yields ``(piece, raw_position)`` with ``piece`` a uint8 array; hashes the
    decompressed bytes on the way. zlib, lzma, bz2, hashlib, file reads and the
    newline search release the GIL, so this overlaps with parsing. A finished
    piece is handed over before the next one is read (the reader holds one
    piece at a time: the consumer parses one ahead).
    """

    def __init__(self, path, block_bytes: int):
        self._path = path
        self._block_bytes = block_bytes
        self._queue: queue.Queue = queue.Queue(maxsize=1)
        self._taken = threading.Event()
        self._stop = threading.Event()
        self.sha256 = hashlib.sha256()
        self.text_bytes = 0
        self.raw_pos = 0  # bytes of the file consumed by the last complete read
        self._thread = threading.Thread(target=self._run, name="streamwww-libsvm-reader",
                                        daemon=True)

    def _put(self, item) -> bool:
        """Hand ``item`` over and wait until it is taken (False: stopped)."""
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                break
            except queue.Full:
                continue
        while not self._stop.is_set():
            if self._taken.wait(0.1):
                self._taken.clear()
                return True
        return False

    _STEP = 2**20  # read calls of at most this: a failure is located to within it

    def _fill(self, f, raw, view: memoryview) -> int:
        got = 0
        while got < len(view):
            n = f.readinto(view[got:got + self._STEP])
            if not n:
                break
            got += n
            self._filled, self.raw_pos = got, raw.tell()
        return got

    def _run(self) -> None:
        buf, start = None, 0
        self._filled = 0
        try:
            f, raw = open_compressed(self._path, "rb")
            with f, raw:
                carry = np.empty(0, dtype=np.uint8)
                while not self._stop.is_set():
                    buf = np.empty(len(carry) + self._block_bytes, dtype=np.uint8)
                    buf[:len(carry)] = carry
                    start, self._filled = len(carry), 0
                    got = self._fill(f, raw, memoryview(buf)[len(carry):])
                    if not got:
                        if len(carry) and not self._put((carry, raw.tell())):
                            return
                        break
                    filled = len(carry) + got
                    self.sha256.update(memoryview(buf)[len(carry):filled])
                    self.text_bytes += got
                    last_nl = K.find_newline(buf, len(carry), filled, True)
                    if last_nl < 0:  # a line longer than the block: keep reading
                        carry = buf[:filled]
                        continue
                    carry = buf[last_nl + 1:filled].copy()
                    if not self._put((buf[:last_nl + 1], raw.tell())):
                        return
            self._put(None)
        except _READ_ERRORS as exc:  # the consumer adds the lines it has parsed
            lines = 0 if buf is None else int(np.count_nonzero(buf[:start + self._filled] == 10))
            self._put(_ReadFailure(exc, self.text_bytes + self._filled, self.raw_pos, lines))
        except BaseException as exc:  # handed to the consumer
            self._put(exc)

    def __iter__(self):
        self._thread.start()
        try:
            while True:
                item = self._queue.get()
                self._taken.set()
                if item is None:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            self._stop.set()
            self._thread.join()


_MESSAGES = {
    K.E_MISSING_LABEL: "missing label: the line starts with {tok!r}; expected a label "
                       "such as '1' or '-1' before the 'index:value' pairs",
    K.E_MULTILABEL: "multi-label target {tok!r} is not supported (one label per line)",
    K.E_BAD_LABEL: "label {tok!r} is not a number",
    K.E_NONFINITE_LABEL: "label {tok!r} is NaN or infinite",
    K.E_NO_COLON: "expected 'index:value', got {tok!r}",
    K.E_BAD_INDEX: "index of {tok!r} is not a non-negative integer",
    K.E_NEGATIVE_INDEX: "negative index in {tok!r}",
    K.E_ZERO_INDEX: "index 0 in {tok!r} but indices are 1-based; use --zero-based "
                    "(zero_based=True) for a 0-based file",
    K.E_BAD_VALUE: "value of {tok!r} is not a number",
    K.E_NONFINITE_VALUE: "value of {tok!r} is NaN or infinite",
    K.E_DUPLICATE_INDEX: "duplicate index {index} in one row",
    K.E_INDEX_TOO_LARGE: "index in {tok!r} is out of range: {limit}",
    K.E_VALUE_RANGE: "value of {tok!r} is too large for {dtype}",
}


#: Labels are read as float64, which holds every integer exactly only below 2**53:
#: 9007199254740993 reads as 9007199254740992, and the two would be one class. A label
#: of this magnitude or more is refused (integers or not: from here on a float64 is an
#: integer that may stand for several).
LABEL_LIMIT = 2.0**53


def _label_too_large(token: str) -> str:
    """The message of a label at or beyond :data:`LABEL_LIMIT` in magnitude."""
    return (f"label {token!r} is too large: labels are read as float64 numbers, which tell integers "
            f"apart only below 2**53 = 9007199254740992 (9007199254740993 would read as "
            f"9007199254740992 and merge into its class); number the classes with smaller labels")


def _label_token(buf: np.ndarray, line: int) -> str:
    """The first token (the label) of line ``line`` (1-based) of ``buf``; for error messages only."""
    starts = np.flatnonzero(buf == 10)
    p = 0 if line == 1 else int(starts[line - 2]) + 1
    while p < len(buf) and buf[p] in (32, 9):
        p += 1
    end = p
    while end < len(buf) and buf[end] not in (32, 9, 10, 13):
        end += 1
    return _token(buf, p, end)


def _token(buf: np.ndarray, start: int, end: int) -> str:
    text = bytes(buf[start:min(end, start + 60)]).decode("utf-8", "replace")
    return text + ("..." if end - start > 60 else "")


class LibsvmReader:
    """Iterate over a LIBSVM file in blocks of rows without loading it whole.

    Parameters
    ----------
    path : str or path-like
        Text file, optionally gzip, bz2 or xz compressed.
    zero_based : bool, default=False
        Indices in the file start at 0 (else at 1, and index 0 is an error).
    dtype : {numpy.float32, numpy.float64}, default=numpy.float32
        Type of the stored values. Values are parsed exactly as float64 and
        then rounded, like ``float(token)``.
    n_features : int, optional
        Number of columns; an index beyond it is an error naming the line.
    skip_bad_lines : bool, default=False
        Skip malformed lines and count them in :attr:`stats` instead of
        stopping at the first one.
    block_bytes : int, default=32 MiB
        Bytes of text parsed at a time (memory is a few times this).
    n_threads : int, optional
        Threads parsing parts of a block in parallel (default: CPU count).
        Results do not depend on it.
    progress : callable, optional
        Called with a :class:`~streamwww.io.ProgressEvent` (stage ``"read"``)
        after each block.

    Attributes
    ----------
    stats : LibsvmStats
        Counts and provenance; complete once the iteration has ended.

    Examples
    --------
    >>> for block in LibsvmReader("train.libsvm.xz"):   # doctest: +SKIP
    ...     X, labels = block.to_csr(), block.labels
    """

    def __init__(self, path: str | os.PathLike, *, zero_based: bool = False,
                 dtype=np.float32, n_features: int | None = None,
                 skip_bad_lines: bool = False, block_bytes: int = DEFAULT_BLOCK_BYTES,
                 n_threads: int | None = None, progress: ProgressCallback | None = None):
        self.location = location(path)
        self.path = self.location.url
        if not self.location.isfile():
            raise FileNotFoundError(f"LIBSVM input {self.path} does not exist or is not a file.")
        self.dtype = np.dtype(dtype)
        if self.dtype not in (np.float32, np.float64):
            raise ValueError(f"The 'dtype' parameter of LibsvmReader must be float32 or "
                             f"float64. Got {dtype!r} instead.")
        if n_features is not None and not 0 <= int(n_features) <= K.MAX_INDEX:
            raise ValueError(f"The 'n_features' parameter of LibsvmReader must be an int in "
                             f"[0, {K.MAX_INDEX}]. Got {n_features!r} instead.")
        if int(block_bytes) < 1:
            raise ValueError(f"The 'block_bytes' parameter of LibsvmReader must be a positive "
                             f"int. Got {block_bytes!r} instead.")
        self.zero_based = bool(zero_based)
        self.n_features = None if n_features is None else int(n_features)
        self.skip_bad_lines = bool(skip_bad_lines)
        self.block_bytes = int(block_bytes)
        self.n_threads = max(1, int(n_threads or os.cpu_count() or 1))
        self.progress = progress
        try:
            compression = detect_compression(self.location)
            size = (os.path.getsize(self.path) if self.location.is_local
                    else int(self.location.fs.size(self.location.path)))
        except OSError as exc:
            raise InputReadError(f"{self.path}: cannot read the file: "
                                 f"{exc.strerror or exc}") from exc
        self.stats = LibsvmStats(path=self.path, size=size, compression=compression)

    def __iter__(self) -> Iterator[LibsvmBlock]:
        stats = self.stats
        prefetch = _Prefetcher(self.location, self.block_bytes)
        chunks = iter(prefetch)
        pool = ThreadPoolExecutor(self.n_threads) if self.n_threads > 1 else None
        try:
            # the next piece is parsed while the blocks of this one are handed out
            pending = None
            for piece, raw_pos in chunks:
                started = self._start(piece, raw_pos, pool)
                if pending is not None:
                    yield from self._collect(*pending)
                pending = started
            if pending is not None:
                yield from self._collect(*pending)
        except _ReadFailure as failure:
            raise self._read_error(failure) from failure.cause
        finally:
            chunks.close()  # stops the reader thread on errors and early exits
            if pool is not None:
                pool.shutdown()
        stats.sha256 = prefetch.sha256.hexdigest()
        stats.text_bytes = prefetch.text_bytes
        if stats.skipped_lines:
            logger.warning("%s: skipped %d malformed line(s); first: %s", self.path,
                           stats.skipped_lines, "; ".join(stats.skipped_examples[:3]))

    def _read_error(self, failure: _ReadFailure) -> InputReadError:
        """One-line error for a read that failed after the blocks parsed so far."""
        stats, cause = self.stats, failure.cause
        kind = stats.compression
        where = (f"near line {stats.n_lines + failure.lines + 1} (after {failure.text_bytes} "
                 f"bytes of text, byte {failure.raw_pos} of {stats.size} of the file)")
        reason = f"{type(cause).__name__}: {cause}"
        io_error = isinstance(cause, OSError) and cause.errno is not None  # not bad data
        if kind is not None and not io_error:
            return InputReadError(
                f"{self.path}: the {kind} data is truncated or corrupt; reading stopped {where}: "
                f"{reason}. Check the file with `{_TEST_COMMAND[kind]} {self.path}` and "
                f"download or compress it again.")
        return InputReadError(f"{self.path}: cannot read the file; reading stopped {where}: "
                              f"{reason}")

    def _start(self, buf: np.ndarray, raw_pos: int, pool) -> tuple:
        """Start parsing whole lines; large pieces are cut at line ends into one
        part per thread, parsed in parallel (the kernel releases the GIL).
        :meth:`_collect` hands the blocks out in order."""
        n = len(buf)
        parts = [buf]
        if pool is not None and n >= _PARALLEL_MIN_BYTES:
            cuts = [0]
            for k in range(1, self.n_threads):
                nl = K.find_newline(buf, max(cuts[-1], n * k // self.n_threads), n, False)
                if nl < 0 or nl + 1 >= n:
                    break
                cuts.append(nl + 1)
            cuts.append(n)
            parts = [buf[a:b] for a, b in zip(cuts[:-1], cuts[1:]) if b > a]
        if pool is None:
            return parts, [self._run_kernel(parts[0])], raw_pos
        return parts, [pool.submit(self._run_kernel, part) for part in parts], raw_pos

    def _collect(self, parts: list, results: list, raw_pos: int) -> Iterator[LibsvmBlock]:
        for part, result in zip(parts, results):
            if not isinstance(result, tuple):
                result = result.result()
            block = self._finish(part, result, raw_pos)
            if block is not None:
                yield block
        if self.progress is not None:
            self.progress(ProgressEvent("read", raw_pos, self.stats.size, self.stats.n_rows))

    def _run_kernel(self, buf: np.ndarray) -> tuple:
        """Run the parser on ``buf`` with line numbers relative to its start."""
        n = len(buf)
        colons, newlines = K.count_bounds(buf, n)
        rows_cap = newlines + 1
        arrays = (np.empty(rows_cap, dtype=np.float64),  # labels
                  np.empty(rows_cap, dtype=np.int64),  # lines
                  np.empty(rows_cap + 1, dtype=np.int64),  # indptr
                  np.empty(colons, dtype=np.int32),  # indices
                  np.empty(colons, dtype=self.dtype),  # data
                  # worst case every token is slow; untouched pages cost nothing
                  np.empty((colons + rows_cap, 5), dtype=np.int64),  # slow
                  np.zeros(5, dtype=np.int64),  # err
                  np.empty((_MAX_SKIP_EXAMPLES, 5), dtype=np.int64))  # skipped
        max_col = K.MAX_INDEX - 1 if self.n_features is None else self.n_features - 1
        counts = K.parse_piece(buf, n, self.zero_based, max_col, self.skip_bad_lines, 0,
                               *arrays)
        return arrays, counts

    def _finish(self, buf: np.ndarray, result: tuple, raw_pos: int) -> LibsvmBlock | None:
        """Check one parsed part, fix slow tokens and line numbers, update stats."""
        stats = self.stats
        (labels, lines, indptr, indices, data, slow, err, skipped), counts = result
        n_rows, nnz, n_lines, n_slow, n_skipped = counts
        line0 = stats.n_lines
        if err[0] != 0:
            if line0 + int(err[1]) == 1:  # a file of another kind (Parquet, CSV, a model): say which
                wrong = misplaced(self.location, "libsvm")
                if wrong is not None:
                    raise DataFormatError(wrong)
            raise LibsvmFormatError(self.path, line0 + int(err[1]), self._message(buf, err))
        for kind, target, start, end, line in slow[:n_slow]:
            value = float(bytes(buf[start:end]))
            code = 0
            if not np.isfinite(value):
                code = K.E_NONFINITE_LABEL if kind == 1 else K.E_NONFINITE_VALUE
            elif kind == 1:
                labels[target] = value
            else:
                with np.errstate(over="ignore"):
                    data[target] = value
                if not np.isfinite(data[target]):  # finite float64, too large for float32
                    code = K.E_VALUE_RANGE
            if code:
                raise LibsvmFormatError(self.path, line0 + int(line), self._message(
                    buf, np.array([code, line, start, end, 0])))
        big = np.flatnonzero(np.abs(labels[:n_rows]) >= LABEL_LIMIT)
        if len(big):
            line = int(lines[big[0]])
            raise LibsvmFormatError(self.path, line0 + line, _label_too_large(_label_token(buf, line)))
        if n_skipped:
            room = _MAX_SKIP_EXAMPLES - len(stats.skipped_examples)
            for rec in skipped[:min(n_skipped, room, len(skipped))]:
                stats.skipped_examples.append(
                    f"line {line0 + rec[1]}: {self._message(buf, rec)}")
            stats.skipped_lines += int(n_skipped)
        stats.n_lines += int(n_lines)
        stats.n_rows += int(n_rows)
        stats.nnz += int(nnz)
        if nnz:
            stats.max_column = max(stats.max_column, int(indices[:nnz].max()))
        if not n_rows:
            return None
        lines = lines[:n_rows]
        lines += line0
        return LibsvmBlock(indptr[:n_rows + 1], indices[:nnz], data[:nnz], labels[:n_rows],
                           lines, raw_pos)

    def _message(self, buf: np.ndarray, err: np.ndarray) -> str:
        code, _, start, end, extra = (int(v) for v in err)
        if self.n_features is not None:
            limit = f"n_features is {self.n_features}"
        else:
            largest = K.MAX_INDEX - (1 if self.zero_based else 0)
            limit = f"the largest supported index is {largest}"
        return _MESSAGES[code].format(tok=_token(buf, start, end),
                                      index=extra + (0 if self.zero_based else 1),
                                      limit=limit, dtype=self.dtype.name)


def iter_libsvm_blocks(path: str | os.PathLike, **kwargs) -> Iterator[LibsvmBlock]:
    """Iterate over the rows of a LIBSVM file in blocks.

    Shorthand for ``iter(LibsvmReader(path, **kwargs))``; see
    :class:`LibsvmReader` for the parameters.
    """
    return iter(LibsvmReader(path, **kwargs))


def load_libsvm(path: str | os.PathLike, *, zero_based: bool = False, dtype=np.float32,
                n_features: int | None = None, skip_bad_lines: bool = False,
                block_bytes: int = DEFAULT_BLOCK_BYTES) -> tuple[sp.csr_matrix, np.ndarray]:
    """Load a whole LIBSVM file into memory (for small files and tests).

    Parameters
    ----------
    path, zero_based, dtype, n_features, skip_bad_lines, block_bytes
        As in :class:`LibsvmReader`.

    Returns
    -------
    X : scipy.sparse.csr_matrix of shape (n_rows, n_features)
        ``n_features`` defaults to the largest column seen plus one.
    labels : ndarray of float64 of shape (n_rows,)
    """
    reader = LibsvmReader(path, zero_based=zero_based, dtype=dtype, n_features=n_features,
                          skip_bad_lines=skip_bad_lines, block_bytes=block_bytes)
    blocks = list(reader)
    n_cols = n_features if n_features is not None else reader.stats.max_column + 1
    if not blocks:
        return sp.csr_matrix((0, n_cols), dtype=reader.dtype), np.empty(0, dtype=np.float64)
    X = sp.vstack([b.to_csr(n_cols) for b in blocks], format="csr")
    X.has_sorted_indices = True
    return X, np.concatenate([b.labels for b in blocks])
