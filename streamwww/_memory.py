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

    Streaming allocates and frees shard-sized buffers on several threads.
    glibc's dynamic mmap threshold then serves them from the heap, where freed
    blocks stay resident: peak RSS of a 4-million-row run sits 200-270 MiB
    above the process's fixed overhead instead of about 100 MiB.  Fixed
    thresholds (trim 64 KiB, as Dask sets for its worker processes through
    ``MALLOC_TRIM_THRESHOLD_``, and mmap 128 KiB) keep it near 100 MiB, but
    every shard buffer then comes from fresh zeroed pages: on the 2-core VM
    of docs/benchmarks.md a streamed epoch took 0.51-0.62 s instead of
    0.41 s.  Speed wins by default; this is the switch for memory-tight
    machines.  Left alone when any ``MALLOC_*`` variable is set, and on other
    C libraries.
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
