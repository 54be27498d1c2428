"""Threads for one model: the block pass against the sequential pass (docs/benchmarks.md, "Threads").

For each data set, intercept setting, placement (in memory; a store read from disk every
epoch) and stop (the paper's ``gap <= 0.0009 gap_1``; ``tol=1e-3``), every configuration
trains one model (``C=1``) in a fresh process, side by side, ``--repeats`` times in rotating
order:

- ``today``: the defaults (the sequential pass; its objectives certified on a second core);
- ``seq-1``: the sequential pass on one thread (``n_jobs=1``);
- ``block-P``: the block pass of ``--block-rows`` rows on ``P`` threads, for each ``P`` of
  ``--threads``;
- ``before`` (with ``--before DIR``, a checkout of an earlier commit, e.g. ``git worktree
  add DIR REV``): that code's defaults, for today's against it;
- ``cpp`` (with ``--cpp BINARY``, the authors' C++ ``train`` built from
  ``YutongWangUMich/liblinear`` at ``ea8db6c``, one thread): ``train -s 30 -c 1`` on the set's
  LIBSVM text, only where it solves the same problem to the same stop (no intercept, the
  paper's stop, which its source hard-codes; in memory, as it reads the whole file).  Its
  *solver* time is its own trace's (the epochs' CPU time, its objective passes paused); its
  *wall* is the command's, reading the text included, so only its solver time is compared.

A two-epoch run of each configuration first fills Numba's cache (not reported).  Reported
per configuration: the ``fit`` call's wall time (start of the run, first epoch and
objective passes included; the process's start-up and the data's loading are not), the
solver time (``history_[-1]["time"]``), epochs, the final relative gap; medians.  Every
``block-P`` model must be bitwise the same (checked).  From the block pass on 1 and 2
threads, its serial fraction ``f = 2 T2 / T1 - 1`` (Amdahl) and the speed-up that predicts
at 16 threads, ``1 / (f + (1 - f) / 16)``.

Data: the LIBSVM files of ``--data-dir`` (dna, satimage, letter, sector) and two generated
sparse sets of ``--gen-rows`` rows (100,000 features, 40 nonzeros a row, 20 classes):
``gen-class`` (``streamwww make-data``: half of each row's features from a class-specific
pool) and ``gen-zipf`` (every row's features drawn from one Zipf law shared by all classes,
labels from a random linear model).  Generated sets are cached in ``--work``.

    python tools/bench_threads.py --data-dir ../shared/data/libsvm --threads 1,2 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

FILES = {"dna": "dna.scale.xz", "satimage": "satimage.scale.xz", "letter": "letter.scale.xz",
         "sector": "sector.scale.xz"}


def _load(name: str, args):
    """``(X, y)`` of a data set (generated sets made once into ``--work``)."""
    import numpy as np

    from streamwww.io import load_libsvm

    if name in FILES:
        X, y = load_libsvm(Path(args.data_dir) / FILES[name])[:2]
        return X, y
    _make(name, args)
    import scipy.sparse as sp

    path = Path(args.work) / f"{name}-{args.gen_rows}.npz"
    return sp.load_npz(path.with_suffix(".X.npz")), np.load(path)["y"]


def _make(name: str, args) -> None:
    """A generated set, made once into ``--work`` (with its LIBSVM text for ``--cpp``)."""
    import numpy as np
    import scipy.sparse as sp

    from streamwww.io import load_libsvm

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    path = work / f"{name}-{args.gen_rows}.npz"
    text = work / f"{name}-{args.gen_rows}.libsvm"
    want_text = bool(getattr(args, "cpp", None))
    if not path.exists() or (want_text and not text.exists()):
        if name == "gen-class":
            from streamwww.io.datagen import make_data

            make_data(text, rows=args.gen_rows, features=100_000, nnz_per_row=40, classes=20, seed=0,
                      overwrite=True)
            X, y = load_libsvm(text)[:2]
        else:
            X, y = _zipf(args.gen_rows)
            if want_text:
                from sklearn.datasets import dump_svmlight_file

                dump_svmlight_file(X, y.astype(np.int64), str(text), zero_based=False)
        if not want_text:
            text.unlink(missing_ok=True)
        sp.save_npz(path.with_suffix(".X.npz"), X)
        np.savez(path, y=y)


def _text(name: str, args) -> Path:
    """The LIBSVM text of a set, for the C++ (a LIBSVM file decompressed once into ``--work``)."""
    if name not in FILES:
        _make(name, args)
        return Path(args.work) / f"{name}-{args.gen_rows}.libsvm"
    import lzma
    import shutil

    out = Path(args.work) / FILES[name].removesuffix(".xz")
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        with lzma.open(Path(args.data_dir) / FILES[name]) as src, open(out, "wb") as dst:
            shutil.copyfileobj(src, dst)
    return out


def _cpp(spec: dict) -> dict:
    """The authors' C++ to the paper's stop on the set's text: its trace's time and epochs."""
    import tempfile

    args = argparse.Namespace(**spec["args"])
    text = _text(spec["set"], args)
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        out = subprocess.run([spec["cpp"], "-s", "30", "-c", "1", "-t", str(spec["max_iter"]), str(text),
                              os.path.join(tmp, "cpp.model")], capture_output=True, text=True, check=True)
        wall = time.perf_counter() - t
    trace = [line.split(",") for line in out.stdout.strip().splitlines() if line.count(",") >= 2]
    return {"wall": wall, "solver": float(trace[-1][0]) / 1e3, "epochs": len(trace), "rel_gap": float("nan"),
            "primal": float("nan"), "model": "cpp"}


def _zipf(n: int, d: int = 100_000, nnz: int = 40, k: int = 20, seed: int = 0):
    """Rows whose ``nnz`` features follow one Zipf law (exponent 1.1) over ``d`` features,
    the same for every class; labels the argmax of a random linear model plus noise."""
    import numpy as np
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, d + 1) ** 1.1
    p /= p.sum()
    cols = np.sort(rng.choice(d, size=(n, nnz), p=p), axis=1)
    rows = np.repeat(np.arange(n), nnz)
    X = sp.csr_matrix((rng.uniform(0.1, 1.0, n * nnz).astype(np.float32), (rows, cols.ravel())), shape=(n, d))
    X.sum_duplicates()
    W = rng.normal(size=(d, k))
    y = np.asarray(np.argmax(X @ W + rng.gumbel(size=(n, k)), axis=1)) + 1
    return X, y.astype(np.float64)


def child(spec: dict) -> dict:
    """One fit in this process, as ``spec`` says; its measurements."""
    import hashlib
    import tempfile
    import warnings

    import streamwww as sw

    warnings.simplefilter("ignore")
    args = argparse.Namespace(**spec["args"])
    X, y = _load(spec["set"], args)
    kw = dict(C=1.0, fit_intercept=spec["intercept"], random_state=0, max_iter=spec["max_iter"])
    if spec["block_rows"] != 1 or spec["n_jobs"] is not None:  # (the defaults: what code before them ran)
        kw.update(block_rows=spec["block_rows"], n_jobs=spec["n_jobs"])
    kw.update(dict(tol=0.0, gap_decay=0.0009) if spec["stop"] == "paper" else dict(tol=1e-3))
    if spec["place"] == "memory":
        data = (X, y)
    else:  # a store read from disk every epoch (written before the clock starts)
        from streamwww.io import write_store

        store = Path(args.work) / f"{spec['set']}-{args.gen_rows}.zarr"
        if not store.exists():
            write_store(store, X, y, shard_rows=args.shard_rows)
        data, kw["memory_budget"] = str(store), 0
    with tempfile.TemporaryDirectory():
        t = time.perf_counter()
        model = sw.train(data, **kw)
        wall = time.perf_counter() - t
    h = model.history_[-1]
    return {"wall": wall, "solver": h["time"], "epochs": int(model.n_iter_), "rel_gap": h["rel_gap"],
            "primal": h["primal"], "model": hashlib.sha256(model.coef_.tobytes() + model.intercept_.tobytes()).hexdigest()}


def _run_child(spec: dict) -> dict:
    if spec.get("cpp"):
        return _cpp(spec)
    env = dict(os.environ)
    if spec.get("code"):  # another checkout's streamwww, ahead of the installed one
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [spec["code"], env.get("PYTHONPATH")]))
    out = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)], capture_output=True, text=True,
                         timeout=3600, env=env)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", default=str(Path(__file__).resolve().parents[2] / "shared" / "data" / "libsvm"))
    p.add_argument("--sets", default="dna,satimage,letter,sector,gen-class,gen-zipf")
    p.add_argument("--gen-rows", type=int, default=200_000)
    p.add_argument("--threads", default="1,2", help="thread counts of the block pass, or 'none' (no block-P runs)")
    p.add_argument("--block-rows", type=int, default=16)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--intercept", default="no,yes")
    p.add_argument("--places", default="memory,store")
    p.add_argument("--stops", default="paper,tol")
    p.add_argument("--max-iter", type=int, default=2000)
    p.add_argument("--shard-rows", type=int, default=20_000)
    p.add_argument("--work", default="bench-out/threads")
    p.add_argument("--out", default="bench-out/threads.json")
    p.add_argument("--before", help="a checkout of an earlier commit: its defaults run as 'before', side by side")
    p.add_argument("--cpp", help="the authors' C++ train binary: run beside (no intercept, memory, paper stop)")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return 0
    threads = [] if args.threads == "none" else [int(t) for t in args.threads.split(",")]
    configs = [("today", 1, None, None), ("seq-1", 1, 1, None)] + [(f"block-{t}", args.block_rows, t, None)
                                                                    for t in threads]
    if args.before:
        configs.insert(0, ("before", 1, None, str(Path(args.before).resolve())))
    if args.cpp:
        args.cpp = str(Path(args.cpp).resolve())
    shared = {k: getattr(args, k) for k in ("data_dir", "gen_rows", "work", "shard_rows", "cpp")}
    results = []
    for name in args.sets.split(","):
        for intercept in args.intercept.split(","):
            for place in args.places.split(","):
                for stop in args.stops.split(","):
                    spec0 = {"set": name, "intercept": intercept == "yes", "place": place, "stop": stop,
                             "max_iter": args.max_iter, "args": shared}
                    here = list(configs)
                    if args.cpp and intercept == "no" and place == "memory" and stop == "paper":
                        here.append(("cpp", None, None, None))
                    runs = {c[0]: [] for c in here}
                    for c in configs:  # (a run of each first, not kept: every kernel compiled into the cache)
                        _run_child({**spec0, "block_rows": c[1], "n_jobs": c[2], "code": c[3], "max_iter": 2})
                    for r in range(args.repeats):
                        for c in here[r % len(here):] + here[:r % len(here)]:  # rotating order
                            runs[c[0]].append(_run_child({**spec0, "block_rows": c[1], "n_jobs": c[2], "code": c[3],
                                                          "cpp": args.cpp if c[0] == "cpp" else None}))
                    row = {**{k: v for k, v in spec0.items() if k != "args"}, "runs": runs}
                    blocks = {x["model"] for c in configs if c[0].startswith("block") for x in runs[c[0]]}
                    row["block_models_equal"] = len(blocks) <= 1
                    results.append(row)
                    _print(row, here)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"argv": sys.argv, "results": results}, indent=1))
    return 0


def _print(row: dict, configs) -> None:
    med = {c: {k: statistics.median(x[k] for x in row["runs"][c]) for k in ("wall", "solver", "epochs", "rel_gap")}
           for c, *_ in configs}
    today = med["today"]["wall"]
    head = f"{row['set']} intercept={row['intercept']} {row['place']} {row['stop']}:"
    cells = [f"{c} {m['wall']:.3f}s ({m['wall'] / today:.2f}x, solver {m['solver']:.3f}s, {m['epochs']:.0f} ep)"
             for c, m in med.items()]
    extra = ""
    if "block-1" in med and "block-2" in med:
        f = max(0.0, min(1.0, 2 * med["block-2"]["solver"] / med["block-1"]["solver"] - 1))
        extra = f"; serial fraction {f:.2f}, 16 threads by Amdahl {1 / (f + (1 - f) / 16):.1f}x"
    print(head, "; ".join(cells) + extra + ("" if row["block_models_equal"] else "; BLOCK MODELS DIFFER"), flush=True)


if __name__ == "__main__":
    sys.exit(main())
