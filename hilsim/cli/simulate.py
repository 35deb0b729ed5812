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
@click.option("-O", "--option", "overrides", multiple=True, metavar="-OPT=VALUE",
              help="Override a config option, e.g. -O -gpgpu_n_clusters=4 (repeatable).")
@click.option("-o", "--out", "out_dir", required=True,
              type=click.Path(file_okay=False, path_type=Path),
              help="Folder for sampled.log (what `hilsim validate --sim` reads), the launch "
                   "list and simulate.json.")
@click.option("--full-cycles", type=float, default=None,
              help="Cycles of the full run to report the saving against [the plan's source "
                   "total at the card's clock].")
@click.option("--timeout", "timeout_s", default=4 * 3600.0, show_default=True,
              help="Seconds before the simulation is killed.")
@click.argument("program", nargs=-1, required=True, type=click.UNPROCESSED)
def simulate_cmd(plan: Path, card: str, overrides: tuple[str, ...], out_dir: Path,
                 full_cycles: float | None, timeout_s: float, program: tuple[str, ...]) -> None:
    """Run only PLAN's launches of PROGRAM on a simulated card (sampled simulation).

    The program gets the launch list as `--launches FILE` (or where an argument holds
    `{launches}`) and must print `hilsim-launch K` before launch K (the shipped workload
    does: `hilsim/simmodel/gpgpusim/workloads/README.md`). Then:
    hilsim validate --silicon RUN.bundle --plan PLAN --sim OUT
    """
    if not (math.isfinite(timeout_s) and timeout_s > 0):
        raise HilsimError(f"simulate: --timeout {timeout_s}: must be a number of seconds > 0")
    opts = dict(parse_override(o) for o in overrides)
    s = simulate_plan(plan, list(program), card, out_dir, options=opts, timeout_s=timeout_s,
                      full_cycles=full_cycles)
    line = (f"simulated {s['launches_simulated']:,} launches"
            + (f" of {s['launches_full']:,}" if s["launches_full"] else "")
            + f": {s['sampled_cycles']:,.0f} simulated cycles")
    if s["full_cycles"]:
        line += (f" of {s['full_cycles']:,.0f} in the full run "
                 f"({100 * s['cycle_fraction']:.2f}%, {s['simulated_time_speedup']:.1f}x less "
                 "simulated time)")
    click.echo(line)
    click.echo(f"simulator: {s['sim_cpu_s']:.1f} CPU s, {s['sim_wall_s']:.1f} s wall; "
               f"log {s['log']}")
