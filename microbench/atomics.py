"""Global atomics: latency and throughput (Accel-Sim Section II-C: ``atomic_add_lat``,
``atomic_add_bw``, ``atomic_add_bw_conflict``).

* Latency: one thread runs a chain of ``atom.global.add.u32`` in which each address
  depends on the previous returned value (``p + (old & zero)``, ``zero`` a kernel
  argument the compiler cannot fold). Reported per atomic, after the clock-read
  overhead; it includes one AND and one address add (a few cycles).
* Throughput: every thread issues ``red.global.add.u32`` (fire and forget, what
  ``atomicAdd`` without a used result compiles to) ``n`` times, either to its own
  4 B word (adjacent words across the warp: "distinct") or all to one word ("same").
  Inline PTX keeps the compiler from aggregating same-address updates per warp.
  Timed by CUDA events; atomics per SM clock (whole GPU) and bytes/clk (x 4 B, the
  Accel-Sim unit).

Validation: the final counters equal the number of updates.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from hilsim.core.measurement import (
    Measurement,
    measurement_from_stability,
    repeat_until_stable,
)

SOURCE = r"""
extern "C" __global__ void atomic_lat(unsigned int* __restrict__ data, unsigned int zero,
                                      int n, long long* __restrict__ out)
{
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    unsigned int v = 0;
    long long t0 = clock64();
    long long t1 = clock64();
    for (int i = 0; i < n; ++i) {
        asm volatile("atom.global.add.u32 %0, [%1], 1;"
                     : "=r"(v) : "l"(data + (v & zero)) : "memory");
    }
    long long t2 = clock64();
    out[0] = t2 - t1;
    out[1] = t1 - t0;
    out[2] = v;
}

extern "C" __global__ void atomic_tput(unsigned int* __restrict__ data, int n, int same)
{
    unsigned int* p = data + (same ? 0 : (long long)blockIdx.x * blockDim.x + threadIdx.x);
    for (int i = 0; i < n; ++i) {
        asm volatile("red.global.add.u32 [%0], 1;" :: "l"(p) : "memory");
    }
}
"""

SOURCES: dict[str, str] = {"atomic": SOURCE}


def atomic_latency(ctx: Any, n: int = 4096) -> Measurement:
    """Cycles per dependent ``atomicAdd`` (one thread)."""
    cp = ctx.cp
    data = cp.zeros(1, dtype=cp.uint32)
    out = cp.zeros(3, dtype=cp.int64)
    kern = ctx.kernel("atomics.atomic", "atomic_lat")
    failures: list[str] = []

    def once() -> float:
        data.fill(0)
        kern((1,), (1,), (data, np.uint32(0), np.int32(n), out))
        body, overhead, last = (int(v) for v in out.get())
        if int(data.get()[0]) != n or last != n - 1:
            failures.append("counter does not equal the number of atomics")
        return (body - overhead) / n

    stab = repeat_until_stable(once, 8, 0.03, 3)
    return measurement_from_stability(
        "atomic_latency",
        stab,
        "cycles",
        {"instruction": "atom.global.add.u32", "chain_length": n},
        not failures,
        "; ".join(sorted(set(failures))),
    )


def atomic_throughput(ctx: Any, same: bool) -> Measurement:
    """Atomic updates per SM clock (whole GPU), distinct or same address."""
    cp = ctx.cp
    block = 256
    grid = ctx.sm_count * max(1, ctx.threads_per_sm // block)
    threads = grid * block
    n = 4 if same else 64
    data = cp.zeros(1 if same else threads, dtype=cp.uint32)
    kern = ctx.kernel("atomics.atomic", "atomic_tput")
    failures: list[str] = []
    expected = threads * n if same else n  # per launch

    def launch() -> None:
        kern((grid,), (block,), (data, np.int32(n), np.int32(1 if same else 0)))

    def reset() -> None:
        data.fill(0)

    launch()

    def once() -> float:
        ms, k = ctx.time_batch_ms(launch, reset)  # fill outside the events (review S2-3)
        if not bool((data == (k * expected) & 0xFFFFFFFF).all()):
            failures.append("counters do not equal the number of updates")
        return threads * n / (ms * 1e-3)

    stab = repeat_until_stable(once, 8, 0.05, 3)
    mhz, source = ctx.sm_clock_mhz()
    per_clk = stab.value / (mhz * 1e6) if mhz else None
    params = {
        "instruction": "red.global.add.u32",
        "threads": threads,
        "per_thread": n,
        "address": "one word for all threads" if same else "one word per thread",
        "atomics_per_s": stab.value,
        "sm_clock_mhz": mhz,
        "clock_source": source,
        "bytes_per_clk": per_clk * 4 if per_clk else None,
    }
    name = "atomic_throughput_same" if same else "atomic_throughput_distinct"
    m = measurement_from_stability(
        name, stab, "atomics/s", params, not failures, "; ".join(sorted(set(failures)))
    )
    if per_clk is not None:
        m.params["atomics_per_clk"] = per_clk
    return m


def benchmarks() -> list[tuple[str, Callable[[Any], list[Measurement]]]]:
    """The atomics family's benchmarks, in run order."""
    return [
        ("atomics.latency", lambda ctx: [atomic_latency(ctx)]),
        (
            "atomics.throughput",
            lambda ctx: [atomic_throughput(ctx, False), atomic_throughput(ctx, True)],
        ),
    ]
