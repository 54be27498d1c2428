"""The ``streamwww`` command line: the top-level parser, log levels, one-line errors.

The subcommands are registered by :mod:`.data` (convert, info of a store, make-data)
and :mod:`.commands` (train, resume, predict, evaluate, cv, plot, demo), each through
its ``register(subparsers)``; :mod:`.runinfo` and :mod:`.plotting` are what ``info``
and ``plot`` read of runs and models.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import re
import sys
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from streamwww import __version__

# Modules that contribute subcommands. Each has ``register(subparsers)`` that
# adds parsers whose ``func`` default takes the parsed ``args`` and returns an
# exit code.
_COMMAND_MODULES = (
    "streamwww.cli.data",
    "streamwww.cli.commands",
)


def build_parser() -> argparse.ArgumentParser:
    """Return the top-level argument parser with every subcommand."""
    import importlib

    parser = argparse.ArgumentParser(
        prog="streamwww",
        description="Exact Weston-Watkins linear SVMs on data larger than memory.",
    )
    parser.add_argument("--version", action="version", version=f"streamwww {__version__}")
    verbosity = parser.add_mutually_exclusive_group()
    verbosity.add_argument("-v", "--verbose", action="count", default=0,
                           help="more log output (-vv for debug)")
    verbosity.add_argument("-q", "--quiet", action="store_true",
                           help="only errors (and a result's own warnings: did not converge); no progress bars")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:  # subsystem not built yet
            if exc.name != name:
                raise
            continue
        module.register(sub)
    # -v/-q also after the subcommand; SUPPRESS keeps a subcommand from resetting what
    # was given before it.
    for command in sub.choices.values():
        group = command.add_mutually_exclusive_group()
        group.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                           help="more log output (-vv for debug)")
        group.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                           help="only errors (and a result's own warnings: did not converge); no progress bars")
    return parser


def _configure_logging(verbose: int, quiet: bool, command: str = "") -> None:
    # Default: warnings only (commands print their own summaries and epoch lines); -v:
    # the library's events (device, memory, shards); -vv: debug. A warning is one line,
    # `streamwww COMMAND: warning: ...`, whatever logged it; -q leaves errors only.
    level = logging.WARNING if (quiet or verbose == 0) else (logging.INFO if verbose == 1 else logging.DEBUG)
    before = set(logging.getLogger().handlers)
    logging.basicConfig(level=level, format="%(message)s", handlers=[_AboveTheBar(sys.stderr)])
    for handler in set(logging.getLogger().handlers) - before:  # (this CLI's handler only)
        handler.addFilter(_without_epoch_lines)
        handler.setFormatter(_Lines(command))
        if quiet:
            handler.setLevel(logging.ERROR)
    # Third-party libraries stay quiet unless -vv.
    for noisy in ("numba", "distributed", "asyncio", "fsspec", "zarr"):
        logging.getLogger(noisy).setLevel(logging.WARNING if verbose < 2 else logging.DEBUG)
    # -q: only errors of Python warnings (a fallback still resumes to the right model)
    logging.getLogger(WARNINGS_LOGGER).setLevel(logging.ERROR if quiet else logging.NOTSET)
    if verbose < 2:
        # distributed sets its own loggers' levels from Dask's config when it is imported
        # (later, and in every worker process): INFO, a screenful per local cluster. Dask's
        # config from the environment, unless the user's environment says otherwise.
        os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")


class _AboveTheBar(logging.StreamHandler):
    """The command line's log handler: a line logged while a progress bar is drawn on the
    same stream (a checkpoint's commit under -vv, a warning) goes above the bar through
    ``tqdm.write``, which clears the bar, writes the line and draws the bar again; written
    after the bar's text, it would break the bar's line.  Without tqdm loaded no bar is
    drawn, and the line is written as a plain handler writes it."""

    def emit(self, record: logging.LogRecord) -> None:
        tqdm = sys.modules.get("tqdm")  # (imported by the first bar or note drawn: not here)
        if tqdm is None:
            super().emit(record)
            return
        try:
            tqdm.tqdm.write(self.format(record), file=self.stream)
        except Exception:  # noqa: BLE001 - logging's own policy for a failing handler
            self.handleError(record)


class _Lines(logging.Formatter):
    """The command line's log lines: a record's message, and a warning's (streamwww's or
    another library's) as ``streamwww COMMAND: warning: MESSAGE`` on one line, as
    :func:`_warning_line` shows Python's warnings."""

    def __init__(self, command: str):
        super().__init__("%(message)s")
        self.prefix = f"streamwww {command}: warning: "

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        if record.levelno != logging.WARNING or text.startswith(self.prefix):
            return text
        return self.prefix + " ".join(text.split())


# The logger of the engine's per-epoch (and per-round) lines, its only INFO lines: the
# commands print each evaluated epoch themselves (streamwww.progress.ProgressBar), so
# under -v they would come twice.
_EPOCH_LINES = "streamwww.engine.decision"


def _without_epoch_lines(record: logging.LogRecord) -> bool:
    """A logging filter: False for the engine's epoch lines and its note on compiling, which
    the CLI prints its own way."""
    if record.name == "streamwww.engine.compiling" and record.levelno == logging.WARNING:
        return False  # (COMPILING_NOTE, from _announce_compiling; not under -q)
    return not (record.name == _EPOCH_LINES and record.levelno == logging.INFO)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    _configure_logging(args.verbose, args.quiet, args.command)
    args.show_progress = (not args.quiet) and sys.stderr.isatty()
    from streamwww.errors import StreamwwwError

    # (evaluate and predict of a store import no Numba: listening would import it; they say so on a terminal)
    listener = _announce_compiling() if not args.quiet and (
        args.command in _ALWAYS_COMPILING or (args.show_progress and args.command in _COMPILING)) else None
    shown = warnings.showwarning
    warnings.showwarning = _warning_line(args.command)
    try:
        return int(args.func(args) or 0)
    except (StreamwwwError, ValueError, FileNotFoundError, FileExistsError) as exc:
        print(f"streamwww {args.command}: error: {_in_options(str(exc), parser, args.command)}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # Piped into `head` and cut off: end quietly, as `cat` does (128 + SIGPIPE). Python's
        # recipe: point stdout at devnull so the flush at exit does not raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM during a fit (streamwww.engine.interrupt)
        print(f"streamwww {args.command}: {_interrupted_line(exc, args)}", file=sys.stderr)
        return int(getattr(exc, "exit_status", 130))
    except OSError as exc:  # (one no layer turned into a typed error: still one line, naming the file)
        print(f"streamwww {args.command}: error: {_os_error_line(exc)}", file=sys.stderr)
        return 1
    finally:
        warnings.showwarning = shown
        if listener is not None:
            from numba.core import event

            event.unregister("numba:compile", listener)


def _interrupted_line(exc: KeyboardInterrupt, args) -> str:
    """What an interrupted command says: where its work is kept and how to continue, or
    that nothing was kept and what to run.  Only a checkpoint directory the user named is
    pointed at (``demo``'s own is removed)."""
    ck = getattr(args, "checkpoint_dir", None)
    where = exc.where(ck) if ck and hasattr(exc, "where") else None
    if where:
        return f"interrupted {where}: continue with `streamwww resume {ck}`"
    if ck and (Path(ck) / "manifest.json").exists():  # (a cluster run's last round, say)
        return f"interrupted; the work is kept in {ck}: continue with `streamwww resume {ck}`"
    if args.command != "train":
        return "interrupted"
    if ck:
        return f"interrupted before anything was kept in {ck}: run the same `streamwww train` command again"
    return ("interrupted; nothing was kept (no --checkpoint-dir): run `streamwww train` again with "
            "--checkpoint-dir DIR to keep the work of a run that is interrupted")


# The option of each Python parameter whose name does not become its option by `--name-with-dashes`.
_OPTION_OF = {"random_state": "--seed", "fit_intercept": "--no-intercept", "shrinking": "--no-shrinking",
              "n_jobs": "--jobs", "storage_options": "--storage-option"}
_PARAMETER = re.compile(r"^The '(\w+)' parameter of \w+ must be")


def _in_options(message: str, parser: argparse.ArgumentParser, command: str) -> str:
    """A library message naming a Python parameter (``The 'C' parameter of train must be ...``)
    in the words of the command line (``--C must be ...``), where the command has that option."""
    m = _PARAMETER.match(message)
    if m is None:
        return message
    option = _OPTION_OF.get(m.group(1), "--" + m.group(1).replace("_", "-"))
    sub = next((a.choices[command] for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    if sub is None or option not in sub._option_string_actions:
        return message
    return option + message[m.end() - len(" must be"):]


def _os_error_line(exc: OSError) -> str:
    """An ``OSError`` as one line: the file(s) it names first, then the cause."""
    files = " -> ".join(str(f) for f in (exc.filename, exc.filename2) if f is not None)
    cause = exc.strerror or (str(exc).splitlines() or [type(exc).__name__])[0]
    return f"{files}: {cause}" if files else cause


#: the logger the command line's Python warnings go through (its level: -q silences them)
WARNINGS_LOGGER = "streamwww.warnings"


def _warning_line(command: str):
    """A ``warnings.showwarning`` that logs a Python warning (a checkpoint fallback, say) as
    one line, ``streamwww COMMAND: warning: MESSAGE``, through :data:`WARNINGS_LOGGER`:
    the user is told what happened, not the source line that warned."""
    log = logging.getLogger(WARNINGS_LOGGER)

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        text = " ".join(str(message).split())
        log.warning("streamwww %s: warning: %s", command, text)

    return show


# Commands that run compiled kernels (Numba's, compiled on a machine's first run of each).
_COMPILING = frozenset({"convert", "make-data", "train", "resume", "predict", "evaluate", "demo"})
_ALWAYS_COMPILING = _COMPILING - {"predict", "evaluate"}  # (they import Numba anyway)
COMPILING_NOTE = ("streamwww: compiling its kernels for this machine (the first run after installing or "
                  "upgrading; up to a minute, not counted as solver time); later runs load them from "
                  "Numba's cache")


def _announce_compiling(stream=None):
    """Say once (on stderr, a terminal or not; not under -q) when Numba starts compiling a
    kernel in this process: the first run after installing compiles every kernel a command
    uses into Numba's cache, which is a long silence otherwise (most of a first ``streamwww
    demo``: docs/benchmarks.md, "Cold start").
    Numba's compile events come on cache misses only (numba.core.event); the listener is
    returned to be unregistered.  (A fit's own note, streamwww.engine.compiling, is
    filtered from the command line's log: this one replaces it.)"""
    from numba.core import event

    class _Once(event.Listener):
        said = False

        def on_start(self, ev) -> None:
            if not self.said:
                self.said = True
                from tqdm import tqdm  # (around a progress bar, if one is drawn)

                tqdm.write(COMPILING_NOTE, file=stream or sys.stderr)

        def on_end(self, ev) -> None:
            pass

    listener = _Once()
    event.register("numba:compile", listener)
    return listener


# How long the console script runs without Python's cyclic garbage collector (start-up).
STARTUP_SECONDS = 2.0


def run() -> NoReturn:
    """The ``streamwww`` console script: :func:`main`, then exit with its code.

    A command's start-up (importing NumPy, SciPy, Numba, Zarr; loading its kernels from
    Numba's cache) makes hundreds of thousands of long-lived objects, and the cyclic
    garbage collector walks them again and again while they are made: a sizeable share
    of the wall time of ``convert`` or ``train`` on a small file (docs/benchmarks.md, "The
    command line's garbage collector"). So the collector is off for the first
    :data:`STARTUP_SECONDS` of a command; then what is alive is frozen (:func:`gc.freeze`:
    never walked again) and the collector is on for the rest of a long command. Objects
    are still freed when their last reference goes (no array waits for the collector);
    only reference cycles made during those seconds wait, bounded by what start-up makes.
    Before the interpreter shuts down, every object alive is frozen too: the command has
    finished, and what it wrote is committed and closed, but Numba and LLVM leave
    hundreds of thousands of objects that the interpreter's last collections would walk,
    a cost every command would pay (docs/benchmarks.md, "Side by side with the authors'
    C++"). ``atexit`` handlers, temporary folders' clean-up and the flushing of the
    standard streams still run. Only the
    console script does this: :func:`main` called in a process that goes on (tests,
    notebooks) leaves the collector alone.
    """
    gc.disable()
    started = threading.Timer(STARTUP_SECONDS, _collect_from_now)
    started.daemon = True  # (never holds up the exit)
    started.start()
    code = main()
    started.cancel()
    gc.freeze()
    sys.exit(code)


def _collect_from_now() -> None:
    """The end of start-up: freeze what it made, turn the collector on."""
    gc.freeze()
    gc.enable()

