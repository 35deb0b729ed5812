"""SM clock under load (Accel-Sim Section II-C ``system_config``: the core clock that
turns cycles into time, ``-gpgpu_clock_domains``).

Every block of a fully occupied grid runs an FMA loop for about 20 ms; thread 0
reads ``clock64()`` (SM cycles) and ``%globaltimer`` (ns) at the start and the end.
Clock (MHz) = delta cycles / delta ns x 1000, the median over blocks. The run is long
against the globaltimer update interval (up to 1 us on some GPUs). NVML's SM clock is
sampled while the kernel runs, for comparison. Validation: positive time deltas and a
clock between 100 and 5000 MHz.

Running this family first lets the others convert GB/s into bytes per clock with the
measured clock instead of NVML's maximum. NVML's memory clock is sampled beside the SM
clock (the clocks under load, recorded in the measurement's params).
:func:`one_warp_clock_mhz` runs the same kernel as one warp: the clock a single-thread
latency chase runs at, which on an unlocked GPU can be the boost clock the all-SM load
does not hold. A device without ``%globaltimer`` records the
clock as skipped (a simulated card's clock is its configuration, in the device facts).
"""

from __future__ import annotations

import time

import numpy as np
from hilsim.microbench.device import GLOBALTIMER, Benchmark, Device, Setup, skip_unless
from hilsim.microbench.gpu import nvml_clocks_mhz
from hilsim.microbench.program import Program

from hilsim.core import measurement_names as mn
from hilsim.core.measurement import Measurement, measurement_from_stability

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


def sm_clock(device: Device, target_ms: float = 20.0) -> list[Measurement]:
    """The SM clock under an FMA load (MHz); the device converts with it from then on."""
    skip = skip_unless(device, GLOBALTIMER, [(mn.SM_CLOCK_MHZ, "MHz")])
    if skip is not None:
        return skip
    block = 256
    grid = device.sm_count * max(1, device.threads_per_sm // block)
    nvml: list[float] = []
    nvml_mem: list[float] = []
    failures: list[str] = []

    def sample_nvml() -> None:
        time.sleep(target_ms / 2e3)
        sm, mem = nvml_clocks_mhz(device.facts)
        if sm:
            nvml.append(sm)
        if mem:
            nvml_mem.append(mem)

    def program(n: int, timing: str | None, sample: bool) -> Program:
        prog = Program("clock.probe").buf("rec", 16 * grid).buf("out", 4 * grid * block)
        args = [("i32", n), ("f32", 0.999), ("f32", 0.001), ("f32", -12345.5)]
        prog.launch("clock_probe", grid, block, [*args, ("buf", "out"), ("buf", "rec")],
                    timing=timing)
        if sample:
            prog.host(sample_nvml)
        return prog.sync().read("rec")

    ms = device.run(mn.SM_CLOCK_MHZ, program(64, "event", False), Setup.SM_SLICE).ms[0]
    timed = program(int(max(64, min(1 << 24, 64 * target_ms / max(ms, 1e-3)))), None, True)

    def once() -> float:
        rec = device.run(mn.SM_CLOCK_MHZ, timed, Setup.SM_SLICE).array("rec", np.uint64)
        mhz = clock_mhz_from_records(rec)
        if not 100.0 <= mhz <= 5000.0:
            failures.append(f"implausible clock {mhz:.0f} MHz")
        return mhz

    stab = device.sample(once, 8, 0.02, 3)
    m = measurement_from_stability(
        mn.SM_CLOCK_MHZ,
        stab,
        "MHz",
        {
            "method": "clock64 / %globaltimer",
            "load": "fp32 FMA, all SMs",
            "nvml_sm_clock_mhz": float(np.median(nvml)) if nvml else None,
            "max_sm_clock_mhz": device.facts.get("max_sm_clock_mhz"),
            "nvml_mem_clock_mhz": float(np.median(nvml_mem)) if nvml_mem else None,
        },
        not failures,
        "; ".join(sorted(set(failures))),
    )
    if m.valid and m.value:
        device.use_measured_clock(float(m.value))
    return [m]


def one_warp_clock_mhz(device: Device, target_ms: float = 20.0) -> float | None:
    """The SM clock while one warp runs (the load of the latency chases: a GPU may boost
    higher than under the all-SM load :func:`sm_clock` measures), or None on a device
    without ``%globaltimer`` or when the probe's delta is implausible."""
    if not device.supports(GLOBALTIMER):
        return None

    def program(n: int, timing: str | None) -> Program:
        prog = Program("clock.probe").buf("rec", 16).buf("out", 4 * 32)
        args = [("i32", n), ("f32", 0.999), ("f32", 0.001), ("f32", -12345.5)]
        prog.launch("clock_probe", 1, 32, [*args, ("buf", "out"), ("buf", "rec")], timing=timing)
        return prog.read("rec")

    ms = device.run("chase_sm_clock_mhz", program(64, "event"), Setup.ONE_SM).ms[0]
    n = int(max(64, min(1 << 24, 64 * target_ms / max(ms, 1e-3))))
    rec = device.run("chase_sm_clock_mhz", program(n, None), Setup.ONE_SM).array("rec", np.uint64)
    mhz = clock_mhz_from_records(rec)
    return mhz if 100.0 <= mhz <= 5000.0 else None


def benchmarks(device: Device) -> list[Benchmark]:
    """The clock family's benchmarks."""
    return [(mn.SM_CLOCK_MHZ, sm_clock)]
