"""The tuner on microbench.json (hilsim.microbench/1) and the `tune` command.

The microbench.json here is hand-written and SYNTHETIC (round made-up numbers): it only
exercises the JSON path. Real-data agreement is tested in test_tune_titanv.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from hilsim.simmodel.accelsim import read_options
from hilsim.simmodel.config import read_timing

from hilsim.cli.tune import tune_cmd
from hilsim.core import measurement_names as mn
from hilsim.core.errors import HilsimError

DATA = Path(__file__).parent / "data" / "accelsim"

SYNTHETIC = {
    "schema": mn.MICROBENCH_SCHEMA,
    "device": {"name": "Synthetic Volta", "major": 7, "minor": 0, "multiProcessorCount": 10,
               "memoryBusWidth": 1024, "memoryClockRate": 1000000, "memory_type": "HBM2",
               "sharedMemPerMultiprocessor": 65536, "l2CacheSize": 1048576},
    "measurements": [
        {"name": mn.L1_HIT_LATENCY, "value": 30.0, "unit": "cycles", "params": {},
         "samples": 5, "spread": 0.1},
        {"name": mn.L2_HIT_LATENCY, "value": 200.0, "unit": "cycles"},
        {"name": mn.DRAM_LATENCY, "value": 400.0, "unit": "cycles"},
        {"name": mn.SHARED_LATENCY, "value": 25.0, "unit": "cycles"},
        {"name": mn.SM_CLOCK_MHZ, "value": 1000.0, "unit": "MHz"},
        {"name": mn.LAUNCH_LATENCY_US, "value": 5.0, "unit": "us"},
        {"name": mn.FP32_THROUGHPUT, "value": 120.0, "unit": "flop/clk/SM"},
        {"name": mn.FP32_LATENCY, "value": 4.2, "unit": "cycles"},
    ],
}


def _write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "microbench.json"
    path.write_text(json.dumps(data))
    return path


def _run(args: list[str]):
    return CliRunner().invoke(tune_cmd, args, catch_exceptions=True)


def test_tune_json_emits_sources(tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = _run([str(_write(tmp_path, SYNTHETIC)), "-o", str(out)])
    assert res.exit_code == 0, res.output + repr(res.exception)
    assert sorted(p.name for p in out.iterdir()) == [
        "gpgpusim.config", "timing.json", "trace.config", "tune-report.json"]
    opts = read_options(out / "gpgpusim.config").options()
    assert opts["-gpgpu_l1_latency"] == "30"
    assert opts["-gpgpu_l2_rop_latency"] == "170"
    assert opts["-dram_latency"] == "200"
    assert opts["-gpgpu_kernel_launch_latency"] == "5000"  # 5 us x 1000 MHz
    assert opts["-gpgpu_n_clusters"] == "10"
    assert opts["-gpgpu_n_mem"] == "8"
    assert opts["-gpgpu_clock_domains"] == "1000:1000:1000:1000"
    assert opts["-ptx_opcode_initiation_fp"] == "2,2,2,2,4"
    assert opts["-gpgpu_cache:dl2"].startswith("S:32:128:16,")  # 64 KB/bank: 512 lines/16
    text = (out / "gpgpusim.config").read_text().splitlines()
    for i, line in enumerate(text):
        if line.startswith("-"):
            assert text[i - 1].startswith("# source: ") and "convention:" in text[i - 1]
    l1 = text[text.index("-gpgpu_l1_latency 30") - 1]
    assert "measured" in l1 and "microbench.json l1_hit_latency" in l1
    report = json.loads((out / "tune-report.json").read_text())
    by_name = {o["name"]: o for o in report["options"]}
    assert by_name["-gpgpu_l1_latency"]["kind"] == "measured"
    assert by_name["-gpgpu_n_clusters"]["kind"] == "device-query"
    assert by_name["-gpgpu_scheduler"]["kind"] == "preset"
    timing = read_timing(out / "timing.json")
    assert timing.get("core.launch_latency_cycles").source.kind == "derived"


def test_tune_json_corrected_convention(tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = _run([str(_write(tmp_path, SYNTHETIC)), "--convention", "simulator-corrected",
                "-o", str(out)])
    assert res.exit_code == 0, repr(res.exception)
    opts = read_options(out / "gpgpusim.config").options()
    assert opts["-gpgpu_l1_latency"] == "17"  # 30 - 13 (sm_70 offset)
    assert opts["-gpgpu_l2_rop_latency"] == "153"


def test_accelsim_output_cli(tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = _run(["--accelsim-output", str(DATA / "accelsim-ubench-output-titanv.txt"),
                "-o", str(out)])
    assert res.exit_code == 0, repr(res.exception)
    assert "TITAN V" in res.output
    opts = read_options(out / "gpgpusim.config").options()
    assert opts["-gpgpu_l1_latency"] == "33"
    assert read_options(out / "trace.config").options()[
        "-trace_opcode_latency_initiation_sp"] == "4,2"


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(schema="hilsim.microbench/0"), "schema"),
        (lambda d: d["measurements"][0].update(unit="ns"), "unit"),
        (lambda d: d["measurements"][0].update(name="l1_latency"), "unknown measurement"),
        (lambda d: d["measurements"][1].update(value=-1), "positive"),
    ],
)
def test_bad_json_one_line_error(tmp_path: Path, mutate, message) -> None:
    data = json.loads(json.dumps(SYNTHETIC))
    mutate(data)
    path = _write(tmp_path, data)
    res = _run([str(path), "-o", str(tmp_path / "out")])
    assert isinstance(res.exception, HilsimError)
    msg = str(res.exception)
    assert "\n" not in msg and str(path) in msg and message in msg
    assert not (tmp_path / "out").exists()


def test_truncated_accelsim_output_cli(tmp_path: Path) -> None:
    text = (DATA / "accelsim-ubench-output-titanv.txt").read_text()
    cut = tmp_path / "cut.txt"
    cut.write_text(text[: len(text) // 2])
    res = _run(["--accelsim-output", str(cut), "-o", str(tmp_path / "out")])
    assert isinstance(res.exception, HilsimError)
    assert str(cut) in str(res.exception) and "\n" not in str(res.exception)


def test_not_json(tmp_path: Path) -> None:
    path = tmp_path / "microbench.json"
    path.write_text("{not json")
    res = _run([str(path), "-o", str(tmp_path / "out")])
    assert isinstance(res.exception, HilsimError) and str(path) in str(res.exception)


def test_preset_only_h100(tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = _run(["--preset", "H100-SXM", "-o", str(out)])
    assert res.exit_code == 0, repr(res.exception)
    opts = read_options(out / "gpgpusim.config").options()
    assert opts["-gpgpu_n_clusters"] == "132"
    assert opts["-gpgpu_n_mem"] == "40"
    text = (out / "gpgpusim.config").read_text()
    assert "estimate" in text


def test_measurement_names_have_units() -> None:
    for name, spec in mn.MEASUREMENTS.items():
        assert spec.name == name and spec.unit and spec.description
    assert mn.unit_of(mn.DRAM_COPY_BANDWIDTH) == "GB/s"


def test_preset_only_keeps_shipped_options(tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = _run(["--preset", "QV100", "-o", str(out)])
    assert res.exit_code == 0, repr(res.exception)
    ours = read_options(out / "gpgpusim.config").options()
    shipped = read_options(DATA / "SM7_QV100.gpgpusim.config").options()
    assert ours == shipped
    assert read_options(out / "trace.config").options() == read_options(
        DATA / "SM7_QV100.trace.config").options()


def test_no_input_is_one_line(tmp_path: Path) -> None:
    res = _run(["-o", str(tmp_path / "out")])
    assert isinstance(res.exception, HilsimError)
    assert "give MICROBENCH.json" in str(res.exception)
    assert not (tmp_path / "out").exists()


def test_an_existing_output_is_kept_without_force(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    res = _run(["--preset", "QV100", "-o", str(out)])
    assert isinstance(res.exception, HilsimError) and "already exists" in str(res.exception)
    assert list(out.iterdir()) == []
    res = _run(["--preset", "QV100", "-o", str(out), "--force"])
    assert res.exit_code == 0, repr(res.exception)
    assert sorted(p.name for p in out.iterdir()) == [
        "gpgpusim.config", "timing.json", "trace.config", "tune-report.json"]
