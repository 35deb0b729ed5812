"""``hilsim portability``: evaluate a plan chosen on GPU A on a bundle from GPU B.

The plan JSON keeps only A's sequence digest and the sampled names, so the plan's
source bundle is required (``--source``) to align the two launch sequences. See
:mod:`hilsim.analyzer.portability`.
"""

from __future__ import annotations

from pathlib import Path

import click

from hilsim.analyzer.portability import evaluate_portability
from hilsim.analyzer.report import write_result
from hilsim.core.files import check_output
from hilsim.core.plan import load_plan
from hilsim.formats.read import load_profile


@click.command("portability")
@click.option("--plan", "plan_path", required=True, type=click.Path(path_type=Path),
              help="Plan JSON chosen on bundle A.")
@click.option("--source", "source_path", required=True, type=click.Path(path_type=Path),
              help="Bundle A, the plan's source (needed to align launch sequences).")
@click.option("--bundle", "target_path", required=True, type=click.Path(path_type=Path),
              help="Bundle B: the same workload on another GPU.")
@click.option("-o", "--output", required=True, type=click.Path(path_type=Path),
              help="JSON result to write (atomically).")
def portability_cmd(plan_path: Path, source_path: Path, target_path: Path, output: Path) -> None:
    """Error, per-kernel-class changes and predicted speedup of an A-plan on B."""
    check_output(output)  # refused before the work, not after it
    plan = load_plan(plan_path)
    result = evaluate_portability(plan, load_profile(source_path), load_profile(target_path))
    write_result(output, result)
    al = result["alignment"]
    sp = result["speedup_b_over_a"]
    click.echo(
        f"error on B {100 * result['error']:.2f}% (on A {100 * result['error_on_a']:.2f}%); "
        f"unaligned: {al['unaligned_a']} A launches "
        f"({100 * (al['unaligned_a_time_fraction'] or 0):.2f}% of A's time), "
        f"{al['unaligned_b']} B launches "
        f"({100 * (al['unaligned_b_time_fraction'] or 0):.2f}% of B's time); "
        f"speedup B/A predicted {sp['predicted']:.3f} vs true {sp['true']:.3f}"
    )
    click.echo(f"wrote {output}")
