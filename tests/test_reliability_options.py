"""Option values and numbers that used to end in an internal error (exit 1), a run of
minutes or a silent wrong result: each is now one line (exit 2) or a correct result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hilsim.analyzer.validate.text import decomposition_markdown, markdown_text

from tests import reliability_inputs as inputs
from tests.fuzz.promise import run_cli

EXAMPLE = inputs.SIMULATED_V100
BUNDLE, PLAN, TIMING = (EXAMPLE / "reference.bundle", EXAMPLE / "plans" / "stem.json",
                        EXAMPLE / "tuned-timing.json")
MICROBENCH = inputs.DATA / "microbench" / "gpgpusim" / "SM7_QV100.microbench.json"


@pytest.mark.parametrize("argv, what", [
    (["compare", BUNDLE, "--workers", "0"], "--workers must be at least 1"),
    (["compare", BUNDLE, "--budget-of", "nope"], "--budget-of 'nope': not a method"),
    (["compare", BUNDLE, "--methods", ""], "no method named"),
    (["compare", BUNDLE, "--methods", " , "], "no method named"),
    (["compare", BUNDLE, "--seeds", "9223372036854775808"], "max_seeds"),
    (["evaluate", BUNDLE, "-m", "random", "--seeds", "0"], "expected a number of seeds >= 1"),
    (["evaluate", BUNDLE, "-m", "random", "--seeds", "-1"], "expected a number of seeds >= 1"),
    (["evaluate", BUNDLE, "-m", "random", "--seeds", "100000000"], "max_seeds"),
    (["evaluate", BUNDLE, "-m", "random", "-p", "seed=18446744073709551616"], "2**32"),
    (["recommend", BUNDLE, "--target-error", "1%", "--seeds", "0"], "seeds >= 1"),
    (["recommend", BUNDLE, "--target-error", "1%", "--seeds", "-1"], "seeds >= 1"),
    (["recommend", BUNDLE, "--target-error", "1%", "--budget", "-1"], "expected seconds >= 0"),
    (["recommend", BUNDLE, "--target-error", "1%", "--budget", "nan"], "expected seconds >= 0"),
    (["plan", BUNDLE, "-m", "stem", "-p", "confidence=1e-300"], "confidence must be"),
    (["plan", BUNDLE, "-m", "stem", "-p", "max_depth=inf"], "max_depth must be"),
    (["plan", BUNDLE, "-m", "random", "-p", "n_samples=inf"], "n_samples must be"),
    (["plan", BUNDLE, "-m", "random", "-p", "budget_ns=inf"], "budget_ns must be"),
    (["plan", BUNDLE, "-m", "pka", "-p", "k_max=100000"], "k_max must be"),
    (["plan", BUNDLE, "-m", "megsim", "-p", "n_init=100000000"], "n_init must be"),
])
def test_option_values_are_one_line(argv: list, what: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, lines, _ = run_cli([*map(str, argv), "-o", str(out)], 0)
    assert code == 2 and what in lines[0], lines
    assert not out.exists()


@pytest.mark.parametrize("timeout", ["-1", "0", "nan", "inf"])
def test_simulate_timeout_that_is_not_a_time(timeout: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, lines, _ = run_cli(["simulate", str(PLAN), "--card", "SM7_QV100", "-o", str(out),
                              "--timeout", timeout, "--", "true"], 0)
    assert code == 2 and "--timeout" in lines[0], lines
    assert not out.exists()


@pytest.mark.parametrize("variation", [
    "l2_size=x1e308", "sm_count=x1e308", "sm_clock=x1e-308", "dram_clock=x1e-308",
    "l1_latency=x1e308", "sm_clock=1e-320", "dram_bandwidth=x1e-300", "l2_size=1e300",
])
def test_dse_variations_past_the_model_are_one_line(variation: str, tmp_path: Path) -> None:
    out = tmp_path / "dse.json"
    code, lines, _ = run_cli(["dse", str(BUNDLE), "--plan", str(PLAN), "--config", str(TIMING),
                              "--vary", variation, "-o", str(out)], 0)
    assert code == 2 and "--vary" in lines[0], lines
    assert not out.exists()


def test_dse_json_is_strict_json(tmp_path: Path) -> None:
    out = tmp_path / "dse.json"
    code, lines, _ = run_cli(["dse", str(BUNDLE), "--plan", str(PLAN), "--config", str(TIMING),
                              "--vary", "sm_clock=x1e6", "--vary", "l2_size=x2", "-o",
                              str(out)], 0)
    assert code == 0, lines
    text = out.read_text()
    json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} in dse.json"))


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e999", "1" * 400])
def test_tune_device_facts_that_are_not_numbers(value: str, tmp_path: Path) -> None:
    facts = tmp_path / "facts.json"
    facts.write_text(f'{{"sm_count": {value}, "max_sm_clock_mhz": {value}}}')
    code, lines, _ = run_cli(["tune", str(MICROBENCH), "--device-facts", str(facts), "-o",
                              str(tmp_path / "t")], 0)
    assert code == 2 and "facts.json" in lines[0], lines
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize(
    "facts,words",
    [
        ({"sm_count": 10**12}, "sm_count"),  # no GPU has 10^12 SMs
        ({"sm_count": 80.5}, "sm_count"),
        ({"multiProcessorCount": "many"}, "multiProcessorCount"),
        ({"clockRate": 3}, "clockRate"),  # 3 kHz: a clock that rounds to 0 MHz
        ({"max_sm_clock_mhz": 0.0001}, "max_sm_clock_mhz"),
        ({"warp_size": 0}, "warp_size"),
        ({"memoryBusWidth": -4096}, "memoryBusWidth"),
        ({"l2CacheSize": 1e30}, "l2CacheSize"),
        ({"compute_capability": "seven"}, "compute capability"),
        ({"major": "x", "minor": 0}, "major 'x' is not a compute capability"),
        ({"memory_type": 5}, "memory_type"),
    ],
)
def test_tune_device_facts_no_gpu_has_refused(facts, words, tmp_path: Path) -> None:
    """A fact no GPU has is refused in one line before anything is tuned or simulated
    (the tuned card would carry it), from a facts file or microbench.json's device."""
    path = tmp_path / "facts.json"
    path.write_text(json.dumps(facts))
    code, lines, _ = run_cli(["tune", str(MICROBENCH), "--device-facts", str(path), "-o",
                              str(tmp_path / "t")], 0)
    assert code == 2 and "facts.json" in lines[0] and words in lines[0], lines
    assert any(w in lines[0] for w in ("a GPU has", "MAJOR", "text")), lines
    assert not (tmp_path / "t").exists()
    document = json.loads(MICROBENCH.read_text())
    document["device"] = {**document.get("device", {}), **facts}
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps(document))
    code, lines, _ = run_cli(["tune", str(bench), "-o", str(tmp_path / "t")], 0)
    assert code == 2 and "bench.json: device" in lines[0] and words in lines[0], lines


@pytest.mark.parametrize(
    "field,value,words",
    [
        ("samples", 10**19, "samples: a count must be"),  # once an OverflowError
        ("samples", 10**9, "samples: a count must be"),  # once 8 GB of NaN samples
        ("samples", -3, "samples: a count must be"),
        ("value", 1e-300, "not a clock a GPU runs at"),  # rounds to 0 MHz in the card
        ("value", 1e9, "not a clock a GPU runs at"),
    ],
)
@pytest.mark.parametrize("on_simulator", [False, True])
def test_tune_measurements_one_line(field, value, words, on_simulator, tmp_path: Path,
                                    monkeypatch) -> None:
    from hilsim.simmodel.tuner import search  # the module that would look for a build

    monkeypatch.setattr(search, "find_build", lambda: None)
    document = json.loads(MICROBENCH.read_text())
    row = next(i for i, m in enumerate(document["measurements"])
               if m["unit"] == "MHz" or field == "samples")
    document["measurements"][row].update({field: value, "valid": True, "value":
                                          document["measurements"][row]["value"] or 1380.0})
    document["measurements"][row][field] = value
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps(document))
    extra = ["--on-simulator"] if on_simulator else []
    code, lines, _ = run_cli(["tune", str(bench), *extra, "-o", str(tmp_path / "t")],
                             bench.stat().st_size)
    assert code == 2 and f"measurements[{row}]" in lines[0] and words in lines[0], lines
    assert not (tmp_path / "t").exists()


def test_a_bad_utf8_cupti_record_names_its_line(tmp_path: Path) -> None:
    records = inputs.cupti_records(tmp_path)
    lines = records.read_bytes().split(b"\n")
    lines[1] = lines[1][:20] + b"\xff" + lines[1][20:]
    records.write_bytes(b"\n".join(lines))
    code, err, _ = run_cli(["import", str(records), "-o", str(tmp_path / "o")], 0)
    assert code == 2 and "line 2: not UTF-8" in err[0], err


def test_markdown_of_the_decomposition_escapes_names() -> None:
    evil = "<script>alert(1)</script>|x"
    row = {"kernel": evil, "launches": 3, "samples": 1, "silicon": 1.0, "full": 1.0,
           "projection": 1.0, "configuration_error": 0.0, "sampling_error": 0.0,
           "total_error": 0.0}
    totals = {k: 0.0 for k in ("configuration_error", "sampling_error", "total_error",
                               "selection_error", "state_error")}
    totals.update(silicon=1.0, full=1.0, projection=1.0)
    text = decomposition_markdown(f"plan {evil}", {"totals": totals, "per_kernel": [row],
                                                    "per_counter": []})
    assert "<script>" not in text and "&lt;script&gt;" in text
    kernel_line = next(line for line in text.splitlines() if "alert" in line and "|" in line
                       and not line.startswith("#"))
    assert kernel_line.count(" | ") == 6  # the name's '|' does not add a cell
    assert markdown_text("a\nb") == "a b"
