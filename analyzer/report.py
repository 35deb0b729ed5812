"""Terminal summary (rich) and JSON results of evaluations."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.table import Table

from analyzer.atomic import write_text_atomic
from analyzer.console import out
from analyzer.evaluate import MethodSummary, PlanScore
from analyzer.plan import _jsonable


def _pct(x: float) -> str:
    return f"{100 * x:.2f}%"


def summary_table(
    rows: list[tuple[str, PlanScore, MethodSummary | None]], title: str | None = None
) -> Table:
    """Table columns: method, clusters, samples, speedup, mean and max error over seeds,
    the 95% interval half-width of the first seed's estimate, and how often the
    interval held the truth over seeds."""
    table = Table(title=title)
    columns = (
        "method",
        "clusters",
        "samples",
        "speedup",
        "error",
        "max err",
        "95% CI",
        "held",
        "seeds",
    )
    for column in columns:
        table.add_column(column, justify="left" if column == "method" else "right")
    for name, score, summary in rows:
        if summary is not None:
            error, max_error = _pct(summary.mean_error), _pct(summary.max_error)
            speedup = f"{summary.hmean_speedup:,.0f}x"
            samples = f"{sum(summary.samples) / len(summary.samples):,.0f}"
            clusters = f"{sum(summary.clusters) / len(summary.clusters):,.0f}"
            seeds = str(len(summary.seeds))
        else:
            error, speedup = _pct(score.error), f"{score.speedup:,.0f}x"
            max_error = error
            samples, clusters, seeds = f"{score.n_samples:,}", f"{score.n_clusters:,}", "1"
        if score.interval_ns is not None and score.truth_ns:
            lo, hi = score.interval_ns
            interval = f"±{_pct((hi - lo) / 2 / score.truth_ns)}"
        else:
            interval = "n/a"
        held = "n/a"
        if summary is not None and summary.covered:
            held = f"{sum(summary.covered) / len(summary.covered):.0%}"
        row = (name, clusters, samples, speedup, error, max_error, interval, held, seeds)
        table.add_row(*row)
    return table


def print_summary(
    rows: list[tuple[str, PlanScore, MethodSummary | None]], title: str | None = None
) -> None:
    """Print the summary table to stdout."""
    out.print(summary_table(rows, title))


def write_result(path: str | Path, result: dict[str, Any]) -> Path:
    """Write a JSON result atomically."""
    return write_text_atomic(path, json.dumps(_jsonable(result), indent=1) + "\n")
