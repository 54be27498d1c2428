"""A first run compiles Numba's kernels: said once, and left out of the solver time."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
import textwrap

from streamwww import cli
from streamwww.cli import main

# A tiny fit in a process whose Numba cache is empty: every kernel compiles.
_COLD_FIT = textwrap.dedent("""
    import json, logging
    import numpy as np

    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record)

    logging.getLogger("streamwww").addHandler(Keep())
    logging.getLogger("streamwww").setLevel(logging.INFO)

    import streamwww as sw
    from streamwww.engine import compiling

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))
    y = rng.integers(0, 3, size=300)
    model = sw.WWClassifier(C=1.0, max_iter=3, tol=0.0, random_state=0).fit(X, y)
    notes = [r for r in records if r.getMessage() == compiling.NOTE]
    per_epoch = {r.args[1]: r.args[0] for r in records if r.msg.startswith("compiling kernels: ")}
    print(json.dumps({"time": [h["time"] for h in model.history_],
                      "wall": [h["wall_time"] for h in model.history_],
                      "notes": len(notes), "note_level": [r.levelname for r in notes],
                      "per_epoch": per_epoch, "compiled": compiling.compile_seconds()}))
""")


def test_a_cold_fit_says_so_once_and_its_first_epoch_leaves_compiling_out(tmp_path):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba-cache")}
    res = subprocess.run([sys.executable, "-c", _COLD_FIT], capture_output=True, text=True, env=env,
                         timeout=240, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["notes"] == 1 and out["note_level"] == ["WARNING"]
    compiled_first = out["per_epoch"]["0"]
    # the first epoch compiled the training kernels (seconds); its time is the training alone
    assert compiled_first > 0.5, out
    assert out["time"][0] < 0.1 * compiled_first, out
    assert out["wall"][0] > compiled_first  # (the wall time still has it)
    assert out["compiled"] >= compiled_first


def test_the_command_line_tells_a_pipe_too_and_only_once(tmp_path, monkeypatch):
    """Without a terminal (a log file, a pipe) the command says it is compiling as well
    (not under -q); the fit's own log record of it is not printed a second time."""
    calls = []
    monkeypatch.setattr(cli, "_announce_compiling", lambda: calls.append(1))
    monkeypatch.setattr("sys.stderr", io.StringIO())  # not a terminal
    data = tmp_path / "d.txt"
    flags = ["--rows", "20", "--features", "5", "--nnz-per-row", "2", "--classes", "3"]
    assert main(["make-data", str(data), *flags]) == 0
    assert main(["make-data", str(data), *flags, "--overwrite", "-q"]) == 0
    assert calls == [1]
    note = logging.LogRecord("streamwww.engine.compiling", logging.WARNING, __file__, 0, "compiling", (), None)
    other = logging.LogRecord("streamwww.engine.compiling", logging.INFO, __file__, 0, "compiling kernels: %s",
                              (1.0,), None)
    assert not cli._without_epoch_lines(note) and cli._without_epoch_lines(other)
