"""Fast-forward's launch list and log check, and the output comparison, on real logs.

The logs (tests/data/gpgpusim/ffchain.*.log, README there) are excerpts of runs of
ffchain.cu on SM7_QV100 (1 SM): ``full`` every launch in performance mode, ``ff`` launch
ids 2, 3, 8 (uids 3, 4, 9) in performance mode and the other nine functional; the
``-clock`` pair adds a launch (uid 7) that writes the simulated clock into the data.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hilsim.simmodel.gpgpusim.datacheck import (
    check_same_outputs,
    copy_digests,
    find_divergences,
    program_outputs,
)
from hilsim.simmodel.gpgpusim.fastforward import (
    check_fast_forward,
    fast_forward_env,
    launch_modes,
    launches_of_uids,
    read_launch_list,
    stats_uids,
    uids_of_launches,
    write_launch_list,
)

from hilsim.core.errors import HilsimError

DATA = Path(__file__).parent / "data" / "gpgpusim"


def _log(name: str) -> str:
    return (DATA / f"ffchain.{name}.SM7_QV100-1sm.log").read_text()


def _outputs(name: str):
    return program_outputs(_log(name), line_pattern=r"^ffchain ")


def test_uids_are_launch_ids_plus_one() -> None:
    assert uids_of_launches([8, 2, 3, 2]).tolist() == [3, 4, 9]
    assert uids_of_launches(np.array([0.0, 5.0])).tolist() == [1, 6]
    assert launches_of_uids([3, 4, 9]).tolist() == [2, 3, 8]
    assert uids_of_launches([]).tolist() == []
    with pytest.raises(HilsimError, match="launch id -1"):
        uids_of_launches([4, -1])
    with pytest.raises(HilsimError, match="whole numbers"):
        uids_of_launches([1.5])


def test_the_list_file_round_trips_and_bad_words_name_their_line(tmp_path: Path) -> None:
    path = write_launch_list(tmp_path / "l.txt", [8, 2, 3], note="stem seed 0")
    text = path.read_text()
    assert text.splitlines()[-3:] == ["3", "4", "9"] and text.startswith("# hilsim")
    assert "# stem seed 0" in text
    assert read_launch_list(path).tolist() == [3, 4, 9]
    (tmp_path / "m.txt").write_text("5 1 # the first\n\n  7\t2\n")
    assert read_launch_list(tmp_path / "m.txt").tolist() == [1, 2, 5, 7]
    for bad in ("0", "-3", "4x", "²"):
        (tmp_path / "b.txt").write_text(f"1\n{bad}\n")
        with pytest.raises(HilsimError, match=r"line 2: .* is not a kernel launch uid"):
            read_launch_list(tmp_path / "b.txt")


def test_env_sets_both_variables_and_clears_an_inherited_list(tmp_path: Path) -> None:
    env = fast_forward_env(tmp_path / "l.txt")
    assert env == {"HILSIM_PERF_LAUNCHES": str((tmp_path / "l.txt").resolve()),
                   "HILSIM_COPY_DIGESTS": "1"}
    assert fast_forward_env(None, copy_digests=False) == {"HILSIM_PERF_LAUNCHES": "",
                                                          "HILSIM_COPY_DIGESTS": ""}


def test_the_fast_forwarded_log_matches_its_list() -> None:
    log = _log("ff")
    modes = launch_modes(log)
    assert [u for u, _k, _m in modes] == list(range(1, 13))
    assert [u for u, _k, m in modes if m == "performance"] == [3, 4, 9]
    assert stats_uids(log) == [3, 4, 9]
    launches, perf, kernels = check_fast_forward(log, [2, 3, 8])
    assert (launches, perf) == (12, (3, 4, 9))
    assert kernels[:2] == ("_Z3mixPKjPjij", "_Z7scatterPKjPji")
    assert stats_uids(_log("full")) == list(range(1, 13))


@pytest.mark.parametrize(("ids", "message"), [
    ([2, 3, 9], "launch uid 9 ran in the wrong mode"),  # off by one on one launch
    ([3, 4, 9], r"launch uid 3 ran in the wrong mode \(4 launches differ"),  # uids as ids
    ([2, 3, 8, 12], "made 12 launches but the list names uid 13"),
    ([2, 3], "launch uid 9 ran in the wrong mode"),
])
def test_a_log_that_does_not_match_the_list_is_refused(ids, message) -> None:
    with pytest.raises(HilsimError, match=message):
        check_fast_forward(_log("ff"), ids, "ff.log")


def test_a_log_without_fast_forward_or_with_a_missing_block_is_refused() -> None:
    with pytest.raises(HilsimError, match="did not read HILSIM_PERF_LAUNCHES"):
        check_fast_forward(_log("full"), [2, 3, 8])
    cut = _log("ff").replace("kernel_launch_uid = 9 ", "kernel_launch_uid = 10 ")
    with pytest.raises(HilsimError, match=r"blocks for unlisted uids \[10\]; no block for "
                                          r"listed uids \[9\]"):
        check_fast_forward(cut, [2, 3, 8])


def test_copy_digests_carry_the_launches_before_them() -> None:
    digests = copy_digests(_log("full"))
    assert [d.after_uid for d in digests] == [3, 6, 9, 12]
    assert {(d.kind, d.nbytes) for d in digests} == {("device-to-host", 8192)}
    assert digests[0].after_kernel == "_Z3mixPKjPjij" and digests[0].index == 0
    assert [d.digest for d in digests] == [d.digest for d in copy_digests(_log("ff"))]


def test_full_and_fast_forwarded_runs_computed_the_same() -> None:
    full, ff = _outputs("full"), _outputs("ff")
    assert len(full.lines) == 5 and full.launches == 12
    assert find_divergences(full, ff) == []
    check_same_outputs(full, ff)


def test_a_timing_dependent_result_is_named_with_its_launches() -> None:
    full, ff = _outputs("full-clock"), _outputs("ff-clock")
    found = find_divergences(full, ff, ("full run", "sampled run"))
    assert len(found) == 2
    assert found[0].startswith("sampled run differs from the full run at copy to the host 2 "
                               "of 4 (device-to-host, 8,192 bytes")
    assert found[0].endswith("the data parted in launch uids 4..7 (the last: '_Z5stampPj')")
    assert found[1].startswith("sampled run differs from the full run at result line 2 of 5")
    with pytest.raises(HilsimError, match="copy to the host 2 of 4"):
        check_same_outputs(full, ff)


def test_missing_files_extra_copies_and_nothing_to_compare(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "out.txt").write_text("1 2 3\n")
    full = program_outputs(_log("full"), tmp_path / "a", files=("out.txt",))
    other = program_outputs(_log("full").rsplit("GPGPU-Sim API: hilsim copy digest", 1)[0],
                            tmp_path / "b", files=("out.txt",))
    found = find_divergences(full, other)
    assert "made 3 copies to the host, the full run 4 (the first 3 agree)" in found[0]
    assert found[-1] == "fast-forwarded run did not write output file out.txt"
    (tmp_path / "b" / "out.txt").write_text("1 2 4\n")
    other = program_outputs(_log("full"), tmp_path / "b", files=("out.txt",))
    assert find_divergences(full, other)[0].startswith(
        "fast-forwarded run wrote output file out.txt differently (sha256 ")
    with pytest.raises(HilsimError, match="nothing|no copy digests"):
        check_same_outputs(program_outputs("no log"), program_outputs("no log"))


def test_host_lines_glued_after_a_statistics_line_are_still_read() -> None:
    """The host thread prints the next launch's lines while the simulation thread prints
    the previous kernel's statistics: seen in a real run as ``LD_mem_lat_dist GPGPU-Sim
    PTX: hilsim fast-forward: launch uid 20 ... runs in functional mode`` (the statistics
    line's numbers on the lines after). Every launch, push and copy is still found."""
    log = _log("ff")
    glued = log.replace("\nGPGPU-Sim PTX: hilsim fast-forward: launch uid 5 ",
                        "\nLD_mem_lat_dist GPGPU-Sim PTX: hilsim fast-forward: launch uid 5 ")
    glued = glued.replace("\nGPGPU-Sim PTX: pushing kernel '_Z7scatterPKjPji'",
                          "\nST_mem_lat_dist GPGPU-Sim PTX: pushing kernel '_Z7scatterPKjPji'", 1)
    glued = glued.replace("\nGPGPU-Sim API: hilsim copy digest:",
                          "\nicnt_total GPGPU-Sim API: hilsim copy digest:", 1)
    assert glued.count("LD_mem_lat_dist GPGPU-Sim PTX") == 1
    assert [u for u, _k, _m in launch_modes(glued)] == list(range(1, 13))
    check_fast_forward(glued, [2, 3, 8])
    assert program_outputs(glued) == program_outputs(log)


def test_the_profile_reader_finds_glued_host_lines_too() -> None:
    from hilsim.simmodel.gpgpusim.logprofile import scan_log

    log = _log("ff")
    glued = log.replace("\nGPGPU-Sim PTX: pushing kernel '_Z7scatterPKjPji'",
                        "\nST_mem_lat_dist GPGPU-Sim PTX: pushing kernel '_Z7scatterPKjPji'", 1)
    glued = glued.replace("\nGPGPU-Sim PTX: pushing kernel '_Z3mixPKjPjij'",
                          "\nhilsim-region push phase one\nLD_mem hilsim-region pop phase one"
                          "\nGPGPU-Sim PTX: pushing kernel '_Z3mixPKjPjij'", 1)
    plain, found = scan_log(log, "ff"), scan_log(glued, "glued")
    assert found["pushed"] == plain["pushed"] and len(plain["pushed"]) == 12
    assert [r[0] for r in found["regions"]] == ["phase one"]
