"""Shard feeds: the shards of an epoch, each with its ``beta``, in order.

``SyncFeed`` reads in the calling thread (in-memory data).  ``DaskFeed`` keeps
``prefetch`` shards (and their ``beta``) loading on an in-process Dask client
while the current shard trains, so I/O hides behind compute and memory stays
bounded by about ``prefetch + 2`` shards.

Dask serializes task arguments; open stores hold locks and cannot be pickled,
so tasks name in-process objects by a token (the worker runs in this process,
``processes=False``) and NumPy arrays travel zero-copy.
"""

from __future__ import annotations

import logging
import warnings
from collections import deque
from typing import Any, Iterable, Iterator

logger = logging.getLogger(__name__)

__all__ = ["DaskExecutor", "SyncFeed", "DaskFeed"]

_OBJECTS: dict[int, Any] = {}


def _call(token: int, method: str, *args):
    return getattr(_OBJECTS[token], method)(*args)


def _quiet_distributed_logs() -> None:
    """distributed sets its loggers to INFO; a training library should not print them."""
    for name, lg in list(logging.root.manager.loggerDict.items()):
        if name.startswith("distributed") and isinstance(lg, logging.Logger) and 0 < lg.level < logging.WARNING:
            lg.setLevel(logging.WARNING)


class DaskExecutor:
    """Run methods of in-process objects on an in-process Dask ``distributed`` client.

    Parameters
    ----------
    n_threads : int
        Worker threads (loads and writes that may run at once).
    """

    def __init__(self, n_threads: int = 2):
        import dask
        from distributed import Client, LocalCluster

        from ._memory import release_freed_memory

        release_freed_memory()
        _quiet_distributed_logs()
        with dask.config.set({"distributed.worker.daemon": False,
                              "distributed.scheduler.http.routes": [],
                              # no event log: its entries keep task arguments and results alive
                              "distributed.admin.low-level-log-length": 0,
                              "distributed.admin.large-graph-warning-threshold": "1TB"}):
            # In-process scheduler and worker; the scheduler's HTTP server (always
            # started) listens on an ephemeral loopback port, no dashboard.
            self.cluster = LocalCluster(processes=False, n_workers=1, threads_per_worker=max(1, int(n_threads)),
                                        dashboard_address="127.0.0.1:0", scheduler_kwargs={"dashboard": False},
                                        memory_limit=0, silence_logs=logging.WARNING)
            self.client = Client(self.cluster, set_as_default=False)
        self._tokens: set[int] = set()

    def submit(self, obj, method: str, *args):
        """A future of ``obj.method(*args)``; futures among ``args`` become dependencies."""
        token = id(obj)
        _OBJECTS[token] = obj
        self._tokens.add(token)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*Large object.*")
            return self.client.submit(_call, token, method, *args, pure=False)

    def close(self) -> None:
        # Generous timeouts: on a saturated machine distributed's defaults can expire
        # during shutdown (harmless, but it prints an unretrieved TimeoutError).
        self.client.close(timeout=60)
        self.cluster.close(timeout=60)
        for t in self._tokens:
            _OBJECTS.pop(t, None)
        self._tokens.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class SyncFeed:
    """Load each shard when it is needed, in the calling thread."""

    def __init__(self, data, betas, bias: float):
        self.data, self.betas, self.bias = data, betas, bias

    def train_stream(self, shards: Iterable[int], then: Iterable[int] = ()) -> Iterator[tuple[int, Any, Any]]:
        """``(shard, block, beta)`` for each of ``shards``; ``then``: the shards the
        next stream starts with (a hint for prefetching feeds)."""
        for s in shards:
            yield int(s), self.data.block(int(s), self.bias), self.betas.get(int(s))

    def eval_stream(self, then: Iterable[int] = ()) -> Iterator[tuple[int, Any]]:
        """``(shard, block)`` for every shard in storage order."""
        for s in range(self.data.n_shards):
            yield s, self.data.block(s, self.bias)


class DaskFeed(SyncFeed):
    """Prefetch ``prefetch`` shards and their ``beta`` on a :class:`DaskExecutor`.

    The window runs across stream boundaries: when a stream has submitted its
    last shard, the free slots load the blocks of the next stream's first
    shards (``then``), so an epoch does not start by waiting for a read.  Their
    ``beta`` is read when that next stream starts, after this stream's last
    ``beta`` has been handed to :meth:`DiskBetas.put`.
    """

    def __init__(self, data, betas, bias: float, executor: DaskExecutor, prefetch: int = 2):
        super().__init__(data, betas, bias)
        self.executor = executor
        self.prefetch = max(1, int(prefetch))
        self._ahead: list[tuple[int, Any]] = []  # (shard, future of its block) for the next stream

    def _load(self, s: int, with_block: bool, with_beta: bool, version: int, _write=None):
        """Shard ``s``'s block and/or ``beta`` version ``version`` (read after ``_write``)."""
        block = self.data.block(s, self.bias) if with_block else None
        return block, (self.betas.read(s, version) if with_beta else None)

    def _submit(self, s: int, with_block: bool, with_beta: bool):
        version, pending_write = self.betas.current(s) if with_beta else (0, None)
        return self.executor.submit(self, "_load", s, with_block, with_beta, version, pending_write)

    def _stream(self, shards: Iterable[int], with_beta: bool, then: Iterable[int]):
        shards = [int(s) for s in shards]
        ahead, self._ahead = self._ahead, []
        if [s for s, _ in ahead] != shards[:len(ahead)]:
            for _, fut in ahead:  # the hint was wrong (e.g. training stopped): drop
                fut.cancel()
            ahead = []
        # window items: (shard, block future, beta future or None, belongs to this stream)
        window: deque = deque((s, fut, self._submit(s, False, True) if with_beta else None, True)
                              for s, fut in ahead)
        todo = iter(shards[len(ahead):])
        following = iter([int(s) for s in then][:self.prefetch])

        def fill() -> None:
            while len(window) < self.prefetch:
                s = next(todo, None)
                if s is not None:
                    window.append((s, self._submit(s, True, with_beta), None, True))
                    continue
                s = next(following, None)
                if s is None:
                    return
                window.append((s, self._submit(s, True, False), None, False))

        fill()
        while window and window[0][3]:
            s, fut, beta_fut, _ = window.popleft()
            block, beta = fut.result()
            if beta_fut is not None:
                beta = beta_fut.result()[1]
            del fut, beta_fut  # let the worker forget the shard
            fill()
            yield (s, block, beta) if with_beta else (s, block)
        self._ahead = [(s, fut) for s, fut, _, _ in window]

    def train_stream(self, shards, then=()):
        return self._stream(shards, True, then)

    def eval_stream(self, then=()):
        return self._stream(range(self.data.n_shards), False, then)
