"""Per-row weight files (LIBLINEAR's ``-W`` format), read alongside LIBSVM rows.

A weight file holds one number per line, one line per data row of the LIBSVM
input, in input order: the weight of the row (finite, >= 0). The converter asks
for as many weights as each parsed block has rows (:meth:`WeightFile.take`), so
the file is read piece by piece with the text, never whole; :meth:`WeightFile.finish`
then checks that no line is left over. Every problem is a one-line
:class:`~streamwww.errors.DataFormatError` that starts with ``FILE:LINE:``.
gzip, bz2 and xz files are recognised by their magic bytes, as for the input.
"""

from __future__ import annotations

import hashlib
import itertools
import os

import numpy as np

from streamwww.errors import DataFormatError, InputReadError
from streamwww.io.libsvm import open_compressed
from streamwww.storage.location import location
from streamwww.weights import first_bad_weight

__all__ = ["WeightFile"]

_PIECE_LINES = 2**16  # lines parsed at a time (a few MiB of Python objects at most)
_FIX = "give one finite number >= 0 per line, one line per data row of the input"


class WeightFile:
    """Read a weight file in step with the rows of a LIBSVM input.

    Parameters
    ----------
    path : str or path-like
        The weight file.
    input_path : str
        The LIBSVM input it belongs to (named in count mismatches).
    """

    def __init__(self, path: str | os.PathLike, input_path: str):
        self.location = location(path)
        self.path = self.location.url
        self.input_path = input_path
        if not self.location.isfile():
            raise FileNotFoundError(f"weight file {self.path} does not exist.")
        self.size = int(self.location.fs.size(self.location.path))
        self._f = self._raw = None  # opened at the first read
        self._sha = hashlib.sha256()
        self.lines = 0  # weights read so far (= lines, one weight per line)
        self.any_positive = False

    def _error(self, line: int, message: str) -> DataFormatError:
        return DataFormatError(f"{self.path}:{line}: {message}")

    def __enter__(self) -> WeightFile:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _read_lines(self, n: int) -> list[bytes]:
        if self._f is None:
            self._f, self._raw = open_compressed(self.location)
        try:
            lines = list(itertools.islice(self._f, n))
        except (OSError, EOFError) as exc:  # truncated or corrupt compressed data
            raise InputReadError(f"{self.path}: cannot read the weight file near line "
                                 f"{self.lines + 1}: {exc}") from exc
        for line in lines:
            self._sha.update(line)
        return lines

    def take(self, n: int, input_lines: np.ndarray | None = None) -> np.ndarray:
        """The next ``n`` weights, as float64 (read ``_PIECE_LINES`` lines at a time).

        ``input_lines`` (the input line number of each of those rows) only
        makes a count mismatch easier to find.
        """
        out = np.empty(n, dtype=np.float64)
        for a in range(0, n, _PIECE_LINES):
            b = min(n, a + _PIECE_LINES)
            self._parse(out[a:b], None if input_lines is None else input_lines[a:b])
        return out

    def _parse(self, out: np.ndarray, input_lines) -> None:
        n = len(out)
        lines = self._read_lines(n)
        start = self.lines
        if len(lines) < n:
            where = ("" if input_lines is None else
                     f" (the row at {self.input_path}:{int(input_lines[len(lines)])} has none)")
            raise self._error(start + len(lines) + 1,
                              f"the weight file ends after {start + len(lines)} weight(s), but "
                              f"{self.input_path} has more data rows{where}; {_FIX}.")
        try:
            out[:] = np.fromiter(map(float, lines), dtype=np.float64, count=n)
        except ValueError:
            for k, line in enumerate(lines):
                try:
                    float(line)
                except ValueError:
                    text = line.decode("utf-8", "replace").rstrip("\r\n")
                    what = "the line is empty" if not text.strip() else f"{text[:40]!r} is not a number"
                    raise self._error(start + k + 1, f"{what}; {_FIX}.") from None
            raise
        if (bad := first_bad_weight(out)) is not None:
            raise self._error(start + bad + 1, f"weight {lines[bad].decode().strip()!r} is "
                              f"{'negative' if out[bad] < 0 else 'not finite'}; {_FIX}.")
        self.lines += n
        self.any_positive = self.any_positive or bool(out.any())

    def finish(self) -> None:
        """Check that the file holds no more weights than rows were read, and close it.

        Raises
        ------
        DataFormatError
            A line left over, or (every weight read) all weights zero.
        """
        try:
            extra = self._read_lines(1)
            if extra:
                raise self._error(self.lines + 1, f"the weight file has more lines than "
                                  f"{self.input_path} has data rows ({self.lines}); {_FIX}.")
            if self.lines and not self.any_positive:
                raise DataFormatError(f"{self.path}: every weight is 0 ({self.lines} lines); at "
                                      f"least one row needs a positive weight (a model would "
                                      f"have nothing to learn from).")
        finally:
            self.close()

    @property
    def sha256(self) -> str:
        """SHA-256 of the (decompressed) text read so far."""
        return self._sha.hexdigest()

    def close(self) -> None:
        """Close the file (idempotent)."""
        if self._f is not None:
            self._f.close()
            if self._raw is not self._f:
                self._raw.close()
            self._f = self._raw = None
