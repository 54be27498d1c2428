"""Zarr v3 backend: each shard is a group of 1-D/2-D arrays.

Layout (docs/FORMAT.md)::

    STORE/zarr.json                   root group
    STORE/shard-00000/zarr.json       group; attributes["streamwww"] describes the shard
    STORE/shard-00000/indptr          int64  (rows + 1,)     sparse layout
    STORE/shard-00000/indices         int32  (nnz,)          sparse layout
    STORE/shard-00000/data            float32|float64 (nnz,) sparse layout
    STORE/shard-00000/X               float32|float64 (rows, n_features)  dense layout
    STORE/shard-00000/y               int32  (rows,)         class indices
    STORE/shard-00000/weight          float64 (rows,)        sample weights (stores with weights)

Each array's codecs are ``bytes``, Blosc, then ``crc32c`` (format version 2 on),
every chunk is written (``write_empty_chunks``), and the crc32c of every chunk is
recorded in the store's metadata; reads verify both. From format version 4 on the
crc32c of each array's ``zarr.json`` is recorded too, and checked before Zarr
parses it (docs/FORMAT.md, Integrity).

Chunks are compressed with Blosc(LZ4, byte shuffle): a training run decodes
every shard every epoch, and LZ4 decodes much faster than zstd for a few more
bytes on disk (docs/FORMAT.md, below the table of formats). Stores written with
other codecs stay readable (the codec is recorded in each array's metadata).
"""

from __future__ import annotations

import numpy as np
import zarr
from zarr.codecs import BloscCodec

from streamwww.errors import ChecksumError
from streamwww.io._backend import ShardBackend, check_fits
from streamwww.storage.location import Location, location
from streamwww.io._chunks import (
    chunk_checksums,
    crc32c,
    create_checksummed_array,
    fetch_arrays,
    plan_whole_chunks,
    read_into,
)
from streamwww.io._format import (
    CHECKSUM_KEY,
    DAMAGED_FIX,
    FORMAT_VERSION,
    WEIGHT_ARRAY,
    ShardData,
    format_version_for,
    shard_name,
)

_CHUNK_ELEMENTS = 4 * 2**20


def _compressors():
    return [BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")]


def _chunks(shape: tuple[int, ...]) -> tuple[int, ...]:
    if len(shape) == 1:
        return (max(1, min(shape[0], _CHUNK_ELEMENTS)),)
    rows = max(1, _CHUNK_ELEMENTS // max(1, shape[1]))
    return (max(1, min(shape[0], rows)), max(1, shape[1]))


def _group(root: Location, rel: str | None, mode: str, **kwargs):
    """Open (or create) the Zarr group ``rel`` below ``root`` (local or an object store)."""
    where = root.child(rel) if rel else root
    if where.is_local:
        return zarr.open_group(where.path, mode=mode, zarr_format=3, **kwargs)
    return zarr.open_group(store=where.zarr_store(read_only=mode == "r"), mode=mode, zarr_format=3,
                           **kwargs)


def _open_arrays(where: Location, names) -> dict:
    """Open the arrays ``names`` of the group at ``where`` (local or an object store)
    concurrently, through Zarr's asynchronous API: their metadata objects are requested at once."""
    import asyncio

    import zarr.api.asynchronous as za
    from zarr.core.sync import sync

    def open_all(store, paths):
        async def together():
            return await asyncio.gather(*(za.open_array(store=store, path=p, mode="r", zarr_format=3)
                                          for p in paths))

        return {n: zarr.Array(a) for n, a in zip(names, sync(together()))}

    def through_fsspec():
        return open_all(where.zarr_store(read_only=True), list(names))

    fast = where.zarr_read_root()  # S3 through obstore: the metadata GETs too
    if fast is None:
        return through_fsspec()
    return where.fast_read(lambda: open_all(fast[0], [f"{fast[1]}/{n}" for n in names]), through_fsspec)


def _check_documents(where: Location, names, documents: dict) -> None:
    """Check the ``zarr.json`` of each array ``names`` of the shard at ``where``
    against the crc32c recorded for it, before Zarr parses it: its dtype, byte
    order, codecs, shape and chunk grid decide what the checked chunks decode to."""
    docs = [where.child(name, "zarr.json") for name in names]
    for name, doc, data in zip(names, docs, where.read_many(docs)):
        expected = int(documents[name])
        if data is None:
            raise ChecksumError(doc.url, name, "metadata", "the array's zarr.json is missing",
                                DAMAGED_FIX)
        if (got := crc32c(data)) != expected:
            raise ChecksumError(doc.url, name, "metadata", f"crc32c mismatch: the array's zarr.json "
                                f"hashes to {got:#010x}, the metadata records {expected:#010x} "
                                f"(it was edited or damaged)", DAMAGED_FIX)


class ZarrBackend(ShardBackend):
    """Shards as Zarr v3 groups."""

    name = "zarr"

    def shard_relpath(self, i: int) -> str:
        return shard_name(i)

    def init_root(self, root, format_version: int = FORMAT_VERSION) -> None:
        root = location(root)
        # an object store's root already holds the transaction's "incomplete" object
        _group(root, None, "w-" if root.is_local else "a",
               attributes={"streamwww": {"format_version": format_version,
                                                  "metadata": "streamwww.json"}})

    def checksum_names(self, layout: str, weights: bool = False) -> tuple[str, ...]:
        names = ("X", "y") if layout == "dense" else ("indptr", "indices", "data", "y")
        return (*names, WEIGHT_ARRAY) if weights else names

    def document_names(self, layout: str, weights: bool = False) -> tuple[str, ...]:
        return self.checksum_names(layout, weights)

    def document_checksums(self, root, shards: list[dict], layout: str,
                           weights: bool = False) -> list[dict]:
        root = location(root)
        names = self.document_names(layout, weights)
        docs = [root.child(s["name"], name, "zarr.json") for s in shards for name in names]
        got = root.read_many(docs)  # (one concurrent batch on an object store)
        out = []
        for k in range(len(shards)):
            sums = {}
            for name, doc, data in zip(names, docs[k * len(names):], got[k * len(names):]):
                if data is None:
                    raise FileNotFoundError(f"{doc.url}: written, but not there to read back")
                sums[name] = crc32c(data)
            out.append(sums)
        return out

    def write_shard(self, root, i: int, shard: ShardData, *, n_features: int,
                    row_offset: int) -> dict:
        root = location(root)
        version = format_version_for(shard.weight is not None)
        attrs = {"streamwww": {"format_version": version, "shard": i,
                               "row_offset": row_offset, "layout": shard.layout,
                               "n_features": n_features}}
        group = _group(root, self.shard_relpath(i), "w-", attributes=attrs)
        if shard.layout == "sparse":
            X = shard.X
            arrays = {"indptr": X.indptr.astype(np.int64, copy=False),
                      "indices": X.indices.astype(np.int32, copy=False),
                      "data": X.data}
        else:
            arrays = {"X": shard.X}
        arrays["y"] = shard.y
        if shard.weight is not None:
            arrays[WEIGHT_ARRAY] = np.ascontiguousarray(shard.weight, dtype=np.float64)
        sums = {}
        for name, a in arrays.items():
            arr = create_checksummed_array(group, name, data=a, chunks=_chunks(a.shape),
                                           compressors=_compressors())
            sums[name] = chunk_checksums(arr, root.child(self.shard_relpath(i), name))
        return {CHECKSUM_KEY: sums}

    def read_shard_into(self, root, i: int, out: dict[str, np.ndarray], *, layout: str,
                        n_features: int, handles: dict | None = None,
                        checksums: dict | None = None,
                        documents: dict | None = None) -> np.ndarray | None:
        # Opening a group and its arrays reads their metadata (a sizeable part of
        # a shard's read time); an opened store keeps the handles, and
        # each array's read plan (its chunk files, codecs and checks, _chunks.ChunkPlan).
        root = location(root)
        arrays = handles.get(i) if handles is not None else None
        sparse = "indices" in out
        names = [*out, "indptr"] if sparse else list(out)
        if arrays is None or any(name not in arrays for name in names):
            wanted = [n for n in names if n not in (arrays or {})]
            if documents is not None:
                _check_documents(root.child(self.shard_relpath(i)), wanted, documents)
            # every array's metadata at once, one trip through Zarr's event loop (faster than
            # opening a local shard's arrays one by one after the group, a cost every shard's
            # first read pays), and on an object store one round trip
            opened = _open_arrays(root.child(self.shard_relpath(i)), wanted)
            arrays = {**(arrays or {}), **opened}
            if handles is not None:
                handles[i] = arrays
        # (the handles dict is this backend's: the shard's plans sit beside its arrays, by name)
        plans = handles.setdefault((i, "plans"), {}) if handles is not None else {}
        where = root.child(self.shard_relpath(i))
        # version 2: every chunk was written and its crc32c recorded
        missing = "fill" if checksums is None else "error"
        # on an object store, every chunk of the shard in one round trip
        fetched = None if root.is_local else fetch_arrays([(arrays[name], where.child(name)) for name in names])
        fetched = dict(zip(names, fetched)) if fetched is not None else {}

        def plan_of(name):
            plan = plans.get(name)
            # (False: a layout the plan does not cover, read through Zarr)
            if plan is None or (plan and plan.checksums is not sums_of(name)):
                plan = plans[name] = plan_whole_chunks(arrays[name], where.child(name), missing=missing,
                                                       checksums=sums_of(name), fix=DAMAGED_FIX) or False
            return plan

        def sums_of(name):
            return None if checksums is None else checksums[name]

        def read(name, target, plan):
            stored = plan or arrays[name]
            check_fits(name, stored.shape, stored.dtype, target)
            if plan and plan.fits(target):
                return plan.read(target, fetched.get(name))  # no stacking copy, see _chunks
            return read_into(arrays[name], where.child(name), target, missing=missing,
                             checksums=sums_of(name), fix=DAMAGED_FIX, fetched=fetched.get(name))

        for name, target in out.items():
            read(name, target, plan_of(name))
        if not sparse:
            return None
        plan = plan_of("indptr")
        ptr = plan or arrays["indptr"]
        return read("indptr", np.empty(ptr.shape, dtype=ptr.dtype), plan)
