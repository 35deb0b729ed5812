"""The validation report's numbers as text: table cells, and the configuration vs sampling
error decomposition (PKA, Baddouh et al., MICRO 2021, Table 4) as table rows and markdown.

Plain text only: the HTML page (:mod:`hilsim.analyzer.validate.page`) escapes it.
"""

from __future__ import annotations

import html
from typing import Any

import numpy as np

from hilsim.core.formatting import MISSING, percent

#: kernel rows of a decomposition's table (the kernels with the most silicon cycles)
DECOMPOSITION_KERNELS = 12
#: the columns of a decomposition's tables after the row's own name
DECOMPOSITION_COLUMNS = ("silicon", "full sim", "sampled projection", "configuration error",
                         "sampling error", "total error")


def number(value: Any) -> str:
    """A table cell: floats to 4 significant digits (thousands separated, whole numbers
    from 10,000 up), other values as ``str``; None and non-finite floats "n/a"."""
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return MISSING
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"
    return str(value)


def fraction(value: Any) -> str:
    """A fraction as a percentage cell (``0.1234`` is "12.34%"); None and non-finite "n/a"."""
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return MISSING
    return percent(float(value))


def signed(value: float | None) -> str:
    """A signed relative error: ``+1.50%``, ``-0.25%``; None "n/a"."""
    return percent(value, "+.2f")


def count(value: float | None) -> str:
    """A total (cycles, accesses) with thousands separators, no decimals; None "n/a"."""
    return MISSING if value is None else f"{value:,.0f}"


def decomposition_rows(
    d: dict[str, Any], limit: int = DECOMPOSITION_KERNELS
) -> tuple[list[list[str]], list[list[str]]]:
    """The decomposition ``d`` (:func:`hilsim.analyzer.validate.decompose.decompose`) as two tables
    of text rows, columns :data:`DECOMPOSITION_COLUMNS` after the row's name: the first
    ``limit`` kernels (with their launch and sample counts), then every counter (with the
    silicon metric it is compared with)."""
    kernels = [
        [str(r["kernel"]) + f" ({r['launches']} launches, {r['samples']} sampled)",
         count(r["silicon"]), count(r["full"]), count(r["projection"]),
         signed(r["configuration_error"]), signed(r["sampling_error"]), signed(r["total_error"])]
        for r in d["per_kernel"][:limit]
    ]
    counters = [
        [str(r["counter"]) + (f" ({r['silicon_metric']})" if r["silicon_metric"]
                              and r["counter"] != "cycles" else ""),
         count(r["silicon"]), count(r["full"]), count(r["projection"]),
         signed(r["configuration_error"]), signed(r["sampling_error"]), signed(r["total_error"])]
        for r in d["per_counter"]
    ]
    return kernels, counters


def markdown_text(text: str) -> str:
    """``text`` safe inside markdown (a kernel or plan name): HTML-escaped, since
    markdown renders raw HTML (a name like ``<script>`` stays text), with ``|`` escaped
    (it would split a table cell) and line breaks as spaces."""
    escaped = html.escape(" ".join(str(text).split()), quote=False)
    return escaped.replace("|", "\\|")


def decomposition_markdown(label: str, d: dict[str, Any]) -> str:
    """The decomposition of one plan as markdown tables (totals, kernels, counters); names
    (the plan's label, kernels) through :func:`markdown_text`."""
    kernels, counters = decomposition_rows(d)
    t = d["totals"]
    lines = [
        f"### {markdown_text(label)}: configuration vs sampling error (PKA Table 4)",
        "",
        f"configuration {signed(t['configuration_error'])}, sampling "
        f"{signed(t['sampling_error'])}, total {signed(t['total_error'])} "
        f"(cycles: silicon {count(t['silicon'])}, full {count(t['full'])}, projection "
        f"{count(t['projection'])})",
        "",
        f"sampling = selection {signed(t['selection_error'])} (the sampled launches' "
        f"full-run cycles) x state {signed(t['state_error'])} (the same launches in the "
        "sampled simulation: caches as their warm-up left them)",
        "",
    ]
    for title, rows in (("kernel", kernels), ("counter", counters)):
        lines.append("| " + " | ".join([title, *DECOMPOSITION_COLUMNS]) + " |")
        lines.append("|" + "---|" * (1 + len(DECOMPOSITION_COLUMNS)))
        lines += ["| " + " | ".join([markdown_text(r[0]), *r[1:]]) + " |" for r in rows]
        lines.append("")
    return "\n".join(lines)
