"""One contract for every shard format, written once and run per format.

Each subclass names its format and shows how a plain ``zarr`` / ``pyarrow``
user reads a shard without streamwww (the recipe of docs/FORMAT.md).
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import scipy.sparse as sp

from streamwww.errors import DataFormatError, ShardFormatError, StoreExistsError
from streamwww.io import ShardStore, open_store, write_store
from streamwww.io._backend import get_backend
from tests.io.conftest import assert_same_csr, leftovers, read_all


def sparse_data(n=250, d=40, density=0.15, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=density, format="csr", random_state=rng, dtype=dtype)
    X.data = rng.normal(size=X.nnz).astype(dtype)
    y = rng.choice([3.0, -1.0, 7.5, 2.0], size=n)
    return X, y


class StoreContract:
    """Behaviour every format must have."""

    format: str

    def read_plain(self, store_path, i, layout, n_features):
        """Read shard ``i`` with the format's own library only: ``(X, y)``."""
        raise NotImplementedError

    def write(self, path, X, y, **kw):
        return write_store(path, X, y, format=self.format, **kw)

    # ---------------------------------------------------------------- round trips

    @pytest.mark.parametrize("shard_rows", [7, 100, 1000])
    def test_sparse_round_trip(self, tmp_path, shard_rows):
        X, y = sparse_data()
        store = self.write(tmp_path / "s", X, y, shard_rows=shard_rows, layout="sparse")
        assert isinstance(store, ShardStore)
        assert (store.format, store.layout, store.dtype) == (self.format, "sparse", np.float32)
        assert (store.n_rows, store.n_features, store.nnz) == (250, 40, X.nnz)
        assert store.n_shards == len(store) == -(-250 // shard_rows)
        assert store.shard_rows.sum() == 250 and store.shard_rows.dtype == np.int64
        assert np.array_equal(store.shard_offsets, np.concatenate([[0], np.cumsum(store.shard_rows)]))
        assert store.classes.tolist() == [-1.0, 2.0, 3.0, 7.5]
        assert store.classes.dtype == np.float64 and store.n_classes == 4
        got_X, got_y = read_all(store)
        assert_same_csr(got_X, X.astype(np.float32))
        assert np.array_equal(got_y, y)

    def test_one_row_shards(self, tmp_path):
        X, y = sparse_data(n=12)
        X.data[X.indptr[3]:X.indptr[4]] = 0  # an empty row is a shard too
        X.eliminate_zeros()
        store = self.write(tmp_path / "s", X, y, shard_rows=1)
        assert store.n_shards == 12 and store.shard_rows.tolist() == [1] * 12
        assert store.read_shard(3)[0].nnz == 0
        assert_same_csr(read_all(store)[0], X.astype(np.float32))

    def test_shard_arrays_have_the_promised_types(self, tmp_path):
        X, y = sparse_data()
        store = self.write(tmp_path / "s", X, y, shard_rows=100, layout="sparse")
        for i in range(store.n_shards):
            Xi, yi = store.read_shard(i)
            assert isinstance(Xi, sp.csr_matrix) and Xi.has_sorted_indices
            assert Xi.indices.dtype == np.int32 and Xi.indptr.dtype == np.int32
            assert Xi.dtype == np.float32 and yi.dtype == np.int32
            assert Xi.shape == (store.shard_rows[i], 40)
            assert Xi.data.flags.writeable and yi.flags.writeable
            nbytes = Xi.data.nbytes + Xi.indices.nbytes + Xi.indptr.nbytes + yi.nbytes
            assert store.shard_nbytes(i) == nbytes

    def test_dense_round_trip(self, tmp_path):
        rng = np.random.default_rng(1)
        X = rng.normal(size=(90, 6))
        y = rng.integers(0, 3, size=90)
        store = self.write(tmp_path / "d", X, y, shard_rows=40, dtype=np.float64)
        assert store.layout == "dense" and store.dtype == np.float64  # auto: fully dense
        parts = [store.read_shard(i) for i in range(store.n_shards)]
        for Xi, yi in parts:
            assert isinstance(Xi, np.ndarray) and Xi.flags.c_contiguous and Xi.flags.writeable
            assert Xi.dtype == np.float64 and yi.dtype == np.int32
        assert np.array_equal(np.vstack([p[0] for p in parts]), X)
        assert np.array_equal(store.classes[np.concatenate([p[1] for p in parts])], y)
        assert store.shard_nbytes(0) == parts[0][0].nbytes + parts[0][1].nbytes

    def test_layout_conversions(self, tmp_path):
        X, y = sparse_data(density=0.05)
        dense = self.write(tmp_path / "a", X, y, layout="dense")
        assert dense.layout == "dense" and dense.nnz == X.shape[0] * X.shape[1]
        assert np.array_equal(dense.read_shard(0)[0], X.astype(np.float32).toarray())
        auto = self.write(tmp_path / "b", X, y)
        assert auto.layout == "sparse"
        back = self.write(tmp_path / "c", X.toarray(), y, layout="sparse")
        assert_same_csr(back.read_shard(0)[0], X.astype(np.float32))

    def test_shard_mb_bounds_each_shard(self, tmp_path):
        X, y = sparse_data(n=400)
        limit = 0.004  # MiB
        store = self.write(tmp_path / "s", X, y, shard_mb=limit)
        assert store.n_shards > 3
        sizes = [store.shard_nbytes(i) for i in range(store.n_shards)]
        assert max(sizes) <= limit * 2**20
        assert min(sizes[:-1]) > 0.8 * limit * 2**20  # shards are filled, not tiny

    def test_string_labels_and_given_classes(self, tmp_path):
        X, _ = sparse_data(n=30)
        y = np.array(["cat", "dog"] * 15)
        store = self.write(tmp_path / "s", X, y, classes=["dog", "bird", "cat"])
        assert store.classes.tolist() == ["bird", "cat", "dog"]
        assert np.array_equal(read_all(store)[1], y)
        with pytest.raises(DataFormatError, match=r"label 'cow' \(row 0\) is not one of"):
            self.write(tmp_path / "t", X, np.array(["cow"] * 30), classes=["dog", "cat"])
        assert not (tmp_path / "t").exists()

    def test_bad_inputs(self, tmp_path):
        X, y = sparse_data(n=10)
        with pytest.raises(DataFormatError, match="10 rows but y has 9"):
            self.write(tmp_path / "s", X, y[:9])
        bad = X.toarray()
        bad[0, 0] = np.nan
        with pytest.raises(DataFormatError, match="NaN or infinite"):
            self.write(tmp_path / "s", bad, y)
        with pytest.raises(ValueError, match="'shard_rows' or 'shard_mb', not both"):
            self.write(tmp_path / "s", X, y, shard_rows=2, shard_mb=1)
        with pytest.raises(ValueError, match="'layout' parameter"):
            self.write(tmp_path / "s", X, y, layout="csr")
        assert not (tmp_path / "s").exists()

    # ---------------------------------------------------------------- fingerprint

    def test_fingerprint_identifies_content(self, tmp_path):
        X, y = sparse_data()
        a = self.write(tmp_path / "a", X, y, shard_rows=50)
        b = self.write(tmp_path / "b", X, y, shard_rows=50)
        assert a.fingerprint == b.fingerprint and len(a.fingerprint) == 64
        X2 = X.copy()
        X2.data[5] += 1.0
        assert self.write(tmp_path / "c", X2, y, shard_rows=50).fingerprint != a.fingerprint
        assert self.write(tmp_path / "d", X, y, shard_rows=60).fingerprint != a.fingerprint
        json.dumps(a.metadata)  # JSON-able

    # ---------------------------------------------------------------- errors

    def test_bad_shard_index(self, tmp_path):
        store = self.write(tmp_path / "s", *sparse_data(), shard_rows=100)
        for i in (-1, 3, 10**9):
            with pytest.raises(ShardFormatError, match=rf"{store.path}: shard {i} does not exist"):
                store.read_shard(i)
        with pytest.raises(TypeError):
            store.read_shard(1.0)

    def test_reading_a_shard_reads_only_that_shard(self, tmp_path):
        X, y = sparse_data()
        store = self.write(tmp_path / "s", X, y, shard_rows=100)
        backend = get_backend(self.format)
        for i in (0, 2):
            shutil.move(store.path / backend.shard_relpath(i), tmp_path / f"moved{i}")
        Xi, _ = store.read_shard(1)
        assert_same_csr(Xi, X[100:200].astype(np.float32))
        with pytest.raises(ShardFormatError, match=rf"{store.path}: shard 2 \(shard-00002"):
            store.read_shard(2)

    @pytest.mark.parametrize("layout", ["sparse", "dense"])
    def test_read_shards_equals_stacked_shards(self, tmp_path, layout):
        """A group read decodes into one buffer; it must equal stacking the shards."""
        X, y = sparse_data(n=250, density=0.3)
        store = self.write(tmp_path / "s", X, y, shard_rows=60, layout=layout)
        for ids in ([2], [3, 0], [4, 1, 2], [1, 1]):
            Xg, yg = store.read_shards(ids)
            parts = [store.read_shard(i) for i in ids]
            assert np.array_equal(yg, np.concatenate([p[1] for p in parts])) and yg.dtype == np.int32
            if layout == "dense":
                assert isinstance(Xg, np.ndarray) and Xg.flags.c_contiguous
                assert np.array_equal(Xg, np.vstack([p[0] for p in parts]))
            else:
                assert Xg.has_sorted_indices and Xg.indptr.dtype == Xg.indices.dtype == np.int32
                assert_same_csr(Xg, sp.vstack([p[0] for p in parts], format="csr"))

    def store_with_wrong_shard_2(self, tmp_path):
        """A 250-row store whose shard 2 (50 rows expected) is a copy of a 100-row shard."""
        X, y = sparse_data()
        store = self.write(tmp_path / "s", X, y, shard_rows=100)
        other = self.write(tmp_path / "o", X[:100], y[:100], shard_rows=100)
        backend = get_backend(self.format)
        target = store.path / backend.shard_relpath(2)
        shutil.rmtree(target) if target.is_dir() else target.unlink()
        src = other.path / backend.shard_relpath(0)
        (shutil.copytree if src.is_dir() else shutil.copy)(src, target)
        return store

    def test_group_read_names_the_bad_shard(self, tmp_path):
        store = self.store_with_wrong_shard_2(tmp_path)
        assert store.read_shards([0, 1])[0].shape == (200, 40)
        with pytest.raises(ShardFormatError, match=r"shard 2 .*(expected|crc32c mismatch)"):
            store.read_shards([0, 2])
        with pytest.raises(ValueError, match="at least one"):
            store.read_shards([])

    def test_corrupt_shard_is_detected(self, tmp_path):
        store = self.store_with_wrong_shard_2(tmp_path)
        with pytest.raises(ShardFormatError, match=r"shard 2 .*(expected|crc32c mismatch)"):
            store.read_shard(2)

    def test_incomplete_store_does_not_open(self, tmp_path):
        store = self.write(tmp_path / "s", *sparse_data())
        (store.path / "streamwww.json").unlink()
        with pytest.raises(ShardFormatError, match="is not a complete streamwww store"):
            open_store(store.path)
        with pytest.raises(FileNotFoundError):
            open_store(tmp_path / "nothing")

    def test_edited_or_future_metadata_is_refused(self, tmp_path):
        store = self.write(tmp_path / "s", *sparse_data())
        marker = store.path / "streamwww.json"
        meta = json.loads(marker.read_text())
        meta["n_features"] += 1
        marker.write_text(json.dumps(meta))
        with pytest.raises(ShardFormatError, match="fingerprint does not match"):
            open_store(store.path)
        meta["format_version"] = 99
        marker.write_text(json.dumps(meta))
        with pytest.raises(ShardFormatError, match="format version 99 is not supported"):
            open_store(store.path)
        marker.write_text("{")
        with pytest.raises(ShardFormatError, match="cannot read streamwww.json"):
            open_store(store.path)

    # ---------------------------------------------------------------- atomicity

    def test_existing_output_is_refused_unless_overwrite(self, tmp_path):
        X, y = sparse_data()
        first = self.write(tmp_path / "s", X, y)
        with pytest.raises(StoreExistsError, match="already exists"):
            self.write(tmp_path / "s", X[:10], y[:10])
        assert open_store(tmp_path / "s").fingerprint == first.fingerprint
        again = self.write(tmp_path / "s", X[:10], y[:10], overwrite=True)
        assert again.n_rows == 10 and leftovers(again.path) == []
        (tmp_path / "other").mkdir()
        (tmp_path / "other" / "precious.txt").write_text("keep me")
        with pytest.raises(StoreExistsError, match="not a streamwww store"):
            self.write(tmp_path / "other", X, y, overwrite=True)
        assert (tmp_path / "other" / "precious.txt").exists()

    def test_failed_write_leaves_nothing(self, tmp_path, monkeypatch):
        calls = []
        if self.format == "zarr":  # a local Zarr store is written by its writer thread
            from streamwww.io._zarrwriter import LocalZarrSink

            original = LocalZarrSink._write_rest

            def failing(self_, *args):
                calls.append(self_.i)
                if self_.i == 2:
                    raise OSError("disk full (simulated)")
                return original(self_, *args)

            monkeypatch.setattr(LocalZarrSink, "_write_rest", failing)
        else:
            from streamwww.io import writer as store_mod

            monkeypatch.setattr(store_mod, "_POOL_SHARD_BYTES", 0)  # in turn (threads: below)
            backend = get_backend(self.format)
            original = type(backend).write_shard

            def failing(self_, root, i, shard, **kw):
                calls.append(i)
                if i == 2:
                    raise OSError("disk full (simulated)")
                return original(self_, root, i, shard, **kw)

            monkeypatch.setattr(type(backend), "write_shard", failing)
        with pytest.raises(OSError, match="simulated"):
            self.write(tmp_path / "s", *sparse_data(), shard_rows=50)
        assert calls == [0, 1, 2]
        assert not (tmp_path / "s").exists() and leftovers(tmp_path / "s") == []

    def test_stale_temporary_directory_is_cleaned(self, tmp_path):
        stale = tmp_path / ".s.streamwww-tmp-999999999-abcd1234"  # no such pid
        stale.mkdir()
        (stale / "junk").write_text("x")
        store = self.write(tmp_path / "s", *sparse_data())
        assert not stale.exists() and store.n_rows == 250
        with pytest.raises(FileNotFoundError):
            open_store(stale)

    # ---------------------------------------------------------------- plain readers

    @pytest.mark.parametrize("layout", ["sparse", "dense"])
    def test_plain_library_reads_every_shard(self, tmp_path, layout):
        X, y = sparse_data()
        store = self.write(tmp_path / "s", X, y, shard_rows=100, layout=layout)
        meta = json.loads((store.path / "streamwww.json").read_text())
        for i, rec in enumerate(meta["shards"]):
            Xp, yp = self.read_plain(store.path, i, layout, meta["n_features"])
            Xs, ys = store.read_shard(i)
            assert np.array_equal(yp, ys)
            if layout == "sparse":
                assert_same_csr(sp.csr_matrix(Xp), Xs)
            else:
                assert np.array_equal(Xp, Xs)
            assert rec["rows"] == len(yp)


class TestZarrStore(StoreContract):
    format = "zarr"

    def read_plain(self, store_path, i, layout, n_features):
        import zarr

        g = zarr.open_group(str(store_path / f"shard-{i:05d}"), mode="r")
        assert g.attrs["streamwww"]["n_features"] == n_features
        y = g["y"][:]
        if layout == "dense":
            return g["X"][:], y
        X = sp.csr_matrix((g["data"][:], g["indices"][:], g["indptr"][:]),
                          shape=(len(y), n_features))
        return X, y


    def test_shards_are_lz4_and_zstd_stores_still_read(self, tmp_path, monkeypatch):
        import zarr
        from zarr.codecs import BloscCodec

        from streamwww.io import _zarr

        X, y = sparse_data()
        store = self.write(tmp_path / "lz4", X, y, shard_rows=100)
        codec = zarr.open_array(str(store.path / "shard-00000" / "data"), mode="r").compressors[0]
        assert (codec.cname.value, codec.shuffle.value) == ("lz4", "shuffle")
        # a store written before the switch (zstd) reads the same
        monkeypatch.setattr(_zarr, "_compressors", lambda: [BloscCodec(cname="zstd", clevel=3, shuffle="shuffle")])
        old = self.write(tmp_path / "zstd", X, y, shard_rows=100)
        codec = zarr.open_array(str(old.path / "shard-00001" / "data"), mode="r").compressors[0]
        assert codec.cname.value == "zstd"
        assert_same_csr(read_all(old)[0], read_all(store)[0])
        assert_same_csr(old.read_shards([2, 0])[0], store.read_shards([2, 0])[0])


class TestParquetStore(StoreContract):
    format = "parquet"

    def read_plain(self, store_path, i, layout, n_features):
        import pyarrow.parquet as pq

        t = pq.read_table(store_path / f"shard-{i:05d}.parquet")
        assert json.loads(t.schema.metadata[b"streamwww"])["n_features"] == n_features
        y = t["y"].to_numpy()
        if layout == "dense":
            return t["x"].combine_chunks().flatten().to_numpy().reshape(len(y), n_features), y
        indices = t["indices"].combine_chunks()
        values = t["values"].combine_chunks()
        X = sp.csr_matrix((values.values.to_numpy(), indices.values.to_numpy(),
                           indices.offsets.to_numpy()), shape=(len(y), n_features))
        return X, y


def test_parquet_shards_written_on_threads_equal_those_written_in_turn(tmp_path, monkeypatch):
    """Small Parquet shards go to a pool of threads (two in flight at most here);
    the files are those written one after the other, and a failed write stops
    the store."""
    import json

    from streamwww.io import _shardsink, writer as store_mod

    X, y = sparse_data()
    pooled = []
    real = _shardsink.ShardPool.submit
    monkeypatch.setattr(_shardsink.ShardPool, "submit",
                        lambda self, fn, n: pooled.append(n) or real(self, fn, n))
    a = write_store(tmp_path / "a", X, y, format="parquet", shard_rows=40)
    assert len(pooled) == a.n_shards > 2
    monkeypatch.setattr(store_mod, "_POOL_SHARD_BYTES", 0)  # every shard in turn
    b = write_store(tmp_path / "b", X, y, format="parquet", shard_rows=40)
    assert a.fingerprint == b.fingerprint
    for f in sorted((tmp_path / "a").iterdir()):
        other = (tmp_path / "b" / f.name).read_bytes()
        if f.name == "streamwww.json":
            strip = (lambda d: {k: v for k, v in json.loads(d).items() if k != "created"})
            assert strip(f.read_bytes()) == strip(other)
        else:
            assert f.read_bytes() == other, f.name

    def failing(self):
        if self.i == 3:
            raise OSError(28, "No space left on device")
        return real_write(self)

    real_write = _shardsink.BufferedSink._write
    monkeypatch.setattr(store_mod, "_POOL_SHARD_BYTES", 2**30)
    monkeypatch.setattr(_shardsink.BufferedSink, "_write", failing)
    with pytest.raises(OSError, match="No space"):
        write_store(tmp_path / "c", X, y, format="parquet", shard_rows=40)
    assert not (tmp_path / "c").exists() and leftovers(tmp_path / "c") == []
