"""Terminal output shared by the CLI: one rich console on stderr for progress and
errors, tables on stdout."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

out = Console()
err = Console(stderr=True)


@contextmanager
def progress_bar(description: str, total: int | None) -> Iterator[callable]:
    """A rich progress bar on stderr; yields ``advance()``.

    Transient, and silent when stderr is not a terminal (CI logs stay clean).
    """
    progress = Progress(
        SpinnerColumn(),
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    )
    with progress:
        task = progress.add_task(description, total=total)

        def advance(step: int = 1) -> None:
            progress.advance(task, step)

        yield advance
