"""Synthetic LIBSVM data with learnable structure, for tests and benchmarks.

Model (everything derived from hashes of ``seed``, so row ``r`` depends only on
``(seed, r)`` and the output is identical whatever the block size or thread
count):

* each row's class ``c`` is uniform over ``classes``;
* its ``nnz_per_row`` distinct features are drawn half from a class-specific
  pool of ``max(4 * nnz_per_row, 16)`` features and half uniformly (all
  features when ``nnz_per_row == features``, i.e. dense data);
* the value of feature ``j`` is ``mu[c, j] + noise * e`` where the class
  prototype ``mu[c, j]`` is uniform in [-1, 1] and ``e`` is standardised
  Irwin-Hall noise (sum of four uniforms: mean 0, variance 1, nearly Gaussian).

Both the support and the values depend on the class, so a linear classifier
does clearly better than chance, and better with more ``nnz_per_row``.
Values are written with 6 decimals; labels are ``1..classes``.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from numba import njit

from streamwww._params import check_int
from streamwww.errors import OutputPathError, StoreExistsError
from streamwww.io._progress import ProgressCallback, ProgressEvent
from streamwww.io.libsvm import compression_from_extension, open_compressed
from streamwww.storage.fsutil import not_regular, remove_dead_temporaries, temporary_beside, write_failure

__all__ = ["make_data"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_PROTO_SALT = np.uint64(0x5851F42D4C957F2D)
_POOL_SALT = np.uint64(0x2545F4914F6CDD1D)
_BLOCK_TEXT_BYTES = 16 * 2**20


@njit(cache=True, nogil=True, inline="always")
def _mix(z):
    """splitmix64 finaliser: a bijective 64-bit hash."""
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


@njit(cache=True, nogil=True, inline="always")
def _hash3(key, a, b):
    return _mix(_mix(key ^ (np.uint64(a) * _GOLDEN)) ^ np.uint64(b))


@njit(cache=True, nogil=True, inline="always")
def _unit(x):
    """uint64 -> float in [0, 1)."""
    return float(x >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@njit(cache=True, nogil=True, inline="always")
def _gauss(x):
    """Approximately N(0, 1) from one 64-bit draw: Irwin-Hall sum of four
    16-bit uniforms, standardised (exact mean and variance, tails cut at 3.46)."""
    total = 0.0
    for k in range(4):
        total += float((x >> np.uint64(16 * k)) & np.uint64(0xFFFF))
    return (total * (1.0 / 65536.0) - 2.0) * 1.7320508075688772


@njit(cache=True, nogil=True, inline="always")
def _n_digits(v):
    """Decimal digits of ``v >= 0`` (``len(str(v))``, without compiling Numba's ``str``)."""
    n = 1
    while v >= 10:
        v //= 10
        n += 1
    return n


@njit(cache=True, nogil=True)
def _write_uint(buf, pos, v):
    n = _n_digits(v)
    for k in range(n - 1, -1, -1):
        buf[pos + k] = 48 + v % 10
        v //= 10
    return pos + n


@njit(cache=True, nogil=True)
def _write_value(buf, pos, v):
    """Write ``v`` with 6 decimals (``0`` for values that round to zero)."""
    q = int(round(abs(v) * 1e6))
    if q == 0:
        buf[pos] = 48
        return pos + 1
    if v < 0:
        buf[pos] = 45
        pos += 1
    pos = _write_uint(buf, pos, q // 1000000)
    buf[pos] = 46
    frac = q % 1000000
    for k in range(6, 0, -1):
        buf[pos + k] = 48 + frac % 10
        frac //= 10
    return pos + 7


@njit(cache=True, nogil=True)
def _row_bytes_bound(n_features, nnz, n_classes):
    """Most bytes one row can take: label, then per value ' index:' and up to
    16 characters of value (|v| <= 1e6 with 6 decimals), then '\\n'."""
    return _n_digits(n_classes) + 1 + nnz * (2 + _n_digits(n_features) + 16) + 1


@njit(cache=True, nogil=True)
def _generate(key, row0, n_rows, n_features, nnz, n_classes, noise, buf):
    """Write rows ``row0 .. row0 + n_rows - 1`` as LIBSVM text into ``buf``.

    Returns the number of bytes written.
    """
    pool = min(n_features, max(4 * nnz, 16))
    cols = np.empty(nnz, dtype=np.int64)
    row_max = _row_bytes_bound(n_features, nnz, n_classes)
    pos = np.int64(0)  # not a literal: see io._libsvm_kernels._parse_line
    for r in range(row0, row0 + n_rows):
        if pos + row_max > len(buf):
            raise ValueError("make_data: text buffer too small")
        state = _mix(key ^ (np.uint64(r + 1) * _GOLDEN))
        state += _GOLDEN
        c = int(_mix(state) % np.uint64(n_classes))
        # --- support
        if nnz >= n_features:
            for k in range(nnz):
                cols[k] = k
        elif 2 * nnz > n_features:  # selection sampling (Knuth's algorithm S)
            chosen = 0
            for j in range(n_features):
                state += _GOLDEN
                if _unit(_mix(state)) * (n_features - j) < nnz - chosen:
                    cols[chosen] = j
                    chosen += 1
                    if chosen == nnz:
                        break
        else:
            m = 0
            while m < nnz:
                state += _GOLDEN
                x = _mix(state)
                if x & np.uint64(1):
                    t = (x >> np.uint64(1)) % np.uint64(pool)
                    j = int(_hash3(key ^ _POOL_SALT, c, t) % np.uint64(n_features))
                else:
                    j = int((x >> np.uint64(1)) % np.uint64(n_features))
                # insert j into the sorted cols[:m] unless present
                lo, hi = 0, m
                while lo < hi:
                    mid = (lo + hi) // 2
                    if cols[mid] < j:
                        lo = mid + 1
                    else:
                        hi = mid
                if lo < m and cols[lo] == j:
                    continue
                for k in range(m, lo, -1):
                    cols[k] = cols[k - 1]
                cols[lo] = j
                m += 1
        # --- text
        pos = _write_uint(buf, pos, c + 1)
        for k in range(nnz):
            j = cols[k]
            mu = 2.0 * _unit(_hash3(key ^ _PROTO_SALT, c, j)) - 1.0
            state += _GOLDEN
            v = min(max(mu + noise * _gauss(_mix(state)), -1e6), 1e6)
            buf[pos] = 32
            pos = _write_uint(buf, pos + 1, j + 1)
            buf[pos] = 58
            pos = _write_value(buf, pos + 1, v)
        buf[pos] = 10
        pos += 1
    return pos


def _check_int(name: str, value, low: int) -> int:
    check_int("make_data", name, value, low=low)
    return int(value)


def _write(f, text: np.ndarray) -> int:
    f.write(text.data)
    return len(text)


def _report(progress, starts, tasks_done: int, per_task: int, rows: int) -> None:
    if progress is not None:
        done = min(rows, starts[tasks_done - 1] + per_task)
        progress(ProgressEvent("generate", done, rows, done))


def make_data(output: str | os.PathLike, *, rows: int, features: int, nnz_per_row: int,
              classes: int, seed: int = 0, noise: float = 0.5, overwrite: bool = False,
              n_threads: int | None = None,
              progress: ProgressCallback | None = None) -> dict:
    """Write a synthetic LIBSVM file with learnable class structure.

    Parameters
    ----------
    output : str or path-like
        File to write; ``.gz``, ``.bz2`` or ``.xz`` compress it. Written to a
        temporary name and renamed at the end.
    rows, features, nnz_per_row, classes : int
        Shape: ``nnz_per_row <= features`` values per row (dense when equal),
        labels ``1..classes``.
    seed : int, default=0
        Same seed, same file (independent of ``n_threads``).
    noise : float, default=0.5
        Standard deviation of the Gaussian noise around the class prototype.
    overwrite : bool, default=False
        Replace an existing ``output``.
    n_threads : int, optional
        Generator threads (default: CPU count).
    progress : callable, optional
        Receives :class:`~streamwww.io.ProgressEvent` (stage ``"generate"``,
        rows done of ``rows``).

    Returns
    -------
    dict
        ``path``, ``rows``, ``bytes`` (of text) and the parameters.
    """
    rows = _check_int("rows", rows, 1)
    features = _check_int("features", features, 1)
    nnz = _check_int("nnz_per_row", nnz_per_row, 1)
    classes = _check_int("classes", classes, 2)
    seed = _check_int("seed", seed, 0)
    if nnz > features:
        raise ValueError(f"The 'nnz_per_row' parameter of make_data must be <= features "
                         f"({features}). Got {nnz} instead.")
    if not (isinstance(noise, (int, float)) and noise >= 0 and math.isfinite(noise)):
        raise ValueError(f"The 'noise' parameter of make_data must be a float in [0, inf). "
                         f"Got {noise!r} instead.")
    path = Path(output).absolute()
    kind = not_regular(path)  # (the rename below would replace the link or node, not write through it)
    if kind is not None:
        raise OutputPathError(f"{path}: is {kind}, not a regular file; give a regular file path "
                              f"for the LIBSVM text")
    if path.is_dir():  # (never replaced, even with overwrite=True: found before any text is made)
        raise OutputPathError(f"{path}: is a directory; give a file name for the LIBSVM text")
    if path.exists() and not overwrite:
        raise StoreExistsError(f"{path} already exists; pass overwrite=True (--overwrite) "
                               f"to replace it.")
    n_threads = n_threads or os.cpu_count() or 1
    key = np.uint64(((seed * int(_GOLDEN)) ^ int(_M1)) & (2**64 - 1))
    row_bytes = _row_bytes_bound(features, nnz, classes)
    per_task = max(1, _BLOCK_TEXT_BYTES // row_bytes)
    starts = range(0, rows, per_task)

    def generate(task: int, buf: np.ndarray) -> np.ndarray:
        start = starts[task]
        size = _generate(key, start, min(per_task, rows - start), features, nnz, classes,
                         float(noise), buf)
        return buf[:size]

    remove_dead_temporaries(path)  # (what a make-data killed by SIGKILL left beside it)
    tmp = temporary_beside(path)
    total = 0
    try:
        f, raw = open_compressed(tmp, "wb", compression=compression_from_extension(path))
    except OSError as exc:  # (the hidden temporary file is not what the user named)
        raise OutputPathError(f"{path}: cannot write the file ({exc.strerror or exc}); check the "
                              f"output location") from None
    try:
        # n_threads tasks generate while the main thread writes finished text
        # in order; each task owns one of n_threads + 1 buffers.
        free = [np.empty(per_task * row_bytes, dtype=np.uint8) for _ in range(n_threads + 1)]
        with ThreadPoolExecutor(n_threads) as pool:
            pending = []
            for task in range(len(starts)):
                if len(pending) > n_threads:
                    text, buf = pending.pop(0)
                    total += _write(f, text.result())
                    free.append(buf)
                    _report(progress, starts, task - len(pending), per_task, rows)
                buf = free.pop()
                pending.append((pool.submit(generate, task, buf), buf))
            for text, _ in pending:
                total += _write(f, text.result())
        if progress is not None:
            progress(ProgressEvent("generate", rows, rows, rows))
        if f is not raw:
            f.close()  # writes the compressed stream's trailer
        raw.close()
        os.replace(tmp, path)
    except BaseException as exc:
        for stream in ([f] if f is not raw else []) + [raw]:
            try:
                stream.close()
            except OSError:  # (the disk that failed a write may fail the last flush too)
                pass
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):  # a full disk: one line naming the output
            raise write_failure(path, exc, "the file") from None
        raise
    return {"path": str(path), "rows": rows, "features": features, "nnz_per_row": nnz,
            "classes": classes, "seed": seed, "noise": float(noise), "bytes": total}
