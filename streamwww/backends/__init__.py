"""Compute backends with one interface: ``cpu`` (Numba) and ``cuda`` (numba-cuda + CuPy)."""

from __future__ import annotations

from streamwww.backends.base import Backend, get_backend

__all__ = ["Backend", "get_backend"]
