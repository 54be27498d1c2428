"""Progress reports from long I/O operations.

Library functions take an optional ``progress`` callable and call it at block
and shard boundaries; the command line turns the events into progress bars.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple


class ProgressEvent(NamedTuple):
    """One progress report.

    Attributes
    ----------
    stage : str
        ``"read"`` (``done``/``total`` in bytes of the input file as stored on
        disk), ``"write"`` (rows written to shards) or ``"generate"`` (bytes
        of text written by ``make_data``).
    done : int
        Work done so far in the unit of the stage.
    total : int or None
        Total work of the stage when known.
    rows : int
        Rows handled so far (for rows/s).
    """

    stage: str
    done: int
    total: int | None
    rows: int


ProgressCallback = Callable[[ProgressEvent], None]
