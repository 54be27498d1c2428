"""The benchmark suite runs end to end on tiny inputs (issue 6: the tests only check that
``tools/bench.py all --quick`` runs; the numbers are benchmarks, not tests)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import DATA_DIR

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = ("solvers", "accuracy", "peers", "scaling", "subproblem")


def test_bench_all_quick_writes_every_section(tmp_path):
    if not all((DATA_DIR / f"{n}.xz").exists() for n in ("dna.scale", "letter.scale", "sector.scale")):
        pytest.skip(f"LIBSVM data not found in {DATA_DIR}")
    for module in ("matplotlib", "liblinear", "vowpalwabbit"):  # the `bench` extra: pip install ".[bench]"
        pytest.importorskip(module, reason=f"{module} (a benchmark peer, in the 'bench' extra) is not installed")
    report = tmp_path / "report.md"
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "bench.py"), "all", "--quick",
                           "--data-dir", str(DATA_DIR), "--workdir", str(tmp_path / "work"),
                           "--out", str(report)], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    text = report.read_text()
    for name in SECTIONS:
        block = re.search(rf"<!-- bench-{name} -->(.*?)<!-- /bench-{name} -->", text, re.S)
        assert block, f"section {name} missing"
        body = block.group(1)
        # every block is stamped and reproducible, and has at least one table of results
        for stamp in ("- date:", "- machine:", "- versions:", "- command: `python "):
            assert stamp in body, (name, stamp)
        assert re.search(r"^\|.*\|\s*$", body, re.M), name
        for png in re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", body):
            assert (report.parent / png).stat().st_size > 1000, png
    assert len(list(tmp_path.glob("*.png"))) >= 4
