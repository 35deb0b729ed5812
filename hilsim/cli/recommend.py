"""``hilsim recommend``: the fastest method and parameters that meet a target error.

See :mod:`hilsim.analyzer.recommend` for the search grid, the split / holdout
protocol and the confidence rule.
"""

from __future__ import annotations

from pathlib import Path

import click

from hilsim.analyzer.compare import format_speedup
from hilsim.analyzer.facade import Profile
from hilsim.analyzer.recommend import default_candidates, result_table, winner_plan
from hilsim.analyzer.report import write_result
from hilsim.cli.options import output_option
from hilsim.core import limits
from hilsim.core.console import out, progress_bar, status
from hilsim.core.errors import HilsimError
from hilsim.core.files import check_output


def parse_error(text: str) -> float:
    """``"1%"`` -> 0.01, ``"0.01"`` -> 0.01."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise HilsimError(f"--target-error {text!r}: expected a fraction or a percentage") from None
    if not 0 < value < 1:
        raise HilsimError(f"--target-error {text!r}: must be between 0 and 100%")
    return value


@click.command("recommend")
@click.argument("profile", type=click.Path(path_type=Path))
@click.option("--target-error", required=True, help="Largest acceptable error: 1% or 0.01.")
@click.option("--holdout", type=click.Path(path_type=Path),
              help="Another run of the workload: plans made on PROFILE are scored on it "
                   "(default: PROFILE split in halves by launch order).")
@click.option("--seeds", default=20, show_default=True, help="Seeds per stochastic candidate.")
@click.option("--quantile", default=0.95, show_default=True,
              help="The error quantile over seeds that must stay under the target.")
@click.option("--budget", "budget_s", default=300.0, show_default=True,
              help="Search time budget in seconds (candidates past it are not run).")
@output_option("Write the winner's plan (built on the whole PROFILE, seed 0) here.")
@click.option("--json", "json_path", type=click.Path(path_type=Path),
              help="Write every candidate's figures as JSON here.")
def recommend_cmd(profile: Path, target_error: str, holdout: Path | None, seeds: int,
                  quantile: float, budget_s: float, output: Path | None,
                  json_path: Path | None) -> None:
    """Choose the sampling method and parameters with the highest speedup whose error
    stays under --target-error (its --quantile over --seeds), and write its plan."""
    target = parse_error(target_error)
    limits.check_seeds(seeds, "recommend: --seeds")
    if not budget_s >= 0:  # 0: only the first candidate runs; inf: no budget
        raise HilsimError(f"recommend: --budget {budget_s!r}: expected seconds >= 0")
    for path in (output, json_path):
        if path is not None:
            check_output(path)  # refused before the search, not after it
    with status(f"reading {profile}"):
        loaded = Profile.load(profile)
        other = Profile.load(holdout) if holdout else None
    with progress_bar("candidates", len(default_candidates())) as advance:
        found = loaded.recommend(target, holdout=other, seeds=seeds, quantile=quantile,
                                 budget_s=budget_s, progress=advance)
    out.print(result_table(found.result))
    winner = found.winner
    if json_path:
        write_result(json_path, found.to_dict())
    if winner is None:
        raise HilsimError(
            f"recommend: no candidate meets {100 * target:g}% (see the table); "
            "a larger target or a holdout run may help"
        )
    out.print(f"recommended: {winner.label}: {100 * winner.quantile_error:.3g}% error at the "
              f"{100 * quantile:g}th percentile, {format_speedup(winner.hmean_speedup)} speedup")
    if output:
        plan = winner_plan(loaded.bundle, winner)
        plan.save(output)
        out.print(f"wrote {output}: {len(plan.clusters)} clusters, {plan.n_samples} launches "
                  f"to simulate of {loaded.n_launches}")
