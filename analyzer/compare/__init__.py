"""Side-by-side comparison of sampling methods on one workload.

Every registered method the bundle's data allows runs over seeds; the result is a table
like STEM+ROOT Table 3 (harmonic-mean speedup, mean and max error, plan time, the
profiling level the method needs) and the speedup–error Pareto plot (STEM Fig. 9).
Methods that cannot run on the data are listed with the reason. With a *holdout* bundle
(another run of the same workload), plans are chosen on the first bundle and scored on
the second: the honest number for methods that look at the very durations they are
scored on.

One module per job, each importing only those above it in this list:

* :mod:`~hilsim.analyzer.compare.scoring`: one row over seeds (:class:`MethodResult`) and
  what its figures say (speedup format, "no reduction", the label of a method short of
  its inputs, the profiling level);
* :mod:`~hilsim.analyzer.compare.memory`: how many worker processes the available memory
  holds (each holds its own copy of the bundle);
* :mod:`~hilsim.analyzer.compare.columns`: the launch columns the methods read, read when
  each method's runs start;
* :mod:`~hilsim.analyzer.compare.pool`: the (method, seed) runs, planned and scored in
  spawned worker processes or in this one;
* :mod:`~hilsim.analyzer.compare.budget`: the tasks, and the baselines at the budget of
  the method they are compared to;
* :mod:`~hilsim.analyzer.compare.pareto`: the Pareto front and the order of the rows;
* :mod:`~hilsim.analyzer.compare.run`: :func:`compare_methods`, the comparison itself;
* :mod:`~hilsim.analyzer.compare.result`: :func:`compare_profile`, the ``hilsim.compare/1``
  document (``compare.json``);
* :mod:`~hilsim.analyzer.compare.plot`: :func:`pareto_plot` (matplotlib, imported when
  drawn).

This package exports the names its callers use.
"""

from __future__ import annotations

from hilsim.analyzer.compare.budget import BUDGET_BASELINES, BUDGET_KINDS
from hilsim.analyzer.compare.columns import ColumnReader, bundle_columns_reader, launch_columns
from hilsim.analyzer.compare.memory import (
    GB,
    WORKER_BUNDLE_FACTOR,
    available_bytes,
    bundle_bytes,
    memory_capped_workers,
)
from hilsim.analyzer.compare.pareto import pareto_front
from hilsim.analyzer.compare.plot import ERROR_LINEAR_BELOW_PCT, pareto_plot
from hilsim.analyzer.compare.result import (
    COMPARE_SCHEMA,
    compare_profile,
    comparison_title,
    input_identity,
    workload_name,
)
from hilsim.analyzer.compare.run import compare_methods
from hilsim.analyzer.compare.scoring import (
    NO_REDUCTION_SHARE,
    NO_REDUCTION_SPEEDUP,
    PROFILING_LEVEL,
    MethodResult,
    format_speedup,
    method_label,
    profiling_level,
    reduction_flag,
)

__all__ = [
    "BUDGET_BASELINES",
    "BUDGET_KINDS",
    "COMPARE_SCHEMA",
    "ERROR_LINEAR_BELOW_PCT",
    "GB",
    "NO_REDUCTION_SHARE",
    "NO_REDUCTION_SPEEDUP",
    "PROFILING_LEVEL",
    "WORKER_BUNDLE_FACTOR",
    "ColumnReader",
    "MethodResult",
    "available_bytes",
    "bundle_bytes",
    "bundle_columns_reader",
    "compare_methods",
    "compare_profile",
    "comparison_title",
    "format_speedup",
    "input_identity",
    "launch_columns",
    "memory_capped_workers",
    "method_label",
    "pareto_front",
    "pareto_plot",
    "profiling_level",
    "reduction_flag",
    "workload_name",
]
