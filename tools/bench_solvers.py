"""Benchmark sections 1 and 2 (issue 6): Walrus vs the Shark-style block solver, and test accuracy.

Section ``solvers`` (the paper's Figures 1 and 2)
    For each data set (dna, satimage, letter, sector from ``ctx.data_dir`` and a
    generated ALOI-like set with k = 1000 classes) and each C in 2^-6 ... 2^3,
    train the Weston-Watkins SVM without intercept (the paper's formulation (P))
    once with the exact Walrus block solver and once with the Shark-style
    iterative block solver, until the duality gap falls to 0.001 gap_1 (gap_1:
    the gap after the first epoch), or a per-run cap on epochs and time.  The
    paper's metric is ET^delta, the training time (objective evaluation
    excluded) at the end of the first epoch t with gap_t <= delta gap_1, for
    delta = 0.01 and 0.001; we tabulate t_Shark / t_Walrus (> 1: Walrus is
    faster), the absolute times and epochs, plot the ratio against log2 C
    (Figure 2) and the primal and dual objectives against time for satimage and
    sector at C = 1 (Figure 1), and compare the test accuracy of both solvers.
    A short measured study (our Shark-style solver at the subproblem tolerance
    of the authors' re-implementation) backs the paragraph on how our baseline
    relates to the paper's.

Section ``accuracy`` (the paper's Table 5)
    Test accuracy of Walrus at every C of the grid on dna, satimage, letter and
    sector, stopped at gap_t <= 0.01 gap_1, beside the paper's Table 5.

Timing: ``history_[t]["time"]`` (wall-clock seconds in the training passes,
objective evaluation excluded); cells that finish in a second or two are run
three times and report medians.  Single-model training uses serial kernels;
the objective evaluation's Numba-parallel kernel is pinned to one thread while
these sections run (with two threads on the busy 2-core machine, dna at C = 1
spent about 19 ms per epoch outside the training passes instead of about 1.5 ms).

``--quick`` subsamples the training rows, uses three values of C and a k = 100
generated set, so that each section finishes in well under a minute.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _benchenv import BenchContext, load_libsvm, save_figure  # noqa: E402

__all__ = ["run_solvers", "run_accuracy", "make_aloi_like"]

DELTAS = (0.01, 0.001)
C_GRID = tuple(2.0 ** e for e in range(-6, 4))
C_QUICK = (2.0 ** -3, 1.0, 4.0)
C_FIG1 = 1.0  # Figure 1's C (the paper takes it from Dogan et al. 2016, which we do not have)
LIBSVM_SETS = ("dna", "satimage", "letter", "sector")
SYNTH = "aloi-like"
SOLVERS = ("walrus", "shark")
SHARK_EPS_OURS = 1e-4   # Shark's default: 0.1 * QpStoppingCondition.minAccuracy (1e-3)
SHARK_EPS_PAPER = 1e-6  # the authors' re-implementation: 0.1 * MAX_KKT_VIOLATION (1e-5)

# Per data set: (max epochs, training-time cap in s) per run; full and --quick.
CAPS_FULL = {"dna": (3000, 10.0), "satimage": (3000, 10.0), "letter": (3000, 30.0),
             "sector": (1000, 45.0), SYNTH: (500, 40.0)}
CAPS_QUICK = {"dna": (400, 0.5), "satimage": (400, 0.5), "letter": (400, 1.0),
              "sector": (400, 1.0), SYNTH: (200, 1.0)}
QUICK_ROWS = {"dna": 600, "satimage": 800, "letter": 2000, "sector": 600}
SYNTH_FULL = dict(k=1000, d=128, n_train=4, n_test=2)
SYNTH_QUICK = dict(k=100, d=128, n_train=4, n_test=2)
# Wall-clock budgets (s): the grid stops starting runs after GRID_BUDGET; the
# subproblem-tolerance study is skipped after STUDY_BUDGET (section start = 0).
GRID_BUDGET = {False: 20 * 60.0, True: 40.0}
STUDY_BUDGET = {False: 22 * 60.0, True: 50.0}
ACC_MAX_ITER = {False: 3000, True: 300}
# A cell whose run reached the target in under this many training seconds is
# run this many times in all and its times are the medians (timer noise).
REPEATS = {False: (3, 2.0), True: (3, 0.25)}
ACC_DELTA = 0.01

# The paper's Table 5 (supplement A.6.3): test accuracy (%) for log2 C = -6 ... 3.
PAPER_TABLE5 = {
    "dna": (94.77, 94.77, 94.94, 94.69, 93.59, 93.09, 92.24, 92.24, 92.16, 92.16),
    "satimage": (82.35, 82.50, 82.95, 83.55, 83.55, 84.10, 84.35, 84.20, 84.05, 84.25),
    "letter": (69.98, 71.02, 71.74, 71.52, 71.36, 71.46, 71.20, 71.56, 71.44, 70.74),
    "sector": (93.14, 93.36, 93.64, 93.95, 94.04, 94.08, 94.04, 94.08, 93.98, 93.92),
}
# The paper's section 5, C = 1, delta = 0.01: (Walrus s, Shark s).
PAPER_SEC5 = {"satimage": (0.0476, 0.0408), "aloi": (188.0, 393.0)}

_DATA_CACHE: dict[tuple, tuple] = {}


# ----------------------------------------------------------------------------- data

def make_aloi_like(k: int = 1000, d: int = 128, n_train: int = 4, n_test: int = 2, seed: int = 0):
    """A seeded dense data set shaped like ALOI: ``k`` classes, ``d`` histogram-like features.

    Each class has a non-negative prototype (70 % one of 100 shared "base"
    prototypes, 30 % its own, each supported on 32 random bins) scaled to a
    maximum of 1; a sample is its prototype times log-normal noise (sigma 0.8)
    plus sparse spurious bins, clipped to [0, 1].  About half the entries are
    non-zero.  Like the paper's ALOI split, the first ``n_train`` samples of
    every class are for training and the remaining ``n_test`` for testing.

    Parameters
    ----------
    k, d : int
        Classes and features.
    n_train, n_test : int
        Training and test samples per class.
    seed : int

    Returns
    -------
    X, y, X_test, y_test : ndarray
        ``X`` C-contiguous float64 with its rows shuffled; labels in ``[0, k)``.
    """
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(1000,)))
    support, n_base = 32, 100

    def sparse_rows(m: int) -> np.ndarray:
        out = np.zeros((m, d))
        for r in range(m):
            out[r, rng.choice(d, support, replace=False)] = rng.exponential(1.0, support)
        return out

    protos = 0.7 * sparse_rows(n_base)[rng.integers(0, n_base, k)] + 0.3 * sparse_rows(k)
    protos /= protos.max(axis=1, keepdims=True)
    n_per = n_train + n_test
    Y = np.repeat(np.arange(k), n_per)
    X = protos[Y] * rng.lognormal(0.0, 0.8, (k * n_per, d))
    X += (rng.random(X.shape) < 0.05) * rng.exponential(0.2, X.shape)
    np.clip(X, 0.0, 1.0, out=X)
    train = np.tile(np.arange(n_per), k) < n_train
    perm = rng.permutation(int(train.sum()))
    return (np.ascontiguousarray(X[train][perm]), Y[train][perm],
            np.ascontiguousarray(X[~train]), Y[~train])


def _dataset(ctx: BenchContext, name: str):
    """``(X, y, X_test, y_test, label)``; training rows subsampled under ``--quick``."""
    key = (ctx.data_dir, ctx.workdir, ctx.quick, ctx.seed, name)
    if key not in _DATA_CACHE:
        if name == SYNTH:
            spec = SYNTH_QUICK if ctx.quick else SYNTH_FULL
            X, y, Xt, yt = make_aloi_like(**spec, seed=ctx.seed)
            label = f"{SYNTH} (k={spec['k']})"
        else:
            X, y, Xt, yt = load_libsvm(ctx, name)
            label = name
            if ctx.quick and X.shape[0] > QUICK_ROWS[name]:
                rng = np.random.default_rng(ctx.seed)
                rows = np.sort(rng.choice(X.shape[0], QUICK_ROWS[name], replace=False))
                X, y = X[rows], y[rows]
                label = f"{name} ({QUICK_ROWS[name]} rows)"
        _DATA_CACHE[key] = (X, y, Xt, yt, label)
    return _DATA_CACHE[key]


def _shape(X, y, Xt) -> str:
    """Table cells: n train, n test, d, k, storage."""
    kind = "CSR" if hasattr(X, "nnz") else "dense"
    nnz = X.nnz / X.shape[0] if hasattr(X, "nnz") else float(np.count_nonzero(X)) / X.shape[0]
    return f"{X.shape[0]:,} | {Xt.shape[0]:,} | {X.shape[1]:,} | {len(np.unique(y))} | {kind}, {nnz:.0f} nnz/row"


# ----------------------------------------------------------------------------- runs

@dataclass
class Run:
    """One (data set, C, solver) cell: the histories of its runs (repeats of a short run)."""

    data: str
    C: float
    solver: str
    histories: list[list[dict]] = field(default_factory=list)
    status: str = "skipped"  # 'reached' (gap <= min(DELTAS) gap_1), 'capped', 'skipped'
    test_acc: float | None = None
    pred: np.ndarray | None = None
    wall: float = 0.0

    @property
    def ran(self) -> bool:
        return bool(self.histories)

    @property
    def history(self) -> list[dict]:
        return self.histories[0]

    @property
    def gap1(self) -> float:
        return self.history[0]["gap"]

    @property
    def t_last(self) -> float:
        return float(np.median([h[-1]["time"] for h in self.histories]))

    @property
    def epochs(self) -> int:
        return int(self.history[-1]["epoch"])

    @property
    def ms_per_epoch(self) -> float:
        return 1000.0 * self.t_last / self.epochs

    def et(self, delta: float) -> tuple[float, int] | None:
        """``(time, epoch)`` at the end of the first epoch with ``gap <= delta * gap_1``, or None.

        The time is the median over the repeats (the epoch is the same in all:
        a run is deterministic given its seed).
        """
        if not self.ran:
            return None
        hits = [_first_hit(hist, delta) for hist in self.histories]
        if hits[0] is None:
            return None
        epoch = hits[0][1]
        return float(np.median([h[0] for h in hits if h is not None and h[1] == epoch])), epoch


def _first_hit(hist: list[dict], delta: float) -> tuple[float, int] | None:
    """``(time, epoch)`` of the first record of ``hist`` with ``gap <= delta * gap_1``."""
    g1 = hist[0]["gap"]
    return next(((h["time"], int(h["epoch"])) for h in hist if h["gap"] <= delta * g1), None)


@contextlib.contextmanager
def _one_numba_thread() -> Iterator[None]:
    """Pin Numba's parallel kernels to one thread; restore the previous setting afterwards."""
    import numba

    old = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        yield
    finally:
        numba.set_num_threads(old)


def _train(X, y, C, solver: str, max_iter: int, time_cap: float, seed: int, gap_decay: float):
    """``streamwww.train`` without intercept to ``gap <= gap_decay * gap_1``, capped.

    Training stops after the first epoch whose training time exceeds
    ``time_cap`` or whose wall time (evaluation included) exceeds
    ``2.5 * time_cap + 5`` s.  Returns the fitted model and its wall time.
    """
    import streamwww as sw
    from sklearn.exceptions import ConvergenceWarning

    t0 = time.perf_counter()
    wall_cap = 2.5 * time_cap + 5.0

    def stop(info: dict) -> bool:
        return info["time"] > time_cap or time.perf_counter() - t0 > wall_cap

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = sw.train((X, y), C=C, tol=0.0, gap_decay=gap_decay, max_iter=max_iter,
                         fit_intercept=False, subproblem=solver, random_state=seed, device="cpu",
                         callback=stop)
    return model, time.perf_counter() - t0


def _warm_up(datasets: dict[str, tuple], multi_C: bool = False) -> None:
    """Compile (or load from Numba's cache) every kernel the timed runs use."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tiny fits: convergence and "many classes" warnings
        for X, y, *_ in datasets.values():
            _warm_one(X, y, multi_C)


def _warm_one(X, y, multi_C: bool) -> None:
    """Tiny fits with every class present (kernels are compiled per k up to 8 classes)."""
    _, first = np.unique(y, return_index=True)
    rows = np.unique(np.concatenate([first, np.arange(min(20, len(y)))]))
    for solver in SOLVERS:
        _train(X[rows], y[rows], 1.0, solver, 2, 60.0, 0, 0.5)
    if multi_C:
        import streamwww as sw

        sw.train((X[rows], y[rows]), C=[0.5, 1.0], tol=0.0, max_iter=2, fit_intercept=False,
                 random_state=0, device="cpu")


def _grid(ctx: BenchContext, datasets: dict[str, tuple], Cs, t_start: float) -> dict[tuple, Run]:
    """Every (data set, C, solver) cell; cells after the section's budget is spent stay 'skipped'."""
    caps = CAPS_QUICK if ctx.quick else CAPS_FULL
    runs: dict[tuple, Run] = {}
    for name, (X, y, Xt, yt, label) in datasets.items():
        max_iter, cap = caps[name]
        for C in Cs:
            for solver in SOLVERS:
                run = Run(name, C, solver)
                runs[name, C, solver] = run
                if time.perf_counter() - t_start > GRID_BUDGET[ctx.quick]:
                    continue  # section budget spent: reported as skipped
                model, run.wall = _train(X, y, C, solver, max_iter, cap, ctx.seed, min(DELTAS))
                run.histories = [list(model.history_)]
                run.status = "reached" if run.et(min(DELTAS)) else "capped"
                n_rep, below = REPEATS[ctx.quick]
                while run.status == "reached" and len(run.histories) < n_rep and run.t_last < below:
                    again, _ = _train(X, y, C, solver, max_iter, cap, ctx.seed, min(DELTAS))
                    run.histories.append(list(again.history_))
                run.pred = model.predict(Xt)
                run.test_acc = float(np.mean(run.pred == yt))
                print(f"[solvers] {label:>22} C=2^{math.log2(C):+.0f} {solver:6}: {run.epochs:4d} epochs, "
                      f"{run.t_last:7.3f} s train, {run.wall:6.1f} s wall, {run.status}", flush=True)
    return runs


# ----------------------------------------------------------------------------- formatting

def _fmt_s(t: float) -> str:
    return f"{t:.3g}" if t < 100 else f"{t:.0f}"


def _ratio_cell(w: Run, s: Run, delta: float) -> tuple[str, float | None, str]:
    """Markdown cell for t_S / t_W, its value (exact or bound) and its kind ('=', '>', '<', '')."""
    if not (w.ran and s.ran):
        return "skipped", None, ""
    ew, es = w.et(delta), s.et(delta)
    if ew and es:
        r = es[0] / ew[0]
        return f"{r:.2f}", r, "="
    if ew and not es:  # Shark not there yet: t_S > its last time
        r = s.t_last / ew[0]
        return f"> {r:.2f}", r, ">"
    if es and not ew:
        r = es[0] / w.t_last
        return f"< {r:.2f}", r, "<"
    return "n/a (neither reached)", None, ""


def _time_cell(run: Run, delta: float) -> str:
    if not run.ran:
        return "skipped"
    e = run.et(delta)
    if e:
        return f"{_fmt_s(e[0])} ({e[1]})"
    return f"> {_fmt_s(run.t_last)} (> {run.epochs}, not reached)"


def _md_table(head: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def _log2_label(C: float) -> str:
    return f"2^{int(round(math.log2(C)))}"


def _verdict(r: float) -> str:
    return "Walrus faster" if r > 1.2 else ("Shark-style faster" if r < 1 / 1.2 else "comparable, within 20 %")


# ----------------------------------------------------------------------------- plots

def _plot_ratio(runs, datasets, Cs, path: str) -> None:
    """Figure 2 style: t_Shark / t_Walrus vs log2 C, one line per data set, one panel per delta."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, axes = plt.subplots(1, len(DELTAS), figsize=(11, 4.2), sharey=True)
    names = list(datasets)
    for ax, delta in zip(axes, DELTAS):
        for j, name in enumerate(names):
            jitter = 0.08 * (j - (len(names) - 1) / 2)
            xs, ys, bx, by, bm = [], [], [], [], []
            for C in Cs:
                _, r, kind = _ratio_cell(runs[name, C, "walrus"], runs[name, C, "shark"], delta)
                if kind == "=":
                    xs.append(math.log2(C) + jitter)
                    ys.append(r)
                elif kind in ("<", ">"):
                    bx.append(math.log2(C) + jitter)
                    by.append(r)
                    bm.append("^" if kind == ">" else "v")
            line, = ax.plot(xs, ys, "o-", ms=4, label=datasets[name][4])
            for x, yv, m in zip(bx, by, bm):
                ax.plot([x], [yv], m, ms=7, mfc="none", color=line.get_color())
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_xlabel("log2 C")
        ax.set_title(f"delta = {delta:g}: time to gap <= delta * gap_1", fontsize=10)
        ax.grid(True, which="both", alpha=0.25)
    axes[0].set_ylabel("t_Shark / t_Walrus  (> 1: Walrus faster)")
    axes[-1].legend(fontsize=7, loc="best")
    fig.suptitle("Walrus vs Shark-style block solver (open triangles: bound, one solver hit its cap)",
                 fontsize=9)
    save_figure(fig, path)


def _plot_convergence(runs, datasets, names, C: float, path: str) -> None:
    """Figure 1 style: primal and dual vs training time (top), gap / gap_1 vs time (bottom)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(names), figsize=(5.5 * len(names), 7), squeeze=False)
    colors = {"walrus": "C0", "shark": "C1"}
    for j, name in enumerate(names):
        top, bot = axes[0, j], axes[1, j]
        lo, hi, p_end = np.inf, -np.inf, -np.inf
        for solver in SOLVERS:
            run = runs.get((name, C, solver))
            if run is None or not run.ran:
                continue
            t = [h["time"] for h in run.history]
            P = [h["primal"] for h in run.history]
            D = [h["dual"] for h in run.history]
            top.plot(t, P, "-", color=colors[solver], label=f"{solver}: primal")
            top.plot(t, D, "--", color=colors[solver], label=f"{solver}: dual")
            bot.plot(t, [h["gap"] / run.gap1 for h in run.history], "-", color=colors[solver], label=solver)
            lo, hi, p_end = min(lo, D[0]), max(hi, P[0]), max(p_end, P[-1])
        if np.isfinite(lo):
            top.set_ylim(lo - 0.05 * (p_end - lo), min(hi, p_end + 1.5 * (p_end - lo)))
        top.set_title(f"{datasets[name][4]}, C = {C:g}", fontsize=10)
        top.set_xlabel("training time (s)")
        top.set_ylabel("objective")
        top.legend(fontsize=7)
        top.grid(True, alpha=0.25)
        for delta in DELTAS:
            bot.axhline(delta, color="k", lw=0.7, ls=":")
        bot.set_yscale("log")
        bot.set_xlabel("training time (s)")
        bot.set_ylabel("gap / gap_1")
        bot.legend(fontsize=7)
        bot.grid(True, which="both", alpha=0.25)
    save_figure(fig, path)


# ----------------------------------------------------------------------------- Shark study

def _kkt_violation(X, y_idx: np.ndarray, W: np.ndarray, beta: np.ndarray, C: float) -> np.ndarray:
    """Per row, the largest KKT violation as Shark measures it (margin units).

    ``g_t = 1 - (s_y - s_c(t))``; a coordinate violates by ``g_t`` if ``beta_t < C``
    and by ``-g_t`` if ``beta_t > 0`` (Shark's ``calcGradient``).
    """
    S = np.asarray(X @ W)
    n, k = S.shape
    t = np.arange(k - 1)[None, :]
    cls = np.where(t + 1 != y_idx[:, None], t + 1, 0)
    g = 1.0 - (S[np.arange(n), y_idx][:, None] - np.take_along_axis(S, cls, axis=1))
    viol = np.maximum(np.where(beta < C, g, 0.0), np.where(beta > 0.0, -g, 0.0))
    return np.maximum(viol.max(axis=1), 0.0)


PROBES = (("walrus", SHARK_EPS_OURS), ("shark", SHARK_EPS_OURS), ("shark", SHARK_EPS_PAPER))


def _one_pass_changes(X, y_idx, W, beta, C: float, seed: int) -> dict[tuple, tuple[float, float]]:
    """From a fixed state, one more pass with each block solver of :data:`PROBES`.

    Returns, per probe, the share of rows whose block changed (those rows
    update W) and the mean number of changed coordinates in a changed block.
    """
    from streamwww.backends.cpu import bcd_pass

    order = np.random.default_rng(seed).permutation(len(y_idx))
    out = {}
    for solver, eps in PROBES:
        W1, b1 = np.array(W, order="C"), np.array(beta, order="C")
        bcd_pass(W1, X, y_idx, b1, C, order, subproblem=solver, shark_eps=eps)
        changed = (b1 != beta).sum(axis=1)
        rows = changed > 0
        out[solver, eps] = (float(rows.mean()), float(changed[rows].mean()) if rows.any() else 0.0)
    return out


def _shark_eps_study(ctx: BenchContext, datasets: dict[str, tuple], names, C: float, t_start: float):
    """Our Shark-style solver at our tolerance and at the authors' (``run_bcd``, the trainer's core).

    Returns one dict per data set: ``label``, ``runs`` (tolerance -> :class:`Run`
    or None when the budget was spent) and, from the state at the end of the
    run at our tolerance, ``below`` (tolerance -> share of rows whose largest
    KKT violation is below it: rows that take no step and leave W untouched)
    and ``changes`` (see :func:`_one_pass_changes`).
    """
    from streamwww.backends.cpu import CPUBackend
    from streamwww.engine.config import SolverConfig
    from streamwww.engine.driver import Hooks, run_bcd
    from streamwww.state.betas import InMemoryBetas
    from streamwww.stream.sources import InMemoryData

    caps = CAPS_QUICK if ctx.quick else CAPS_FULL
    out = []
    for name in names:
        X, y, *_rest, label = datasets[name]
        classes, y_idx = np.unique(y, return_inverse=True)
        y_idx = y_idx.astype(np.int32)
        max_iter, cap = caps[name]
        item: dict[str, Any] = {"label": label, "runs": {}}
        out.append(item)
        for eps in (SHARK_EPS_OURS, SHARK_EPS_PAPER):
            if time.perf_counter() - t_start > STUDY_BUDGET[ctx.quick]:
                item["runs"][eps] = None
                continue
            data = InMemoryData(X, y_idx, n_classes=len(classes))
            betas = InMemoryBetas(1, data.shard_rows, data.n_classes)
            cfg = SolverConfig(Cs=(C,), tol=0.0, max_iter=max_iter, gap_decay=min(DELTAS),
                               fit_intercept=False, subproblem="shark", seed=ctx.seed, shark_eps=eps)
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                res = run_bcd(data, betas, cfg, CPUBackend(), hooks=Hooks(
                              callback=lambda info: info["time"] > cap or time.perf_counter() - t0 > 2.5 * cap + 5))
            run = Run(name, C, f"shark eps={eps:g}", histories=[list(res[0].history)])
            run.status = "reached" if run.et(min(DELTAS)) else "capped"
            item["runs"][eps] = run
            if eps == SHARK_EPS_OURS:
                W, beta = res[0].W, betas.get(0)[0]
                viol = _kkt_violation(X, y_idx, W, beta, C)
                item["below"] = {e: float(np.mean(viol < e)) for e in (SHARK_EPS_OURS, SHARK_EPS_PAPER)}
                item["changes"] = _one_pass_changes(X, y_idx, W, beta, C, ctx.seed)
            print(f"[solvers] study {label} eps={eps:g}: {run.epochs} epochs, {run.ms_per_epoch:.1f} ms/epoch",
                  flush=True)
    return out


# ----------------------------------------------------------------------------- section 1

def run_solvers(ctx: BenchContext) -> str:
    """Section ``solvers``: Walrus vs the Shark-style solver (paper Figures 1-2).

    Parameters
    ----------
    ctx : BenchContext
        ``quick`` selects subsampled rows, three values of C and a k = 100
        generated set; figures go to ``ctx.plots_dir``.

    Returns
    -------
    str
        The Markdown body of the section.
    """
    t_start = time.perf_counter()
    cpu0, load0 = time.process_time(), os.getloadavg()
    Cs = C_QUICK if ctx.quick else C_GRID
    with _one_numba_thread():
        datasets = {name: _dataset(ctx, name) for name in (*LIBSVM_SETS, SYNTH)}
        _warm_up(datasets)
        runs = _grid(ctx, datasets, Cs, t_start)
        study = _shark_eps_study(ctx, datasets, ("letter", "sector", SYNTH), C_FIG1, t_start)
    f_ratio, f_conv = "bench-solvers-ratio.png", "bench-solvers-convergence.png"
    _plot_ratio(runs, datasets, Cs, os.path.join(ctx.plots_dir, f_ratio))
    _plot_convergence(runs, datasets, ("satimage", "sector"), C_FIG1, os.path.join(ctx.plots_dir, f_conv))
    wall = time.perf_counter() - t_start
    cpu_share = (time.process_time() - cpu0) / wall
    load1 = os.getloadavg()
    return _solvers_markdown(ctx, datasets, runs, study, Cs, f_ratio, f_conv, wall, cpu_share, load0, load1)


def _solvers_markdown(ctx: BenchContext, datasets: dict, runs: dict, study: list, Cs, f_ratio: str, f_conv: str,
                      wall: float, cpu_share: float, load0: tuple, load1: tuple) -> str:
    """The Markdown body of section ``solvers``; every number comes from ``runs`` and ``study``."""
    caps = CAPS_QUICK if ctx.quick else CAPS_FULL
    names = list(datasets)
    Cl = [_log2_label(C) for C in Cs]
    L: list[str] = []
    L += [
        "Walrus (exact block solver) against our Shark-style block solver "
        "(`streamwww/solvers/shark.py`: greedy coordinate descent on the block, as in Shark's "
        "`QpMcLinearWW`), both inside the same exact BCD driver, on the same data with the same "
        "seeded row order. The paper's metric (section 5): ET^δ is the training time at the end of the "
        "first epoch t with gap_t ≤ δ·gap_1, gap_1 being the duality gap after the first epoch and "
        "the objective evaluation excluded from the time; we report t_Shark / t_Walrus, so **> 1 means "
        "Walrus reached the target sooner** (the paper's Figure 2 plots the reciprocal, ET_Walrus / ET_Shark).",
        "",
        "Setup: formulation (P) without intercept (`fit_intercept=False`; the paper's LIBLINEAR runs have "
        "no bias), `tol=0`, `gap_decay=0.001`, `random_state="
        f"{ctx.seed}`, CPU, times from `history_[t]['time']`; a cell whose run reached δ = 0.001 in under "
        f"{REPEATS[ctx.quick][1]:g} s of training was run {REPEATS[ctx.quick][0]} times and its times are "
        "medians (the runs are deterministic: same epochs), other cells ran once. "
        "Runs are capped (epochs, training seconds): "
        + ", ".join(f"{datasets[n][4]} {caps[n][0]} epochs / {caps[n][1]:g} s" for n in names)
        + "; a target not reached within the cap is shown as `> t (not reached)` and the ratio then "
        "as a bound. The generated set (`make_aloi_like` in this file) has ALOI's shape "
        "(k classes, d = 128 non-negative histogram-like features in [0, 1], a per-class train/test split) "
        "but far fewer rows than ALOI's 81,000, to fit the time budget.",
        "",
        f"Measured on a shared machine: load average {load0[0]:.1f} at the start and {load1[0]:.1f} at the "
        f"end of the section; this process got {100 * cpu_share:.0f} % of one core over the section's "
        f"{wall:.0f} s wall time. Timings of small runs (milliseconds) are noisy; read ratios within "
        "about ±20 % as ties.",
        "",
        "| data set | n train | n test | d | k | storage |",
        "|---|---|---|---|---|---|",
    ]
    for n in names:
        X, y, Xt, yt, label = datasets[n]
        L.append(f"| {label} | {_shape(X, y, Xt)} |")

    # ratio tables
    L += ["", "### Time to gap ≤ δ·gap₁: t_Shark / t_Walrus", ""]
    for delta in DELTAS:
        rows = []
        for n in names:
            rows.append([datasets[n][4]] + [_ratio_cell(runs[n, C, "walrus"], runs[n, C, "shark"], delta)[0]
                                            for C in Cs])
        L += [f"δ = {delta:g}:", ""] + _md_table(["data set \\ C"] + Cl, rows) + [""]
    L += [ctx.plot_link(f_ratio), ""]

    # summary sentences, computed
    for delta in DELTAS:
        parts = []
        for n in names:
            exact = [r for C in Cs
                     for (_, r, kind) in [_ratio_cell(runs[n, C, "walrus"], runs[n, C, "shark"], delta)]
                     if kind == "="]
            if exact:
                med = float(np.median(exact))
                parts.append(f"{datasets[n][4]} {med:.2f} ({_verdict(med)}, {len(exact)} of {len(Cs)} C)")
            else:
                parts.append(f"{datasets[n][4]}: no C with both targets reached")
        L.append(f"- δ = {delta:g}, median t_Shark / t_Walrus over the C where both reached the target: "
                 + "; ".join(parts) + ".")
    same_ep = [(n, C) for n in names for C in Cs for delta in DELTAS
               if runs[n, C, "walrus"].et(delta) and runs[n, C, "shark"].et(delta)
               and runs[n, C, "walrus"].et(delta)[1] == runs[n, C, "shark"].et(delta)[1]]
    both = [(n, C) for n in names for C in Cs for delta in DELTAS
            if runs[n, C, "walrus"].et(delta) and runs[n, C, "shark"].et(delta)]
    g1 = [abs(runs[n, C, "shark"].gap1 / runs[n, C, "walrus"].gap1 - 1) for n in names for C in Cs
          if runs[n, C, "walrus"].ran and runs[n, C, "shark"].ran]
    if both:
        L.append(f"- Both solvers needed the same number of epochs in {len(same_ep)} of {len(both)} "
                 "(data set, C, δ) cells where both reached the target: the Shark-style solver's inexact "
                 "blocks rarely change the epoch count, so the ratio is mostly a ratio of time per epoch.")
    if g1:
        L.append(f"- gap₁ of the two solvers differs by at most {max(g1):.1e} (relative); the paper reports "
                 "DG¹_Walrus / DG¹_Shark within [0.99999, 1.00001] in all its experiments.")
    syn = [C for C in Cs if runs[SYNTH, C, "walrus"].ran]
    if len(syn) > 1:  # separable training set: beyond some C the optimum no longer depends on C
        p_top = runs[SYNTH, syn[-1], "walrus"].history[-1]["primal"]
        same = [C for C in syn if abs(runs[SYNTH, C, "walrus"].history[-1]["primal"] - p_top) <= 1e-6 * p_top]
        if len(same) > 1:
            L.append(f"- {datasets[SYNTH][4]}: the final primal value is the same (within 1e-6) for "
                     f"C ∈ {{{', '.join(_log2_label(C) for C in same)}}}: with "
                     f"{SYNTH_QUICK['n_train'] if ctx.quick else SYNTH_FULL['n_train']} training rows per class "
                     "the data are apparently separable at these C (a primal optimum that does not grow "
                     "with C has a zero hinge term), so these columns repeat one problem.")
    sat = (runs.get(("satimage", 1.0, "walrus")), runs.get(("satimage", 1.0, "shark")))
    if all(r is not None and r.et(0.01) for r in sat):
        L.append(f"- satimage, C = 1, δ = 0.01: Walrus {_fmt_s(sat[0].et(0.01)[0])} s, Shark-style "
                 f"{_fmt_s(sat[1].et(0.01)[0])} s here; the paper (section 5) reports {PAPER_SEC5['satimage'][0]} s "
                 f"and {PAPER_SEC5['satimage'][1]} s, and on ALOI (k = 1000, 81,000 rows) {PAPER_SEC5['aloi'][0]:g} s "
                 f"and {PAPER_SEC5['aloi'][1]:g} s.")
    L.append("")

    # absolute times
    L += ["### Absolute times", "",
          "Cells: t_Walrus / t_Shark in seconds of training time, epochs in parentheses.", ""]
    for delta in DELTAS:
        rows = []
        for n in names:
            rows.append([datasets[n][4]] + [f"{_time_cell(runs[n, C, 'walrus'], delta)} / "
                                            f"{_time_cell(runs[n, C, 'shark'], delta)}" for C in Cs])
        L += [f"δ = {delta:g}:", ""] + _md_table(["data set \\ C"] + Cl, rows) + [""]

    # time per epoch
    L += ["### Time per epoch", "",
          "Median over C of (training time / epochs) of each run, in milliseconds.", ""]
    rows = []
    for n in names:
        w = [runs[n, C, "walrus"].ms_per_epoch for C in Cs if runs[n, C, "walrus"].ran]
        s = [runs[n, C, "shark"].ms_per_epoch for C in Cs if runs[n, C, "shark"].ran]
        if w and s:
            rows.append([datasets[n][4], f"{np.median(w):.2f}", f"{np.median(s):.2f}",
                         f"{np.median(s) / np.median(w):.2f}"])
    L += _md_table(["data set", "Walrus ms/epoch", "Shark-style ms/epoch", "Shark / Walrus"], rows) + [""]

    # Figure 1
    L += [f"### Convergence: primal and dual vs time (paper Figure 1), C = {C_FIG1:g}", "",
          "The paper takes Figure 1's C for satimage and sector from Doğan et al. (2016, Table 5), "
          f"which we do not have; we use C = {C_FIG1:g}, the C of the paper's section-5 timing example. "
          "Bottom row: gap / gap₁, with the δ levels dotted.", "", ctx.plot_link(f_conv), ""]

    # accuracy at C = 1
    C_acc = C_FIG1 if C_FIG1 in Cs else Cs[len(Cs) // 2]
    L += [f"### Test accuracy of both solvers, C = {C_acc:g}", "",
          "Models at the end of the runs above (gap ≤ 0.001·gap₁, or the cap).", ""]
    rows = []
    for n in names:
        w, s = runs[n, C_acc, "walrus"], runs[n, C_acc, "shark"]
        if w.ran and s.ran:
            agree = float(np.mean(w.pred == s.pred))
            rows.append([datasets[n][4], f"{100 * w.test_acc:.2f}", f"{100 * s.test_acc:.2f}",
                         f"{100 * agree:.2f}", f"{w.epochs} / {s.epochs}", f"{w.status} / {s.status}"])
    L += _md_table(["data set", "Walrus acc. %", "Shark-style acc. %", "same prediction %", "epochs W / S",
                    "status W / S"], rows) + [""]

    L += _shark_markdown(study)
    return "\n".join(L)


def _shark_markdown(study: list[dict]) -> list[str]:
    """The paragraph on the Shark baselines (what we read in the sources) and the measured study."""
    L = [
        "### How our Shark-style baseline relates to the paper's", "",
        "What we checked, in the paper (section 5, supplement A.6.1), in Shark's source "
        "(`include/shark/Algorithms/QP/QpMcLinear.h`, class `QpMcLinearWW`; `QuadraticProgram.h`) and in "
        "the authors' re-implementation (`linear.cpp`, class `Solver_MCSVM_WW_Shark`, repository "
        "YutongWangUMich/liblinear, the version we could read):",
        "",
        "- Same algorithm. The block is solved by greedy coordinate descent: each step picks the coordinate "
        "with the largest KKT violation (upper bound C, lower bound 0) and takes the clipped Newton step; at "
        "most 10·k steps; the gradient is computed once from the scores wᵀxᵢ and then updated incrementally "
        "(never recomputed from W inside the block); a row whose largest violation is below the tolerance "
        "takes no step and leaves W unchanged. `streamwww/solvers/shark.py` does the same, in the "
        "reparametrized variables (Shark's variables are 4·β with C_Shark = 4C, and the authors call it "
        "with 4C; its violations are in the same margin units as ours).",
        "- Different subproblem tolerance. Shark passes 0.1 × `minAccuracy` to the block solver, and "
        "`QpStoppingCondition` defaults `minAccuracy` to 1e-3: **1e-4, which is what we use**. The "
        "authors' re-implementation uses 0.1 × `MAX_KKT_VIOLATION` with `MAX_KKT_VIOLATION = 1e-5` (the "
        "value in Shark's unit test for its linear trainers): **1e-6, 100 times tighter**. Near the "
        "optimum this decides how many rows skip the W update and how many steps the others take.",
        "- Same outer loop as the authors': a fresh uniformly random row order each epoch, no shrinking "
        "(A.6.1), objective evaluation outside the timed region. (Shark's own `QpMcLinear` orders rows by "
        "its adaptive ACF schedule by default.)",
        "- Same W bookkeeping, different clock. Both codes add xᵢ·Δ only to the columns of W whose "
        "coefficient changed (ours switches to the full-row update when more than half of the k columns "
        "change, and for k ≤ 8), for both solvers, so a row with few changed coordinates costs little "
        "beyond its k-wide gather. The authors time with `std::clock()` (process CPU time); we time "
        "wall-clock seconds. Hardware and compiler differ too; we did not quantify these.",
        "",
        "Measured here, our Shark-style solver at both tolerances (same driver: `run_bcd` with "
        "`SolverConfig.shark_eps`, as `WWClassifier` does not expose the tolerance), C = 1:",
        "",
    ]
    rows = []
    for item in study:
        for eps, run in item["runs"].items():
            if run is None:
                rows.append([item["label"], f"{eps:g}", "skipped (budget)", "", ""])
            else:
                rows.append([item["label"], f"{eps:g}", f"{run.ms_per_epoch:.1f}",
                             _time_cell(run, DELTAS[0]), _time_cell(run, DELTAS[1])])
    L += _md_table(["data set", "ε", "ms/epoch", "t, δ = 0.01 (epochs)", "t, δ = 0.001 (epochs)"], rows)
    L += [
        "",
        "Near the optimum (the state at the end of the ε = 1e-4 run above): the share of rows whose "
        "largest KKT violation is below each tolerance (rows that take no step and skip the W update), and "
        "one more pass from that same state with each block solver: the share of rows whose block changes "
        "(each of those updates W), with the mean number of changed coordinates of a changed block "
        "(out of k − 1) in parentheses.",
        "",
    ]
    rows = []
    for item in study:
        if "below" not in item:
            continue
        ch = item["changes"]
        rows.append([item["label"], f"{100 * item['below'][SHARK_EPS_OURS]:.1f}",
                     f"{100 * item['below'][SHARK_EPS_PAPER]:.1f}"]
                    + [f"{100 * ch[p][0]:.1f} ({ch[p][1]:.1f})" for p in PROBES])
    L += _md_table(["data set", "viol. < 1e-4, % rows", "viol. < 1e-6, % rows", "pass: Walrus, % rows",
                    "pass: Shark ε = 1e-4, % rows", "pass: Shark ε = 1e-6, % rows"], rows) + [""]
    sent = []
    for item in study:
        ours, paper = item["runs"].get(SHARK_EPS_OURS), item["runs"].get(SHARK_EPS_PAPER)
        if ours is not None and paper is not None:
            sent.append(f"{item['label']} {paper.ms_per_epoch / ours.ms_per_epoch:.2f}×")
    if sent:
        L.append("Time per epoch at ε = 1e-6 relative to ε = 1e-4: " + ", ".join(sent) + ". The headline "
                 "tables above use ε = 1e-4, Shark's own default; we did not slow our baseline down to the "
                 "authors' setting.")
    return L


# ----------------------------------------------------------------------------- section 2

def run_accuracy(ctx: BenchContext) -> str:
    """Section ``accuracy``: test accuracy over the C grid beside the paper's Table 5.

    Walrus, no intercept, every C of the grid trained in the same passes
    (``streamwww.train`` with a list of C), each model stopped at
    ``gap <= 0.01 gap_1`` or ``max_iter``.

    Parameters
    ----------
    ctx : BenchContext

    Returns
    -------
    str
        The Markdown body of the section.
    """
    import streamwww as sw
    from sklearn.exceptions import ConvergenceWarning

    t_start = time.perf_counter()
    Cs = C_QUICK if ctx.quick else C_GRID
    max_iter = ACC_MAX_ITER[ctx.quick]
    acc: dict[str, list[float]] = {}
    status: dict[str, list[str]] = {}
    labels: dict[str, str] = {}
    with _one_numba_thread():
        datasets = {n: _dataset(ctx, n) for n in LIBSVM_SETS}
        _warm_up(datasets, multi_C=True)
        for n, (X, y, Xt, yt, label) in datasets.items():
            labels[n] = label
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                models = sw.train((X, y), C=list(Cs), tol=0.0, gap_decay=ACC_DELTA, max_iter=max_iter,
                                  fit_intercept=False, subproblem="walrus", random_state=ctx.seed, device="cpu")
            acc[n] = [100.0 * float(np.mean(m.predict(Xt) == yt)) for m in models]
            status[n] = [f"{m.n_iter_}" + ("" if m.converged_ else "*") for m in models]
            print(f"[accuracy] {label}: {time.perf_counter() - t0:.1f} s, epochs {status[n]}", flush=True)
    wall = time.perf_counter() - t_start

    idx = [C_GRID.index(C) for C in Cs]
    Cl = [_log2_label(C) for C in Cs]

    def bold_max(vals: list[float]) -> list[str]:
        best = max(vals)
        return [f"**{v:.2f}**" if v == best else f"{v:.2f}" for v in vals]

    L = [
        "Test accuracy (%) of the Weston–Watkins SVM trained by Walrus, no intercept, on the LIBSVM "
        "training files, evaluated on their `.t` test files, beside the paper's Table 5 (supplement "
        "A.6.3). The paper's protocol: for every C in the grid 2⁻⁶ … 2³, stop at the first epoch with "
        "gap_t ≤ δ·gap₁ and report the test accuracy; the best of each row in bold. Its text pairs Tables 5 "
        "and 6 with the lenient and the stricter stopping rule and the main text calls them δ ≈ 0.01 and "
        f"δ ≈ 0.001; the exact values are lost in our copy. We stop at δ = {ACC_DELTA:g} "
        f"(`gap_decay={ACC_DELTA:g}`, `tol=0`, at most {max_iter} epochs; `*` marks a model stopped by that "
        "limit). The paper bolds the best test accuracy of each row and discusses the C that achieves it "
        "(its main text speaks of grid search and cross-validation outcomes, but Table 5 lists test "
        "accuracy); we report the same and ran no cross-validation. All values of C are trained in the "
        f"same passes over the data (`streamwww.train(C=[...])`); seed {ctx.seed}; section wall time {wall:.0f} s.",
        "",
    ]
    if ctx.quick:
        L += ["**Quick run**: training rows subsampled (see labels) and only "
              f"C ∈ {{{', '.join(Cl)}}}; not comparable with the paper.", ""]
    rows = []
    for n in LIBSVM_SETS:
        paper = [PAPER_TABLE5[n][i] for i in idx]
        rows.append([f"{n}, paper Table 5"] + bold_max(paper))
        rows.append([f"{labels[n]}, ours"] + bold_max(acc[n]))
        rows.append([f"{labels[n]}, ours: epochs"] + status[n])
    L += _md_table(["data set \\ C"] + Cl, rows) + [""]
    for n in LIBSVM_SETS:
        paper = [PAPER_TABLE5[n][i] for i in idx]
        diff = np.abs(np.array(acc[n]) - np.array(paper))
        best_p = Cl[int(np.argmax(paper))]
        best_o = Cl[int(np.argmax(acc[n]))]
        L.append(f"- {labels[n]}: mean |ours − paper| {diff.mean():.2f} points (max {diff.max():.2f}); "
                 f"best C: paper {best_p} ({max(paper):.2f} %), ours {best_o} ({max(acc[n]):.2f} %).")
    return "\n".join(L)
