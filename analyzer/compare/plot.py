"""The speedup–error plot of a comparison, with its Pareto front (STEM Fig. 9), as PNG.

matplotlib is imported when a plot is drawn.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
from hilsim.analyzer.compare.pareto import pareto_front
from hilsim.analyzer.compare.scoring import NO_REDUCTION_SPEEDUP

from hilsim.core.files import write_bytes_atomic
from hilsim.core.plottext import plain_text

#: errors below this (in %) are drawn on a linear scale, so 0% is drawn at 0 (symlog)
ERROR_LINEAR_BELOW_PCT = 0.1


def _drawable(summary: dict[str, Any]) -> bool:
    values = [summary.get("hmean_speedup"), summary.get("mean_error")]
    if not all(isinstance(v, (int, float)) and np.isfinite(v) for v in values):
        return False
    return bool(values[0] > 0) and all(
        isinstance(summary.get(k, 1.0), (int, float)) and np.isfinite(summary.get(k, 1.0))
        and summary.get(k, 1.0) >= 0
        for k in ("min_speedup", "max_speedup", "min_error", "max_error")
    ) and summary.get("min_speedup", 1.0) > 0


@plain_text()
def pareto_plot(
    summaries: list[dict[str, Any]],
    path: str | Path,
    title: str,
    xlabel: str = "speedup (harmonic mean over seeds)",
    ylabel: str = "mean sampling error (%)",
) -> Path:
    """Speedup–error scatter with the Pareto front (STEM Fig. 9), written as PNG.

    Each row is one marker (its colour and shape named in the legend beside the plot, so
    no labels collide), with bars over seeds from the smallest to the largest error and
    speedup when the summary has them (``min_error``/``max_error``,
    ``min_speedup``/``max_speedup``). The error axis is symmetric-log: linear below
    :data:`ERROR_LINEAR_BELOW_PCT` %, so an error of exactly 0 is drawn at 0, not clipped.
    Rows marked ``no_reduction`` are hollow and left off the front. Rows without a
    finite positive speedup and a finite error (a method whose every seed failed) cannot be
    placed and are left out. Names are drawn as given (:class:`~hilsim.core.plottext.
    plain_text`: a ``$`` in a workload or method label is not mathtext).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summaries = [s for s in summaries if _drawable(s)]
    fig, ax = plt.subplots(figsize=(8.5, 4.8), dpi=110)
    front = _front(summaries)
    _draw_rows(ax, summaries, front, plt.get_cmap("tab10").colors)
    _scale_axes(ax, summaries)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel + f" (linear below {ERROR_LINEAR_BELOW_PCT:g}%)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    if summaries:
        ax.legend(
            loc="upper left",
            bbox_to_anchor=(1.02, 1.0),
            fontsize=8,
            title="bars: min-max over seeds" if any("min_error" in s for s in summaries) else None,
            title_fontsize=7,
            frameon=False,
        )
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", bbox_inches="tight")
    plt.close(fig)
    return write_bytes_atomic(path, buffer.getvalue())


def _front(summaries: list[dict[str, Any]]) -> set[int]:
    """The rows on the Pareto front: as the summaries mark it, else computed over the rows
    that reduce the simulation."""
    if summaries and "pareto" in summaries[0]:
        return {i for i, s in enumerate(summaries) if s.get("pareto")}
    reduced = [i for i, s in enumerate(summaries) if not s.get("no_reduction")]
    points = [(summaries[i]["hmean_speedup"], summaries[i]["mean_error"]) for i in reduced]
    return {reduced[j] for j in pareto_front(points)}


def _draw_rows(ax: Any, summaries: list[dict[str, Any]], front: set[int], colors: Any) -> None:
    """One marker per row with its min-max bars, and the dashed line along the front."""
    markers = "osD^vPX*h<>p"
    for i, summary in enumerate(summaries):
        x, y = summary["hmean_speedup"], 100 * summary["mean_error"]
        xerr = yerr = None
        if "min_speedup" in summary and "max_speedup" in summary:
            xerr = [[max(x - summary["min_speedup"], 0)], [max(summary["max_speedup"] - x, 0)]]
        if "min_error" in summary and "max_error" in summary:
            low, high = 100 * summary["min_error"], 100 * summary["max_error"]
            yerr = [[max(y - low, 0)], [max(high - y, 0)]]
        hollow = bool(summary.get("no_reduction"))
        color = colors[i % len(colors)]
        label = summary["method"] + (
            " - no reduction" if hollow else (" - Pareto front" if i in front else "")
        )
        ax.errorbar(
            x,
            y,
            xerr=xerr,
            yerr=yerr,
            fmt=markers[i % len(markers)],
            ms=8,
            color=color,
            mfc="none" if hollow else color,
            ecolor=color,
            elinewidth=1,
            capsize=3,
            label=label,
        )
    ordered = sorted(
        ((summaries[i]["hmean_speedup"], 100 * summaries[i]["mean_error"]) for i in front),
        key=lambda p: p[0],
    )
    if len(ordered) > 1:
        ax.plot(*zip(*ordered, strict=True), color="tab:blue", lw=1, ls="--", zorder=0)


def _scale_axes(ax: Any, summaries: list[dict[str, Any]]) -> None:
    """Log speedup axis (the "no reduction" band shaded), symmetric-log error axis."""
    from matplotlib.ticker import FuncFormatter

    ax.set_xscale("log")
    if any(s.get("no_reduction") for s in summaries):
        ax.axvspan(
            ax.get_xlim()[0] / 10,
            NO_REDUCTION_SPEEDUP,
            color="0.9",
            zorder=-1,
            label=f"speedup < {NO_REDUCTION_SPEEDUP:g}x: no reduction",
        )
        ax.set_xlim(
            left=min(
                s["min_speedup"] if "min_speedup" in s else s["hmean_speedup"] for s in summaries
            )
            / 1.3
        )
    times = FuncFormatter(lambda v, _: f"{v:g}x")
    ax.xaxis.set_major_formatter(times)
    low, high = ax.get_xlim()
    if high / low < 30:  # less than ~1.5 decades: label the minor ticks too
        ax.xaxis.set_minor_formatter(times)
        ax.tick_params(axis="x", which="minor", labelsize=7)
    ax.set_yscale("symlog", linthresh=ERROR_LINEAR_BELOW_PCT, linscale=0.5)
    top = max([100 * s.get("max_error", s["mean_error"]) for s in summaries] or [1.0])
    ax.set_ylim(-0.02, max(top * 1.6, 1.0))
    ax.axhline(0, color="0.7", lw=0.8, zorder=0)
