"""The local Zarr writer (streamwww.io._zarrwriter) writes the bytes Zarr writes."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from streamwww.io import _zarr, _zarrcodec, _zarrwriter, open_store, write_store, writer


def _files(root: Path) -> dict[str, bytes]:
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            if path.name == "streamwww.json":
                meta = json.loads(data)
                meta.pop("created")
                data = json.dumps(meta, sort_keys=True).encode()
            out[str(path.relative_to(root))] = data
    return out


def _data(rows: int, n_features: int, density: float, dtype, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = sp.random(rows, n_features, density=density, format="csr", random_state=rng,
                  dtype=np.float64).astype(dtype)
    keep = np.ones(rows, dtype=dtype)
    keep[3::50] = 0  # some rows without values
    X = sp.csr_matrix(sp.diags(keep) @ X)
    X.eliminate_zeros()
    X.data[::7] = 0.0  # explicit zeros are kept
    X.data[1::7] = -0.0
    return X, rng.integers(0, 3, rows)


CASES = {
    # name: (rows, n_features, density, dtype, layout, weights, chunk elements, shard_rows)
    "sparse-f32-streamed": (3000, 200, 0.05, np.float32, "sparse", False, 1000, 2000),
    "sparse-f64-streamed": (3000, 200, 0.05, np.float64, "sparse", False, 1000, None),
    "sparse-exact-chunks": (1000, 100, 0.04, np.float32, "sparse", False, 500, 500),
    "sparse-one-chunk": (400, 50, 0.1, np.float32, "sparse", False, 2**22, 150),
    "sparse-weights": (2500, 80, 0.1, np.float32, "sparse", True, 700, 1200),
    "dense-streamed": (2000, 12, 0.9, np.float32, "dense", False, 600, 900),
    "dense-weights-f64": (1500, 9, 0.9, np.float64, "dense", True, 500, None),
    "no-values": (300, 40, 0.0, np.float32, "sparse", False, 100, 120),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_same_files_as_zarr(tmp_path, monkeypatch, case):
    rows, n_features, density, dtype, layout, weighted, chunk, shard_rows = CASES[case]
    monkeypatch.setattr(_zarr, "_CHUNK_ELEMENTS", chunk)
    X, y = _data(rows, n_features, density, dtype)
    if density == 0.0:
        X = sp.csr_matrix((rows, n_features), dtype=dtype)
    weight = np.random.default_rng(1).uniform(0.5, 2, rows) if weighted else None
    kwargs = dict(shard_rows=shard_rows, shard_mb=None if shard_rows else 0.05, layout=layout,
                  dtype=dtype, sample_weight=weight, format="zarr")
    ours = write_store(tmp_path / "ours", X, y, **kwargs)
    used = []
    real = _zarrwriter.LocalZarrSink.close
    monkeypatch.setattr(_zarrwriter.LocalZarrSink, "close",
                        lambda self: used.append(1) or real(self))
    write_store(tmp_path / "ours2", X, y, **kwargs)
    assert used  # the local writer did write it
    monkeypatch.setattr(writer, "local_codec", lambda *a: None)  # through Zarr itself
    theirs = write_store(tmp_path / "zarr", X, y, **kwargs)
    assert ours.fingerprint == theirs.fingerprint
    a, b = _files(tmp_path / "ours"), _files(tmp_path / "zarr")
    assert a.keys() == b.keys()
    assert [k for k in a if a[k] != b[k]] == []
    if chunk < rows * 2:  # some array had several chunks
        assert any(k.endswith("c/1") or k.endswith("c/1/0") for k in a)
    Xr, yr = open_store(tmp_path / "ours").read_shards(range(ours.n_shards))
    assert np.array_equal(sp.csr_matrix(Xr).toarray(), X.toarray())


def test_codec_follows_zarrs_blosc_choice():
    codec = _zarrcodec.ChunkCodec(_zarr._compressors())
    assert codec.blosc(np.dtype(">f4")) is None  # big endian: not this writer's job
    import google_crc32c
    from numcodecs import blosc

    for dtype in (np.int64, np.int32, np.float32, np.float64):
        values = np.arange(1000).astype(dtype)
        data, crc = codec.encode(values)
        typesize, _, _ = blosc._cbuffer_metainfo(data)  # as Zarr sets it: the dtype's size
        assert typesize == values.dtype.itemsize
        assert bytes(blosc.decompress(data)) == values.tobytes()
        assert crc == google_crc32c.value(data)


def test_writer_thread_raises_the_first_failure_and_skips_later_jobs():
    writer = _zarrwriter.WriterThread("test", depth=1)
    ran = []
    gate = threading.Event()

    def fail():
        gate.wait(5)
        raise OSError(28, "No space left on device")

    first = writer.submit(fail)
    writer.submit(ran.append, 1)
    gate.set()
    with pytest.raises(OSError, match="No space"):
        for _ in range(3):  # the queue is full: this waits for the failed job
            writer.submit(ran.append, 2)
    with pytest.raises(OSError):
        first.result()
    writer.close()
    assert ran == []


def test_writer_threads_stop_when_the_conversion_fails(tmp_path, monkeypatch):
    monkeypatch.setattr(_zarr, "_CHUNK_ELEMENTS", 500)
    X, y = _data(3000, 100, 0.05, np.float32)

    def broken(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_zarrwriter, "write_file", broken)
    with pytest.raises(OSError, match="No space"):
        write_store(tmp_path / "s", X, y, shard_rows=700)
    assert not (tmp_path / "s").exists()
    assert [t for t in threading.enumerate() if t.name.startswith("streamwww-zarr-")] == []
