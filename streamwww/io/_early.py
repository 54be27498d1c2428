"""Sparse Zarr shards written while the LIBSVM text is still being parsed.

A conversion knows its classes, ``n_features`` and (``layout="auto"``) its
layout only after the last line, so by default pass 1 stages every parsed row
on disk and pass 2 reads them back into shards (:mod:`streamwww.io._staging`).
For a conversion without shuffling to a local Zarr store in the sparse layout,
only ``y`` (class indices), the shard groups' ``zarr.json`` (which record
``n_features``) and the end of the content hash depend on what pass 1 learns.
:class:`EarlyZarrWriter` therefore writes each shard's ``indptr``, ``indices``,
``data`` (and ``weight``) as the rows are parsed -- compressed and hashed by the
writer threads of :mod:`streamwww.io._zarrwriter`, beside the parser -- and
stages only the raw labels (8 bytes a row); :meth:`EarlyZarrWriter.complete`
then adds ``y`` and the groups. The staging round trip of every value (write,
read back, copy) is gone, and compression overlaps parsing. The files are
those pass 2 writes (tests/io/test_early.py compares them).

The content hash starts with ``"sparse:{rows}x{n_features}:{dtype}"``: each
shard is hashed at its close with the ``n_features`` known then (the largest
column so far + 1, unless given), and hashed again from its chunk files when
the final ``n_features`` is larger. When ``"auto"`` resolves to dense after
all (the conversion writes early only when the first block is sparse),
:meth:`EarlyZarrWriter.rows_back` reads the rows back from the early shards for
an ordinary pass 2.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from streamwww.io._format import WEIGHT_ARRAY
from streamwww.io._staging import Rows
from streamwww.io.writer import ShardWriter

__all__ = ["EARLY_BLOCK_BYTES", "EARLY_MAX_DENSITY", "EarlyZarrWriter"]

# Write early when the first block fills at most this fraction of its rows x
# (largest column + 1): "auto" then almost surely resolves to sparse (< 0.5).
EARLY_MAX_DENSITY = 0.25
# Pieces of text parsed at a time when writing early: the chunks being filled and
# written (up to two per array, 16 MiB each) take the room of the three 32 MiB
# pieces (and their parse arrays) pass 1 holds otherwise, so that peak memory
# stays about that of a conversion that does not write early (tools/bench_convert.py
# --rss-only); 8 MiB pieces parse as fast as 32 MiB ones.
EARLY_BLOCK_BYTES = 8 * 2**20


class EarlyZarrWriter(ShardWriter):
    """A :class:`~streamwww.io.writer.ShardWriter` for sparse local Zarr shards
    whose rows come with raw labels before the classes are known.

    ``push(X, labels, weight)``: ``X`` has as many columns as are known so far
    (its width is the ``n_features`` guessed for shards closing now); then
    :meth:`complete` (sparse) or :meth:`rows_back` (another layout).
    """

    _sink_options = {"labels_later": True}

    def __init__(self, root: Path, backend, *, dtype: np.dtype, shard_rows: int | None,
                 shard_bytes: int | None, weighted: bool, scratch: Path):
        super().__init__(root, backend, layout="sparse", n_features=1, dtype=dtype, n_classes=0,
                         shard_rows=shard_rows, shard_bytes=shard_bytes, weighted=weighted,
                         scratch=scratch)
        if self._codec is None:
            raise ValueError("EarlyZarrWriter: needs a local Zarr store")
        self._labels_path = Path(scratch) / "_labels.bin"
        self._labels = open(self._labels_path, "w+b")

    def push(self, X, labels: np.ndarray, weight: np.ndarray | None = None) -> None:
        self.n_features = X.shape[1]
        super().push(X, labels, weight)

    def _take(self, labels: np.ndarray) -> None:
        self._labels.write(np.ascontiguousarray(labels, dtype="<f8").data)

    def _close_sink(self):
        self._sink.n_features = self.n_features  # the guess the shard is hashed with
        return self._sink.close()

    def _report(self, written_rows: int) -> None:
        pass  # the "write" events come with complete(), once the total is known

    def close(self) -> None:
        super().close()
        if not self._labels.closed:
            self._labels.close()
            self._labels_path.unlink(missing_ok=True)

    def _labels_by_shard(self) -> Iterator[tuple[tuple, np.ndarray]]:
        self._labels.flush()
        self._labels.seek(0)
        for closed in self._closed:
            labels = np.empty(closed[3].rows, dtype="<f8")
            if self._labels.readinto(memoryview(labels).cast("B")) != labels.nbytes:
                raise OSError(f"{self._labels_path}: staged labels are truncated")
            yield closed, labels

    def complete(self, classes: np.ndarray, n_features: int, progress=None,
                 total_rows: int | None = None) -> list[dict]:
        """Write every shard's ``y`` and group (``n_features`` columns, sparse); return
        the shard records, as :meth:`ShardWriter.finish` does."""
        self._flush()
        self.progress, self.total_rows = progress, total_rows
        self.n_features = n_features
        self.class_counts = np.zeros(len(classes), dtype=np.int64)
        try:
            pending = []
            for (i, offset, _, early), labels in self._labels_by_shard():
                y = np.searchsorted(classes, labels).astype(np.int32)
                counts = np.bincount(y, minlength=len(classes))
                self.class_counts += counts
                pending.append((i, offset, counts, early.complete(y, n_features)))
            for i, offset, counts, result in pending:
                rows, nnz, content_hash, sums = result.result()
                self.shards.append({"name": self.backend.shard_relpath(i), "rows": rows,
                                    "offset": offset, "nnz": nnz, "sha256": content_hash,
                                    "classes_present": int(np.count_nonzero(counts)), **sums})
                super()._report(offset + rows)
            self._writers.drain()
        finally:
            self.close()
        return self.shards

    def rows_back(self) -> Iterator[Rows]:
        """The rows written so far, read back shard by shard (for a store in another
        layout: the early shards are moved aside first and deleted as read)."""
        self._flush()
        aside = Path(self.scratch) / "_early"
        aside.mkdir()
        try:
            if self._writers is not None:
                self._writers.drain()
            for _, _, _, early in self._closed:  # free the shard names for pass 2
                target = aside / early.sink.directory.name
                os.rename(early.sink.directory, target)
                early.sink.directory = target
            for (_, _, _, early), labels in self._labels_by_shard():
                weights = early.read(WEIGHT_ARRAY) if self.weighted else None
                yield Rows(labels, early.read("indptr"), early.read("indices"),
                           early.read("data"), weights)
                shutil.rmtree(early.sink.directory)
        finally:
            self.close()
            shutil.rmtree(aside, ignore_errors=True)
