"""``hilsim tune``: microbenchmark results -> timing config -> Accel-Sim config files.

Accel-Sim paper, Section II-C (tuner and targeted microbenchmarks). Writes
``timing.json`` (``hilsim.timing/1``), ``gpgpusim.config``, ``trace.config`` and
``tune-report.json`` into the output folder, atomically. With ``--on-simulator`` the
options are set by simulating candidates on GPGPU-Sim until the same microbenchmarks
meet the measured values (:mod:`hilsim.simmodel.tuner.search`); the folder is then
a runnable card (``gpgpusim.config``, the files it names, ``tune-report.json``).
"""

from __future__ import annotations

from pathlib import Path

import click

from hilsim.cli.options import force_option, output_option
from hilsim.core.errors import HilsimError
from hilsim.simmodel.tuner import (
    CONVENTIONS,
    L2_GEOMETRY_NOTE,
    read_device_facts,
    tune_files,
)


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
@click.option("--on-simulator", is_flag=True,
              help="Set every measured option by simulating candidates on GPGPU-Sim until "
              "the same microbenchmarks meet MICROBENCH.json (docs/tuner.md); writes a card.")
@click.option("--base", "base_card", metavar="CARD",
              help="--on-simulator: start from this card (name or gpgpusim.config) instead "
              "of the one closest to the device's facts.")
@click.option("--workers", type=click.IntRange(1, 256),
              help="--on-simulator: simulator processes at a time (default: CPU count).")
@click.option("--card-check/--no-card-check", default=True, show_default=True,
              help="--on-simulator: run the tuned card whole (every SM and channel, its "
              "partition indexing): its streaming read against the memory slice the "
              "channels were tuned on (flagged over 5%), and its L2 bandwidth against a "
              "whole GPU's (flagged over 3%).")
@output_option("Output folder (written atomically).", required=True)
@force_option("Replace an existing output folder.")
def tune_cmd(microbench: Path | None, accelsim_output: Path | None, device_facts: Path | None,
             preset_name: str | None, convention: str, on_simulator: bool,
             base_card: str | None, workers: int | None, card_check: bool, output: Path,
             force: bool) -> None:
    """Build a timing config and Accel-Sim gpgpusim.config/trace.config.

    Input: MICROBENCH.json (hilsim.microbench/1) and/or --accelsim-output FILE, plus
    optional --device-facts. Every emitted option carries its source and convention.
    """
    if output.exists() and not force:
        raise HilsimError(f"{output}: already exists (use --force to replace)")
    if on_simulator:
        _on_simulator(microbench, accelsim_output, device_facts, preset_name, base_card,
                      workers, output, force, card_check=card_check)
        return
    if base_card or workers:
        raise click.UsageError("--base and --workers need --on-simulator")
    result = tune_files(microbench, accelsim_output=accelsim_output,
                        device_facts=device_facts, preset_name=preset_name,
                        convention=convention)
    for note in result.notes:
        if note.startswith(("preset ", "pipeline: ")) or "pipeline floor" in note:
            click.echo(f"warning: {note}", err=True)
        elif note.startswith(L2_GEOMETRY_NOTE):
            click.echo(f"note: {note}", err=True)
    result.write(output, overwrite=force)
    click.echo(f"{result.summary()}; wrote {output}")


def _on_simulator(microbench: Path | None, accelsim_output: Path | None,
                  device_facts: Path | None, preset_name: str | None, base_card: str | None,
                  workers: int | None, output: Path, force: bool, *,
                  card_check: bool = True) -> None:
    if microbench is None:
        raise click.UsageError("--on-simulator needs MICROBENCH.json")
    if accelsim_output or preset_name:
        raise click.UsageError(
            "--on-simulator reads MICROBENCH.json (and --device-facts); --accelsim-output "
            "and --preset do not apply (--base names the card to start from)"
        )
    # intra-project, kept lazy: the microbenchmark families and the simulator driver load
    # only when --on-simulator runs
    from hilsim.simmodel.tuner import report, search  # noqa: PLC0415

    facts = read_device_facts(device_facts) if device_facts is not None else None
    result = search.tune_on_simulator(
        microbench, base=base_card, workers=workers, say=click.echo, device_facts=facts,
        card_check=card_check,
    )
    report.write(result, output, overwrite=force)
    for line in report.summary(result):
        click.echo(line)
    click.echo(f"wrote {output}")
