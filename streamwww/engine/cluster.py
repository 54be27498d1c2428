"""The Dask cluster a run trains on: a user's ``distributed.Client``, a scheduler address,
or a ``LocalCluster`` of worker processes started (and stopped) for the run."""

from __future__ import annotations

import contextlib
import logging
import os

__all__ = ["connect", "scheduler_timeout", "TIMEOUT_ENV"]

logger = logging.getLogger(__name__)

#: the environment variable that sets how long a scheduler has to answer, in seconds
TIMEOUT_ENV = "STREAMWWW_SCHEDULER_TIMEOUT"
TIMEOUT_S = 30.0


def scheduler_timeout() -> float:
    """Seconds a scheduler address has to answer: :data:`TIMEOUT_ENV`, else :data:`TIMEOUT_S`."""
    text = os.environ.get(TIMEOUT_ENV, "").strip()
    if not text:
        return TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (0 < value < float("inf")):
        raise ValueError(f"{TIMEOUT_ENV}={text!r}: must be a number of seconds > 0")
    return value


def _check_address(address: str) -> None:
    """Raise ``ValueError`` (distributed's own words) unless ``address`` is a scheduler
    address distributed can parse: a known scheme and, for TCP and TLS, a port. Checked
    before any connection, so that what a server sends back is never taken for a bad address."""
    from distributed.comm.addressing import parse_address, parse_host_port
    from distributed.comm.registry import get_backend

    scheme, loc = parse_address(address)
    get_backend(scheme)
    if scheme in ("tcp", "tls"):
        parse_host_port(loc)


def _probe(address: str, timeout: float) -> None:
    """Connect to the scheduler at ``address`` and wait for its handshake, ``timeout``
    seconds at most; raise ``OSError``: a ``TimeoutError`` naming how long it waited, or
    a ``ConnectionError`` when what answered is not a Dask scheduler.

    ``Client(address, timeout=)`` bounds the TCP connect but not the handshake read after
    it: a port that accepts connections and never answers held it forever. The probe
    runs distributed's own ``connect`` on an event loop of its own, in a thread (the
    caller may be inside a running loop), under ``asyncio.wait_for``. Whatever else the
    handshake raises (bytes that do not decode as one) means another server answered.
    """
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from distributed.comm import connect as comm_connect

    async def handshake() -> None:
        comm = await asyncio.wait_for(comm_connect(address, timeout=timeout), timeout)
        await comm.close()

    with ThreadPoolExecutor(1, thread_name_prefix="streamwww-scheduler-probe") as pool:
        try:
            pool.submit(asyncio.run, handshake()).result()
        except asyncio.TimeoutError:  # (TimeoutError, an OSError, from Python 3.11 on)
            raise TimeoutError(f"no answer as a Dask scheduler in {timeout:g} s (a port that says nothing, or "
                               f"another server); set {TIMEOUT_ENV} to wait longer") from None
        except OSError:
            raise
        except Exception as exc:
            raise ConnectionError(f"it answered, but not as a Dask scheduler: {type(exc).__name__}: "
                                  f"{(str(exc).splitlines() or [''])[0]}") from None


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
        timeout = scheduler_timeout()
        try:
            _check_address(client)
        except ValueError as exc:  # (distributed's parse of the address: "missing port number in ...")
            raise ValueError(f"cannot reach the Dask scheduler at {client!r}: not an address ({exc})") from None
        try:
            _probe(client, timeout)
            c = Client(client, timeout=f"{timeout}s")
        except OSError as exc:  # (a timeout of Client's own says nothing: how long it waited, then)
            reason = str(exc) or (f"it took the connection, then gave no answer in {timeout:g} s; set "
                                  f"{TIMEOUT_ENV} to wait longer")
            raise ConnectionError(f"cannot reach the Dask scheduler at {client!r} ({reason})") from None
        with c:
            yield c
        return
    if client is not None:
        raise ValueError(f"The 'client' parameter must be a distributed.Client or a scheduler address. "
                         f"Got {type(client).__name__} instead.")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"The 'workers' parameter must be an int >= 1. Got {workers!r} instead.")
    # The scheduler starts an HTTP server even without a dashboard, on port 8787 unless told:
    # a second run at the same time would warn that the port is taken. A free port, no dashboard.
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                           scheduler_kwargs={"dashboard": False})
    try:
        with Client(cluster) as c:
            logger.info("started a local Dask cluster of %d worker processes", workers)
            yield c
    finally:
        _close_quietly(cluster)


def _close_quietly(cluster) -> None:
    """Shut down a cluster of the run's own once the run has what it needs from it. A nanny
    whose worker takes longer than its few seconds to exit (a loaded machine) kills it and
    warns; for this cluster that loses nothing, so only its errors are let through."""
    nanny = logging.getLogger("distributed.nanny")
    level = nanny.level
    nanny.setLevel(max(level, logging.ERROR))
    try:
        cluster.close()
    finally:
        nanny.setLevel(level)
