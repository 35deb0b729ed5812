"""``hilsim tune``: microbenchmark results -> timing config -> Accel-Sim config files.

Accel-Sim paper, Section II-C (tuner and targeted microbenchmarks). Writes
``timing.json`` (``hilsim.timing/1``), ``gpgpusim.config``, ``trace.config`` and
``tune-report.json`` into the output folder, atomically.
"""

from __future__ import annotations

from pathlib import Path

import click

from hilsim.core.errors import HilsimError
from hilsim.simmodel.tuner import CONVENTIONS, tune_files


@click.command("tune")
@click.argument("microbench", required=False, type=click.Path(path_type=Path))
@click.option("--accelsim-output", type=click.Path(path_type=Path),
              help="Printed output of Accel-Sim's GPU_Microbenchmark suite (run_all.sh).")
@click.option("--device-facts", type=click.Path(path_type=Path),
              help="Device facts JSON (probe output or cudaDeviceProp fields).")
@click.option("--preset", "preset_name", help="Start from this preset (QV100, RTX2060, "
              "RTX3070, H100-SXM) instead of the nearest one.")
@click.option("--convention",
              type=click.Choice(CONVENTIONS),
              default="accelsim-tuner", show_default=True,
              help="Latency options as Accel-Sim's tuner prints them, minus GPGPU-Sim's "
              "pipeline offset where known, or (gpgpusim) the values that make GPGPU-Sim "
              "reproduce the measurements (map measured on the simulator, docs/tuner.md).")
@click.option("-o", "--output", required=True, type=click.Path(path_type=Path),
              help="Output folder (written atomically).")
@click.option("--force", is_flag=True, help="Replace an existing output folder.")
def tune_cmd(microbench: Path | None, accelsim_output: Path | None, device_facts: Path | None,
             preset_name: str | None, convention: str, output: Path, force: bool) -> None:
    """Build a timing config and Accel-Sim gpgpusim.config/trace.config.

    Input: MICROBENCH.json (hilsim.microbench/1) and/or --accelsim-output FILE, plus
    optional --device-facts. Every emitted option carries its source and convention.
    """
    result = tune_files(microbench, accelsim_output=accelsim_output,
                        device_facts=device_facts, preset_name=preset_name,
                        convention=convention)
    if output.exists() and not force:
        raise HilsimError(f"{output}: already exists (use --force to replace)")
    result.write(output, overwrite=force)
    click.echo(f"{result.summary()}; wrote {output}")
