"""The option entries the on-simulator search sets, read from the rule table.

Each :class:`~hilsim.simmodel.tuner.rule.OptionRule` of
:data:`~hilsim.simmodel.tuner.rules.OPTION_RULES` carries its :class:`Knob` specs (the
microbenchmark, the quantity compared, the search's bounds and order); this module
reads them once: each knob gets its rule's option, and a knob that leaves its inputs and
quantity empty gets the rule's own (its timing fields as the measurement names that set
them, :data:`hilsim.simmodel.tuner.overlay.MEASURED_FIELDS`, and its value over those
measurements). Every option a tuned card writes is a knob's (measured), a device fact
(:mod:`hilsim.simmodel.tuner.card`), or the base card's own value.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from hilsim.simmodel.config import Source, Sourced, TimingConfig, unit_for
from hilsim.simmodel.tuner.overlay import MEASURED_FIELDS
from hilsim.simmodel.tuner.rule import Knob, OptionRule, Quantity, RuleInputs, SearchContext
from hilsim.simmodel.tuner.rules import OPTION_RULES

#: the order of the searches in each round's proposals, the candidate's settings and the
#: report's targets: the order they were first written in, kept so that reports stay
#: comparable from one version to the next; a knob not named here follows them in table
#: order
SEARCH_ORDER: tuple[str, ...] = (
    "l1_latency", "l2_rop_latency", "dram_latency", "smem_latency", "launch_latency",
    "fp_mad_latency", "fp_mad_initiation", "dp_mad_latency", "dp_mad_initiation",
    "int_mad_latency", "int_mad_initiation", "shmem_banks",
    "int_max_latency", "fp_max_latency", "int_div_latency",
    "fp_div_latency", "shfl_latency", "shfl_initiation", "sfu_latency", "sfu_initiation",
    "dp_add_latency", "dp_add_initiation", "dp_max_latency",
    "dp_mul_latency", "dp_mul_initiation", "fp_add_latency", "fp_mul_latency",
    "mem_channels", "l2_clock",
)

#: timing field -> the measurement that sets it
_MEASUREMENT_OF = {field: name for name, field in MEASURED_FIELDS.items()}


def rule_quantity(rule: OptionRule) -> Quantity:
    """The rule's value over measurements: its timing fields set from the measurements
    of the same names (no preset, the ``accelsim-tuner`` convention's raw value)."""

    def quantity(measured: Mapping[str, float], _ctx: SearchContext) -> float:
        timing = TimingConfig(name="measured")
        for field in rule.inputs:
            value = Sourced(float(measured[_MEASUREMENT_OF[field]]), unit_for(field),
                            Source("measured", _MEASUREMENT_OF[field]))
            timing = timing.set(field, value)
        return float(rule.value(RuleInputs(timing, None)))

    return quantity


def read_knobs(rules: Sequence[OptionRule] = OPTION_RULES) -> tuple[Knob, ...]:
    """Every knob of ``rules`` with its option, inputs and quantity, in search order."""
    out = []
    for rule in rules:
        for knob in rule.search:
            inputs = knob.inputs or tuple(_MEASUREMENT_OF[f] for f in rule.inputs)
            quantity = knob.quantity or rule_quantity(rule)
            out.append(dataclasses.replace(knob, option=rule.option, inputs=inputs,
                                           quantity=quantity))
    rank = {key: i for i, key in enumerate(SEARCH_ORDER)}
    return tuple(sorted(out, key=lambda k: rank.get(k.key, len(rank))))


KNOBS: tuple[Knob, ...] = read_knobs()
KNOB_BY_KEY = {k.key: k for k in KNOBS}


def applicable(knob: Knob, measured: Mapping[str, Any]) -> bool:
    """Whether every measurement the knob needs is present."""
    return all(name in measured for name in knob.inputs)
