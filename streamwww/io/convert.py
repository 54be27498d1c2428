"""LIBSVM text -> shard store, in two streaming passes.

Pass 1 parses the text block by block (:class:`~streamwww.io.LibsvmReader`),
collects the label values and stages the rows (``_staging``: in memory for an input
expected to stage at most 128 MiB, else on disk), in order or scattered over random
buckets when shuffling. Pass 2 reads the staged rows
back (each bucket permuted in memory when shuffling), maps labels to class
indices -- now that every label is known -- and cuts the rows into shards.
Without shuffling, to a local Zarr store in the sparse layout, the shards are
written during pass 1 instead and only the labels are staged
(:mod:`~streamwww.io._early`). Everything happens inside the store's temporary
directory, so an error or a kill leaves no store behind, and so does a failed
write (a full disk: a :class:`~streamwww.errors.StoreWriteError`). Memory is
bounded by three text pieces and the parse arrays of two (pass 1), at most
128 MiB of staged rows (a small input's), one shuffle bucket of at most 32 MiB and
a few Zarr chunks per array (a Parquet shard is held whole), whatever the input
size and ``--shard-mb``; a larger input's staging area needs about as much disk as
the uncompressed arrays.
docs/benchmarks-convert.md has the measurements.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from streamwww._memory import release_freed_memory
from streamwww._params import check_int
from streamwww.errors import (
    DataFormatError,
    LibsvmFormatError,
    StoreWriteError,
    StreamwwwError,
)
from streamwww.io._backend import get_backend
from streamwww.io._early import EARLY_BLOCK_BYTES, EARLY_MAX_DENSITY, EarlyZarrWriter
from streamwww.io._format import format_version_for
from streamwww.io._progress import ProgressCallback
from streamwww.io._staging import Bucket, MemoryAllowance, Rows, Scatter, shuffled_blocks
from streamwww.io._transaction import StoreTransaction, open_transaction
from streamwww.io._weights import WeightFile
from streamwww.io._zarrcodec import local_codec
from streamwww.io.libsvm import DEFAULT_BLOCK_BYTES, LibsvmReader
from streamwww.io.store import ShardStore, open_store
from streamwww.io.writer import (
    ShardWriter,
    build_metadata,
    resolve_dtype,
    resolve_layout,
    resolve_shard_size,
)
from streamwww.labels import format_label, summarize_classes
from streamwww.storage.location import is_url, located, location

__all__ = ["convert_libsvm"]

logger = logging.getLogger(__name__)

_MIN_BUCKET_BYTES = 4 * 2**20
# Shuffle buckets are planned at the shard's size clamped to [4, 16] MiB of
# staged rows: pass 2 holds one bucket (at most twice that before it is split),
# so the bound must not follow --shard-mb (memory would then grow with the input, up to
# the shard size).
_MAX_BUCKET_BYTES = 16 * 2**20
_MAX_BUCKETS = 4096
# An input whose staged rows are expected (from its first block) to take at most this many
# bytes stages them in memory, up to that many (_staging.MemoryAllowance; the rest, should
# the estimate fall short, on disk); a larger one stages them all on disk, so that its peak
# memory does not grow with the input (docs/benchmarks-convert.md, "Peak memory does not
# grow with the input"). About 200 MiB of text (make_data's rows) stages no file.
_STAGING_MEMORY_BYTES = 128 * 2**20


def convert_libsvm(input: str | os.PathLike, output: str | os.PathLike, *,
                   shard_rows: int | None = None, shard_mb: float | None = None,
                   format: str | None = None, layout: str = "auto", dtype=None,
                   shuffle: bool = False, seed: int | None = None,
                   n_features: int | None = None, like: str | os.PathLike | None = None,
                   zero_based: bool = False, skip_bad_lines: bool = False,
                   overwrite: bool = False, progress: ProgressCallback | None = None,
                   block_bytes: int = DEFAULT_BLOCK_BYTES,
                   weights: str | os.PathLike | None = None,
                   storage_options: dict | None = None) -> ShardStore:
    """Convert a LIBSVM text file into a shard store.

    Parameters
    ----------
    input : str or path-like
        LIBSVM text, optionally gzip, bz2 or xz compressed.
    output : str or path-like
        The store directory to create (atomically).
    shard_rows, shard_mb : optional
        Shard size in rows, or maximum in-memory MiB per shard (default 128
        MiB for Zarr, 16 MiB for Parquet: a Parquet shard is assembled whole in
        memory, and smaller ones are written two at a time). At most one of them.
    format : {"zarr", "parquet"}, optional
        Default "zarr", or the format of ``like``.
    layout : {"auto", "sparse", "dense"}, default="auto"
        ``"auto"``: dense when at least half of the values are present (or
        the layout of ``like``).
    dtype : {numpy.float32, numpy.float64}, optional
        Value type; default float32, or the dtype of ``like``.
    shuffle : bool, default=False
        Globally permute the rows (external shuffle; memory stays bounded).
        Label-sorted files need it for block coordinate descent.
    seed : int, optional
        Seed of the shuffle; drawn at random (and recorded in the
        provenance) when not given. Same input, options and seed give the
        same store.
    n_features : int, optional
        Number of features; an index beyond it is an error. Default: the
        largest index in the file (or that of ``like``).
    like : str or path-like, optional
        A store (usually the training set's) whose classes and number of
        features this conversion uses, e.g. for a test set. A label it does
        not know is an error naming the label and line.
    zero_based : bool, default=False
        The file's indices start at 0.
    skip_bad_lines : bool, default=False
        Skip malformed lines (counted in the provenance and logged) instead
        of stopping at the first.
    overwrite : bool, default=False
        Replace an existing store at ``output``.
    progress : callable, optional
        Receives :class:`~streamwww.io.ProgressEvent` at block and shard
        boundaries (stages ``"read"`` then ``"write"``).
    block_bytes : int, default=32 MiB
        Text parsed at a time (at most 8 MiB without ``shuffle`` to a local
        Zarr store, whose shards are then written while parsing).
    weights : str or path-like, optional
        A weight file (LIBLINEAR's ``-W`` format, optionally gzip, bz2 or xz
        compressed): one number per line, finite and >= 0, one line per data
        row of ``input`` in input order (blank and comment lines of the input
        are not rows). The weights are stored with their rows (also when
        shuffled; ``"weights": true``, ``ShardStore.has_weights``) and read line
        by line along with the input. Cannot be combined with
        ``skip_bad_lines`` (a skipped row would take the next row's weight).
    storage_options : dict, optional
        Options of the file system of URLs among ``input``, ``output``,
        ``like`` and ``weights`` (``s3://...``; docs/STORAGE.md); credentials
        are taken from the usual places when not given, and never recorded.

    Returns
    -------
    ShardStore
        The committed store.

    Raises
    ------
    LibsvmFormatError
        A malformed line (file and line number in the message).
    DataFormatError
        No data rows, or no features at all (every row empty); a weight file
        line that is not a finite number >= 0, a weight file with fewer or
        more lines than the input has data rows, or all weights zero (the
        message starts with the weight file and its line number).
    InputReadError
        Truncated or corrupt compressed input, or an unreadable file (the
        message says about where reading stopped).
    StoreWriteError
        The output cannot be written (permissions, a full disk); nothing that
        opens as a store is left behind.
    StoreExistsError
        ``output`` exists and ``overwrite`` is False.
    """
    who = "convert_libsvm"
    resolve_shard_size(shard_rows, shard_mb, who)  # validate early (the default needs the format)
    like_store = open_store(located(like, storage_options)) if like is not None else None
    if like_store is not None:
        if n_features is not None and n_features != like_store.n_features:
            raise ValueError(f"{who}: n_features={n_features} contradicts like={like_store.path} "
                             f"which has {like_store.n_features} features.")
        n_features = like_store.n_features
        format = format or like_store.format
        layout = like_store.layout if layout == "auto" else layout
        dtype = like_store.dtype if dtype is None else dtype
    backend = get_backend(format or "zarr")
    rows_per_shard, shard_bytes = resolve_shard_size(shard_rows, shard_mb, who, backend.name)
    dt = resolve_dtype(np.float32 if dtype is None else dtype, who)
    resolve_layout(layout, 0, 0, 0, who)  # validate early
    if weights is not None and skip_bad_lines:
        raise ValueError(f"{who}: 'weights' cannot be combined with 'skip_bad_lines': a skipped "
                         f"line would shift every later weight onto the wrong row; fix the bad "
                         f"lines of {input} instead.")
    check_int(who, "seed", seed, low=0, allow_none=True)
    if shuffle and seed is None:
        seed = int(np.random.SeedSequence().entropy)
    scatter_rng, perm_rng = (np.random.default_rng(s)
                             for s in np.random.SeedSequence(seed if shuffle else 0).spawn(2))
    # rows of a conversion without shuffling to a local Zarr store may go to their
    # shards while parsing (streamwww.io._early); smaller pieces of text then make
    # room for the chunks being written
    may_write_early = (not shuffle and layout in ("auto", "sparse")
                       and local_codec(located(output, storage_options), backend,
                                       (np.int64, np.int32, dt)) is not None)
    if may_write_early:
        block_bytes = min(block_bytes, EARLY_BLOCK_BYTES)
    reader = LibsvmReader(located(input, storage_options), zero_based=zero_based, dtype=dt, n_features=n_features,
                          skip_bad_lines=skip_bad_lines, block_bytes=block_bytes,
                          progress=progress)
    weight_file = None if weights is None else WeightFile(located(weights, storage_options),
                                                            reader.path)
    weighted = weight_file is not None

    release_freed_memory()  # freed parse and chunk buffers go back to the OS
    tx = _open_transaction(output, overwrite, storage_options)
    with (tx, _write_errors(tx, output), (weight_file or contextlib.nullcontext()),
          contextlib.ExitStack() as writers):
        backend.init_root(tx.tmp, format_version_for(weighted))
        staging = tx.scratch / "_staging"
        staging.mkdir()
        # ---- pass 1: parse, collect labels, stage rows (or write them, see _early)
        seen = np.empty(0, dtype=np.float64)
        ordered = Bucket(staging / "rows.bin", dt, weighted)
        memory = scatter = None
        target_bytes = None
        early = None
        for block in reader:
            w = None if weight_file is None else weight_file.take(block.n_rows, block.lines)
            rows = Rows(block.labels, block.indptr, block.indices, block.data, w)
            if memory is None:  # the first block: all of the input expected to fit, or none
                estimate = reader.stats.size / max(block.input_offset, 1) * rows.staged_nbytes
                memory = MemoryAllowance(_STAGING_MEMORY_BYTES if estimate <= _STAGING_MEMORY_BYTES else 0)
                ordered.memory = memory
            if like_store is not None:
                _check_known_labels(block, like_store, reader.path)
            else:
                seen = np.union1d(seen, block.labels)
            if not shuffle:
                if may_write_early:  # decided on the first block
                    may_write_early = False
                    if layout == "sparse" or _looks_sparse(block, reader.stats):
                        early = writers.enter_context(EarlyZarrWriter(
                            tx.tmp, backend, dtype=dt, shard_rows=rows_per_shard,
                            shard_bytes=shard_bytes, weighted=weighted, scratch=staging))
                if early is None:
                    ordered.append(rows)
                    continue
                width = n_features if n_features is not None else reader.stats.max_column + 1
                X = sp.csr_matrix((block.data, block.indices, block.indptr),
                                  shape=(block.n_rows, width))
                X.has_sorted_indices = True
                early.push(X, block.labels, w)
                continue
            if scatter is None:  # plan the buckets from the first block
                per_row = rows.staged_nbytes / len(rows.labels)
                shard_equiv = shard_bytes if shard_bytes else rows_per_shard * per_row
                target_bytes = int(min(max(shard_equiv, _MIN_BUCKET_BYTES), _MAX_BUCKET_BYTES))
                n_buckets = int(min(max(np.ceil(estimate / target_bytes), 1), _MAX_BUCKETS))
                logger.debug("shuffle: %d bucket(s) of ~%d bytes", n_buckets, target_bytes)
                scatter = Scatter(staging / "buckets", n_buckets, dt, scatter_rng, weighted, memory)
            scatter.add(rows)
        stats = reader.stats
        if stats.n_rows == 0:
            raise DataFormatError(f"{reader.path}: no data rows (only blank or comment lines).")
        if weight_file is not None:
            weight_file.finish()  # no line left over, not all zero
        if like_store is None and n_features is None and stats.max_column < 0:
            raise DataFormatError(
                f"{reader.path}: no features: none of its {stats.n_rows} rows has an "
                f"'index:value' pair, so a model would have nothing to learn from; check that it "
                f"is LIBSVM text ('label index:value ...').")
        if like_store is not None:
            classes = like_store.classes
        else:
            classes = seen
            n_features = stats.max_column + 1 if n_features is None else n_features
        layout = resolve_layout(layout, stats.n_rows, n_features, stats.nnz, who)

        # ---- pass 2: staged rows -> class indices -> shards
        if early is not None and layout == "sparse":  # only y and the groups are left
            early.complete(classes, n_features, progress, stats.n_rows)
            writer = early
        else:
            if early is not None:  # "auto" came out dense after all
                blocks = early.rows_back()
            elif scatter is None:
                blocks = ordered.records()
            else:
                blocks = shuffled_blocks(scatter.buckets, perm_rng, 2 * target_bytes)
            with ShardWriter(tx.tmp, backend, layout=layout, n_features=n_features, dtype=dt,
                             n_classes=len(classes), shard_rows=rows_per_shard,
                             shard_bytes=shard_bytes, progress=progress,
                             total_rows=stats.n_rows, weighted=weighted,
                             scratch=tx.scratch) as writer:
                for rows in blocks:
                    y = np.searchsorted(classes, rows.labels).astype(np.int32)
                    X = sp.csr_matrix((rows.data, rows.indices, rows.indptr),
                                      shape=(len(rows.labels), n_features))
                    X.has_sorted_indices = True
                    writer.push(X, y, rows.weights)
                writer.finish()
        shutil.rmtree(staging)

        provenance = {
            "source": {
                "path": stats.path, "size": stats.size, "compression": stats.compression,
                "text_bytes": stats.text_bytes, "sha256": stats.sha256,
                "lines": stats.n_lines, "skipped_lines": stats.skipped_lines,
                "skipped_examples": stats.skipped_examples,
            },
            "options": {
                "zero_based": bool(zero_based), "shuffle": bool(shuffle),
                "seed": seed if shuffle else None, "shard_rows": shard_rows,
                "shard_mb": shard_mb, "layout": layout, "dtype": dt.name,
                "n_features": n_features, "skip_bad_lines": bool(skip_bad_lines),
                "like": None if like_store is None else {
                    "path": str(like_store.path), "fingerprint": like_store.fingerprint},
            },
        }
        if weight_file is not None:
            provenance["weights"] = {"path": weight_file.path, "size": weight_file.size,
                                     "lines": weight_file.lines, "sha256": weight_file.sha256}
        meta = build_metadata(format=backend.name, layout=layout, n_features=n_features,
                              dtype=dt, classes=classes, writer=writer, provenance=provenance)
        tx.commit(meta)
    logger.debug("converted %s: %d rows, %d features, %d classes, %d shard(s) -> %s",
                stats.path, meta["n_rows"], n_features, len(classes), meta["n_shards"],
                tx.location.url)
    return open_store(tx.location)


def _looks_sparse(block, stats) -> bool:
    """Whether the first block fills so little of its rows x columns that ``"auto"``
    will almost surely resolve to sparse (then the shards are written early)."""
    cells = block.n_rows * max(stats.max_column + 1, 1)
    return len(block.data) <= EARLY_MAX_DENSITY * cells


def _open_transaction(output, overwrite: bool, storage_options=None):
    """Start the store's transaction; an output that cannot be created is a
    one-line :class:`StoreWriteError`."""
    try:
        return open_transaction(output, overwrite, storage_options)
    except StreamwwwError:
        raise
    except OSError as exc:
        raise _store_write_error(exc, output, "cannot create the store") from exc


@contextlib.contextmanager
def _write_errors(tx: StoreTransaction, output):
    """Turn an OSError while the store is written (a full disk, a vanished
    directory, ...) into :class:`StoreWriteError`. The transaction removes its
    temporary directory, so nothing that opens as a store is left."""
    try:
        yield
    except StreamwwwError:
        raise
    except OSError as exc:
        what = f"writing the store failed; nothing was kept ({tx.tmp.name} is removed)"
        raise _store_write_error(exc, output, what) from exc


def _store_write_error(exc: OSError, output, what: str) -> StoreWriteError:
    out = location(output).url if is_url(output) else Path(output).absolute()
    cause = exc.strerror or str(exc) or type(exc).__name__
    name = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        fix = "free space there or convert to another disk"
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        fix = "choose a writable location"
    else:
        fix = "check the output location"
    err = StoreWriteError(f"{out}: {what}: {cause}{name}; {fix}.")
    err.errno = exc.errno
    return err


def _check_known_labels(block, store: ShardStore, path: str) -> None:
    classes = store.classes
    if classes.dtype.kind != "f":
        known = np.zeros(len(block.labels), dtype=bool)
    else:
        idx = np.minimum(np.searchsorted(classes, block.labels), len(classes) - 1)
        known = classes[idx] == block.labels
    if not known.all():
        first = int(np.argmin(known))
        raise LibsvmFormatError(path, int(block.lines[first]),
                                f"label {format_label(block.labels[first])} is not one of the "
                                f"{len(classes)} classes of {store.path} "
                                f"{summarize_classes(classes)}")


def convert_with_summary(input, output, *, show_progress: bool, summary, shown: str | None = None, **options):
    """:func:`~streamwww.io.convert.convert_libsvm` as the command line runs it: progress bars
    (``show_progress``), then one line on ``summary`` (a text stream, or None for none) giving
    the store's size and the conversion's speed, the store named ``shown`` (default: its
    path). Returns the store."""
    from streamwww.progress import StageBars

    bars = StageBars() if show_progress else None
    start = time.monotonic()
    try:
        store = convert_libsvm(input, output, progress=bars, **options)
    finally:
        if bars is not None:
            bars.close()
    elapsed = time.monotonic() - start
    source = store.metadata["provenance"]["source"]
    skipped = source["skipped_lines"]
    if summary is not None:
        print(f"{shown or store.path}: {store.n_rows} rows, {store.n_features} features, "
              f"{store.n_classes} classes, {store.n_shards} {store.layout} {store.format} shard(s) "
              f"in {elapsed:.1f} s ({source['text_bytes'] / 2**20 / max(elapsed, 1e-9):.1f} MiB/s "
              f"of text)" + (f"; skipped {skipped} malformed line(s)" if skipped else ""), file=summary)
    return store
