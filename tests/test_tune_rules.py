"""The tuner's option rules are a consistent table, documented in docs/tuner.md.

Every rule names a simulator option once and reads only timing fields that exist; the
option table of docs/tuner.md is generated from the rules and must be up to date; the
engine derives options in table order and a rule added to the table is evaluated like
the shipped ones.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hilsim.simmodel.cache_option import cache_geometry, normalize_cache_string
from hilsim.simmodel.config import unit_for
from hilsim.simmodel.presets import load_preset
from hilsim.simmodel.tuner import read_microbench, tune
from hilsim.simmodel.tuner.docs import BEGIN, END, option_table, with_option_table
from hilsim.simmodel.tuner.engine import derive_options
from hilsim.simmodel.tuner.rule import LatencyKind, OptionRule, RuleInputs
from hilsim.simmodel.tuner.rules import OPTION_RULES

from hilsim.core.errors import HilsimError
from hilsim.core.measurement import read_microbench_json

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "tuner.md"
SIMULATED_QV100 = ROOT / "tests" / "data" / "microbench" / "gpgpusim" / "SM7_QV100.microbench.json"


def test_every_option_has_one_rule() -> None:
    names = [r.option for r in OPTION_RULES]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    assert all(n.startswith("-") for n in names)


@pytest.mark.parametrize("rule", OPTION_RULES, ids=lambda r: r.option)
def test_a_rule_reads_timing_fields_and_is_documented(rule: OptionRule) -> None:
    for dotted in (*rule.inputs, *rule.requires):
        unit_for(dotted)  # KeyError: not a timing field
    assert rule.inputs, "an option without inputs is a preset value, not a rule"
    assert rule.accelsim
    assert isinstance(rule.formula, str) or rule.doc, "a computed formula needs doc text"


def test_docs_option_table_is_up_to_date() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert with_option_table(text) == text, "run: python benchmarks/tuner_docs.py"
    for rule in OPTION_RULES:
        assert f"`{rule.option}`" in text.split(BEGIN)[1].split(END)[0]


def test_docs_markers_are_required() -> None:
    with pytest.raises(HilsimError, match="markers"):
        with_option_table("no table here")


@pytest.mark.parametrize("convention", ["accelsim-tuner", "simulator-corrected", "gpgpusim"])
def test_derived_options_follow_the_table(convention: str) -> None:
    measurements, facts = read_microbench(SIMULATED_QV100)
    tuned = tune(measurements=measurements, facts=facts, convention=convention)
    derived = derive_options(tuned.timing, tuned.preset, convention)
    assert len(derived) > 50
    order = {r.option: i for i, r in enumerate(OPTION_RULES)}
    positions = [order[d.name] for d in derived]
    assert positions == sorted(positions)
    rules = {r.option: r for r in OPTION_RULES}
    for d in derived:
        rule = rules[d.name]
        if convention == "gpgpusim" and rule.latency is LatencyKind.FIXED:
            continue  # solved together: the four latencies' inputs
        assert d.inputs == list(rule.inputs), d.name


def test_a_new_rule_is_one_entry() -> None:
    preset = load_preset("QV100")
    extra = OptionRule(
        "-gpgpu_example_sms_x2",
        ("core.sm_count",),
        lambda t: 2 * t.int_of("core.sm_count"),
        "2 x SMs",
        "hilsim",
    )
    derived = derive_options(preset.timing, preset, "accelsim-tuner", rules=(*OPTION_RULES, extra))
    (d,) = [d for d in derived if d.name == extra.option]
    assert d.value == str(2 * preset.timing.get("core.sm_count").value)
    assert d.inputs == ["core.sm_count"] and d.formula == "2 x SMs"
    assert "`-gpgpu_example_sms_x2`" in option_table((extra,))


def test_rule_inputs_terms() -> None:
    preset = load_preset("QV100")
    t = RuleInputs(preset.timing, preset)
    assert t.dram_model == "HBM" and t.dram.channel_bits == 128
    assert t.l2_banks == 2 * t.channels
    assert t.l2_geometry.assoc in (16, 24)


def test_cache_geometry_is_public() -> None:
    assert cache_geometry("S:4:128:64,L:T:m:L:L,A:512:8,16:0,32") == (4, 128, 64)
    assert cache_geometry("32,128,24") == (32, 128, 24)
    assert normalize_cache_string("S:4,128,64,L:T:m:L:L") == "S:4:128:64,L:T:m:L:L"
    with pytest.raises(HilsimError, match="not <S"):
        cache_geometry("S:x")


def _write(tmp_path: Path, rows: list[dict]) -> Path:
    path = tmp_path / "mb.json"
    path.write_text(json.dumps({"schema": "hilsim.microbench/1", "measurements": rows}))
    return path


def test_one_reader_accepts_a_sample_count(tmp_path: Path) -> None:
    rows = [{"name": "l1_hit_latency", "value": 30.0, "unit": "cycles", "samples": 5}]
    (m,), device = read_microbench_json(_write(tmp_path, rows))
    assert len(m.samples) == 5 and device == {}


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"name": "l1_hit_latency", "value": True, "unit": "cycles"}, "not a number"),
        ({"name": "l1_hit_latency", "value": "30", "unit": "cycles"}, "not a number"),
        ({"name": "l1_hit_latency", "value": 30, "unit": "cycles", "samples": ["a"]}, "malformed"),
        ({"name": "l1_hit_latency", "unit": "cycles"}, "needs name, value and unit"),
    ],
)
def test_one_reader_one_line_errors(tmp_path: Path, row: dict, message: str) -> None:
    path = _write(tmp_path, [row])
    with pytest.raises(HilsimError, match=message) as err:
        read_microbench_json(path)
    assert "\n" not in str(err.value) and str(path) in str(err.value)
