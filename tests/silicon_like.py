"""Silicon measurements on other cards' device facts: the H100's measured suite
(tests/data/silicon/H100/microbench.json, a real run) with the device block of a V100,
an RTX 2060 or an RTX 3070 (their published facts: SMs, caches, memory bus and clock,
clocks) and, for the two GeForce cards, FP64 at 1/32 of the FP32 rate (their published
ratio). What a real file of those cards looks like to the tuner: ~4-cycle FFMA/IMAD
chains, FP32/INT32 rates whose initiation interval is 1 or 2, and (GeForce) an FP64
interval far above any FP64 latency."""

from __future__ import annotations

import json
from pathlib import Path

H100 = Path(__file__).parent / "data" / "silicon" / "H100" / "microbench.json"

#: published device facts, in the suite's key names
CARDS: dict[str, dict[str, object]] = {
    "V100": {"name": "V100-like", "compute_capability": "7.0", "cc_major": 7, "cc_minor": 0,
             "sm_count": 80, "l2_cache_bytes": 6 << 20, "memory_bus_width_bits": 4096,
             "max_mem_clock_mhz": 877, "max_sm_clock_mhz": 1530, "memory_type": "HBM2",
             "shared_mem_per_sm_bytes": 98304, "unified_l1_shared_bytes": 131072,
             "max_threads_per_sm": 2048, "fp64_ratio": None},
    "RTX2060": {"name": "RTX 2060-like", "compute_capability": "7.5", "cc_major": 7,
                "cc_minor": 5, "sm_count": 30, "l2_cache_bytes": 3 << 20,
                "memory_bus_width_bits": 192, "max_mem_clock_mhz": 7001,
                "max_sm_clock_mhz": 1680, "memory_type": "GDDR6",
                "shared_mem_per_sm_bytes": 65536, "unified_l1_shared_bytes": 98304,
                "max_threads_per_sm": 1024, "fp64_ratio": 1 / 32},
    "RTX3070": {"name": "RTX 3070-like", "compute_capability": "8.6", "cc_major": 8,
                "cc_minor": 6, "sm_count": 46, "l2_cache_bytes": 4 << 20,
                "memory_bus_width_bits": 256, "max_mem_clock_mhz": 7001,
                "max_sm_clock_mhz": 1725, "memory_type": "GDDR6",
                "shared_mem_per_sm_bytes": 102400, "unified_l1_shared_bytes": 131072,
                "max_threads_per_sm": 1536, "fp64_ratio": 1 / 64},
}


def silicon_like(card: str, folder: Path) -> Path:
    """Write ``folder/CARD.microbench.json``: the H100 measurements on ``card``'s facts."""
    doc = json.loads(H100.read_text())
    facts = dict(CARDS[card])
    ratio = facts.pop("fp64_ratio")
    keep = {k: v for k, v in doc["device"].items()
            if k in ("shared_mem_per_block_bytes", "regs_per_sm", "warp_size")}
    doc["device"] = {**keep, **facts}
    fp32 = next(m["value"] for m in doc["measurements"] if m["name"] == "fp32_throughput")
    for m in doc["measurements"]:
        if ratio is not None and m["name"] == "fp64_throughput":
            m["value"] = fp32 * ratio
    path = folder / f"{card}.microbench.json"
    path.write_text(json.dumps(doc))
    return path
