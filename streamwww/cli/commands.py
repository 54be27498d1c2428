"""Training-side subcommands of the ``streamwww`` CLI: train, resume, predict, evaluate, demo.

Data conversion commands (convert, info, make-data) live in :mod:`streamwww.cli.data`.
This module owns what a run prints, its bar and per-evaluation lines drawn by
:class:`streamwww.progress.ProgressBar`; the library only logs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from streamwww._params import DEFAULTS, DEVICES, MAX_ITER
from streamwww._textdata import TEXT_STORE  # where `train FILE` converts a LIBSVM file
from streamwww.cli.data import storage_options


def _C_list(text: str) -> list[float]:
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--C must be a comma-separated list of numbers, got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError("--C needs at least one value")
    return values


def _class_weight_arg(text: str):
    """``balanced``, or ``LABEL:W,LABEL:W`` as ``[(label text, weight)]`` (labels matched to the store's later)."""
    if text.strip() == "balanced":
        return "balanced"
    pairs = []
    for item in text.split(","):
        if not item.strip():
            continue
        label, sep, weight = item.rpartition(":")  # a string label may itself hold ':'
        try:
            value = float(weight)
        except ValueError:
            value = None
        if not sep or not label.strip() or value is None:
            raise argparse.ArgumentTypeError(f"--class-weight must be 'balanced' or LABEL:WEIGHT pairs separated by "
                                             f"commas (e.g. 1:2,3:0.5), got {text!r}")
        pairs.append((label.strip(), value))
    if not pairs:
        raise argparse.ArgumentTypeError("--class-weight needs 'balanced' or at least one LABEL:WEIGHT")
    return pairs


def _store_class_weight(pairs, store_path, options=None):
    """``--class-weight`` pairs as ``{class: weight}``, each label matched to a class of the store
    (read as the store's label type: numbers for numeric labels, else strings)."""
    if pairs is None or isinstance(pairs, str):
        return pairs
    from streamwww.io import open_store
    from streamwww.labels import summarize_classes
    from streamwww.storage.location import located

    classes = open_store(located(store_path, options)).classes
    numeric = classes.dtype.kind not in "US"
    out = {}
    for label, weight in pairs:
        try:
            key = float(label) if numeric else label
        except ValueError:
            raise ValueError(f"--class-weight: label {label!r} is not a number, and the classes of {store_path} "
                             f"are numbers: {summarize_classes(classes)}") from None
        match = [c for c in classes.tolist() if c == key]
        if not match:
            raise ValueError(f"--class-weight: {label!r} is not a class of {store_path} "
                             f"(its classes: {summarize_classes(classes)})")
        if match[0] in out:
            raise ValueError(f"--class-weight: class {label!r} is given twice")
        out[match[0]] = weight
    return out


_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?)\s*([KMGT]?)(?:i?B)?\s*", re.IGNORECASE)


def _prefetch_arg(text: str):
    """``auto`` or a number of shards (>= 1)."""
    if text.strip().lower() == "auto":
        return "auto"
    return _int_arg(text, "--prefetch", lambda v: v >= 1, "'auto' or a number of shards (>= 1)")


def _int_arg(text: str, option: str, ok, want: str) -> int:
    """The int ``text`` when ``ok`` accepts it, else the one-line error ``OPTION must be WANT``."""
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or not ok(value):
        raise argparse.ArgumentTypeError(f"{option} must be {want}, got {text!r}")
    return value


def _cv_arg(text: str) -> int:
    """K of --cv: an int from 2 to the most folds a run holds."""
    from streamwww.stream.folds import MAX_SPLITS

    return _int_arg(text, "--cv", lambda v: 2 <= v <= MAX_SPLITS, f"an int from 2 to {MAX_SPLITS} (folds)")


def _eval_every_arg(text: str):
    """``auto`` or an int >= 1."""
    if text.strip().lower() == "auto":
        return "auto"
    return _int_arg(text, "--eval-every", lambda v: v >= 1, "'auto' or an int >= 1")


def _jobs_arg(text: str) -> int:
    """``--jobs``: an int other than 0 (-1: every usable core; -k: all but k - 1)."""
    return _int_arg(text, "--jobs", lambda v: v != 0, "an int other than 0 (-1: every usable core)")


def _block_rows_arg(text: str) -> int:
    """``--block-rows``: an int from 1 to MAX_BLOCK_ROWS."""
    from streamwww._params import MAX_BLOCK_ROWS

    return _int_arg(text, "--block-rows", lambda v: 1 <= v <= MAX_BLOCK_ROWS, f"an int from 1 to {MAX_BLOCK_ROWS}")


_JOBS_HELP = ("threads of this process (default: every usable core; -k: all but k - 1); the model "
              "does not depend on it")


def _memory_budget_arg(text: str):
    """``auto`` or a size: bytes, or a number with K, M, G or T (binary units: ``8G``, ``512MiB``)."""
    if text.strip().lower() == "auto":
        return "auto"
    m = _SIZE.fullmatch(text)
    if m is None:
        raise argparse.ArgumentTypeError(f"--memory-budget must be 'auto' or a size such as 0, 512M or 8G, "
                                         f"got {text!r}")
    return int(float(m[1]) * 1024 ** " KMGT".index(m[2].upper() or " "))


def _model_labels(Cs, splits=None) -> list[str]:
    """Epoch-line labels: ``C=...``, or for a cross-validation run's fold models ``fold s C=...``."""
    if not splits:
        return [f"C={float(c):g}" for c in Cs]
    return [f"C={float(c):g}" if s < 0 else f"fold {s} C={float(c):g}" for c, s in zip(Cs, splits)]


def _cluster_options(p, *, workers: str, scheduler: str, partitions: str) -> None:
    """--workers N | --scheduler ADDRESS, and --partitions K, with these help texts."""
    cluster = p.add_mutually_exclusive_group()
    cluster.add_argument("--workers", type=int, metavar="N", default=None, help=workers)
    cluster.add_argument("--scheduler", metavar="ADDRESS", default=None, help=scheduler)
    p.add_argument("--partitions", type=int, metavar="K", default=None, help=partitions)


def register(sub) -> None:
    from streamwww.cli.data import add_storage_option

    """Add this module's subcommands to the CLI's subparsers."""
    p = sub.add_parser("train", help="train WW-SVM(s) on a shard store or a LIBSVM file, with checkpoints",
                       description="Train Weston-Watkins linear SVM(s) on a shard store (or a LIBSVM file, "
                                   "converted into the checkpoint directory first), streaming the "
                                   "shards, with crash-safe checkpoints in --checkpoint-dir (default: beside "
                                   "the model file, named after it: MODEL.ckpt). If the directory holds a "
                                   "checkpoint of the same data and settings, training continues: the same "
                                   "command run again continues an interrupted run, and of a finished one "
                                   "writes the same model again.")
    p.add_argument("store", help="shard store (from 'streamwww convert'), or a LIBSVM text file (optionally "
                   ".gz/.bz2/.xz): converted first, as 'streamwww convert FILE' with its defaults would, into "
                   f"CHECKPOINT_DIR/{TEXT_STORE} (again on every run: the same store, bit for bit; "
                   "'streamwww resume' continues without converting)")
    p.add_argument("--zero-based", action="store_true", help="a LIBSVM file's indices start at 0")
    p.add_argument("--C", type=_C_list, default=[1.0], help="regularization, or a comma-separated list "
                   "(one model per value, all in the same passes); default 1")
    p.add_argument("--checkpoint-dir", help="directory for beta and checkpoints (default: the model file's "
                   "path with .ckpt for .npz, e.g. data.model.ckpt, said on stderr; continue it with "
                   "'streamwww resume DIR' or the same train command. On a cluster, --workers/--scheduler runs "
                   "without it keep beta in a temporary directory and cannot resume)")
    p.add_argument("--model-out", help="model file (.npz); with several C values, one file per value named "
                   f"<stem>-C<value>.npz (default: the data's name + {MODEL_SUFFIX} in the current directory, "
                   "as LIBLINEAR's 'train DATA' writes DATA.model)")
    p.add_argument("--max-iter", type=int, default=MAX_ITER,
                   help=f"maximum epochs: a limit for runs that do not reach --tol (default {MAX_ITER})")
    p.add_argument("--tol", type=float, default=1e-3, help="relative duality gap to stop at (default 1e-3)")
    p.add_argument("--gap-decay", type=float, default=None,
                   help="also stop when gap <= D x gap after epoch 1 (the paper uses 0.0009)")
    p.add_argument("--seed", type=int, default=None,
                   help="seed of the shard and row orders (default: a fresh one, printed; as in the Python API)")
    p.add_argument("--no-intercept", action="store_true", help="no intercept (constant) feature")
    p.add_argument("--intercept-scaling", type=float, default=1.0, help="value of the constant feature")
    p.add_argument("--loss", choices=("ww", "cs"), default="ww",
                   help="the model: ww Weston-Watkins, or cs Crammer-Singer (LIBLINEAR's -s 4), trained by the "
                        "same engine with its exact simplex step; recorded in the model (default ww)")
    p.add_argument("--subproblem", choices=("walrus", "shark"), default="walrus",
                   help="Weston-Watkins block solver: exact Walrus, or Shark's iterative one (baseline); "
                        "default walrus")
    p.add_argument("--no-shrinking", action="store_true",
                   help="pass over every dual coordinate each epoch (default: leave out those the last "
                        "objective pass found settled; docs/TRAINING.md)")
    p.add_argument("--device", choices=DEVICES, default="auto",
                   help="compute device; auto uses a usable GPU for 10 or more models (C values x folds) "
                        "of 100 or more classes, where it was measured faster, else the CPU (default auto); "
                        "cuda-async: the GPU's row-parallel pass, certified by the duality gap but not "
                        "reproducible bit for bit (docs/gpu.md)")
    p.add_argument("--jobs", type=_jobs_arg, default=None, metavar="N", help=_JOBS_HELP)
    p.add_argument("--block-rows", type=_block_rows_arg, default=1, metavar="M",
                   help="the pass: 1 sequential (default), M > 1 the block pass that spreads one model's "
                        "epoch over the threads (the same model for any --jobs; docs/TRAINING.md, "
                        "'Threads')")
    p.add_argument("--checkpoint-every", type=int, default=DEFAULTS["checkpoint_every"],
                   help="also checkpoint every N shards within an epoch (default: epoch ends only)")
    p.add_argument("--checkpoint-interval", type=float, metavar="SECONDS", default=DEFAULTS["checkpoint_interval"],
                   help="at least this many seconds between checkpoints, and one at the end; 0: every epoch "
                        f"(default {DEFAULTS['checkpoint_interval']:g})")
    p.add_argument("--prefetch", type=_prefetch_arg, default=DEFAULTS["prefetch"],
                   help="shards loaded ahead: N, or auto (default: 2, or 6 for a store on an object store)")
    p.add_argument("--inner-passes", type=int, default=DEFAULTS["inner_passes"],
                   help=f"passes over each loaded shard group (default {DEFAULTS['inner_passes']})")
    p.add_argument("--mix-shards", type=int, default=DEFAULTS["mix_shards"],
                   help="shards trained together, rows interleaved; groups change every epoch "
                        f"(default {DEFAULTS['mix_shards']})")
    p.add_argument("--eval-every", type=_eval_every_arg, default=DEFAULTS["eval_every"],
                   help="objectives every N epochs, or 'auto': spaced by each model's progress, sparse "
                        "while the stop is far, every epoch or two near it (at most 2 sqrt(epoch) apart) "
                        f"(default {DEFAULTS['eval_every']})")
    p.add_argument("--cv", type=_cv_arg, metavar="K", default=None,
                   help="choose C among the --C values by K-fold cross-validation (stratified, seeded folds; "
                        "all folds and C values train in the same passes); prints the best C and the table "
                        "and writes the best C's model, trained on all rows, to --model-out")
    p.add_argument("--class-weight", type=_class_weight_arg, default=None, metavar="balanced|LABEL:W,...",
                   help="weight of each class's rows: 'balanced' (inverse class frequency, from the store's "
                        "class counts) or LABEL:WEIGHT pairs, e.g. 1:2,3:0.5 (labels as in the data; other "
                        "classes weigh 1)")
    _cluster_options(p, workers="train on a local Dask cluster of N single-threaded worker processes "
                                "(CoCoA+ rounds with the exact local solver; a checkpoint after every round). "
                                "Rounds grow with the partitions and each costs a task round-trip: on one "
                                "machine this is a slower way to use its cores than this process's threads "
                                "(--jobs, --block-rows); a cluster pays for data larger than one machine",
                     scheduler="train on the Dask cluster whose scheduler is at ADDRESS (e.g. tcp://host:8786)",
                     partitions="row partitions (whole shards) of a cluster run (default: half the "
                                "workers, each partition's sweep running beside its training; the number of "
                                "workers with --no-shrinking, --subproblem shark or --eval-every N); a model setting: the same K "
                                "gives the same model on any cluster, K=1 with --eval-every 1 the sequential "
                                "run's")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object on stdout (per model: C, epochs, converged, primal, dual, "
                        "rel_gap, seed, model file; with --cv the table) and nothing else there")
    p.add_argument("--memory-budget", type=_memory_budget_arg, default=DEFAULTS["memory_budget"],
                   metavar="SIZE", help="decoded shards kept in memory between epochs, so that a store "
                   "that fits is read once: 'auto' (default: half the memory available at the start), "
                   "0 (stream every epoch) or a size such as 8G; the model does not depend on it")
    add_storage_option(p)
    p.set_defaults(func=run_train)

    p = sub.add_parser("resume", help="continue an interrupted training run",
                       description="Continue the run in DIR with its recorded data and settings; it ends "
                                   "with the model the uninterrupted run gives.")
    p.add_argument("checkpoint_dir", metavar="DIR", help="checkpoint directory of the run ('train --checkpoint-dir', "
                   "or the MODEL.ckpt train chose and printed)")
    p.add_argument("--model-out", help="model file (.npz) to write (default: the file(s) train was given)")
    p.add_argument("--no-model", action="store_true", help="write no model file")
    p.add_argument("--store", help="the data store, if it moved (its fingerprint must match)")
    p.add_argument("--max-iter", type=int, default=None, help="a new epoch limit")
    p.add_argument("--jobs", type=_jobs_arg, default=None, metavar="N", help=_JOBS_HELP)
    p.add_argument("--json", action="store_true",
                   help="print one JSON object on stdout (as 'train --json') and nothing else there")
    _cluster_options(p, workers="continue on a local Dask cluster of N worker processes (a cluster run "
                                "continues on min(K, CPUs) local workers by default)",
                     scheduler="continue on the Dask cluster whose scheduler is at ADDRESS",
                     partitions="continue with K row partitions (default: the run's; another K continues "
                                "correctly but not bitwise; 1 without --workers/--scheduler: in this process)")
    p.add_argument("--memory-budget", type=_memory_budget_arg, default=DEFAULTS["memory_budget"],
                   metavar="SIZE", help="decoded shards kept in memory between epochs, so that a store "
                   "that fits is read once: 'auto' (default: half the memory available at the start), "
                   "0 (stream every epoch) or a size such as 8G; the model does not depend on it")
    add_storage_option(p)
    p.set_defaults(func=run_resume)

    p = sub.add_parser("predict", help="predict labels for a store or a LIBSVM file")
    p.add_argument("model", help="model file written by 'streamwww train'")
    p.add_argument("input", help="shard store or LIBSVM text file (gz/bz2/xz ok)")
    p.add_argument("--output", help="write one label per line here (default, or '-': stdout)")
    p.add_argument("--scores", action="store_true",
                   help="also write each class's score (decision value): a first line 'labels C1 C2 ...', "
                        "then per row its predicted label and one score per class in that order "
                        "(LIBLINEAR's predict -b 1 layout)")
    p.add_argument("--zero-based", action="store_true", help="LIBSVM indices start at 0")
    add_storage_option(p)
    p.set_defaults(func=run_predict)

    p = sub.add_parser("evaluate", help="accuracy of a model on a test store or LIBSVM file")
    p.add_argument("model", help="model file written by 'streamwww train'")
    p.add_argument("test", help="test store (convert it with --like TRAIN_STORE) or LIBSVM file")
    p.add_argument("--confusion", action="store_true", help="also print the confusion matrix")
    p.add_argument("--zero-based", action="store_true", help="LIBSVM indices start at 0")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object on stdout: accuracy, n_correct, n_rows (and labels and "
                        "confusion with --confusion)")
    add_storage_option(p)
    p.set_defaults(func=run_evaluate)

    p = sub.add_parser("demo", help="the whole path on generated data (no data of yours needed)",
                       description="make-data -> convert (shuffled shards) -> train with checkpoints -> "
                                   "evaluate, on a generated data set, in about a minute.")
    p.add_argument("--rows", type=int, default=100_000, help="training rows (default 100000)")
    p.add_argument("--test-rows", type=int, default=25_000, help="test rows (default 25000)")
    p.add_argument("--features", type=int, default=1000, help="features (default 1000)")
    p.add_argument("--nnz-per-row", type=int, default=30, help="non-zeros per row (default 30)")
    p.add_argument("--classes", type=int, default=20, help="classes (default 20)")
    p.add_argument("--C", type=float, default=0.1, help="regularization (default 0.1)")
    p.add_argument("--shard-rows", type=int, default=12_500, help="rows per shard (default 12500)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--workdir", help="keep the files here (default: a temporary directory)")
    p.set_defaults(func=run_demo)

    p = sub.add_parser("plot", help="plot the relative duality gap of a run or a model",
                       description="Draw the relative duality gap against epochs and against solver time "
                                   "(two panels, log scale, one line per C) from a checkpoint directory "
                                   "(every model of the run, as far as it got) or a model file. Needs "
                                   'matplotlib: pip install "streamwww[plot]".')
    p.add_argument("source", metavar="CHECKPOINT_DIR|MODEL",
                   help="checkpoint directory ('train --checkpoint-dir') or model file (.npz)")
    p.add_argument("--output", "-o", metavar="FILE",
                   help="image to write; the suffix picks the format: .png, .pdf, .svg "
                        "(default: <name>-gap.png in the current directory)")
    add_storage_option(p)
    p.set_defaults(func=run_plot)

    # `info` (registered by streamwww.cli.data) reads stores; models and checkpoints
    # are read here, above the io layer.
    info = sub.choices.get("info")
    if info is not None:
        info.set_defaults(describe_run=run_info)


def run_plot(args) -> int:
    from streamwww.cli import runinfo
    from streamwww.cli.plotting import MissingMatplotlib, plot_gaps
    from streamwww.state.checkpoint import MANIFEST, PREVIOUS
    from streamwww.storage.location import located

    options = storage_options(args)
    source = located(args.source, options)
    if not source.exists():
        raise FileNotFoundError(f"{source} does not exist")
    if source.isdir() and not (source.child(MANIFEST).isfile() or source.child(PREVIOUS).isfile()):
        raise ValueError(f"{source}: not a checkpoint directory (no {MANIFEST}); give a checkpoint "
                         "directory or a model file (.npz)")
    output = Path(args.output) if args.output else Path(f"{Path(source.name).stem or 'run'}-gap.png")
    if not output.suffix:  # (matplotlib would add it: the file written is the one named below)
        output = output.with_name(output.name + ".png")
    series, title = runinfo.gap_histories(source)
    try:
        plot_gaps(series, output, title=title)
    except MissingMatplotlib as exc:
        print(f"streamwww plot: error: {exc}", file=sys.stderr)
        return 1
    print(f"gap plot of {len(series)} model(s) written to {output}")
    return 0


def run_info(args, kind: str) -> int:
    """``streamwww info`` of a model file or a checkpoint directory."""
    from streamwww.cli import runinfo

    options = storage_options(args)
    if kind == "model":
        info = runinfo.describe_model(args.store, options)
        lines = runinfo.format_model(info)
    else:
        info = runinfo.describe_checkpoint(args.store, verify=args.verify, storage_options=options)
        lines = runinfo.format_checkpoint(info)
    if args.json:
        _print_json(info)
    else:
        print("\n".join(lines))
    if kind == "checkpoint" and info["health"]["ok"] is False:  # (None: a live run replaced it on every try)
        err = info["health"]["latest"].get("error", "no manifest.json")
        fallback = (f"; a resume falls back to {info['health']['resumes_from']}" if info["health"]["resumes_from"]
                    else "; no intact commit is left: train again with a new --checkpoint-dir")
        print(f"streamwww info: the latest checkpoint in {args.store} is damaged ({err}){fallback}", file=sys.stderr)
        return 1
    return 0


def _progress_bar(args, max_iter: int, tol: float, labels, run: dict | None = None, lines: bool | None = None):
    """The display of a ``train``/``resume`` run (:class:`~streamwww.progress.ProgressBar`): one bar on
    a terminal, closed (its line cleared) before anything else is printed, and a line per
    evaluated model above it (``lines``; default: unless ``-q``); ``run``: the manifest of the
    run it continues."""
    from streamwww.progress import ProgressBar

    lines = not args.quiet if lines is None else lines
    bar = ProgressBar(max_iter=max_iter, tol=tol, labels=labels, lines=lines, bar=args.show_progress,
                      leave=False, file=sys.stderr)
    for_models = (run or {}).get("results") or []
    bar.restore({m: r["history"][-1]["rel_gap"] for m, r in enumerate(for_models) if r.get("history")},
                [m for m, r in enumerate(for_models) if r.get("status") == "converged"])
    return bar


def _models(result) -> list:
    """The trained models of a ``train``/``resume`` result: a list, one model, or a CV fit's best."""
    if isinstance(result, list):
        return result
    best = getattr(result, "best_estimator_", None)
    return [best if best is not None else result]


def _summary(models) -> None:
    for m in _models(models):
        h = m.history_[-1]
        state = "converged" if m.converged_ else "not converged"
        print(f"C={m.C:g}: {m.n_iter_} epochs, {state}, primal {h['primal']:.8g}, dual {h['dual']:.8g}, "
              f"relative gap {h['rel_gap']:.3e}")


def _print_json(obj) -> None:
    from streamwww.cli.runinfo import plain

    print(json.dumps(plain(obj), indent=1, allow_nan=False))


def _model_record(m, path) -> dict:
    h = m.history_[-1] if m.history_ else {}
    return {"C": float(m.C), "epochs": int(m.n_iter_), "converged": bool(m.converged_),
            "primal": h.get("primal"), "dual": h.get("dual"), "rel_gap": h.get("rel_gap"),
            "seed": int(m.seed_), "model": None if path is None else str(path)}


def _cv_record(result) -> dict | None:
    """The cross-validation table of a :class:`~streamwww.WWClassifierCV` fit (None for a plain one)."""
    res = getattr(result, "cv_results_", None)
    if res is None:
        return None
    Cs = [float(p["C"]) for p in res["params"]]
    table = [{"C": c, "mean_test_score": float(res["mean_test_score"][i]),
              "std_test_score": float(res["std_test_score"][i]), "rank": int(res["rank_test_score"][i])}
             for i, c in enumerate(Cs)]
    return {"folds": int(result.n_splits_), "best_C": float(result.best_C_),
            "best_score": float(result.best_score_), "table": table}


def _print_cv(cv: dict) -> None:
    print(f"cross-validation, {cv['folds']} folds: best C={cv['best_C']:g} "
          f"(mean held-out accuracy {100 * cv['best_score']:.2f} %)")
    print(f"{'C':>12} {'mean acc. %':>12} {'std %':>8} {'rank':>5}")
    for row in cv["table"]:
        print(f"{row['C']:>12g} {100 * row['mean_test_score']:>12.2f} "
              f"{100 * row['std_test_score']:>8.2f} {row['rank']:>5d}")


def _report_run(args, result, paths, command: str) -> None:
    """The end of ``train``/``resume``: human lines, or with ``--json`` one JSON object."""
    models = _models(result)
    cv = _cv_record(result)
    if getattr(args, "json", False):
        paths_by_model = paths if len(paths) == len(models) else [paths[0] if paths else None] * len(models)
        obj = {"command": command, "checkpoint_dir": getattr(args, "checkpoint_dir", None),
               "seed": int(models[0].seed_),
               "models": [_model_record(m, p) for m, p in zip(models, paths_by_model)],
               "model_paths": [str(p) for p in paths]}
        if cv is not None:
            obj["cv"] = cv
        _print_json(obj)
        return
    if cv is not None:
        _print_cv(cv)
    _summary(models)
    if paths:
        print(f"seed {models[0].seed_}; model written to " + ", ".join(map(str, paths)))
    elif command == "resume":
        print("no model file written" + ("" if args.no_model else " (train was given no --model-out; "
                                         "pass --model-out)"))


def _warn_not_converged(fit, command: str, cv: bool = False) -> None:
    """One line on stderr per model that hit --max-iter (``cv``: one for a cross-validation
    run's models), in the command line's words (the Python API's ConvergenceWarning would
    import scikit-learn, a slow import, to print a line that names a source line of ours and
    Python parameter names; docs/benchmarks.md, "A command line run that stops at
    `--max-iter`")."""
    if cv:
        from streamwww.cv import cv_not_converged  # (scikit-learn: a cross-validation run imported it)

        note = cv_not_converged(fit, tol="--tol")
        if note is not None:
            print(f"streamwww {command}: warning: {note}; increase --max-iter or loosen --tol", file=sys.stderr)
        return
    from streamwww.engine.config import not_converged

    for res, why in not_converged(fit.results, fit.cfg, tol="--tol", gap_decay="--gap-decay"):
        print(f"streamwww {command}: warning: did not converge after {res.n_iter} epochs (C={res.C:g}); "
              f"{why}; increase --max-iter or loosen --tol", file=sys.stderr)


def _train_store(args, options):
    """The store ``train`` trains on: ``args.store`` itself, or, when that is a file (LIBSVM
    text), the store it is converted into first, ``CHECKPOINT_DIR/data.zarr``, as ``streamwww
    convert FILE`` with its defaults makes it (:func:`streamwww._textdata.convert_into_run`,
    the conversion :func:`streamwww.train` shares)."""
    from streamwww._textdata import convert_into_run
    from streamwww.storage.location import located

    where = located(args.store, options)
    if where.is_local and not where.exists():
        raise FileNotFoundError(f"{args.store} does not exist (give a shard store, or a LIBSVM file to "
                                f"convert first)")
    if not where.exists() or where.isdir():  # a store (open_store reports a missing one)
        if args.zero_based:
            raise ValueError(f"--zero-based applies to a LIBSVM file; {args.store} is a store")
        return args.store
    if args.checkpoint_dir is None:
        raise ValueError(f"{args.store} is a file: training converts a LIBSVM file into --checkpoint-dir "
                         f"first, so give one (or convert it yourself: streamwww convert {args.store} STORE)")
    return convert_into_run(args.store, args.checkpoint_dir, storage_options=options, zero_based=args.zero_based,
                            show_progress=args.show_progress, summary=None if args.quiet else sys.stderr,
                            dir_name="--checkpoint-dir")


# Where one process is the faster way (docs/TRAINING.md, "Which way is fastest for my data"):
# a local cluster's start-up and its rounds' task round-trips cost more than its second
# process saves on every store of up to this many rows measured; the block pass on two
# threads was not faster than the default sequential pass on any data set measured, so it
# pays, if anywhere, from three threads.
LOCAL_CLUSTER_SLOWER_ROWS = 2_000_000
BLOCK_PASS_MIN_THREADS = 3


def _faster_way(args, store, options) -> str | None:
    """A note naming the faster way when ``train``'s options ask for a way of using this
    machine's cores that was measured slower on such a run; None otherwise."""
    where = "docs/TRAINING.md, 'Which way is fastest for my data'"
    if args.workers is not None:  # (a local cluster; --scheduler names a cluster of other machines)
        from streamwww.stream.sources import as_store

        n_rows = int(as_store(store, options).n_rows)
        if n_rows <= LOCAL_CLUSTER_SLOWER_ROWS:
            return (f"a store of {n_rows:,} rows trains faster in one process than on a local cluster "
                    f"(measured on stores of up to {LOCAL_CLUSTER_SLOWER_ROWS:,} rows); drop --workers ({where})")
    elif args.block_rows > 1 and len(args.C) == 1 and args.cv is None and args.device != "cuda":
        # (what the note says was measured on the CPU's threads)
        from streamwww._params import resolve_n_jobs

        threads = resolve_n_jobs(args.jobs)
        if threads < BLOCK_PASS_MIN_THREADS:
            return (f"the block pass (--block-rows {args.block_rows}) on {threads} thread(s) was measured no faster "
                    f"than the default sequential pass, which certifies on a second thread; drop --block-rows "
                    f"({where})")
    return None


def run_train(args) -> int:
    from streamwww.api import model_paths, train_fitted
    from streamwww.errors import CheckpointError

    on_cluster = args.workers is not None or args.scheduler is not None
    if not on_cluster and args.partitions is not None:
        raise ValueError("--partitions applies to cluster runs only; add --workers N or --scheduler ADDRESS")
    options = storage_options(args)
    if args.model_out is None:
        args.model_out = _default_model_out(args.store, options)
    # A cluster's workers write beta into the checkpoint directory: one on this machine is no
    # place for a remote cluster's, so a cluster run without one keeps beta in a temporary directory.
    default_dir = args.checkpoint_dir is None and not on_cluster
    if default_dir:
        args.checkpoint_dir = _default_checkpoint_dir(args.model_out)
    _check_model_out(args)  # (before _train_store: converting a LIBSVM file is work already)
    before = _run_in(args.checkpoint_dir, options, default=default_dir)
    store = _train_store(args, options)
    if default_dir and not args.quiet:
        print(f"streamwww train: {'continuing the run in' if before else 'checkpoints in'} {args.checkpoint_dir} "
              f"(continue with: streamwww resume {args.checkpoint_dir})", file=sys.stderr)
    note = None if args.quiet else _faster_way(args, store, options)
    if note is not None:
        print(f"streamwww train: note: {note}", file=sys.stderr)
    class_weight = _store_class_weight(args.class_weight, store, options)
    C = args.C if len(args.C) > 1 or args.cv is not None else args.C[0]
    labels = _model_labels(args.C)
    if args.cv is not None:
        splits = [s for s in range(max(args.cv, 0)) for _ in args.C] + [-1] * len(args.C)
        labels = _model_labels([c for _ in range(max(args.cv, 0)) for c in args.C] + args.C, splits)
    try:
        with _progress_bar(args, args.max_iter, args.tol, labels, before) as bar:
            result, fit = train_fitted(store, C=C, tol=args.tol,
                                       max_iter=args.max_iter, gap_decay=args.gap_decay, random_state=args.seed,
                                       fit_intercept=not args.no_intercept, intercept_scaling=args.intercept_scaling,
                                       subproblem=args.subproblem, shrinking=not args.no_shrinking, device=args.device,
                                       checkpoint_dir=args.checkpoint_dir,
                                       checkpoint_every=args.checkpoint_every, checkpoint_interval=args.checkpoint_interval,
                                       prefetch=args.prefetch,
                                       inner_passes=args.inner_passes, eval_every=args.eval_every, mix_shards=args.mix_shards,
                                       model_out=args.model_out, class_weight=class_weight, cv=args.cv,
                                       client=args.scheduler, workers=args.workers, partitions=args.partitions,
                                       callback=bar, progress=bar, storage_options=options,
                                       memory_budget=args.memory_budget, n_jobs=args.jobs, block_rows=args.block_rows,
                                       loss=args.loss)
    except ConnectionError as exc:  # an unreachable --scheduler: the CLI's one-line error
        raise ValueError(f"{exc}; check --scheduler") from None
    except CheckpointError as exc:  # (a run of other settings or data in the directory chosen for the user)
        if not default_dir:
            raise
        raise CheckpointError(f"{exc} (the default --checkpoint-dir of --model-out {args.model_out}: give "
                              "--checkpoint-dir DIR for another run)") from None
    _warn_not_converged(fit, "train", cv=args.cv is not None)
    paths = model_paths(args.model_out, args.C, many=len(args.C) > 1 and args.cv is None)
    _report_run(args, result, paths, "train")
    return 0


#: what ``train DATA`` without ``--model-out`` writes, in the current directory: LIBLINEAR's
#: ``train DATA`` writes ``DATA.model`` there (its name kept whole: ``a9a`` and ``a9a.t`` differ)
MODEL_SUFFIX = ".model.npz"


def _default_model_out(store: str, options=None) -> str:
    """``train``'s model file without ``--model-out``: the data's name + :data:`MODEL_SUFFIX`,
    in the current directory (a URL's data too: the model is the user's file)."""
    from streamwww.storage.location import located

    where = located(store, options)
    name = where.name or (where.local_path.resolve().name if where.is_local else "")
    return (name or "data") + MODEL_SUFFIX


def _default_checkpoint_dir(model_out: str) -> str:
    """``train``'s checkpoint directory without ``--checkpoint-dir``: beside the model file,
    named after it (``m.npz`` -> ``m.ckpt``), so that the same command finds it again."""
    text = str(model_out)
    return (text[:-len(".npz")] if text.endswith(".npz") else text) + ".ckpt"


def _run_in(checkpoint_dir, options, default: bool) -> dict | None:
    """The manifest of the run ``checkpoint_dir`` already holds (None: none, or one too
    damaged to read, which training reports). A ``default`` directory that cannot be one is
    refused here, naming the options that choose another place."""
    if checkpoint_dir is None:
        return None
    from streamwww.errors import CheckpointError, OutputPathError, StorageError
    from streamwww.state.checkpoint import MANIFEST, PREVIOUS, CheckpointDir
    from streamwww.storage.location import located

    where = located(checkpoint_dir, options)
    if default and where.is_local:
        path = where.local_path
        problem = ("it is not a directory" if path.exists() and not path.is_dir() else
                   None if os.access(path if path.exists() else path.parent, os.W_OK | os.X_OK) else
                   "no permission to write there")
        if problem:
            raise OutputPathError(f"{path}: cannot keep the checkpoints there ({problem}); it is the default "
                                  "--checkpoint-dir, named after --model-out: give --checkpoint-dir DIR")
    if not (where.child(MANIFEST).isfile() or where.child(PREVIOUS).isfile()):
        return None
    try:
        with CheckpointDir(where, lock=False) as probe:
            return probe.load_settings()
    except (CheckpointError, StorageError):
        return None


def _check_model_out(args) -> None:
    """``train``'s model file(s): writable, a regular file (or none yet) and none of its
    input (the LIBSVM file or store, or a path inside the store), before any work."""
    from streamwww.model.files import check_not_input, check_writable, model_paths

    for out in model_paths(args.model_out, args.C, many=len(args.C) > 1 and args.cv is None):
        if out.is_local:  # (an object store's is probed by train itself, with the storage options)
            check_not_input(str(out.local_path), [args.store], "the model")
            check_writable(out)


def run_resume(args) -> int:
    from streamwww.api import model_paths, resume_fitted
    from streamwww.state.checkpoint import CheckpointDir
    from streamwww.storage.location import located

    options = storage_options(args)
    with CheckpointDir(located(args.checkpoint_dir, options), lock=False) as probe:
        run = probe.load_settings()
    model_out = False if args.no_model else args.model_out
    try:
        with _progress_bar(args, args.max_iter or run["config"]["max_iter"], run["config"]["tol"],
                           _model_labels(run["config"]["Cs"], run["config"].get("splits")), run) as bar:
            result, fit = resume_fitted(args.checkpoint_dir, store=args.store, model_out=model_out,
                                        callback=bar, progress=bar, max_iter=args.max_iter,
                                        client=args.scheduler, workers=args.workers, partitions=args.partitions,
                                        storage_options=options, memory_budget=args.memory_budget, n_jobs=args.jobs)
    except ConnectionError as exc:  # an unreachable --scheduler: the CLI's one-line error
        raise ValueError(f"{exc}; check --scheduler") from None
    _warn_not_converged(fit, "resume", cv=bool(run["run"].get("cv")))
    out = None if model_out is False else (model_out or run["run"].get("model_out"))
    paths = []
    if out:
        Cs = run["config"]["Cs"]
        # a cross-validation run writes its best model only
        paths = model_paths(out, Cs, many=not run["run"].get("cv") and run["run"].get("C_is_list", len(Cs) > 1))
    _report_run(args, result, paths, "resume")
    return 0


def run_predict(args) -> int:
    from streamwww.model.files import load_fitted  # (no scikit-learn: the estimator is not needed)
    from streamwww.model.predict import predict_labels, predict_scores

    options = storage_options(args)
    output = None if args.output in (None, "-") else args.output  # ('-': standard output)
    if output:  # (before any work: the model and the rows are what it reads)
        from streamwww.model.files import check_not_input

        check_not_input(output, [args.model, args.input], "the predictions")
    model = load_fitted(_model_arg(args.model, options, "predict"))
    out = _open_predictions(Path(output)) if output else sys.stdout

    def emit(write, text) -> None:
        """One write of the output: a failure (a full disk) names the --output file."""
        from streamwww.storage.fsutil import write_failure

        try:
            write(text)
        except OSError as exc:
            if not output:
                raise
            raise write_failure(output, exc, "the predictions") from None

    try:
        n = 0
        kw = dict(zero_based=args.zero_based, storage_options=options)
        if args.scores:
            emit(out.write, "labels " + " ".join(map(_fmt_label, np.asarray(model.classes_))) + "\n")
            for labels, scores in predict_scores(model, args.input, **kw):
                emit(out.writelines, (f"{_fmt_label(lab)} " + " ".join(map(repr, row.tolist())) + "\n"
                                      for lab, row in zip(labels, scores)))
                n += len(labels)
        else:
            for labels in predict_labels(model, args.input, **kw):
                emit(out.write, "\n".join(map(_fmt_label, labels)) + ("\n" if len(labels) else ""))
                n += len(labels)
        if output:  # (its last writes: a full disk is found here, before the rename)
            emit(lambda name: (out.close(), os.replace(name, output)), out.name)
    except BaseException:
        if output:  # (a half-written file never takes the output's name)
            try:
                out.close()
            except OSError:  # (the disk that failed a write may fail the last flush too)
                pass
            Path(out.name).unlink(missing_ok=True)
        raise
    if output:
        print(f"{n} predictions written to {output}", file=sys.stderr)
    return 0


def _open_predictions(path: Path):
    """A temporary file beside ``path`` that the predictions are written to, renamed to
    ``path`` when all are written; a one-line error where none can be made there."""
    from streamwww.errors import OutputPathError
    from streamwww.model.files import check_writable
    from streamwww.storage.fsutil import remove_dead_temporaries, temporary_beside

    check_writable(path, what="the predictions")  # (a directory, a missing folder: as --model-out)
    remove_dead_temporaries(path)  # (what a predict killed by SIGKILL left here)
    try:  # (opened as a file of the user's is, so that it gets the usual permissions)
        return open(temporary_beside(path), "x")
    except OSError as exc:
        raise OutputPathError(f"{path}: cannot write the predictions ({exc.strerror or exc})") from None


def _model_arg(path: str, options, command: str):
    """A model file argument: a local path as it is, a URL as a Location with the options. Data
    given there (LIBLINEAR's ``predict DATA MODEL`` order) is a one-line error saying so."""
    from streamwww.storage.location import is_url, location

    if is_url(path):
        return location(path, options)
    from streamwww.io.sniff import file_kind, misplaced

    if file_kind(location(path)) in ("libsvm", "csv", "parquet", "store"):
        raise ValueError(f"{misplaced(location(path), 'model', path)}; the order is `streamwww {command} MODEL DATA`")
    return path


def _fmt_label(v) -> str:
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        return str(int(v))
    return str(v)


def run_evaluate(args) -> int:
    from streamwww.model.files import load_fitted
    from streamwww.model.predict import evaluate

    options = storage_options(args)
    model = load_fitted(_model_arg(args.model, options, "evaluate"))
    res = evaluate(model, args.test, confusion=args.confusion, zero_based=args.zero_based,
                   storage_options=options)
    if res["n_unknown"]:  # (a test file of other data, or of other labels, is found here)
        from streamwww.labels import summarize_classes

        print(f"streamwww evaluate: warning: {res['n_unknown']} of {res['n_rows']} rows have labels the "
              f"model was not trained on: {summarize_classes(res['unknown_labels'], len(res['unknown_labels']), res['more_unknown'])} "
              f"(its {len(model.classes_)} classes: {summarize_classes(model.classes_)}); counted as wrong",
              file=sys.stderr)
    if res["n_features"] is not None and res["n_features"] < model.n_features_in_:
        # (a test store converted on its own ends at its own largest index: fewer features is
        # often right, but data of another kind would score low without a word; more is refused)
        print(f"streamwww evaluate: warning: {args.test} has {res['n_features']} features, the model "
              f"{model.n_features_in_}: features {res['n_features'] + 1} to {model.n_features_in_} are taken "
              "as 0 (convert test data with --like TRAIN_STORE to keep the training features)", file=sys.stderr)
    if args.json:
        from streamwww.cli.runinfo import json_label

        obj = {"accuracy": res["accuracy"], "n_correct": res["n_correct"], "n_rows": res["n_rows"],
               "n_unknown": res["n_unknown"], "n_features": res["n_features"]}
        if args.confusion:
            # rows: true labels in `labels` order, then a row for labels the model never saw
            obj["labels"] = [json_label(c) for c in res["labels"]]
            obj["confusion"] = res["confusion"][:-1]
            obj["confusion_unknown_true"] = res["confusion"][-1]
        _print_json(obj)
        return 0
    print(f"accuracy: {100 * res['accuracy']:.2f} % ({res['n_correct']} of {res['n_rows']} rows)")
    if args.confusion:
        labels = [_fmt_label(c) for c in res["labels"]]
        cm = res["confusion"]
        rows = labels + (["(unknown)"] if cm[-1].any() else [])
        width = max(6, *(len(s) for s in rows)) + 1
        print("confusion matrix (rows: true label, columns: predicted)")
        print(" " * width + "".join(f"{s:>{width}}" for s in labels))
        for name, row in zip(rows, cm):
            print(f"{name:>{width}}" + "".join(f"{v:>{width}d}" for v in row))
    return 0


def run_demo(args) -> int:
    """make-data -> convert -> train (checkpoints) -> evaluate, in a work directory (the
    command line's records throughout: no scikit-learn imported)."""
    from streamwww.api import train_fitted
    from streamwww.io import convert_libsvm, make_data
    from streamwww.model.files import load_fitted
    from streamwww.model.predict import evaluate

    tmp = None
    if args.workdir:
        work = Path(args.workdir)
        work.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="streamwww-demo-")
        work = Path(tmp.name)
    try:
        t_all = time.perf_counter()
        total = args.rows + args.test_rows
        text = work / "demo.libsvm"
        info = make_data(text, rows=total, features=args.features, nnz_per_row=args.nnz_per_row,
                         classes=args.classes, seed=args.seed, overwrite=True)
        train_txt, test_txt = work / "train.libsvm", work / "test.libsvm"
        with open(text, "rb") as src, open(train_txt, "wb") as tr, open(test_txt, "wb") as te:
            for i, line in enumerate(src):
                (tr if i < args.rows else te).write(line)
        text.unlink()
        print(f"1. make-data: {args.rows} training + {args.test_rows} test rows, {args.features} features, "
              f"{args.nnz_per_row} non-zeros per row, {args.classes} classes ({info['bytes'] / 2**20:.0f} MiB of text)")

        train_store, test_store = work / "train.zarr", work / "test.zarr"
        t = time.perf_counter()
        st = convert_libsvm(train_txt, train_store, shard_rows=args.shard_rows, shuffle=True, seed=args.seed,
                            overwrite=True)
        convert_libsvm(test_txt, test_store, like=train_store, shard_rows=args.shard_rows, overwrite=True)
        print(f"2. convert: {st.n_shards} shuffled Zarr shards of {args.shard_rows} rows "
              f"({time.perf_counter() - t:.1f} s)")

        ckpt, model_path = work / "checkpoints", work / "model.npz"
        t = time.perf_counter()
        with _progress_bar(args, MAX_ITER, 1e-3, _model_labels([args.C]), lines=bool(args.verbose)) as bar:
            model, fit = train_fitted(train_store, C=args.C, random_state=args.seed, tol=1e-3, max_iter=MAX_ITER,
                                      checkpoint_dir=ckpt, model_out=model_path, callback=bar, progress=bar)
        _warn_not_converged(fit, "demo")
        h = model.history_[-1]
        where = (f"checkpoints in {ckpt}" if args.workdir else
                 "checkpoints in a temporary directory, removed at exit")
        print(f"3. train (streamed, {where}): {model.n_iter_} epochs in "
              f"{time.perf_counter() - t:.1f} s, relative duality gap {h['rel_gap']:.2e}")

        res = evaluate(load_fitted(model_path), test_store)
        print(f"4. evaluate: test accuracy {100 * res['accuracy']:.2f} % on {res['n_rows']} rows")
        print(f"done in {time.perf_counter() - t_all:.1f} s" + (
            f"; the data, checkpoints and model are in {work}" if args.workdir else
            "; its files are in a temporary directory, removed at exit (--workdir DIR keeps them)"))
    finally:
        if tmp is not None:
            tmp.cleanup()
    return 0
