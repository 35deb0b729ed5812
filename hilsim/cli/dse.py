"""``hilsim dse``: sampled vs full design-space exploration with the analytical model.

``hilsim dse BUNDLE --plan PLAN --config timing.json|PRESET --vary l2_size=x2 ...``
runs :func:`hilsim.simmodel.dse.dse` (STEM Table 4, PKA Fig. 10) on the bundle's per-launch
counters (``metrics.parquet``, Nsight Compute names) and launch configurations, prints a
table and writes ``hilsim.dse/1`` JSON.
"""

from __future__ import annotations

from pathlib import Path

import click

from hilsim.analyzer.evaluate import check_compatible
from hilsim.cli.options import output_option
from hilsim.core.bundle import read_bundle
from hilsim.core.console import out
from hilsim.core.files import check_output
from hilsim.core.jsonfile import write_json
from hilsim.core.plan import load_plan
from hilsim.simmodel.dse import counters_from_bundle, dse
from hilsim.simmodel.presets import load_timing_config


@click.command("dse")
@click.argument("bundle_path", metavar="BUNDLE", type=click.Path(path_type=Path))
@click.option("--plan", "plan_path", required=True, type=click.Path(path_type=Path),
              help="Sampling plan (hilsim.plan/1) made on BUNDLE.")
@click.option("--config", "config_spec", required=True,
              help="timing.json (hilsim.timing/1) or a preset name (QV100, RTX2060, "
              "RTX3070, H100-SXM).")
@click.option("--vary", "variations", multiple=True,
              help="NAME=xFACTOR or NAME=VALUE (repeatable), e.g. l2_size=x2, sm_count=x0.5.")
@output_option("Write the result as JSON (hilsim.dse/1).")
def dse_cmd(bundle_path: Path, plan_path: Path, config_spec: str,
            variations: tuple[str, ...], output: Path | None) -> None:
    """Speedup of each hardware variation: full (all launches) vs sampled (the plan)."""
    if output is not None:
        check_output(output)  # refused before the work, not after it
    config = load_timing_config(config_spec)
    bundle = read_bundle(bundle_path)
    plan = load_plan(plan_path)
    check_compatible(plan, bundle)
    result = dse(config, counters_from_bundle(bundle), plan, list(variations))
    out.print(result.table(plan.method))
    if output is not None:
        write_json(output, result.to_dict())
        out.print(f"wrote {output}")
