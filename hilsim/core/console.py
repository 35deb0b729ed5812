"""Terminal output shared by the CLI: one rich console on stderr for progress and
errors, tables on stdout."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console

# when output goes to a file or pipe, rich would assume 80 columns and clip table
# headers; a wider fixed width keeps logs and captured output readable
out = Console(width=None if sys.stdout.isatty() else 140)
err = Console(stderr=True)


#: seconds between two plain progress lines when stderr is not a terminal
PLAIN_PROGRESS_S = 60.0


@contextmanager
def progress_bar(
    description: str, total: int | None, enabled: bool = True
) -> Iterator[Callable[..., None]]:
    """A rich progress bar on stderr; yields ``advance(step=1, description=None)``.

    Transient on a terminal. When stderr is not a terminal (a log file, CI, a batch job) a
    plain line (text, steps done, minutes elapsed) every :data:`PLAIN_PROGRESS_S` seconds
    says the command is alive, and nothing for a shorter run. Silent when ``enabled`` is
    False. A ``description`` replaces the bar's text (e.g. simulated time).
    """
    # lazy: rich's progress widgets load only for a command that shows a bar
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    progress = Progress(
        SpinnerColumn(),
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not (enabled and err.is_terminal),
    )
    with progress:
        task = progress.add_task(description, total=total)

        plain = enabled and not err.is_terminal
        started = last = time.monotonic()
        done = [0, description]

        def advance(step: int = 1, description: str | None = None) -> None:
            nonlocal last
            if description is None:
                progress.advance(task, step)
            else:
                progress.update(task, advance=step, description=description)
            done[0] += step
            done[1] = description or done[1]
            now = time.monotonic()
            if plain and now - last >= PLAIN_PROGRESS_S:
                last = now
                of = f"/{total}" if total is not None else ""
                err.print(f"{done[1]}: {done[0]}{of} after {(now - started) / 60:.0f} min",
                          highlight=False, markup=False, soft_wrap=True)

        yield advance


@contextmanager
def status(message: str) -> Iterator[None]:
    """A spinner on stderr for a step that may take more than a second."""
    if not err.is_terminal:
        yield
        return
    with err.status(message):
        yield


def warn(message: str) -> None:
    """One warning line on stderr (``hilsim: warning: ...``), never wrapped."""
    err.print(f"hilsim: warning: {message}", markup=False, highlight=False, soft_wrap=True)
