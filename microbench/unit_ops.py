"""Latency and initiation interval of single operations beside the multiply-add chains of
:mod:`hilsim.microbench.compute`: FP32 add and multiply, the special-function unit,
integer and FP32 division, integer, FP32 and FP64 min/max, warp shuffle, FP64 add and
multiply (Accel-Sim, Khairy et al., ISCA 2020, Section II-C: one
microbenchmark per configured latency; GPGPU-Sim's ``-ptx_opcode_latency_{int,fp,dp,sfu}``
and ``-ptx_opcode_initiation_{int,dp,sfu}`` lists, whose entries are
``<ADD,MAX,MUL,MAD,DIV,SHFL>`` for int, ``<ADD,MAX,MUL,MAD,DIV>`` for fp and dp).

Latency: one warp runs one dependent chain of the operation. Initiation:
:data:`INITIATION_WARPS` warps on one scheduler each run :data:`INDEPENDENT` independent
chains of it, so the scheduler issues as fast as the unit accepts its instructions (on
sm_70+ and in GPGPU-Sim's sub-core model warp ``w`` of a block runs on scheduler
``w % 4``, which feeds one of the SM's four units; the block has :data:`SCHEDULERS` x
:data:`INITIATION_WARPS` warps and those not on scheduler 0 return at once). One warp is
not enough on silicon: a warp has 6 scoreboards for its variable-latency results, so
ptxas makes each of the 32 chains' next operation wait on a scoreboard whose last setter
issued ~24 cycles earlier (and drains them at the loop's back edge); a unit slower than
that would read ``interval + (latency - 24) / 32``. While one warp waits, the others
issue: ``tests/test_microbench_sass.py`` replays each kernel's scoreboards
(:func:`hilsim.microbench.sass.issue_cycles`) and requires the same cycles per operation
on a unit of latency :data:`COVERED_LATENCY` as on one of no latency. Each working warp
stamps its own start and stop clocks; the span is the earliest start to the latest stop.

Both are slopes: the same kernel is launched with ``n1`` and ``n2`` loop iterations and
the value is the difference of the two ``clock64()`` spans over the difference in
operations, so what one launch pays once (the clock reads, the first iteration's
instruction-cache misses, the last operation's drain) cancels.

What each chain is (checked in SASS on sm_70/75/86/90 by ``tests/test_microbench_sass.py``):

* ``fp_add`` / ``fp_mul``: ``x = x + a`` in ``add.rn.f32`` -> ``FADD``, ``x = x * a`` in
  ``mul.rn.f32`` -> ``FMUL`` (``a`` a kernel argument, 1.0; ``.rn`` keeps ptxas from
  contracting or folding): the ADD and MUL entries of the fp list, which share the FMA
  pipe with ``fma`` on sm_70+. Latency only. The integer ADD and MUL have no probe:
  ptxas reassociates a chain of ``add.s32`` by a loop-invariant operand (64 adds become
  35 ``IMAD`` + 29 ``LEA``) and folds ``mul.lo.s32`` pairs into one multiply by ``a*a``
  on sm_70-86; ``mul.lo.s32`` is ``IMAD``, the MAD chain's instruction.
* ``sfu``: ``x = ex2.approx.ftz.f32(x)`` -> ``MUFU.EX2`` (the value reaches +inf after a
  few steps; MUFU's latency does not depend on it). ``rcp`` would be folded: ptxas
  cancels ``rcp(rcp(x))``.
* ``int_div``: ``x = c / x`` in ``div.u32``, the chain through the *divisor*: on sm_70+
  a PTX ``div.u32`` is a ~20-instruction sequence (``I2F.U32.RP``, ``MUFU.RCP``,
  ``F2I``, ``IMAD.HI``, corrections), and with the divisor on the chain none of it is
  loop-invariant. The value is cycles per PTX ``div.u32``, which is what GPGPU-Sim's
  DIV entry times as one instruction. ``c = 2^32 - 1`` and ``x`` near 65537 keep ``x``
  oscillating between ~65535 and ~65537 (never 0).
* ``fp_div``: ``x = c / x`` in ``div.rn.f32`` -> ``MUFU.RCP``, ``FCHK`` and five
  ``FFMA`` on the fast path (the slow-path call is never taken: ``x`` oscillates between
  ``x0`` and ``1/x0``).
* ``int_max`` / ``fp_max``: alternating ``max`` and ``min`` (a clamp): two ``max`` in a
  row with the same direction fuse into one three-input ``VIMNMX3`` on sm_90, halving
  the chain. sm_75/86 run ``IMNMX``, sm_90 ``VIMNMX``; sm_70 (ptxas 12) emits
  ``ISETP`` + ``SEL`` for ``max.s32``, so there the value is that pair per PTX
  instruction. The fp chain is ``FMNMX`` everywhere.
* ``shfl``: ``x = shfl.sync.bfly.b32(x, 1)`` written without the predicate destination
  (``d`` only, not ``d|p``): GPGPU-Sim reads 0 from the ``d|p`` form nvcc emits for
  ``__shfl_xor_sync``, the ``d`` form runs (and times) there as on a GPU.
* ``dp_add`` / ``dp_mul``: ``x = x + a`` in ``add.f64`` -> ``DADD``, ``x = x * a`` in
  ``mul.rn.f64`` -> ``DMUL`` (``a`` a kernel argument, 1.0: nothing is known to fold;
  the product stays finite and normal). The ADD and MUL entries of the dp lists.
* ``dp_max``: alternating ``max.f64`` and ``min.f64`` (a clamp, as ``fp_max``). There is
  no ``DMNMX`` on sm_70-90: ptxas emits ``DSETP.MAX``/``DSETP.MIN`` and a ``SEL`` +
  ``FSEL`` pair (with a ``LOP3`` for the NaN case) per PTX instruction, so the value is
  that sequence per PTX instruction, which is what GPGPU-Sim's dp MAX entry times as
  one instruction (as ``int_div``). Its initiation kernel runs 6 chains (unrolled 4
  times), one pass of ``max`` over the chains, then one of ``min`` (a step's ``min``
  waits for its ``max`` on an in-order pipeline), not :data:`INDEPENDENT`: each PTX
  instruction sets two predicates, and from 8 chains on ptxas 12 saves predicates in
  registers on sm_90 (``P2R``/``R2P``; at 32 chains on every target, as ``LOP3`` bits), a
  serial chain through every step; 6 x the interval still covers the latency of the
  simulated cards' dp MAX entries (19 at interval 4 on SM75_RTX2060_S).

On a simulated device all probes are one program (:func:`simulated`): latency at 2 and 4
iterations of 64 operations, initiation at 4 and 8 iterations of :data:`INDEPENDENT` x
``U`` operations per warp, on one SM and one memory channel (nothing between the clock reads
touches memory; what the launch's loads and stores cost outside them cancels in the
slope).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
from hilsim.microbench.device import Benchmark, Device, Setup
from hilsim.microbench.program import Program, scalar_arg

from hilsim.core import measurement_names as mn
from hilsim.core.measurement import Measurement, Stability, measurement_from_stability

#: independent chains per warp of an initiation kernel: enough to cover a latency of
#: INDEPENDENT x the initiation interval where results are tracked per register
#: (GPGPU-Sim: its 145-cycle QV100 DIV at 8 per issue needs ~20)
INDEPENDENT = 32
#: warps of an initiation kernel on the one scheduler it measures (silicon tracks a
#: warp's variable-latency results on 6 scoreboards: the other warps issue while one waits)
INITIATION_WARPS = 4
#: schedulers per SM: warp ``w`` runs on scheduler ``w % SCHEDULERS`` (sm_70-90, and
#: GPGPU-Sim's ``shader_core_ctx``: ``schedulers[i % gpgpu_num_sched_per_core]``); a card
#: with 1 or 2 schedulers still puts every working warp on one
SCHEDULERS = 4
#: the unit latency an initiation kernel must hide (the SASS tier's scoreboard replay):
#: twice the largest of these units' latencies in the shipped configs (SHFL 32, TITAN V)
COVERED_LATENCY = 64
#: dependent operations per iteration of a latency kernel
CHAIN_OPS = 64


@dataclass(frozen=True)
class UnitOp:
    """One operation: its C type, one chain step and what the measurements are named."""

    key: str
    ctype: str
    step: str  # C statement(s) advancing the variable X; A and B are the scalar arguments
    ptx: str  # the PTX instruction(s) of one step
    ops_per_step: int
    latency_name: str
    initiation_name: str | None
    initiation_unroll: int  # steps per chain per iteration of the initiation kernel
    a: Any  # the kernel's scalar arguments (numpy scalars of the C type)
    b: Any
    magic: Any
    init: str  # the initial value of chain j (C expression in j)
    #: independent chains of the initiation kernel
    chains: int = 0  # 0: INDEPENDENT

    @property
    def statements(self) -> list[str]:
        """The step's PTX statements (one ``asm volatile(...);`` each)."""
        return [t for t in re.split(r"(?<=\);)\s+(?=asm)", self.step.strip()) if t]

    @property
    def independent(self) -> int:
        """Independent chains of the initiation kernel."""
        return self.chains or INDEPENDENT


def _f32(v: float) -> np.float32:
    return np.float32(v)


OPS: dict[str, UnitOp] = {
    op.key: op
    for op in (
        UnitOp("sfu", "float", 'asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(X));',
               "ex2.approx.ftz.f32", 1, mn.SFU_LATENCY, mn.SFU_INITIATION, 2,
               _f32(-1.0), _f32(0.0), _f32(-12345.5), "A + 0.001f * (float)(threadIdx.x + j)"),
        UnitOp("int_div", "unsigned int",
               'asm volatile("div.u32 %0, %1, %0;" : "+r"(X) : "r"(A));',
               "div.u32 (x = c / x)", 1, mn.INT_DIV_LATENCY, mn.INT_DIV_INITIATION, 1,
               np.uint32(0xFFFFFFFF), np.uint32(65537), np.uint32(1),
               "B + threadIdx.x + j"),
        UnitOp("fp_div", "float", 'asm volatile("div.rn.f32 %0, %1, %0;" : "+f"(X) : "f"(A));',
               "div.rn.f32 (x = c / x)", 1, mn.FP_DIV_LATENCY, None, 1,
               _f32(1.0), _f32(3.0), _f32(-12345.5), "B + (float)(threadIdx.x + j)"),
        UnitOp("int_max", "int",
               'asm volatile("max.s32 %0, %0, %1;" : "+r"(X) : "r"(A)); '
               'asm volatile("min.s32 %0, %0, %1;" : "+r"(X) : "r"(B));',
               "max.s32 + min.s32", 2, mn.INT_MAX_LATENCY, None, 1,
               np.int32(3), np.int32(1 << 20), np.int32(-7), "(int)(threadIdx.x + j)"),
        UnitOp("fp_max", "float",
               'asm volatile("max.f32 %0, %0, %1;" : "+f"(X) : "f"(A)); '
               'asm volatile("min.f32 %0, %0, %1;" : "+f"(X) : "f"(B));',
               "max.f32 + min.f32", 2, mn.FP_MAX_LATENCY, None, 1,
               _f32(0.5), _f32(1.0e6), _f32(-12345.5), "(float)(threadIdx.x + j)"),
        UnitOp("shfl", "unsigned int",
               'asm volatile("shfl.sync.bfly.b32 %0, %0, 1, 31, -1;" : "+r"(X));',
               "shfl.sync.bfly.b32 (d form)", 1, mn.SHFL_LATENCY, mn.SHFL_INITIATION, 4,
               np.uint32(12345), np.uint32(0), np.uint32(0xFFFFFFFF), "A + threadIdx.x + 32u * j"),
        UnitOp("dp_add", "double", 'asm volatile("add.f64 %0, %0, %1;" : "+d"(X) : "d"(A));',
               "add.f64", 1, mn.DP_ADD_LATENCY, mn.DP_ADD_INITIATION, 1,
               np.float64(1.0), np.float64(0.0), np.float64(-12345.5),
               "B + (double)(threadIdx.x + j)"),
        UnitOp("dp_mul", "double",
               'asm volatile("mul.rn.f64 %0, %0, %1;" : "+d"(X) : "d"(A));',
               "mul.rn.f64", 1, mn.DP_MUL_LATENCY, mn.DP_MUL_INITIATION, 1,
               np.float64(1.0), np.float64(0.0), np.float64(-12345.5),
               "1.0 + (double)(threadIdx.x + j)"),
        UnitOp("dp_max", "double",
               'asm volatile("max.f64 %0, %0, %1;" : "+d"(X) : "d"(A)); '
               'asm volatile("min.f64 %0, %0, %1;" : "+d"(X) : "d"(B));',
               "max.f64 + min.f64", 2, mn.DP_MAX_LATENCY, mn.DP_MAX_INITIATION, 4,
               np.float64(0.5), np.float64(1.0e6), np.float64(-12345.5),
               "(double)(threadIdx.x + j)", chains=6),
        UnitOp("fp_add", "float", 'asm volatile("add.rn.f32 %0, %0, %1;" : "+f"(X) : "f"(A));',
               "add.rn.f32", 1, mn.FP_ADD_LATENCY, None, 1,
               _f32(1.0), _f32(0.0), _f32(-12345.5), "B + (float)(threadIdx.x + j)"),
        UnitOp("fp_mul", "float", 'asm volatile("mul.rn.f32 %0, %0, %1;" : "+f"(X) : "f"(A));',
               "mul.rn.f32", 1, mn.FP_MUL_LATENCY, None, 1,
               _f32(1.0), _f32(0.0), _f32(-12345.5), "1.0f + (float)(threadIdx.x + j)"),
    )
}

_KERNELS = r"""
extern "C" __global__ void lat_{key}({t} A, {t} B, int n, {t} magic,
                                      {t}* __restrict__ out, long long* __restrict__ cyc)
{{
    const unsigned int j = 0;
    {t} x = {init};
    long long t0 = clock64();
    long long t1 = clock64();
    for (int i = 0; i < n; ++i) {{
#pragma unroll
        for (int k = 0; k < {steps}; ++k) {{ {step_x} }}
    }}
    long long t2 = clock64();
    if (x == magic) out[threadIdx.x] = x;
    if (threadIdx.x == 0) {{ cyc[0] = t2 - t1; cyc[1] = t1 - t0; }}
}}
"""

_INIT_KERNEL = r"""
extern "C" __global__ void init_{key}({t} A, {t} B, int n, {t} magic,
                                       {t}* __restrict__ out, long long* __restrict__ cyc)
{{
    const unsigned int warp = threadIdx.x / 32u;
    if (warp % {schedulers}u != 0u) return;  // the working warps share scheduler 0
    {t} x[{chains}];
#pragma unroll
    for (unsigned int j = 0; j < {chains}; ++j) x[j] = {init};
    long long t1 = clock64();
    for (int i = 0; i < n; ++i) {{
#pragma unroll
        for (int u = 0; u < {unroll}; ++u) {{{steps_xj}
        }}
    }}
    // the working warps stop together: one done early would otherwise run the code
    // after the loop (the sum below) on the unit a slower warp still needs
    asm volatile("bar.sync 1, {threads};" ::: "memory");
    long long t2 = clock64();
    {t} r = x[0];
#pragma unroll
    for (int j = 1; j < {chains}; ++j) r = r + x[j];
    if (r == magic) out[threadIdx.x] = r;
    if (threadIdx.x % 32u == 0u) {{
        cyc[2u * (warp / {schedulers}u)] = t1;
        cyc[2u * (warp / {schedulers}u) + 1u] = t2;
    }}
}}
"""


def _source() -> str:
    parts = []
    for op in OPS.values():
        steps = CHAIN_OPS // op.ops_per_step
        parts.append(_KERNELS.format(key=op.key, t=op.ctype, init=op.init, steps=steps,
                                     step_x=op.step.replace("X", "x")))
        if op.initiation_name:
            # one pass over the chains per statement of a step: a step's second
            # operation (min after max) waits for its first on an in-order pipeline
            steps = "".join(
                f"\n#pragma unroll\n            for (int j = 0; j < {op.independent}; ++j) "
                f"{{ {stmt.replace('X', 'x[j]')} }}" for stmt in op.statements)
            parts.append(_INIT_KERNEL.format(key=op.key, t=op.ctype, init=op.init,
                                             chains=op.independent, schedulers=SCHEDULERS,
                                             threads=32 * INITIATION_WARPS,
                                             unroll=op.initiation_unroll, steps_xj=steps))
    return "".join(parts)


SOURCE = _source()


def ops_per_iteration(op: UnitOp, kind: str) -> int:
    """PTX operations one loop iteration of ``lat_{key}`` (``kind`` "latency") or
    ``init_{key}`` ("initiation") executes per thread."""
    if kind == "latency":
        return CHAIN_OPS
    return op.independent * op.initiation_unroll * op.ops_per_step


def working_warps(kind: str) -> int:
    """Warps that run the chains: 1 (latency), :data:`INITIATION_WARPS` (initiation)."""
    return 1 if kind == "latency" else INITIATION_WARPS


def threads_per_block(kind: str) -> int:
    """The block of a probe: one warp, or :data:`SCHEDULERS` x :data:`INITIATION_WARPS`
    warps of which every :data:`SCHEDULERS`-th works (one scheduler's)."""
    return 32 if kind == "latency" else 32 * SCHEDULERS * INITIATION_WARPS


def _args(op: UnitOp, n: int, out: str, cyc: str) -> list[tuple[str, Any]]:
    return [scalar_arg(op.a), scalar_arg(op.b), ("i32", n), scalar_arg(op.magic),
            ("buf", out), ("buf", cyc)]


def add_probe(program: Program, op: UnitOp, kind: str, n: int, tag: str) -> str:
    """One launch of ``lat_``/``init_{key}`` with ``n`` iterations; returns the buffer its
    clocks are read back from (:func:`span`)."""
    kernel = f"{'lat' if kind == 'latency' else 'init'}_{op.key}"
    out, cyc = f"out_{tag}", f"cyc_{tag}"
    block = threads_per_block(kind)
    program.buf(out, 8 * block).buf(cyc, 16 * working_warps(kind))
    program.launch(kernel, 1, block, _args(op, n, out, cyc))
    program.read(cyc)
    return cyc


def span(cyc: np.ndarray, kind: str) -> int:
    """Cycles of one launch: the latency kernel's timed interval (``cyc[0]``); the
    initiation kernel's earliest start to latest stop over its working warps (each
    stamps ``start, stop`` at ``cyc[2k], cyc[2k + 1]``)."""
    if kind == "latency":
        return int(cyc[0])
    stamps = np.asarray(cyc[: 2 * working_warps(kind)], dtype=np.int64).reshape(-1, 2)
    return int(stamps[:, 1].max() - stamps[:, 0].min())


def slope(cycles_short: int, cycles_long: int, ops_short: int, ops_long: int) -> float:
    """Cycles per operation from two launches of one kernel: what one launch pays once
    (clock reads, cold instruction cache, the last operation's drain) cancels."""
    return (cycles_long - cycles_short) / (ops_long - ops_short)


def _params(op: UnitOp, kind: str, n1: int, n2: int, device: Device,
            intervals: list[int]) -> dict[str, Any]:
    per = ops_per_iteration(op, kind) * working_warps(kind)
    params: dict[str, Any] = {
        "instruction": op.ptx,
        "kernel": f"{'lat' if kind == 'latency' else 'init'}_{op.key}",
        "warps": working_warps(kind),
        "iterations": [n1, n2],
        "operations": [n1 * per, n2 * per],
        "method": "slope of two launches (cycles difference / operations difference)",
        "clock_intervals_cycles": intervals,
        **device.kernel_clock_params,
    }
    if kind == "initiation":
        params["independent_chains"] = op.independent
        params["warps_on_one_scheduler"] = INITIATION_WARPS
        params["threads_per_block"] = threads_per_block(kind)
    else:
        params["chain_length"] = [n1 * per, n2 * per]
    return params


def _measurement(name: str, value: float, params: dict[str, Any],
                 stab: Stability | None = None) -> Measurement:
    ok = bool(np.isfinite(value) and value > 0)
    note = "" if ok else "non-positive slope: the longer launch was not slower"
    if stab is not None:
        return measurement_from_stability(name, stab, "cycles", params, ok, note)
    return Measurement(name, value if ok else None, "cycles", params,
                       [value] if ok else [], 0.0, ok, note)


def probe(device: Device, op: UnitOp, kind: str, n1: int = 64, n2: int = 128) -> Measurement:
    """One probe on a GPU: the two launches in one program, repeated until stable."""
    program = Program("compute.ops")
    short = add_probe(program, op, kind, n1, "short")
    long_ = add_probe(program, op, kind, n2, "long")
    per = ops_per_iteration(op, kind) * working_warps(kind)
    seen: list[int] = []

    def once() -> float:
        res = device.run(f"compute.ops.{op.key}.{kind}", program, Setup.ONE_SM_ONE_CHANNEL)
        a, b = (span(res.array(c, np.int64), kind) for c in (short, long_))
        seen[:] = [a, b]
        return slope(a, b, n1 * per, n2 * per)

    stab = device.sample(once, 8, 0.03, 3)
    name = op.latency_name if kind == "latency" else op.initiation_name
    assert name is not None
    return _measurement(name, float(stab.value), _params(op, kind, n1, n2, device, seen), stab)


#: iterations of the two launches on a simulated device (latency, initiation): multiples
#: of the outer loop's unrolling (NVVM unrolls it 2x, 4x for the small initiation bodies),
#: so both launches run the unrolled loop and neither its remainder. Launches on two paths
#: do not cancel: at 1 and 2 iterations the chain's initialising ``add.f64`` overlapped
#: each path's prologue differently (its latency leaked into the dp MUL slope); at 2 and 4
#: the ``div.u32`` initiation read its interval + 1.7
SIM_ITERATIONS = {"latency": (2, 4), "initiation": (4, 8)}


def simulated(
    device: Device, kinds: tuple[str, ...] = ("latency", "initiation")
) -> list[Measurement]:
    """Every probe of ``kinds`` as one program on a simulated device (one run, two
    launches each)."""
    program = Program("compute.ops")
    probes = []
    for op in OPS.values():
        for kind in ("latency", "initiation"):
            if kind not in kinds or (kind == "initiation" and op.initiation_name is None):
                continue
            n1, n2 = SIM_ITERATIONS[kind]
            bufs = (add_probe(program, op, kind, n1, f"{op.key}_{kind}_1"),
                    add_probe(program, op, kind, n2, f"{op.key}_{kind}_2"))
            probes.append((op, kind, n1, n2, bufs))
    res = device.run("compute.ops", program, Setup.ONE_SM_ONE_CHANNEL)
    out = []
    for op, kind, n1, n2, (b1, b2) in probes:
        a, b = (span(res.array(c, np.int64), kind) for c in (b1, b2))
        per = ops_per_iteration(op, kind) * working_warps(kind)
        name = op.latency_name if kind == "latency" else op.initiation_name
        assert name is not None
        params = _params(op, kind, n1, n2, device, [a, b])
        out.append(_measurement(name, slope(a, b, n1 * per, n2 * per), params))
    return out


def measurement_names() -> list[str]:
    """Every name the probes write, in run order."""
    names = []
    for op in OPS.values():
        names.append(op.latency_name)
        if op.initiation_name:
            names.append(op.initiation_name)
    return names


def benchmarks(device: Device) -> list[Benchmark]:
    """The probes as benchmarks: one program on a simulated device, one per probe on a GPU."""
    if device.simulated:
        return [("compute.ops", simulated)]
    out: list[Benchmark] = []
    for op in OPS.values():
        out.append((op.latency_name, lambda d, op=op: [probe(d, op, "latency")]))
        if op.initiation_name:
            out.append((op.initiation_name, lambda d, op=op: [probe(d, op, "initiation")]))
    return out
