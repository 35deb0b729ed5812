"""Latency conventions: which value a latency option gets (Accel-Sim paper, Section IV).

Two conventions for the four fixed latencies (the shipped configs are hand-correlated):

* ``accelsim-tuner``: the value Accel-Sim's microbenchmarks print (raw hardware
  latency, L2 = L2 hit - L1 hit, DRAM = DRAM - L2 hit, truncated to an integer);
* ``simulator-corrected``: the tuner value minus GPGPU-Sim's own pipeline offset,
  where that offset is known (:data:`PIPELINE_OFFSETS`), else the tuner value;

and a third, ``gpgpusim``: the values that make GPGPU-Sim reproduce the measured
latencies, from the map measured on the simulator
(:mod:`hilsim.simmodel.tuner.calibration`). Every other option follows the
``accelsim-tuner`` convention, or is the preset's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hilsim.simmodel.tuner.calibration import tuned_options, unit_latency_option
from hilsim.simmodel.tuner.rule import OptionValue, RuleInputs

CONVENTIONS = ("accelsim-tuner", "simulator-corrected", "gpgpusim")

# GPGPU-Sim pipeline offsets per compute capability: tuner value - shipped value.
# sm_70: TITAN V, Accel-Sim GPU_Microbenchmark output (accel-sim-framework commit 2260456,
# util/tuner/GPU_Microbenchmark/output.file) vs the shipped, hand-correlated
# SM7_TITANV gpgpusim.config (gpgpu-sim_distribution commit 667834c). Same card, same
# measurements: 33-20, 177-160, 104-100, 27-20. No other card has both here.
PIPELINE_OFFSETS: dict[str, dict[str, int]] = {
    "7.0": {
        "-gpgpu_l1_latency": 13,
        "-gpgpu_l2_rop_latency": 17,
        "-dram_latency": 4,
        "-gpgpu_smem_latency": 7,
    }
}
PIPELINE_OFFSET_SOURCE = (
    "TITAN V: Accel-Sim ubench output (accel-sim-framework 2260456 output.file) minus shipped "
    "SM7_TITANV.gpgpusim.config (gpgpu-sim_distribution 667834c)"
)


def pipeline_offsets(t: RuleInputs) -> dict[str, int]:
    """The pipeline offsets known for the timing config's compute capability (maybe none)."""
    cc = t.timing.get("compute_capability")
    return PIPELINE_OFFSETS.get(str(cc.value) if cc is not None else "", {})


def fixed_latency(option: str, quantity: float, formula: str, t: RuleInputs) -> OptionValue:
    """A fixed latency in the ``accelsim-tuner`` or ``simulator-corrected`` convention.

    ``quantity`` is the tuner quantity in cycles (e.g. L2 hit - L1 hit); the tuner value
    is ``max(1, floor(quantity))``.
    """
    raw = max(1, math.floor(quantity))
    offsets = pipeline_offsets(t)
    if t.convention == "simulator-corrected" and option in offsets:
        sm = str(t["compute_capability"]).replace(".", "")
        return OptionValue(
            max(1, raw - offsets[option]),
            formula=f"{formula} - {offsets[option]}",
            convention="simulator-corrected",
            raw_value=str(raw),
            note=f"pipeline offset {offsets[option]} for sm_{sm}: {PIPELINE_OFFSET_SOURCE}",
        )
    note = ""
    if t.convention == "simulator-corrected":
        note = "no pipeline offset known for this compute capability; tuner value"
    return OptionValue(raw, note=note)


def launch_latency_option(cycles: float) -> OptionValue:
    """The launch latency in the ``accelsim-tuner`` convention: floor(cycles)."""
    return OptionValue(math.floor(cycles))


@dataclass(frozen=True)
class LatencyQuantity:
    """One fixed latency's tuner quantity, as the simulator map takes it."""

    option: str
    quantity: float
    inputs: tuple[str, ...]
    formula: str


def simulator_latencies(
    latencies: list[LatencyQuantity], launch_cycles: float | None, t: RuleInputs
) -> dict[str, OptionValue]:
    """The ``gpgpusim`` convention: option -> value from the map measured on the simulator.

    The map couples the four fixed latencies, so it takes all of them at once (a
    one-line error names the missing ones) and the launch latency when measured.
    """
    rows = tuned_options(
        [(q.option, q.quantity, list(q.inputs), q.formula) for q in latencies],
        launch_cycles,
        str(t["compute_capability"]),
    )
    return {
        name: OptionValue(
            value, formula=formula, note=note, convention="gpgpusim", inputs=tuple(inputs)
        )
        for name, value, inputs, formula, note in rows
    }


@dataclass(frozen=True)
class UnitLatency:
    """An execution unit's latency option value in the chosen convention."""

    value: int
    formula: str
    convention: str
    note: str


def unit_latency(t: RuleInputs, unit: str) -> UnitLatency:
    """The multiply-add latency of ``unit``: floor(measured), or the simulator's unit map.

    In the ``gpgpusim`` convention the map measured on the simulator
    (:func:`~hilsim.simmodel.tuner.calibration.unit_latency_option`) gives the value
    where one exists for the compute capability; elsewhere the tuner value stays.
    """
    measured = t.float_of(f"units.{unit}.latency_cycles")
    if t.convention == "gpgpusim" and t.has("compute_capability"):
        mapped = unit_latency_option(unit, measured, str(t["compute_capability"]))
        if mapped is not None:
            return UnitLatency(mapped[0], f"lat = {mapped[1]}", "gpgpusim", mapped[2])
    return UnitLatency(math.floor(measured), "lat = floor(latency)", "accelsim-tuner", "")
