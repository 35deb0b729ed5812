"""The `gpgpusim` tier: compile tiny CUDA programs and run them on the simulated SM7_QV100.

Needs a GPGPU-Sim build (`hilsim gpgpusim setup`, or HILSIM_GPGPUSIM_HOME) and the CUDA
11.x toolchain; skips with the reason otherwise, except under HILSIM_REQUIRE_GPGPUSIM=1
(CI), where a missing build fails. Programs: tests/data/gpgpusim/README.md.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from hilsim.core.errors import HilsimError
from tests.simbuild import require_sim_build

pytestmark = pytest.mark.gpgpusim
DATA = Path(__file__).parent / "data" / "gpgpusim"
ONE_SM = {"-gpgpu_n_clusters": "1", "-gpgpu_perf_sim_memcpy": "0"}


@pytest.fixture(scope="module")
def sim():
    return require_sim_build()


@pytest.fixture(scope="module")
def programs(sim, tmp_path_factory):
    from hilsim.simmodel.gpgpusim.compile import compile_cuda

    out = tmp_path_factory.mktemp("bin")
    return {
        name: compile_cuda(DATA / f"{name}.cu", out / name)
        for name in ("vecadd_chase", "clock64_abort", "spin")
    }


def test_vecadd_and_clock_chase_on_qv100(sim, programs, tmp_path: Path) -> None:
    from hilsim.simmodel.gpgpusim.run import run_program

    started = time.monotonic()
    run = run_program([programs["vecadd_chase"], "1024"], "SM7_QV100", tmp_path / "run",
                      options=ONE_SM, timeout_s=300, build=sim)
    print(f"vecadd_chase on SM7_QV100 (1 SM): {time.monotonic() - started:.1f} s wall")
    assert run.returncode == 0 and run.log_path == tmp_path / "run" / "sim.log"
    assert "vecadd n=1024 mismatches=0" in run.stdout
    m = re.search(r"chase steps=256 cycles=(\d+) cycles_per_load=([\d.]+) end=0", run.stdout)
    assert m, run.stdout[-2000:]
    # an 8 KiB ring lives in L1: cycles/load near -gpgpu_l1_latency 20 (+ pipeline), far
    # below the L2 (160) latency
    per_load = float(m.group(2))
    assert 15 < per_load < 60
    # GPGPU-Sim's per-kernel statistics, both kernels
    assert len(re.findall(r"^gpu_sim_cycle = \d+", run.stdout, re.M)) == 2
    assert "kernel_name = _Z6vecaddPKfS0_Pfi" in run.stdout
    # the run folder holds the config the simulator read, with the overrides
    cfg = (tmp_path / "run" / "gpgpusim.config").read_text()
    assert cfg.rstrip().endswith("-gpgpu_perf_sim_memcpy 0")
    assert re.search(r"-gpgpu_n_clusters\s+1\b", run.stdout)  # the simulator echoes options
    kernels = run.kernel_cycles()
    assert [k for k, _ in kernels] == ["_Z6vecaddPKfS0_Pfi", "_Z5chasePKjiPj"]
    assert all(c > 0 for _, c in kernels)


def test_the_h100_card_with_more_channels_than_its_crossbar_had_ports_runs(
        sim, programs, tmp_path: Path) -> None:
    """SM90_H100's booksim crossbar has k = 212 ports: its 132 SMs and 80 L2
    sub-partitions. A card tuned to 41 channels (82 sub-partitions, as the on-simulator
    tuner made from the H100's own suite) killed the simulator with SIGSEGV before its
    first launch; the run folder's crossbar is now fitted to the card's nodes."""
    from hilsim.simmodel.gpgpusim.run import run_program

    run = run_program([programs["vecadd_chase"], "1024"], "SM90_H100", tmp_path / "run",
                      options={"-gpgpu_n_mem": "41", "-gpgpu_perf_sim_memcpy": "0"},
                      timeout_s=600, build=sim)
    assert "vecadd n=1024 mismatches=0" in run.stdout
    icnt = (tmp_path / "run" / "config_hopper_islip.icnt").read_text()
    assert re.search(r"^k = 214;", icnt, re.M)


def test_card_by_path_runs_like_the_name_through_the_cli(sim, programs, tmp_path: Path,
                                                          capsys) -> None:
    from hilsim.simmodel.gpgpusim.run import run_program

    from hilsim.cli.main import main

    cfg = sim.configs_dir / "SM7_QV100" / "gpgpusim.config"
    mine = tmp_path / "mycard.config"  # a card nobody shipped: any path to a config
    mine.write_text(cfg.read_text())
    by_name = run_program([programs["vecadd_chase"], "256"], "SM7_QV100", tmp_path / "b",
                          options=ONE_SM, build=sim)
    code = main(["gpgpusim", "run", "--card", str(mine), "-O", "-gpgpu_n_clusters=1",
                 "-O", "gpgpu_perf_sim_memcpy=0", "--run-dir", str(tmp_path / "a"),
                 "--timeout", "300", "--", str(programs["vecadd_chase"]), "256"])
    out = capsys.readouterr().out
    assert code == 0, out
    printed = [(ln.split()[-1], int(ln.split()[0].replace(",", "")))
               for ln in out.splitlines() if " cycles  " in ln]
    assert printed == by_name.kernel_cycles() and len(printed) == 2
    assert f"log {tmp_path / 'a' / 'sim.log'}" in out
    main(["gpgpusim", "cards"])
    assert "SM7_QV100" in capsys.readouterr().out


def test_simulator_abort_is_one_line_with_the_log(sim, programs, tmp_path: Path) -> None:
    from hilsim.simmodel.gpgpusim.run import run_program

    with pytest.raises(HilsimError) as err:
        run_program([programs["clock64_abort"]], "SM7_QV100", tmp_path / "run",
                    options=ONE_SM, timeout_s=120, build=sim)
    msg = str(err.value)
    assert "\n" not in msg and str(tmp_path / "run" / "sim.log") in msg
    assert "clock64_abort on SM7_QV100: simulator killed by SIGABRT" in msg
    assert "reads %clock64" in msg
    # line buffering kept what the simulator printed up to the abort (ptx_sim.cc's bare
    # abort() says nothing itself); without stdbuf the last lines, from "bind to kernel"
    # on, stay in stdio's buffer and are lost (checked by hand: the plain log ends at
    # "pushing kernel '_Z5stampPx'")
    log = (tmp_path / "run" / "sim.log").read_text()
    assert "Shader 0 bind to kernel 1 '_Z5stampPx'" in log


def test_timeout_kills_and_names_the_log(sim, programs, tmp_path: Path) -> None:
    from hilsim.simmodel.gpgpusim.run import run_program

    started = time.monotonic()
    with pytest.raises(HilsimError, match=r"still running after 8 s, killed: log .*sim.log"):
        run_program([programs["spin"]], "SM7_QV100", tmp_path / "run", options=ONE_SM,
                    timeout_s=8, build=sim)
    assert time.monotonic() - started < 30
    assert "GPGPU-Sim" in (tmp_path / "run" / "sim.log").read_text()


def test_terminated_caller_takes_the_simulator_with_it(sim, programs, tmp_path: Path) -> None:
    """SIGTERM to a process waiting on a simulation (or SIGINT to one a background shell
    started, which ignores it) kills the simulator too: it runs in its own session and
    would otherwise spin on, orphaned (mutant: no handler -> the spin program survives)."""
    import signal
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from hilsim.simmodel.gpgpusim.run import run_program\n"
        f"run_program([{str(programs['spin'])!r}], 'SM7_QV100', {str(tmp_path / 'run')!r}, "
        "options={'-gpgpu_n_clusters': '1', '-gpgpu_perf_sim_memcpy': '0'}, timeout_s=300)\n"
    )
    caller = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    log = tmp_path / "run" / "sim.log"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and "GPGPU-Sim uArch: Shader" not in (
            log.read_text(errors="replace") if log.exists() else ""):
        time.sleep(0.5)
    spinning = [p for p in Path("/proc").iterdir() if p.name.isdigit()
                and _cmdline(p).startswith(str(programs["spin"]))]
    assert spinning, "the simulation did not start"
    caller.send_signal(signal.SIGTERM)
    caller.wait(timeout=60)
    time.sleep(1)
    for proc in spinning:
        assert not proc.exists() or _state(proc) == "Z", f"{proc} still running"


def _cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _state(proc: Path) -> str:
    try:
        return (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "gone"


def test_compile_error_is_one_line(sim, tmp_path: Path) -> None:
    from hilsim.simmodel.gpgpusim.compile import compile_cuda

    bad = tmp_path / "bad.cu"
    bad.write_text("__global__ void k() { undefined_thing(); }\nint main() { return 0; }\n")
    with pytest.raises(HilsimError, match=r"bad.cu: nvcc 11\.\d+ failed: .*error.*undefined_thing"):
        compile_cuda(bad, tmp_path / "bad")
    assert not list(tmp_path.glob(".bad.tmp*")) and not (tmp_path / "bad").exists()
