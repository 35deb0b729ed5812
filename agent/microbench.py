"""``hilsim agent microbench`` as one call: the suite run on the device a backend names,
written as ``hilsim.microbench/1`` (Accel-Sim Section II-C: the microbenchmark output the
tuner reads).

:func:`suite_device` is the device factory: ``cupy`` is this host's GPU (the SM clock
locked for the run where permitted, the file rewritten after every benchmark so a suite
stopped by a time limit keeps what it measured), ``gpgpusim`` a card simulated by GPGPU-Sim
(:mod:`hilsim.simmodel.gpgpusim.simsuite`). :func:`run_microbench` runs the suite on it and
returns a :class:`MicrobenchRun` that knows its table and lines.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from hilsim.agent.probe import clocks_under_load, locked_clocks
from hilsim.microbench.runner import device_facts, run_suite
from hilsim.microbench.sanity import sanity_warnings
from hilsim.simmodel.gpgpusim.build import find_build
from hilsim.simmodel.gpgpusim.cards import card_config
from hilsim.simmodel.gpgpusim.simsuite import run_sim_suite
from rich.table import Table

from hilsim.core.errors import HilsimError
from hilsim.core.measurement import Measurement, write_microbench_json

#: where progress and clock notes go (the command: stderr)
Say = Callable[[str], None]
#: the suite's backends: ``cupy`` (this host's GPU), ``gpgpusim`` (a simulated card)
BACKENDS: tuple[str, ...] = ("cupy", "gpgpusim")


class SuiteDevice(Protocol):
    """A device the suite runs on, as the command sees it: it measures the families and
    gives the measurements with its device facts."""

    def measure(
        self, families: Sequence[str], skip: Sequence[str], quick: bool, output: Path
    ) -> tuple[list[Measurement], dict[str, Any]]:
        """Every measurement of ``families`` (``skip`` and, with ``quick``, the sweeps
        recorded as skipped) and the device facts; ``output`` may be written as it goes."""
        ...


@dataclass
class GpuSuite:
    """This host's CUDA GPU ``device``, its SM clock locked for the run when
    ``lock_clocks`` (at ``lock_clock_mhz``, default the card's applications clock)."""

    device: int = 0
    lock_clocks: bool = True
    lock_clock_mhz: float | None = None
    say: Say = print

    def measure(
        self, families: Sequence[str], skip: Sequence[str], quick: bool, output: Path
    ) -> tuple[list[Measurement], dict[str, Any]]:
        """The suite on the GPU, ``output`` rewritten after every benchmark; the clock
        lock and the clocks under load recorded in the facts."""
        facts = device_facts(self.device)
        with locked_clocks(self.device, self.lock_clocks, self.lock_clock_mhz) as lock:
            facts.update(lock.facts())
            self.say(f"hilsim: clocks: {lock.result}")
            results = run_suite(
                families, device=self.device, facts=facts,
                on_measured=partial_writer(output, facts, self.say), skip=skip, quick=quick,
            )
        facts.update(lock.facts())
        if lock.restored:
            self.say(f"hilsim: clocks: {lock.restored}")
        under_load = clocks_under_load(results)
        if under_load is not None:
            facts["clocks_under_load"] = under_load
        return results, facts


@dataclass
class SimulatedSuite:
    """A card simulated by GPGPU-Sim: a shipped card's name or a ``gpgpusim.config``."""

    card: str | None

    def measure(
        self, families: Sequence[str], skip: Sequence[str], quick: bool, output: Path
    ) -> tuple[list[Measurement], dict[str, Any]]:
        """The suite on the simulated card (:func:`~hilsim.simmodel.gpgpusim.simsuite.
        run_sim_suite`); ``output`` is written once, at the end."""
        if self.card is None:
            raise HilsimError(
                "--backend gpgpusim needs --card (e.g. SM7_QV100 or a gpgpusim.config)")
        build = find_build()
        if build is None:
            raise HilsimError(
                "no GPGPU-Sim build found: run `hilsim gpgpusim setup` "
                "(or set HILSIM_GPGPUSIM_HOME to a built source tree)"
            )
        config = card_config(self.card, build)
        results, facts, _runs = run_sim_suite(config, families, build=build, skip=skip,
                                              quick=quick)
        return results, facts


def suite_device(
    backend: str,
    *,
    device: int = 0,
    card: str | None = None,
    lock_clocks: bool = True,
    lock_clock_mhz: float | None = None,
    say: Say = print,
) -> SuiteDevice:
    """The device ``backend`` (:data:`BACKENDS`) names: the GPU ``device`` (clocks locked
    as asked) or the simulated ``card``."""
    if backend == "gpgpusim":
        return SimulatedSuite(card)
    if backend == "cupy":
        return GpuSuite(device, lock_clocks, lock_clock_mhz, say)
    raise HilsimError(f"--backend {backend!r}: choose from {', '.join(BACKENDS)}")


def partial_writer(output: Path, facts: dict[str, Any], say: Say) -> Callable[[list], None]:
    """After each benchmark: rewrite ``output`` with every measurement so far (atomic) and
    say the benchmark's wall time, so a suite killed by a timeout keeps its results and
    says where the time went."""
    last = [time.perf_counter()]

    def write(results: list) -> None:
        now = time.perf_counter()
        write_microbench_json(output, results, facts)
        name = results[-1].name if results else "?"
        say(f"hilsim: microbench: {name} ... {now - last[0]:.1f} s")
        last[0] = now

    return write


@dataclass
class MicrobenchRun:
    """The suite's measurements, the device facts and the file they were written to."""

    output: Path
    results: list[Measurement]
    facts: dict[str, Any]

    def table(self) -> Table:
        """Every measurement: value, unit, spread over repetitions, valid or why not."""
        facts = self.facts
        table = Table(title=f"{facts.get('name', 'GPU')} (cc {facts.get('compute_capability')})")
        for column in ("measurement", "value", "unit", "spread", "valid"):
            table.add_column(column, justify="right" if column in ("value", "spread") else "left")
        for m in self.results:
            value = "-" if m.value is None else f"{m.value:,.4g}"
            spread = "-" if m.spread is None or m.spread != m.spread else f"{m.spread:.1%}"
            table.add_row(m.name, value, m.unit, spread, "yes" if m.valid else f"no: {m.note}")
        return table

    def written(self) -> str:
        """The file written and how many of its measurements are invalid."""
        invalid = sum(not m.valid for m in self.results)
        return f"wrote {self.output} ({len(self.results)} measurements, {invalid} invalid)"

    def warnings(self) -> list[str]:
        """Values outside the range known for the device's generation (docs/agent.md,
        "Is it sane?")."""
        return sanity_warnings(self.results, self.facts)

    def lines(self) -> list[str]:
        """The benchmarks skipped and, on a simulated card, the simulation's cost."""
        lines = [f"skipped {m.name}: {m.note.removeprefix('skipped: ')}"
                 for m in self.results if m.note.startswith("skipped:")]
        sim = self.facts.get("simulation")
        if sim:
            lines.append(
                f"simulated {sim['sim_cycles']:,.0f} cycles in {sim['wall_s']:.0f} s wall "
                f"({len(sim['runs'])} simulator runs, build {sim['build']})"
            )
            cpu = sim.get("families_cpu_s", {})
            per_family = ", ".join(f"{f} {t:.0f} s ({cpu.get(f, 0):.0f} s CPU)"
                                   for f, t in sim.get("families", {}).items())
            if per_family:
                lines.append(f"wall time per family: {per_family}")
        return lines


def run_microbench(
    suite: SuiteDevice,
    output: Path,
    families: Sequence[str],
    skip: Sequence[str] = (),
    quick: bool = False,
) -> MicrobenchRun:
    """Run ``families`` on ``suite`` (:func:`suite_device`) and write ``output``."""
    results, facts = suite.measure(families, skip, quick, output)
    write_microbench_json(output, results, facts)
    return MicrobenchRun(output, results, facts)
