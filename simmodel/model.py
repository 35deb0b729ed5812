"""Analytical per-launch timing model: occupancy, waves, and the binding limit.

``predict(config, counters)`` turns per-launch counters (Nsight Compute metric names)
and launch configurations into predicted cycles, vectorised over launches (1M launches
in about a second; ``benchmarks/bench_model.py``). Equations and sources are in
``docs/timing-model.md``; in short:

* **Occupancy** (CUDA occupancy calculator, ``cuda_occupancy.h``
  ``cudaOccMaxActiveBlocksPerMultiprocessor``): CTAs per SM is the minimum of the warp
  limit, the CTA-slot limit, the register limit (registers allocated per warp in units
  of 256, per SM sub-partition: 4 sub-partitions) and the shared-memory limit
  (allocation unit 256 B before compute capability 8, 128 B from 8; 1 KB reserved per
  CTA from 8).
* **Waves** = ``ceil(CTAs / (CTAs per SM x SMs))``.
* **Components** (cycles): warp-instruction issue (one warp instruction per scheduler
  per cycle: Volta/Turing single issue, Accel-Sim Table IV, at a fitted attained
  fraction), FP32/FP64/FP16 pipes (FP32 share fitted when no FP counter is given),
  the L1/shared data path, L2 and DRAM bandwidth (roofline; Williams et al., CACM
  2009), and the warp chain: Hong & Kim (ISCA 2009) section 4 with too few warps to
  hide latency, one warp's memory cycles (one outstanding request, or a fitted number
  of independent ones: GPUMech's MLP, MICRO 2014) plus its compute cycles (warp
  instructions x a fitted issue delay) plus the other warps' compute periods on its
  scheduler (Hong & Kim's N <= MWP case), per wave; long-latency instructions (int
  divide, SFU, FP32 divide counts) cost their config latency in that chain and share
  the SFU pipe. Global atomics add L2 traffic and
  a same-address bound (one atomic per cycle at one L2 slice). Per-SM resources see the busiest
  SM's ``ceil(CTAs / SMs)`` CTAs; GPU-wide ones (L2, DRAM) see the total.
* ``cycles = max(components) + launch overhead + kernel overhead`` (the fitted fixed
  cost of any kernel) ``+ drain`` (the L1 latency when the launch stores: its last
  stores leave after its last instruction); ``binding`` names the maximum. The five fitted constants
  (:data:`FIT`) were fitted once on the correlation set's training kernels and are
  scored on held-out kernels and a held-out card (``benchmarks/model_vs_sim.py``).

Cache capacities do not enter the bounds directly (hit counts are inputs). When
``reference`` names the config the counters were measured on and a cache capacity
differs, capacity misses are rescaled by the square-root rule (miss rate proportional
to ``capacity ** -0.5``; Hartstein et al., CF 2006), capped at the accesses, so that
``l2_size=x2`` in :mod:`hilsim.simmodel.dse` changes DRAM traffic; the first cache-full
of misses is compulsory and kept (3C model, Hill & Smith 1989).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from hilsim.simmodel.config import TimingConfig
from hilsim.simmodel.pkp import IpcTimeline

from hilsim.core.errors import HilsimError

SECTOR_BYTES = 32
#: Component names, in tie-break order (first wins when two are equal).
COMPONENTS: tuple[str, ...] = (
    "issue",
    "fp32",
    "fp64",
    "fp16",
    "sfu",
    "l1_shared",
    "l2",
    "dram",
    "latency",
)

# --- accepted counter names -------------------------------------------------------------
#: warp-level instructions executed (issue slots).
INST = "smsp__inst_executed.sum"
#: thread-level FP instruction counters per pipe (any subset; summed per pipe).
FP32_OPS = tuple(
    f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum" for op in ("ffma", "fadd", "fmul")
)
FP64_OPS = tuple(
    f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum" for op in ("dfma", "dadd", "dmul")
)
FP16_OPS = tuple(
    f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum" for op in ("hfma", "hadd", "hmul")
)
#: warp-level global load / store instructions.
GLD_INST = "smsp__inst_executed_op_global_ld.sum"
GST_INST = "smsp__inst_executed_op_global_st.sum"
#: warp-level shared load / store instructions, and shared wavefronts (bank-conflict aware).
SHLD_INST = "smsp__inst_executed_op_shared_ld.sum"
SHST_INST = "smsp__inst_executed_op_shared_st.sum"
SH_WAVEFRONTS = "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"
#: L1 sectors (32 B) of global loads / stores.
L1_LD = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"
L1_ST = "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"
#: L2 sectors read / written.
L2_RD = "lts__t_sectors_op_read.sum"
L2_WR = "lts__t_sectors_op_write.sum"
#: global atomics: warp instructions (atomic + reduction) and the L2 sectors they access
#: (atomics are performed at the L2 slices, not in L1: Nsight Compute ``op_atom`` /
#: ``op_red``).
ATOM_INST = "smsp__sass_inst_executed_op_global_atom.sum"
L2_ATOM = ("lts__t_sectors_op_atom.sum", "lts__t_sectors_op_red.sum")
#: long-latency warp instructions (``hilsim.simmodel.gpgpusim.ptxlines``): integer
#: divide/remainder (simulator-only: one PTX ``div``/``rem``; a SASS sequence on silicon),
#: transcendental-unit instructions (MUFU: Nsight Compute ``pipe_xu``), FP32 divides
INT_DIV_INST = "sim__inst_executed_op_int_div.sum"
SFU_INST = "smsp__inst_executed_pipe_xu.sum"
FP32_DIV_INST = "sim__inst_executed_op_fp32_div.sum"
#: DRAM bytes read / written.
DRAM_RD = "dram__bytes_read.sum"
DRAM_WR = "dram__bytes_write.sum"
#: every counter column :func:`predict` reads (all optional; absent = 0 / unknown).
COUNTER_COLUMNS: tuple[str, ...] = (
    INST,
    *FP32_OPS,
    *FP64_OPS,
    *FP16_OPS,
    GLD_INST,
    GST_INST,
    SHLD_INST,
    SHST_INST,
    SH_WAVEFRONTS,
    L1_LD,
    L1_ST,
    L2_RD,
    L2_WR,
    ATOM_INST,
    *L2_ATOM,
    INT_DIV_INST,
    SFU_INST,
    FP32_DIV_INST,
    DRAM_RD,
    DRAM_WR,
)
#: Bytes a coalesced warp request of 32 x 4 B touches: 4 sectors (used only when the
#: warp-level global load count is absent, to estimate requests from sectors).
SECTORS_PER_REQUEST = 4

#: The five constants fitted once on the training kernels of the correlation set
#: (``calib_kernels`` launches on the reduced SM7_QV100, ``benchmarks/model_fit.py``) and
#: scored on kernels (``transformer_step``) and a card (SM86_RTX3070) the fit never saw
#: (``benchmarks/model_vs_sim.py``, ``docs/timing-model.md`` "Validation"). Not per
#: workload: the same five numbers for every launch on every config.
FIT: dict[str, float] = {
    "kernel_overhead": 332.878,
    "dep_issue_cycles": 2.945,
    "issue_efficiency": 0.586,
    "fp32_mix": 0.075,
    "warp_mlp": 1.0,
}
FIT_SOURCE = "fitted: benchmarks/model_fit.py on the correlation set's SM7_QV100 calib_kernels"


@dataclass(frozen=True)
class Param:
    """A model parameter with where it came from."""

    value: float
    source: str


@dataclass(frozen=True)
class ModelParams:
    """The numbers the model uses, resolved from a :class:`TimingConfig` with fallbacks."""

    sm_count: Param
    clock_mhz: Param
    warp_size: Param
    max_warps_per_sm: Param
    max_ctas_per_sm: Param
    registers_per_sm: Param
    registers_per_block: Param
    shared_mem_per_sm: Param
    shared_mem_per_block: Param
    smem_granularity: Param
    smem_reserved: Param
    reg_granularity: Param
    sub_partitions: Param
    schedulers: Param
    fp32_rate: Param  # thread instructions / clk / SM
    fp64_rate: Param
    fp16_rate: Param
    sfu_rate: Param  # warp-lane operations / clk / SM of the special-function unit
    sfu_latency: Param
    int_div_latency: Param
    fp32_div_latency: Param
    l1_bw: Param  # bytes / clk / SM
    shared_bw: Param  # bytes / clk / SM
    l2_bw: Param  # bytes / clk (GPU)
    dram_bw: Param  # bytes / clk (GPU, core clock)
    shared_latency: Param
    l1_latency: Param
    l2_latency: Param
    dram_latency: Param
    launch_cycles: Param
    kernel_overhead: Param  # cycles: CTA dispatch, first fetch, drain (every kernel)
    dep_issue_cycles: Param  # cycles between a warp's successive instructions (CPI of one warp)
    issue_efficiency: Param  # attained fraction of the schedulers' issue slots
    fp32_mix: Param  # FP32-pipe share of warp instructions when no FP counter is given
    warp_mlp: Param  # independent memory requests one warp keeps in flight
    l1_capacity: Param
    l2_capacity: Param

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {k: {"value": v.value, "source": v.source} for k, v in self.__dict__.items()}


def _cfg(config: TimingConfig, dotted: str, fallback: float | None, fallback_source: str) -> Param:
    got = config.get(dotted)
    if got is not None:
        return Param(float(got.value), f"{dotted} ({got.source})")
    if fallback is None:
        raise HilsimError(f"timing config {config.name!r}: {dotted} is required by the model")
    return Param(float(fallback), f"fallback: {fallback_source}")


def _rate(config: TimingConfig, unit: str) -> Param:
    """Thread instructions per clock per SM of a pipe (0 when the unit is not described).

    A throughput given in ``flop/clk/SM`` counts an FMA as two flops, so the lane count
    (thread instructions per clock) is half of it; other units are taken as given.
    """
    got = config.get(f"units.{unit}.throughput")
    if got is None:
        return Param(0.0, f"units.{unit}.throughput absent: pipe not modelled")
    value = float(got.value)
    if got.unit.startswith("flop"):
        return Param(value / 2, f"units.{unit}.throughput {value:g} flop/clk/SM / 2 (FMA = 2 flop)")
    return Param(value, f"units.{unit}.throughput ({got.source})")


def model_params(config: TimingConfig) -> ModelParams:
    """Resolve every model parameter from ``config``; fallbacks name their source.

    Fallbacks (used only where the config lacks the value) are the Accel-Sim Volta model
    (Khairy et al., ISCA 2020, Tables IV and VI; SM7_QV100 gpgpusim.config) or the CUDA
    occupancy calculator's constants; ``docs/timing-model.md`` lists them.
    """
    cc = config.compute_capability.value if config.compute_capability is not None else "7.0"
    major = int(str(cc).split(".")[0])
    warp = _cfg(config, "core.warp_size", 32, "CUDA warp size 32")
    threads = _cfg(config, "core.max_threads_per_sm", 2048, "Volta 2048 threads/SM")
    max_warps = Param(threads.value / warp.value, "core.max_threads_per_sm / core.warp_size")
    sms = _cfg(config, "core.sm_count", None, "")
    clock = _cfg(config, "core.core_clock_mhz", None, "")
    l2_banks = config.get("l2.banks")
    channels = config.get("dram.channels")
    if config.get("l2.bandwidth") is not None:
        l2_bw = _cfg(config, "l2.bandwidth", None, "")
    elif l2_banks is not None:
        l2_bw = Param(
            float(l2_banks.value) * SECTOR_BYTES,
            "derived: l2.banks x 32 B/clk (one sector per bank per cycle; "
            "Accel-Sim Table VI 32 B flit)",
        )
    elif channels is not None:
        l2_bw = Param(
            2.0 * float(channels.value) * SECTOR_BYTES,
            "derived: 2 L2 banks per dram.channels x 32 B/clk (Accel-Sim "
            "-gpgpu_n_sub_partition_per_mchannel 2)",
        )
    else:
        l2_bw = Param(
            64.0 * SECTOR_BYTES, "fallback: Volta 64 L2 banks x 32 B/clk (Accel-Sim Table IV)"
        )
    dram_gbs = config.get("dram.bandwidth_gbs")
    if dram_gbs is None:
        raise HilsimError(
            f"timing config {config.name!r}: dram.bandwidth_gbs is required by the model"
        )
    dram_bw = Param(
        float(dram_gbs.value) * 1e3 / clock.value,
        "derived: dram.bandwidth_gbs x 1e9 / (core_clock_mhz x 1e6) B/clk",
    )
    shared_banks = config.get("shared.banks")
    if config.get("shared.bandwidth") is not None:
        shared_bw = _cfg(config, "shared.bandwidth", None, "")
    elif shared_banks is not None:
        shared_bw = Param(
            float(shared_banks.value) * 4,
            "derived: shared.banks x 4 B/clk (CUDA Programming Guide: "
            "successive 32-bit words in successive banks)",
        )
    else:
        shared_bw = Param(128.0, "fallback: 32 banks x 4 B/clk")
    l2_lat = _cfg(config, "l2.hit_latency_cycles", 212, "Accel-Sim Table IV Volta L2 212 cycles")
    if config.get("dram.latency_cycles") is not None:
        dram_lat = _cfg(config, "dram.latency_cycles", None, "")
    else:
        dram_lat = Param(
            l2_lat.value + 100,
            "derived: L2 hit latency + 100 cycles (SM7_QV100.gpgpusim.config -dram_latency 100)",
        )
    return ModelParams(
        sm_count=sms,
        clock_mhz=clock,
        warp_size=warp,
        max_warps_per_sm=max_warps,
        max_ctas_per_sm=_cfg(config, "core.max_ctas_per_sm", 32, "Volta 32 CTAs/SM"),
        registers_per_sm=_cfg(config, "core.registers_per_sm", 65536, "64K registers/SM"),
        registers_per_block=_cfg(config, "core.registers_per_block", 65536, "64K registers/block"),
        shared_mem_per_sm=_cfg(config, "core.shared_mem_per_sm", 98304, "Volta 96 KB"),
        shared_mem_per_block=_cfg(config, "core.shared_mem_per_block", 49152, "48 KB static limit"),
        smem_granularity=Param(
            256.0 if major < 8 else 128.0, "cuda_occupancy.h cudaOccSMemAllocationGranularity"
        ),
        smem_reserved=Param(
            0.0 if major < 8 else 1024.0,
            "cudaDeviceProp.reservedSharedMemPerBlock (1 KB from cc 8.0)",
        ),
        reg_granularity=Param(256.0, "cuda_occupancy.h cudaOccRegAllocationGranularity"),
        sub_partitions=Param(4.0, "cuda_occupancy.h cudaOccSubPartitionsPerMultiprocessor"),
        schedulers=_cfg(config, "core.schedulers_per_sm", 4, "4 schedulers/SM since Maxwell"),
        fp32_rate=_rate(config, "fp32"),
        fp64_rate=_rate(config, "fp64"),
        fp16_rate=_rate(config, "fp16"),
        sfu_rate=_cfg(config, "units.sfu.throughput", 16,
                      "Volta 16 SFU lanes/SM (CUDA Programming Guide arithmetic throughput)"),
        sfu_latency=_cfg(config, "units.sfu.latency_cycles", 100,
                         "SM7_QV100.gpgpusim.config -ptx_opcode_latency_sfu 100"),
        int_div_latency=_cfg(config, "units.int32.div_latency_cycles", 145,
                             "SM7_QV100.gpgpusim.config -ptx_opcode_latency_int DIV 145"),
        fp32_div_latency=_cfg(config, "units.fp32.div_latency_cycles", 39,
                              "SM7_QV100.gpgpusim.config -ptx_opcode_latency_fp DIV 39"),
        l1_bw=_cfg(config, "l1.bandwidth", 128, "Accel-Sim Table IV Volta L1 128 B/cycle"),
        shared_bw=shared_bw,
        l2_bw=l2_bw,
        dram_bw=dram_bw,
        shared_latency=_cfg(
            config, "shared.latency_cycles", 20, "Accel-Sim Table VI shared latency 20 cycles"
        ),
        l1_latency=_cfg(
            config, "l1.hit_latency_cycles", 28, "Accel-Sim Table IV Volta L1 28 cycles"
        ),
        l2_latency=l2_lat,
        dram_latency=dram_lat,
        launch_cycles=_cfg(
            config,
            "core.launch_latency_cycles",
            5000,
            "SM7_QV100.gpgpusim.config -gpgpu_kernel_launch_latency 5000",
        ),
        kernel_overhead=Param(FIT["kernel_overhead"], FIT_SOURCE),
        dep_issue_cycles=Param(FIT["dep_issue_cycles"], FIT_SOURCE),
        issue_efficiency=Param(FIT["issue_efficiency"], FIT_SOURCE),
        fp32_mix=Param(FIT["fp32_mix"], FIT_SOURCE),
        warp_mlp=Param(FIT["warp_mlp"], FIT_SOURCE),
        l1_capacity=_cfg(config, "l1.capacity_bytes", 131072, "Volta 128 KB unified L1"),
        l2_capacity=_cfg(config, "l2.capacity_bytes", 6291456, "Volta 6 MB L2"),
    )


# --- occupancy --------------------------------------------------------------------------


def _round_up(x: np.ndarray, unit: float) -> np.ndarray:
    return np.ceil(x / unit) * unit


def occupancy_limits(
    p: ModelParams, threads: np.ndarray, regs: np.ndarray, smem: np.ndarray
) -> dict[str, np.ndarray]:
    """CTAs per SM allowed by each resource (CUDA occupancy calculator rules).

    ``threads`` per CTA, ``regs`` per thread, ``smem`` bytes per CTA (static + dynamic).
    Returns ``warps``, ``ctas``, ``registers``, ``shared`` limits and ``ctas_per_sm``
    (their minimum; 0 where the CTA cannot run).
    """
    warps_cta = np.ceil(threads / p.warp_size.value)
    lim_warps = np.floor(p.max_warps_per_sm.value / warps_cta)
    lim_ctas = np.full(threads.shape, p.max_ctas_per_sm.value)
    regs_warp = _round_up(regs * p.warp_size.value, p.reg_granularity.value)
    sub = p.sub_partitions.value
    hw_check = regs_warp * _round_up(warps_cta, sub) <= p.registers_per_block.value
    sw_check = regs_warp * warps_cta <= p.registers_per_block.value
    with np.errstate(divide="ignore", invalid="ignore"):
        warps_sub = np.floor(np.floor(p.registers_per_sm.value / sub) / regs_warp)
        lim_regs = np.where(regs_warp > 0, np.floor(warps_sub * sub / warps_cta), np.inf)
    lim_regs = np.where(hw_check & sw_check & (regs <= 255), lim_regs, 0.0)
    smem_alloc = _round_up(smem + p.smem_reserved.value, p.smem_granularity.value)
    # shared_mem_per_block is the 48 KB *static* limit; kernels opt in to dynamic shared
    # memory up to the SM's capacity (CUDA C Programming Guide, "Shared Memory" of each
    # compute capability), so a launch that ran on silicon fits when one CTA fits the SM
    fits = smem_alloc <= p.shared_mem_per_sm.value
    with np.errstate(divide="ignore"):
        lim_smem = np.where(
            smem_alloc > 0, np.floor(p.shared_mem_per_sm.value / np.maximum(smem_alloc, 1)), np.inf
        )
    lim_smem = np.where(fits, lim_smem, 0.0)
    ctas = np.minimum(np.minimum(lim_warps, lim_ctas), np.minimum(lim_regs, lim_smem))
    return {
        "warps": lim_warps,
        "ctas": lim_ctas,
        "registers": lim_regs,
        "shared": lim_smem,
        "ctas_per_sm": ctas,
    }


# --- the model --------------------------------------------------------------------------


def _col(counters: pd.DataFrame, name: str) -> np.ndarray | None:
    if name not in counters.columns:
        return None
    values = pd.to_numeric(counters[name], errors="coerce").to_numpy(
        dtype=np.float64, na_value=np.nan
    )
    return values


def _sum_cols(counters: pd.DataFrame, names: tuple[str, ...], n: int) -> np.ndarray:
    out = np.zeros(n)
    for name in names:
        v = _col(counters, name)
        if v is not None:
            out += np.nan_to_num(v)
    return out


def _launch(counters: pd.DataFrame, name: str, default: float | None) -> np.ndarray:
    v = _col(counters, name)
    if v is None:
        if default is None:
            raise HilsimError(f"counters: missing launch-configuration column {name!r}")
        return np.full(len(counters), float(default))
    bad = np.isnan(v)
    if bad.any():
        if default is None:
            row = int(np.flatnonzero(bad)[0])
            raise HilsimError(
                f"counters: {int(bad.sum())} launch(es) have no {name} (first: row {row})"
            )
        v = np.where(bad, default, v)
    return v


def _capacity_scale(new: float, ref: float) -> float:
    """Square-root rule: misses scale with ``(new / ref) ** -0.5`` (Hartstein et al., 2006)."""
    return float((new / ref) ** -0.5) if new != ref else 1.0


def _rescale_misses(misses: np.ndarray, cold: float, scale: float) -> np.ndarray:
    """Misses on a cache of another capacity: the first ``cold`` (one fill of the smaller
    of the two caches) are compulsory and stay; the rest follow the square-root rule.

    A launch whose misses fit in the cache has no capacity misses to lose when the cache
    grows (the compulsory / capacity split of Hill & Smith's 3C model, IEEE TC 1989).
    """
    if scale == 1.0:
        return misses
    kept = np.minimum(misses, cold)
    return kept + (misses - kept) * scale


def require_counters(counters: pd.DataFrame, source: str = "counters") -> None:
    """One-line error when none of :data:`COUNTER_COLUMNS` is present.

    Without any counter the model predicts launch overhead only; callers that model
    a real workload (validate, dse) check this first.
    """
    if len(counters) and not any(c in counters.columns for c in COUNTER_COLUMNS):
        raise HilsimError(
            f"{source}: none of the model's counter columns is present (instructions, "
            "sectors, DRAM bytes: e.g. smsp__inst_executed.sum, lts__t_sectors_op_read.sum, "
            "dram__bytes_read.sum); profile the launches with Nsight Compute "
            "(hilsim agent profile --detailed-all) before running the model"
        )


def _components(
    config: TimingConfig, counters: pd.DataFrame, reference: TimingConfig | None
) -> dict[str, Any]:
    """The model's per-launch arrays: component cycles (``comp``) and occupancy facts.

    Shared by :func:`predict` (the full table) and :func:`predict_cycles` (cycles and
    binding only); see :func:`predict` for the arguments.
    """
    p = model_params(config)
    n = len(counters)
    grid = (
        _launch(counters, "grid_x", None)
        * _launch(counters, "grid_y", 1)
        * _launch(counters, "grid_z", 1)
    )
    threads = (
        _launch(counters, "block_x", None)
        * _launch(counters, "block_y", 1)
        * _launch(counters, "block_z", 1)
    )
    regs = _launch(counters, "regs", 32)
    smem = _launch(counters, "smem_static", 0) + _launch(counters, "smem_dynamic", 0)
    if n and ((grid < 1).any() or (threads < 1).any()):
        row = int(np.flatnonzero((grid < 1) | (threads < 1))[0])
        raise HilsimError(f"counters: row {row}: grid and block sizes must be >= 1")

    lim = occupancy_limits(p, threads, regs, smem)
    cpsm = lim["ctas_per_sm"]
    if n and (cpsm < 1).any():
        bad = np.flatnonzero(cpsm < 1)
        raise HilsimError(
            f"counters: {bad.size} launch(es) cannot fit one CTA on an SM of {config.name!r} "
            f"(first: row {int(bad[0])}: {int(threads[bad[0]])} threads, "
            f"{int(regs[bad[0]])} regs, {int(smem[bad[0]])} B shared)"
        )
    cpsm = np.minimum(cpsm, p.max_ctas_per_sm.value)
    warps_cta = np.ceil(threads / p.warp_size.value)
    sms = p.sm_count.value
    waves = np.ceil(grid / (cpsm * sms))
    busiest = np.ceil(grid / sms)  # CTAs on the busiest SM
    per_sm = busiest / grid  # share of per-CTA work the busiest SM does

    # memory traffic (with optional capacity rescaling)
    l1_ld = _sum_cols(counters, (L1_LD,), n)
    l1_st = _sum_cols(counters, (L1_ST,), n)
    l2_rd = _sum_cols(counters, (L2_RD,), n)
    l2_wr = _sum_cols(counters, (L2_WR,), n)
    dram_rd = _sum_cols(counters, (DRAM_RD,), n)
    dram_wr = _sum_cols(counters, (DRAM_WR,), n)
    if reference is not None:
        pr = model_params(reference)
        s1 = _capacity_scale(p.l1_capacity.value, pr.l1_capacity.value)
        l1_cap = min(p.l1_capacity.value * p.sm_count.value,
                     pr.l1_capacity.value * pr.sm_count.value) / SECTOR_BYTES
        # misses never exceed the accesses of the level above (or the measured misses)
        l2_rd = np.minimum(_rescale_misses(l2_rd, l1_cap, s1), np.maximum(l1_ld, l2_rd))
        s2 = _capacity_scale(p.l2_capacity.value, pr.l2_capacity.value)
        l2_cap = min(p.l2_capacity.value, pr.l2_capacity.value)
        dram_rd = np.minimum(_rescale_misses(dram_rd, l2_cap, s2),
                             np.maximum(l2_rd * SECTOR_BYTES, dram_rd))

    atom_sec = _sum_cols(counters, L2_ATOM, n)
    atom = _col(counters, ATOM_INST)
    atom = np.nan_to_num(atom) if atom is not None else atom_sec / SECTORS_PER_REQUEST
    inst = _col(counters, INST)
    gld = _col(counters, GLD_INST)
    gst = _col(counters, GST_INST)
    gld = np.nan_to_num(gld) if gld is not None else l1_ld / SECTORS_PER_REQUEST
    gst = np.nan_to_num(gst) if gst is not None else l1_st / SECTORS_PER_REQUEST
    sh_inst = _sum_cols(counters, (SHLD_INST, SHST_INST), n)
    wavefronts = _col(counters, SH_WAVEFRONTS)
    sh_wave = np.nan_to_num(wavefronts) if wavefronts is not None else sh_inst
    # without the warp-instruction count, the known memory instructions are a lower bound
    inst = np.nan_to_num(inst) if inst is not None else gld + gst + sh_inst

    total_warps = grid * warps_cta
    inst_w = inst / total_warps  # warp instructions per warp
    comp: dict[str, np.ndarray] = {}
    # issue slots: one warp instruction per scheduler per cycle (Accel-Sim Table IV), of
    # which a fitted fraction is attained (operand collection, register-bank conflicts)
    comp["issue"] = inst * per_sm / (p.schedulers.value * p.issue_efficiency.value)
    for name, ops, rate in (
        ("fp32", FP32_OPS, p.fp32_rate),
        ("fp64", FP64_OPS, p.fp64_rate),
        ("fp16", FP16_OPS, p.fp16_rate),
    ):
        thread_ops = _sum_cols(counters, ops, n)
        if name == "fp32" and not any(c in counters.columns for c in ops):
            # no FP counter (e.g. a simulator log): a fitted share of the warp instructions
            # runs on the FP32 pipe, 32 thread operations each
            thread_ops = inst * p.fp32_mix.value * p.warp_size.value
        comp[name] = thread_ops * per_sm / rate.value if rate.value > 0 else np.zeros(n)
    # long-latency instructions share the special-function unit (GPGPU-Sim SFU_OP:
    # int/fp divides and transcendentals), one warp instruction per 32 / lanes cycles
    div_i = _sum_cols(counters, (INT_DIV_INST,), n)
    sfu_i = _sum_cols(counters, (SFU_INST,), n)
    div_f = _sum_cols(counters, (FP32_DIV_INST,), n)
    ll_inst = div_i + sfu_i + div_f
    comp["sfu"] = (ll_inst * per_sm * p.warp_size.value / p.sfu_rate.value
                   if p.sfu_rate.value > 0 else np.zeros(n))  # as the other unit rates
    comp["l1_shared"] = per_sm * (
        (l1_ld + l1_st) * SECTOR_BYTES / p.l1_bw.value
        + sh_wave * 4 * p.warp_size.value / p.shared_bw.value
    )
    # atomics on one address serialise at its L2 slice, one per cycle: the sectors beyond
    # one coalesced request (4 sectors) per atomic warp instruction queue at one bank
    hot = np.maximum(atom_sec - SECTORS_PER_REQUEST * atom, 0.0)
    comp["l2"] = np.maximum((l2_rd + l2_wr + atom_sec) * SECTOR_BYTES / p.l2_bw.value, hot)
    comp["dram"] = (dram_rd + dram_wr) / p.dram_bw.value

    # latency: the warp's own chain, Hong & Kim (ISCA 2009) section 4 with too few warps
    # to hide latency (MWP, CWP >= N): Exec = Mem_cycles + Comp_cycles of one warp, per
    # wave of resident CTAs. Mem: one outstanding load per warp, latency by where the
    # loads hit; Comp: warp instructions x the cycles between a warp's dependent issues.
    with np.errstate(divide="ignore", invalid="ignore"):
        f_l2 = np.where(l1_ld > 0, np.clip(l2_rd / l1_ld, 0.0, 1.0), 0.0)
        f_dram = np.where(l1_ld > 0, np.clip(dram_rd / SECTOR_BYTES / l1_ld, 0.0, 1.0), 0.0)
    f_dram = np.minimum(f_dram, f_l2)
    # load-to-use latency by the level that serves the load (each level's latency is
    # measured from the SM, the lookups above it included: Accel-Sim Table IV)
    lat_load = (
        (1 - f_l2) * p.l1_latency.value
        + (f_l2 - f_dram) * p.l2_latency.value
        + f_dram * p.dram_latency.value
    )
    # per warp; independent loads of one warp overlap (memory-level parallelism within
    # the warp, as the MLP term of GPUMech, Huang et al., MICRO 2014, section 4.3)
    # (atomics: fire-and-forget reductions do not wait for their L2 slice; their cost is
    # the L2 term above)
    mem_chain = (gld * lat_load + sh_inst * p.shared_latency.value) / total_warps
    mem_chain = mem_chain / p.warp_mlp.value
    # a long-latency instruction's result is waited for at its own latency, not the
    # fitted per-instruction delay (Hong & Kim section 4: Comp_cycles counts each
    # instruction's issue cost; here at the config's DIV / SFU latency)
    ll_lat = (div_i * p.int_div_latency.value + sfu_i * p.sfu_latency.value
              + div_f * p.fp32_div_latency.value)
    ll_extra = np.maximum(ll_lat - ll_inst * p.dep_issue_cycles.value, 0.0) / total_warps
    comp_issue = inst_w * p.dep_issue_cycles.value
    comp_chain = comp_issue + ll_extra
    # Hong & Kim section 4 with N warps per scheduler but not enough to hide the memory
    # latency (N <= MWP): Exec = Mem + Comp + Comp / #Mem_insts x (N - 1): every other
    # warp's compute period between two loads delays this warp once per load
    resident = np.minimum(busiest, cpsm) * warps_cta
    n_sched = np.ceil(resident / p.schedulers.value)
    mem_insts = (gld + sh_inst) / total_warps
    # (their issue cycles only: their long-latency waits overlap this warp's)
    others = comp_issue / np.maximum(mem_insts, 1.0) * (n_sched - 1)
    # ... but N interleaved warps never compute slower than the scheduler issues them
    # all (N x instructions at the attained rate): that is the issue bound's regime
    comp_wave = np.minimum(comp_chain + others,
                           np.maximum(comp_chain, n_sched * inst_w / p.issue_efficiency.value))
    comp["latency"] = waves * (mem_chain + comp_wave)

    return {
        "p": p,
        "n": n,
        "comp": comp,
        "lim": lim,
        "cpsm": cpsm,
        "warps_cta": warps_cta,
        "waves": waves,
        "grid": grid,
        "inst": inst,
        # the last stores drain after the last instruction: write-through L1, then L2
        # (the kernel ends when they are acknowledged; a fixed cost of every launch
        # that stores, Hong & Kim section 4.6)
        "drain": np.where(gst > 0, p.l1_latency.value, 0.0),
    }


def _binding(comp: dict[str, np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray]:
    """Index into :data:`COMPONENTS` of each launch's largest component, and its value.

    Ties go to the first component in :data:`COMPONENTS` (``argmax``).
    """
    if not n:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    stack = np.vstack([comp[c] for c in COMPONENTS])
    best = np.argmax(stack, axis=0)
    return best, stack.max(axis=0)


def predict(
    config: TimingConfig, counters: pd.DataFrame, *, reference: TimingConfig | None = None
) -> pd.DataFrame:
    """Predicted cycles of every launch in ``counters`` (one row per launch).

    Args:
        config: the GPU to predict for.
        counters: per-launch columns: launch configuration (``grid_x..z``, ``block_x..z``
            required; ``regs`` default 32, ``smem_static``/``smem_dynamic`` default 0) and
            any of :data:`COUNTER_COLUMNS` (Nsight Compute names; absent columns count as
            zero, i.e. that limit is not modelled). Warp-level instruction counts are
            ``smsp__*inst_executed*``; sectors are 32 B; DRAM counters are bytes.
        reference: the config the counters were measured on; when given, L1 and L2
            capacity differences rescale misses by the square-root rule.

    Returns:
        A DataFrame on ``counters.index`` with ``cycles``, ``binding`` (component name),
        ``occupancy`` (theoretical: resident warps / max warps), ``ctas_per_sm``,
        ``occupancy_limit`` (warps | ctas | registers | shared), ``waves``, ``ctas``,
        ``instructions`` and ``<component>_cycles`` for each of :data:`COMPONENTS` plus
        ``launch_cycles``.
    """
    r = _components(config, counters, reference)
    p, n, comp, lim = r["p"], r["n"], r["comp"], r["lim"]
    cpsm, warps_cta = r["cpsm"], r["warps_cta"]
    best, body = _binding(comp, n)
    launch = p.launch_cycles.value + p.kernel_overhead.value + r["drain"]
    limit_names = ["warps", "ctas", "registers", "shared"]
    limit_stack = np.vstack([lim[name] for name in limit_names])
    limit = np.argmin(limit_stack, axis=0) if n else np.zeros(0, dtype=np.int64)
    # categoricals from integer codes: no N-element array of strings to hash (10M launches)
    out = pd.DataFrame(
        {
            "cycles": body + launch,
            "binding": pd.Categorical.from_codes(best, categories=list(COMPONENTS)),
            "occupancy": cpsm * warps_cta / p.max_warps_per_sm.value,
            "ctas_per_sm": cpsm.astype(np.int64),
            "occupancy_limit": pd.Categorical.from_codes(limit, categories=limit_names),
            "waves": r["waves"].astype(np.int64),
            "ctas": r["grid"].astype(np.int64),
            "instructions": r["inst"],
        },
        index=counters.index,
    )
    for c in COMPONENTS:
        out[f"{c}_cycles"] = comp[c]
    out["launch_cycles"] = launch
    return out


def predict_cycles(
    config: TimingConfig, counters: pd.DataFrame, *, reference: TimingConfig | None = None
) -> tuple[np.ndarray, pd.Categorical]:
    """Only the ``cycles`` and ``binding`` of :func:`predict`, without building its table.

    Same arguments and the same values as ``predict(...)["cycles"]`` and
    ``predict(...)["binding"]`` (as a numpy array and a categorical over
    :data:`COMPONENTS`); for callers that run the model on every launch several times
    (``dse``), where the full table would cost ~18 columns x N each time.
    """
    r = _components(config, counters, reference)
    best, body = _binding(r["comp"], r["n"])
    # the same sum, in the same order, as predict's ``body + launch``
    cycles = body + (r["p"].launch_cycles.value + r["p"].kernel_overhead.value + r["drain"])
    return cycles, pd.Categorical.from_codes(best, categories=list(COMPONENTS))


def ipc_timeline(
    config: TimingConfig,
    counters: pd.DataFrame | pd.Series,
    *,
    windows: int = 4,
    include_launch: bool = True,
) -> Any:
    """Per-wave IPC timeline(s) for PKP (:class:`hilsim.simmodel.pkp.IpcTimeline`).

    Each wave of ``ctas_per_sm x SMs`` CTAs (the last one partial) is cut into
    ``windows`` equal windows. A wave's length is ``max(latency per wave, throughput
    bound x CTAs in the wave / CTAs)``, rescaled so that the waves add up to the
    predicted cycles minus the launch overhead; its instructions are the launch's
    instructions times its share of the CTAs, spread evenly over its windows; its CTAs
    finish in its last window. With ``include_launch`` the launch overhead is a first
    window with no instructions. ``total_instructions`` is the launch's count.

    Returns one ``IpcTimeline`` for a Series (one launch), else a list in row order.
    """
    if windows < 1:
        raise HilsimError(f"ipc_timeline: windows must be >= 1, got {windows}")
    single = isinstance(counters, pd.Series)
    frame = counters.to_frame().T if single else counters
    pred = predict(config, frame)
    p = model_params(config)
    cpw_all = pred["ctas_per_sm"].to_numpy() * int(p.sm_count.value)
    thr_cols = [f"{c}_cycles" for c in COMPONENTS if c != "latency"]
    throughput = pred[thr_cols].to_numpy().max(axis=1)
    lat_wave = pred["latency_cycles"].to_numpy() / pred["waves"].to_numpy()
    body = (pred["cycles"] - pred["launch_cycles"]).to_numpy()
    out = []
    for i in range(len(pred)):
        ctas, cpw, nw = int(pred["ctas"].iat[i]), int(cpw_all[i]), int(pred["waves"].iat[i])
        sizes = np.full(nw, float(min(cpw, ctas)))
        sizes[-1] = ctas - cpw * (nw - 1)
        raw = np.maximum(lat_wave[i], throughput[i] * sizes / ctas)
        total_raw = raw.sum()
        wave_cycles = raw * (body[i] / total_raw) if total_raw > 0 else np.full(nw, 1.0)
        inst_total = float(pred["instructions"].iat[i])
        cyc = np.repeat(np.maximum(wave_cycles, 1e-9) / windows, windows)
        ins = np.repeat(inst_total * sizes / ctas / windows, windows)
        done = np.zeros(nw * windows, dtype=np.int64)
        done[windows - 1 :: windows] = sizes.astype(np.int64)
        if include_launch:
            cyc = np.concatenate(([float(pred["launch_cycles"].iat[i])], cyc))
            ins = np.concatenate(([0.0], ins))
            done = np.concatenate(([0], done))
        out.append(
            IpcTimeline(
                cycles=cyc,
                instructions=ins,
                ctas_finished=done,
                total_ctas=ctas,
                ctas_per_wave=cpw,
                total_instructions=inst_total,
            )
        )
    return out[0] if single else out
