"""Names and units of the microbenchmark measurements the tuner understands.

This module is the contract between ``microbench/`` (which writes ``microbench.json``,
schema ``hilsim.microbench/1``) and ``hilsim.simmodel.tuner`` (which reads it). A measurement
row is ``{name, value, unit, params, samples, spread}``; ``name`` is one of the
constants below and ``unit`` must equal its declared unit exactly.

The quantities are *hardware* quantities as the Accel-Sim microbenchmark suite
measures them (Accel-Sim paper, Section II-C): latencies are pointer-chase or
dependent-chain latencies in SM clock cycles as read with ``%clock``; throughputs
are per SM per SM clock. The tuner turns them into simulator options (see
``docs/tuner.md``).
"""

from __future__ import annotations

from dataclasses import dataclass

MICROBENCH_SCHEMA = "hilsim.microbench/1"


@dataclass(frozen=True)
class MeasurementSpec:
    """One measurement name: its unit and what exactly is measured."""

    name: str
    unit: str
    description: str


# --- memory hierarchy latencies (pointer chasing, one warp, SM clock cycles) ---------
L1_HIT_LATENCY = "l1_hit_latency"
L2_HIT_LATENCY = "l2_hit_latency"
DRAM_LATENCY = "dram_latency"
SHARED_LATENCY = "shared_latency"
ATOMIC_LATENCY = "atomic_latency"
# --- geometry --------------------------------------------------------------------
L1_CAPACITY_BYTES = "l1_capacity_bytes"
L2_CAPACITY_BYTES = "l2_capacity_bytes"
L1_LINE_BYTES = "l1_line_bytes"
L1_SECTOR_BYTES = "l1_sector_bytes"
L2_LINE_BYTES = "l2_line_bytes"
L2_SECTOR_BYTES = "l2_sector_bytes"
# --- bandwidths --------------------------------------------------------------------
DRAM_COPY_BANDWIDTH = "dram_copy_bandwidth"
DRAM_READ_BANDWIDTH = "dram_read_bandwidth"
L2_BANDWIDTH = "l2_bandwidth"
L1_BANDWIDTH = "l1_bandwidth"
SHARED_BANDWIDTH = "shared_bandwidth"
# --- execution units -------------------------------------------------------------
FP32_THROUGHPUT = "fp32_throughput"
FP32_LATENCY = "fp32_latency"
FP16_THROUGHPUT = "fp16_throughput"
FP16_LATENCY = "fp16_latency"
FP64_THROUGHPUT = "fp64_throughput"
FP64_LATENCY = "fp64_latency"
INT32_THROUGHPUT = "int32_throughput"
INT32_LATENCY = "int32_latency"
FP_ADD_LATENCY = "fp_add_latency"
FP_MUL_LATENCY = "fp_mul_latency"
SFU_THROUGHPUT = "sfu_throughput"
SFU_LATENCY = "sfu_latency"
SFU_INITIATION = "sfu_initiation"
INT_DIV_LATENCY = "int_div_latency"
INT_DIV_INITIATION = "int_div_initiation"
FP_DIV_LATENCY = "fp_div_latency"
INT_MAX_LATENCY = "int_max_latency"
FP_MAX_LATENCY = "fp_max_latency"
SHFL_LATENCY = "shfl_latency"
SHFL_INITIATION = "shfl_initiation"
DP_ADD_LATENCY = "dp_add_latency"
DP_ADD_INITIATION = "dp_add_initiation"
DP_MUL_LATENCY = "dp_mul_latency"
DP_MUL_INITIATION = "dp_mul_initiation"
DP_MAX_LATENCY = "dp_max_latency"
DP_MAX_INITIATION = "dp_max_initiation"
TENSOR_THROUGHPUT = "tensor_throughput"
TENSOR_LATENCY = "tensor_latency"
# --- system ----------------------------------------------------------------------
LAUNCH_LATENCY_US = "launch_latency_us"
SM_CLOCK_MHZ = "sm_clock_mhz"

_FLOP = "flop/clk/SM"
_FLOP_NOTE = "(an FMA counts 2; Accel-Sim MaxFlops_* convention)"

#: probes that time the issue of a multi-instruction SASS sequence, not one unit (sm_70+:
#: ``div.u32`` is ~18 instructions, ``max.f64`` a DSETP/SEL/move sequence): the per-PTX
#: cost of a warp that runs nothing else; no unit's initiation interval is set from them
SEQUENCE_COSTS = frozenset({INT_DIV_INITIATION, DP_MAX_INITIATION})


MEASUREMENTS: dict[str, MeasurementSpec] = {
    spec.name: spec
    for spec in (
        MeasurementSpec(L1_HIT_LATENCY, "cycles", "L1 data-cache hit, pointer chase (l1_lat)"),
        MeasurementSpec(L2_HIT_LATENCY, "cycles", "L2 hit with L1 bypassed (.cg), pointer chase"),
        MeasurementSpec(DRAM_LATENCY, "cycles",
                        "DRAM access, L1 bypassed (.cg) and L2 flushed, 4 KiB-stride chase; "
                        "in cycles of sm_clock_mhz (converted from the chase's own one-warp "
                        "clock when they differ, params.clock_conversion)"),
        MeasurementSpec(SHARED_LATENCY, "cycles", "shared-memory load, pointer chase"),
        MeasurementSpec(ATOMIC_LATENCY, "cycles", "dependent global atomicAdd int32"),
        MeasurementSpec(L1_CAPACITY_BYTES, "bytes", "largest L1 data capacity (no shared)"),
        MeasurementSpec(L2_CAPACITY_BYTES, "bytes", "total L2 capacity"),
        MeasurementSpec(L1_LINE_BYTES, "bytes", "L1 cache line (tag) size"),
        MeasurementSpec(L1_SECTOR_BYTES, "bytes", "L1 sector (fill granularity)"),
        MeasurementSpec(L2_LINE_BYTES, "bytes", "L2 cache line (tag) size"),
        MeasurementSpec(L2_SECTOR_BYTES, "bytes", "L2 sector (fill granularity)"),
        MeasurementSpec(DRAM_COPY_BANDWIDTH, "GB/s", "device-to-device copy, read+write bytes"),
        MeasurementSpec(DRAM_READ_BANDWIDTH, "GB/s", "streaming read of a buffer >> L2"),
        MeasurementSpec(L2_BANDWIDTH, "bytes/clk", "whole-GPU L2 read bandwidth (l2_bw_*)"),
        MeasurementSpec(L1_BANDWIDTH, "bytes/clk/SM", "L1 hit read bandwidth per SM"),
        MeasurementSpec(SHARED_BANDWIDTH, "bytes/clk/SM", "shared-memory bandwidth per SM"),
        MeasurementSpec(FP32_THROUGHPUT, _FLOP, f"peak FP32 FMA rate {_FLOP_NOTE}"),
        MeasurementSpec(FP32_LATENCY, "cycles", "dependent FP32 add/FMA chain"),
        MeasurementSpec(FP16_THROUGHPUT, _FLOP, f"peak FP16 (half2 counts 2 lanes) {_FLOP_NOTE}"),
        MeasurementSpec(FP16_LATENCY, "cycles", "dependent FP16 chain"),
        MeasurementSpec(FP64_THROUGHPUT, _FLOP, f"peak FP64 FMA rate {_FLOP_NOTE}"),
        MeasurementSpec(FP64_LATENCY, "cycles", "dependent FP64 chain"),
        MeasurementSpec(INT32_THROUGHPUT, _FLOP, f"peak int32 mad rate {_FLOP_NOTE}"),
        MeasurementSpec(INT32_LATENCY, "cycles", "dependent int32 add chain"),
        MeasurementSpec(SFU_THROUGHPUT, "ops/clk/SM", "fast sqrt / rsqrt per SM (sfu_bw_fsqrt)"),
        MeasurementSpec(FP_ADD_LATENCY, "cycles",
                        "dependent add.rn.f32 chain (FADD), one warp, cycles per instruction "
                        "(the ADD entry of -ptx_opcode_latency_fp)"),
        MeasurementSpec(FP_MUL_LATENCY, "cycles",
                        "dependent mul.rn.f32 chain (FMUL), one warp, cycles per instruction "
                        "(the MUL entry of -ptx_opcode_latency_fp)"),
        MeasurementSpec(SFU_LATENCY, "cycles",
                        "dependent SFU chain, one warp, cycles per instruction: the hilsim "
                        "suite's ex2.approx.ftz.f32 (MUFU.EX2; GPGPU-Sim "
                        "-ptx_opcode_latency_sfu), Accel-Sim's sfu_lat_fsqrt (fast sqrt)"),
        MeasurementSpec(SFU_INITIATION, "cycles",
                        "4 warps on one scheduler, independent ex2.approx.ftz.f32 chains "
                        "(MUFU.EX2): cycles per SFU instruction the scheduler issues "
                        "(-ptx_opcode_initiation_sfu)"),
        MeasurementSpec(INT_DIV_LATENCY, "cycles",
                        "dependent div.u32 chain through the divisor (x = c / x), one warp, "
                        "cycles per PTX div.u32 (a multi-instruction SASS sequence on sm_70+; "
                        "the DIV entry of -ptx_opcode_latency_int)"),
        MeasurementSpec(INT_DIV_INITIATION, "cycles",
                        "4 warps on one scheduler, independent div.u32 chains: cycles per PTX "
                        "div.u32 the scheduler issues; a sequence cost (~18 SASS instructions "
                        "on sm_70+, not the DIV entry of -ptx_opcode_initiation_int: the "
                        "tuner keeps the base's)"),
        MeasurementSpec(FP_DIV_LATENCY, "cycles",
                        "dependent div.rn.f32 chain through the divisor (x = c / x), one warp, "
                        "cycles per PTX div.rn.f32 (MUFU.RCP + FFMA refinement in SASS; the "
                        "DIV entry of -ptx_opcode_latency_fp)"),
        MeasurementSpec(INT_MAX_LATENCY, "cycles",
                        "dependent chain alternating max.s32 / min.s32, one warp, cycles per "
                        "instruction (the MAX,MIN entry of -ptx_opcode_latency_int)"),
        MeasurementSpec(FP_MAX_LATENCY, "cycles",
                        "dependent chain alternating max.f32 / min.f32 (FMNMX), one warp (the "
                        "MAX,MIN entry of -ptx_opcode_latency_fp)"),
        MeasurementSpec(SHFL_LATENCY, "cycles",
                        "dependent shfl.sync.bfly.b32 chain (SHFL.BFLY), one warp (the SHFL "
                        "entry, 6th, of -ptx_opcode_latency_int)"),
        MeasurementSpec(SHFL_INITIATION, "cycles",
                        "4 warps on one scheduler, independent shfl.sync.bfly.b32: cycles per "
                        "shuffle the scheduler issues (the SHFL entry of "
                        "-ptx_opcode_initiation_int)"),
        MeasurementSpec(DP_ADD_LATENCY, "cycles",
                        "dependent add.f64 chain (DADD), one warp (the ADD entry of "
                        "-ptx_opcode_latency_dp)"),
        MeasurementSpec(DP_ADD_INITIATION, "cycles",
                        "4 warps on one scheduler, independent add.f64 chains: cycles per DADD "
                        "the scheduler issues (the ADD entry of -ptx_opcode_initiation_dp)"),
        MeasurementSpec(DP_MUL_LATENCY, "cycles",
                        "dependent mul.rn.f64 chain (DMUL), one warp (the MUL entry of "
                        "-ptx_opcode_latency_dp)"),
        MeasurementSpec(DP_MUL_INITIATION, "cycles",
                        "4 warps on one scheduler, independent mul.rn.f64 chains: cycles per "
                        "DMUL the scheduler issues (the MUL entry of "
                        "-ptx_opcode_initiation_dp)"),
        MeasurementSpec(DP_MAX_LATENCY, "cycles",
                        "dependent chain alternating max.f64 / min.f64, one warp, cycles per "
                        "PTX instruction (DSETP.MAX/MIN + SEL/FSEL on sm_70+: no DMNMX; the "
                        "MAX,MIN entry of -ptx_opcode_latency_dp)"),
        MeasurementSpec(DP_MAX_INITIATION, "cycles",
                        "4 warps on one scheduler, independent max.f64 / min.f64 chains: "
                        "cycles per PTX instruction the scheduler issues; a sequence cost "
                        "(DSETP + SEL/FSEL + moves on sm_70+, not the MAX entry of "
                        "-ptx_opcode_initiation_dp: the tuner keeps the base's)"),
        MeasurementSpec(TENSOR_THROUGHPUT, "FMA/clk/SM", "dense FP16-in FP32-acc tensor FMAs"),
        MeasurementSpec(TENSOR_LATENCY, "cycles",
                        "dependent mma.sync latency per instruction (m8n8k4 sm_70, m16n8k8 "
                        "sm_75, m16n8k16 sm_80+), not a 16x16x16 wmma"),
        MeasurementSpec(LAUNCH_LATENCY_US, "us",
                        "GPU-side start-to-start time of back-to-back empty kernels "
                        "(%globaltimer), per launch"),
        MeasurementSpec(SM_CLOCK_MHZ, "MHz", "SM clock while the benchmarks ran"),
    )
}


# --- recorded by the suite for the report and the analysis of raw samples; no
# timing-config field is derived from them (:data:`SUITE_ONLY`) -------------------------
LATENCY_FOOTPRINT_SWEEP = "latency_footprint_sweep"
LATENCY_STRIDE_SWEEP = "latency_stride_sweep"
DRAM_WRITE_BANDWIDTH = "dram_write_bandwidth"
DRAM_LATENCY_PAGE_STRIDE = "dram_latency_page_stride"
LAUNCH_ROUNDTRIP_US = "launch_roundtrip_us"
ATOMIC_THROUGHPUT_DISTINCT = "atomic_throughput_distinct"
ATOMIC_THROUGHPUT_SAME = "atomic_throughput_same"
#: an earlier suite's name of the back-to-back launch time (now :data:`LAUNCH_LATENCY_US`),
#: still found in older files
LAUNCH_BACK_TO_BACK_US = "launch_back_to_back_us"

#: the suite's own measurements (``microbench/`` writes them, the tuner skips them), with
#: their units
SUITE_MEASUREMENTS: dict[str, MeasurementSpec] = {
    spec.name: spec
    for spec in (
        MeasurementSpec(LATENCY_FOOTPRINT_SWEEP, "cycles",
                        ".ca chase latency over growing footprints (the curve in params); "
                        "value: the largest footprint's"),
        MeasurementSpec(LATENCY_STRIDE_SWEEP, "cycles",
                        "sequential .ca chase latency at growing strides (the curve in params); "
                        "value: the largest stride's"),
        MeasurementSpec(DRAM_WRITE_BANDWIDTH, "GB/s", "streaming write of a buffer >> L2"),
        MeasurementSpec(DRAM_LATENCY_PAGE_STRIDE, "cycles",
                        "DRAM chase with every step on a new 2 MiB page: DRAM latency plus "
                        "the TLB miss"),
        MeasurementSpec(LAUNCH_ROUNDTRIP_US, "us", "host time of one launch + synchronize"),
        MeasurementSpec(ATOMIC_THROUGHPUT_DISTINCT, "atomics/s",
                        "global atomicAdd (red), one word per thread"),
        MeasurementSpec(ATOMIC_THROUGHPUT_SAME, "atomics/s",
                        "global atomicAdd (red), one word for all threads"),
    )
}

#: names the hilsim suite (``microbench/``) also records, for the report and the
#: analysis of raw samples, that no timing-config field is derived from; the tuner
#: skips them (any other unknown name is an error: most likely a typo)
SUITE_ONLY: frozenset[str] = frozenset({*SUITE_MEASUREMENTS, LAUNCH_BACK_TO_BACK_US})


def unit_of(name: str) -> str:
    """The declared unit of measurement ``name`` (``KeyError`` if unknown)."""
    return MEASUREMENTS[name].unit


# --- device facts ----------------------------------------------------------------------
@dataclass(frozen=True)
class DeviceFact:
    """One device-query fact: the timing field it sets, the scale to that field's unit,
    and every key it is written under (cudaDeviceProp, ``agent probe``, the microbench
    suite's ``device_facts``, Accel-Sim's deviceQuery labels as the tuner reads them)."""

    field: str
    scale: float
    keys: tuple[str, ...]


#: The one table of device-fact names: ``agent/probe.py`` and ``microbench/gpu.py``
#: write these keys, the tuner (``hilsim.simmodel.tuner.overlay``) reads them; the first key
#: present wins. ``tests/test_tune_device_facts.py`` fails on any key a writer emits
#: that is neither here nor in :data:`RECORDED_FACTS`.
DEVICE_FACTS: tuple[DeviceFact, ...] = (
    DeviceFact("core.sm_count", 1, ("multiProcessorCount", "sm_count")),
    DeviceFact("core.boost_clock_mhz", 1e-3, ("clockRate",)),
    DeviceFact("core.boost_clock_mhz", 1, ("max_sm_clock_mhz", "clock_rate_mhz", "max_clock_mhz")),
    DeviceFact("core.warp_size", 1, ("warpSize", "warp_size")),
    DeviceFact("core.max_threads_per_sm", 1, ("maxThreadsPerMultiProcessor", "max_threads_per_sm")),
    DeviceFact("core.max_ctas_per_sm", 1, ("maxBlocksPerMultiProcessor", "max_blocks_per_sm")),
    DeviceFact("core.registers_per_sm", 1,
               ("regsPerMultiprocessor", "regs_per_sm", "registers_per_sm")),
    DeviceFact("core.registers_per_block", 1,
               ("regsPerBlock", "regs_per_block", "registers_per_block")),
    DeviceFact("core.shared_mem_per_sm", 1,
               ("sharedMemPerMultiprocessor", "shared_mem_per_sm_bytes", "shared_mem_per_sm")),
    DeviceFact("core.shared_mem_per_block", 1,
               ("sharedMemPerBlock", "shared_mem_per_block_bytes", "shared_mem_per_block")),
    DeviceFact("l2.capacity_bytes", 1, ("l2CacheSize", "l2_cache_bytes", "l2_bytes")),
    # unified L1 + shared size (Accel-Sim l1_config L1_SIZE); a simulated card's config
    # gives it (-gpgpu_unified_l1d_size), CUDA device properties do not
    DeviceFact("l1.capacity_bytes", 1, ("unified_l1_shared_bytes",)),
    DeviceFact("dram.clock_mhz", 1e-3, ("memoryClockRate",)),
    DeviceFact("dram.clock_mhz", 1, ("max_mem_clock_mhz", "memory_clock_mhz")),
    DeviceFact("dram.bus_width_bits", 1,
               ("memoryBusWidth", "memory_bus_width_bits", "bus_width_bits")),
    DeviceFact("dram.capacity_bytes", 1, ("totalGlobalMem", "total_memory_bytes", "memory_bytes")),
    DeviceFact("dram.type", 1, ("memory_type", "memoryType")),
)

#: What a GPU can hold for each numeric fact, in the timing field's unit (after the
#: fact's scale): (lowest, highest, integral). Generous bounds around every NVIDIA GPU
#: so far (H100: 132 SMs, 1,980 MHz, 50 MB L2, 5,120-bit bus), tight enough that a value
#: no GPU has (10^12 SMs, a clock that rounds to 0 MHz) is refused before it is simulated.
FACT_RANGES: dict[str, tuple[float, float, bool]] = {
    "core.sm_count": (1, 4096, True),
    "core.boost_clock_mhz": (1, 20_000, False),
    "core.warp_size": (1, 64, True),
    "core.max_threads_per_sm": (1, 16_384, True),
    "core.max_ctas_per_sm": (1, 1024, True),
    "core.registers_per_sm": (1, 1 << 22, True),
    "core.registers_per_block": (1, 1 << 22, True),
    "core.shared_mem_per_sm": (0, 1 << 26, True),
    "core.shared_mem_per_block": (0, 1 << 26, True),
    "l2.capacity_bytes": (0, 1 << 32, True),
    "l1.capacity_bytes": (0, 1 << 26, True),
    "dram.clock_mhz": (1, 100_000, False),
    "dram.bus_width_bits": (1, 1 << 16, True),
    "dram.capacity_bytes": (1, 1 << 50, True),
}

#: keys the writers record for the manifest and reports that set no timing field
#: (``compute_capability``/``major``/``minor`` are read by the tuner separately)
RECORDED_FACTS: frozenset[str] = frozenset({
    "index", "name", "nvml_name", "uuid", "pci_bus_id", "compute_capability", "cc_major",
    "cc_minor", "major", "minor", "max_threads_per_block", "cupy_version",
    "cuda_runtime_version", "cuda_driver_version", "cuda_runtime", "driver", "driver_version",
    "devices_visible", "sm_clock_mhz", "mem_clock_mhz", "sm_clock_mhz_idle", "peak_dram_gbs",
    "nvml_error", "sources", "missing_packages", "tools", "extra", "clocks_locked",
    "pip_extra",
    # hilsim agent microbench: the clock lock and the clocks under the all-SM load
    "clock_lock", "clocks_under_load",
    # a simulated card (simmodel/gpgpusim/simdevice.py): which config, and the runs
    "backend", "card", "config", "config_source", "config_sha256", "simulation",
    "l1_cache_bytes",
    # HBM / GDDR from the bus width (microbench.gpu.memory_type_from_bus): the base card
    # choice compares it (simmodel/tuner/basecard.py), no timing field is set from it
    "memory_family", "memory_family_from",
})


def known_fact_keys() -> frozenset[str]:
    """Every device-fact key the tuner reads or knowingly skips."""
    return frozenset(k for f in DEVICE_FACTS for k in f.keys) | RECORDED_FACTS
