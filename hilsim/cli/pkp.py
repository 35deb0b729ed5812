"""``hilsim pkp``: Principal Kernel Projection on a plan's sampled launches (PKA §3.2).

Combined with any launch-level plan this is PKA = PKS + PKP: each sampled launch
is simulated only until its IPC is stable (and one full wave of CTAs has
finished), the rest of its CTAs are projected. Timelines come from the analytical
timing model (``--model``), from a per-CTA timing trace of a simulator
(``--cta-trace``) or from GPGPU-Sim's periodic visualizer samples (``--gpgpusim-log``,
:mod:`hilsim.simmodel.gpgpusim.visualizer`).
"""

from __future__ import annotations

from pathlib import Path

import click

from hilsim.analyzer.facade import Profile
from hilsim.analyzer.report import write_result
from hilsim.cli.options import output_option
from hilsim.core.console import out, status
from hilsim.core.errors import HilsimError
from hilsim.core.files import check_output
from hilsim.core.plan import load_plan


@click.command("pkp")
@click.argument("profile", type=click.Path(path_type=Path))
@click.option(
    "--plan",
    "plan_path",
    required=True,
    type=click.Path(path_type=Path),
    help="Launch-level plan (hilsim.plan/1) whose samples are projected.",
)
@click.option(
    "--model",
    "model_config",
    type=click.Path(path_type=Path),
    help="Timing config (timing.json or preset name): IPC timelines from the "
    "analytical model (needs counters in the bundle).",
)
@click.option(
    "--cta-trace",
    type=click.Path(path_type=Path),
    help="Per-CTA timing CSV: launch_id, cta_id, sm_id, start_cycle, end_cycle, instructions.",
)
@click.option(
    "--gpgpusim-log",
    "gpgpusim_run",
    type=click.Path(path_type=Path),
    help="GPGPU-Sim run folder (e.g. a `hilsim simulate` output) run with -O "
    "-visualizer_enabled=1 -O -gpgpu_runtime_stat=500: per-window IPC from the simulator's "
    "own periodic output, scored against each launch's full simulated cycles.",
)
@click.option(
    "--relative",
    is_flag=True,
    help="Compare std / mean of the windowed IPC with -s (whole-GPU IPC, where PKA's "
    "absolute 0.25 is never met).",
)
@click.option(
    "--window",
    "window_cycles",
    default=3000.0,
    show_default=True,
    help="Rolling window in cycles (PKA: 3000).",
)
@click.option(
    "-s",
    "--threshold",
    "s",
    default=0.25,
    show_default=True,
    help="Std-dev threshold of the windowed IPC (PKA: 0.25).",
)
@output_option("Result JSON to write.")
def pkp_cmd(
    profile: Path,
    plan_path: Path,
    model_config: Path | None,
    cta_trace: Path | None,
    gpgpusim_run: Path | None,
    relative: bool,
    window_cycles: float,
    s: float,
    output: Path | None,
) -> None:
    """Project the sampled launches of PLAN intra-kernel (PKA section 3.2).

    Prints the fraction of each sampled launch that needed simulating and the
    projected total (sum of weight x projected cycles).
    """
    if sum(x is not None for x in (model_config, cta_trace, gpgpusim_run)) != 1:
        raise HilsimError(
            "pkp: give one of --model CONFIG, --cta-trace CSV or --gpgpusim-log RUN")
    if output is not None:
        check_output(output)  # refused before the work, not after it
    plan = load_plan(plan_path)
    with status(f"reading {profile}"):
        loaded = Profile.load(profile)
    result = loaded.pkp(
        plan,
        model=None if model_config is None else str(model_config),
        cta_trace=cta_trace,
        gpgpusim_log=gpgpusim_run,
        window_cycles=window_cycles,
        s=s,
        relative=relative,
    )
    out.print(result.table())
    if output:
        write_result(output, result.to_dict())
