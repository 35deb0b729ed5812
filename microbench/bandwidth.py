"""Attained bandwidth of L1, shared memory, L2 and DRAM (Accel-Sim Section II-C;
Section IV, Fig. 7: bandwidth normalised to the theoretical peak).

All kernels use 128-bit vector accesses (``v4.u32``), enough warps to fill every SM,
and fold what they read into a checksum that is validated on the host (so nothing can
be optimised away and a wrong address would show).

* ``l1_read`` / ``shared_read``: one 16 KiB (L1) or 32 KiB (shared) region per block,
  read ``reps`` times with ``ld.global.ca`` / ``ld.shared``; bytes per SM clock come
  from per-block ``clock64()`` spans grouped by ``%smid`` (B/clk/SM).
* ``grid_read_cg`` (L2: footprint L2/4, read ``reps`` times, ``ld.global.cg``) and
  ``grid_read`` / ``grid_write`` / ``grid_copy`` (DRAM: footprint max(8 x L2, 1 GiB),
  capped at a quarter of free memory):
  grid-stride loops timed with CUDA events (GB/s), converted to bytes per SM clock.
  Copy counts read + write bytes.

DRAM peak = memory clock x bus width x 2 (:func:`hilsim.microbench._gpu.theoretical_dram_gbs`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from hilsim.microbench._gpu import per_sm_rate

from hilsim.core.measurement import (
    Measurement,
    measurement_from_stability,
    repeat_until_stable,
)

_COMMON = r"""
__device__ __forceinline__ unsigned int smid_() {
    unsigned int r; asm volatile("mov.u32 %0, %%smid;" : "=r"(r)); return r;
}
__device__ __forceinline__ unsigned long long warp_sum_(unsigned long long v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
"""

_GRID = r"""
extern "C" __global__ void grid_read_{op}(const uint4* __restrict__ src, long long n_vec,
                                           int reps, unsigned long long* __restrict__ sum)
{{
    unsigned long long acc = 0;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (int r = 0; r < reps; ++r) {{
        for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n_vec;
             i += step) {{
            unsigned int a, b, c, d;
            asm volatile("ld.global.{op}.v4.u32 {{%0,%1,%2,%3}}, [%4];"
                         : "=r"(a), "=r"(b), "=r"(c), "=r"(d) : "l"(src + i));
            acc += (unsigned long long)a + b + c + d;
        }}
    }}
    acc = warp_sum_(acc);
    if ((threadIdx.x & 31) == 0) atomicAdd(sum, acc);
}}
"""

DRAM_SOURCE = (
    _COMMON
    + _GRID.format(op="cg")
    + _GRID.format(op="ca")
    + r"""
extern "C" __global__ void grid_write(uint4* __restrict__ dst, long long n_vec, unsigned int v)
{
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n_vec; i += step) {
        asm volatile("st.global.v4.u32 [%0], {%1,%2,%3,%4};"
                     :: "l"(dst + i), "r"(v), "r"(v), "r"(v), "r"(v) : "memory");
    }
}

extern "C" __global__ void grid_copy(const uint4* __restrict__ src, uint4* __restrict__ dst,
                                     long long n_vec)
{
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n_vec; i += step) {
        dst[i] = src[i];
    }
}
"""
)

ONCHIP_SOURCE = (
    _COMMON
    + r"""
extern "C" __global__ void l1_read(const uint4* __restrict__ src, int vecs_per_block, int reps,
                                   unsigned int* __restrict__ out,
                                   long long* __restrict__ rec)
{
    const uint4* base = src + (long long)blockIdx.x * vecs_per_block;
    unsigned int acc = 0;
    for (int i = threadIdx.x; i < vecs_per_block; i += blockDim.x) {   // warm: fill L1
        unsigned int a, b, c, d;
        asm volatile("ld.global.ca.v4.u32 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a), "=r"(b), "=r"(c), "=r"(d) : "l"(base + i));
        acc += a + b + c + d;
    }
    __syncthreads();
    long long t0 = clock64();
#pragma unroll 4
    for (int r = 0; r < reps; ++r) {
        for (int i = threadIdx.x; i < vecs_per_block; i += blockDim.x) {
            unsigned int a, b, c, d;
            asm volatile("ld.global.ca.v4.u32 {%0,%1,%2,%3}, [%4];"
                         : "=r"(a), "=r"(b), "=r"(c), "=r"(d) : "l"(base + i));
            acc += a + b + c + d;
        }
    }
    __syncthreads();
    long long t1 = clock64();
    out[(long long)blockIdx.x * blockDim.x + threadIdx.x] = acc;
    if (threadIdx.x == 0) {
        rec[3 * blockIdx.x] = smid_();
        rec[3 * blockIdx.x + 1] = t0;
        rec[3 * blockIdx.x + 2] = t1;
    }
}

#define SHARED_VECS 2048
extern "C" __global__ void shared_read(int reps, unsigned int* __restrict__ out,
                                       long long* __restrict__ rec)
{
    __shared__ uint4 s[SHARED_VECS];
    for (int i = threadIdx.x; i < SHARED_VECS; i += blockDim.x) {
        uint4 v; v.x = 4 * i; v.y = 4 * i + 1; v.z = 4 * i + 2; v.w = 4 * i + 3;
        s[i] = v;
    }
    __syncthreads();
    unsigned long long window;
    asm("cvta.to.shared.u64 %0, %1;" : "=l"(window) : "l"((unsigned long long)s));
    const unsigned int base = (unsigned int)window;
    unsigned int acc = 0;
    long long t0 = clock64();
#pragma unroll 4
    for (int r = 0; r < reps; ++r) {
        for (int i = threadIdx.x; i < SHARED_VECS; i += blockDim.x) {
            unsigned int a, b, c, d;
            asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];"
                         : "=r"(a), "=r"(b), "=r"(c), "=r"(d) : "r"(base + 16u * i));
            acc += a + b + c + d;
        }
    }
    __syncthreads();
    long long t1 = clock64();
    out[(long long)blockIdx.x * blockDim.x + threadIdx.x] = acc;
    if (threadIdx.x == 0) {
        rec[3 * blockIdx.x] = smid_();
        rec[3 * blockIdx.x + 1] = t0;
        rec[3 * blockIdx.x + 2] = t1;
    }
}
"""
)

SOURCES: dict[str, str] = {"grid": DRAM_SOURCE, "onchip": ONCHIP_SOURCE}

_MASK32 = (1 << 32) - 1
_MASK64 = (1 << 64) - 1
SHARED_VECS = 2048


def _clock_params(ctx: Any, gbs: float) -> dict[str, Any]:
    mhz, source = ctx.sm_clock_mhz()
    params: dict[str, Any] = {"sm_clock_mhz": mhz, "clock_source": source}
    if mhz:
        per_clk = gbs * 1e9 / (mhz * 1e6)
        params["bytes_per_clk"] = per_clk
        params["bytes_per_clk_per_sm"] = per_clk / ctx.sm_count
    return params


def onchip_expected(per_thread_vecs: np.ndarray, reps: int) -> np.ndarray:
    """Host checksum of ``l1_read``/``shared_read``: words are ``4*vec + lane``.

    ``per_thread_vecs[t]`` lists the vector indices thread t reads per rep; every
    vector ``i`` holds ``(4i, 4i+1, 4i+2, 4i+3)`` so it sums to ``16 i + 6``.
    """
    sums = (16 * per_thread_vecs.astype(np.int64) + 6).sum(axis=1)
    return (sums * reps) & _MASK32


def _onchip(ctx: Any, which: str) -> Measurement:
    cp = ctx.cp
    block = 1024 if ctx.threads_per_sm >= 1024 else ctx.threads_per_sm
    blocks = ctx.sm_count * max(1, ctx.threads_per_sm // block)
    vecs = 1024 if which == "l1" else SHARED_VECS  # 16 KiB per block for L1, 32 KiB shared
    reps = 512 if which == "l1" else 256
    rec = cp.zeros(3 * blocks, dtype=cp.int64)
    out = cp.zeros(blocks * block, dtype=cp.uint32)
    per_thread = np.arange(block)[:, None] + block * np.arange(max(1, vecs // block))[None, :]
    if which == "l1":
        src = cp.arange(4 * vecs * blocks, dtype=cp.uint32) % np.uint32(4 * vecs)
        kern = ctx.kernel("bandwidth.onchip", "l1_read")
        expected = onchip_expected(per_thread, reps + 1)

        def launch() -> None:
            kern((blocks,), (block,), (src, np.int32(vecs), np.int32(reps), out, rec))
    else:
        kern = ctx.kernel("bandwidth.onchip", "shared_read")
        expected = onchip_expected(per_thread, reps)

        def launch() -> None:
            kern((blocks,), (block,), (np.int32(reps), out, rec))

    bytes_per_block = reps * vecs * 16
    failures: list[str] = []
    gbs: list[float] = []

    def once() -> float:
        ms = ctx.time_ms(launch)
        got = out.get().reshape(blocks, block)
        if not np.all(got == expected[None, :]):
            failures.append("checksum mismatch")
        gbs.append(bytes_per_block * blocks / (ms * 1e-3) / 1e9)
        rate, _ = per_sm_rate(rec.get().reshape(-1, 3), bytes_per_block)
        return rate

    launch()  # compile + first touch
    stab = repeat_until_stable(once, 8, 0.05, 3)
    params = {
        "access": "ld.global.ca.v4.u32" if which == "l1" else "ld.shared.v4.u32",
        "region_bytes_per_block": vecs * 16,
        "reps": reps,
        "blocks": blocks,
        "threads_per_block": block,
        "gbs": float(np.median(gbs)) if gbs else None,
    }
    return measurement_from_stability(
        "l1_bandwidth" if which == "l1" else "shared_bandwidth",
        stab,
        "bytes/clk/SM",
        params,
        not failures,
        "; ".join(sorted(set(failures))),
    )


def _grid_dims(ctx: Any) -> tuple[int, int]:
    block = 256
    return ctx.sm_count * max(1, ctx.threads_per_sm // block), block


def _grid_read(ctx: Any, name: str, op: str, n_bytes: int, reps: int) -> Measurement:
    cp = ctx.cp
    grid, block = _grid_dims(ctx)
    n_vec = max(grid * block, n_bytes // 16 // (grid * block) * (grid * block))
    src = cp.arange(4 * n_vec, dtype=cp.uint32)
    expected = (reps * int(src.sum(dtype=cp.uint64).get())) & _MASK64
    total = cp.zeros(1, dtype=cp.uint64)
    kern = ctx.kernel("bandwidth.grid", f"grid_read_{op}")
    failures: list[str] = []

    def launch() -> None:
        kern((grid,), (block,), (src, np.int64(n_vec), np.int32(reps), total))

    def reset() -> None:
        total.fill(0)

    def once() -> float:
        ms, k = ctx.time_batch_ms(launch, reset)  # fill outside the events (review S2-3)
        if int(total.get()[0]) != (k * expected) & _MASK64:
            failures.append("checksum mismatch")
        return n_vec * 16 * reps / (ms * 1e-3) / 1e9

    launch()  # warm: compile, TLB, and (for L2) fill the cache
    stab = repeat_until_stable(once, 10, 0.05, 3)
    params = {
        "access": f"ld.global.{op}.v4.u32",
        "footprint_bytes": n_vec * 16,
        "reps": reps,
        "grid": grid,
        "block": block,
    }
    params.update(_clock_params(ctx, stab.value))
    return measurement_from_stability(
        name, stab, "GB/s", params, not failures, "; ".join(sorted(set(failures)))
    )


def _peak(ctx: Any, m: Measurement) -> Measurement:
    peak = ctx.facts.get("peak_dram_gbs")
    m.params["peak_gbs"] = peak
    m.params["achieved_fraction"] = (m.value / peak) if (peak and m.value) else None
    return m


def _dram_bytes(ctx: Any) -> int:
    l2 = int(ctx.facts.get("l2_cache_bytes") or (4 << 20))
    want = max(8 * l2, 1 << 30)
    return int(min(want, ctx.free_bytes() // 4))


def dram(ctx: Any) -> list[Measurement]:
    """DRAM read, write and copy bandwidth (GB/s, with the theoretical peak)."""
    cp = ctx.cp
    n_bytes = _dram_bytes(ctx)
    out = [_peak(ctx, _grid_read(ctx, "dram_read_bandwidth", "ca", n_bytes, 1))]
    grid, block = _grid_dims(ctx)
    n_vec = max(grid * block, n_bytes // 2 // 16)
    dst = cp.empty(4 * n_vec, dtype=cp.uint32)
    write = ctx.kernel("bandwidth.grid", "grid_write")
    copy = ctx.kernel("bandwidth.grid", "grid_copy")
    for name, factor in (("dram_write_bandwidth", 1), ("dram_copy_bandwidth", 2)):
        failures: list[str] = []
        if name.endswith("write"):
            value = np.uint32(0x5A5A5A5A)

            def launch(value: np.uint32 = value) -> None:
                write((grid,), (block,), (dst, np.int64(n_vec), value))

            def check(value: np.uint32 = value) -> bool:
                return bool((dst == value).all())
        else:
            src = cp.arange(4 * n_vec, dtype=cp.uint32)

            def launch(src: Any = src) -> None:
                copy((grid,), (block,), (src, dst, np.int64(n_vec)))

            def check(src: Any = src) -> bool:
                return bool(cp.array_equal(src, dst))

        launch()

        def once(
            launch: Callable[[], None] = launch,
            check: Callable[[], bool] = check,
            failures: list[str] = failures,
            factor: int = factor,
        ) -> float:
            # k >= 4 launches per event pair, the check outside: the last launch's dirty
            # lines left in L2 at the stop event weigh 1/k (review S2-2)
            ms, _k = ctx.time_batch_ms(launch)
            if not check():
                failures.append("destination does not hold the expected data")
            return factor * n_vec * 16 / (ms * 1e-3) / 1e9

        stab = repeat_until_stable(once, 10, 0.05, 3)
        params = {
            "footprint_bytes": n_vec * 16,
            "bytes_counted": "read + write" if factor == 2 else "written",
            "grid": grid,
            "block": block,
        }
        params.update(_clock_params(ctx, stab.value))
        out.append(
            _peak(
                ctx,
                measurement_from_stability(
                    name, stab, "GB/s", params, not failures, "; ".join(sorted(set(failures)))
                ),
            )
        )
    return out


def l2(ctx: Any) -> list[Measurement]:
    """L2 read bandwidth: footprint L2/4 read repeatedly with ``ld.global.cg``."""
    l2_bytes = int(ctx.facts.get("l2_cache_bytes") or (4 << 20))
    reps = max(4, int(math.ceil((2 << 30) / (l2_bytes // 4))))
    m = _grid_read(ctx, "l2_bandwidth", "cg", l2_bytes // 4, reps)
    mhz = m.params.get("sm_clock_mhz")
    m.params["gbs"] = m.value
    # the tuner's unit: whole-GPU bytes per SM clock (Accel-Sim l2_bw_* prints byte/clk)
    scale = 1e9 / (mhz * 1e6) if mhz else None
    m.value = m.value * scale if (scale and m.value is not None) else None
    m.samples = [s * scale for s in m.samples] if scale else m.samples
    m.unit = "bytes/clk"
    if scale is None:
        m.valid, m.note = False, "SM clock unknown: cannot convert GB/s to bytes/clk"
    return [m]


def benchmarks() -> list[tuple[str, Callable[[Any], list[Measurement]]]]:
    """The bandwidth family's benchmarks, in run order."""
    return [
        ("bandwidth.l1_read", lambda ctx: [_onchip(ctx, "l1")]),
        ("bandwidth.shared_read", lambda ctx: [_onchip(ctx, "shared")]),
        ("l2_bandwidth", l2),
        ("bandwidth.dram", dram),
    ]
