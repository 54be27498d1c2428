"""Cost of content checksums on shard reads and writes (docs/FORMAT.md, Integrity).

Writes the same generated rows as a store with whatever streamwww is first on
``sys.path`` and times ``read_shard`` of every shard (best and median of
``--repeat`` rounds, page cache warm: the cost measured is the CPU's, not the
disk's). Run it once with the code before checksums (format version 1) and once
with it, e.g.::

    git worktree add /tmp/v1 4a462c6
    PYTHONPATH=/tmp/v1 python tools/bench_integrity.py --out /tmp/b1
    python tools/bench_integrity.py --out /tmp/b2

and compare the two JSON lines it prints.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import time

import numpy as np
import scipy.sparse as sp


def _data(layout: str, rows: int, features: int, nnz_per_row: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 10, rows)
    if layout == "dense":
        return rng.normal(size=(rows, features)).astype(np.float32), y
    cols = np.sort(rng.integers(0, features, size=(rows, nnz_per_row)), axis=1)
    indptr = np.arange(rows + 1, dtype=np.int64) * nnz_per_row
    X = sp.csr_matrix((rng.normal(size=rows * nnz_per_row).astype(np.float32), cols.ravel(), indptr),
                      shape=(rows, features))
    X.sum_duplicates()
    return X, y


def main() -> None:
    import streamwww
    from streamwww.io import open_store, write_store

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="scratch directory (replaced)")
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--rows", type=int, default=400_000)
    p.add_argument("--shard-mb", type=float, default=32.0)
    args = p.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    results = {"streamwww": streamwww.__file__, "python": platform.python_version(),
               "machine": platform.processor() or platform.machine()}
    for fmt, layout, features, nnz in (("zarr", "sparse", 100_000, 30), ("zarr", "dense", 100, 0),
                                       ("parquet", "sparse", 100_000, 30)):
        X, y = _data(layout, args.rows if layout == "sparse" else args.rows // 4, features, nnz)
        path = f"{args.out}/{fmt}-{layout}"
        t0 = time.perf_counter()
        store = write_store(path, X, y, shard_mb=args.shard_mb, format=fmt, layout=layout)
        write_s = time.perf_counter() - t0
        store = open_store(path)
        mib = sum(store.shard_nbytes(i) for i in range(store.n_shards)) / 2**20
        rounds = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            for i in range(store.n_shards):
                store.read_shard(i)
            rounds.append(time.perf_counter() - t0)
        results[f"{fmt}-{layout}"] = {
            "format_version": store.metadata["format_version"], "shards": store.n_shards,
            "MiB_read": round(mib, 1), "write_s": round(write_s, 3),
            "read_best_s": round(min(rounds), 4), "read_median_s": round(statistics.median(rounds), 4),
            "read_MiB_per_s_best": round(mib / min(rounds), 1)}
    print(json.dumps(results))


if __name__ == "__main__":
    main()
