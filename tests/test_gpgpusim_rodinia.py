"""An unmodified Rodinia app on the simulated card: full, fast-forwarded and functional
runs compute the same image, which is the app's CPU reference.

`gpgpusim` tier. srad_v2 (tests/data/rodinia/README.md), 32 x 32 pixels, 10 iterations:
20 launches of 2 kernels, a copy to the host per iteration; on the reduced QV100
(``REDUCED_QV100``: 4 SMs).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.simbuild import require_fast_forward_sim_build

pytestmark = pytest.mark.gpgpusim
SRAD = Path(__file__).parent / "data" / "rodinia" / "srad_v2"
ARGS = ["32", "32", "0", "15", "0", "15", "0.5", "10"]
RESULT = r"^(-?\d+\.\d{5} )+$"  # the image -DOUTPUT prints, one row per line


@pytest.fixture(scope="module")
def sim():
    return require_fast_forward_sim_build()


@pytest.fixture(scope="module")
def srad(sim, tmp_path_factory) -> dict[str, Path]:
    from hilsim.simmodel.gpgpusim.compile import compile_cuda

    out = tmp_path_factory.mktemp("srad")
    return {"gpu": compile_cuda(SRAD / "srad.cu", out / "srad", extra_flags=("-O2", "-DOUTPUT")),
            "cpu": compile_cuda(SRAD / "srad.cu", out / "srad_cpu",
                                extra_flags=("-O2", "-DCPU", "-DOUTPUT"))}


def test_srad_is_the_same_full_fast_forwarded_functional_and_on_the_cpu(sim, srad,
                                                                        tmp_path) -> None:
    from hilsim.simmodel.gpgpusim.datacheck import check_same_outputs, program_outputs
    from hilsim.simmodel.gpgpusim.fastforward import (
        fast_forward_env,
        run_fast_forward,
        stats_uids,
    )
    from hilsim.simmodel.gpgpusim.run import run_program
    from hilsim.simmodel.gpgpusim.workloads import REDUCED_QV100

    argv = [srad["gpu"], *ARGS]
    full = run_program(argv, "SM7_QV100", tmp_path / "full", options=REDUCED_QV100,
                       env=fast_forward_env(None), timeout_s=600, build=sim)
    ff = run_fast_forward(argv, "SM7_QV100", tmp_path / "ff", [4, 5, 13], options=REDUCED_QV100,
                          timeout_s=600, build=sim)
    functional = run_fast_forward(argv, "SM7_QV100", tmp_path / "fn", [],
                                  options=REDUCED_QV100, timeout_s=600, build=sim)
    assert stats_uids(full.stdout) == list(range(1, 21))
    assert ff.launches == 20 and ff.performance_uids == (5, 6, 14)
    assert [k for k, _c in ff.run.kernel_cycles()] == [
        "_Z11srad_cuda_1PfS_S_S_S_S_iif", "_Z11srad_cuda_2PfS_S_S_S_S_iiff",
        "_Z11srad_cuda_2PfS_S_S_S_S_iiff"]
    ref = program_outputs(full.stdout, line_pattern=RESULT)
    assert len(ref.digests) == 10 and len(ref.lines) == 32  # a copy per iteration; 32 rows
    assert len(set(ref.lines)) > 1
    check_same_outputs(ref, program_outputs(ff.run.stdout, line_pattern=RESULT))
    check_same_outputs(ref, program_outputs(functional.run.stdout, line_pattern=RESULT),
                       ("full run", "functional run"))
    # the app's CPU loop, run natively with no device (its GPU part fails and is skipped)
    cpu = subprocess.run([str(srad["cpu"]), *ARGS], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path, check=True,
                         env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    cpu_lines = program_outputs(cpu.stdout, line_pattern=RESULT).lines
    assert cpu_lines == ref.lines


def _cli(*args: str) -> str:
    from click.testing import CliRunner

    from hilsim.cli.main import cli

    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_srad_goes_through_profile_plan_simulate_and_validate_unmodified(sim, srad,
                                                                         tmp_path) -> None:
    """The whole loop, one command each, on the unmodified app: the profile is the full
    run on the reduced QV100, the sampled run fast-forwards everything outside the sample
    and its warm-up, and its copies to the host equal the profile's."""
    import json

    reduced = ["-O", "-gpgpu_n_clusters=4", "-O", "-gpgpu_kernel_launch_latency=0",
               "-O", "-gpgpu_perf_sim_memcpy=0"]
    program = ["--", str(srad["gpu"]), *ARGS]
    bundle, plan, out = tmp_path / "srad.bundle", tmp_path / "stem.plan.json", tmp_path / "sim"
    _cli("agent", "profile", "--backend", "gpgpusim", "--card", "SM7_QV100", *reduced,
         "-o", str(bundle), *program)
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert len(manifest["profilers"][0]["copy_digests"]) == 10
    _cli("plan", str(bundle), "-m", "stem", "-p", "seed=0", "-o", str(plan))
    printed = _cli("simulate", str(plan), "--card", "SM7_QV100", *reduced, "-o", str(out),
                   "--warmup", "l2-fill+preceding:1", *program)
    assert "data check: the copies to the host of 1 simulator process(es) equal the " \
           "profiled full run's (10 copies)" in printed
    summary = json.loads((out / "simulate.json").read_text())
    assert summary["launch_mode"] == "fast-forward"
    run = summary["runs"][0]
    # stopped once its last listed launch was simulated: the launches after it never ran
    assert 0 < run["functional_launches"] <= 20 - run["launches"]
    parts = summary["sim_cpu_parts"]
    assert parts["fast_forward"] > 0 and parts["sample"] > 0
    assert sum(parts.values()) == pytest.approx(summary["sim_cpu_s"], rel=0.05)
    # the sampled kernels are the plan's launches, placed by the simulator's uids
    samples = json.loads(plan.read_text())["samples"]
    wanted = sorted(int(i) for i in (samples["launch_id"] if isinstance(samples, dict)
                                     else [s["launch_id"] for s in samples]))
    from hilsim.simmodel.gpgpusim.simlog import read_simlog

    simulated = read_simlog(out / "sampled.log")["launch_id"].tolist()
    assert set(wanted) <= set(simulated)
    report = _cli("validate", "--silicon", str(bundle), "--plan", str(plan), "--sim", str(out),
                  "-o", str(tmp_path / "val"))
    assert "total error" in report


def test_on_a_card_that_counts_no_dram_reads_the_warm_up_follows_the_l2_misses(
        sim, srad, tmp_path) -> None:
    """SM90_H100 (4 SMs) simulates DRAM with its simple model, so its logs count no DRAM
    reads: against them the profile's DRAM reads (0 here: the data fit in the L2) say every
    sample is warm. srad_cuda_2 reads what srad_cuda_1 wrote just before it; with no
    warm-up those reads miss the L2 and both samples ran 20% slow (STEM seed 0:
    +20.00%, the interval missing the full run). ``auto`` judges them by their L2 misses
    on such a card, takes one launch of warm-up, and the estimate is within 1%."""
    import json

    reduced = ["-O", "-gpgpu_n_clusters=4", "-O", "-gpgpu_kernel_launch_latency=0"]
    program = ["--", str(srad["gpu"]), *ARGS]
    bundle, plan, out = tmp_path / "srad.bundle", tmp_path / "stem.plan.json", tmp_path / "sim"
    _cli("agent", "profile", "--backend", "gpgpusim", "--card", "SM90_H100", *reduced,
         "-o", str(bundle), *program)
    _cli("plan", str(bundle), "-m", "stem", "-p", "seed=0", "-o", str(plan))
    printed = _cli("simulate", str(plan), "--card", "SM90_H100", *reduced, "-o", str(out),
                   "--warmup", "auto", *program)
    assert "simple DRAM model counts no DRAM reads" in printed
    summary = json.loads((out / "simulate.json").read_text())
    assert summary["warmup"]["preceding"] >= 1
    assert abs(summary["estimate_error_signed"]) < 0.01, summary["estimate_error_signed"]
    lo, hi = summary["interval_cycles"]
    full = summary["full_cycles"]
    assert lo <= full <= hi


def test_a_timing_dependent_program_is_named_by_the_data_check(sim, tmp_path,
                                                               capsys) -> None:
    """ffchain with `clock` adds the simulated clock into its data after launch 5: run
    functionally in the sampled simulation, that launch computes another value than in the
    profiled full run, and simulate refuses in one line naming the copy that differs when
    a sample comes after it (or with --run-to-end); a sample before it is right."""
    from hilsim.simmodel.gpgpusim.compile import compile_cuda

    from hilsim.core.plan import Plan

    data = Path(__file__).parent / "data" / "gpgpusim"
    ffchain = compile_cuda(data / "ffchain.cu", tmp_path / "ffchain", extra_flags=("-O2",))
    one_sm = ["-O", "-gpgpu_n_clusters=1", "-O", "-gpgpu_perf_sim_memcpy=0"]
    program = ["--", str(ffchain), "12", "2048", "clock"]
    bundle = tmp_path / "ff.bundle"
    _cli("agent", "profile", "--backend", "gpgpusim", "--card", "SM7_QV100", *one_sm,
         "-o", str(bundle), *program)
    import pandas as pd

    names = pd.read_parquet(bundle / "launches.parquet")["name"].tolist()
    from hilsim.cli.main import main

    def plan_of(launch: int) -> Path:
        path = tmp_path / f"plan{launch}.json"
        Plan(method="hand", params={}, source={"n_launches": 13, "path": str(bundle)},
             clusters=[], samples=pd.DataFrame({"launch_id": [launch], "weight": [13.0],
                                                "cluster": [0], "draws": [1],
                                                "name": [names[launch]]})).save(path)
        return path

    # a sample after the stamp computes on other data: refused, naming the copy
    code = main(["simulate", str(plan_of(9)), "--card", "SM7_QV100", *one_sm, "-o",
                 str(tmp_path / "sim"), "--warmup", "none", *program])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "data check: warm run (none) differs from the profiled full run at copy to the " \
           "host 2 of" in err
    assert "_Z5stampPj" in err and "Traceback" not in err and len(err.splitlines()) == 1
    # a sample before it: the run stops after the sample, its data were right
    assert main(["simulate", str(plan_of(2)), "--card", "SM7_QV100", *one_sm, "-o",
                 str(tmp_path / "sim2"), "--warmup", "none", *program]) == 0
    capsys.readouterr()
    # ... and run to the program's end, the later divergence is still named
    code = main(["simulate", str(plan_of(2)), "--card", "SM7_QV100", *one_sm, "-o",
                 str(tmp_path / "sim3"), "--warmup", "none", "--run-to-end", *program])
    assert code == 2 and "_Z5stampPj" in capsys.readouterr().err
