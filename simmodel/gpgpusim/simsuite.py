"""The microbenchmark suite on a simulated card (GPGPU-Sim backend; issue 12, part 2).

Same kernels as the CuPy suite (their source text, compiled with the generic host driver
by :mod:`hilsim.simmodel.gpgpusim.simhost`), same measurement names and units, same
``hilsim.microbench/1`` file (:mod:`hilsim.core.measurement`), the same plateau and
capacity analysis (:func:`hilsim.microbench.analysis.cache_levels`). What differs, and why:

* **One sample per measurement.** The simulator is deterministic: a repeated run gives
  the same cycles, so ``samples`` holds one value and ``spread`` is 0.
* **Shorter chains.** Simulated time is ~10^4 cycles per CPU-second with one SM, so each
  chase times a few hundred dependent loads (enough: there is no noise) after a warm
  lap, not 16384. Validation follows the visited path exactly (end node and the sum
  of visited addresses for any number of steps, not only whole laps).
* **Single-thread chases on one SM** (``-gpgpu_n_clusters 1``: the same cycles, ~4x
  faster), kernel launch latency 0 (it is measured on its own), and
  ``-gpgpu_perf_sim_memcpy 0`` so host->device copies leave L2 cold: a DRAM chase's one
  cold lap misses L2 with no flush.
* **Reduced footprint sweep**: 8 KiB to 4x the unified L1, 2 points per octave. It finds
  the L1 capacity; the L2 capacity needs a chase over 2x L2 (10^5 dependent loads per
  point), so it is recorded as not measured, and the tuner takes the L2 size from the
  device facts (the card's config, what a device query gives on hardware).
* **Families without a meaning here are skipped with a reason**: ``clock`` (GPGPU-Sim has
  no ``%globaltimer``; the SM clock *is* the config's ``-gpgpu_clock_domains``, given in
  the device facts), the page-stride DRAM chase (no TLB model), the stride sweep
  (10^5 loads).
* **Throughput families** (bandwidth, compute, atomics) run on a slice of the card: 2 SMs
  for per-SM rates, one memory channel for L2/DRAM bandwidth scaled by the channel count;
  tensor cores and DRAM write/copy are skipped with a reason (:mod:`simthroughput`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hilsim.microbench.analysis import cache_levels
from hilsim.microbench.latency import single_cycle
from hilsim.simmodel.gpgpusim.cards import dram_memory, peak_dram_gbs
from hilsim.simmodel.gpgpusim.simhost import Plan, PlanResult, run_plan

from hilsim.core.measurement import Measurement

_MASK64 = (1 << 64) - 1
#: timed loads per chase. The kernel's last load is not waited for inside the timed
#: interval, so a chase of s steps reads (s - 1)/s of the latency plus a constant: the
#: calibration (simmodel/gpgpusim/calibration.py) is measured with the same count.
CHASE_STEPS = 64
ONE_SM = {
    "-gpgpu_n_clusters": "1",
    "-gpgpu_perf_sim_memcpy": "0",
    "-gpgpu_kernel_launch_latency": "0",
}


def card_device_facts(card: Any) -> dict[str, Any]:
    """Device facts of a simulated card, from its config, in the real suite's key names.

    The keys are those :func:`hilsim.microbench._gpu.device_facts` writes (and the tuner
    reads): ``sm_count``, ``max_sm_clock_mhz``, ``max_mem_clock_mhz``,
    ``l2_cache_bytes``, ``shared_mem_per_sm_bytes``, ``memory_bus_width_bits``, ...
    """
    f = card.facts()
    opts = card.options()
    major = int(float(opts.get("-gpgpu_compute_capability_major", "7")))
    minor = int(float(opts.get("-gpgpu_compute_capability_minor", "0")))
    threads = int(opts.get("-gpgpu_shader_core_pipeline", "2048:32").split(":")[0])
    warp = int(opts.get("-gpgpu_shader_core_pipeline", "2048:32").split(":")[1])
    mem_clock, bus_bits = dram_memory(opts)
    facts: dict[str, Any] = {
        "name": f"GPGPU-Sim {card.name}",
        "backend": "gpgpusim",
        "card": card.name,
        "config": str(card.path),
        "compute_capability": f"{major}.{minor}",
        "cc_major": major,
        "cc_minor": minor,
        "sm_count": f["sm_count"],
        "max_sm_clock_mhz": f["core_clock_mhz"],
        "max_mem_clock_mhz": mem_clock,
        "memory_bus_width_bits": bus_bits,
        "peak_dram_gbs": peak_dram_gbs(mem_clock, bus_bits),
        "l2_cache_bytes": f["l2_bytes"],
        "l1_cache_bytes": f["l1_bytes"],
        "shared_mem_per_sm_bytes": f.get("shmem_bytes"),
        "shared_mem_per_block_bytes": int(float(opts.get("-gpgpu_shmem_per_block", "49152"))),
        "max_threads_per_sm": threads,
        "warp_size": warp,
        "regs_per_sm": int(float(opts.get("-gpgpu_shader_registers", "65536"))),
        "memory_type": _memory_type(opts),
    }
    if "unified_l1d_kib" in f:
        facts["unified_l1_shared_bytes"] = f["unified_l1d_kib"] * 1024
    return {k: v for k, v in facts.items() if v is not None}


def _memory_type(opts: dict[str, str]) -> str:
    """DRAM type of a config, by Accel-Sim's mem_config models (inverted): HBM has the
    dual bus interface, GDDR6 a 16-beat burst on 2-byte channels, GDDR5 an 8-beat one."""
    if opts.get("-dram_dual_bus_interface", "0").split()[0] == "1":
        return "HBM"
    burst = int(float(opts.get("-gpgpu_dram_burst_length", "8").split()[0]))
    return "GDDR6" if burst >= 16 else "GDDR5"


@dataclass
class SimContext:
    """What every simulated benchmark needs: the card, its facts, the run log."""

    card: Any
    facts: dict[str, Any]
    build: Any = None
    seed: int = 0
    throughput_sms: int = 2
    runs: list[dict[str, Any]] = field(default_factory=list)
    on_run: Callable[[dict[str, Any]], None] | None = None

    def rng(self, salt: int) -> np.random.Generator:
        """A deterministic generator per benchmark (as the CuPy suite's ``Context.rng``)."""
        return np.random.default_rng([self.seed, salt])

    def run(self, bench: str, plan: Plan, options: dict[str, str]) -> PlanResult:
        """Run a plan; record its wall time and simulated cycles."""
        result = run_plan(plan, self.card, options=options, build=self.build)
        entry = {
            "benchmark": bench,
            "module": plan.module,
            "options": dict(options),
            "launches": len(plan.launches),
            "sim_cycles": result.total_cycles,
            "wall_s": round(result.wall_s, 3),
        }
        self.runs.append(entry)
        if self.on_run is not None:
            self.on_run(entry)
        return result


# --- pointer chases ------------------------------------------------------------------


def walk(nxt: np.ndarray, steps: int, start: int = 0) -> tuple[int, int, int]:
    """(node after ``steps`` steps, sum of the visited node indices, node after 0 steps)."""
    node, total = start, 0
    for _ in range(steps):
        node = int(nxt[node])
        total += node
    return node, total, start


@dataclass
class Chase:
    """A global-memory chain plus the launch that times ``steps`` loads after ``warm``."""

    n: int
    stride: int
    nxt: np.ndarray
    warm: int
    steps: int

    def check(self, out: np.ndarray) -> tuple[float, bool, str]:
        """(cycles per load after the clock-read overhead, valid, note) from ``out``.

        The kernel sums the addresses of its untimed warm steps and stores the final
        pointer: both must follow this chain exactly (base address from the end node).
        """
        end_addr, total, cycles, overhead = (int(v) for v in out[:4])
        after_warm, warm_sum, _ = walk(self.nxt, self.warm)
        end = walk(self.nxt, self.steps, after_warm)[0]
        base = (end_addr - self.stride * end) & _MASK64
        ok = base % 256 == 0 and total == (self.warm * base + self.stride * warm_sum) & _MASK64
        return (cycles - overhead) / self.steps, ok, "" if ok else "chase left its path"


def add_chase(
    plan: Plan,
    name: str,
    op: str,
    footprint: int,
    stride: int,
    rng: np.random.Generator | None,
    warm_laps: float,
    steps: int,
) -> Chase:
    """Add one chain buffer and one ``chase_{op}`` launch (+ its result buffer) to ``plan``."""
    n = max(2, footprint // stride)
    nxt = single_cycle(n, rng)
    warm = int(round(warm_laps * n))
    plan.buf(name, n * stride).chain(name, stride, nxt).buf(f"{name}_out", 32)
    plan.launch(
        f"chase_{op}", 1, 1, [("buf", name), ("i64", warm), ("i64", steps), ("buf", f"{name}_out")]
    )
    plan.dump(f"{name}_out")
    return Chase(n, stride, nxt, warm, steps)


def chase_measurement(
    name: str, chase: Chase, result: PlanResult, op: str, params: dict[str, Any]
) -> Measurement:
    """A latency :class:`Measurement` from a finished chase."""
    value, ok, note = chase.check(result.array(f"{name}_out", np.uint64))
    base = {
        "load": f"ld.global.{op}",
        "footprint_bytes": chase.n * chase.stride,
        "stride_bytes": chase.stride,
        "nodes": chase.n,
        "warm_steps": chase.warm,
        "steps": chase.steps,
        "backend": "gpgpusim",
        "clock": "%clock (simulated core cycles)",
    }
    base.update(params)
    return Measurement(name, value, "cycles", base, [value], 0.0, ok, note)


def latency_plan(
    ctx: SimContext, steps: int = CHASE_STEPS
) -> tuple[Plan, dict[str, tuple[Chase, str, dict]]]:
    """L1, L2 and DRAM chases in one program (one SM, cold L2 after the copies)."""
    plan = Plan("latency.chase")
    l2 = int(ctx.facts.get("l2_cache_bytes") or (4 << 20))
    chases = {
        "l1_hit_latency": (
            add_chase(plan, "l1_hit_latency", "ca", 8 << 10, 64, ctx.rng(1), 1, steps),
            "ca",
            {"order": "random", "warm_lap": True},
        ),
        "l2_hit_latency": (
            add_chase(
                plan,
                "l2_hit_latency",
                "cg",
                min(32 << 10, l2 // 4, steps * 128),
                128,
                ctx.rng(2),
                1,
                steps,
            ),
            "cg",
            {"order": "random", "warm_lap": True},
        ),
        "dram_latency": (
            add_chase(plan, "dram_latency", "cg", steps * 4096, 4096, None, 0, steps),
            "cg",
            {"order": "sequential", "warm_lap": False, "cold": "-gpgpu_perf_sim_memcpy 0"},
        ),
    }
    return plan, chases


def chase_latencies(
    ctx: SimContext, options: dict[str, str] | None = None, steps: int = CHASE_STEPS
) -> list[Measurement]:
    """``l1_hit_latency``, ``l2_hit_latency``, ``dram_latency`` (one simulated program)."""
    plan, chases = latency_plan(ctx, steps)
    result = ctx.run("latency.chase", plan, {**ONE_SM, **(options or {})})
    return [chase_measurement(name, c, result, op, p) for name, (c, op, p) in chases.items()]


def shared_latency(
    ctx: SimContext, n: int = 256, steps: int = CHASE_STEPS, options: dict | None = None
) -> list[Measurement]:
    """``shared_latency``: the suite's shared-memory chase (one warp, thread 0 chases)."""
    nxt = single_cycle(n, ctx.rng(7))
    plan = Plan("latency.shared_chase")
    plan.buf("next", 4 * n).data("next", nxt.astype("<u4")).buf("out", 40)
    plan.launch(
        "chase_shared",
        1,
        32,
        [("buf", "next"), ("i32", n), ("i64", steps), ("buf", "out")],
        smem=4 * n,
    )
    plan.dump("out")
    result = ctx.run("shared_latency", plan, {**ONE_SM, **(options or {})})
    end_addr, total, cycles, overhead, base = (int(v) for v in result.array("out", np.uint64)[:5])
    node = walk(nxt, steps, walk(nxt, n)[0])[0]  # the kernel's untimed lap, then the timed steps
    lap_sum = walk(nxt, n)[1]
    ok = end_addr == base + 4 * node and total == (n * base + 4 * lap_sum) & _MASK64
    value = (cycles - overhead) / steps
    params = {
        "load": "ld.shared.u32",
        "nodes": n,
        "stride_bytes": 4,
        "steps": steps,
        "backend": "gpgpusim",
        "clock": "%clock (simulated core cycles)",
    }
    return [
        Measurement(
            "shared_latency",
            value,
            "cycles",
            params,
            [value],
            0.0,
            ok,
            "" if ok else "shared chase left its path",
        )
    ]


def _unified_l1(ctx: SimContext) -> int:
    facts = ctx.facts
    return int(facts.get("unified_l1_shared_bytes") or facts.get("l1_cache_bytes") or (128 << 10))


def sweep_points(ctx: SimContext, per_octave: int = 2) -> list[int]:
    """Reduced sweep: 8 KiB to 4 x the unified L1 (or 4 x L1), ``per_octave`` points."""
    stop = 4 * _unified_l1(ctx)
    count = int(math.ceil(math.log2(stop / 8192) * per_octave)) + 1
    raw = 8192 * 2.0 ** (np.arange(count) / per_octave)
    return sorted({int(v) // 128 * 128 for v in raw})


def footprint_sweep(ctx: SimContext, steps: int = 128) -> list[Measurement]:
    """``latency_footprint_sweep`` (reduced) and ``l1_capacity_bytes`` from its plateaus.

    ``.ca`` chase, 128 B nodes in random order, ``steps`` timed loads, all points in one
    simulated program. Up to 1.25 x the unified L1 a warm lap fills L1 first; past it the
    timed steps read L2, which the host->device copy already filled
    (``-gpgpu_perf_sim_memcpy`` is left at the card's value, 1 on the shipped cards), so
    no warm lap is simulated there (it would cost ~200 cycles per node).
    """
    sizes = sweep_points(ctx)
    l1 = _unified_l1(ctx)
    plan = Plan("latency.chase")
    chases = [
        add_chase(plan, f"s{i}", "ca", size, 128, ctx.rng(size), 1 if size <= 1.25 * l1 else 0,
                  min(steps, max(2, size // 128)))
        for i, size in enumerate(sizes)
    ]
    opts = {k: v for k, v in ONE_SM.items() if k != "-gpgpu_perf_sim_memcpy"}
    result = ctx.run("latency_footprint_sweep", plan, opts)
    lat, ok = [], True
    for i, chase in enumerate(chases):
        value, good, _ = chase.check(result.array(f"s{i}_out", np.uint64))
        ok = ok and good
        lat.append(value)
    x = np.asarray([c.n * c.stride for c in chases], dtype=float)
    y = np.asarray(lat, dtype=float)
    curve = Measurement(
        "latency_footprint_sweep",
        float(y[-1]),
        "cycles",
        {
            "load": "ld.global.ca",
            "stride_bytes": 128,
            "order": "random",
            "footprint_bytes": x.tolist(),
            "latency_cycles": y.tolist(),
            "backend": "gpgpusim",
            "reduced": "8 KiB .. 4 x unified L1, 2 points per octave (L2 capacity not reached)",
        },
        y.tolist(),
        0.0,
        ok,
        "value = latency at the largest footprint" + ("" if ok else "; validation failed"),
    )
    try:
        levels = cache_levels(x, y, ends_in_memory=False)
        reason = ""
    except ValueError as exc:
        levels, reason = None, str(exc)
    plateaus = (
        [[p.first_footprint, p.last_footprint, p.latency] for p in levels.plateaus]
        if levels
        else []
    )
    l1 = levels.l1_bytes if levels and len(levels.plateaus) >= 2 else None
    method = "reduced footprint sweep, plateau detection (hilsim.microbench.analysis)"
    out = [
        curve,
        Measurement(
            "l1_capacity_bytes",
            l1,
            "bytes",
            {
                "upper_bytes": levels.l1_upper_bytes if l1 else None,
                "plateau_latency_cycles": levels.l1_latency if l1 else None,
                "plateaus": plateaus,
                "method": method,
            },
            [],
            0.0,
            bool(ok and l1 is not None),
            "" if l1 is not None else (reason or "no L1 step inside the reduced sweep"),
        ),
        Measurement(
            "l2_capacity_bytes",
            None,
            "bytes",
            {"plateaus": plateaus, "method": method},
            [],
            0.0,
            False,
            f"not measured: the reduced sweep ends at {int(x[-1])} B; a sweep past 2 x L2 "
            "is 10^5 dependent loads per point on the simulator (device facts give the L2 size)",
        ),
    ]
    return out


def launch_latency(
    ctx: SimContext, launches: int = 3, options: dict | None = None
) -> list[Measurement]:
    """``launch_latency_us``: simulated cycles of an empty kernel launch, in microseconds.

    Back-to-back launches of a near-empty kernel on the card as configured (its
    ``-gpgpu_kernel_launch_latency`` included); the simulator's per-kernel cycle count is
    the GPU-side time from launch to completion, converted with the core clock. The
    kernel is the suite's ``chase_ca`` with zero steps (one thread, four stores):
    ``launch.empty`` reads ``%globaltimer``, which GPGPU-Sim's PTX parser does not know.
    """
    plan = Plan("latency.chase")
    plan.buf("chain", 64).chain("chain", 64, np.zeros(1, dtype=np.int64)).buf("out", 32)
    for _ in range(launches):
        plan.launch("chase_ca", 1, 32, [("buf", "chain"), ("i64", 0), ("i64", 0), ("buf", "out")])
    plan.dump("out")
    opts = {"-gpgpu_n_clusters": "1", **(options or {})}
    result = ctx.run("launch_latency", plan, opts)
    out = result.array("out", np.uint64)
    ok = len(result.kernel_cycles) == launches and int(out[0]) != 0 and int(out[1]) == 0
    cycles = float(np.median(result.kernel_cycles))
    mhz = float(ctx.facts["max_sm_clock_mhz"])
    us = cycles / mhz
    params = {
        "launches": launches,
        "cycles": cycles,
        "per_launch_cycles": result.kernel_cycles,
        "sm_clock_mhz": mhz,
        "clock_source": "card config -gpgpu_clock_domains",
        "timer": "simulated cycles per kernel (GPGPU-Sim statistics)",
        "backend": "gpgpusim",
    }
    note = "" if ok else "a launch did not run (no statistics block or no result)"
    return [
        Measurement("launch_latency_us", us, "us", params, [us], 0.0, ok, note),
    ]


# --- the suite -----------------------------------------------------------------------


def skipped(name: str, unit: str, why: str) -> Measurement:
    """A measurement this backend does not take, with the reason."""
    return Measurement(name, None, unit, {"backend": "gpgpusim"}, [], 0.0, False, f"skipped: {why}")


SimBench = tuple[str, Callable[[SimContext], list[Measurement]]]


def sim_benchmarks(family: str) -> list[SimBench]:
    """The simulated benchmarks of one family (skips included, each with its reason)."""
    if family == "clock":
        return [
            (
                "sm_clock_mhz",
                lambda ctx: [
                    skipped(
                        "sm_clock_mhz",
                        "MHz",
                        "GPGPU-Sim has no %globaltimer; the SM clock is the card config's "
                        "-gpgpu_clock_domains (device facts max_sm_clock_mhz)",
                    )
                ],
            )
        ]
    if family == "launch":
        return [("launch_latency", launch_latency)]
    if family == "latency":
        return [
            ("latency.chase", chase_latencies),
            ("shared_latency", shared_latency),
            ("latency_footprint_sweep", footprint_sweep),
            (
                "dram_latency_page_stride",
                lambda ctx: [
                    skipped("dram_latency_page_stride", "cycles", "GPGPU-Sim models no TLB")
                ],
            ),
            (
                "latency_stride_sweep",
                lambda ctx: [
                    skipped(
                        "latency_stride_sweep",
                        "cycles",
                        "a 2 MiB sequential stride sweep is ~10^6 dependent loads on the simulator",
                    )
                ],
            ),
        ]
    from hilsim.simmodel.gpgpusim import simthroughput  # noqa: PLC0415

    return simthroughput.sim_benchmarks(family)


def run_sim_suite(
    card: Any,
    families: Sequence[str],
    *,
    build: Any = None,
    progress: bool = True,
    seed: int = 0,
    throughput_sms: int = 2,
) -> tuple[list[Measurement], dict[str, Any], list[dict[str, Any]]]:
    """Run ``families`` on the simulated ``card``: (measurements, device facts, runs).

    ``runs`` lists every simulated program: benchmark, options, simulated cycles and
    wall seconds. A benchmark that fails is recorded as an invalid measurement with the
    error's first line and the suite goes on (as the CuPy suite does).
    """
    facts = card_device_facts(card)
    ctx = SimContext(card, facts, build=build, seed=seed, throughput_sms=throughput_sms)
    benches = [b for f in families for b in sim_benchmarks(f)]
    results: list[Measurement] = []
    started = time.monotonic()
    from hilsim.core.console import progress_bar  # noqa: PLC0415

    with progress_bar(f"{card.name} (simulated)", total=len(benches), enabled=progress) as advance:

        def on_run(entry: dict[str, Any]) -> None:
            cycles = sum(r["sim_cycles"] for r in ctx.runs)
            advance(
                0,
                description=(
                    f"{card.name}: {entry['benchmark']} done, simulated "
                    f"{cycles / float(facts['max_sm_clock_mhz']):,.0f} us ({cycles:,.0f} cycles)"
                ),
            )

        ctx.on_run = on_run
        for name, bench in benches:
            advance(0, description=f"{card.name}: {name} ...")
            try:
                results.extend(bench(ctx))
            except Exception as exc:  # one broken benchmark must not lose the others
                line = (str(exc).strip() or type(exc).__name__).splitlines()[0]
                results.append(
                    Measurement(
                        name, None, "", {"backend": "gpgpusim"}, [], 0.0, False, f"failed: {line}"
                    )
                )
            advance(1)
    facts["simulation"] = {
        "wall_s": round(time.monotonic() - started, 1),
        "sim_cycles": sum(r["sim_cycles"] for r in ctx.runs),
        "runs": ctx.runs,
        "build": getattr(build, "key", None),
    }
    return results, facts, ctx.runs
