"""Progress off a terminal: periodic plain log lines, silence for short work, nothing when not shown."""

from __future__ import annotations

import io

import numpy as np

from encmatch._util import progress as progress_mod
from encmatch._util.progress import LogLines


def test_log_lines_every_interval_and_a_closing_line():
    out = io.StringIO()
    with LogLines(total=4, desc="enroll", unit="vec", stream=out, interval=0) as bar:
        for _ in range(4):
            bar.update(1)
    lines = out.getvalue().splitlines()
    assert len(lines) == 5
    assert lines[0].startswith("enroll: 1/4 vec (25 %)") and "s left" in lines[0]
    assert lines[3].startswith("enroll: 4/4 vec (100 %)") and "left" not in lines[3]
    assert lines[4].startswith("enroll: done, 4 vec in ")
    assert "\r" not in out.getvalue()


def test_short_work_stays_silent():
    out = io.StringIO()
    items = list(LogLines(range(3), desc="q", stream=out, interval=3600))
    assert items == [0, 1, 2]
    assert out.getvalue() == ""


def test_scaled_units_and_unknown_total():
    out = io.StringIO()
    bar = LogLines(desc="upload", unit="B", unit_scale=True, stream=out, interval=0)
    bar.update(2_500_000)
    bar.close()
    assert out.getvalue().splitlines()[0].startswith("upload: 2.5 MB, ")


def test_off_a_terminal_progress_is_log_lines(monkeypatch, capsys):
    monkeypatch.setenv(progress_mod.INTERVAL_ENV, "0")
    bar = progress_mod.progress(range(2), desc="search", unit="query")
    assert isinstance(bar, LogLines)  # pytest's captured stderr is not a terminal
    assert list(bar) == [0, 1]
    err = capsys.readouterr().err
    assert "search: 2/2 query (100 %)" in err and "search: done" in err
    assert list(progress_mod.progress(range(2), desc="x", show=False)) == [0, 1]
    assert capsys.readouterr().err == ""


def test_interval_from_the_environment(monkeypatch):
    monkeypatch.setenv(progress_mod.INTERVAL_ENV, "2.5")
    assert progress_mod.interval_seconds() == 2.5
    for bad in ("soon", "-1"):
        monkeypatch.setenv(progress_mod.INTERVAL_ENV, bad)
        assert progress_mod.interval_seconds() == progress_mod.DEFAULT_INTERVAL


def test_postfix_shows_on_the_lines():
    out = io.StringIO()
    bar = LogLines(total=2, desc="bench", unit="trial", stream=out, interval=0)
    bar.set_postfix(membership="0.62s", ok=True)
    bar.update(1)
    assert out.getvalue().splitlines()[0].endswith("(membership=0.62s, ok=True)")


def test_arrays_are_iterated_like_any_sequence():
    """A numpy array of queries (no truth value) counts its rows."""
    out = io.StringIO()
    rows = list(LogLines(np.zeros((3, 4)), desc="search", stream=out, interval=0))
    assert len(rows) == 3 and "search: 3/3 it (100 %)" in out.getvalue()
