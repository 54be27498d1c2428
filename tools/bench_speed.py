"""Speed (issue 18): the fixed cost of a streamed epoch, and the authors' C++ side by side.

Section ``tax``: a generated store (``--rows`` x ``--features``, ``--nnz`` per row,
``--classes``), converted with shards of each of ``--shard-rows``, trained for
``--epochs`` epochs (``tol=0``: every epoch and its objective pass run) in a fresh
process per run:

- *in memory*: ``train((X, y))`` on the same rows (read from the store before the clock starts);
- *store*: ``train(store)``, no checkpoint directory, the default ``memory_budget`` (the store
  fits: it is read once and kept; beta stays in memory);
- *store + checkpoints*: the same with a checkpoint directory (defaults: a commit at most every
  60 s and at the end);
- *store > budget*: ``memory_budget=0`` with a checkpoint directory, committed every epoch
  (``checkpoint_interval=0``): every shard read from disk every time and every shard's ``beta``
  written by every commit;
- *store > budget, dynamic malloc*: the same with ``STREAMWWW_RELEASE_MEMORY=0`` (glibc's
  dynamic thresholds: freed shard buffers stay resident, later ones reuse their pages);
- *store > budget, default commits*: ``memory_budget=0`` with a checkpoint directory and its
  default commit interval (at most one a minute, and at the end): every shard read from disk
  every epoch, without a commit after each epoch; ``beta`` between commits in a scratch file
  (docs/TRAINING.md), written and read every epoch (as versions, before f6922d9).

Reported: the ``train`` call's wall time per epoch (start-up of the run, first epoch, objective
passes, commits included), median of ``--repeats``, and its ratio to the in-memory run; the
process's user and system CPU and its minor page faults (fresh pages touched) per epoch
during the call (``getrusage``), medians too.
``--before REV`` runs the same children on a git worktree of ``REV`` too (side by side, in
the same run); ``--modes`` picks some of the runs (keys ``memory``, ``store``, ``checkpoints``,
``over``, ``over-malloc``, ``over-default``, in the order above). Every run of a store must give
the same model, bitwise (checked).

Section ``cli``: for each LIBSVM file (dna, satimage, letter, sector; ``--data-dir``) the
authors' C++ (``train -s 30 -c 1``, its trajectory trace on: solver time and epochs to
``gap <= 0.0009 gap_1``) and ours, ``WWClassifier(C=1, fit_intercept=False, gap_decay=0.0009,
tol=0)`` on ``load_svmlight_file``'s matrices (solver time = ``history_[-1]["time"]``, fit
wall) and the command line a user types: ``streamwww convert FILE S.zarr`` then ``streamwww
train S.zarr --C 1 --no-intercept --tol 0 --gap-decay 0.0009 --checkpoint-dir CK
--model-out M.npz``, both
commands' wall time, and the start-up of one command (``streamwww --version``) on its own.
Start-up is also reported the way the goal asks (issue 18, goal 3: "report start-up
separately"): the *fixed cost* of the same commands, with the same flags, on a 20-row sample
of the file (every n-th line: the same layout, up to 20 of its classes, too small for its
size to matter) -- imports, Numba's kernels loaded from its cache, the store opened and committed;
the table gives the commands' time less that fixed cost against 1.5x the C++ command.
The C++ is built from ``--cpp-src`` (a checkout of ``YutongWangUMich/liblinear`` at
``ea8db6c``: ``git clone https://github.com/YutongWangUMich/liblinear && git -C liblinear
checkout ea8db6c``) with its own Makefile in a temporary folder; its source defines
``TRACE_OPTIM_TRAJ``.

Section ``gap``: time to ``gap <= 0.0009 gap_1`` on the same four files, the C++ against
ours with the defaults (shrinking, ``eval_every="auto"``), with objectives after every epoch
(``eval_every=1``) and without shrinking (``shrinking=False``), fit wall and solver time.

Section ``cold``: the first run after installing (an empty Numba cache: every kernel a
command uses is compiled once): ``streamwww demo`` and dna's ``convert`` and ``train``, cold
then warm (the cache just filled), in a fresh process each.

Section ``commands``: the command line's everyday commands on dna, warm, each in a fresh process:
``convert``, ``train`` (the cli section's flags), ``train --max-iter 100`` (stops there and
warns), ``evaluate`` and ``predict`` of the model on ``dna.scale.t``, ``info`` of the model and
``demo``: wall time and the child's own peak RSS.

Each tree's modules are compiled to bytecode before the clock starts (``compileall``, as ``pip
install`` does), so no child compiles them from source where ``PYTHONDONTWRITEBYTECODE`` is set.

Usage: python tools/bench_speed.py {tax,cli,gap,cold,commands,all} [--before REV] [--cpp-src DIR]
       [--repeats 3] [--out docs/benchmarks.md] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from statistics import median

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _benchenv import header, replace_section  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILES = ("dna.scale", "satimage.scale", "letter.scale", "sector.scale")

TAX_CHILD = r'''
import hashlib, inspect, json, resource, sys, time, warnings
warnings.simplefilter("ignore")
import numpy as np, scipy.sparse as sp
import streamwww as sw
from streamwww.io import open_store
a = json.loads(sys.argv[1])
kw = dict(C=0.1, tol=0.0, max_iter=a["epochs"], random_state=0)
opts = {k: v for k, v in a["opts"].items() if k in inspect.signature(sw.train).parameters}
if a["mode"] == "memory":
    st = open_store(a["store"])
    parts = [st.read_shard(i) for i in range(st.n_shards)]
    data = (sp.vstack([p[0] for p in parts]).tocsr(), np.concatenate([p[1] for p in parts]))
else:
    data = a["store"]
sw.train((np.eye(4, 3), np.array([0, 1, 2, 0])), C=1.0, max_iter=2, random_state=0)  # kernels loaded
# every mode starts as the in-memory one does, which read the store to make its arrays: Zarr
# imported and the garbage collector's generations emptied (a fresh process's first store run
# pays Zarr's import, ~0.2 s, and a full collection of its start-up's objects, ~0.1 s, once;
# docs/benchmarks.md gives that start-up apart)
import gc, zarr
gc.collect()
r0 = resource.getrusage(resource.RUSAGE_SELF)
t = time.perf_counter()
m = sw.train(data, **kw, **opts)
wall = time.perf_counter() - t
r1 = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"wall": wall, "epochs": int(m.n_iter_), "coef": hashlib.sha256(m.coef_.tobytes()).hexdigest(),
                  "user": r1.ru_utime - r0.ru_utime, "sys": r1.ru_stime - r0.ru_stime,
                  "faults": r1.ru_minflt - r0.ru_minflt}))
'''


def _child(cmd, env=None, cwd=None) -> tuple[float, str, float]:
    """Wall seconds, standard output and peak RSS (MiB: the child's own ``ru_maxrss``,
    from ``wait4``) of one command."""
    # never the repository as the working directory: `python -c` and `-m` put it first on
    # sys.path, ahead of PYTHONPATH (a --before worktree would silently run this code)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=cwd or tempfile.gettempdir())
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[:4]} failed ({proc.returncode}): {stderr[-2000:]}")
    return wall, stdout, usage.ru_maxrss / 1024


def _run(cmd, env=None, cwd=None) -> tuple[float, str]:
    """Wall seconds and standard output of one command (:func:`_child`)."""
    return _child(cmd, env, cwd)[:2]


def _data_file(args, name: str, work: str) -> str:
    """``name`` (e.g. ``dna.scale``) from ``--data-dir``'s ``.xz``, decompressed into ``work``."""
    path = os.path.join(work, name)
    with open(path, "wb") as f:
        subprocess.run(["xz", "-dc", os.path.join(args.data_dir, name + ".xz")], stdout=f, check=True)
    return path


def _env(tree: str | None) -> dict:
    env = dict(os.environ)
    if tree is not None:  # the worktree's package first (the installed one is an editable install of main)
        env["PYTHONPATH"] = tree + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _check_tree(trees: dict) -> None:
    """Each tree's children import that tree's streamwww (checked, not assumed)."""
    for name, tree in trees.items():
        _, out = _run([sys.executable, "-c", "import streamwww; print(streamwww.__file__)"], env=_env(tree))
        want = os.path.join(tree or ROOT, "streamwww")
        if not os.path.realpath(out.strip()).startswith(os.path.realpath(want)):
            raise RuntimeError(f"{name}: children import {out.strip()}, not {want}")


def _compile_trees(trees: dict) -> None:
    """Each tree's modules compiled to bytecode before any timing, as ``pip install`` does:
    where ``PYTHONDONTWRITEBYTECODE`` is set (as in this project's sandbox), a child would
    otherwise compile every module of a source tree it imports (~0.1 s of each command)."""
    import compileall

    for tree in trees.values():
        compileall.compile_dir(os.path.join(tree or ROOT, "streamwww"), quiet=1)


def _worktree(rev: str, where: str) -> str:
    path = os.path.join(where, f"tree-{rev}")
    subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", path, rev], check=True, capture_output=True)
    return path


def _drop_worktree(path: str) -> None:
    subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", path], capture_output=True)


# ----------------------------------------------------------------------------- tax


TAX_MODES = ("memory", "store", "checkpoints", "over", "over-malloc", "over-default")  # --modes keys, in order


def run_tax(args, work: str, trees: dict) -> str:
    import streamwww as sw

    text = os.path.join(work, "gen.libsvm")
    _run([sys.executable, "-m", "streamwww.cli", "make-data", text, "--rows", str(args.rows), "--features",
          str(args.features), "--nnz-per-row", str(args.nnz), "--classes", str(args.classes), "--seed", "0", "-q"])
    over = {"checkpoint_dir": True, "memory_budget": 0, "checkpoint_interval": 0}
    modes = [("in memory", "memory", {}, {}),
             ("store", "store", {}, {}),
             ("store + checkpoints", "store", {"checkpoint_dir": True}, {}),
             ("store > budget", "store", over, {}),
             ("store > budget, dynamic malloc", "store", over, {"STREAMWWW_RELEASE_MEMORY": "0"}),
             ("store > budget, default commits", "store", {"checkpoint_dir": True, "memory_budget": 0}, {})]
    if args.modes:  # in the table's order; in memory always (every ratio needs it)
        wanted = {"memory", *args.modes.split(",")}
        modes = [m for key, m in zip(TAX_MODES, modes) if key in wanted]
    rows = []
    for shard_rows in args.shard_rows:
        store = os.path.join(work, f"s{shard_rows}.zarr")
        _run([sys.executable, "-m", "streamwww.cli", "convert", text, store, "--shard-rows", str(shard_rows),
              "--shuffle", "--seed", "0", "--overwrite", "-q"])
        n_shards = sw.open_store(store).n_shards
        res: dict = {}
        def child(tree: str | None, mode: str, opts: dict, extra_env: dict, epochs: int) -> dict:
            o = dict(opts)
            if o.get("checkpoint_dir"):
                o["checkpoint_dir"] = tempfile.mkdtemp(dir=work, prefix="ck-")
            payload = {"mode": mode, "store": store, "epochs": epochs, "opts": o}
            try:
                _, out = _run([sys.executable, "-c", TAX_CHILD, json.dumps(payload)], env={**_env(tree), **extra_env})
            finally:
                if o.get("checkpoint_dir"):
                    shutil.rmtree(o["checkpoint_dir"], ignore_errors=True)
            return json.loads(out.strip().splitlines()[-1])

        for tree in trees.values():  # untimed: every kernel these runs use compiled into the tree's cache
            for _, mode, opts, extra_env in modes:
                child(tree, mode, opts, extra_env, 2)
        for rep in range(args.repeats):  # modes interleaved: drift hits them alike
            for tree_name, tree in trees.items():
                for label, mode, opts, extra_env in modes:
                    res.setdefault((tree_name, label), []).append(child(tree, mode, opts, extra_env, args.epochs))
        for tree_name in trees:  # (trees may differ on purpose: another objective schedule, ...)
            coefs = {r["coef"] for (t, label), rs in res.items() if t == tree_name and label != "in memory"
                     for r in rs}
            assert len(coefs) == 1, f"the store runs of {tree_name} gave {len(coefs)} different models"
        first = next(iter(trees))
        for tree_name in trees:
            base = median(r["wall"] for r in res[(tree_name, "in memory")]) / args.epochs
            for label, _, _, _ in modes:
                rs = res[(tree_name, label)]
                per = median(r["wall"] for r in rs) / args.epochs
                cpu = [median(r[key] for r in rs) / args.epochs for key in ("user", "sys", "faults")]
                # paired, repeat by repeat (runs minutes apart on a noisy VM drift together):
                # against the same repeat's in-memory run, and against the first tree's same run
                walls = [r["wall"] for r in rs]
                mem = _paired(walls, [r["wall"] for r in res[(tree_name, "in memory")]])
                vs_first = _paired([r["wall"] for r in res[(first, label)]], walls) if tree_name != first else ""
                rows.append((shard_rows, n_shards, tree_name, label, per * 1e3, per / base, mem, vs_first, *cpu))
    lines = [header("Fixed cost of a streamed epoch (issue 18): store vs in memory"),
             f"Generated data: {args.rows:,} rows, {args.features:,} features, {args.nnz} non-zeros per row, "
             f"{args.classes} classes (`streamwww make-data`, `convert --shuffle`), float32 CSR shards. "
             f"Each run: a fresh process, `train(..., C=0.1, tol=0, max_iter={args.epochs})` after Zarr's import "
             "and a `gc.collect()` (as the in-memory run's reading of the store leaves the process); ms per epoch = the "
             "`train` call's wall time / epochs (set-up, first epoch with its reads, every objective pass and "
             f"commit included), median of {args.repeats}; *vs memory* = the ratio to `train((X, y))` on the same "
             "rows in the same code (one block of all rows, where a store trains its shards in mixed pairs: another "
             "model, the same work per epoch), as a ratio of medians and as the median of the per-repeat ratios "
             "(*paired*: each repeat runs every mode of every code one after the other); with `--before`, each "
             "code's runs also paired with the first code's. All runs of a store with one code gave the bitwise-same model. *store*: default "
             "memory budget, no "
             "checkpoint directory; *+ checkpoints*: a checkpoint directory with the defaults; *> budget*: "
             "`memory_budget=0` and a commit every epoch (every shard read from disk every epoch, every "
             "shard's beta written by every commit); *dynamic malloc*: the same with `STREAMWWW_RELEASE_MEMORY=0`; "
             "*default commits*: `memory_budget=0` with the default commit interval (every shard read from "
             "disk every epoch, no commit after each epoch; beta between commits in a scratch file, since "
             "f6922d9, written and read every epoch as versions before). "
             "CPU and page faults: the process's user and system CPU time and minor page faults per epoch "
             "during the call (`getrusage`; the second core's threads included).", "",
             "| shard rows | shards | code | run | ms per epoch | vs memory | vs memory, paired [range] "
             f"| {next(iter(trees))} / the row's code, paired [range] | user CPU ms per epoch "
             "| system CPU ms per epoch | page faults per epoch |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for shard_rows, n_shards, tree_name, label, ms, ratio, mem, vs_first, user, sys_, faults in rows:
        lines.append(f"| {shard_rows:,} | {n_shards} | {tree_name} | {label} | {ms:.1f} | {ratio:.2f} | {mem} "
                     f"| {vs_first} | {1e3 * user:.0f} | {1e3 * sys_:.0f} | {faults:,.0f} |")
    return "\n".join(lines) + "\n"


def _paired(a, b) -> str:
    """Median [min-max] of the ratios ``a[i] / b[i]`` of seconds of runs made one after the other."""
    ratios = sorted(x / y for x, y in zip(a, b))
    return f"{median(ratios):.2f} [{ratios[0]:.2f}-{ratios[-1]:.2f}]"


# ----------------------------------------------------------------------------- cli


def _build_cpp(src: str, work: str) -> str:
    build = os.path.join(work, "liblinear-ww")
    shutil.copytree(src, build, ignore=shutil.ignore_patterns(".git"))
    subprocess.run(["make", "-s", "train"], cwd=build, check=True, capture_output=True)
    return os.path.join(build, "train")


def _cpp_run(binary: str, data: str, work: str) -> dict:
    wall, out = _run([binary, "-s", "30", "-c", "1", "-t", "100000", data, os.path.join(work, "cpp.model")])
    trace = [line.split(",") for line in out.strip().splitlines() if line.count(",") >= 2]
    return {"wall": wall, "solver": float(trace[-1][0]) / 1e3, "epochs": len(trace)}


OURS_CHILD = r'''
import json, os, sys, time, warnings
warnings.simplefilter("ignore")
import numpy as np
from sklearn.datasets import load_svmlight_file
import streamwww as sw
X, y = load_svmlight_file(sys.argv[1])
shrinking = len(sys.argv) < 3 or sys.argv[2] == "1"  # (a tree from before shrinking ignores it)
kw = {} if "shrinking" not in sw.WWClassifier().get_params() else {"shrinking": shrinking}
every = sys.argv[3] if len(sys.argv) > 3 else "default"  # "1": objectives after every epoch


def fit(**params):  # the estimator, or train() (the same engine) where eval_every is set
    if every == "default":
        return sw.WWClassifier(**params, **kw).fit(X, y)
    return sw.train((X, y), **params, **kw, eval_every=int(every))


# the kernels this fit uses loaded from Numba's cache (the same data: dense or CSR, shrinking, overlap)
fit(C=1.0, fit_intercept=False, max_iter=3, random_state=0)
seed = int(os.environ.get("BENCH_SEED", "0"))
best = None
for _ in range(int(os.environ.get("BENCH_FITS", "1"))):  # the same fit again: the best of them
    t, cpu = time.perf_counter(), time.process_time()
    m = fit(C=1.0, fit_intercept=False, gap_decay=0.0009, tol=0.0, max_iter=100000, random_state=seed)
    got = {"wall": time.perf_counter() - t, "cpu": time.process_time() - cpu, "solver": m.history_[-1]["time"],
           "epochs": int(m.n_iter_), "passes": len(m.history_)}
    best = got if best is None else {k: min(best[k], got[k]) for k in got}
print(json.dumps(best))
'''


# our train command's flags in the cli and commands sections: the C++ run's problem (C = 1, no
# intercept) to gap <= 0.0009 gap_1
TRAIN_FLAGS = ["--C", "1", "--no-intercept", "--tol", "0", "--gap-decay", "0.0009", "--max-iter", "100000",
               "--seed", "0"]


def _ours_cli(data: str, work: str, tree: str | None) -> dict:
    store, model, ck = (os.path.join(work, n) for n in ("cli.zarr", "cli.npz", "cli-ck"))
    shutil.rmtree(store, ignore_errors=True)
    shutil.rmtree(ck, ignore_errors=True)
    env = _env(tree)
    cli = [sys.executable, "-m", "streamwww.cli"]
    convert, _ = _run(cli + ["convert", data, store, "-q"], env=env)
    train, _ = _run(cli + ["train", store, *TRAIN_FLAGS, "--checkpoint-dir", ck, "--model-out", model, "-q"], env=env)
    shutil.rmtree(ck, ignore_errors=True)
    out = {"convert": convert, "train": train, "wall": convert + train}
    # the one command: `train FILE` converts into the checkpoint directory, then trains (one start-up)
    try:
        out["one"], _ = _run(cli + ["train", data, *TRAIN_FLAGS, "--checkpoint-dir", ck, "--model-out", model, "-q"],
                             env=env)
    except RuntimeError:
        if tree is None:  # (a --before tree from before `train FILE` has no such column)
            raise
    return out


def _sample_file(data: str, work: str, rows: int = 20) -> str:
    """Every n-th line of ``data``, ``rows`` of them, in a file of its own: rows of the same
    kind (layout; up to ``rows`` of its classes) in a file too small for its size to matter."""
    with open(data, "rb") as f:
        lines = f.readlines()
    path = os.path.join(work, "sample-" + os.path.basename(data))
    with open(path, "wb") as f:
        f.writelines(lines[::max(1, len(lines) // rows)][:rows])
    return path


def run_cli(args, work: str, trees: dict) -> str:
    binary = _build_cpp(args.cpp_src, work) if args.cpp_src else None
    files = FILES[:2] if args.quick else FILES
    results = []
    startup = {name: median(_run([sys.executable, "-m", "streamwww.cli", "--version"], env=_env(tree))[0]
                            for _ in range(args.repeats)) for name, tree in trees.items()}
    python = median(_run([sys.executable, "-c", "pass"])[0] for _ in range(args.repeats))
    for name in files:
        data = _data_file(args, name, work)
        sample = _sample_file(data, work)
        row = {"data": name.split(".")[0]}
        for rep in range(args.repeats):
            if binary:
                row.setdefault("cpp", []).append(_cpp_run(binary, data, work))
            for tname, tree in trees.items():
                _, out = _run([sys.executable, "-c", OURS_CHILD, data], env=_env(tree))
                row.setdefault(("fit", tname), []).append(json.loads(out.strip().splitlines()[-1]))
                row.setdefault(("cli", tname), []).append(_ours_cli(data, work, tree))
                row.setdefault(("fixed", tname), []).append(_ours_cli(sample, work, tree))
        results.append(row)

    def med(rs, key):
        return median(r[key] for r in rs)

    lines = [header("Side by side with the authors' C++ (issue 18): per epoch, solver, fit and command wall time"),
             "Ours: `WWClassifier(C=1, fit_intercept=False, gap_decay=0.0009, tol=0)` on the `load_svmlight_file` "
             "matrices (*solver* = training passes, objective passes excluded, as the C++ trace counts; *fit* = "
             "the `fit` call's wall time) and the CLI (`streamwww convert FILE S.zarr` + `streamwww train S.zarr "
             "--C 1 --no-intercept --tol 0 --gap-decay 0.0009 --checkpoint-dir CK --model-out M.npz`, both commands' wall time, "
             "start-up included; *one command*: `streamwww train FILE` with the same flags, which converts FILE into CK "
             "and trains in one process). C++: `train -s 30 -c 1` of `YutongWangUMich/liblinear` at `ea8db6c` (its own "
             "Makefile, `-O3`; `TRACE_OPTIM_TRAJ` defined in its source: solver time from its trace, which "
             "excludes its objective computation), the same stopping rule; *command* = its wall time. "
             f"Medians of {args.repeats}; per epoch = solver time / epochs (first epoch included). *Fixed cost*: "
             "the same commands with the same flags on a 20-row sample of the file (every n-th line: the same "
             "layout, up to 20 of its classes), the commands' start-up as the goal asks it reported; the last "
             "column is the commands' time less it, against 1.5x the C++ command.",
             f"Start-up alone: `python -c pass` {python * 1e3:.0f} ms; `streamwww --version` "
             + ", ".join(f"{n}: {v * 1e3:.0f} ms" for n, v in startup.items()) + ".", ""]
    head = ["data", "C++ epochs", "ours epochs", "C++ ms/epoch", "ours ms/epoch", "ratio", "C++ solver s",
            "ours solver s", "ours fit wall s", "C++ command s"]
    head += [f"ours CLI s ({n})" for n in trees] + [f"CLI / (1.5 C++ + 1 s) ({n})" for n in trees]
    head += [f"ours one command s ({n})" for n in trees] + [f"one command / (1.5 C++ + 1 s) ({n})" for n in trees]
    head += [f"fixed cost s, two commands / one ({n})" for n in trees]
    head += [f"(CLI - fixed) / 1.5 C++, two commands / one ({n})" for n in trees]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    main_tree = next(iter(trees))
    for row in results:
        fit = row[("fit", main_tree)]
        cpp = row.get("cpp")
        ours_ms = med(fit, "solver") / med(fit, "epochs") * 1e3
        cells = [row["data"]]
        if cpp:
            cpp_ms = med(cpp, "solver") / med(cpp, "epochs") * 1e3
            cells += [f"{med(cpp, 'epochs'):.0f}", f"{med(fit, 'epochs'):.0f}", f"{cpp_ms:.2f}", f"{ours_ms:.2f}",
                      f"{ours_ms / cpp_ms:.2f}", f"{med(cpp, 'solver'):.2f}", f"{med(fit, 'solver'):.2f}",
                      f"{med(fit, 'wall'):.2f}", f"{med(cpp, 'wall'):.2f}"]
        else:
            cells += ["", f"{med(fit, 'epochs'):.0f}", "", f"{ours_ms:.2f}", "", "", f"{med(fit, 'solver'):.2f}",
                      f"{med(fit, 'wall'):.2f}", ""]
        for key in ("wall", "one"):  # two commands, then one
            clis = [med(row[("cli", n)], key) if key in row[("cli", n)][0] else None for n in trees]
            cells += ["" if c is None else f"{c:.2f}" for c in clis]
            cells += [f"{c / (1.5 * med(cpp, 'wall') + 1.0):.2f}" if cpp and c is not None else "" for c in clis]
        fixed = {n: {k: med(row[("fixed", n)], k) for k in ("wall", "one") if k in row[("fixed", n)][0]} for n in trees}
        cells += [" / ".join(f"{v:.2f}" for v in fixed[n].values()) for n in trees]
        cells += [" / ".join(f"{(med(row[('cli', n)], k) - v) / (1.5 * med(cpp, 'wall')):.2f}"
                             for k, v in fixed[n].items()) if cpp else "" for n in trees]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("CLI commands split (convert + train, s): " + "; ".join(
        f"{row['data']} " + ", ".join(f"{n}: {med(row[('cli', n)], 'convert'):.2f} + {med(row[('cli', n)], 'train'):.2f}"
                                      for n in trees) for row in results) + ".")
    return "\n".join(lines) + "\n"


def _cold_runs(tree: str | None, data: str, work: str) -> dict:
    """First-time runs (each command set with its own empty Numba cache) and the runs after
    them (the cache they filled), of the demo and of dna's two commands: wall seconds."""
    cli = [sys.executable, "-m", "streamwww.cli"]
    store, model, ck = (os.path.join(work, n) for n in ("cold.zarr", "cold.npz", "cold-ck"))
    out = {}
    for commands in (("demo",), ("convert", "train")):
        cache = tempfile.mkdtemp(prefix="numba-cache-", dir=work)
        env = {**_env(tree), "NUMBA_CACHE_DIR": cache}
        for when in ("cold", "warm"):
            for cmd in commands:
                if cmd == "demo":
                    argv = ["demo"]
                elif cmd == "convert":
                    shutil.rmtree(store, ignore_errors=True)
                    argv = ["convert", data, store, "-q"]
                else:
                    shutil.rmtree(ck, ignore_errors=True)
                    argv = ["train", store, "--C", "1", "--checkpoint-dir", ck, "--model-out", model,
                            "--seed", "0", "-q"]
                out[(cmd, when)] = _run(cli + argv, env=env)[0]
        shutil.rmtree(cache, ignore_errors=True)
    return out


def run_cold(args, work: str, trees: dict) -> str:
    data = _data_file(args, "dna.scale", work)
    runs = {name: [] for name in trees}
    for _ in range(args.repeats):  # the trees interleaved
        for name, tree in trees.items():
            runs[name].append(_cold_runs(tree, data, work))
    lines = [header("Cold start (issue 18): the first run after installing, Numba's cache empty"),
             "Each run: `streamwww demo` with a fresh, empty `NUMBA_CACHE_DIR` (as after `pip install`: Numba "
             "compiles every kernel a command uses, once, into its cache), then again with the cache it filled "
             "(*warm*); the same for `streamwww convert dna.scale S.zarr` followed by `streamwww train S.zarr "
             "--C 1 --checkpoint-dir CK --model-out M.npz` (the defaults: intercept, tol 1e-3) with a cache of "
             f"their own; each command's wall time, in a fresh process. Medians of {args.repeats}, the trees interleaved"
             + (f"; *{list(trees)[1]}*: the code before this change, in the same run." if len(trees) > 1 else "."),
             "", "| code | command | cold s | warm s | cold - warm s |", "|---|---|---|---|---|"]
    for name, rs in runs.items():
        for cmd in ("demo", "convert", "train"):
            cold = median(r[(cmd, "cold")] for r in rs)
            warm = median(r[(cmd, "warm")] for r in rs)
            label = {"demo": "`streamwww demo`", "convert": "`convert dna.scale`", "train": "`train` (dna)"}[cmd]
            lines.append(f"| {name} | {label} | {cold:.1f} | {warm:.1f} | {cold - warm:.1f} |")
    return "\n".join(lines) + "\n"


# the command line's everyday commands on dna (train's flags: the cli section's; a second
# train stops at --max-iter 100 with the defaults otherwise, to time a run that warns)
COMMANDS = ("convert", "train", "train (stops at --max-iter)", "evaluate", "predict", "info", "demo")


def _command_runs(tree, train: str, test: str, work: str) -> dict:
    cli = [sys.executable, "-m", "streamwww.cli"]
    store, model, ck, pred = (os.path.join(work, n) for n in ("cmd.zarr", "cmd.npz", "cmd-ck", "cmd.txt"))
    shutil.rmtree(store, ignore_errors=True)
    env = _env(tree)
    out = {}
    for name in COMMANDS:
        shutil.rmtree(ck, ignore_errors=True)
        argv = {"convert": ["convert", train, store, "-q"],
                "train": ["train", store, *TRAIN_FLAGS, "--checkpoint-dir", ck, "--model-out", model, "-q"],
                "train (stops at --max-iter)": ["train", store, "--max-iter", "100", "--seed", "0",
                                                "--checkpoint-dir", ck, "--model-out", model + "2.npz", "-q"],
                "evaluate": ["evaluate", model, test],
                "predict": ["predict", model, test, "--output", pred],
                "info": ["info", model],
                "demo": ["demo"]}[name]
        wall, _, rss = _child(cli + argv, env=env)
        out[name] = (wall, rss)
    return out


def run_commands(args, work: str, trees: dict) -> str:
    files = {name: _data_file(args, name, work) for name in ("dna.scale", "dna.scale.t")}
    for tree in trees.values():  # untimed: a worktree's Numba cache filled, the files in the page cache
        _command_runs(tree, files["dna.scale"], files["dna.scale.t"], work)
    runs = {name: [] for name in trees}
    for _ in range(args.repeats):  # the trees interleaved
        for name, tree in trees.items():
            runs[name].append(_command_runs(tree, files["dna.scale"], files["dna.scale.t"], work))
    names = list(trees)
    lines = [header("Everyday commands (issue 18): wall time and peak memory of one command"),
             "Each command in a fresh process, warm (Numba's cache filled), on dna (`dna.scale`, its test file "
             "`dna.scale.t`): `convert`, `train` with the cli section's flags (it converges), `train --max-iter "
             "100` (the defaults otherwise: it stops there and warns), `evaluate` and `predict` of the model on "
             "the test file, `info` of the model, `demo`. Wall seconds and peak RSS (the child's own "
             f"`ru_maxrss`), medians of {args.repeats}, the trees interleaved"
             + (f"; *{names[1]}*: the code before, in the same run; *ratio*: this / {names[1]} per repeat, "
                "median [range]." if len(names) > 1 else "."), ""]
    head = "| command | " + " | ".join(f"{n} s" for n in names) + (" | ratio" if len(names) > 1 else "") + \
        " | " + " | ".join(f"{n} MiB" for n in names) + " |"
    lines += [head, "|" + "---|" * (head.count("|") - 1)]
    for cmd in COMMANDS:
        walls = [median(r[cmd][0] for r in runs[n]) for n in names]
        rss = [median(r[cmd][1] for r in runs[n]) for n in names]
        cells = [f"{w:.2f}" for w in walls]
        if len(names) > 1:
            cells.append(_paired([r[cmd][0] for r in runs[names[0]]], [r[cmd][0] for r in runs[names[1]]]))
        lines.append(f"| `{cmd}` | " + " | ".join(cells) + " | " + " | ".join(f"{m:.0f}" for m in rss) + " |")
    return "\n".join(lines) + "\n"


def run_gap(args, work: str, trees: dict) -> str:
    """Time to ``gap <= 0.0009 gap_1``: the C++ against ours with and without shrinking."""
    binary = _build_cpp(args.cpp_src, work) if args.cpp_src else None
    files = FILES[:2] if args.quick else FILES
    tree = next(iter(trees.values()))
    # (key, tree, child flags): shrinking and the "auto" schedule, every epoch, no shrinking;
    # with --before, the defaults of that tree as well
    runs = [("on", tree, ["1"]), ("every", tree, ["1", "1"]), ("off", tree, ["0"])]
    runs += [(name, t, ["1"]) for name, t in list(trees.items())[1:]]
    rows = []
    for name in files:
        data = _data_file(args, name, work)
        row = {"data": name.split(".")[0], "cpp": [], **{key: [] for key, _, _ in runs}}
        for _ in range(args.repeats):  # interleaved: the variants share the machine's moods
            for seed in range(args.seeds):
                if binary:
                    row["cpp"].append(_cpp_run(binary, data, work))
                for key, t, flags in runs:
                    _, out = _run([sys.executable, "-c", OURS_CHILD, data, *flags],
                                  env={**_env(t), "BENCH_SEED": str(seed)})
                    row[key].append(json.loads(out.strip().splitlines()[-1]))
        rows.append(row)

    def med(rs, key):
        return median(r[key] for r in rs)

    lines = [header("Time to a certified gap (issue 18, goal 2): shrinking, side by side with the authors' C++"),
             "Ours: `WWClassifier(C=1, fit_intercept=False, gap_decay=0.0009, tol=0, random_state=seed)` on the "
             "`load_svmlight_file` matrices with the defaults (*default*: shrinking, objectives on the "
             "`eval_every=\"auto\"` schedule: version 2 since 2026-11-27, spaced by the run's progress), with shrinking and objectives after every epoch (*every*: "
             "`train((X, y), ..., eval_every=1)`, the default before 2026-11-26) and with `shrinking=False` "
             "(*full*: the auto schedule), each in a fresh process after a warm-up fit "
             f"(the best of {args.fits} identical fits in it: the VM's noise only adds time); *solver* = "
             "training passes (objective passes excluded, as the C++ trace counts; with the objectives overlapped on the second core (letter, sector), the "
             "training thread's pass time), *objective passes* = the evaluated epochs (`len(history_)`), *fit* = the `fit` call's wall time (objective passes, set-up "
             "included), *fit CPU* = the process's CPU seconds during `fit` (both cores). C++: "
             "`train -s 30 -c 1` of `YutongWangUMich/liblinear` at `ea8db6c` (its Makefile, `-O3`, "
             "`TRACE_OPTIM_TRAJ`): solver time from its trace. All stop at the first epoch with "
             f"`gap <= 0.0009 gap_1`. Medians of {args.repeats * args.seeds} runs"
             + (f" ({args.repeats} x random_state 0 .. {args.seeds - 1}; the C++ has one row-order seed)"
                if args.seeds > 1 else "") + ", the runs interleaved"
             + (f"; *{', '.join(list(trees)[1:])}*: the defaults of that commit, in the same run" if len(trees) > 1
                else "") + ".", ""]
    variants = tuple(key for key, _, _ in runs)
    tag = "(" + " / ".join({"on": "default", "every": "every", "off": "full"}.get(v, v) for v in variants) + ")"

    def each(row, fmt, value):
        return " / ".join(fmt.format(value(row[v])) for v in variants)

    head = ["data", "C++ epochs", f"ours epochs {tag}", f"ours objective passes {tag}", "C++ solver s",
            f"ours solver s {tag}",
            f"ours fit s {tag}", "ours fit CPU s (default)", f"ours solver / C++ solver {tag}",
            f"ours fit / C++ solver {tag}", f"fit / solver {tag}"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        on, cpp = row["on"], row["cpp"]
        c_solver = med(cpp, "solver") if cpp else float("nan")
        cells = [row["data"], f"{med(cpp, 'epochs'):.0f}" if cpp else "",
                 each(row, "{:.0f}", lambda rs: med(rs, "epochs")),
                 each(row, "{:.0f}", lambda rs: med(rs, "passes")), f"{c_solver:.3f}" if cpp else "",
                 each(row, "{:.3f}", lambda rs: med(rs, "solver")),
                 each(row, "{:.3f}", lambda rs: med(rs, "wall")),
                 f"{med(on, 'cpu'):.3f}" if "cpu" in on[0] else "",
                 each(row, "{:.2f}", lambda rs: med(rs, "solver") / c_solver) if cpp else "",
                 each(row, "{:.2f}", lambda rs: med(rs, "wall") / c_solver) if cpp else "",
                 each(row, "{:.2f}", lambda rs: med(rs, "wall") / med(rs, "solver"))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("section", choices=("tax", "cli", "gap", "cold", "commands", "all"))
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--features", type=int, default=2_000)
    p.add_argument("--nnz", type=int, default=30)
    p.add_argument("--classes", type=int, default=20)
    p.add_argument("--shard-rows", type=int, nargs="+", default=[5_000, 50_000])
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seeds", type=int, default=1,
                   help="gap: each repeat runs ours with random_state 0 .. N-1 (the row orders differ)")
    p.add_argument("--fits", type=int, default=1,
                   help="gap: timed fits per process (after the warm-up), the best of them reported")
    p.add_argument("--before", metavar="REV", help="also run these children on a git worktree of REV")
    p.add_argument("--cpp-src", help="checkout of YutongWangUMich/liblinear at ea8db6c (built in a temporary folder)")
    p.add_argument("--data-dir", default=os.path.join(ROOT, "..", "shared", "data", "libsvm"))
    p.add_argument("--workdir", default=None)
    p.add_argument("--out", default=None, help="rewrite this section's block of this markdown file")
    p.add_argument("--modes", default=None,
                   help="tax: only these runs, comma-separated, of " + ", ".join(TAX_MODES)
                        + " (in memory always runs: the ratios need it)")
    p.add_argument("--quick", action="store_true", help="tiny inputs (a smoke test of this tool)")
    args = p.parse_args(argv)
    if args.modes and not set(args.modes.split(",")) <= set(TAX_MODES):
        p.error(f"--modes: unknown {sorted(set(args.modes.split(',')) - set(TAX_MODES))}; choose from {', '.join(TAX_MODES)}")
    os.environ["BENCH_FITS"] = str(args.fits)  # (read by the gap section's children)
    if args.quick:
        args.rows, args.features, args.shard_rows, args.epochs, args.repeats = 20_000, 500, [2_000], 3, 1
    work = tempfile.mkdtemp(prefix="bench-speed-", dir=args.workdir)
    trees: dict = {"this": None}
    try:
        if args.before:
            trees[args.before] = _worktree(args.before, work)
        _check_tree(trees)
        _compile_trees(trees)
        for section, fn in (("tax", run_tax), ("cli", run_cli), ("gap", run_gap), ("cold", run_cold),
                            ("commands", run_commands)):
            if args.section in (section, "all"):
                text = fn(args, work, trees)
                print(text, flush=True)
                if args.out:
                    replace_section(args.out, f"bench-speed-{section}", text)
    finally:
        for tree in list(trees.values())[1:]:
            _drop_worktree(tree)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
