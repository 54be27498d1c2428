"""What a path holds, told by its marker files or its first bytes: a shard store, a checkpoint
directory, a model file, a Parquet file, a CSV file or LIBSVM text. ``streamwww info`` uses it
to choose what to describe; the LIBSVM reader and the model loader, to say what they were
given instead of what they expected (a model where the data goes, a Parquet file where LIBSVM
text goes).

Imports nothing beyond the standard library at module level: the CLI's parser and the
readers' error paths load it cheaply.
"""

from __future__ import annotations

import bz2
import lzma
import re
import zlib

__all__ = ["is_store", "what_is", "file_kind", "misplaced"]

# bytes read from the start of a file to tell what it is (a compressed file: decompressed)
_HEAD_BYTES = 1 << 16

_NAMES = {
    "store": "a shard store",
    "checkpoint": "a checkpoint directory",
    "model": "a streamwww model file (.npz)",
    "parquet": "a Parquet file",
    "csv": "a CSV file",
    "libsvm": "a LIBSVM data file",
    "binary": "a binary file",
    "directory": "a directory",
}
_LIBSVM_TEXT = "LIBSVM text (one 'label index:value ...' line per row)"
# after "PATH is X, not LIBSVM text": what to do instead
_TEXT_HINTS = {
    "parquet": "; streamwww reads Parquet only as a store's shards (`streamwww convert --format parquet` writes one)",
    "csv": ("; write it as LIBSVM text first (e.g. sklearn.datasets.dump_svmlight_file), or train on "
            "its arrays from Python: streamwww.train((X, y))"),
    "model": "; a model file is what predict, evaluate and info read",
    "store": "; give the store itself where a store is taken (train, evaluate, predict)",
    "checkpoint": "; continue its run with `streamwww resume DIR`",
}
_PAIR = re.compile(r"[+-]?\d+:\S+")


def is_store(path) -> bool:
    """Whether ``path`` (a Location) holds a complete store: its commit marker is there.

    Parameters
    ----------
    path : Location

    Returns
    -------
    bool
    """
    from streamwww.io._format import MARKER  # (here: the parser stays free of NumPy and SciPy)

    return path.child(MARKER).isfile()


def what_is(path, required: bool = False) -> str | None:
    """'store', 'checkpoint' or 'model' by what ``path`` (a Location) holds.

    Parameters
    ----------
    path : Location
    required : bool
        Raise where ``path`` holds none of them (else return None).

    Returns
    -------
    str or None
        None for none of them.

    Raises
    ------
    FileNotFoundError
        Where nothing is there.
    ValueError
        With ``required``, where ``path`` holds none of them: a one-line message.
    """
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    if is_store(path):
        return "store"
    if path.child("manifest.json").isfile() or path.child("manifest.prev.json").isfile():
        return "checkpoint"
    if not path.isdir() and (path.name.endswith(".npz") or _head(path, 4) == b"PK\x03\x04"):
        return "model"  # (by content too: `train --model-out NAME` keeps NAME as given)
    if required:
        from streamwww.io._format import MARKER

        raise ValueError(f"{path}: not a shard store (no {MARKER}; an interrupted conversion leaves none), "
                         f"a checkpoint directory (no manifest.json) or a model file (.npz); give one of those")
    return None


def file_kind(path) -> str | None:
    """What ``path`` (a Location) holds: :func:`what_is`'s kinds, else what the first bytes
    of a file say (a compressed file's decompressed ones).

    Parameters
    ----------
    path : Location

    Returns
    -------
    str or None
        ``'store'``, ``'checkpoint'``, ``'model'``, ``'directory'``, ``'parquet'``, ``'csv'``,
        ``'libsvm'`` or ``'binary'``; None where it cannot be told (nothing there, an
        unreadable or empty file, text of no known kind). Never raises: it serves error paths.
    """
    try:
        kind = what_is(path)
        if kind is not None:
            return kind
        if path.isdir():
            return "directory"
        head = _head(path, _HEAD_BYTES)
    except Exception:  # (an error path asks: its own error stands when this one cannot tell)
        return None
    if head.startswith(b"PAR1"):
        return "parquet"
    text = _decompressed(head)
    if not text:
        return None
    if b"\0" in text:
        return "binary"
    return _text_kind(text.split(b"\n", 1)[0].decode("utf-8", "replace"))


def misplaced(path, expected: str, name: str | None = None) -> str | None:
    """One line saying what ``path`` is, where ``expected`` was expected; None when it is
    that (or cannot be told).

    Parameters
    ----------
    path : Location
        What was given.
    expected : {'model', 'libsvm'}
        What the caller reads: a model file, or LIBSVM text.
    name : str, optional
        ``path`` as the user wrote it (default: the Location's URL).

    Returns
    -------
    str or None
        E.g. ``"data.libsvm: a LIBSVM data file, not a model file (.npz)"`` or
        ``"plain.parquet: a Parquet file, not LIBSVM text (...); ..."``.
    """
    kind = file_kind(path)
    if kind is None or kind == expected or (expected == "libsvm" and kind == "directory"):
        return None
    name = str(path) if name is None else name
    if expected == "model":
        return f"{name}: {_NAMES[kind]}, not a model file (.npz)"
    return f"{name}: {_NAMES[kind]}, not {_LIBSVM_TEXT}{_TEXT_HINTS.get(kind, '')}"


def _head(path, n: int) -> bytes:
    """The first ``n`` bytes of the file ``path`` (a Location)."""
    with path.fs.open(path.path, "rb") as f:
        return f.read(n)


def _decompressed(head: bytes) -> bytes:
    """``head`` decompressed as far as it goes when it starts as gzip, bz2 or xz data does
    (b"" where nothing can be decompressed from it yet), else ``head`` itself."""
    try:
        if head.startswith(b"\x1f\x8b"):
            return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, _HEAD_BYTES)
        if head.startswith(b"BZh"):
            return bz2.BZ2Decompressor().decompress(head, _HEAD_BYTES)
        if head.startswith(b"\xfd7zXZ\x00"):
            return lzma.LZMADecompressor().decompress(head, _HEAD_BYTES)
    except (OSError, EOFError, ValueError, zlib.error, lzma.LZMAError):
        return b""
    return head


def _text_kind(line: str) -> str | None:
    """'csv' or 'libsvm' by a file's first line; None for neither."""
    body = line.split("#", 1)[0].strip()
    if not body:
        return None
    if ":" not in body and body.count(",") >= 2:  # a header or a row of three or more fields
        return "csv"
    tokens = body.split()
    if len(tokens) >= 2 and ":" not in tokens[0] and all(_PAIR.fullmatch(t) for t in tokens[1:]):
        return "libsvm"
    return None
