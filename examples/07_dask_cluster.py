"""Example 07 -- train a store on a Dask cluster, and compare with one process.

``streamwww.train(store, client=client)`` trains on a ``dask.distributed``
cluster: the shards are split into ``K`` partitions (``partitions=``, whole
shards); each round, a task per partition runs exact passes over its rows on a
worker, and the driver combines them with an exact line search and certifies the
model by its duality gap.  Workers read the store and write ``beta`` under the same
path or URL (on a real cluster: a shared file system or an object store); a
checkpoint is committed after every round (``resume(dir, client=...)``).  The
model does not depend on which workers ran what: the same ``K`` gives the same
model bitwise, and ``K = 1`` with ``eval_every=1`` is the one-process model.

This script starts a ``LocalCluster`` of two single-threaded worker processes
(on a real cluster: ``Client("tcp://scheduler:8786")``) and trains the same
store in this process and on the cluster, with the defaults (on two workers
``K = 1``: each round's sweep of ``W`` runs beside its training) and with
``partitions=1, eval_every=1``; docs/DISTRIBUTED.md has the rest.

Run:  python examples/07_dask_cluster.py [TRAIN [TEST]]   (LIBSVM files or stores)
"""
# smoke-test: cluster matches one process: yes

from __future__ import annotations

import sys
import time

import numpy as np
from distributed import Client, LocalCluster

import streamwww as sw
from streamwww.io import convert_libsvm, open_store
from _common import as_store, example_data, is_store, user_input, workdir

C, TOL, SEED = 0.1, 1e-3, 0


def main() -> int:
    with workdir("07_dask_cluster") as work:
        src, test_src = user_input(1), user_input(2)
        if src is None:
            lines = example_data(work / "all.libsvm", rows=12_000).read_bytes().splitlines(keepends=True)
            (work / "train.libsvm").write_bytes(b"".join(lines[:9000]))
            (work / "test.libsvm").write_bytes(b"".join(lines[9000:]))
            src, test_src = work / "train.libsvm", work / "test.libsvm"
        store = as_store(src, work / "train.zarr", shard_rows=1500)
        test = store if test_src is None else open_store(test_src) if is_store(test_src) else \
            convert_libsvm(test_src, work / "test.zarr", like=store.path, overwrite=True)
        print(f"store: {store.n_rows:,} rows, {len(store.classes)} classes, {store.n_shards} shards")

        t0 = time.perf_counter()
        one = sw.train(store, C=C, tol=TOL, random_state=SEED)  # this process (compiles once)
        print(f"one process: {one.n_iter_} epochs, test accuracy {one.score(test):.4f}, "
              f"{time.perf_counter() - t0:.1f} s")
        seq = sw.train(store, C=C, tol=TOL, random_state=SEED, eval_every=1)

        with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster, \
                Client(cluster) as client:
            t0 = time.perf_counter()
            dist = sw.train(store, C=C, tol=TOL, client=client, checkpoint_dir=work / "ckpt",
                            random_state=SEED)
            print(f"cluster, 2 workers: {dist.n_iter_} rounds, test accuracy {dist.score(test):.4f}, "
                  f"{time.perf_counter() - t0:.1f} s, a checkpoint after every round")
            k1 = sw.train(store, C=C, tol=TOL, client=client, partitions=1, eval_every=1,
                          checkpoint_dir=work / "ckpt-k1", random_state=SEED)

        close = abs(dist.score(test) - one.score(test)) <= 0.01
        same = np.array_equal(k1.coef_, seq.coef_) and np.array_equal(k1.intercept_, seq.intercept_)
        print(f"test accuracy within a point of one process's: {'yes' if close else 'no'}")
        print(f"partitions=1, eval_every=1: bitwise the one-process model: {'yes' if same else 'no'}")
        print(f"cluster matches one process: {'yes' if close and same else 'no'}")
        return 0 if close and same else 1


if __name__ == "__main__":
    sys.exit(main())
