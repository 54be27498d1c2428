"""How far a rounding-level change of ``W`` moves a training run, with and without shrinking.

    python tools/shrinking_ties.py [--data-dir DIR] [--data dna] [--epochs 8] [--noise 1e-15]

Trains ``NAME.scale`` (C = 1, seed 3, objectives every epoch, ``tol=0``) on the CPU
twice per setting: as is, and with ``W`` multiplied by ``1 + noise * N(0, 1)`` after
every pass (the size of the differences between two summation orders, such as the
GPU's and the CPU's).  Prints the relative difference of the primal objective after
each epoch.  Without shrinking it stays at rounding; with shrinking, on data whose
values are few (dna's binary features), a coordinate of ``beta`` that ends a few ulps
above 0 on one side and at 0 on the other stays in play for a whole epoch on one side
only, and the runs part (docs/gpu.md, "Agreement with the CPU").
"""

from __future__ import annotations

import argparse
import lzma
import os
import shutil
import sys
import tempfile
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", default=os.environ.get("STREAMWWW_DATA",
                                                        os.path.join(HERE, "..", "..", "shared", "data", "libsvm")))
    p.add_argument("--data", default="dna")
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--noise", type=float, default=1e-15)
    args = p.parse_args(argv)

    import streamwww as sw
    from streamwww.backends.cpu import CPUBackend
    from streamwww.io.convert import convert_libsvm

    warnings.simplefilter("ignore")
    real_pass = CPUBackend.bcd_pass
    with tempfile.TemporaryDirectory() as tmp:
        text = os.path.join(tmp, args.data)
        with lzma.open(os.path.join(args.data_dir, f"{args.data}.scale.xz")) as f, open(text, "wb") as g:
            shutil.copyfileobj(f, g)
        store = convert_libsvm(text, os.path.join(tmp, "s.zarr")).path

        def run(shrinking: bool, noise: float) -> np.ndarray:
            rng = np.random.default_rng(0)

            def noisy_pass(self, W, *a, **kw):
                real_pass(self, W, *a, **kw)
                W *= 1.0 + noise * rng.standard_normal(W.shape)

            CPUBackend.bcd_pass = noisy_pass if noise else real_pass
            try:
                m = sw.train(store, C=1.0, tol=0.0, max_iter=args.epochs, random_state=3, device="cpu",
                             eval_every=1, shrinking=shrinking)
            finally:
                CPUBackend.bcd_pass = real_pass
            return np.array([h["primal"] for h in m.history_])

        print(f"{args.data}: relative primal difference per epoch, W x (1 + {args.noise:g} N(0,1)) after each pass")
        for shrinking in (False, True):
            a, b = run(shrinking, 0.0), run(shrinking, args.noise)
            print(f"  shrinking={str(shrinking):5}", " ".join(f"{x:.1e}" for x in np.abs(a - b) / np.abs(a)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
