"""Baseline plans the papers compare against.

* ``random`` — uniform random sampling of launches with a fixed probability
  (STEM section 4.1 uses 0.1% for the HuggingFace suite); each sampled launch
  weighs ``1 / fraction`` scaled so the weights sum to the number of launches.
  At a fixed budget instead (``hilsim compare`` runs it at the budget of the method
  it is compared to): exactly ``n_samples`` launches, or ``budget_ns`` of simulated
  time, drawn uniformly without replacement.
* ``first-n`` — simulate the first launches only (the "first N instructions"
  truncation baseline of PKA section 5 / STEM Table 3): stop after ``n_launches``
  launches or after ``n_instructions`` instructions (needs
  ``smsp__inst_executed.sum`` in the metrics). The prefix is scaled up to the
  whole workload: weight = total launches / sampled launches (or by
  instructions, total / prefix, when cut by instructions and all launches
  have instruction counts), or the longest prefix within ``budget_ns`` of
  simulated time.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from hilsim.analyzer.methods import register
from hilsim.analyzer.methods.base import Method, source_facts
from hilsim.analyzer.methods.params import SEED, Constraints, Interval, InvalidParameter
from hilsim.analyzer.methods.support import INSTRUCTIONS

from hilsim.core.bundle import Bundle
from hilsim.core.errors import HilsimError
from hilsim.core.plan import Plan, samples_frame


@register
class RandomUniform(Method):
    """Uniform random launch sampling (STEM section 4.1 baseline).

    Args:
        fraction: probability of keeping each launch (default 0.001).
        seed: random seed.
        min_samples: at least this many launches are drawn (default 1).
        n_samples: draw exactly this many launches (uniform, without replacement)
            instead of keeping each with probability ``fraction``.
        budget_ns: draw as many launches as this simulated time buys on average
            (``round(budget_ns / mean duration)``, at least one; uniform, without
            replacement, so the estimate stays unbiased): the same-time baseline.
    """

    name: ClassVar[str] = "random"
    stochastic: ClassVar[bool] = True
    launch_columns: ClassVar[tuple[str, ...] | None] = ()
    parameter_constraints: ClassVar[dict[str, Constraints]] = {
        "fraction": [Interval(float, 0, 1, closed="right")],
        "seed": [SEED],
        "min_samples": [Interval(int, 1, None)],
        "n_samples": [Interval(int, 1, None), None],
        "budget_ns": [Interval(float, 0, None, closed="neither"), None],
    }

    def __init__(
        self,
        fraction: float = 0.001,
        seed: int = 0,
        min_samples: int = 1,
        n_samples: int | None = None,
        budget_ns: float | None = None,
    ) -> None:
        self.init_params(locals())
        if n_samples is not None and budget_ns is not None:
            raise InvalidParameter(
                self.name,
                "budget_ns",
                f"budget_ns must be None when n_samples is given (give one of them, not "
                f"both), got {budget_ns!r}",
            )

    def plan(self, bundle: Bundle) -> Plan:
        n = bundle.n_launches
        rng = np.random.default_rng(self.seed)
        durations = bundle.launches["duration_ns"].to_numpy()
        size = self.n_samples
        if self.budget_ns is not None:
            mean = float(durations.mean(dtype=np.float64)) if n else 0.0
            size = max(1, round(self.budget_ns / mean)) if mean > 0 else n
        if size is not None:
            keep = np.sort(rng.choice(n, size=min(n, size), replace=False))
        else:
            keep = np.flatnonzero(rng.random(n) < self.fraction)
            if len(keep) < self.min_samples:
                keep = np.sort(rng.choice(n, size=min(n, self.min_samples), replace=False))
        weights = np.full(len(keep), n / len(keep))
        cluster = {
            "cluster": 0,
            "label": "all launches",
            "size": n,
            "draws": int(len(keep)),
            "mean_ns": float(durations.mean()),
            "std_ns": float(durations.std()),
        }
        return Plan(
            method=self.name,
            params=self.params(),
            source=source_facts(bundle),
            clusters=[cluster],
            samples=samples_frame(keep, weights, np.zeros(len(keep))),
            sampling="random",
            members=lambda: np.zeros(n, dtype=np.int64),  # built only if asked
        )


@register
class FirstN(Method):
    """Simulate a prefix of the workload and scale it up (truncation baseline).

    Args:
        n_launches: number of first launches to keep (default 1000), or
        n_instructions: keep launches until this many instructions
            (``smsp__inst_executed.sum``) have run; overrides ``n_launches``.
        budget_ns: keep the longest prefix whose simulated time stays within this
            budget (at least one launch); overrides ``n_launches``.
    """

    name: ClassVar[str] = "first-n"
    launch_columns: ClassVar[tuple[str, ...] | None] = ()
    parameter_constraints: ClassVar[dict[str, Constraints]] = {
        "n_launches": [Interval(int, 1, None)],
        "n_instructions": [Interval(float, 0, None, closed="neither"), None],
        "budget_ns": [Interval(float, 0, None, closed="neither"), None],
    }

    def __init__(
        self,
        n_launches: int = 1000,
        n_instructions: float | None = None,
        budget_ns: float | None = None,
    ) -> None:
        self.init_params(locals())

    def plan(self, bundle: Bundle) -> Plan:
        n = bundle.n_launches
        notes: list[str] = []
        if self.budget_ns is not None and self.n_instructions is None:
            spent = np.cumsum(bundle.launches["duration_ns"].to_numpy(), dtype=np.float64)
            count = max(1, int(np.searchsorted(spent, self.budget_ns, side="right")))
            scale = n / count
            notes.append(f"first {count} launches fit in {self.budget_ns:,.0f} ns")
        elif self.n_instructions is not None:
            inst = _instructions(bundle)
            cumulative = np.cumsum(inst)
            count = int(np.searchsorted(cumulative, self.n_instructions, side="left")) + 1
            count = min(count, n)
            scale = float(cumulative[-1] / cumulative[count - 1])
            notes.append(f"first {count} launches hold {self.n_instructions:.3g} instructions")
        else:
            count = min(self.n_launches, n)
            scale = n / count
        keep = np.arange(count)
        durations = bundle.launches["duration_ns"].to_numpy()
        cluster = {
            "cluster": 0,
            "label": f"first {count} launches",
            "size": n,
            "draws": count,
            "mean_ns": float(durations[:count].mean()),
            "std_ns": float(durations[:count].std()),
        }
        return Plan(
            method=self.name,
            params=self.params(),
            source=source_facts(bundle),
            clusters=[cluster],
            samples=samples_frame(keep, np.full(count, scale), np.zeros(count)),
            notes=notes,
            members=np.zeros(n, dtype=np.int64),
        )


def _instructions(bundle: Bundle) -> np.ndarray:
    metrics = bundle.metrics
    if metrics is None or INSTRUCTIONS not in metrics.columns:
        raise HilsimError(
            f"first-n: n_instructions needs the metric {INSTRUCTIONS} for every launch; "
            "the bundle has none (profile with --detailed-all, or use n_launches)"
        )
    values = np.full(bundle.n_launches, np.nan)
    values[metrics["launch_id"].to_numpy()] = metrics[INSTRUCTIONS].to_numpy(dtype=float)
    if np.isnan(values).any():
        missing = int(np.flatnonzero(np.isnan(values))[0])
        raise HilsimError(
            f"first-n: launch {missing} has no {INSTRUCTIONS}; n_instructions needs "
            "instruction counts for every launch"
        )
    return values
