"""First-deployment sanity checks: is each number of a suite run in the range published
measurements of the same GPU generation give? (``docs/agent.md``, "Is it sane?").

``hilsim agent microbench`` prints one warning line per measurement outside its range;
the run is still written (a warning says "look", not "wrong"). Ranges are per compute
capability major.minor family, in the suite's units, wide enough for clock and part
differences (about +-25% around the published values). Sources, per row:

* AS: Accel-Sim paper (Khairy et al., ISCA 2020), Table IV, hardware values its
  microbenchmarks measured: L1 28 cycles (Volta, Turing), L2 212 (Volta) / 226 (Turing).
* J18: Jia et al., "Dissecting the NVIDIA Volta GPU Architecture via Microbenchmarking",
  2018: V100 L1 hit 28, shared 19, L2 hit ~193 cycles; DRAM ~750 of 900 GB/s.
* J19: Jia et al., "Dissecting the NVIDIA Turing T4 GPU via Microbenchmarking", 2019:
  T4 L1 hit 32, L2 hit ~188 cycles.
* GB: gpu-benches pointer chase (``tests/data/microbench``): V100 L1 30 / L2 215 /
  DRAM 428 cycles; H100 PCIe L1 34 / near L2 266 / DRAM 650 cycles.
* ABD22: Abdelkhalik et al., "Demystifying the NVIDIA Ampere Architecture through
  Microbenchmarking and Instruction-level Analysis", HPEC 2022 (A100).
* LUO24: Luo et al., "Benchmarking and Dissecting the Nvidia Hopper GPU Architecture",
  IPDPS 2024 (H100).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from hilsim.core import measurement_names as mn
from hilsim.core.measurement import Measurement

# family -> measurement -> (low, high, source); cycles unless the name says otherwise
LATENCY_RANGES: dict[str, dict[str, tuple[float, float, str]]] = {
    "volta": {
        mn.L1_HIT_LATENCY: (22, 38, "AS Table IV 28; J18 28; GB 30"),
        mn.SHARED_LATENCY: (15, 30, "J18 19; Accel-Sim QV100 config 20"),
        mn.L2_HIT_LATENCY: (160, 270, "J18 ~193; AS Table IV 212; GB 215"),
        mn.DRAM_LATENCY: (300, 650, "GB 428 (chase past L2)"),
    },
    "turing": {
        mn.L1_HIT_LATENCY: (22, 42, "AS Table IV 28; J19 32"),
        mn.SHARED_LATENCY: (15, 32, "J19 (shared ~ Volta)"),
        mn.L2_HIT_LATENCY: (150, 290, "J19 ~188; AS Table IV 226"),
        mn.DRAM_LATENCY: (300, 800, "J19 (GDDR6)"),
    },
    "ampere": {
        mn.L1_HIT_LATENCY: (24, 44, "ABD22 (~33)"),
        mn.SHARED_LATENCY: (18, 36, "ABD22 (~23-29)"),
        mn.L2_HIT_LATENCY: (170, 330, "ABD22 (~200-260)"),
        mn.DRAM_LATENCY: (300, 850, "ABD22"),
    },
    "hopper": {
        mn.L1_HIT_LATENCY: (26, 44, "GB 34 (H100 PCIe); LUO24 (~33)"),
        mn.SHARED_LATENCY: (20, 38, "LUO24 (~29)"),
        mn.L2_HIT_LATENCY: (200, 340, "GB 266 (near partition); LUO24 (~260)"),
        mn.DRAM_LATENCY: (450, 900, "GB 650; LUO24"),
    },
}

#: achieved / theoretical peak DRAM bandwidth for read, write and copy (STREAM-like
#: kernels reach 75-93% on HBM2, HBM3 and GDDR6; J18: V100 750 / 900 GB/s; on an H100 the
#: driver's own fill and copy reached 96% and 89% of 3352 GB/s); above 1.0 the timing
#: is wrong
DRAM_FRACTION = (0.6, 1.0)
#: footprint-sweep L2 capacity / device-query L2 (a lower bound on a 2^(1/4) grid)
L2_FRACTION = (1 / 1.25, 1.02)
#: measured SM clock / max SM clock (boost)
CLOCK_FRACTION = (0.5, 1.02)
#: GPU-side launch latency, us (Accel-Sim's shipped configs: 5000-7257 cycles)
LAUNCH_US = (0.5, 20.0)


def family(compute_capability: str | None) -> str | None:
    """The generation a compute capability belongs to (None when unknown)."""
    try:
        major, minor = (int(x) for x in str(compute_capability).split(".")[:2])
    except (TypeError, ValueError):
        return None
    return {7: "turing" if minor >= 5 else "volta", 8: "ampere", 9: "hopper"}.get(major)


def _outside(value: float, lo: float, hi: float) -> bool:
    return not lo <= value <= hi


def sanity_warnings(results: Iterable[Measurement], facts: dict[str, Any]) -> list[str]:
    """One line per valid measurement outside its published range (see module doc)."""
    by_name = {m.name: m for m in results if m.valid and m.value is not None}
    out: list[str] = []
    fam = family(facts.get("compute_capability"))
    for name, (lo, hi, src) in LATENCY_RANGES.get(fam or "", {}).items():
        m = by_name.get(name)
        if m is not None and _outside(float(m.value), lo, hi):
            out.append(f"{name} = {m.value:.1f} cycles is outside [{lo}, {hi}] for {fam} ({src})")
    peak = facts.get("peak_dram_gbs")
    for name in (mn.DRAM_READ_BANDWIDTH, mn.DRAM_WRITE_BANDWIDTH, mn.DRAM_COPY_BANDWIDTH):
        m = by_name.get(name)
        if m is not None and peak:
            frac = float(m.value) / float(peak)
            if _outside(frac, *DRAM_FRACTION):
                out.append(
                    f"{name} = {m.value:.0f} GB/s is {frac:.0%} of the {peak:.0f} GB/s peak "
                    f"(expected {DRAM_FRACTION[0]:.0%}-{DRAM_FRACTION[1]:.0%})"
                )
    m, l2 = by_name.get(mn.L2_CAPACITY_BYTES), facts.get("l2_cache_bytes")
    if m is not None and l2:
        frac = float(m.value) / float(l2)
        if _outside(frac, *L2_FRACTION):
            out.append(
                f"{mn.L2_CAPACITY_BYTES} = {m.value:.0f} B from the sweep vs {l2} B queried "
                f"(expected {L2_FRACTION[0]:.2f}-{L2_FRACTION[1]:.2f} of it)"
            )
    m, mx = by_name.get(mn.SM_CLOCK_MHZ), facts.get("max_sm_clock_mhz")
    if m is not None and mx:
        frac = float(m.value) / float(mx)
        if _outside(frac, *CLOCK_FRACTION):
            out.append(f"{mn.SM_CLOCK_MHZ} = {m.value:.0f} MHz is {frac:.0%} of the {mx} MHz "
                       "max clock")
    m = by_name.get(mn.LAUNCH_LATENCY_US)
    if m is not None and _outside(float(m.value), *LAUNCH_US):
        out.append(f"{mn.LAUNCH_LATENCY_US} = {m.value:.2f} us is outside {list(LAUNCH_US)} us")
    return out
