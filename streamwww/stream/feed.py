"""Shard feeds: the shards of an epoch, each with its ``beta``, in order.

``SyncFeed`` reads in the calling thread (in-memory data).  ``PrefetchFeed`` keeps
``prefetch`` shards (and their ``beta``) loading on a :class:`LoaderPool` while
the current shard trains, so I/O hides behind compute and memory stays bounded
by about ``prefetch + 2`` shards.

The loads of a one-process run go to a ``concurrent.futures`` thread pool, not to
Dask: an in-process ``distributed`` cluster (``LocalCluster(processes=False)``)
costs far more to start, and per task round trip (submit, scheduler, worker
thread, result), than the same call on a thread pool; with one small shard that
round trip, paid for every load, objective pass and ``beta`` write, would be most
of an epoch (docs/TRAINING.md, "Data path and memory"; docs/benchmarks.md, "Fixed
cost of a streamed epoch").  The loads are plain calls on objects of this
process (no serialization, no scheduling decision to make), which is exactly what ``concurrent.futures`` does.  Runs on a cluster use the
user's ``distributed.Client`` (:mod:`streamwww.engine.cocoa`).
"""

from __future__ import annotations

import logging
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterable, Iterator

from streamwww.state.betas import stack_rows

logger = logging.getLogger(__name__)

__all__ = ["LoaderPool", "SyncFeed", "PrefetchFeed"]


class LoaderPool:
    """Run calls on background loader threads (a thread pool that releases freed memory
    to the OS first, and whose ``close`` drops what has not started).

    Tasks start in submission order (one thread: one at a time, in that order).

    Parameters
    ----------
    n_threads : int
        Loads and writes that may run at once.
    """

    def __init__(self, n_threads: int = 2):
        from streamwww._memory import release_freed_memory

        release_freed_memory()
        self._pool = ThreadPoolExecutor(max(1, int(n_threads)), thread_name_prefix="streamwww-loader")

    def submit(self, fn, *args):
        """A future of ``fn(*args)``."""
        return self._pool.submit(fn, *args)

    def close(self) -> None:
        """Cancel what has not started; wait for what runs (a write in progress finishes)."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class _Done:
    """A finished result in place of a future."""

    def __init__(self, value):
        self.value = value

    def result(self):
        return self.value

    def cancel(self) -> None:
        pass


class SyncFeed:
    """Load each group of shards when it is needed, in the calling thread.

    Streams yield *units*: tuples of shard indices trained (or evaluated) as
    one block, their rows stacked in the tuple's order.
    """

    def __init__(self, data, betas, bias: float):
        self.data, self.betas, self.bias = data, betas, bias

    def _beta(self, unit) -> Any:
        return stack_rows([self.betas.get(s) for s in unit])

    def train_stream(self, units: Iterable[tuple[int, ...]], then: Iterable[tuple[int, ...]] = (),
                     then_beta: bool = True) -> Iterator[tuple[tuple[int, ...], Any, Any]]:
        """``(unit, block, beta)`` for each of ``units``; ``then``: the units the
        next stream starts with, ``then_beta``: whether it trains them (hints for
        prefetching feeds). The caller puts a unit's new ``beta`` before it asks
        for the next unit: prefetches submitted then read that version."""
        for unit in units:
            unit = tuple(int(s) for s in unit)
            yield unit, self.data.block_of(unit, self.bias), self._beta(unit)

    def eval_stream(self, then: Iterable[tuple[int, ...]] = (),
                    then_beta: bool = True) -> Iterator[tuple[tuple[int, ...], Any]]:
        """``((shard,), block)`` for every shard in storage order."""
        for s in range(self.data.n_shards):
            yield (s,), self.data.block_of((s,), self.bias)


class PrefetchFeed(SyncFeed):
    """Prefetch units (groups of shards) and their ``beta`` on a :class:`LoaderPool`.

    ``prefetch`` counts shards: about ``prefetch`` shards load ahead (at least one
    unit).  The window runs across stream boundaries: when a stream has
    submitted its last unit, the free slots load the next stream's first units
    (``then``), so an epoch does not start by waiting for a read.  When the next
    stream trains (``then_beta``), their ``beta`` loads with them unless one of
    their shards is still to be trained in this stream; those read theirs when
    the next stream starts, after the last :meth:`DiskBetas.put`.

    A ``beta`` read never waits for a background write: :class:`~streamwww.state.betas.DiskBetas` serves
    versions still being written from memory.
    """

    def __init__(self, data, betas, bias: float, executor: LoaderPool, prefetch: int = 2):
        super().__init__(data, betas, bias)
        self.executor = executor
        self.prefetch = max(1, int(prefetch))
        # the next stream's first units: (unit, future of its block, future of its beta or None)
        self._ahead: list[tuple[tuple[int, ...], Any, Any]] = []

    def _load(self, unit: tuple[int, ...], with_block: bool, versions: tuple | None):
        """The block of ``unit`` (if ``with_block``) and its stacked ``beta`` (if ``versions``)."""
        block = self.data.block_of(unit, self.bias) if with_block else None
        beta = self.betas.read_group(unit, versions) if versions is not None else None
        return block, beta

    def _submit(self, unit: tuple[int, ...], with_block: bool, with_beta: bool):
        # The versions are fixed now, on the calling thread, after the puts so far.
        versions = tuple(self.betas.version(s) for s in unit) if with_beta else None
        if getattr(self.data, "has_block", None) and self.data.has_block(unit, self.bias) and \
                (versions is None or getattr(self.betas, "resident", False)):
            # all in memory: handing the load to a thread would cost more than the load
            return _Done(self._load(unit, with_block, versions))
        return self.executor.submit(self._load, unit, with_block, versions)

    def _window(self, unit_len: int) -> int:
        return max(1, -(-self.prefetch // max(1, unit_len)))

    def _stream(self, units: Iterable[tuple[int, ...]], with_beta: bool, then: Iterable[tuple[int, ...]],
                then_beta: bool):
        units = [tuple(int(s) for s in u) for u in units]
        ahead, self._ahead = self._ahead, []
        if [u for u, _, _ in ahead] != units[:len(ahead)]:
            for _, fut, beta_fut in ahead:  # the hint was wrong (e.g. training stopped): drop
                fut.cancel()
                if beta_fut is not None:
                    beta_fut.cancel()
            ahead = []
        size = self._window(max((len(u) for u in units), default=1))
        # window items: (unit, block future, beta future or None, belongs to this stream)
        window: deque = deque()
        for u, fut, beta_fut in ahead:
            if with_beta and beta_fut is None:
                # Its beta was still being trained when the unit was prefetched. The
                # versions are in DiskBetas' memory or fresh on disk: read here.
                beta_fut = _Done((None, self.betas.read_group(u, [self.betas.version(s) for s in u])))
            window.append((u, fut, beta_fut if with_beta else None, True))
        todo = iter(units[len(ahead):])
        # A future keeps its result alive: only the window may hold them.
        ahead = fut = beta_fut = None
        following = [tuple(int(s) for s in u) for u in then]
        following = iter(following[:self._window(max((len(u) for u in following), default=1))])
        yielded = 0

        def settled(u) -> bool:
            # Has every shard of u had its last put of this stream? The caller puts
            # a unit's beta before fetching the next one: while the generator runs
            # (``yielded`` counts the unit being handed out), the units before that
            # one are put.
            if not with_beta:
                return True
            busy = {s for v in units[max(0, yielded - 1):] for s in v}
            return busy.isdisjoint(u)

        def fill() -> None:
            while len(window) < size:
                u = next(todo, None)
                if u is not None:
                    window.append((u, self._submit(u, True, with_beta), None, True))
                    continue
                u = next(following, None)
                if u is None:
                    return
                early = then_beta and settled(u)
                f = self._submit(u, True, early)
                # a unit whose beta loads with its block carries the block's future twice
                window.append((u, f, f if early else None, False))

        fill()
        while window and window[0][3]:
            u, fut, beta_fut, _ = window.popleft()
            block, beta = fut.result()
            if beta_fut is not None and beta_fut is not fut:
                beta = beta_fut.result()[1]
            del fut, beta_fut  # hold no finished load beyond the window
            yielded += 1
            fill()
            yield (u, block, beta) if with_beta else (u, block)
            block = beta = None  # the caller is done with this unit: do not hold it while loading the next
        self._ahead = [(u, fut, beta_fut) for u, fut, beta_fut, _ in window]

    def train_stream(self, units, then=(), then_beta=True):
        """See :meth:`SyncFeed.train_stream`; ``then_beta``: whether the next stream trains."""
        return self._stream(units, True, then, then_beta)

    def eval_stream(self, then=(), then_beta=True):
        return self._stream([(s,) for s in range(self.data.n_shards)], False, then, then_beta)
