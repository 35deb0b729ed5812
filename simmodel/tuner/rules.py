"""The tuner's option rules: one entry per simulator option it computes (the table).

Accel-Sim's tuner (Accel-Sim paper, Section II-C; the ``GPU_Microbenchmark`` programs and
``hw_def/common/common.h``) prints ``-option`` lines from the device query and the
microbenchmarks' numbers; each entry below re-implements one of those formulas, in the
order the options are derived. ``docs/tuner.md``'s option table is generated from this
table (:mod:`hilsim.simmodel.tuner.docs`).

To add an option, add one :class:`OptionRule` (positional: option, inputs, value,
formula, accelsim): the option, the timing fields it is computed from, its value as a
function of :class:`RuleInputs` (``t[field]``, ``t.int_of(field)`` and the named terms
such as ``t.schedulers`` or ``t.channels``), the formula text its ``# source:`` line
carries, and the Accel-Sim function it follows. A rule whose inputs are not all set
gives no value, and the preset's stays. For the on-simulator tuner to set it too, give
the rule ``search=(Knob(key, evaluator, what, ...),)``: the microbenchmark that measures
it (:data:`hilsim.simmodel.tuner.evaluators.EVALUATORS`) and, unless the rule's own
value over the measurements is the quantity to match, the measurements and quantity
(:class:`~hilsim.simmodel.tuner.rule.Knob` lists the search's other fields). Then run
``python benchmarks/tuner_docs.py``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from hilsim.simmodel.tuner.conventions import unit_latency
from hilsim.simmodel.tuner.dram import dram_timing
from hilsim.simmodel.tuner.geometry import round_up_pow2
from hilsim.simmodel.tuner.rule import (
    Knob,
    LatencyKind,
    OptionRule,
    OptionValue,
    Quantity,
    RuleInputs,
    SearchContext,
    Slot,
)

from hilsim.core import measurement_names as mn
from hilsim.core.errors import HilsimError

CC = "compute_capability"
SMS = "core.sm_count"
CLOCK = "core.core_clock_mhz"
SCHED = "core.schedulers_per_sm"
THREADS = "core.max_threads_per_sm"
WARP = "core.warp_size"
SHMEM = "core.shared_mem_per_sm"
LAUNCH = "core.launch_latency_cycles"
L1_SIZE = "l1.capacity_bytes"
L1_LINE = "l1.line_bytes"
L1_SECTOR = "l1.sector_bytes"
L1_HIT = "l1.hit_latency_cycles"
L2_SIZE = "l2.capacity_bytes"
L2_HIT = "l2.hit_latency_cycles"
SHARED_BW = "shared.bandwidth"
SHARED_LAT = "shared.latency_cycles"
DRAM_TYPE = "dram.type"
DRAM_CLOCK = "dram.clock_mhz"
BUS = "dram.bus_width_bits"
DRAM_LAT = "dram.latency_cycles"
TENSOR = "units.tensor.throughput"


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _cc6_on(t: RuleInputs) -> bool:
    """cc >= 6: Accel-Sim's pipeline, unit and register-file layout from Pascal on."""
    return t.major >= 6


def _clock_domains(t: RuleInputs) -> str:
    c = _num(t.float_of(CLOCK))
    dram = t.float_of(DRAM_CLOCK) * 2 / t.dram.command_ratio
    return f"{c}:{c}:{c}:{_num(dram)}"


def _pipeline_widths(t: RuleInputs) -> str:
    s = t.schedulers
    return ",".join(map(str, [s] * 10 + [2 * s] + ([s, s] if _cc6_on(t) else [])))


def _register_banks(t: RuleInputs) -> int:
    return round_up_pow2(t.float_of(TENSOR)) * 2 * 2 // (32 * 4) // 2 * 2


def _dl1(t: RuleInputs) -> OptionValue:
    """Accel-Sim ``l1_config``: the L1 left beside shared memory, 4 sets, MSHRs per warp."""
    sets = t.int_of("l1.sets") if t.has("l1.sets") else 4
    min_l1 = t.int_of(L1_SIZE) - (t.int_of(SHMEM) if _cc6_on(t) else 0)
    if min_l1 <= 0:
        raise HilsimError(
            f"L1 capacity {t[L1_SIZE]} B leaves no L1 after {t[SHMEM]} B of shared memory"
        )
    line = t.int_of(L1_LINE)
    assoc = min_l1 // line // sets
    warps = t.warps_per_sm
    mshr = warps * (line // t.int_of(L1_SECTOR)) * 2
    pre = t.preset.option("-gpgpu_cache:dl1") if t.preset is not None else None
    policy = pre.value.split(",")[1] if pre else "L:T:m:L:L"
    tail = ",".join(pre.value.split(",")[3:]) if pre else "16:0,32"
    notes = [f"write/alloc policy {policy} kept from the preset "
             "(Accel-Sim's l1_config prints the pre-Volta L:L:m:N:L as a placeholder)"]
    # the unified L1 (-gpgpu_unified_l1d_size, the rule below) must be a whole multiple of
    # this cache's size (gpu-cache.h get_max_cache_multiplier asserts): H100's 256 KB
    # less 228 KB of shared memory leaves 28 KB, which does not divide 256
    unified_kb = t.int_of(L1_SIZE) // 1024
    fits = [a for a in range(assoc, 0, -1)
            if sets * a * line % 1024 == 0 and unified_kb % (sets * a * line // 1024) == 0]
    if fits and fits[0] != assoc:
        notes.append(f"ways {assoc} -> {fits[0]}: GPGPU-Sim asserts that sets x ways x line "
                     f"({sets * assoc * line // 1024} KB) divides the unified L1 "
                     f"({unified_kb} KB); the L1 a kernel gets is set at its launch from "
                     "the unified size less its shared memory, whatever this size")
        assoc = fits[0]
    return OptionValue(f"S:{sets}:{line}:{assoc},{policy},A:{mshr}:{warps},{tail}",
                       note="; ".join(notes))


def _dl2(t: RuleInputs) -> OptionValue:
    g = t.l2_geometry
    return OptionValue(f"S:{g.sets}:128:{g.assoc},L:B:m:L:{g.index},A:192:4,32:0,32", note=g.note)


def _measured_shared_bandwidth(t: RuleInputs) -> bool:
    """Only a measured shared bandwidth sets the banks: a preset's value stays."""
    return t.source_kind(SHARED_BW) == "measured" and t.float_of(SHARED_BW) > 0


# --- the on-simulator search's knobs (Knob: hilsim tune --on-simulator) ----------------

#: plausible launch latency in cycles: above it the measurement is a host round trip;
#: below GPGPU-Sim's floor (latency 0: ~274 cycles on SM7_TITANV, whose config leaves the
#: option at its default 0) the search reports the target unreachable
LAUNCH_CYCLES_RANGE = (0.0, 20000.0)
#: the shared-memory bank counts GPGPU-Sim is given
POW2 = tuple(1 << i for i in range(9))


def _value(name: str) -> Quantity:
    return lambda m, _ctx: float(m[name])


def _per_unit_cycles(name: str, unit: str) -> Quantity:
    """Cycles per instruction of one unit: units x 32 lanes x 2 flops / (flop/clk/SM)."""
    return lambda m, ctx: ctx.units[unit] * 32 * 2 / float(m[name])


def _launch_cycles(m: Mapping[str, float], ctx: SearchContext) -> float:
    return float(m[mn.LAUNCH_LATENCY_US]) * ctx.core_mhz


#: the multiply-add kernels of each unit: (the PTX their chains time,
#: :data:`hilsim.microbench.compute.TYPES`; the latency and the throughput measured)
MAD_KERNELS: dict[str, tuple[str, str, str]] = {
    "fp32": ("fma.rn.f32", mn.FP32_LATENCY, mn.FP32_THROUGHPUT),
    "fp64": ("fma.rn.f64", mn.FP64_LATENCY, mn.FP64_THROUGHPUT),
    "int32": ("mad.lo.s32", mn.INT32_LATENCY, mn.INT32_THROUGHPUT),
}
#: the suite's unit probes (:mod:`hilsim.microbench.unit_ops`, cycles), in the order the
#: search lists them: measurement name -> (PTX unit list, entry, the PTX the probe times,
#: :data:`hilsim.microbench.unit_ops.OPS`' ``ptx``). The probes of a SASS sequence's
#: issue (:data:`hilsim.core.measurement_names.SEQUENCE_COSTS`) set no entry: the
#: simulator runs the PTX instruction as one, on one unit, which the sequence's issue
#: would block for cycles the other pipes spend; the base card's interval is kept
UNIT_PROBES: dict[str, tuple[str, int | None, str]] = {
    mn.INT_MAX_LATENCY: ("int", 1, "max.s32 + min.s32"),
    mn.FP_MAX_LATENCY: ("fp", 1, "max.f32 + min.f32"),
    mn.FP_ADD_LATENCY: ("fp", 0, "add.rn.f32"),
    mn.FP_MUL_LATENCY: ("fp", 2, "mul.rn.f32"),
    mn.INT_DIV_LATENCY: ("int", 4, "div.u32 (x = c / x)"),
    mn.FP_DIV_LATENCY: ("fp", 4, "div.rn.f32 (x = c / x)"),
    mn.SHFL_LATENCY: ("int", 5, "shfl.sync.bfly.b32 (d form)"),
    mn.SHFL_INITIATION: ("int", 5, "shfl.sync.bfly.b32 (d form)"),
    mn.SFU_LATENCY: ("sfu", None, "ex2.approx.ftz.f32"),
    mn.SFU_INITIATION: ("sfu", None, "ex2.approx.ftz.f32"),
    mn.DP_ADD_LATENCY: ("dp", 0, "add.f64"),
    mn.DP_ADD_INITIATION: ("dp", 0, "add.f64"),
    mn.DP_MAX_LATENCY: ("dp", 1, "max.f64 + min.f64"),
    mn.DP_MUL_LATENCY: ("dp", 2, "mul.rn.f64"),
    mn.DP_MUL_INITIATION: ("dp", 2, "mul.rn.f64"),
}


def _interval(latency_key: str) -> dict[str, Any]:
    """An initiation interval's order: it moves once its entry's latency is settled
    (a full-occupancy rate is latency-bound near the interval, so points simulated at
    another latency are stale), and never above that latency (measured: SIGSEGV, int MAD
    latency 5 with interval 6)."""
    return {"depends_on": (latency_key,), "waits_for": (latency_key,),
            "interval_of": latency_key}


def _unit_knobs(unit: str, ptx: str, kind: str) -> tuple[Knob, ...]:
    """The knobs of one unit's ``-ptx_opcode_{kind}_{ptx}`` list: the multiply-add entry
    from the suite's chain and rate kernels, the other entries from its unit probes.

    Their own quantities: the rule's value is the whole list in a convention (every entry
    of ADD..MAD the MAD latency; the interval ``floor(32 / (round_up_pow2(flops/2) /
    schedulers))``), while the search sets one entry from its own measurement (the MAD
    interval as units x 64 / rate, the probes' cycles as measured)."""
    out: list[Knob] = []
    if unit in MAD_KERNELS:
        mad_ptx, lat, tput = MAD_KERNELS[unit]
        if kind == "latency":
            out.append(Knob(f"{ptx}_mad_latency", f"lat.{unit}",
                            f"dependent {mad_ptx} chain, one warp (lat_{unit})",
                            (lat,), _value(lat), 3, Slot.LIST_ENTRY))
        else:
            units = {"fp": "sp", "dp": "dp", "int": "int"}[ptx]
            out.append(Knob(f"{ptx}_mad_initiation", f"tput.{unit}",
                            f"{mad_ptx} throughput, full occupancy: units x 64 / flop/clk/SM",
                            (tput,), _per_unit_cycles(tput, units), 3, Slot.LIST_ENTRY,
                            **_interval(f"{ptx}_mad_latency")))
    for name, (lst, entry, probe_ptx) in UNIT_PROBES.items():
        if lst != ptx or not name.endswith(f"_{kind}"):
            continue
        how = ("one-warp {} chain" if kind == "latency"
               else "{} independent chains, 4 warps on one scheduler").format(probe_ptx)
        latency_key = name.removesuffix("_initiation") + "_latency"
        out.append(Knob(name, "units", f"{how} (the suite's unit probe)",
                        (name,), _value(name), entry, Slot.LIST_ENTRY,
                        missing_note="not in the measurements: the base card's entry kept",
                        **(_interval(latency_key) if kind == "initiation" else {})))
    return tuple(out)


def _unit_rules(
    unit: str,
    accelsim: str,
    ptx: str,
    trace: str,
    div_latency: str,
    div_initiation: str,
    fma: bool,
) -> tuple[OptionRule, ...]:
    """The three options of one execution unit (Accel-Sim ``config_fpu`` and friends).

    ``ptx`` / ``trace`` name the unit in the PTX- and trace-mode options. A PTX option
    has five entries (ADD, MAX, MUL, MAD, DIV): the first four get the measured value,
    the DIV entry Accel-Sim's fixed one (``div_initiation`` ``2x`` / ``1x``: twice / once
    the initiation interval); the SFU's options have one entry. ``fma``: the throughput
    counts an FMA as two flops. The trace-mode option keeps the measured latency in
    every convention: the simulator's unit map was measured for the PTX-mode options.
    """
    lat, tput = f"units.{unit}.latency_cycles", f"units.{unit}.throughput"
    inputs = (lat, tput, SCHED)
    init_text = f"init = floor(32 / (round_up_pow2({'flops/2' if fma else 'ops'}) / schedulers))"
    tuner_text = f"{init_text}; lat = floor(latency)"
    div_text = f"; DIV entry fixed {div_latency}" if div_latency else ""

    def formula(t: RuleInputs) -> str:
        return f"{init_text}; {unit_latency(t, unit).formula}"

    def latency(t: RuleInputs) -> Any:
        u = unit_latency(t, unit)
        if not div_latency:  # one entry, reported in the tuner's convention
            return u.value
        return OptionValue(
            f"{u.value},{u.value},{u.value},{u.value},{div_latency}",
            convention=u.convention,
            note=u.note,
        )

    def initiation(t: RuleInputs) -> Any:
        init = t.unit_initiation(unit, fma)
        if not div_initiation:
            return init
        last = {"2x": str(2 * init), "1x": str(init)}.get(div_initiation, div_initiation)
        return f"{init},{init},{init},{init},{last}"

    def trace_pair(t: RuleInputs) -> str:
        return f"{math.floor(t.float_of(lat))},{t.unit_initiation(unit, fma)}"

    div_init_text = {"2x": "2 x init", "1x": "init"}.get(div_initiation, div_initiation)
    return (
        OptionRule(
            f"-ptx_opcode_latency_{ptx}",
            inputs,
            latency,
            lambda t: formula(t) + div_text,
            accelsim,
            doc="lat = floor(latency) (`gpgpusim` convention: the simulator's unit map, "
            f"where measured){div_text}",
            search=_unit_knobs(unit, ptx, "latency"),
        ),
        OptionRule(
            f"-ptx_opcode_initiation_{ptx}",
            inputs,
            initiation,
            formula,
            accelsim,
            doc=init_text + (f"; DIV entry {div_init_text}" if div_initiation else ""),
            search=_unit_knobs(unit, ptx, "initiation"),
        ),
        OptionRule(
            f"-trace_opcode_latency_initiation_{trace}",
            inputs,
            trace_pair,
            tuner_text,
            accelsim,
            doc=f"lat,init: floor(latency), {init_text.removeprefix('init = ')}",
        ),
    )


def _rules(*rules: OptionRule | tuple[OptionRule, ...]) -> tuple[OptionRule, ...]:
    out: list[OptionRule] = []
    for r in rules:
        out.extend(r if isinstance(r, tuple) else (r,))
    return tuple(out)


def _const(value: Any) -> Any:
    return lambda _t: value


#: the L2 clock (the search's; the analytic rule sets L2 = core clock): matched on the L2
#: bandwidth, first guess the base card's L2:core ratio
L2_CLOCK_KNOB = Knob(
    "l2_clock", "l2_bw",
    "L2 read bandwidth (L2 and interconnect clocks, at the base card's ratio to each other)",
    (mn.L2_BANDWIDTH,), _value(mn.L2_BANDWIDTH), 2, Slot.L2_CLOCK,
    # bandwidth grows with the clock, at most proportionally
    slope_from_first_point=True,
    tolerance_rel=0.03,
    # the slice's L2 bandwidth is bound by its requests in flight (Little's law): it moves
    # once the L1, L2 and DRAM latencies and the channels are settled
    depends_on=("mem_channels",),
    waits_for=("mem_channels", "l1_latency", "l2_rop_latency", "dram_latency"),
    insensitive_note="the simulated L2 bandwidth does not move with the L2 clock on this "
    "slice ({lo_q:.4g} at {lo} MHz, {hi_q:.4g} at {hi} MHz; target {target:.4g}): the base "
    "card's ratio to the core clock kept",
)

#: every option the tuner derives, in emission order
OPTION_RULES: tuple[OptionRule, ...] = _rules(
    # --- compute capability (core_config) ---------------------------------------------
    OptionRule("-gpgpu_compute_capability_major", (CC,), lambda t: t.cc_major, "major",
               "core_config"),
    OptionRule("-gpgpu_compute_capability_minor", (CC,), lambda t: t.cc_minor, "minor",
               "core_config"),
    *(
        OptionRule(opt, (CC,), lambda t: t.cc_major + t.cc_minor,
                   "major*10+minor (core_config)", "core_config")
        for opt in (
            "-gpgpu_ptx_force_max_capability",
            "-gpgpu_occupancy_sm_number",
            "-gpgpu_coalesce_arch",
        )
    ),
    # --- system (system_config) ---------------------------------------------------------
    OptionRule("-gpgpu_n_clusters", (SMS,), lambda t: t[SMS], "SM count (system_config)",
               "system_config"),
    OptionRule("-gpgpu_n_cores_per_cluster", (SMS,), _const(1), "1 SM per cluster",
               "system_config"),
    OptionRule("-gpgpu_clock_domains", (CLOCK, DRAM_CLOCK, DRAM_TYPE), _clock_domains,
               "core:core:core:(memory clock x 2 / command ratio) (system_config)",
               "system_config",
               doc="C:C:C:(memory clock x 2 / command ratio); C = the core clock: Accel-Sim's "
               "hw_def base clock, hilsim's measured `sm_clock_mhz` (else the queried max "
               "clock)",
               search=(L2_CLOCK_KNOB,)),
    # --- device query (core_config / shd_config) ------------------------------------------
    *(
        OptionRule(opt, (dotted,), lambda t, d=dotted: t[d],
                   "device query (core_config / shd_config)", "core_config / shd_config")
        for dotted, opt in (
            ("core.registers_per_sm", "-gpgpu_shader_registers"),
            ("core.registers_per_block", "-gpgpu_registers_per_block"),
            (SHMEM, "-gpgpu_shmem_size"),
            (SHMEM, "-gpgpu_shmem_sizeDefault"),
            ("core.shared_mem_per_block", "-gpgpu_shmem_per_block"),
        )
    ),
    OptionRule("-gpgpu_shader_core_pipeline", (THREADS, WARP),
               lambda t: f"{t.int_of(THREADS)}:{t.int_of(WARP)}", "threads/SM:warp size",
               "core_config"),
    OptionRule("-gpgpu_shader_cta", (THREADS, WARP),
               lambda t: round_up_pow2(t.int_of(THREADS) / t.int_of(WARP) / 2),
               "round_up_pow2(warps/SM / 2)", "core_config"),
    # --- schedulers and units (core_config, hw_def) -------------------------------------
    OptionRule("-gpgpu_pipeline_widths", (SCHED, CC), _pipeline_widths,
               "S x10, EX_WB=2S, tensor S,S (cc>=6) (core_config)", "core_config"),
    OptionRule("-gpgpu_num_sched_per_core", (SCHED, CC), lambda t: t.schedulers, "schedulers",
               "core_config"),
    *(
        OptionRule(opt, (SCHED, CC), lambda t: 2 * t.schedulers, "2 x schedulers (core_config)",
                   "core_config")
        for opt in (
            "-gpgpu_operand_collector_num_units_gen",
            "-gpgpu_operand_collector_num_in_ports_gen",
            "-gpgpu_operand_collector_num_out_ports_gen",
        )
    ),
    OptionRule("-gpgpu_inst_fetch_throughput", (SCHED, CC), lambda t: t.schedulers,
               "schedulers (core_config)", "core_config"),
    OptionRule("-gpgpu_l1_banks", (SCHED, CC), lambda t: t.schedulers,
               "schedulers (l1_config)", "l1_config"),
    *(
        OptionRule(opt, (SCHED, CC), lambda t: t.schedulers, "one unit per scheduler",
                   "core_config")
        for opt in ("-gpgpu_num_sp_units", "-gpgpu_num_dp_units", "-gpgpu_num_sfu_units")
    ),
    *(
        OptionRule(opt, (SCHED, CC), lambda t: t.schedulers if _cc6_on(t) else 0,
                   "S if cc>=6 else 0", "core_config")
        for opt in ("-gpgpu_num_int_units", "-gpgpu_num_tensor_core_units")
    ),
    OptionRule("-gpgpu_tensor_core_avail", (SCHED, CC), lambda t: int(_cc6_on(t)),
               "1 if cc>=6 (config_tensor)", "config_tensor"),
    OptionRule("-gpgpu_sub_core_model", (SCHED, CC), lambda t: int(t.major >= 7),
               "1 (sub-core) from Volta (hw_def)", "hw_def"),
    OptionRule("-gpgpu_max_insn_issue_per_warp", (SCHED, CC),
               lambda t: 1 if t.major >= 7 else 2,
               "single issue from Volta, dual before (hw_def)", "hw_def"),
    OptionRule("-gpgpu_dual_issue_diff_exec_units", (SCHED, CC), lambda t: int(t.major > 3),
               "cc major > 3", "core_config"),
    OptionRule("-gpgpu_num_reg_banks", (SCHED, CC, TENSOR), _register_banks,
               "round_up_pow2(tensor FMA/clk/SM) x 2 operands x 2 B / 128 B / 2 ports x 2 "
               "(regfile_bw)", "regfile_bw", when=_cc6_on),
    OptionRule("-gpgpu_reg_file_port_throughput", (SCHED, CC), _const(2),
               "2 ports from Volta (regfile_bw)", "regfile_bw", requires=(TENSOR,),
               when=_cc6_on),
    # --- L1 (l1_config) ------------------------------------------------------------------
    OptionRule("-gpgpu_cache:dl1", (L1_SIZE, SHMEM, L1_LINE, L1_SECTOR, THREADS, WARP), _dl1,
               "sets 4; assoc=(L1 - shared/SM)/line/sets; MSHR=warps x line/sector x 2, "
               "merge=warps (l1_config)", "l1_config", requires=(CC,),
               doc="`S:4:line:assoc,POLICY,A:mshr:warps,16:0,32`; assoc = (L1 - shared/SM) / "
               "line / 4 (shared subtracted from cc 6 on); mshr = warps x line/sector x 2; "
               "POLICY kept from the preset"),
    OptionRule("-gpgpu_adaptive_cache_config", (CC,), lambda t: int(_cc6_on(t)), "cc>=6",
               "l1_config", requires=(L1_SIZE, SHMEM, L1_LINE, L1_SECTOR, THREADS, WARP)),
    OptionRule("-gpgpu_unified_l1d_size", (L1_SIZE,), lambda t: t.int_of(L1_SIZE) // 1024,
               "L1 capacity in KB", "hilsim",
               requires=(SHMEM, L1_LINE, L1_SECTOR, THREADS, WARP, CC)),
    # --- shared memory banks (hilsim: 4 B per bank and clock, 32 banks = 128 B/clk/SM) ----
    OptionRule("-gpgpu_shmem_num_banks", (SHARED_BW,),
               lambda t: round_up_pow2(t.float_of(SHARED_BW) / 4),
               "round_up_pow2(shared B/clk/SM / 4 B per bank)", "hilsim",
               when=_measured_shared_bandwidth,
               doc="round_up_pow2(shared B/clk/SM / 4 B per bank); only from a measurement "
               "(107 B/clk/SM -> 32)",
               # the search's first guess is the nearest power of two, not the next one up
               search=(Knob("shmem_banks", "shared_bw",
                            "shared-memory bandwidth / 4 B per bank (powers of two)",
                            (mn.SHARED_BANDWIDTH,),
                            lambda m, _c: float(m[mn.SHARED_BANDWIDTH]) / 4, domain=POW2),)),
    # --- memory (mem_config) ---------------------------------------------------------------
    OptionRule("-gpgpu_n_mem", (BUS, DRAM_TYPE), lambda t: t.channels,
               lambda t: f"bus width / {t.dram.channel_bits}-bit {t.dram_model} channel "
               "(mem_config)", "mem_config",
               doc="bus width / channel width (HBM 128, GDDR5/5X 32, GDDR6 16 bit)",
               # the search keeps the base card's channel width (Slot.CHANNELS) and
               # matches the bandwidth, which grows with the channels
               search=(Knob("mem_channels", "dram_bw",
                            "DRAM read bandwidth: one channel x channels (bandwidth vs "
                            "channels)", (mn.DRAM_READ_BANDWIDTH,),
                            _value(mn.DRAM_READ_BANDWIDTH), slot=Slot.CHANNELS,
                            proportional=True),)),
    OptionRule("-gpgpu_n_mem_per_ctrlr", (BUS, DRAM_TYPE), _const(1), "1 (mem_config)",
               "mem_config"),
    OptionRule("-gpgpu_dram_buswidth", (BUS, DRAM_TYPE), lambda t: t.dram.channel_bits // 8,
               "channel width / 8 (mem_config)", "mem_config"),
    OptionRule("-gpgpu_dram_burst_length", (BUS, DRAM_TYPE), lambda t: t.dram.burst_length,
               lambda t: f"{t.dram_model} burst (mem_config)", "mem_config",
               doc="burst length: HBM 2, GDDR5/5X 8, GDDR6 16"),
    OptionRule("-dram_data_command_freq_ratio", (BUS, DRAM_TYPE),
               lambda t: t.dram.command_ratio, lambda t: f"{t.dram_model} ratio (mem_config)",
               "mem_config", doc="command frequency ratio: HBM 2, else 4"),
    OptionRule("-dram_dual_bus_interface", (BUS, DRAM_TYPE),
               lambda t: int(t.dram_model == "HBM"), "1 for HBM (mem_config)", "mem_config"),
    OptionRule("-gpgpu_dram_timing_opt", (BUS, DRAM_TYPE, DRAM_CLOCK),
               lambda t: dram_timing(t.dram_model, t.float_of(DRAM_CLOCK)),
               "reference timing x device freq / ref freq, ceil (mem_config)", "mem_config",
               doc="HBM at 1000 MHz or GDDR5 at 1800 MHz reference, each t -> ceil(t x f / "
               "f_ref), f = memory clock x 2 / ratio; CCD = burst / ratio"),
    # --- L2 (l2_config): banks = 2 x channels ---------------------------------------------
    OptionRule("-gpgpu_n_sub_partition_per_mchannel", (L2_SIZE, BUS, DRAM_TYPE), _const(2),
               "2 L2 banks per channel", "l2_config"),
    OptionRule("-icnt_flit_size", (L2_SIZE, BUS, DRAM_TYPE), _const(40),
               "32 B L2 bank width + 8 B control (l2_config)", "l2_config"),
    OptionRule("-gpgpu_memory_partition_indexing", (L2_SIZE, BUS, DRAM_TYPE),
               lambda t: 2 if t.l2_banks in (16, 32, 64) else 0,
               "2 (IPOLY) if banks is 16, 32 or 64 else 0", "l2_config",
               doc="2 (IPOLY) if banks is 16, 32 or 64 (GPGPU-Sim's IPOLY hashes only "
               "those; fewer assert, a count between powers of two loads some slices 1.5x) "
               "else 0"),
    OptionRule("-gpgpu_cache:dl2", (L2_SIZE, BUS, DRAM_TYPE), _dl2,
               "per bank = L2/(2 x channels); 16-way if power of two else 24-way (l2_config)",
               "l2_config",
               doc="per bank = L2 / (2 x channels); a power of two: 16-way, IPOLY `P` if "
               "sets <= 64 else `X`; else 24-way, `P` if sets is a power of two and banks "
               "<= 64; neither (40/50 MiB over 24 or 64 banks): power-of-two sets and the "
               "ways nearest 24 (1-64) that hold it, else the nearest size within 2 % "
               "(hilsim, said on the console)"),
    # --- the fixed latencies and the launch latency (conventions) --------------------------
    OptionRule("-gpgpu_l1_latency", (L1_HIT,), lambda t: t.float_of(L1_HIT),
               "floor(L1 hit) (l1_lat)", "l1_lat", latency=LatencyKind.FIXED,
               search=(Knob("l1_latency", "chase", "L1 hit, .ca pointer chase (l1_lat)"),)),
    OptionRule("-gpgpu_l2_rop_latency", (L2_HIT, L1_HIT),
               lambda t: t.float_of(L2_HIT) - t.pairs.get("l1_for_l2", t.float_of(L1_HIT)),
               "floor(L2 hit - L1 hit) (l2_lat)", "l2_lat", latency=LatencyKind.FIXED,
               doc="floor(L2 hit - L1 hit), L1 from the same run",
               # the search matches the simulated L2 hit itself (its first guess the
               # L2 hit, not L2 - L1): on the simulator the option is most of the hit
               search=(Knob("l2_rop_latency", "chase", "L2 hit, .cg pointer chase (l2_lat)",
                            (mn.L2_HIT_LATENCY,), _value(mn.L2_HIT_LATENCY),
                            depends_on=("l2_clock",)),)),
    OptionRule("-dram_latency", (DRAM_LAT, L2_HIT),
               lambda t: t.float_of(DRAM_LAT) - t.pairs.get("l2_for_dram", t.float_of(L2_HIT)),
               "floor(DRAM - L2 hit) (mem_lat)", "mem_lat", latency=LatencyKind.FIXED,
               doc="floor(DRAM - L2 hit), L2 from the same run",
               search=(Knob("dram_latency", "chase", "DRAM - L2 hit, cold .cg chase (mem_lat)",
                            depends_on=("l2_clock",)),)),
    OptionRule("-gpgpu_smem_latency", (SHARED_LAT,), lambda t: t.float_of(SHARED_LAT),
               "floor(shared) (shared_lat)", "shared_lat", latency=LatencyKind.FIXED,
               search=(Knob("smem_latency", "shared", "shared-memory chase (shared_lat)"),)),
    OptionRule("-gpgpu_kernel_launch_latency", (LAUNCH,), lambda t: t.float_of(LAUNCH),
               "floor(launch latency cycles) (kernel_lat)", "kernel_lat",
               latency=LatencyKind.LAUNCH,
               doc="floor(launch latency cycles); Accel-Sim: event time x base clock / 3; "
               "hilsim: GPU-side start-to-start us of back-to-back empty kernels "
               "(`%globaltimer`) x core MHz, kept from the preset outside 500-20,000 cycles "
               "(a host round trip)",
               # the search reads the launch measurement at the candidate's core clock
               # (the rule a timing field derived from it) and keeps the base card's
               # value outside 0-20,000 cycles (the rule the preset's outside 500-20,000)
               search=(Knob("launch_latency", "launch",
                            "launch latency x core clock (kernel_lat)",
                            (mn.LAUNCH_LATENCY_US,), _launch_cycles, lo=0,
                            target_range=LAUNCH_CYCLES_RANGE,
                            out_of_range="{target:.0f} cycles is outside {range} (a host "
                            "round trip?): the base card's value kept"),)),
    # --- execution units (config_fpu / config_dpu / config_int / config_sfu) -------------
    _unit_rules("fp32", "config_fpu", "fp", "sp", "39", "2x", fma=True),
    _unit_rules("fp64", "config_dpu", "dp", "dp", "330", "130", fma=True),
    _unit_rules("int32", "config_int", "int", "int", "21", "1x", fma=True),
    _unit_rules("sfu", "config_sfu", "sfu", "sfu", "", "", fma=False),
)
