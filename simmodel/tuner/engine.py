"""Evaluate the option rules: every option a timing config gives, with its provenance.

Accel-Sim paper, Section II-C: the tuner's formulas (:mod:`hilsim.simmodel.tuner.rules`)
turn the device query and the microbenchmarks' numbers into ``-option`` values; the
latency conventions (:mod:`hilsim.simmodel.tuner.conventions`, Section IV) decide the four
fixed latencies and the launch latency.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hilsim.simmodel.config import TimingConfig
from hilsim.simmodel.presets import Preset
from hilsim.simmodel.tuner.conventions import (
    LatencyQuantity,
    fixed_latency,
    launch_latency_option,
    simulator_latencies,
)
from hilsim.simmodel.tuner.rule import LatencyKind, OptionRule, OptionValue, RuleInputs
from hilsim.simmodel.tuner.rules import OPTION_RULES


@dataclass
class Derived:
    """An option value computed from timing values, with inputs and formula."""

    name: str
    value: str
    inputs: list[str]
    formula: str
    convention: str = "accelsim-tuner"
    raw_value: str | None = None  # accelsim-tuner value when convention is corrected
    note: str = ""


def derive_options(
    cfg: TimingConfig,
    preset: Preset,
    convention: str,
    pairs: Mapping[str, float] | None = None,
    rules: Sequence[OptionRule] = OPTION_RULES,
) -> list[Derived]:
    """Every option that ``rules`` compute from ``cfg``, in table order.

    ``pairs`` may hold ``l1_for_l2`` / ``l2_for_dram``: the L1 (L2) latency measured in
    the same run as the L2 (DRAM) latency, which Accel-Sim's l2_lat (mem_lat) subtracts.
    In the ``gpgpusim`` convention the fixed and launch latencies are solved together
    when the table reaches the first of them.
    """
    t = RuleInputs(cfg, preset, convention, dict(pairs or {}))
    simulated: dict[str, OptionValue] | None = None
    out: list[Derived] = []
    for rule in rules:
        if convention == "gpgpusim" and rule.latency is not LatencyKind.NONE:
            if simulated is None:
                simulated = _simulator_map(rules, t)
            if rule.option in simulated and rule.applies(t):
                out.append(_derived(rule, simulated[rule.option], t))
            continue
        if not rule.applies(t):
            continue
        result = rule.value(t)
        if rule.latency is LatencyKind.FIXED:
            result = fixed_latency(rule.option, float(result), rule.formula_text(t), t)
        elif rule.latency is LatencyKind.LAUNCH:
            result = launch_latency_option(float(result))
        out.append(_derived(rule, result, t))
    return out


def _simulator_map(rules: Sequence[OptionRule], t: RuleInputs) -> dict[str, OptionValue]:
    latencies = [
        LatencyQuantity(r.option, float(r.value(t)), r.inputs, r.formula_text(t))
        for r in rules
        if r.latency is LatencyKind.FIXED and r.applies(t)
    ]
    launch = next((r for r in rules if r.latency is LatencyKind.LAUNCH and r.applies(t)), None)
    cycles = float(launch.value(t)) if launch is not None else None
    return simulator_latencies(latencies, cycles, t)


def _derived(rule: OptionRule, result: object, t: RuleInputs) -> Derived:
    v = result if isinstance(result, OptionValue) else OptionValue(result)
    return Derived(
        rule.option,
        str(v.value),
        list(v.inputs if v.inputs is not None else rule.inputs),
        v.formula if v.formula is not None else rule.formula_text(t),
        v.convention,
        v.raw_value,
        v.note,
    )
