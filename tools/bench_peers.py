"""Section 3 of the benchmark suite (issue 6): peers on the same data, in one run.

    python tools/bench.py peers [--quick]

What is measured
----------------
On the LIBSVM sets dna, satimage, letter and sector (``--quick``: small random
subsamples of letter and sector) every method below is trained on the same
training rows and scored on the same test set:

=============  ==================================================================
ww-mem         streamwww, Weston-Watkins (WW), ``train((X, y))`` in memory
ww-stream      streamwww, WW, ``train(store)`` streamed from an 8-shard Zarr store
svc-cs         scikit-learn ``LinearSVC(multi_class="crammer_singer")``
svc-ovr        scikit-learn ``LinearSVC`` one-vs-rest, ``loss="hinge"``
liblinear      liblinear-official ``-s 4`` (Crammer-Singer)
sgd            ``SGDClassifier(loss="hinge").partial_fit`` streamed over the same shards
vw             Vowpal Wabbit ``--oaa K --loss_function hinge``
=============  ==================================================================

For each (method, data set) the script reports the training time, the time
from which the test accuracy stays no more than 0.5 points below the final
test accuracy, the final test accuracy, the resident memory after imports and
data loading, and the peak resident memory while training; and it draws test
accuracy against training time (``bench-peers-accuracy.png``).

How
---
* Every (method, data set) runs in a fresh subprocess (this file with
  ``child JSON``), so memory numbers are the child's own. After imports, data
  loading and a warm-up fit (JIT loading, first-call costs), the child records
  its RSS and resets the kernel's peak-RSS counter (``/proc/self/clear_refs``;
  a 5 ms polling thread where that is not allowed); the peak is read from
  ``VmHWM`` right after the measured run.
* Iterative methods (streamwww epochs, SGD epochs over the shards, VW passes)
  give an accuracy trajectory from one run: the test accuracy is computed after
  each epoch and its time is taken off the clock (for streamwww, inside the
  ``train`` callback, whose copies of W are also kept out of the peak memory).
* The batch solvers (LinearSVC, liblinear) have no callback; sklearn's
  Crammer-Singer solver also ignores ``max_iter``. Their trajectory is a grid of
  separate runs with looser stopping tolerances, each timed on its own; the
  tightest is the final model.
* All SVMs use C = 1 with a regularized intercept (a constant feature 1); SGD
  uses ``alpha = 1 / (C n)``, the same objective scaled; VW its defaults.
* streamwww stops by the paper's rule (gap <= 0.0009 gap_1); streamed runs
  (default ``mix_shards=2``) are capped at 300 epochs for the time budget (a
  streamed epoch has a fixed per-shard cost that dominates on these small sets).
"""

from __future__ import annotations

import gc
import json
import math
import os
import pickle
import shutil
import subprocess
import sys
import threading
import time
import warnings
from typing import Any

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _benchenv import LIBSVM_FILES, BenchContext, libsvm_file, load_libsvm, save_figure  # noqa: E402

C = 1.0
N_SHARDS = (8, 4)  # shards of the store (full, quick)
WITHIN = 0.5  # percentage points
GAP_DECAY = 0.0009  # streamwww's stopping rule: gap <= 0.0009 gap_1 (the paper's)

# method -> (label, loss, where the training data lives)
METHODS: dict[str, tuple[str, str, str]] = {
    "ww-mem": ("streamwww, in memory", "WW hinge", "memory"),
    "ww-stream": ("streamwww, streamed", "WW hinge", "store"),
    "svc-cs": ("LinearSVC crammer_singer", "Crammer-Singer hinge", "memory"),
    "svc-ovr": ("LinearSVC one-vs-rest", "OvR hinge", "memory"),
    "liblinear": ("liblinear-official -s 4", "Crammer-Singer hinge", "memory"),
    "sgd": ("SGDClassifier.partial_fit", "OvR hinge (SGD)", "store"),
    "vw": ("Vowpal Wabbit --oaa", "OvA hinge (online)", "memory (VW text)"),
}

# Effort settings; quick mode uses the second value.
SVC_CS_TOLS = ([1.0, 0.1, 0.01, 1e-3], [1.0, 0.1])
SVC_OVR_TOLS = ([1.0, 0.1, 0.01, 1e-3, 1e-4], [1.0, 0.1, 1e-4])
LIBLINEAR_EPS = ([10.0, 3.0, 1.0, 0.3, 0.1], [10.0, 1.0, 0.1])
SGD_EPOCHS = (10, 2)
VW_PASSES = (10, 3)
WW_MAX_ITER = (1000, 10)
WW_STREAM_MAX_ITER = (300, 10)  # a cap on the time budget (per-shard costs dominate small sets)
QUICK_ROWS = {"letter": (1500, 500), "sector": (600, 300)}
CHILD_TIMEOUT = (480, 60)


# ----------------------------------------------------------------------------------------------
# memory probes (used in the child)
# ----------------------------------------------------------------------------------------------

def _status_kib(field: str) -> int | None:
    """``field`` (e.g. ``VmRSS``) of ``/proc/self/status`` in KiB, or None off Linux."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def rss_bytes() -> int:
    """Current resident set size of this process in bytes."""
    kib = _status_kib("VmRSS")
    if kib is not None:
        return kib * 1024
    import psutil

    return int(psutil.Process().memory_info().rss)


class PeakRSS:
    """Peak resident memory from :meth:`start` on, with pauses.

    Resets the kernel's high-water mark (``echo 5 > /proc/self/clear_refs``)
    and reads ``VmHWM``: exact, and blind to the GIL. Where that is not
    possible a daemon thread polls the RSS every 5 ms (a lower bound).
    Between :meth:`pause` and :meth:`resume` (our own accuracy evaluations)
    nothing is counted: ``pause`` banks the peak so far, ``resume`` resets the
    high-water mark to the current RSS once the evaluation's arrays are freed.
    """

    def __init__(self) -> None:
        self._banked = 0
        self._poll_peak = 0
        self._paused = False
        self._thread: threading.Thread | None = None
        self.method = ""

    def _reset(self) -> bool:
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            return _status_kib("VmHWM") is not None
        except OSError:
            return False

    def start(self) -> None:
        """Start measuring (reset the high-water mark or start polling)."""
        if self._reset():
            self.method = "VmHWM"
            return
        self.method = "polling"
        self._poll_peak = rss_bytes()

        def poll() -> None:
            while True:
                time.sleep(0.005)
                if not self._paused:
                    self._poll_peak = max(self._poll_peak, rss_bytes())

        self._thread = threading.Thread(target=poll, daemon=True)
        self._thread.start()

    def _current_peak(self) -> int:
        if self.method == "VmHWM":
            return int(_status_kib("VmHWM")) * 1024
        self._poll_peak = max(self._poll_peak, rss_bytes())
        return self._poll_peak

    def pause(self) -> None:
        """Stop counting (bank the peak so far)."""
        self._banked = max(self._banked, self._current_peak())
        self._paused = True

    def resume(self) -> None:
        """Count again from the current RSS."""
        if self.method == "VmHWM":
            self._reset()
        else:
            self._poll_peak = rss_bytes()
        self._paused = False

    def peak(self) -> int:
        """Peak RSS in bytes since :meth:`start`, paused stretches excluded."""
        return max(self._banked, self._current_peak())


# ----------------------------------------------------------------------------------------------
# the methods (run in the child)
# ----------------------------------------------------------------------------------------------

def _accuracy(pred: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(np.asarray(pred) == np.asarray(y)) * 100.0)


def _load_arrays(args: dict) -> tuple:
    with open(args["arrays"], "rb") as f:
        return pickle.load(f)  # X, y, Xt, yt


def _load_test(args: dict) -> tuple:
    with open(args["test"], "rb") as f:
        return pickle.load(f)  # Xt, yt


class Method:
    """One method in the child: ``load`` (data), ``warm`` (first-call costs), ``fit`` (measured).

    ``fit(peak)`` returns a dict with ``traj`` (list of ``[seconds, accuracy %]`` in
    order of increasing effort), ``final_acc``, ``train_s``, ``grid`` (True when the
    points are separate runs), ``notes``; it records ``peak_rss`` (``peak.peak()``)
    right after the run whose model is the final one.
    """

    def __init__(self, args: dict) -> None:
        self.args = args
        self.quick = bool(args["quick"])
        self.seed = int(args["seed"])

    def load(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def warm(self) -> None:
        pass

    def fit(self, peak: PeakRSS) -> dict:  # pragma: no cover - overridden
        raise NotImplementedError


class WWMethod(Method):
    """streamwww WW SVM, in memory or streamed; test accuracy after every epoch via the callback."""

    def __init__(self, args: dict, streamed: bool) -> None:
        super().__init__(args)
        self.streamed = streamed

    def load(self) -> None:
        import streamwww as sw

        self.sw = sw
        if self.streamed:
            self.Xt, self.yt = _load_test(self.args)
            self.data: Any = self.args["store"]
            self.classes = sw.open_store(self.data).classes
        else:
            X, y, self.Xt, self.yt = _load_arrays(self.args)
            self.data = (X, y)
            self.classes = np.unique(y)

    def _kw(self) -> dict:
        max_iter = (WW_STREAM_MAX_ITER if self.streamed else WW_MAX_ITER)[self.quick]
        return dict(C=C, tol=0.0, gap_decay=GAP_DECAY, random_state=self.seed, max_iter=max_iter)

    def warm(self) -> None:
        # one epoch of the same call: Numba's compiled kernels (per k for small k), Dask start-up
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.sw.train(self.data, **{**self._kw(), "max_iter": 1})

    def fit(self, peak: PeakRSS) -> dict:
        traj: list[list[float]] = []
        eval_s = [0.0]
        t0 = [0.0]

        def callback(info: dict) -> None:
            # Our evaluation is off the clock and off the memory count: weights() copies W.
            c0 = time.perf_counter()
            peak.pause()
            coef, intercept = info["weights"](0)
            scores = np.asarray(self.Xt @ coef.T) + intercept
            acc = _accuracy(self.classes[np.argmax(scores, axis=1)], self.yt)
            del coef, intercept, scores
            peak.resume()
            # wall time of train() so far minus our earlier evaluations; it includes the
            # duality-gap pass of the stopping rule
            traj.append([c0 - t0[0] - eval_s[0], acc])
            eval_s[0] += time.perf_counter() - c0

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            t0[0] = time.perf_counter()
            model = self.sw.train(self.data, callback=callback, **self._kw())
            train_s = time.perf_counter() - t0[0] - eval_s[0]
        peak_rss = peak.peak()
        final = float(model.score(self.Xt, self.yt) * 100.0)
        capped = any("did not converge" in str(w.message) for w in caught)
        h = model.history_[-1]
        status = (f"max_iter={model.n_iter_} reached, gap {h['gap'] / model.history_[0]['gap']:.2g}·gap₁"
                  if capped else f"gap ≤ {GAP_DECAY}·gap₁")
        notes = (f"{model.n_iter_} epochs ({status}); BCD passes {h['time']:.3g} s of the "
                 f"{train_s:.3g} s (the rest: set-up and the per-epoch duality-gap pass)")
        if abs(final - traj[-1][1]) > 1e-9:
            notes += f"; last callback accuracy {traj[-1][1]:.2f} differs from score()"
        return dict(traj=traj, final_acc=final, train_s=train_s, grid=False, notes=notes,
                    peak_rss=peak_rss, epochs=int(model.n_iter_))


class SVCMethod(Method):
    """scikit-learn LinearSVC over a grid of tolerances (tightest last = final)."""

    def __init__(self, args: dict, crammer_singer: bool) -> None:
        super().__init__(args)
        self.cs = crammer_singer

    def load(self) -> None:
        from sklearn.svm import LinearSVC

        self.LinearSVC = LinearSVC
        self.X, self.y, self.Xt, self.yt = _load_arrays(self.args)

    def _make(self, tol: float):
        if self.cs:
            return self.LinearSVC(C=C, multi_class="crammer_singer", tol=tol, random_state=self.seed)
        return self.LinearSVC(C=C, loss="hinge", dual=True, tol=tol, random_state=self.seed)

    def warm(self) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._make(0.1).fit(self.X[:50], self.y[:50])

    def fit(self, peak: PeakRSS) -> dict:
        tols = (SVC_CS_TOLS if self.cs else SVC_OVR_TOLS)[self.quick]
        runs: dict[float, tuple[float, float, int, bool]] = {}
        peak_rss = 0
        for tol in sorted(tols):  # the final (tightest) run first: its peak memory is the one reported
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                t = time.perf_counter()
                m = self._make(tol).fit(self.X, self.y)
                secs = time.perf_counter() - t
            if not runs:
                peak_rss = peak.peak()
            capped = any("converge" in str(w.message).lower() for w in caught)
            runs[tol] = (secs, float(m.score(self.Xt, self.yt) * 100.0), int(np.max(m.n_iter_)), capped)
        order = sorted(runs, reverse=True)
        traj = [[runs[t][0], runs[t][1]] for t in order]
        final_tol = order[-1]
        secs, acc, n_iter, capped = runs[final_tol]
        notes = f"tol grid {', '.join(f'{t:g}' for t in order)} (separate runs); final tol={final_tol:g}, {n_iter} iterations"
        if capped and self.cs:
            notes += ("; sklearn's ConvergenceWarning (n_iter ≥ max_iter=1000) is spurious: its Crammer–Singer "
                      "solver does not take max_iter")
        elif capped:
            notes += "; stopped at max_iter=1000 (ConvergenceWarning)"
        return dict(traj=traj, final_acc=acc, train_s=secs, grid=True, notes=notes, peak_rss=peak_rss)


class LiblinearMethod(Method):
    """liblinear-official ``-s 4`` (Crammer-Singer) over a grid of ``-e`` (tightest = default 0.1)."""

    def load(self) -> None:
        from liblinear import liblinearutil as ll

        self.ll = ll
        X, y, self.Xt, self.yt = _load_arrays(self.args)
        t = time.perf_counter()
        self.prob = ll.problem(y, X)  # liblinear's own copy of the data (part of loading)
        self.build_s = time.perf_counter() - t
        del X, y

    def warm(self) -> None:
        tiny = self.ll.problem(np.array([1.0, 2.0, 1.0, 2.0]), np.eye(4, 3))
        self.ll.train(tiny, self.ll.parameter("-s 4 -c 1 -B 1 -q"))

    def fit(self, peak: PeakRSS) -> dict:
        eps_grid = LIBLINEAR_EPS[self.quick]
        runs: dict[float, tuple[float, float]] = {}
        peak_rss = 0
        for eps in sorted(eps_grid):
            param = self.ll.parameter(f"-s 4 -c {C:g} -B 1 -e {eps:g} -q")
            t = time.perf_counter()
            m = self.ll.train(self.prob, param)
            secs = time.perf_counter() - t
            if not runs:
                peak_rss = peak.peak()
            pred, _, _ = self.ll.predict([], self.Xt, m, "-q")
            runs[eps] = (secs, _accuracy(np.asarray(pred), self.yt))
        order = sorted(runs, reverse=True)
        traj = [[runs[e][0], runs[e][1]] for e in order]
        notes = (f"-e grid {', '.join(f'{e:g}' for e in order)} (separate runs); final -e {order[-1]:g} "
                 f"(default); -B 1; building liblinear's problem took {self.build_s:.3g} s (not counted)")
        return dict(traj=traj, final_acc=runs[order[-1]][1], train_s=runs[order[-1]][0], grid=True,
                    notes=notes, peak_rss=peak_rss)


class SGDMethod(Method):
    """``SGDClassifier(loss="hinge").partial_fit`` shard by shard, shard order shuffled each epoch."""

    def load(self) -> None:
        from sklearn.linear_model import SGDClassifier

        import streamwww as sw

        self.SGD = SGDClassifier
        self.store = sw.open_store(self.args["store"])
        self.classes = np.asarray(self.store.classes)
        self.Xt, self.yt = _load_test(self.args)

    def _make(self):
        return self.SGD(loss="hinge", alpha=1.0 / (C * self.store.n_rows), random_state=self.seed)

    def warm(self) -> None:
        X, y = self.store.read_shard(0)
        self._make().partial_fit(X[:50], self.classes[y[:50]], classes=self.classes)
        del X, y

    def fit(self, peak: PeakRSS) -> dict:
        clf = self._make()
        rng = np.random.default_rng(self.seed)
        traj, clock, io_s = [], 0.0, 0.0
        epochs = SGD_EPOCHS[self.quick]
        for _ in range(epochs):
            t = time.perf_counter()
            for s in rng.permutation(self.store.n_shards):
                r = time.perf_counter()
                X, y = self.store.read_shard(int(s))
                io_s += time.perf_counter() - r
                clf.partial_fit(X, self.classes[y], classes=self.classes)
                del X, y
            clock += time.perf_counter() - t
            traj.append([clock, float(clf.score(self.Xt, self.yt) * 100.0)])
        peak_rss = peak.peak()
        notes = (f"{epochs} epochs over {self.store.n_shards} shards, alpha = 1/(C n), "
                 f"learning_rate='optimal'; shard reads {io_s:.3g} s (counted)")
        return dict(traj=traj, final_acc=traj[-1][1], train_s=clock, grid=False, notes=notes,
                    peak_rss=peak_rss, epochs=epochs)


def _vw_lines(X, labels=None) -> list[str]:
    """VW text lines ``[label ]| j:v ...`` (1-based feature names, non-zeros only)."""
    import scipy.sparse as sp

    X = sp.csr_matrix(X)
    indptr, indices, data = X.indptr, X.indices + 1, X.data
    out = []
    for i in range(X.shape[0]):
        a, b = indptr[i], indptr[i + 1]
        feats = " ".join(f"{j}:{v:.17g}" for j, v in zip(indices[a:b].tolist(), data[a:b].tolist()))
        out.append(f"{labels[i]} | {feats}" if labels is not None else f"| {feats}")
    return out


class VWMethod(Method):
    """Vowpal Wabbit ``--oaa K --loss_function hinge``: repeated ``learn`` passes over VW text.

    The training rows are the shard store's (same shuffled order as SGD), formatted into VW
    text once before the clock starts; each pass feeds every line to ``Workspace.learn``,
    so VW's text parsing is part of the training time.
    """

    def load(self) -> None:
        from vowpalwabbit import Workspace

        import streamwww as sw

        self.Workspace = Workspace
        store = sw.open_store(self.args["store"])
        self.classes = np.asarray(store.classes)
        self.k, self.d = store.n_classes, store.n_features
        self.Xt, self.yt = _load_test(self.args)
        t = time.perf_counter()
        self.train_lines = []
        for i in range(store.n_shards):
            X, y = store.read_shard(i)
            self.train_lines += _vw_lines(X, y + 1)  # classes 1..K
        self.test_lines = _vw_lines(self.Xt)
        self.format_s = time.perf_counter() - t
        del self.Xt
        # VW's --oaa copies of the weights share one 2^b table (one slot per class, rounded up
        # to a power of 2, per feature): the smallest b where d + 1 features cannot collide
        wpp = 1 << int(math.ceil(math.log2(self.k)))
        self.bits = int(math.ceil(math.log2((self.d + 1) * wpp)))

    def warm(self) -> None:
        ws = self.Workspace(f"--oaa {self.k} --loss_function hinge --quiet -b 4")
        for line in self.train_lines[:10]:
            ws.learn(line)
        ws.finish()

    def fit(self, peak: PeakRSS) -> dict:
        passes = VW_PASSES[self.quick]
        t = time.perf_counter()
        ws = self.Workspace(f"--oaa {self.k} --loss_function hinge --quiet -b {self.bits}")
        clock = time.perf_counter() - t
        traj = []
        for _ in range(passes):
            t = time.perf_counter()
            for line in self.train_lines:
                ws.learn(line)
            clock += time.perf_counter() - t
            pred = np.fromiter((ws.predict(line) for line in self.test_lines), dtype=np.int64,
                               count=len(self.test_lines))
            traj.append([clock, _accuracy(self.classes[pred - 1], self.yt)])
        peak_rss = peak.peak()
        ws.finish()
        notes = (f"{passes} passes, -b {self.bits}, defaults otherwise (adaptive, normalized, "
                 f"no L2); text formatting {self.format_s:.3g} s (not counted)")
        return dict(traj=traj, final_acc=traj[-1][1], train_s=clock, grid=False, notes=notes,
                    peak_rss=peak_rss, epochs=passes)


def _make_method(args: dict) -> Method:
    name = args["method"]
    if name in ("ww-mem", "ww-stream"):
        return WWMethod(args, streamed=name == "ww-stream")
    if name in ("svc-cs", "svc-ovr"):
        return SVCMethod(args, crammer_singer=name == "svc-cs")
    return {"liblinear": LiblinearMethod, "sgd": SGDMethod, "vw": VWMethod}[name](args)


def child_main(args: dict) -> dict:
    """Run one (method, data set) measurement in this (fresh) process.

    Parameters
    ----------
    args : dict
        ``method``, ``arrays`` (pickle of ``X, y, Xt, yt``), ``test`` (pickle of
        ``Xt, yt``), ``store`` (shard store path), ``quick``, ``seed``.

    Returns
    -------
    dict
        ``status`` ("ok" or "not installed"), and for "ok": ``traj``, ``final_acc``,
        ``train_s``, ``grid``, ``notes``, ``base_rss``, ``peak_rss``, ``peak_method``.
    """
    method = _make_method(args)
    try:
        method.load()
    except ImportError as e:
        return {"status": "not installed", "error": str(e)}
    method.warm()
    gc.collect()
    base = rss_bytes()
    peak = PeakRSS()
    peak.start()
    out = method.fit(peak)
    out.update(status="ok", base_rss=base, peak_method=peak.method)
    return out


# ----------------------------------------------------------------------------------------------
# the parent: data preparation, children, report
# ----------------------------------------------------------------------------------------------

def _int32_indices(*mats) -> None:
    """Make CSR index arrays int32 in place (LinearSVC refuses int64 ones)."""
    import scipy.sparse as sp

    for A in mats:
        if sp.issparse(A):
            A.indices = A.indices.astype(np.int32)
            A.indptr = A.indptr.astype(np.int32)


def prepare(ctx: BenchContext, name: str) -> dict:
    """Arrays (pickled) and an 8-shard shuffled float64 Zarr store of one data set.

    Parameters
    ----------
    ctx : BenchContext
    name : str
        One of dna, satimage, letter, sector.

    Returns
    -------
    dict
        Paths (``arrays``, ``test``, ``store``) and facts about the data set
        (rows, features, classes, conversion time or None when the store was reused).
    """
    from sklearn.datasets import dump_svmlight_file

    import streamwww as sw
    from streamwww.io import convert_libsvm

    folder = os.path.join(ctx.workdir, "peers-quick" if ctx.quick else "peers", name)
    os.makedirs(folder, exist_ok=True)
    X, y, Xt, yt = load_libsvm(ctx, name)
    _int32_indices(X, Xt)
    source = libsvm_file(ctx, LIBSVM_FILES[name][0])
    if ctx.quick:  # random subsample; the store is converted from its LIBSVM text like the full set
        n_tr, n_te = QUICK_ROWS[name]
        rng = np.random.default_rng(ctx.seed)
        i_tr = np.sort(rng.choice(X.shape[0], min(n_tr, X.shape[0]), replace=False))
        i_te = np.sort(rng.choice(Xt.shape[0], min(n_te, Xt.shape[0]), replace=False))
        X, y, Xt, yt = X[i_tr], y[i_tr], Xt[i_te], yt[i_te]
        source = os.path.join(folder, "train.libsvm")
        dump_svmlight_file(X, y, source, zero_based=False)
    arrays, test = os.path.join(folder, "arrays.pkl"), os.path.join(folder, "test.pkl")
    with open(arrays, "wb") as f:
        pickle.dump((X, y, Xt, yt), f, protocol=5)
    with open(test, "wb") as f:
        pickle.dump((Xt, yt), f, protocol=5)

    store_path = os.path.join(folder, "train.zarr")
    shard_rows = -(-X.shape[0] // N_SHARDS[ctx.quick])
    convert_s = None
    try:
        store = sw.open_store(store_path)
        opts = store.metadata["provenance"]["options"]
        reuse = (store.n_rows == X.shape[0] and store.n_features == X.shape[1]
                 and opts.get("shard_rows") == shard_rows and opts.get("seed") == ctx.seed
                 and store.dtype == np.float64 and not ctx.quick)
    except Exception:
        reuse = False
    if not reuse:
        t = time.perf_counter()
        store = convert_libsvm(source, store_path, shard_rows=shard_rows, shuffle=True, seed=ctx.seed,
                               dtype=np.float64, n_features=X.shape[1], overwrite=True)
        convert_s = time.perf_counter() - t
    import scipy.sparse as sp

    return dict(name=name, arrays=arrays, test=test, store=store_path, n=X.shape[0], n_test=Xt.shape[0],
                d=X.shape[1], k=len(np.unique(y)), nnz=int(X.nnz if sp.issparse(X) else np.count_nonzero(X)),
                layout=store.layout, n_shards=store.n_shards, convert_s=convert_s)


def run_child(ctx: BenchContext, data: dict, method: str) -> dict:
    """Run :func:`child_main` for ``method`` on ``data`` in a fresh interpreter."""
    args = dict(method=method, arrays=data["arrays"], test=data["test"], store=data["store"],
                quick=ctx.quick, seed=ctx.seed)
    # A private TMPDIR, removed afterwards: streamwww keeps beta (every version, while it
    # trains without checkpoint_dir) under $TMPDIR, and a killed child would leave it there.
    tmp = os.path.join(ctx.workdir, "peers-tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    env = dict(os.environ, PYTHONWARNINGS="ignore", TMPDIR=tmp)
    t = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "child", json.dumps(args)],
                              capture_output=True, text=True, env=env, timeout=CHILD_TIMEOUT[ctx.quick])
    except subprocess.TimeoutExpired:
        return {"status": f"timed out after {CHILD_TIMEOUT[ctx.quick]} s"}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    wall = time.perf_counter() - t
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("RESULT "):
            res = json.loads(line[len("RESULT "):])
            res["child_wall_s"] = wall
            return res
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return {"status": f"failed (exit {proc.returncode}): {tail[:200]}"}


def time_to_within(traj: list[list[float]], final: float, within: float = WITHIN) -> float | None:
    """Earliest time from which every later point is at least ``final - within``.

    Parameters
    ----------
    traj : list of [seconds, accuracy %]
        In order of increasing effort (epochs, passes, or tighter tolerances).
    final : float
        The final accuracy (%).
    within : float
        Percentage points.

    Returns
    -------
    float or None
        None for an empty trajectory. (A point above the final accuracy counts as
        reached: the accuracy of iterative methods fluctuates by a few tenths.)
    """
    t_hit = None
    for t, acc in reversed(traj):
        if acc >= final - within - 1e-9:
            t_hit = t
        else:
            break
    return t_hit


def _secs(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{x:.3g} s" if x >= 0.001 else f"{x * 1e3:.2g} ms"


def _mib(b: float) -> str:
    return f"{b / 2**20:,.0f}"


def plot(ctx: BenchContext, results: dict, datasets: list[dict]) -> str:
    """Accuracy vs training time, one panel per data set, one line per method; returns the file name."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fname = "bench-peers-accuracy.png"
    n = len(datasets)
    cols = min(n, 2)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6.2 * cols, 4.2 * rows), squeeze=False)
    colors = dict(zip(METHODS, plt.get_cmap("tab10").colors))
    for ax, data in zip(axes.flat, datasets):
        for m, (label, _, _) in METHODS.items():
            r = results[data["name"]].get(m, {})
            if r.get("status") != "ok" or not r["traj"]:
                continue
            t = np.maximum([p[0] for p in r["traj"]], 1e-4)
            a = [p[1] for p in r["traj"]]
            style = dict(ls="--", marker="o", ms=4) if r["grid"] else dict(ls="-", marker=".", ms=3)
            ax.plot(t, a, color=colors[m], label=label + (" (tol grid)" if r["grid"] else ""), **style)
        ax.set_xscale("log")
        ax.set_title(f"{data['name']} (n={data['n']:,}, d={data['d']:,}, k={data['k']})")
        ax.set_xlabel("training time (s)")
        ax.set_ylabel("test accuracy (%)")
        ax.grid(alpha=0.3)
        lo = [p[1] for m in METHODS for p in results[data["name"]].get(m, {}).get("traj", [])]
        if lo:  # keep the interesting range visible; early SGD/VW points may be far below
            top = max(lo)
            ax.set_ylim(max(min(lo), top - 30) - 1, top + 1)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7, loc="lower right")
    save_figure(fig, os.path.join(ctx.plots_dir, fname))
    return fname


def run(ctx: BenchContext) -> str:
    """Run the peers section and return its Markdown body.

    Parameters
    ----------
    ctx : BenchContext

    Returns
    -------
    str
        Markdown: set-up, data, one results table per data set, the plot, notes.
    """
    names = list(QUICK_ROWS) if ctx.quick else ["dna", "satimage", "letter", "sector"]
    t_start = time.perf_counter()
    datasets = [prepare(ctx, n) for n in names]
    results: dict[str, dict[str, dict]] = {}
    for data in datasets:
        results[data["name"]] = {}
        for m in METHODS:
            r = results[data["name"]][m] = run_child(ctx, data, m)
            print(f"[peers] {data['name']:9s} {m:10s} {r.get('status')}, child {r.get('child_wall_s', 0):.1f} s "
                  f"(section {time.perf_counter() - t_start:.0f} s)", file=sys.stderr, flush=True)
    try:
        fname = plot(ctx, results, datasets)
    except ImportError as e:  # matplotlib missing: the tables still stand
        fname = None
        print(f"[peers] no plot: {e}", file=sys.stderr)

    q = "; **quick mode: small random subsamples, fewer epochs and a shorter tolerance grid**" \
        if ctx.quick else ""
    out = [
        "All methods train on the same rows and are scored on the same test set; every (method, data set) "
        f"is a fresh subprocess{q}.",
        "",
        "**Objectives.** streamwww minimizes the Weston–Watkins (WW) hinge loss "
        "Σᵢ Σ_{j≠yᵢ} max(0, 1 − (w_{yᵢ} − w_j)ᵀxᵢ); LinearSVC `crammer_singer` and liblinear `-s 4` the "
        "Crammer–Singer loss Σᵢ max_{j≠yᵢ} max(0, 1 − (w_{yᵢ} − w_j)ᵀxᵢ); LinearSVC one-vs-rest (`loss='hinge'`, "
        "dual) and `SGDClassifier` k binary hinge losses; VW `--oaa` k online binary hinge learners. "
        f"The SVMs use C = {C:g} with ½‖W‖² and a regularized intercept (constant feature 1: "
        "`fit_intercept=True, intercept_scaling=1`, liblinear `-B 1`); SGD uses alpha = 1/(C·n) (the same "
        "objective divided by C·n) and an unregularized intercept; VW runs with its defaults (no L2).",
        "",
        "**Stopping.** streamwww: the paper's rule, duality gap ≤ "
        f"{GAP_DECAY}·gap₁ (`tol=0, gap_decay={GAP_DECAY}`), at most {WW_MAX_ITER[ctx.quick]} epochs in memory "
        f"and {WW_STREAM_MAX_ITER[ctx.quick]} streamed (a cap for the time budget: a streamed epoch costs "
        "more on these small sets; epochs and gaps reached are in the notes). LinearSVC and liblinear: their stopping "
        "tolerance (final tol: LinearSVC Crammer–Singer "
        f"{min(SVC_CS_TOLS[ctx.quick]):g} — sklearn's default 1e-4 is left out for the time budget —, "
        f"one-vs-rest {min(SVC_OVR_TOLS[ctx.quick]):g} with max_iter=1000, liblinear `-e {min(LIBLINEAR_EPS[ctx.quick]):g}` "
        f"(its default)). SGD: {SGD_EPOCHS[ctx.quick]} epochs over the shards; VW: {VW_PASSES[ctx.quick]} passes.",
        "",
        "**Times.** *train* is the wall time of the final model's training: for streamwww the `train()` call "
        "(set-up, BCD passes and the per-epoch duality-gap pass its stopping rule needs), with the time of "
        "our test-accuracy evaluation in the per-epoch callback taken off, "
        "for SGD the shard reads and `partial_fit` calls, for VW the `learn` calls "
        "(text parsing inside VW included, formatting the text beforehand not), for LinearSVC and liblinear "
        "the `fit`/`train` call. *to −0.5* is the earliest time from which the test accuracy stays at or above "
        f"the final accuracy minus {WITHIN} points (a point above the final one counts as reached): from the per-epoch (per-pass) trajectory for the iterative "
        "methods, and for the batch solvers — which have no callback, and sklearn's Crammer–Singer solver "
        "ignores `max_iter` — from a grid of separate runs with looser tolerances (listed in the notes), "
        "each timed on its own: the time of the cheapest run from which on all tighter runs are at most "
        f"{WITHIN} points below the final one. Before the clock starts each child does a warm-up fit (streamwww: one epoch of "
        "the same call, which loads the compiled kernels and starts Dask's in-process client for the store).",
        "",
        "**Memory.** *RSS loaded*: the child's resident memory after imports, data loading and the warm-up "
        "(in-memory methods hold train and test set; the streaming ones, ww-stream and sgd, only the test set; "
        "VW holds the training rows as VW text); *peak*: the highest RSS during the final model's training "
        "(Linux `VmHWM`, reset just before; streamwww's per-epoch callback, which copies W for our evaluation, "
        "is excluded: the high-water mark is read on entry and reset on exit); *Δ* = peak − loaded.",
        "",
        "### Data",
        "",
        "| data | train rows | test rows | features | classes | non-zeros (train) | store | conversion |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for d in datasets:
        conv = _secs(d["convert_s"]) if d["convert_s"] is not None else "reused from an earlier run"
        out.append(f"| {d['name']} | {d['n']:,} | {d['n_test']:,} | {d['d']:,} | {d['k']} | {d['nnz']:,} | "
                   f"Zarr, {d['layout']}, float64, {d['n_shards']} shards, shuffled (seed {ctx.seed}) | {conv} |")
    out += ["", "### Results", ""]
    for d in datasets:
        out += [f"**{d['name']}**", "",
                "| method | loss | data | train | to −0.5 | final test acc. % | RSS loaded MiB | peak MiB | Δ MiB "
                "| notes |",
                "|---|---|---|---|---|---|---|---|---|---|"]
        for m, (label, loss, where) in METHODS.items():
            r = results[d["name"]][m]
            if r.get("status") != "ok":
                out.append(f"| {label} | {loss} | {where} | {r.get('status')} | | | | | | |")
                continue
            t05 = time_to_within(r["traj"], r["final_acc"])
            where = f"store, {d['n_shards']} shards" if where == "store" else where
            out.append(f"| {label} | {loss} | {where} | {_secs(r['train_s'])} | {_secs(t05)} | "
                       f"{r['final_acc']:.2f} | {_mib(r['base_rss'])} | {_mib(r['peak_rss'])} | "
                       f"{_mib(r['peak_rss'] - r['base_rss'])} | {r['notes']} |")
        out.append("")
    methods_peak = {r.get("peak_method") for res in results.values() for r in res.values()} - {None}
    if fname is not None:
        out += [ctx.plot_link(fname), "",
                "Accuracy vs training time; solid lines: one run, a point per epoch / pass; dashed lines with "
                "circles: separate runs of the batch solvers over their tolerance grid (each at its own time).",
                ""]
    out += [
            f"Peak memory method: {', '.join(sorted(methods_peak)) or 'n/a'}. Section wall time "
            f"{time.perf_counter() - t_start:.0f} s (including data preparation and "
            f"{sum(len(r) for r in results.values())} child processes)."]
    return "\n".join(out)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "child":
        warnings.simplefilter("ignore")
        result = child_main(json.loads(sys.argv[2]))
        print("RESULT " + json.dumps(result), flush=True)
    else:
        print("usage: python tools/bench.py peers [--quick]   (this module is a section of bench.py)",
              file=sys.stderr)
        sys.exit(2)
