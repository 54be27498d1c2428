"""Example 05 -- the GPU when there is one: ``device="auto"``, and what happens without one.

``WWClassifier(device="auto")`` (the default, also for ``streamwww.train`` and
the CLI's ``--device``) trains on a CUDA GPU when one is usable -- a GPU, its
driver and numba-cuda's libraries -- and the run is one where the GPU was
measured faster: 10 or more models (values of C x folds) of 100 or more classes.
The exact kernel runs one thread block per model, so a single model trains
faster on the CPU (docs/gpu.md has the H200's numbers).  Both devices solve the
same exact block problems: without shrinking the models agree to rounding (1e-15
measured); with shrinking (the default) the two runs can take different sets
after a few epochs on data with exact ties, and each still stops on its own
certified gap.  The fitted ``device_`` attribute says where a fit ran, and the
``streamwww`` logger says at level INFO why ``'auto'`` did not use a GPU.
``device="cuda"`` insists: without a usable GPU it raises
``DeviceUnavailableError`` with the reason, instead of falling back.

This script trains the same data three ways -- ``'auto'``, ``'cpu'``, and
``'cuda'`` (which fails cleanly on a machine without a GPU) -- and compares
the models and the times.

Run:  python examples/05_gpu.py [LIBSVM_FILE | STORE]
"""
# smoke-test: auto ran on:

from __future__ import annotations

import logging
import sys
import time

import numpy as np

from streamwww import WWClassifier
from streamwww.errors import DeviceUnavailableError
from _common import as_store, example_data, user_input, workdir

SETTINGS = dict(C=0.01, tol=1e-3, max_iter=300, random_state=0)


def main() -> int:
    # The library logs through `logging`; show its INFO lines (e.g. why no GPU was used).
    logging.basicConfig(format="  [log] %(message)s", stream=sys.stdout)
    logging.getLogger("streamwww.backends").setLevel(logging.INFO)

    with workdir("05_gpu") as work:
        src = user_input()
        if src is None:
            src = example_data(work / "train.libsvm", rows=20_000, features=2000, classes=10, noise=1.0)
        store = as_store(src, work / "train.zarr")
        print(f"store: {store.n_rows:,} rows, {store.n_features:,} features, {len(store.classes)} classes")

        fits = {}
        for device in ("auto", "cpu"):
            t0 = time.perf_counter()
            model = WWClassifier(device=device, **SETTINGS).fit(store)  # a store streams shard by shard
            fits[device] = model
            print(f"device={device!r}: ran on {model.device_}, {model.n_iter_} epochs, "
                  f"{time.perf_counter() - t0:.1f} s, train accuracy {model.score(store):.4f}")
        print(f"auto ran on: {fits['auto'].device_}")
        diff = float(np.max(np.abs(fits["auto"].coef_ - fits["cpu"].coef_)))
        same = "bitwise equal" if diff == 0 else f"largest |coef difference| {diff:.2e}"
        print(f"'auto' vs 'cpu' models: {same}")

        try:
            model = WWClassifier(device="cuda", **SETTINGS).fit(store)
            print(f"device='cuda': ran on {model.device_}")
        except DeviceUnavailableError as exc:
            print(f"device='cuda' refuses to fall back: {exc}")

        # The same through the functional API and the CLI:
        #   streamwww.train(store, C=0.1, device="auto")
        #   streamwww train STORE --device auto --checkpoint-dir ck --model-out model.npz
        return 0


if __name__ == "__main__":
    sys.exit(main())
