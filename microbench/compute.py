"""Execution-unit throughput and dependent-issue latency (Accel-Sim Section II-C:
``MaxFlops_*``, ``lat_*``, ``tensor_*``; Section IV, Table IV: unit counts and latencies).

Throughput: every thread runs 8 independent chains of ``x = x * a + b`` (PTX ``fma.rn``
f32/f64/f16x2, ``mad.lo.s32``) with all SMs fully occupied; per-block ``clock64()`` spans
grouped by ``%smid`` give operations per SM clock. Units follow Accel-Sim's printout: an
FMA counts 2 operations, a half2 FMA 4, an integer multiply-add 2.

Latency: one warp runs one dependent chain of 64 x ``n`` operations; cycles per op after
subtracting the clock-read overhead (an empty ``clock64()`` interval).

The operations outside the FMA pipes (SFU, division, min/max, shuffle: latency and
per-warp initiation interval) are :mod:`hilsim.microbench.unit_ops`, source
``compute.ops``.

Tensor cores: ``mma.sync`` inline PTX, shape chosen by ``__CUDA_ARCH__`` (m8n8k4 on
sm_70/72, m16n8k8 on sm_75, m16n8k16 on sm_80+); the kernel reports the flops of one
warp-level mma so host and device agree. FP16 inputs, FP32 accumulate.

Dead-code elimination is prevented by ``asm volatile`` and by writing the results
conditionally (``if (r == magic) out[...] = r``), which never happens but the compiler
cannot prove.

On a simulated device the same kernels run shorter and on a slice: latency chains of
64 x 2 operations on one SM; throughput at full occupancy on
:attr:`~hilsim.microbench.device.Device.active_sms` SMs (flop/clk/SM from the per-SM
spans needs no scaling), ``n`` sized by a pilot launch to about 24,000 cycles per SM; a
rate is valid only when every simulated SM ran blocks. A device without ``mma``
records the tensor measurements as skipped.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hilsim.microbench import unit_ops
from hilsim.microbench.device import MMA, Benchmark, Device, Setup, skip_unless
from hilsim.microbench.program import Program, scalar_arg
from hilsim.microbench.rates import per_sm_rate, per_sm_spans

from hilsim.core import measurement_names as mn
from hilsim.core.measurement import Measurement, measurement_from_stability

# (kernel suffix, C type, asm constraint, PTX instruction, ops per instruction)
TYPES: dict[str, tuple[str, str, str, int]] = {
    "fp32": ("float", "f", "fma.rn.f32", 2),
    "fp64": ("double", "d", "fma.rn.f64", 2),
    "fp16x2": ("unsigned int", "r", "fma.rn.f16x2", 4),
    "int32": ("int", "r", "mad.lo.s32", 2),
}

_RECORD = r"""
__device__ __forceinline__ unsigned int smid_() {
    unsigned int r; asm volatile("mov.u32 %0, %%smid;" : "=r"(r)); return r;
}
"""

_TPUT = r"""
extern "C" __global__ void tput_{key}({ctype} a, {ctype} b, int n, {ctype} magic,
                                       {ctype}* __restrict__ out, long long* __restrict__ rec)
{{
    {ctype} x0 = ({ctype})(threadIdx.x), x1 = x0 + ({ctype})1, x2 = x0 + ({ctype})2,
            x3 = x0 + ({ctype})3, x4 = x0 + ({ctype})4, x5 = x0 + ({ctype})5,
            x6 = x0 + ({ctype})6, x7 = x0 + ({ctype})7;
    __syncthreads();
    long long t0 = clock64();
    for (int i = 0; i < n; ++i) {{
#pragma unroll
        for (int k = 0; k < 16; ++k) {{
            asm volatile("{ins} %0, %0, %1, %2;" : "+{c}"(x0) : "{c}"(a), "{c}"(b));
            asm volatile("{ins} %0, %0, %1, %2;" : "+{c}"(x1) : "{c}"(a), "{c}"(b));
            asm volatile("{ins} %0, %0, %1, %2;" : "+{c}"(x2) : "{c}"(a), "{c}"(b));
            asm volatile("{ins} %0, %0, %1, %2;" : "+{c}"(x3) : "{c}"(a), "{c}"(b));
            asm volatile("{ins} %0, %0, %1, %2;" : "+{c}"(x4) : "{c}"(a), "{c}"(b));
            asm volatile("{ins} %0, %0, %1, %2;" : "+{c}"(x5) : "{c}"(a), "{c}"(b));
            asm volatile("{ins} %0, %0, %1, %2;" : "+{c}"(x6) : "{c}"(a), "{c}"(b));
            asm volatile("{ins} %0, %0, %1, %2;" : "+{c}"(x7) : "{c}"(a), "{c}"(b));
        }}
    }}
    __syncthreads();
    long long t1 = clock64();
    {ctype} r = x0 ^ x1 ^ x2 ^ x3 ^ x4 ^ x5 ^ x6 ^ x7;
    if (r == magic) out[(long long)blockIdx.x * blockDim.x + threadIdx.x] = r;
    if (threadIdx.x == 0) {{
        rec[3 * blockIdx.x] = smid_();
        rec[3 * blockIdx.x + 1] = t0;
        rec[3 * blockIdx.x + 2] = t1;
    }}
}}

extern "C" __global__ void lat_{key}({ctype} a, {ctype} b, int n, {ctype} magic,
                                      {ctype}* __restrict__ out, long long* __restrict__ cyc)
{{
    {ctype} x = ({ctype})(threadIdx.x);
    long long t0 = clock64();
    long long t1 = clock64();
    for (int i = 0; i < n; ++i) {{
#pragma unroll
        for (int k = 0; k < 64; ++k) {{
            asm volatile("{ins} %0, %0, %1, %2;" : "+{c}"(x) : "{c}"(a), "{c}"(b));
        }}
    }}
    long long t2 = clock64();
    if (x == magic) out[threadIdx.x] = x;
    if (threadIdx.x == 0) {{ cyc[0] = t2 - t1; cyc[1] = t1 - t0; }}
}}
"""


def _arith_source() -> str:
    parts = [_RECORD]
    for key, (ctype, c, ins, _ops) in TYPES.items():
        code = _TPUT.format(key=key, ctype=ctype, c=c, ins=ins)
        if ctype in ("float", "double"):  # XOR is for integers: fold floats by addition
            code = code.replace(
                "x0 ^ x1 ^ x2 ^ x3 ^ x4 ^ x5 ^ x6 ^ x7", "x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7"
            )
        parts.append(code)
    return "\n".join(parts)


MMA_SOURCE = (
    _RECORD
    + r"""
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define MMA_FLOPS 4096
#define MMA(d, a, b) asm volatile( \
    "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, " \
    "{%8,%9}, {%0,%1,%2,%3};" \
    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) \
    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]))
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
#define MMA_FLOPS 2048
#define MMA(d, a, b) asm volatile( \
    "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5}, {%6}, " \
    "{%0,%1,%2,%3};" \
    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a[0]), "r"(a[1]), "r"(b[0]))
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
#define MMA_FLOPS 2048
#define MMA(d, a, b) asm volatile( \
    "mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32 {%0,%1,%2,%3,%4,%5,%6,%7}, " \
    "{%8,%9}, {%10,%11}, {%0,%1,%2,%3,%4,%5,%6,%7};" \
    : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), \
      "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]) \
    : "r"(a[0]), "r"(a[1]), "r"(b[0]), "r"(b[1]))
#else
#define MMA_FLOPS 0
#define MMA(d, a, b) do { } while (0)
#endif

// independent accumulator chains per warp: m8n8k4 (sm_70) keeps 8 f32 accumulators per
// thread and chain, and 4 chains take 44 registers (5 of the 8 launched blocks resident);
// 2 chains keep it at <= 32 so the whole grid is resident (tests/test_microbench_sass.py)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 750
#define MMA_CHAINS 2
#else
#define MMA_CHAINS 4
#endif

extern "C" __global__ void mma_tput(unsigned int av, int n, float magic,
                                    float* __restrict__ out, long long* __restrict__ rec,
                                    int* __restrict__ flops_per_mma)
{
    unsigned int a[4] = {av, av, av, av};
    unsigned int b[2] = {av, av};
    float d0[8] = {0, 0, 0, 0, 0, 0, 0, 0}, d1[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    float d2[8] = {0, 0, 0, 0, 0, 0, 0, 0}, d3[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    __syncthreads();
    long long t0 = clock64();
    for (int i = 0; i < n; ++i) {
#pragma unroll
        for (int k = 0; k < 16 / MMA_CHAINS; ++k) {
            MMA(d0, a, b); MMA(d1, a, b);
#if MMA_CHAINS == 4
            MMA(d2, a, b); MMA(d3, a, b);
#endif
        }
    }
    __syncthreads();
    long long t1 = clock64();
    float r = 0.f;
#pragma unroll
    for (int k = 0; k < 8; ++k) r += d0[k] + d1[k] + d2[k] + d3[k];
    if (r == magic) out[(long long)blockIdx.x * blockDim.x + threadIdx.x] = r;
    if (threadIdx.x == 0) {
        rec[3 * blockIdx.x] = smid_();
        rec[3 * blockIdx.x + 1] = t0;
        rec[3 * blockIdx.x + 2] = t1;
        if (blockIdx.x == 0) flops_per_mma[0] = MMA_FLOPS;
    }
}

extern "C" __global__ void mma_lat(unsigned int av, int n, float magic,
                                   float* __restrict__ out, long long* __restrict__ cyc,
                                   int* __restrict__ flops_per_mma)
{
    unsigned int a[4] = {av, av, av, av};
    unsigned int b[2] = {av, av};
    float d[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    long long t0 = clock64();
    long long t1 = clock64();
    for (int i = 0; i < n; ++i) {
#pragma unroll
        for (int k = 0; k < 16; ++k) { MMA(d, a, b); }
    }
    long long t2 = clock64();
    float r = 0.f;
#pragma unroll
    for (int k = 0; k < 8; ++k) r += d[k];
    if (r == magic) out[threadIdx.x] = r;
    if (threadIdx.x == 0) { cyc[0] = t2 - t1; cyc[1] = t1 - t0; flops_per_mma[0] = MMA_FLOPS; }
}
"""
)

SOURCES: dict[str, str] = {"arith": _arith_source(), "mma": MMA_SOURCE, "ops": unit_ops.SOURCE}


#: the (throughput, latency) measurements of each type (fp16x2 measures fp16)
MEASURED: dict[str, tuple[str, str]] = {
    "fp32": (mn.FP32_THROUGHPUT, mn.FP32_LATENCY),
    "fp64": (mn.FP64_THROUGHPUT, mn.FP64_LATENCY),
    "fp16x2": (mn.FP16_THROUGHPUT, mn.FP16_LATENCY),
    "int32": (mn.INT32_THROUGHPUT, mn.INT32_LATENCY),
}


def operands(key: str) -> tuple[Any, Any, Any]:
    """(a, b, magic) kernel arguments that keep the chains finite and never hit magic."""
    if key == "fp32":
        return np.float32(0.999), np.float32(0.001), np.float32(-12345.5)
    if key == "fp64":
        return np.float64(0.999), np.float64(0.001), np.float64(-12345.5)
    if key == "fp16x2":
        a = int(np.array([0.999, 0.999], dtype=np.float16).view(np.uint32)[0])
        b = int(np.array([0.001, 0.001], dtype=np.float16).view(np.uint32)[0])
        return np.uint32(a), np.uint32(b), np.uint32(0xFFFFFFFF)
    return np.int32(3), np.int32(1), np.int32(-7)  # int32: a wrapping affine map


def _arith_args(key: str, n: int, out: str, timing: str) -> list[tuple[str, Any]]:
    a, b, magic = operands(key)
    return [scalar_arg(a), scalar_arg(b), ("i32", n), scalar_arg(magic), ("buf", out),
            ("buf", timing)]


def _tput_program(key: str, n: int, blocks: int, block: int) -> Program:
    program = Program("compute.arith").buf("out", 8 * blocks * block).buf("rec", 8 * 3 * blocks)
    program.launch(f"tput_{key}", blocks, block, _arith_args(key, n, "out", "rec"),
                   timing="event")
    return program.read("rec")


def throughput(device: Device, key: str, target: float | None = None) -> Measurement:
    """Operations per SM clock for one type (all active SMs, full occupancy).

    Every thread runs ``n`` x 16 x 8 independent multiply-adds; per-block ``clock64``
    spans grouped by ``%smid`` give the rate. ``n`` is sized by a pilot launch: to
    ``target`` ms on a GPU (5), ``target`` cycles per SM on a simulator (24,000; the
    pilot is kept when it is already half as long).
    """
    ops = TYPES[key][3]
    block = 256
    blocks = device.active_sms * max(1, device.threads_per_sm // block)
    bench = f"compute.{key}.throughput"
    if device.simulated:
        return _simulated_throughput(device, key, 24000 if target is None else target,
                                     blocks, block)
    n = 16
    ms = device.run(bench, _tput_program(key, n, blocks, block), Setup.SM_SLICE).ms[0]
    n = int(max(16, min(1 << 20, n * (target or 5.0) / max(ms, 1e-3))))
    program = _tput_program(key, n, blocks, block)
    per_block = float(n * 16 * 8 * block * ops)

    def once() -> float:
        rec = device.run(bench, program, Setup.SM_SLICE).array("rec", np.int64)
        return per_sm_rate(rec.reshape(-1, 3), per_block)[0]

    stab = device.sample(once, 8, 0.03, 3)
    params = {
        "instruction": TYPES[key][2],
        "ops_per_instruction": ops,
        "chains_per_thread": 8,
        "blocks": blocks,
        "threads_per_block": block,
        "iterations": n,
    }
    return measurement_from_stability(
        MEASURED[key][0], stab, "flop/clk/SM", params
    )


def _simulated_throughput(
    device: Device, key: str, target_cycles: float, blocks: int, block: int
) -> Measurement:
    ops = TYPES[key][3]

    def pilot(n: int) -> tuple[float, int, float]:
        program = _tput_program(key, n, blocks, block)
        res = device.run(f"compute.{key}.throughput", program, Setup.SM_SLICE)
        rec = res.array("rec", np.int64).reshape(-1, 3)
        value, seen = per_sm_rate(rec, float(n * 16 * 8 * block * ops))
        return float(value), seen, float(max(per_sm_spans(rec)))

    n = 1
    value, seen, span = pilot(n)
    if np.isfinite(value) and 0 < span < target_cycles / 2:
        n = int(min(16, max(2, round(target_cycles / span))))
        value, seen, span = pilot(n)
    sms = device.active_sms
    ok = seen == sms and np.isfinite(value)
    params = {
        **device.slice_params(),
        "instruction": TYPES[key][2],
        "ops_per_instruction": ops,
        "chains_per_thread": 8,
        "blocks": blocks,
        "threads_per_block": block,
        "iterations": n,
        "span_cycles": span,
        "sms_seen": seen,
        "scaling": "none (per-SM rate)",
    }
    return Measurement(
        MEASURED[key][0],
        value if ok else None,
        "flop/clk/SM",
        params,
        [value] if ok else [],
        0.0,
        bool(ok),
        "" if ok else f"blocks ran on {seen} SMs, expected {sms}",
    )


def latency(device: Device, key: str, n: int | None = None) -> Measurement:
    """Dependent-issue latency of one type: one warp, one chain of 64 x ``n`` operations
    (``n``: 256 on a GPU, 2 on a simulator)."""
    if n is None:
        n = 2 if device.simulated else 256
    program = Program("compute.arith").buf("out", 8 * 32).buf("cyc", 16)
    program.launch(f"lat_{key}", 1, 32, _arith_args(key, n, "out", "cyc"))
    program.read("cyc")

    def once() -> float:
        res = device.run(f"compute.{key}", program, Setup.ONE_SM)
        body, overhead = (int(v) for v in res.array("cyc", np.int64)[:2])
        return (body - overhead) / (64 * n)

    stab = device.sample(once, 8, 0.03, 3)
    params = {"instruction": TYPES[key][2], "chain_length": 64 * n, **device.kernel_clock_params}
    if not device.simulated:
        return measurement_from_stability(
            MEASURED[key][1], stab, "cycles", params
        )
    ok = stab.value > 0
    return measurement_from_stability(
        MEASURED[key][1], stab, "cycles", params, ok,
        "" if ok else "non-positive latency",
    )


def tensor(device: Device) -> list[Measurement]:
    """Tensor-core ``mma.sync`` throughput (FMA/clk/SM) and latency (cycles per mma)."""
    units = [(mn.TENSOR_THROUGHPUT, "FMA/clk/SM"), (mn.TENSOR_LATENCY, "cycles")]
    skip = skip_unless(device, MMA, units)
    if skip is not None:
        return skip
    major, minor = device.cc
    if major < 7:
        return [
            Measurement(
                name,
                None,
                unit,
                valid=False,
                note=f"no tensor cores on compute capability {major}.{minor}",
            )
            for name, unit in units
        ]
    av = ("u32", int(np.array([0.01, 0.01], dtype=np.float16).view(np.uint32)[0]))
    magic = ("f32", -12345.5)
    block = 256
    blocks = device.active_sms * max(1, device.threads_per_sm // block)

    def tput_program(n: int, read: str) -> Program:
        program = Program("compute.mma").buf("flops", 4).buf("rec", 8 * 3 * blocks)
        program.buf("out", 4 * blocks * block)
        args = [av, ("i32", n), magic, ("buf", "out"), ("buf", "rec"), ("buf", "flops")]
        program.launch("mma_tput", blocks, block, args, timing="event")
        return program.read(read)

    first = device.run("compute.mma", tput_program(64, "flops"), Setup.SM_SLICE)
    n = int(max(16, min(1 << 20, 64 * 5.0 / max(first.ms[0], 1e-3))))
    flops_per_mma = int(first.array("flops", np.int32)[0])
    warps = block // 32
    per_block = float(n * 16 * warps * flops_per_mma) / 2.0  # FMAs (2 flops each)
    program = tput_program(n, "rec")

    def once() -> float:
        rec = device.run("compute.mma", program, Setup.SM_SLICE).array("rec", np.int64)
        return per_sm_rate(rec.reshape(-1, 3), per_block)[0]

    stab = device.sample(once, 8, 0.03, 3)
    shape = {4096: "m16n8k16", 2048: "m16n8k8" if (major, minor) >= (7, 5) else "m8n8k4"}.get(
        flops_per_mma, "none"
    )
    params = {
        "shape": shape,
        "types": "f16 x f16 + f32",
        "flops_per_warp_mma": flops_per_mma,
        "chains_per_warp": 4,
        "blocks": blocks,
        "threads_per_block": block,
    }
    valid = flops_per_mma > 0
    tput = measurement_from_stability(
        mn.TENSOR_THROUGHPUT,
        stab,
        "FMA/clk/SM",
        params,
        valid,
        "" if valid else "kernel compiled without mma",
    )

    iters = 64
    lat_program = Program("compute.mma").buf("flops", 4).buf("cyc", 16).buf("out", 4 * 32)
    args = [av, ("i32", iters), magic, ("buf", "out"), ("buf", "cyc"), ("buf", "flops")]
    lat_program.launch("mma_lat", 1, 32, args)
    lat_program.read("cyc")

    def once_lat() -> float:
        res = device.run("compute.mma", lat_program, Setup.ONE_SM)
        body, overhead = (int(v) for v in res.array("cyc", np.int64)[:2])
        return (body - overhead) / (16 * iters)

    stab_lat = device.sample(once_lat, 8, 0.03, 3)
    lat = measurement_from_stability(
        mn.TENSOR_LATENCY,
        stab_lat,
        "cycles",
        {"shape": shape, "chain_length": 16 * iters},
        valid,
    )
    return [tput, lat]


def benchmarks(device: Device) -> list[Benchmark]:
    """The compute family's benchmarks, in run order."""
    out: list[Benchmark] = [
        (f"compute.{key}", lambda d, key=key: [throughput(d, key), latency(d, key)])
        for key in TYPES
    ]
    out.append(("compute.mma", tensor))
    out.extend(unit_ops.benchmarks(device))
    return out
