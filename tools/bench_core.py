"""Benchmark of the in-memory core (issue 2): epochs, epoch time, accuracy, subproblem time.

Runs WWClassifier at C = 1 without intercept on dna, satimage, letter and sector
(the LIBSVM files in ../shared/data/libsvm; the .t files are the test sets) to the
paper's stopping rule gap_t <= 0.0009 gap_1, with both block solvers, and times
``solve_subproblem`` for k = 10 ... 10000.  Writes a section of docs/benchmarks.md.

    python tools/bench_core.py [--data-dir DIR] [--out docs/benchmarks.md] [--quick]

Solver time per epoch is the median over epochs 2.. of the time spent in the BCD
passes (objective evaluation excluded, as in the paper and the C++ reference),
and the median of that over three identical runs; epoch 1 is excluded because
it may include loading Numba's compiled cache.
"""

from __future__ import annotations

import argparse
import lzma
import os
import sys
import tempfile
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _benchenv import header, replace_section  # noqa: E402

# The authors' C++ reference (LIBLINEAR extension) measured on this machine kind:
# (epochs to 0.0009 gap_1, solver ms per epoch, total solver s, test accuracy).
REFERENCE = {
    "dna": (485, 0.49, 0.24, 92.41),
    "satimage": (86, 1.0, 0.09, 84.30),
    "letter": (97, 16.4, 1.7, 71.26),
    "sector": (53, 129.0, 6.9, 94.04),
}
REFERENCE_SHARK_MS = {"letter": 9.9, "sector": 185.0}
FILES = {"dna": ("dna.scale", "dna.scale.t"), "satimage": ("satimage.scale", "satimage.scale.t"),
         "letter": ("letter.scale", "letter.scale.t"), "sector": ("sector.scale", "sector.scale.t")}


def load(data_dir: str, name: str, tmp: str):
    from sklearn.datasets import load_svmlight_file

    out = []
    for fn in FILES[name]:
        path = os.path.join(tmp, fn)
        if not os.path.exists(path):
            with lzma.open(os.path.join(data_dir, fn + ".xz")) as src, open(path, "wb") as dst:
                dst.write(src.read())
        out.append(path)
    X, y = load_svmlight_file(out[0])
    Xt, yt = load_svmlight_file(out[1], n_features=X.shape[1])
    if name == "letter":  # 16 dense features: the dense kernel
        X, Xt = X.toarray(), Xt.toarray()
    return X, y, Xt, yt


def run(X, y, subproblem: str, gap_decay: float, max_iter: int, repeats: int = 3):
    """Fit ``repeats`` times (same seed, same model); per-epoch time is the median over
    runs of each run's median epoch, total time the median total (this VM is noisy)."""
    import streamwww as sw

    per_epoch, totals = [], []
    for _ in range(repeats):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = sw.WWClassifier(C=1.0, fit_intercept=False, tol=0.0, gap_decay=gap_decay,
                                max_iter=max_iter, subproblem=subproblem, random_state=0).fit(X, y)
        t = np.array([h["time"] for h in m.history_])
        per_epoch.append(float(np.median(np.diff(t))) if len(t) > 1 else float(t[0]))
        totals.append(float(t[-1]))
    return m, float(np.median(per_epoch)) * 1e3, float(np.median(totals))


def time_to(model, delta: float) -> str:
    """'epochs / seconds' until gap <= delta * gap_1, or 'not reached in N epochs'."""
    g1 = model.history_[0]["gap"]
    for h in model.history_:
        if h["gap"] <= delta * g1:
            return f"{h['epoch']} / {h['time']:.3g} s"
    return f"not reached in {model.n_iter_} epochs"


def bench_training(data_dir: str, names, quick: bool) -> str:
    rows, shark_rows = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            X, y, Xt, yt = load(data_dir, name, tmp)
            if quick:
                X, y = X[:500], y[:500]
            max_iter = 20 if quick else 5000
            run(X[:50], y[:50], "walrus", 0.0009, 2)  # load the compiled kernels
            run(X[:50], y[:50], "shark", 0.0009, 2)
            m, ms, total = run(X, y, "walrus", 0.0009, max_iter)
            to01 = time_to(m, 0.01)
            acc = 100 * m.score(Xt, yt)
            ref = REFERENCE[name]
            rows.append(f"| {name} | {X.shape[0]:,} | {len(m.classes_)} | {m.n_iter_} ({ref[0]}) | "
                        f"{ms:.3g} ({ref[1]:g}) | **{ms / ref[1]:.2f}** | {total:.3g} ({ref[2]:g}) | "
                        f"{to01} | {acc:.2f} ({ref[3]:.2f}) |")
            # Shark can stall above 0.0009 gap_1 (its blocks stop at a KKT violation of
            # 1e-4); cap it at 3x the epochs Walrus needed and report what it reached.
            s, sms, stotal = run(X, y, "shark", 0.0009, max(100, 3 * m.n_iter_) if not quick else max_iter)
            refs = REFERENCE_SHARK_MS.get(name)
            shark_rows.append(
                f"| {name} | {ms:.3g} | {sms:.3g}" + (f" ({refs:g})" if refs else "") +
                f" | {to01} | {time_to(s, 0.01)} | {time_to(m, 0.0009)} | {time_to(s, 0.0009)}"
                f" | {100 * s.score(Xt, yt):.2f} |")
            print(rows[-1], flush=True)
            print(shark_rows[-1], flush=True)
    text = ("### Exact BCD in memory, C = 1, no intercept, stopping at gap ≤ 0.0009·gap₁\n\n"
            "Values in parentheses: the authors' C++ reference (LIBLINEAR extension, single-threaded, "
            "no shrinking) on this machine kind, as given in issue 2. Ratio = ours / reference per "
            "epoch (goal ≤ 1, aim 0.7).\n\n"
            "| data | n | k | epochs | solver ms/epoch | ratio | total solver s | to 0.01·gap₁ (epochs / time) | test acc. % |\n"
            "|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n\n"
            "### Walrus vs the Shark-style solver (same driver, same row orders)\n\n"
            "| data | Walrus ms/epoch | Shark ms/epoch (ref.) | Walrus to 0.01·gap₁ (epochs / time) | Shark to 0.01·gap₁ | "
            "Walrus to 0.0009·gap₁ | Shark to 0.0009·gap₁ | Shark test acc. % |\n"
            "|---|---|---|---|---|---|---|---|\n" + "\n".join(shark_rows) + "\n")
    return text


def bench_subproblem(quick: bool) -> str:
    import streamwww as sw
    from streamwww.solvers.walrus import _walrus_rows

    rng = np.random.default_rng(0)
    lines = []
    for k in (10, 100, 1000, 10_000):
        n = 200 if quick else max(200, 2_000_000 // k)
        V = rng.normal(size=(n, k - 1))
        Cs = np.ones(n)
        out = np.empty_like(V)
        _walrus_rows(V[:2], Cs[:2], out[:2])
        t = time.perf_counter()
        _walrus_rows(V, Cs, out)
        kern = (time.perf_counter() - t) / n
        m = min(n, 2000)
        sw.solve_subproblem(V[0], 1.0)
        t = time.perf_counter()
        for r in range(m):
            sw.solve_subproblem(V[r], 1.0)
        pub = (time.perf_counter() - t) / m
        lines.append(f"| {k:,} | {kern * 1e6:.3g} µs | {pub * 1e6:.3g} µs |")
        print(lines[-1], flush=True)
    return ("### `solve_subproblem` time per call (v ~ N(0, 1), C = 1)\n\n"
            "Kernel: the compiled per-row solver as the BCD pass calls it (batched, no Python). "
            "Public call: `streamwww.solve_subproblem(v, C)` from Python, validation included.\n\n"
            "| k | kernel per call | public call |\n|---|---|---|\n" + "\n".join(lines) + "\n")


def main(argv=None) -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", default=os.path.join(here, "..", "..", "shared", "data", "libsvm"))
    p.add_argument("--out", default=os.path.join(here, "..", "docs", "benchmarks.md"))
    p.add_argument("--datasets", default="dna,satimage,letter,sector")
    p.add_argument("--quick", action="store_true", help="tiny inputs; checks that the tool runs")
    args = p.parse_args(argv)
    names = [n for n in args.datasets.split(",") if n]
    text = header("Core solver in memory (issue 2)")
    text += "\n" + bench_training(args.data_dir, names, args.quick) + "\n" + bench_subproblem(args.quick)
    if args.quick:
        print(text)
    else:
        replace_section(args.out, "bench-core", text)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
