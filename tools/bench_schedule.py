"""Replay objective schedules on recorded gap histories: how version 2 of ``"auto"`` was chosen.

Trains each data set with ``eval_every=1`` (shrinking on, its sets remade every epoch) past
its stop, under ``gap_decay=0.0009`` (``C=1``, no intercept, ``tol=0``) and under the default
``tol=1e-3``, for several seeds, and records the gap of every epoch.  Each candidate schedule
then walks the history: the epochs it would evaluate, and the first of them that meets the
rule (its stop).  Reported against version 1 of ``"auto"``: objective passes, and the stop
epoch (median and worst), and a cost of ``epochs + rho * passes`` for an objective pass
costing ``rho`` epochs.  A replay, not a run: with sparse passes the shrinking sets are
older, which the real runs (``tools/bench_speed.py gap``) measure.

    python tools/bench_schedule.py --data-dir ../shared/data/libsvm [--seeds 3] [--out docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import lzma
import math
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _benchenv import header, replace_section  # noqa: E402

FILES = ("dna.scale", "satimage.scale", "letter.scale", "sector.scale")
RULES = {"gap_decay": dict(C=1.0, fit_intercept=False, tol=0.0, gap_decay=0.0009),
         "tol": dict(tol=1e-3)}


def histories(data_dir: str, seeds: int) -> dict:
    """``(data, rule, seed) -> [(epoch, gap, rel_gap), ...]`` of every epoch, to 1.6x the stop."""
    from sklearn.datasets import load_svmlight_file

    import streamwww as sw

    out = {}
    for name in FILES:
        with lzma.open(os.path.join(data_dir, name + ".xz")) as f:
            X, y = load_svmlight_file(f)
        for rule, kw in RULES.items():
            for seed in range(seeds):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    stop = sw.train((X, y), random_state=seed, eval_every=1, max_iter=100_000, **kw).n_iter_
                    never = {**kw, "tol": 0.0, "gap_decay": 1e-12 if "gap_decay" in kw else None}
                    m = sw.train((X, y), random_state=seed, eval_every=1, max_iter=int(1.6 * stop) + 10, **never)
                out[(name.split(".")[0], rule, seed)] = [(h["epoch"], h["gap"], h["rel_gap"]) for h in m.history_]
                print(name, rule, seed, stop, flush=True)
    return out


def _config(rule: str):
    from streamwww.engine.config import SolverConfig

    return SolverConfig(Cs=(1.0,), eval_every="auto", schedule=2,
                        **({"tol": 0.0, "gap_decay": 0.0009} if rule == "gap_decay" else {"tol": 1e-3}))


def _progress(fraction: float, widest):
    """The progress rule (engine.schedule.adaptive_spacing) with ``fraction`` of the predicted
    distance and at most ``widest(e)``; (0.5, 2 isqrt(e)) is version 2."""
    from streamwww.engine.schedule import adaptive_spacing

    return lambda rule, hist, gap_1: adaptive_spacing(_config(rule), hist, gap_1, fraction=fraction, widest=widest)


def _fixed(f):
    return lambda rule, hist, gap_1: f(hist[-1]["epoch"])


CANDIDATES = {
    "version 1: isqrt(e) // 2": _fixed(lambda e: max(1, math.isqrt(e) // 2)),
    "isqrt(e)": _fixed(lambda e: max(1, math.isqrt(e))),
    "isqrt(2e)": _fixed(lambda e: max(1, math.isqrt(2 * e))),
    "version 2: progress, 1/2, cap 2 isqrt(e)": _progress(0.5, lambda e: max(1, 2 * math.isqrt(e))),
    "progress, 1/2, cap isqrt(2e)": _progress(0.5, lambda e: max(1, math.isqrt(2 * e))),
    "progress, 1/2, cap e // 2": _progress(0.5, lambda e: max(1, e // 2)),
    "progress, 0.7, cap 2 isqrt(e)": _progress(0.7, lambda e: max(1, 2 * math.isqrt(e))),
}


def replay(hist, rule: str, spacing) -> tuple[int | None, int]:
    """The stop epoch (None: past the history) and the objective passes of one schedule."""
    rows = [{"epoch": e, "gap": g, "rel_gap": r} for e, g, r in hist]
    gap_1, seen, e = rows[0]["gap"], [], 1
    while e <= len(rows):
        seen.append(rows[e - 1])
        if _config(rule).converged(seen[-1]["gap"], seen[-1]["rel_gap"], gap_1):
            return e, len(seen)
        e += spacing(rule, seen, gap_1)
    return None, len(seen)


def report(hists: dict) -> str:
    base = {k: replay(h, k[1], CANDIDATES["version 1: isqrt(e) // 2"]) for k, h in hists.items()}
    lines = ["| schedule | objective passes vs version 1, median (range) | stop epoch vs version 1, median "
             "(worst) | epochs + passes vs version 1, median (worst), rho = 0.5 / 1 |", "|---|---|---|---|"]
    for name, spacing in CANDIDATES.items():
        passes, epochs, cost = [], [], {0.5: [], 1.0: []}
        for k, h in hists.items():
            (stop, n), (b_stop, b_n) = replay(h, k[1], spacing), base[k]
            if stop is None or b_stop is None:
                continue
            passes.append(n / b_n)
            epochs.append(stop / b_stop)
            for rho in cost:
                cost[rho].append((stop + rho * n) / (b_stop + rho * b_n))
        lines.append(f"| {name} | {np.median(passes):.2f} ({min(passes):.2f}-{max(passes):.2f}) | "
                     f"{np.median(epochs):.3f} ({max(epochs):.3f}) | "
                     + " / ".join(f"{np.median(c):.3f} ({max(c):.3f})" for c in cost.values()) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data",
                                                      "libsvm"))
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--out", default=None, help="rewrite this section's block of this markdown file")
    args = p.parse_args(argv)
    hists = histories(args.data_dir, args.seeds)
    text = "\n".join([
        header("Objective schedules replayed on every-epoch gap histories (issue 18)"),
        f"dna, satimage, letter, sector; `gap_decay=0.0009` (`C=1`, no intercept, `tol=0`) and the default "
        f"`tol=1e-3`; random_state 0 .. {args.seeds - 1}: {len(hists)} histories of every epoch "
        "(`eval_every=1`, to 1.6x the stop). Each schedule walks each history; its stop is the first "
        "epoch it evaluates that meets the rule. Ratios to version 1 of `\"auto\"` on the same history.", "",
        report(hists), ""])
    print(text)
    if args.out:
        replace_section(args.out, "bench-schedule", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
