"""Crammer-Singer, exact, on the same engine (issue 55): streamwww CS vs LIBLINEAR -s 4 vs LinearSVC(crammer_singer).

    python tools/bench_cs.py [--sets dna,satimage,letter,sector] [--repeats 3] [--out docs/benchmarks.md]
                             [--json FILE] [--data-dir ../shared/data/libsvm] [--workdir DIR]
                             [--max-iter 1000] [--traj-max-iter N] [--quick]
                             [--generated ROWS [--gen-features 100000] [--gen-nnz 40] [--gen-classes 20]
                              [--gen-shard-mb 16]]

What is measured
----------------
For each data set (LIBSVM ``NAME.scale`` for training, ``NAME.scale.t`` for testing,
decompressed from ``--data-dir`` into ``--workdir`` and read by ``bench_accuracy.load_dataset``:
``load_svmlight_file``'s CSR matrices with int32 indices, the test set's feature count
aligned to the training set's, the same matrices for every method; letter too is CSR),
every method below minimizes an objective with C = 1 and **no bias / intercept**, on one
thread (``OMP_NUM_THREADS``, ``NUMBA_NUM_THREADS``, ``OPENBLAS_NUM_THREADS`` and
``MKL_NUM_THREADS`` are set to 1 before NumPy or Numba load; streamwww gets ``n_jobs=1``):

``sw-cs``
    ``streamwww.train((X, y), C=1, loss="cs", fit_intercept=False, tol=1e-3, max_iter=1000,
    random_state=0, n_jobs=1, callback=cb)``: the Crammer-Singer (CS) primal
    ``P(W) = 1/2 ||W||_F^2 + C sum_i max(0, max_{j != y_i} 1 - (w_{y_i} - w_j)^T x_i)``,
    stopped at a certified relative duality gap ``(P - D) / P <= 1e-3`` (the default
    ``eval_every="auto"``). The time is the wall time of the whole ``train`` call (set-up,
    BCD passes, the objective passes of the stopping rule, building the model), after a
    warm-up fit of one epoch on the same data (which loads the compiled kernels, so no JIT
    compile is timed); the callback only records ``epoch, time, primal, dual, rel_gap`` and
    its own (microseconds of) time is taken off.
``ll-default`` / ``ll-tight``
    liblinear-official ``-s 4 -c 1`` without ``-B`` (no bias), the default stop ``-e 0.1`` and
    a tight ``-e 0.001``. The ``train`` call on a prebuilt ``problem`` is timed (building the
    ``problem`` from the CSR matrix is reported apart). Instead of ``-q`` a ctypes print
    function collects liblinear's own output (its ``#iter`` and its dual objective "Objective
    value", a dot every 10 iterations: nothing measurable). LIBLINEAR's solver permutes with
    the C library's ``rand()``, which it never seeds: the script calls ``srand(0)`` before
    every run, so repeats train the same model.
``svc``
    ``sklearn.svm.LinearSVC(C=1, multi_class="crammer_singer", fit_intercept=False,
    random_state=0)`` at its defaults ``tol=1e-4, max_iter=1000`` (the ``fit`` call timed).
    Its settings differ from ``-s 4``'s: ``tol`` is liblinear's ``-e`` (so 1e-4 is 1000x
    tighter than ``-s 4``'s default 0.1), and its Crammer-Singer solver ignores ``max_iter``
    (it stops at liblinear's internal 100000 iterations; ``n_iter_`` can exceed 1000, and
    sklearn then warns that it did not converge although it did: the notes say which).
``sw-ww``
    ``streamwww.train((X, y), C=1, fit_intercept=False, tol=1e-3, random_state=0, n_jobs=1)``,
    the Weston-Watkins (WW) objective, timed like ``sw-cs``: its primal is of another
    objective (not compared); its time and test accuracy let users choose between the two.

Every model's weights ``W`` (n_features x k, columns in sorted class order) are read back
(``coef_``; for LIBLINEAR the raw ``model.w``, laid out ``w[feature * nr_class + label_idx]``
in ``model.get_labels()`` order, the order of first appearance in the training labels,
reordered to the sorted classes) and the CS primal is computed here in NumPy
(:func:`cs_primal`, checked at start against a direct double loop on a tiny problem), and
the test accuracy from ``argmax(X_test W)``. *rel. diff* is ``(P - P_best) / P_best``,
``P_best`` the smallest CS primal of any run on that data set (including the trajectory
run below).

"Time to equal primal values": a second streamwww CS run, ``eval_every=1, tol=1e-6`` (an
objective pass after every epoch; at most ``--traj-max-iter`` epochs) with the test accuracy
computed in the callback (its time taken off), stopped by the callback as soon as its primal is at or below every target's:
the medians of LIBLINEAR ``-e 0.1``, LIBLINEAR ``-e 0.001`` and LinearSVC. For each target,
the first epoch whose primal is <= it: the wall time of the call up to it (set-up, BCD
passes and the objective pass of every epoch, which the default ``eval_every="auto"``
mostly skips: an upper bound), and ``info["time"]`` (the BCD passes alone: a lower bound),
beside the target method's own time.

Each method gets a warm-up fit on the same data before its first measured one. The
``--repeats`` (default 3) are interleaved (in each repeat every method runs once, in an
order rotated by the repeat); a time is the median over the repeats, and so are primal,
accuracy and iteration counts (for the seeded runs they are the same in every repeat: the
JSON keeps every repeat). ``--quick``: random subsamples of a few hundred rows and one
repeat, a smoke test of this tool (under a minute for dna and satimage), not a benchmark.

``--generated ROWS`` (issue 55's "a generated set too large for memory"; default 0: off) adds
a section on a set that is never in memory: ``streamwww.io.make_data`` (``streamwww
make-data``) writes ``ROWS + ROWS // 10`` rows (``--gen-features`` features, ``--gen-nnz``
non-zeros a row, ``--gen-classes`` classes, seed 0) as one LIBSVM text file, split by lines
into the first ``ROWS`` (training) and the rest (test): the generator's class prototypes and
class supports are hashes of the seed, so another seed would be another problem, while
rows of one seed are independent draws of the same one. ``streamwww.convert`` makes Zarr
stores of them (training shards of at most ``--gen-shard-mb`` MiB in memory, the test store
``like`` the training one, and a 200-row store of the same shape for the warm-ups); the
stores are kept in ``--workdir`` and reused (the text files are removed). Then, for
``loss="cs"`` and ``loss="ww"``, each run in a fresh subprocess (so that its peak RSS,
``resource.getrusage(RUSAGE_SELF).ru_maxrss``, is its own):
``streamwww.train(STORE, C=1, fit_intercept=False, tol=1e-3, max_iter=1000, random_state=0,
n_jobs=1, memory_budget=0)`` timed as a whole after a 2-epoch warm-up fit on the tiny store
(which loads the compiled kernels). ``memory_budget=0`` keeps no decoded shard between
epochs: every epoch reads every shard from the store (the out-of-core path), and the dual
variables live in a scratch file. Reported: epochs, the certified relative gap, the time, the
test accuracy (``model.score(test_store)``, off the clock), peak RSS, and the store's size
on disk. LIBLINEAR and LinearSVC are not run there (they need the data in memory).
``--repeats`` applies (medians); ``--quick`` caps it at 2,000 rows of 2,000 features.

The Markdown report (header with machine, versions and the command, then one table per
data set, the time-to-equal-primal table, the generated set's section and the checks) is printed and, with ``--out``,
replaces the ``<!-- bench-cs -->`` block of that file; ``--json`` writes the raw numbers.
Until ``streamwww.train`` has a ``loss`` parameter the CS rows say so, everything else
runs, and the script exits with status 1.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # one thread for every method; before NumPy, Numba or liblinear load

import argparse  # noqa: E402
import ctypes  # noqa: E402
import gc  # noqa: E402
import inspect  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
import warnings  # noqa: E402
from statistics import median  # noqa: E402
from typing import Callable  # noqa: E402

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from _benchenv import LIBSVM_FILES, BenchContext, header, replace_section, version_map  # noqa: E402
from bench_accuracy import Dataset, _csr32, _uptime, load_dataset  # noqa: E402

C = 1.0
SEED = 0
TOL = 1e-3  # streamwww's stop: certified relative duality gap
TRAJ_TOL = 1e-6  # the trajectory run's (it stops at the targets first, as a rule)
LL_EPS = {"ll-default": 0.1, "ll-tight": 1e-3}  # -s 4's default -e, and a tight one
SETS = tuple(LIBSVM_FILES)  # dna, satimage, letter, sector
QUICK_ROWS = {"dna": (500, 300), "satimage": (500, 300), "letter": (800, 400), "sector": (400, 200)}
QUICK_MAX_ITER = 200
MARKER = "bench-cs"
DEFAULT_WORKDIR = os.path.join(tempfile.gettempdir(), "streamwww-bench-cs")

# method -> (label, objective, settings)
METHODS: dict[str, tuple[str, str, str]] = {
    "sw-cs": ("streamwww CS", "Crammer–Singer",
              "`train(loss='cs', fit_intercept=False, tol=1e-3, n_jobs=1)`: stop at certified rel. gap ≤ 1e-3"),
    "ll-default": ("LIBLINEAR -s 4", "Crammer–Singer", "`-s 4 -c 1`, no `-B`; default stop `-e 0.1`"),
    "ll-tight": ("LIBLINEAR -s 4 -e 0.001", "Crammer–Singer", "`-s 4 -c 1 -e 0.001`, no `-B`"),
    "svc": ("LinearSVC(crammer_singer)", "Crammer–Singer",
            "`C=1, fit_intercept=False`, defaults `tol=1e-4, max_iter=1000` (max_iter ignored by its CS solver)"),
    "sw-ww": ("streamwww WW", "Weston–Watkins", "`train(fit_intercept=False, tol=1e-3, n_jobs=1)`"),
}
TARGETS = ("ll-default", "ll-tight", "svc")  # whose primal the trajectory run is timed to


# ----------------------------------------------------------------------------- objective


def cs_primal(W: np.ndarray, X, y_idx: np.ndarray, C: float = C) -> float:
    """The Crammer-Singer primal objective, no bias.

    ``P(W) = 1/2 ||W||_F^2 + C sum_i max(0, max_{j != y_i} 1 - (w_{y_i} - w_j)^T x_i)``.

    Parameters
    ----------
    W : ndarray of shape (n_features, k)
        Column ``j`` is class ``j``'s weight vector.
    X : CSR matrix or ndarray of shape (n, n_features)
    y_idx : ndarray of int, shape (n,)
        Each row's class as a column index of ``W``.
    C : float

    Returns
    -------
    float
    """
    S = np.asarray(X @ W, dtype=np.float64)
    rows = np.arange(S.shape[0])
    M = 1.0 + S - S[rows, y_idx][:, None]
    M[rows, y_idx] = 0.0  # j = y_i is left out; its 0 is also the max(0, .) floor
    return float(0.5 * np.sum(W * W) + C * M.max(axis=1).sum())


def ww_primal(W: np.ndarray, X, y_idx: np.ndarray, C: float = C) -> float:
    """The Weston-Watkins primal, no bias: ``1/2 ||W||^2 + C sum_i sum_{j != y_i} max(0, 1 - (w_{y_i} - w_j)^T x_i)``
    (the same arguments as :func:`cs_primal`; a check of streamwww's reported WW primal)."""
    S = np.asarray(X @ W, dtype=np.float64)
    rows = np.arange(S.shape[0])
    M = np.maximum(0.0, 1.0 + S - S[rows, y_idx][:, None])
    M[rows, y_idx] = 0.0
    return float(0.5 * np.sum(W * W) + C * M.sum())


def _cs_primal_loops(W, X, y_idx, C: float = C) -> float:
    """:func:`cs_primal` by the definition, one row and one class at a time (the self-check)."""
    X = np.asarray(X.toarray() if hasattr(X, "toarray") else X)
    total = 0.0
    for i in range(X.shape[0]):
        worst = 0.0
        for j in range(W.shape[1]):
            if j != y_idx[i]:
                worst = max(worst, 1.0 - float(np.dot(W[:, y_idx[i]] - W[:, j], X[i])))
        total += worst
    return 0.5 * float(sum(w * w for w in W.ravel())) + C * total


def self_check() -> str:
    """:func:`cs_primal` against the double loop on tiny random problems (sparse and dense)."""
    rng = np.random.default_rng(1)
    worst = 0.0
    for n, d, k in ((7, 4, 3), (30, 12, 6), (5, 3, 2)):
        X = rng.normal(size=(n, d)) * (rng.random((n, d)) < 0.6)
        W = rng.normal(scale=0.7, size=(d, k))
        y_idx = rng.integers(0, k, size=n)
        ref = _cs_primal_loops(W, X, y_idx, C=0.7)
        for A in (X, _csr32(X)):
            worst = max(worst, abs(cs_primal(W, A, y_idx, C=0.7) - ref) / abs(ref))
    if worst > 1e-12:
        raise AssertionError(f"cs_primal disagrees with the direct computation: rel. diff {worst:.3g}")
    return f"cs_primal agrees with a direct double loop on 3 tiny random problems (sparse and dense): rel. diff {worst:.1e}"


def _y_index(y: np.ndarray, classes: np.ndarray) -> np.ndarray:
    idx = np.searchsorted(classes, y)
    if np.any(idx >= len(classes)) or np.any(classes[np.minimum(idx, len(classes) - 1)] != y):
        raise ValueError("labels outside the model's classes")
    return idx


def _accuracy(W: np.ndarray, classes: np.ndarray, ds: Dataset) -> tuple[float, np.ndarray]:
    """Test accuracy (%) of ``argmax(X_test W)`` and the predictions."""
    pred = classes[np.argmax(np.asarray(ds.Xt @ W), axis=1)]
    return float(np.mean(pred == ds.yt) * 100.0), pred


# ----------------------------------------------------------------------------- data


def load_set(ctx: BenchContext, name: str, quick: bool) -> Dataset:
    """One LIBSVM set (``bench_accuracy.load_dataset``); ``quick``: a seeded random subsample."""
    try:
        ds = load_dataset(ctx, name)
    except ValueError:  # the test file has a larger feature index: drop those columns (no weight there)
        from sklearn.datasets import load_svmlight_files

        from _benchenv import libsvm_file

        X, y, Xt, yt = load_svmlight_files([libsvm_file(ctx, f) for f in LIBSVM_FILES[name]])
        ds = Dataset(name, _csr32(X), y, _csr32(Xt), yt)
        ds.Xt = _csr32(ds.Xt[:, :ds.X.shape[1]])
    if quick:
        n_tr, n_te = QUICK_ROWS[name]
        rng = np.random.default_rng(SEED)
        i = np.sort(rng.choice(ds.X.shape[0], min(n_tr, ds.X.shape[0]), replace=False))
        t = np.sort(rng.choice(ds.Xt.shape[0], min(n_te, ds.Xt.shape[0]), replace=False))
        ds = Dataset(name, _csr32(ds.X[i]), ds.y[i], _csr32(ds.Xt[t]), ds.yt[t])
    return ds


# ----------------------------------------------------------------------------- methods


def cs_missing() -> str | None:
    """Why streamwww cannot train Crammer-Singer here (None: it can)."""
    import streamwww as sw

    if "loss" not in inspect.signature(sw.train).parameters:
        return (f"not run: this streamwww ({sw.__version__}, {os.path.dirname(sw.__file__)}) has no "
                "`loss` parameter in `streamwww.train` — no Crammer–Singer yet (issue 55)")
    return None


def run_streamwww(ds: Dataset, loss: str, *, max_iter: int, warm: bool = False, traj: bool = False,
                  stop_at: float | None = None) -> dict:
    """One ``streamwww.train`` call on ``(ds.X, ds.y)``, no intercept, one thread.

    Parameters
    ----------
    ds : Dataset
    loss : {'cs', 'ww'}
        ``'ww'`` passes no ``loss`` (runs on a streamwww without the parameter too).
    max_iter : int
    warm : bool
        One epoch only (loads the compiled kernels for this data's shape); nothing measured.
    traj : bool
        The trajectory run: ``eval_every=1, tol=TRAJ_TOL``, test accuracy in the callback.
    stop_at : float, optional
        With ``traj``: the callback stops training at the first primal <= this.

    Returns
    -------
    dict
        ``secs`` (the call's wall time minus the callback's own), ``epochs``, ``converged``,
        ``primal`` (NumPy, of the returned model), ``primal_reported`` (streamwww's last),
        ``acc``, ``points`` (per evaluated epoch: epoch, wall, bcd, primal, dual, rel_gap[, acc]).
    """
    import streamwww as sw

    kw = dict(C=C, fit_intercept=False, tol=TRAJ_TOL if traj else TOL, max_iter=1 if warm else max_iter,
              random_state=SEED, n_jobs=1)
    if loss == "cs":
        kw["loss"] = "cs"
    if traj:
        kw["eval_every"] = 1
    classes = np.unique(ds.y)
    points: list[dict] = []
    own_s = 0.0

    def callback(info: dict):
        nonlocal own_s
        c0 = time.perf_counter()
        p = {"epoch": int(info["epoch"]), "wall": c0 - t0 - own_s, "bcd": float(info["time"]),
             "primal": float(info["primal"][0]), "dual": float(info["dual"][0]), "rel_gap": float(info["rel_gap"][0])}
        if traj:
            coef, _ = info["weights"](0)
            p["acc"] = _accuracy(np.asarray(coef).T, classes, ds)[0]
        points.append(p)
        own_s += time.perf_counter() - c0
        return traj and stop_at is not None and p["primal"] <= stop_at

    gc.collect()
    with warnings.catch_warnings():  # max_iter reached shows as converged=False
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        model = sw.train((ds.X, ds.y), callback=callback, **kw)
        secs = time.perf_counter() - t0 - own_s
    if warm:
        return {}
    W = np.asarray(model.coef_, dtype=np.float64).T
    if not np.array_equal(np.asarray(model.classes_), classes):
        raise RuntimeError("streamwww's classes_ are not the sorted training labels")
    if np.any(np.asarray(model.intercept_) != 0):
        raise RuntimeError("fit_intercept=False gave a non-zero intercept")
    y_idx = _y_index(ds.y, classes)
    acc, _ = _accuracy(W, classes, ds)
    hist = model.history_[-1]
    out = {"secs": secs, "epochs": int(model.n_iter_), "converged": bool(model.converged_),
           "primal_reported": float(hist["primal"]),
           "rel_gap": float(hist["rel_gap"]), "bcd_s": float(hist["time"]), "acc": acc, "points": points}
    if loss == "cs":
        out["primal"] = cs_primal(W, ds.X, y_idx)
    else:
        out["primal"] = ww_primal(W, ds.X, y_idx)  # the WW objective: not compared with the CS ones
        out["cs_primal_of_ww_model"] = cs_primal(W, ds.X, y_idx)
    return out


def _libc_srand(seed: int) -> bool:
    """Seed the C library's ``rand()`` (LIBLINEAR's ``-s 4`` permutes with it); False where not possible."""
    try:
        ctypes.CDLL(None).srand(ctypes.c_uint(seed))
        return True
    except (OSError, AttributeError):
        return False


_QUIET: list = []


def _quiet_print():
    """A ctypes print function that drops LIBLINEAR's output (kept alive for the process)."""
    if not _QUIET:
        from liblinear import liblinear as L

        _QUIET.append(L.PRINT_STRING_FUN(lambda s: None))
    return _QUIET[0]


def liblinear_weights(model, n_features: int, classes: np.ndarray) -> np.ndarray:
    """``W`` (n_features x k, sorted class order) of a LIBLINEAR ``-s 4`` model without bias.

    LIBLINEAR keeps ``w[feature * nr_class + label_idx]`` (for ``-s 4`` also when k = 2),
    ``label_idx`` in ``model.get_labels()`` order: the order of first appearance in the
    training labels, not sorted.
    """
    if model.bias >= 0:
        raise ValueError("a model with bias; this benchmark trains without -B")
    nf, k = int(model.nr_feature), int(model.nr_class)
    flat = np.ctypeslib.as_array(model.w, shape=(nf * k,))
    labels = list(model.get_labels())
    order = [labels.index(int(c)) for c in classes]
    W = np.zeros((n_features, len(classes)))
    m = min(nf, n_features)
    W[:m] = flat.reshape(nf, k)[:m][:, order]
    return W


def run_liblinear(ds: Dataset, prob, eps: float, *, check: bool = False) -> dict:
    """liblinear-official ``-s 4 -c 1 -e eps`` (no ``-B``) on the prebuilt ``prob``; ``train`` timed."""
    from liblinear import liblinear as L
    from liblinear import liblinearutil as ll

    param = ll.parameter(f"-s 4 -c {C:g} -e {eps:g}")
    said: list[str] = []
    param.print_func = L.PRINT_STRING_FUN(lambda s: said.append(s.decode() if isinstance(s, bytes) else str(s)))
    seeded = _libc_srand(SEED)
    gc.collect()
    t = time.perf_counter()
    model = ll.train(prob, param)
    secs = time.perf_counter() - t
    L.liblinear.set_print_string_function(_quiet_print())  # param's callback dies with param
    text = "".join(said)
    it = re.search(r"#iter = (\d+)", text)
    obj = re.search(r"Objective value = (\S+)", text)
    classes = np.unique(ds.y)
    W = liblinear_weights(model, ds.X.shape[1], classes)
    primal = cs_primal(W, ds.X, _y_index(ds.y, classes))
    acc, pred = _accuracy(W, classes, ds)
    out = {"secs": secs, "iters": int(it.group(1)) if it else None,
           "capped": "reaching max number of iterations" in text, "primal": primal, "acc": acc,
           "srand": seeded, "labels": [int(v) for v in model.get_labels()]}
    if obj:  # LIBLINEAR's "Objective value" of -s 4 is the dual's minimization form: D = -value
        dual = -float(obj.group(1))
        out.update(dual=dual, rel_gap=(primal - dual) / abs(primal))
    if check:  # the weight layout and label order, against LIBLINEAR's own accessors and predict
        for j in {0, len(classes) - 1}:
            wj, b = model.get_decfun(j)
            ref = np.zeros(ds.X.shape[1])
            ref[:len(wj)] = wj
            c = model.get_labels()[j]
            if np.abs(ref - W[:, int(np.searchsorted(classes, c))]).max() != 0.0 or b not in (0, -1):
                raise AssertionError(f"LIBLINEAR weight layout: column {j} differs from get_decfun")
        p_ll, _, _ = ll.predict([], ds.Xt, model, "-q")
        out["predict_agree"] = float(np.mean(np.asarray(p_ll) == pred) * 100.0)
    return out


def run_svc(ds: Dataset, *, warm: bool = False) -> dict:
    """``LinearSVC(C=1, multi_class="crammer_singer", fit_intercept=False, random_state=0)``, ``fit`` timed."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.svm import LinearSVC

    clf = LinearSVC(C=C, multi_class="crammer_singer", fit_intercept=False, random_state=SEED,
                    **({"tol": 10.0} if warm else {}))
    gc.collect()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = time.perf_counter()
        clf.fit(ds.X, ds.y)
        secs = time.perf_counter() - t
    if warm:
        return {}
    classes = np.asarray(clf.classes_)
    W = np.asarray(clf.coef_, dtype=np.float64).T
    acc, _ = _accuracy(W, classes, ds)
    return {"secs": secs, "iters": int(np.max(clf.n_iter_)), "tol": clf.tol, "max_iter": clf.max_iter,
            "warned": any(issubclass(w.category, ConvergenceWarning) for w in caught),
            "primal": cs_primal(W, ds.X, _y_index(ds.y, classes)), "acc": acc}


# ----------------------------------------------------------------------------- measurement


def _try(fn: Callable[[], dict]) -> dict:
    try:
        return fn()
    except Exception as e:  # one failing method does not stop the others; the table says why
        traceback.print_exc()
        return {"error": f"failed: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"}


def measure_set(ds: Dataset, repeats: int, max_iter: int, traj_max_iter: int, log: Callable[[str], None]) -> dict:
    """Warm-ups, ``repeats`` interleaved rounds of the five methods, then the CS trajectory runs.

    Returns
    -------
    dict
        ``runs`` (method -> list of per-repeat dicts), ``traj`` (list of trajectory-run dicts),
        ``build_s`` (LIBLINEAR's problem), ``targets`` (method -> median primal), ``checks``.
    """
    from liblinear import liblinearutil as ll

    missing = cs_missing()
    ll.problem(ds.y[:2], ds.X[:2])  # the first build compiles liblinear-official's Numba converter
    t = time.perf_counter()
    prob = ll.problem(ds.y, ds.X)
    build_s = time.perf_counter() - t
    runners: dict[str, Callable[[], dict]] = {
        "sw-cs": lambda: run_streamwww(ds, "cs", max_iter=max_iter),
        "ll-default": lambda: run_liblinear(ds, prob, LL_EPS["ll-default"]),
        "ll-tight": lambda: run_liblinear(ds, prob, LL_EPS["ll-tight"]),
        "svc": lambda: run_svc(ds),
        "sw-ww": lambda: run_streamwww(ds, "ww", max_iter=max_iter),
    }
    if missing:
        runners["sw-cs"] = lambda: {"error": missing}
    warm_errors = {}
    for m, warm in (("sw-cs", None if missing else lambda: run_streamwww(ds, "cs", max_iter=1, warm=True)),
                    ("ll-default", lambda: run_liblinear(ds, prob, LL_EPS["ll-default"])),
                    ("svc", lambda: run_svc(ds, warm=True)),
                    ("sw-ww", lambda: run_streamwww(ds, "ww", max_iter=1, warm=True))):
        if warm is not None:
            r = _try(warm)
            if "error" in r:
                warm_errors[m] = r["error"]
    log(f"[bench_cs] {ds.name}: warmed up")
    runs: dict[str, list[dict]] = {m: [] for m in METHODS}
    order = list(METHODS)
    for r in range(repeats):
        for m in order[r % len(order):] + order[:r % len(order)]:
            t = time.perf_counter()
            res = _try(runners[m])
            runs[m].append(res)
            log(f"[bench_cs] {ds.name} repeat {r + 1}/{repeats} {m}: "
                + (res["error"] if "error" in res else f"{res['secs']:.3g} s, primal {res['primal']:.8g}, "
                   f"acc {res['acc']:.2f} %") + f" (wall {time.perf_counter() - t:.1f} s)")
    checks = {}
    chk = _try(lambda: run_liblinear(ds, prob, LL_EPS["ll-default"], check=True))
    checks["liblinear_layout"] = chk.get("error") or (
        f"get_decfun agrees; its predict agrees with argmax(X W) on {chk['predict_agree']:.2f} % of test rows")
    checks["liblinear_labels"] = chk.get("labels")
    targets = {m: median(x["primal"] for x in runs[m]) for m in TARGETS
               if runs[m] and all("error" not in x for x in runs[m])}
    traj: list[dict] = []
    if not missing and targets:
        stop_at = min(targets.values())
        for r in range(repeats):
            t = time.perf_counter()
            res = _try(lambda: run_streamwww(ds, "cs", max_iter=traj_max_iter, traj=True, stop_at=stop_at))
            traj.append(res)
            log(f"[bench_cs] {ds.name} trajectory {r + 1}/{repeats}: "
                + (res["error"] if "error" in res else f"{res['epochs']} epochs, primal {res['primal']:.8g}")
                + f" (wall {time.perf_counter() - t:.1f} s)")
    return {"runs": runs, "traj": traj, "build_s": build_s, "targets": targets, "checks": checks,
            "warm_errors": warm_errors, "facts": ds.facts(), "n": ds.X.shape[0], "n_test": ds.Xt.shape[0],
            "d": ds.X.shape[1], "k": int(len(np.unique(ds.y)))}


def summarize(res: dict) -> dict:
    """Medians per method, the best CS primal, the crossings of the trajectory runs."""
    summ: dict[str, dict] = {}
    for m, runs in res["runs"].items():
        ok = [x for x in runs if "error" not in x]
        if not ok or len(ok) < len(runs):
            summ[m] = {"error": next((x["error"] for x in runs if "error" in x), "not run")}
            continue
        s = {key: median(float(x[key]) for x in ok) for key in ("secs", "primal", "acc")}
        s["secs_all"] = [x["secs"] for x in ok]
        s["primal_all"] = sorted({round(x["primal"], 10) for x in ok})
        s["acc_all"] = sorted({round(x["acc"], 4) for x in ok})
        for key in ("epochs", "iters", "bcd_s", "rel_gap", "primal_reported", "cs_primal_of_ww_model", "dual"):
            if all(x.get(key) is not None for x in ok):
                s[key] = median(float(x[key]) for x in ok)
        for key in ("converged", "capped", "warned", "srand"):
            if key in ok[0]:
                s[key] = ok[0][key] if all(x[key] == ok[0][key] for x in ok) else "varies"
        summ[m] = s
    cs_primals = [s["primal"] for m, s in summ.items() if m != "sw-ww" and "primal" in s]
    traj = [x for x in res["traj"] if "error" not in x]
    cs_primals += [min(p["primal"] for p in x["points"]) for x in traj if x["points"]]
    cs_primals += [x["primal"] for x in traj]
    best = min(cs_primals) if cs_primals else None
    crossings = {}
    for m, target in res["targets"].items():
        hits = []
        for x in traj:
            hit = next((p for p in x["points"] if p["primal"] <= target), None)
            hits.append(hit)
        if traj and all(h is not None for h in hits):
            crossings[m] = {"target": target, "epoch": hits[0]["epoch"], "rel_gap": hits[0]["rel_gap"],
                            "acc": hits[0].get("acc"), "wall": median(h["wall"] for h in hits),
                            "bcd": median(h["bcd"] for h in hits), "epochs_all": sorted({h["epoch"] for h in hits})}
        else:
            closest = min((p for x in traj for p in x["points"]), key=lambda p: p["primal"], default=None)
            crossings[m] = {"target": target, "epoch": None,
                            "epochs_run": max((x["epochs"] for x in traj), default=None), "closest": closest}
    same_traj = len({tuple(round(p["primal"], 9) for p in x["points"]) for x in traj}) <= 1
    traj_error = next((x["error"] for x in res["traj"] if "error" in x), None)
    return {"methods": summ, "best": best, "crossings": crossings, "traj_same": same_traj, "traj_error": traj_error}


# ----------------------------------------------------------------------------- generated set, out of core

GEN_FEATURES, GEN_NNZ, GEN_CLASSES = 100_000, 40, 20  # --gen-* defaults
GEN_SHARD_MB = 16.0  # a few shards in flight stay well below the store (32 MiB: ~7 shards' worth of RSS)
GEN_SEED = 0
GEN_WARM_ROWS = 200  # the warm-up store (2 shards): loads the compiled kernels in each child
GEN_WARM_EPOCHS = 2
QUICK_GEN = {"rows": 2000, "features": 2000, "shard_rows": 500}  # --quick: several tiny shards
GEN_METHODS = {"sw-cs": ("streamwww CS", "Crammer–Singer", "cs"), "sw-ww": ("streamwww WW", "Weston–Watkins", "ww")}

# One training run in a fresh interpreter: its peak RSS is its own. argv[1]: JSON arguments.
GEN_CHILD = r'''
import json, os, resource, sys, time, warnings
args = json.loads(sys.argv[1])
sys.path.insert(0, args["path"])  # the parent's streamwww
warnings.simplefilter("ignore")  # max_iter reached shows as converged=False
import streamwww as sw
kw = dict(C=args["C"], fit_intercept=False, tol=args["tol"], max_iter=args["max_iter"],
          random_state=args["seed"], n_jobs=1, memory_budget=0)
if args["loss"] == "cs":
    kw["loss"] = "cs"  # (WW passes no loss: a streamwww without the parameter runs it too)
kib = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
sw.train(args["warm"], **{**kw, "max_iter": args["warm_epochs"]})  # compiled kernels loaded: not timed
rss_warm = kib()
t0 = time.perf_counter()
model = sw.train(args["train"], **kw)
secs = time.perf_counter() - t0
rss_train = kib()
h = model.history_[-1]
out = {"secs": secs, "epochs": int(model.n_iter_), "converged": bool(model.converged_),
       "rel_gap": float(h["rel_gap"]), "primal_reported": float(h["primal"]), "bcd_s": float(h["time"]),
       "peak_rss": rss_train * 1024, "rss_after_warmup": rss_warm * 1024}
out["acc"] = 100.0 * float(model.score(args["test"]))  # off the clock, read shard by shard
out["peak_rss_with_score"] = kib() * 1024
print("GEN_CHILD_RESULT " + json.dumps(out), flush=True)
'''


def _committed(store: str) -> bool:
    """A finished store (its ``streamwww.json`` is written last)."""
    return os.path.isfile(os.path.join(store, "streamwww.json"))


def _dir_bytes(path: str) -> int:
    """Bytes of the files under ``path`` (their sizes, as ``du --apparent-size``)."""
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total


def _line_offset(path: str, lines: int) -> int:
    """Byte offset of the start of line ``lines`` (0-based) of a text file."""
    seen = pos = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 24):
            n = chunk.count(b"\n")
            if seen + n >= lines:
                cut = -1
                for _ in range(lines - seen):
                    cut = chunk.index(b"\n", cut + 1)
                return pos + cut + 1
            seen += n
            pos += len(chunk)
    raise ValueError(f"{path}: fewer than {lines} lines")


def _copy_range(src: str, dst: str, start: int, stop: int | None) -> None:
    with open(src, "rb") as f, open(dst, "wb") as g:
        f.seek(start)
        left = None if stop is None else stop - start
        while left is None or left > 0:
            chunk = f.read(1 << 24 if left is None else min(1 << 24, left))
            if not chunk:
                break
            g.write(chunk)
            if left is not None:
                left -= len(chunk)


def generated_stores(workdir: str, spec: dict, log: Callable[[str], None]) -> dict:
    """The generated training, test and warm-up Zarr stores, made once and kept in ``workdir``.

    One ``make_data`` file of ``rows + test_rows`` rows (seed ``GEN_SEED``) is cut by lines:
    the first ``rows`` train, the rest test (one seed, one class structure; rows are
    independent draws), the first ``GEN_WARM_ROWS`` also make the warm-up store. Each is
    converted (the test and warm-up stores ``like`` the training store); the text is removed.

    Returns
    -------
    dict
        ``train``, ``test``, ``warm`` (store paths), ``reused`` (bool), ``make_s``, ``convert_s``.
    """
    import streamwww as sw
    from streamwww.io import make_data

    n, t = spec["rows"], spec["test_rows"]
    size = f"r{spec['shard_rows']}" if spec.get("shard_rows") else f"mb{spec['shard_mb']:g}"
    base = os.path.join(workdir, f"gen-n{n}-t{t}-d{spec['features']}-z{spec['nnz']}-k{spec['classes']}"
                                 f"-s{GEN_SEED}-{size}" + (f"-noise{spec['noise']:g}" if spec["noise"] != 0.5 else ""))
    paths = {"train": base + "-train.zarr", "test": base + "-test.zarr", "warm": base + "-warm.zarr"}
    if all(_committed(p) for p in paths.values()):
        log(f"[bench_cs] generated set: reusing {base}-*.zarr")
        return {**paths, "reused": True}
    text, test_text, warm_text = base + ".libsvm", base + "-test.libsvm", base + "-warm.libsvm"
    try:
        log(f"[bench_cs] generated set: make-data {n + t:,} rows into {text}")
        t0 = time.perf_counter()
        make_data(text, rows=n + t, features=spec["features"], nnz_per_row=spec["nnz"], classes=spec["classes"],
                  seed=GEN_SEED, noise=spec["noise"], overwrite=True)
        cut = _line_offset(text, n)
        _copy_range(text, test_text, cut, None)
        _copy_range(text, warm_text, 0, _line_offset(text, min(GEN_WARM_ROWS, n)))
        os.truncate(text, cut)  # the training rows: the text file's first n lines
        make_s = time.perf_counter() - t0
        log(f"[bench_cs] generated set: converting ({make_s:.0f} s to make the text)")
        t0 = time.perf_counter()
        shard = {"shard_rows": spec["shard_rows"]} if spec.get("shard_rows") else {"shard_mb": spec["shard_mb"]}
        sw.convert(text, paths["train"], overwrite=True, **shard)
        sw.convert(test_text, paths["test"], like=paths["train"], overwrite=True, **shard)
        sw.convert(warm_text, paths["warm"], like=paths["train"], shard_rows=max(1, GEN_WARM_ROWS // 2),
                   overwrite=True)
        convert_s = time.perf_counter() - t0
    finally:
        for f in (text, test_text, warm_text):
            if os.path.exists(f):
                os.unlink(f)
    return {**paths, "reused": False, "make_s": make_s, "convert_s": convert_s}


def run_generated_child(paths: dict, loss: str, max_iter: int) -> dict:
    """One streamed ``train`` (``memory_budget=0``) in a fresh subprocess; see :data:`GEN_CHILD`."""
    import subprocess

    import streamwww as sw

    args = {"path": os.path.dirname(os.path.dirname(os.path.abspath(sw.__file__))), "loss": loss, "C": C,
            "tol": TOL, "max_iter": max_iter, "seed": SEED, "warm_epochs": GEN_WARM_EPOCHS, **paths}
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", GEN_CHILD, json.dumps(args)], capture_output=True, text=True,
                          env=dict(os.environ))  # (the thread variables set at the top travel along)
    wall = time.perf_counter() - t
    line = next((x for x in reversed(proc.stdout.splitlines()) if x.startswith("GEN_CHILD_RESULT ")), None)
    if proc.returncode != 0 or line is None:
        sys.stderr.write(proc.stderr[-4000:])
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1][:200]
        return {"error": f"failed: subprocess exit {proc.returncode}: {last}"}
    return {**json.loads(line[len("GEN_CHILD_RESULT "):]), "child_wall": wall}


def measure_generated(workdir: str, spec: dict, repeats: int, max_iter: int, log: Callable[[str], None]) -> dict:
    """Make (or reuse) the generated stores, then ``repeats`` interleaved rounds of CS and WW, each in a fresh
    subprocess. Returns the stores' facts and ``runs`` (method -> list of per-repeat dicts)."""
    from streamwww.io import open_store

    missing = cs_missing()
    try:
        made = generated_stores(workdir, spec, log)
    except Exception as e:  # the section says why; the rest of the report stands
        traceback.print_exc()
        error = f"failed to make the stores: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
        return {"spec": spec, "facts": None, "error": error, "runs": {m: [{"error": error}] for m in GEN_METHODS},
                "max_iter": max_iter}
    paths = {k: made[k] for k in ("train", "test", "warm")}
    st, te = open_store(paths["train"]), open_store(paths["test"])
    facts = {"rows": int(st.n_rows), "test_rows": int(te.n_rows), "features": int(st.n_features),
             "classes": int(st.n_classes), "shards": int(st.n_shards), "test_shards": int(te.n_shards),
             "max_shard_rows": int(max(st.shard_rows)),
             "store_disk": _dir_bytes(paths["train"]), "test_disk": _dir_bytes(paths["test"]),
             "decoded": int(sum(st.shard_nbytes(i) for i in range(st.n_shards))),
             "max_shard_decoded": int(max(st.shard_nbytes(i) for i in range(st.n_shards))),
             "beta_bytes": int(8 * st.n_rows * (st.n_classes - 1)), "paths": paths,
             "reused": made["reused"], "make_s": made.get("make_s"), "convert_s": made.get("convert_s")}
    log(f"[bench_cs] generated set: {facts['rows']:,} training rows in {facts['shards']} shards, "
        f"{facts['store_disk'] / 2**20:.0f} MiB on disk ({facts['decoded'] / 2**20:.0f} MiB decoded), "
        f"{facts['test_rows']:,} test rows")
    runs: dict[str, list[dict]] = {m: [] for m in GEN_METHODS}
    order = list(GEN_METHODS)
    for r in range(repeats):
        for m in order[r % len(order):] + order[:r % len(order)]:
            if m == "sw-cs" and missing:
                runs[m].append({"error": missing})
                continue
            t = time.perf_counter()
            res = _try(lambda: run_generated_child(paths, GEN_METHODS[m][2], max_iter))
            runs[m].append(res)
            log(f"[bench_cs] generated repeat {r + 1}/{repeats} {m}: "
                + (res["error"] if "error" in res else
                   f"{res['secs']:.3g} s, {res['epochs']} epochs, rel. gap {res['rel_gap']:.2g}, "
                   f"acc {res['acc']:.2f} %, peak RSS {res['peak_rss'] / 2**20:.0f} MiB")
                + f" (wall {time.perf_counter() - t:.1f} s)")
    return {"spec": spec, "facts": facts, "runs": runs, "max_iter": max_iter}


def summarize_generated(gen: dict) -> dict:
    """Medians per method over the repeats (an ``error`` where any repeat failed)."""
    summ = {}
    for m, runs in gen["runs"].items():
        ok = [x for x in runs if "error" not in x]
        if not ok or len(ok) < len(runs):
            summ[m] = {"error": next((x["error"] for x in runs if "error" in x), "not run")}
            continue
        s = {key: median(float(x[key]) for x in ok)
             for key in ("secs", "epochs", "rel_gap", "primal_reported", "bcd_s", "acc", "peak_rss",
                         "rss_after_warmup", "peak_rss_with_score")}
        s["secs_all"] = [x["secs"] for x in ok]
        s["converged"] = ok[0]["converged"] if all(x["converged"] == ok[0]["converged"] for x in ok) else "varies"
        s["vary"] = len({(x["epochs"], round(x["primal_reported"], 9)) for x in ok}) > 1
        summ[m] = s
    return summ


# ----------------------------------------------------------------------------- report


def _secs(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{x:.3g} s" if x >= 0.1 else f"{x * 1e3:.3g} ms"


def _notes(m: str, s: dict, res: dict) -> str:
    if m in ("sw-cs", "sw-ww"):
        stop = (f"rel. gap {s['rel_gap']:.2g} ≤ 1e-3 certified" if s["converged"] is True
                else f"**max_iter reached**, rel. gap {s['rel_gap']:.2g}")
        note = f"{stop}; BCD passes (`info['time']`) {_secs(s['bcd_s'])} of the call"
        drift = abs(s["primal"] - s["primal_reported"]) / abs(s["primal"])
        note += f"; streamwww's reported primal vs ours: rel. diff {drift:.1e}"
        if m == "sw-ww":
            note += f"; the CS objective of this WW model: {s['cs_primal_of_ww_model']:.8g}"
    elif m.startswith("ll-"):
        note = "**its max. iterations reached**; " if s.get("capped") else ""
        if "rel_gap" in s:
            note += f"rel. gap to its own dual {s['rel_gap']:.2g}; "
        note += f"building its `problem` {_secs(res['build_s'])}, not counted"
        if not s.get("srand"):
            note += "; rand() not seeded"
    else:
        note = (f"{s['iters']:.0f} iterations of liblinear's CS solver (cap 100000; `max_iter` ignored)"
                + ("; sklearn warned of non-convergence (n_iter_ ≥ max_iter), spurious" if s.get("warned") is True
                   and s["iters"] < 100000 else ""))
    if len(s["primal_all"]) > 1 or len(s["acc_all"]) > 1:
        note += f"; primal/acc. vary over repeats ({len(s['primal_all'])} values)"
    return note + "; s per repeat: " + ", ".join(f"{t:.3g}" for t in s["secs_all"])


def table(name: str, res: dict, summ: dict) -> list[str]:
    """Markdown table of one data set: one row per method."""
    best = summ["best"]
    head = ["method", "objective", "settings", "time", "epochs / iter.", "primal objective",
            "rel. diff to best CS primal", "test acc. %", "notes"]
    lines = [f"**{name}** ({res['facts']}; best CS primal found {best:.10g})" if best is not None
             else f"**{name}** ({res['facts']})", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for m, (label, objective, settings) in METHODS.items():
        s = summ["methods"][m]
        if "error" in s:
            lines.append(f"| {label} | {objective} | {settings} | {s['error']} | | | | | |")
            continue
        its = f"{s['epochs']:.0f} epochs" if "epochs" in s else (f"{s['iters']:.0f}" if "iters" in s else "–")
        if m == "sw-ww":
            primal, rel = f"{s['primal']:.8g} (WW objective)", "– (another objective)"
        else:
            primal = f"{s['primal']:.8g}"
            rel = f"{(s['primal'] - best) / abs(best):.2e}" if best is not None else "–"
        lines.append(f"| {label} | {objective} | {settings} | {_secs(s['secs'])} | {its} | {primal} | {rel} | "
                     f"{s['acc']:.2f} | {_notes(m, s, res)} |")
    return lines + [""]


def crossing_table(results: dict, summaries: dict) -> list[str]:
    """Time of streamwww CS to each target primal, beside the target method's own time."""
    head = ["data", "target: primal of", "its primal", "its time", "streamwww CS: first epoch ≤ it",
            "wall to it (all objective passes)", "BCD passes to it", "rel. gap then", "test acc. then %"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, summ in summaries.items():
        if "sw-cs" in summ["methods"] and "error" in summ["methods"]["sw-cs"]:
            lines.append(f"| {name} | – | | | {summ['methods']['sw-cs']['error']} | | | | |")
            continue
        if summ["traj_error"]:
            lines.append(f"| {name} | – | | | trajectory run {summ['traj_error']} | | | | |")
            continue
        for m, c in summ["crossings"].items():
            own = summ["methods"][m]
            cells = [name, METHODS[m][0], f"{c['target']:.8g}", _secs(own.get("secs"))]
            if c["epoch"] is None:
                near = c.get("closest")
                cells += [f"not reached in {c.get('epochs_run')} epochs"
                          + (f" (lowest primal {near['primal']:.8g}, epoch {near['epoch']})" if near else ""),
                          "–", "–", f"{near['rel_gap']:.2g} (at the lowest)" if near else "–", "–"]
            else:
                ep = f"{c['epoch']}" + (f" (repeats: {c['epochs_all']})" if len(c["epochs_all"]) > 1 else "")
                acc = f"{c['acc']:.2f}" if c.get("acc") is not None else "–"
                cells += [ep, _secs(c["wall"]), _secs(c["bcd"]), f"{c['rel_gap']:.2g}", acc]
            lines.append("| " + " | ".join(cells) + " |")
    return lines + [""]


def checks(results: dict, summaries: dict, self_check_line: str) -> list[str]:
    out = [f"- {self_check_line}."]
    for name, res in results.items():
        s = summaries[name]["methods"]
        parts = [f"LIBLINEAR: {res['checks']['liblinear_layout']} (its label order {res['checks']['liblinear_labels']})"]
        if "primal" in s.get("ll-tight", {}) and "primal" in s.get("svc", {}):
            a, b = s["ll-tight"]["primal"], s["svc"]["primal"]
            parts.append(f"the same problem solved twice, LIBLINEAR `-e 0.001` vs LinearSVC `tol=1e-4`: primals "
                         f"{a:.8g} vs {b:.8g}, rel. diff {abs(a - b) / abs(b):.1e}")
        duals = {METHODS[m][0]: s[m]["dual"] for m in ("ll-default", "ll-tight") if "dual" in s.get(m, {})}
        cs_points = [p for x in res["runs"]["sw-cs"] + res["traj"] for p in x.get("points", [])]
        if cs_points:
            duals["streamwww CS"] = max(p["dual"] for p in cs_points)
        if duals and summaries[name]["best"] is not None:
            best = summaries[name]["best"]
            who, dual = max(duals.items(), key=lambda kv: kv[1])
            parts.append(f"best CS primal {best:.8g} vs the best dual {dual:.8g} ({who}): the best primal is within "
                         f"{(best - dual) / abs(best):.1e} (relative) of the optimum")
        if res["traj"]:
            parts.append("trajectory repeats " + ("identical (seeded)" if summaries[name]["traj_same"] else "differ"))
        if res["warm_errors"]:
            parts.append(f"warm-up failures: {res['warm_errors']}")
        out.append(f"- **{name}**: " + "; ".join(parts) + ".")
    return out


def _mib(b: float) -> str:
    return f"{b / 2**20:,.0f} MiB" if b >= 2**20 else f"{b / 2**10:,.0f} KiB"


def generated_section(gen: dict, summ: dict) -> list[str]:
    """Markdown of the generated set: how it was made and run, one row per loss."""
    f, sp_ = gen["facts"], gen["spec"]
    if f is None:
        return ["### Generated set, streamed from disk (out of core)", "", f"Not run: {gen['error']}.", ""]
    shards = (f"shards of {sp_['shard_rows']:,} rows" if sp_.get("shard_rows")
              else f"shards of at most {sp_['shard_mb']:g} MiB decoded")
    lines = [
        "### Generated set, streamed from disk (out of core)",
        "",
        f"`streamwww make-data` (`streamwww.io.make_data`): {f['rows'] + f['test_rows']:,} rows, "
        f"{sp_['features']:,} features, {sp_['nnz']} non-zeros a row, {sp_['classes']} classes, noise {sp_['noise']:g}, seed {GEN_SEED}, "
        f"cut by lines into the first {f['rows']:,} rows for training and the last {f['test_rows']:,} for testing "
        "(one seed: the same class prototypes and supports; rows are independent draws), converted by "
        f"`streamwww.convert` into Zarr stores (float32 CSR; training: {f['shards']} {shards}, the largest "
        f"{f['max_shard_rows']:,} rows / {_mib(f['max_shard_decoded'])}). **Training store: "
        f"{_mib(f['store_disk'])} on disk** ({_mib(f['decoded'])} decoded); test store {_mib(f['test_disk'])} on disk"
        + ("; made earlier and reused" if f["reused"] else
           f"; made in {f['make_s']:.0f} s (text) + {f['convert_s']:.0f} s (convert), not counted") + ".",
        "",
        f"Each run: `streamwww.train(STORE, loss=…, C=1, fit_intercept=False, tol=1e-3, max_iter={gen['max_iter']}, "
        "random_state=0, n_jobs=1, memory_budget=0)` in a fresh subprocess. **`memory_budget=0` is the out-of-core "
        "path**: no decoded shard is kept between epochs, so every epoch (and every objective pass of the stopping "
        "rule) reads and decodes every shard from the store on disk — from the OS page cache when the files fit "
        "there, as they may on this machine: the decoding and copying are measured, not a cold disk — and the dual "
        f"variables (n × (k − 1) float64, {_mib(f['beta_bytes'])}) live in a scratch file, not in the process. The "
        "time is the whole `train` call (opening the store, every epoch's reads, the objective passes, building "
        f"the model) after a {GEN_WARM_EPOCHS}-epoch warm-up fit on a {GEN_WARM_ROWS}-row store of the same shape "
        "in the same process (the compiled kernels loaded, so no JIT compile is timed). Test accuracy: "
        "`model.score(test_store)`, read shard by shard, off the clock. *Peak RSS* is the child's "
        "`getrusage(RUSAGE_SELF).ru_maxrss` at the end of training (the whole process: Python, NumPy, SciPy, "
        "Numba and its kernels, the warm-up, the model); *after warm-up* is the same before the timed call.",
        "",
        "**LIBLINEAR -s 4 and LinearSVC are not run on this set**: both take the whole training set as one "
        "in-memory matrix (LIBLINEAR's `problem`, SciPy's CSR), which is what this set is meant not to be.",
        "",
    ]
    head = ["method", "objective", "time", "epochs", "certified rel. gap", "primal (streamwww's)", "test acc. %",
            "peak RSS", "RSS after warm-up", "store on disk", "notes"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for m, (label, objective, _) in GEN_METHODS.items():
        s = summ[m]
        if "error" in s:
            lines.append(f"| {label} | {objective} | {s['error']} |" + " |" * (len(head) - 3))
            continue
        stop = "≤ 1e-3, converged" if s["converged"] is True else "**max_iter reached**"
        note = (f"{stop}; BCD passes (`info['time']`) {_secs(s['bcd_s'])} of the call; peak RSS with the test "
                f"scoring {_mib(s['peak_rss_with_score'])}")
        if s["vary"]:
            note += "; epochs/primal vary over repeats"
        note += "; s per repeat: " + ", ".join(f"{t:.3g}" for t in s["secs_all"])
        lines.append(f"| {label} | {objective} | {_secs(s['secs'])} | {s['epochs']:.0f} | {s['rel_gap']:.2g} | "
                     f"{s['primal_reported']:.8g} | {s['acc']:.2f} | {_mib(s['peak_rss'])} | "
                     f"{_mib(s['rss_after_warmup'])} | {_mib(f['store_disk'])} | {note} |")
    return lines + [""]


def report(ctx: BenchContext, results: dict, summaries: dict, repeats: int, max_iter: int, traj_max_iter: int,
           load: tuple[str, str], wall: float, self_check_line: str, generated: dict | None = None,
           generated_summary: dict | None = None) -> str:
    peers = version_map(("liblinear-official",))
    lines = [header("Crammer–Singer on the same engine (issue 55): streamwww CS vs LIBLINEAR -s 4 vs "
                    "LinearSVC(crammer_singer), and streamwww WW"),
             f"- also: liblinear-official {peers.get('liblinear-official', 'not installed')}",
             "- threads: OMP/NUMBA/OPENBLAS/MKL_NUM_THREADS=1, streamwww `n_jobs=1`",
             f"- load (`uptime`): at the start `{load[0]}`; at the end `{load[1]}`",
             f"- wall time of the whole run {wall:.0f} s; medians of {repeats} interleaved repeats", ""]
    if ctx.quick:
        lines += ["**Quick mode: random subsamples of a few hundred rows, one repeat unless `--repeats`; "
                  "a smoke test of the tool, not a benchmark.**", ""]
    lines += [
        f"Every method gets the same `load_svmlight_file` CSR matrices (int32 indices), C = {C:g}, **no bias** "
        "(streamwww `fit_intercept=False`, LIBLINEAR without `-B`, LinearSVC `fit_intercept=False`), one thread. "
        "Each model's primal is computed here in NumPy from its weights: Crammer–Singer "
        "P(W) = ½‖W‖²_F + C Σᵢ max(0, max_{j≠yᵢ} 1 − (w_{yᵢ} − w_j)ᵀxᵢ) (for the WW row, its own WW "
        "objective, Σ_{j≠yᵢ} in place of max_{j≠yᵢ}: another problem, not compared). "
        "*rel. diff* = (P − P_best)/P_best, P_best the smallest CS primal of any run on that set (the trajectory "
        "run included). Test accuracy: argmax of X_test W.",
        "",
        "*Times*: streamwww: the whole `train` call's wall time (set-up, BCD passes, the objective passes its "
        "stopping rule needs, building the model), after a warm-up fit of one epoch on the same data, so "
        "**Numba's JIT compile is not timed**; its stop is a certified relative duality gap ≤ 1e-3 "
        f"(`tol=1e-3`, `max_iter={max_iter}`, `eval_every='auto'`). LIBLINEAR: the `train` call on a prebuilt "
        "`problem` (`-s 4 -c 1`, no `-B`; `-e 0.1` is its default stop, `-e 0.001` a tight one; the C library's "
        "`rand()` seeded with `srand(0)` before each run, as LIBLINEAR never seeds it). LinearSVC: the `fit` call at "
        "its defaults `tol=1e-4, max_iter=1000`, which differ from `-s 4`'s: `tol` is liblinear's `-e` (1000× tighter "
        "than `-s 4`'s default), and its Crammer–Singer solver ignores `max_iter` (liblinear's internal cap, 100000 "
        "iterations, applies).",
        "",
    ]
    for name, res in results.items():
        lines += table(name, res, summaries[name])
    lines += [] if not results else [  # (--sets '' with --generated: that section alone)
        "**Time to equal primal values.** A second streamwww CS run with `eval_every=1, tol=1e-6` (the objective "
        f"after every epoch; at most {traj_max_iter} epochs), its test accuracy computed in the callback (off the "
        "clock), stopped by the callback once its primal is at or below every target. For each target, the "
        "first epoch whose primal is ≤ the target's: *wall* is the call's wall time up to it, including an "
        "objective pass after every epoch (which the default `eval_every='auto'` mostly skips: an upper bound); "
        "*BCD passes* is `info['time']`, the epochs alone (a lower bound); the target method's own time beside them.",
        "",
    ]
    if results:
        lines += crossing_table(results, summaries)
    if generated is not None:
        lines += generated_section(generated, generated_summary)
    lines += ["Checks:", ""] + checks(results, summaries, self_check_line) + [""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sets", default=",".join(SETS), help=f"comma-separated, of {', '.join(SETS)} (default: all)")
    p.add_argument("--repeats", type=int, default=None, help="interleaved repeats, medians reported (default 3; --quick: 1)")
    p.add_argument("--max-iter", type=int, default=None, help=f"streamwww's max_iter (default 1000; --quick: {QUICK_MAX_ITER})")
    p.add_argument("--traj-max-iter", type=int, default=None,
                   help="max_iter of the time-to-equal-primal run (default: --max-iter)")
    p.add_argument("--data-dir", default=os.path.join(ROOT, "..", "shared", "data", "libsvm"))
    p.add_argument("--workdir", default=DEFAULT_WORKDIR, help="decompressed LIBSVM files (kept for reuse)")
    p.add_argument("--out", help=f"also replace the <!-- {MARKER} --> block of this Markdown file")
    p.add_argument("--json", help="write the raw numbers (every repeat, the trajectories) here")
    p.add_argument("--quick", action="store_true", help="random subsamples of a few hundred rows (a smoke test)")
    p.add_argument("--generated", type=int, default=0, metavar="ROWS",
                   help="also a generated set of ROWS training rows (+ ROWS // 10 test rows), streamed from Zarr "
                        "stores with memory_budget=0 (default 0: off; --quick: at most "
                        f"{QUICK_GEN['rows']:,} rows of {QUICK_GEN['features']:,} features)")
    p.add_argument("--gen-features", type=int, default=GEN_FEATURES, help=f"(default {GEN_FEATURES:,})")
    p.add_argument("--gen-nnz", type=int, default=GEN_NNZ, help=f"non-zeros a row (default {GEN_NNZ})")
    p.add_argument("--gen-classes", type=int, default=GEN_CLASSES, help=f"(default {GEN_CLASSES})")
    p.add_argument("--gen-noise", type=float, default=0.5,
                   help="make_data's noise (default 0.5, its own; larger: classes overlap more)")
    p.add_argument("--gen-shard-mb", type=float, default=GEN_SHARD_MB,
                   help=f"the training store's shard size, MiB decoded (default {GEN_SHARD_MB:g}; --quick: "
                        f"{QUICK_GEN['shard_rows']} rows)")
    args = p.parse_args(argv)
    sets = [s.strip() for s in args.sets.split(",") if s.strip()]
    unknown = sorted(set(sets) - set(SETS))
    if unknown:
        p.error(f"unknown data set(s) {', '.join(unknown)}; choose from {', '.join(SETS)}")
    if (args.generated < 0 or args.gen_features < 1 or args.gen_classes < 2
            or not 1 <= args.gen_nnz <= args.gen_features or not args.gen_shard_mb > 0):
        p.error("--generated >= 0, --gen-features >= 1, 1 <= --gen-nnz <= --gen-features, --gen-classes >= 2, "
                "--gen-shard-mb > 0")
    gen_spec = None
    if args.generated:
        rows, features = args.generated, args.gen_features
        if args.quick:
            rows, features = min(rows, QUICK_GEN["rows"]), min(features, QUICK_GEN["features"])
        gen_spec = {"rows": rows, "test_rows": max(1, rows // 10), "features": features,
                    "nnz": min(args.gen_nnz, features), "classes": args.gen_classes, "noise": args.gen_noise,
                    **({"shard_rows": QUICK_GEN["shard_rows"]} if args.quick else {"shard_mb": args.gen_shard_mb})}
    repeats = args.repeats or (1 if args.quick else 3)
    max_iter = args.max_iter or (QUICK_MAX_ITER if args.quick else 1000)
    traj_max_iter = args.traj_max_iter or max_iter
    try:
        import streamwww  # noqa: F401 -- a package being edited may not import: say so plainly
    except Exception as e:
        print(f"[bench_cs] streamwww does not import: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    try:
        import liblinear.liblinearutil  # noqa: F401 -- needed by the LIBLINEAR rows
    except ImportError:
        print("[bench_cs] liblinear-official is not installed: pip install 'liblinear-official>=2.47' "
              "(the project's `bench` extra)", file=sys.stderr)
        return 1
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    missing = cs_missing()
    if missing:
        log(f"[bench_cs] streamwww CS rows {missing}")
    line = self_check()
    log(f"[bench_cs] {line}")
    ctx = BenchContext(args.quick, args.data_dir, args.workdir, args.workdir, args.out or os.path.join(args.workdir, "x.md"),
                       seed=SEED)
    start, load_start = time.perf_counter(), _uptime()
    results, summaries = {}, {}
    for name in sets:
        ds = load_set(ctx, name, args.quick)
        log(f"[bench_cs] {ds.facts()}")
        results[name] = measure_set(ds, repeats, max_iter, traj_max_iter, log)
        summaries[name] = summarize(results[name])
    generated = generated_summary = None
    if gen_spec is not None:
        generated = measure_generated(args.workdir, gen_spec, repeats, max_iter, log)
        generated_summary = summarize_generated(generated)
    text = report(ctx, results, summaries, repeats, max_iter, traj_max_iter, (load_start, _uptime()),
                  time.perf_counter() - start, line, generated, generated_summary)
    print(text, flush=True)
    if args.out:
        replace_section(args.out, MARKER, text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": sys.argv, "quick": args.quick, "repeats": repeats, "max_iter": max_iter,
                       "traj_max_iter": traj_max_iter,
                       "versions": version_map(("numpy", "scipy", "numba", "scikit-learn", "liblinear-official")),
                       "results": results, "summaries": summaries, "generated": generated,
                       "generated_summary": generated_summary}, f, indent=1, default=str)
        log(f"[bench_cs] raw numbers in {args.json}")
    failed = [f"{n}/{m}" for n, s in summaries.items() for m, x in s["methods"].items() if "error" in x]
    failed += [f"generated/{m}" for m, x in (generated_summary or {}).items() if "error" in x]
    if failed:
        log(f"[bench_cs] FAILED or not run: {', '.join(failed)}" + (f" ({missing})" if missing else ""))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
