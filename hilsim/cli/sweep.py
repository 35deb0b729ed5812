"""``hilsim sweep SPEC -o DIR``: workloads x methods x grids x seeds on Dask.

The work is :mod:`hilsim.analyzer.sweep`; this module is the command, its progress bar
(tasks done / failed / ETA) and the per-workload summary tables and Pareto plots that
``hilsim compare`` makes (:func:`hilsim.analyzer.report.print_comparison`,
:func:`hilsim.analyzer.report.write_comparison`, :func:`hilsim.analyzer.compare.pareto_plot`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import pandas as pd
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from hilsim.analyzer.compare import pareto_plot
from hilsim.analyzer.report import print_comparison, write_comparison
from hilsim.analyzer.sweep import (
    RESULTS,
    SIM_SUMMARY,
    SUMMARY,
    SweepOutcome,
    SweepSpec,
    csv_safe,
    load_spec,
    parse_scheduler,
    run_sweep,
    sim_summary,
    summarize,
)
from hilsim.cli.options import output_option
from hilsim.core.console import err, out
from hilsim.core.errors import HilsimError
from hilsim.core.files import folder_lock, write_text_atomic
from hilsim.core.formatting import percent


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
        _report(spec, outcome, output)


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


def _report(spec: SweepSpec, outcome: SweepOutcome, output: Path) -> None:
    results = outcome.results
    frames = []
    for workload in spec.workloads:
        result = summarize(results, workload.name)
        out.print(f"[bold]{workload.name}[/bold] ({workload.path})", highlight=False)
        print_comparison(result)
        write_comparison(output / workload.name, result)
        if result["methods"]:
            n = results.loc[results["workload"] == workload.name, "n_launches"].dropna()
            launches = f": {int(n.iloc[0]):,} launches" if len(n) else ""
            pareto_plot(
                result["methods"],
                output / workload.name / "pareto.png",
                f"{workload.name}{launches}",
            )
        for summary in result["methods"]:
            frames.append({"workload": workload.name, **summary})
    write_text_atomic(output / SUMMARY, csv_safe(pd.DataFrame(frames)).to_csv(index=False))
    if spec.simulate:
        _report_simulation(results, output)
    out.print(
        f"sweep: {outcome.ran} task(s) run ({outcome.failed} failed), {outcome.skipped} "
        f"already done, on {outcome.where}, in {outcome.wall_seconds:.1f} s; "
        f"wrote {output / RESULTS}",
        highlight=False,
    )


def _report_simulation(results: Any, output: Path) -> None:
    """The simulated figures per workload, card and grid point (sim_summary.csv)."""
    table = sim_summary(results)
    write_text_atomic(output / SIM_SUMMARY, csv_safe(table).to_csv(index=False))

    def pct(v: Any) -> str:
        return "-" if v is None or v != v else percent(v)

    for r in table.to_dict("records"):
        fails = f", {r['failed']} failed ({r['first_failure']})" if r["failed"] else ""
        launches = "-" if r["sim_launches"] != r["sim_launches"] or r["sim_launches"] is None \
            else f"{r['sim_launches']:.1f}"
        out.print(
            f"simulated {r['workload']} / {r['card']} / {r['label']}: {r['runs']} run(s)"
            f"{fails}; {launches} launches; error {pct(r['sim_error'])} simulated vs "
            f"{pct(r['profile_error'])} on the profile; simulator {r['sim_wall_seconds']:.1f} s",
            highlight=False,
        )
