"""``hilsim quickstart``: the main job on the shipped examples.

See :func:`hilsim.analyzer.quickstart.run_quickstart` (the real profiles) and
:func:`hilsim.analyzer.simexample.run_simulated_example` (the simulated V100).
"""

from __future__ import annotations

from pathlib import Path

import click

from hilsim.analyzer.quickstart import ExampleResult, run_quickstart
from hilsim.analyzer.report import print_summary
from hilsim.analyzer.simexample import run_simulated_example
from hilsim.cli.options import output_option
from hilsim.core.console import out


def print_example(result: ExampleResult) -> None:
    """One example's summary table, the methods it skipped and its plans' notes."""
    print_summary(result.rows, title=result.title)
    for name, reason in result.skipped.items():
        out.print(f"[yellow]{name} skipped[/yellow]: {reason}", markup=True, highlight=False)
    for name, note in result.notes():
        out.print(f"[dim]{name}: {note}[/dim]", highlight=False)


@click.command("quickstart")
@output_option("Folder for bundles, plans and result.", default=Path("hilsim-quickstart"))
@click.option("--seeds", default=20, show_default=True, help="Seeds for stochastic methods.")
@click.option("--example", "example", type=click.Choice(["profiles", "simulated-v100"]),
              default="profiles", show_default=True,
              help="profiles: the shipped real profiles; simulated-v100: validate, pkp, "
                   "portability and dse on shipped GPGPU-Sim runs (docs/tutorial-new-card.md).")
def quickstart_cmd(output: Path, seeds: int, example: str) -> None:
    """Run the main job on the real profiles shipped with hilsim.

    Imports each example, builds STEM+ROOT and PKA plans (plus the random and
    first-n baselines), evaluates them over seeds, prints the summary table and
    writes OUTPUT/<example>/{bundle/, plan-*.json} and OUTPUT/result.json
    (files of an earlier quickstart run there are replaced).
    """
    if example == "simulated-v100":
        run_simulated_example(output)
        return
    result = run_quickstart(output, seeds=seeds, on_example=print_example)
    out.print(f"wrote plans, bundles and {result.path}")
