"""Process memory settings vs peak RSS and epoch time of streamed training (issue 4 (b)).

    python tools/bench_allocator.py [--workdir DIR] [--rounds 3] [--epochs 6]
                                    [--env LABEL:NAME=VALUE[;NAME=VALUE...]]...

Trains the small store of ``tools/bench_outofcore.py`` (400,000 rows in 8 shards,
generated in ``--workdir`` if missing) streamed with a checkpoint each epoch, in a
fresh process per run (``bench_outofcore.run_child``), under several environments,
rounds interleaved. Reports per setting the median over rounds of the peak RSS
above the fixed overhead (as in part (b)) and of the median epoch time (epochs
2..). Before that, it times what returning memory to the OS costs on this machine:
touching freshly mapped pages against touching pages already resident.

Prints Markdown; nothing is written to docs/ (the numbers quoted in
docs/benchmarks.md come from its output).
"""

from __future__ import annotations

import argparse
import mmap
import os
import shutil
import sys
import tempfile
import time
from statistics import median

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _benchenv import header  # noqa: E402
from bench_outofcore import make_store, run_child  # noqa: E402

# each applies on top of the default (fixed glibc malloc thresholds; any MALLOC_*
# variable switches them off)
SETTINGS = {
    "default": {},
    "STREAMWWW_RELEASE_MEMORY=0": {"STREAMWWW_RELEASE_MEMORY": "0"},
    "MALLOC_ARENA_MAX=1": {"MALLOC_ARENA_MAX": "1"},
    "ZARR_THREADING__MAX_WORKERS=1": {"ZARR_THREADING__MAX_WORKERS": "1"},
}


def fresh_page_cost(mib: int = 38, repeats: int = 20) -> tuple[float, float]:
    """Milliseconds to touch ``mib`` MiB of freshly mapped pages, and of resident ones."""
    n = mib * 2**20
    resident = np.ones(n, np.uint8)

    def fresh():
        m = mmap.mmap(-1, n)
        a = np.frombuffer(m, np.uint8)
        a[::4096] = 1
        del a
        m.close()

    def reuse():
        resident[::4096] = 1

    out = []
    for f in (fresh, reuse):
        f()
        t = time.perf_counter()
        for _ in range(repeats):
            f()
        out.append((time.perf_counter() - t) / repeats * 1e3)
    return out[0], out[1]


def parse_env(spec: str) -> tuple[str, dict]:
    label, _, rest = spec.partition(":")
    pairs = [item.partition("=") for item in rest.split(";") if item]
    if not label or not pairs or any(not name or not eq for name, eq, _ in pairs):
        raise SystemExit(f"--env {spec!r}: expected LABEL:NAME=VALUE[;NAME=VALUE...]")
    return label, {name: value for name, _, value in pairs}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workdir")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--env", action="append", default=[], metavar="LABEL:NAME=VALUE[;NAME=VALUE...]",
                   help="an extra setting to compare (repeatable)")
    args = p.parse_args(argv)
    settings = dict(SETTINGS)
    settings.update(parse_env(s) for s in args.env)
    work = args.workdir or tempfile.mkdtemp(prefix="streamwww-alloc-")
    os.makedirs(work, exist_ok=True)
    lines = [header("Memory settings of streamed training (issue 4 (b))")]
    fresh, reuse = fresh_page_cost()
    lines.append(f"Touching 38 MiB of freshly mapped pages: {fresh:.1f} ms; of resident pages: {reuse:.2f} ms.\n")
    try:
        store = make_store(work, "small400000", 400_000, 1000, 30, 20, 50_000)
        runs = {label: [] for label in settings}
        for _ in range(args.rounds):
            for label, env in settings.items():
                ck = os.path.join(work, "ck-alloc")
                shutil.rmtree(ck, ignore_errors=True)
                runs[label].append(run_child(store, "stream", args.epochs, ckpt=ck, env=env))
                shutil.rmtree(ck, ignore_errors=True)
        lines.append(f"{args.rounds} rounds, settings interleaved; {args.epochs} epochs per run, a checkpoint each "
                     "epoch; medians over the rounds (range in brackets).\n")
        lines.append("| setting | peak RSS above fixed | epoch (median of epochs 2..) | same model |\n|---|---|---|---|")
        ref = runs["default"][0]["coef_hash"]
        for label, rs in runs.items():
            peaks = [(r["peak_rss"] - r["base_rss"]) / 2**20 for r in rs]
            epochs = [median(r["epoch_times"]) for r in rs]
            same = all(r["coef_hash"] == ref for r in rs)
            lines.append(f"| {label} | {median(peaks):.0f} MiB ({min(peaks):.0f}–{max(peaks):.0f}) | "
                         f"{median(epochs):.3f} s ({min(epochs):.3f}–{max(epochs):.3f}) | "
                         f"{'yes' if same else 'NO'} |")
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
