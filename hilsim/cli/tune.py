"""``hilsim tune``: microbenchmark results -> timing config -> Accel-Sim config files.

Accel-Sim paper, Section II-C (tuner and targeted microbenchmarks). Writes
``timing.json`` (``hilsim.timing/1``), ``gpgpusim.config``, ``trace.config`` and
``tune-report.json`` into the output folder, atomically.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from hilsim.core.errors import HilsimError
from hilsim.core.files import atomic_directory


@click.command("tune")
@click.argument("microbench", required=False, type=click.Path(path_type=Path))
@click.option("--accelsim-output", type=click.Path(path_type=Path),
              help="Printed output of Accel-Sim's GPU_Microbenchmark suite (run_all.sh).")
@click.option("--device-facts", type=click.Path(path_type=Path),
              help="Device facts JSON (probe output or cudaDeviceProp fields).")
@click.option("--preset", "preset_name", help="Start from this preset (QV100, RTX2060, "
              "RTX3070, H100-SXM) instead of the nearest one.")
@click.option("--convention",
              type=click.Choice(["accelsim-tuner", "simulator-corrected", "gpgpusim"]),
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
    from hilsim.simmodel.accelsim import read_ubench_output
    from hilsim.simmodel.tuner import read_device_facts, read_microbench, tune

    if microbench is None and accelsim_output is None and preset_name is None:
        raise HilsimError("tune: give MICROBENCH.json, --accelsim-output FILE or --preset NAME")
    measurements, facts, where = None, {}, "device facts"
    if microbench is not None:
        measurements, facts = read_microbench(microbench)
        where = f"{microbench.name} device"
    if device_facts is not None:
        facts = {**facts, **read_device_facts(device_facts)}
        where = device_facts.name
    ubench = read_ubench_output(accelsim_output) if accelsim_output is not None else None
    result = tune(measurements=measurements, ubench=ubench, facts=facts, facts_where=where,
                  preset_name=preset_name, convention=convention)
    if output.exists() and not force:
        raise HilsimError(f"{output}: already exists (use --force to replace)")
    with atomic_directory(output, overwrite=force) as tmp:
        (tmp / "timing.json").write_text(result.timing.dumps(), encoding="utf-8")
        (tmp / "gpgpusim.config").write_text(result.gpgpusim_config(), encoding="utf-8")
        (tmp / "trace.config").write_text(result.trace_config(), encoding="utf-8")
        (tmp / "tune-report.json").write_text(json.dumps(result.report(), indent=2) + "\n",
                                              encoding="utf-8")
    n = len(result.options)
    counts: dict[str, int] = {}
    for o in result.options:
        counts[o.kind] = counts.get(o.kind, 0) + 1
    summary = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    click.echo(f"{result.timing.name}: preset {result.preset.name} ({result.preset_reason}); "
               f"{n} options ({summary}); convention {convention}; wrote {output}")
