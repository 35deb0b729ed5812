"""``hilsim validate``: sampled simulation vs silicon, as one HTML report and a JSON.

See :func:`hilsim.analyzer.validate.validate_run` and, for the definitions (simulator,
sampling and total error; counter correlation; silicon cycles),
:mod:`hilsim.analyzer.validate.numbers`.
"""

from __future__ import annotations

from pathlib import Path

import click

from hilsim.analyzer.validate import validate_run
from hilsim.cli.options import output_option


@click.command("validate")
@click.option("--silicon", "silicon", required=True, type=click.Path(path_type=Path),
              help="Silicon profile bundle (or any importable profile).")
@click.option("--plan", "plans", required=True, multiple=True, type=click.Path(path_type=Path),
              help="Plan JSON made on that bundle; repeat for several plans (Pareto plot).")
@click.option("--sim", "sim_logs", multiple=True, type=click.Path(path_type=Path),
              help="The folder `hilsim simulate -o` wrote (one plan: warm-up and state "
                   "placement included), or Accel-Sim/GPGPU-Sim log(s) or folder(s) of the "
                   "exported kernelslist.g (one plan), or of every launch (full simulation).")
@click.option("--sim-full", "sim_full", multiple=True, type=click.Path(path_type=Path),
              help="Log(s) of a full simulation (every launch) on the --sim card: "
                   "configuration error (full vs silicon) and sampling error (sampled vs "
                   "full) apart, per kernel and per counter (PKA Table 4).")
@click.option("--model", "model_config", type=click.Path(path_type=Path),
              help="Timing config (hilsim.timing/1 JSON): run the analytical model on "
                   "every launch.")
@click.option("--counters", type=click.Choice(["cumulative", "per-kernel"]),
              default="cumulative", show_default=True,
              help="Whether the logs' cache/DRAM counters are totals since the start.")
@click.option("--clock-mhz", type=float, default=None,
              help="SM clock for durations -> cycles (default: manifest max_sm_clock_mhz).")
@output_option("Report path without extension: writes OUT.html and OUT.json.", required=True)
def validate_cmd(silicon: Path, plans: tuple[Path, ...], sim_logs: tuple[Path, ...],
                 sim_full: tuple[Path, ...], model_config: Path | None, counters: str,
                 clock_mhz: float | None, output: Path) -> None:
    """Compare sampled simulation with silicon: one self-contained HTML + JSON."""
    run = validate_run(silicon, plans, output, sim=sim_logs, sim_full=sim_full,
                       model=model_config, counters=counters, clock_mhz=clock_mhz)
    for line in run.lines():
        click.echo(line)
