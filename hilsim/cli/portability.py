"""``hilsim portability``: evaluate a plan chosen on GPU A on a bundle from GPU B.

The plan JSON keeps only A's sequence digest and the sampled names, so the plan's
source bundle is required (``--source``) to align the two launch sequences. See
:func:`hilsim.analyzer.portability.portability_run`.
"""

from __future__ import annotations

from pathlib import Path

import click

from hilsim.analyzer.portability import portability_run
from hilsim.cli.options import output_option


@click.command("portability")
@click.option("--plan", "plan_path", required=True, type=click.Path(path_type=Path),
              help="Plan JSON chosen on bundle A.")
@click.option("--source", "source_path", required=True, type=click.Path(path_type=Path),
              help="Bundle A, the plan's source (needed to align launch sequences).")
@click.option("--bundle", "target_path", required=True, type=click.Path(path_type=Path),
              help="Bundle B: the same workload on another GPU.")
@output_option("JSON result to write (atomically).", required=True)
def portability_cmd(plan_path: Path, source_path: Path, target_path: Path, output: Path) -> None:
    """Error, per-kernel-class changes and predicted speedup of an A-plan on B."""
    run = portability_run(plan_path, source_path, target_path, output)
    for line in run.lines():
        click.echo(line)
