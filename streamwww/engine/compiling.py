"""Numba's compilation as a run sees it: said once, and kept out of solver time.

The kernels are compiled with ``cache=True``: the first run of a code path on a
machine (after installing or upgrading) compiles it, for seconds, and later runs
load it from Numba's cache.  Numba announces each compilation (a cache miss) as a
``numba:compile`` event (:mod:`numba.core.event`).  :func:`watch` listens to them
for the rest of the process: it logs the first one once (a WARNING on the
``streamwww.engine.compiling`` logger, so that a Python user without logging
configured sees why the first fit pauses) and adds up their durations, which
:func:`solver_clock` leaves out of the time a run reports as training (the
history's ``time`` and rows/s).

Compilations in any thread are counted: Numba compiles under one global lock, so
they never overlap, and the training thread waits for the kernels it needs (and
for the shards whose decoding compiles its own).
"""

from __future__ import annotations

import logging
import threading
import time

__all__ = ["NOTE", "compile_seconds", "solver_clock", "watch"]

logger = logging.getLogger(__name__)

#: the message logged at the first compilation of a process
NOTE = ("compiling streamwww's kernels for this machine (the first run after installing or upgrading; "
        "up to a minute, not counted as solver time); later runs load them from Numba's cache")

_lock = threading.Lock()
_listener = None


def watch() -> None:
    """Listen to Numba's compilations from now on (once per process; cheap: the listener
    runs on compilations only)."""
    global _listener
    with _lock:
        if _listener is not None:
            return
        from numba.core import event

        class _Compiles(event.Listener):
            """The outermost compilations' total duration (a kernel's callees compile inside
            it, as nested events)."""

            def __init__(self) -> None:
                self.depth = 0
                self.started = 0.0
                self.total = 0.0
                self.said = False

            def on_start(self, ev) -> None:
                with _lock:
                    self.depth += 1
                    if self.depth > 1:
                        return
                    self.started = time.perf_counter()
                    say, self.said = not self.said, True
                if say:
                    logger.warning(NOTE)

            def on_end(self, ev) -> None:
                with _lock:
                    self.depth -= 1
                    if self.depth == 0:
                        self.total += time.perf_counter() - self.started

            def seconds(self) -> float:
                with _lock:
                    return self.total + (time.perf_counter() - self.started if self.depth > 0 else 0.0)

        _listener = _Compiles()
        event.register("numba:compile", _listener)


def compile_seconds() -> float:
    """Seconds this process has spent compiling kernels since :func:`watch` (0 before)."""
    listener = _listener
    return 0.0 if listener is None else listener.seconds()


def solver_clock() -> float:
    """``time.perf_counter()`` less the compilation time so far: a clock that stands still
    while kernels compile, for the sections a run times as training."""
    return time.perf_counter() - compile_seconds()
