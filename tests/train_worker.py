"""Subprocess entry for the kill-and-resume tests: train a store with checkpoints.

    python tests/train_worker.py STORE CHECKPOINT_DIR [CHECKPOINT_INTERVAL [MEMORY_BUDGET [C]]]

A checkpoint at every shard by default (interval 0); an interval in seconds
commits less often, which must not change the model either. With the environment
variable ``NO_SCRATCH_ROOM=1`` no scratch file can be made (as on a full disk): a
``beta`` beyond the memory budget is written as a version every epoch.  ``TRAIN_BLOCK_ROWS``
and ``TRAIN_JOBS`` set ``block_rows`` and ``n_jobs`` (the block pass on threads), ``TRAIN_LOSS``
the loss (``cs``: Crammer-Singer).
"""

import errno
import logging
import os
import sys
import warnings

import streamwww as sw

SETTINGS = dict(C=[0.5, 4.0], tol=1e-6, max_iter=25, random_state=11, checkpoint_every=1, prefetch=2,
                checkpoint_interval=0.0)

# one model, commits at epoch ends, stopped by its gap (before max_iter)
ONE_MODEL = dict(checkpoint_every=0, tol=1e-3, max_iter=300)

if __name__ == "__main__":
    warnings.simplefilter("ignore")
    logging.basicConfig(level=logging.WARNING)  # (stderr; the run's choices below, for the tests to check)
    logging.getLogger("streamwww.engine.run").setLevel(logging.INFO)
    settings = dict(SETTINGS)
    if os.environ.get("NO_SCRATCH_ROOM") == "1":
        from streamwww.state import scratch

        def full(self, *args, **kwargs):
            raise OSError(errno.ENOSPC, "No space left on device")

        scratch.ShardScratch.__init__ = full
    if os.environ.get("TRAIN_BLOCK_ROWS"):
        settings["block_rows"] = int(os.environ["TRAIN_BLOCK_ROWS"])
    if os.environ.get("TRAIN_LOSS"):
        settings["loss"] = os.environ["TRAIN_LOSS"]
    if os.environ.get("TRAIN_JOBS"):
        settings["n_jobs"] = int(os.environ["TRAIN_JOBS"])
    if len(sys.argv) > 3:
        settings["checkpoint_interval"] = float(sys.argv[3])
    if len(sys.argv) > 4:
        settings["memory_budget"] = sys.argv[4] if sys.argv[4] == "auto" else int(sys.argv[4])
    if len(sys.argv) > 5:  # one model (a store read from disk then certifies each epoch late)
        settings.update(ONE_MODEL, C=float(sys.argv[5]))
    sw.train(sys.argv[1], checkpoint_dir=sys.argv[2], **settings)
    print("finished", flush=True)
