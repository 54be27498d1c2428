"""Every ``examples/NN_*.py`` runs with no arguments and prints its result line (issue 17.1).

The scripts are found by glob, so a new example is tested without touching this
file; each names the line it must print in a ``# smoke-test: TEXT`` comment.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SCRIPTS = sorted(EXAMPLES.glob("[0-9][0-9]_*.py"))


def _expected(script: Path) -> str:
    m = re.search(r"^# smoke-test: (.+)$", script.read_text(), re.MULTILINE)
    assert m, f"{script.name}: no '# smoke-test: TEXT' line naming what the script prints"
    return m.group(1).strip()


def _run(script: Path, tmp_path, *args):
    env = {**os.environ, "STREAMWWW_EXAMPLES_OUT": str(tmp_path / "out")}
    return subprocess.run([sys.executable, str(script), *map(str, args)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)


def test_examples_exist():
    assert len(SCRIPTS) >= 6, [s.name for s in SCRIPTS]
    assert (EXAMPLES / "README.md").exists()
    listed = (EXAMPLES / "README.md").read_text()
    assert all(s.name in listed for s in SCRIPTS), "examples/README.md must list every script"


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.stem for s in SCRIPTS])
def test_example_runs(script, tmp_path):
    proc = _run(script, tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert _expected(script) in proc.stdout, proc.stdout[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    if script.stem == "01_out_of_core":  # every epoch it names is one the model trained (issue 57)
        trained = int(re.search(r"trained (\d+) epochs", proc.stdout).group(1))
        named = [int(e) for e in re.findall(r"\bepoch (\d+)", proc.stdout)]
        assert max(named, default=0) <= trained, proc.stdout


def test_example_takes_a_users_file(tmp_path):
    """A user's LIBSVM file as the argument replaces the generated data."""
    from streamwww.io import make_data

    data = make_data(tmp_path / "mine.libsvm", rows=3000, features=50, nnz_per_row=8, classes=4,
                     seed=3, overwrite=True)
    assert data["rows"] == 3000
    proc = _run(EXAMPLES / "05_gpu.py", tmp_path, tmp_path / "mine.libsvm")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "store: 3,000 rows, 50 features, 4 classes" in proc.stdout, proc.stdout
    missing = _run(EXAMPLES / "05_gpu.py", tmp_path, tmp_path / "nope.libsvm")
    assert missing.returncode != 0 and "no such file or store" in missing.stderr
