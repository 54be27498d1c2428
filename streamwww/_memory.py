"""Opt-in process memory settings for streamed training."""

from __future__ import annotations

import ctypes
import logging
import os
import sys

logger = logging.getLogger(__name__)

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc <malloc.h>
ENV = "STREAMWWW_RELEASE_MEMORY"
_done = False


def release_freed_memory() -> None:
    """With ``STREAMWWW_RELEASE_MEMORY=1``: make glibc hand freed memory back to the OS.

    Streaming allocates and frees shard-sized buffers on several threads (ours
    and Zarr's).  Once one of them is freed, glibc's dynamic mmap threshold
    serves later ones from per-thread heaps, where freed blocks stay resident.
    Fixed thresholds (trim 64 KiB, as Dask sets for its worker processes
    through ``MALLOC_TRIM_THRESHOLD_``, and mmap 128 KiB) return them, but
    every shard buffer is then fresh zeroed pages.  Measured with
    tools/bench_outofcore.py part (b) (docs/benchmarks.md): peak RSS above the
    fixed overhead 79-81 MiB instead of 121-153 MiB, at 7-29 % fewer rows/s.
    Speed wins by default; this is the switch for memory-tight machines.
    Left alone when any ``MALLOC_*`` variable is set, and on other C
    libraries.
    """
    global _done
    if _done:
        return
    _done = True
    if os.environ.get(ENV, "0") in ("", "0") or not sys.platform.startswith("linux") \
            or any(k.startswith("MALLOC_") for k in os.environ):
        return
    try:
        libc = ctypes.CDLL(None)
        if not hasattr(libc, "mallopt") or not hasattr(libc, "gnu_get_libc_version"):
            return
        for param, value in ((_M_TRIM_THRESHOLD, 64 * 1024), (_M_MMAP_THRESHOLD, 128 * 1024)):
            if libc.mallopt(param, value) != 1:
                logger.debug("mallopt(%d, %d) refused", param, value)
    except OSError:
        pass
