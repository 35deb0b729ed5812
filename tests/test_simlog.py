"""hilsim.simmodel.gpgpusim.simlog on real Accel-Sim output excerpts
(tests/data/simlogs/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hilsim.simmodel.gpgpusim.simlog import parse_simlog, read_simlog, read_simlogs

from hilsim.core.errors import HilsimError

LOGS = Path(__file__).parent / "data" / "simlogs"
RTX = LOGS / "accelsim-rtx4090-vecadd.log"
A100 = LOGS / "accelsim-a100-vecadd.log"


def test_real_rtx4090_block():
    frame = read_simlog(RTX)
    assert len(frame) == 1
    row = frame.iloc[0]
    assert row["kernel"] == "_Z6vecAddPKfS0_Pfi"
    assert row["uid"] == 1
    assert row["cycles"] == 18803
    assert row["instructions"] == 15728640
    assert row["l2_accesses"] == 393216
    assert row["l2_global_read_hits"] == 262144
    assert row["l1d_global_read_misses"] == 65536
    assert row["dram_reads"] == 0


def test_real_a100_block():
    row = read_simlog(A100).iloc[0]
    assert (row["cycles"], row["l2_misses"]) == (11333, 131072)


def _second_block(text: str, cycle: int, tot_cycle: int, l2: int) -> str:
    """A derived second kernel: the real block with edited numbers (not a real log)."""
    block = text[text.index("kernel_name"):]
    block = block.replace("kernel_launch_uid = 1", "kernel_launch_uid = 2")
    block = block.replace("gpu_sim_cycle = 18803", f"gpu_sim_cycle = {cycle}")
    block = block.replace("gpu_tot_sim_cycle = 18803", f"gpu_tot_sim_cycle = {tot_cycle}")
    # the running instruction total grows by this kernel's instructions (as in a real log)
    block = block.replace("gpu_tot_sim_insn = 15728640", "gpu_tot_sim_insn = 31457280")
    return block.replace("L2_total_cache_accesses = 393216", f"L2_total_cache_accesses = {l2}")


def test_two_kernels_per_kernel_cycles_and_cumulative_counters():
    text = RTX.read_text()
    head = text[: text.index("gpgpu_simulation_time")]
    log = head + _second_block(text, 500, 19303, 400000)
    frame = parse_simlog(log, "two.log")
    assert list(frame["uid"]) == [1, 2]
    assert list(frame["cycles"]) == [18803, 500]
    assert list(frame["tot_cycles"]) == [18803, 19303]
    assert list(frame["l2_accesses"]) == [393216, 400000 - 393216]


def test_cycles_from_cumulative_when_per_kernel_missing():
    text = "\n".join([
        "kernel_name = a", "gpu_tot_sim_cycle = 100", "gpu_tot_sim_insn = 10",
        "gpgpu_simulation_time = 0 days", "kernel_name = b", "gpu_tot_sim_cycle = 250",
        "gpu_tot_sim_insn = 30", "gpgpu_simulation_time = 0 days",
    ])
    frame = parse_simlog(text)
    assert list(frame["cycles"]) == [100, 150]
    assert list(frame["instructions"]) == [10, 20]


def test_decreasing_cumulative_counter_is_one_line_error():
    text = RTX.read_text()
    head = text[: text.index("gpgpu_simulation_time")]
    log = head + _second_block(text, 500, 19303, 1000)
    with pytest.raises(HilsimError, match="per-kernel"):
        parse_simlog(log, "x.log")
    frame = parse_simlog(log, "x.log", counters="per-kernel")
    assert list(frame["l2_accesses"]) == [393216, 1000]


def test_truncated_log_names_the_file(tmp_path):
    text = RTX.read_text()
    cut = tmp_path / "cut.log"
    cut.write_text(text[: text.index("gpu_tot_sim_insn")])
    with pytest.raises(HilsimError) as err:
        read_simlog(cut)
    assert str(cut) in str(err.value) and "truncated" in str(err.value)
    assert "\n" not in str(err.value)


def test_no_kernel_and_missing_file(tmp_path):
    (tmp_path / "empty.log").write_text("banner\n")
    with pytest.raises(HilsimError, match="no kernel statistics"):
        read_simlog(tmp_path / "empty.log")
    with pytest.raises(HilsimError, match="no such"):
        read_simlog(tmp_path / "none.log")


def test_read_folder_numbers_across_files():
    frame = read_simlogs([LOGS])
    assert list(frame["sim_launch"]) == [0, 1]
    assert set(frame["log"]) == {A100.name, RTX.name}


def test_simulator_named_from_the_banner(tmp_path):
    """Accel-Sim's logs start with its banner; a program run on GPGPU-Sim directly does
    not (validate must not call GPGPU-Sim logs "accel-sim logs")."""
    frame = read_simlogs([RTX])
    assert set(frame["simulator"]) == {"Accel-Sim"}
    text = RTX.read_text()
    plain = tmp_path / "gpgpusim.log"
    plain.write_text(text.replace("Accel-Sim [build", "Something [build", 1))
    assert set(read_simlogs([plain])["simulator"]) == {"GPGPU-Sim"}
