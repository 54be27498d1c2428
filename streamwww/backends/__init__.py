"""Compute backends with one interface: ``cpu`` (Numba) and ``cuda`` (numba-cuda + CuPy)."""

from __future__ import annotations

from streamwww.backends.base import Backend, Block, make_block
from streamwww.backends.select import get_backend

__all__ = ["Backend", "Block", "get_backend", "make_block"]
