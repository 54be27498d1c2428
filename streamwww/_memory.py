"""Process memory settings for streamed training."""

from __future__ import annotations

import ctypes
import logging
import os
import sys

logger = logging.getLogger(__name__)

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc <malloc.h>
ENV = "STREAMWWW_RELEASE_MEMORY"
# above Blosc's per-chunk scratch buffers (1-4 MiB), below a default shard's arrays; the same
# trim threshold keeps freed scratch at the top of the heap for the next chunk
MMAP_THRESHOLD = TRIM_THRESHOLD = 4 << 20
_done = False


def release_freed_memory() -> None:
    """Make glibc hand freed memory back to the OS (streamed training; on by default).

    Streaming allocates and frees shard-sized buffers (shards, ``beta``) on
    several threads. Once one of them is freed, glibc's dynamic mmap threshold
    serves later ones from per-thread heaps, where freed blocks stay resident:
    peak RSS then holds several shard buffers more than the pipeline uses.
    Fixed thresholds (trim and mmap 4 MiB) return them, at the price of fresh
    zeroed pages for every buffer of 4 MiB or more. Shards and ``beta`` are
    decoded in place (:mod:`streamwww.io._chunks`) and shard-sized arrays are
    recycled (:mod:`streamwww._buffers`), so that price is small. Lower
    thresholds (a 64 KiB trim, as Dask sets for its worker processes, or a
    128 KiB mmap) would make the 1-4 MiB buffers that Blosc allocates and frees
    for every chunk it decodes fresh pages too; at 4 MiB they are served again
    from the heap, which removes most of the page faults of an epoch beyond the
    memory budget for a little more peak RSS (tools/bench_allocator.py,
    tools/bench_speed.py; docs/benchmarks-archive.md, "glibc's thresholds at 4 MiB").
    The thresholds are the process's: they stay set after
    training. ``STREAMWWW_RELEASE_MEMORY=0`` keeps glibc's dynamic thresholds;
    any ``MALLOC_*`` environment variable also leaves them alone, and so does
    any C library but glibc.
    """
    global _done
    if _done:
        return
    _done = True
    if os.environ.get(ENV, "1").strip().lower() in ("0", "false", "no", "off") \
            or not sys.platform.startswith("linux") \
            or any(k.startswith("MALLOC_") for k in os.environ):
        return
    try:
        libc = ctypes.CDLL(None)
        if not hasattr(libc, "mallopt") or not hasattr(libc, "gnu_get_libc_version"):
            return
        for param, value in ((_M_TRIM_THRESHOLD, TRIM_THRESHOLD), (_M_MMAP_THRESHOLD, MMAP_THRESHOLD)):
            if libc.mallopt(param, value) != 1:
                logger.debug("mallopt(%d, %d) refused", param, value)
        logger.debug("glibc malloc: fixed trim and mmap thresholds (%s=0 keeps the dynamic ones)", ENV)
    except OSError:
        pass
