"""Algorithm 1 of Wang & Scott (ICML 2021), shard by shard: the training driver.

Each epoch visits the shards in a seeded order, in groups; each group is one
block of rows, and each row's block subproblem is solved exactly (Walrus) by
the backend's pass.  After an evaluated epoch the objectives decide who stops.
All array arithmetic lives in the backend kernels and in
:mod:`streamwww.engine.objective`; reading shards (and their ``beta``) ahead
is the feed's job; making state durable is the checkpoint hook's.

Several models (one per ``C``) share every pass over the data; each is updated,
evaluated and stopped exactly as it would be alone, so a model trained in a
group equals its own single-``C`` run.  Which epochs are evaluated is each
model's own (:class:`~streamwww.engine.schedule.Schedule`): an objective pass
scores the models due, and the others keep the shrinking sets, and the ``W``
that made them (:class:`_Sets`, for a commit), of their last pass.

The objectives of ``W_t`` need a pass over every row.  By default it follows
epoch ``t`` (a second read of each shard).  With ``late=True`` (one model) they are
summed from the rows epoch ``t + 1`` loads for training, against a copy of
``W_t``, by the backend's ``certify_pass``, which the CPU overlaps with the
group's first training pass on a second core; a store is read once per epoch.
The stop decision then comes one epoch late, and a model that stops is rewound
to the certified ``W_t`` and the ``beta`` it came with, so the model, its history
and the checkpoint it ends with are bitwise those of the default order (the
terms are added in storage order either way).
"""

from __future__ import annotations

import logging
import signal
import time
from dataclasses import dataclass
from typing import Any, Callable, NoReturn

import numpy as np

from streamwww.backends.base import Backend, model_splits, ordered_row_sums
from streamwww.engine.compiling import compile_seconds, solver_clock, watch
from streamwww.engine.config import Cursor, ModelResult, SolverConfig
from streamwww.engine.decision import decide
from streamwww.engine.epoch import train_group
from streamwww.engine.interrupt import Interrupted, Stop
from streamwww.engine.order import EpochPlan
from streamwww.engine.schedule import Schedule
from streamwww.engine.shrink import NearSets, near_args, new_near, pass_args, pins, shrinking_applies
from streamwww.state.betas import split_rows
from streamwww.stream.feed import SyncFeed

logger = logging.getLogger(__name__)

__all__ = ["Hooks", "run_bcd", "late_allowed"]


@dataclass
class Hooks:
    """What the driver calls out to; every hook is optional.

    checkpoint : callable
        ``checkpoint(W_host, cursor, results)`` every ``checkpoint_every`` shards
        within an epoch and after every epoch, but at most once every
        ``checkpoint_interval`` seconds (0: every time).  It must capture the state
        before returning (``W`` and ``results`` change afterwards) and may make it
        durable in the background.  The run's last commit is the caller's.
    callback : callable
        Called after each evaluated epoch with a dict (epoch, time, and per-model
        primal, dual, rel_gap lists, ``weights(j)``: the current ``(coef,
        intercept)`` of the j-th active model, during the call only:
        :class:`~streamwww.engine.callback.CallbackWeights`); a truthy return value stops training.
    progress : callable
        ``progress(epoch, shards_done, n_shards, rows)`` after each group (1-based epoch).
    interrupted : Stop
        Set by the signal handler (Ctrl-C, SIGTERM: :mod:`streamwww.engine.interrupt`):
        the driver stops at the next group, even when the signal's own exception was
        swallowed by a library callback it happened to interrupt.  With a checkpoint
        hook it first commits the state there (whatever ``checkpoint_interval`` says),
        or the nearest one before it that resumes bitwise, unless the last commit holds
        it; then it raises :class:`~streamwww.engine.interrupt.Interrupted`.
    """

    checkpoint: Callable[[np.ndarray, Cursor, list[ModelResult]], None] | None = None
    checkpoint_every: int = 0
    checkpoint_interval: float = 0.0
    callback: Callable[[dict[str, Any]], Any] | None = None
    progress: Callable[[int, int, int, int], None] | None = None
    interrupted: Stop | None = None

    def __post_init__(self) -> None:
        self._last_commit = time.monotonic()
        self.kept: tuple[int, int] | None = None  # (epoch, pos) of the last commit, or of the state resumed

    def commit_due(self) -> bool:
        """Is a checkpoint hook set, and has ``checkpoint_interval`` passed since the last commit?"""
        return self.checkpoint is not None and \
            time.monotonic() - self._last_commit >= self.checkpoint_interval

    def commit(self, W_host, cur: Cursor, results: list[ModelResult], W_sets=None) -> None:
        """Call the checkpoint hook (``W_sets``: the weights that chose a shrinking epoch's
        coordinates, for a mid-epoch commit; engine.shrink)."""
        if W_sets is None:
            self.checkpoint(W_host, cur, results)
        else:
            self.checkpoint(W_host, cur, results, W_sets=W_sets)
        self._last_commit = time.monotonic()
        self.kept = (cur.epoch, cur.pos)

    def stop_requested(self) -> bool:
        """Has a signal asked the run to stop?"""
        return self.interrupted is not None and self.interrupted.is_set()

    def stop(self, keep: Callable[[], tuple] | None = None) -> NoReturn:
        """Stop the run (a signal asked): with a checkpoint hook, commit ``keep()``'s
        ``(W_host, cursor, results, W_sets)`` first unless the last commit holds that
        position, shielded from further signals so the commit is written whole; then
        raise :class:`~streamwww.engine.interrupt.Interrupted`.  ``keep`` None: nothing
        new to keep (the run has not trained since it resumed)."""
        stop = self.interrupted
        if keep is not None and self.checkpoint is not None:
            stop.shielded = True
            W_host, cur, results, W_sets = keep()
            if (cur.epoch, cur.pos) != self.kept:
                self.commit(W_host, cur, results, W_sets=W_sets)
        raise Interrupted(signum=getattr(stop, "signum", None) or signal.SIGINT)

    def checkpoint_due(self, before: int, after: int, n_shards: int) -> bool:
        """Did the position cross a multiple of ``checkpoint_every`` (epoch ends excluded)?"""
        every = self.checkpoint_every
        return (every > 0 and after // every > before // every and after < n_shards
                and self.commit_due())


def late_allowed(n_models: int, splits, checkpoint_every: int) -> bool:
    """Whether a run may certify its epochs late: one model (a stop rewinds every model's
    ``beta`` together), no cross-validation splits, checkpoints at epoch ends only (a
    resumed run then starts where ``W`` is the one to certify)."""
    return int(n_models) == 1 and splits is None and int(checkpoint_every) == 0


def run_bcd(data, betas, cfg: SolverConfig, backend: Backend, *, feed=None, W0=None,
            cursor: Cursor | None = None, results: list[ModelResult] | None = None,
            hooks: Hooks | None = None, late: bool = False, W_sets=None) -> list[ModelResult]:
    """Train one model per ``cfg.Cs`` by exact dual BCD over ``data``'s shards.

    Parameters
    ----------
    data : object
        Shards: ``n_shards``, ``shard_rows``, ``n_features``, ``n_classes`` and
        ``block_of(shards, bias) -> Block``.
    betas : InMemoryBetas or DiskBetas
        Per-shard dual variables: ``get``, ``put_group``, ``sums``.
    cfg : SolverConfig
    backend : Backend
    feed : SyncFeed or PrefetchFeed, optional
        Delivers shard groups (and their ``beta``) in order; default: synchronous reads.
    W0, cursor, results : optional
        State to continue from (a resumed checkpoint); default: a fresh start.
    hooks : Hooks, optional
    late : bool, default=False
        Certify ``W_t`` from the rows of epoch ``t + 1`` (one read per epoch; see the
        module docstring); only where :func:`late_allowed` (``betas`` must have
        ``hold``/``rewind``).
    W_sets : ndarray, optional
        Resuming a mid-epoch checkpoint of a shrinking run: the weights whose
        objective pass chose the epoch's coordinates (:mod:`streamwww.engine.shrink`).

    Returns
    -------
    list of ModelResult
        One per ``C``, in order, with host weights ``W`` of shape (D, k); a model
        still running at ``max_iter`` has status 'max_iter'.
    """
    run = _Run(data, betas, cfg, backend, feed, W0, cursor, results, hooks, late, W_sets)
    run.resume()  # a checkpoint's state: its certificate still to come, its shrinking sets
    watch()  # (the training time leaves out Numba compiling kernels: engine.compiling)
    while run.cur.epoch < cfg.max_iter and run.active.size:
        rows, epoch_time = run.train_epoch()  # every group: the exact block steps of its rows
        if not run.decide_late():  # late: W_{t-1}'s certificate, summed during this epoch
            break  # it stopped there: back to W_{t-1}, its beta and its position
        run.evaluate(rows, epoch_time)  # W_t's objectives: now, or (late) during the next epoch
        run.commit_if_due()
    return run.finish()


class _Run:
    """One run of :func:`run_bcd`: its fixed parts and the state the loop moves on.

    The state is ``W``, the cursor, the models' results and which are ``active``; ``certs``
    says when ``W_t``'s objectives are summed (:class:`_AtEnd`, :class:`_Late`, and keeps
    a late certificate while it is summed); ``sets``, with shrinking, each shard's sets and
    the host copy of the
    ``W`` that chose the sets in force, for a commit within an epoch)."""

    def __init__(self, data, betas, cfg: SolverConfig, backend: Backend, feed, W0, cursor, results, hooks,
                 late: bool, W_sets):
        self.data, self.betas, self.cfg, self.backend = data, betas, cfg, backend
        self.hooks = hooks = hooks if hooks is not None else Hooks()
        self.feed = feed if feed is not None else SyncFeed(data, betas, cfg.bias)
        self.results = results = results if results is not None else [ModelResult(C=float(C)) for C in cfg.Cs]
        self.cur = cur = cursor if cursor is not None else Cursor()
        self.W = (backend.put_W(W0) if W0 is not None
                  else backend.allocate_W(len(cfg.Cs), cfg.n_weight_rows(data.n_features), int(data.n_classes)))
        self.Cs = np.asarray(cfg.Cs, dtype=np.float64)
        self.splits = model_splits(cfg.splits, len(cfg.Cs))
        self.schedule = Schedule(cfg, results)  # the epochs whose objectives are computed
        self.plan = EpochPlan(cfg, data.n_shards, self.schedule.evaluates)
        self.active = np.array([i for i, r in enumerate(results) if r.status == "running"], dtype=np.int64)
        self.wall0 = time.perf_counter() - cur.train_time
        if late and not late_allowed(len(cfg.Cs), cfg.splits, hooks.checkpoint_every):
            raise ValueError("late objectives need one model, no splits and checkpoints at epoch ends only")
        self.certs = _Late() if late else _AtEnd()  # when W_t's objectives are summed
        # shrinking: coordinates settled at W_t's objective pass sit out epoch t + 1 (engine.shrink);
        # late, the certificate of W_t makes each group's sets right before the group trains
        self.shrink = shrink = shrinking_applies(cfg, backend)
        # (late, and resumed within an epoch: the rest of that epoch takes its sets from W_sets)
        # (late with sticky sets: each certificate's sets also serve the epochs without objectives after it)
        sticky = cfg.sticky_sets
        near = NearSets(len(cfg.Cs), data.n_classes, data.shard_rows, spill=not getattr(betas, "in_memory", True)
                        ) if shrink and (not late or sticky or (cur.pos > 0 and W_sets is not None)) else None
        self.sets = _Sets(near, sticky, keep=near is not None and hooks.checkpoint is not None)
        self.W_sets = W_sets  # (resumed: the sets' W the checkpoint holds)
        hooks.kept = (cur.epoch, cur.pos)  # the state it starts from is committed already (or fresh)
        if shrink:
            logger.info("shrinking: settled coordinates of beta sit out the epoch after each objective pass")

    def resume(self) -> None:
        """Where the run starts from a checkpoint: the certificate of ``W_{epoch}`` if it is
        still to come, else the shrinking sets in force, made again."""
        cfg, cur, active, W_sets = self.cfg, self.cur, self.active, self.W_sets
        due = self.schedule.due(cur.epoch, active) if active.size and cur.pos == 0 and 0 < cur.epoch else active[:0]
        at_evaluated_end = due.size > 0
        if at_evaluated_end and \
                all(not self.results[i].history or self.results[i].history[-1]["epoch"] < cur.epoch for i in due):
            # resumed where W_{epoch} is not certified yet (a late run's, or a cluster run's, checkpoint)
            self.certs.resume_uncertified(self, due)
        elif at_evaluated_end and self.shrink and cur.epoch < cfg.max_iter and W_sets is None:
            # resumed after a certified W_{epoch}: the sets its objective pass made, made again
            self.certs.resume_sets(self)
        elif active.size and self.sets.near is not None and W_sets is not None and (cur.pos > 0 or 0 < cur.epoch):
            # resumed within an epoch, or after an epoch without objectives (sticky sets): the
            # sets in force, made again from the W that made them
            _near_pass(self.data, cfg, self.backend, self.feed, self.backend.put_W(W_sets), active, self.sets.near,
                       self.hooks, then=self.plan.groups(cur.epoch, cur.pos))
            self.sets.made(lambda: W_sets)

    def train_epoch(self) -> tuple[int, float]:
        """The rest of the current epoch, group by group (a commit every ``checkpoint_every``
        shards where due; a signal stops the run at a group's end, keeping its work). Returns
        the rows trained and the epoch's training time."""
        cfg, cur, backend, betas, hooks, data = self.cfg, self.cur, self.backend, self.betas, self.hooks, self.data
        W, active, sets, certs = self.W, self.active, self.sets, self.certs
        pending = certs.pending
        t0, c0 = solver_clock(), compile_seconds()
        rows = 0
        certs.hold(betas)
        stream = self.feed.train_stream(self.plan.groups(cur.epoch, cur.pos),
                                        *self.plan.after_training(cur.epoch, certs.late))
        for group, block, beta, host_beta in _on_device(backend, stream):
            # (late, after an evaluated epoch, the certificate's pass makes the group's sets)
            train_group(backend, cfg, W, block, beta, active, cur.epoch, group[0], self.Cs, self.splits,
                        near=None if pending is not None else sets.take(group),
                        first_pass=None if pending is None else _certify_first(pending, group, block, host_beta,
                                                                               W, beta, self.Cs, sets))
            n_rows = block.n_rows
            # Drop the group's rows and hand its beta over before the loop asks for
            # the next group: the write then queues ahead of that load, and the
            # loader frees this beta before it decodes another (one beta less at the peak).
            block = None
            betas.put_group(list(zip(group, split_rows(backend.get_beta(beta), data.shard_rows[list(group)]))))
            beta = host_beta = None
            rows += n_rows
            before, cur.pos = cur.pos, cur.pos + len(group)
            if hooks.progress is not None:
                hooks.progress(cur.epoch + 1, cur.pos, data.n_shards, n_rows)
            if hooks.stop_requested():  # (a signal: the run stops here, keeping its work)
                cur.train_time += solver_clock() - t0
                hooks.stop(lambda: _kept_within_epoch(backend, betas, W, cur, self.results, pending, sets.W))
            if hooks.checkpoint_due(before, cur.pos, data.n_shards):
                cur.train_time += solver_clock() - t0  # the commit's capture is not training
                hooks.commit(backend.to_host(W), cur, self.results, W_sets=sets.W)
                t0 = solver_clock()
        epoch_time = solver_clock() - t0 - (pending.seconds if pending is not None else 0.0)
        cur.train_time += epoch_time
        compiled = compile_seconds() - c0
        if compiled > 0:
            logger.info("compiling kernels: %.3fs of epoch %d, not counted in its time", compiled, cur.epoch)
        cur.epoch, cur.pos = cur.epoch + 1, 0
        for i in active:
            self.results[i].n_iter = cur.epoch
        return rows, epoch_time

    def decide_late(self) -> bool:
        """The decision on a certificate summed during the epoch just trained (late
        certificates); False where it stops the run (``W``, ``beta`` and the cursor are then
        back at its epoch)."""
        return self.certs.decide(self)

    def evaluate(self, rows: int, epoch_time: float) -> None:
        """The objectives of the models due at the epoch's end: a pass over every row now,
        or (late certificates) summed from the next epoch's rows."""
        due = self.schedule.due(self.cur.epoch, self.active)  # (the adaptive schedule: each model at its own epochs)
        if due.size:
            self.certs.certify(self, due, rows, epoch_time)
        else:
            self.sets.without_objectives()

    def evaluate_now(self, due: np.ndarray, rows: int, epoch_time: float, resumed: bool = False) -> None:
        """The objectives of the models ``due`` by a pass over every row (with the shrinking
        sets of the next epoch); ``resumed``: of the ``W`` a checkpoint left uncertified."""
        cfg, cur, backend, results, W, active = self.cfg, self.cur, self.backend, self.results, self.W, self.active
        partial = due.size < active.size
        sets = self.sets
        if resumed and partial and self.W_sets is not None and sets.near is not None:
            # (a stop during a partial objective pass: the other models' sets, made again first)
            _near_pass(self.data, cfg, backend, self.feed, backend.put_W(self.W_sets), np.setdiff1d(active, due),
                       sets.near, self.hooks, then=self.plan.next_groups(cur.epoch))
            sets.made(lambda: np.array(self.W_sets))  # (the models not scored keep theirs)
        # a stop during the pass keeps the epoch's end before it (W_{epoch} not certified:
        # the resumed run certifies it), with the W that made the sets of the models not
        # scored (resumed: nothing new to keep)
        left = _evaluate(self.data, self.betas, cfg, backend, self.feed, W, due, results, cur, self.hooks,
                         wall=time.perf_counter() - self.wall0, rows=rows, epoch_time=epoch_time,
                         then=self.plan.next_groups(cur.epoch), near=sets.near, partial=partial,
                         keep=None if resumed else
                         lambda: (backend.to_host(W), cur, results, sets.W if partial else None))
        self.active = active = _running(results, active)
        sets.scored(lambda: backend.to_host(W), left, partial, bool(active.size))

    def make_sets(self) -> None:
        """The shrinking sets of the current ``W`` alone (resumed after its objective pass)."""
        _near_pass(self.data, self.cfg, self.backend, self.feed, self.W, self.active, self.sets.near, self.hooks,
                   then=self.plan.next_groups(self.cur.epoch))
        self.sets.made(lambda: self.backend.to_host(self.W))  # (to_host copies)

    def commit_if_due(self) -> None:
        """A commit at the epoch's end where ``checkpoint_interval`` has passed (the caller
        commits the run's end)."""
        cur, active = self.cur, self.active
        if active.size and cur.epoch < self.cfg.max_iter and self.hooks.commit_due():
            # after an epoch without objectives, the W whose sets the next epoch uses
            self.hooks.commit(self.backend.to_host(self.W), cur, self.results,
                              W_sets=None if self.schedule.due(cur.epoch, active).size == active.size
                              else self.sets.W)

    def finish(self) -> list[ModelResult]:
        """Every model's host weights and final status."""
        self.sets.close()
        Wh = self.backend.to_host(self.W)
        for i, res in enumerate(self.results):
            res.W = Wh[i]
            if res.status == "running":
                res.status = "max_iter"
        return self.results


class _AtEnd:
    """``W_t``'s objectives by a pass over every row at the end of epoch ``t`` (the default:
    several models, cross-validation, commits within an epoch)."""

    late = False
    pending = None  # (no certificate is summed while an epoch trains)

    def hold(self, betas) -> None:
        """Nothing to return to: a decision comes before the next epoch trains."""

    def decide(self, run: _Run) -> bool:
        """Decided at the epoch's end already."""
        return True

    def certify(self, run: _Run, due: np.ndarray, rows: int, epoch_time: float) -> None:
        run.evaluate_now(due, rows, epoch_time)

    def resume_uncertified(self, run: _Run, due: np.ndarray) -> None:
        run.evaluate_now(due, 0, 0.0, resumed=True)

    def resume_sets(self, run: _Run) -> None:
        run.make_sets()


class _Late:
    """``W_t``'s objectives summed from the rows epoch ``t + 1`` loads, beside its first pass
    (one model: the module docstring). The decision comes one epoch late; a model that stops
    goes back to the certified ``W_t`` and its ``beta`` (held at the epoch's start).

    ``pending``: the certificate being summed; ``spare``: the ``W`` buffer of the one done
    with, for the next."""

    late = True

    def __init__(self):
        self.pending: _Certificate | None = None
        self.spare = None

    def hold(self, betas) -> None:
        betas.hold()  # W_{epoch}'s beta: a stop decided after this epoch returns to it

    def start(self, run: _Run, rows: int, epoch_time: float, wall: float = 0.0, sets_only: bool = False) -> None:
        """The certificate of the current ``W``, summed while the next epoch trains."""
        self.pending = _Certificate(run.backend, run.W, run.cur, run.data, run.cfg, run.active, rows=rows,
                                    epoch_time=epoch_time, wall=wall, shrink=run.shrink, sets_only=sets_only,
                                    spare=self.spare)
        self.spare = None  # (taken by the new certificate)

    def decide(self, run: _Run) -> bool:
        pending, cur, results = self.pending, run.cur, run.results
        if pending is not None and not pending.sets_only:  # the certificate of the epoch before, now complete
            run.active = _decide(run.cfg, run.backend, pending.W, pending.hinge(), pending.beta_sum(),
                                 pending.active, results, pending.cursor, run.hooks, wall=pending.wall,
                                 rows=pending.rows, epoch_time=pending.epoch_time,
                                 n_features=run.data.n_features)
            if not run.active.size:  # it stops there: back to W_t, its beta and its position
                run.W = pending.W
                run.betas.rewind()
                cur.epoch, cur.train_time = pending.cursor.epoch, pending.cursor.train_time
                for i in pending.active:
                    results[i].n_iter = cur.epoch
                return False
            self.spare = pending.W
        # (after the decision: the adaptive schedule's next epoch depends on it)
        if pending is not None and not run.schedule.evaluates(cur.epoch):
            run.sets.made(lambda: run.backend.to_host(pending.W))  # its sets serve the epochs until the next one
        self.pending = None
        return True

    def certify(self, run: _Run, due: np.ndarray, rows: int, epoch_time: float) -> None:
        if run.cur.epoch < run.cfg.max_iter:
            self.start(run, rows, epoch_time, wall=time.perf_counter() - run.wall0)
        else:  # (the last epoch: no next one to sum it)
            run.evaluate_now(due, rows, epoch_time)

    def resume_uncertified(self, run: _Run, due: np.ndarray) -> None:
        if run.cur.epoch < run.cfg.max_iter:
            self.start(run, 0, 0.0)
        else:
            run.evaluate_now(due, 0, 0.0, resumed=True)

    def resume_sets(self, run: _Run) -> None:
        self.start(run, 0, 0.0, sets_only=True)


def _certify_first(pending, group, block, host_beta, W, beta, Cs, sets: _Sets):
    """The group's first pass with ``W_t``'s objectives (and the group's sets, which sticky
    sets keep for the epochs without objectives after it)."""
    def first_pass(order) -> dict:
        shrunk = pending.certify_pass(group, block, host_beta, W, beta, Cs, order)
        if "near" in shrunk:
            sets.certified(group, shrunk["near"])
        return shrunk
    return first_pass


class _Sets:
    """Shrinking's sets (:mod:`streamwww.engine.shrink`): each shard's coordinates left out
    of the epochs after an objective pass (``near``; None: no shrinking, and every method
    does nothing), and ``W``, the host copy of the weights that chose the sets in force,
    which a commit within an epoch, or after one without objectives (sticky sets), holds
    (kept only where a checkpoint hook may commit: ``keep``)."""

    def __init__(self, near: NearSets | None, sticky: bool, keep: bool):
        self.near, self.sticky, self.keep = near, sticky, keep
        self.W = None

    def take(self, group):
        """The sets the group trains with (None: every coordinate)."""
        return None if self.near is None else self.near.take(group, keep=self.sticky)

    def certified(self, group, near) -> None:
        """A late certificate made the group's sets: sticky sets keep them for the epochs
        without objectives after it."""
        if self.sticky and self.near is not None:
            self.near.keep(group, near)

    def made(self, W_host: Callable[[], np.ndarray]) -> None:
        """The sets in force are those of ``W_host()`` (called only where it is kept)."""
        if self.keep:
            self.W = W_host()

    def scored(self, W_host: Callable[[], np.ndarray], left: np.ndarray, partial: bool, running: bool) -> None:
        """An objective pass made the sets of the models ``left`` (``partial``: the others
        keep theirs); none kept once no model runs."""
        if self.keep and running:
            Wh = W_host()
            if not partial or self.W is None:
                self.W = Wh
            else:  # (a partial pass follows a full one, which kept W)
                self.W[left] = Wh[left]
        else:
            self.W = None

    def without_objectives(self) -> None:
        """An epoch ended without objectives: the next one passes over every coordinate,
        unless the sets are sticky."""
        if not self.sticky:
            self.W = None

    def close(self) -> None:
        if self.near is not None:
            self.near.close()


def _kept_within_epoch(backend: Backend, betas, W, cur: Cursor, results: list[ModelResult], pending,
                       sets_W) -> tuple:
    """What a stop at a group boundary keeps: ``(W_host, cursor, results, W_sets)``.

    The state there (with the W that chose the shrinking sets in force), except while
    a late certificate of ``W_t`` is being summed: its part-sums die with the process,
    so the state kept is the epoch's start (``W_t``, ``beta`` rewound to the versions
    held then, the certificate's cursor), the one an epoch-end commit of a late run
    holds; the resumed run certifies ``W_t`` with its first pass."""
    if pending is not None:
        betas.rewind()
        return backend.to_host(pending.W), pending.cursor, results, None
    return backend.to_host(W), cur, results, sets_W


def _running(results: list[ModelResult], models: np.ndarray) -> np.ndarray:
    """The models among ``models`` still running (an objective pass may stop some)."""
    return np.array([i for i in models if results[i].status == "running"], dtype=np.int64)


def _on_device(backend: Backend, stream):
    """The feed's ``(group, block, beta)`` items, made resident on the backend's device, with
    the host ``beta`` (the CPU backend trains that ``beta`` in place: read it first)."""
    for group, block, beta in stream:
        yield group, backend.put_block(block), backend.put_beta(beta), beta
        block = beta = None  # hold no group while the feed loads the next one


class _Certificate:
    """The objectives of ``W_t``, summed shard by shard from the rows epoch ``t + 1`` loads
    against a copy of ``W_t`` (by ``certify_pass``, with each group's first training pass);
    added in storage order at the end, as :func:`_evaluate` adds them.  With ``shrink`` the
    same sweep makes each group's sets; ``sets_only``: for the sets alone (``W_t`` was
    certified before a resume)."""

    def __init__(self, backend: Backend, W, cur: Cursor, data, cfg: SolverConfig, active: np.ndarray, *,
                 rows: int, epoch_time: float, wall: float = 0.0, shrink: bool = False, sets_only: bool = False,
                 spare=None):
        self.backend, self.cfg, self.shard_rows = backend, cfg, data.shard_rows
        self.shrink, self.sets_only = shrink, sets_only
        self.shape = (len(cfg.Cs), int(data.n_classes))
        self.splits = model_splits(cfg.splits, len(cfg.Cs))
        # W_t, kept while W_{t+1} is trained; copied into the certificate before's W where
        # given (done with): no third copy of W at the peak, no fresh pages per certificate
        self.W = backend.copy_W(W, out=spare)
        self.cursor = Cursor(cur.epoch, 0, cur.train_time)
        self.active = active.copy()
        self.rows, self.epoch_time, self.wall = rows, epoch_time, wall
        self._hinge: list = [None] * data.n_shards
        self._beta: list = [None] * data.n_shards
        self.seconds = 0.0  # the time the certificate added, taken off the epoch's training time

    def certify_pass(self, group, block, host_beta, W, beta, Cs, order) -> dict:
        """The sums of ``group``'s shards (``host_beta`` before training) and the group's first
        pass over ``order``, with the group's sets when shrinking; returns the passes'
        keyword arguments for the sets (for ``inner_passes > 1``)."""
        t = solver_clock()
        rows = [int(self.shard_rows[s]) for s in group]
        for s, part in zip(group, split_rows(host_beta, rows)):  # (the CPU trains beta in place)
            self._beta[s] = part.sum(axis=(1, 2))[self.active]
        near = new_near(self.shape[0], block.n_rows, self.shape[1]) if self.shrink else None
        setup = solver_clock() - t
        c = compile_seconds()
        cfg = self.cfg
        h, waited = self.backend.certify_pass(self.W, W, block, beta, Cs, self.active, order, cfg.bias,
                                              cfg.solver_id, cfg.shark_eps, self.splits, block_rows=cfg.block_rows,
                                              loss=cfg.loss_id, pin=pins(cfg), **near_args(near, cfg))
        # (the wait includes the objective kernel's compilation, which solver_clock leaves out already)
        waited -= min(waited, compile_seconds() - c)
        t = solver_clock()
        r0 = 0
        for s, n in zip(group, rows):
            self._hinge[s] = ordered_row_sums(h, r0, r0 + n)
            r0 += n
        self.seconds += setup + waited + solver_clock() - t
        return pass_args(near, cfg)

    def hinge(self) -> np.ndarray:
        return _in_order(self._hinge, self.active.shape[0])

    def beta_sum(self) -> np.ndarray:
        return _in_order(self._beta, self.active.shape[0])


def _in_order(parts, n: int) -> np.ndarray:
    total = np.zeros(n)
    for p in parts:
        total += p
    return total


def _evaluate(data, betas, cfg: SolverConfig, backend: Backend, feed, W, active, results, cur: Cursor,
              hooks: Hooks, *, wall: float, rows: int, epoch_time: float, then=(),
              near: NearSets | None = None, partial: bool = False, keep=None) -> np.ndarray:
    """Primal, dual and gap of the models ``active`` (one streaming pass); those still
    running after it.  With ``near``, the pass also makes their shrinking sets for the
    next epoch (``partial``: other models keep theirs).  A signal stops the pass after a
    shard (:meth:`Hooks.stop`, keeping ``keep()``'s state)."""
    hinge = np.zeros(active.shape[0])
    beta_sum = np.zeros(active.shape[0])
    splits = model_splits(cfg.splits, len(cfg.Cs))
    for (s,), block in feed.eval_stream(then):
        hinge += backend.hinge_sums(W, backend.put_block(block), cfg.bias, active, splits, loss=cfg.loss_id,
                                    **_near_args(near, s, cfg, partial))
        if near is not None:
            near.filled(s)
        beta_sum += betas.sums(s, active)
        if hooks.stop_requested():
            hooks.stop(keep)
    return _decide(cfg, backend, W, hinge, beta_sum, active, results, cur, hooks, wall=wall, rows=rows,
                   epoch_time=epoch_time, n_features=data.n_features)


def _near_args(near: NearSets | None, shard: int, cfg: SolverConfig, partial: bool = False) -> dict:
    """``hinge_sums``'s keyword arguments that fill ``shard``'s shrinking set (none without)."""
    return near_args(None if near is None else near.buffer(shard, keep=partial), cfg)


def _near_pass(data, cfg: SolverConfig, backend: Backend, feed, W, active, near: NearSets, hooks: Hooks,
               then=()) -> None:
    """The shrinking sets of ``W`` alone (a resumed run's; the objective pass that made them
    ran before the checkpoint): the objective pass's kernel, its sums unused.  A signal
    stops it after a shard (nothing new to keep)."""
    splits = model_splits(cfg.splits, len(cfg.Cs))
    for (s,), block in feed.eval_stream(then):
        backend.hinge_sums(W, backend.put_block(block), cfg.bias, active, splits, loss=cfg.loss_id,
                           **_near_args(near, s, cfg))
        near.filled(s)
        if hooks.stop_requested():
            hooks.stop()


def _decide(cfg: SolverConfig, backend: Backend, W, hinge, beta_sum, active, results, cur: Cursor, hooks: Hooks,
            *, wall: float, rows: int, epoch_time: float, n_features: int) -> np.ndarray:
    """:func:`~streamwww.engine.decision.decide` at epoch ``cur.epoch``; the models still
    active (none where the callback stopped the run: every running model stops)."""
    decision = decide(cfg, results, active, wsq=backend.sq_frobenius(W)[active], hinge=hinge, beta_sum=beta_sum,
                      epoch=cur.epoch, time=cur.train_time, wall=wall,
                      rows_per_s=rows / epoch_time if epoch_time > 0 else float("inf"),
                      callback=hooks.callback, W=W, n_features=n_features, to_host=backend.to_host)
    return decision.running(active)
