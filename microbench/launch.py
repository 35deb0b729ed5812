"""Kernel launch latency (Accel-Sim Section II-C: ``kernel_lat``, the
``-gpgpu_kernel_launch_latency`` parameter).

A near-empty kernel (thread 0 of block 0 increments a counter, which validates that
every launch ran) is launched

* one at a time, host wall clock from before the launch call to after the stream
  synchronises: ``launch.roundtrip`` (what a host loop pays; includes CuPy's Python
  launch overhead, a few microseconds);
* back to back, CUDA events around the batch divided by the count:
  ``launch.back_to_back`` (GPU-side time per launch when the queue is kept full; a
  lower bound set by whichever of host launch rate and GPU front end is slower),
  also in SM cycles (Accel-Sim's unit).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
from hilsim.microbench.measurement import (
    Measurement,
    measurement_from_stability,
    repeat_until_stable,
)

SOURCE = r"""
extern "C" __global__ void empty_kernel(unsigned int* __restrict__ counter)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) atomicAdd(counter, 1u);
}
"""

SOURCES: dict[str, str] = {"empty": SOURCE}


def launch_latency(ctx: Any, batch: int = 200) -> list[Measurement]:
    """Round-trip and back-to-back launch time of an empty kernel (microseconds)."""
    cp = ctx.cp
    counter = cp.zeros(1, dtype=cp.uint32)
    kern = ctx.kernel("launch.empty", "empty_kernel")
    stream = cp.cuda.get_current_stream()
    launches = [0]
    for _ in range(10):  # warm-up
        kern((1,), (32,), (counter,))
        launches[0] += 1
    stream.synchronize()

    def roundtrip() -> float:
        times = []
        for _ in range(batch // 4):
            t0 = time.perf_counter_ns()
            kern((1,), (32,), (counter,))
            stream.synchronize()
            times.append(time.perf_counter_ns() - t0)
        launches[0] += batch // 4
        return float(np.median(times)) / 1e3

    def back_to_back() -> float:
        def run() -> None:
            for _ in range(batch):
                kern((1,), (32,), (counter,))

        ms = ctx.time_ms(run)
        launches[0] += batch
        return ms * 1e3 / batch

    rt = repeat_until_stable(roundtrip, 8, 0.10, 3)
    bb = repeat_until_stable(back_to_back, 8, 0.10, 3)
    ok = int(counter.get()[0]) == launches[0]
    note = "" if ok else "counter does not equal the number of launches"
    mhz, source = ctx.sm_clock_mhz()
    return [
        measurement_from_stability(
            "launch_latency_us",
            rt,
            "us",
            {"per_sample": batch // 4, "timer": "host perf_counter"},
            ok,
            note,
        ),
        measurement_from_stability(
            "launch_back_to_back_us",
            bb,
            "us",
            {
                "per_sample": batch,
                "timer": "CUDA events",
                "cycles": bb.value * mhz if mhz else None,
                "sm_clock_mhz": mhz,
                "clock_source": source,
            },
            ok,
            note,
        ),
    ]


def benchmarks() -> list[tuple[str, Callable[[Any], list[Measurement]]]]:
    """The launch family's benchmarks."""
    return [("launch.latency", launch_latency)]
