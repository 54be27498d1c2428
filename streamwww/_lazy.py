"""Package attributes imported on first use (PEP 562 module ``__getattr__``), so that
``import streamwww`` and the CLI's parser load no numerical library until needed."""

from __future__ import annotations

import importlib
import sys


def lazy_getattr(package: str, table: dict[str, tuple[str, str | None]]):
    """The module ``__getattr__`` of ``package``: ``table`` maps a public name to
    ``(module, attribute)`` (attribute ``None``: the module itself); the value is
    imported at the name's first use and then kept in the package."""

    def __getattr__(name: str):
        if name not in table:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, attr = table[name]
        mod = importlib.import_module(module)
        value = mod if attr is None else getattr(mod, attr)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
