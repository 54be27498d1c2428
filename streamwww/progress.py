"""A progress display of a whole training run: :class:`ProgressBar`, the command line's bar and the
Python API's opt-in one.

The library only logs; a bar is drawn only where a user asks for one: the command line on a
terminal, or a ``ProgressBar`` passed to :func:`streamwww.train` / :func:`streamwww.resume` as
both their ``callback`` and their ``progress``. One bar covers the run: the epochs done (with the
fraction of the current one) against ``max_iter``, the time so far, the latest relative duality
gap against ``tol`` (with several models, the slowest one's and how many have converged), and the
rows trained per second once measured over a meaningful interval. A line per evaluated model,
when asked for, is written above the bar (``tqdm.write``), which it leaves whole.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TextIO

__all__ = ["ProgressBar", "MIN_RATE_SECONDS"]

#: the least time between two redraws after groups (a terminal is not drawn faster than it is read)
REDRAW_SECONDS = 0.1

#: the least time the rows/s of the bar is measured over: the first group's rows over the
#: instant between two calls, or a resumed run's before anything trained, are no rate at all
MIN_RATE_SECONDS = 1.0


class ProgressBar:
    """One progress bar for a whole training run (and, optionally, a line per evaluation).

    Pass the same object as both hooks of :func:`streamwww.train` or :func:`streamwww.resume`:
    ``train(store, callback=bar, progress=bar)``. It draws with ``tqdm.auto``: a widget in
    Jupyter, a text bar on a terminal. Use it as a context manager (or call :meth:`close`), so
    that the bar is closed when training ends or fails::

        with streamwww.ProgressBar() as bar:
            models = streamwww.train("data.zarr", C=[0.1, 1.0], callback=bar, progress=bar)

    The bar shows ``epochs done/max_iter`` (the current epoch's fraction included), the time
    since the bar started, the latest relative duality gap and its target ``tol`` (``gap
    3.2e-02 → 1e-03``; with several models, the largest gap among those still running, and ``k
    of n converged``), and rows/s once measured over :data:`MIN_RATE_SECONDS` of training.

    Parameters
    ----------
    max_iter, tol : optional
        The run's epoch limit and target gap; by default those the run reports with its first
        evaluated epoch (until then the bar has no total).
    labels : sequence of str, optional
        Each model's name in the lines (``"C=0.1"``); its length is the number of models.
        Default: ``"model j"``, and as many models as the run has reported.
    lines : bool, default=False
        Also write one line per evaluated model (epoch, primal, dual, gap, solver time,
        rows/s) above the bar.
    bar : bool, default=True
        Draw the bar (False: the lines alone).
    leave : bool, default=True
        Keep the finished bar on screen when closed (False: clear its line).
    file : text stream, optional
        Where to draw and write (default ``sys.stderr``).

    Notes
    -----
    As a ``callback`` it never asks training to stop (it returns False).
    """

    def __init__(self, *, max_iter: int | None = None, tol: float | None = None,
                 labels: Sequence[str] | None = None, lines: bool = False, bar: bool = True,
                 leave: bool = True, file: TextIO | None = None):
        self.max_iter, self.tol = max_iter, tol
        self.labels = list(labels) if labels is not None else None
        self.lines, self.draw, self.leave = bool(lines), bool(bar), bool(leave)
        self.file = file
        self.epochs = 0.0  # epochs done, the current one's fraction included
        self.gaps: dict[int, float] = {}  # model -> its latest relative duality gap
        self.converged: set[int] = set()
        self._clock = time.perf_counter
        self._t0: float | None = None
        self._rate_from: float | None = None  # the clock at the end of the first group trained
        self._rows = 0  # rows trained since then
        self._tqdm = None
        self._drawn = -math.inf  # the clock at the last redraw
        self._closed = False

    # -- the two hooks -------------------------------------------------------------------------

    def __call__(self, *args) -> bool | None:
        """The ``callback`` (one dict) or the ``progress`` hook (four numbers) of a run."""
        if len(args) == 1 and isinstance(args[0], Mapping):
            return self.callback(args[0])
        if len(args) == 4:
            return self.progress(*args)
        raise TypeError("a ProgressBar is called as a run's callback(info) or progress(epoch, shards_done, "
                        f"n_shards, rows); got {len(args)} argument(s)")

    def progress(self, epoch: int, shards_done: int, n_shards: int, rows: int) -> None:
        """After each group: ``epoch`` (1-based) is ``shards_done`` of ``n_shards`` shards along,
        and the group trained ``rows`` rows."""
        now = self._start()
        if self._rate_from is None:  # (the first group: its time is the start-up's too)
            self._rate_from = now
        else:
            self._rows += int(rows)
        self.epochs = epoch - 1 + (shards_done / n_shards if n_shards else 1.0)
        self._redraw(force=False)

    def callback(self, info: Mapping[str, Any]) -> bool:
        """After each evaluated epoch: the gaps of the models evaluated then (and a line each)."""
        self._start()
        if self.max_iter is None and info.get("max_iter") is not None:
            self.max_iter = int(info["max_iter"])
        if self.tol is None and info.get("tol") is not None:
            self.tol = float(info["tol"])
        self.epochs = max(self.epochs, float(info["epoch"]))  # (a late certificate: an epoch back)
        flags = info.get("converged")
        for j, (m, R) in enumerate(zip(info["models"], info["rel_gap"])):
            m = int(m)
            self.gaps[m] = float(R)
            done = bool(flags[j]) if flags is not None else self.tol is not None and R <= self.tol
            (self.converged.add if done else self.converged.discard)(m)
        self._redraw(force=True)  # (before the lines: tqdm.write draws the bar again below them)
        if self.lines:
            for m, P, D, R in zip(info["models"], info["primal"], info["dual"], info["rel_gap"]):
                self._write(self.line(int(m), info["epoch"], P, D, R, info.get("time"), info.get("rows_per_s")))
        return False

    def restore(self, gaps: Mapping[int, float], converged: Iterable[int] = ()) -> None:
        """A resumed run's models as its checkpoint left them: their latest gaps, and those
        converged already (which the run evaluates no more)."""
        self.gaps.update({int(m): float(g) for m, g in gaps.items()})
        self.converged.update(int(m) for m in converged)

    # -- what is shown -------------------------------------------------------------------------

    def label(self, model: int) -> str:
        """A model's name in the lines."""
        return self.labels[model] if self.labels is not None and model < len(self.labels) else f"model {model}"

    def line(self, model: int, epoch: int, primal: float, dual: float, rel_gap: float,
             seconds: float | None = None, rows_per_s: float | None = None) -> str:
        """The line of one evaluated model."""
        text = (f"epoch {epoch:4d}  {self.label(model)}  primal {primal:.8g}  dual {dual:.8g}  "
                f"rel. gap {rel_gap:.3e}")
        if seconds is not None:
            text += f"  solver time {seconds:.2f}s"
        if _measured(rows_per_s):  # (none for an epoch that trained nothing, or a cluster's round)
            text += f"  {rows_per_s:,.0f} rows/s"
        return text

    @property
    def n_models(self) -> int:
        """The models of the run: the labels', or as many as have been reported."""
        seen = max(self.gaps, default=-1) + 1
        return max(len(self.labels), seen) if self.labels is not None else seen

    def rate(self) -> float | None:
        """Rows trained per second since the end of the first group, once that is at least
        :data:`MIN_RATE_SECONDS` ago; else None."""
        if self._rate_from is None or self._rows <= 0:
            return None
        seconds = self._clock() - self._rate_from
        return self._rows / seconds if seconds >= MIN_RATE_SECONDS else None

    def status(self) -> str:
        """The text beside the bar: epochs, time so far, gap against target, rows/s."""
        from tqdm.auto import tqdm

        parts = [f"{self.epochs:.1f}/{self.max_iter if self.max_iter is not None else '?'} epochs",
                 tqdm.format_interval(self._clock() - self._t0) if self._t0 is not None else "00:00"]
        running = [g for m, g in self.gaps.items() if m not in self.converged]
        target = f" {_arrow(self._stream())} {_short(self.tol)}" if self.tol is not None else ""
        n = self.n_models
        if running:
            parts.append(f"gap {max(running):.1e}{target}")
        elif not self.gaps and self.tol is not None:
            parts.append(f"gap ?{target}")
        if n > 1 and self.gaps:
            parts.append(f"{len(self.converged & set(range(n)))} of {n} converged")
        elif n == 1 and not running and self.converged:
            parts.append("converged")
        rate = self.rate()
        if rate is not None:
            parts.append(f"{rate:,.0f} rows/s")
        return ", ".join(parts)

    # -- the bar -------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the bar (its line cleared unless ``leave``); nothing is drawn afterwards."""
        if self._tqdm is not None and not self._closed:
            self._redraw(force=True)  # (the state of the last group, whose redraw may have waited)
        self._closed = True
        if self._tqdm is not None:
            self._tqdm.close()
            self._tqdm = None

    def __enter__(self) -> ProgressBar:
        self._start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _start(self) -> float:
        now = self._clock()
        if self._t0 is None:
            self._t0 = now
        return now

    def _stream(self) -> TextIO:
        return self.file if self.file is not None else sys.stderr

    def _write(self, text: str) -> None:
        from tqdm.auto import tqdm

        tqdm.write(text, file=self._stream())  # (above a bar drawn on the same stream)

    def _redraw(self, force: bool) -> None:
        if not self.draw or self._closed:
            return
        now = self._clock()
        if not force and self._tqdm is not None and now - self._drawn < REDRAW_SECONDS:
            return  # (called after every group: the status is made only for a redraw)
        from tqdm.auto import tqdm

        total = self.max_iter
        if self._tqdm is None:
            self._tqdm = tqdm(total=total, initial=min(self.epochs, total or self.epochs), desc=self.status(),
                              file=self._stream(), leave=self.leave, dynamic_ncols=True,
                              bar_format=_FORMAT if total is not None else "{desc}")
        elif total is not None and self._tqdm.total != total:  # (learned from the first evaluation)
            self._tqdm.bar_format = _FORMAT
            self._tqdm.reset(total=total)
        bar = self._tqdm
        bar.set_description_str(self.status(), refresh=False)
        if total is not None:
            bar.n = min(self.epochs, total)
        bar.refresh()
        self._drawn = now


_FORMAT = "{percentage:3.0f}%|{bar}| {desc}"


def _short(x: float) -> str:
    """``x`` in the fewest digits of e-notation that read back as ``x`` (``1e-03``, ``2.5e-04``)."""
    for digits in range(4):
        text = f"{x:.{digits}e}"
        if float(text) == x:
            return text
    return f"{x:.3e}"


def _arrow(stream) -> str:
    """``→``, or ``->`` on a stream whose encoding has no arrow (a terminal under ``LANG=C``)."""
    try:
        "→".encode(getattr(stream, "encoding", None) or "utf-8")
    except (UnicodeEncodeError, LookupError):
        return "->"
    return "→"


def _measured(rate) -> bool:
    return rate is not None and math.isfinite(rate) and rate > 0


class StageBars:
    """tqdm bars for the ``ProgressEvent`` s of ``convert`` and ``make-data``: one bar per
    stage (reading, writing shards, generating), the previous one closed."""

    _UNITS = {"read": ("reading", "B", True), "write": ("writing shards", " rows", False),
              "generate": ("generating", " rows", False)}

    def __init__(self):
        self._bar = None
        self._stage = None
        self._start = time.monotonic()

    def __call__(self, event) -> None:
        from tqdm import tqdm

        if event.stage != self._stage:
            self.close()
            desc, unit, scale = self._UNITS.get(event.stage, (event.stage, "", False))
            self._bar = tqdm(total=event.total, desc=desc, unit=unit, unit_scale=scale,
                             unit_divisor=1024 if scale else 1000, leave=True)
            self._stage = event.stage
            self._start = time.monotonic()
        self._bar.update(event.done - self._bar.n)
        if event.stage == "read":
            elapsed = max(time.monotonic() - self._start, 1e-9)
            self._bar.set_postfix(rows=event.rows, rows_s=f"{event.rows / elapsed:,.0f}",
                                  refresh=False)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
