"""SM clock under load (Accel-Sim Section II-C ``system_config``: the core clock that
turns cycles into time, ``-gpgpu_clock_domains``).

Every block of a fully occupied grid runs an FMA loop for about 20 ms; thread 0
reads ``clock64()`` (SM cycles) and ``%globaltimer`` (ns) at the start and the end.
Clock (MHz) = delta cycles / delta ns x 1000, the median over blocks. The run is long
against the globaltimer update interval (up to 1 us on some GPUs). NVML's SM clock is
sampled while the kernel runs, for comparison. Validation: positive time deltas and a
clock between 100 and 5000 MHz.

Running this family first lets the others convert GB/s into bytes per clock with the
measured clock instead of NVML's maximum.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
from hilsim.microbench._gpu import nvml_sm_clock_mhz

from hilsim.core.measurement import (
    Measurement,
    measurement_from_stability,
    repeat_until_stable,
)

SOURCE = r"""
extern "C" __global__ void clock_probe(int n, float a, float b, float magic,
                                       float* __restrict__ out,
                                       unsigned long long* __restrict__ rec)
{
    unsigned long long g0 = 0, g1 = 0;
    long long c0 = 0, c1 = 0;
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g0));
        c0 = clock64();
    }
    float x0 = (float)threadIdx.x, x1 = x0 + 1.f, x2 = x0 + 2.f, x3 = x0 + 3.f;
    for (int i = 0; i < n; ++i) {
#pragma unroll
        for (int k = 0; k < 16; ++k) {
            asm volatile("fma.rn.f32 %0, %0, %1, %2;" : "+f"(x0) : "f"(a), "f"(b));
            asm volatile("fma.rn.f32 %0, %0, %1, %2;" : "+f"(x1) : "f"(a), "f"(b));
            asm volatile("fma.rn.f32 %0, %0, %1, %2;" : "+f"(x2) : "f"(a), "f"(b));
            asm volatile("fma.rn.f32 %0, %0, %1, %2;" : "+f"(x3) : "f"(a), "f"(b));
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        c1 = clock64();
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g1));
        rec[2 * blockIdx.x] = (unsigned long long)(c1 - c0);
        rec[2 * blockIdx.x + 1] = g1 - g0;
    }
    float r = x0 + x1 + x2 + x3;
    if (r == magic) out[(long long)blockIdx.x * blockDim.x + threadIdx.x] = r;
}
"""

SOURCES: dict[str, str] = {"probe": SOURCE}


def clock_mhz_from_records(records: np.ndarray) -> float:
    """Median over blocks of cycles / ns x 1000 (MHz); NaN when no block has time."""
    rec = np.asarray(records, dtype=np.float64).reshape(-1, 2)
    good = rec[:, 1] > 0
    if not np.any(good):
        return float("nan")
    return float(np.median(rec[good, 0] / rec[good, 1] * 1000.0))


def sm_clock(ctx: Any, target_ms: float = 20.0) -> list[Measurement]:
    """The SM clock under an FMA load (MHz); sets ``ctx.sm_clock_mhz_measured``."""
    cp = ctx.cp
    block = 256
    grid = ctx.sm_count * max(1, ctx.threads_per_sm // block)
    rec = cp.zeros(2 * grid, dtype=cp.uint64)
    out = cp.zeros(grid * block, dtype=cp.float32)
    kern = ctx.kernel("clock.probe", "clock_probe")
    n = [64]
    args = (np.float32(0.999), np.float32(0.001), np.float32(-12345.5), out, rec)

    def launch() -> None:
        kern((grid,), (block,), (np.int32(n[0]), *args))

    ms = ctx.time_ms(launch)
    n[0] = int(max(64, min(1 << 24, n[0] * target_ms / max(ms, 1e-3))))
    nvml: list[float] = []
    failures: list[str] = []

    def once() -> float:
        launch()
        time.sleep(target_ms / 2e3)
        value = nvml_sm_clock_mhz(ctx.facts)
        if value:
            nvml.append(value)
        cp.cuda.get_current_stream().synchronize()
        mhz = clock_mhz_from_records(rec.get())
        if not 100.0 <= mhz <= 5000.0:
            failures.append(f"implausible clock {mhz:.0f} MHz")
        return mhz

    stab = repeat_until_stable(once, 8, 0.02, 3)
    m = measurement_from_stability(
        "sm_clock_mhz",
        stab,
        "MHz",
        {
            "method": "clock64 / %globaltimer",
            "load": "fp32 FMA, all SMs",
            "nvml_sm_clock_mhz": float(np.median(nvml)) if nvml else None,
            "max_sm_clock_mhz": ctx.facts.get("max_sm_clock_mhz"),
        },
        not failures,
        "; ".join(sorted(set(failures))),
    )
    if m.valid and m.value:
        ctx.sm_clock_mhz_measured = float(m.value)
    return [m]


def benchmarks() -> list[tuple[str, Callable[[Any], list[Measurement]]]]:
    """The clock family's benchmarks."""
    return [("sm_clock_mhz", sm_clock)]
