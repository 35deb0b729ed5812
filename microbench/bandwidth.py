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

DRAM peak = memory clock x bus width x 2 (:func:`hilsim.microbench.gpu.theoretical_dram_gbs`).

On a simulated device (:attr:`~hilsim.microbench.device.Device.simulated`) the same
kernels run on a slice of the card, timed by the simulated cycles of one launch:

* L1 / shared at full occupancy on the active SMs, 48 passes: per-SM rates, no scaling;
* L2 and DRAM on ``k`` memory channels
  (:attr:`~hilsim.microbench.device.Setup.MEMORY_SLICE`,
  :attr:`~hilsim.microbench.device.Device.memory_slice_channels`, one unless the tuner
  sizes the slice): the slice's bytes per core clock / ``k`` times
  :attr:`~hilsim.microbench.device.Device.memory_scale` (the card's channels: they and
  their L2 banks are independent and addresses interleave over them). DRAM read: one
  cold pass over 2 MiB per channel; L2: a quarter of the slice's L2 read 8 times after a
  warm pass; write / copy over 512 KiB per channel (at least twice the slice's L2), the
  second of two launches timed (L2 is write-back: one launch would end with dirty lines
  not yet in DRAM).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hilsim.microbench.device import Benchmark, Device, Setup
from hilsim.microbench.program import Program
from hilsim.microbench.rates import per_sm_rate

from hilsim.core import measurement_names as mn
from hilsim.core.measurement import Measurement, measurement_from_stability

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
#: timer of a simulated slice: the cycles the simulator counted for the timed launch
_SLICE_TIMER = "simulated cycles of the {} launch (GPGPU-Sim statistics)"


def _clock_params(device: Device, gbs: float) -> dict[str, Any]:
    mhz, source = device.sm_clock_mhz()
    params: dict[str, Any] = {"sm_clock_mhz": mhz, "clock_source": source}
    if mhz:
        per_clk = gbs * 1e9 / (mhz * 1e6)
        params["bytes_per_clk"] = per_clk
        params["bytes_per_clk_per_sm"] = per_clk / device.sm_count
    return params


def onchip_expected(per_thread_vecs: np.ndarray, reps: int) -> np.ndarray:
    """Host checksum of ``l1_read``/``shared_read``: words are ``4*vec + lane``.

    ``per_thread_vecs[t]`` lists the vector indices thread t reads per rep; every
    vector ``i`` holds ``(4i, 4i+1, 4i+2, 4i+3)`` so it sums to ``16 i + 6``.
    """
    sums = (16 * per_thread_vecs.astype(np.int64) + 6).sum(axis=1)
    return (sums * reps) & _MASK32


def iota_sum(count: int) -> int:
    """Sum of the 32-bit words ``0 .. count - 1`` (what a full read of an iota buffer sums)."""
    return count * (count - 1) // 2


def onchip(device: Device, which: str) -> Measurement:
    """``l1_bandwidth`` / ``shared_bandwidth`` (B/clk/SM): 16 KiB (L1) or 32 KiB (shared)
    per block read ``reps`` times at full occupancy; per-block ``clock64`` spans grouped
    by ``%smid``. ``reps``: 512 (L1) / 256 (shared) on a GPU, 48 on a simulator."""
    threads = device.threads_per_sm
    block = 1024 if threads >= 1024 else threads
    blocks = device.active_sms * max(1, threads // block)
    vecs = 1024 if which == "l1" else SHARED_VECS  # 16 KiB per block for L1, 32 KiB shared
    reps = 48 if device.simulated else (512 if which == "l1" else 256)
    per_thread = np.arange(block)[:, None] + block * np.arange(max(1, vecs // block))[None, :]
    program = Program("bandwidth.onchip").buf("out", 4 * blocks * block)
    program.buf("rec", 8 * 3 * blocks)
    if which == "l1":
        program.iota("src", 4 * vecs * blocks, modulo=4 * vecs)
        args = [("buf", "src"), ("i32", vecs), ("i32", reps), ("buf", "out"), ("buf", "rec")]
        program.launch("l1_read", blocks, block, args, timing="event")
        expected = onchip_expected(per_thread, reps + 1)
    else:
        args = [("i32", reps), ("buf", "out"), ("buf", "rec")]
        program.launch("shared_read", blocks, block, args, timing="event")
        expected = onchip_expected(per_thread, reps)
    program.read("out").read("rec")
    bytes_per_block = reps * vecs * 16
    bench = f"bandwidth.{which}"
    name = mn.L1_BANDWIDTH if which == "l1" else mn.SHARED_BANDWIDTH
    access = "ld.global.ca.v4.u32" if which == "l1" else "ld.shared.v4.u32"
    failures: list[str] = []
    gbs: list[float] = []
    seen = [0]

    def once() -> float:
        res = device.run(bench, program, Setup.SM_SLICE)
        got = res.array("out", np.uint32).reshape(blocks, block)
        if not np.all(got == expected[None, :]):
            failures.append("checksum mismatch")
        if 0 in res.ms:
            gbs.append(bytes_per_block * blocks / (res.ms[0] * 1e-3) / 1e9)
        rate, seen[0] = per_sm_rate(res.array("rec", np.int64).reshape(-1, 3), bytes_per_block)
        return rate

    if not device.simulated:
        device.run(bench, program, Setup.SM_SLICE, timed=False)  # compile + first touch
    stab = device.sample(once, 8, 0.05, 3)
    params = {
        **device.slice_params(),
        "access": access,
        "region_bytes_per_block": vecs * 16,
        "reps": reps,
        "blocks": blocks,
        "threads_per_block": block,
    }
    if not device.simulated:
        params["gbs"] = float(np.median(gbs)) if gbs else None
        return measurement_from_stability(
            name, stab, "bytes/clk/SM", params, not failures, "; ".join(sorted(set(failures)))
        )
    value = stab.value
    ok = not failures and seen[0] == device.active_sms and np.isfinite(value)
    params.update(sms_seen=seen[0], scaling="none (per-SM rate)")
    note = "" if ok else ("checksum mismatch" if failures else f"ran on {seen[0]} SMs")
    return Measurement(
        name,
        float(value) if ok else None,
        "bytes/clk/SM",
        params,
        [float(value)] if ok else [],
        0.0,
        bool(ok),
        note,
    )


def _grid_dims(device: Device) -> tuple[int, int]:
    block = 256
    return device.active_sms * max(1, device.threads_per_sm // block), block


def grid_stride_bytes(device: Device) -> int:
    """Bytes one pass of the whole grid's 16-byte loads covers: a grid read's footprint is
    a whole number of these (at least one)."""
    grid, block = _grid_dims(device)
    return grid * block * 16


def _grid_read_program(
    device: Device, op: str, n_bytes: int, reps: int, warm: bool
) -> tuple[Program, int, int]:
    """``grid_read_{op}`` over ``n_bytes`` (whole grid strides): (program, n_vec, timed
    launch index). ``warm``: one untimed pass into a scratch sum first."""
    grid, block = _grid_dims(device)
    n_vec = max(grid * block, n_bytes // 16 // (grid * block) * (grid * block))
    program = Program("bandwidth.grid").iota("src", 4 * n_vec).buf("sum", 8)
    if warm:
        program.buf("warm", 8)
        args = [("buf", "src"), ("i64", n_vec), ("i32", 1), ("buf", "warm")]
        program.launch(f"grid_read_{op}", grid, block, args)
    args = [("buf", "src"), ("i64", n_vec), ("i32", reps), ("buf", "sum")]
    timed = program.launch(f"grid_read_{op}", grid, block, args, timing="batch", reset=["sum"])
    program.read("sum")
    return program, n_vec, timed


def _grid_read(device: Device, name: str, op: str, n_bytes: int, reps: int) -> Measurement:
    """GB/s of ``grid_read_{op}`` on a GPU: batches of launches between CUDA events."""
    grid, block = _grid_dims(device)
    program, n_vec, timed = _grid_read_program(device, op, n_bytes, reps, warm=False)
    expected = (reps * iota_sum(4 * n_vec)) & _MASK64
    failures: list[str] = []

    def once() -> float:
        res = device.run(name, program, Setup.MEMORY_SLICE)
        k = res.batch[timed]
        if int(res.array("sum", np.uint64)[0]) != (k * expected) & _MASK64:
            failures.append("checksum mismatch")
        return n_vec * 16 * reps / (res.ms[timed] * 1e-3) / 1e9

    device.run(name, program, Setup.MEMORY_SLICE, timed=False)  # compile, TLB, fill L2
    stab = device.sample(once, 10, 0.05, 3)
    params = {
        "access": f"ld.global.{op}.v4.u32",
        "footprint_bytes": n_vec * 16,
        "reps": reps,
        "grid": grid,
        "block": block,
    }
    params.update(_clock_params(device, stab.value))
    return measurement_from_stability(
        name, stab, "GB/s", params, not failures, "; ".join(sorted(set(failures)))
    )


def _slice_read(
    device: Device, bench: str, op: str, n_bytes: int, reps: int, warm: bool
) -> tuple[float, bool, dict[str, Any]]:
    """``grid_read_{op}`` on a simulated memory slice: (bytes per core clock of the
    slice, checksum ok, params), timed by the simulated cycles of the timed launch."""
    grid, block = _grid_dims(device)
    program, n_vec, timed = _grid_read_program(device, op, n_bytes, reps, warm)
    res = device.run(bench, program, Setup.MEMORY_SLICE)
    ok = int(res.array("sum", np.uint64)[0]) == (reps * iota_sum(4 * n_vec)) & _MASK64
    cycles = res.kernel_cycles[timed]
    per_clk = n_vec * 16 * reps / cycles
    params = {
        **device.slice_params(),
        "access": f"ld.global.{op}.v4.u32",
        "footprint_bytes": n_vec * 16,
        "reps": reps,
        "grid": grid,
        "block": block,
        "warm_pass": warm,
        "mem_channels_simulated": device.memory_slice_channels,
        "mem_channels": device.memory_scale,
        "slice_cycles": cycles,
        "slice_bytes_per_clk": per_clk,
        "timer": _SLICE_TIMER.format("timed"),
    }
    return per_clk, ok, params


def _slice_dram(
    device: Device, name: str, per_clk: float, ok: bool, note: str, params: dict[str, Any]
) -> Measurement:
    """A DRAM bandwidth measurement from a memory slice's bytes per core clock: per
    channel of the slice, scaled by the device's channels."""
    mhz, source = device.sm_clock_mhz()
    mhz = float(mhz or math.nan)
    chans, k = device.memory_scale, device.memory_slice_channels
    slice_gbs = per_clk * mhz * 1e6 / 1e9
    value = slice_gbs * chans / k
    peak = device.facts.get("peak_dram_gbs")
    params.update(
        slice_bytes_per_clk=per_clk,
        slice_gbs=slice_gbs,
        scaling=f"x {chans}{f' / {k}' if k > 1 else ''} {device.memory_scale_note}: "
        "channels are independent",
        sm_clock_mhz=mhz,
        clock_source=source,
        bytes_per_clk=per_clk * chans / k,
        bytes_per_clk_per_sm=per_clk * chans / k / float(device.sm_count),
        peak_gbs=peak,
        achieved_fraction=value / peak if peak else None,
        cold=f"{device.cold_l2_note} (L2 cold after the copies)",
    )
    return Measurement(name, value, "GB/s", params, [value], 0.0, ok, "" if ok else note)


def _peak(device: Device, m: Measurement) -> Measurement:
    peak = device.facts.get("peak_dram_gbs")
    m.params["peak_gbs"] = peak
    m.params["achieved_fraction"] = (m.value / peak) if (peak and m.value) else None
    return m


def _dram_bytes(device: Device) -> int:
    l2 = int(device.facts.get("l2_cache_bytes") or (4 << 20))
    want = max(8 * l2, 1 << 30)
    return int(min(want, device.free_bytes() // 4))


def dram(device: Device) -> list[Measurement]:
    """DRAM read, write and copy bandwidth (GB/s, with the theoretical peak)."""
    if device.simulated:
        return [dram_read_slice(device), *dram_write_copy_slice(device)]
    n_bytes = _dram_bytes(device)
    out = [_peak(device, _grid_read(device, mn.DRAM_READ_BANDWIDTH, "ca", n_bytes, 1))]
    grid, block = _grid_dims(device)
    n_vec = max(grid * block, n_bytes // 2 // 16)
    value = 0x5A5A5A5A
    # (measurement, kernel, bytes moved per byte of the destination)
    for name, kernel, factor in ((mn.DRAM_WRITE_BANDWIDTH, "grid_write", 1),
                                 (mn.DRAM_COPY_BANDWIDTH, "grid_copy", 2)):
        failures: list[str] = []
        program = Program("bandwidth.grid").buf("dst", 16 * n_vec)
        writes = kernel == "grid_write"
        if writes:
            args = [("buf", "dst"), ("i64", n_vec), ("u32", value)]
            program.launch(kernel, grid, block, args, timing="batch")
        else:
            program.iota("src", 4 * n_vec)
            args = [("buf", "src"), ("buf", "dst"), ("i64", n_vec)]
            program.launch(kernel, grid, block, args, timing="batch")
        device.run(name, program, Setup.MEMORY_SLICE, timed=False)

        def once(name: str = name, program: Program = program, factor: int = factor,
                 writes: bool = writes, failures: list[str] = failures) -> float:
            # k >= 4 launches per event pair, the check outside: the last launch's dirty
            # lines left in L2 at the stop event weigh 1/k
            res = device.run(name, program, Setup.MEMORY_SLICE)
            dst = res.buffer("dst", np.uint32)
            if writes:
                good = bool((dst == value).all())
            else:
                good = bool(res.xp.array_equal(res.buffer("src", np.uint32), dst))
            if not good:
                failures.append("destination does not hold the expected data")
            return factor * n_vec * 16 / (res.ms[0] * 1e-3) / 1e9

        stab = device.sample(once, 10, 0.05, 3)
        params = {
            "kernel": kernel,
            "footprint_bytes": n_vec * 16,
            "bytes_counted": "read + write" if factor == 2 else "written",
            "grid": grid,
            "block": block,
        }
        params.update(_clock_params(device, stab.value))
        out.append(
            _peak(
                device,
                measurement_from_stability(
                    name, stab, "GB/s", params, not failures, "; ".join(sorted(set(failures)))
                ),
            )
        )
    return out


def dram_read_slice(device: Device, n_bytes: int = 2 << 20) -> Measurement:
    """``dram_read_bandwidth`` (GB/s) on a simulated slice: one cold read pass over
    ``n_bytes`` per channel of the slice, per channel x channels."""
    per_clk, ok, params = _slice_read(device, "bandwidth.dram", "ca",
                                      n_bytes * device.memory_slice_channels, 1, warm=False)
    return _slice_dram(device, mn.DRAM_READ_BANDWIDTH, per_clk, ok, "checksum mismatch", params)


def dram_write_copy_slice(device: Device, n_bytes: int = 512 << 10) -> list[Measurement]:
    """``dram_write_bandwidth`` / ``dram_copy_bandwidth`` (GB/s) on a simulated slice.

    ``grid_write`` (fills ``n_bytes`` per channel of the slice) and ``grid_copy`` (a cold
    source as large into another buffer; read + write bytes counted), each launched twice
    and the second
    launch timed by its simulated cycles: L2 is write-back, so a single launch would end
    with up to the slice's L2 of dirty lines not yet in DRAM (measured: 1.13 x the peak
    for one 1 MiB write on the QV100 slice). In the second launch the previous launch's
    dirty lines (the footprint is at least twice the slice's L2) are written back while
    its own stay: DRAM traffic = the bytes counted, as a GPU's batches of launches.
    Validation: the destination holds the written value / the source.
    """
    grid, block = _grid_dims(device)
    k = device.memory_slice_channels
    # the write-back argument needs a footprint of at least twice the slice's L2
    slice_l2 = int(device.facts.get("l2_cache_bytes") or (4 << 20)) * k // device.memory_scale
    n_vec = max(grid * block, max(n_bytes * k, 2 * slice_l2) // 16)
    value = 0x5A5A5A5A
    program = Program("bandwidth.grid").buf("dst_w", 16 * n_vec).iota("src_c", 4 * n_vec)
    program.buf("dst_c", 16 * n_vec)
    write = [("buf", "dst_w"), ("i64", n_vec), ("u32", value)]
    copy = [("buf", "src_c"), ("buf", "dst_c"), ("i64", n_vec)]
    w = [program.launch("grid_write", grid, block, write) for _ in range(2)][-1]
    c = [program.launch("grid_copy", grid, block, copy) for _ in range(2)][-1]
    program.read("dst_w").read("dst_c")
    res = device.run("bandwidth.dram_write_copy", program, Setup.MEMORY_SLICE)
    src = res.buffer("src_c", np.uint32)
    out = []
    for name, idx, ok, factor in (
        (mn.DRAM_WRITE_BANDWIDTH, w, bool(np.all(res.array("dst_w", np.uint32) == value)), 1),
        (mn.DRAM_COPY_BANDWIDTH, c, bool(np.array_equal(res.array("dst_c", np.uint32), src)), 2),
    ):
        cycles = res.kernel_cycles[idx]
        params = {
            **device.slice_params(),
            "footprint_bytes": n_vec * 16,
            "bytes_counted": "read + write" if factor == 2 else "written",
            "grid": grid,
            "block": block,
            "mem_channels_simulated": k,
            "mem_channels": device.memory_scale,
            "slice_cycles": cycles,
            "launches": 2,
            "timer": _SLICE_TIMER.format("second"),
        }
        per_clk = factor * n_vec * 16 / cycles
        note = "destination does not hold the expected data"
        out.append(_slice_dram(device, name, per_clk, ok, note, params))
    return out


def l2(device: Device) -> list[Measurement]:
    """L2 read bandwidth in bytes per SM clock, whole GPU (the tuner's unit; Accel-Sim's
    ``l2_bw_*`` prints byte/clk).

    A GPU reads a footprint of L2/4 repeatedly with ``ld.global.cg`` (~2 GiB in all) and
    converts GB/s with the SM clock; a simulated device reads a quarter of its memory
    slice's L2 8 times after a warm pass and scales the bandwidth per channel of the slice
    by the channels.
    """
    l2_bytes = int(device.facts.get("l2_cache_bytes") or (4 << 20))
    if device.simulated:
        return [_l2_slice(device, l2_bytes)]
    reps = max(4, int(math.ceil((2 << 30) / (l2_bytes // 4))))
    m = _grid_read(device, mn.L2_BANDWIDTH, "cg", l2_bytes // 4, reps)
    mhz = m.params.get("sm_clock_mhz")
    m.params["gbs"] = m.value
    scale = 1e9 / (mhz * 1e6) if mhz else None
    m.value = m.value * scale if (scale and m.value is not None) else None
    m.samples = [s * scale for s in m.samples] if scale else m.samples
    m.unit = "bytes/clk"
    if scale is None:
        m.valid, m.note = False, "SM clock unknown: cannot convert GB/s to bytes/clk"
    return [m]


def _l2_slice(device: Device, l2_bytes: int, reps: int = 8) -> Measurement:
    chans, k = device.memory_scale, device.memory_slice_channels
    slice_l2 = l2_bytes * k // chans
    per_clk, ok, params = _slice_read(device, "bandwidth.l2", "cg", slice_l2 // 4, reps, warm=True)
    value = per_clk * chans / k
    mhz = float(device.sm_clock_mhz()[0] or math.nan)
    params.update(
        scaling=f"x {chans}{f' / {k}' if k > 1 else ''} memory channels (2 L2 banks each): "
        "banks are independent",
        gbs=value * mhz * 1e6 / 1e9,
        sm_clock_mhz=mhz,
        slice_l2_bytes=slice_l2,
    )
    return Measurement(
        mn.L2_BANDWIDTH, value, "bytes/clk", params, [value], 0.0, ok,
        "" if ok else "checksum mismatch",
    )


def benchmarks(device: Device) -> list[Benchmark]:
    """The bandwidth family's benchmarks, in run order."""
    return [
        ("bandwidth.l1_read", lambda d: [onchip(d, "l1")]),
        ("bandwidth.shared_read", lambda d: [onchip(d, "shared")]),
        (mn.L2_BANDWIDTH, l2),
        ("bandwidth.dram", dram),
    ]
