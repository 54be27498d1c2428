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

    def train_stream(self, shards: Iterable[int]) -> Iterator[tuple[int, Any, Any]]:
        for s in shards:
            yield int(s), self.data.block(int(s), self.bias), self.betas.get(int(s))

    def eval_stream(self) -> Iterator[tuple[int, Any]]:
        for s in range(self.data.n_shards):
            yield s, self.data.block(s, self.bias)


class DaskFeed(SyncFeed):
    """Prefetch ``prefetch`` shards and their ``beta`` on a :class:`DaskExecutor`."""

    def __init__(self, data, betas, bias: float, executor: DaskExecutor, prefetch: int = 2):
        super().__init__(data, betas, bias)
        self.executor = executor
        self.prefetch = max(1, int(prefetch))

    def _load(self, s: int, with_beta: bool, version: int, _write=None):
        """Read shard ``s`` and, if asked, ``beta`` version ``version`` (after ``_write``)."""
        block = self.data.block(s, self.bias)
        return block, (self.betas.read(s, version) if with_beta else None)

    def _stream(self, shards: Iterable[int], with_beta: bool):
        window: deque = deque()
        it = iter(shards)

        def submit(s: int):
            version, pending_write = self.betas.current(s) if with_beta else (0, None)
            window.append((s, self.executor.submit(self, "_load", s, with_beta, version, pending_write)))

        for s in it:
            submit(int(s))
            if len(window) >= self.prefetch:
                break
        while window:
            s, fut = window.popleft()
            block, beta = fut.result()
            nxt = next(it, None)
            if nxt is not None:
                submit(int(nxt))
            del fut  # let the worker forget the shard
            yield (s, block, beta) if with_beta else (s, block)

    def train_stream(self, shards):
        return self._stream(shards, True)

    def eval_stream(self):
        return self._stream(range(self.data.n_shards), False)
