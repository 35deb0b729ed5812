"""The tasks of a comparison: every method over its seeds, and the baselines at the budget
of the method they are compared to (STEM Table 3 compares methods at their speedups).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hilsim.analyzer import methods
from hilsim.analyzer.compare.pool import Task
from hilsim.analyzer.compare.scoring import MethodResult

#: baselines run at the budget of the method they are compared to (``budget_of``)
BUDGET_BASELINES: tuple[str, ...] = ("random", "first-n")
BUDGET_KINDS: tuple[str, ...] = ("time", "launches")


def matched_baselines(
    names: list[str], params: dict[str, dict[str, Any]], budget_of: str | None
) -> list[str]:
    """The baselines of ``names`` that run at ``budget_of``'s budget: those whose
    parameters ``params`` does not set, when ``budget_of`` is compared too."""
    return [
        n
        for n in BUDGET_BASELINES
        if budget_of and budget_of in names and n in names and n != budget_of and n not in params
    ]


def method_tasks(names: list[str], seeds: int) -> list[Task]:
    """Every method of ``names`` at seeds ``0..seeds-1`` (once when deterministic)."""
    tasks: list[Task] = []
    for name in names:
        stochastic = methods.get(name).stochastic
        tasks.extend((name, s, None, None) for s in (range(seeds) if stochastic else [0]))
    return tasks


def budget_label(name: str, reference: MethodResult, kind: str) -> str:
    """The row of baseline ``name`` at ``reference``'s budget (``"random (stem's time)"``)."""
    return f"{name} ({reference.name}'s {kind})"


def budget_tasks(
    reference: MethodResult, baselines: list[str], seeds: int, kind: str
) -> list[Task]:
    """Tasks of the baselines at ``reference``'s budget, seed by seed: the same simulated
    time (``kind="time"``, so the speedups match), or the same number of simulated
    launches (``kind="launches"``) as the method they are compared to."""
    per_seed = dict(
        zip(
            reference.seeds,
            reference.sampled_ns if kind == "time" else reference.samples,
            strict=True,
        )
    )
    mean = float(np.mean(list(per_seed.values())))
    tasks: list[Task] = []
    for name in baselines:
        label = budget_label(name, reference, kind)
        stochastic = methods.get(name).stochastic
        for seed in range(seeds) if stochastic else [0]:
            budget = per_seed.get(seed, mean) if stochastic else mean
            if kind == "time":
                extra: dict[str, Any] = {"budget_ns": float(budget)}
            elif name == "random":
                extra = {"n_samples": max(1, round(budget))}
            else:
                extra = {"n_launches": max(1, round(budget))}
            tasks.append((name, seed, extra, label))
    return tasks
