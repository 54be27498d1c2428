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
    """Load each group of shards when it is needed, in the calling thread.

    Streams yield *units*: tuples of shard indices trained (or evaluated) as
    one block, their rows stacked in the tuple's order.
    """

    def __init__(self, data, betas, bias: float):
        self.data, self.betas, self.bias = data, betas, bias

    def _beta(self, unit) -> Any:
        from streamwww.data import stack_rows

        return stack_rows([self.betas.get(s) for s in unit])

    def train_stream(self, units: Iterable[tuple[int, ...]],
                     then: Iterable[tuple[int, ...]] = ()) -> Iterator[tuple[tuple[int, ...], Any, Any]]:
        """``(unit, block, beta)`` for each of ``units``; ``then``: the units the
        next stream starts with (a hint for prefetching feeds)."""
        for unit in units:
            unit = tuple(int(s) for s in unit)
            yield unit, self.data.block_of(unit, self.bias), self._beta(unit)

    def eval_stream(self, then: Iterable[tuple[int, ...]] = ()) -> Iterator[tuple[tuple[int, ...], Any]]:
        """``((shard,), block)`` for every shard in storage order."""
        for s in range(self.data.n_shards):
            yield (s,), self.data.block_of((s,), self.bias)


class DaskFeed(SyncFeed):
    """Prefetch units (groups of shards) and their ``beta`` on a :class:`DaskExecutor`.

    ``prefetch`` counts shards: about ``prefetch`` shards load ahead (at least one
    unit).  The window runs across stream boundaries: when a stream has
    submitted its last unit, the free slots load the blocks of the next
    stream's first units (``then``), so an epoch does not start by waiting for
    a read.  Their ``beta`` is read when that next stream starts, after this
    stream's last ``beta`` has been handed to :meth:`DiskBetas.put`.
    """

    def __init__(self, data, betas, bias: float, executor: DaskExecutor, prefetch: int = 2):
        super().__init__(data, betas, bias)
        self.executor = executor
        self.prefetch = max(1, int(prefetch))
        self._ahead: list[tuple[tuple[int, ...], Any]] = []  # (unit, future of its block) for the next stream

    def _load(self, unit: tuple[int, ...], with_block: bool, with_beta: bool, versions: tuple, *_writes):
        """The block of ``unit`` and/or its stacked ``beta`` (versions ``versions``, read after ``_writes``)."""
        from streamwww.data import stack_rows

        block = self.data.block_of(unit, self.bias) if with_block else None
        beta = stack_rows([self.betas.read(s, v) for s, v in zip(unit, versions)]) if with_beta else None
        return block, beta

    def _submit(self, unit: tuple[int, ...], with_block: bool, with_beta: bool):
        versions, writes = (), ()
        if with_beta:
            current = [self.betas.current(s) for s in unit]
            versions = tuple(v for v, _ in current)
            writes = tuple(w for _, w in current if w is not None)
        return self.executor.submit(self, "_load", unit, with_block, with_beta, versions, *writes)

    def _window(self, unit_len: int) -> int:
        return max(1, -(-self.prefetch // max(1, unit_len)))

    def _stream(self, units: Iterable[tuple[int, ...]], with_beta: bool, then: Iterable[tuple[int, ...]]):
        units = [tuple(int(s) for s in u) for u in units]
        ahead, self._ahead = self._ahead, []
        if [u for u, _ in ahead] != units[:len(ahead)]:
            for _, fut in ahead:  # the hint was wrong (e.g. training stopped): drop
                fut.cancel()
            ahead = []
        size = self._window(max((len(u) for u in units), default=1))
        # window items: (unit, block future, beta future or None, belongs to this stream)
        window: deque = deque((u, fut, self._submit(u, False, True) if with_beta else None, True)
                              for u, fut in ahead)
        todo = iter(units[len(ahead):])
        following = [tuple(int(s) for s in u) for u in then]
        following = iter(following[:self._window(max((len(u) for u in following), default=1))])

        def fill() -> None:
            while len(window) < size:
                u = next(todo, None)
                if u is not None:
                    window.append((u, self._submit(u, True, with_beta), None, True))
                    continue
                u = next(following, None)
                if u is None:
                    return
                window.append((u, self._submit(u, True, False), None, False))

        fill()
        while window and window[0][3]:
            u, fut, beta_fut, _ = window.popleft()
            block, beta = fut.result()
            if beta_fut is not None:
                beta = beta_fut.result()[1]
            del fut, beta_fut  # let the worker forget the unit
            fill()
            yield (u, block, beta) if with_beta else (u, block)
        self._ahead = [(u, fut) for u, fut, _, _ in window]

    def train_stream(self, units, then=()):
        return self._stream(units, True, then)

    def eval_stream(self, then=()):
        return self._stream([(s,) for s in range(self.data.n_shards)], False, then)
