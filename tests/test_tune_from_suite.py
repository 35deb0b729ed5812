"""The tuner reads what the hilsim microbenchmark suite writes (one file format)."""

import json

from hilsim.cli.main import main
from hilsim.core import measurement_names as mn
from hilsim.core.measurement import Measurement, write_microbench_json


def test_tune_accepts_the_suites_own_output(tmp_path, capsys) -> None:
    measurements = [
        Measurement(mn.L1_HIT_LATENCY, 31.0, "cycles", samples=[31.0, 31.0, 31.2], spread=0.01),
        Measurement(mn.L2_HIT_LATENCY, 250.0, "cycles", samples=[250.0, 251.0], spread=0.01),
        # recorded by the suite for the report, not consumed by the tuner
        Measurement("latency_footprint_sweep", 31.0, "cycles", params={"footprints": [1, 2]}),
        Measurement("dram_write_bandwidth", 2900.0, "GB/s"),
        # failed its own validation: the preset value must stay
        Measurement(mn.DRAM_LATENCY, None, "cycles", valid=False, note="chase incomplete"),
    ]
    path = write_microbench_json(tmp_path / "mb.json", measurements, {"name": "Tesla V100"})
    code = main(["tune", str(path), "--preset", "QV100", "-o", str(tmp_path / "out")])
    assert code == 0, capsys.readouterr().err
    timing = json.loads((tmp_path / "out" / "timing.json").read_text())
    l1 = timing["l1"]["hit_latency_cycles"]
    assert l1["value"] == 31.0 and l1["source"]["kind"] == "measured"
    dram = timing["dram"].get("latency_cycles")  # the QV100 preset has none
    assert dram is None or dram["source"]["kind"] != "measured"
