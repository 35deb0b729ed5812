"""``hilsim dse``: sampled vs full design-space exploration with the analytical model.

``hilsim dse BUNDLE --plan PLAN --config timing.json|PRESET --vary l2_size=x2 ...``
runs :func:`hilsim.simmodel.dse.dse` (STEM Table 4, PKA Fig. 10) on the bundle's per-launch
counters (``metrics.parquet``, Nsight Compute names) and launch configurations, prints a
table and writes ``hilsim.dse/1`` JSON.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click
import numpy as np
import pandas as pd
from hilsim.analyzer.bundle import Bundle
from hilsim.analyzer.errors import HilsimError

if TYPE_CHECKING:
    from hilsim.simmodel.config import TimingConfig


def counters_from_bundle(bundle: Bundle) -> pd.DataFrame:
    """Launch configuration + metrics of every launch, row ``i`` = ``launch_id`` ``i``.

    Raises a one-line error naming how many launches lack metrics or a launch
    configuration (the model needs both for every launch).
    """
    from hilsim.simmodel.model import COUNTER_COLUMNS

    where = str(bundle.path) if bundle.path else "bundle"
    n = bundle.n_launches
    if bundle.metrics is None:
        raise HilsimError(f"{where}: no metrics.parquet: the model needs per-launch counters "
                          f"for all {n} launches")
    metrics = bundle.metrics.set_index("launch_id").reindex(np.arange(n))
    known = [c for c in metrics.columns if c in COUNTER_COLUMNS]
    if not known:
        raise HilsimError(f"{where}: metrics.parquet has none of the model's counters "
                          f"(e.g. {COUNTER_COLUMNS[0]}, dram__bytes_read.sum)")
    lacking = int(metrics[known].isna().all(axis=1).sum())
    if lacking:
        raise HilsimError(f"{where}: {lacking} of {n} launches have no metrics; the model "
                          "needs counters for every launch (profile all launches with ncu)")
    launch_cols = ["grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z", "regs",
                   "smem_static", "smem_dynamic"]
    launches = bundle.launches[launch_cols].reset_index(drop=True)
    no_cfg = int(launches[["grid_x", "block_x"]].isna().any(axis=1).sum())
    if no_cfg:
        raise HilsimError(f"{where}: {no_cfg} of {n} launches have no grid/block size; "
                          "import a trace that records launch configurations")
    frame = pd.concat([launches.astype("float64"), metrics[known].reset_index(drop=True)],
                      axis=1)
    return frame


def load_timing_config(spec: str) -> TimingConfig:
    """A timing.json path or a preset name."""
    from hilsim.simmodel.config import read_timing
    from hilsim.simmodel.presets import PRESET_NAMES, load_preset

    path = Path(spec)
    if path.suffix == ".json" or path.exists():
        return read_timing(path)
    try:
        return load_preset(spec).timing
    except HilsimError:
        raise HilsimError(f"--config {spec!r}: no such timing.json and not a preset "
                          f"({', '.join(PRESET_NAMES)})") from None


@click.command("dse")
@click.argument("bundle_path", metavar="BUNDLE", type=click.Path(path_type=Path))
@click.option("--plan", "plan_path", required=True, type=click.Path(path_type=Path),
              help="Sampling plan (hilsim.plan/1) made on BUNDLE.")
@click.option("--config", "config_spec", required=True,
              help="timing.json (hilsim.timing/1) or a preset name (QV100, RTX2060, "
              "RTX3070, H100-SXM).")
@click.option("--vary", "variations", multiple=True,
              help="NAME=xFACTOR or NAME=VALUE (repeatable), e.g. l2_size=x2, sm_count=x0.5.")
@click.option("-o", "--output", type=click.Path(path_type=Path),
              help="Write the result as JSON (hilsim.dse/1).")
def dse_cmd(bundle_path: Path, plan_path: Path, config_spec: str,
            variations: tuple[str, ...], output: Path | None) -> None:
    """Speedup of each hardware variation: full (all launches) vs sampled (the plan)."""
    from hilsim.analyzer.atomic import write_text_atomic
    from hilsim.analyzer.bundle import read_bundle
    from hilsim.analyzer.console import out
    from hilsim.analyzer.evaluate import check_compatible
    from hilsim.analyzer.plan import load_plan
    from hilsim.simmodel.dse import dse
    from rich.table import Table

    config = load_timing_config(config_spec)
    bundle = read_bundle(bundle_path)
    plan = load_plan(plan_path)
    check_compatible(plan, bundle)
    result = dse(config, counters_from_bundle(bundle), plan, list(variations))
    table = Table(title=f"DSE on {config.name}: {result.n_launches} launches, "
                  f"{result.n_samples} sampled ({plan.method})")
    for col in ("variation", "full cycles", "sampled cycles", "estimate error",
                "true speedup", "sampled speedup", "speedup error", "binding (launches)"):
        table.add_column(col, justify="left" if col in ("variation", "binding (launches)")
                         else "right")
    for r in result.rows:
        binding = ", ".join(f"{k} {v}" for k, v in sorted(r.binding.items(),
                                                          key=lambda kv: -kv[1]))
        table.add_row(r.variation, f"{r.full_cycles:,.0f}", f"{r.sampled_cycles:,.0f}",
                      f"{100 * r.estimate_error:.2f}%", f"{r.true_speedup:.3f}",
                      f"{r.sampled_speedup:.3f}", f"{100 * r.speedup_error:.2f}%", binding)
    out.print(table)
    if output is not None:
        write_text_atomic(output, json.dumps(result.to_dict(), indent=1) + "\n")
        out.print(f"wrote {output}")
