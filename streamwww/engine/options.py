"""The options of a fit as three frozen objects, built once where a call enters the package.

``train``, ``resume``, the estimators and the cross-validating estimators take their
options as keywords (their public signatures); they build these objects once, and the
engine's entry points (:func:`~streamwww.engine.run.fit_source`,
:func:`~streamwww.engine.run.fit_distributed`, :func:`~streamwww.engine.run.fit_placed`)
take them whole.  A misspelled option is a ``TypeError`` where the object is built, not
several calls further down.

The options are grouped by who decides them and what they change:

:class:`RunOptions`
    The user's settings of how a run reads, trains and keeps its work: the checkpoint
    directory and its rhythm, the shards loading ahead, the passes and the objective
    schedule, shard mixing, the memory budget.  They are the same for every caller
    (``train``, an estimator, a cross-validation run), and ``resume`` rebuilds them from
    what the checkpoint recorded.  This is the one place that states their defaults
    (:data:`streamwww._params.DEFAULTS`).
:class:`Placement`
    Where the work runs: this process (no placement) or a Dask cluster, its row
    partitions and the directory its workers share for ``beta``.  Apart from the
    partition count (a model setting of a cluster run) nothing of it is recorded: a
    client cannot be, and a resumed run may continue elsewhere.
:class:`Call`
    What one caller brings for this call only, beside the settings: the hooks that run
    in its process (``callback``, ``progress``), what the checkpoint records about the
    call so that ``resume`` repeats it (``run_info``, ``C_is_list``), the model plan of a
    cross-validation run (``splits``, one per ``C``) and an estimator's warm start.  Kept
    apart so that the settings hold values only, shared unchanged between calls, while
    callables, arrays and the callers' records travel beside them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

from streamwww._params import DEFAULTS, check_run_options

if TYPE_CHECKING:
    from distributed import Client

    from streamwww.storage.location import Location

__all__ = ["OPTION_KEYS", "Call", "Placement", "RunOptions", "options_of"]


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    """How one run reads, trains and keeps its work (:func:`streamwww.train`'s options of the same names).

    Parameters
    ----------
    checkpoint_dir : str, os.PathLike, Location or None, default=None
        Where ``beta`` and the checkpoints are kept; None: no checkpoint.
    checkpoint_every : int, default=0
        Shards between two checkpoints within an epoch (0: at epoch ends only).
    checkpoint_interval : float, default=60.0
        Seconds at least between two checkpoints (0: one at every epoch end).
    prefetch : 'auto' or int, default='auto'
        Shards (and their ``beta``) loading ahead
        (:func:`~streamwww._params.resolve_prefetch`).
    inner_passes : int, default=1
        Exact passes over each loaded shard group.
    eval_every : int or 'auto', default='auto'
        Epochs between objective passes (``'auto'``: :mod:`streamwww.engine.schedule`).
    mix_shards : int, default=2
        Shards trained together as one block (stores; in-memory data trains unmixed).
    memory_budget : 'auto' or int, default='auto'
        Bytes of a store's decoded shards kept in memory
        (:func:`~streamwww._params.resolve_memory_budget`); on a cluster, per worker.

    Notes
    -----
    Only ``inner_passes``, ``eval_every`` and ``mix_shards`` change the model (they are
    part of its :class:`~streamwww.engine.config.SolverConfig`); a cluster run takes
    none of ``checkpoint_every``, ``checkpoint_interval`` and ``prefetch`` (it commits
    after every round, and its workers load their own shards).
    """

    checkpoint_dir: str | os.PathLike | Location | None = None
    checkpoint_every: int = DEFAULTS["checkpoint_every"]
    checkpoint_interval: float = DEFAULTS["checkpoint_interval"]
    prefetch: int | str = DEFAULTS["prefetch"]
    inner_passes: int = DEFAULTS["inner_passes"]
    eval_every: int | str = DEFAULTS["eval_every"]
    mix_shards: int = DEFAULTS["mix_shards"]
    memory_budget: int | str = DEFAULTS["memory_budget"]

    def check(self, owner: str = "train") -> None:
        """Validate the options before any work (:func:`~streamwww._params.check_run_options`:
        scikit-learn's wording, ``owner`` named as the one checking)."""
        check_run_options(owner, **{f.name: getattr(self, f.name) for f in fields(self) if f.name != "checkpoint_dir"})


@dataclass(frozen=True, kw_only=True)
class Placement:
    """Where a fit runs when it runs on a Dask cluster (no placement: this process).

    Parameters
    ----------
    client : distributed.Client, str or None, default=None
        A user's client or a scheduler address; inside the engine
        (:func:`~streamwww.engine.run.fit_distributed`) the connected client.
    workers : int or None, default=None
        Start a local cluster of this many worker processes for the fit.
    partitions : int or None, default=None
        ``K``, the row partitions of the cluster run (None: a checkpoint's, else from the
        worker count).
    """

    client: Client | str | None = None
    workers: int | None = None
    partitions: int | None = None

    @classmethod
    def of(cls, client, workers, partitions, owner: str) -> "Placement | None":
        """The placement of a user's ``client``, ``workers`` and ``partitions``: None (this
        process) without a client or workers, where ``partitions`` alone is an error."""
        if client is None and workers is None:
            if partitions is not None:
                raise ValueError(f"{owner}: partitions applies to cluster runs (give client or workers)")
            return None
        return cls(client=client, workers=workers, partitions=partitions)


@dataclass(frozen=True, kw_only=True)
class Call:
    """What one call brings beside the settings.

    Parameters
    ----------
    callback, progress : callable or None, default=None
        :func:`streamwww.train`'s hooks: after each evaluated epoch (or round), after each
        group of shards.
    run_info : dict or None, default=None
        JSON recorded in the checkpoint's ``run`` section (the model path, a
        cross-validation run's plan), for ``resume`` to repeat the call.
    C_is_list : bool, default=False
        Whether the caller gave ``C`` as a list (``resume`` then returns a list).
    splits : sequence of int or None, default=None
        One per ``C`` of the fit: model ``j`` trains on cross-validation split
        ``splits[j]`` of the rows (-1: all of them).
    warm : (W, beta) or None, default=None
        In-memory data only: ``W[n_models, D, k]`` and ``beta[n_models, n, k-1]`` with
        ``W == W(beta)`` to start from.
    """

    callback: Callable | None = None
    progress: Callable | None = None
    run_info: dict | None = None
    C_is_list: bool = False
    splits: tuple | list | None = None
    warm: tuple | None = None


_PLACEMENT_KEYS = ("client", "workers", "partitions")
_HOOK_KEYS = ("callback", "progress")
#: The keywords of :func:`streamwww.train` that :func:`options_of` takes.
OPTION_KEYS = tuple(f.name for f in fields(RunOptions)) + _PLACEMENT_KEYS + _HOOK_KEYS


def options_of(options: dict, owner: str) -> tuple[RunOptions, Placement | None, Call]:
    """:func:`streamwww.train`'s keywords of a run (those of :data:`OPTION_KEYS`) as its
    :class:`RunOptions` (checked: :meth:`RunOptions.check`), :class:`Placement` (None: this
    process) and :class:`Call` (its hooks); any other keyword is a ``TypeError``.  ``owner``
    names the caller in errors."""
    rest = dict(options)
    placement = Placement.of(*(rest.pop(k, None) for k in _PLACEMENT_KEYS), owner)
    call = Call(**{k: rest.pop(k) for k in _HOOK_KEYS if k in rest})
    run = RunOptions(**rest)
    run.check(owner)  # validated where they are built, before any work
    return run, placement, call
