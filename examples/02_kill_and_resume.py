"""Example 02 -- kill a training run with SIGKILL, resume it, get the same model.

``streamwww train STORE --checkpoint-dir DIR`` commits a checkpoint (W, every
shard's beta version, the position in the epoch) at epoch ends and every
``--checkpoint-every`` shards, at most once every ``--checkpoint-interval``
seconds (default 60), atomically: a process killed at any instant leaves the
previous checkpoint whole.  ``streamwww.resume(DIR)`` (or
``streamwww resume DIR``) continues with the recorded settings and ends with
the model an uninterrupted run gives -- bitwise, because the row orders are a
function of (seed, epoch, shard, pass) only.

This script

1. starts ``streamwww train`` in a subprocess,
2. waits until it has committed a checkpoint in the middle of an epoch, and
   kills it with SIGKILL (no chance to clean up, as in a power cut),
3. resumes from the checkpoint directory with ``streamwww.resume``,
4. trains the same data and seed again without interruption, in this process,
   and compares the two models with ``np.array_equal``.

Run:  python examples/02_kill_and_resume.py [LIBSVM_FILE | STORE]
"""
# smoke-test: bitwise equal: yes

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
import time

import numpy as np

import streamwww as sw
from _common import as_store, example_data, user_input, workdir

C = 0.01
TOL = 1e-2  # stop at a relative duality gap of 1 % (a short run for the example)
SEED = 0  # the same seed gives the same row orders, so the same model


def last_checkpoint(ckpt) -> dict | None:
    """Where the latest committed checkpoint stands (``manifest.json`` is renamed into
    place atomically, so it is either the old or the new one, never half-written)."""
    try:
        cursor = json.loads((ckpt / "manifest.json").read_text())["cursor"]
    except (OSError, ValueError, KeyError):
        return None
    return cursor  # {"epoch": epochs done, "pos": shards done in the current epoch, ...}


def main() -> int:
    with workdir("02_kill_and_resume") as work:
        src = user_input()
        if src is None:
            print("generating 100,000 rows ...", flush=True)
            src = example_data(work / "train.libsvm", rows=100_000)
        store = as_store(src, work / "train.zarr", shard_mb=1)
        print(f"store: {store.n_rows:,} rows in {store.n_shards} shards")
        ckpt = work / "ckpt"

        # 1. the command line, as you would type it (python -m streamwww.cli == streamwww)
        cmd = [sys.executable, "-m", "streamwww.cli", "train", str(store.path),
               "--C", str(C), "--tol", str(TOL), "--seed", str(SEED), "--checkpoint-dir", str(ckpt),
               # a commit every 4 shards; by default at most one a minute, here every time (a short demo)
               "--checkpoint-every", "4", "--checkpoint-interval", "0", "--model-out", str(work / "model.npz"), "-q"]
        print("$ streamwww " + shlex.join(cmd[3:]), flush=True)
        proc = subprocess.Popen(cmd)

        # 2. kill it once a checkpoint inside an epoch (after epoch 1) is on disk
        while proc.poll() is None:
            cur = last_checkpoint(ckpt)
            if cur is not None and cur["epoch"] >= 1 and cur["pos"] > 0:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                print(f"killed the trainer (SIGKILL) after its checkpoint at epoch {cur['epoch'] + 1}, "
                      f"shard {cur['pos']} of {store.n_shards}")
                break
            time.sleep(0.01)
        else:
            print(f"the run ended (exit code {proc.returncode}) before it could be killed; "
                  f"use a larger data set")
            return 1

        # 3. resume: the settings, seed and store path come from the checkpoint
        resumed = sw.resume(ckpt)
        print(f"resumed: {resumed.n_iter_} epochs in all, relative duality gap "
              f"{resumed.history_[-1]['rel_gap']:.1e}; model written to {work / 'model.npz'}")

        # 4. the same run without interruption (no checkpoints: they do not change the model)
        uninterrupted = sw.train(store, C=C, tol=TOL, random_state=SEED)
        same = (np.array_equal(resumed.coef_, uninterrupted.coef_)
                and np.array_equal(resumed.intercept_, uninterrupted.intercept_)
                and resumed.n_iter_ == uninterrupted.n_iter_)
        diff = np.max(np.abs(resumed.coef_ - uninterrupted.coef_))
        print(f"uninterrupted: {uninterrupted.n_iter_} epochs; largest |coef difference| {diff:g}")
        print(f"bitwise equal: {'yes' if same else 'NO'}")
        # the model file the killed run was asked for holds the same model
        saved = sw.load_model(work / "model.npz")
        assert np.array_equal(saved.coef_, resumed.coef_)
        return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
