"""streamwww.ProgressBar: one bar for a whole run (epochs, gap against target, time, rows/s),
fed the calls a run makes, drawn into a text stream."""

from __future__ import annotations

import io
import re
import sys
import warnings

import numpy as np
import pytest

import streamwww as sw
from streamwww.progress import MIN_RATE_SECONDS, ProgressBar

from .conftest import make_classification


class Clock:
    """A clock the test moves."""

    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _bar(**kw):
    out = io.StringIO()
    bar = ProgressBar(file=out, **kw)
    bar._clock = clock = Clock()
    return bar, out, clock


def _frames(out: io.StringIO) -> list[str]:
    """Every state the bar was drawn in (tqdm redraws the line after a carriage return)."""
    return [f.strip() for f in re.split(r"[\r\n]", out.getvalue()) if f.strip()]


def _info(epoch, models, gaps, converged=None, rows_per_s=1e5, **extra):
    return {"epoch": epoch, "time": 0.5 * epoch, "models": models, "primal": [2.0] * len(models),
            "dual": [1.0] * len(models), "rel_gap": gaps, "rows_per_s": rows_per_s,
            **({"converged": converged} if converged is not None else {}), **extra}


def _rates(frames) -> list[float]:
    return [float(m.replace(",", "")) for f in frames for m in re.findall(r"([\d,.]+) rows/s", f)]


def test_the_first_group_shows_its_place_and_no_rate():
    """The first group's rows over the instant since the last call is no rate: none is shown
    until one is measured over MIN_RATE_SECONDS, and then it is the rows over that time."""
    bar, out, clock = _bar(max_iter=20, tol=1e-3)
    bar.progress(1, 2, 10, 5000)  # (the old bar: 5000 rows / 1e-9 s)
    clock.now += 0.2
    bar.progress(1, 4, 10, 5000)
    frames = _frames(out)
    assert frames and "rows/s" not in out.getvalue() and "inf" not in out.getvalue()
    assert "0.4/20 epochs" in frames[-1] and "gap ? → 1e-03" in frames[-1]
    clock.now += MIN_RATE_SECONDS
    bar.progress(1, 6, 10, 5000)
    # 10,000 rows since the first group ended, over 1.2 s
    assert _rates(_frames(out)) == [pytest.approx(10_000 / (MIN_RATE_SECONDS + 0.2), abs=1)]
    assert "0.6/20 epochs" in _frames(out)[-1]
    bar.close()


def test_a_resumed_run_starts_mid_epoch_with_its_gaps_and_no_inf():
    bar, out, clock = _bar(max_iter=50, tol=1e-3, labels=["C=0.1", "C=1"], lines=True)
    bar.restore({0: 0.2, 1: 5e-4}, converged=[1])  # what the checkpoint holds
    bar.progress(7, 3, 4, 300)  # the first group after the resume: epoch 7, 3 of 4 shards
    text = out.getvalue()
    assert "6.8/50 epochs" in _frames(out)[-1]
    assert "gap 2.0e-01 → 1e-03" in _frames(out)[-1] and "1 of 2 converged" in _frames(out)[-1]
    assert "rows/s" not in text  # nothing trained yet that a rate could be measured over
    # an epoch that trained no rows reports rows/s = inf: the line leaves it out
    bar.callback(_info(7, [0], [0.1], converged=[False], rows_per_s=float("inf")))
    text = out.getvalue()
    assert "inf" not in text and "nan" not in text
    assert "epoch    7  C=0.1  primal 2  dual 1  rel. gap 1.000e-01  solver time 3.50s\n" in text
    assert "7.0/50 epochs" in _frames(out)[-1] and "gap 1.0e-01 → 1e-03" in _frames(out)[-1]
    bar.close()


def test_several_models_show_the_slowest_gap_and_how_many_converged():
    bar, out, clock = _bar(max_iter=100, tol=1e-3, labels=["C=0.01", "C=0.1", "C=1"])
    bar.progress(1, 1, 1, 100)
    bar.callback(_info(1, [0, 1, 2], [0.5, 0.03, 0.9], converged=[False, False, False]))
    assert "gap 9.0e-01 → 1e-03, 0 of 3 converged" in _frames(out)[-1]
    bar.progress(2, 1, 1, 100)
    bar.callback(_info(2, [0, 1, 2], [4e-4, 0.02, 0.3], converged=[True, False, False]))
    assert "2.0/100 epochs" in _frames(out)[-1] and "gap 3.0e-01 → 1e-03, 1 of 3 converged" in _frames(out)[-1]
    bar.callback(_info(5, [1, 2], [9e-4, 8e-4], converged=[True, True]))
    assert "3 of 3 converged" in _frames(out)[-1] and "gap" not in _frames(out)[-1]
    # the lines are not asked for: none
    assert "primal" not in out.getvalue()
    bar.close()


def test_gap_decay_stops_count_as_converged_and_a_converged_model_alone_says_so():
    bar, out, _ = _bar(max_iter=10, tol=1e-3)
    bar.callback(_info(1, [0], [0.05], converged=[True]))  # (stopped by gap_decay, above tol)
    assert _frames(out)[-1].endswith("converged") and "gap" not in _frames(out)[-1]
    bar.close()


def test_the_target_and_the_limit_come_from_the_run_when_not_given():
    bar, out, _ = _bar()
    bar.progress(1, 1, 2, 10)
    assert "0.5/? epochs" in _frames(out)[-1] and "gap" not in _frames(out)[-1]
    bar.callback(_info(1, [0], [0.25], converged=[False], tol=2.5e-4, max_iter=40))
    assert "1.0/40 epochs" in _frames(out)[-1] and "gap 2.5e-01 → 2.5e-04" in _frames(out)[-1]
    assert bar._tqdm.total == 40 and bar._tqdm.n == 1.0


def test_it_is_both_hooks_and_says_how_it_is_called():
    bar, out, _ = _bar(max_iter=4, tol=1e-2, bar=False, lines=True)
    assert bar(1, 1, 1, 10) is None
    assert bar(_info(1, [0], [0.5])) is False  # a callback that never stops training
    assert "epoch    1  model 0  primal 2" in out.getvalue()
    assert out.getvalue().count("\n") == 1  # bar=False: the lines alone
    with pytest.raises(TypeError, match="callback.*progress"):
        bar(1, 2)


def test_closed_it_clears_its_line_and_draws_nothing_more():
    bar, out, _ = _bar(max_iter=4, tol=1e-2, leave=False)
    with bar:
        bar.progress(1, 1, 2, 10)
    closed = out.getvalue()
    assert closed.endswith("\r")  # (tqdm clears the line: what is printed next starts there)
    bar.progress(1, 2, 2, 10)
    bar.callback(_info(1, [0], [0.5]))
    assert out.getvalue() == closed


def test_it_draws_a_real_run(rng):
    """Passed to train() as both hooks: one bar to max_iter, the gap against tol, no inf."""
    X, y = make_classification(rng, n=200, d=5, k=3)
    out = io.StringIO()
    with sw.ProgressBar(file=out, lines=True, labels=["C=0.5", "C=2"]) as bar, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (not converged at max_iter: wanted here)
        models = sw.train((X, y), C=[0.5, 2.0], max_iter=3, tol=1e-12, random_state=0, callback=bar,
                          progress=bar)
    text = out.getvalue()
    assert models[0].n_iter_ == 3 and "inf" not in text
    last = _frames(out)[-1]
    assert "3.0/3 epochs" in last and "→ 1e-12" in last and "0 of 2 converged" in last
    assert text.count("C=0.5  primal") == len(models[0].history_)


def test_the_command_line_closes_its_bar_before_the_interrupt_message(tmp_path, monkeypatch):
    """A Ctrl-C during training: the bar's line is cleared before 'interrupted' is printed."""
    from streamwww.cli import main
    from streamwww.io import write_store

    X, y = make_classification(np.random.default_rng(0), n=300, d=5, k=3, dtype=np.float32)
    write_store(tmp_path / "s.zarr", X, y, shard_rows=100)

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    calls = []
    progress = ProgressBar.progress

    def interrupted(self, *args):
        progress(self, *args)
        calls.append(self)
        if len(calls) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(ProgressBar, "progress", interrupted)
    rc = main(["train", str(tmp_path / "s.zarr"), "--checkpoint-dir", str(tmp_path / "ck"), "--model-out",
               str(tmp_path / "m.npz"), "--max-iter", "5", "--mix-shards", "1"])
    text = term.getvalue()
    assert rc == 130 and calls[0]._tqdm is None  # closed
    drawn, _, after = text.rpartition("streamwww train: interrupted")
    assert "epochs" in drawn and drawn.endswith(("\r", "\n")), repr(text[-300:])
    assert "epochs" not in after


def test_a_stream_without_the_arrow_gets_an_ascii_one():
    out = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    bar = ProgressBar(file=out, max_iter=3, tol=1e-3)
    assert "gap ? -> 1e-03" in bar.status()
    bar.close()


@pytest.mark.skipif(not sys.platform.startswith(("linux", "darwin")), reason="needs a POSIX pseudo-terminal")
def test_a_line_logged_during_a_run_goes_above_the_bar(tmp_path):
    """Under -vv a checkpoint's commit is logged while the bar is drawn on a terminal: the
    line starts a line of its own (the command line's handler writes through tqdm), rather
    than continuing the bar's."""
    import fcntl
    import os
    import pty
    import struct
    import subprocess
    import termios

    from streamwww.io import write_store

    X, y = make_classification(np.random.default_rng(0), n=2000, d=10, k=3, dtype=np.float32)
    write_store(tmp_path / "s.zarr", X, y, shard_rows=500)
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))  # (tqdm sizes the bar by it)
    proc = subprocess.Popen([sys.executable, "-m", "streamwww.cli", "train", str(tmp_path / "s.zarr"), "-vv",
                             "--checkpoint-dir", str(tmp_path / "ck"), "--checkpoint-every", "1", "--max-iter", "3",
                             "--model-out", str(tmp_path / "m.npz")],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 1 << 16)
        except OSError:  # (EIO: the child closed the terminal)
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert proc.wait(timeout=300) == 0
    text = b"".join(chunks).decode("utf-8", "replace")
    assert "epochs" in text  # a bar was drawn
    commits = [m.start() for m in re.finditer("checkpoint step", text)]
    assert commits, text[-2000:]
    for at in commits:
        assert text[at - 1] in "\r\n", repr(text[max(0, at - 120):at + 40])
