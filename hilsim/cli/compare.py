"""``hilsim compare PROFILE -o DIR``: every sampling method side by side.

See :meth:`hilsim.analyzer.facade.Profile.compare` and :mod:`hilsim.analyzer.compare`.
"""

from __future__ import annotations

from pathlib import Path

import click

from hilsim.analyzer.compare import launch_columns
from hilsim.analyzer.facade import Profile
from hilsim.analyzer.report import print_comparison
from hilsim.cli.options import output_option, param_option, parse_method_params
from hilsim.core.console import progress_bar, status
from hilsim.core.errors import HilsimError


@click.command("compare")
@click.argument("profile", type=click.Path(path_type=Path))
@click.option(
    "--methods",
    "method_list",
    default="all",
    show_default=True,
    help="Comma-separated methods, or 'all' (every registered method).",
)
@click.option("--seeds", default=10, show_default=True, help="Seeds for stochastic methods.")
@click.option(
    "--holdout",
    type=click.Path(path_type=Path),
    help="Choose plans on PROFILE, score them on this other run of the workload.",
)
@param_option("Method parameter, e.g. -p stem.epsilon=0.01.", metavar="METHOD.KEY=VALUE")
@click.option(
    "--budget-of",
    default="stem",
    show_default=True,
    help="Run random and first-n at this method's budget, seed by seed ('none': at "
    "their own defaults).",
)
@click.option(
    "--budget",
    type=click.Choice(["time", "launches"]),
    default="time",
    show_default=True,
    help="What the baselines match: the simulated time (same speedup) or the number of "
    "simulated launches.",
)
@click.option("--workers", type=int, default=None, help="Worker processes (default: CPUs).")
@output_option("Folder for compare.json, compare.csv and pareto.png.", required=True)
def compare_cmd(
    profile: Path,
    method_list: str,
    seeds: int,
    holdout: Path | None,
    params: tuple[str, ...],
    budget_of: str,
    budget: str,
    workers: int | None,
    output: Path,
) -> None:
    """Compare every sampling method the profile's data allows (STEM Table 3 / Fig. 9).

    Methods whose inputs are missing (e.g. Nsight Compute metrics, NVTX regions)
    are listed as skipped with the reason; a method run on part of its inputs is
    labelled with what it had (e.g. "pka (1/12 metrics)") and its warnings are
    listed. The random and first-n baselines run at the budget of --budget-of
    (default stem): the same simulated time, seed by seed, so they are compared at
    the same speedup. Rows whose speedup is below 2x or that simulate half the
    launches or more are marked "no reduction" and kept off the Pareto front.
    """
    per_method = parse_method_params(params)
    names = [m.strip() for m in method_list.split(",") if m.strip()]
    if not names:
        raise HilsimError(f"compare: --methods {method_list!r}: no method named (give names "
                          "separated by commas, or 'all')")
    # a bundle folder: the columns every method reads now, each method's own when it runs;
    # a profile file: the columns the compared methods read (the others are not converted)
    columns = () if profile.is_dir() else launch_columns(names, per_method)
    with status(f"reading {profile}"):
        loaded = Profile.load(profile, columns=columns)
        other = Profile.load(holdout, columns=()) if holdout else None
    with progress_bar("comparing methods", None) as advance:
        comparison = loaded.compare(
            names,
            seeds=seeds,
            holdout=other,
            params=per_method,
            budget_of=None if budget_of.lower() == "none" else budget_of,
            budget=budget,
            workers=workers,
            progress=advance,
        )
    print_comparison(comparison.document)
    comparison.write(output)
