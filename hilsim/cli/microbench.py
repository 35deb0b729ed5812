"""``hilsim agent microbench``: run the suite and write ``hilsim.microbench/1`` JSON
(Accel-Sim Section II-C: the microbenchmark output the tuner reads)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import click
from rich.table import Table

from hilsim.agent.probe import clocks_under_load, locked_clocks
from hilsim.cli.options import output_option
from hilsim.core.console import out
from hilsim.core.errors import HilsimError
from hilsim.core.measurement import write_microbench_json
from hilsim.microbench.runner import (
    FAMILIES,
    QUICK_SKIP,
    device_facts,
    parse_only,
    parse_skip,
    run_suite,
)
from hilsim.microbench.sanity import sanity_warnings
from hilsim.simmodel.gpgpusim.build import find_build
from hilsim.simmodel.gpgpusim.cards import card_config
from hilsim.simmodel.gpgpusim.simsuite import run_sim_suite


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
    type=click.Choice(["cupy", "gpgpusim"]),
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
    if backend == "gpgpusim":
        results, facts = _simulated(families, card, skipped, quick)
    else:
        if card is not None:
            raise click.UsageError("--card needs --backend gpgpusim")
        facts = device_facts(device)
        with locked_clocks(device, lock_clocks, lock_clock_mhz) as lock:
            facts.update(lock.facts())
            click.echo(f"hilsim: clocks: {lock.result}", err=True)
            results = run_suite(
                families, device=device, facts=facts, on_measured=_partial_writer(output, facts),
                skip=skipped, quick=quick,
            )
        facts.update(lock.facts())
        if lock.restored:
            click.echo(f"hilsim: clocks: {lock.restored}", err=True)
        under_load = clocks_under_load(results)
        if under_load is not None:
            facts["clocks_under_load"] = under_load
    write_microbench_json(output, results, facts)
    table = Table(title=f"{facts.get('name', 'GPU')} (cc {facts.get('compute_capability')})")
    for column in ("measurement", "value", "unit", "spread", "valid"):
        table.add_column(column, justify="right" if column in ("value", "spread") else "left")
    for m in results:
        value = "-" if m.value is None else f"{m.value:,.4g}"
        spread = "-" if m.spread is None or m.spread != m.spread else f"{m.spread:.1%}"
        table.add_row(m.name, value, m.unit, spread, "yes" if m.valid else f"no: {m.note}")
    out.print(table)
    invalid = sum(not m.valid for m in results)
    out.print(f"wrote {output} ({len(results)} measurements, {invalid} invalid)")
    for line in sanity_warnings(results, facts):  # docs/agent.md, "Is it sane?"
        click.echo(f"hilsim: warning: {line}", err=True)
    skips = [m for m in results if m.note.startswith("skipped:")]
    for m in skips:
        out.print(f"skipped {m.name}: {m.note.removeprefix('skipped: ')}")
    sim = facts.get("simulation")
    if sim:
        out.print(
            f"simulated {sim['sim_cycles']:,.0f} cycles in {sim['wall_s']:.0f} s wall "
            f"({len(sim['runs'])} simulator runs, build {sim['build']})"
        )
        cpu = sim.get("families_cpu_s", {})
        per_family = ", ".join(f"{f} {t:.0f} s ({cpu.get(f, 0):.0f} s CPU)"
                               for f, t in sim.get("families", {}).items())
        if per_family:
            out.print(f"wall time per family: {per_family}")


def _partial_writer(output: Path, facts: dict) -> Callable[[list], None]:
    """After each benchmark: rewrite ``output`` with every measurement so far (atomic) and
    log the benchmark's wall time on stderr, so a suite killed by a timeout keeps its
    results and says where the time went."""
    last = [time.perf_counter()]

    def write(results: list) -> None:
        now = time.perf_counter()
        write_microbench_json(output, results, facts)
        name = results[-1].name if results else "?"
        click.echo(f"hilsim: microbench: {name} ... {now - last[0]:.1f} s", err=True)
        last[0] = now

    return write


def _simulated(
    families: list[str], card: str | None, skip: list[str], quick: bool
) -> tuple[list, dict]:
    """Run the suite on a simulated card (:mod:`hilsim.simmodel.gpgpusim.simsuite`)."""
    if card is None:
        raise HilsimError("--backend gpgpusim needs --card (e.g. SM7_QV100 or a gpgpusim.config)")
    build = find_build()
    if build is None:
        raise HilsimError(
            "no GPGPU-Sim build found: run `hilsim gpgpusim setup` "
            "(or set HILSIM_GPGPUSIM_HOME to a built source tree)"
        )
    config = card_config(card, build)
    results, facts, _runs = run_sim_suite(config, families, build=build, skip=skip, quick=quick)
    return results, facts
