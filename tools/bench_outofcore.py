"""Out-of-core training benchmark (issue 4): streamed vs in-memory, peak memory, throughput.

    python tools/bench_outofcore.py [--rows 400000] [--scale 10] [--shard-rows 50000] [--rounds 3]
                                    [--big-gib 0] [--workdir DIR] [--out docs/benchmarks.md] [--quick]

(a) Epoch time of ``train(store)`` vs ``train((X, y))`` on the same rows, CPU,
    same seed, no objective evaluation until the last epoch: the median over
    epochs 2.. of the time between epoch ends, and the mean training-pass time
    over all epochs (``history_['time']``); ``--rounds`` repetitions with the
    modes interleaved, medians reported. Streamed runs with and without
    checkpoints must give the bitwise-same model.
(b) Peak RSS of a training process on two generated stores ``--scale`` times
    apart with the same shard size, each with the default settings and with
    ``STREAMWWW_RELEASE_MEMORY=0`` (glibc's dynamic malloc thresholds), against the issue's bound
    ``(prefetch + 2) x shard bytes + W + fixed overhead`` (bound A) and the
    same with each shard's ``beta`` counted (bound B); fixed overhead: the RSS
    of the same process after imports, JIT loading and a tiny streamed run,
    before training.
(c) Rows/s and MB/s (uncompressed shard bytes per second of training pass).
(d) ``--big-gib G``: also generate, convert and train (2 epochs) a store whose
    shards take more than G GiB in memory (use more than half of the RAM).

Each training run happens in a fresh subprocess so that peak RSS is its own.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from statistics import median

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _benchenv import header, replace_section  # noqa: E402

CHILD = r'''
import json, os, sys, time, warnings, resource, threading
warnings.simplefilter("ignore")
import numpy as np, psutil
import streamwww as sw
from streamwww.io import open_store
args = json.loads(sys.argv[1])
proc = psutil.Process()
peak = [0]
def watch():
    while True:
        peak[0] = max(peak[0], proc.memory_info().rss)
        time.sleep(0.02)
threading.Thread(target=watch, daemon=True).start()
store = open_store(args["store"])
# load compiled kernels and libraries first: that is the fixed overhead
sw.train((np.eye(4, 3, dtype=np.float32), np.array([0, 1, 2, 0])), C=1.0, max_iter=2, random_state=0)
import scipy.sparse as sp, tempfile, shutil
X, y = store.read_shard(0)
sw.train((X[:50], y[:50]), C=1.0, max_iter=2, random_state=0)
if args["mode"] == "stream":  # the streamed path's libraries too (Dask cluster, Zarr writes)
    warm = tempfile.mkdtemp()
    from streamwww.io import write_store
    write_store(os.path.join(warm, "s.zarr"), X[:100], y[:100], shard_rows=50)
    sw.train(os.path.join(warm, "s.zarr"), C=1.0, max_iter=2, random_state=0,
             checkpoint_dir=os.path.join(warm, "ck"))
    shutil.rmtree(warm)
del X, y
time.sleep(0.1)
base = proc.memory_info().rss
peak[0] = base
ends = []  # time of each epoch's last group: per-epoch times without the first epoch's start-up
def progress(epoch, done, n_shards, rows):
    if done == n_shards:
        ends.append(time.perf_counter())
kw = dict(C=args["C"], random_state=0, max_iter=args["epochs"], tol=0.0, eval_every=args["eval_every"],
          prefetch=args["prefetch"], checkpoint_dir=args.get("ckpt"), progress=progress)
if args["mode"] == "memory":
    parts = [store.read_shard(i) for i in range(store.n_shards)]
    X = sp.vstack([p[0] for p in parts]).tocsr() if sp.issparse(parts[0][0]) else np.vstack([p[0] for p in parts])
    y = np.concatenate([p[1] for p in parts]); del parts
    kw.pop("checkpoint_dir"); kw.pop("prefetch")
    t0 = time.perf_counter(); m = sw.train((X, y), **kw); wall = time.perf_counter() - t0
else:  # memory_budget=0: every epoch streamed from the store (the default keeps a store that fits)
    kw["memory_budget"] = args.get("memory_budget", 0)
    t0 = time.perf_counter(); m = sw.train(args["store"], **kw); wall = time.perf_counter() - t0
# eval_every is large, so history has the last epoch only: its cumulative
# training-pass time divided by the epochs run is the mean epoch time, first
# epoch included. Epochs 2.. are timed between consecutive epoch ends (with a
# checkpoint directory, they include any wait for the previous epoch's commit,
# which otherwise runs in the background).
times = np.diff(ends).tolist()
shard_bytes = [store.shard_nbytes(i) for i in range(store.n_shards)]
print(json.dumps({"epoch_times": times, "mean_epoch": m.history_[-1]["time"] / m.n_iter_, "wall": wall, "base_rss": base, "peak_rss": peak[0],
                  "coef_hash": __import__("hashlib").sha256(m.coef_.tobytes()).hexdigest(), "n_rows": store.n_rows,
                  "max_shard_bytes": max(shard_bytes), "total_bytes": sum(shard_bytes),
                  "W_bytes": int(m.coef_.nbytes + m.intercept_.nbytes), "n_shards": store.n_shards,
                  "max_beta_bytes": int(8 * max(store.shard_rows) * (len(m.classes_) - 1))}))
'''


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def make_store(work: str, name: str, rows: int, features: int, nnz: int, classes: int, shard_rows: int) -> str:
    store = os.path.join(work, name + ".zarr")
    if os.path.exists(os.path.join(store, "streamwww.json")):
        return store
    text = os.path.join(work, name + ".libsvm")
    sh([sys.executable, "-m", "streamwww.cli", "-q", "make-data", text, "--rows", str(rows), "--features",
        str(features), "--nnz-per-row", str(nnz), "--classes", str(classes), "--seed", "0", "--overwrite"])
    sh([sys.executable, "-m", "streamwww.cli", "-q", "convert", text, store, "--shard-rows", str(shard_rows),
        "--shuffle", "--seed", "0", "--overwrite"])
    os.unlink(text)
    return store


def run_child(store: str, mode: str, epochs: int, prefetch: int = 2, eval_every: int = 1000,
              ckpt: str | None = None, C: float = 0.1, env: dict | None = None) -> dict:
    args = {"store": store, "mode": mode, "epochs": epochs, "prefetch": prefetch, "eval_every": eval_every,
            "ckpt": ckpt, "C": C}
    out = sh([sys.executable, "-c", CHILD, json.dumps(args)],
             env={**os.environ, **(env or {})}).stdout.strip().splitlines()[-1]
    return json.loads(out)


def convergence(data_dir: str, work: str, names=("letter", "sector"), shards: int = 8, max_iter: int = 300) -> str:
    """(e) Epochs to gap <= 0.0009 gap_1: in memory vs an ``shards``-shard store, shard by
    shard (``mix_shards=1``) and in groups of 2 (the default)."""
    import warnings

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _benchenv import BenchContext, load_libsvm

    import streamwww as sw
    from streamwww.io import write_store

    ctx = BenchContext(quick=False, data_dir=data_dir, workdir=work, plots_dir=work, doc=os.path.join(work, "x.md"))
    rows = []
    for name in names:
        X, y, _, _ = load_libsvm(ctx, name)
        store = os.path.join(work, f"conv-{name}-{shards}.zarr")
        write_store(store, X, y, shard_rows=-(-X.shape[0] // shards), overwrite=True)
        kw = dict(C=1.0, tol=0.0, gap_decay=0.0009, max_iter=max_iter, random_state=0, fit_intercept=False)
        cells = []
        for label, data, extra in (("in memory", (X, y), {}), ("store, mix_shards=1", store, {"mix_shards": 1}),
                                   ("store, mix_shards=2", store, {"mix_shards": 2})):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                m = sw.train(data, **kw, **extra)
            h = m.history_
            reached = h[-1]["gap"] <= 0.0009 * h[0]["gap"]
            cells.append(f"{m.n_iter_} ({h[-1]['time']:.1f} s)" if reached else
                         f"> {m.n_iter_} (gap {h[-1]['gap'] / h[0]['gap']:.4f}·gap₁, {h[-1]['time']:.1f} s)")
        rows.append(f"| {name} | {X.shape[0]:,} | " + " | ".join(cells) + " |")
        print(rows[-1], flush=True)
    return (f"### (e) Convergence in epochs: one shuffled block vs {shards} fixed shards\n\n"
            "Epochs (and training-pass time) until gap ≤ 0.0009·gap₁, C = 1, no intercept, seed 0; the "
            f"store holds the same rows in {shards} shards. Training shard by shard (`mix_shards=1`) "
            "visits the rows of one fixed shard together every epoch; `mix_shards=2` (the default) "
            "trains pairs of shards as one block, rows interleaved, pairs cut anew every epoch.\n\n"
            "| data | n | in memory | store, shard by shard | store, pairs (default) |\n|---|---|---|---|---|\n"
            + "\n".join(rows) + "\n")


def main(argv=None) -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=400_000)
    p.add_argument("--scale", type=int, default=10)
    p.add_argument("--features", type=int, default=1000)
    p.add_argument("--nnz-per-row", type=int, default=30)
    p.add_argument("--classes", type=int, default=20)
    p.add_argument("--shard-rows", type=int, default=50_000)
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--rounds", type=int, default=3, help="interleaved repetitions of part (a)")
    p.add_argument("--big-gib", type=float, default=0.0)
    p.add_argument("--workdir")
    p.add_argument("--out", default=os.path.join(here, "..", "docs", "benchmarks.md"))
    p.add_argument("--quick", action="store_true")
    p.add_argument("--data-dir", default=os.path.join(here, "..", "..", "shared", "data", "libsvm"))
    p.add_argument("--convergence", default="letter,sector",
                   help="real data sets for part (e) ('' to skip)")
    args = p.parse_args(argv)
    if args.quick:
        args.rows, args.scale, args.shard_rows, args.epochs, args.features = 4000, 2, 1000, 3, 100
        args.rounds = 1
    work = args.workdir or tempfile.mkdtemp(prefix="streamwww-bench-")
    os.makedirs(work, exist_ok=True)
    lines = []
    try:
        small = make_store(work, f"small{args.rows}", args.rows, args.features, args.nnz_per_row, args.classes,
                           args.shard_rows)
        # (a) streamed vs in memory, same data and seed; rounds interleaved so that
        # machine noise hits every mode alike
        modes = (("in memory", "memory", None), ("streamed (prefetch 2)", "stream", None),
                 ("streamed + checkpoint each epoch", "stream", os.path.join(work, "ck-small")))
        runs = {name: [] for name, _, _ in modes}
        for _ in range(args.rounds):
            for name, mode, ckpt in modes:
                runs[name].append(run_child(small, mode, args.epochs, ckpt=ckpt))
                if ckpt:
                    shutil.rmtree(ckpt, ignore_errors=True)
        st = runs["streamed (prefetch 2)"][0]
        same = len({r["coef_hash"] for name in list(runs)[1:] for r in runs[name]}) == 1
        steady = {name: median([median(r["epoch_times"]) for r in rs]) for name, rs in runs.items()}
        means = {name: median([r["mean_epoch"] for r in rs]) for name, rs in runs.items()}
        tm, mm = steady["in memory"], means["in memory"]
        mb = st["total_bytes"] / 2**20
        lines.append(f"### (a) Streamed vs in-memory epoch, {st['n_rows']:,} rows in {st['n_shards']} shards "
                     f"({mb:.0f} MiB in memory), k = {args.classes}, {args.nnz_per_row} non-zeros per row\n")
        lines.append(f"{args.rounds} rounds, each mode in a fresh process per round, modes interleaved; "
                     f"{args.epochs} epochs per run, no objective evaluation until the last. *Epoch* is the "
                     "median over epochs 2.. of the time between consecutive epoch ends (with checkpoints, "
                     "each epoch-end commit runs in the background while the next epoch trains; the next "
                     "checkpoint waits for it, so commit time not hidden shows here); *mean incl. first* is "
                     "the training-pass time over "
                     "all epochs, the first (which starts with nothing loaded) included. Each is the median "
                     "over the rounds.\n")
        lines.append("| run | epoch | ratio to in-memory | mean incl. first | ratio | rows/s | MB/s |\n"
                     "|---|---|---|---|---|---|---|")
        for name in runs:
            t, m = steady[name], means[name]
            lines.append(f"| {name} | {t:.3f} s | {t / tm:.2f} | {m:.3f} s | {m / mm:.2f} | "
                         f"{st['n_rows'] / t:,.0f} | {mb * 1.048576 / t:.0f} |")
        per_round = ", ".join(f"{median(r['epoch_times']) / median(q['epoch_times']):.2f}"
                              for r, q in zip(runs["streamed (prefetch 2)"], runs["in memory"]))
        lines.append(f"\nStreamed/in-memory epoch ratio per round: {per_round}. All streamed runs, with and "
                     f"without checkpoints, give the bitwise-same model: {'yes' if same else 'NO'}. (The "
                     "in-memory run is one shard, so its row orders differ by design; a one-shard store "
                     "equals it bitwise, see tests/test_outofcore.py.)\n")
        # (b) peak RSS, two stores args.scale apart
        big = make_store(work, f"big{args.rows * args.scale}", args.rows * args.scale, args.features,
                         args.nnz_per_row, args.classes, args.shard_rows)
        # default (fixed glibc thresholds), then STREAMWWW_RELEASE_MEMORY=0 (glibc's dynamic ones)
        modes = (("default", {}), ("STREAMWWW_RELEASE_MEMORY=0", {"STREAMWWW_RELEASE_MEMORY": "0"}))
        b_runs = {}
        for label, env in modes:
            for name, path in (("small", small), ("large", big)):
                ck = os.path.join(work, "ck-b")
                shutil.rmtree(ck, ignore_errors=True)
                b_runs[label, name] = run_child(path, "stream", 2, ckpt=ck, env=env)
                shutil.rmtree(ck, ignore_errors=True)
        lines.append(f"### (b) Peak RSS, streamed with checkpoints, stores {args.scale}x apart, same shard size\n")
        lines.append("Fixed overhead: the process's RSS after imports and a tiny streamed training run (Dask "
                     "cluster, Zarr, compiled kernels loaded), before this run. Bound A is the issue's "
                     "`(prefetch + 2) × shard bytes + W`; bound B counts each shard's `beta` (float64, "
                     "rows × (k − 1)) with it, plus the 2 `beta` writes allowed in flight: "
                     "`(prefetch + 2) × (shard + beta) + 2 × beta + W`. Each store is trained with the "
                     "default settings (fixed glibc malloc thresholds: freed shard buffers go back to the "
                     "OS) and with `STREAMWWW_RELEASE_MEMORY=0` (glibc's dynamic thresholds); rows/s is the "
                     "second epoch, end to end, the epoch-end commit in the background.\n")
        lines.append("| allocator | store | rows | shard bytes (max) | beta bytes (max) | data bytes | "
                     "peak RSS above fixed | bound A | bound B | fixed overhead | rows/s |\n"
                     "|---|---|---|---|---|---|---|---|---|---|---|")
        for (label, name), r in b_runs.items():
            bound = 4 * r["max_shard_bytes"] + r["W_bytes"]
            bound_b = 4 * (r["max_shard_bytes"] + r["max_beta_bytes"]) + 2 * r["max_beta_bytes"] + r["W_bytes"]
            lines.append(f"| {label} | {name} | {r['n_rows']:,} | {r['max_shard_bytes'] / 2**20:.1f} MiB | "
                         f"{r['max_beta_bytes'] / 2**20:.1f} MiB | "
                         f"{r['total_bytes'] / 2**20:.0f} MiB | {(r['peak_rss'] - r['base_rss']) / 2**20:.0f} MiB | "
                         f"{bound / 2**20:.0f} MiB | {bound_b / 2**20:.0f} MiB | {r['base_rss'] / 2**20:.0f} MiB | "
                         f"{r['n_rows'] / median(r['epoch_times']):,.0f} |")
        ratios = ", ".join(f"{label}: {b_runs[label, 'large']['peak_rss'] / b_runs[label, 'small']['peak_rss']:.2f}"
                           for label, _ in modes)
        lines.append(f"\nPeak RSS ratio large/small (goal ≤ 1.2): {ratios}.\n")
        if args.big_gib > 0:
            rows = int(args.big_gib * 2**30 / (args.nnz_per_row * 8 + 12)) + 1
            huge = make_store(work, f"huge{rows}", rows, args.features, args.nnz_per_row, args.classes,
                              args.shard_rows * 4)
            rh = run_child(huge, "stream", 2, ckpt=os.path.join(work, "ck-huge"))
            shutil.rmtree(os.path.join(work, "ck-huge"), ignore_errors=True)
            lines.append(f"### (d) A store larger than half the RAM\n\n{rh['n_rows']:,} rows, "
                         f"{rh['total_bytes'] / 2**30:.1f} GiB of shards in memory; 2 epochs streamed with checkpoints: "
                         f"peak RSS {rh['peak_rss'] / 2**30:.2f} GiB, second epoch (end to end, commit in the background) "
                         f"{median(rh['epoch_times']):.0f} s, "
                         f"{rh['n_rows'] / median(rh['epoch_times']):,.0f} rows/s.\n")
        if args.convergence and not args.quick:
            lines.append(convergence(args.data_dir, work, tuple(args.convergence.split(","))))
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    text = header("Out-of-core training (issue 4)") + "\n" + "\n".join(lines)
    if args.quick:
        print(text)
    else:
        replace_section(args.out, "bench-outofcore", text)
        print(text)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
