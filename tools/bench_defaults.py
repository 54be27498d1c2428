"""Epochs to the default stop: the measurements behind the default ``max_iter`` (docs/benchmarks.md,
"Epochs to the default stop").

Every model trains in this process, one after another, on one thread (``n_jobs=1``), at the
default stop (relative duality gap <= ``tol=1e-3``, ``eval_every='auto'``, shrinking on) with
``max_iter`` far beyond any stop (``--max-iter``), so that the epochs reported are the ones the
certificate needs:

- for each data set, loss (``ww``, ``cs``), intercept (the default, and without) and ``C`` of
  ``--Cs``: one ``train`` call per seed of ``--seeds``;
- ``--cv-set``: ``WWClassifierCV()`` / ``CSClassifierCV()`` at their defaults (10 values of ``C``
  log-spaced in [1e-4, 1e4], 5 folds, refit), every (fold, ``C``) model's epochs.

Reported: epochs (the largest over the seeds), the solver's seconds (``history_[-1]["time"]``;
one epoch of each loss and set runs first, so Numba's compilation is not timed), and for each
set the seconds of one epoch, the most over its runs: the time a run stopping unconverged at a
given ``max_iter`` takes, ``max_iter`` times that (``--proposed``). A run past
``--time-limit`` seconds is stopped by its callback and reported as such (``> N``).

    python tools/bench_defaults.py --data-dir /tmp/data --out docs/benchmarks.md --json bench-out/defaults.json

``--data-dir`` holds ``dna.scale``, ``satimage.scale``, ``letter.scale``, ``sector.scale``, or
their ``.xz`` (read as they are).

``--ways NAME=STORE,...``: which way of using this machine's cores is fastest for a store
(docs/TRAINING.md, "Which way is fastest for my data"). Each way runs in a fresh process
(after one untimed run that fills Numba's cache), ``--repeats`` times in rotating order, at
the defaults otherwise (C = 1, ``tol=1e-3``); reported: the call's wall time (a local Dask
cluster's start included; the process's imports and the data's loading not), median:

- ``one thread``: ``train(STORE, n_jobs=1)``;
- ``default``: ``train(STORE)`` (every core: the sequential pass, its objectives certified
  on a second core);
- ``block pass``: ``train(STORE, n_jobs=2, block_rows=16)`` (two threads for one model);
- ``--workers 2``: ``train(STORE, workers=2)`` (a local Dask cluster of two processes);
- ``in memory``: ``train((X, y))``, the store's rows as arrays (one shard, no store to read);
- on the store's rows as arrays, five folds of C = 1: ``cross_val_score(WWClassifier(), X, y,
  cv=5, n_jobs=1)`` and ``n_jobs=2``, and ``WWClassifierCV(Cs=[1.0], cv=5, refit=False)``
  (the five models in the same passes).

    python tools/bench_defaults.py --ways dna=/tmp/h4/dna.zarr,letter=/tmp/h4/letter.zarr --out docs/benchmarks.md
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _benchenv import header, replace_section  # noqa: E402

SETS = ("dna", "satimage", "letter", "sector")


def _path(data_dir: str, name: str) -> Path:
    for suffix in ("", ".xz"):
        p = Path(data_dir) / f"{name}.scale{suffix}"
        if p.exists():
            return p
    raise FileNotFoundError(f"{data_dir}: neither {name}.scale nor {name}.scale.xz")


class _Deadline:
    """A training callback that stops the run once ``limit`` seconds have passed."""

    def __init__(self, limit: float):
        self.limit, self.start = limit, time.perf_counter()

    def __call__(self, info: dict) -> bool:
        return time.perf_counter() - self.start > self.limit


def one_model(X, y, *, C: float, loss: str, intercept: bool, seed: int, max_iter: int, limit: float) -> dict:
    """One ``train`` call at the default stop; its epochs, status and times."""
    import streamwww as sw

    t = time.perf_counter()
    m = sw.train((X, y), C=C, loss=loss, fit_intercept=intercept, random_state=seed, n_jobs=1,
                 max_iter=max_iter, callback=_Deadline(limit))
    wall = time.perf_counter() - t
    h = m.history_[-1]
    status = "converged" if m.converged_ else ("max_iter" if m.n_iter_ >= max_iter else "stopped")
    return {"C": C, "loss": loss, "intercept": intercept, "seed": seed, "epochs": int(m.n_iter_),
            "status": status, "solver_s": float(h["time"]), "wall_s": wall, "rel_gap": float(h["rel_gap"])}


def cv_grid(X, y, *, loss: str, max_iter: int, limit: float) -> dict:
    """The default cross-validation grid, every (fold, ``C``) model in the same passes."""
    import streamwww as sw
    from streamwww.engine.options import Call

    est = (sw.WWClassifierCV if loss == "ww" else sw.CSClassifierCV)(random_state=0, n_jobs=1, max_iter=max_iter)
    t = time.perf_counter()
    fit = est._fit_cv(X, y, call=Call(callback=_Deadline(limit)))
    wall = time.perf_counter() - t
    models = [{"C": r.C, "split": int(s), "epochs": int(r.n_iter), "status": r.status,
               "solver_s": float(r.history[-1]["time"]) if r.history else 0.0}
              for r, s in zip(fit.results, fit.cfg.splits)]
    return {"loss": loss, "wall_s": wall, "models": models, "best_C": float(est.best_C_)}


def _cell(runs: list[dict]) -> str:
    """Epochs (the most over the seeds) and the solver's seconds of that run."""
    worst = max(runs, key=lambda r: r["epochs"])
    done = all(r["status"] == "converged" for r in runs)
    least = min(r["epochs"] for r in runs)
    epochs = f"{worst['epochs']:,}" if least == worst["epochs"] else f"{least:,}–{worst['epochs']:,}"
    return f"{'' if done else '> '}{epochs} ({worst['solver_s']:.3g} s)"


def report(out: dict, proposed: list[int]) -> str:
    """The Markdown section of the measurements in ``out``."""
    a = out["args"]
    lines = [header("Epochs to the default stop (issue 57 item 4): the default `max_iter`"), *_measured_lines(out),
             f"- threads: `n_jobs=1`, one model at a time; seeds {a['seeds']}; `max_iter={a['max_iter']:,}`, "
             f"a run past {a['time_limit']:g} s stopped by its callback", ""]
    lines += ["Each cell: the epochs `train(..., tol=1e-3)` needed to certify a relative duality gap ≤ 1e-3 "
              "(the default stop: `eval_every='auto'`, shrinking on; a range: the fewest and the most over the "
              "seeds), and the solver's seconds of the run that needed the most. `> N`: not converged within the "
              "limit.", ""]
    Cs = a["Cs"]
    per_epoch = {}
    for name in a["sets"]:
        runs = [r for r in out["runs"] if r["set"] == name]
        if not runs:
            continue
        d = out["data"][name]
        lines += [f"**{name}** ({d['n']:,} rows, {d['d']:,} features, {d['k']} classes)", "",
                  "| loss | intercept | " + " | ".join(f"C = {c:g}" for c in Cs) + " |",
                  "|---|---|" + "---|" * len(Cs)]
        for loss in a["losses"]:
            for icpt in a["intercepts"]:
                cells = []
                for c in Cs:
                    sel = [r for r in runs if r["loss"] == loss and r["intercept"] == icpt and r["C"] == c]
                    cells.append(_cell(sel) if sel else "–")
                lines.append(f"| {loss} | {'yes' if icpt else 'no'} | " + " | ".join(cells) + " |")
        longest = max(runs, key=lambda r: r["epochs"])
        per_epoch[name] = (longest["solver_s"] / longest["epochs"],
                           max(r["solver_s"] / r["epochs"] for r in runs if r["epochs"] >= 100))
        lines.append("")
    for grid in out["cv"]:
        ms = grid["models"]
        by_C = {}
        for m in ms:
            by_C.setdefault(m["C"], []).append(m)
        late = [m for m in ms if m["status"] != "converged"]
        lines += [f"**{a['cv_set']}, `{'WW' if grid['loss'] == 'ww' else 'CS'}ClassifierCV()` at its defaults** "
                  f"({len(ms)} models: 10 values of C × 5 folds + the refit; wall {grid['wall_s']:.1f} s, best C "
                  f"{grid['best_C']:g}{'; ' + str(len(late)) + ' not converged' if late else ''})", "",
                  "| C | " + " | ".join(f"{c:.3g}" for c in by_C) + " |", "|---|" + "---|" * len(by_C),
                  "| epochs, most over the 6 models | " + " | ".join(
                      ("" if all(m["status"] == "converged" for m in v) else "> ") + f"{max(m['epochs'] for m in v):,}"
                      for v in by_C.values()) + " |", ""]
    if per_epoch and proposed:
        lines += ["The time a run that stops unconverged at `max_iter` takes: `max_iter` times the solver's "
                  "seconds per epoch of the set's longest run above (late epochs, shrunk), and times the most "
                  "over its runs of 100 epochs or more (an upper bound):", "",
                  "| set | s / epoch: longest run, most | " + " | ".join(f"max_iter = {p:,}" for p in proposed)
                  + " |", "|---|---|" + "---|" * len(proposed)]
        for name, (late, most) in per_epoch.items():
            lines.append(f"| {name} | {late:.3g}, {most:.3g} | "
                         + " | ".join(f"{p * late:.3g}–{p * most:.3g} s" for p in proposed) + " |")
        for grid in out["cv"]:  # (its wall time over its epochs: the last models' epochs, and all 60 at first)
            per = grid["wall_s"] / max(m["epochs"] for m in grid["models"])
            lines.append(f"| {a['cv_set']}, `{'WW' if grid['loss'] == 'ww' else 'CS'}ClassifierCV()` (wall) | "
                         f"{per:.3g} | " + " | ".join(f"{p * per:.3g} s" for p in proposed) + " |")
        lines.append("")
    return "\n".join(lines)


WAYS = {
    "one thread": "train(STORE, n_jobs=1)",
    "default": "train(STORE)",
    "block pass": "train(STORE, n_jobs=2, block_rows=16)",
    "--workers 2": "train(STORE, workers=2)",
    "in memory": "train((X, y))",
    "cross_val_score n_jobs=1": "cross_val_score(WWClassifier(), X, y, cv=5, n_jobs=1)",
    "cross_val_score n_jobs=2": "cross_val_score(WWClassifier(), X, y, cv=5, n_jobs=2)",
    "WWClassifierCV": "WWClassifierCV(Cs=[1.0], cv=5, refit=False).fit(X, y)",
}


def way(spec: dict) -> dict:
    """One way of :data:`WAYS` on a store, timed in this process."""
    import numpy as np
    import scipy.sparse as sp

    import streamwww as sw

    store, name, quick = spec["store"], spec["way"], spec.get("max_iter")
    kw = {} if quick is None else {"max_iter": quick}
    if name.startswith("cross_val_score") or name in ("WWClassifierCV", "in memory"):
        from sklearn.model_selection import cross_val_score

        st = sw.open_store(store)
        parts = list(st.iter_shards())
        X = sp.vstack([sp.csr_matrix(x) for x, _ in parts], format="csr")
        y = st.classes[np.concatenate([c for _, c in parts])]
        t = time.perf_counter()
        if name == "in memory":
            m = sw.train((X, y), random_state=0, **kw)
            return {"wall_s": time.perf_counter() - t, "epochs": int(m.n_iter_), "converged": bool(m.converged_)}
        if name == "WWClassifierCV":
            sw.WWClassifierCV(Cs=[1.0], cv=5, refit=False, random_state=0, **kw).fit(X, y)
        else:
            cross_val_score(sw.WWClassifier(random_state=0, **kw), X, y, cv=5, n_jobs=int(name[-1]))
        return {"wall_s": time.perf_counter() - t, "epochs": None}
    kw.update({"one thread": {"n_jobs": 1}, "default": {}, "block pass": {"n_jobs": 2, "block_rows": 16},
               "--workers 2": {"workers": 2}}[name])
    t = time.perf_counter()
    m = sw.train(store, random_state=0, **kw)
    return {"wall_s": time.perf_counter() - t, "epochs": int(m.n_iter_), "converged": bool(m.converged_)}


def _child(spec: dict) -> dict:
    import subprocess

    out = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], capture_output=True, text=True,
                         timeout=3600)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure_ways(args) -> dict:
    """Every way of :data:`WAYS` on every store of ``--ways``, ``--repeats`` times."""
    import statistics

    from streamwww.io import open_store

    out = {"measured": [_provenance()], "args": {"ways": args.ways, "repeats": args.repeats}, "stores": []}
    names = [w for w in WAYS if args.which is None or w in args.which.split(",")]
    for item in args.ways.split(","):
        label, path = item.split("=", 1)
        st = open_store(path)
        row = {"set": label, "rows": int(st.n_rows), "shards": int(st.n_shards), "classes": int(st.n_classes),
               "features": int(st.n_features), "runs": {n: [] for n in names}}
        for n in names:  # (not timed: Numba's cache filled for every way)
            _child({"store": path, "way": n, "max_iter": 2})
        for r in range(args.repeats):
            for n in names[r % len(names):] + names[:r % len(names)]:
                res = _child({"store": path, "way": n})
                row["runs"][n].append(res)
                print(label, n, json.dumps(res), file=sys.stderr, flush=True)
        row["median"] = {n: statistics.median(x["wall_s"] for x in v) for n, v in row["runs"].items() if v}
        out["stores"].append(row)
    out["measured"][0]["load_end"] = os.getloadavg()[0]
    return out


def report_ways(out: dict) -> str:
    lines = [header("Which way is fastest for my data (issue 57 item 8): one process, threads, a local "
                    "cluster, cross-validation"), *_measured_lines(out),
             "- the wall time of the call, median of the runs (`--repeats` in the command) in rotating order, "
             "each in a "
             "fresh process after an untimed run that filled Numba's cache (a local cluster's start is in its "
             "time; the process's imports and the data's loading are not); C = 1, `tol=1e-3`, `random_state=0`",
             ""]
    ways = list(WAYS)
    lines += ["| data | " + " | ".join(f"`{WAYS[w]}`" for w in ways) + " |", "|---|" + "---|" * len(ways)]
    for row in out["stores"]:
        best = min(row["median"].get(w, float("inf")) for w in ways[:5])
        cells = []
        for w in ways:
            if w not in row["median"]:
                cells.append("–")
                continue
            s = row["median"][w]
            ep = row["runs"][w][0].get("epochs")
            cells.append(f"{s:.2f} s" + (f" ({s / best:.1f}x)" if w in ways[:5] else "")
                         + (f", {ep} ep." if ep is not None else ""))
        lines.append(f"| {row['set']} ({row['rows']:,} rows, {row['shards']} shard(s), {row['classes']} classes) | "
                     + " | ".join(cells) + " |")
    lines.append("")
    return "\n".join(lines)


def _merged(outs: list[dict]) -> dict:
    """Several runs' measurements as one (their sets, values of C and runs together)."""
    out = outs[0]
    if "stores" in out:
        for o in outs[1:]:
            out["stores"] += o["stores"]
            out.setdefault("measured", []).extend(o.get("measured", []))
        return out
    a = out["args"]
    for o in outs[1:]:
        b = o["args"]
        a["sets"] += [x for x in b["sets"] if x not in a["sets"]]
        a["Cs"] = sorted(set(a["Cs"]) | set(b["Cs"]))
        a["seeds"] = sorted(set(a["seeds"]) | set(b["seeds"]))
        a["cv_set"] = a["cv_set"] or b["cv_set"]
        out.setdefault("measured", []).extend(o.get("measured", []))
        out["data"].update(o["data"])
        out["runs"] += o["runs"]
        out["cv"] += o["cv"]
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", default="/tmp/data")
    p.add_argument("--sets", default=",".join(SETS))
    p.add_argument("--Cs", default="0.01,0.1,1,10,100")
    p.add_argument("--losses", default="ww,cs")
    p.add_argument("--intercepts", default="yes,no")
    p.add_argument("--seeds", default="0")
    p.add_argument("--max-iter", type=int, default=100_000)
    p.add_argument("--time-limit", type=float, default=600.0, help="seconds a model may train (default 600)")
    p.add_argument("--skip", default="", help="set:C pairs not run, e.g. sector:100 (too slow)")
    p.add_argument("--cv-set", default="satimage", help="the set of the cross-validation grid ('' for none)")
    p.add_argument("--proposed", default="1000,10000", help="max_iter values whose worst time is reported")
    p.add_argument("--json", help="write every run here")
    p.add_argument("--out", help="Markdown file whose bench-defaults block is replaced")
    p.add_argument("--from-json", help="report the runs of these --json files (comma-separated), measuring nothing")
    p.add_argument("--ways", help="NAME=STORE,...: time the ways of using this machine's cores instead")
    p.add_argument("--repeats", type=int, default=3, help="runs of each way (--ways; default 3)")
    p.add_argument("--which", help="the ways to time (--ways; default all), e.g. 'one thread,--workers 2'")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    if args.child:
        print(json.dumps(way(json.loads(args.child))))
        return 0
    proposed = [int(x) for x in args.proposed.split(",") if x]
    if args.from_json:
        out = _merged([json.loads(Path(f).read_text()) for f in args.from_json.split(",")])
    else:
        out = measure_ways(args) if args.ways else measure(args)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=1))
    ways = "stores" in out
    text = report_ways(out) if ways else report(out, proposed)
    print(text)
    if args.out:
        replace_section(args.out, "bench-ways" if ways else "bench-defaults", text)
    return 0


def measure(args) -> dict:
    import numpy as np

    from streamwww.io import load_libsvm

    sets = [s for s in args.sets.split(",") if s]
    Cs = [float(c) for c in args.Cs.split(",")]
    losses = args.losses.split(",")
    intercepts = [x == "yes" for x in args.intercepts.split(",")]
    seeds = [int(s) for s in args.seeds.split(",")]
    skip = {(s.split(":")[0], float(s.split(":")[1])) for s in args.skip.split(",") if s}
    out = {"measured": [_provenance()],
           "args": {"sets": sets, "Cs": Cs, "losses": losses, "intercepts": intercepts, "seeds": seeds,
                    "max_iter": args.max_iter, "time_limit": args.time_limit, "skip": sorted(map(list, skip)),
                    "cv_set": args.cv_set},
           "data": {}, "runs": [], "cv": []}
    loaded = {}
    for name in sets + ([args.cv_set] if args.cv_set else []):
        if name in loaded:
            continue
        X, y = load_libsvm(_path(args.data_dir, name))[:2]
        loaded[name] = X, y
        out["data"][name] = {"n": int(X.shape[0]), "d": int(X.shape[1]), "k": int(np.unique(y).size)}
    for name in sets:
        X, y = loaded[name]
        for loss in losses:  # (compiled outside the timings)
            one_model(X, y, C=1.0, loss=loss, intercept=True, seed=0, max_iter=1, limit=args.time_limit)
        for C in Cs:
            if (name, C) in skip:
                continue
            for loss in losses:
                for icpt in intercepts:
                    for seed in seeds:
                        r = {"set": name, **one_model(X, y, C=C, loss=loss, intercept=icpt, seed=seed,
                                                      max_iter=args.max_iter, limit=args.time_limit)}
                        out["runs"].append(r)
                        print(json.dumps(r), file=sys.stderr, flush=True)
    if args.cv_set:
        X, y = loaded[args.cv_set]
        for loss in losses:
            grid = cv_grid(X, y, loss=loss, max_iter=args.max_iter, limit=args.time_limit)
            out["cv"].append(grid)
            print(json.dumps({k: v for k, v in grid.items() if k != "models"}), file=sys.stderr, flush=True)
    out["measured"][0]["load_end"] = os.getloadavg()[0]
    return out


def _provenance() -> dict:
    """The command, its start and the load average then (the machine may be shared)."""
    import datetime as dt
    import shlex

    return {"command": "python " + " ".join(shlex.quote(a) for a in [os.path.relpath(sys.argv[0])] + sys.argv[1:]),
            "start": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "load": os.getloadavg()[0]}


def _measured_lines(out: dict) -> list[str]:
    return [f"- measured: `{m['command']}` ({m['start']}; load average {m['load']:.1f} at the start"
            + (f", {m['load_end']:.1f} at the end)" if "load_end" in m else ")") for m in out.get("measured", [])]


if __name__ == "__main__":
    sys.exit(main())
