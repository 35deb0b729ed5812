"""The validation report as one self-contained HTML page (inline CSS, base64 images).

The page is the Jinja2 template ``templates/report.html.j2`` (its tables are the macros
of ``templates/tables.html.j2``) rendered with autoescape: every value from the report,
kernel names (C++ names hold ``<``, ``>`` and ``&``), labels, paths and notes included,
is escaped as it is printed. The escaping is :func:`html.escape`, applied as the
environment's ``finalize`` so quotes are written ``&#x27;`` and ``&quot;`` (markupsafe's
own escaping writes ``&#39;`` and ``&#34;``: the same characters, other bytes); values the
templates already made markup (macro output) pass as they are.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

from hilsim.analyzer.validate.text import (
    DECOMPOSITION_COLUMNS,
    decomposition_rows,
    fraction,
    number,
    signed,
)
from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

MAX_CLUSTER_ROWS = 100
#: clusters shown in the page's table (by share of the projection); the rest, up to
#: MAX_CLUSTER_ROWS, behind a <details> toggle
TOP_CLUSTER_ROWS = 12
#: kernel names longer than this are shortened in tables (the full name is a tooltip)
NAME_CHARS = 60

HEADLINE_COLUMNS = ("plan", "method", "total error", "configuration error", "sampling error",
                    "silicon sampling error", "profiled-time speedup", "simulated-time speedup",
                    "warm-up", "samples", "95% interval vs silicon")
TOTALS_COLUMNS = ("plan", "silicon", "full simulation", "sampled projection",
                  "95% interval of the projection")
CLUSTER_COLUMNS = ("cluster", "label", "other sampled kernels", "size", "samples",
                   "silicon estimate", "sim projection", "sim / silicon", "share of projection")
#: cluster columns that need the cluster's members
MEMBER_COLUMNS = ("silicon truth", "silicon sampling error", "duration CoV")
CORRELATION_COLUMNS = ("simulator", "silicon", "launches", "error kind", "error", "Pearson r")


def _escape(value: Any) -> Any:
    """Every printed value as :func:`html.escape` text; markup passes unchanged."""
    if hasattr(value, "__html__"):
        return value
    return Markup(html.escape(str(value), quote=True))  # noqa: S704 - escaped just now


def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("hilsim.analyzer.validate", "templates"),
        autoescape=True,
        finalize=_escape,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=StrictUndefined,
    )
    env.filters.update(number=number, fraction=fraction, signed=signed)
    env.globals.update(
        name_chars=NAME_CHARS,
        max_cluster_rows=MAX_CLUSTER_ROWS,
        headline_columns=list(HEADLINE_COLUMNS),
        totals_columns=list(TOTALS_COLUMNS),
        cluster_columns=list(CLUSTER_COLUMNS),
        member_columns=list(MEMBER_COLUMNS),
        correlation_columns=list(CORRELATION_COLUMNS),
        decomposition_columns=list(DECOMPOSITION_COLUMNS),
    )
    return env


_ENV = _environment()


@dataclass
class PlanView:
    """What the page shows of one plan beyond its record: the cluster table split into
    the top rows and the rest, the text rows of its plain tables and its figures."""

    record: dict[str, Any]
    with_members: bool
    top: list[dict[str, Any]]
    rest: list[dict[str, Any]]
    rest_share: float
    correlation: list[list[str]]
    metric_errors: list[list[str]]
    kernel_rows: list[list[str]]
    counter_rows: list[list[str]]
    histograms: str | None
    scatters: list[tuple[str, str | None]]


def _plan_view(record: dict[str, Any], histograms: str | None,
               scatters: list[tuple[str, str | None]]) -> PlanView:
    clusters = record["clusters"][:MAX_CLUSTER_ROWS]
    rest = clusters[TOP_CLUSTER_ROWS:]
    kernels: list[list[str]] = []
    counters: list[list[str]] = []
    if record.get("decomposition"):
        kernels, counters = decomposition_rows(record["decomposition"])
    return PlanView(
        record=record,
        with_members=any("launches" in c for c in record["clusters"]),
        top=clusters[:TOP_CLUSTER_ROWS],
        rest=rest,
        rest_share=sum(c["share_of_projection"] or 0.0 for c in rest),
        correlation=[
            [c["sim"], c["silicon"], number(c["n"]), c["kind"], fraction(c["error"]),
             number(c["pearson_r"])]
            for c in record["correlation"]
        ],
        metric_errors=[[k, fraction(v)] for k, v in sorted(record["metric_errors"].items())],
        kernel_rows=kernels,
        counter_rows=counters,
        histograms=histograms,
        scatters=scatters,
    )


def _totals_row(record: dict[str, Any]) -> list[str]:
    h = record["headline"]
    interval = h["interval_cycles"]
    return [
        record["label"],
        number(h["silicon_total_cycles"]),
        number(h["full_simulation_total_cycles"]),
        number(h["sampled_projection_cycles"]),
        "n/a" if not interval else f"[{number(interval[0])}, {number(interval[1])}]",
    ]


def render_html(report: dict[str, Any], images: dict[str, Any]) -> str:
    """The self-contained HTML (inline CSS, base64 images, escaped strings).

    ``report`` is a ``hilsim.validation/1`` document, ``images`` the figures of
    :func:`hilsim.analyzer.validate.plots.report_images`. Order: the headline (errors,
    speedup, whether each 95% interval contains the silicon total, flagged in red when
    it does not) and the figures first; then per plan its histograms, the
    :data:`TOP_CLUSTER_ROWS` clusters with the largest share of the projection (the rest
    behind a ``<details>`` toggle), the configuration vs sampling error decomposition
    where the report has one, counter correlation and per-metric errors. Tables wrap
    long cells so the page fits its 1200 px column.
    """
    views = [
        _plan_view(r, images["hist"][i], images["scatter"][i])
        for i, r in enumerate(report["plans"])
    ]
    return _ENV.get_template("report.html.j2").render(
        report=report,
        images=images,
        views=views,
        totals_rows=[_totals_row(r) for r in report["plans"]],
    )


def decomposition_html(label: str, d: dict[str, Any]) -> str:
    """The configuration vs sampling error decomposition ``d`` of plan ``label``
    (:func:`hilsim.analyzer.validate.decompose.decompose`) as the page shows it: a heading, the
    totals, and the kernel and counter tables (every string escaped)."""
    kernels, counters = decomposition_rows(d)
    macros = _ENV.get_template("tables.html.j2").module
    return str(macros.decomposition(label, d, kernels, counters))  # type: ignore[attr-defined]
