"""``hilsim evaluate PROFILE (--plan PLAN | -m METHOD)``: error, speedup and interval.

See :meth:`hilsim.analyzer.facade.Profile.evaluate`.
"""

from __future__ import annotations

from pathlib import Path

import click

from hilsim.analyzer import methods
from hilsim.analyzer.facade import Profile
from hilsim.analyzer.report import print_summary, write_result
from hilsim.cli.options import output_option, param_option, parse_params
from hilsim.core import limits
from hilsim.core.console import progress_bar, status
from hilsim.core.errors import HilsimError
from hilsim.core.files import check_output


@click.command("evaluate")
@click.argument("profile", type=click.Path(path_type=Path))
@click.option(
    "--plan", "plan_path", type=click.Path(path_type=Path), help="Evaluate this plan JSON."
)
@click.option("-m", "--method", "method_name", help="Or plan with this method over seeds.")
@param_option("Method parameter (with --method).")
@click.option(
    "--seeds",
    default=20,
    show_default=True,
    help="Seeds 0..N-1 for stochastic methods (with --method).",
)
@click.option(
    "--on",
    "on_path",
    type=click.Path(path_type=Path),
    help="Score on another bundle of the same workload (another run or GPU).",
)
@output_option("Result JSON to write.")
def evaluate_cmd(
    profile: Path,
    plan_path: Path | None,
    method_name: str | None,
    params: tuple[str, ...],
    seeds: int,
    on_path: Path | None,
    output: Path | None,
) -> None:
    """Score a plan (or a method over seeds) against the profiled truth.

    Error = |estimate - truth| / truth; speedup = total time / time of the distinct
    sampled launches; 95% interval from the stratified sampling variance; per-metric
    errors for every counter when metrics cover all launches.
    """
    if (plan_path is None) == (method_name is None):
        raise HilsimError("evaluate: give either --plan PLAN.json or --method NAME")
    if output is not None:
        check_output(output)  # refused before the work, not after it
    method = methods.create(method_name, **parse_params(params)) if method_name else None
    if method is not None:
        limits.check_seeds(seeds, "evaluate: --seeds")
    # scoring reads names and durations; planning what the method reads
    columns = () if method is None else method.launch_columns
    with status(f"reading {profile}"):
        loaded = Profile.load(profile, columns=columns)
        target = Profile.load(on_path, columns=columns) if on_path else loaded
    if method is None:
        result = loaded.evaluate(plan_path, on=target)
    else:
        runs = seeds if method.stochastic else 1
        with progress_bar(f"{method_name} over {runs} seed(s)", runs) as advance:
            result = loaded.evaluate(method=method, seeds=seeds, on=target, progress=advance)
    print_summary(result.rows())
    if output:
        write_result(output, result.to_dict())
