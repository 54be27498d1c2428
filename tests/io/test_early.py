"""Shards written while parsing (streamwww.io._early) equal those of the two-pass path."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from streamwww.errors import LibsvmFormatError
from streamwww.io import _early, _zarr, _zarrwriter, convert, convert_libsvm
from tests.io.test_zarrwriter import _files


def _text(rows: int, *, seed: int = 0, late_column: int | None = None, dense_after: int | None = None,
          empty_every: int = 0) -> str:
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(rows):
        if dense_after is not None and i >= dense_after:
            cols = np.arange(1, 61)
        else:
            top = late_column if late_column is not None and i > rows * 3 // 4 else 60
            cols = np.sort(rng.choice(np.arange(1, top + 1), 5, replace=False))
        if empty_every and i % empty_every == 0:
            cols = cols[:0]
        pairs = " ".join(f"{c}:{rng.normal():.5g}" for c in cols)
        lines.append(f"{rng.integers(0, 4) * 2 - 3} {pairs}\n")
    return "".join(lines)


def _convert_both(tmp_path, monkeypatch, text: str, **kwargs):
    """The store written early, and the same conversion through staging."""
    src = tmp_path / "in.libsvm"
    src.write_text(text)
    used, backs = [], []
    real_complete, real_back = _early.EarlyZarrWriter.complete, _early.EarlyZarrWriter.rows_back
    monkeypatch.setattr(_early.EarlyZarrWriter, "complete",
                        lambda self, *a, **k: used.append(1) or real_complete(self, *a, **k))
    monkeypatch.setattr(_early.EarlyZarrWriter, "rows_back",
                        lambda self: backs.append(1) or real_back(self))
    early = convert_libsvm(src, tmp_path / "early", **kwargs)
    with monkeypatch.context() as m:
        m.setattr(convert, "local_codec", lambda *a: None)  # two passes, through staging
        staged = convert_libsvm(src, tmp_path / "staged", **kwargs)
    a, b = _files(tmp_path / "early"), _files(tmp_path / "staged")
    assert a.keys() == b.keys()
    assert [k for k in a if a[k] != b[k]] == []
    assert early.fingerprint == staged.fingerprint
    return early, bool(used), bool(backs)


@pytest.mark.parametrize("case,text,kwargs", [
    ("plain", _text(3000), dict(shard_mb=0.05)),
    ("shard-rows", _text(2000), dict(shard_rows=333)),
    ("float64", _text(2000), dict(shard_mb=0.05, dtype=np.float64)),
    ("empty-rows", _text(2000, empty_every=7), dict(shard_rows=500)),
    ("n-features", _text(2000), dict(shard_rows=700, n_features=100)),
    ("sparse-layout", _text(1500, dense_after=0), dict(shard_rows=400, layout="sparse")),
])
def test_early_shards_equal_the_two_pass_ones(tmp_path, monkeypatch, case, text, kwargs):
    store, early, back = _convert_both(tmp_path, monkeypatch, text, block_bytes=2**14, **kwargs)
    assert early and not back and store.layout == "sparse" and store.n_shards > 1


def test_streamed_chunks_and_weights(tmp_path, monkeypatch):
    monkeypatch.setattr(_zarr, "_CHUNK_ELEMENTS", 1000)
    text = _text(3000)
    weights = tmp_path / "w.txt"
    weights.write_text("".join(f"{(i % 7) / 2}\n" for i in range(3000)))
    store, early, _ = _convert_both(tmp_path, monkeypatch, text, shard_rows=1200,
                                    block_bytes=2**14, weights=weights)
    assert early and store.has_weights
    assert len(store.metadata["shards"][0]["crc32c"]["indices"]) > 1  # several chunks


def test_a_later_larger_column_rehashes_the_earlier_shards(tmp_path, monkeypatch):
    reads = []
    real = _zarrwriter.EarlyShard.read
    monkeypatch.setattr(_zarrwriter.EarlyShard, "read",
                        lambda self, name: reads.append(name) or real(self, name))
    store, early, _ = _convert_both(tmp_path, monkeypatch, _text(4000, late_column=5000),
                                    shard_rows=500, block_bytes=2**14)
    assert early and store.n_features > 60
    assert reads  # the shards closed before column 60+ appeared were hashed again


def test_auto_layout_that_comes_out_dense_reads_the_rows_back(tmp_path, monkeypatch):
    store, early, back = _convert_both(tmp_path, monkeypatch, _text(6000, dense_after=300),
                                       shard_mb=0.05, block_bytes=2**13)
    assert back and not early and store.layout == "dense"
    assert not list((tmp_path / "early").glob("_*"))


def test_dense_first_block_stages_as_before(tmp_path, monkeypatch):
    store, early, back = _convert_both(tmp_path, monkeypatch, _text(2000, dense_after=0),
                                       shard_rows=500, block_bytes=2**14)
    assert not early and not back and store.layout == "dense"


def test_error_while_writing_early_leaves_nothing(tmp_path):
    text = _text(3000) + "1 3:1 3:2\n"
    src = tmp_path / "in.libsvm"
    src.write_text(text)
    with pytest.raises(LibsvmFormatError, match="duplicate index 3") as info:
        convert_libsvm(src, tmp_path / "s", shard_rows=100, block_bytes=2**14)
    assert info.value.line == 3001
    assert not (tmp_path / "s").exists()
    assert list(tmp_path.iterdir()) == [src]
    assert [t for t in threading.enumerate() if t.name.startswith("streamwww-zarr-")] == []
