"""hilsim from Python: one object over a loaded profile (for notebooks and scripts).

Modelled on Holistic Trace Analysis' ``TraceAnalysis`` (one object over a loaded trace,
one method per analysis)::

    from hilsim.analyzer import Profile

    p = Profile.load("run.bundle")                 # a bundle folder or any profile file
    plan = p.plan("stem", epsilon=0.05)            # a Plan (hilsim.plan/1 with plan.save)
    result = p.evaluate(plan)                      # error, speedup, 95% interval
    table = p.compare(seeds=10)                    # every method side by side
    table.table()                                  # ... as a DataFrame

The commands make the same calls (``hilsim plan``, ``evaluate``, ``compare``,
``recommend``, ``pkp``) and print the objects returned here, so a notebook gets exactly
the figures the command line prints. Evaluation follows STEM section 4.1 (error =
|estimate - truth| / truth, speedup over the distinct sampled launches); the comparison
is STEM Table 3 / Fig. 9; the projection is PKA section 3.2 (PKP).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from hilsim.analyzer import methods
from hilsim.analyzer.methods.base import Method
from hilsim.analyzer.tracecheck import bundle_warnings, method_warnings
from rich.table import Table

from hilsim.core.bundle import Bundle, write_bundle
from hilsim.core.errors import HilsimError
from hilsim.core.plan import Plan, load_plan
from hilsim.formats.read import import_profile, load_profile

# The modules of the other analyses (evaluation, comparison and its plot, recommendation,
# the streaming importer, validation, the simulator models of PKP) are imported inside
# the method that uses them: `hilsim plan` and `hilsim import` start without them.
if TYPE_CHECKING:
    from hilsim.analyzer.evaluate import MethodSummary, PlanScore
    from hilsim.analyzer.recommend import Recommendation

PathLike = str | os.PathLike[str]
Progress = Callable[..., None]

@dataclass
class Evaluation:
    """A plan scored on a profile, or a method evaluated over seeds.

    Attributes:
        method: the method's name (the table's row label).
        score: the plan's score (with a method: its first seed's).
        summary: the method over seeds (``None`` when one plan was scored).
        plan: the evaluated plan file, when the plan was given as a path.
    """

    method: str
    score: PlanScore
    summary: MethodSummary | None = None
    plan: str | None = None

    @property
    def error(self) -> float:
        """The error (mean over seeds for a method)."""
        return self.score.error if self.summary is None else self.summary.mean_error

    @property
    def speedup(self) -> float:
        """The speedup (harmonic mean over seeds for a method)."""
        return self.score.speedup if self.summary is None else self.summary.hmean_speedup

    def rows(self) -> list[tuple[str, PlanScore, MethodSummary | None]]:
        """The row of :func:`hilsim.analyzer.report.print_summary`."""
        return [(self.method, self.score, self.summary)]

    def to_dict(self) -> dict[str, Any]:
        """The JSON document ``hilsim evaluate -o`` writes."""
        if self.summary is None:
            return {"plan": self.plan, "method": self.method, "score": self.score.to_dict()}
        return {"method": self.method, "summary": self.summary.to_dict()}


@dataclass
class Comparison:
    """Every method side by side (the ``hilsim.compare/1`` document of
    :func:`hilsim.analyzer.compare.compare_profile`)."""

    document: dict[str, Any]

    @property
    def methods(self) -> list[dict[str, Any]]:
        """One summary per row, best first (rows that reduce the simulation first)."""
        return self.document["methods"]

    @property
    def skipped(self) -> dict[str, str]:
        """Methods that could not run on the profile, with the reason."""
        return self.document["skipped"]

    @property
    def title(self) -> str:
        """The Pareto plot's title."""
        from hilsim.analyzer.compare import comparison_title  # lazy: see the imports

        return comparison_title(self.document)

    def table(self) -> pd.DataFrame:
        """The comparison table (the columns of ``compare.csv``; warnings as a list)."""
        from hilsim.analyzer.report import COMPARISON_COLUMNS  # lazy: see the imports

        return pd.DataFrame(
            [{c: row.get(c) for c in COMPARISON_COLUMNS} for row in self.methods],
            columns=list(COMPARISON_COLUMNS),
        )

    def to_dict(self) -> dict[str, Any]:
        return self.document

    def write(self, folder: PathLike) -> Path:
        """``compare.json``, ``compare.csv`` and, when a method ran, ``pareto.png``."""
        from hilsim.analyzer.compare import pareto_plot  # lazy: see the imports
        from hilsim.analyzer.report import write_comparison

        target = write_comparison(folder, self.document)
        if self.methods:
            pareto_plot(self.methods, target / "pareto.png", self.title)
        return target


@dataclass
class Projection:
    """Principal Kernel Projection of a plan's sampled launches (PKA section 3.2): the
    document :func:`hilsim.simmodel.pkp.project_plan` returns plus ``timelines`` (where
    the IPC timelines came from), and the plan projected."""

    document: dict[str, Any]
    plan: Plan

    def table(self) -> Table:
        """The projected total, the simulated fraction and, with the full simulation's
        cycles, the projection error (what ``hilsim pkp`` prints)."""
        result = self.document
        table = Table(title=f"PKP on {self.plan.method} plan ({result['timelines']})")
        columns = ["projected total cycles", "simulated fraction", "sampled launches",
                   "projected launches"]
        if result["full_total_cycles"]:
            columns += ["full total cycles", "projection error"]
        for column in columns:
            table.add_column(column, justify="right")
        cells = [
            f"{result['projected_total_cycles']:,.0f}",
            f"{100 * result['simulated_fraction']:.1f}%",
            f"{self.plan.n_samples:,}",
            f"{result['n_projected']:,}",
        ]
        if result["full_total_cycles"]:
            cells += [f"{result['full_total_cycles']:,.0f}",
                      f"{100 * result['projection_error']:.2f}%"]
        table.add_row(*cells)
        return table

    def to_dict(self) -> dict[str, Any]:
        """The JSON document ``hilsim pkp -o`` writes."""
        return self.document


@dataclass
class ImportResult:
    """A profile written as a bundle folder."""

    path: Path
    manifest: dict[str, Any]
    n_launches: int
    n_kernels: int
    n_metrics: int

    @property
    def warnings(self) -> list[str]:
        """The trace's warnings recorded in the manifest."""
        return list(self.manifest.get("warnings", []))


def import_bundle(
    profile: PathLike,
    output: PathLike,
    fmt: str = "auto",
    ncu: PathLike | None = None,
    ncu_join: str = "order",
    ncu_first_launch: int = 0,
    force: bool = False,
) -> ImportResult:
    """Import profiler output into a bundle folder (what ``hilsim import`` does).

    Large nsys CSV/SQLite files without ``ncu`` stream chunk by chunk straight to
    ``output`` (bounded memory); everything else is imported in memory and written.
    """
    from hilsim.formats.streaming import stream_profile  # lazy: see the imports

    output = Path(output)
    if output.exists() and not force:
        raise HilsimError(f"{output}: already exists (use --force to replace it)")
    ncu_path = Path(ncu) if ncu is not None else None
    streamed = stream_profile(profile, output, fmt, ncu_path, overwrite=force)
    if streamed is not None:  # no --ncu on this path: no metrics
        return ImportResult(
            streamed.path, streamed.manifest, streamed.n_launches, streamed.n_kernels, 0
        )
    bundle = import_profile(
        Path(profile), fmt=fmt, ncu=ncu_path, ncu_join=ncu_join, ncu_first_launch=ncu_first_launch
    )
    path = write_bundle(bundle, output, overwrite=force)
    return ImportResult(
        path,
        bundle.manifest,
        bundle.n_launches,
        bundle.launches["name"].nunique(),
        0 if bundle.metrics is None else len(bundle.metrics),
    )


def _method(method: str | Method, params: dict[str, Any]) -> Method:
    if isinstance(method, Method):
        if params:
            raise HilsimError("give parameters either to the Method or here, not both")
        return method
    return methods.create(method, **params)


class Profile:
    """One loaded profile (a bundle, with the path it was read from) and what hilsim does
    with it: plan, evaluate, compare, recommend, project (PKP)."""

    def __init__(self, bundle: Bundle, path: PathLike | None = None) -> None:
        self.bundle = bundle
        self.path = Path(path) if path is not None else None

    @classmethod
    def load(cls, path: PathLike, columns: Iterable[str] | None = None) -> Profile:
        """A bundle folder or any importable profile file.

        ``columns``: of a bundle folder, read only these launch columns (a method's
        ``launch_columns``; the rest stay on disk).
        """
        return cls(load_profile(path, columns=columns), path)

    def __repr__(self) -> str:
        where = f" from {self.path}" if self.path is not None else ""
        return f"<Profile{where}: {self.n_launches:,} launches>"

    @property
    def launches(self) -> pd.DataFrame:
        return self.bundle.launches

    @property
    def n_launches(self) -> int:
        return self.bundle.n_launches

    @property
    def manifest(self) -> dict[str, Any]:
        return self.bundle.manifest

    def warnings(self, method: str = "any method") -> list[str]:
        """The trace's warnings (manifest and launches), and what makes it a poor input
        for ``method``."""
        return bundle_warnings(self.bundle) + method_warnings(self.bundle.launches, method)

    def plan(self, method: str | Method, **params: Any) -> Plan:
        """A sampling plan by ``method`` (a registered name with its ``params``, or a
        :class:`~hilsim.analyzer.methods.base.Method`), with the sampled launches' names
        and the trace's warnings for the method (``diagnostics["trace_warnings"]``)."""
        chosen = _method(method, params)
        plan = chosen.plan(self.bundle).attach_names(self.bundle.launches["name"])
        plan.diagnostics["trace_warnings"] = self.warnings(chosen.name)
        return plan

    def evaluate(
        self,
        plan: Plan | PathLike | None = None,
        *,
        method: str | Method | None = None,
        params: dict[str, Any] | None = None,
        seeds: int = 20,
        on: Profile | None = None,
        progress: Progress | None = None,
    ) -> Evaluation:
        """Score ``plan`` (a Plan or a plan file), or ``method`` planned with seeds
        0..``seeds``-1 (once when deterministic), against the truth of ``on`` (default
        this profile: another run or GPU of the same workload scores out of sample)."""
        from hilsim.analyzer.evaluate import evaluate_method, score_plan  # lazy: see the imports

        if (plan is None) == (method is None):
            raise HilsimError("evaluate: give either a plan or a method")
        target = (on or self).bundle
        if plan is not None:
            path = None if isinstance(plan, Plan) else str(plan)
            chosen_plan = plan if isinstance(plan, Plan) else load_plan(plan)
            return Evaluation(chosen_plan.method, score_plan(chosen_plan, target), plan=path)
        assert method is not None
        chosen = _method(method, params or {})
        summary = evaluate_method(chosen, self.bundle, seeds, on=target, progress=progress)
        return Evaluation(chosen.name, summary.first_score, summary)

    def compare(
        self,
        methods: str | Sequence[str] = "all",
        *,
        seeds: int = 10,
        holdout: Profile | None = None,
        params: dict[str, dict[str, Any]] | None = None,
        budget_of: str | None = "stem",
        budget: str = "time",
        workers: int | None = None,
        progress: Progress | None = None,
    ) -> Comparison:
        """Every method in ``methods`` ("all": every registered one) over ``seeds``,
        scored here or on ``holdout``; random and first-n at ``budget_of``'s budget
        (the same simulated ``time`` or number of ``launches``, seed by seed).
        ``params``: per method, its parameters (``{"stem": {"epsilon": 0.01}}``)."""
        from hilsim.analyzer.compare import compare_profile  # lazy: see the imports

        names = [methods] if isinstance(methods, str) else list(methods)
        document = compare_profile(
            self.bundle,
            self.path,
            names,
            seeds,
            holdout.bundle if holdout is not None else None,
            holdout.path if holdout is not None else None,
            params or {},
            workers,
            progress,
            budget_of,
            budget,
        )
        return Comparison(document)

    def recommend(
        self,
        target_error: float,
        *,
        holdout: Profile | None = None,
        seeds: int = 20,
        quantile: float = 0.95,
        budget_s: float = 300.0,
        progress: Progress | None = None,
    ) -> Recommendation:
        """The fastest (method, parameters) of the default grid whose ``quantile`` error
        over ``seeds`` stays under ``target_error`` (on ``holdout``, else on both halves
        of this profile); :func:`hilsim.analyzer.recommend.winner_plan` builds its plan."""
        from hilsim.analyzer.recommend import (  # lazy: see the imports
            Recommendation,
            default_candidates,
            recommend,
        )

        result = recommend(
            self.bundle,
            target_error,
            holdout.bundle if holdout is not None else None,
            seeds,
            quantile,
            default_candidates(),
            budget_s,
            progress,
        )
        return Recommendation(
            result,
            str(self.path) if self.path is not None else None,
            str(holdout.path) if holdout is not None and holdout.path is not None else None,
        )

    def pkp(
        self,
        plan: Plan | PathLike,
        *,
        model: str | None = None,
        cta_trace: PathLike | None = None,
        gpgpusim_log: PathLike | None = None,
        window_cycles: float = 3000.0,
        s: float = 0.25,
        relative: bool = False,
    ) -> Projection:
        """Principal Kernel Projection of ``plan``'s sampled launches (PKA section 3.2):
        each is simulated until its windowed IPC is stable, the rest projected.

        IPC timelines from exactly one of: the analytical timing ``model`` (a timing.json
        or preset name; needs counters), a per-CTA ``cta_trace`` CSV, or a GPGPU-Sim run
        folder with visualizer samples (``gpgpusim_log``). Returns the
        :class:`Projection`: :func:`hilsim.simmodel.pkp.project_plan`'s document plus
        ``timelines`` (the source).
        """
        # lazy: see the imports
        from hilsim.analyzer.evaluate import check_compatible
        from hilsim.analyzer.validate import launch_table_with_metrics
        from hilsim.simmodel.gpgpusim.visualizer import read_timelines
        from hilsim.simmodel.model import ipc_timeline, require_counters
        from hilsim.simmodel.pkp import project_plan, read_cta_trace
        from hilsim.simmodel.presets import load_timing_config

        if sum(x is not None for x in (model, cta_trace, gpgpusim_log)) != 1:
            raise HilsimError("pkp: give exactly one of model, cta_trace or gpgpusim_log")
        chosen = plan if isinstance(plan, Plan) else load_plan(plan)
        check_compatible(chosen, self.bundle)
        ids = chosen.samples["launch_id"].to_numpy(dtype=np.int64)
        if gpgpusim_log is not None:
            timelines = read_timelines(gpgpusim_log)
            source = f"GPGPU-Sim visualizer samples {gpgpusim_log}"
        elif cta_trace is not None:
            timelines = read_cta_trace(cta_trace)
            source = f"CTA trace {cta_trace}"
        else:
            config = load_timing_config(str(model))
            inputs = launch_table_with_metrics(self.bundle).iloc[ids]
            require_counters(inputs, f"{self.path or 'profile'}: --model")
            timelines = dict(zip(ids.tolist(), ipc_timeline(config, inputs), strict=True))
            source = f"analytical model ({config.name})"
        result = project_plan(chosen, timelines, window_cycles=window_cycles, s=s,
                              relative=relative)
        result["timelines"] = source
        return Projection(result, chosen)


__all__ = [
    "Comparison",
    "Evaluation",
    "ImportResult",
    "Profile",
    "Projection",
    "import_bundle",
]
