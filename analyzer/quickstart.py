"""``hilsim quickstart``: the main job end to end on the shipped real profiles.

For each example: import -> bundle -> STEM+ROOT, PKA, random and first-n plans ->
evaluation over seeds -> rich summary table; writes the bundle, the plans and one
``result.json`` into the output folder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hilsim.analyzer import methods
from hilsim.analyzer.compare import method_label
from hilsim.analyzer.evaluate import evaluate_method
from hilsim.analyzer.examples import EXAMPLES, Example
from hilsim.analyzer.importers.profile import import_profile
from hilsim.analyzer.report import print_summary, write_result

from hilsim.core.bundle import write_bundle
from hilsim.core.console import out, progress_bar
from hilsim.core.errors import HilsimError

QUICKSTART_METHODS: tuple[str, ...] = ("stem", "pka", "random", "first-n")


def summary_notes(name: str, result: dict[str, Any]) -> list[str]:
    """Notes a plan carried (e.g. PKA metrics that were missing)."""
    return list(result.get("notes", []))


def run_example(example: Example, output: Path, seeds: int) -> dict[str, Any]:
    """Import one example, plan and evaluate every quickstart method on it."""
    ncu = example.path(example.ncu) if example.ncu else None
    bundle = import_profile(example.path(example.profile), ncu=ncu)
    folder = output / example.name
    write_bundle(bundle, folder / "bundle", overwrite=True)
    rows, results, skipped = [], {}, {}
    for name in QUICKSTART_METHODS:
        method = methods.create(name)
        runs = seeds if method.stochastic else 1
        try:
            with progress_bar(f"{example.name}: {name}", runs) as advance:
                summary = evaluate_method(method, bundle, seeds, progress=advance)
        except HilsimError as exc:  # the profile lacks what the method needs
            skipped[name] = str(exc)
            continue
        plan = summary.first_plan.attach_names(bundle.launches["name"])
        plan.save(folder / f"plan-{name}.json")
        rows.append((method_label(name, plan), summary.first_score, summary))
        results[name] = summary.to_dict() | {"notes": plan.notes}
    print_summary(rows, title=f"{example.name}: {example.description}")
    for name, reason in skipped.items():
        out.print(f"[yellow]{name} skipped[/yellow]: {reason}", markup=True, highlight=False)
    for name in results:
        for note in summary_notes(name, results[name]):
            out.print(f"[dim]{name}: {note}[/dim]", highlight=False)
    return {
        "example": example.name,
        "description": example.description,
        "n_launches": bundle.n_launches,
        "bundle": str(folder / "bundle"),
        "methods": results,
        "skipped": skipped,
    }


def run_quickstart(output: str | Path, seeds: int = 20) -> dict[str, Any]:
    """Run every shipped example; returns (and writes) the combined result."""
    if seeds < 1:
        raise HilsimError("quickstart: --seeds must be at least 1")
    folder = Path(output)
    result = {"examples": [run_example(ex, folder, seeds) for ex in EXAMPLES]}
    path = write_result(folder / "result.json", result)
    out.print(f"wrote plans, bundles and {path}")
    return result
