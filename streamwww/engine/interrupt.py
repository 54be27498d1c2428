"""Ctrl-C and SIGTERM during a fit: the work done is kept, then the fit stops.

:class:`CtrlC` puts one handler on SIGINT and SIGTERM for the length of a fit (each
only where it is at its default).  The handler sets a :class:`Stop`, an event the
driver checks after every group and every shard of an objective pass:

* While the driver trains with a checkpoint directory (:attr:`Stop.keeps`), the
  first signal only sets the event.  The driver stops at the next group boundary,
  commits the state there whatever ``checkpoint_interval`` says (or, where a commit
  there could not resume bitwise, the state it can: :func:`streamwww.engine.driver.run_bcd`),
  and raises :class:`Interrupted`.
* Elsewhere (setting up, no checkpoint directory, a second signal before that
  commit) the handler raises :class:`Interrupted` at once: the last commit stands.
* From the stop's commit on, or once the handler has raised (:attr:`Stop.shielded`),
  signals are only recorded: the fit unwinds, and the commit in progress is drained,
  never cut.

Python raises the handler's exception in whatever the main thread runs at that
instant, which may be a library callback that swallows it (a ``distributed`` one
did, once in twelve tries); the event makes the driver stop at the next group anyway.
"""

from __future__ import annotations

import signal
import threading

__all__ = ["CtrlC", "Interrupted", "Stop"]

#: the signals a fit stops on, keeping its work
SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """A fit stopped by a signal (a ``KeyboardInterrupt``, also for SIGTERM).

    Attributes
    ----------
    signum : int
        The first signal received (``signal.SIGINT`` or ``signal.SIGTERM``).
    checkpoint_dir : str or None
        The run's checkpoint directory (a path or URL), if it has one.
    kept : dict or None
        The cursor of the checkpoint the work is kept in (``epoch``: epochs done,
        ``pos``: shards of the next epoch done), ``finished`` where the run had ended;
        None when nothing is kept.
    n_shards : int or None
        The data's shard count.
    """

    def __init__(self, *args, signum: int = signal.SIGINT, checkpoint_dir: str | None = None,
                 kept: dict | None = None, n_shards: int | None = None):
        super().__init__(*args)
        self.signum = int(signum)
        self.checkpoint_dir = checkpoint_dir
        self.kept = kept
        self.n_shards = n_shards

    @property
    def exit_status(self) -> int:
        """The command line's exit status: 128 plus the signal's number (130, 143)."""
        return 128 + self.signum

    def where(self, name: str | None = None) -> str | None:
        """Where the work is kept, as a clause (``at epoch 3 (shard 2 of 12); the work is kept
        in DIR``; ``name``: the directory's name as the user gave it), or None when nothing is."""
        if self.kept is None or self.checkpoint_dir is None:
            return None
        name = name or self.checkpoint_dir
        if self.kept.get("finished"):
            return f"after the run's last epoch; the work is kept in {name}"
        shards = "" if self.n_shards is None else f" of {self.n_shards}"
        # (the numbers of the resume's own line: the epoch it continues, 1-based, and the shards done in it)
        return (f"at epoch {int(self.kept['epoch']) + 1} (shard {int(self.kept['pos'])}{shards}); "
                f"the work is kept in {name}")


class Stop(threading.Event):
    """A fit's stop request: set by :class:`CtrlC`'s handler, checked by the driver.

    Attributes
    ----------
    signum : int or None
        The first signal received.
    keeps : bool
        Set by the fit while the driver stops at the next group boundary and keeps the
        work (a checkpoint directory): the first signal then only sets the event.
    shielded : bool
        Set by the driver from the capture of the stop's commit on, and by the handler once
        it has raised: signals are only recorded, so the commit in progress is written whole.
    """

    def __init__(self):
        super().__init__()
        self.signum: int | None = None
        self.keeps = False
        self.shielded = False


class CtrlC:
    """SIGINT and SIGTERM during a fit set a :class:`Stop` (see the module docstring).

    Each handler is installed only on the main thread and only where the signal is at
    its default (SIGINT's ``default_int_handler``, SIGTERM's ``SIG_DFL``): a process that
    ignores a signal (``nohup``) or handles it itself keeps its way.  The previous
    handlers are restored on exit.
    """

    def __enter__(self) -> Stop:
        self.stop = Stop()
        self.old: dict[int, object] = {}
        if threading.current_thread() is threading.main_thread():
            defaults = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}
            for sig in SIGNALS:
                if signal.getsignal(sig) is defaults[sig]:
                    self.old[sig] = signal.signal(sig, self._handler)
        return self.stop

    def _handler(self, signum, frame) -> None:
        stop = self.stop
        again = stop.is_set()
        if stop.signum is None:
            stop.signum = signum
        stop.set()
        if stop.shielded or (stop.keeps and not again):
            return  # the driver stops at the next group (and keeps the work), or the fit is unwinding
        stop.shielded = True  # the fit unwinds from here: the commit in progress, if any, is drained whole
        raise Interrupted(signum=stop.signum)

    def __exit__(self, *exc) -> None:
        for sig, old in self.old.items():
            signal.signal(sig, old)
