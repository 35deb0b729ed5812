"""One row of a comparison: a method (or a budget-matched baseline) over seeds, and what
its figures say (STEM+ROOT Table 3: harmonic-mean speedup, mean and max error, plan time,
the profiling level the method needs).

A row that simulates a large share of the launches, or buys too little speedup, does not
reduce the simulation (:func:`reduction_flag`); a method that ran without all of its
inputs is labelled with what it had (:func:`method_label`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: what each kind of input costs to collect (STEM Table 5 discussion)
PROFILING_LEVEL = {
    "durations": "light (timeline: nsys/CUPTI/torch)",
    "metrics": "detailed (ncu counters)",
    "regions": "light + NVTX regions",
}

#: a method that simulates this big a share of the launches, or buys less than this
#: speedup, does not reduce the simulation: marked "no reduction" and kept off the Pareto
#: front (megsim on a short trace, first-n with n >= the launch count rank first at 0%
#: error otherwise)
NO_REDUCTION_SPEEDUP = 2.0
NO_REDUCTION_SHARE = 0.5


def profiling_level(needs: tuple[str, ...]) -> str:
    """The costliest profiling a method's inputs need (detailed > regions > light)."""
    for kind in ("metrics", "regions", "durations"):
        if kind in needs:
            return PROFILING_LEVEL[kind]
    return ", ".join(needs)


def method_label(name: str, plan: Any) -> str:
    """Method name, flagged with the inputs it really had: PKA on fewer than its 12 Table 2
    metrics ("pka (1/12 metrics)"), TBPoint on light features instead of counters."""
    diagnostics = getattr(plan, "diagnostics", None) or {}
    used = diagnostics.get("features_used")
    if name == "pka" and used is not None and len(used) < 12:
        return f"pka ({len(used)}/12 metrics)"
    if name == "tbpoint" and diagnostics.get("features") == "light":
        return "tbpoint (light features)"
    return name


def reduction_flag(speedup: float, mean_samples: float, n_launches: int) -> str | None:
    """Why a row is "no reduction" (None when it reduces the simulation)."""
    reasons = []
    if speedup < NO_REDUCTION_SPEEDUP:
        reasons.append(f"speedup {format_speedup(speedup)} < {NO_REDUCTION_SPEEDUP:g}x")
    if n_launches and mean_samples >= NO_REDUCTION_SHARE * n_launches:
        reasons.append(
            f"simulates {mean_samples / n_launches:.0%} of the launches "
            f"(>= {NO_REDUCTION_SHARE:.0%})"
        )
    return "; ".join(reasons) or None


def format_speedup(speedup: float) -> str:
    """Speedup with 2-3 significant digits (1.21x, 12.1x, 121x, 3,022x)."""
    if not np.isfinite(speedup):
        return "inf"
    if speedup < 10:
        return f"{speedup:.2f}x"
    if speedup < 100:
        return f"{speedup:.1f}x"
    return f"{speedup:,.0f}x"


@dataclass
class MethodResult:
    """One method (or one budget-matched baseline) over seeds."""

    method: str  # the row's label
    name: str  # registry name
    needs: tuple[str, ...]
    params: dict[str, Any] = field(default_factory=dict)
    budget: dict[str, Any] | None = None
    seeds: list[int] = field(default_factory=list)
    errors: list[float] = field(default_factory=list)
    speedups: list[float] = field(default_factory=list)
    samples: list[int] = field(default_factory=list)
    sampled_ns: list[float] = field(default_factory=list)
    plan_seconds: list[float] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def add(self, outcome: dict[str, Any]) -> None:
        self.seeds.append(outcome["seed"])
        self.errors.append(outcome["error"])
        self.speedups.append(outcome["speedup"])
        self.samples.append(outcome["n_samples"])
        self.sampled_ns.append(outcome["sampled_ns"])
        self.plan_seconds.append(outcome["seconds"])
        if self.method == self.name and outcome["label"] != self.name:
            self.method = outcome["label"]
        for note in outcome["notes"]:
            if note not in self.warnings:
                self.warnings.append(note)

    def summary(self, n_launches: int) -> dict[str, Any]:
        order = np.argsort(self.seeds, kind="stable")
        errors = [self.errors[i] for i in order]
        speedups = np.asarray([self.speedups[i] for i in order], dtype=float)
        mean_samples = float(np.mean(self.samples))
        hmean = float(len(speedups) / np.sum(1.0 / speedups))
        flag = reduction_flag(hmean, mean_samples, n_launches)
        return {
            "method": self.method,
            "name": self.name,
            "params": self.params,
            "budget": self.budget,
            "runs": len(self.errors),
            "seeds": sorted(self.seeds),
            "mean_error": float(np.mean(errors)),
            "max_error": float(np.max(errors)),
            "min_error": float(np.min(errors)),
            "hmean_speedup": hmean,
            "min_speedup": float(speedups.min()),
            "max_speedup": float(speedups.max()),
            "mean_samples": mean_samples,
            "mean_sampled_ns": float(np.mean(self.sampled_ns)),
            "mean_plan_seconds": float(np.mean(self.plan_seconds)),
            "profiling": profiling_level(self.needs),
            "no_reduction": flag,
            "warnings": list(self.warnings),
            "errors": errors,
            "speedups": speedups.tolist(),
        }
