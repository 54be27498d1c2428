"""The Dask cluster a run trains on: a user's ``distributed.Client``, a scheduler address,
or a ``LocalCluster`` of worker processes started (and stopped) for the run."""

from __future__ import annotations

import contextlib
import logging

__all__ = ["connect"]

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def connect(client=None, workers: int | None = None):
    """Yield a ``distributed.Client``: ``client`` itself (left open), a new client of the
    scheduler at address ``client`` (closed after), or, with ``workers=N``, a client of a
    new ``LocalCluster`` of ``N`` single-threaded worker processes (shut down after)."""
    from distributed import (  # lazily: only runs on a cluster need it
        Client,
        LocalCluster,
    )

    if client is not None and workers is not None:
        raise ValueError("give a client (or scheduler address) or a number of workers, not both")
    if isinstance(client, Client):
        yield client
        return
    if isinstance(client, str):
        try:
            c = Client(client, timeout="30s")
        except OSError as exc:
            raise ConnectionError(f"cannot reach the Dask scheduler at {client!r} ({exc})") from None
        except ValueError as exc:  # (distributed's parse of the address: "missing port number in ...")
            raise ValueError(f"cannot reach the Dask scheduler at {client!r}: not an address ({exc})") from None
        with c:
            yield c
        return
    if client is not None:
        raise ValueError(f"The 'client' parameter must be a distributed.Client or a scheduler address. "
                         f"Got {type(client).__name__} instead.")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"The 'workers' parameter must be an int >= 1. Got {workers!r} instead.")
    # The scheduler starts an HTTP server even without a dashboard, on port 8787 unless told:
    # a second run at the same time warned that the port was taken. A free port, no dashboard.
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                      scheduler_kwargs={"dashboard": False}) as cluster, Client(cluster) as c:
        logger.info("started a local Dask cluster of %d worker processes", workers)
        yield c
