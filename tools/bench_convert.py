"""Benchmark ``streamwww convert`` against scikit-learn's ``load_svmlight_file``.

Generates LIBSVM text with ``make_data`` in a temporary directory, then runs
every measurement in a fresh subprocess (so peak RSS is that run's own):

1. throughput in MiB/s of text on one file (>= 100 MiB): ``load_svmlight_file``
   (parse only, into memory) versus our conversion to compressed Zarr and
   Parquet shards (parse + stage + compress + write + fsync), with and without
   ``--shuffle``; the median of ``--repeats`` runs, page cache warm, Numba
   caches loaded before the clock starts;
2. peak RSS of our conversion on two inputs 10x apart with the same shard size,
   next to scikit-learn's on the same files.

With ``--stages`` it splits one conversion's time instead (where the time
goes): the parser kernel alone on one 32 MiB piece (one thread), the reader
thread alone (read + SHA-256), then pass 1 (up to the last block parsed:
parse + staging, or parse + the shards themselves when they are written while
parsing), pass 2 (the rest: staged rows -> compressed shards, or y and the
shard groups) and the commit (fsync + rename), wall and CPU seconds of the
whole process, median of ``--repeats`` fresh processes.

With ``--rss-only`` it measures instead what issue 15 asks of convert's memory:
peak RSS with the default options (``--shard-mb 128`` unless given) for a
``--mb`` input and a ``--big-mb`` one, plain and ``.xz`` (compressed here with
``lzma`` preset 1), with and without ``--shuffle`` -- each in a fresh process.

Usage::

    python tools/bench_convert.py [--mb 120] [--repeats 3] [--shard-mb 16]
                                  [--workdir DIR] [--json OUT.json]
    python tools/bench_convert.py --stages [--mb 120] [--repeats 3] [--shard-mb 16]
    python tools/bench_convert.py --rss-only [--mb 100] [--big-mb 1600]
                                  [--shard-mb 128] [--workdir DIR] [--json OUT.json]

Prints a Markdown report (the numbers in docs/benchmarks-convert.md come from it).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _benchenv import cpu_model, version_map  # noqa: E402

FEATURES, NNZ, CLASSES = 50_000, 40, 20


def peak_rss_mib() -> float:
    """This process's peak RSS. VmHWM (Linux) restarts at exec, unlike ru_maxrss,
    which keeps the high-water mark of the parent that forked us."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child(args: argparse.Namespace) -> None:
    """One measurement: print JSON with seconds and peak RSS."""
    import numpy as np

    path, out = args.input, args.output
    if args.tool == "sklearn":
        from sklearn.datasets import load_svmlight_file

        def run():
            load_svmlight_file(path, dtype=np.float32, zero_based=False)
    else:
        from streamwww.io import convert_libsvm, make_data

        fmt, _, shuffle = args.tool.partition("+")
        warm = Path(out).parent / "warm.libsvm"  # load Numba caches before timing
        make_data(warm, rows=100, features=50, nnz_per_row=5, classes=3, overwrite=True)
        convert_libsvm(warm, str(out) + ".warm", format=fmt, overwrite=True,
                       shuffle=bool(shuffle), seed=0)

        def run():
            convert_libsvm(path, out, format=fmt, shard_mb=args.shard_mb, shuffle=bool(shuffle),
                           seed=0, overwrite=True)
    before = peak_rss_mib()
    start, cpu = time.perf_counter(), time.process_time()
    run()
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(json.dumps({"seconds": seconds, "cpu_seconds": cpu, "peak_rss_mib": peak_rss_mib(),
                      "rss_before_mib": before}))


def stage_child(args: argparse.Namespace) -> None:
    """One conversion split into its stages: print JSON of wall/CPU seconds."""
    import numpy as np

    from streamwww.io import convert_libsvm, make_data, store
    from streamwww.io.libsvm import LibsvmReader, _Prefetcher

    fmt, _, shuffle = args.tool.partition("+")
    warm = Path(args.output).parent / "warm.libsvm"
    make_data(warm, rows=100, features=50, nnz_per_row=5, classes=3, overwrite=True)
    convert_libsvm(warm, str(args.output) + ".warm", format=fmt, overwrite=True,
                   shuffle=bool(shuffle), seed=0)
    out = {}
    piece = np.fromfile(args.input, dtype=np.uint8, count=32 * 2**20)
    piece = piece[:int(np.flatnonzero(piece == 10)[-1]) + 1]
    reader = LibsvmReader(args.input, n_threads=1)
    start = time.perf_counter()
    reader._run_kernel(piece)
    out["kernel_1thread_mib_s"] = len(piece) / 2**20 / (time.perf_counter() - start)
    start = time.perf_counter()
    for _ in _Prefetcher(str(args.input), 32 * 2**20):
        pass
    out["reader_s"] = time.perf_counter() - start
    marks = []

    def mark(name):
        t = os.times()
        marks.append((name, time.perf_counter(), t.user + t.system))

    blocks, commit = LibsvmReader.__iter__, store.StoreTransaction.commit

    def read_all(self):  # pass 1 ends with the last block parsed
        yield from blocks(self)
        mark("pass1")

    def tx_commit(self, meta):
        mark("pass2")
        commit(self, meta)
        mark("commit")

    LibsvmReader.__iter__, store.StoreTransaction.commit = read_all, tx_commit
    mark("start")
    convert_libsvm(args.input, args.output, format=fmt, shard_mb=args.shard_mb,
                   shuffle=bool(shuffle), seed=0, overwrite=True)
    for (_, t0, c0), (name, t1, c1) in zip(marks, marks[1:]):
        out[name] = {"wall_s": t1 - t0, "cpu_s": c1 - c0}
    out["total_s"] = marks[-1][1] - marks[0][1]
    print(json.dumps(out))


def run_stages(args: argparse.Namespace, workdir: Path) -> dict:
    """Median split of the conversion time for zarr and zarr+shuffle."""
    main_file = workdir / "main.libsvm"
    if not main_file.exists():
        generate(main_file, args.mb)
    mib = main_file.stat().st_size / 2**20
    report = {"machine": {"cpu": cpu_model(), "cores": os.cpu_count()},
              "versions": version_map(("numpy", "scipy", "numba", "zarr", "pyarrow")),
              "date": time.strftime("%Y-%m-%d"),
              "command": " ".join([os.path.relpath(sys.executable), *sys.argv]),
              "text_mib": mib, "stages": {}}
    lines = [f"| run (median of {args.repeats}, `--shard-mb {args.shard_mb:g}`) | kernel MiB/s "
             "(1 thread) | reader s | pass 1 s (CPU) | pass 2 s (CPU) | commit s | total s "
             "| MiB/s |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for tool in ("zarr", "zarr+shuffle", "parquet"):
        runs = []
        for _ in range(args.repeats):
            warm_cache(main_file)
            out = workdir / "store-stages"
            cmd = [sys.executable, __file__, "--stages", "--child", tool, "--input",
                   str(main_file), "--output", str(out), "--shard-mb", str(args.shard_mb)]
            result = subprocess.run(cmd, check=True, capture_output=True, text=True)
            shutil.rmtree(out, ignore_errors=True)
            shutil.rmtree(str(out) + ".warm", ignore_errors=True)
            runs.append(json.loads(result.stdout.strip().splitlines()[-1]))
        med = {k: statistics.median(r[k] for r in runs)
               for k in ("kernel_1thread_mib_s", "reader_s", "total_s")}
        for k in ("pass1", "pass2", "commit"):
            med[k] = {m: statistics.median(r[k][m] for r in runs) for m in ("wall_s", "cpu_s")}
        report["stages"][tool] = {"median": med, "runs": runs}
        lines.append(f"| {tool} | {med['kernel_1thread_mib_s']:.0f} | {med['reader_s']:.2f} | "
                     f"{med['pass1']['wall_s']:.2f} ({med['pass1']['cpu_s']:.2f}) | "
                     f"{med['pass2']['wall_s']:.2f} ({med['pass2']['cpu_s']:.2f}) | "
                     f"{med['commit']['wall_s']:.2f} | {med['total_s']:.2f} | "
                     f"{mib / med['total_s']:.0f} |")
    print("\n".join(lines))
    return report


def measure(tool: str, path: Path, workdir: Path, shard_mb: float) -> dict:
    out = workdir / f"store-{tool.replace('+', '-')}"
    cmd = [sys.executable, __file__, "--child", tool, "--input", str(path), "--output", str(out),
           "--shard-mb", str(shard_mb)]
    result = subprocess.run(cmd, check=True, capture_output=True, text=True)
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(str(out) + ".warm", ignore_errors=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def generate(path: Path, mib: float) -> tuple[int, float]:
    """Write about ``mib`` MiB of text; return (bytes, seconds of the final write)."""
    from streamwww.io import make_data

    probe = make_data(path, rows=2000, features=FEATURES, nnz_per_row=NNZ, classes=CLASSES,
                      overwrite=True)
    rows = int(mib * 2**20 / (probe["bytes"] / 2000)) + 1
    start = time.perf_counter()
    size = make_data(path, rows=rows, features=FEATURES, nnz_per_row=NNZ, classes=CLASSES,
                     seed=0, overwrite=True)["bytes"]
    return size, time.perf_counter() - start


def warm_cache(path: Path) -> None:
    with open(path, "rb") as f:
        while f.read(64 * 2**20):
            pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=120, help="MiB of text of the main file")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--shard-mb", type=float, default=None,
                        help="shard size of the conversions (MiB in memory; default 16, "
                             "or 128 with --rss-only)")
    parser.add_argument("--rss-only", action="store_true",
                        help="only the peak-RSS matrix of issue 15 (see the docstring)")
    parser.add_argument("--stages", action="store_true",
                        help="only the split of the conversion time (see the docstring)")
    parser.add_argument("--big-mb", type=float, default=1600,
                        help="MiB of text of the large input of --rss-only")
    parser.add_argument("--workdir", help="where to put the files (default: a temp dir)")
    parser.add_argument("--json", help="also write the raw results here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--input", help=argparse.SUPPRESS)
    parser.add_argument("--output", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.shard_mb is None:
        args.shard_mb = 128.0 if args.rss_only else 16.0
    if args.child:
        args.tool = args.child
        stage_child(args) if args.stages else child(args)
        return

    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench-convert-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        if args.rss_only:
            report = run_rss(args, workdir)
        elif args.stages:
            report = run_stages(args, workdir)
        else:
            report = run_all(args, workdir)
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))


def run_all(args: argparse.Namespace, workdir: Path) -> dict:
    main_file = workdir / "main.libsvm"
    big_file = workdir / "big.libsvm"
    main_bytes, gen_seconds = generate(main_file, args.mb)
    report = {"machine": {"cpu": cpu_model(), "cores": os.cpu_count(),
                          "memory_gib": round(os.sysconf("SC_PAGE_SIZE")
                                              * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)},
              "versions": version_map(("numpy", "scipy", "numba", "zarr", "pyarrow", "scikit-learn")), "date": time.strftime("%Y-%m-%d"),
              "command": " ".join([os.path.relpath(sys.executable), *sys.argv]),
              "data": {"features": FEATURES, "nnz_per_row": NNZ, "classes": CLASSES,
                       "main_mib": main_bytes / 2**20,
                       "make_data_mib_s": main_bytes / 2**20 / gen_seconds},
              "throughput": {}, "rss": {}}
    mib = main_bytes / 2**20
    tools = ["sklearn", "zarr", "parquet", "zarr+shuffle", "parquet+shuffle"]
    for tool in tools:
        runs = []
        for _ in range(args.repeats):
            warm_cache(main_file)
            runs.append(measure(tool, main_file, workdir, args.shard_mb))
        seconds = statistics.median(r["seconds"] for r in runs)
        report["throughput"][tool] = {"seconds": seconds, "mib_s": mib / seconds,
                                      "all_seconds": [r["seconds"] for r in runs]}
        print(f"{tool}: {mib / seconds:.1f} MiB/s", file=sys.stderr)

    big_bytes, _ = generate(big_file, args.mb * 10)
    for name, path, size in (("1x", main_file, main_bytes), ("10x", big_file, big_bytes)):
        warm_cache(path)
        for tool in ("zarr", "zarr+shuffle", "parquet", "sklearn"):
            r = measure(tool, path, workdir, args.shard_mb)
            report["rss"][f"{tool} {name}"] = {"text_mib": size / 2**20, **r}
            print(f"rss {tool} {name}: {r['peak_rss_mib']:.0f} MiB", file=sys.stderr)
        path.unlink() if path == big_file else None
    print(markdown(report, args))
    return report


def compress_xz(path: Path) -> Path:
    """``path`` + ``.xz`` (lzma preset 1, streamed), unless it exists."""
    import lzma

    out = path.with_name(path.name + ".xz")
    if not out.exists():
        with open(path, "rb") as src, lzma.open(out, "wb", preset=1) as dst:
            while chunk := src.read(16 * 2**20):
                dst.write(chunk)
    return out


def run_rss(args: argparse.Namespace, workdir: Path) -> dict:
    """Peak RSS of zarr conversions: two input sizes x plain/xz x shuffle or not."""
    report = {"machine": {"cpu": cpu_model(), "cores": os.cpu_count()},
              "versions": version_map(("numpy", "scipy", "numba", "zarr", "pyarrow")),
              "date": time.strftime("%Y-%m-%d"),
              "command": " ".join([os.path.relpath(sys.executable), *sys.argv]),
              "shard_mb": args.shard_mb, "rss": {}}
    files = {}
    for name, mib in (("small", args.mb), ("big", args.big_mb)):
        path = workdir / f"rss-{name}.libsvm"
        if not path.exists():
            generate(path, mib)
        files[name] = (path, compress_xz(path))
    lines = ["| input | text MiB | file MiB | `--shuffle` | peak RSS MiB | seconds |",
             "|---|---:|---:|---|---:|---:|"]
    for kind in (0, 1):
        for tool in ("zarr", "zarr+shuffle"):
            for name in ("small", "big"):
                path = files[name][kind]
                warm_cache(path)
                r = measure(tool, path, workdir, args.shard_mb)
                text_mib = files[name][0].stat().st_size / 2**20
                key = f"{name} {'xz' if kind else 'plain'} {tool}"
                report["rss"][key] = {"text_mib": text_mib,
                                      "file_mib": path.stat().st_size / 2**20, **r}
                print(f"rss {key}: {r['peak_rss_mib']:.0f} MiB", file=sys.stderr)
                file_mib = path.stat().st_size / 2**20
                lines.append(f"| {path.name} | {text_mib:.0f} | {file_mib:.0f} | "
                             f"{'yes' if 'shuffle' in tool else 'no'} | {r['peak_rss_mib']:.0f} | "
                             f"{r['seconds']:.1f} |")
    ratios = []
    for kind in ("plain", "xz"):
        for tool in ("zarr", "zarr+shuffle"):
            big = report["rss"][f"big {kind} {tool}"]["peak_rss_mib"]
            small = report["rss"][f"small {kind} {tool}"]["peak_rss_mib"]
            ratios.append(f"{kind} {tool}: {big / small:.2f}")
    report["ratios"] = ratios
    print("\n".join(lines + ["", "big/small: " + ", ".join(ratios)]))
    return report


def markdown(report: dict, args: argparse.Namespace) -> str:
    m, v, d = report["machine"], report["versions"], report["data"]
    lines = [f"- machine: {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB RAM",
             "- versions: " + ", ".join(f"{k} {val}" for k, val in v.items()),
             f"- date: {report['date']}", f"- command: `{report['command']}`",
             f"- data: `make_data` with {d['features']} features, {d['nnz_per_row']} values "
             f"per row, {d['classes']} classes; main file {d['main_mib']:.1f} MiB of text "
             f"(`make_data` wrote it at {d['make_data_mib_s']:.0f} MiB/s)", "",
             f"| run (median of {args.repeats}) | seconds | MiB/s of text | vs sklearn |",
             "|---|---:|---:|---:|"]
    base = report["throughput"]["sklearn"]["mib_s"]
    for tool, r in report["throughput"].items():
        label = ("`load_svmlight_file` (parse into memory only)" if tool == "sklearn" else
                 f"`convert --format {tool.split('+')[0]}`"
                 + (" `--shuffle`" if "shuffle" in tool else "") + f" (`--shard-mb {args.shard_mb:g}`)")
        lines.append(f"| {label} | {r['seconds']:.2f} | {r['mib_s']:.1f} | "
                     f"{r['mib_s'] / base:.2f}x |")
    lines += ["", "| run | text MiB | peak RSS MiB | RSS after imports MiB |",
              "|---|---:|---:|---:|"]
    for name, r in report["rss"].items():
        lines.append(f"| {name} | {r['text_mib']:.0f} | {r['peak_rss_mib']:.0f} | "
                     f"{r['rss_before_mib']:.0f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
