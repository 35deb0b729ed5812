"""What a sweep leaves besides ``results.parquet``: per workload the ``hilsim compare``
files of its grid points (``compare.json``, ``compare.csv``, ``pareto.png``),
``summary.csv`` over every workload and, when the sweep simulated, ``sim_summary.csv``;
and the lines that tell what ran (:class:`SweepReport`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from hilsim.analyzer.compare import pareto_plot
from hilsim.analyzer.report import write_comparison
from hilsim.analyzer.sweep.results import RESULTS
from hilsim.analyzer.sweep.runner import SweepOutcome
from hilsim.analyzer.sweep.spec import SweepSpec
from hilsim.analyzer.sweep.summary import SIM_SUMMARY, SUMMARY, csv_safe, sim_summary, summarize

from hilsim.core.files import write_text_atomic
from hilsim.core.formatting import percent


@dataclass
class WorkloadComparison:
    """One workload of the spec and its grid points compared (a ``hilsim compare``
    result: :func:`hilsim.analyzer.sweep.summary.summarize`)."""

    name: str
    path: str
    comparison: dict[str, Any]


@dataclass
class SweepReport:
    """The files a sweep's reports wrote and what they say."""

    outcome: SweepOutcome
    output: Path
    workloads: list[WorkloadComparison]
    simulated: pd.DataFrame | None = None

    def lines(self) -> list[str]:
        """One line per simulated (workload, card, grid point), then what the sweep ran."""
        lines = [] if self.simulated is None else _simulated_lines(self.simulated)
        o = self.outcome
        lines.append(
            f"sweep: {o.ran} task(s) run ({o.failed} failed), {o.skipped} "
            f"already done, on {o.where}, in {o.wall_seconds:.1f} s; "
            f"wrote {self.output / RESULTS}"
        )
        return lines


def write_reports(spec: SweepSpec, outcome: SweepOutcome, output: Path) -> SweepReport:
    """Per workload its compare folder (``OUTPUT/<workload>/``), then ``summary.csv``
    and, when the sweep simulated, ``sim_summary.csv``."""
    results = outcome.results
    frames = []
    compared = []
    for workload in spec.workloads:
        result = summarize(results, workload.name)
        compared.append(WorkloadComparison(workload.name, str(workload.path), result))
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
    simulated = None
    if spec.simulate:
        simulated = sim_summary(results)
        write_text_atomic(output / SIM_SUMMARY, csv_safe(simulated).to_csv(index=False))
    return SweepReport(outcome, output, compared, simulated)


def _simulated_lines(table: pd.DataFrame) -> list[str]:
    """The simulated figures per workload, card and grid point (``sim_summary.csv``)."""

    def pct(v: Any) -> str:
        return "-" if v is None or v != v else percent(v)

    lines = []
    for r in table.to_dict("records"):
        fails = f", {r['failed']} failed ({r['first_failure']})" if r["failed"] else ""
        launches = "-" if r["sim_launches"] != r["sim_launches"] or r["sim_launches"] is None \
            else f"{r['sim_launches']:.1f}"
        lines.append(
            f"simulated {r['workload']} / {r['card']} / {r['label']}: {r['runs']} run(s)"
            f"{fails}; {launches} launches; error {pct(r['sim_error'])} simulated vs "
            f"{pct(r['profile_error'])} on the profile; simulator {r['sim_wall_seconds']:.1f} s"
        )
    return lines
