"""Progress where stderr is not a terminal: a plain line a minute, nothing for short runs."""

from __future__ import annotations

import io

from rich.console import Console

from hilsim.core import console


def _capture(monkeypatch) -> io.StringIO:
    buffer = io.StringIO()
    monkeypatch.setattr(console, "err", Console(file=buffer, force_terminal=False, width=200))
    return buffer


def test_a_long_run_says_it_is_alive_without_a_terminal(monkeypatch) -> None:
    buffer = _capture(monkeypatch)
    monkeypatch.setattr(console, "PLAIN_PROGRESS_S", 0.0)  # every step is "a minute later"
    with console.progress_bar("warm run", 10) as advance:
        advance(2)
        advance(3, "warm run: 1,234 simulated cycles")
    lines = buffer.getvalue().splitlines()
    assert lines == ["warm run: 2/10 after 0 min",
                     "warm run: 1,234 simulated cycles: 5/10 after 0 min"]


def test_a_short_run_prints_nothing_and_disabled_prints_nothing(monkeypatch) -> None:
    buffer = _capture(monkeypatch)
    with console.progress_bar("quick", None) as advance:  # under PLAIN_PROGRESS_S
        advance(1)
    monkeypatch.setattr(console, "PLAIN_PROGRESS_S", 0.0)
    with console.progress_bar("off", 3, enabled=False) as advance:
        advance(1)
    assert buffer.getvalue() == ""
