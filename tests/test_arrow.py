"""NumPy <-> Arrow without pandas (streamwww._arrow), and Parquet I/O that never imports pandas."""

import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pytest

from streamwww._arrow import column_to_numpy, from_numpy, to_numpy


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.float32, np.float64])
def test_numbers_round_trip_through_arrow_sharing_memory(dtype):
    a = np.arange(7, dtype=dtype)
    arr = from_numpy(a)
    assert arr.type == pa.from_numpy_dtype(np.dtype(dtype)) and arr.to_pylist() == a.tolist()
    back = to_numpy(arr)
    assert back.dtype == dtype and np.array_equal(back, a)
    assert np.shares_memory(back, a)  # zero-copy both ways


def test_a_slice_of_an_arrow_array_reads_from_its_offset():
    arr = from_numpy(np.arange(10, dtype=np.float64)).slice(3, 4)
    assert to_numpy(arr).tolist() == [3.0, 4.0, 5.0, 6.0]
    assert to_numpy(arr.slice(4, 0)).shape == (0,)
    empty = from_numpy(np.empty(0, dtype=np.int32))
    assert len(empty) == 0 and empty.type == pa.int32() and to_numpy(empty).dtype == np.int32


def test_strided_and_byte_swapped_inputs_are_converted_by_value():
    m = np.arange(12, dtype=np.float64).reshape(3, 4)
    assert to_numpy(from_numpy(m[:, 1])).tolist() == [1.0, 5.0, 9.0]
    swapped = np.arange(3, dtype=">i4")
    assert to_numpy(from_numpy(swapped)).tolist() == [0, 1, 2]


@pytest.mark.parametrize("dtype", [str, object])
@pytest.mark.parametrize("words", [["a", "", "bc", "a\x00b", "x" * 300],  # ASCII: a character a byte
                                   ["a", "", "bc", "h\u00e9llo", "\u6f22\u5b57", "\U0001f600", "x" * 300]])
def test_strings_are_encoded_as_arrow_does(dtype, words):
    arr = from_numpy(np.array(words, dtype=dtype))
    assert arr.type == pa.string() and arr.to_pylist() == words
    assert arr.equals(pa.array(words))  # the same offsets and bytes as pyarrow's own conversion
    arr.validate(full=True)
    empty = from_numpy(np.array([], dtype=dtype))
    assert len(empty) == 0 and empty.type == pa.string()  # (pyarrow's own: null for an empty object array)


def test_strings_past_the_int32_offsets_are_a_large_string(monkeypatch):
    import streamwww._arrow as arrow

    monkeypatch.setattr(arrow, "STRING_BYTES", 5)  # (2 GiB of text in a test: the same branch)
    arr = from_numpy(np.array(["abc", "d\u00e9f", "g"]))
    assert arr.type == pa.large_string() and arr.to_pylist() == ["abc", "d\u00e9f", "g"]
    arr.validate(full=True)
    assert from_numpy(np.array(["ab", "c"])).type == pa.string()  # 3 bytes: within


def test_what_is_not_a_plain_number_array_goes_through_pyarrow():
    assert from_numpy(np.array([True, False])).type == pa.bool_()
    assert from_numpy(np.array(["a", None], dtype=object)).to_pylist() == ["a", None]
    assert from_numpy(np.array([b"a", b"bc"], dtype=object)).type == pa.binary()
    with_nulls = pa.array([1.0, None, 3.0])
    assert np.isnan(to_numpy(with_nulls)[1])


def test_a_column_of_several_chunks_is_joined():
    col = pa.chunked_array([from_numpy(np.arange(3, dtype=np.int32)), from_numpy(np.arange(3, 5, dtype=np.int32))])
    assert column_to_numpy(col).tolist() == [0, 1, 2, 3, 4]
    assert column_to_numpy(pa.chunked_array([], type=pa.int32())).shape == (0,)


def test_parquet_stores_are_written_and_read_without_importing_pandas(tmp_path):
    """pyarrow's pa.array, to_numpy and pq.read_table import pandas where it is installed
    (0.25-0.4 s of a small command): the command line's Parquet conversion and training,
    a store's reads and Parquet predictions must not."""
    pytest.importorskip("pandas")  # where pandas is absent nothing could import it
    d, s, ck = tmp_path / "d.txt", tmp_path / "s", tmp_path / "ck"
    script = textwrap.dedent(f"""
        import sys
        import numpy as np
        from streamwww.cli import main
        from streamwww.io import make_data, open_store
        make_data({str(d)!r}, rows=300, features=20, nnz_per_row=4, classes=3, seed=0)
        assert main(["convert", {str(d)!r}, {str(s)!r}, "--format", "parquet", "--shard-rows", "100", "-q"]) == 0
        assert main(["train", {str(s)!r}, "--checkpoint-dir", {str(ck)!r}, "--max-iter", "5", "--tol", "0",
                     "--model-out", {str(tmp_path / "m.npz")!r}, "-q"]) == 0
        st = open_store({str(s)!r})
        X, y = st.read_shards(list(range(st.n_shards)))
        from pathlib import Path
        from streamwww.model.predict import _write_part
        Path({str(tmp_path / "p")!r}).mkdir()
        _write_part(Path({str(tmp_path / "p")!r}), 0, np.ones((3, 2)), np.array([1.0, 2.0]), True, "parquet")
        _write_part(Path({str(tmp_path / "p")!r}), 1, np.array(["cat", "dog", "cat"]), np.array(["cat", "dog"]),
                    False, "parquet")
        print(X.shape, sorted(m for m in ("pandas", "pyarrow.dataset") if m in sys.modules))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "(300, 20) []"
    import pyarrow.parquet as pq

    assert pq.read_table(tmp_path / "p" / "part-00000.parquet").column_names == ["score_1", "score_2"]
    assert pq.read_table(tmp_path / "p" / "part-00001.parquet")["label"].to_pylist() == ["cat", "dog", "cat"]
