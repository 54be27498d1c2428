"""Recycled large buffers for the arrays streaming makes for every shard, every epoch.

A streamed epoch allocates the same few large arrays again and again: a group's
rows (``y``, ``indices``, ``data`` or ``X``), its ``beta``, its row norms.  glibc
returns large freed blocks to the OS (streamwww fixes its thresholds so that
peak RSS stays bounded, :mod:`streamwww._memory`), so each new array is fresh
zeroed pages, which the kernel hands out one page fault at a time (system CPU
every epoch); this pool removes most of those faults, within the memory budget
or beyond it (tools/bench_speed.py; docs/benchmarks.md, "Fixed cost of a
streamed epoch").

:func:`empty` lends such arrays from a pool and takes them back when nothing
references them any more, so their pages stay mapped and are reused.  A
buffer is free when its reference count (CPython's) shows no array, view,
memoryview or matrix built on it: every NumPy view of a pooled array holds its
base, so a shard kept in memory, a ``beta`` queued for its background write or
a block still in a kernel's hands keeps its buffer out of the pool.  Nothing
else ever writes to a lent buffer.  No library does this for NumPy arrays
(NumPy caches only small blocks; glibc's own reuse is what the fixed thresholds
turn off), hence this module.

Memory stays bounded: buffers are made only when none of their size is free,
so the pool holds at most what the pipeline had in use at once (per size
class, sizes rounded up by at most 1/8), and a free buffer that no request took
for :data:`IDLE_TAKES` requests is dropped.  The pool lends only inside
:func:`recycling` (a training run, :func:`streamwww.engine.run.fit_source`; a
cluster worker's rounds, from its first task to the end of the run,
:mod:`streamwww.engine.cocoa`) and is emptied when the last such scope ends;
elsewhere (prediction, a user's ``read_shards``) :func:`empty` is :func:`numpy.empty`.
"""

from __future__ import annotations

import math
import sys
import threading
from contextlib import contextmanager

import numpy as np

__all__ = ["empty", "recycling", "pooled_bytes"]

# Smaller arrays come from NumPy and malloc directly (their heap is reused anyway).
MIN_BYTES = 64 * 1024
# A free buffer not taken by any of this many requests is dropped (returned to the OS).
IDLE_TAKES = 512
# At most this many buffers of one size class (in use or free) are pooled.
MAX_PER_CLASS = 64

_lock = threading.Lock()
# (dtype, size class in bytes) -> its buffers, each [base array, the request count when last lent]
_pool: dict[tuple[str, int], list[list]] = {}
_takes = 0
_scopes = 0  # recycling() scopes open


def _size_class(nbytes: int) -> int:
    """``nbytes`` rounded up to a multiple of an eighth of its power of two (waste <= 1/8)."""
    step = 1 << max(0, int(nbytes).bit_length() - 4)
    return -(-int(nbytes) // step) * step


def _refs_when_free() -> int:
    """The reference count :func:`_free` sees for a buffer only the pool holds."""
    probe = [[np.empty(1, dtype=np.uint8), 0]]
    return sys.getrefcount(probe[0][0])


_FREE_REFS = _refs_when_free()


def _free(entry: list) -> bool:
    return sys.getrefcount(entry[0]) <= _FREE_REFS  # (the same expression as the probe's)


@contextmanager
def recycling():
    """The scope in which :func:`empty` lends pooled buffers; the pool is emptied when the
    last open scope ends (its buffers then live as long as arrays refer to them)."""
    global _scopes
    with _lock:
        _scopes += 1
    try:
        yield
    finally:
        with _lock:
            _scopes -= 1
            if _scopes == 0:
                _pool.clear()


def empty(shape, dtype) -> np.ndarray:
    """An uninitialized C-contiguous array, like :func:`numpy.empty`, from the pool when
    large and inside :func:`recycling`.

    Parameters
    ----------
    shape : int or tuple of int
    dtype : data-type

    Returns
    -------
    ndarray
        A view of a pooled buffer (or a plain new array below :data:`MIN_BYTES` or
        outside :func:`recycling`); its buffer goes back to the pool once no array
        refers to it.
    """
    global _takes
    dtype = np.dtype(dtype)
    shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(n) for n in shape)
    count = math.prod(shape)
    nbytes = count * dtype.itemsize
    if nbytes < MIN_BYTES or not _scopes:
        return np.empty(shape, dtype=dtype)
    size = _size_class(nbytes)
    with _lock:
        _takes += 1
        entries = _pool.setdefault((dtype.str, size), [])
        entry = next((e for e in entries if _free(e)), None)
        if entry is None:
            # typed, so that a view's size is close to its base's: scipy.sparse copies the
            # arrays of a CSR matrix that are views of a base twice their size (_prune_array)
            entry = [np.empty(-(-size // dtype.itemsize), dtype=dtype), _takes]
            if len(entries) < MAX_PER_CLASS:
                entries.append(entry)
        entry[1] = _takes
        base = entry[0]
        if _takes % 64 == 0:
            _drop_idle()
    return base[:count].reshape(shape)


def _drop_idle() -> None:
    """Drop free buffers that no request took for :data:`IDLE_TAKES` requests (lock held)."""
    for key in list(_pool):
        kept = [e for e in _pool[key] if not (_free(e) and _takes - e[1] > IDLE_TAKES)]
        if kept:
            _pool[key] = kept
        else:
            del _pool[key]


def pooled_bytes() -> int:
    """Bytes of the buffers the pool holds (in use or free)."""
    with _lock:
        return sum(size * len(entries) for (_, size), entries in _pool.items())
