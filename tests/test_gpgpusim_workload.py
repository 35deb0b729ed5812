"""The shipped transformer_step workload on the simulated card (`gpgpusim` tier).

Compiles the package's ``transformer_step.cu`` once, checks its schedule (>= 1,000 launches
of >= 8 kernels, several shapes per kernel) and runs a three-launch list of it on a 1-SM
SM7_QV100 through ``hilsim simulate``'s code path: the kernels come back with their
full-run launch ids, in order. Skips without a build (HILSIM_REQUIRE_GPGPUSIM=1 fails).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.simbuild import require_sim_build

pytestmark = pytest.mark.gpgpusim


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> Path:
    from hilsim.simmodel.gpgpusim.workloads import build_transformer_step

    require_sim_build()
    return build_transformer_step(tmp_path_factory.mktemp("bin") / "transformer_step")


def test_schedule_has_enough_launches_and_behaviours(program: Path, tmp_path: Path) -> None:
    from hilsim.simmodel.gpgpusim.run import run_program

    # the simulator's libcudart starts up even for --list: keep its lines apart
    run = run_program([program, "--list"], "SM7_QV100", tmp_path / "run",
                      options={"-gpgpu_n_clusters": "1"}, timeout_s=300)
    rows = [m.groups() for m in re.finditer(r"^(\d+) (\S+) (\d+,\d+,\d+) (\d+,\d+,\d+)$",
                                            run.stdout, re.M)]
    assert [int(r[0]) for r in rows] == list(range(len(rows)))
    assert len(rows) >= 1000
    kernels = {r[1] for r in rows}
    assert len(kernels) >= 8
    shapes = {(r[1], r[2]) for r in rows}
    per_kernel = {k: sum(1 for s in shapes if s[0] == k) for k in kernels}
    assert per_kernel["gemm_bias<16>"] >= 5 and per_kernel["softmax_rows"] >= 4


def test_launch_list_runs_only_those_launches_with_their_ids(program: Path,
                                                             tmp_path: Path) -> None:
    from hilsim.analyzer.simulate import simulate_plan

    from hilsim.core.plan import Plan

    plan_path = tmp_path / "plan.json"
    ids = [7, 3, 28]  # any order: the harness runs them ascending
    import pandas as pd

    samples = pd.DataFrame({"launch_id": ids, "weight": [1.0] * 3, "cluster": [0, 1, 2],
                            "draws": [1] * 3,
                            "name": ["residual_add", "attn_scores", "argmax_rows"]})
    Plan(method="hand", params={}, source={"n_launches": 29}, clusters=[],
         samples=samples).save(plan_path)
    summary = simulate_plan(plan_path, [str(program), "--steps", "1"], "SM7_QV100",
                            tmp_path / "out", options={"-gpgpu_n_clusters": "1",
                                                       "-gpgpu_perf_sim_memcpy": "0",
                                                       "-gpgpu_kernel_launch_latency": "0"},
                            timeout_s=600, warmup="none", progress=False)
    assert summary.launches_simulated == 3
    from hilsim.simmodel.gpgpusim.simlog import read_simlogs

    log = read_simlogs([tmp_path / "out"])
    assert log["launch_id"].tolist() == [3, 7, 28]
    assert list(log["kernel"]) == ["_Z11attn_scoresPKfPfif", "_Z12residual_addPKfS0_Pfi",
                                          "_Z11argmax_rowsPKfPii"]
    saved = json.loads((tmp_path / "out" / "simulate.json").read_text())
    assert saved["sampled_cycles"] == float(log["cycles"].sum()) > 0
    assert saved["simulated_cycles"] == saved["sampled_cycles"]  # no warm-up, no cold run
    assert (tmp_path / "out" / "launches.txt").read_text().split() == ["3", "7", "28"]
    assert not (tmp_path / "out" / "run").exists()  # the run folder was a temporary one


def test_warmed_samples_are_placed_between_warm_and_cold_runs(program: Path,
                                                              tmp_path: Path) -> None:
    """``auto`` warm-up on the real one-step profile (tests/data/gpgpusim): launch 2 (a
    GEMM the full run ran with the first launches' lines already in L2) and launch 27
    (late in the step). The warm run fills the L2 from the host's copies; samples the
    profile shows colder are run cold too; each placed by its profiled L2 misses, so its
    cycles lie between its two runs and the interval carries the state term. About 10
    CPU-s: 2 + at most 2 launches on 1 SM."""
    import pandas as pd
    from hilsim.analyzer.simulate import simulate_plan
    from hilsim.simmodel.gpgpusim.logprofile import bundle_from_gpgpusim_log

    from hilsim.core.plan import Plan, load_plan

    log = Path(__file__).parent / "data" / "gpgpusim" / "transformer_step1.SM7_QV100-4sm.log"
    profile = bundle_from_gpgpusim_log(log, card="SM7_QV100")
    names = profile.launches["name"].astype(str).to_numpy()
    samples = pd.DataFrame({"launch_id": [2, 27], "weight": [9.0, 20.0], "cluster": [0, 1],
                            "draws": [1, 1], "name": [names[2], names[27]]})
    plan_path = Plan(method="hand", params={}, source={"n_launches": 29},
                     clusters=[{"cluster": 0, "size": 9, "mean_ns": 3000.0, "std_ns": 300.0},
                               {"cluster": 1, "size": 20, "mean_ns": 1000.0, "std_ns": 50.0}],
                     samples=samples, sampling="random").save(tmp_path / "plan.json")
    out = tmp_path / "out"
    s = simulate_plan(plan_path, [str(program), "--steps", "1"], "SM7_QV100", out,
                      options={"-gpgpu_n_clusters": "4", "-gpgpu_kernel_launch_latency": "0"},
                      timeout_s=900, warmup="auto", profile=profile, progress=False)
    assert s.warmup["l2_fill"] and s.warmup["cold_bound"]
    table = pd.read_csv(out / "samples.csv")
    warm, cold = table["cycles_warm"].to_numpy(), table["cycles_cold"].to_numpy()
    ran_cold = ~pd.isna(cold)
    assert ran_cold.any()  # the one-step profile has cold launches (first touches)
    lo = warm[ran_cold].clip(max=cold[ran_cold])
    hi = warm[ran_cold].clip(min=cold[ran_cold])
    assert (lo <= table["cycles"][ran_cold]).all() and (table["cycles"][ran_cold] <= hi).all()
    assert s.estimate_cycles == (table["weight"] * table["cycles"]).sum()
    # every simulated cycle counted: the cold run's too
    assert s.simulated_cycles == sum(r["cycles"] for r in s.runs) > s.sampled_cycles
    assert (out / "cold.log").exists() and load_plan(out / "plan.warmup.json").warmup is not None
    assert s.state["state_sd_cycles"] > 0 and s.interval_cycles is not None
