"""Comparing sampling methods: every method over seeds, planned on one bundle and scored
on it or on a holdout run (STEM+ROOT Table 3), the baselines at the budget of the method
they are compared to; the rows ranked and the Pareto front marked (STEM Fig. 9).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from hilsim.analyzer import methods
from hilsim.analyzer.compare.budget import (
    BUDGET_KINDS,
    budget_label,
    budget_tasks,
    matched_baselines,
    method_tasks,
)
from hilsim.analyzer.compare.columns import ColumnReader, launch_columns
from hilsim.analyzer.compare.memory import comparison_workers, unread_column_bytes
from hilsim.analyzer.compare.pareto import ranked
from hilsim.analyzer.compare.pool import TaskRunner, task_runner
from hilsim.analyzer.compare.scoring import (
    NO_REDUCTION_SHARE,
    NO_REDUCTION_SPEEDUP,
    MethodResult,
)

from hilsim.core import limits
from hilsim.core.bundle import Bundle
from hilsim.core.errors import HilsimError


def compare_methods(
    bundle: Bundle,
    names: list[str] | None = None,
    seeds: int = 10,
    holdout: Bundle | None = None,
    params: dict[str, dict[str, Any]] | None = None,
    workers: int | None = None,
    progress: Any = None,
    budget_of: str | None = "stem",
    budget: str = "time",
    columns_of: ColumnReader | None = None,
) -> dict[str, Any]:
    """Run ``names`` (default: every registered method) over ``seeds`` and score them.

    ``columns_of``: when given, ``bundle`` may hold only the columns every method reads
    (``launch_id``, ``name``, ``kernel``, ``duration_ns``); each method's own launch
    columns are read with it when its runs start and dropped when the next method's
    start (runs in this process), or read once for all of them (worker processes). The
    largest method, not the union of all, then sets the memory.

    Baselines at the same budget: when ``budget_of`` (default ``stem``) is among the
    methods and ran, ``random`` and ``first-n`` (those of them in ``names`` whose
    parameters were not set in ``params``) run at that method's budget, seed by seed:
    the same simulated time (``budget="time"``, so the speedups match) or the same
    number of simulated launches (``budget="launches"``). ``budget_of=None`` runs them
    at their own defaults.

    Rows that do not reduce the simulation
    (:func:`~hilsim.analyzer.compare.scoring.reduction_flag`) are marked ``no_reduction``
    and left off the Pareto front; every plan note is carried as a row's ``warnings``; a
    method that ran without its inputs is labelled with what it had
    (:func:`~hilsim.analyzer.compare.scoring.method_label`).

    ``workers`` (default: one per CPU, at most one per run) is lowered to what the
    available memory holds
    (:func:`~hilsim.analyzer.compare.memory.memory_capped_workers`).

    Returns ``{"methods": [summary...], "skipped": {name: reason}, "holdout": bool,
    "seeds": [int], "budget": {...} | None, "thresholds": {...}, "workers": int,
    "workers_note": str | None}``.
    """
    params = params or {}
    names = _checked_names(names, seeds, params, workers, budget_of, budget)
    matched = matched_baselines(names, params, budget_of)
    first_phase = [n for n in names if n not in matched]
    rows = _Rows(progress)
    for name in first_phase:
        rows.add_row(name, name, params.get(name, {}))
    tasks = method_tasks(first_phase, seeds)
    n_tasks = len(tasks) + sum((seeds if methods.get(n).stochastic else 1) for n in matched)
    union = launch_columns([*first_phase, *matched], params)
    # the columns a worker would read besides those given
    unread = 0 if columns_of is None else unread_column_bytes(bundle, union)
    workers, workers_note = comparison_workers(
        workers or min(n_tasks, os.cpu_count() or 1), [bundle, holdout or bundle], unread
    )
    if columns_of is not None and workers > 1:  # workers get every column they read
        bundle = columns_of(union)
    with task_runner(workers, bundle, holdout or bundle, params, columns_of) as run:
        rows.collect(run(tasks))
        _run_baselines(rows, run, matched, budget_of, seeds, budget)
    return {
        "methods": ranked(rows.summaries((holdout or bundle).n_launches)),
        "skipped": rows.skipped,
        "holdout": holdout is not None,
        "seeds": list(range(seeds)),
        "budget": {"of": budget_of, "kind": budget, "baselines": matched} if matched else None,
        "thresholds": {
            "no_reduction_speedup": NO_REDUCTION_SPEEDUP,
            "no_reduction_share": NO_REDUCTION_SHARE,
        },
        "workers": workers,
        "workers_note": workers_note,
    }


def _checked_names(
    names: list[str] | None,
    seeds: int,
    params: dict[str, dict[str, Any]],
    workers: int | None,
    budget_of: str | None,
    budget: str,
) -> list[str]:
    """The methods to compare (``None``/``["all"]``: every registered one), after one-line
    refusals of the budget, seeds, workers, unknown names and bad parameters."""
    if budget not in BUDGET_KINDS:
        raise HilsimError(f"compare: budget must be one of {', '.join(BUDGET_KINDS)}")
    limits.check_seeds(seeds, "compare: --seeds")
    if workers is not None and (isinstance(workers, bool) or workers < 1):
        raise HilsimError(f"compare: --workers must be at least 1, got {workers!r}")
    if budget_of is not None and budget_of not in methods.available():
        raise HilsimError(
            f"compare: --budget-of {budget_of!r}: not a method (one of "
            f"{', '.join(methods.available())}, or none)"
        )
    available = methods.available()
    names = available if not names or names == ["all"] else names
    unknown = [n for n in [*names, *params] if n not in available]
    if unknown:
        raise HilsimError(f"compare: unknown method(s) {', '.join(dict.fromkeys(unknown))}")
    for name, given in params.items():
        methods.create(name, **given)  # unknown or bad parameters: one line now
    return names


@dataclass
class _Rows:
    """The rows a comparison fills as outcomes arrive, by row label, and the methods that
    could not run; ``progress()`` is called once per outcome."""

    progress: Any = None
    results: dict[str, MethodResult] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)

    def add_row(
        self, label: str, name: str, params: dict[str, Any], budget: dict[str, Any] | None = None
    ) -> None:
        """An empty row of method ``name`` created with ``params`` (its seed left out)."""
        merged = methods.create(name, **params).params()
        merged.pop("seed", None)
        needs = tuple(methods.get(name).needs)
        self.results[label] = MethodResult(label, name, needs, params=merged, budget=budget)

    def collect(self, outcomes: Iterable[dict[str, Any]]) -> None:
        for outcome in list(self._counted(outcomes)):
            if "skipped" in outcome:
                self.skipped[outcome["key"]] = outcome["skipped"]
                continue
            self.results[outcome["key"]].add(outcome)

    def _counted(self, outcomes: Iterable[dict[str, Any]]) -> Iterable[dict[str, Any]]:
        for outcome in outcomes:
            yield outcome
            if self.progress:
                self.progress()

    def summaries(self, n_launches: int) -> list[dict[str, Any]]:
        """The summary of every row that ran (not skipped, at least one seed)."""
        return [
            r.summary(n_launches)
            for key, r in self.results.items()
            if key not in self.skipped and r.errors
        ]


def _run_baselines(
    rows: _Rows,
    run: TaskRunner,
    matched: list[str],
    budget_of: str | None,
    seeds: int,
    budget: str,
) -> None:
    """The ``matched`` baselines at ``budget_of``'s budget, seed by seed, when that method
    ran; at their own defaults when it did not."""
    reference = rows.results.get(budget_of) if budget_of else None
    if matched and reference is not None and reference.errors:
        second = budget_tasks(reference, matched, seeds, budget)
        for name in matched:
            label = budget_label(name, reference, budget)
            rows.add_row(label, name, {}, budget={"of": reference.name, "kind": budget})
        rows.collect(run(second))
        for label, result in rows.results.items():
            if result.budget is not None:
                result.budget["per_seed"] = {t[1]: t[2] for t in second if t[3] == label}
    elif matched:
        # no reference to match: the baselines run at their own defaults
        for name in matched:
            rows.add_row(name, name, {})
        rows.collect(run(method_tasks(matched, seeds)))
