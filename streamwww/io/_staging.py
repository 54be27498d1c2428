"""Staging of parsed rows between the two passes of a conversion.

Class indices are only known once the whole file has been read, and a global
shuffle needs every row before the first shard. So pass 1 appends parsed rows
(raw labels, CSR parts) to append-only *buckets*; pass 2 reads them back
as row blocks. Without shuffling there is one bucket, read back in order. With
shuffling, rows go to uniformly random buckets and each bucket is permuted in
memory in pass 2 -- a uniformly random permutation overall, with memory
bounded by one bucket (read in place, handed on in permuted pieces). A bucket
that came out larger than planned is split again the same way before it is
loaded.

A bucket keeps its first records in memory while a conversion's
:class:`MemoryAllowance` lasts (shared by all its buckets), by reference to the
arrays appended, and writes the rest to its file: a conversion whose staged rows
fit the allowance writes and reads back no staging file (a noticeable share of a
``--shuffle`` or Parquet conversion's time: docs/benchmarks-convert.md, "Staged rows
kept in memory for a small input"), and memory stays bounded by the allowance
(``convert`` gives one only to an input expected to fit it). Where a record is kept changes nothing else: the records come back in the
order they were appended, and a bucket's size counts every record as its file would
hold it, so pass 2 splits and permutes the same rows either way.

A bucket file is a sequence of records::

    int64 n_rows, int64 nnz
    float64 labels[n_rows]
    float64 weights[n_rows]    (only in the buckets of a conversion with weights)
    VALUE   data[nnz]          (float32 or float64)
    int32   row_nnz[n_rows]
    int32   indices[nnz]
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import numpy as np
from numba import njit

from streamwww.errors import ShardFormatError

_PIECE_BYTES = 4 * 2**20


class Rows(NamedTuple):
    """A block of rows with raw labels (CSR parts) and, optionally, their weights."""

    labels: np.ndarray  # float64 (n,)
    indptr: np.ndarray  # int64 (n + 1,)
    indices: np.ndarray  # int32 (nnz,)
    data: np.ndarray  # value dtype (nnz,)
    weights: np.ndarray | None = None  # float64 (n,), or None without weights

    @property
    def nbytes(self) -> int:
        extra = 0 if self.weights is None else self.weights.nbytes
        return (self.labels.nbytes + self.indptr.nbytes + self.indices.nbytes + self.data.nbytes
                + extra)

    @property
    def staged_nbytes(self) -> int:
        """Bytes of these rows as one record of a bucket file (header, labels, weights, values,
        row lengths as int32, column indices as int32)."""
        n, nnz = len(self.labels), len(self.data)
        return 16 + n * (8 + 4 + (0 if self.weights is None else 8)) + nnz * (self.data.dtype.itemsize + 4)


@njit(cache=True, nogil=True)
def take_rows(indptr, indices, data, order):
    """CSR rows ``order`` of (indptr, indices, data), in that order."""
    n = len(order)
    new_indptr = np.empty(n + 1, dtype=np.int64)
    new_indptr[0] = 0
    for r in range(n):
        i = order[r]
        new_indptr[r + 1] = new_indptr[r] + indptr[i + 1] - indptr[i]
    new_indices = np.empty(new_indptr[n], dtype=indices.dtype)
    new_data = np.empty(new_indptr[n], dtype=data.dtype)
    for r in range(n):
        i = order[r]
        # Unsigned positions: a signed index makes Numba check it for a negative value
        # (wraparound) at every element, which keeps LLVM from vectorizing the copy
        # (docs/benchmarks-convert.md, "`--shuffle` after the row gather's fix"). Not slice
        # assignments: see _libsvm_kernels._parse_line.
        o = np.uint64(new_indptr[r])
        for q in range(np.uint64(indptr[i]), np.uint64(indptr[i + 1])):
            new_indices[o] = indices[q]
            new_data[o] = data[q]
            o += np.uint64(1)
    return new_indptr, new_indices, new_data


def _permute(rows: Rows, order: np.ndarray) -> Rows:
    indptr, indices, data = take_rows(rows.indptr, rows.indices, rows.data, order)
    return Rows(rows.labels[order], indptr, indices, data,
                None if rows.weights is None else rows.weights[order])


def concat_rows(parts: list[Rows]) -> Rows:
    """Concatenate row blocks."""
    if len(parts) == 1:
        return parts[0]
    sizes = np.array([p.indptr[-1] for p in parts], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    indptr = np.concatenate([[0]] + [p.indptr[1:] + s for p, s in zip(parts, starts)])
    weights = (None if parts[0].weights is None
               else np.concatenate([p.weights for p in parts]))
    return Rows(np.concatenate([p.labels for p in parts]), indptr.astype(np.int64),
                np.concatenate([p.indices for p in parts]),
                np.concatenate([p.data for p in parts]), weights)


class MemoryAllowance:
    """Bytes of staged records that a conversion's buckets may keep in memory, together."""

    def __init__(self, limit: int):
        self.limit = max(0, int(limit))
        self.used = 0

    def take(self, nbytes: int) -> bool:
        """Reserve ``nbytes`` if they fit what is left (``False``: nothing reserved)."""
        if self.used + nbytes > self.limit:
            return False
        self.used += nbytes
        return True

    def give(self, nbytes: int) -> None:
        """Return ``nbytes`` reserved by :meth:`take`."""
        self.used -= nbytes


class Bucket:
    """An append-only sequence of row records (with weights when ``weighted``): the
    first ones kept in memory while ``memory`` lasts, the rest in the file ``path``."""

    def __init__(self, path: Path, dtype: np.dtype, weighted: bool = False,
                 memory: MemoryAllowance | None = None):
        self.path = path
        self.dtype = np.dtype(dtype)
        self.weighted = bool(weighted)
        self.memory = memory
        self._held: list[Rows] = []  # the records kept in memory, all before the file's
        self._on_disk = False  # a record was written to the file (later ones follow it there)

    @property
    def nbytes(self) -> int:
        """Size of the records as staged: the file's size with those held in memory counted
        as they would be written."""
        held = sum(r.staged_nbytes for r in self._held)
        return held + (self.path.stat().st_size if self._on_disk and self.path.exists() else 0)

    def append(self, rows: Rows, start: int = 0, stop: int | None = None) -> None:
        """Append rows ``start:stop`` of ``rows``. Kept in memory, they are kept by
        reference: the caller must not write to ``rows``' arrays afterwards."""
        stop = len(rows.labels) if stop is None else stop
        if stop <= start:
            return
        if (rows.weights is not None) != self.weighted:
            raise ValueError(f"{self.path}: a bucket with weighted={self.weighted} got rows "
                             f"{'without' if rows.weights is None else 'with'} weights")
        a, b = int(rows.indptr[start]), int(rows.indptr[stop])
        if rows.data.dtype != self.dtype:
            raise ValueError(f"{self.path}: a bucket of {self.dtype} values got {rows.data.dtype} ones")
        part = Rows(rows.labels[start:stop], rows.indptr[start:stop + 1] - a, rows.indices[a:b],
                    rows.data[a:b], None if rows.weights is None else rows.weights[start:stop])
        if not self._on_disk and self.memory is not None and self.memory.take(part.staged_nbytes):
            self._held.append(part)
            return
        self._on_disk = True
        header = np.array([stop - start, b - a], dtype="<i8")
        row_nnz = np.diff(part.indptr).astype("<i4")
        weights = () if part.weights is None else (part.weights,)
        with open(self.path, "ab") as f:
            for array in (header, part.labels, *weights, part.data, row_nnz, part.indices):
                f.write(np.ascontiguousarray(array).data)

    def records(self) -> Iterator[Rows]:
        """Yield the records in the order they were appended (a bucket is read once:
        records held in memory are let go as they are yielded)."""
        while self._held:
            yield self._let_go(0)
        if not (self._on_disk and self.path.exists()):
            return
        with open(self.path, "rb") as f:
            while True:
                head = f.read(16)
                if not head:
                    return
                n, nnz = (int(v) for v in np.frombuffer(head, dtype="<i8"))
                labels = self._read(f, np.float64, n)
                weights = self._read(f, np.float64, n) if self.weighted else None
                data = self._read(f, self.dtype, nnz)
                row_nnz = self._read(f, np.int32, n)
                indices = self._read(f, np.int32, nnz)
                indptr = np.zeros(n + 1, dtype=np.int64)
                np.cumsum(row_nnz, out=indptr[1:])
                yield Rows(labels, indptr, indices, data, weights)

    def _read(self, f, dtype, count: int) -> np.ndarray:
        return self._fill(f, np.empty(count, dtype=dtype))

    def _fill(self, f, out: np.ndarray) -> np.ndarray:
        got = f.readinto(memoryview(out).cast("B"))
        if got != out.nbytes:
            raise ShardFormatError(f"{self.path}: staging file is truncated")
        return out

    def _let_go(self, k: int) -> Rows:
        rows = self._held.pop(k)
        self.memory.give(rows.staged_nbytes)
        return rows

    def read_all(self) -> Rows | None:
        """All the records as one block (the bucket is read once, as :meth:`records`): those
        held in memory concatenated (one record: as it is), then the file's, read straight
        into its arrays (the headers are read first, so there is no concatenation copy; a
        bucket with records in both, whose allowance ran out, is concatenated once more)."""
        parts = [self._let_go(0) for _ in range(len(self._held))]
        if self._on_disk and self.path.exists() and (stored := self._read_file()) is not None:
            parts.append(stored)
        return concat_rows(parts) if parts else None

    def _read_file(self) -> Rows | None:
        item = self.dtype.itemsize
        wsize = 8 if self.weighted else 0
        heads = []
        with open(self.path, "rb") as f:
            while True:
                head = f.read(16)
                if not head:
                    break
                if len(head) != 16:
                    raise ShardFormatError(f"{self.path}: staging file is truncated")
                n, nnz = (int(v) for v in np.frombuffer(head, dtype="<i8"))
                heads.append((f.tell(), n, nnz))
                f.seek(n * (8 + wsize) + nnz * item + n * 4 + nnz * 4, os.SEEK_CUR)
            if not heads:
                return None
            rows = sum(h[1] for h in heads)
            total = sum(h[2] for h in heads)
            labels = np.empty(rows, dtype=np.float64)
            weights = np.empty(rows, dtype=np.float64) if self.weighted else None
            data = np.empty(total, dtype=self.dtype)
            indices = np.empty(total, dtype=np.int32)
            indptr = np.zeros(rows + 1, dtype=np.int64)
            r = z = 0
            for pos, n, nnz in heads:
                f.seek(pos)
                self._fill(f, labels[r:r + n])
                if weights is not None:
                    self._fill(f, weights[r:r + n])
                self._fill(f, data[z:z + nnz])
                indptr[r + 1:r + n + 1] = self._read(f, np.int32, n)
                self._fill(f, indices[z:z + nnz])
                r, z = r + n, z + nnz
        np.cumsum(indptr, out=indptr)
        return Rows(labels, indptr, indices, data, weights)

    def remove(self) -> None:
        """Let go of every record (the bucket is empty again)."""
        while self._held:
            self._let_go(-1)
        self._on_disk = False
        self.path.unlink(missing_ok=True)


class Scatter:
    """Distribute rows over ``n`` buckets uniformly at random."""

    def __init__(self, directory: Path, n: int, dtype: np.dtype, rng: np.random.Generator,
                 weighted: bool = False, memory: MemoryAllowance | None = None):
        directory.mkdir(parents=True, exist_ok=True)
        self.buckets = [Bucket(directory / f"{k:05d}.bin", dtype, weighted, memory) for k in range(n)]
        self.rng = rng

    def add(self, rows: Rows) -> None:
        n = len(self.buckets)
        target = self.rng.integers(0, n, size=len(rows.labels))
        order = np.argsort(target, kind="stable")
        bounds = np.concatenate([[0], np.cumsum(np.bincount(target, minlength=n))])
        grouped = _permute(rows, order)
        for k, bucket in enumerate(self.buckets):
            bucket.append(grouped, int(bounds[k]), int(bounds[k + 1]))


def shuffled_blocks(buckets: list[Bucket], rng: np.random.Generator,
                    max_bucket_bytes: int, _depth: int = 0) -> Iterator[Rows]:
    """Yield every row of ``buckets`` in uniformly random order.

    Each bucket is loaded and permuted in memory; one larger than
    ``max_bucket_bytes`` is first split into random sub-buckets (recursively,
    a few levels at most: a single row larger than the limit stays whole).
    Buckets are deleted once consumed.
    """
    for bucket in buckets:
        size = bucket.nbytes
        if size > max_bucket_bytes and _depth < 6:
            parts = -(-size // (max_bucket_bytes // 2))
            sub = Scatter(bucket.path.with_suffix(".split"), parts, bucket.dtype, rng,
                          bucket.weighted, bucket.memory)
            for rows in bucket.records():
                sub.add(rows)
            bucket.remove()
            yield from shuffled_blocks(sub.buckets, rng, max_bucket_bytes, _depth + 1)
            os.rmdir(bucket.path.with_suffix(".split"))
            continue
        rows = bucket.read_all()
        bucket.remove()
        if rows is None:
            continue
        # the permuted rows leave in pieces of about _PIECE_BYTES: memory is
        # the bucket plus one piece, not the bucket twice
        order = rng.permutation(len(rows.labels))
        step = max(1, int(len(order) * _PIECE_BYTES // max(rows.nbytes, 1)))
        for a in range(0, len(order), step):
            yield _permute(rows, order[a:a + step])
        del rows, order  # before the next bucket is read: one bucket in memory, not two
