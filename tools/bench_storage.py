"""Object storage (issue 20): a streamed epoch from S3 against the same store on local disk.

A real S3 API (moto's server) runs in a separate process on loopback, behind a WSGI
layer that waits ``--latency-ms`` before answering each request (loopback has none;
an object store in the same region answers in tens of milliseconds) and counts
requests and response bytes. The same store is trained for ``--epochs`` epochs
(``tol=0``: every epoch runs, with its objective pass, as a user's run does) from

1. the local disk,
2. S3 with no added latency,
3. S3 with each latency in ``--latency-ms``,

each with ``memory_budget=0`` (every shard read from the store every time) and
``memory_budget="auto"`` (the default: decoded shards kept after their first read),
the checkpoint directory on local disk each time, and the S3 runs with each client of
``--clients`` (``obstore``: the default where it is installed, streamwww.storage.obstore;
``s3fs``: ``STREAMWWW_S3_CLIENT=s3fs``, the reads before it), side by side on the same
server. Reported: whole ``train`` wall time per epoch (medians of ``--repeats``), its
ratio to the local run, the training process's CPU per epoch (user + system, all its
threads), and the requests and bytes the server answered per epoch. The models must be
bitwise identical (checked).

Usage: python tools/bench_storage.py [--rows 200000] [--features 2000] [--nnz 30]
       [--classes 20] [--shard-rows 10000] [--epochs 4] [--latency-ms 20] [--repeats 3]
       [--prefetch auto] [--format zarr] [--clients obstore,s3fs] [--pin [--train-cpus 0 --server-cpus 1]]
       [--server-processes N] [--out docs/benchmarks.md]
       python tools/bench_storage.py --receive 4 [--pin] [--repeats 3]

``--server-processes N`` answers the reads from N forked copies of the server (accepting on one
shared socket) instead of one Python process, which answers one request at a time: an object
store answers in parallel. With ``--pin`` and ``--server-cpus`` on a machine with cores
to spare, the server's CPU per request is then no longer the bound of the S3 epochs.

``--receive MIB`` measures only what the reading process pays per MiB received (48 objects
of MIB MiB read whole, 4 at a time, by ``Location.read_many``: through obstore, s3fs, and from
local files).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import warnings

import numpy as np


# ----------------------------------------------------------------------------- the server


def _cpu_set(spec: str) -> set[int]:
    """``"0"``, ``"0,1"`` or ``"2-15"`` as a set of CPU numbers."""
    out: set[int] = set()
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def serve(port: int, latency_ms: float, cpus: str = "", processes: int = 0, fork_port: int = 0) -> None:
    """Run moto's S3 server with per-request latency and counters (a child process).

    ``cpus`` (e.g. ``"1"`` or ``"2-15"``) pins the server to those CPUs before it starts a
    thread. With ``processes`` > 0, a request to ``/__fork__`` (sent once the objects are
    uploaded) forks ``processes`` copies of the server that accept connections on ``fork_port``
    (one listening socket, shared), each answering from its own copy of the uploaded objects:
    moto then answers requests in parallel on as many cores (one process of Python answers one
    request at a time), as an object store does. What is written through ``fork_port`` stays in
    the copy that took it, so it serves reads. Objects stay in memory (no spooled files, whose
    offsets the copies would share). werkzeug closes every connection after one request, so the
    copies are made once, not per connection.
    """
    import ctypes
    import logging
    import multiprocessing
    import threading

    ctypes.CDLL(None).prctl(1, 15)  # PR_SET_PDEATHSIG, SIGTERM: end with the benchmark, however it ends
    if cpus:
        os.sched_setaffinity(0, _cpu_set(cpus))
    os.environ["MOTO_S3_DEFAULT_KEY_BUFFER_SIZE"] = str(2**40)

    from moto.server import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    app = DomainDispatcherApplication(create_backend_app)
    # counters in shared memory: a forked process's requests count too
    stats = multiprocessing.RawArray(ctypes.c_int64, 2)  # requests, bytes
    lock = multiprocessing.Lock()
    delay = latency_ms / 1000.0
    fork = threading.Event()

    def wrapped(environ, start_response):
        if environ.get("PATH_INFO") == "/__stats__":
            with lock:
                body = json.dumps({"requests": stats[0], "bytes": stats[1]}).encode()
                if environ.get("REQUEST_METHOD") == "DELETE":
                    stats[0] = stats[1] = 0
            start_response("200 OK", [("Content-Type", "application/json"),
                                      ("Content-Length", str(len(body)))])
            return [body]
        if environ.get("PATH_INFO") == "/__fork__":
            fork.set()
            start_response("200 OK", [("Content-Length", "0")])
            return [b""]
        if delay:
            time.sleep(delay)
        out = app(environ, start_response)
        parts = list(out)
        with lock:
            stats[0] += 1
            stats[1] += sum(len(p) for p in parts)
        return parts

    server = make_server("127.0.0.1", port, wrapped, threaded=True)
    if not processes:
        server.serve_forever()
        return
    threading.Thread(target=server.serve_forever, daemon=True).start()
    fork.wait()
    warnings.filterwarnings("ignore", "This process .* is multi-threaded", DeprecationWarning)  # idle threads
    listener = socket.create_server(("127.0.0.1", fork_port), backlog=1024)
    for _ in range(processes):
        if os.fork() == 0:
            ctypes.CDLL(None).prctl(1, 15)  # end with the server
            make_server("127.0.0.1", fork_port, wrapped, threaded=True, fd=listener.fileno()).serve_forever()
            os._exit(0)
    while True:
        os.wait()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """The child process running :func:`serve`."""

    def __init__(self, latency_ms: float, cpus: str = "", processes: int = 0):
        self.port, self.fork_port = _free_port(), _free_port()
        self.proc = subprocess.Popen([sys.executable, __file__, "--serve", str(self.port), str(latency_ms), cpus,
                                      str(processes), str(self.fork_port)])
        self.processes = processes
        self._at(self.port)
        self._wait("the S3 server did not start")

    def _at(self, port: int) -> None:
        self.endpoint = f"http://127.0.0.1:{port}"
        self.options = {"key": "bench", "secret": "bench", "endpoint_url": self.endpoint}

    def fork(self) -> None:
        """From now on, read through the forking server (``processes`` > 0; else nothing)."""
        if not self.processes:
            return
        urllib.request.urlopen(self.endpoint + "/__fork__", timeout=10).read()
        self._at(self.fork_port)
        self._wait("the forked S3 server copies did not start")

    def _wait(self, failure: str) -> None:
        for _ in range(200):
            try:
                self.stats()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(failure)

    def cpu_seconds(self) -> float:
        """CPU time the server has used (user + system), its forked processes' included."""
        import psutil

        proc = psutil.Process(self.proc.pid)
        t = proc.cpu_times()
        total = t.user + t.system + t.children_user + t.children_system  # children: those ended
        for child in proc.children():
            try:
                c = child.cpu_times()
                total += c.user + c.system
            except psutil.NoSuchProcess:
                pass  # ended between the two calls: counted in neither (a few ms at most)
        return total

    def stats(self, reset: bool = False) -> dict:
        req = urllib.request.Request(self.endpoint + "/__stats__", method="DELETE" if reset else "GET")
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())

    def close(self) -> None:
        import psutil

        for child in psutil.Process(self.proc.pid).children():
            child.kill()
        self.proc.terminate()
        self.proc.wait(timeout=30)


# ----------------------------------------------------------------------------- the runs


def receive(mib: float, repeats: int, cpus: str) -> None:
    """The reading process's CPU (user, system) per MiB of whole-object reads through
    streamwww's own read path (``Location.read_many``): from the loopback server with each
    S3 client (``STREAMWWW_S3_CLIENT``), and the same bytes from local files (the page cache)."""
    import s3fs

    from streamwww.storage.location import location

    n, batch = 48, 4
    blob = np.random.default_rng(0).bytes(int(mib * 2**20))
    server = Server(0.0, cpus)
    try:
        fs = s3fs.S3FileSystem(**server.options)
        fs.mkdir("bench")
        for i in range(n):
            fs.pipe(f"bench/o{i}", blob)
        with tempfile.TemporaryDirectory(prefix="bench-receive-") as tmp:
            for i in range(n):
                with open(os.path.join(tmp, f"o{i}"), "wb") as out:
                    out.write(blob)
            roots = {"obstore": location("s3://bench", server.options), "s3fs": location("s3://bench", server.options),
                     "local file": location(tmp)}
            for name, root in roots.items():
                os.environ["STREAMWWW_S3_CLIENT"] = "s3fs" if name == "s3fs" else ""
                objects = [root.child(f"o{i}") for i in range(n)]
                root.read_many(objects[:batch])  # connections, first allocations
                for _ in range(repeats):
                    r0, w = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
                    for g in range(0, n, batch):
                        got = root.read_many(objects[g:g + batch])
                        assert all(len(b) == len(blob) for b in got)
                        del got
                    r1, w = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - w
                    user, system, total = r1.ru_utime - r0.ru_utime, r1.ru_stime - r0.ru_stime, n * mib
                    print(f"{name}: {mib:g} MiB objects, CPU per MiB {(user + system) / total * 1e3:.2f} ms "
                          f"(user {user / total * 1e3:.2f}, system {system / total * 1e3:.2f}), "
                          f"wall per MiB {w / total * 1e3:.2f} ms", flush=True)
    finally:
        os.environ.pop("STREAMWWW_S3_CLIENT", None)
        server.close()


def _train(store, ckpt: str, args, budget="auto") -> tuple[float, float, object]:
    """``train``'s wall time, the process's CPU seconds (user + system) during it, the model."""
    import streamwww as sw

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t, t0 = time.perf_counter(), os.times()
        model = sw.train(store, C=args.C, tol=0.0, max_iter=args.epochs, random_state=0, device="cpu",
                         checkpoint_dir=ckpt, prefetch=args.prefetch, memory_budget=budget)
        wall, t1 = time.perf_counter() - t, os.times()
        return wall, (t1.user - t0.user) + (t1.system - t0.system), model


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--serve", nargs=5, metavar=("PORT", "LATENCY_MS", "CPUS", "PROCESSES", "FORK_PORT"),
                   help=argparse.SUPPRESS)
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--features", type=int, default=2000)
    p.add_argument("--nnz", type=int, default=30)
    p.add_argument("--classes", type=int, default=20)
    p.add_argument("--shard-rows", type=int, default=10_000)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--C", type=float, default=0.1)
    p.add_argument("--latency-ms", default="20", help="comma-separated added latencies (0 is always run)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--prefetch", default="auto", help="'auto' (2 local, 6 from S3) or a number of shards")
    p.add_argument("--format", default="zarr", choices=("zarr", "parquet"), help="the store's format")
    p.add_argument("--clients", default="obstore,s3fs",
                   help="S3 read clients to compare (STREAMWWW_S3_CLIENT; obstore is skipped where not installed)")
    p.add_argument("--pin", action="store_true",
                   help="train on CPU 0 only (local and S3 runs alike) and run the server on CPU 1, "
                        "so that the server does not take the training's CPU (as a real object store)")
    p.add_argument("--train-cpus", default=None, metavar="CPUS",
                   help="with --pin: the training's CPUs instead of 0 (e.g. 0,1)")
    p.add_argument("--server-cpus", default=None, metavar="CPUS",
                   help="with --pin: the server's CPUs instead of 1 (e.g. 2-15)")
    p.add_argument("--server-processes", type=int, default=0, metavar="N",
                   help="serve the reads from N forked copies of the server (one listening socket) "
                        "instead of one process's threads: requests answered in parallel")
    p.add_argument("--out", default=None, help="also write the table into this Markdown file")
    p.add_argument("--receive", type=float, default=None, metavar="MIB",
                   help="only measure the reading process's CPU per MiB received: 48 objects of MIB MiB "
                        "read whole, 4 at a time, through obstore and s3fs, and the same bytes from local files")
    args = p.parse_args(argv)
    if args.prefetch != "auto":
        args.prefetch = int(args.prefetch)
    if args.serve:
        serve(int(args.serve[0]), float(args.serve[1]), args.serve[2], int(args.serve[3]), int(args.serve[4]))
        return
    train_cpus, server_cpus = "", ""
    if args.pin:
        if (os.cpu_count() or 1) < 2:
            raise SystemExit("--pin needs two CPUs")
        train_cpus, server_cpus = args.train_cpus or "0", args.server_cpus or "1"
        os.sched_setaffinity(0, _cpu_set(train_cpus))  # before any thread starts: every thread inherits it

    if args.receive:
        receive(args.receive, args.repeats, server_cpus)
        return

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _benchenv import header, replace_section

    import streamwww as sw
    from streamwww.io import convert_libsvm, make_data

    latencies = sorted({0.0, *(float(v) for v in args.latency_ms.split(",") if v.strip())})
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-storage-") as tmp:
        text = os.path.join(tmp, "d.libsvm")
        make_data(text, rows=args.rows, features=args.features, nnz_per_row=args.nnz,
                  classes=args.classes, seed=0)
        store = convert_libsvm(text, os.path.join(tmp, "store"), shard_rows=args.shard_rows,
                               shuffle=True, seed=0, format=args.format)
        os.unlink(text)
        size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(store.path) for f in fs)
        print(f"store: {store.n_rows} rows, {store.n_shards} shards, {size / 2**20:.1f} MiB on disk", flush=True)
        _train(store, os.path.join(tmp, "warm"), args)  # JIT compile and page cache, not timed

        def timed(where, make_store, budget) -> dict:
            walls, cpus, model = [], [], None
            where = f"{where}, memory_budget={budget}"
            for r in range(args.repeats):
                s = make_store()
                wall, cpu, m = _train(s, os.path.join(tmp, f"ck-{len(rows)}-{r}"), args, budget)
                walls.append(wall)
                cpus.append(cpu)
                if model is not None and not np.array_equal(model.coef_, m.coef_):
                    raise AssertionError(f"{where}: repeat {r} gave another model")
                model = m
            return {"where": where, "wall": float(np.median(walls)), "walls": walls, "model": model,
                    "cpu": float(np.median(cpus))}

        for budget in (0, "auto"):
            run = timed("local disk", lambda: sw.open_store(store.path), budget)
            rows.append({**run, "requests": None, "bytes": None, "server_cpu": None})
            print(f"{run['where']}: {run['wall'] / args.epochs * 1e3:.0f} ms/epoch {run['walls']}", flush=True)
        local = rows[0]
        clients = [c.strip() for c in args.clients.split(",") if c.strip()]
        try:
            import obstore  # noqa: F401
        except ImportError:
            clients = [c for c in clients if c != "obstore"]
        for lat, budget in [(lat, b) for lat in latencies for b in (0, "auto")]:
            server = Server(lat, server_cpus, args.server_processes)
            try:
                import s3fs

                fs = s3fs.S3FileSystem(**server.options)
                fs.mkdir("bench")
                fs.put(str(store.path), "bench/store", recursive=True)
                server.fork()
                url = "s3://bench/store"
                for client in clients:  # the same server and objects for each client
                    os.environ["STREAMWWW_S3_CLIENT"] = client
                    server.stats(reset=True)
                    cpu0 = server.cpu_seconds()
                    run = timed(f"S3 ({client}), +{lat:g} ms per request",
                                lambda: sw.open_store(url, storage_options=server.options), budget)
                    counts = server.stats()
                    counts["cpu"] = server.cpu_seconds() - cpu0
                    if not np.array_equal(run["model"].coef_, local["model"].coef_):
                        raise AssertionError(f"{run['where']}: the model differs from the local run's")
                    per = args.repeats * args.epochs
                    rows.append({**run, "requests": counts["requests"] / per, "bytes": counts["bytes"] / per,
                                 "server_cpu": counts["cpu"] / per})
                    print(f"{run['where']}: {run['wall'] / args.epochs * 1e3:.0f} ms/epoch {run['walls']}, "
                          f"{counts['requests'] / per:.0f} requests/epoch", flush=True)
            finally:
                os.environ.pop("STREAMWWW_S3_CLIENT", None)
                server.close()

    base = {b: r["wall"] for r, b in zip(rows[:2], (0, "auto"))}
    title = "Object storage: streamed epochs from S3 (loopback moto server) vs local disk"
    where = ""
    if args.pin:
        where = (f"the training (its loader threads and the S3 client included) on CPU {train_cpus} alone, in "
                 f"the local runs as in the S3 runs, and the server on CPUs {server_cpus}")
    served = ("one process answering requests in its threads, one at a time (Python)" if not args.server_processes else
              f"{args.server_processes} forked copies of one server process, accepting connections on one "
              "shared socket, each answering from its own copy of the uploaded objects: requests answered "
              "in parallel")
    lines = [header(title + (", the server on CPUs of its own" if args.pin else "")),
             f"Store: {args.rows} rows, {args.features} features, {args.nnz} non-zeros per row, "
             f"{args.classes} classes, {args.format} shards of {args.shard_rows} rows ({size / 2**20:.1f} MiB on disk); "
             f"`train(..., tol=0, max_iter={args.epochs}, prefetch={args.prefetch})` with the checkpoint "
             f"directory on local disk; whole `train` wall time / epochs (objective passes and start-up "
             f"included), median of {args.repeats}; requests and bytes as the server counted them, per "
             f"epoch (the first epoch's opening of the store included). Every run gave the bitwise-same model.",
             "`memory_budget=0` reads every shard from the store every time (once per epoch: one model's "
             "objective pass uses the rows the next epoch reads); `auto` keeps the decoded shards in memory after their first read "
             "(this store fits), so only the first epoch reads the store. *vs local disk* compares with "
             "the local run of the same `memory_budget`.",
             f"The server: {served}. *Server CPU* is the CPU time the loopback server used per epoch "
             "(its processes together): " + (
                 f"{where}, so the server took none of the "
                 "training's CPU (as a real object store)." if args.pin else
                 "on this machine it runs on the same cores as the training (a real object store does not)."),
             "*Training CPU*: the training process's user + system CPU per epoch (all its threads). "
             "*obstore* / *s3fs*: the client of the S3 reads (streamwww.storage.obstore; `STREAMWWW_S3_CLIENT=s3fs` "
             "for the second), both runs on the same server in the same loop.",
             "", "| store | ms per epoch | vs local disk | training CPU ms per epoch | requests per epoch "
             "| MiB per epoch | server CPU ms per epoch |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        req = "" if r["requests"] is None else f"{r['requests']:.0f}"
        mib = "" if r["bytes"] is None else f"{r['bytes'] / 2**20:.1f}"
        same = base[0 if r["where"].endswith("=0") else "auto"]
        cpu = "" if r["server_cpu"] is None else f"{r['server_cpu'] * 1e3:.0f}"
        lines.append(f"| {r['where']} | {r['wall'] / args.epochs * 1e3:.0f} | {r['wall'] / same:.2f} | "
                     f"{r['cpu'] / args.epochs * 1e3:.0f} | {req} | {mib} | {cpu} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        marker = "bench-storage" if args.prefetch == "auto" else f"bench-storage-prefetch{args.prefetch}"
        marker += "" if args.format == "zarr" else f"-{args.format}"
        marker += "-pinned" if args.pin else ""
        marker += f"-{args.server_processes}proc" if args.server_processes else ""
        marker += f"-{args.shard_rows // 1000}k" if args.shard_rows != 10_000 else ""
        replace_section(args.out, marker, text)


if __name__ == "__main__":
    main()
