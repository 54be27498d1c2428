"""Machine, library versions, date and command for benchmark reports."""

from __future__ import annotations

import datetime as _dt
import os
import platform
import shlex
import subprocess
import sys


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def versions(names=("numpy", "scipy", "numba", "scikit-learn", "dask", "zarr", "pyarrow")) -> str:
    from importlib.metadata import PackageNotFoundError, version

    parts = [f"Python {platform.python_version()}"]
    for n in names:
        try:
            parts.append(f"{n} {version(n)}")
        except PackageNotFoundError:
            pass
    import streamwww

    parts.insert(0, f"streamwww {streamwww.__version__}")
    return ", ".join(parts)


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
