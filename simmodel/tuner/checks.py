"""Plausibility checks on tuner inputs: measurements the tuner notes but does not use.

Accel-Sim paper, Section II-C: the tuner reads its microbenchmarks' numbers as they are;
hilsim checks the ones whose measurement can mislead (a launch latency that is a host
round trip, a footprint sweep's capacity that is a lower bound) before it uses them.
"""

from __future__ import annotations

from collections.abc import Sequence

from hilsim.simmodel.config import TimingConfig

from hilsim.core import measurement_names as mn
from hilsim.core.measurement import Measurement

#: plausible ``-gpgpu_kernel_launch_latency`` (SM cycles): Accel-Sim's shipped configs use
#: 5000 (QV100) and 7257 (TITAN V); a host round trip (15k-60k cycles) is not a launch
#: latency
LAUNCH_LATENCY_CYCLES_RANGE = (500.0, 20000.0)


def launch_latency_plausible(cycles: float) -> bool:
    """Whether a launch latency in cycles is one the simulator should be given."""
    lo, hi = LAUNCH_LATENCY_CYCLES_RANGE
    return lo <= cycles <= hi


def capacity_checks(cfg: TimingConfig, rows: Sequence[Measurement]) -> list[str]:
    """Check the queried cache sizes against the footprint sweep; never replace them.

    The sweep's capacities are lower bounds on a 2^(1/4) grid (up to 19% below the true
    size, and never a round number), so the device-query L2 and the unified L1+shared
    size (Accel-Sim's ``l1_config`` ``L1_SIZE``) win; the measured values only raise a
    note when they contradict them.
    """
    notes: list[str] = []
    by_name = {r.name: r for r in rows}
    l2, l1 = cfg.get("l2.capacity_bytes"), cfg.get("l1.capacity_bytes")
    m2 = by_name.get(mn.L2_CAPACITY_BYTES)
    if m2 is not None and l2 is not None and m2.value:
        q = float(l2.value)
        if not q / 1.25 <= float(m2.value) <= q * 1.02:
            notes.append(
                f"L2: the footprint sweep's plateau ends at {m2.value:.0f} B, the "
                f"{l2.source.kind} size is {q:.0f} B (expected within [size/1.25, size]): "
                "check the sweep (kept the queried size)"
            )
        if l2.source.kind == "preset":
            notes.append(f"L2 size from the preset ({q:.0f} B): no device query was given")
    m1 = by_name.get(mn.L1_CAPACITY_BYTES)
    if m1 is not None and l1 is not None and m1.value and float(m1.value) > float(l1.value):
        notes.append(
            f"L1: the sweep sees {m1.value:.0f} B of L1, more than the unified L1+shared "
            f"size {float(l1.value):.0f} B: check the preset or the sweep (kept {l1.value})"
        )
    return notes


def launch_latency_note(rows: Sequence[Measurement], cfg: TimingConfig) -> str | None:
    """A note when the measured launch latency is not a plausible simulator input."""
    launch = next((r for r in rows if r.name == mn.LAUNCH_LATENCY_US), None)
    clock = cfg.get("core.core_clock_mhz")
    if launch is None or clock is None or launch.value is None:
        return None
    cycles = launch.value * float(clock.value)
    if launch_latency_plausible(cycles):
        return None
    lo, hi = LAUNCH_LATENCY_CYCLES_RANGE
    return (
        f"launch latency {launch.value:g} us = {cycles:.0f} cycles is outside "
        f"[{lo:.0f}, {hi:.0f}] (a host round trip?): kept the preset's value"
    )
