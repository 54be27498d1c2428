"""Subprocess entry for the kill-and-resume tests: train a store with checkpoints.

    python tests/train_worker.py STORE CHECKPOINT_DIR
"""

import sys
import warnings

import streamwww as sw

SETTINGS = dict(C=[0.5, 4.0], tol=1e-6, max_iter=25, random_state=11, checkpoint_every=1, prefetch=2)

if __name__ == "__main__":
    warnings.simplefilter("ignore")
    sw.train(sys.argv[1], checkpoint_dir=sys.argv[2], **SETTINGS)
    print("finished", flush=True)
