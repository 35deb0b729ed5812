"""Real recorded latency curves, read as the suite reads its own sweep, tune without error
and keep the queried cache sizes.

The curves (``tests/data/microbench``, gpu-benches on an H100 PCIe and a V100) are
resampled at the suite's own sweep points (:func:`hilsim.microbench.latency.sweep_footprints`,
log-linear interpolation) and read with :func:`hilsim.microbench.analysis.cache_levels`,
exactly what ``footprint_sweep`` records as ``l1_capacity_bytes`` / ``l2_capacity_bytes``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hilsim.microbench.analysis import cache_levels
from hilsim.microbench.latency import sweep_footprints
from hilsim.simmodel.tuner import tune

from hilsim.core import measurement_names as mn
from hilsim.core.measurement import Measurement

DATA = Path(__file__).parent / "data" / "microbench"
KiB, MiB = 1024, 1 << 20

CARDS = {
    # file, queried L2 (cudaDeviceProp.l2CacheSize), facts, preset unified L1+shared
    "h100": ("h100_pcie_latency.txt", 50 * MiB,
             {"name": "NVIDIA H100 PCIe", "compute_capability": "9.0", "sm_count": 114,
              "shared_mem_per_sm_bytes": 233472}),
    "v100": ("v100_latency.txt", 6 * MiB,
             {"name": "Tesla V100-SXM2-16GB", "compute_capability": "7.0", "sm_count": 80,
              "shared_mem_per_sm_bytes": 98304}),
}


def _curve(name: str) -> tuple[np.ndarray, np.ndarray]:
    rows = [line.split() for line in (DATA / name).read_text().splitlines()
            if line.strip() and not line.startswith("clock")]
    table = np.asarray(rows, dtype=float)
    return table[:, 2] * KiB, table[:, 4]


def _suite_capacities(name: str, l2: int) -> tuple[float, float]:
    x, y = _curve(name)
    points = np.asarray([p for p in sweep_footprints(l2) if x[0] <= p <= x[-1]], dtype=float)
    resampled = np.interp(np.log(points), np.log(x), y)
    levels = cache_levels(points, resampled)
    assert levels.l1_bytes and levels.l2_bytes
    return float(levels.l1_bytes), float(levels.l2_bytes)


@pytest.mark.parametrize("card", sorted(CARDS))
def test_real_curves_tune_and_keep_the_queried_sizes(card: str) -> None:
    path, l2, facts = CARDS[card]
    l1_seen, l2_seen = _suite_capacities(path, l2)
    assert l2_seen != l2  # a lower bound on the sweep grid, never the exact size
    rows = [
        Measurement(mn.L1_CAPACITY_BYTES, l1_seen, "bytes"),
        Measurement(mn.L2_CAPACITY_BYTES, l2_seen, "bytes"),
    ]
    result = tune(measurements=rows, facts={**facts, "l2_cache_bytes": l2})
    cfg = result.timing
    assert cfg.get("l2.capacity_bytes").value == l2
    assert cfg.get("l2.capacity_bytes").source.kind == "device-query"
    l1 = cfg.get("l1.capacity_bytes")
    assert l1.source.kind == "preset" and l1.value >= l1_seen  # unified L1+shared
    opts = {o.name: o.value for o in result.options}
    sets, line, assoc = (int(v) for v in opts["-gpgpu_cache:dl1"].split(",")[0][2:].split(":"))
    # Accel-Sim's l1_config: unified size - shared per SM (V100: 128 - 96 = 32 KB, not
    # 11.5 KB), made to divide the unified L1 as GPGPU-Sim requires (gpu-cache.h: the
    # H100's 256 - 228 = 28 KB becomes 16 KB; simmodel/gpgpusim/runnable.py)
    size, carve = sets * line * assoc, l1.value - facts["shared_mem_per_sm_bytes"]
    assert l1.value % size == 0 and size <= carve and 2 * size > carve
    assert size == {"v100": 32 * KiB, "h100": 16 * KiB}.get(card, size)
    assert not [n for n in result.notes if n.startswith("L2:")]  # the sweep agrees


def test_a_contradicting_sweep_is_noted_not_used() -> None:
    rows = [Measurement(mn.L2_CAPACITY_BYTES, 3 * MiB, "bytes")]
    result = tune(measurements=rows, facts={**CARDS["v100"][2], "l2_cache_bytes": 6 * MiB})
    assert result.timing.get("l2.capacity_bytes").value == 6 * MiB
    assert any(n.startswith("L2:") for n in result.notes)


def test_turing_max_l1_carveout_sweep_tunes() -> None:
    """A chase with the max-L1 carveout sees 64 KB of L1 on an RTX 2060, equal to its
    shared memory per SM: tuning must not fail ("leaves no L1")."""
    rows = [Measurement(mn.L1_CAPACITY_BYTES, 64 * KiB, "bytes")]
    facts = {"name": "NVIDIA GeForce RTX 2060", "compute_capability": "7.5", "sm_count": 30,
             "shared_mem_per_sm_bytes": 65536, "l2_cache_bytes": 3 * MiB}
    result = tune(measurements=rows, facts=facts)
    assert result.timing.get("l1.capacity_bytes").value > 64 * KiB


def test_corrected_convention_on_hilsim_measurements_is_flagged() -> None:
    """Accel-Sim-derived offsets on hilsim's pure chains are marked approximate."""
    rows = [Measurement(mn.SHARED_LATENCY, 21.0, "cycles")]
    result = tune(measurements=rows, preset_name="QV100", convention="simulator-corrected")
    assert any("pure absolute-address chains" in n for n in result.notes)
