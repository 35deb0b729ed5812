"""Memory latency by pointer chasing (Accel-Sim Section II-C, Fig. 3; Section IV).

One thread follows a chain of dependent loads, so each load waits for the previous
one and the time per step is the load-to-use latency (Wong et al., ISPASS 2010; Mei &
Chu, TPDS 2017). Every node holds the *absolute address* of the next node, so the
chain is ``ld [p] -> p`` with no address arithmetic. PTX cache operators pick the
level: ``ld.global.ca`` (cache in L1 and L2), ``ld.global.cg`` (L2 only, bypass L1).

Timing: ``clock64()`` inside the kernel around the timed steps; an empty interval
(two back-to-back ``clock64()`` reads) is measured in the same launch and subtracted
(the clock-read overhead). The timed loop holds nothing but the chain and the loop
counter, which is independent of it (checked in SASS by ``tests/test_microbench_sass.py``:
no instruction but the next chain load waits on a chain load; an accumulate there put
an add-with-carry on the dependent path, +2.5 to +3.25 cycles per load).

Self-validation: the chain is one cycle through all N nodes and the timed steps are
a whole number k of laps, so the final pointer must equal the start; the sum of the
addresses visited in an untimed lap must equal the sum of all node addresses.

DRAM and the TLB: ``latency.dram`` places nodes 4 KiB apart in sequential order over
a footprint >= 4 x L2, so every step misses L2 while 512 consecutive steps share
one 2 MiB GPU page (TLB misses amortised to < 0.2 %: DRAM latency proper).
``latency.dram_page_stride`` places nodes one 2 MiB page + 4 KiB apart (stride >
page) in random order, so every step also touches a new page: DRAM latency plus the
TLB-miss cost once the pages exceed the TLB reach. The difference of the two is the
page-walk penalty. Both run one cold lap after reading a 2 x L2 buffer through L2: a
chain touches one line per node, so without the flush its nodes (written at setup) would
still sit in L2; the flush reads (:data:`FLUSH_READ`), so the lines it leaves are clean
and a timed miss pays no write-back.

On a simulated device (:attr:`hilsim.microbench.device.Device.simulated`: deterministic,
~10^4 simulated cycles per CPU second) the same kernels run shorter: each chase runs
:data:`CHASE_STEPS` and twice as many dependent loads after its warm lap (no noise to
average), the value is the slope of the two (the stop clock waits on no load: a single
count of s loads reads (s - 1)/s of the latency, 1.6% low at 64), and each is validated
along its exact path (end node and warm-lap checksum for any number of steps,
:meth:`Chase.check`); the L1, L2 and DRAM chases share one program per step count on one
SM whose uploads leave L2 cold (the DRAM chase's one cold lap misses L2 with no flush); the
footprint sweep is reduced to 8 KiB .. 4 x the unified L1 (:func:`reduced_sweep_points`),
which finds the L1 capacity but not L2's (recorded as not measured: the device facts
give the L2 size). A device without a TLB model or without the budget for 10^5-load
chases records the page-stride chase and the stride sweep as skipped.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from hilsim.microbench.analysis import cache_levels, line_size_from_stride_sweep
from hilsim.microbench.clock import one_warp_clock_mhz
from hilsim.microbench.device import LONG_CHASES, TLB, Benchmark, Device, Setup, skip_unless
from hilsim.microbench.program import Program

from hilsim.core import measurement_names as mn
from hilsim.core.measurement import Measurement, measurement_from_stability

_CHASE_TEMPLATE = r"""
extern "C" __global__ void chase_{op}(const unsigned long long* __restrict__ start,
                                      long long warm, long long iters,
                                      unsigned long long* __restrict__ out)
{{
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    unsigned long long p = (unsigned long long)start;
    unsigned long long sum = 0;
    for (long long i = 0; i < warm; ++i) {{   // untimed: the checksum lap(s)
        asm volatile("ld.global.{op}.u64 %0, [%0];" : "+l"(p));
        sum += p;
    }}
    long long t0 = clock64();
    long long t1 = clock64();
#pragma unroll 4
    for (long long i = 0; i < iters; ++i) {{  // timed: nothing but the chain
        asm volatile("ld.global.{op}.u64 %0, [%0];" : "+l"(p));
    }}
    long long t2 = clock64();
    out[0] = p;
    out[1] = sum;
    out[2] = (unsigned long long)(t2 - t1);
    out[3] = (unsigned long long)(t1 - t0);
}}
"""

SHARED_CHASE = r"""
extern "C" __global__ void chase_shared(const unsigned int* __restrict__ next, int n,
                                        long long iters, unsigned long long* __restrict__ out)
{
    extern __shared__ unsigned int s[];
    if (threadIdx.x != 0) return;
    unsigned long long generic = (unsigned long long)s;
    unsigned long long window;
    asm("cvta.to.shared.u64 %0, %1;" : "=l"(window) : "l"(generic));
    unsigned int base = (unsigned int)window;
    for (int i = 0; i < n; ++i) s[i] = base + 4u * next[i];
    asm volatile("" ::: "memory");
    unsigned int p = base;
    unsigned long long sum = 0;
    for (int i = 0; i < n; ++i) {   // untimed: the checksum lap
        asm volatile("ld.shared.u32 %0, [%0];" : "+r"(p) :: "memory");
        sum += p;
    }
    long long t0 = clock64();
    long long t1 = clock64();
#pragma unroll 4
    for (long long i = 0; i < iters; ++i) {   // timed: nothing but the chain
        asm volatile("ld.shared.u32 %0, [%0];" : "+r"(p));
    }
    long long t2 = clock64();
    out[0] = p;
    out[1] = sum;
    out[2] = (unsigned long long)(t2 - t1);
    out[3] = (unsigned long long)(t1 - t0);
    out[4] = base;
}
"""

#: the cold-lap flush: every 32-bit word of ``buf`` read through L2 (``ld.global.cg``), so
#: L2 ends holding the buffer's last lines clean (a flush that writes leaves them dirty:
#: the timed misses would then also pay their write-backs)
FLUSH_READ = r"""
extern "C" __global__ void flush_read(const unsigned int* __restrict__ buf, long long words,
                                      unsigned int magic, unsigned int* __restrict__ out)
{
    unsigned int acc = 0u;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < words; i += step) {
        unsigned int v;
        asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(buf + i));
        acc ^= v;
    }
    if (acc == magic) out[0] = acc;
}
"""
#: the flush kernel's grid (blocks of 256 threads, grid-stride)
FLUSH_GRID = 1024

SOURCES: dict[str, str] = {
    "chase": _CHASE_TEMPLATE.format(op="ca") + _CHASE_TEMPLATE.format(op="cg") + FLUSH_READ,
    "shared_chase": SHARED_CHASE,
}

_MASK64 = (1 << 64) - 1
PAGE = 2 << 20  # GPU large page (2 MiB)
#: timed loads of the shorter of the two chases on a simulated device (the longer runs
#: twice as many). The kernel's last load is not waited for inside the timed interval (the
#: stop clock waits on no load), so one chase of s steps reads (s - 1)/s of the latency
#: plus a constant; the slope of the two counts reads the latency.
CHASE_STEPS = 64
_LAP_NOTE = "chase did not visit every node exactly once per lap"
_PATH_NOTE = "chase left its path"


def single_cycle(n: int, rng: np.random.Generator | None) -> np.ndarray:
    """``next`` array of one cycle through all ``n`` nodes (random order, or 0->1->...)."""
    order = np.arange(n, dtype=np.int64)
    if rng is not None and n > 2:
        order[1:] = rng.permutation(np.arange(1, n, dtype=np.int64))
    nxt = np.empty(n, dtype=np.int64)
    nxt[order] = np.roll(order, -1)
    return nxt


def walk(nxt: np.ndarray, steps: int, start: int = 0) -> tuple[int, int]:
    """(node after ``steps`` steps from ``start``, sum of the visited node indices) on a
    chain that is one cycle through all its nodes (:func:`single_cycle`)."""
    n = len(nxt)
    laps, rest = divmod(int(steps), n)
    node, total = int(start), laps * (n * (n - 1) // 2)
    for _ in range(rest):
        node = int(nxt[node])
        total += node
    return node, total


@dataclass
class Chase:
    """A chain in a program and the launch that walks it: ``warm`` untimed steps (their
    addresses summed), then ``steps`` timed ones (``steps`` 0: a check lap only)."""

    name: str
    n: int
    stride: int
    nxt: np.ndarray
    warm: int
    steps: int

    @property
    def out(self) -> str:
        """The buffer the kernel writes its results to."""
        return f"{self.name}_out"

    def check(self, out: np.ndarray, base: int | None = None) -> tuple[float, bool, str]:
        """(cycles per load after the clock-read overhead, valid, note) from ``out``.

        The kernel sums the addresses of its untimed warm steps and stores the final
        pointer: both must follow this chain exactly. ``base`` is the chain's address
        where the device knows it; otherwise it follows from the end pointer.
        """
        end_addr, total, cycles, overhead = (int(v) for v in out[:4])
        after_warm, warm_sum = walk(self.nxt, self.warm)
        end = walk(self.nxt, self.steps, after_warm)[0]
        whole_laps = base is not None and self.warm % self.n == 0 and self.steps % self.n == 0
        if base is None:
            base = (end_addr - self.stride * end) & _MASK64
        ok = (
            base % 256 == 0
            and end_addr == (base + self.stride * end) & _MASK64
            and total == (self.warm * base + self.stride * warm_sum) & _MASK64
        )
        value = (cycles - overhead) / self.steps if self.steps else math.nan
        return value, ok, "" if ok else (_LAP_NOTE if whole_laps else _PATH_NOTE)


def add_chase(
    program: Program, name: str, op: str, nxt: np.ndarray, stride: int, warm: int, steps: int
) -> Chase:
    """The chain buffer and one ``chase_{op}`` launch (+ its result buffer, read back)."""
    program.chain(name, stride, nxt)
    return add_chase_launch(program, Chase(name, len(nxt), stride, nxt, warm, steps), op)


def add_chase_launch(program: Program, chase: Chase, op: str) -> Chase:
    """The result buffer and the ``chase_{op}`` launch of a chain already in ``program``."""
    program.buf(chase.out, 32)
    args = [("buf", chase.name), ("i64", chase.warm), ("i64", chase.steps), ("buf", chase.out)]
    program.launch(f"chase_{op}", 1, 1, args)
    program.read(chase.out)
    return chase


def _laps_for(n: int, min_steps: int) -> int:
    return max(1, math.ceil(min_steps / n))


def _l2_bytes(device: Device) -> int:
    return int(device.facts.get("l2_cache_bytes") or (4 << 20))


def add_flush(program: Program, words: int) -> None:
    """A buffer of ``words`` 32-bit words and one ``flush_read`` launch over it: every line
    of the chain (written at setup) leaves L2, and what L2 holds after is clean."""
    program.buf("flush", 4 * words).buf("flush_out", 4)
    program.launch("flush_read", FLUSH_GRID, 256,
                   [("buf", "flush"), ("i64", words), ("u32", 0xFFFFFFFF), ("buf", "flush_out")])


def _run_chase(
    device: Device, bench: str, op: str, chase: Chase, flush_words: int = 0
) -> tuple[float, bool, str]:
    """One run of one chase (after reading a flush buffer of ``flush_words`` words)."""
    program = Program("latency.chase").chain(chase.name, chase.stride, chase.nxt)
    if flush_words:
        add_flush(program, flush_words)
    add_chase_launch(program, chase, op)
    result = device.run(bench, program, Setup.ONE_SM)
    return chase.check(result.array(chase.out, np.uint64), result.address(chase.name))


def chase_latency(
    device: Device,
    name: str,
    op: str,
    footprint: int,
    stride: int,
    random_order: bool = True,
    warm: bool = True,
    min_steps: int = 16384,
    rel_spread_bound: float = 0.03,
    min_reps: int = 3,
    max_reps: int = 8,
    extra_params: dict[str, Any] | None = None,
    flush_l2: bool = False,
) -> Measurement:
    """Cycles per dependent load over one chain, whole laps (one :class:`Measurement`).

    The timed loop is a pure chain (an accumulate in it sits on the dependent-load path);
    the checksum is taken over the untimed warm lap, and one untimed check lap first
    validates the chain. With ``flush_l2`` every run is one cold lap after reading a
    buffer of 2 x L2 (the chain's own initialisation writes would otherwise leave its
    nodes in L2: a chain of N nodes touches only N lines, however large its footprint).
    """
    n = max(2, footprint // stride)
    nxt = single_cycle(n, device.rng(footprint ^ stride) if random_order else None)
    laps = 1 if flush_l2 else _laps_for(n, min_steps)
    failures: list[str] = []
    flush_words = 0
    if flush_l2:
        warm = False
        flush_words = 2 * _l2_bytes(device) // 4 + 1024

    if not _run_chase(device, name, op, Chase(name, n, stride, nxt, n, 0))[1]:
        failures.append(_LAP_NOTE)
    timed = Chase(name, n, stride, nxt, n if warm else 0, laps * n)

    def once() -> float:
        value, ok, note = _run_chase(device, name, op, timed, flush_words)
        if not ok:
            failures.append(note)
        return value

    stab = device.sample(once, max_reps, rel_spread_bound, min_reps)
    params = {
        "load": f"ld.global.{op}",
        "footprint_bytes": n * stride,
        "stride_bytes": stride,
        "nodes": n,
        "order": "random" if random_order else "sequential",
        "steps": laps * n,
        "warm_lap": warm,
        "l2_flushed": flush_l2,
    }
    params.update(extra_params or {})
    return measurement_from_stability(
        name, stab, "cycles", params, valid=not failures, note="; ".join(sorted(set(failures)))
    )


def chase_latencies(device: Device, steps: int = CHASE_STEPS) -> list[Measurement]:
    """``l1_hit_latency``, ``l2_hit_latency``, ``dram_latency``, each the slope of two runs
    of one program, at ``steps`` and 2 x ``steps`` timed loads per chase
    (:func:`slope_of_chases`: the stop clock does not wait for the last load, so one count
    reads ``(s - 1) / s`` of the latency plus a constant). Each run starts from the same
    state: one SM whose uploads leave L2 cold (a simulated device: the DRAM chase's one
    cold lap of ``s`` nodes misses L2 with no flush; in one run, the second DRAM chain
    would find the DRAM rows the first left open)."""
    l2 = _l2_bytes(device)
    l2_footprint = min(32 << 10, l2 // 4, steps * 128)
    runs = []
    for s in (steps, 2 * steps):
        program = Program("latency.chase")

        def chase(name: str, op: str, footprint: int, stride: int, salt: int | None,
                  program: Program = program, s: int = s) -> Chase:
            n = max(2, footprint // stride)
            nxt = single_cycle(n, None if salt is None else device.rng(salt))
            return add_chase(program, name, op, nxt, stride, n if salt is not None else 0, s)

        chases = [chase(mn.L1_HIT_LATENCY, "ca", 8 << 10, 64, 1),
                  chase(mn.L2_HIT_LATENCY, "cg", l2_footprint, 128, 2),
                  chase(mn.DRAM_LATENCY, "cg", s * 4096, 4096, None)]
        result = device.run("latency.chase", program, Setup.ONE_SM)
        runs.append([(c, c.check(result.array(c.out, np.uint64), result.address(c.name)))
                     for c in chases])
    warm = {"order": "random", "warm_lap": True}
    extras = {mn.L1_HIT_LATENCY: ("ca", warm), mn.L2_HIT_LATENCY: ("cg", warm),
              mn.DRAM_LATENCY: ("cg", {"order": "sequential", "warm_lap": False,
                                       "cold": device.cold_l2_note})}
    out = []
    for (a, check_a), (b, check_b) in zip(*runs, strict=True):
        op, extra = extras[a.name]
        value = slope_of_chases((a, b), [check_a[0], check_b[0]])
        notes = {check_a[2], check_b[2]} - {""}
        params = {
            "load": f"ld.global.{op}",
            "footprint_bytes": [a.n * a.stride, b.n * b.stride],
            "stride_bytes": a.stride,
            "nodes": [a.n, b.n],
            "warm_steps": [a.warm, b.warm],
            "steps": [a.steps, b.steps],
            "method": "slope of two runs (cycles difference / loads difference)",
            **device.kernel_clock_params,
            **extra,
        }
        out.append(Measurement(a.name, value, "cycles", params, [value], 0.0,
                               check_a[1] and check_b[1], "; ".join(sorted(notes))))
    return out


def slope_of_chases(pair: tuple[Chase, Chase] | list[Chase], per_load: list[float]) -> float:
    """Cycles per load from two chases' per-load readings (each ``(cycles - overhead) /
    steps``): what a chase pays once (the last load the stop clock does not wait for,
    the clock reads) cancels."""
    (a, b), (va, vb) = pair, per_load
    return (vb * b.steps - va * a.steps) / (b.steps - a.steps)


def shared_latency(
    device: Device, n: int = 256, min_steps: int = 16384, steps: int | None = None
) -> Measurement:
    """Shared-memory load-to-use latency (Accel-Sim ``shd-lat``): one warp, thread 0
    chases ``n`` nodes; whole laps of at least ``min_steps`` loads on a GPU; on a simulated
    device the slope of two launches of ``steps`` (:data:`CHASE_STEPS`) and 2 x ``steps``
    loads, as :func:`chase_latencies`."""
    nxt = single_cycle(n, device.rng(7))
    if steps is None:
        steps = CHASE_STEPS if device.simulated else _laps_for(n, min_steps) * n
    counts = (steps, 2 * steps) if device.simulated else (steps,)
    program = Program("latency.shared_chase")
    program.data("next", nxt.astype("<u4"))
    for s in counts:
        program.buf(f"out_s{s}", 40)
        args = [("buf", "next"), ("i32", n), ("i64", s), ("buf", f"out_s{s}")]
        program.launch("chase_shared", 1, 32, args, smem=4 * n)
        program.read(f"out_s{s}")
    lap_sum = walk(nxt, n)[1]
    after_lap = walk(nxt, n)[0]
    failures: list[str] = []

    def once() -> float:
        result = device.run(mn.SHARED_LATENCY, program, Setup.ONE_SM)
        raw = []
        for s in counts:
            end, total, cycles, overhead, base = (
                int(v) for v in result.array(f"out_s{s}", np.uint64)[:5])
            node = walk(nxt, s, after_lap)[0]  # the untimed lap, then the timed steps
            if end != base + 4 * node or total != (n * base + 4 * lap_sum) & _MASK64:
                failures.append("shared " + (_LAP_NOTE if s % n == 0 else _PATH_NOTE))
            raw.append(cycles - overhead)
        if len(counts) == 1:
            return raw[0] / steps
        return (raw[1] - raw[0]) / (counts[1] - counts[0])

    stab = device.sample(once, 8, 0.03, 3)
    params = {
        "load": "ld.shared.u32",
        "nodes": n,
        "stride_bytes": 4,
        "steps": steps if len(counts) == 1 else list(counts),
        **device.kernel_clock_params,
    }
    if len(counts) > 1:
        params["method"] = "slope of two step counts (cycles difference / loads difference)"
    return measurement_from_stability(
        mn.SHARED_LATENCY, stab, "cycles", params, not failures, "; ".join(sorted(set(failures)))
    )


def sweep_footprints(l2_bytes: int, start: int = 4096, per_octave: int = 4) -> list[int]:
    """Geometric footprints from ``start`` to 2 x L2 (``per_octave`` points per doubling),
    then 2 points per doubling up to 8 x L2, so the memory plateau has >= 3 points past
    the L2 step."""
    stop = max(2 * l2_bytes, 1 << 22)
    count = int(math.ceil(math.log2(stop / start) * per_octave)) + 1
    raw = list(start * 2.0 ** (np.arange(count) / per_octave))
    far = stop * 2.0 ** (np.arange(1, 8) / 2)
    raw += [v for v in far if v <= 8 * l2_bytes * 1.001]
    return sorted({int(v) // 128 * 128 for v in raw})


def unified_l1_bytes(facts: dict[str, Any]) -> int:
    """The unified L1 + shared size (or the L1 size) of a device's facts, 128 KiB unknown."""
    return int(facts.get("unified_l1_shared_bytes") or facts.get("l1_cache_bytes") or (128 << 10))


def reduced_sweep_points(facts: dict[str, Any], per_octave: int = 2) -> list[int]:
    """The simulated device's sweep: 8 KiB to 4 x the unified L1, ``per_octave`` points."""
    stop = 4 * unified_l1_bytes(facts)
    count = int(math.ceil(math.log2(stop / 8192) * per_octave)) + 1
    raw = 8192 * 2.0 ** (np.arange(count) / per_octave)
    return sorted({int(v) // 128 * 128 for v in raw})


def footprint_sweep(
    device: Device, footprints: list[int] | None = None, stride: int = 128, steps: int = 128
) -> tuple[list[Measurement], np.ndarray, np.ndarray]:
    """Chase with ``.ca`` over growing footprints: the latency-vs-footprint curve.

    One node per 128 B line, random order, a warm lap first while the footprint can
    still fit L2; beyond 1.5 x L2 one cold lap after reading a 2 x L2 buffer (the
    chain's own initialisation writes would leave ~L2 bytes of it resident). Returns
    the curve as one measurement (``latency_footprint_sweep``, arrays in params) plus
    ``l1_capacity_bytes`` / ``l2_capacity_bytes`` read off it by
    :func:`hilsim.microbench.analysis.cache_levels`, and the curve's (x, y). A simulated
    device runs the reduced sweep (:func:`reduced_sweep`, ``steps`` timed loads).
    """
    if device.simulated:
        return reduced_sweep(device, steps)
    l2 = _l2_bytes(device)
    sizes = footprints or sweep_footprints(l2)
    flush_words = 2 * l2 // 4 + 1024
    carveout = device.prefer_max_l1("latency.chase", "chase_ca")
    lat: list[float] = []
    spreads: list[float] = []
    ok = True
    for size in sizes:
        n = max(2, size // stride)
        nxt = single_cycle(n, device.rng(size))
        warm = n * stride <= 1.5 * l2
        laps = _laps_for(n, 8192) if warm else 1
        if not warm and not _run_chase(device, mn.LATENCY_FOOTPRINT_SWEEP, "ca",
                                       Chase("s", n, stride, nxt, n, 0))[1]:
            ok = False
        timed = Chase("s", n, stride, nxt, n if warm else 0, laps * n)
        flush = 0 if warm else flush_words

        def once(timed: Chase = timed, flush: int = flush) -> float:
            value, good, _ = _run_chase(device, mn.LATENCY_FOOTPRINT_SWEEP, "ca", timed, flush)
            return value if good else math.nan

        stab = device.sample(once, 4, 0.05, 2)
        ok = ok and all(math.isfinite(s) for s in stab.samples)
        lat.append(stab.value)
        spreads.append(stab.spread)
    x = np.asarray([(s // stride) * stride for s in sizes], dtype=float)
    y = np.asarray(lat, dtype=float)
    curve = Measurement(
        name=mn.LATENCY_FOOTPRINT_SWEEP,
        value=float(y[-1]),
        unit="cycles",
        params={
            "load": "ld.global.ca",
            "stride_bytes": stride,
            "order": "random",
            "footprint_bytes": x.tolist(),
            "latency_cycles": y.tolist(),
            "shared_carveout_percent": carveout,
            "spread": spreads,
        },
        samples=y.tolist(),
        spread=float(max(spreads) if spreads else 0.0),
        valid=ok,
        note="value = latency at the largest footprint" + ("" if ok else "; validation failed"),
    )
    out = [curve]
    try:
        levels = cache_levels(x, y)
    except ValueError as exc:
        levels = None
        reason = str(exc)
    for level, attr, name in (("l1", "l1_bytes", mn.L1_CAPACITY_BYTES),
                              ("l2", "l2_bytes", mn.L2_CAPACITY_BYTES)):
        value = getattr(levels, attr) if levels else None
        out.append(
            Measurement(
                name=name,
                value=value,
                unit="bytes",
                params={
                    "upper_bytes": getattr(levels, f"{attr[:2]}_upper_bytes") if levels else None,
                    "plateau_latency_cycles": getattr(levels, f"{level}_latency")
                    if levels
                    else None,
                    "plateaus": [
                        [p.first_footprint, p.last_footprint, p.latency] for p in levels.plateaus
                    ]
                    if levels
                    else [],
                    "method": "footprint sweep, plateau detection (hilsim.microbench.analysis)",
                },
                valid=bool(ok and value is not None),
                note=""
                if value is not None
                else (reason if levels is None else "no plateau found for this level"),
            )
        )
    return out, x, y


def reduced_sweep(
    device: Device, steps: int = 128
) -> tuple[list[Measurement], np.ndarray, np.ndarray]:
    """``latency_footprint_sweep`` (reduced) and ``l1_capacity_bytes`` from its plateaus.

    ``.ca`` chase, 128 B nodes in random order, ``steps`` timed loads, all points in one
    program (:func:`reduced_sweep_points`). Up to 1.25 x the unified L1 a warm lap fills
    L1 first; past it the timed steps read L2, which the uploads already filled
    (:attr:`Setup.ONE_SM_CACHED_UPLOADS`), so no warm lap is run there (on a simulator
    it would cost ~200 cycles per node). ``l2_capacity_bytes`` is recorded as not
    measured (a sweep past 2 x L2 is 10^5 dependent loads per point).
    """
    sizes = reduced_sweep_points(device.facts)
    l1 = unified_l1_bytes(device.facts)
    program = Program("latency.chase")
    chases = []
    for i, size in enumerate(sizes):
        n = max(2, size // 128)
        nxt = single_cycle(n, device.rng(size))
        warm = n if size <= 1.25 * l1 else 0
        chases.append(add_chase(program, f"s{i}", "ca", nxt, 128, warm, min(steps, max(2, n))))
    result = device.run(mn.LATENCY_FOOTPRINT_SWEEP, program, Setup.ONE_SM_CACHED_UPLOADS)
    lat, ok = [], True
    for c in chases:
        value, good, _ = c.check(result.array(c.out, np.uint64), result.address(c.name))
        ok = ok and good
        lat.append(value)
    x = np.asarray([c.n * c.stride for c in chases], dtype=float)
    y = np.asarray(lat, dtype=float)
    curve = Measurement(
        mn.LATENCY_FOOTPRINT_SWEEP,
        float(y[-1]),
        "cycles",
        {
            "load": "ld.global.ca",
            "stride_bytes": 128,
            "order": "random",
            "footprint_bytes": x.tolist(),
            "latency_cycles": y.tolist(),
            **device.backend_params,
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
    l1_found = levels.l1_bytes if levels and len(levels.plateaus) >= 2 else None
    method = "reduced footprint sweep, plateau detection (hilsim.microbench.analysis)"
    out = [
        curve,
        Measurement(
            mn.L1_CAPACITY_BYTES,
            l1_found,
            "bytes",
            {
                "upper_bytes": levels.l1_upper_bytes if l1_found else None,
                "plateau_latency_cycles": levels.l1_latency if l1_found else None,
                "plateaus": plateaus,
                "method": method,
            },
            [],
            0.0,
            bool(ok and l1_found is not None),
            "" if l1_found is not None else (reason or "no L1 step inside the reduced sweep"),
        ),
        Measurement(
            mn.L2_CAPACITY_BYTES,
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
    return out, x, y


def stride_sweep(
    device: Device,
    footprint: int = 2 << 20,
    strides: tuple[int, ...] = (8, 16, 32, 64, 128, 256),
) -> list[Measurement]:
    """Sequential ``.ca`` chase at growing strides over a footprint > L1 that fits L2.

    Mean latency rises with the stride until every access misses L1: that stride is
    the L1 fetch granularity (the 32 B sector on Volta and later). Returns the curve
    and ``l1_sector_bytes``; skipped on a device without :data:`LONG_CHASES`.
    """
    skip = skip_unless(device, LONG_CHASES, [(mn.LATENCY_STRIDE_SWEEP, "cycles")])
    if skip is not None:
        return skip
    footprint = min(footprint, _l2_bytes(device) // 2)
    lat = []
    ok = True
    for stride in strides:
        m = chase_latency(
            device,
            f"latency.stride_{stride}",
            "ca",
            footprint,
            stride,
            random_order=False,
            min_steps=1,
            min_reps=2,
            max_reps=4,
            rel_spread_bound=0.05,
        )
        ok = ok and m.valid
        lat.append(float(m.value if m.value is not None else math.nan))
    y = np.asarray(lat)
    granularity = line_size_from_stride_sweep(list(strides), y) if np.all(np.isfinite(y)) else None
    return [
        Measurement(
            name=mn.LATENCY_STRIDE_SWEEP,
            value=float(y[-1]),
            unit="cycles",
            params={
                "load": "ld.global.ca",
                "footprint_bytes": footprint,
                "order": "sequential",
                "stride_bytes": list(strides),
                "latency_cycles": y.tolist(),
            },
            samples=y.tolist(),
            valid=ok,
            note="value = latency at the largest stride",
        ),
        Measurement(
            name=mn.L1_SECTOR_BYTES,
            value=granularity,
            unit="bytes",
            params={"method": "stride sweep "
                    "(hilsim.microbench.analysis.line_size_from_stride_sweep)"},
            valid=bool(ok and granularity is not None),
            note="" if granularity is not None else "flat stride curve",
        ),
    ]


def at_suite_clock(m: Measurement, chase_mhz: float | None, suite_mhz: float | None,
                   suite_source: str) -> Measurement:
    """``m`` (cycles counted at the clock the chase ran at, ``chase_mhz``) in cycles of the
    suite's SM clock ``suite_mhz`` (the clock family's all-SM figure, the core clock the
    tuner writes): DRAM time is fixed in ns, so its cycles scale with the SM clock. The
    raw figure and both clocks stay in ``params``; nothing changes when a clock is
    unknown or the two agree within 0.5 %."""
    params = {**m.params, "chase_sm_clock_mhz": chase_mhz, "sm_clock_mhz": suite_mhz,
              "clock_source": suite_source, "cycles_at_chase_clock": m.value}
    ratio = suite_mhz / chase_mhz if chase_mhz and suite_mhz else 1.0
    if m.value is None or abs(ratio - 1.0) <= 0.005:
        return dataclasses.replace(m, params={**params, "clock_conversion": 1.0})
    params["clock_conversion"] = ratio
    return dataclasses.replace(
        m, value=m.value * ratio, samples=[v * ratio for v in m.samples], params=params)


def dram_latencies(device: Device) -> list[Measurement]:
    """``dram_latency`` (4 KiB stride: TLB misses amortised) and, on a device with a TLB,
    ``dram_latency_page_stride`` (every step a new 2 MiB page), in cycles of the suite's
    SM clock (:func:`at_suite_clock`, with the one-warp clock measured right after the
    chases: :func:`hilsim.microbench.clock.one_warp_clock_mhz`)."""
    l2 = _l2_bytes(device)
    footprint = max(4 * l2, 256 << 20)
    footprint = min(footprint, device.free_bytes() // 4)
    out = [
        chase_latency(
            device,
            mn.DRAM_LATENCY,
            "cg",
            footprint,
            4096,
            random_order=False,
            warm=False,
            flush_l2=True,
            extra_params={"tlb": "512 steps per 2 MiB page"},
        )
    ]
    out.extend(page_stride_latency(device))
    chase_mhz = one_warp_clock_mhz(device)
    suite_mhz, source = device.sm_clock_mhz()
    if not source.startswith("measured"):  # no all-SM figure to convert to
        suite_mhz = None
    return [at_suite_clock(m, chase_mhz, suite_mhz, source) if m.value is not None else m
            for m in out]


def page_stride_latency(device: Device) -> list[Measurement]:
    """``dram_latency_page_stride``: stride one 2 MiB page + 4 KiB, random order, cold;
    skipped on a device without :data:`TLB`."""
    skip = skip_unless(device, TLB, [(mn.DRAM_LATENCY_PAGE_STRIDE, "cycles")])
    if skip is not None:
        return skip
    stride = PAGE + 4096
    pages = max(16, min(512, device.free_bytes() // 4 // stride))
    return [
        chase_latency(
            device,
            mn.DRAM_LATENCY_PAGE_STRIDE,
            "cg",
            pages * stride,
            stride,
            random_order=True,
            warm=False,
            flush_l2=True,
            extra_params={"tlb": "every step a new 2 MiB page"},
        )
    ]


def benchmarks(device: Device) -> list[Benchmark]:
    """The latency family's benchmarks on ``device``, in run order.

    A simulated device runs the L1, L2 and DRAM chases as one program
    (:func:`chase_latencies`); a GPU runs each until stable.
    """
    if device.simulated:
        chases: list[Benchmark] = [("latency.chase", chase_latencies)]
    else:
        chases = [
            (mn.L1_HIT_LATENCY, lambda d: [chase_latency(d, mn.L1_HIT_LATENCY, "ca", 8 << 10, 64)]),
            (
                mn.L2_HIT_LATENCY,
                lambda d: [
                    chase_latency(d, mn.L2_HIT_LATENCY, "cg", min(1 << 20, _l2_bytes(d) // 4), 128)
                ],
            ),
            (mn.DRAM_LATENCY, dram_latencies),
        ]
    out = [
        *chases,
        (mn.SHARED_LATENCY, lambda d: [shared_latency(d)]),
        (mn.LATENCY_FOOTPRINT_SWEEP, lambda d: footprint_sweep(d)[0]),
    ]
    if device.simulated:
        out.append((mn.DRAM_LATENCY_PAGE_STRIDE, page_stride_latency))
    out.append((mn.LATENCY_STRIDE_SWEEP, stride_sweep))
    return out
