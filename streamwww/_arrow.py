"""NumPy arrays to Arrow arrays and back, without importing pandas.

pyarrow's ``pa.array(ndarray)``, ``Array.to_numpy()`` and ``ChunkedArray.to_numpy()`` ask
whether their argument is a pandas object, which imports pandas wherever it is installed
(most data-science environments, and this project's test extra), and
``pyarrow.parquet.read_table`` imports ``pyarrow.dataset``, whose set-up does the same. That
import is a large part of a small file's Parquet ``convert`` or ``train``
(docs/benchmarks-convert.md, "Parquet without pandas"). Numbers and offsets move through
Arrow's buffers here instead (zero-copy, both ways), and strings (a class label column of predictions) are encoded into Arrow's
offsets and bytes here; what these functions do not cover (booleans, nulls, objects that
are not all strings) goes through pyarrow's own conversion.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

__all__ = ["from_numpy", "to_numpy", "column_to_numpy"]


def from_numpy(a: np.ndarray) -> pa.Array:
    """A 1-D NumPy array as an Arrow array, sharing its memory (a contiguous copy first
    where ``a`` is strided); strings (NumPy's ``str`` or an object array of ``str``) as
    Arrow's ``string`` (``large_string`` past 2 GiB of text)."""
    a = np.asarray(a)
    if a.ndim == 1 and a.dtype.kind in "UO":
        strings = _strings(a)
        if strings is not None:
            return strings
    if a.ndim != 1 or a.dtype.kind not in "iuf":
        return pa.array(a)  # Arrow packs booleans in bits; the rest: pyarrow's rules
    a = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("="))  # Arrow's buffers are native
    return pa.Array.from_buffers(pa.from_numpy_dtype(a.dtype), len(a), [None, pa.py_buffer(a)])


# the most bytes of text Arrow's ``string`` holds (int32 offsets); past it, ``large_string``
STRING_BYTES = np.iinfo(np.int32).max


def _strings(a: np.ndarray) -> pa.Array | None:
    """``a``'s strings UTF-8 encoded into one buffer with their offsets; None where an
    object array holds anything but ``str`` (None, bytes, numbers: pyarrow's rules).

    The buffer is the encoding of all the strings joined (the same bytes as each one's
    encoding, one after the other), made by ``str``'s own C loops: the same order of time
    as ``pa.array``, without the pandas import ``pa.array`` does first where pandas is
    installed."""
    items = a.tolist()
    if a.dtype.kind == "O" and not all(type(s) is str for s in items):
        return None
    text = "".join(items)
    if text.isascii():  # a character is a byte
        data, lengths = text.encode("ascii"), map(len, items)
    else:
        data, lengths = text.encode(), map(len, map(str.encode, items))
    ends = np.cumsum(np.fromiter(lengths, dtype=np.int64, count=len(items)))
    large = len(items) > 0 and ends[-1] > STRING_BYTES
    offsets = np.zeros(len(items) + 1, dtype=np.int64 if large else np.int32)
    offsets[1:] = ends
    return pa.Array.from_buffers(pa.large_string() if large else pa.string(), len(items),
                                 [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def to_numpy(arr: pa.Array) -> np.ndarray:
    """An Arrow array's values as NumPy: a read-only view of its buffer for integers and
    floats without nulls, else pyarrow's conversion (a copy)."""
    t = arr.type
    if arr.null_count == 0 and (pa.types.is_integer(t) or pa.types.is_floating(t)):
        dtype = np.dtype(t.to_pandas_dtype())  # (a NumPy type; pandas is not imported)
        if len(arr) == 0:
            return np.empty(0, dtype=dtype)
        return np.frombuffer(arr.buffers()[1], dtype=dtype, count=len(arr),
                             offset=arr.offset * dtype.itemsize)
    return arr.to_numpy(zero_copy_only=False)


def column_to_numpy(column: pa.ChunkedArray) -> np.ndarray:
    """:func:`to_numpy` of a table's column (its chunks joined first where there are several)."""
    return to_numpy(column.chunk(0) if column.num_chunks == 1 else column.combine_chunks())
