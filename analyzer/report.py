"""Terminal summary (rich) and JSON results of evaluations."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from hilsim.analyzer.compare import format_speedup
from hilsim.analyzer.evaluate import MethodSummary, PlanScore
from rich.table import Table

from hilsim.core.console import out
from hilsim.core.files import write_text_atomic
from hilsim.core.formatting import percent
from hilsim.core.jsonfile import write_json

#: the columns of ``compare.csv`` (and of :meth:`hilsim.analyzer.facade.Comparison.table`)
COMPARISON_COLUMNS: tuple[str, ...] = (
    "method",
    "runs",
    "hmean_speedup",
    "mean_error",
    "max_error",
    "mean_samples",
    "mean_plan_seconds",
    "profiling",
    "no_reduction",
    "pareto",
    "warnings",
)


def summary_table(
    rows: list[tuple[str, PlanScore, MethodSummary | None]], title: str | None = None
) -> Table:
    """Table columns: method, clusters, samples, speedup, mean and max error over seeds,
    the 95% interval half-width of the first seed's estimate ("95% CI"), and the
    interval's coverage: the share of seeds whose 95% interval contained the true
    total ("CI coverage"; near 95% when the interval is honest, n/a for deterministic
    plans, which have no sampling distribution)."""
    table = Table(title=title)
    columns = (
        "method",
        "clusters",
        "samples",
        "speedup",
        "error",
        "max err",
        "95% CI",
        "CI coverage",
        "seeds",
    )
    for column in columns:
        table.add_column(column, justify="left" if column == "method" else "right")
    for name, score, summary in rows:
        if summary is not None:
            error, max_error = percent(summary.mean_error), percent(summary.max_error)
            speedup = format_speedup(summary.hmean_speedup)
            samples = f"{sum(summary.samples) / len(summary.samples):,.0f}"
            clusters = f"{sum(summary.clusters) / len(summary.clusters):,.0f}"
            seeds = str(len(summary.seeds))
        else:
            error, speedup = percent(score.error), format_speedup(score.speedup)
            max_error = error
            samples, clusters, seeds = f"{score.n_samples:,}", f"{score.n_clusters:,}", "1"
        if score.interval_ns is not None and score.truth_ns:
            lo, hi = score.interval_ns
            interval = f"±{percent((hi - lo) / 2 / score.truth_ns)}"
        else:
            interval = "n/a"
        coverage = "n/a"
        if summary is not None and summary.covered:
            coverage = f"{sum(summary.covered) / len(summary.covered):.0%}"
        row = (name, clusters, samples, speedup, error, max_error, interval, coverage, seeds)
        table.add_row(*row)
    return table


def print_summary(
    rows: list[tuple[str, PlanScore, MethodSummary | None]], title: str | None = None
) -> None:
    """Print the summary table to stdout, with what its interval columns mean."""
    out.print(summary_table(rows, title))
    out.print(
        "[dim]95% CI: half-width of the first seed's 95% interval of the total; CI coverage: "
        "share of seeds whose interval contained the true total (should be near 95%).[/dim]",
        highlight=False,
    )


def write_result(path: str | Path, result: dict[str, Any]) -> Path:
    """Write a JSON result atomically."""
    return write_json(path, result)


def print_comparison(result: dict[str, Any]) -> None:
    """The comparison table (STEM Table 3 columns), the budget the baselines had, every
    method warning (numbered, referenced from the table) and the skipped methods."""
    title = "methods compared" + (" (plans scored on the holdout run)" if result["holdout"] else "")
    if result.get("workload"):
        title = f"{result['workload']}: {title}"
    table = Table(title=title)
    for column in (
        "method",
        "runs",
        "speedup",
        "error",
        "max err",
        "samples",
        "plan s",
        "profiling needed",
        "notes",
    ):
        table.add_column(
            column, justify="left" if column in ("method", "profiling needed", "notes") else "right"
        )
    footnotes: list[str] = []
    for s in result["methods"]:
        refs = []
        if s.get("no_reduction"):
            footnotes.append(f"{s['method']}: no reduction: {s['no_reduction']}")
            refs.append(str(len(footnotes)))
        for warning in s.get("warnings", []):
            footnotes.append(f"{s['method']}: {warning}")
            refs.append(str(len(footnotes)))
        pareto = " *" if s.get("pareto") else ""
        table.add_row(
            s["method"] + pareto,
            str(s["runs"]),
            format_speedup(s["hmean_speedup"]),
            percent(s["mean_error"]),
            percent(s["max_error"]),
            f"{s['mean_samples']:,.0f}",
            f"{s['mean_plan_seconds']:.2f}",
            s["profiling"],
            ("NO REDUCTION " if s.get("no_reduction") else "") + ",".join(f"[{r}]" for r in refs),
        )
    out.print(table)
    thresholds = result.get("thresholds") or {}
    legend = "* on the Pareto front (rows marked NO REDUCTION are left off it"
    if thresholds:
        legend += (
            f": speedup below {thresholds['no_reduction_speedup']:g}x or "
            f"{thresholds['no_reduction_share']:.0%}+ of the launches simulated"
        )
    out.print(legend + ")", highlight=False)
    budget = result.get("budget")
    if budget:
        what = "simulated time" if budget["kind"] == "time" else "number of simulated launches"
        out.print(
            f"{' and '.join(budget['baselines'])} ran at {budget['of']}'s budget, seed by seed: "
            f"the same {what}",
            highlight=False,
        )
    for line in result.get("input_warnings", []):
        out.print(f"warning: {line}", markup=False, highlight=False)
    for i, note in enumerate(footnotes, 1):
        out.print(f"[{i}] {note}", markup=False, highlight=False)
    for name, reason in result["skipped"].items():
        out.print(f"[yellow]{name} skipped[/yellow]: {reason}", highlight=False)
    if result.get("workers_note"):
        out.print(f"[yellow]note[/yellow]: {result['workers_note']}", highlight=False)


def write_comparison(folder: str | Path, result: dict[str, Any]) -> Path:
    """compare.json (everything) and compare.csv (the table), written atomically."""
    target = Path(folder)
    write_result(target / "compare.json", result)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(COMPARISON_COLUMNS), extrasaction="ignore")
    writer.writeheader()
    writer.writerows(
        {**row, "warnings": " | ".join(row.get("warnings", []))} for row in result["methods"]
    )
    write_text_atomic(target / "compare.csv", buffer.getvalue())
    return target
