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
                            timeout_s=600)
    assert summary["launches_simulated"] == 3
    from hilsim.simmodel.simlog import read_simlogs

    log = read_simlogs([tmp_path / "out"])
    assert log["launch_id"].tolist() == [3, 7, 28]
    assert list(log["kernel"]) == ["_Z11attn_scoresPKfPfif", "_Z12residual_addPKfS0_Pfi",
                                          "_Z11argmax_rowsPKfPii"]
    saved = json.loads((tmp_path / "out" / "simulate.json").read_text())
    assert saved["sampled_cycles"] == float(log["cycles"].sum()) > 0
    assert (tmp_path / "out" / "launches.txt").read_text().split() == ["3", "7", "28"]
