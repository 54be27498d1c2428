"""Machine, library versions, date and command for benchmark reports."""

from __future__ import annotations

import datetime as _dt
import os
import platform
import shlex
import subprocess
import sys


def cpu_model() -> str:
    """The CPU's model name and the CPU that Numba's LLVM compiles for (``znver4`` ...):
    VMs of one name ("AMD EPYC") run on hosts of different generations, with and
    without AVX-512, and the kernels' speed follows the host."""
    name = platform.processor() or "unknown CPU"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        import llvmlite.binding as llvm

        return f"{name} (LLVM host CPU {llvm.get_host_cpu_name()})"
    except ImportError:
        return name


def version_map(names=("numpy", "scipy", "numba", "scikit-learn", "dask", "zarr", "pyarrow")) -> dict:
    """streamwww, Python and the installed ones of ``names``: name -> version."""
    from importlib.metadata import PackageNotFoundError, version

    import streamwww

    found = {"streamwww": streamwww.__version__, "Python": platform.python_version()}
    for n in names:
        try:
            found[n] = version(n)
        except PackageNotFoundError:
            pass
    return found


def versions(names=("numpy", "scipy", "numba", "scikit-learn", "dask", "zarr", "pyarrow")) -> str:
    return ", ".join(f"{n} {v}" for n, v in version_map(names).items())


def save_figure(fig, path: str) -> None:
    """Lay out, write (110 dpi) and close a Matplotlib figure."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def header(title: str) -> str:
    cmd = " ".join(shlex.quote(a) for a in [os.path.relpath(sys.argv[0])] + sys.argv[1:])
    return (f"## {title}\n\n"
            f"- date: {_dt.datetime.now(_dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}\n"
            f"- machine: {cpu_model()}, {os.cpu_count()} cores, {platform.system()} {platform.release()}\n"
            f"- versions: {versions()}\n"
            f"- command: `python {cmd}`\n")


def replace_section(path: str, marker: str, text: str) -> None:
    """Replace the block between ``<!-- marker -->`` and ``<!-- /marker -->`` in ``path``."""
    start, end = f"<!-- {marker} -->", f"<!-- /{marker} -->"
    block = f"{start}\n{text.rstrip()}\n{end}\n"
    try:
        with open(path) as f:
            doc = f.read()
    except FileNotFoundError:
        doc = "# Benchmarks\n\nEvery number here was measured by the command shown with it.\n\n"
    if start in doc and end in doc:
        doc = doc[:doc.index(start)] + block + doc[doc.index(end) + len(end) + 1:]
    else:
        doc = doc.rstrip() + "\n\n" + block
    with open(path, "w") as f:
        f.write(doc)


# --- shared by tools/bench.py and its sections (issue 6) -------------------------------------

LIBSVM_FILES = {"dna": ("dna.scale", "dna.scale.t"), "satimage": ("satimage.scale", "satimage.scale.t"),
                "letter": ("letter.scale", "letter.scale.t"), "sector": ("sector.scale", "sector.scale.t")}


class BenchContext:
    """What every section of ``tools/bench.py`` gets.

    Attributes
    ----------
    quick : bool
        Tiny inputs; the whole suite in well under five minutes (the test suite runs it).
    data_dir : str
        Folder with the ``*.xz`` LIBSVM files (``../shared/data/libsvm``).
    workdir : str
        Scratch folder for decompressed files, stores and checkpoints (kept between runs).
    plots_dir : str
        Where PNG figures go (``docs/`` beside ``benchmarks.md`` in a full run).
    doc : str
        The Markdown report whose marked sections are replaced.
    seed : int
    """

    def __init__(self, quick: bool, data_dir: str, workdir: str, plots_dir: str, doc: str, seed: int = 0):
        self.quick, self.data_dir, self.workdir = quick, data_dir, workdir
        self.plots_dir, self.doc, self.seed = plots_dir, doc, seed
        os.makedirs(workdir, exist_ok=True)
        os.makedirs(plots_dir, exist_ok=True)

    def plot_link(self, filename: str) -> str:
        """Markdown image link to ``plots_dir/filename`` relative to the report."""
        rel = os.path.relpath(os.path.join(self.plots_dir, filename), os.path.dirname(os.path.abspath(self.doc)))
        return f"![{filename}]({rel})"


def libsvm_file(ctx: BenchContext, filename: str) -> str:
    """Path of ``filename`` decompressed from ``ctx.data_dir/filename.xz`` into ``ctx.workdir``."""
    import lzma

    path = os.path.join(ctx.workdir, filename)
    if not os.path.exists(path):
        tmp = path + ".part"
        with lzma.open(os.path.join(ctx.data_dir, filename + ".xz")) as src, open(tmp, "wb") as dst:
            while chunk := src.read(1 << 24):
                dst.write(chunk)
        os.replace(tmp, path)
    return path


def load_libsvm(ctx: BenchContext, name: str, dense_letter: bool = True):
    """``X, y, X_test, y_test`` of one of :data:`LIBSVM_FILES` (CSR; letter dense by default)."""
    from sklearn.datasets import load_svmlight_file

    train_f, test_f = (libsvm_file(ctx, f) for f in LIBSVM_FILES[name])
    X, y = load_svmlight_file(train_f)
    Xt, yt = load_svmlight_file(test_f, n_features=X.shape[1])
    if name == "letter" and dense_letter:  # 16 dense features: the dense kernel
        X, Xt = X.toarray(), Xt.toarray()
    return X, y, Xt, yt


def module_at(revision: str, path: str, name: str, folder: str):
    """Import ``path`` (of this repository) as it is at git ``revision``, as a module named
    ``name`` written into ``folder`` (kept while the module is used: Numba's cache pickles
    the module's name, so it must be importable by it)."""
    import importlib

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    src = subprocess.run(["git", "-C", root, "show", f"{revision}:{path}"], check=True, capture_output=True,
                         text=True).stdout
    with open(os.path.join(folder, f"{name}.py"), "w") as f:
        f.write(src)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return importlib.import_module(name)

