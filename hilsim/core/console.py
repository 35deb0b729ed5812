"""Terminal output shared by the CLI: one rich console on stderr for progress and
errors, tables on stdout."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console

# when output goes to a file or pipe, rich would assume 80 columns and clip table
# headers; a wider fixed width keeps logs and captured output readable
out = Console(width=None if sys.stdout.isatty() else 140)
err = Console(stderr=True)


@contextmanager
def progress_bar(
    description: str, total: int | None, enabled: bool = True
) -> Iterator[Callable[..., None]]:
    """A rich progress bar on stderr; yields ``advance(step=1, description=None)``.

    Transient, and silent when stderr is not a terminal (CI logs stay clean) or when
    ``enabled`` is False. A ``description`` replaces the bar's text (e.g. simulated time).
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

        def advance(step: int = 1, description: str | None = None) -> None:
            if description is None:
                progress.advance(task, step)
            else:
                progress.update(task, advance=step, description=description)

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
