"""A kernel is compiled once per kind of data, not once per incidental property of an
argument: the serial and parallel builds of a pass call their stages with one index type
(``prange``'s index is a uint64, ``range``'s an int64), and every array the backend hands
the kernels but the rows (labels, weights, C values, models, visiting order, splits) is
writable whatever the caller passed (Numba's array type includes the read-only flag). Each such variant would be
one more compilation of tens of seconds in a cold start."""

from __future__ import annotations

import numpy as np
from numba import njit, types

from streamwww.backends import _block_kernels as BK
from streamwww.backends import _kernels as K
from streamwww.backends.base import make_block
from streamwww.backends.cpu import CPUBackend, bcd_pass

from .conftest import make_classification

STAGES = ("_liveness", "_prepare", "_chain_ranges", "_gram_rows", "_update")


def _read_only(a):
    a = np.array(a)
    a.flags.writeable = False
    return a


def test_stages_and_passes_compile_once_for_any_caller(rng, monkeypatch):
    X, y = make_classification(rng, n=120, d=10, k=5, sparse=True, density=0.4)
    block = make_block(X, y, 0.0)
    n = X.shape[0]
    # the parallel build compiled here, not loaded from Numba's cache (a cached caller holds
    # its callees' code), so that the stages are typed, and listed, for its calls
    monkeypatch.setattr(BK, "block_pass", njit(parallel=True)(BK._block_pass))
    for threads in (1, 2):
        be = CPUBackend(n_threads=threads)
        W, beta = np.zeros((1, 10, 5)), np.zeros((1, n, 4))
        be.bcd_pass(W, block, beta, _read_only([1.0]), _read_only([0]), _read_only(np.arange(n)), 0.0, 0, 1e-4,
                    block_rows=16)
        assert np.abs(W).max() > 0
    W, beta = np.zeros((10, 5)), np.zeros((n, 4))
    bcd_pass(W, X, y, beta, 1.0, _read_only(np.arange(n)))  # (its C values: a broadcast view)
    frozen = make_block(X, _read_only(y.astype(np.int32)), 0.0, weights=_read_only(np.ones(n)))
    assert CPUBackend(n_threads=1).hinge_sums(W[None], frozen, 0.0, _read_only([0]))[0] > 0
    for name in STAGES:
        sigs = getattr(BK, name).signatures
        assert sigs and not any("uint64" in str(s) for s in sigs), (name, sigs)
    # every array but the rows (argument 1: a user's memory-mapped X is used as it is, and
    # other tests of this process pass read-only rows)
    kernels = (K.bcd_pass_serial, BK.block_pass, BK.block_pass_serial, K.hinge_sum_serial)
    assert all(kernel.signatures for kernel in kernels)
    read_only = [f"{kernel.py_func.__name__}{sig}" for kernel in kernels for sig in kernel.signatures
                 if any(isinstance(t, types.Array) and not t.mutable for i, t in enumerate(sig) if i != 1)]
    assert read_only == [], "\n".join(read_only)


def test_a_command_a_test_starts_imports_the_code_under_test(tmp_path):
    """Commands and scripts the tests start import the streamwww the tests import, from any
    folder (tests/conftest.py): one copy of the code under test, and one Numba cache of its
    kernels for the suite (a cache belongs to a source path)."""
    import subprocess
    import sys

    import streamwww

    proc = subprocess.run([sys.executable, "-c", "import streamwww; print(streamwww.__file__)"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == streamwww.__file__
