"""``hilsim simulate PLAN --card C -- PROGRAM ARGS``: simulate only a plan's launches.

See :func:`hilsim.analyzer.simulate.simulate_plan`.
"""

from __future__ import annotations

import math
from pathlib import Path

import click

from hilsim.analyzer.simulate import simulate_plan
from hilsim.core.errors import HilsimError
from hilsim.simmodel.gpgpusim.cards import parse_override


@click.command("simulate", context_settings={"ignore_unknown_options": True})
@click.argument("plan", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--card", required=True,
              help="Shipped card name (see `hilsim gpgpusim cards`) or a gpgpusim.config path.")
@click.option("-O", "--sim-option", "overrides", multiple=True, metavar="-OPT=VALUE",
              help="Override a card option, e.g. -O -gpgpu_n_clusters=4 (repeatable; the "
                   "same as `hilsim agent profile -O`).")
@click.option("-o", "--out", "out_dir", required=True,
              type=click.Path(file_okay=False, path_type=Path),
              help="Folder for sampled.log (what `hilsim validate --sim` reads), cold.log, "
                   "samples.csv, plan.json, the launch list and simulate.json.")
@click.option("--warmup", default=None, metavar="SPEC",
              help="Warm-up of the samples: none, l2-fill, preceding:K, bracket "
                   "(l2-fill + cold-bound), auto (bracket, K chosen), joined by '+' "
                   "[the plan's recorded warm-up, else auto].")
@click.option("--profile", type=click.Path(path_type=Path), default=None,
              help="The bundle the plan was made on: its DRAM reads place each sample "
                   "between its warm and cold run [the plan's source path if it exists].")
@click.option("--full-cycles", type=float, default=None,
              help="Cycles of the full run to report the saving against [the plan's source "
                   "total at the card's clock].")
@click.option("--timeout", "timeout_s", default=4 * 3600.0, show_default=True,
              help="Seconds before a simulation is killed.")
@click.option("--force", is_flag=True, help="Replace a simulation already in the folder.")
@click.argument("program", nargs=-1, required=True, type=click.UNPROCESSED)
def simulate_cmd(plan: Path, card: str, overrides: tuple[str, ...], out_dir: Path,
                 warmup: str | None, profile: Path | None, full_cycles: float | None,
                 timeout_s: float, force: bool, program: tuple[str, ...]) -> None:
    """Run only PLAN's launches of PROGRAM on a simulated card (sampled simulation).

    The program gets the launch list as `--launches FILE` (or where an argument holds
    `{launches}`) and must print `hilsim-launch K` before launch K (the shipped workloads
    do: `hilsim/simmodel/gpgpusim/workloads/README.md`). Give it the same arguments as
    the profiled run. Then:
    hilsim validate --silicon RUN.bundle --plan PLAN --sim OUT
    """
    if not (math.isfinite(timeout_s) and timeout_s > 0):
        raise HilsimError(f"simulate: --timeout {timeout_s}: must be a number of seconds > 0")
    opts = dict(parse_override(o) for o in overrides)
    result = simulate_plan(plan, list(program), card, out_dir, options=opts,
                           timeout_s=timeout_s, full_cycles=full_cycles, warmup=warmup,
                           profile=profile, force=force)
    for line in result.lines():
        click.echo(line)
