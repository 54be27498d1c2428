"""Packaging (issue 17, item 7): one version, and a test extra without the benchmark peers."""

from __future__ import annotations

import importlib.metadata
import tomllib
from pathlib import Path

import streamwww

PYPROJECT = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())


def test_the_version_has_one_source():
    assert "version" not in PYPROJECT["project"] and "version" in PYPROJECT["project"]["dynamic"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "streamwww.__version__"}
    assert importlib.metadata.version("streamwww") == streamwww.__version__


def test_the_test_extra_holds_no_benchmark_peer():
    extras = PYPROJECT["project"]["optional-dependencies"]
    test = " ".join(extras["test"])
    for peer in ("liblinear", "vowpalwabbit", "matplotlib", "streamwww[bench]"):
        assert peer not in test
    assert any("liblinear" in d for d in extras["bench"])


def test_the_package_ships_its_type_hints():
    """PEP 561 (issue 57, item 7): ``py.typed`` in the package, and in its wheel's package data."""
    assert (Path(streamwww.__file__).parent / "py.typed").is_file()
    assert "py.typed" in PYPROJECT["tool"]["setuptools"]["package-data"]["streamwww"]
