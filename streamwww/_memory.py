"""Process memory settings for streamed training."""

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
    """Make glibc hand freed memory back to the OS (streamed training; on by default).

    Streaming allocates and frees shard-sized buffers (shards, ``beta``) on
    several threads. Once one of them is freed, glibc's dynamic mmap threshold
    serves later ones from per-thread heaps, where freed blocks stay resident:
    peak RSS then holds several shard buffers more than the pipeline uses.
    Fixed thresholds (trim 64 KiB, as Dask sets for its worker processes
    through ``MALLOC_TRIM_THRESHOLD_``, and mmap 128 KiB) return them, at the
    price of fresh zeroed pages for every shard buffer. Since shards and
    ``beta`` are decoded in place (:mod:`streamwww.io._chunks`) that price is
    small: on the benchmark store peak RSS above the fixed overhead is 86 MiB
    instead of 108-123 MiB, for epochs 4-9 % longer (tools/bench_allocator.py,
    docs/benchmarks.md). The thresholds are the process's: they stay set after
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
        for param, value in ((_M_TRIM_THRESHOLD, 64 * 1024), (_M_MMAP_THRESHOLD, 128 * 1024)):
            if libc.mallopt(param, value) != 1:
                logger.debug("mallopt(%d, %d) refused", param, value)
        logger.debug("glibc malloc: fixed trim and mmap thresholds (%s=0 keeps the dynamic ones)", ENV)
    except OSError:
        pass
