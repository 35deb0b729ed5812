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
page-walk penalty. Both run one cold lap after writing a 2 x L2 buffer: a chain
touches one line per node, so without the flush its nodes (written at setup) would
still sit in L2.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from hilsim.microbench.analysis import cache_levels, line_size_from_stride_sweep

from hilsim.core.measurement import (
    Measurement,
    measurement_from_stability,
    repeat_until_stable,
)

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

SOURCES: dict[str, str] = {
    "chase": _CHASE_TEMPLATE.format(op="ca") + _CHASE_TEMPLATE.format(op="cg"),
    "shared_chase": SHARED_CHASE,
}

_MASK64 = (1 << 64) - 1
PAGE = 2 << 20  # GPU large page (2 MiB)


def single_cycle(n: int, rng: np.random.Generator | None) -> np.ndarray:
    """``next`` array of one cycle through all ``n`` nodes (random order, or 0->1->...)."""
    order = np.arange(n, dtype=np.int64)
    if rng is not None and n > 2:
        order[1:] = rng.permutation(np.arange(1, n, dtype=np.int64))
    nxt = np.empty(n, dtype=np.int64)
    nxt[order] = np.roll(order, -1)
    return nxt


class _Chain:
    """A pointer chain on the device: N nodes ``stride`` bytes apart."""

    def __init__(self, ctx: Any, footprint: int, stride: int, rng: np.random.Generator | None):
        cp = ctx.cp
        self.n = max(2, footprint // stride)
        self.words = self.n * stride // 8
        self.buf = cp.zeros(self.words, dtype=cp.uint64)
        base = int(self.buf.data.ptr)
        nxt = single_cycle(self.n, rng)
        slots = np.arange(self.n, dtype=np.int64) * (stride // 8)
        values = (base + slots[nxt] * 8).astype(np.uint64)
        self.buf[cp.asarray(slots)] = cp.asarray(values)
        self.start = base
        self.node_sum = (self.n * base + 8 * int(slots.sum())) & _MASK64
        self.footprint = self.n * stride
        self.stride = stride

    def run(self, ctx: Any, op: str, warm_laps: int, laps: int) -> tuple[float, bool, str]:
        """One launch: (cycles per step after overhead, valid, note).

        The timed loop is a pure chain (review S1-1: an accumulate in it sits on the
        dependent-load path); the checksum is taken over the untimed warm laps, so a
        launch without them validates only ``end == start`` (see :meth:`validate`).
        """
        cp = ctx.cp
        out = cp.zeros(4, dtype=cp.uint64)
        kern = ctx.kernel("latency.chase", f"chase_{op}")
        iters = laps * self.n
        kern((1,), (1,), (self.buf, np.int64(warm_laps * self.n), np.int64(iters), out))
        end, total, cycles, overhead = (int(v) for v in out.get())
        ok = end == self.start and total == (warm_laps * self.node_sum) & _MASK64
        note = "" if ok else "chase did not visit every node exactly once per lap"
        return ((cycles - overhead) / iters if iters else math.nan), ok, note

    def validate(self, ctx: Any, op: str) -> bool:
        """One untimed checksum lap (no timed steps): the chain is one cycle through all nodes."""
        return self.run(ctx, op, 1, 0)[1]


def _laps_for(n: int, min_steps: int) -> int:
    return max(1, math.ceil(min_steps / n))


def chase_latency(
    ctx: Any,
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
    """Cycles per dependent load over one chain (one :class:`Measurement`).

    With ``flush_l2`` every run is one cold lap after writing a buffer of 2 x L2 (the
    chain's own initialisation writes would otherwise leave its nodes in L2: a chain
    of N nodes touches only N lines, however large its footprint).
    """
    chain = _Chain(ctx, footprint, stride, ctx.rng(footprint ^ stride) if random_order else None)
    laps = 1 if flush_l2 else _laps_for(chain.n, min_steps)
    failures: list[str] = []
    flush = None
    if flush_l2:
        warm = False
        l2 = int(ctx.facts.get("l2_cache_bytes") or (4 << 20))
        flush = ctx.cp.empty(2 * l2 // 4 + 1024, dtype=ctx.cp.uint32)

    if not chain.validate(ctx, op):
        failures.append("chase did not visit every node exactly once per lap")

    def once() -> float:
        if flush is not None:
            flush.fill(1)
        value, ok, note = chain.run(ctx, op, 1 if warm else 0, laps)
        if not ok:
            failures.append(note)
        return value

    stab = repeat_until_stable(once, max_reps, rel_spread_bound, min_reps)
    params = {
        "load": f"ld.global.{op}",
        "footprint_bytes": chain.footprint,
        "stride_bytes": stride,
        "nodes": chain.n,
        "order": "random" if random_order else "sequential",
        "steps": laps * chain.n,
        "warm_lap": warm,
        "l2_flushed": flush_l2,
    }
    params.update(extra_params or {})
    return measurement_from_stability(
        name, stab, "cycles", params, valid=not failures, note="; ".join(sorted(set(failures)))
    )


def shared_latency(ctx: Any, n: int = 256, min_steps: int = 16384) -> Measurement:
    """Shared-memory load-to-use latency (Accel-Sim ``shd-lat``)."""
    cp = ctx.cp
    nxt = single_cycle(n, ctx.rng(7))
    d_next = cp.asarray(nxt.astype(np.uint32))
    laps = _laps_for(n, min_steps)
    iters = laps * n
    kern = ctx.kernel("latency.shared_chase", "chase_shared")
    failures: list[str] = []

    def once() -> float:
        out = cp.zeros(5, dtype=cp.uint64)
        kern((1,), (32,), (d_next, np.int32(n), np.int64(iters), out), shared_mem=4 * n)
        end, total, cycles, overhead, base = (int(v) for v in out.get())
        expect = n * base + 4 * (n * (n - 1) // 2)  # the untimed warm lap's checksum
        if end != base or total != expect & _MASK64:
            failures.append("shared chase did not visit every node exactly once per lap")
        return (cycles - overhead) / iters

    stab = repeat_until_stable(once, 8, 0.03, 3)
    params = {"load": "ld.shared.u32", "nodes": n, "stride_bytes": 4, "steps": iters}
    return measurement_from_stability(
        "shared_latency", stab, "cycles", params, not failures, "; ".join(sorted(set(failures)))
    )


def sweep_footprints(l2_bytes: int, start: int = 4096, per_octave: int = 4) -> list[int]:
    """Geometric footprints from ``start`` to 2 x L2 (``per_octave`` points per doubling),
    then 2 points per doubling up to 8 x L2, so the memory plateau has >= 3 points past
    the L2 step (review S2-4)."""
    stop = max(2 * l2_bytes, 1 << 22)
    count = int(math.ceil(math.log2(stop / start) * per_octave)) + 1
    raw = list(start * 2.0 ** (np.arange(count) / per_octave))
    far = stop * 2.0 ** (np.arange(1, 8) / 2)
    raw += [v for v in far if v <= 8 * l2_bytes * 1.001]
    return sorted({int(v) // 128 * 128 for v in raw})


def _prefer_max_l1(ctx: Any) -> int | None:
    """Ask for the smallest shared-memory carveout on the ``.ca`` chase (the largest L1), so
    the sweep's L1 step is the max-L1 configuration (review S1-2). Returns the percent
    set, or None when the CuPy kernel object does not support it."""
    try:
        ctx.kernel("latency.chase", "chase_ca").preferred_shared_memory_carveout = 0
    except Exception:  # older CuPy, or a stand-in without the attribute
        return None
    return 0


def footprint_sweep(
    ctx: Any, footprints: list[int] | None = None, stride: int = 128
) -> tuple[list[Measurement], np.ndarray, np.ndarray]:
    """Chase with ``.ca`` over growing footprints: the latency-vs-footprint curve.

    One node per 128 B line, random order, a warm lap first while the footprint can
    still fit L2; beyond 1.5 x L2 one cold lap after writing a 2 x L2 buffer (the
    chain's own initialisation writes would leave ~L2 bytes of it resident: review
    S2-4). Returns the
    curve as one measurement (``latency.footprint_sweep``, arrays in params) plus
    ``cache.l1_capacity`` / ``cache.l2_capacity`` read off it by
    :func:`hilsim.microbench.analysis.cache_levels`.
    """
    l2 = int(ctx.facts.get("l2_cache_bytes") or (4 << 20))
    sizes = footprints or sweep_footprints(l2)
    flush = ctx.cp.empty(2 * l2 // 4 + 1024, dtype=ctx.cp.uint32)
    carveout = _prefer_max_l1(ctx)
    lat: list[float] = []
    spreads: list[float] = []
    ok = True
    for size in sizes:
        chain = _Chain(ctx, size, stride, ctx.rng(size))
        warm = chain.footprint <= 1.5 * l2
        laps = _laps_for(chain.n, 8192) if warm else 1
        if not warm and not chain.validate(ctx, "ca"):
            ok = False
        samples: list[float] = []

        def once(
            chain: _Chain = chain,
            warm: bool = warm,
            laps: int = laps,
            samples: list[float] = samples,
        ) -> float:
            if not warm:
                flush.fill(1)
            value, good, _ = chain.run(ctx, "ca", 1 if warm else 0, laps)
            samples.append(value)
            return value if good else math.nan

        stab = repeat_until_stable(once, 4, 0.05, 2)
        ok = ok and all(math.isfinite(s) for s in stab.samples)
        lat.append(stab.value)
        spreads.append(stab.spread)
        del chain
        ctx.cp.get_default_memory_pool().free_all_blocks()
    x = np.asarray([(s // stride) * stride for s in sizes], dtype=float)
    y = np.asarray(lat, dtype=float)
    curve = Measurement(
        name="latency_footprint_sweep",
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
    for level, attr in (("l1", "l1_bytes"), ("l2", "l2_bytes")):
        value = getattr(levels, attr) if levels else None
        out.append(
            Measurement(
                name=f"{level}_capacity_bytes",
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


def stride_sweep(
    ctx: Any, footprint: int = 2 << 20, strides: tuple[int, ...] = (8, 16, 32, 64, 128, 256)
) -> list[Measurement]:
    """Sequential ``.ca`` chase at growing strides over a footprint > L1 that fits L2.

    Mean latency rises with the stride until every access misses L1: that stride is
    the L1 fetch granularity (the 32 B sector on Volta and later). Returns the curve
    and ``cache.l1_fetch_granularity``.
    """
    l2 = int(ctx.facts.get("l2_cache_bytes") or (4 << 20))
    footprint = min(footprint, l2 // 2)
    lat = []
    ok = True
    for stride in strides:
        m = chase_latency(
            ctx,
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
            name="latency_stride_sweep",
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
            name="l1_sector_bytes",
            value=granularity,
            unit="bytes",
            params={"method": "stride sweep "
                    "(hilsim.microbench.analysis.line_size_from_stride_sweep)"},
            valid=bool(ok and granularity is not None),
            note="" if granularity is not None else "flat stride curve",
        ),
    ]


def _dram(ctx: Any) -> list[Measurement]:
    l2 = int(ctx.facts.get("l2_cache_bytes") or (4 << 20))
    footprint = max(4 * l2, 256 << 20)
    footprint = min(footprint, ctx.free_bytes() // 4)
    out = [
        chase_latency(
            ctx,
            "dram_latency",
            "cg",
            footprint,
            4096,
            random_order=False,
            warm=False,
            flush_l2=True,
            extra_params={"tlb": "512 steps per 2 MiB page"},
        )
    ]
    stride = PAGE + 4096
    pages = max(16, min(512, ctx.free_bytes() // 4 // stride))
    out.append(
        chase_latency(
            ctx,
            "dram_latency_page_stride",
            "cg",
            pages * stride,
            stride,
            random_order=True,
            warm=False,
            flush_l2=True,
            extra_params={"tlb": "every step a new 2 MiB page"},
        )
    )
    return out


def benchmarks() -> list[tuple[str, Callable[[Any], list[Measurement]]]]:
    """The latency family's benchmarks, in run order."""
    return [
        ("l1_hit_latency", lambda ctx: [chase_latency(ctx, "l1_hit_latency", "ca", 8 << 10, 64)]),
        (
            "l2_hit_latency",
            lambda ctx: [
                chase_latency(
                    ctx,
                    "l2_hit_latency",
                    "cg",
                    min(1 << 20, int(ctx.facts.get("l2_cache_bytes") or (4 << 20)) // 4),
                    128,
                )
            ],
        ),
        ("dram_latency", _dram),
        ("shared_latency", lambda ctx: [shared_latency(ctx)]),
        ("latency_footprint_sweep", lambda ctx: footprint_sweep(ctx)[0]),
        ("latency_stride_sweep", stride_sweep),
    ]
