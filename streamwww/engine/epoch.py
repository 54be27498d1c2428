"""One group's exact block minimization: the step every epoch is made of.

A group is the rows of one or more shards, trained as one block. Its ``inner_passes``
passes each visit the rows in the seeded order of ``(seed, epoch, first shard, pass)``
(:func:`~streamwww.engine.order.row_order`) and solve each row's block subproblem
exactly (the backend's ``bcd_pass``: Walrus for Weston-Watkins, the simplex step for
Crammer-Singer), updating ``W`` and the group's ``beta`` in place. The single-process
driver (:func:`~streamwww.engine.driver.run_bcd`) calls it for each group of an epoch
on the whole data; a cluster round's task
(:func:`~streamwww.engine.cocoa.round_task`) calls it for each group of its partition,
on its working copy ``W_t + Delta W_k``.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from streamwww.backends.base import Backend
from streamwww.engine.config import SolverConfig
from streamwww.engine.order import row_order
from streamwww.engine.shrink import pass_args

__all__ = ["train_group"]


def train_group(backend: Backend, cfg: SolverConfig, W, block, beta, active: np.ndarray, epoch: int,
                first_shard: int, Cs: np.ndarray, splits, *, near=None,
                first_pass: Callable[[np.ndarray], dict] | None = None) -> None:
    """The inner passes of epoch ``epoch`` over ``block`` (device arrays) for the models ``active``.

    Parameters
    ----------
    backend : Backend
    cfg : SolverConfig
    W, block, beta
        The weights, the group's rows and its ``beta``, on the backend's device; ``W``
        and ``beta`` are updated in place.
    active : ndarray of int
        The models trained.
    epoch, first_shard : int
        With the pass number, the seed of each pass's row order.
    Cs : ndarray
        Every model's ``C``; ``splits``: :func:`~streamwww.backends.base.model_splits`.
    near : optional
        The shrinking sets (coordinates left out) of the group's rows.
    first_pass : callable, optional
        ``first_pass(order)`` runs the first pass instead (the driver's late certificate,
        which sums ``W_t``'s objectives beside it) and returns the keyword arguments of
        the later passes' sets.
    """
    shrunk = pass_args(near, cfg)
    solver = cfg.solver_id
    for p in range(cfg.inner_passes):
        order = row_order(cfg.seed, epoch, first_shard, p, block.n_rows, cfg.row_order)
        if p == 0 and first_pass is not None:
            shrunk = first_pass(order)
        else:
            backend.bcd_pass(W, block, beta, Cs, active, order, cfg.bias, solver, cfg.shark_eps, splits,
                             block_rows=cfg.block_rows, **shrunk)
