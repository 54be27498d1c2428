"""Compiled builds of one kernel source, each cached under a name of its own.

Numba names a function's cache files after its qualified name and keys their entries by
signature and bytecode, not by the compile flags (``parallel``, ``nogil``, ``inline``).  Two
builds of one Python function would share the entries, and whichever build a machine compiled
first would be loaded for both: a parallel kernel that runs on one thread, or a serial one that
opens a thread pool, with the same results either way, so that no result shows it.  Each build
here compiles a copy of the function named ``<name><suffix>``.
"""

from __future__ import annotations

import types

from numba import njit

__all__ = ["build", "two_builds"]


def build(fn, suffix: str, **flags):
    """``njit(cache=True, **flags)`` of a copy of ``fn`` named ``fn.__name__ + suffix``."""
    twin = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__ + suffix, fn.__defaults__, fn.__closure__)
    twin.__qualname__ = fn.__qualname__ + suffix
    twin.__module__, twin.__doc__ = fn.__module__, fn.__doc__
    return njit(cache=True, **flags)(twin)


def two_builds(fn):
    """The parallel build of ``fn`` (``prange`` on threads) and its serial build (``prange``
    as ``range``, no thread-pool region per call)."""
    return build(fn, "_parallel", parallel=True), build(fn, "_serial", nogil=True)
