"""Replay objective schedules on recorded gap histories: how version 2 of ``"auto"`` was chosen.

Trains each data set with ``eval_every=1`` (shrinking on, its sets remade every epoch) past
its stop, under ``gap_decay=0.0009`` (``C=1``, no intercept, ``tol=0``) and under the default
``tol=1e-3``, for several seeds, and records the gap of every epoch.  Each candidate schedule
then walks the history: the epochs it would evaluate, and the first of them that meets the
rule (its stop).  Reported against version 1 of ``"auto"``: objective passes, and the stop
epoch (median and worst), and a cost of ``epochs + rho * passes`` for an objective pass
costing ``rho`` epochs.  A replay, not a run: with sparse passes the shrinking sets are
older, which the real runs (``tools/bench_speed.py gap``) measure.  ``--aloi-rows N`` adds the
generated ALOI-like set of tools/bench_gpu.py (k = 1000), where version 2 evaluates nearly every
epoch; the "recent rate" rows are candidates for that case (not adopted), also listed per history.

    python tools/bench_schedule.py --data-dir ../shared/data/libsvm [--seeds 3] [--aloi-rows 3000] [--out docs/benchmarks.md]
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


def _data_sets(data_dir: str, aloi_rows: int):
    """``(name, X, y)`` of the four files and, with ``aloi_rows``, tools/bench_gpu.py's generated
    ALOI-like set (dense, d = 128, k = 1000: an objective pass costs about a third of an epoch)."""
    from sklearn.datasets import load_svmlight_file

    for name in FILES:
        with lzma.open(os.path.join(data_dir, name + ".xz")) as f:
            X, y = load_svmlight_file(f)
        yield name.split(".")[0], X, y
    if aloi_rows:
        from bench_gpu import load

        X, y, _ = load("aloi", data_dir, "", False, rows=aloi_rows)
        yield f"aloi-like {aloi_rows:,}", X, y


def histories(data_dir: str, seeds: int, aloi_rows: int = 0) -> dict:
    """``(data, rule, seed) -> [(epoch, gap, rel_gap), ...]`` of every epoch, to 1.6x the stop."""
    import streamwww as sw

    out = {}
    for name, X, y in _data_sets(data_dir, aloi_rows):
        for rule, kw in RULES.items():
            for seed in range(seeds):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    stop = sw.train((X, y), random_state=seed, eval_every=1, max_iter=100_000, **kw).n_iter_
                    never = {**kw, "tol": 0.0, "gap_decay": 1e-12 if "gap_decay" in kw else None}
                    m = sw.train((X, y), random_state=seed, eval_every=1, max_iter=int(1.6 * stop) + 10, **never)
                out[(name, rule, seed)] = [(h["epoch"], h["gap"], h["rel_gap"]) for h in m.history_]
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


def _recent(fraction: float):
    """The progress rule with the rate of the last two evaluated epochs instead of the average
    since the first (version 2's rate where the gap rose between them): version 2's early,
    steep fall no longer makes the rest of a run look close to its stop."""
    from streamwww.engine.schedule import _distance, _widest, adaptive_spacing

    def spacing(rule, hist, gap_1):
        cfg = _config(rule)
        if len(hist) < 3:
            return adaptive_spacing(cfg, hist, gap_1, fraction=fraction)
        e, e0 = int(hist[-1]["epoch"]), int(hist[-2]["epoch"])
        d_last, d_prev = _distance(cfg, hist[-1], gap_1), _distance(cfg, hist[-2], gap_1)
        rate = (d_prev - d_last) / (e - e0) if math.isfinite(d_last) and d_last > 0 else 0.0
        if not rate > 0:
            return adaptive_spacing(cfg, hist, gap_1, fraction=fraction)
        half = fraction * d_last / rate
        return _widest(e) if not half < _widest(e) else max(1, int(half))
    return spacing


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
    "recent rate, 1/2, cap 2 isqrt(e)": _recent(0.5),
    "recent rate, 0.35, cap 2 isqrt(e)": _recent(0.35),
}
VERSION_2 = "version 2: progress, 1/2, cap 2 isqrt(e)"
RECENT = ("recent rate, 1/2, cap 2 isqrt(e)", "recent rate, 0.35, cap 2 isqrt(e)")


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


def per_history(hists: dict) -> str:
    """Each history's stop epoch and objective passes under version 2 and the recent-rate rules."""
    names = (VERSION_2, *RECENT)
    lines = ["| data | rule | seed | " + " | ".join(f"{n}: stop, passes" for n in names) + " |",
             "|---|---|---|" + "---|" * len(names)]
    for (data, rule, seed), h in sorted(hists.items()):
        cells = []
        for n in names:
            stop, passes = replay(h, rule, CANDIDATES[n])
            cells.append(f"{stop if stop is not None else 'past the history'}, {passes}")
        lines.append(f"| {data} | {rule} | {seed} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data",
                                                      "libsvm"))
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--aloi-rows", type=int, default=0,
                   help="also tools/bench_gpu.py's ALOI-like set (k = 1000) of this many rows")
    p.add_argument("--out", default=None, help="rewrite this section's block of this markdown file")
    args = p.parse_args(argv)
    hists = histories(args.data_dir, args.seeds, args.aloi_rows)
    text = "\n".join([
        header("Objective schedules replayed on every-epoch gap histories (issue 18)"),
        "dna, satimage, letter, sector" + (f", the ALOI-like set of {args.aloi_rows:,} rows (k = 1000)"
                                           if args.aloi_rows else "") +
        "; `gap_decay=0.0009` (`C=1`, no intercept, `tol=0`) and the default "
        f"`tol=1e-3`; random_state 0 .. {args.seeds - 1}: {len(hists)} histories of every epoch "
        "(`eval_every=1`, to 1.6x the stop). Each schedule walks each history; its stop is the first "
        "epoch it evaluates that meets the rule. Ratios to version 1 of `\"auto\"` on the same history.", "",
        report(hists), "", "Per history, version 2 against the recent-rate rules:", "", per_history(hists), ""])
    print(text)
    if args.out:
        replace_section(args.out, "bench-schedule", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
