"""``hilsim agent microbench``: run the suite and write ``hilsim.microbench/1`` JSON
(Accel-Sim Section II-C: the microbenchmark output the tuner reads).

See :func:`hilsim.agent.microbench.run_microbench` (the device factory
:func:`~hilsim.agent.microbench.suite_device` picks the GPU or the simulated card).
"""

from __future__ import annotations

from pathlib import Path

import click

from hilsim.agent.microbench import BACKENDS, run_microbench, suite_device
from hilsim.cli.options import output_option
from hilsim.core.console import out
from hilsim.microbench.runner import FAMILIES, QUICK_SKIP, parse_only, parse_skip


@click.command("microbench")
@output_option("Where to write the hilsim.microbench/1 JSON (written atomically).",
               file_only=True, default=Path("microbench.json"))
@click.option(
    "--only",
    "only",
    metavar="FAMILY[,FAMILY]",
    default=None,
    help=f"Run only these families: {', '.join(FAMILIES)} (default: all).",
)
@click.option("--device", type=int, default=0, show_default=True, help="CUDA device index.")
@click.option(
    "--backend",
    type=click.Choice(BACKENDS),
    default="cupy",
    show_default=True,
    help="cupy: the GPU of this host; gpgpusim: a card simulated by GPGPU-Sim (--card).",
)
@click.option(
    "--card",
    default=None,
    metavar="NAME|PATH",
    help="gpgpusim backend: a shipped card (SM7_QV100, SM75_RTX2060, SM86_RTX3070, ...) "
    "or a path to any gpgpusim.config.",
)
@click.option(
    "--skip",
    "skip",
    metavar="BENCHMARK[,BENCHMARK]",
    default=None,
    help="Leave these benchmarks out (recorded as skipped), e.g. latency_footprint_sweep.",
)
@click.option(
    "--quick",
    is_flag=True,
    help=f"Skip the sweeps ({', '.join(QUICK_SKIP)}): the tuner takes the L1 size from the "
    "device facts; on a simulated card the footprint sweep is a third to more than half of "
    "the suite's time (docs/microbench.md).",
)
@click.option(
    "--lock-clocks/--no-lock-clocks",
    default=True,
    show_default=True,
    help="GPU: lock the SM clock for the run (nvidia-smi -lgc, as root; reset afterwards). "
    "Where that is refused the clocks under load are recorded instead.",
)
@click.option(
    "--lock-clock-mhz",
    type=float,
    default=None,
    help="The SM clock to lock at (default: the card's default applications clock).",
)
def microbench_cmd(
    output: Path,
    only: str | None,
    device: int,
    backend: str,
    card: str | None,
    skip: str | None,
    quick: bool,
    lock_clocks: bool,
    lock_clock_mhz: float | None,
) -> None:
    """Measure latencies, bandwidths, unit throughputs, atomics, launch overhead and the
    SM clock of one GPU with CuPy microbenchmarks (needs a CUDA GPU), or of a card
    simulated by GPGPU-Sim (``--backend gpgpusim --card SM7_QV100``)."""
    families = parse_only(only)
    skipped = parse_skip(skip)
    if backend != "gpgpusim" and card is not None:
        raise click.UsageError("--card needs --backend gpgpusim")
    suite = suite_device(backend, device=device, card=card, lock_clocks=lock_clocks,
                         lock_clock_mhz=lock_clock_mhz, say=lambda line: click.echo(line, err=True))
    run = run_microbench(suite, output, families, skipped, quick)
    out.print(run.table())
    out.print(run.written())
    for line in run.warnings():
        click.echo(f"hilsim: warning: {line}", err=True)
    for line in run.lines():
        out.print(line)
