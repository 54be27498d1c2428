"""The package's import structure: no cycles, no private names across packages, layers one way.

Walks every module of ``streamwww`` with ``ast`` (imports inside functions
included: a function-local import that closes a circle is still a circle).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "streamwww"

# Layers, top to bottom; a module may import its own layer or any layer below it.
LAYERS = [
    {"streamwww.cli"},
    {"streamwww.api"},
    {"streamwww.cv"},
    {"streamwww.estimator"},
    {"streamwww.engine"},
    {"streamwww.stream", "streamwww.state", "streamwww.backends", "streamwww._textdata", "streamwww.model"},
    {"streamwww.io", "streamwww.solvers"},
    {"streamwww.storage", "streamwww.model.fitted", "streamwww.progress"},
    {"streamwww.labels", "streamwww.weights", "streamwww.errors", "streamwww._params", "streamwww._logging",
     "streamwww._memory", "streamwww._jit", "streamwww"},
]


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, name: str):
    """``(imported module, imported names, line)`` for every import in the file."""
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, (), node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")
                base = base[:len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            yield mod, tuple(a.name for a in node.names), node.lineno


MODULES = {_module_name(p): p for p in ROOT.rglob("*.py")}


def _graph():
    graph = {}
    for name, path in MODULES.items():
        deps = set()
        for mod, names, _ in _imports(path, name):
            if not mod.startswith("streamwww"):
                continue
            for n in names:  # `from pkg import module` imports the module
                if f"{mod}.{n}" in MODULES:
                    deps.add(f"{mod}.{n}")
            if mod in MODULES:
                deps.add(mod)
        deps.discard(name)
        graph[name] = deps
    return graph


def _owner(module: str) -> str:
    """The package a module belongs to (a package's ``__init__`` belongs to the package)."""
    return module if MODULES.get(module, Path()).name == "__init__.py" else module.rpartition(".")[0]


def test_no_import_cycles():
    graph = _graph()
    # A package's __init__ re-exporting its own modules is not a cycle through them.
    for name in graph:
        if MODULES[name].name == "__init__.py":
            graph[name] = {d for d in graph[name] if not d.startswith(name + ".")}
    state, stack, cycles = {}, [], []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for d in sorted(graph.get(n, ())):
            if state.get(d) == 1:
                cycles.append(stack[stack.index(d):] + [d])
            elif d not in state:
                visit(d)
        stack.pop()
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_no_private_names_across_packages():
    """``_x`` (a private module or name) is imported only inside the package that owns it."""
    bad = []
    for name, path in MODULES.items():
        here = _owner(name)
        for mod, names, line in _imports(path, name):
            if not mod.startswith("streamwww"):
                continue
            targets = [mod] + [f"{mod}.{n}" for n in names]
            for t in targets:
                parts = t.split(".")
                for i, part in enumerate(parts):
                    if part.startswith("_") and not part.startswith("__"):
                        owner = ".".join(parts[:i])  # the package the private part belongs to
                        if not (here == owner or here.startswith(owner + ".")):
                            bad.append(f"{path.relative_to(ROOT.parent)}:{line} imports {t}")
                        break
    assert not bad, "private names imported across packages:\n" + "\n".join(sorted(set(bad)))


def _layer(module: str) -> int | None:
    best = None
    for i, layer in enumerate(LAYERS):
        for prefix in layer:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[1]:
                    best = (i, len(prefix))
    return None if best is None else best[0]


def test_layers_depend_one_way():
    """CLI/API/estimator -> engine -> stream/backends/checkpoint -> io/solvers -> leaves."""
    bad = []
    for name, deps in _graph().items():
        mine = _layer(name)
        assert mine is not None, f"{name} is in no layer of tests/test_architecture.py"
        for d in deps:
            theirs = _layer(d)
            if theirs is not None and theirs < mine and not MODULES[name].name == "__init__.py":
                bad.append(f"{name} (layer {mine}) imports {d} (layer {theirs})")
    assert not bad, "imports against the layering:\n" + "\n".join(sorted(bad))


@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_module_says_what_it_owns(name):
    doc = ast.get_docstring(ast.parse(MODULES[name].read_text()))
    assert doc and len(doc.strip()) > 20, f"{name} has no module docstring"
