"""First-deployment sanity table: a number outside the published range of its GPU
generation is a warning from ``hilsim agent microbench`` (docs/agent.md)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from hilsim.agent import microbench as suite
from hilsim.microbench.sanity import LATENCY_RANGES, family, sanity_warnings

from hilsim.cli import microbench as mb_cli
from hilsim.core.measurement import Measurement

V100 = {"name": "Tesla V100-SXM2-16GB", "compute_capability": "7.0", "l2_cache_bytes": 6 << 20,
        "peak_dram_gbs": 898.0, "max_sm_clock_mhz": 1530}
H100 = {"name": "NVIDIA H100 PCIe", "compute_capability": "9.0", "l2_cache_bytes": 50 << 20,
        "peak_dram_gbs": 2039.0, "max_sm_clock_mhz": 1755}


def _m(name, value, unit="cycles"):
    return Measurement(name, value, unit)


def test_published_and_recorded_values_pass() -> None:
    """The gpu-benches curves in tests/data/microbench (V100: 30/215/428 cycles; H100 PCIe:
    34/266/650) and Jia et al.'s V100 DRAM bandwidth (750 GB/s) raise nothing."""
    v100 = [_m("l1_hit_latency", 30.0), _m("l2_hit_latency", 215.0), _m("dram_latency", 428.5),
            _m("shared_latency", 19.0), _m("dram_read_bandwidth", 750.0, "GB/s"),
            _m("l2_capacity_bytes", 5931520.0, "bytes"), _m("sm_clock_mhz", 1380.0, "MHz"),
            _m("launch_latency_us", 3.5, "us")]
    h100 = [_m("l1_hit_latency", 34.2), _m("l2_hit_latency", 265.5), _m("dram_latency", 650.0),
            _m("l2_capacity_bytes", 47453056.0, "bytes")]
    assert sanity_warnings(v100, V100) == []
    assert sanity_warnings(h100, H100) == []


@pytest.mark.parametrize(("row", "facts", "text"), [
    (_m("l1_hit_latency", 45.0), V100, "l1_hit_latency = 45.0 cycles is outside"),
    (_m("shared_latency", 12.0), H100, "shared_latency"),
    (_m("dram_copy_bandwidth", 2300.0, "GB/s"), H100, "113% of the 2039 GB/s peak"),
    (_m("l2_capacity_bytes", 3 << 20, "bytes"), V100, "from the sweep vs 6291456 B"),
    (_m("launch_latency_us", 25.0, "us"), V100, "launch_latency_us = 25.00 us"),
    (_m("sm_clock_mhz", 2100.0, "MHz"), H100, "max clock"),
])
def test_out_of_range_values_warn(row, facts, text) -> None:
    warnings = sanity_warnings([row], facts)
    assert len(warnings) == 1 and text in warnings[0]


def test_invalid_measurements_and_unknown_generations_are_skipped() -> None:
    bad = Measurement("l1_hit_latency", 400.0, "cycles", valid=False, note="chase failed")
    assert sanity_warnings([bad], V100) == []
    assert sanity_warnings([_m("l1_hit_latency", 400.0)], {"compute_capability": "6.0"}) == []
    assert family("8.6") == "ampere" and family("7.5") == "turing" and family(None) is None
    assert all(lo < hi for r in LATENCY_RANGES.values() for lo, hi, _ in r.values())


def test_microbench_command_prints_the_warnings(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(suite, "device_facts", lambda device: dict(V100))
    monkeypatch.setattr(suite, "run_suite", lambda families, device, facts, on_measured,
                        **options: [_m("l1_hit_latency", 31.0), _m("l2_hit_latency", 900.0)])
    result = CliRunner().invoke(mb_cli.microbench_cmd,
                                ["-o", str(tmp_path / "mb.json"), "--no-lock-clocks"])
    assert result.exit_code == 0, result.output
    assert "warning: l2_hit_latency = 900.0 cycles is outside [160, 270] for volta" in (
        result.output)
    assert "l1_hit_latency = 31" not in result.output


def test_a_suite_stopped_midway_keeps_what_it_measured(monkeypatch, tmp_path) -> None:
    """The file is rewritten after every benchmark: a suite killed by a time limit (the
    silicon kit gives it one) leaves the measurements taken so far, not nothing."""
    from hilsim.core.measurement import read_microbench_json

    def stopped(families, device, facts, on_measured, **options):
        done = [_m("l1_hit_latency", 31.0)]
        on_measured(done)
        raise KeyboardInterrupt

    monkeypatch.setattr(suite, "device_facts", lambda device: dict(V100))
    monkeypatch.setattr(suite, "run_suite", stopped)
    out = tmp_path / "mb.json"
    result = CliRunner().invoke(mb_cli.microbench_cmd, ["-o", str(out), "--no-lock-clocks"])
    assert result.exit_code != 0
    measurements, _facts = read_microbench_json(out)
    assert [m.name for m in measurements] == ["l1_hit_latency"]
