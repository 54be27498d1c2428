"""A kernel is compiled once per kind of data, not once per incidental property of an
argument: the serial and parallel builds of a pass call their stages with one index type
(``prange``'s index is a uint64, ``range``'s an int64), and the small arrays the backend
hands the kernels (C values, models, visiting order, splits) are writable whatever the
caller passed (Numba's array type includes the read-only flag). Each such variant would be
one more compilation of tens of seconds in a cold start."""

from __future__ import annotations

import numpy as np

from streamwww.backends import _block_kernels as BK
from streamwww.backends import _kernels as K
from streamwww.backends.base import make_block
from streamwww.backends.cpu import CPUBackend, bcd_pass

from .conftest import make_classification


def _read_only(a):
    a = np.array(a)
    a.flags.writeable = False
    return a


def _signatures(module):
    return {f"{name}{sig}": sig for name, disp in vars(module).items() if hasattr(disp, "signatures")
            for sig in disp.signatures}


def test_stages_and_passes_compile_once_for_any_caller(rng):
    X, y = make_classification(rng, n=120, d=10, k=5, sparse=True, density=0.4)
    block = make_block(X, y, 0.0)
    n = X.shape[0]
    for threads in (1, 2):  # the serial build, then the parallel one: the same stage builds
        be = CPUBackend(n_threads=threads)
        W, beta = np.zeros((1, 10, 5)), np.zeros((1, n, 4))
        be.bcd_pass(W, block, beta, _read_only([1.0]), _read_only([0]), _read_only(np.arange(n)), 0.0, 0, 1e-4,
                    block_rows=16)
        assert np.abs(W).max() > 0
    W, beta = np.zeros((10, 5)), np.zeros((n, 4))
    bcd_pass(W, X, y, beta, 1.0, _read_only(np.arange(n)))  # (its C values: a broadcast view)
    stages = ("_liveness", "_prepare", "_chain_ranges", "_gram_rows", "_update")
    seen = _signatures(BK)
    for name in stages:
        sigs = [s for key, s in seen.items() if key.startswith(name + "(")]
        assert sigs and not any("uint64" in str(s) for s in sigs), (name, sigs)
    passes = {**_signatures(K), **seen}
    read_only = [key for key, sig in passes.items()
                 if any(getattr(t, "ndim", 0) == 1 and not getattr(t, "mutable", True) for t in sig)]
    assert read_only == [], "\n".join(read_only)
