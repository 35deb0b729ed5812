"""``hilsim validate``: sampled simulation vs silicon, as one HTML report and a JSON.

See :mod:`hilsim.analyzer.validate.numbers` for the definitions (simulator, sampling and
total error; counter correlation; silicon cycles).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from hilsim.analyzer import validate as v
from hilsim.analyzer.decompose import attach_decomposition, check_full_log
from hilsim.analyzer.simulate import SUMMARY_JSON, read_placement
from hilsim.analyzer.validate.text import signed
from hilsim.core.errors import HilsimError
from hilsim.core.files import write_text_atomic
from hilsim.core.jsonfile import read_json
from hilsim.core.plan import load_plan
from hilsim.formats.read import load_profile
from hilsim.simmodel.config import read_timing
from hilsim.simmodel.simlog import read_simlogs


def _simulate_folder(paths: tuple[Path, ...]) -> tuple[Any, dict, Path] | None:
    """(samples table, summary, folder) when ``--sim`` names one ``hilsim simulate`` folder."""
    if len(paths) != 1 or not paths[0].is_dir():
        return None
    table = read_placement(paths[0])
    if table is None:
        return None
    summary_path = paths[0] / SUMMARY_JSON
    summary = read_json(summary_path) if summary_path.exists() else {}
    return table, summary, paths[0]


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
@click.option("-o", "--output", required=True, type=click.Path(path_type=Path),
              help="Report path without extension: writes OUT.html and OUT.json.")
def validate_cmd(silicon: Path, plans: tuple[Path, ...], sim_logs: tuple[Path, ...],
                 sim_full: tuple[Path, ...], model_config: Path | None, counters: str,
                 clock_mhz: float | None, output: Path) -> None:
    """Compare sampled simulation with silicon: one self-contained HTML + JSON."""
    if bool(sim_logs) == bool(model_config):
        raise HilsimError("validate: give exactly one of --sim LOGS or --model CONFIG")
    if sim_full and not sim_logs:
        raise HilsimError("validate: --sim-full needs --sim (the sampled logs on that card)")
    bundle = load_profile(silicon)
    loaded = [(p.stem, load_plan(p)) for p in plans]
    timing = None
    if model_config is not None:
        timing = read_timing(model_config)
        shared = v.results_from_model(bundle, timing)

        def sim_for(plan):  # noqa: ARG001 - the model covers every launch
            return shared
    elif (placed := _simulate_folder(sim_logs)) is not None:
        table, summary, where = placed
        if len(loaded) > 1:
            raise HilsimError(f"validate: {where} is the simulation of one plan; give that "
                              "plan only")
        shared_placed = v.results_from_placement(bundle, table, summary, str(where))
        ids = set(table["launch_id"].astype(int))
        if set(loaded[0][1].samples["launch_id"].astype(int)) != ids:
            raise HilsimError(f"validate: {where} simulated other launches than "
                              f"{plans[0]}: give the plan it was simulated for")

        def sim_for(plan):  # noqa: ARG001 - one plan, checked above
            return shared_placed
    else:
        simlog = read_simlogs(list(sim_logs), counters)
        if len(loaded) > 1 and len(simlog) != bundle.n_launches:
            raise HilsimError(
                "validate: several plans need logs of a full simulation (every launch); "
                f"the logs hold {len(simlog)} kernels for {bundle.n_launches} launches"
            )

        def sim_for(plan):
            return v.results_from_simlog(plan, bundle, simlog)

    clock = v.sm_clock_mhz(bundle, clock_mhz, timing)
    sim_for = v.memo_by_plan(sim_for)
    if sim_full:  # read (and checked: every launch) before the report's plots
        full_log = check_full_log(read_simlogs(list(sim_full), counters), bundle)
    report, images = v.validate(bundle, loaded, sim_for, clock)
    if sim_full:
        markdown = attach_decomposition(report, bundle, loaded, sim_for, full_log, clock)
        base = output.with_suffix("") if output.suffix in (".html", ".json") else output
        md_path = write_text_atomic(base.with_suffix(".md"), markdown)
        click.echo(f"wrote {md_path}")
    html_path, json_path = v.write_report(report, images, output)
    for r in report["plans"]:
        h = r["headline"]
        line = (f"{r['label']}: total error {signed(h['total_error'])}, profiled-time "
                f"speedup {h['speedup']:.1f}x")
        if h.get("simulated_time_speedup"):
            line += f", simulated-time speedup {h['simulated_time_speedup']:.1f}x"
        if h.get("interval_cycles"):
            lo, hi = h["interval_cycles"]
            line += (f"; 95% interval [{lo:,.0f}, {hi:,.0f}] "
                     + ("contains" if h["interval_covers_silicon"] else "misses")
                     + f" silicon {h['silicon_total_cycles']:,.0f}")
        click.echo(line)
        if "decomposition" in r:
            t = r["decomposition"]["totals"]
            click.echo(f"{r['label']}: configuration {signed(t['configuration_error'])}, "
                       f"sampling {signed(t['sampling_error'])}, total {signed(t['total_error'])}")
    click.echo(f"wrote {html_path} and {json_path}")
