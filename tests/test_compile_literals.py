"""No compiled kernel is specialized for a literal argument.

When a kernel calls another with a constant (``f(buf, 0, ...)``, or a variable
that starts as ``0``), Numba types that call with ``Literal[int](0)`` first and
compiles the callee for that constant as well as for ``int64``: the parser's
kernels were compiled twice or three times over, about 10 s of a cold start
(``streamwww demo``'s convert step took 22 s instead of 12 s with an empty
Numba cache; docs/benchmarks.md, "Cold start").  This test runs the paths a
first-time user runs (make-data, convert plain and shuffled, Parquet, training,
prediction) in this process and looks at every signature every ``streamwww``
kernel was compiled or loaded for.
"""

from __future__ import annotations

import importlib
import pkgutil
import warnings

import numpy as np
from numba.core.registry import CPUDispatcher

import streamwww
from streamwww.io import convert_libsvm, open_store
from streamwww.io.datagen import make_data


def _dispatchers():
    for info in pkgutil.walk_packages(streamwww.__path__, "streamwww."):
        if "cuda" in info.name:  # the CUDA kernels compile on a device (or the simulator) only
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional dependency (obstore, CuPy) that is not installed
            continue
        for name, obj in vars(module).items():
            if isinstance(obj, CPUDispatcher):
                yield f"{info.name}.{name}", obj


def test_no_kernel_is_compiled_for_a_literal_argument(tmp_path):
    text = tmp_path / "d.svm"
    make_data(text, rows=600, features=40, nnz_per_row=6, classes=4, seed=1)
    convert_libsvm(text, tmp_path / "plain.zarr", shard_rows=200)
    convert_libsvm(text, tmp_path / "shuffled.zarr", shard_rows=200, shuffle=True, seed=3)
    convert_libsvm(text, tmp_path / "p.parquet", format="parquet", shard_rows=300)
    store = open_store(tmp_path / "shuffled.zarr")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = streamwww.train(store, C=1.0, max_iter=3, checkpoint_dir=tmp_path / "ck")
    X, y = store.read_shard(0)
    assert model.predict(X).shape == y.shape

    kernels = list(_dispatchers())
    literal = [f"{name}{sig}" for name, disp in kernels for sig in disp.signatures
               if any("Literal" in str(t) for t in sig)]
    assert sum(len(d.signatures) for _, d in kernels) > 10  # the paths above did compile (or load) them
    assert literal == [], "kernels specialized for literal arguments:\n" + "\n".join(literal)
    assert np.isfinite(model.coef_).all()
