"""Time to test accuracy (issue 18, goal 5): streamwww vs LIBLINEAR ``-s 4`` vs LinearSVC(crammer_singer).

    python tools/bench_accuracy.py [--data letter sector] [--repeats 3] [--out docs/benchmarks.md]
                                   [--data-dir ../shared/data/libsvm] [--workdir DIR] [--quick]

For each data set (LIBSVM ``NAME.scale`` for training, ``NAME.scale.t`` for testing,
decompressed from ``--data-dir`` into ``--workdir``; ``load_svmlight_file``'s CSR matrices,
the same for every method) three methods are trained with C = 1 and a regularized
intercept (a constant feature 1) and scored on the test set:

``ours``
    ``streamwww.train((X, y), C=1, random_state=0, callback=...)``: the defaults of
    ``WWClassifier(C=1, random_state=0)`` (stop at relative duality gap <= ``tol=1e-3``),
    one run; the callback computes the test accuracy after every epoch. The curve's time
    is the ``train`` call's wall time up to the callback minus the time of our own
    evaluations in the callbacks before it (measured with ``perf_counter`` and
    subtracted), so it includes set-up and the per-epoch duality-gap passes the stopping
    rule needs; ``info["time"]`` (the BCD passes alone) is reported beside it.
``liblinear``
    liblinear-official ``-s 4 -c 1 -B 1`` (Crammer-Singer, with shrinking). It has no
    per-iteration callback (and no option for its iteration cap), so the curve is a grid
    of separate runs with decreasing tolerance ``-e`` (:data:`LIBLINEAR_EPS`), each timed
    on its own (the ``train`` call on a prebuilt ``problem``; building it is reported);
    the last is its default ``-e 0.1``, its own stopping rule.
``svc-cs``
    ``sklearn.svm.LinearSVC(C=1, multi_class="crammer_singer", random_state=0)``, a grid of
    separate runs with decreasing ``tol`` (:data:`SVC_TOLS`; its Crammer-Singer solver
    ignores ``max_iter``), each ``fit`` timed on its own; the last is the default 1e-4.

Each method gets a warm-up fit on the same data before its first measured one (ours: one
epoch, which loads the compiled kernels for this number of classes). The repeats are
interleaved (repeat r runs every data set and every method, in an order rotated by r) and
each point of a curve is the median over the repeats of its time and of its accuracy (only
liblinear's accuracy varies between repeats: its C ``rand()`` is not reseeded per run).

The table gives, per method, the final test accuracy (at its own stopping rule), the fit
time to its own stopping rule, and the first time its curve reaches the final accuracy
minus 0.5 and 0.1 percentage points, and the best final accuracy of all methods on that
data set minus 0.5 and 0.1 points ("–": not reached). For a grid the time is the time of
the cheapest run that reaches it.

The section replaces the ``<!-- bench-time-to-accuracy -->`` block of ``--out`` (the plot,
``bench-time-to-accuracy.png``, goes beside it); the median curves are also written as JSON to
``--workdir``/bench-accuracy-results.json. ``--quick`` runs a tiny generated data set with two
repeats (a smoke test of this tool).
"""

from __future__ import annotations

import argparse
import gc
import os
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from statistics import median
from typing import Callable

import numpy as np
import scipy.sparse as sp

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from _benchenv import BenchContext, header, load_libsvm, replace_section, save_figure, version_map  # noqa: E402

C = 1.0
SEED = 0
LIBLINEAR_EPS = (30.0, 10.0, 3.0, 1.0, 0.3, 0.1)  # the last: liblinear's default for -s 4
SVC_TOLS = (10.0, 1.0, 0.1, 0.01, 1e-3, 1e-4)  # the last: LinearSVC's default
WITHIN = (0.5, 0.1)  # percentage points below a final accuracy
MARKER = "bench-time-to-accuracy"
PLOT = "bench-time-to-accuracy.png"
DEFAULT_WORKDIR = os.path.join(tempfile.gettempdir(), "streamwww-bench-accuracy")

# method -> (label in the table and plot, loss, how its curve is measured)
METHODS: dict[str, tuple[str, str, str]] = {
    "ours": ("streamwww WWClassifier(C=1)", "Weston–Watkins", "one run, every epoch"),
    "liblinear": ("LIBLINEAR -s 4", "Crammer–Singer", "separate runs, -e " + ", ".join(f"{e:g}" for e in LIBLINEAR_EPS)),
    "svc-cs": ("LinearSVC(crammer_singer)", "Crammer–Singer", "separate runs, tol " + ", ".join(f"{t:g}" for t in SVC_TOLS)),
}


@dataclass
class Trace:
    """One measured run of a method: its accuracy curve and its final model.

    Attributes
    ----------
    points : list of (seconds, accuracy %)
        In order of increasing effort (epochs, or tighter tolerances).
    final_acc : float
        Test accuracy (%) at the method's own stopping rule.
    fit_s : float
        Time to the method's own stopping rule.
    extra : dict
        Method-specific facts (epochs, BCD time, problem build time).
    gaps : list of float
        Ours: the relative duality gap at each point (empty for the grids).
    """

    points: list[tuple[float, float]]
    final_acc: float
    fit_s: float
    extra: dict = field(default_factory=dict)
    gaps: list[float] = field(default_factory=list)


@dataclass
class Dataset:
    """Training and test rows of one data set (CSR, int32 indices)."""

    name: str
    X: sp.csr_matrix
    y: np.ndarray
    Xt: sp.csr_matrix
    yt: np.ndarray

    def facts(self, sep: str = ", ") -> str:
        return (f"{self.name}: {self.X.shape[0]:,} training rows, {self.Xt.shape[0]:,} test rows{sep}"
                f"{self.X.shape[1]:,} features, {len(np.unique(self.y))} classes, "
                f"{self.X.nnz:,} non-zeros in training")


# ----------------------------------------------------------------------------- data


def _csr32(A) -> sp.csr_matrix:
    """``A`` as CSR with int32 indices (LinearSVC refuses int64 ones)."""
    A = sp.csr_matrix(A)
    A.indices = A.indices.astype(np.int32)
    A.indptr = A.indptr.astype(np.int32)
    return A


def load_dataset(ctx: BenchContext, name: str) -> Dataset:
    """One of the LIBSVM sets, decompressed into ``ctx.workdir``, as ``load_svmlight_file`` gives it."""
    X, y, Xt, yt = load_libsvm(ctx, name, dense_letter=False)
    return Dataset(name, _csr32(X), y, _csr32(Xt), yt)


def generated_dataset(seed: int = SEED, n: int = 600, n_test: int = 300, d: int = 40, k: int = 5) -> Dataset:
    """A tiny sparse multiclass set (class prototypes plus noise) for ``--quick``."""
    rng = np.random.default_rng(seed)
    protos = rng.normal(size=(k, d))
    y = rng.integers(0, k, size=n + n_test)
    X = (protos[y] + rng.normal(size=(n + n_test, d))) * (rng.random((n + n_test, d)) < 0.5)
    y = y.astype(np.float64)
    return Dataset("generated", _csr32(X[:n]), y[:n], _csr32(X[n:]), y[n:])


def _accuracy(pred, y: np.ndarray) -> float:
    return float(np.mean(np.asarray(pred, dtype=np.float64) == y) * 100.0)


# ----------------------------------------------------------------------------- methods


def run_ours(ds: Dataset, warm: bool = False) -> Trace:
    """``streamwww.train`` with the user's defaults; the test accuracy after every epoch.

    Parameters
    ----------
    ds : Dataset
    warm : bool
        Only train one epoch (loads the compiled kernels for this data's shape); nothing measured.

    Returns
    -------
    Trace
        Time = the call's wall time so far minus our own evaluations in the callback.
    """
    import streamwww as sw

    if warm:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sw.train((ds.X, ds.y), C=C, random_state=SEED, max_iter=1)
        return Trace([], 0.0, 0.0)
    classes = np.unique(ds.y)
    points: list[tuple[float, float]] = []
    bcd: list[float] = []
    gaps: list[float] = []
    eval_s = 0.0

    def callback(info: dict) -> None:
        nonlocal eval_s
        c0 = time.perf_counter()
        coef, intercept = info["weights"](0)
        acc = _accuracy(classes[np.argmax(np.asarray(ds.Xt @ coef.T) + intercept, axis=1)], ds.yt)
        points.append((c0 - t0 - eval_s, acc))
        bcd.append(float(info["time"]))
        gaps.append(float(info["rel_gap"][0]))
        eval_s += time.perf_counter() - c0

    gc.collect()
    with warnings.catch_warnings():  # not converging within max_iter shows in the notes (converged_)
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        model = sw.train((ds.X, ds.y), C=C, random_state=SEED, callback=callback)
        fit_s = time.perf_counter() - t0 - eval_s
    final = float(model.score(ds.Xt, ds.yt) * 100.0)
    if abs(final - points[-1][1]) > 1e-9:
        raise RuntimeError(f"the last callback's accuracy {points[-1][1]} is not the model's {final}")
    return Trace(points, final, fit_s, {"epochs": int(model.n_iter_), "bcd_s": bcd[-1], "eval_s": eval_s,
                                        "converged": bool(model.converged_)}, gaps)


def run_liblinear(ds: Dataset, warm: bool = False) -> Trace:
    """liblinear-official ``-s 4 -c 1 -B 1`` over :data:`LIBLINEAR_EPS`, each ``train`` timed on its own."""
    from liblinear import liblinearutil as ll

    t = time.perf_counter()
    prob = ll.problem(ds.y, ds.X)
    build_s = time.perf_counter() - t
    grid = LIBLINEAR_EPS[-1:] if warm else LIBLINEAR_EPS
    points = []
    for eps in grid:
        param = ll.parameter(f"-s 4 -c {C:g} -B 1 -e {eps:g} -q")
        gc.collect()
        t = time.perf_counter()
        model = ll.train(prob, param)
        secs = time.perf_counter() - t
        pred, _, _ = ll.predict([], ds.Xt, model, "-q")
        points.append((secs, _accuracy(pred, ds.yt)))
    return Trace(points, points[-1][1], points[-1][0], {"build_s": build_s})


def run_svc(ds: Dataset, warm: bool = False) -> Trace:
    """``LinearSVC(multi_class="crammer_singer")`` over :data:`SVC_TOLS`, each ``fit`` timed on its own."""
    from sklearn.svm import LinearSVC

    points = []
    for tol in (SVC_TOLS[:1] if warm else SVC_TOLS):
        clf = LinearSVC(C=C, multi_class="crammer_singer", tol=tol, random_state=SEED)
        gc.collect()
        with warnings.catch_warnings():  # its ConvergenceWarning counts liblinear's own iterations, not max_iter
            warnings.simplefilter("ignore")
            t = time.perf_counter()
            clf.fit(ds.X, ds.y)
            secs = time.perf_counter() - t
        points.append((secs, float(clf.score(ds.Xt, ds.yt) * 100.0)))
    return Trace(points, points[-1][1], points[-1][0], {"n_iter": int(np.max(clf.n_iter_))})


RUNNERS: dict[str, Callable[..., Trace]] = {"ours": run_ours, "liblinear": run_liblinear, "svc-cs": run_svc}


# ----------------------------------------------------------------------------- summaries


def median_trace(traces: list[Trace]) -> Trace:
    """Pointwise medians (time and accuracy) of repeated runs; the final values' medians.

    Parameters
    ----------
    traces : list of Trace
        Repeats of one method on one data set (the same number of points: the same
        grid, or the same epochs of a seeded run; else cut to the shortest).

    Returns
    -------
    Trace
        ``extra`` holds the medians of the numeric extras and ``fit_all`` (every repeat's fit time);
        ``gaps`` are the first repeat's (a seeded run gives the same in every repeat).
    """
    n = min(len(t.points) for t in traces)
    points = [(median(t.points[i][0] for t in traces), median(t.points[i][1] for t in traces)) for i in range(n)]
    extra = {key: median(float(t.extra[key]) for t in traces) for key in traces[0].extra}
    extra.update(fit_all=[t.fit_s for t in traces], final_all=[t.final_acc for t in traces],
                 lengths=sorted({len(t.points) for t in traces}))
    return Trace(points, median(t.final_acc for t in traces), median(t.fit_s for t in traces), extra,
                 traces[0].gaps[:n])


def first_reach(points: list[tuple[float, float]], target: float) -> float | None:
    """Time of the first point whose accuracy is at least ``target`` (None: never).

    Parameters
    ----------
    points : list of (seconds, accuracy %)
        In order of increasing effort.
    target : float
        Accuracy (%).

    Returns
    -------
    float or None
        The earliest such time; for a grid of separate runs, the cheapest such run's.
    """
    hits = [t for t, acc in points if acc >= target - 1e-9]
    return min(hits) if hits else None


def _secs(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{x:.3g} s" if x >= 0.1 else f"{x * 1e3:.2g} ms"


def _notes(method: str, tr: Trace) -> str:
    e = tr.extra
    fits = ", ".join(f"{s:.3g}" for s in e["fit_all"])
    if method == "ours":
        note = (f"{e['epochs']:.0f} epochs ({'tol=1e-3 reached' if e['converged'] else 'max_iter reached'}); "
                f"BCD passes (`info['time']`) {e['bcd_s']:.3g} s of the {tr.fit_s:.3g} s, the rest set-up and "
                f"the per-epoch duality-gap passes; our evaluations ({e['eval_s']:.3g} s) taken off")
    elif method == "liblinear":
        note = f"default `-e 0.1`; building its `problem` from the CSR matrix {e['build_s']:.3g} s, not counted"
    else:
        note = f"default `tol=1e-4`: {e['n_iter']:.0f} iterations"
    finals = sorted(set(f"{a:.2f}" for a in e["final_all"]))
    spread = f"; final accuracy per repeat {', '.join(finals)}" if len(finals) > 1 else ""
    return f"{note}; fit s per repeat: {fits}{spread}"


def table(name: str, traces: dict[str, Trace]) -> list[str]:
    """Markdown table of one data set: final accuracy, fit time, time to the targets."""
    best = max(tr.final_acc for tr in traces.values())
    head = ["method", "loss", "curve", "final test acc. %", "fit to own stopping rule"]
    head += [f"to own final − {w:g}" for w in WITHIN] + [f"to best − {w:g} (≥ {best - w:.2f} %)" for w in WITHIN]
    lines = [f"**{name}** (best final accuracy {best:.2f} %)", "",
             "| " + " | ".join(head + ["notes"]) + " |", "|" + "---|" * (len(head) + 1)]
    for m, tr in traces.items():
        label, loss, how = METHODS[m]
        own = [_secs(first_reach(tr.points, tr.final_acc - w)) for w in WITHIN]
        to_best = [_secs(first_reach(tr.points, best - w)) for w in WITHIN]
        cells = [label, loss, how, f"{tr.final_acc:.2f}", _secs(tr.fit_s), *own, *to_best, _notes(m, tr)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines + [""]


def _fastest(traces: dict[str, Trace], when: Callable[[str, Trace], float | None]) -> str:
    """``label time`` of each method, fastest first (those that never get there last)."""
    times = {m: when(m, tr) for m, tr in traces.items()}
    order = sorted(times, key=lambda m: (times[m] is None, times[m] or 0.0))
    return ", ".join(f"{METHODS[m][0]} {_secs(times[m]) if times[m] is not None else 'never'}" for m in order)


def loose_stop(tr: Trace, tol: float) -> tuple[int, float, float] | None:
    """Ours' epoch, time and accuracy at the first point with relative gap <= ``tol`` (None: none)."""
    for i, g in enumerate(tr.gaps):
        if g <= tol:
            return i + 1, tr.points[i][0], tr.points[i][1]
    return None


def reading(name: str, traces: dict[str, Trace]) -> list[str]:
    """Generated bullet points: who gets to which accuracy first (the numbers of the table, ranked)."""
    best = max(tr.final_acc for tr in traces.values())
    out = [f"- **{name}**: to the best final accuracy − 0.5 (≥ {best - 0.5:.2f} %): "
           + _fastest(traces, lambda m, tr: first_reach(tr.points, best - 0.5))
           + "; to its own final − 0.5: " + _fastest(traces, lambda m, tr: first_reach(tr.points, tr.final_acc - 0.5))
           + "; the whole fit to its own stopping rule: " + _fastest(traces, lambda m, tr: tr.fit_s) + "."]
    ours = traces.get("ours")
    if ours is not None and ours.points:
        t01 = first_reach(ours.points, ours.final_acc - 0.1)
        if t01 is not None:
            out[-1] += (f" streamwww is within 0.1 points of its final accuracy after {_secs(t01)}, "
                        f"{100 * t01 / ours.fit_s:.0f} % of its fit")
        for tol in (1e-2,):
            hit = loose_stop(ours, tol)
            if hit is not None:
                out[-1] += (f"; with `tol={tol:g}` it would have stopped after {hit[0]} epochs, "
                            f"{_secs(hit[1])}, at {hit[2]:.2f} %")
        out[-1] += "."
    return out


def plot(results: dict[str, dict[str, Trace]], facts: dict[str, str], path: str) -> None:
    """Test accuracy vs seconds (log axis), one panel per data set, one line per method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(results)
    fig, axes = plt.subplots(1, n, figsize=(6.2 * n, 5.4), squeeze=False)
    colors = dict(zip(METHODS, plt.get_cmap("tab10").colors))
    for ax, (name, traces) in zip(axes.flat, results.items()):
        best = max(tr.final_acc for tr in traces.values())
        for m, tr in traces.items():
            t = np.maximum([p[0] for p in tr.points], 1e-4)
            a = [p[1] for p in tr.points]
            style = dict(ls="-", marker=".", ms=3) if m == "ours" else dict(ls="--", marker="o", ms=4)
            ax.plot(t, a, color=colors[m], label=f"{METHODS[m][0]} ({METHODS[m][2]})", **style)
            ax.plot([tr.fit_s], [tr.final_acc], marker="*", ms=12, color=colors[m], ls="none")
        ax.axhline(best, color="grey", lw=0.8, ls=":")
        ax.set_xscale("log")
        ax.set_title(facts[name], fontsize=9)
        ax.set_xlabel("training time (s)")
        ax.set_ylabel("test accuracy (%)")
        ax.grid(alpha=0.3, which="both")
        accs = [p[1] for tr in traces.values() for p in tr.points]
        ax.set_ylim(max(min(accs), best - 25) - 1, best + 1.5)
    axes.flat[0].legend(fontsize=7, loc="upper left", bbox_to_anchor=(0.0, -0.16), ncol=1, frameon=False,
                        title="★ own stopping rule; dotted line: the best final accuracy", title_fontsize=7)
    save_figure(fig, path)


# ----------------------------------------------------------------------------- run and report


def measure(datasets: list[Dataset], repeats: int,
            log: Callable[[str], None] = print) -> dict[str, dict[str, Trace]]:
    """Warm every method up, then ``repeats`` interleaved rounds; the median traces."""
    for ds in datasets:
        for m, fn in RUNNERS.items():
            fn(ds, warm=True)
    runs: dict[tuple[str, str], list[Trace]] = {}
    order = list(RUNNERS)
    for r in range(repeats):
        for ds in datasets:
            for m in order[r % len(order):] + order[:r % len(order)]:
                t = time.perf_counter()
                runs.setdefault((ds.name, m), []).append(RUNNERS[m](ds))
                log(f"[bench_accuracy] repeat {r + 1}/{repeats} {ds.name} {m}: {time.perf_counter() - t:.1f} s, "
                    f"load {os.getloadavg()[0]:.2f}")
    return {ds.name: {m: median_trace(runs[(ds.name, m)]) for m in RUNNERS} for ds in datasets}


def dump(results: dict[str, dict[str, Trace]], path: str) -> None:
    """The median traces as JSON (for a look at the curves beyond the table)."""
    import json
    from dataclasses import asdict

    with open(path, "w") as f:
        json.dump({name: {m: asdict(tr) for m, tr in traces.items()} for name, traces in results.items()}, f)
    print(f"[bench_accuracy] curves in {path}", file=sys.stderr)


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        return "load averages " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def report(ctx: BenchContext, results: dict[str, dict[str, Trace]], facts: dict[str, str], repeats: int,
           load: tuple[str, str], wall: float, plotted: bool) -> str:
    """The Markdown section: header, set-up, the tables, the plot link and the reading."""
    peers = version_map(("liblinear-official", "matplotlib"))
    lines = [header("Time to test accuracy (issue 18): streamwww vs LIBLINEAR -s 4 vs LinearSVC(crammer_singer)"),
             "- also: " + ", ".join(f"{k} {v}" for k, v in peers.items() if k in ("liblinear-official", "matplotlib")),
             f"- load (`uptime`): at the start `{load[0]}`; at the end `{load[1]}`",
             f"- wall time of the whole run {wall:.0f} s; medians of {repeats} interleaved repeats", ""]
    if ctx.quick:
        lines += ["**Quick mode: a tiny generated data set; a smoke test of the tool, not a benchmark.**", ""]
    lines += [
        "Data: " + "; ".join(facts.values()) + ". Every method gets the same `load_svmlight_file` CSR "
        f"matrices and C = {C:g} with a regularized intercept (a constant feature 1: streamwww's default "
        "`fit_intercept=True, intercept_scaling=1`, LIBLINEAR `-B 1`, LinearSVC's default); all three are "
        "single-threaded (streamwww's compiled kernels run one thread per model). Note the losses differ: "
        "streamwww minimizes the Weston–Watkins hinge loss, the two others the Crammer–Singer one, so their "
        "final accuracies differ by more than optimization error.",
        "",
        "*ours*: `streamwww.train((X, y), C=1, random_state=0, callback=cb)`, the defaults of "
        "`WWClassifier(C=1, random_state=0)` (stop at relative duality gap ≤ `tol=1e-3`), one run, the test "
        "accuracy computed in the callback after every epoch; the time of a point is the `train` call's wall "
        "time up to that callback minus the time our own accuracy evaluations took in the callbacks before it "
        "(measured and subtracted, `perf_counter`): set-up and the per-epoch duality-gap passes that the "
        "stopping rule needs are counted; `info['time']` (the BCD passes alone) is given in the notes. "
        "*LIBLINEAR* (`liblinear-official`, `-s 4 -c 1 -B 1`, shrinking) and *LinearSVC* have no per-iteration "
        "callback, and neither's Crammer–Singer solver takes an iteration cap (LIBLINEAR exposes none, "
        "sklearn's ignores `max_iter`), so their curves are **separate runs with decreasing tolerance** "
        f"(`-e` {', '.join(f'{e:g}' for e in LIBLINEAR_EPS)}; `tol` {', '.join(f'{t:g}' for t in SVC_TOLS)}), "
        "each `train`/`fit` call timed on its own; the last of each grid is the default, the method's own "
        "stopping rule. A curve point is the median over the repeats of its time and of its accuracy; before "
        "measuring, each method had a warm-up fit on the same data (ours: one epoch, which loads the compiled "
        "kernels).",
        "",
        "Columns: *fit to own stopping rule* = the whole fit (ours: the `train` call, our evaluations taken "
        "off; the others: the default-tolerance run); *to own final − x* and *to best − x* = the first time "
        "the curve reaches the method's own final accuracy minus x percentage points, or the best final "
        "accuracy of the three minus x points (for a grid: the cheapest run that does; – : never, up to its "
        "own stopping rule).",
        ""]
    for name, traces in results.items():
        lines += table(name, traces)
    lines += ["Ranked (generated from the table):", ""]
    for name, traces in results.items():
        lines += reading(name, traces)
    lines += [""]
    if plotted:
        lines += [ctx.plot_link(PLOT), "",
                  "Test accuracy vs training time (log axis). Solid: streamwww, one run, a point per epoch; "
                  "dashed with circles: separate runs of LIBLINEAR / LinearSVC over their tolerance grids; "
                  "stars: each method's own stopping rule; dotted: the best final accuracy.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", nargs="+", default=["letter", "sector"], choices=["dna", "satimage", "letter", "sector"])
    p.add_argument("--repeats", type=int, default=None, help="interleaved repeats (default 3; --quick: 2)")
    p.add_argument("--data-dir", default=os.path.join(ROOT, "..", "shared", "data", "libsvm"))
    p.add_argument("--workdir", default=DEFAULT_WORKDIR, help="decompressed LIBSVM files (kept for reuse)")
    p.add_argument("--out", help="rewrite the <!-- bench-time-to-accuracy --> block of this Markdown file")
    p.add_argument("--plots-dir", help="folder of the PNG (default: beside --out, else --workdir)")
    p.add_argument("--quick", action="store_true", help="a tiny generated data set, 2 repeats (a smoke test)")
    args = p.parse_args(argv)
    repeats = args.repeats or (2 if args.quick else 3)
    plots_dir = args.plots_dir or (os.path.dirname(os.path.abspath(args.out)) if args.out else args.workdir)
    ctx = BenchContext(args.quick, args.data_dir, args.workdir, plots_dir, args.out or os.path.join(plots_dir, "x.md"),
                       seed=SEED)
    start = time.perf_counter()
    load_start = _uptime()
    datasets = [generated_dataset()] if args.quick else [load_dataset(ctx, n) for n in args.data]
    results = measure(datasets, repeats, log=lambda s: print(s, file=sys.stderr, flush=True))
    facts = {ds.name: ds.facts() for ds in datasets}
    dump(results, os.path.join(args.workdir, "bench-accuracy-results.json"))
    try:
        plot(results, {ds.name: ds.facts(sep="\n") for ds in datasets}, os.path.join(plots_dir, PLOT))
        plotted = True
    except ImportError as e:  # matplotlib missing: the tables still stand
        print(f"[bench_accuracy] no plot: {e}", file=sys.stderr)
        plotted = False
    text = report(ctx, results, facts, repeats, (load_start, _uptime()), time.perf_counter() - start, plotted)
    print(text, flush=True)
    if args.out:
        replace_section(args.out, MARKER, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
