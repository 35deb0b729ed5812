"""``hilsim sweep SPEC -o DIR``: workloads x methods x grids x seeds on Dask.

The work is :mod:`hilsim.analyzer.sweep` (the run, then
:func:`hilsim.analyzer.sweep.report.write_reports`: per workload the files ``hilsim
compare`` writes, the summaries); this module is the command, its progress bar (tasks done
/ failed / ETA) and the per-workload tables (:func:`hilsim.analyzer.report.print_comparison`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from hilsim.analyzer.report import print_comparison
from hilsim.analyzer.sweep import load_spec, parse_scheduler, run_sweep
from hilsim.analyzer.sweep.report import write_reports
from hilsim.cli.options import output_option
from hilsim.core.console import err, out
from hilsim.core.errors import HilsimError
from hilsim.core.files import folder_lock


@click.command("sweep")
@click.argument("spec_path", metavar="SPEC", type=click.Path(path_type=Path))
@output_option(
    "Folder for results.parquet, summary.csv and one compare folder per workload; "
    "a rerun into the same folder skips the tasks already there.",
    required=True,
)
@click.option(
    "--scheduler",
    metavar="tcp://HOST:PORT",
    help="Run on this existing Dask cluster (default: an embedded LocalCluster).",
)
@click.option(
    "--workers",
    type=int,
    default=None,
    help="Worker processes of the embedded cluster (default: CPUs, capped by memory).",
)
@click.option("--retry-failed", is_flag=True, help="Run again the tasks that failed before.")
def sweep_cmd(
    spec_path: Path,
    output: Path,
    scheduler: str | None,
    workers: int | None,
    retry_failed: bool,
) -> None:
    """Run a sweep SPEC (TOML: workloads, methods with parameter grids, seeds) on Dask.

    Every (workload, method, params, seed) is one task: plan, then score (error,
    speedup, samples, times). Writes OUTPUT/results.parquet (one row per task, failed
    tasks with their one-line error), OUTPUT/summary.csv and, per workload,
    OUTPUT/<workload>/compare.{json,csv} and pareto.png. With `simulate = true` each
    plan's launches also run on the workload's simulated card (sim_* columns,
    OUTPUT/sim_summary.csv, logs under OUTPUT/sim/). See docs/sweep.md.
    """
    if workers is not None and workers < 1:
        raise HilsimError("--workers: expected 1 or more")
    if scheduler and workers:
        raise HilsimError("--workers sizes the embedded cluster; with --scheduler the cluster's")
    if scheduler:
        parse_scheduler(scheduler)
    spec = load_spec(spec_path)
    # one sweep at a time writes into a folder (results, summaries, compare folders)
    with folder_lock(output, "sweep"):
        with _progress() as on_event:
            outcome = run_sweep(spec, output, scheduler, workers, retry_failed, on_event)
        report = write_reports(spec, outcome, output)
    for workload in report.workloads:
        out.print(f"[bold]{workload.name}[/bold] ({workload.path})", highlight=False)
        print_comparison(workload.comparison)
    for line in report.lines():
        out.print(line, highlight=False)


class _progress:
    """Rich progress bar on stderr: tasks done of total, failed, elapsed, ETA."""

    def __enter__(self) -> Any:
        self.progress = Progress(
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("[red]{task.fields[failed]} failed"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=err,
            transient=True,
            disable=not err.is_terminal,
        )
        self.progress.__enter__()
        self.task = None
        self.failed = 0
        return self.event

    def event(self, kind: str, value: Any) -> None:
        if kind == "start":
            self.task = self.progress.add_task("sweep", total=int(value), failed=0)
        elif self.task is not None:
            self.failed += value.get("status") != "ok"
            self.progress.update(self.task, advance=1, failed=self.failed)

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(*exc)
