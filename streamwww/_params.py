"""Parameter validation with scikit-learn's wording, and the run options' defaults, shared by the
estimator, ``train``/``resume`` and the CLI."""

from __future__ import annotations

import numbers
import os

import numpy as np

# The values of ``device``: cuda-async is the GPU's row-parallel pass (backends.select).
DEVICES = ("auto", "cpu", "cuda", "cuda-async")

__all__ = ["DEVICES", "check_params", "check_int", "check_interval", "check_n_jobs", "check_block_rows",
           "check_run_options", "resolve_seed", "resolve_memory_budget", "resolve_prefetch", "resolve_n_jobs",
           "usable_cores", "DEFAULTS", "MAX_ITER", "UNMIXED"]


def _fail(owner: str, name: str, what: str, value) -> None:
    raise ValueError(f"The {name!r} parameter of {owner} must be {what}. Got {value!r} instead.")


def _real(owner, name, value, *, low=None, low_open=True, high=None, high_open=True, allow_none=False):
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value):
        rng = _interval(low, low_open, high, high_open)
        _fail(owner, name, f"a float in {rng}" + (" or None" if allow_none else ""), value)
    bad = (low is not None and (value <= low if low_open else value < low)) or \
          (high is not None and (value >= high if high_open else value > high))
    if bad:
        rng = _interval(low, low_open, high, high_open)
        _fail(owner, name, f"a float in {rng}" + (" or None" if allow_none else ""), value)


def _interval(low, low_open, high, high_open) -> str:
    lo = "-inf" if low is None else f"{low:g}"
    hi = "inf" if high is None else f"{high:g}"
    return f"{'(' if low_open or low is None else '['}{lo}, {hi}{')' if high_open or high is None else ']'}"


def check_int(owner: str, name: str, value, *, low: int, allow_none: bool = False) -> None:
    """``value`` must be an int >= ``low`` (or None with ``allow_none``); scikit-learn's wording."""
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        _fail(owner, name, f"an int in [{low}, inf)" + (" or None" if allow_none else ""), value)


def _choice(owner, name, value, options):
    if not isinstance(value, str) or value not in options:
        _fail(owner, name, "a str among " + "{" + ", ".join(repr(o) for o in options) + "}", value)


def check_params(owner: str, *, C, tol, max_iter, fit_intercept, intercept_scaling, gap_decay,
                 subproblem, random_state, device, verbose, shrinking=True, n_jobs=None, block_rows=1, loss="ww",
                 allow_C_list: bool = False) -> tuple[float, ...]:
    """Validate a model's parameters; return ``C`` as a tuple of floats (the run's options:
    :func:`check_run_options`)."""
    check_n_jobs(owner, n_jobs)
    check_block_rows(owner, block_rows)
    if allow_C_list and isinstance(C, (list, tuple, np.ndarray)):
        Cs = list(np.asarray(C, dtype=object).ravel())
        if not Cs:
            _fail(owner, "C", "a float in (0, inf) or a non-empty list of them", C)
        for c in Cs:
            _real(owner, "C", c, low=0.0)
        Cs = tuple(float(c) for c in Cs)
        if len(set(Cs)) != len(Cs):
            _fail(owner, "C", "a list of distinct floats in (0, inf)", C)
    else:
        _real(owner, "C", C, low=0.0)
        Cs = (float(C),)
    _real(owner, "tol", tol, low=0.0, low_open=False)
    check_int(owner, "max_iter", max_iter, low=1)
    if not isinstance(fit_intercept, (bool, np.bool_)):
        _fail(owner, "fit_intercept", "an instance of 'bool'", fit_intercept)
    _real(owner, "intercept_scaling", intercept_scaling, low=0.0)
    _real(owner, "gap_decay", gap_decay, low=0.0, high=1.0, allow_none=True)
    _choice(owner, "subproblem", subproblem, ("walrus", "shark"))
    _choice(owner, "loss", loss, LOSSES)
    if loss == "cs" and subproblem != "walrus":
        raise ValueError(f"{owner}: subproblem={subproblem!r} names a Weston-Watkins block solver; "
                         "Crammer-Singer (loss='cs') steps by its exact simplex projection: leave "
                         "subproblem='walrus'")
    if not isinstance(shrinking, (bool, np.bool_)):
        _fail(owner, "shrinking", "an instance of 'bool'", shrinking)
    _choice(owner, "device", device, DEVICES)
    check_int(owner, "verbose", verbose, low=0)
    if not (random_state is None or isinstance(random_state, (numbers.Integral, np.random.RandomState))) \
            or isinstance(random_state, bool):
        _fail(owner, "random_state", "an int, a numpy.random.RandomState instance or None", random_state)
    return Cs


def check_n_jobs(owner: str, n_jobs) -> None:
    """``n_jobs``: None, or a non-zero int (scikit-learn's convention)."""
    if n_jobs is not None and (isinstance(n_jobs, bool) or not isinstance(n_jobs, numbers.Integral) or n_jobs == 0):
        _fail(owner, "n_jobs", "an int other than 0 (-1: every usable core; -k: all but k - 1) or None", n_jobs)


def check_block_rows(owner: str, block_rows) -> None:
    """``block_rows``: an int in [1, MAX_BLOCK_ROWS]."""
    if isinstance(block_rows, bool) or not isinstance(block_rows, numbers.Integral) or \
            not 1 <= block_rows <= MAX_BLOCK_ROWS:
        _fail(owner, "block_rows", f"an int in [1, {MAX_BLOCK_ROWS}]", block_rows)


#: The losses a model can minimize: Weston-Watkins, Crammer-Singer.
LOSSES = ("ww", "cs")

#: The largest block of the block pass (its Gram entries grow as the square).
MAX_BLOCK_ROWS = 4096


def usable_cores() -> int:
    """The cores this process may use: its CPU affinity and cgroup CPU quota (the rules of
    loky's ``cpu_count``, which joblib and scikit-learn use), capped by ``OMP_NUM_THREADS``
    when that is set (as joblib's workers and OpenMP programs read it) and by numba's
    thread pool (``NUMBA_NUM_THREADS``).

    Read here rather than through joblib: importing joblib costs every run's start a
    twentieth of a second, for two files read."""
    import numba

    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    quota = _cgroup_quota()
    if quota is not None:
        cores = min(cores, quota)
    omp = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if omp.isdigit() and int(omp) > 0:
        cores = min(cores, int(omp))
    return max(1, min(cores, int(numba.config.NUMBA_NUM_THREADS)))


def _cgroup_quota() -> int | None:
    """The cgroup's CPU quota rounded up (v2 ``cpu.max``, v1 ``cpu.cfs_quota_us`` over
    ``cpu.cfs_period_us``); None without one."""
    import math

    for path, read in (("/sys/fs/cgroup/cpu.max", lambda t: t.split()),
                       ("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", None)):
        try:
            with open(path) as f:
                text = f.read()
            if read is not None:
                quota, period = read(text)
            else:
                with open("/sys/fs/cgroup/cpu/cpu.cfs_period_us") as f:
                    quota, period = text.strip(), f.read().strip()
        except (OSError, ValueError):
            continue
        if quota in ("max", "-1"):
            return None
        try:
            q, p = int(quota), int(period)
        except ValueError:
            return None
        return max(1, math.ceil(q / p)) if q > 0 and p > 0 else None
    return None


def resolve_n_jobs(n_jobs, owner: str = "train") -> int:
    """The threads of a run for ``n_jobs``: None or -1 every usable core (:func:`usable_cores`),
    -k all but k - 1 of them (at least one), k > 0 that many (at most numba's thread pool)."""
    check_n_jobs(owner, n_jobs)
    cores = usable_cores()
    if n_jobs is None:
        return cores
    n_jobs = int(n_jobs)
    if n_jobs < 0:
        return max(1, cores + 1 + n_jobs)
    import numba

    return min(n_jobs, int(numba.config.NUMBA_NUM_THREADS))  # (asked for: beyond the usable cores too)


def check_run_options(owner: str, *, inner_passes, eval_every, mix_shards, memory_budget, prefetch,
                      checkpoint_every, checkpoint_interval) -> None:
    """Validate a run's options (those of :data:`DEFAULTS`) before any work."""
    check_int(owner, "inner_passes", inner_passes, low=1)
    if not (isinstance(eval_every, str) and eval_every == "auto") and (
            isinstance(eval_every, bool) or not isinstance(eval_every, numbers.Integral) or eval_every < 1):
        _fail(owner, "eval_every", "an int in [1, inf) or 'auto'", eval_every)
    check_int(owner, "mix_shards", mix_shards, low=1)
    resolve_memory_budget(memory_budget, owner)
    resolve_prefetch(prefetch, owner=owner)
    check_int(owner, "checkpoint_every", checkpoint_every, low=0)
    check_interval(checkpoint_interval, owner)


def check_interval(value, owner: str = "train") -> float:
    """``checkpoint_interval``: seconds, a float in [0, inf)."""
    _real(owner, "checkpoint_interval", value, low=0.0, low_open=False)
    return float(value)


def resolve_seed(random_state) -> int:
    """A concrete non-negative integer seed for ``random_state`` (fresh entropy for None)."""
    if random_state is None:
        return int(np.random.SeedSequence().entropy % (2**63))
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, 2**31 - 1))
    return int(random_state) % (2**63)


#: The default epoch limit (``max_iter``) of the estimators, ``train`` and the command line,
#: the one place for it.  The stop is the certificate (relative duality gap <= ``tol``); this
#: limit ends the runs that do not reach it.  The epochs a certificate needs grow about in
#: proportion to C; the limit lets every model of C <= 10 on the data sets users try first
#: (dna, satimage, letter, sector; either loss, with and without the intercept) reach it with
#: a margin of four, and bounds the time an unreachable one takes (docs/benchmarks.md,
#: "Epochs to the default stop").  A checkpoint keeps the limit it recorded.
MAX_ITER = 10_000


# The one place for the defaults of the run options shared by ``train``, ``resume``,
# the estimator and the CLI.
DEFAULTS = {
    "mix_shards": 2,        # shards trained together as one block (stores)
    "prefetch": "auto",     # shards loading ahead: 2, or 6 from an object store (resolve_prefetch)
    "inner_passes": 1,      # passes over a loaded shard group
    "eval_every": "auto",   # epochs between objective passes ("auto": engine.schedule)
    "checkpoint_every": 0,  # shards between checkpoints within an epoch (0: epoch ends only)
    "checkpoint_interval": 60.0,  # seconds at least between two checkpoints of a run (0: no minimum)
    "memory_budget": "auto",  # decoded shards kept in RAM between epochs (stores)
}

# prefetch="auto": shards loading ahead from a local store, and from an object store,
# where only loads in flight together hide its latency: 6 ahead hide a request latency
# that 2 do not (docs/STORAGE.md, "Stores on an object store")
LOCAL_PREFETCH, REMOTE_PREFETCH = 2, 6


def resolve_prefetch(value, remote: bool = False, owner: str = "train") -> int:
    """Shards loading ahead: ``"auto"`` (2, or 6 for a store on an object store) or an int >= 1."""
    if isinstance(value, str) and value == "auto":
        return REMOTE_PREFETCH if remote else LOCAL_PREFETCH
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        _fail(owner, "prefetch", "'auto' or an int in [1, inf)", value)
    return int(value)


# memory_budget="auto": this share of the memory available when a run starts
AUTO_MEMORY_SHARE = 0.5


def resolve_memory_budget(value, owner: str = "train") -> int:
    """Bytes of decoded shards a run may keep in memory: ``"auto"`` (half the memory
    available now), or a number of bytes >= 0 (0: read every shard from storage
    every time)."""
    if isinstance(value, str) and value == "auto":
        import psutil

        return int(AUTO_MEMORY_SHARE * psutil.virtual_memory().available)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        _fail(owner, "memory_budget", "'auto' or an int (bytes) in [0, inf)", value)
    return int(value)

# Shard mixing needs several shards: in-memory data (one shard) trains unmixed, and
# so does a checkpoint whose manifest lacks the option.
UNMIXED = 1
