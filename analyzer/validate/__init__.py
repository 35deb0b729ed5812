"""Validate sampled simulation against silicon: numbers (JSON) and one HTML report.

One module per layer, each importing only those above it in this list:

* :mod:`~hilsim.analyzer.validate.numbers`: silicon and simulated cycles per launch, the
  error decomposition (PKA Table 4), counter correlation (Accel-Sim section V) and the
  per-cluster table, as JSON-ready dicts; the definitions are in its docstring;
* :mod:`~hilsim.analyzer.validate.text`: those numbers as text cells, and the
  configuration vs sampling error decomposition as rows and markdown;
* :mod:`~hilsim.analyzer.validate.decompose`: the configuration vs sampling error
  decomposition (PKA Table 4) of a sampled simulation against a full one;
* :mod:`~hilsim.analyzer.validate.plots`: the figures (matplotlib, imported when drawn);
* :mod:`~hilsim.analyzer.validate.page`: the self-contained HTML page (Jinja2 templates,
  every value escaped);
* :mod:`~hilsim.analyzer.validate.report`: :func:`validate` (numbers and figures of every
  plan) and :func:`write_report` (``OUT.html`` and ``OUT.json``);
* :mod:`~hilsim.analyzer.validate.run`: :func:`validate_run`, what ``hilsim validate``
  does (the inputs read, the simulated cycles chosen, the files written) as one
  :class:`ValidationRun`.

This package exports the names its callers use.
"""

from __future__ import annotations

from hilsim.analyzer.validate.numbers import (
    COUNTER_PAIRS,
    MAE_COUNTERS,
    SILICON_CYCLES_METRIC,
    VALIDATION_SCHEMA,
    PlanValidation,
    SimResults,
    Validation,
    cluster_table,
    interval_note,
    launch_table_with_metrics,
    memo_by_plan,
    results_from_model,
    results_from_placement,
    results_from_simlog,
    silicon_cycles,
    silicon_metric,
    sm_clock_mhz,
    validate_plan,
    validate_plans,
)
from hilsim.analyzer.validate.page import (
    MAX_CLUSTER_ROWS,
    NAME_CHARS,
    TOP_CLUSTER_ROWS,
    decomposition_html,
    render_html,
)
from hilsim.analyzer.validate.plots import (
    MAX_SCATTER,
    SCATTER_SEED,
    TOP_KERNELS,
    histograms_png,
    pareto_png,
    report_images,
    scatter_png,
)
from hilsim.analyzer.validate.report import validate, write_report
from hilsim.analyzer.validate.run import ValidationRun, validate_run

__all__ = [
    "COUNTER_PAIRS",
    "MAE_COUNTERS",
    "MAX_CLUSTER_ROWS",
    "MAX_SCATTER",
    "NAME_CHARS",
    "SCATTER_SEED",
    "SILICON_CYCLES_METRIC",
    "TOP_CLUSTER_ROWS",
    "TOP_KERNELS",
    "VALIDATION_SCHEMA",
    "PlanValidation",
    "SimResults",
    "Validation",
    "ValidationRun",
    "cluster_table",
    "decomposition_html",
    "histograms_png",
    "interval_note",
    "memo_by_plan",
    "launch_table_with_metrics",
    "pareto_png",
    "render_html",
    "report_images",
    "results_from_model",
    "results_from_placement",
    "results_from_simlog",
    "scatter_png",
    "silicon_cycles",
    "silicon_metric",
    "sm_clock_mhz",
    "validate",
    "validate_plan",
    "validate_plans",
    "validate_run",
    "write_report",
]
