"""Cache geometry from latency curves: real recorded sweeps (tests/data/microbench,
see its README for provenance) plus synthetic staircases built from TITAN V facts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hilsim.microbench.analysis import (
    cache_levels,
    detect_plateaus,
    fine_grained_granularity,
    line_size_from_stride_sweep,
)
from hilsim.microbench.bandwidth import onchip_expected
from hilsim.microbench.clock import clock_mhz_from_records
from hilsim.microbench.gpu import theoretical_dram_gbs
from hilsim.microbench.latency import single_cycle, sweep_footprints
from hilsim.microbench.rates import per_sm_rate
from hypothesis import given, settings
from hypothesis import strategies as st

DATA = Path(__file__).parent / "data" / "microbench"
KiB, MiB = 1024, 1024 * 1024


def load_sweep(name: str) -> tuple[np.ndarray, np.ndarray]:
    """gpu-benches output: iters, MHz, footprint KiB, ms, cycles per load."""
    rows = [
        line.split()
        for line in (DATA / name).read_text().splitlines()
        if line.strip() and not line.startswith("clock")
    ]
    table = np.asarray(rows, dtype=float)
    return table[:, 2] * KiB, table[:, 4]


def test_v100_real_sweep() -> None:
    x, y = load_sweep("v100_latency.txt")
    levels = cache_levels(x, y)
    assert len(levels.plateaus) == 3
    # V100: 128 KiB L1/shared, 6 MiB L2; the true size lies in [capacity, upper)
    assert levels.l1_bytes <= 128 * KiB < levels.l1_upper_bytes
    assert levels.l2_bytes <= 6 * MiB < levels.l2_upper_bytes
    assert levels.l1_latency == pytest.approx(30, abs=1)
    assert levels.l2_latency == pytest.approx(215, abs=2)
    assert levels.memory_latency == pytest.approx(428, abs=10)


def test_h100_real_sweep_sees_both_l2_partitions() -> None:
    x, y = load_sweep("h100_pcie_latency.txt")
    levels = cache_levels(x, y)
    lat = [p.latency for p in levels.plateaus]
    assert len(lat) == 4 and lat == sorted(lat)  # L1, near L2, far L2, DRAM
    assert 200 * KiB <= levels.l1_bytes < 256 * KiB < levels.l1_upper_bytes + 32 * KiB
    near = levels.plateaus[1]
    assert 20 * MiB <= near.last_footprint <= 26 * MiB  # one partition: ~25 MiB
    assert 45 * MiB <= levels.l2_bytes <= 52 * MiB < levels.l2_upper_bytes  # 50 MiB L2
    assert levels.l2_latency == pytest.approx(265.5, abs=2)  # ordinary (near) L2 hit
    assert levels.memory_latency == pytest.approx(650, abs=10)


def test_fine_grained_trace_gives_sector_and_dram_fetch() -> None:
    trace = np.loadtxt(DATA / "finegrained_4B_stride_cpi.txt")
    levels = fine_grained_granularity(trace, elem_bytes=4)
    # L1 misses every 32 B (sector), L2 misses every 64 B (two-sector DRAM fetch)
    assert [g for _, g in levels] == [32, 64]


def test_stride_sweep_from_real_trace() -> None:
    """Sub-sampling the 4 B trace at stride s reproduces a stride sweep of the same chase."""
    trace = np.loadtxt(DATA / "finegrained_4B_stride_cpi.txt")
    strides = [4, 8, 16, 32, 64, 128]
    lat = [trace[s // 4 :: s // 4].mean() for s in strides]
    assert np.all(np.diff(lat) >= -1)
    assert line_size_from_stride_sweep(strides, lat) == 64  # cold chase: DRAM fetch size
    assert line_size_from_stride_sweep(strides[:4], lat[:4]) == 32  # up to L2 hits: sector


def staircase(
    levels: list[tuple[float, float]], memory: float, per_octave: int, noise: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Latency vs footprint for (capacity, latency) cache levels then memory."""
    x = 4096 * 2.0 ** (np.arange(0, 14 * per_octave) / per_octave)
    y = np.full(x.shape, memory)
    for cap, lat in reversed(levels):
        y = np.where(x <= cap, lat, y)
    rng = np.random.default_rng(seed)
    return x, y * (1 + rng.uniform(-noise, noise, x.shape))


def test_titan_v_facts_staircase() -> None:
    # Accel-Sim's TITAN V output: L1 33.7, L2 hit 211, memory 313 cycles; 128 KiB L1, 4.5 MiB L2
    x, y = staircase([(128 * KiB, 33.7), (4.5 * MiB, 211.0)], 313.0, 4, 0.01, 0)
    levels = cache_levels(x, y)
    assert levels.l1_bytes <= 128 * KiB < levels.l1_upper_bytes
    assert levels.l2_bytes <= 4.5 * MiB < levels.l2_upper_bytes
    assert levels.l1_latency == pytest.approx(33.7, rel=0.02)
    assert levels.l2_latency == pytest.approx(211, rel=0.02)
    assert levels.memory_latency == pytest.approx(313, rel=0.02)


@settings(max_examples=60, deadline=None)
@given(
    l1_oct=st.integers(2, 5),
    gap_oct=st.integers(3, 6),
    l1_lat=st.floats(15, 60),
    ratio2=st.floats(1.5, 8),
    ratio3=st.floats(1.3, 3),
    noise=st.floats(0, 0.03),
    seed=st.integers(0, 1000),
)
@pytest.mark.slow
def test_staircase_property(l1_oct, gap_oct, l1_lat, ratio2, ratio3, noise, seed) -> None:
    l1 = 4096 * 2**l1_oct
    l2 = l1 * 2**gap_oct
    x, y = staircase(
        [(l1, l1_lat), (l2, l1_lat * ratio2)], l1_lat * ratio2 * ratio3, 4, noise, seed
    )
    levels = cache_levels(x, y)
    assert len(levels.plateaus) == 3
    assert levels.l1_bytes <= l1 < levels.l1_upper_bytes
    assert levels.l2_bytes <= l2 < levels.l2_upper_bytes


def test_flat_and_invalid_curves() -> None:
    x = np.arange(1, 11) * 4096.0
    assert len(detect_plateaus(x, np.full(10, 30.0))) == 1
    assert cache_levels(x, np.full(10, 30.0)).l2_bytes is None
    assert line_size_from_stride_sweep([8, 16, 32], [30, 30, 30]) is None
    with pytest.raises(ValueError):
        detect_plateaus([2.0, 1.0], [1.0, 1.0])
    with pytest.raises(ValueError):
        detect_plateaus([1.0, 2.0], [1.0, -1.0])


def test_pure_helpers_of_the_gpu_families() -> None:
    # TITAN V: 850 MHz HBM2 x 3072 bit x 2 = 652.8 GB/s (Accel-Sim mem_bw's peak)
    assert theoretical_dram_gbs(850, 3072) == pytest.approx(652.8)
    assert theoretical_dram_gbs(7001, 192) == pytest.approx(336.048)  # RTX 2060 GDDR6
    assert theoretical_dram_gbs(None, 3072) is None
    nxt = single_cycle(1000, np.random.default_rng(1))
    seen, p = set(), 0
    for _ in range(1000):
        seen.add(p)
        p = nxt[p]
    assert p == 0 and len(seen) == 1000  # one cycle through every node
    assert list(single_cycle(4, None)) == [1, 2, 3, 0]
    sizes = sweep_footprints(50 * MiB)
    assert sizes[0] == 4096 and sizes[-1] >= 100 * MiB and sizes == sorted(set(sizes))
    # two blocks on SM 0 (serial), one on SM 1: 100 units/block
    rate, sms = per_sm_rate(np.array([[0, 0, 10], [0, 10, 20], [1, 5, 15]]), 100.0)
    assert sms == 2 and rate == pytest.approx(10.0)
    assert clock_mhz_from_records(np.array([[1_755_000, 1_000_000], [5, 0]])) == 1755.0
    exp = onchip_expected(np.array([[0, 1024], [1, 1025]]), reps=3)
    assert list(exp) == [3 * (6 + 16 * 1024 + 6), 3 * (16 + 6 + 16 * 1025 + 6)]
