"""The objective pass beside the training pass, or before it: whole fits in one process.

    python tools/bench_certify.py [--data gen-class|NAME] [--data-dir DIR] [--gen-rows 200000] [--repeats 3]

``CPUBackend.certify_pass`` either overlaps an epoch's objective pass with the next training
pass (an objective thread scores each chunk of the visiting order on one core) or scores every
row on all threads in storage order and trains after it; by default it measures both and takes
the faster (``streamwww.backends.cpu._CertifyCosts``).  This tool fits one model (``C=1``, no
intercept, to the paper's stop ``gap <= 0.0009 gap_1``) in turn:

- ``chosen``: the defaults (all cores; the way chosen by the measured costs);
- ``overlap``: every certificate overlapped (the chooser told so);
- ``plain``: every certificate scored on all threads, then trained;
- ``n_jobs=1``: one thread, the objective and the pass one after the other.

A warm-up fit of each first (Numba's cache loaded); then ``--repeats`` rounds, the four in
turn, in one process; the ``fit`` wall time's median.  Every model must be bitwise the same
(the ways differ in time only): checked.  Data: a LIBSVM set of ``--data-dir``
(``NAME.scale``, or ``.scale.xz``), or ``gen-class``: ``streamwww make-data`` with
``--gen-rows`` rows, 100,000 features, 40 nonzeros a row, 20 classes (made in a temporary
folder).
"""

from __future__ import annotations

import argparse
import lzma
import os
import sys
import tempfile
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _benchenv import header  # noqa: E402


def _load(args):
    from sklearn.datasets import load_svmlight_file

    if args.data == "gen-class":
        from streamwww.io.datagen import make_data

        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "gen.libsvm")
            make_data(path, rows=args.gen_rows, features=100_000, nnz_per_row=40, classes=20, seed=0)
            return load_svmlight_file(path)
    path = os.path.join(args.data_dir, f"{args.data}.scale")
    with (open(path, "rb") if os.path.exists(path) else lzma.open(path + ".xz")) as fh:
        return load_svmlight_file(fh)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default="gen-class")
    p.add_argument("--data-dir", default=os.environ.get("STREAMWWW_DATA", os.path.join(HERE, "..", "..", "shared",
                                                                                       "data", "libsvm")))
    p.add_argument("--gen-rows", type=int, default=200_000)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    import streamwww as sw
    from streamwww.backends import cpu

    X, y = _load(args)
    kw = dict(C=1.0, fit_intercept=False, random_state=0, tol=0.0, gap_decay=0.0009)
    chooser = cpu._CertifyCosts.overlap_pays
    ways = {"chosen": (None, chooser), "overlap": (None, lambda self, n, m: True),
            "plain": (None, lambda self, n, m: False), "n_jobs=1": (1, chooser)}

    def fit(way, max_iter=None):
        n_jobs, pays = ways[way]
        cpu._CertifyCosts.overlap_pays = pays
        try:
            t = time.perf_counter()
            model = sw.train((X, y), n_jobs=n_jobs, **kw, **({"max_iter": max_iter} if max_iter else {}))
            return time.perf_counter() - t, model
        finally:
            cpu._CertifyCosts.overlap_pays = chooser

    for way in ways:
        fit(way, max_iter=2)
    times = {way: [] for way in ways}
    coefs = set()
    epochs = None
    for _ in range(args.repeats):
        for way in ways:
            wall, model = fit(way)
            times[way].append(wall)
            coefs.add(model.coef_.tobytes())
            epochs = model.n_iter_
    print(header(f"the objective overlapped or not: {args.data}"))
    print(f"{X.shape[0]} rows, {X.shape[1]} features, {X.nnz / X.shape[0]:.1f} nonzeros a row; {epochs} epochs; "
          f"medians of {args.repeats}")
    print("| way | fit wall s | runs |")
    print("|---|---|---|")
    for way, ts in times.items():
        print(f"| {way} | {np.median(ts):.3f} | {', '.join(f'{t:.3f}' for t in ts)} |")
    print(f"every model bitwise the same: {len(coefs) == 1}")
    return 0 if len(coefs) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
