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

On a simulated device: a 64-long latency chain on one SM; throughput (16 updates per
thread distinct, 4 same) at full occupancy on the active SMs, the rate the updates over
the launch's simulated cycles, in atomics/s at the card's clock of the simulated SMs
(not scaled: the same-address rate is one L2 bank's whatever the SM count). A device
that cannot run ``red`` runs ``atom`` with a sink for it and says so in
``params["instruction"]`` (:meth:`~hilsim.microbench.device.Device.executed_as`).
"""

from __future__ import annotations

import numpy as np
from hilsim.microbench.device import Benchmark, Device, Setup
from hilsim.microbench.program import Program

from hilsim.core import measurement_names as mn
from hilsim.core.measurement import Measurement, measurement_from_stability

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


_MASK32 = (1 << 32) - 1


def atomic_latency(device: Device, n: int | None = None) -> Measurement:
    """Cycles per dependent ``atomicAdd`` (one thread; ``n``: 4096 on a GPU, 64 on a
    simulator)."""
    if n is None:
        n = 64 if device.simulated else 4096
    program = Program("atomics.atomic").buf("data", 4).buf("out", 24)
    program.launch("atomic_lat", 1, 1, [("buf", "data"), ("u32", 0), ("i32", n), ("buf", "out")])
    program.read("data").read("out")
    failures: list[str] = []

    def once() -> float:
        res = device.run("atomics.latency", program, Setup.ONE_SM)
        body, overhead, last = (int(v) for v in res.array("out", np.int64)[:3])
        if int(res.array("data", np.uint32)[0]) != n or last != n - 1:
            failures.append("counter does not equal the number of atomics")
        return (body - overhead) / n

    stab = device.sample(once, 8, 0.03, 3)
    return measurement_from_stability(
        mn.ATOMIC_LATENCY,
        stab,
        "cycles",
        {"instruction": "atom.global.add.u32", "chain_length": n, **device.kernel_clock_params},
        not failures,
        "; ".join(sorted(set(failures))),
    )


def atomic_throughput(device: Device, same: bool) -> Measurement:
    """Atomic updates per second and per SM clock (all active SMs), distinct or same
    address: timed by CUDA events over batches of launches on a GPU, by the launch's
    simulated cycles on a simulator."""
    block = 256
    grid = device.active_sms * max(1, device.threads_per_sm // block)
    threads = grid * block
    n = 4 if same else (16 if device.simulated else 64)
    program = Program("atomics.atomic").buf("data", 4 * (1 if same else threads))
    args = [("buf", "data"), ("i32", n), ("i32", int(same))]
    program.launch("atomic_tput", grid, block, args, timing="batch", reset=["data"])
    name = mn.ATOMIC_THROUGHPUT_SAME if same else mn.ATOMIC_THROUGHPUT_DISTINCT
    address = "one word for all threads" if same else "one word per thread"
    expected = threads * n if same else n  # per launch
    instruction = device.executed_as("red.global.add.u32")
    if device.simulated:
        return _simulated_throughput(device, program.read("data"), name, same, threads, n,
                                     instruction, address)
    failures: list[str] = []
    device.run(name, program, Setup.SM_SLICE, timed=False)

    def once() -> float:
        res = device.run(name, program, Setup.SM_SLICE)
        k = res.batch[0]
        if not bool((res.buffer("data", np.uint32) == (k * expected) & _MASK32).all()):
            failures.append("counters do not equal the number of updates")
        return threads * n / (res.ms[0] * 1e-3)

    stab = device.sample(once, 8, 0.05, 3)
    mhz, source = device.sm_clock_mhz()
    per_clk = stab.value / (mhz * 1e6) if mhz else None
    params = {
        "instruction": instruction,
        "threads": threads,
        "per_thread": n,
        "address": address,
        "atomics_per_s": stab.value,
        "sm_clock_mhz": mhz,
        "clock_source": source,
        "bytes_per_clk": per_clk * 4 if per_clk else None,
    }
    m = measurement_from_stability(
        name, stab, "atomics/s", params, not failures, "; ".join(sorted(set(failures)))
    )
    if per_clk is not None:
        m.params["atomics_per_clk"] = per_clk
    return m


def _simulated_throughput(
    device: Device,
    program: Program,
    name: str,
    same: bool,
    threads: int,
    n: int,
    instruction: str,
    address: str,
) -> Measurement:
    res = device.run(f"atomics.{'same' if same else 'distinct'}", program, Setup.SM_SLICE)
    want = (threads * n) & _MASK32 if same else n
    ok = bool(np.all(res.array("data", np.uint32) == want))
    cycles = res.kernel_cycles[0]
    per_clk = threads * n / cycles
    mhz, source = device.sm_clock_mhz()
    mhz = float(mhz or np.nan)
    value = per_clk * mhz * 1e6
    params = {
        **device.slice_params(),
        "instruction": instruction,
        "threads": threads,
        "per_thread": n,
        "address": address,
        "atomics_per_s": value,
        "atomics_per_clk": per_clk,
        "bytes_per_clk": per_clk * 4,
        "sm_clock_mhz": mhz,
        "clock_source": source,
        "slice_cycles": cycles,
        "scaling": f"none: the rate of {device.active_sms} simulated SMs",
    }
    note = "" if ok else "counters do not equal the number of updates"
    return Measurement(name, value, "atomics/s", params, [value], 0.0, ok, note)


def benchmarks(device: Device) -> list[Benchmark]:
    """The atomics family's benchmarks, in run order."""
    return [
        ("atomics.latency", lambda d: [atomic_latency(d)]),
        ("atomics.throughput", lambda d: [atomic_throughput(d, False), atomic_throughput(d, True)]),
    ]
