"""The microbenchmark suite on a simulated card (the GPGPU-Sim device; Accel-Sim,
Khairy et al., ISCA 2020, Section II-C).

The families are the GPU suite's (:mod:`hilsim.microbench`): the same kernels (their
source text, compiled with the generic host driver by
:mod:`hilsim.simmodel.gpgpusim.simhost`), the same measurement names and units, the same
``hilsim.microbench/1`` file (:mod:`hilsim.core.measurement`) and the same analysis
(:func:`hilsim.microbench.analysis.cache_levels`), run on a
:class:`~hilsim.simmodel.gpgpusim.simdevice.GpgpusimDevice`. What differs is the device's
(its module docstring): one deterministic run per measurement, shorter runs, reduced
cards (one SM for latencies, a 2-SM slice for per-SM rates, one memory channel for L2 and
DRAM bandwidth, scaled by the channel count) and what GPGPU-Sim cannot run, recorded as
skipped with the reason: the SM clock (no ``%globaltimer``: the clock is the config's, in
the device facts), the page-stride DRAM chase (no TLB model), the stride sweep (10^5+
dependent loads), tensor cores (no ``mma`` in GPGPU-Sim's PTX lexer). The reduced
footprint sweep (8 KiB to 4 x the unified L1) finds the L1 capacity; the L2 capacity is
recorded as not measured and the tuner takes the L2 size from the device facts.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Sequence
from typing import Any

from hilsim.microbench.gpu import first_line
from hilsim.microbench.runner import family_benchmarks, run_benchmarks, without_skipped
from hilsim.simmodel.gpgpusim.simdevice import BACKEND, GpgpusimDevice

from hilsim.core.console import progress_bar
from hilsim.core.measurement import Measurement


def cpu_seconds() -> float:
    """CPU seconds of this process and of the simulator processes it has waited for (the
    suite's cost on a shared machine, where wall time follows the load)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _failed(name: str, exc: Exception) -> Measurement:
    return Measurement(name, None, "", dict(BACKEND), [], 0.0, False, f"failed: {first_line(exc)}")


def run_sim_suite(
    card: Any,
    families: Sequence[str],
    *,
    build: Any = None,
    progress: bool = True,
    seed: int = 0,
    throughput_sms: int = 2,
    skip: Sequence[str] = (),
    quick: bool = False,
) -> tuple[list[Measurement], dict[str, Any], list[dict[str, Any]]]:
    """Run ``families`` on the simulated ``card``: (measurements, device facts, runs).

    ``runs`` lists every simulated program: benchmark, options, simulated cycles and
    wall seconds; ``facts["simulation"]["families"]`` the wall seconds per family and
    ``families_cpu_s`` the CPU seconds (this process and its simulator runs). A
    benchmark that fails is recorded as an invalid measurement with the error's first
    line and the suite goes on (as on a GPU); benchmarks in ``skip`` (and, with
    ``quick``, the sweeps of :data:`hilsim.microbench.runner.QUICK_SKIP`) are recorded as
    skipped.
    """
    device = GpgpusimDevice(card, build=build, seed=seed, throughput_sms=throughput_sms)
    facts = device.facts
    benches = []
    family_of: dict[str, str] = {}
    for family in families:
        for bench in family_benchmarks(device, [family]):
            benches.append(bench)
            family_of[bench[0]] = family
    benches, skipped = without_skipped(benches, skip, device.backend_params, quick=quick)
    family_wall: dict[str, float] = {}
    family_cpu: dict[str, float] = {}
    started = time.monotonic()
    with progress_bar(f"{card.name} (simulated)", total=len(benches), enabled=progress) as advance:

        def on_run(entry: dict[str, Any]) -> None:
            cycles = sum(r["sim_cycles"] for r in device.runs)
            advance(
                0,
                description=(
                    f"{card.name}: {entry['benchmark']} done, simulated "
                    f"{cycles / float(facts['max_sm_clock_mhz']):,.0f} us ({cycles:,.0f} cycles)"
                ),
            )

        device.on_run = on_run
        current: dict[str, Any] = {"name": "", "t0": time.monotonic(), "cpu0": cpu_seconds()}

        def before(name: str) -> None:
            current.update(name=name, t0=time.monotonic(), cpu0=cpu_seconds())
            advance(0, description=f"{card.name}: {name} ...")

        def after(_results: list[Measurement]) -> None:
            family = family_of[current["name"]]
            family_wall[family] = family_wall.get(family, 0.0) + time.monotonic() - current["t0"]
            family_cpu[family] = family_cpu.get(family, 0.0) + cpu_seconds() - current["cpu0"]
            advance(1)

        results = run_benchmarks(device, benches, _failed, before=before, after=after)
    facts["simulation"] = {
        "wall_s": round(time.monotonic() - started, 1),
        "sim_cycles": sum(r["sim_cycles"] for r in device.runs),
        "families": {f: round(s, 1) for f, s in family_wall.items()},
        "families_cpu_s": {f: round(s, 1) for f, s in family_cpu.items()},
        "runs": device.runs,
        "build": getattr(build, "key", None),
    }
    return results + skipped, facts, device.runs
