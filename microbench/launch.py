"""Kernel launch latency (Accel-Sim Section II-C: ``kernel_lat``, the
``-gpgpu_kernel_launch_latency`` parameter), measured on the GPU.

A spin kernel first holds the GPU for a few milliseconds while the host queues ``batch``
empty kernels behind it, so they run back to back with no host or Python gap between
them. Each empty kernel's thread 0 stamps ``%globaltimer`` (ns) on entry and on exit;
the launch latency is the mean start-to-start time over the batch (the GPU front end's
cost per kernel; averaging over the batch also hides the timer's ~32 ns to 1 us
granularity), reported in microseconds and in SM cycles (Accel-Sim's unit). This is the
quantity Accel-Sim pays per simulated kernel, not a host round trip (a host
``perf_counter`` around launch + synchronize gives 15k-60k cycles where the shipped
configs use 5,000-7,257).

Also recorded (not used by the tuner): ``launch_roundtrip_us``, the host wall time of
one launch + stream synchronize (what a Python host loop pays).

Validation: every empty kernel wrote its stamps, in launch order, after the spin kernel.

A device without ``%globaltimer`` (GPGPU-Sim's PTX parser lacks it) times launches
itself: ``launch_latency_us`` is then the simulated cycles of a near-empty kernel from
launch to completion (the latency family's ``chase_ca`` with zero steps: one thread,
four stores), on the card as configured (its ``-gpgpu_kernel_launch_latency``
included), converted with the core clock.
"""

from __future__ import annotations

import time

import numpy as np
from hilsim.microbench.device import GLOBALTIMER, Benchmark, Device, Setup
from hilsim.microbench.program import Program

from hilsim.core import measurement_names as mn
from hilsim.core.measurement import Measurement, measurement_from_stability

SOURCE = r"""
__device__ __forceinline__ unsigned long long gtimer_() {
    unsigned long long t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t;
}

extern "C" __global__ void spin_kernel(long long ns, unsigned long long* __restrict__ done)
{
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    const unsigned long long t0 = gtimer_();
    while ((long long)(gtimer_() - t0) < ns) { }
    done[0] = gtimer_();
}

extern "C" __global__ void empty_kernel(unsigned long long* __restrict__ stamps, int i)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) {
        stamps[2 * i] = gtimer_();
        stamps[2 * i + 1] = gtimer_();
    }
}
"""

SOURCES: dict[str, str] = {"empty": SOURCE}

#: plausible GPU-side launch latency per kernel (us): below, the stamps are wrong; above,
#: the host did not keep the queue full (Accel-Sim configs: 5000-7257 cycles, ~4-6 us)
PLAUSIBLE_US = (0.5, 20.0)


def start_to_start_us(stamps: np.ndarray, spin_end_ns: int) -> tuple[float, bool]:
    """Mean start-to-start time (us) of back-to-back kernels from ``%globaltimer`` stamps
    ``[start0, end0, start1, end1, ...]``; valid when every kernel ran, in order, after
    the spin kernel ended."""
    st = np.asarray(stamps, dtype=np.int64).reshape(-1, 2)
    starts = st[:, 0]
    ok = bool(
        len(starts) >= 2
        and np.all(starts > 0)
        and np.all(np.diff(starts) >= 0)
        and np.all(st[:, 1] >= starts)
        and starts[0] >= spin_end_ns
    )
    if not ok:
        return float("nan"), False
    return float(starts[-1] - starts[0]) / (len(starts) - 1) / 1e3, True


def _empty_launches(program: Program, first: int, count: int, timing: str | None = None) -> None:
    for i in range(first, first + count):
        program.launch("empty_kernel", 1, 32, [("buf", "stamps"), ("i32", i)], timing=timing)


def launch_latency(
    device: Device, batch: int = 200, spin_ms: float = 5.0, launches: int = 3
) -> list[Measurement]:
    """GPU-side launch latency of back-to-back empty kernels, and the host round trip;
    on a device without ``%globaltimer``, :func:`launch_cycles` of ``launches`` kernels."""
    if not device.supports(GLOBALTIMER):
        return launch_cycles(device, launches)
    warm = Program("launch.empty").buf("stamps", 16 * batch)
    _empty_launches(warm, 0, 4)  # module load, first-launch costs
    device.run("launch.latency", warm.sync(), Setup.LAUNCH, timed=False)

    failures: list[str] = []
    queued = Program("launch.empty").buf("stamps", 16 * batch).buf("done", 8)
    queued.launch("spin_kernel", 1, 1, [("i64", int(spin_ms * 1e6)), ("buf", "done")])
    queued.host(time.perf_counter)
    _empty_launches(queued, 0, batch)
    queued.host(time.perf_counter)
    queued.sync().read("stamps").read("done")

    def back_to_back() -> float:
        res = device.run("launch.latency", queued, Setup.LAUNCH)
        queued_ms = (res.host[1] - res.host[0]) * 1e3
        stamps, done = res.array("stamps", np.uint64), res.array("done", np.uint64)
        us, ok = start_to_start_us(stamps, int(done[0]))
        if queued_ms >= spin_ms:
            failures.append(
                f"queuing {batch} launches took {queued_ms:.1f} ms >= the {spin_ms} ms spin: "
                "the queue ran dry"
            )
        if not ok:
            failures.append("globaltimer stamps missing or out of order")
        return us

    singles = Program("launch.empty").buf("stamps", 16 * batch)
    _empty_launches(singles, 0, batch // 4, timing="roundtrip")

    def roundtrip() -> float:
        res = device.run("launch.latency", singles, Setup.LAUNCH)
        return float(np.median(list(res.roundtrip_ns.values()))) / 1e3

    bb = device.sample(back_to_back, 6, 0.05, 3)
    rt = device.sample(roundtrip, 8, 0.10, 3)
    mhz, source = device.sm_clock_mhz()
    note = "; ".join(sorted(set(failures)))
    lo, hi = PLAUSIBLE_US
    if bb.value is not None and not lo <= bb.value <= hi:
        note = "; ".join(filter(None, [note, f"{bb.value:.2f} us outside [{lo}, {hi}] us"]))
    return [
        measurement_from_stability(
            mn.LAUNCH_LATENCY_US,
            bb,
            "us",
            {
                "per_sample": batch,
                "timer": "%globaltimer start-to-start, back-to-back behind a spin kernel",
                "cycles": bb.value * mhz if mhz and bb.value else None,
                "sm_clock_mhz": mhz,
                "clock_source": source,
            },
            not failures,
            note,
        ),
        measurement_from_stability(
            mn.LAUNCH_ROUNDTRIP_US,
            rt,
            "us",
            {"per_sample": batch // 4, "timer": "host perf_counter around launch + sync"},
            True,
            "",
        ),
    ]


def launch_cycles(device: Device, launches: int = 3) -> list[Measurement]:
    """``launch_latency_us`` from the device's own cycle count of each launch (a
    simulator): the median over ``launches`` back-to-back near-empty kernels (``chase_ca``
    with zero steps), on the card as configured, converted with the core clock."""
    program = Program("latency.chase").chain("chain", 64, np.zeros(1, dtype=np.int64))
    program.buf("out", 32)
    for _ in range(launches):
        args = [("buf", "chain"), ("i64", 0), ("i64", 0), ("buf", "out")]
        program.launch("chase_ca", 1, 32, args)
    program.read("out")
    result = device.run("launch_latency", program, Setup.LAUNCH)
    out = result.array("out", np.uint64)
    ok = len(result.kernel_cycles) == launches and int(out[0]) != 0 and int(out[1]) == 0
    cycles = float(np.median(result.kernel_cycles))
    mhz, source = device.sm_clock_mhz()
    us = cycles / mhz if mhz else float("nan")
    params = {
        "launches": launches,
        "cycles": cycles,
        "per_launch_cycles": result.kernel_cycles,
        "sm_clock_mhz": mhz,
        "clock_source": source,
        "timer": "simulated cycles per kernel (GPGPU-Sim statistics)",
        **device.backend_params,
    }
    note = "" if ok else "a launch did not run (no statistics block or no result)"
    return [Measurement(mn.LAUNCH_LATENCY_US, us, "us", params, [us], 0.0, ok, note)]


def benchmarks(device: Device) -> list[Benchmark]:
    """The launch family's benchmarks."""
    name = "launch.latency" if device.supports(GLOBALTIMER) else "launch_latency"
    return [(name, launch_latency)]
