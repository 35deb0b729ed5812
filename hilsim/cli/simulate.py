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
from hilsim.simmodel.gpgpusim.listrun import launch_mode_for
from hilsim.simmodel.gpgpusim.parallel import CPU_FACTOR


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
@click.option("--skip-launches", is_flag=True,
              help="The program takes the launch list (`--launches FILE`, or where an "
                   "argument holds `{launches}`), makes only those launches and prints "
                   "`hilsim-launch K` before each: faster than fast-forward, for programs "
                   "written to the protocol [on when an argument holds {launches}].")
@click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True,
              help="Simulator processes at once: each launch list runs as chunks of "
                   "consecutive samples, as many as keep the CPU time within "
                   "--cpu-factor x one process's.")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="Run the chunks on this Dask scheduler's workers (tcp://host:8786), "
                   "which see the program, its inputs and a simulator build at the same "
                   "paths (docs/validation.md).")
@click.option("--cpu-factor", type=click.FloatRange(min=1.0), default=CPU_FACTOR,
              show_default=True,
              help="The chunked runs' CPU time may reach this multiple of one process's.")
@click.argument("program", nargs=-1, required=True, type=click.UNPROCESSED)
def simulate_cmd(plan: Path, card: str, overrides: tuple[str, ...], out_dir: Path,
                 warmup: str | None, profile: Path | None, full_cycles: float | None,
                 timeout_s: float, force: bool, skip_launches: bool, workers: int,
                 scheduler: str | None, cpu_factor: float,
                 program: tuple[str, ...]) -> None:
    """Run only PLAN's launches of PROGRAM on a simulated card (sampled simulation).

    Any CUDA program linked with `-cudart shared`, unmodified: the sampled launches and
    their warm-up run in detail, every other launch functionally (fast-forward), so the
    program's data are right everywhere; its copies to the host are checked against the
    profile's. Give it the same arguments as the profiled run. Programs that can skip
    launches themselves take --skip-launches (docs/gpgpusim.md). Then:
    hilsim validate --silicon RUN.bundle --plan PLAN --sim OUT
    """
    if not (math.isfinite(timeout_s) and timeout_s > 0):
        raise HilsimError(f"simulate: --timeout {timeout_s}: must be a number of seconds > 0")
    opts = dict(parse_override(o) for o in overrides)
    result = simulate_plan(plan, list(program), card, out_dir, options=opts,
                           timeout_s=timeout_s, full_cycles=full_cycles, warmup=warmup,
                           profile=profile, force=force,
                           launch_mode=launch_mode_for(program, skip_launches),
                           workers=workers, scheduler=scheduler, cpu_factor=cpu_factor)
    for line in result.lines():
        click.echo(line)
