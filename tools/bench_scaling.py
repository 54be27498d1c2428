"""Section ``scaling`` of ``tools/bench.py`` (issue 6.4): out-of-core scaling.

What it measures
----------------
Rows/s, MB/s and peak RSS of training against the size of the data, in memory
and streamed from a shard store, on generated stores from about 100 MB to 3 GB of
shard bytes (full run; a few thousand rows with ``--quick``).

How
---
- The stores are generated and converted with ``tools/bench_outofcore.py``'s
  ``make_store`` (``streamwww make-data``: k = 20 classes, d = 1000 features,
  30 non-zeros per row; ``streamwww convert --shuffle`` into Zarr shards of 50,000
  rows, the same shard size for every store), in ``ctx.workdir`` and kept there:
  a second run reuses them.  Generation time is reported but is not part of any
  throughput.
- Each training run is ``bench_outofcore.run_child``: a fresh process (so that the
  peak RSS is its own) trains C = 0.1 for 2 epochs with ``train(store)``
  ("stream": Dask prefetch of 2 shards, ``beta`` kept on disk in a temporary
  folder) or with ``train((X, y))`` on all shards read and stacked first
  ("memory").  Epoch time is the training pass only (objective evaluation
  excluded, as in ``history_['time']``), averaged over the 2 epochs.
- MB = 10^6 bytes of shards as they are in memory (CSR float32 values, int32
  indices, row pointers), the same count for both modes; MB/s = those bytes
  divided by the epoch time.  Peak RSS is sampled every 20 ms by the child; the
  fixed overhead is the child's RSS after imports and JIT loading, before it
  reads the data.
- The in-memory mode holds the shards plus their stacked copy while stacking and
  ``beta`` (n x (k - 1) float64) while training; it runs only where that, plus
  1 GiB, takes at most half of the RAM available when the size comes up.
"""

from __future__ import annotations

import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_outofcore import make_store, run_child  # noqa: E402

# Shape of the generated data: bench_outofcore's defaults.
FEATURES, NNZ, CLASSES, SHARD_ROWS = 1000, 30, 20, 50_000
# 248 bytes per row in memory (30 x (4 + 4) + 8): about 100 MB, 300 MB, 1 GB and 3 GB.
FULL_ROWS = (400_000, 1_200_000, 4_000_000, 12_000_000)
QUICK_ROWS, QUICK_FEATURES, QUICK_SHARD_ROWS = (2_000, 8_000), 100, 1_000
EPOCHS = 2
C = 0.1
MB = 1e6


def dir_bytes(path: str) -> int:
    """Total size of the files under ``path``."""
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def fmt_mb(nbytes: float) -> str:
    """Bytes as MB (10^6), one decimal below 10 MB."""
    mb = nbytes / MB
    return f"{mb:.1f} MB" if mb < 10 else f"{mb:,.0f} MB"


def memory_check(data_bytes: int, n_rows: int, n_classes: int) -> str | None:
    """Why the in-memory run is skipped, or None if it fits comfortably.

    Parameters
    ----------
    data_bytes : int
        Shard bytes in memory.
    n_rows, n_classes : int

    Returns
    -------
    str or None
    """
    import psutil

    need = 2 * data_bytes + n_rows * (n_classes - 1) * 8 + 2**30
    avail = psutil.virtual_memory().available
    if need > avail / 2:
        return (f"skipped: needs about {need / 2**30:.1f} GiB, more than half of the "
                f"{avail / 2**30:.1f} GiB available")
    return None


def plot(rows: list[dict], path: str) -> None:
    """Rows/s and peak RSS vs data size (log x), memory vs stream."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from _benchenv import save_figure
    import matplotlib.ticker  # noqa: F401  (NullFormatter below)

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for mode, color in (("memory", "C0"), ("stream", "C3")):
        rs = [r for r in rows if r["mode"] == mode and "epoch" in r]
        if not rs:
            continue
        x = [r["data"] / MB for r in rs]
        label = "in memory" if mode == "memory" else "streamed (prefetch 2)"
        ax1.plot(x, [r["n_rows"] / r["epoch"] for r in rs], "o-", color=color, label=label)
        ax2.plot(x, [r["peak"] / MB for r in rs], "o-", color=color, label=f"{label}: peak RSS")
        above = [(xi, (r["peak"] - r["base"]) / MB) for xi, r in zip(x, rs) if r["peak"] > r["base"]]
        ax2.plot([a for a, _ in above], [b for _, b in above], "s--", color=color, ms=4,
                 label=f"{label}: above fixed overhead")
    xs = sorted({r["data"] / MB for r in rows})
    ax2.plot(xs, xs, ":", color="grey", label="data size")
    ax1.set_xscale("log")
    ax1.set_ylim(bottom=0)
    ax1.set_xlabel("data size (MB of shards in memory)")
    ax1.set_ylabel("rows / s (training pass)")
    ax1.set_title(f"Throughput, k = {rows[0]['k']}, {EPOCHS} epochs", fontsize=10)
    ax2.set_xscale("log")
    ax2.set_yscale("log")
    ax2.set_xlabel("data size (MB of shards in memory)")
    ax2.set_ylabel("MB")
    ax2.set_title("Peak RSS of the training process", fontsize=10)
    for ax in (ax1, ax2):
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(fontsize=7)
    save_figure(fig, path)


def run(ctx) -> str:
    """Run the section; return its Markdown body.

    Parameters
    ----------
    ctx : BenchContext
        ``quick`` selects tiny stores; stores are kept in ``ctx.workdir``, figures go
        to ``ctx.plots_dir``.

    Returns
    -------
    str
    """
    from streamwww.io import open_store

    if ctx.quick:
        sizes, features, shard_rows = QUICK_ROWS, QUICK_FEATURES, QUICK_SHARD_ROWS
    else:
        sizes, features, shard_rows = FULL_ROWS, FEATURES, SHARD_ROWS
    t_all = time.perf_counter()
    stores, results = [], []
    for n in sizes:
        name = f"scaling-d{features}-z{NNZ}-k{CLASSES}-s{shard_rows}-n{n}"
        path = os.path.join(ctx.workdir, name + ".zarr")
        cached = os.path.exists(os.path.join(path, "streamwww.json"))
        t0 = time.perf_counter()
        store = make_store(ctx.workdir, name, n, features, NNZ, CLASSES, shard_rows)
        gen = None if cached else time.perf_counter() - t0
        st = open_store(store)
        data = sum(st.shard_nbytes(i) for i in range(st.n_shards))
        stores.append({"n_rows": st.n_rows, "shards": st.n_shards, "data": data, "disk": dir_bytes(store),
                       "gen": gen})
        print(f"[scaling] {st.n_rows:,} rows, {data / MB:.0f} MB: store "
              f"{'cached' if cached else f'made in {gen:.0f} s'}", flush=True)
        for mode in ("memory", "stream"):
            row = {"mode": mode, "n_rows": st.n_rows, "data": data, "k": st.n_classes}
            why = memory_check(data, st.n_rows, st.n_classes) if mode == "memory" else None
            if why:
                row["skip"] = why
            else:
                t1 = time.perf_counter()
                r = run_child(store, mode, EPOCHS, C=C)
                row.update(epoch=r["mean_epoch"], peak=r["peak_rss"],
                           base=r["base_rss"], wall=time.perf_counter() - t1)
                print(f"[scaling]   {mode}: epoch {row['epoch']:.2f} s, {st.n_rows / row['epoch']:,.0f} rows/s, "
                      f"peak RSS {row['peak'] / MB:.0f} MB ({row['wall']:.0f} s with start-up)", flush=True)
            results.append(row)
    elapsed = time.perf_counter() - t_all

    fig = "bench-scaling-throughput-rss.png"
    plot(results, os.path.join(ctx.plots_dir, fig))

    lines = [
        f"Generated stores (`streamwww make-data` + `convert --shuffle`, via `tools/bench_outofcore.py`): "
        f"k = {CLASSES}, d = {features:,}, {NNZ} non-zeros per row, float32 CSR shards of {shard_rows:,} rows "
        "(the same shard size for every store). Each run is a fresh process training C = "
        f"{C:g} for {EPOCHS} epochs: *memory* = all shards read and stacked, then `train((X, y))`; "
        "*stream* = `train(store)` with Dask prefetch of 2 shards and `beta` on disk. Epoch time = training "
        "pass only (objective evaluation excluded), mean of the epochs. MB = 10⁶ bytes of shards as held in "
        "memory; MB/s = those bytes / epoch time. Peak RSS sampled every 20 ms; fixed overhead = the "
        "process's RSS after imports and JIT loading (stream runs: also after a tiny streamed training run, "
        "which starts Dask and loads Zarr's writers), before it reads data; stream runs pair shards "
        "(`mix_shards=2`, the default). The store files may sit in the "
        "OS page cache, so streamed numbers measure reading through the cache, decompression, `beta` I/O and "
        "training, not cold-disk reads.",
        "",
        ctx.plot_link(fig),
        "",
        "| data | rows | mode | epoch time | rows/s | MB/s | peak RSS | peak RSS above fixed overhead "
        "| fixed overhead |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        head = f"| {fmt_mb(r['data'])} | {r['n_rows']:,} | {r['mode']} |"
        if "skip" in r:
            lines.append(f"{head} {r['skip']} | | | | | |")
            continue
        lines.append(f"{head} {r['epoch']:.3g} s | {r['n_rows'] / r['epoch']:,.0f} | "
                     f"{r['data'] / MB / r['epoch']:,.0f} | {r['peak'] / MB:,.0f} MB | "
                     f"{(r['peak'] - r['base']) / MB:,.0f} MB | {r['base'] / MB:,.0f} MB |")

    lines += ["", "| data | rows | shards | store on disk | generate + convert |", "|---|---|---|---|---|"]
    for s in stores:
        gen = "cached (made by an earlier run)" if s["gen"] is None else f"{s['gen']:.0f} s"
        lines.append(f"| {fmt_mb(s['data'])} | {s['n_rows']:,} | {s['shards']} | {fmt_mb(s['disk'])} | "
                     f"{gen} |")

    stream = [r for r in results if r["mode"] == "stream" and "epoch" in r]
    mem = {r["n_rows"]: r for r in results if r["mode"] == "memory" and "epoch" in r}
    lo, hi = stream[0], stream[-1]
    text = (f"From {fmt_mb(lo['data'])} to {fmt_mb(hi['data'])} ({hi['data'] / lo['data']:.0f}× the "
            f"data) the streamed peak RSS goes from {fmt_mb(lo['peak'])} to {fmt_mb(hi['peak'])} "
            f"({hi['peak'] / lo['peak']:.2f}×; above the fixed overhead {fmt_mb(lo['peak'] - lo['base'])} → "
            f"{fmt_mb(hi['peak'] - hi['base'])}) and its throughput from "
            f"{lo['n_rows'] / lo['epoch']:,.0f} to {hi['n_rows'] / hi['epoch']:,.0f} rows/s.")
    ratios = [f"{mem[r['n_rows']]['epoch'] / r['epoch']:.2f} at {fmt_mb(r['data'])}"
              for r in stream if r["n_rows"] in mem]
    if ratios:
        text += " Streamed / in-memory throughput: " + ", ".join(ratios) + "."
    if mem:
        big = mem[max(mem)]
        text += (f" In memory, the peak above the fixed overhead is {(big['peak'] - big['base']) / big['data']:.1f}× "
                 f"the data at {fmt_mb(big['data'])} (the shards and their stacked copy while stacking, then "
                 "the data and `beta`).")
    gen_total = sum(s["gen"] for s in stores if s["gen"] is not None)
    lines += ["", text, "", f"Measured in {elapsed:.0f} s, of which {gen_total:.0f} s generating stores."]
    return "\n".join(lines) + "\n"
