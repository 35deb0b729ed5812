"""``hilsim quickstart``: the main job end to end on the shipped real profiles.

For each example: import -> bundle -> STEM+ROOT, PKA, random and first-n plans ->
evaluation over seeds (STEM section 4.1: mean and max error, harmonic-mean speedup);
writes the bundle, the plans and one ``result.json`` into the output folder. The
results come back as :class:`ExampleResult` objects for the caller to print.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hilsim.analyzer import methods
from hilsim.analyzer.compare import method_label
from hilsim.analyzer.evaluate import MethodSummary, PlanScore, evaluate_method
from hilsim.analyzer.examples import EXAMPLES, Example
from hilsim.analyzer.report import write_result

from hilsim.core.bundle import write_bundle
from hilsim.core.console import progress_bar
from hilsim.core.errors import HilsimError
from hilsim.formats.read import import_profile

QUICKSTART_METHODS: tuple[str, ...] = ("stem", "pka", "random", "first-n")


@dataclass
class ExampleResult:
    """One example's methods evaluated over seeds.

    Attributes:
        example: the shipped example.
        n_launches: launches of its profile.
        bundle: the bundle folder written.
        rows: ``(label, first seed's score, summary over seeds)`` per method that ran, as
            :func:`hilsim.analyzer.report.print_summary` takes them.
        methods: per method that ran, its summary (``MethodSummary.to_dict``) and the notes
            its plan carried.
        skipped: per method the profile could not feed, the one-line reason.
    """

    example: Example
    n_launches: int
    bundle: Path
    rows: list[tuple[str, PlanScore, MethodSummary]] = field(default_factory=list)
    methods: dict[str, dict[str, Any]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)

    @property
    def title(self) -> str:
        return f"{self.example.name}: {self.example.description}"

    def notes(self) -> list[tuple[str, str]]:
        """``(method, note)`` for every note a plan carried (e.g. PKA metrics that were
        missing)."""
        return [(name, note) for name, result in self.methods.items()
                for note in result.get("notes", [])]

    def to_dict(self) -> dict[str, Any]:
        return {
            "example": self.example.name,
            "description": self.example.description,
            "n_launches": self.n_launches,
            "bundle": str(self.bundle),
            "methods": self.methods,
            "skipped": self.skipped,
        }


@dataclass
class QuickstartResult:
    """Every example's result and the ``result.json`` that holds them."""

    examples: list[ExampleResult]
    path: Path

    def to_dict(self) -> dict[str, Any]:
        return {"examples": [example.to_dict() for example in self.examples]}


def run_example(example: Example, output: Path, seeds: int) -> ExampleResult:
    """Import one example, plan and evaluate every quickstart method on it."""
    ncu = example.path(example.ncu) if example.ncu else None
    bundle = import_profile(example.path(example.profile), ncu=ncu)
    folder = output / example.name
    write_bundle(bundle, folder / "bundle", overwrite=True)
    result = ExampleResult(example, bundle.n_launches, folder / "bundle")
    for name in QUICKSTART_METHODS:
        method = methods.create(name)
        runs = seeds if method.stochastic else 1
        try:
            with progress_bar(f"{example.name}: {name}", runs) as advance:
                summary = evaluate_method(method, bundle, seeds, progress=advance)
        except HilsimError as exc:  # the profile lacks what the method needs
            result.skipped[name] = str(exc)
            continue
        plan = summary.first_plan.attach_names(bundle.launches["name"])
        plan.save(folder / f"plan-{name}.json")
        result.rows.append((method_label(name, plan), summary.first_score, summary))
        result.methods[name] = summary.to_dict() | {"notes": plan.notes}
    return result


def run_quickstart(
    output: str | Path,
    seeds: int = 20,
    on_example: Callable[[ExampleResult], None] | None = None,
) -> QuickstartResult:
    """Run every shipped example and write ``OUTPUT/result.json``; ``on_example`` is
    called with each example's result as soon as it is done (to print it)."""
    if seeds < 1:
        raise HilsimError("quickstart: --seeds must be at least 1")
    folder = Path(output)
    examples = []
    for example in EXAMPLES:
        examples.append(run_example(example, folder, seeds))
        if on_example is not None:
            on_example(examples[-1])
    result = QuickstartResult(examples, folder / "result.json")
    result.path = write_result(result.path, result.to_dict())
    return result
