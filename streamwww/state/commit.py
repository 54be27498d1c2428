"""The commit protocol: how a checkpoint makes ``W``, the current ``beta`` versions and the
run state durable as one step, in this order.

1. **capture** (:func:`capture`, on the training thread): ``beta``'s plan
   (:meth:`DiskBetas.begin_commit <streamwww.state.betas.DiskBetas.begin_commit>`: every
   shard's current version, the writes to wait for), and copies of ``W``, ``W_sets`` and the
   state; training goes on while the rest runs on the commit thread (:func:`complete`).
2. **beta durable** (:meth:`DiskBetas.end_commit <streamwww.state.betas.DiskBetas.end_commit>`):
   the plan's writes waited for (resident or scratch versions written now), every version
   it names fsynced, then ``beta.zarr``; gives the manifest's ``beta`` entry (versions and
   per-model sums).
3. **weights** (:meth:`CheckpointDir.write_manifest
   <streamwww.state.checkpoint.CheckpointDir.write_manifest>`): ``W`` (and ``W_sets``)
   written to a temporary name, fsynced and renamed; on an object store created once.
4. **manifest** (same method): ``manifest.json.tmp`` written and fsynced, the latest
   manifest moved to ``manifest.prev.json``, the new one renamed into place, the directory
   fsynced; on an object store the latest copied to ``manifest.prev.json`` from its bytes,
   then the new one written last, as one PUT. The rename (the PUT) is the commit.
5. **drop superseded** (:meth:`CheckpointDir.drop_superseded
   <streamwww.state.checkpoint.CheckpointDir.drop_superseded>`, which asks
   :meth:`DiskBetas.drop_superseded <streamwww.state.betas.DiskBetas.drop_superseded>` for
   ``beta``): what neither kept manifest names is deleted.
6. **mark committed** (:meth:`DiskBetas.mark_committed
   <streamwww.state.betas.DiskBetas.mark_committed>`): the plan's versions become the
   committed ones, the committed ones the previous (the fallback kept on disk).

A process killed at any instant before step 4's rename leaves the previous manifest and
everything it names intact (nothing a manifest names is written or deleted before then);
killed after it, the new commit stands and what step 5 did not delete is collected by the
next one. See docs/RELIABILITY.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["BetaCommit", "capture", "complete"]


@dataclass(frozen=True)
class BetaCommit:
    """A commit of :class:`~streamwww.state.betas.DiskBetas` in progress: every shard's
    version, and the versions written since the last commit (``keys``) with their write
    futures (or, for resident betas, the arrays to write)."""

    versions: dict[int, int]
    keys: list[tuple[int, int]]
    futures: list[Any]
    arrays: dict[tuple[int, int], list] | None = None  # resident: what end_commit writes


def capture(betas: Any, W: np.ndarray, state: dict[str, Any], W_sets: np.ndarray | None = None
            ) -> tuple[BetaCommit, np.ndarray, dict[str, Any], np.ndarray | None]:
    """Step 1, on the thread that puts ``beta``: the plan of ``betas``' current versions and
    copies of ``W``, ``state`` and ``W_sets`` (the caller goes on mutating its own).

    ``betas`` is a :class:`~streamwww.state.betas.DiskBetas` (not imported here: it and
    :mod:`~streamwww.state.checkpoint` import this module).
    """
    plan = betas.begin_commit()
    W = np.array(W, dtype=np.float64, order="C", copy=True)
    if W_sets is not None:
        W_sets = np.array(W_sets, dtype=np.float64, order="C", copy=True)
    state = json.loads(json.dumps(state))  # a deep copy
    return plan, W, state, W_sets


def complete(directory: Any, step: int, W: np.ndarray, state: dict[str, Any], betas: Any,
             plan: BetaCommit, final: bool, W_sets: np.ndarray | None = None) -> None:
    """Steps 2 to 6 of a commit captured by :func:`capture`, in order (on the commit thread).

    Parameters
    ----------
    directory : CheckpointDir
        The checkpoint being committed to (:class:`~streamwww.state.checkpoint.CheckpointDir`).
    step, W, state, W_sets
        The commit counter and what :func:`capture` copied.
    betas : DiskBetas
        Whose plan ``plan`` is.
    plan : BetaCommit
    final : bool
        A run's last commit, which then deletes everything neither manifest names (no
        ``beta`` may be put while it runs).
    """
    directory.doing = "writing beta"
    beta = betas.end_commit(plan)  # 2: the versions durable
    manifest = directory.write_manifest(step, W, state, beta, W_sets, rotate=bool(plan.keys))  # 3 and 4
    directory.drop_superseded(manifest, betas, plan, final)  # 5
    betas.mark_committed(plan)  # 6
