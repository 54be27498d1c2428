"""Helpers shared by the numbered examples: where files go, and the example data.

Not an example itself (the smoke test runs only ``NN_*.py``).

* Data and models go into ``$STREAMWWW_EXAMPLES_OUT/<example>/`` when that
  variable is set (and are kept), otherwise into a fresh temporary directory
  that is removed when the script ends.  Nothing is ever written next to the
  scripts, so running them from a checkout leaves the repository clean.
* ``example_data`` writes a synthetic LIBSVM file with streamwww's own
  generator (``streamwww.io.make_data``, the same as ``streamwww make-data``):
  rows of a few classes with class-dependent sparse supports and values, so a
  linear model learns something.  Same arguments, same file.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

from streamwww.io import ShardStore, convert_libsvm, make_data, open_store

OUT_ENV = "STREAMWWW_EXAMPLES_OUT"


@contextlib.contextmanager
def workdir(name: str):
    """A directory for one example's files; see the module docstring."""
    root = os.environ.get(OUT_ENV)
    if root:
        path = Path(root).expanduser().absolute() / name
        path.mkdir(parents=True, exist_ok=True)
        print(f"files of this example: {path} (kept; ${OUT_ENV} is set)")
        yield path
        return
    path = Path(tempfile.mkdtemp(prefix=f"streamwww-{name}-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def results_dir(name: str) -> Path | None:
    """Where an example puts what you will want to look at afterwards (a plot):
    ``$STREAMWWW_EXAMPLES_OUT/<name>``; None when that variable is not set (nothing is
    kept then, as the examples' README promises)."""
    root = os.environ.get(OUT_ENV)
    if root:
        path = Path(root).expanduser().absolute() / name
        path.mkdir(parents=True, exist_ok=True)
        return path
    return None


def user_input(i: int = 1) -> Path | None:
    """The file or store the user named as argument ``i`` (1: the first), if any."""
    if len(sys.argv) <= i:
        return None
    path = Path(sys.argv[i]).expanduser()
    if not path.exists():
        sys.exit(f"{path}: no such file or store (give a LIBSVM file, a store from "
                 f"'streamwww convert', or nothing to use generated data)")
    return path


def is_store(path: Path) -> bool:
    """A shard store is a directory written by ``streamwww convert`` / ``write_store``."""
    return path.is_dir()


def example_data(path: Path, *, rows: int, features: int = 1000, nnz_per_row: int = 20,
                 classes: int = 10, seed: int = 0, noise: float = 0.5) -> Path:
    """Write the synthetic LIBSVM file ``path`` (see the module docstring)."""
    make_data(path, rows=rows, features=features, nnz_per_row=nnz_per_row, classes=classes,
              seed=seed, noise=noise, overwrite=True)
    return path


def as_store(path: Path, out: Path, **convert_options) -> ShardStore:
    """``path`` itself if it is a store, else its conversion into ``out`` (a LIBSVM file).

    The rows are shuffled on the way in (``--shuffle``): block coordinate
    descent needs the classes mixed within shards, and many LIBSVM files are
    sorted by label.
    """
    if is_store(path):
        return open_store(path)
    options = {"shuffle": True, "seed": 0, **convert_options}
    return convert_libsvm(path, out, overwrite=True, **options)


def mib(nbytes: float) -> str:
    return f"{nbytes / 2**20:.1f} MiB"
