"""Convergence plots: the relative duality gap against epochs and against solver time.

:func:`plot_gaps` draws gap histories it is given (plain lists; reading them
from a checkpoint or a model file is :mod:`streamwww.cli.runinfo`'s work, so this
module imports nothing of streamwww).  matplotlib is optional (``pip install
"streamwww[plot]"``) and imported only when a plot is drawn; without it
:class:`MissingMatplotlib` says how to install it.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

__all__ = ["plot_gaps", "MissingMatplotlib", "INSTALL_HINT"]

INSTALL_HINT = 'pip install "streamwww[plot]"'


class MissingMatplotlib(ImportError):
    """matplotlib, which plotting needs, is not installed."""


def plot_gaps(series: list[dict[str, Any]], output, title: str | None = None) -> Path:
    """Draw relative duality gap vs epochs and vs time (two panels, log y), one line per model.

    Parameters
    ----------
    series : list of dict
        One per model: ``label`` (str), and equally long lists ``epoch``,
        ``time`` (seconds) and ``rel_gap``.  Points whose gap is not a positive
        finite number are left out (a log axis cannot show them).
    output : str or Path
        Image file to write; its suffix picks the format (``.png``, ``.pdf``, ``.svg``, ...).
    title : str, optional
        Figure title.

    Returns
    -------
    Path
        ``output``.

    Raises
    ------
    MissingMatplotlib
        If matplotlib is not installed.
    ValueError
        If no series has a point to draw.
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.ticker import MaxNLocator
    except ImportError as exc:
        raise MissingMatplotlib(f"plotting needs matplotlib, which is not installed ({exc}); "
                                f"install it with: {INSTALL_HINT}") from None
    output = Path(output)
    # A Figure on its own Agg canvas: no pyplot, no global backend switch, no display needed.
    fig = Figure(figsize=(11, 4.2), layout="constrained")
    FigureCanvasAgg(fig)
    ax_epoch, ax_time = fig.subplots(1, 2, sharey=True)
    drawn = 0
    for s in series:
        pts = [(e, t, g) for e, t, g in zip(s["epoch"], s["time"], s["rel_gap"])
               if g is not None and math.isfinite(g) and g > 0]
        if not pts:
            continue
        epochs, times, gaps = zip(*pts)
        line, = ax_epoch.plot(epochs, gaps, marker="." if len(pts) < 40 else None, label=s["label"])
        ax_time.plot(times, gaps, marker="." if len(pts) < 40 else None, color=line.get_color(), label=s["label"])
        drawn += 1
    if not drawn:
        raise ValueError(f"nothing to plot: no evaluated epoch with a positive relative duality gap "
                         f"(for {output})")
    ax_epoch.set_yscale("log")
    ax_epoch.set_xlabel("epoch")
    ax_epoch.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax_epoch.set_ylabel("relative duality gap")
    ax_time.set_xlabel("solver time (s)")
    for ax in (ax_epoch, ax_time):
        ax.grid(True, which="both", alpha=0.3)
    if drawn <= 12:
        ax_time.legend(fontsize="small")
    if title:
        fig.suptitle(title)
    fig.savefig(output, dpi=110)
    return output
