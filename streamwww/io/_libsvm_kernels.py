"""Numba kernels of the streaming LIBSVM parser.

The kernels see one piece of text (a ``uint8`` array that ends at a line
boundary) and fill preallocated CSR arrays. They never touch Python objects, so
they run without the GIL while the reader thread decompresses the next piece.

Number parsing is exact: a decimal ``m * 10**e`` with an integer mantissa
``m <= 2**53`` and ``|e| <= 22`` is computed with one correctly rounded IEEE
multiplication or division (Clinger's fast path), which covers practically all
LIBSVM files. Any other token (more than 18 significant digits, a large
exponent) is reported back as *slow* and re-parsed by Python's ``float``, so the
result always equals ``float(token)``, like ``sklearn.datasets.load_svmlight_file``.

Most ``index:value`` pairs take a fast path (:func:`_fast_pair`): one scan over
the pair's bytes that parses the index up to the ``:`` and the value up to the
token's end, accepting only what it can finish there (plain decimal index,
at most 18 digits of value, exponent within Clinger's range); anything else,
including every error, is parsed again from the token's start by the general
code, so results and error messages do not depend on the fast path. Hand-written
code because this is the conversion's hot loop (``numpy.fromstring``-style
parsers neither locate errors by line nor keep ``float(token)`` exactness).
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.cpython.unsafe.numbers import trailing_zeros

# Status codes of a line (0 = row parsed). Messages live in libsvm.py.
OK = 0
BLANK = -1
E_MISSING_LABEL = 1
E_MULTILABEL = 2
E_BAD_LABEL = 3
E_NONFINITE_LABEL = 4
E_NO_COLON = 5
E_BAD_INDEX = 6
E_NEGATIVE_INDEX = 7
E_ZERO_INDEX = 8
E_BAD_VALUE = 9
E_NONFINITE_VALUE = 10
E_DUPLICATE_INDEX = 11
E_INDEX_TOO_LARGE = 12
E_VALUE_RANGE = 13

# Results of _parse_number.
_NUM_OK = 0
_NUM_INVALID = 1
_NUM_NONFINITE = 2
_NUM_SLOW = 3

MAX_INDEX = 2**31 - 1  # column indices are stored as int32

_POW10 = np.array([10.0**k for k in range(23)])
_TWO53 = 2**53


@njit(cache=True, nogil=True, inline="always")
def _is_space(c):
    # space, \t, \r, \v, \f  (\n ends a line and never reaches here)
    return c == 32 or c == 9 or c == 13 or c == 11 or c == 12


@njit(cache=True, nogil=True, inline="always")
def _lower(c):
    if 65 <= c <= 90:
        return c + 32
    return c


@njit(cache=True, nogil=True)
def _is_word(buf, s, e, word):
    if e - s != len(word):
        return False
    for k in range(e - s):
        if _lower(buf[s + k]) != word[k]:
            return False
    return True


_INF = np.frombuffer(b"inf", dtype=np.uint8).copy()
_INFINITY = np.frombuffer(b"infinity", dtype=np.uint8).copy()
_NAN = np.frombuffer(b"nan", dtype=np.uint8).copy()


@njit(cache=True, nogil=True)
def _parse_number(buf, s, e):
    """Parse ``buf[s:e]`` as a decimal float; return ``(status, value)``."""
    i = s
    neg = False
    if i < e and (buf[i] == 43 or buf[i] == 45):  # + -
        neg = buf[i] == 45
        i += 1
    if i >= e:
        return _NUM_INVALID, 0.0
    c = _lower(buf[i])
    if c == 105 or c == 110:  # i, n
        if _is_word(buf, i, e, _INF) or _is_word(buf, i, e, _INFINITY) or _is_word(buf, i, e, _NAN):
            return _NUM_NONFINITE, 0.0
        return _NUM_INVALID, 0.0
    m = 0  # up to 18 significant digits: fits int64
    ndig = 0
    e10 = 0
    any_digit = False
    dropped = False
    while i < e and 48 <= buf[i] <= 57:
        any_digit = True
        d = buf[i] - 48
        if ndig < 18:
            if m != 0 or d != 0:
                m = m * 10 + d
                ndig += 1
        else:
            e10 += 1
            if d != 0:
                dropped = True
        i += 1
    if i < e and buf[i] == 46:  # .
        i += 1
        while i < e and 48 <= buf[i] <= 57:
            any_digit = True
            d = buf[i] - 48
            if ndig < 18:
                if m != 0 or d != 0:
                    m = m * 10 + d
                    ndig += 1
                e10 -= 1
            elif d != 0:
                dropped = True
            i += 1
    if not any_digit:
        return _NUM_INVALID, 0.0
    if i < e and (buf[i] == 101 or buf[i] == 69):  # e E
        i += 1
        eneg = False
        if i < e and (buf[i] == 43 or buf[i] == 45):
            eneg = buf[i] == 45
            i += 1
        if i >= e or not (48 <= buf[i] <= 57):
            return _NUM_INVALID, 0.0
        ex = 0
        while i < e and 48 <= buf[i] <= 57:
            if ex < 100000:
                ex = ex * 10 + (buf[i] - 48)
            i += 1
        e10 += -ex if eneg else ex
    if i != e:
        return _NUM_INVALID, 0.0
    if m == 0:
        return _NUM_OK, -0.0 if neg else 0.0
    magnitude = e10 + ndig - 1  # value is in [10**magnitude, 10**(magnitude+1))
    if magnitude > 308:
        return _NUM_NONFINITE, 0.0
    if magnitude < -400:
        return _NUM_OK, -0.0 if neg else 0.0
    if dropped or m > _TWO53 or e10 > 22 or e10 < -22:
        return _NUM_SLOW, 0.0
    if e10 >= 0:
        v = float(m) * _POW10[e10]
    else:
        v = float(m) / _POW10[-e10]
    return _NUM_OK, -v if neg else v


@njit(cache=True, nogil=True)
def find_newline(buf, start, stop, backward):
    """Index of the first (or, ``backward``, last) ``\\n`` in ``buf[start:stop]``, or -1."""
    if backward:
        for i in range(stop - 1, start - 1, -1):
            if buf[i] == 10:
                return i
    else:
        for i in range(start, stop):
            if buf[i] == 10:
                return i
    return -1


@njit(cache=True, nogil=True)
def count_bounds(buf, n):
    """Return ``(colons, newlines)`` in ``buf[:n]``: capacity bounds for a piece."""
    colons = 0
    newlines = 0
    for i in range(n):
        c = buf[i]
        if c == 58:
            colons += 1
        elif c == 10:
            newlines += 1
    return colons, newlines


@njit(cache=True, nogil=True, inline="always")
def _ends_token(c):
    # whitespace (\t \n \v \f \r and space) or '#'
    return c == 32 or (9 <= c and c <= 13) or c == 35


@njit(cache=True, nogil=True, inline="always")
def _digit(c):
    """The value of the ASCII digit ``c``, or -1."""
    d = np.int64(c) - 48
    return d if 0 <= d <= 9 else -1


# Eight bytes at a time (SWAR): byte k of a little-endian uint64 is text[p + k].
_U8 = np.uint64(8)
_BYTE_LO7 = np.uint64(0x7F7F7F7F7F7F7F7F)
_BYTE_HI = np.uint64(0x8080808080808080)
_NIB_HI = np.uint64(0xF0F0F0F0F0F0F0F0)
_NIB_LO = np.uint64(0x0F0F0F0F0F0F0F0F)
_ASCII_0 = np.uint64(0x3030303030303030)
_PLUS_6 = np.uint64(0x0606060606060606)


@njit(cache=True, nogil=True, inline="always")
def _load8(buf, p):
    """``buf[p:p + 8]`` as a little-endian uint64 (LLVM makes it one load: the
    unsigned index spares Numba's negative-index wraparound)."""
    x = np.uint64(0)
    q = np.uint64(p)
    for k in range(8):
        x |= np.uint64(buf[q + np.uint64(k)]) << np.uint64(8 * k)
    return x


@njit(cache=True, nogil=True, inline="always")
def _digit_run(x):
    """How many of the 8 bytes of ``x`` are ASCII digits before the first other byte (0-8)."""
    # a byte is a digit iff its high nibble is 3 before and after adding 6; a carry
    # out of a byte (>= 0xFA) only reaches bytes after a non-digit
    bad = ((x & _NIB_HI) ^ _ASCII_0) | (((x + _PLUS_6) & _NIB_HI) ^ _ASCII_0)
    flags = (bad | ((bad & _BYTE_LO7) + _BYTE_LO7)) & _BYTE_HI  # 0x80 in each bad byte
    if flags == 0:
        return 8
    return np.int64(trailing_zeros(flags)) >> 3


@njit(cache=True, nogil=True, inline="always")
def _digits_value(x, count):
    """The number written by the first ``count`` (1-8) bytes of ``x``, all digits."""
    v = (x & _NIB_LO) << np.uint64(8 * (8 - count))  # left-aligned: leading zeros first
    v = (v * np.uint64(10) + (v >> _U8)) & np.uint64(0x00FF00FF00FF00FF)
    v = (v * np.uint64(100) + (v >> np.uint64(16))) & np.uint64(0x0000FFFF0000FFFF)
    v = (v * np.uint64(10000) + (v >> np.uint64(32))) & np.uint64(0x00000000FFFFFFFF)
    return np.int64(v)


@njit(cache=True, nogil=True, inline="always")
def _ten_to(k):
    """``10**k`` for ``0 <= k <= 7`` (branches, not a global table: see :func:`_fast_pairs`)."""
    if k < 4:
        if k < 2:
            return 1 if k == 0 else 10
        return 100 if k == 2 else 1000
    if k < 6:
        return 10000 if k == 4 else 100000
    return 1000000 if k == 6 else 10000000


@njit(cache=True, nogil=True)
def _fast_pairs(buf, p, n, zero_based, max_col, indices, values, k, prev, ordered):
    """Parse ``index:value`` pairs from ``buf[p]`` on while they are plain.

    Stores them at ``indices[k:]``, ``values[k:]`` and returns ``(p, k, prev,
    ordered)`` at the line's end, a ``#`` or the first pair that is not plain
    (``p`` at its first byte; the general code takes it from there). ``prev``
    is the last column stored, ``ordered`` whether the columns increase.

    The commonest pairs are read eight bytes at a time (SWAR): an index of 1-7
    digits, ``:``, an optional sign, at most 7 digits, optionally ``.`` and at
    most 7 more digits, then the token's end, with 8 bytes of text from each
    digit run on. Then ``m < 10**14`` and the decimal exponent is in [-7, 0],
    and the value is computed as :func:`_parse_number` computes it. Other
    plain pairs go through :func:`_fast_pair`. The SWAR code is written out
    here, not in an inlined function: Numba increments and decrements the
    reference count of an array passed to an inlined function, two atomic
    operations per pair (as it does when an inlined function reads a global
    array).
    """
    while True:
        while p < n and _is_space(buf[p]):
            p += 1
        if p >= n or buf[p] == 10 or buf[p] == 35:
            return p, k, prev, ordered
        end = -1
        if p + 8 <= n:
            x = _load8(buf, p)
            length = _digit_run(x)
            if 0 < length < 8 and buf[p + length] == 58:  # 1-7 digits, then ':'
                idx = _digits_value(x, length)
                col = idx if zero_based else idx - 1
                q = p + length + 1
                if col <= max_col and (zero_based or idx > 0) and q + 9 <= n:
                    c = buf[q]
                    neg = c == 45  # -
                    q += np.int64(neg | (c == 43))  # no branch: signs come in random order
                    x = _load8(buf, q)
                    whole = _digit_run(x)
                    m = _digits_value(x, whole) if 0 < whole < 8 else 0
                    r = q + whole
                    frac = 0
                    if whole < 8 and buf[r] == 46 and r + 9 <= n:  # .
                        r += 1
                        x = _load8(buf, r)
                        frac = _digit_run(x)
                        if 0 < frac < 8:
                            m = m * _ten_to(frac) + _digits_value(x, frac)
                        r += frac
                    if (whole < 8 and frac < 8 and whole + frac > 0
                            and (r >= n or _ends_token(buf[r]))):
                        end = r
                        if m == 0:
                            v = -0.0 if neg else 0.0
                        else:  # float(m) * 1.0, or / 10.0**frac, as _parse_number
                            v = float(m) / float(_ten_to(frac))
                            if neg:
                                v = -v
        if end < 0:
            end, col, v = _fast_pair(buf, p, n, zero_based, max_col)
            if end < 0:
                return p, k, prev, ordered
        indices[k] = col
        values[k] = v
        if col <= prev:
            ordered = False
        prev = col
        k += 1
        p = end


@njit(cache=True, nogil=True)
def _fast_pair(buf, p, n, zero_based, max_col):
    """Parse the ``index:value`` pair at ``buf[p]`` in one scan, if it is plain.

    Returns ``(end, col, value)``: ``end`` is the position after the value
    (a token end), or -1 when the pair is not plain -- then nothing is taken
    and the general code parses the pair again, errors included. Plain: an
    index of at most 10 decimal digits ending at ``:``, within ``max_col``
    (and not 0 unless ``zero_based``); a value of an optional sign, at most 18
    digits with at most one ``.``, an optional exponent of at most 4 digits,
    and nothing else up to the token's end; ``m <= 2**53`` and a decimal
    exponent within [-22, 22], so that the value is Clinger's exact product or
    quotient, as in :func:`_parse_number` (and finite in float32 too:
    below 2**53 * 1e22).
    """
    q = p
    idx = 0
    while q < n:
        d = _digit(buf[q])
        if d < 0:
            break
        idx = idx * 10 + d
        q += 1
    if q == p or q - p > 10 or q >= n or buf[q] != 58:
        return -1, 0, 0.0
    if zero_based:
        col = idx
    else:
        if idx == 0:
            return -1, 0, 0.0
        col = idx - 1
    if col > max_col:
        return -1, 0, 0.0
    r = q + 1
    neg = False
    if r < n and (buf[r] == 45 or buf[r] == 43):  # - +
        neg = buf[r] == 45
        r += 1
    m = 0
    s = r
    while r < n:
        d = _digit(buf[r])
        if d < 0:
            break
        m = m * 10 + d
        r += 1
    ndig = r - s
    e10 = 0
    if r < n and buf[r] == 46:  # .
        r += 1
        s = r
        while r < n:
            d = _digit(buf[r])
            if d < 0:
                break
            m = m * 10 + d
            r += 1
        e10 = s - r
        ndig += r - s
    if ndig == 0 or ndig > 18:  # no digit, or m may not fit: the general code decides
        return -1, 0, 0.0
    if r < n and (buf[r] == 101 or buf[r] == 69):  # e E
        r += 1
        eneg = False
        if r < n and (buf[r] == 45 or buf[r] == 43):
            eneg = buf[r] == 45
            r += 1
        s = r
        ex = 0
        while r < n:
            d = _digit(buf[r])
            if d < 0:
                break
            ex = ex * 10 + d
            r += 1
        if r == s or r - s > 4:
            return -1, 0, 0.0
        e10 += -ex if eneg else ex
    if r < n and not _ends_token(buf[r]):
        return -1, 0, 0.0
    if m == 0:
        return r, col, -0.0 if neg else 0.0
    if m > _TWO53 or e10 > 22 or e10 < -22:
        return -1, 0, 0.0
    if e10 >= 0:
        v = float(m) * _POW10[e10]
    else:
        v = float(m) / _POW10[-e10]
    return r, col, -v if neg else v


@njit(cache=True, nogil=True)
def _line_end(buf, p, n):
    while p < n and buf[p] != 10:
        p += 1
    return p


@njit(cache=True, nogil=True)
def _parse_line(buf, s, n, zero_based, max_col, row, nnz, line,
                labels, indices, values, slow, n_slow):
    """Parse the line starting at ``buf[s]`` into row ``row``.

    A single left-to-right scan: ``#`` ends the line's content, ``\n`` (or
    ``n``) ends the line. Returns ``(code, new_nnz, new_n_slow, tok_start,
    tok_end, extra, line_end)`` with ``line_end`` the position of the line's
    ``\n`` (or ``n``), or -1 after an error (the caller finds it).
    """
    p = s
    while p < n and _is_space(buf[p]):
        p += 1
    if p >= n or buf[p] == 10 or buf[p] == 35:
        return BLANK, nnz, n_slow, 0, 0, 0, _line_end(buf, p, n)
    ts = p
    bad = OK
    while p < n and not _ends_token(buf[p]):
        if buf[p] == 58 and bad == OK:
            bad = E_MISSING_LABEL
        elif buf[p] == 44 and bad == OK:
            bad = E_MULTILABEL
        p += 1
    te = p
    if bad != OK:
        return bad, nnz, n_slow, ts, te, 0, -1
    st, v = _parse_number(buf, ts, te)
    if st == _NUM_INVALID:
        return E_BAD_LABEL, nnz, n_slow, ts, te, 0, -1
    if st == _NUM_NONFINITE:
        return E_NONFINITE_LABEL, nnz, n_slow, ts, te, 0, -1
    slow0 = n_slow
    if st == _NUM_SLOW:
        slow[n_slow, 0] = 1
        slow[n_slow, 1] = row
        slow[n_slow, 2] = ts
        slow[n_slow, 3] = te
        slow[n_slow, 4] = line
        n_slow += 1
    labels[row] = v
    k = nnz
    # np.int64/np.bool_, not literals: a literal argument makes Numba compile a
    # specialization of the callee for that constant as well (seconds of compiling)
    prev = np.int64(-1)
    ordered = np.bool_(True)  # columns strictly increasing so far: nothing to sort or check
    while True:
        p, k, prev, ordered = _fast_pairs(buf, p, n, zero_based, max_col, indices, values, k,
                                          prev, ordered)
        if p >= n or buf[p] == 10:
            break
        if buf[p] == 35:
            p = _line_end(buf, p, n)
            break
        ts = p
        colon = -1
        while p < n and not _ends_token(buf[p]):
            if buf[p] == 58 and colon < 0:
                colon = p
            p += 1
        te = p
        if colon < 0:
            return E_NO_COLON, nnz, slow0, ts, te, 0, -1
        if colon - ts == 3 and buf[ts] == 113 and buf[ts + 1] == 105 and buf[ts + 2] == 100:
            continue  # qid:N is ignored
        q = ts
        if buf[q] == 45:
            return E_NEGATIVE_INDEX, nnz, slow0, ts, te, 0, -1
        if buf[q] == 43:
            q += 1
        if q == colon:
            return E_BAD_INDEX, nnz, slow0, ts, te, 0, -1
        idx = 0
        while q < colon:
            d = buf[q] - 48
            if d < 0 or d > 9:
                return E_BAD_INDEX, nnz, slow0, ts, te, 0, -1
            if idx <= MAX_INDEX + 1:
                idx = idx * 10 + d
            q += 1
        if zero_based:
            col = idx
        else:
            if idx == 0:
                return E_ZERO_INDEX, nnz, slow0, ts, te, 0, -1
            col = idx - 1
        if col > max_col:
            return E_INDEX_TOO_LARGE, nnz, slow0, ts, te, 0, -1
        st, v = _parse_number(buf, colon + 1, te)
        if st == _NUM_INVALID:
            return E_BAD_VALUE, nnz, slow0, ts, te, 0, -1
        if st == _NUM_NONFINITE:
            return E_NONFINITE_VALUE, nnz, slow0, ts, te, 0, -1
        if st == _NUM_SLOW:
            slow[n_slow, 0] = 0
            slow[n_slow, 1] = k
            slow[n_slow, 2] = colon + 1
            slow[n_slow, 3] = te
            slow[n_slow, 4] = line
            n_slow += 1
        indices[k] = col
        values[k] = v
        if st == _NUM_OK and not np.isfinite(values[k]):  # finite float64, too large for float32
            return E_VALUE_RANGE, nnz, slow0, ts, te, 0, -1
        if col <= prev:
            ordered = False
        prev = col
        k += 1
    line_end = p
    if ordered:
        return OK, k, n_slow, 0, 0, 0, line_end
    # Sort the row by column if needed (LIBSVM asks for sorted indices; many
    # writers do not), keeping the slow-token targets pointing at their values.
    is_sorted = True
    for q in range(nnz + 1, k):
        if indices[q] < indices[q - 1]:
            is_sorted = False
            break
    if not is_sorted:
        order = np.argsort(indices[nnz:k], kind="mergesort")
        # element by element: a slice assignment compiles Numba's shape-mismatch
        # error formatting (seconds of a cold start; docs/benchmarks.md, "Cold start")
        # for a check that cannot fail
        cols = indices[nnz:k].copy()
        vals = values[nnz:k].copy()
        for q in range(k - nnz):
            indices[nnz + q] = cols[order[q]]
            values[nnz + q] = vals[order[q]]
        if n_slow > slow0:
            inverse = np.empty(k - nnz, dtype=np.int64)
            for q in range(k - nnz):
                inverse[order[q]] = q
            for q in range(slow0, n_slow):
                if slow[q, 0] == 0:
                    slow[q, 1] = nnz + inverse[slow[q, 1] - nnz]
    for q in range(nnz + 1, k):
        if indices[q] == indices[q - 1]:
            return E_DUPLICATE_INDEX, nnz, slow0, 0, 0, np.int64(indices[q]), -1
    return OK, k, n_slow, 0, 0, 0, line_end


@njit(cache=True, nogil=True)
def parse_piece(buf, n, zero_based, max_col, skip_bad, line0,
                labels, row_lines, indptr, indices, values, slow, err, skipped):
    """Parse the lines of ``buf[:n]``.

    Parameters
    ----------
    buf : uint8 array
        Text; ``buf[:n]`` holds whole lines (the last may lack its ``\\n``).
    zero_based : bool
        Column = index (True) or index - 1 (False; index 0 is an error).
    max_col : int
        Largest allowed column (``n_features - 1``).
    skip_bad : bool
        Skip malformed lines (recorded in ``skipped``) instead of stopping.
    line0 : int
        Number of lines before this piece (for 1-based line numbers).
    labels, row_lines, indptr, indices, values : arrays
        Outputs, large enough for every row and every ``:`` in the piece.
    slow : int64 array (capacity, 5)
        Tokens for Python to re-parse: kind (0 value, 1 label), target
        position, token start, token end, line.
    err : int64 array (5,)
        On a stopping error: code, line, token start, token end, extra.
    skipped : int64 array (capacity, 5)
        First skipped lines in the same layout as ``err``.

    Returns
    -------
    n_rows, nnz, n_lines, n_slow, n_skipped : int
        ``n_skipped`` counts every skipped line, even past ``skipped``'s
        capacity. On a stopping error ``err[0] != 0`` and parsing stops.
    """
    n_rows = np.int64(0)  # not literals: see _parse_line
    nnz = np.int64(0)
    n_slow = np.int64(0)
    n_skipped = 0
    line = line0
    indptr[0] = 0
    i = np.int64(0)
    while i < n:
        line += 1
        code, k, ns, ts, te, extra, le = _parse_line(
            buf, i, n, zero_based, max_col, n_rows, nnz, line,
            labels, indices, values, slow, n_slow)
        if le < 0:
            le = _line_end(buf, max(te, i), n)
        i = le + 1
        if code == BLANK:
            continue
        if code != OK:
            if skip_bad:
                if n_skipped < skipped.shape[0]:
                    skipped[n_skipped, 0] = code
                    skipped[n_skipped, 1] = line
                    skipped[n_skipped, 2] = ts
                    skipped[n_skipped, 3] = te
                    skipped[n_skipped, 4] = extra
                n_skipped += 1
                continue
            err[0] = code
            err[1] = line
            err[2] = ts
            err[3] = te
            err[4] = extra
            return n_rows, nnz, line - line0, n_slow, n_skipped
        nnz = k
        n_slow = ns
        row_lines[n_rows] = line
        n_rows += 1
        indptr[n_rows] = nnz
    return n_rows, nnz, line - line0, n_slow, n_skipped
