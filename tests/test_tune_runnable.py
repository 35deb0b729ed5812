"""Every `hilsim tune` convention writes only cards GPGPU-Sim can run.

GPGPU-Sim starts an instruction at pipeline stage latency - initiation interval
(``shader.cc``), so an interval above its latency crashes it (SIGSEGV), and so does a
partition or set index its hash cannot take (``addrdec.cc``, ``hashing.cc``).
``simmodel/gpgpusim/runnable.py`` states the conditions; the tuner fits its lists to them
(``simmodel/tuner/pipeline.py``) and refuses, in one line, what it cannot fit. The
simulator tier runs the written cards: one program with every list entry's probe.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hilsim.simmodel.accelsim import read_options
from hilsim.simmodel.gpgpusim.cards import card_config
from hilsim.simmodel.gpgpusim.runnable import (
    ipoly_fits,
    partition_problems,
    pipeline_problems,
    problems,
)
from hilsim.simmodel.gpgpusim.simdevice import GpgpusimDevice
from hilsim.simmodel.gpgpusim.unitprobe import PROBES, probe_measurements
from hilsim.simmodel.tuner import CONVENTIONS, tune_files
from hilsim.simmodel.tuner import flow as tuneflow

from hilsim.cli.main import main
from hilsim.core.errors import HilsimError
from tests.silicon_like import CARDS, silicon_like
from tests.simbuild import require_sim_build

DATA = Path(__file__).parent / "data"
QV100 = DATA / "accelsim" / "SM7_QV100.gpgpusim.config"


def _qv100(**over: str) -> dict[str, str]:
    opts = read_options(QV100).options()
    opts.update(over)
    return opts


def test_an_interval_exactly_one_above_its_latency_is_the_crash() -> None:
    """fp MAD latency 4 with interval 5 starts at stage -1: a problem; interval 4
    starts at stage 0: none. The shipped card has none."""
    assert problems(_qv100()) == []
    bad = pipeline_problems(_qv100(**{"-ptx_opcode_latency_fp": "4,13,4,4,39",
                                      "-ptx_opcode_initiation_fp": "2,2,2,5,4"}))
    assert len(bad) == 1 and "MAD: initiation interval 5 above its latency 4" in bad[0]
    assert pipeline_problems(_qv100(**{"-ptx_opcode_latency_fp": "4,13,4,4,39",
                                       "-ptx_opcode_initiation_fp": "2,2,2,4,4"})) == []


def test_a_start_stage_past_the_units_depth_is_a_problem() -> None:
    """The SP pipeline is the fp MAX entry deep: MAD 10 at interval 2 starts at stage 8
    of a 4-deep pipeline (measured: SIGSEGV on the RTX 2060's 4,4,4,4 list); 5 at
    interval 2 starts at 3 and runs. Without INT units (before cc 6) the integer
    instructions, SHFL included, run on the SP pipeline."""
    opts = _qv100(**{"-ptx_opcode_latency_fp": "4,4,4,10,39"})
    assert any("SP pipeline's depth 4" in p for p in pipeline_problems(opts))
    assert pipeline_problems(_qv100(**{"-ptx_opcode_latency_fp": "4,4,4,5,39"})) == []
    no_int = _qv100(**{"-gpgpu_num_int_units": "0", "-ptx_opcode_latency_fp": "4,4,4,4,39"})
    assert any("SHFL" in p and "SP pipeline" in p for p in pipeline_problems(no_int))


def test_partition_and_set_indices_the_hash_cannot_take() -> None:
    assert ipoly_fits(16, 2) and ipoly_fits(32, 2) and ipoly_fits(8, 2)
    assert not ipoly_fits(24, 2) and not ipoly_fits(20, 2) and not ipoly_fits(4, 2)
    assert partition_problems(_qv100(**{"-gpgpu_n_mem": "24"})) == []  # 32 x 2 hashed (mod)
    assert partition_problems(_qv100(**{"-gpgpu_n_mem": "4"}))  # 4 x 2 = 8: asserts
    assert partition_problems(_qv100(**{"-gpgpu_n_mem": "24",
                                        "-gpgpu_memory_partition_indexing": "1"}))
    cache = _qv100(**{"-gpgpu_cache:dl2": "S:128:128:24,L:B:m:L:P,A:192:4,32:0,32"})
    assert any("cannot index 128 sets" in p for p in problems(cache))


@pytest.mark.parametrize("card", CARDS)
@pytest.mark.parametrize("convention", CONVENTIONS)
def test_every_convention_fits_real_looking_files(card: str, convention: str,
                                                  tmp_path: Path) -> None:
    """Silicon measurements on V100 / RTX 2060 / RTX 3070 facts (~4-cycle FFMA/IMAD
    chains; GeForce FP64 at 1/32 and 1/64): every written list runs. The gpgpusim
    convention maps the chains below the simulator's floor (latency 1) next to an IMAD
    interval of 2, the GeForce FP64 interval (32, 64) lies far above an 8-cycle DFMA
    chain: each such latency is raised to its interval and the console says so."""
    result = tune_files(silicon_like(card, tmp_path), convention=convention)
    options = {o.name: o.value for o in result.options}
    assert problems(options) == []
    raised = [n for n in result.notes if n.startswith("pipeline: ")]
    if convention == "gpgpusim":
        assert any("-ptx_opcode_latency_int" in n for n in raised), raised
    if CARDS[card]["fp64_ratio"]:
        assert any("-ptx_opcode_latency_dp" in n for n in raised), raised
        lat = [int(x) for x in options["-ptx_opcode_latency_dp"].split(",")]
        ini = [int(x) for x in options["-ptx_opcode_initiation_dp"].split(",")]
        assert lat[3] == ini[3] >= 32


def test_tune_without_the_fit_refuses_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The guard behind the fit: with the fit removed (the mutant) the V100-like file's
    gpgpusim card would crash, and `hilsim tune` exits 2 with one line and writes
    nothing. A printed Accel-Sim option nothing fits (an IPOLY L2 set index over 128
    sets) is refused the same way."""
    path = silicon_like("V100", tmp_path)
    monkeypatch.setattr(tuneflow, "fit_emitted", lambda _options: [])
    with pytest.raises(HilsimError, match="refusing to write a card GPGPU-Sim cannot run"):
        tune_files(path, convention="gpgpusim")
    monkeypatch.undo()
    text = (DATA / "accelsim" / "accelsim-ubench-output-titanv.txt").read_text()
    bad = tmp_path / "titanv.txt"
    bad.write_text(text.replace("-gpgpu_cache:dl2 S:32,128,24", "-gpgpu_cache:dl2 S:128,128,24"))
    assert main(["tune", "--accelsim-output", str(bad), "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot index 128 sets" in err[0], err
    assert not (tmp_path / "o").exists()


def test_a_tuned_report_names_each_raised_entry(tmp_path: Path) -> None:
    out = tmp_path / "o"
    assert main(["tune", str(silicon_like("RTX2060", tmp_path)), "-o", str(out)]) == 0
    report = json.loads((out / "tune-report.json").read_text())
    dp = next(o for o in report["options"] if o["name"] == "-ptx_opcode_latency_dp")
    assert dp["value"].startswith("32,32,32,32") and "MAD 8 -> 32" in dp["note"]


def _big_l2(card: str, mib: int, tmp_path: Path) -> Path:
    """The simulated card's suite file with an A100 / H100 L2 (a cc 7.0 HBM probe with a
    50 MiB L2 is what Accel-Sim's own H100 configs look like)."""
    doc = json.loads((DATA / "microbench" / "gpgpusim" / f"{card}.microbench.json").read_text())
    doc["device"]["l2_cache_bytes"] = mib << 20
    path = tmp_path / f"{card}-{mib}mib.json"
    path.write_text(json.dumps(doc))
    return path


def _l2_bytes(options: dict[str, str]) -> int:
    sets, line, ways = (int(x) for x in options["-gpgpu_cache:dl2"].split(",")[0].split(":")[1:])
    return (sets * line * ways * int(options["-gpgpu_n_mem"])
            * int(options["-gpgpu_n_sub_partition_per_mchannel"]))


@pytest.mark.parametrize(("card", "mib", "exact"), [
    ("SM7_QV100", 50, True), ("SM7_QV100", 40, True),
    ("SM75_RTX2060", 40, False), ("SM75_RTX2060", 50, False)])
def test_an_a100_or_h100_l2_tunes_in_every_convention(
    card: str, mib: int, exact: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """40 / 50 MiB of L2 over a V100's 64 banks (24 ways: 256 sets x 25 or 20 ways) or an
    RTX 2060's 24 (no whole number of lines per bank: the nearest size, within 2 %): every
    convention writes a card GPGPU-Sim runs, its banks hold the L2, and the console says
    which sets and ways were chosen. An L2 under one line per bank: one line, nothing
    written."""
    path = _big_l2(card, mib, tmp_path)
    for convention in CONVENTIONS:
        out = tmp_path / convention
        assert main(["tune", str(path), "--convention", convention, "-o", str(out)]) == 0
        err = capsys.readouterr().err
        note = [line for line in err.splitlines() if line.startswith("note: L2 geometry: ")]
        assert len(note) == 1 and ("nearest" not in note[0]) == exact, err
        options = read_options(out / "gpgpusim.config").options()
        assert problems(options) == []
        got = _l2_bytes(options)
        assert got == mib << 20 if exact else abs(got / (mib << 20) - 1) <= 0.02
    bad = tmp_path / "tiny.json"
    bad.write_text(_big_l2(card, mib, tmp_path).read_text().replace(
        f'"l2_cache_bytes": {mib << 20}', '"l2_cache_bytes": 200'))
    assert main(["tune", str(bad), "-o", str(tmp_path / "no")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "L2 of 200 B has no geometry" in err[0], err
    assert not (tmp_path / "no").exists()


# --- on the simulator ---------------------------------------------------------------


def _probe_every_entry(card_path: Path, build: object) -> dict[str, float | None]:
    device = GpgpusimDevice(card_config(card_path, build), build=build)
    ms = probe_measurements(device, [p.key for p in PROBES], what=("latency",), n=1)
    return {m.name: m.value for m in ms}


H100 = DATA / "silicon" / "H100"


def test_the_h100_file_gets_an_l1_that_divides_its_unified_size(tmp_path: Path) -> None:
    """The real H100 file (and the H100-SXM preset alone): 256 KB unified less 228 KB
    of shared memory leaves 28 KB of L1, which GPGPU-Sim asserts must divide the unified
    size: the dl1 gets 32 ways (16 KB), said so."""
    for args in ([str(H100 / "microbench.json"), "--device-facts", str(H100 / "probe.json")],
                 ["--preset", "H100-SXM"]):
        result = tune_files(args[0] if len(args) > 2 else None,
                            device_facts=args[2] if len(args) > 2 else None,
                            preset_name=None if len(args) > 2 else args[1])
        dl1 = next(o for o in result.options if o.name == "-gpgpu_cache:dl1")
        assert dl1.value.startswith("S:4:128:32,") and "ways 56 -> 32" in dl1.note
        assert problems({o.name: o.value for o in result.options}) == []


def _tune_args(card: str, tmp_path: Path) -> list[str]:
    if card == "H100":
        return [str(H100 / "microbench.json"), "--device-facts", str(H100 / "probe.json")]
    return [str(silicon_like(card, tmp_path))]


@pytest.mark.gpgpusim
@pytest.mark.slow
@pytest.mark.parametrize("card", [*CARDS, "H100"])
@pytest.mark.parametrize("convention", CONVENTIONS)
def test_every_convention_card_runs_on_the_simulator(
    card: str, convention: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The card each convention writes for the V100 / RTX 2060 / RTX 3070-like files and
    the real H100 file runs one program with a dependent chain of every list entry (int,
    fp, dp ADD..DIV, SHFL, SFU) on GPGPU-Sim. Before the fit the gpgpusim convention's
    cards died with SIGSEGV on the first IMAD, the GeForce cards' on the first DFMA, and
    the H100's (and the RTX 3070's) at start-up (the dl1 assertion). The gpgpusim
    convention has no map for cc 9.0: it refuses in one line."""
    build = require_sim_build()
    out = tmp_path / "tuned"
    code = main(["tune", *_tune_args(card, tmp_path), "--convention", convention,
                 "-o", str(out)])
    if card == "H100" and convention == "gpgpusim":
        assert code == 2 and "no GPGPU-Sim calibration" in capsys.readouterr().err
        return
    assert code == 0
    got = _probe_every_entry(out / "gpgpusim.config", build)
    assert len(got) == len(PROBES) and all(v is not None and v > 0 for v in got.values()), got


@pytest.mark.gpgpusim
@pytest.mark.slow
@pytest.mark.parametrize(("card", "mib"), [("SM7_QV100", 50), ("SM75_RTX2060", 40)])
def test_an_a100_or_h100_l2_card_runs_on_the_simulator(card: str, mib: int,
                                                       tmp_path: Path) -> None:
    """The card written for a 50 MiB L2 on the V100 preset (256 sets x 25 ways, linear
    set index) and a 40 MiB L2 on the RTX 2060's (the nearest size) runs the probe
    program on GPGPU-Sim (the L2 is built at start-up)."""
    build = require_sim_build()
    out = tmp_path / "tuned"
    assert main(["tune", str(_big_l2(card, mib, tmp_path)), "--convention", "gpgpusim",
                 "-o", str(out)]) == 0
    got = _probe_every_entry(out / "gpgpusim.config", build)
    assert len(got) == len(PROBES) and all(v is not None and v > 0 for v in got.values()), got


@pytest.mark.gpgpusim
def test_an_interval_one_above_its_latency_crashes_gpgpusim(tmp_path: Path) -> None:
    """What the conditions say, on the simulator: QV100 with fp MAD latency 4 runs an FMA
    chain at interval 4 and dies at interval 5 (stage -1)."""
    build = require_sim_build()
    base = card_config("SM7_QV100", build)
    for interval, runs in ((4, True), (5, False)):
        card = base.with_options({"-ptx_opcode_latency_fp": "4,13,4,4,39",
                                  "-ptx_opcode_initiation_fp": f"2,2,2,{interval},4"})
        device = GpgpusimDevice(card, build=build)
        if runs:
            (m,) = probe_measurements(device, ["fp.mad"], what=("latency",), n=1)
            assert m.value is not None and m.value > 4
        else:
            with pytest.raises(HilsimError, match="SIGSEGV|signal|killed"):
                probe_measurements(device, ["fp.mad"], what=("latency",), n=1)
