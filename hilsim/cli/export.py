"""``hilsim export``: a plan's sampled launches as an Accel-Sim trace list plus weights.

See :mod:`hilsim.simmodel.export` for the mapping of launch ids to NVBit trace files and the
checks made against a traces folder.
"""

from __future__ import annotations

from pathlib import Path

import click

from hilsim.cli.options import force_option, output_option
from hilsim.core.errors import HilsimError
from hilsim.core.plan import load_plan
from hilsim.simmodel.export import export_warmup, warmup_note, weights_path, write_kernelslist


@click.command("export")
@click.argument("plan_path", metavar="PLAN", type=click.Path(path_type=Path))
@click.option("--traces", type=click.Path(path_type=Path),
              help="Accel-Sim traces folder (the tracer's kernelslist.g and kernel-N.traceg "
                   "files): the list is written there, memcpys kept, every sampled trace "
                   "checked.")
@click.option("--full-list", type=click.Path(path_type=Path),
              help="The tracer's full list, if not TRACES/kernelslist.g.")
@output_option("List to write (default with --traces: TRACES/kernelslist.<plan>.g); the "
               "weights go beside it as <name>.weights.csv.")
@click.option("--first-trace-id", type=int, default=1, show_default=True,
              help="Trace id N of launch 0 (kernel-N.traceg); 1 when tracer and profile "
                   "started at the same launch.")
@click.option("--warmup", default=None, metavar="SPEC",
              help="Warm-up: none, l2-fill, preceding:K or both joined by '+' [the plan's "
                   "recorded warm-up, else none]; the plan with it is written beside the "
                   "list as <name>.plan.json (validate with that plan).")
@force_option("Replace an existing list.")
def export_cmd(plan_path: Path, traces: Path | None, full_list: Path | None,
               output: Path | None, first_trace_id: int, warmup: str | None,
               force: bool) -> None:
    """Write PLAN's sampled launches as an Accel-Sim kernelslist and weights CSV.

    Simulate it with `accel-sim.out -trace LIST ...` and read the log back with
    `hilsim validate --sim LOG --plan <name>.plan.json`.
    """
    if first_trace_id < 0:
        raise HilsimError(f"--first-trace-id must be >= 0, got {first_trace_id}")
    if output is None:
        if traces is None:
            raise HilsimError("export: give --traces FOLDER or -o LIST")
        output = traces / f"kernelslist.{plan_path.stem}.g"
    if output.exists() and not force:
        raise HilsimError(f"{output}: already exists (use --force to replace)")
    plan = export_warmup(load_plan(plan_path), warmup)
    list_path, weights = write_kernelslist(plan, output, first_trace_id, traces, full_list)
    plan_out = weights_path(list_path).with_name(
        weights_path(list_path).name.replace(".weights.csv", ".plan.json"))
    plan.save(plan_out)
    checked = " (every sampled trace's header checked)" if traces is not None else ""
    n_listed = len(weights.read_text(encoding="utf-8").splitlines()) - 1
    click.echo(f"wrote {list_path}: {plan.n_samples} sampled launches"
               + (f" + {n_listed - plan.n_samples} warm-up launches"
                  if n_listed > plan.n_samples else "")
               + f"{checked}, {weights} and {plan_out}")
    click.echo(f"warm-up: {warmup_note(plan.warmup)}")
