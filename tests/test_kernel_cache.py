"""Every compiled build of a kernel has cache files of its own.

Numba names a function's cache files after its qualified name and keys the entries by
signature and bytecode, not by the compile flags.  Two builds of one Python function (a
parallel and a serial one) would share them, and the build a machine compiled first would
be loaded for both: the same results, but a "parallel" pass on one thread.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from numba.core.dispatcher import Dispatcher

from streamwww.backends import _block_kernels as BK
from streamwww.backends import _kernels as K

ROOT = Path(__file__).resolve().parents[1] / "streamwww"
# every module that compiles a cached kernel (CUDA's are not cached)
KERNEL_MODULES = sorted(".".join(("streamwww",) + p.relative_to(ROOT).with_suffix("").parts)
                        for p in ROOT.rglob("*.py") if "cache=True" in p.read_text() or "_jit import" in p.read_text())


def _cache_name(dispatcher) -> str | None:
    cache = getattr(dispatcher, "_cache", None)
    impl = getattr(cache, "_impl", None)
    return getattr(impl, "_filename_base", None)


def test_no_two_kernel_builds_share_cache_files():
    owners: dict[str, tuple[str, object]] = {}
    cached = 0
    for name in KERNEL_MODULES:
        module = importlib.import_module(name)
        for attr, obj in vars(module).items():
            if not isinstance(obj, Dispatcher):
                continue
            base = _cache_name(obj)
            if base is None:
                continue
            cached += 1
            if base in owners and owners[base][1] is not obj:
                pytest.fail(f"{name}.{attr} and {owners[base][0]} share the cache files {base!r}")
            owners[base] = (f"{name}.{attr}", obj)
    assert cached >= 20  # the walk found the kernels (a renamed attribute would hide them)


@pytest.mark.parametrize("parallel, serial", [(K.bcd_pass, K.bcd_pass_serial), (K.hinge_sum, K.hinge_sum_serial),
                                              (K.hinge_rows, K.hinge_rows_serial),
                                              (BK.block_pass, BK.block_pass_serial)])
def test_parallel_and_serial_builds_are_what_they_say(parallel, serial):
    assert parallel.targetoptions.get("parallel") is True
    assert not serial.targetoptions.get("parallel")
    assert parallel.py_func.__code__ is serial.py_func.__code__  # one source
    assert _cache_name(parallel) != _cache_name(serial)
    assert parallel.py_func.__doc__ == serial.py_func.__doc__
