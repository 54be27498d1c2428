"""The library's one concession to output: epoch lines on stderr for ``verbose > 0``."""

from __future__ import annotations

import logging
import sys
from contextlib import contextmanager

__all__ = ["verbose_logging"]

_LOG = logging.getLogger("streamwww")


@contextmanager
def verbose_logging(verbose: int):
    """Show the library's epoch lines on stderr for ``verbose > 0`` when logging is unconfigured."""
    if verbose <= 0 or logging.getLogger().hasHandlers() or _LOG.handlers:
        yield
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("[streamwww] %(message)s"))
    old = _LOG.level
    _LOG.addHandler(handler)
    _LOG.setLevel(logging.INFO)
    try:
        yield
    finally:
        _LOG.removeHandler(handler)
        _LOG.setLevel(old)
