"""The on-simulator search's knobs as fields of the option rules (simmodel/tuner/rules.py):
one table for both tuners. No simulator needed.

The knobs are read once (simmodel/tuner/knobs.py); these checks hold the table to what
the search assumes: every key, evaluator and dependency it names exists, an interval's
latency is the same entry of the sibling list, the texts name the PTX the suite's kernels
time, and where a knob's quantity is its rule's value the search's first guess is the
value the analytic tuner emits for the same file.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hilsim.microbench import compute, unit_ops
from hilsim.simmodel.tuner import tune_files
from hilsim.simmodel.tuner.evaluators import EVALUATORS
from hilsim.simmodel.tuner.knobs import KNOB_BY_KEY, KNOBS, SEARCH_ORDER, read_knobs
from hilsim.simmodel.tuner.rule import SearchContext, Slot
from hilsim.simmodel.tuner.rules import MAD_KERNELS, OPTION_RULES, UNIT_PROBES

from hilsim.core import measurement_names as mn
from hilsim.core.measurement import read_microbench_json

DATA = Path(__file__).parent / "data"
FILES = (DATA / "silicon" / "H100" / "microbench.json",
         DATA / "microbench" / "gpgpusim" / "heldout" / "SM7_GV100.microbench.json",
         DATA / "microbench" / "gpgpusim" / "SM75_RTX2060.microbench.json")
CTX = SearchContext(1500.0, {"sp": 4, "dp": 2, "int": 4, "sfu": 4})


def _measured(path: Path) -> dict[str, float]:
    rows, _ = read_microbench_json(path)
    return {m.name: float(m.value) for m in rows if m.valid and m.value is not None}


def test_every_knob_is_a_rules_and_names_what_exists() -> None:
    """Keys unique, each knob's option its rule's, its evaluator one the search runs, its
    dependencies knobs, an interval's latency the same entry of the latency list."""
    assert len(KNOB_BY_KEY) == len(KNOBS) == sum(len(r.search) for r in OPTION_RULES)
    assert set(SEARCH_ORDER) <= set(KNOB_BY_KEY)  # no stale name (a new knob need not be listed)
    by_option = {r.option: r for r in OPTION_RULES}
    for k in KNOBS:
        assert k.key in {x.key for x in read_knobs([by_option[k.option]])}
        assert k.evaluator in EVALUATORS and k.inputs and k.quantity is not None
        assert set(k.depends_on) | set(k.waits_for) <= set(KNOB_BY_KEY), k.key
        if k.interval_of is not None:
            lat = KNOB_BY_KEY[k.interval_of]
            assert (lat.entry, lat.slot) == (k.entry, Slot.LIST_ENTRY) == (k.entry, k.slot)
            assert lat.option == k.option.replace("_initiation_", "_latency_")
            assert k.interval_of in k.depends_on and k.interval_of in k.waits_for
        elif k.slot is Slot.LIST_ENTRY:
            assert "_latency_" in k.option, k.key


def test_the_knobs_texts_name_the_ptx_the_suite_times() -> None:
    """The rule table names each kernel's PTX without importing the families (the analytic
    tuner loads without them); here the families say what they time."""
    for unit, (ptx, latency_name, throughput_name) in MAD_KERNELS.items():
        assert compute.TYPES[unit][2] == ptx
        assert {latency_name, throughput_name} <= {m for m in KNOB_BY_KEY.values()
                                                   for m in m.inputs}
    ops = {n: op for op in unit_ops.OPS.values()
           for n in (op.latency_name, op.initiation_name) if n}
    assert set(UNIT_PROBES) == set(unit_ops.measurement_names()) - mn.SEQUENCE_COSTS
    for name, (_lst, _entry, ptx) in UNIT_PROBES.items():
        assert ops[name].ptx == ptx
        assert ptx in KNOB_BY_KEY[name].what


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.parent.name + "/" + p.name)
def test_a_knob_on_its_rules_value_starts_where_the_analytic_tuner_ends(path: Path) -> None:
    """``-gpgpu_l1_latency``, ``-dram_latency`` and ``-gpgpu_smem_latency`` match the rule's
    own value on the simulator (their knobs give no quantity of their own): the search's
    first guess is the option the analytic tuner (``accelsim-tuner``) emits for the file,
    and the target the unfloored formula (``-dram_latency``: DRAM - L2 hit)."""
    from_rule = [r.search[0] for r in OPTION_RULES if r.search and r.search[0].quantity is None]
    assert sorted(k.key for k in from_rule) == ["dram_latency", "l1_latency", "smem_latency"]
    measured = _measured(path)
    emitted = {o.name: o.value for o in tune_files(path).options}
    for knob in from_rule:
        k = KNOB_BY_KEY[knob.key]
        assert str(k.first_guess(measured, CTX)) == emitted[k.option], k.key
    dram = KNOB_BY_KEY["dram_latency"]
    assert dram.inputs == ("dram_latency", "l2_hit_latency")
    assert dram.target(measured, CTX) == measured["dram_latency"] - measured["l2_hit_latency"]


def test_no_knob_puts_a_sequence_cost_on_a_unit() -> None:
    """The ``div.u32`` and ``max.f64`` initiation probes time the issue of a SASS
    sequence (tens of cycles); GPGPU-Sim runs the PTX instruction as one, on the SFU / DP
    unit: no knob reads them, so the tuned card keeps the base's interval, while the
    ADD and MUL of the fp list are set from their own probes."""
    read = {name for knob in KNOBS for name in knob.inputs}
    assert mn.SEQUENCE_COSTS and not read & mn.SEQUENCE_COSTS
    assert {mn.FP_ADD_LATENCY, mn.FP_MUL_LATENCY} <= read
    assert UNIT_PROBES[mn.FP_ADD_LATENCY][:2] == ("fp", 0)
    assert UNIT_PROBES[mn.FP_MUL_LATENCY][:2] == ("fp", 2)
