"""Example 01 -- train on a store larger than the memory you give the run.

Read this one first.  It shows the whole out-of-core path:

1. generate a LIBSVM file (or take yours) and convert it into a shard store
   of small shards (``convert_libsvm``, the same as ``streamwww convert``);
2. train on the store with ``streamwww.train(..., memory_budget=0)``: shards
   are read from disk a few at a time, every epoch, and each row's dual
   variables (``beta``) live on disk too (with the default ``memory_budget``,
   a store that fits in half the free memory is kept after its first read);
3. measure the peak memory (RSS) of that training in a child process and
   compare it with the store's size once decompressed.

What is bounded is the memory *above* the process's fixed overhead (Python,
NumPy, Numba's compiled kernels, the loader threads): about
``(prefetch + mix_shards) x (shard + its beta) + W`` (docs/TRAINING.md,
"Data path and memory").  It does not grow with the number of rows, so a
store many times larger than that trains in the same memory.

Run:  python examples/01_out_of_core.py [LIBSVM_FILE | STORE]
"""
# smoke-test: bounded: yes

from __future__ import annotations

import multiprocessing as mp
import sys
import tempfile
import time
import warnings

import numpy as np

import streamwww as sw
from streamwww.io import write_store
from _common import as_store, example_data, mib, user_input, workdir

SHARD_MB = 1.0        # small shards: a small working set (use ~128 MiB on real data)
PREFETCH = 2          # shards loaded ahead while a group trains (the default)
MIX_SHARDS = 2        # shards trained together as one block (the default)
# allowance for memory that does not grow with the data: 8 MiB of Python objects, Dask's
# bookkeeping and thread buffers, and 4 MiB that glibc may keep free at the top of its heap
# (streamwww's trim threshold, streamwww/_memory.py). With 8 MiB alone the training added
# 9.7-14.9 MiB against a 14.6 MiB budget from run to run, over it now and then with the
# thresholds of before 2026-11-27 (14.7 MiB) as with today's (14.9 MiB)
SLACK_MIB = 8 + 4
ROWS = 400_000        # generated rows: 64 MiB of shards once decompressed


class PeakRSS:
    """Peak resident memory of this process from ``reset()`` on.

    On Linux the kernel keeps the exact high-water mark (``VmHWM`` in
    /proc/self/status) and lets a process reset it (``clear_refs``).  Elsewhere
    a thread samples the RSS every 5 ms.  (``resource.getrusage().ru_maxrss``
    is not used: in a process started by fork + exec it also counts the
    parent's memory at the fork.)
    """

    def __init__(self):
        import threading

        import psutil

        self.proc = psutil.Process()
        self.sampled = 0
        threading.Thread(target=self._sample, daemon=True).start()

    def _sample(self):
        while True:
            self.sampled = max(self.sampled, self.proc.memory_info().rss)
            time.sleep(0.005)

    def rss(self) -> int:
        return self.proc.memory_info().rss

    def reset(self) -> None:
        self.sampled = self.rss()
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # 5: reset the peak RSS (Linux >= 4.0)
        except OSError:
            pass

    def peak(self) -> int:
        try:
            with open("/proc/self/status") as f:
                hwm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
        except (OSError, StopIteration):
            hwm = 0
        return max(hwm, self.sampled)


def measure(store_path: str, conn) -> None:
    """Runs in a fresh child process: train on the store, report memory figures."""
    meter = PeakRSS()
    # Pay the fixed overhead first -- import and load the compiled kernels --
    # with a small streamed run of the same settings, so that what is measured
    # next is what the data costs. It takes the same code path as the measured
    # run: with 12,000 rows or more an epoch is long enough for the objectives to
    # be computed late on the second core (docs/TRAINING.md), whose kernels are
    # loaded (or, on a fresh install, compiled: 10-20 MiB) when first used.
    store = sw.open_store(store_path)
    n = 1
    while n < store.n_shards and sum(store.shard_rows[:n]) < 12_000:
        n += 1
    X, y = store.read_shards(range(n))  # y: class indices into store.classes
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the small run stops after 3 epochs on purpose
        small = write_store(f"{tmp}/small.zarr", X, np.asarray(store.classes)[y],
                            shard_rows=max(1, X.shape[0] // 4), classes=store.classes)
        sw.train(small, C=0.01, max_iter=3, random_state=0, prefetch=PREFETCH, mix_shards=MIX_SHARDS,
                 memory_budget=0)
    del X, y, small
    meter.reset()
    base = meter.rss()

    rss_per_shard = []  # RSS after each shard group of each epoch: flat if memory is bounded

    def progress(epoch, shards_done, n_shards, rows):
        rss_per_shard.append((epoch, shards_done, meter.rss()))

    t0 = time.perf_counter()
    # memory_budget=0: stream every epoch from disk. By default ("auto") a store that fits in
    # half the free memory is kept decoded after its first read, and later epochs run from RAM.
    model = sw.train(store, C=0.01, tol=1e-2, max_iter=50, random_state=0, prefetch=PREFETCH,
                     mix_shards=MIX_SHARDS, progress=progress, memory_budget=0)
    seconds = time.perf_counter() - t0
    peak = meter.peak()
    conn.send({"base": base, "peak": peak, "seconds": seconds, "epochs": model.n_iter_,
               "rel_gap": model.history_[-1]["rel_gap"], "W_bytes": model.coef_.nbytes + model.intercept_.nbytes,
               "rss_per_shard": rss_per_shard,
               "train_accuracy": model.score(store)})
    conn.close()


def main() -> int:
    with workdir("01_out_of_core") as work:
        src = user_input()
        if src is None:
            # ROWS rows x 20 values of 1,000 features, 10 classes (8 bytes a value)
            print(f"generating {ROWS:,} rows ...", flush=True)
            src = example_data(work / "train.libsvm", rows=ROWS)
        store = as_store(src, work / "train.zarr", shard_mb=SHARD_MB)
        shard_bytes = [store.shard_nbytes(i) for i in range(store.n_shards)]
        k = len(store.classes)
        beta_bytes = 8 * max(store.shard_rows) * (k - 1)  # float64 per row and wrong class
        store_bytes = sum(shard_bytes)
        print(f"store: {store.n_rows:,} rows in {store.n_shards} shards of up to {mib(max(shard_bytes))}; "
              f"{mib(store_bytes)} decompressed, and {mib(8 * store.n_rows * (k - 1))} of beta "
              f"(kept on disk while training)",
              flush=True)

        # Train in a fresh process so that its peak RSS is the training's own.
        ctx = mp.get_context("spawn")
        here, there = ctx.Pipe(duplex=False)
        child = ctx.Process(target=measure, args=(str(store.path), there))
        child.start()
        there.close()
        try:
            r = here.recv()
        except EOFError:  # the child died; its traceback is on stderr above
            child.join()
            sys.exit(f"the training process failed (exit code {child.exitcode})")
        child.join()

        # The documented working set (docs/TRAINING.md, "Data path and memory"): the group
        # being trained and the shards loaded ahead, each with its beta, two beta writes in
        # flight, and W.  The budget adds a fixed allowance for what does not depend on the
        # data (Dask's task bookkeeping, Python objects, thread buffers).
        bound = (PREFETCH + MIX_SHARDS) * (max(shard_bytes) + beta_bytes) + 2 * beta_bytes + r["W_bytes"]
        budget = bound + SLACK_MIB * 2**20
        extra = r["peak"] - r["base"]
        # A run that stops is certified one pass late: the duality gap of epoch e is summed
        # during pass e + 1, whose steps are then undone (docs/TRAINING.md), so the last
        # pass the process ran can be one more than the model's epochs.
        passes = sorted({e for e, _, _ in r["rss_per_shard"]})
        print(f"trained {r['epochs']} epochs ({passes[-1]} passes over the data) in {r['seconds']:.1f} s "
              f"(relative duality gap {r['rel_gap']:.1e}), training accuracy {r['train_accuracy']:.3f}")
        print(f"fixed overhead before training (Python, Numba kernels, loader threads): {mib(r['base'])}")
        print(f"peak RSS of the training process: {mib(r['peak'])}; the training added {mib(extra)}")
        print(f"budget: {PREFETCH + MIX_SHARDS} x (shard + beta) + 2 beta + W = {mib(bound)}, "
              f"+ {SLACK_MIB} MiB not tied to the data = {mib(budget)}")
        print(f"store decompressed: {mib(store_bytes)} = {store_bytes / budget:.1f} x the budget, "
              f"{store_bytes / max(extra, 1):.1f} x what the training added")
        for e in (passes[0], passes[-1]):
            rss = [m for ep, _, m in r["rss_per_shard"] if ep == e]
            what = f"pass {e}" if e <= r["epochs"] else f"pass {e} (it certified epoch {e - 1}; its steps were undone)"
            print(f"RSS during {what}: {mib(min(rss))} .. {mib(max(rss))} over {len(rss)} shard groups")
        bounded = extra <= budget
        print(f"bounded: {'yes' if bounded else 'NO'} "
              f"(training added {mib(extra)}, budget {mib(budget)}, store {mib(store_bytes)})")
        return 0 if bounded else 1


if __name__ == "__main__":
    sys.exit(main())
