"""Accel-Sim option files and printed microbenchmark output (real files, tests/data/accelsim)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hilsim.simmodel.accelsim import (
    EmitOption,
    emit_options,
    parse_options,
    parse_ubench_output,
    read_options,
    read_ubench_output,
)

from hilsim.core.errors import HilsimError

DATA = Path(__file__).parent / "data" / "accelsim"
CONFIGS = sorted(DATA.glob("*.config"))
TITANV = DATA / "accelsim-ubench-output-titanv.txt"


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_option_file_round_trip(path: Path) -> None:
    parsed = read_options(path)
    lines = parsed.option_lines()
    raw = [ln for ln in path.read_text().splitlines() if ln.strip().startswith("-")]
    assert len(lines) == len(raw)  # every option line (a quoted value spans two lines)
    emitted = emit_options([EmitOption(o.name, o.value, "test") for o in lines])
    again = parse_options(emitted)
    assert [(o.name, o.value) for o in again.option_lines()] == [
        (o.name, o.value) for o in lines
    ]
    assert all(e.startswith("# source:") for e in emitted.splitlines()[0::2])


def test_multiline_quoted_value_and_trailing_comment() -> None:
    opts = read_options(DATA / "SM7_QV100.gpgpusim.config").options()
    assert opts["-gpgpu_dram_timing_opt"] == (
        "nbk=16:CCD=1:RRD=3:RCD=12:RAS=28:RP=12:RC=40:CL=12:WL=2:CDLR=3:WR=10:nbkgrp=4:CCDL=2:RTPL=3"
    )
    assert opts["-dram_data_command_freq_ratio"] == "2"


def test_parse_titanv_output() -> None:
    out = read_ubench_output(TITANV)
    assert out.device_name == "TITAN V"
    assert [d["Device"] for d in out.devices] == [
        "TITAN V", "GeForce RTX 2060", "GeForce GTX TITAN X", "Quadro P2200"]
    v = {k: p.value for k, p in out.values.items()}
    assert v["l1_hit_latency"] == pytest.approx(33.7331)
    assert v["l2_hit_latency"] == pytest.approx(211.0720)
    assert v["dram_latency"] == pytest.approx(313.4630)
    assert v["shared_latency"] == pytest.approx(27.010254)
    assert v["fp32_throughput"] == pytest.approx(126.861778)
    assert v["dram_type"] == "HBM"
    assert out.options["-gpgpu_l1_latency"].value == "33"  # printed as "= 33"
    assert out.options["-dram_latency"].value == "104"
    assert len(out.options) == 73  # every "-option" line of the file


def test_truncated_output_is_one_line_error(tmp_path: Path) -> None:
    text = TITANV.read_text()
    cut = tmp_path / "cut.txt"
    cut.write_text(text[: text.index("-gpgpu_l2_rop_latency")])
    with pytest.raises(HilsimError) as err:
        read_ubench_output(cut)
    msg = str(err.value)
    assert "\n" not in msg and str(cut) in msg and "truncated" in msg


def test_not_ubench_output() -> None:
    with pytest.raises(HilsimError, match="not Accel-Sim"):
        parse_ubench_output("hello\n", "x.txt")
    with pytest.raises(HilsimError, match="x.txt"):
        parse_ubench_output("running ./l1_lat microbenchmark\n\n//Accel_Sim config: \n"
                            "/////////////////////////////////\n", "x.txt")


def test_bad_option_line() -> None:
    with pytest.raises(HilsimError, match="f.config: line 2"):
        parse_options("-a 1\nnonsense\n", "f.config")
