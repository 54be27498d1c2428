"""Whole-chunk reads straight into a buffer (streamwww.io._chunks) against Zarr's own reads."""

import numpy as np
import pytest
import zarr
from zarr.codecs import BloscCodec, ZstdCodec

from streamwww.io._chunks import read_into, read_whole_chunks

BLOSC = [BloscCodec(cname="lz4", clevel=5, shuffle="shuffle")]


def _array(tmp_path, data, chunks, compressors, name="a", write_empty_chunks=True):
    arr = zarr.create_array(store=str(tmp_path / name), shape=data.shape, dtype=data.dtype, chunks=chunks,
                            zarr_format=3, compressors=compressors, fill_value=0,
                            config={"write_empty_chunks": write_empty_chunks})
    arr[...] = data
    return zarr.open_array(str(tmp_path / name), mode="r")


@pytest.mark.parametrize("compressors", [BLOSC, None], ids=["blosc", "raw"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32, np.float64])
@pytest.mark.parametrize("shape,chunks", [((1000,), (1000,)), ((1000,), (300,)), ((250, 7), (64, 7)),
                                          ((3, 40, 5), (3, 40, 5))])
def test_same_bytes_as_zarr(tmp_path, rng, compressors, dtype, shape, chunks):
    data = (rng.normal(size=shape) * 1000).astype(dtype)
    arr = _array(tmp_path, data, chunks, compressors)
    out = np.full(shape, 7, dtype=dtype)
    assert read_whole_chunks(arr, tmp_path / "a", out)
    assert out.tobytes() == arr[...].tobytes() == data.tobytes()


def test_missing_chunks_read_as_fill_value(tmp_path, rng):
    data = rng.integers(1, 5, size=900).astype(np.int32)
    data[300:600] = 0  # with write_empty_chunks=False Zarr stores no file for this chunk
    arr = _array(tmp_path, data, (300,), BLOSC, write_empty_chunks=False)
    assert not (tmp_path / "a" / "c" / "1").exists()
    out = np.full(900, 9, dtype=np.int32)
    assert read_whole_chunks(arr, tmp_path / "a", out)
    assert np.array_equal(out, data)


@pytest.mark.parametrize("case", ["zstd", "split along axis 1", "strided out", "other dtype"])
def test_layouts_not_covered_are_left_to_zarr(tmp_path, rng, case):
    data = rng.normal(size=(40, 6))
    compressors = [ZstdCodec(level=3)] if case == "zstd" else BLOSC
    chunks = (20, 3) if case == "split along axis 1" else (20, 6)
    arr = _array(tmp_path, data, chunks, compressors)
    out = np.zeros((40, 12))[:, ::2] if case == "strided out" else np.zeros((40, 6))
    if case == "other dtype":
        out = out.astype(np.float32)
    before = out.copy()
    assert not read_whole_chunks(arr, tmp_path / "a", out)
    assert np.array_equal(out, before)
    if case != "other dtype":  # read_into falls back to Zarr for these
        assert read_into(arr, tmp_path / "a", out) is out and np.array_equal(out, data)


@pytest.mark.parametrize("compressors", [BLOSC, None], ids=["blosc", "raw"])
def test_truncated_chunk_is_an_error_naming_the_file(tmp_path, rng, compressors):
    arr = _array(tmp_path, rng.normal(size=500), (500,), compressors)
    chunk = tmp_path / "a" / "c" / "0"
    chunk.write_bytes(chunk.read_bytes()[:-10])
    with pytest.raises(ValueError, match=str(chunk)):
        read_whole_chunks(arr, tmp_path / "a", np.empty(500))


def test_store_reads_use_it(tmp_path, rng, monkeypatch):
    """The Zarr shard backend and DiskBetas read through it (and give what was written);
    the backend works out each array's plan once and reads it again from the plan."""
    import scipy.sparse as sp

    from streamwww.io import _chunks, open_store, write_store
    from streamwww.state import betas as C

    calls, planned = [], []
    real, real_plan = _chunks.read_whole_chunks, _chunks.ChunkPlan.read

    def spy(array, directory, out, **kwargs):
        got = real(array, directory, out, **kwargs)
        calls.append(got)
        return got

    def plan_spy(plan, out, fetched=None):
        planned.append(plan.name)
        return real_plan(plan, out, fetched)

    monkeypatch.setattr(_chunks, "read_whole_chunks", spy)
    monkeypatch.setattr(_chunks.ChunkPlan, "read", plan_spy)
    import streamwww.io

    monkeypatch.setattr(streamwww.io, "read_whole_chunks", spy)  # beta reads call it directly
    made = []
    monkeypatch.setattr(_zarr_backend(), "plan_whole_chunks",
                        lambda *a, **k: made.append(1) or _chunks.plan_whole_chunks(*a, **k))
    X = sp.random(300, 20, density=0.2, format="csr", random_state=1, dtype=np.float32)
    y = rng.integers(0, 3, size=300)
    write_store(tmp_path / "s.zarr", X, y, shard_rows=100)
    store = open_store(tmp_path / "s.zarr")
    for _ in range(2):
        Xr, yr = store.read_shards([0, 1, 2])
        assert (Xr != X).nnz == 0 and np.array_equal(yr, y)
    # indices, data, y and indptr of each shard, read twice from plans made once
    assert sorted(planned) == sorted(["indices", "data", "y", "indptr"] * 6) and len(made) == 12
    assert calls == []

    planned.clear()
    betas = C.DiskBetas(tmp_path / "ck", 1, [100], 4)
    b = rng.normal(size=(1, 100, 3))
    betas.put(0, b)
    assert np.array_equal(betas.get(0), b) and calls == [True] and len(planned) == 1


def _zarr_backend():
    from streamwww.io import _zarr

    return _zarr


@pytest.mark.parametrize("blosc", [None, {"cname": "lz4", "clevel": 1, "shuffle": "noshuffle"},
                                   {"cname": "zstd", "clevel": 3, "shuffle": "shuffle"}])
@pytest.mark.parametrize("separator", ["/", "."])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64])
@pytest.mark.parametrize("shape,chunks", [((3, 40, 5), (3, 40, 5)), ((2, 41, 5), (2, 8, 5)), ((1, 7, 1), (1, 3, 1)),
                                          ((250, 7), (64, 7)), ((1000,), (300,)), ((2, 0, 4), (2, 1, 4))])
def test_encoded_chunks_are_zarrs_objects(rng, dtype, shape, chunks, separator, blosc):
    """encode_chunks (the fast write of beta versions) gives byte for byte the chunk
    objects, keys included, that Zarr writes for a crc32c array, uncompressed or with Blosc,
    with either separator of the default chunk keys, edge chunks padded included (data
    with runs of zeros, as beta has, and compressible or not)."""
    import zarr.storage
    from zarr.codecs import BloscCodec, Crc32cCodec

    from streamwww.io import blosc_of, encode_chunks
    from streamwww.io._zarrcodec import ChunkCodec

    data = (rng.normal(size=shape) * 1000).astype(dtype)
    data[rng.random(size=shape) < 0.7] = 0
    compressors = [] if blosc is None else [BloscCodec(**blosc)]
    codec = None if blosc is None else ChunkCodec(compressors).blosc(dtype)
    objects = {}
    arr = zarr.create_array(store=zarr.storage.MemoryStore(objects), shape=shape, dtype=dtype, chunks=chunks,
                            zarr_format=3, compressors=[*compressors, Crc32cCodec()], fill_value=0,
                            chunk_key_encoding={"name": "default", "separator": separator},
                            config={"write_empty_chunks": True})
    arr[...] = data
    zarrs = {k: v.to_bytes() for k, v in objects.items() if k != "zarr.json"}
    assert encode_chunks(data, chunks, arr.metadata.chunk_key_encoding, codec) == zarrs
    # the codec read off the array's own metadata (how beta versions get theirs) is the same
    assert encode_chunks(data, chunks, arr.metadata.chunk_key_encoding, blosc_of(arr.metadata)) == zarrs
    if separator == "/":  # Zarr's default keys without an encoding given
        assert encode_chunks(data, chunks, blosc=codec) == zarrs


def test_blosc_encode_uses_one_thread_on_the_main_thread(monkeypatch):
    """Called from the main thread (where numcodecs would let c-blosc use its threads, whose
    output depends on timing), blosc_encode compresses on a thread of its own; elsewhere on
    the calling thread; errors reach the caller."""
    import threading

    from streamwww.io._chunks import blosc_encode

    seen = []

    class Probe:
        def encode(self, data):
            seen.append(threading.current_thread() is threading.main_thread())
            if data == b"bad":
                raise ValueError("bad input")
            return b"x" + data

    assert threading.current_thread() is threading.main_thread()
    assert blosc_encode(Probe(), b"ab") == b"xab" and seen == [False]
    with pytest.raises(ValueError, match="bad input"):
        blosc_encode(Probe(), b"bad")
    out = []
    t = threading.Thread(target=lambda: out.append(blosc_encode(Probe(), b"cd")))
    t.start()
    t.join()
    assert out == [b"xcd"] and seen == [False, False, False]


def test_beta_versions_written_directly_read_back_through_zarr(tmp_path, rng):
    from streamwww.state.betas import DiskBetas
    from streamwww.state.versions import beta_name

    betas = DiskBetas(tmp_path, 2, [41, 7], 6)
    for s, rows in enumerate([41, 7]):
        beta = rng.random((2, rows, 5))
        betas.write_version(s, 3, beta)
        arr = zarr.open_array(str(tmp_path / "beta.zarr" / beta_name(s, 3)), mode="r")
        assert arr[...].tobytes() == beta.tobytes() and arr.metadata.codecs[-1].__class__.__name__ == "Crc32cCodec"
        assert betas.read(s, 3).tobytes() == beta.tobytes()


def test_beta_versions_raw_where_zarrs_blosc_chain_is_not_ours(tmp_path, rng, monkeypatch):
    """Where blosc_of finds no Blosc chain it can reproduce (a big-endian machine), beta
    versions are written raw with a zarr.json that says so (never Blosc metadata over raw
    bytes), and read back exactly, directly and through Zarr."""
    from zarr.codecs import BloscCodec

    import streamwww.io
    from streamwww.state.betas import DiskBetas
    from streamwww.state.versions import beta_name

    monkeypatch.setattr(streamwww.io, "blosc_of", lambda metadata: None)
    betas = DiskBetas(tmp_path, 1, [60], 4)
    beta = rng.random((1, 60, 3))
    betas.write_version(0, 1, beta)
    path = tmp_path / "beta.zarr" / beta_name(0, 1)
    arr = zarr.open_array(str(path), mode="r")
    assert not any(isinstance(c, BloscCodec) for c in arr.metadata.codecs)
    assert (path / "c.0.0.0").stat().st_size == beta.nbytes + 4
    assert arr[...].tobytes() == beta.tobytes() and betas.read(0, 1).tobytes() == beta.tobytes()


def test_beta_versions_are_compressed_and_raw_ones_still_read(tmp_path, rng):
    """beta's chunks are Blosc-compressed (mostly zeros: much smaller than the values), read
    back exactly; a version written uncompressed (checkpoints before 2026-11-27) is still
    read, with its crc32c checked."""
    from zarr.codecs import BloscCodec, Crc32cCodec

    from streamwww.errors import CheckpointError
    from streamwww.state.betas import DiskBetas
    from streamwww.state.versions import beta_name

    betas = DiskBetas(tmp_path, 1, [500, 300], 11)
    beta = rng.random((1, 500, 10))
    beta[beta < 0.9] = 0.0
    betas.write_version(0, 2, beta)
    path = tmp_path / "beta.zarr" / beta_name(0, 2)
    arr = zarr.open_array(str(path), mode="r")
    assert isinstance(arr.metadata.codecs[1], BloscCodec) and arr.metadata.codecs[1].cname.value == "lz4"
    chunk_bytes = sum(f.stat().st_size for f in path.iterdir() if f.name != "zarr.json")
    assert chunk_bytes < beta.nbytes / 3
    assert betas.read(0, 2).tobytes() == beta.tobytes()
    old = rng.random((1, 300, 10))
    raw = zarr.create_array(store=str(tmp_path / "beta.zarr" / beta_name(1, 4)), shape=old.shape,
                            dtype="float64", chunks=old.shape, zarr_format=3, compressors=[Crc32cCodec()],
                            chunk_key_encoding={"name": "default", "separator": "."},
                            config={"write_empty_chunks": True})
    raw[...] = old
    assert betas.read(1, 4).tobytes() == old.tobytes()
    chunk = tmp_path / "beta.zarr" / beta_name(1, 4) / "c.0.0.0"
    damaged = bytearray(chunk.read_bytes())
    damaged[100] ^= 1
    chunk.write_bytes(bytes(damaged))
    with pytest.raises(CheckpointError, match="crc32c"):
        betas.read(1, 4)


def test_beta_version_is_one_directory_and_two_files(tmp_path, rng):
    """A version's chunk keys are c.0.0.0 (not c/0/0/0): creating a version makes three
    inodes, not six (on ext4 without a journal each new inode is costly)."""
    from streamwww.state.betas import DiskBetas
    from streamwww.state.versions import beta_name

    betas = DiskBetas(tmp_path, 1, [30], 4)
    betas.write_version(0, 1, rng.random((1, 30, 3)))
    version = tmp_path / "beta.zarr" / beta_name(0, 1)
    assert sorted(p.relative_to(version).as_posix() for p in version.rglob("*")) == ["c.0.0.0", "zarr.json"]


def test_beta_versions_of_the_nested_layout_still_read(tmp_path, rng):
    """Versions written before the flat chunk keys (c/0/0/0, Zarr's default) are read as
    they are: a checkpoint of an earlier streamwww resumes."""
    from zarr.codecs import Crc32cCodec

    from streamwww.state.betas import DiskBetas
    from streamwww.state.versions import beta_name

    betas = DiskBetas(tmp_path, 2, [41], 6)
    beta = rng.random((2, 41, 5))
    path = tmp_path / "beta.zarr" / beta_name(0, 4)
    old = zarr.create_array(str(path), shape=beta.shape, dtype="float64", chunks=(2, 16, 5), zarr_format=3,
                            compressors=[Crc32cCodec()], config={"write_empty_chunks": True})
    old[...] = beta
    assert (path / "c" / "0" / "2" / "0").is_file()
    assert betas.read(0, 4).tobytes() == beta.tobytes()
