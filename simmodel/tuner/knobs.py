"""What the simulator-in-the-loop tuner measures: each option entry against the
microbenchmark it is set from, and the program that measures it on the simulator.

Accel-Sim (Khairy et al., ISCA 2020), Section II-C: each tuned option follows from one
targeted microbenchmark. Here the same microbenchmark runs on the simulated candidate
(:data:`EVALUATORS`: the suite's family functions over the GPGPU-Sim device) and the
option is moved until the simulated value meets the measured one. A :class:`Knob` is one
option (or one entry of a list option) with

* the measurement names it is set from and the *quantity* the search compares, a
  function increasing in the option (a load-to-use latency; DRAM minus L2 hit for
  ``-dram_latency``, as Accel-Sim's ``mem_lat``; cycles per instruction per unit,
  ``units x 32 lanes x 2 / throughput``, for an initiation interval);
* the first guess from the measurement alone (the Accel-Sim tuner's value: the
  measured cycles, the interval the throughput implies);
* the values the simulator accepts (bounds; powers of two for the shared banks).

Every option a tuned card writes is a knob's (measured), a device fact
(:mod:`hilsim.simmodel.tuner.card`), or the base card's own value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from hilsim.microbench import bandwidth, compute, latency, launch, unit_ops
from hilsim.microbench.device import Device

from hilsim.core import measurement_names as mn
from hilsim.core.measurement import Measurement

#: plausible launch latency in cycles: above it the measurement is a host round trip;
#: below GPGPU-Sim's floor (latency 0: ~274 cycles on SM7_TITANV, whose config leaves the
#: option at its default 0) the search reports the target unreachable
LAUNCH_CYCLES_RANGE = (0.0, 20000.0)


@dataclass(frozen=True)
class Context:
    """The candidate's structure the quantities need (from the base card and facts)."""

    core_mhz: float
    #: execution units per SM by unit list (``sp``, ``dp``, ``int``, ``sfu``)
    units: Mapping[str, int]


Quantity = Callable[[Mapping[str, float], Context], float]


@dataclass(frozen=True)
class Knob:
    """One option (or list entry) set by simulating candidates against a measurement."""

    key: str
    option: str
    #: the list entry (``-ptx_opcode_*``: ADD, MAX, MUL, MAD, DIV, SHFL), None: the value
    entry: int | None
    inputs: tuple[str, ...]
    evaluator: str
    quantity: Quantity
    what: str
    lo: int = 1
    hi: int = 1 << 20
    domain: tuple[int, ...] | None = None
    slope_prior: float = 1.0
    #: a simulated quantity within this fraction of the target settles the search
    #: (0: only an exact match or a bracket of adjacent values)
    tolerance_rel: float = 0.0
    #: knobs whose change makes this knob's earlier simulations stale (its search
    #: restarts from its current value)
    depends_on: tuple[str, ...] = ()
    #: knobs that must be settled before this one moves from its first guess
    waits_for: tuple[str, ...] = ()

    def target(self, measured: Mapping[str, float], ctx: Context) -> float:
        """The quantity of the measurements."""
        return self.quantity(measured, ctx)

    def first_guess(self, measured: Mapping[str, float], ctx: Context) -> int:
        """The Accel-Sim tuner's value from the measurement alone: the quantity, floored."""
        q = self.target(measured, ctx)
        if self.domain:
            return min(self.domain, key=lambda v: (abs(v - q), v))
        return max(self.lo, int(q))


def _value(name: str) -> Quantity:
    return lambda m, _ctx: float(m[name])


def _per_unit_cycles(name: str, unit: str) -> Quantity:
    """Cycles per instruction of one unit: units x 32 lanes x 2 flops / (flop/clk/SM)."""
    return lambda m, ctx: ctx.units[unit] * 32 * 2 / float(m[name])


def _launch_cycles(m: Mapping[str, float], ctx: Context) -> float:
    return float(m[mn.LAUNCH_LATENCY_US]) * ctx.core_mhz


def _dram_minus_l2(m: Mapping[str, float], _ctx: Context) -> float:
    return float(m[mn.DRAM_LATENCY]) - float(m[mn.L2_HIT_LATENCY])


POW2 = tuple(1 << i for i in range(9))

#: the suite's unit probes (cycles, :mod:`hilsim.microbench.unit_ops`): measurement name
#: -> (option, entry, the one-warp check probe's key in
#: :mod:`hilsim.simmodel.gpgpusim.unitprobe`)
PROBE_KNOBS: dict[str, tuple[str, int | None, str]] = {
    "int_max_latency": ("-ptx_opcode_latency_int", 1, "int.max"),
    "fp_max_latency": ("-ptx_opcode_latency_fp", 1, "fp.max"),
    "int_div_latency": ("-ptx_opcode_latency_int", 4, "int.div"),
    "int_div_initiation": ("-ptx_opcode_initiation_int", 4, "int.div"),
    "fp_div_latency": ("-ptx_opcode_latency_fp", 4, "fp.div"),
    "shfl_latency": ("-ptx_opcode_latency_int", 5, "int.shfl"),
    "shfl_initiation": ("-ptx_opcode_initiation_int", 5, "int.shfl"),
    "sfu_latency": ("-ptx_opcode_latency_sfu", None, "sfu.ex2"),
    "sfu_initiation": ("-ptx_opcode_initiation_sfu", None, "sfu.ex2"),
    "dp_add_latency": ("-ptx_opcode_latency_dp", 0, "dp.add"),
    "dp_add_initiation": ("-ptx_opcode_initiation_dp", 0, "dp.add"),
    "dp_max_latency": ("-ptx_opcode_latency_dp", 1, "dp.max"),
    "dp_max_initiation": ("-ptx_opcode_initiation_dp", 1, "dp.max"),
    "dp_mul_latency": ("-ptx_opcode_latency_dp", 2, "dp.mul"),
    "dp_mul_initiation": ("-ptx_opcode_initiation_dp", 2, "dp.mul"),
}


def _latency_of(name: str) -> tuple[str, ...]:
    """An initiation probe's knob depends on the same instruction's latency knob."""
    lat = name.replace("_initiation", "_latency")
    return (lat,) if name.endswith("_initiation") and lat in PROBE_KNOBS else ()


def _knobs() -> tuple[Knob, ...]:
    out = [
        Knob("l1_latency", "-gpgpu_l1_latency", None, (mn.L1_HIT_LATENCY,), "chase",
             _value(mn.L1_HIT_LATENCY), "L1 hit, .ca pointer chase (l1_lat)"),
        Knob("l2_rop_latency", "-gpgpu_l2_rop_latency", None, (mn.L2_HIT_LATENCY,), "chase",
             _value(mn.L2_HIT_LATENCY), "L2 hit, .cg pointer chase (l2_lat)",
             depends_on=("l2_clock",)),
        Knob("dram_latency", "-dram_latency", None, (mn.DRAM_LATENCY, mn.L2_HIT_LATENCY),
             "chase", _dram_minus_l2, "DRAM - L2 hit, cold .cg chase (mem_lat)",
             depends_on=("l2_clock",)),
        Knob("smem_latency", "-gpgpu_smem_latency", None, (mn.SHARED_LATENCY,), "shared",
             _value(mn.SHARED_LATENCY), "shared-memory chase (shared_lat)"),
        Knob("launch_latency", "-gpgpu_kernel_launch_latency", None, (mn.LAUNCH_LATENCY_US,),
             "launch", _launch_cycles, "launch latency x core clock (kernel_lat)", lo=0),
    ]
    for unit, lst, name, tput in (
        ("fp32", "fp", mn.FP32_LATENCY, mn.FP32_THROUGHPUT),
        ("fp64", "dp", mn.FP64_LATENCY, mn.FP64_THROUGHPUT),
        ("int32", "int", mn.INT32_LATENCY, mn.INT32_THROUGHPUT),
    ):
        units = {"fp": "sp", "dp": "dp", "int": "int"}[lst]
        out.append(Knob(f"{lst}_mad_latency", f"-ptx_opcode_latency_{lst}", 3, (name,),
                        f"lat.{unit}", _value(name),
                        f"dependent {compute.TYPES[unit][2]} chain, one warp (lat_{unit})"))
        out.append(Knob(f"{lst}_mad_initiation", f"-ptx_opcode_initiation_{lst}", 3, (tput,),
                        f"tput.{unit}", _per_unit_cycles(tput, units),
                        f"{compute.TYPES[unit][2]} throughput, full occupancy: units x 64 / "
                        "flop/clk/SM",
                        # a full-occupancy rate is latency-bound near the interval: points
                        # simulated at another MAD latency are stale; and an interval above
                        # the entry's latency crashes the simulator (measured: SIGSEGV, int
                        # MAD latency 5, interval 6), so the interval moves once the
                        # latency is settled
                        depends_on=(f"{lst}_mad_latency",),
                        waits_for=(f"{lst}_mad_latency",)))
    out.append(Knob("shmem_banks", "-gpgpu_shmem_num_banks", None, (mn.SHARED_BANDWIDTH,),
                    "shared_bw", lambda m, _c: float(m[mn.SHARED_BANDWIDTH]) / 4,
                    "shared-memory bandwidth / 4 B per bank (powers of two)", domain=POW2))
    ops = {n: op for op in unit_ops.OPS.values()
           for n in (op.latency_name, op.initiation_name) if n}
    for name, (option, entry, _key) in PROBE_KNOBS.items():
        out.append(Knob(name, option, entry, (name,), "units", _value(name),
                        f"one-warp {ops[name].ptx} "
                        f"{'chain' if 'latency' in name else 'independent chains'} "
                        "(the suite's unit probe)",
                        depends_on=_latency_of(name), waits_for=_latency_of(name)))
    return tuple(out)


KNOBS: tuple[Knob, ...] = _knobs()
KNOB_BY_KEY = {k.key: k for k in KNOBS}

Evaluator = Callable[[Device], list[Measurement]]


#: evaluator -> the suite's function that measures its names on a device
EVALUATORS: dict[str, Evaluator] = {
    "chase": latency.chase_latencies,
    "shared": lambda d: [latency.shared_latency(d)],
    "launch": launch.launch_latency,
    **{f"lat.{u}": (lambda d, u=u: [compute.latency(d, u)]) for u in ("fp32", "fp64", "int32")},
    **{f"tput.{u}": (lambda d, u=u: [compute.throughput(d, u)])
       for u in ("fp32", "fp64", "int32")},
    "shared_bw": lambda d: [bandwidth.onchip(d, "shared")],
    "l2_bw": bandwidth.l2,
    "dram_bw": lambda d: [bandwidth.dram_read_slice(d)],
    # the suite's unit probes, every one in one program (as the suite runs them on a
    # simulated card)
    "units": lambda d: unit_ops.simulated(d),
}
#: evaluators whose kernels the suite runs on a memory slice (the slice's SMs matter)
MEMORY_EVALUATORS = ("l2_bw", "dram_bw")
#: evaluators whose timed loops touch no global memory (register chains, shared memory,
#: an empty kernel's launch): the tuner runs them on one memory channel, which gives the
#: same values as the candidate's every channel (measured on a 256-channel SM86 candidate
#: for SM90_H100: every value equal, the same simulated cycles for all but the two
#: shared-memory programs' untimed uploads) at a fraction of the simulator's time (each
#: cycle steps every channel and L2 bank: 31 s -> 2 s wall for an FFMA rate)
ONE_CHANNEL_EVALUATORS = ("lat.fp32", "lat.fp64", "lat.int32", "tput.fp32", "tput.fp64",
                          "tput.int32", "shared", "shared_bw", "launch")


def applicable(knob: Knob, measured: Mapping[str, Any]) -> bool:
    """Whether every measurement the knob needs is present."""
    return all(name in measured for name in knob.inputs)
