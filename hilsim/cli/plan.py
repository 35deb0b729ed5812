"""``hilsim plan PROFILE -m METHOD -o PLAN``: a sampling plan (``hilsim.plan/1``).

See :meth:`hilsim.analyzer.facade.Profile.plan`.
"""

from __future__ import annotations

from pathlib import Path

import click

from hilsim.analyzer import methods
from hilsim.analyzer.facade import Profile
from hilsim.cli.options import output_option, param_option, parse_params
from hilsim.core.console import out, status, warn
from hilsim.core.errors import HilsimError


@click.command("plan")
@click.argument("profile", type=click.Path(path_type=Path))
@click.option(
    "-m", "--method", "method_name", required=True, help="Sampling method (see `hilsim methods`)."
)
@param_option("Method parameter, e.g. -p epsilon=0.01 -p seed=3.")
@click.option("--seed", type=int, default=None,
              help="The method's random seed: the same as -p seed=S.")
@output_option("Plan JSON to write (hilsim.plan/1).", required=True)
def plan_cmd(profile: Path, method_name: str, params: tuple[str, ...], seed: int | None,
             output: Path) -> None:
    """Build a sampling plan for PROFILE (a bundle folder or a profile file).

    The plan lists the launches to simulate with their weights; the estimate of
    any per-launch quantity is sum(weight * value).
    """
    given = parse_params(params)
    if seed is not None:
        if "seed" in given and given["seed"] != seed:
            raise HilsimError(f"plan: --seed {seed} and -p seed={given['seed']} disagree")
        given["seed"] = seed
    method = methods.create(method_name, **given)
    with status(f"reading {profile}"):
        # only the launch columns the method reads (a bundle's other columns stay on disk)
        loaded = Profile.load(profile, columns=method.launch_columns)
    with status(f"planning with {method_name}"):
        plan = loaded.plan(method)
    plan.save(output)
    for line in plan.diagnostics["trace_warnings"]:  # warnings only once the plan is written
        warn(line)
    out.print(
        f"wrote {output}: {method_name}, {len(plan.clusters)} clusters, "
        f"{plan.n_samples} launches to simulate of {loaded.n_launches}"
    )
    for note in plan.notes:
        out.print(f"note: {note}")
