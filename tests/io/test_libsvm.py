"""The streaming LIBSVM parser against a plain-Python reference."""

from __future__ import annotations

import bz2
import gzip
import lzma

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamwww.errors import DataFormatError, LibsvmFormatError
from streamwww.io import LibsvmReader, convert_libsvm, load_libsvm
from tests.io.conftest import (
    assert_same_csr,
    leftovers,
    read_all,
    reference_parse,
    rows_to_csr,
)

HYPO = settings(max_examples=40, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


def check_against_reference(path, text, zero_based=False, block_bytes=None, dtype=np.float32):
    rows, labels = reference_parse(text, zero_based)
    n_features = 1 + max((c for r in rows for c, _ in r), default=-1)
    kwargs = {} if block_bytes is None else {"block_bytes": block_bytes}
    X, y = load_libsvm(path, zero_based=zero_based, dtype=dtype, **kwargs)
    assert X.shape == (len(rows), n_features)
    assert X.dtype == dtype
    assert_same_csr(X, rows_to_csr(rows, n_features, dtype))
    assert np.array_equal(y, labels)


def test_accepted_syntax(write_text):
    text = ("# header comment\n"
            "+1 3:0.5 1:2 qid:7 10:1e-3   \n"
            "  -1\t2:1.5e+2 # trailing comment\n"
            "\n"
            "   \t \n"
            "2.0 5:-0.000001 4:1.23456789012345678901 6:1e-30\r\n"
            "3 1:+.5 2:5. 7:-0 8:0\r\n"
            "-2.5e0 qid:3\n"
            "7 9:1E3")  # no final newline
    path = write_text(text)
    check_against_reference(path, text)
    X, y = load_libsvm(path)
    assert y.tolist() == [1.0, -1.0, 2.0, 3.0, -2.5, 7.0]
    assert X[0, 0] == 2.0 and X[0, 2] == 0.5 and X[0, 9] == np.float32(1e-3)
    assert X[4].nnz == 0  # a row with only a label (and a qid)
    assert X[3].nnz == 4  # explicit zeros are kept, like scikit-learn


def test_unsorted_indices_are_sorted(write_text):
    text = "1 9:9 2:2 5:5 1:1\n2 3:3 1:1\n"
    X, _ = load_libsvm(write_text(text))
    assert X.indices.tolist() == [0, 1, 4, 8, 0, 2]
    assert X.data.tolist() == [1, 2, 5, 9, 1, 3]
    assert X.has_sorted_indices


def test_zero_based(write_text):
    text = "1 0:1 3:2\n2 1:5\n"
    path = write_text(text)
    check_against_reference(path, text, zero_based=True)
    X, _ = load_libsvm(path, zero_based=True)
    assert X.shape == (2, 4)


def test_float64_values_are_exact(write_text):
    text = "1 1:0.1 2:1.2345678901234567 3:3.14159265358979323846e-5 4:123456789e-300\n"
    X, _ = load_libsvm(write_text(text), dtype=np.float64)
    assert X.data.tolist() == [0.1, 1.2345678901234567, 3.14159265358979323846e-5,
                               123456789e-300]


# Tokens at the edges of the kernel's one-scan fast path (_fast_pair): on
# either side of each limit the value must still be exactly float(token).
FAST_PATH_EDGES = [
    "0", "-0", "+0", "0.0", "-0.000", "0e5", "-0e-999", "5.", ".5", "-.5", "+5.25",
    "123456789012345678", "1234567890123456789", "12345678901234567890",  # 18/19/20 digits
    "0.123456789012345678", "0.1234567890123456789", "000000000000000001",
    "9007199254740992", "9007199254740993", "9007199254740991.5",  # m around 2**53
    "1e22", "1e23", "1e-22", "1e-23", "12.5e21", "12.5e-21", "3e0", "3E+1", "7e0007",
    "1e00022", "1e00023", "4.5e-0", "1.17549435e-38", "3.4028234e38", "1e-45",
    "0.000000000000000000001",  # more than 18 digits, m small
    # the eight-bytes-at-a-time path: runs of 7 digits fit, 8 do not
    "1234567", "12345678", "0.1234567", "0.12345678", "1234567.1234567", "12345678.1234567",
    "1234567.12345678", "-9999999.9999999", "+.1234567", "-1234567.",
]


@pytest.mark.parametrize("end", ["\n", ""])
def test_fast_path_edges_parse_like_python_float(write_text, end):
    """Every edge token in the middle of a line and last in the file (then the
    text after it is shorter than the eight bytes the kernel reads at a time)."""
    text = "".join(f"1 {i + 1}:{t} {i + 2}:{t}\n" for i, t in enumerate(FAST_PATH_EDGES))
    text += "\n".join(f"2 3:{t}" for t in FAST_PATH_EDGES) + end
    path = write_text(text)
    values = [float(t) for t in FAST_PATH_EDGES]
    expected = np.concatenate([np.repeat(values, 2), values])
    for block_bytes in (10**6, 7):  # one piece; a piece per line
        X, _ = load_libsvm(path, dtype=np.float64, block_bytes=block_bytes)
        assert np.array_equal(X.data.view(np.int64), expected.view(np.int64))  # -0.0 too
        X32, _ = load_libsvm(path, block_bytes=block_bytes)
        assert np.array_equal(X32.data, expected.astype(np.float32))
    check_against_reference(path, text)


@pytest.mark.parametrize("token,col", [("2147483647:1", 2147483646), ("0000000003:1", 2),
                                       ("00000000003:1", 2), ("+3:1", 2), ("1234567:1", 1234566),
                                       ("12345678:1", 12345677), ("0000007:1", 6)])
def test_index_edges(write_text, token, col):
    X, _ = load_libsvm(write_text(f"1 {token}\n"))
    assert X.indices.tolist() == [col] and X.data.tolist() == [1.0]


@pytest.mark.parametrize("token,message", [
    ("2147483648:1", "out of range"), ("4294967297:1", "out of range"),
    ("99999999999:1", "out of range"), ("1:1:1", "is not a number"), ("1:1e", "is not a number"),
    ("1:1e+", "is not a number"), ("1:1..5", "is not a number"), ("1:--1", "is not a number"),
    ("1:1x", "is not a number"), ("1:3.5e38", "too large for float32"), ("1:.", "is not a number"),
    ("1:1e99999", "NaN or infinite"),
])
def test_pairs_the_fast_path_refuses_keep_their_errors(write_text, token, message):
    path = write_text(f"1 2:1\n1 {token}\n")
    with pytest.raises(LibsvmFormatError, match=message) as info:
        load_libsvm(path)
    assert info.value.line == 2


@pytest.mark.parametrize("row", ["1:1 3:3 2:2 4:1e-30", "1:1 3:3 +2:2 4:1e-30",
                                 "4:1e-30 3:3 1:1 2:2", "+4:1e-30 1:1 3:3 +2:2"])
def test_unordered_columns_fast_and_general_pairs(write_text, row):
    """Pairs of the fast path and of the general one (``+2``, ``1e-30``) in any order."""
    X, _ = load_libsvm(write_text(f"1 {row}\n2 5:5 6:6\n"))
    assert X.indices.tolist() == [0, 1, 2, 3, 4, 5]
    assert X.data.tolist() == [1, 2, 3, np.float32(1e-30), 5, 6]


@pytest.mark.parametrize("row", ["1:1 3:3 3:4", "3:3 1:1 3:4", "3:3 +3:4", "+3:3 3:4",
                                 "1:1 3:1e-30 3:4"])
def test_duplicate_columns_fast_and_general_pairs(write_text, row):
    with pytest.raises(LibsvmFormatError, match="duplicate index 3"):
        load_libsvm(write_text(f"1 {row}\n"))


@pytest.mark.parametrize("opener,suffix", [(gzip.compress, ".gz"), (bz2.compress, ".bz2"),
                                           (lzma.compress, ".xz"), (gzip.compress, ".txt")])
def test_compressed_input(write_text, opener, suffix):
    text = "1 1:0.5 3:1\n2 2:0.25\n# c\n1 4:4\n"
    path = write_text(opener(text.encode()), name="data" + suffix)  # .txt: magic bytes decide
    check_against_reference(path, text)
    reader = LibsvmReader(path)
    list(reader)
    assert reader.stats.text_bytes == len(text)
    assert reader.stats.n_lines == 4 and reader.stats.n_rows == 3


def test_block_boundaries(write_text):
    """Lines longer than a block, CRLF and comments across block edges."""
    rng = np.random.default_rng(0)
    lines = []
    for i in range(200):
        feats = " ".join(f"{j}:{rng.normal():.5g}" for j in
                         sorted(rng.choice(np.arange(1, 300), rng.integers(0, 40), replace=False)))
        end = "\r\n" if i % 3 == 0 else "\n"
        lines.append(f"{i % 5} {feats} # row {i}{end}" if i % 7 == 0 else f"{i % 5} {feats}{end}")
    text = "".join(lines)
    path = write_text(text)
    for block_bytes in (1, 7, 64, 1000, 10**6):
        check_against_reference(path, text, block_bytes=block_bytes)


# ------------------------------------------------------------------ malformed input

MALFORMED = [
    ("1:0.5 2:1", "missing label"),
    ("1,3 2:1", "multi-label"),
    ("abc 1:1", "label 'abc' is not a number"),
    ("nan 1:1", "NaN or infinite"),
    ("1 3 4:1", "expected 'index:value', got '3'"),
    ("1 3:abc", "value of '3:abc' is not a number"),
    ("1 3:", "is not a number"),
    ("1 0:1", "index 0 in '0:1' but indices are 1-based"),
    ("1 -3:1", "negative index in '-3:1'"),
    ("1 x:1", "is not a non-negative integer"),
    ("1 3:nan", "NaN or infinite"),
    ("1 3:inf", "NaN or infinite"),
    ("1 3:-Infinity", "NaN or infinite"),
    ("1 3:1e999", "NaN or infinite"),
    ("1 3:1.79769313486231580793728971405301e+308", "too large for float32"),
    ("1 3:3.5e38", "value of '3.5e38' is too large for float32"),
    ("1 3:1 5:2 3:2", "duplicate index 3"),
    ("1 99999999999:1", "out of range"),
]


@pytest.mark.parametrize("bad,message", MALFORMED)
def test_malformed_line_names_file_and_line(write_text, tmp_path, bad, message):
    text = f"# ok\n1 1:1 2:2\n{bad}\n2 1:3\n"
    path = write_text(text)
    with pytest.raises(LibsvmFormatError, match=message) as info:
        load_libsvm(path)
    assert info.value.line == 3
    assert str(info.value).startswith(f"{path}:3: ")
    out = tmp_path / "store"
    with pytest.raises(LibsvmFormatError, match=message):
        convert_libsvm(path, out)
    assert not out.exists() and leftovers(out) == []


def test_error_line_numbers_across_blocks(write_text):
    text = "".join(f"1 {i + 1}:1\n" for i in range(500)) + "1 2:1 2:1\n"
    with pytest.raises(LibsvmFormatError) as info:
        load_libsvm(write_text(text), block_bytes=100)
    assert info.value.line == 501


def test_index_beyond_n_features(write_text):
    path = write_text("1 1:1\n1 5:1\n")
    with pytest.raises(LibsvmFormatError, match=r":2: index in '5:1' is out of range: "
                                                r"n_features is 4"):
        load_libsvm(path, n_features=4)
    X, _ = load_libsvm(path, n_features=10)
    assert X.shape == (2, 10)


def test_skip_bad_lines_counts_and_reports(write_text, caplog):
    text = "1 1:1\n1 0:1\n2 2:2\nfoo\n3 3:3 3:4\n4 4:4\n"
    path = write_text(text)
    reader = LibsvmReader(path, skip_bad_lines=True)
    blocks = list(reader)
    assert sum(b.n_rows for b in blocks) == 3
    assert blocks[0].labels.tolist() == [1.0, 2.0, 4.0]
    assert blocks[0].lines.tolist() == [1, 3, 6]
    assert reader.stats.skipped_lines == 3
    assert [e.split(":")[0] for e in reader.stats.skipped_examples] == ["line 2", "line 4",
                                                                       "line 5"]
    assert "skipped 3 malformed line(s)" in caplog.text


def test_skip_bad_lines_is_not_the_default(write_text):
    with pytest.raises(LibsvmFormatError):
        load_libsvm(write_text("1 1:1\nfoo\n"))


def test_reader_parameters_are_checked(write_text, tmp_path):
    path = write_text("1 1:1\n")
    with pytest.raises(ValueError, match="'dtype' parameter"):
        LibsvmReader(path, dtype=np.int32)
    with pytest.raises(ValueError, match="'block_bytes' parameter"):
        LibsvmReader(path, block_bytes=0)
    with pytest.raises(FileNotFoundError):
        LibsvmReader(tmp_path / "missing.txt")


# ------------------------------------------------------------------ properties

finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
number_text = st.one_of(
    finite.map(repr),
    finite.map(lambda v: f"{v:.3e}"),
    finite.map(lambda v: f"{v:g}"),
    st.integers(-10**25, 10**25).map(str),
    st.from_regex(r"\A[+-]?[0-9]{1,25}(\.[0-9]{0,25})?([eE][+-]?[0-9]{1,3})?\Z"),
    st.from_regex(r"\A[+-]?\.[0-9]{1,25}([eE][+-]?[0-9]{1,3})?\Z"),
)


@HYPO
@given(tokens=st.lists(number_text, min_size=1, max_size=20))
def test_numbers_parse_like_python_float(write_text, tokens):
    """Every decimal literal parses to exactly float(token) (or is rejected as
    non-finite exactly when float(token) overflows)."""
    expected = [float(t) for t in tokens]
    text = "".join(f"1 1:{t}\n" for t in tokens)
    path = write_text(text)
    if not all(np.isfinite(expected)):
        with pytest.raises(LibsvmFormatError, match="NaN or infinite"):
            load_libsvm(path, dtype=np.float64)
        return
    X, _ = load_libsvm(path, dtype=np.float64)
    assert X.nnz == len(tokens)  # one value per row, zeros kept
    assert np.array_equal(X.data.view(np.int64), np.array(expected).view(np.int64))  # -0.0 too
    with np.errstate(over="ignore"):
        expected32 = np.array(expected).astype(np.float32)
    if not np.all(np.isfinite(expected32)):
        with pytest.raises(LibsvmFormatError, match="too large for float32"):
            load_libsvm(path)
        return
    X32, _ = load_libsvm(path)
    assert np.array_equal(X32.data, expected32)


value_text = st.one_of(  # cheaper than number_text and within float32 range
    st.floats(-1e30, 1e30).map(repr),
    st.floats(-1e6, 1e6).map(lambda v: f"{v:.4g}"),
    st.integers(-10**6, 10**6).map(str),
    st.sampled_from(["0", "-0", ".5", "5.", "+1e-3", "1E3", "0.000001", "12345678901234567890"]),
)


@st.composite
def libsvm_text(draw):
    n_rows = draw(st.integers(0, 12))
    lines = []
    for _ in range(n_rows):
        label = draw(st.sampled_from(["1", "-1", "+1", "2.0", "3", "0", "-7.5", "1e1"]))
        cols = draw(st.lists(st.integers(1, 60), unique=True, max_size=12))
        cols = draw(st.permutations(cols))
        values = draw(st.lists(value_text, min_size=len(cols), max_size=len(cols)))
        sep = draw(st.sampled_from([" ", "\t", "  ", " \t "]))
        parts = [label] + [f"{c}:{v}" for c, v in zip(cols, values)]
        if draw(st.booleans()) and parts[1:]:
            parts.insert(1, f"qid:{draw(st.integers(0, 9))}")
        line = draw(st.sampled_from(["", " ", "\t"])) + sep.join(parts)
        line += draw(st.sampled_from(["", " ", " # comment 1:2", "#"]))
        lines.append(line + draw(st.sampled_from(["\n", "\r\n"])))
        if draw(st.integers(0, 4)) == 0:
            lines.append(draw(st.sampled_from(["\n", "# only a comment\n", "   \r\n"])))
    text = "".join(lines)
    if text and draw(st.booleans()):
        text = text.rstrip("\n")
    return text


@HYPO
@given(text=libsvm_text(), block_bytes=st.sampled_from([17, 200, 10**6]),
       fmt=st.sampled_from(["zarr", "parquet"]), shard_rows=st.sampled_from([4, 1000]))
def test_generated_text_round_trips(write_text, tmp_path, text, block_bytes, fmt, shard_rows):
    """Text -> parser equals the reference, and text -> store -> arrays too."""
    path = write_text(text)
    check_against_reference(path, text, block_bytes=block_bytes)
    rows, labels = reference_parse(text)
    if not rows:
        return
    if not any(rows):  # rows without any feature: refused (tests/io/test_convert_faults.py)
        with pytest.raises(DataFormatError, match="no features"):
            convert_libsvm(path, tmp_path / "store", format=fmt, shard_rows=shard_rows,
                           layout="sparse", block_bytes=block_bytes, overwrite=True)
        return
    store = convert_libsvm(path, tmp_path / "store", format=fmt, shard_rows=shard_rows,
                           layout="sparse", block_bytes=block_bytes, overwrite=True)
    X, y = read_all(store)
    n_features = 1 + max((c for r in rows for c, _ in r), default=-1)
    assert_same_csr(X, rows_to_csr(rows, n_features))
    assert np.array_equal(y, labels)


def test_reader_thread_holds_one_piece_ahead(write_text):
    """The reader thread hands a piece over before it reads the next: with the
    consumer busy on one piece, at most one more has been read."""
    import time

    from streamwww.io.libsvm import _Prefetcher

    line = "1 1:0.5 2:0.25\n"
    path = write_text(line * 10_000)
    block = 10 * len(line)
    prefetch = _Prefetcher(path, block)
    pieces = iter(prefetch)
    first, _ = next(pieces)
    deadline = time.monotonic() + 2
    while prefetch.text_bytes < 2 * block and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)  # time to read more, if it would
    assert prefetch.text_bytes == 2 * block
    assert len(first) == block
    rest = sum(len(piece) for piece, _ in pieces)
    assert len(first) + rest == prefetch.text_bytes == len(line) * 10_000


@pytest.mark.parametrize("seed", [-1, 1.5, True, "3"])
def test_a_bad_shuffle_seed_is_named(write_text, tmp_path, seed):
    """(A negative seed reached NumPy's SeedSequence: "expected non-negative integer".)"""
    with pytest.raises(ValueError, match=r"The 'seed' parameter of convert_libsvm must be an int in \[0, inf\) "
                                         r"or None\. Got .* instead\."):
        convert_libsvm(write_text("1 1:1\n2 2:1\n"), tmp_path / "s.zarr", shuffle=True, seed=seed)
    assert not (tmp_path / "s.zarr").exists()
