"""Fast-forward on the simulated card: a launch list runs exactly its launches in detail.

`gpgpusim` tier (needs the simulator built with patch 0002, `hilsim gpgpusim setup`).
The program, tests/data/gpgpusim/ffchain.cu: 12 launches (uid k + 1 is `mix` for even k,
`scatter` for odd k), each reading what the previous one wrote, with copies to the host
after launches 2, 5, 8 and 11 and their checksums printed.
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

from hilsim.core.errors import HilsimError
from tests.simbuild import require_sim_build, unavailable

pytestmark = pytest.mark.gpgpusim
DATA = Path(__file__).parent / "data" / "gpgpusim"
ONE_SM = {"-gpgpu_n_clusters": "1", "-gpgpu_perf_sim_memcpy": "0"}
LINES = r"^ffchain "
MIX, SCATTER, STAMP = "_Z3mixPKjPjij", "_Z7scatterPKjPji", "_Z5stampPj"


@pytest.fixture(scope="module")
def sim():
    from hilsim.simmodel.gpgpusim.fastforward import require_fast_forward_build

    build = require_sim_build()
    try:
        require_fast_forward_build(build)
    except HilsimError as exc:
        unavailable(str(exc))
    return build


@pytest.fixture(scope="module")
def ffchain(sim, tmp_path_factory) -> Path:
    from hilsim.simmodel.gpgpusim.compile import compile_cuda

    return compile_cuda(DATA / "ffchain.cu", tmp_path_factory.mktemp("bin") / "ffchain",
                        extra_flags=("-O2",))


@pytest.fixture(scope="module")
def full(sim, ffchain, tmp_path_factory):
    """The whole program in performance mode (no list), with copy digests."""
    from hilsim.simmodel.gpgpusim.fastforward import fast_forward_env
    from hilsim.simmodel.gpgpusim.run import run_program

    return run_program([ffchain], "SM7_QV100", tmp_path_factory.mktemp("full"), options=ONE_SM,
                       env=fast_forward_env(None), timeout_s=300, build=sim)


def _outputs(run):
    from hilsim.simmodel.gpgpusim.datacheck import program_outputs

    return program_outputs(run.stdout, run.run_dir, line_pattern=LINES)


def test_listed_launches_alone_run_in_detail_and_the_data_are_the_full_runs(
        sim, ffchain, full, tmp_path: Path) -> None:
    from hilsim.simmodel.gpgpusim.datacheck import check_same_outputs
    from hilsim.simmodel.gpgpusim.fastforward import run_fast_forward, stats_uids

    assert stats_uids(full.stdout) == list(range(1, 13))
    ff = run_fast_forward([ffchain], "SM7_QV100", tmp_path / "ff", [2, 3, 8], options=ONE_SM,
                          timeout_s=300, build=sim)
    # hilsim launch ids 2, 3, 8 are the simulator's uids 3, 4, 9: those alone have
    # statistics blocks, in launch order, and they are the kernels launched there
    assert ff.launches == 12 and ff.functional_launches == 9
    assert ff.performance_uids == (3, 4, 9)
    assert stats_uids(ff.run.stdout) == [3, 4, 9]
    assert [k for k, _c in ff.run.kernel_cycles()] == [MIX, SCATTER, MIX]
    assert ff.kernels == tuple(MIX if k % 2 == 0 else SCATTER for k in range(12))
    assert ff.run.stdout.count("GPGPU-Sim: Performing Functional Simulation") == 9
    assert "(mode=functional simulation)" not in full.stdout
    # the timing model runs only for the listed launches: the total is their sum
    cycles = [c for _k, c in ff.run.kernel_cycles()]
    tot = [int(x) for x in re.findall(r"^gpu_tot_sim_cycle = (\d+)", ff.run.stdout, re.M)]
    assert tot[-1] == sum(cycles) and all(c > 0 for c in cycles)
    # every launch computed: the four copies back and the printed checksums are the full
    # run's, byte for byte
    ref, got = _outputs(full), _outputs(ff.run)
    assert len(ref.digests) == 4 and len(ref.lines) == 5
    assert [d.after_uid for d in ref.digests] == [3, 6, 9, 12]
    check_same_outputs(ref, got)


def test_an_empty_list_runs_every_launch_functionally(sim, ffchain, full, tmp_path) -> None:
    from hilsim.simmodel.gpgpusim.datacheck import check_same_outputs
    from hilsim.simmodel.gpgpusim.fastforward import run_fast_forward

    ff = run_fast_forward([ffchain], "SM7_QV100", tmp_path / "fn", [], options=ONE_SM,
                          timeout_s=300, build=sim)
    assert ff.performance_uids == () and ff.launches == 12
    assert "kernel_name = " not in ff.run.stdout
    check_same_outputs(_outputs(full), _outputs(ff.run), ("full run", "functional run"))


def test_a_timing_dependent_result_is_caught_and_the_launches_named(sim, ffchain,
                                                                    tmp_path) -> None:
    from hilsim.simmodel.gpgpusim.datacheck import check_same_outputs, find_divergences
    from hilsim.simmodel.gpgpusim.fastforward import fast_forward_env, run_fast_forward
    from hilsim.simmodel.gpgpusim.run import run_program

    argv = [ffchain, "12", "2048", "clock"]  # launch uid 7 adds %clock into the data
    full = run_program(argv, "SM7_QV100", tmp_path / "full", options=ONE_SM,
                       env=fast_forward_env(None), timeout_s=300, build=sim)
    ff = run_fast_forward(argv, "SM7_QV100", tmp_path / "ff", [2, 3, 8], options=ONE_SM,
                          timeout_s=300, build=sim)
    assert ff.kernels[6] == STAMP and ff.launches == 13
    found = find_divergences(_outputs(full), _outputs(ff.run))
    # the first copy (after uid 3) agrees; the second (after the stamp, uid 7) does not
    assert found and "copy to the host 2 of 4" in found[0], found
    assert "launch uids 4..7 (the last: '_Z5stampPj')" in found[0], found
    assert any("result line 2 of 5" in f for f in found), found
    with pytest.raises(HilsimError, match="copy to the host 2 of 4"):
        check_same_outputs(_outputs(full), _outputs(ff.run))


def test_a_list_for_another_program_is_refused(sim, ffchain, tmp_path) -> None:
    from hilsim.simmodel.gpgpusim.fastforward import run_fast_forward

    with pytest.raises(HilsimError, match=r"made 12 launches but the list names uid 13"):
        run_fast_forward([ffchain], "SM7_QV100", tmp_path / "ff", [0, 12], options=ONE_SM,
                         timeout_s=300, build=sim)


def test_a_bad_list_stops_the_program_with_one_line(sim, ffchain, tmp_path) -> None:
    from hilsim.simmodel.gpgpusim.fastforward import fast_forward_env
    from hilsim.simmodel.gpgpusim.run import run_program

    bad = tmp_path / "list.txt"
    bad.write_text("# sample\n3 4\n9 x7\n")
    with pytest.raises(HilsimError) as err:
        run_program([ffchain], "SM7_QV100", tmp_path / "run", options=ONE_SM,
                    env=fast_forward_env(bad), timeout_s=300, build=sim)
    assert "line 3: 'x7' is not a kernel launch uid" in str(err.value)


def _normalised(text: str) -> list[str]:
    """A log without what changes from run to run: wall times and rates, host addresses
    (ASLR; the stream id is one, printed in decimal), temporary file names, the run
    folder."""
    volatile = re.compile(r"gpgpu_simulation_(time|rate)|gpgpu_silicon_slowdown|_cuobjdump_"
                          r"|_app_cuda_version_|/tmp/|ptxas|GPGPU-Sim uArch: .*\(\d+ sec\)"
                          r"|^gpu_total_sim_rate=")
    return [re.sub(r"0x[0-9a-f]{6,}|(?<=^kernel_stream_id = )\d+", "?", ln)
            for ln in text.splitlines() if not volatile.search(ln)]


def test_without_the_variables_the_log_is_the_unpatched_simulators(sim, tmp_path) -> None:
    """The committed vecadd_chase log was made by the build before patch 0002."""
    from hilsim.simmodel.gpgpusim.compile import compile_cuda
    from hilsim.simmodel.gpgpusim.fastforward import fast_forward_env
    from hilsim.simmodel.gpgpusim.run import run_program

    exe = compile_cuda(DATA / "vecadd_chase.cu", tmp_path / "vecadd_chase")
    run = run_program([exe, "1024"], "SM7_QV100", tmp_path / "run", options=ONE_SM,
                      env=fast_forward_env(None, copy_digests=False), timeout_s=300,
                      build=sim)
    with gzip.open(DATA / "vecadd_chase.SM7_QV100-1sm.log.gz", "rt") as handle:
        before = handle.read()
    assert "hilsim" not in run.stdout
    assert _normalised(run.stdout) == _normalised(before)
