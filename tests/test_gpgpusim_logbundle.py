"""The simulated card as profiler: real GPGPU-Sim logs of transformer_step -> bundle, sampled
logs placed by launch id, validate on them (tests/data/gpgpusim/README.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hilsim.simmodel.export import match_sim_results
from hilsim.simmodel.gpgpusim.logprofile import bundle_from_gpgpusim_log, parse_gpgpusim_log
from hilsim.simmodel.gpgpusim.simlog import parse_simlog, read_simlogs
from hilsim.simmodel.gpgpusim.skippath import launch_list_argv

from hilsim.cli.main import cli
from hilsim.core.bundle import read_bundle
from hilsim.core.errors import HilsimError
from hilsim.core.plan import load_plan
from hilsim.formats.detect import sniff_format

DATA = Path(__file__).parent / "data" / "gpgpusim"
FULL = DATA / "transformer_step1.SM7_QV100-4sm.log"
SAMPLED = DATA / "transformer_step1.stem-sampled.log"
PLAN = DATA / "transformer_step1.stem.json"


def _values(text: str, key: str) -> np.ndarray:
    return np.array([float(v) for v in re.findall(rf"^\s*{re.escape(key)}\s*=\s*(\S+)", text,
                                                  re.M)])


def test_full_log_becomes_a_bundle_with_geometry_resources_and_regions() -> None:
    b = bundle_from_gpgpusim_log(FULL, card="SM7_QV100")
    launches = b.launches
    assert b.n_launches == 29
    assert launches["kernel"].nunique() == 10
    assert b.manifest["device"]["max_sm_clock_mhz"] == 1132.0
    assert b.manifest["device"]["sm_count"] == 4
    gemm = launches[launches["kernel"] == "gemm_bias"]
    assert len(gemm) == 9  # qkv, out, ffn1, ffn2 per layer x 2 layers + logits
    assert set(gemm["regs"]) == {32} and set(gemm["smem_static"]) == {2112}
    assert (gemm[["block_x", "block_y", "block_z"]].to_numpy() == [16, 16, 1]).all()
    assert launches["name"].iloc[2] == "void gemm_bias<16>(float const*, float const*, " \
        "float const*, float*, int, int, int)"
    first = launches.iloc[0]
    assert (first["kernel"], first["grid_x"], first["block_x"]) == ("embed", 16, 32)
    # durations: cycles at the config's 1132 MHz core clock, back to back
    cycles = _values(FULL.read_text(), "gpu_sim_cycle")
    np.testing.assert_array_equal(launches["duration_ns"], np.rint(cycles * 1000 / 1132))
    assert (np.diff(launches["start_ns"].to_numpy()) > 0).all()
    # regions from the hilsim-region marks: step0 > layer0, layer1, head
    regions = b.regions
    assert regions["path"].tolist() == ["step0", "step0/layer0", "step0/layer1", "step0/head"]
    assert regions["depth"].tolist() == [0, 1, 1, 1]
    assert launches["region"].iloc[0] == "step0"
    assert launches["region"].iloc[1] == "step0/layer0"
    assert launches["region"].iloc[-1] == "step0/head"
    assert regions["end_ns"].iloc[0] >= launches["start_ns"].iloc[-1]


def test_cumulative_counters_become_per_kernel_differences() -> None:
    text = FULL.read_text()
    m = bundle_from_gpgpusim_log(FULL).metrics
    # running totals printed after each kernel; the per-launch metric is their difference
    for key, metric in (
        ("gpgpu_n_tot_w_icount", "smsp__inst_executed.sum"),
        ("L2_total_cache_accesses", "lts__t_sectors.sum"),
        ("total dram reads", "dram__sectors_read.sum"),
        ("gpu_tot_issued_cta", "launch__grid_size"),
        ("L1D_total_cache_accesses", "l1tex__t_sectors.sum"),
    ):
        totals = _values(text, key)
        assert len(totals) == 29
        np.testing.assert_array_equal(m[metric].to_numpy(), np.diff(totals, prepend=0.0))
    # per-kernel lines are taken as they are, and agree with the differenced totals
    np.testing.assert_array_equal(m["smsp__thread_inst_executed.sum"],
                                  _values(text, "gpu_sim_insn"))
    np.testing.assert_array_equal(np.cumsum(m["smsp__thread_inst_executed.sum"]),
                                  _values(text, "gpu_tot_sim_insn"))
    # CTAs issued (differenced) equal the grid size of the launch line
    launches = bundle_from_gpgpusim_log(FULL).launches
    grid = launches[["grid_x", "grid_y", "grid_z"]].astype(float).prod(axis=1).to_numpy()
    np.testing.assert_array_equal(m["launch__grid_size"].to_numpy(), grid)
    ratio = m["smsp__thread_inst_executed_per_inst_executed.ratio"]
    assert ((ratio > 1) & (ratio <= 32)).all()
    np.testing.assert_array_equal(m["dram__bytes_read.sum"], 32 * m["dram__sectors_read.sum"])
    # occupancy is not collected without power simulation: no all-NaN column
    assert "sm__warps_active.avg.pct_of_peak_sustained_active" not in m.columns


def test_stream_aware_breakdown_rows_only_for_the_first_kernel() -> None:
    """The *_breakdown rows follow per-stream keys: neither per kernel nor running totals."""
    text = FULL.read_text()
    totals = np.diff(_values(text, "L2_total_cache_accesses"), prepend=0.0)
    rows = (_values(text, "L2_cache_stats_breakdown[GLOBAL_ACC_R][TOTAL_ACCESS]")
            + _values(text, "L2_cache_stats_breakdown[GLOBAL_ACC_W][TOTAL_ACCESS]"))
    assert (rows[:3] == totals[:3]).all()  # looks per kernel at first...
    assert rows[3] == totals[0] + totals[3]  # ...then carries on from kernel 1
    stats = parse_simlog(text, "full")
    assert stats["l2_global_read_accesses"].iloc[0] == rows[0] - _values(
        text, "L2_cache_stats_breakdown[GLOBAL_ACC_W][TOTAL_ACCESS]")[0]
    assert stats["l2_global_read_accesses"].iloc[1:].isna().all()
    assert (stats["l2_accesses"].to_numpy() == totals).all()


def test_sampled_log_is_placed_by_launch_id_and_validates() -> None:
    plan = load_plan(PLAN)
    sampled = read_simlogs([SAMPLED])
    ids = sorted(plan.samples["launch_id"].tolist())
    assert sampled["launch_id"].tolist() == ids
    matched = match_sim_results(plan, sampled)
    assert matched["launch_id"].tolist() == ids
    # the same card runs the first launches with the same state: identical cycles
    full = parse_simlog(FULL.read_text(), "full")
    assert full["cycles"].iloc[0] == sampled["cycles"].iloc[0]
    assert full["cycles"].iloc[1] == sampled["cycles"].iloc[1]
    # and the same instruction counts for every sampled launch (inputs are per launch)
    np.testing.assert_array_equal(full["warp_instructions"].to_numpy()[ids],
                                  sampled["warp_instructions"].to_numpy())
    # a shuffled log still places by id; a missing launch is one clear line
    with pytest.raises(HilsimError, match="lack 1 of the plan's 14 launches"):
        match_sim_results(plan, sampled.iloc[1:])


@pytest.mark.slow
def test_import_and_validate_cli(tmp_path: Path) -> None:
    assert sniff_format(FULL) == "gpgpusim-log"
    runner = CliRunner()
    out = tmp_path / "full.bundle"
    res = runner.invoke(cli, ["import", str(FULL), "-o", str(out)])
    assert res.exit_code == 0, res.output
    bundle = read_bundle(out)
    assert bundle.n_launches == 29 and bundle.regions is not None
    sim = tmp_path / "sampled"
    sim.mkdir()
    (sim / "sampled.log").write_text(SAMPLED.read_text())
    res = runner.invoke(cli, ["validate", "--silicon", str(out), "--plan", str(PLAN),
                              "--sim", str(sim), "-o", str(tmp_path / "val")])
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "val.json").read_text())
    head = report["plans"][0]["headline"]
    assert head["n_samples"] == 14 and abs(head["total_error"]) < 0.1
    assert report["simulation"]["source"] == "GPGPU-Sim logs"  # not "accel-sim logs"
    pairs = {c["sim"]: c for c in report["plans"][0]["correlation"]}
    assert pairs["warp_instructions"]["error"] == 0  # same program, same inputs


def test_truncated_log_is_one_error(tmp_path: Path) -> None:
    text = FULL.read_text()
    cut = text[: text.rindex("gpu_sim_insn")]
    with pytest.raises(HilsimError, match="truncated"):
        parse_gpgpusim_log(cut, "cut.log")
    bad = tmp_path / "cut.log"
    bad.write_text(cut)
    res = CliRunner().invoke(cli, ["import", str(bad), "-o", str(tmp_path / "b")])
    assert res.exit_code != 0
    assert not (tmp_path / "b").exists()


def test_launch_list_argument() -> None:
    assert launch_list_argv(["./ts", "--steps", "2"], Path("/x/l.txt")) == [
        "./ts", "--steps", "2", "--launches", "/x/l.txt"]
    assert launch_list_argv(["./p", "--only={launches}"], Path("/x/l.txt")) == [
        "./p", "--only=/x/l.txt"]


def test_dram_traffic_counted_in_sectors_from_the_cards_bus() -> None:
    """A GPGPU-Sim DRAM request moves bus width x burst length bytes (QV100: 16 B x 2);
    Nsight Compute counts 32-byte sectors. The same log with an 8-byte bus (a card moving
    16 B per request) must give half the sectors and bytes (mutant: a fixed 32 B per
    request keeps them equal)."""
    text = FULL.read_text()
    narrow = re.sub(r"^-gpgpu_dram_buswidth\s+16\b", "-gpgpu_dram_buswidth 8", text,
                    flags=re.M)
    assert narrow != text
    wide = parse_gpgpusim_log(text, "qv100")
    half = parse_gpgpusim_log(narrow, "narrow")
    reads = wide.metrics["dram__sectors_read.sum"].to_numpy()
    assert reads.sum() > 0
    np.testing.assert_array_equal(half.metrics["dram__sectors_read.sum"].to_numpy(), reads / 2)
    np.testing.assert_array_equal(half.metrics["dram__bytes_read.sum"].to_numpy(),
                                  reads / 2 * 32)
    assert (wide.facts["dram_request_bytes"], half.facts["dram_request_bytes"]) == (32, 16)
    # the simulator side of validate counts the same sectors
    requests = parse_simlog(text, "qv100")["dram_reads"].to_numpy()
    np.testing.assert_array_equal(parse_simlog(narrow, "n")["dram_read_sectors"].to_numpy(),
                                  requests / 2)
    np.testing.assert_array_equal(parse_simlog(text, "q")["dram_read_sectors"].to_numpy(),
                                  requests)
