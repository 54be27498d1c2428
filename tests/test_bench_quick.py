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


def _bench_accuracy_module(monkeypatch):
    """``tools/bench_accuracy.py`` imported as a module (``tools/`` is not a package)."""
    import importlib

    monkeypatch.syspath_prepend(str(ROOT / "tools"))
    return importlib.import_module("bench_accuracy")


def test_bench_accuracy_time_to_target_and_medians(monkeypatch):
    ba = _bench_accuracy_module(monkeypatch)
    points = [(0.1, 60.0), (0.2, 75.0), (0.4, 74.0), (0.8, 76.0)]
    assert ba.first_reach(points, 74.0) == 0.2  # the first point at or above the target
    assert ba.first_reach(points, 75.5) == 0.8
    assert ba.first_reach(points, 76.5) is None
    assert ba.first_reach([(0.5, 80.0), (0.3, 80.0)], 80.0) == 0.3  # a grid: the cheapest run that reaches it
    traces = [ba.Trace([(1.0, 50.0), (2.0, 70.0)], 70.0, 2.5, {"epochs": 2}),
              ba.Trace([(3.0, 52.0), (4.0, 71.0)], 71.0, 4.5, {"epochs": 2}),
              ba.Trace([(2.0, 51.0), (9.0, 72.0)], 72.0, 9.5, {"epochs": 2})]
    med = ba.median_trace(traces)
    assert med.points == [(2.0, 51.0), (4.0, 71.0)]
    assert (med.final_acc, med.fit_s, med.extra["epochs"]) == (71.0, 4.5, 2.0)


def test_bench_accuracy_quick_writes_its_section(tmp_path):
    for module in ("matplotlib", "liblinear"):  # the `bench` extra: pip install ".[bench]"
        pytest.importorskip(module, reason=f"{module} (in the 'bench' extra) is not installed")
    report = tmp_path / "report.md"
    report.write_text("# Benchmarks\n\n<!-- bench-accuracy -->\nanother tool's block\n<!-- /bench-accuracy -->\n")
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "bench_accuracy.py"), "--quick",
                           "--workdir", str(tmp_path / "work"), "--out", str(report)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    text = report.read_text()
    assert "another tool's block" in text  # its own block only
    block = re.search(r"<!-- bench-time-to-accuracy -->(.*?)<!-- /bench-time-to-accuracy -->", text, re.S)
    assert block, "section missing"
    body = block.group(1)
    for stamp in ("- date:", "- machine:", "- versions:", "- command: `python ", "- load (`uptime`):",
                  "liblinear-official"):
        assert stamp in body, stamp
    rows = {}
    for label in ("streamwww WWClassifier(C=1)", "LIBLINEAR -s 4", "LinearSVC(crammer_singer)"):
        row = re.search(rf"^\| {re.escape(label)} \|(.*)\|\s*$", body, re.M)
        assert row, label
        cells = [c.strip() for c in row.group(1).split("|")]
        acc = float(cells[2])
        assert 50.0 < acc <= 100.0, (label, acc)  # the generated set is learnable
        assert re.fullmatch(r"[\d.]+ m?s", cells[3]), (label, cells[3])  # a fit time
        assert all(re.fullmatch(r"[\d.]+ m?s", c) for c in cells[4:6]), (label, cells)  # own targets are reached
        rows[label] = acc
    best = max(rows.values())
    assert f"best final accuracy {best:.2f} %" in body
    assert re.search(r"^- \*\*generated\*\*: to the best final accuracy", body, re.M)  # the ranked reading
    png = re.search(r"!\[[^\]]*\]\(([^)]+\.png)\)", body)
    assert png and (report.parent / png.group(1)).stat().st_size > 10_000


def test_bench_cs_quick_writes_its_section(tmp_path):
    """``tools/bench_cs.py --quick`` (issue 55): every row, the generated set too, in its block."""
    if not all((DATA_DIR / f"{n}.xz").exists() for n in ("dna.scale", "dna.scale.t")):
        pytest.skip(f"LIBSVM data not found in {DATA_DIR}")
    pytest.importorskip("liblinear", reason="liblinear-official (a benchmark peer, in the 'bench' extra)")
    report = tmp_path / "report.md"
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "bench_cs.py"), "--quick", "--sets", "dna",
                           "--generated", "2000", "--data-dir", str(DATA_DIR), "--workdir", str(tmp_path / "work"),
                           "--out", str(report)], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    body = re.search(r"<!-- bench-cs -->(.*?)<!-- /bench-cs -->", report.read_text(), re.S).group(1)
    for stamp in ("- date:", "- machine:", "- versions:", "- command: `python ", "Generated set"):
        assert stamp in body, stamp
    for method in ("streamwww CS", "LIBLINEAR -s 4", "LinearSVC(crammer_singer)", "streamwww WW"):
        assert re.search(rf"^\| {re.escape(method)} ", body, re.M), method
