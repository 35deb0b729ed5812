"""Portability on two REAL profiles of one workload taken on two different GPUs.

Both files are ``nsys stats --report cuda_gpu_trace`` output of the same SAXPY demo
(grid 4096, block 256, four launches) from the repository apexedgesystems/vernier:
one on an NVIDIA Thor (Jetson AGX Thor, nsys 2025.3.2), one on an RTX 5000 Ada laptop
GPU (nsys 2026.3.1); provenance in ``tests/data/nsys/README.md``. The workload is
tiny, so every expected number below is computed by hand from the eight durations.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from hilsim.analyzer import methods
from hilsim.analyzer.portability import evaluate_portability

from hilsim.cli.portability import portability_cmd
from hilsim.core.bundle import write_bundle
from hilsim.core.plan import Plan
from hilsim.formats.read import load_profile

DATA = Path(__file__).parent / "data" / "nsys"
THOR = DATA / "vernier-nsys2025.3.2-thor_cuda_gpu_trace.csv"
ADA = DATA / "vernier-nsys2026.3.1-rtx5000ada_cuda_gpu_trace.csv"
# durations as printed in the two reports (ns), in launch order
THOR_NS = [40672, 22528, 22624, 22624]
ADA_NS = [7072, 6945, 6816, 6592]


@pytest.fixture(scope="module")
def pair():
    return load_profile(THOR), load_profile(ADA)


def test_real_pair_imports_as_the_same_workload(pair):
    thor, ada = pair
    assert thor.launches["duration_ns"].tolist() == THOR_NS
    assert ada.launches["duration_ns"].tolist() == ADA_NS
    assert (thor.launches["name"].astype(str) == ada.launches["name"].astype(str)).all()


def test_hand_made_plan_projects_onto_the_other_gpu(pair):
    """Launch 1 stands for launches 1-3 (weight 3), launch 0 for itself (the warm-up)."""
    thor, ada = pair
    source = {"n_launches": thor.n_launches, "sequence_digest": thor.sequence_digest()}
    plan = Plan("manual", {}, source, [],
                pd.DataFrame({"launch_id": [0, 1], "weight": [1.0, 3.0]}))
    plan = plan.attach_names(thor.launches["name"])
    result = evaluate_portability(plan, thor, ada)
    assert result["alignment"]["aligned"] == 4
    assert result["alignment"]["unaligned_b"] == 0
    est_b = 7072 + 3 * 6945
    assert result["estimate_b_ns"] == pytest.approx(est_b)
    assert result["error"] == pytest.approx(abs(est_b - sum(ADA_NS)) / sum(ADA_NS))
    est_a = 40672 + 3 * 22528
    assert result["estimate_a_ns"] == pytest.approx(est_a)
    true_speedup = sum(THOR_NS) / sum(ADA_NS)
    assert result["speedup_b_over_a"]["true"] == pytest.approx(true_speedup)
    assert result["speedup_b_over_a"]["predicted"] == pytest.approx(est_a / est_b)
    (cls,) = result["classes"]
    assert cls["launches_a"] == 4 and cls["launches_b"] == 4


def test_stem_plan_from_thor_holds_on_ada(pair, tmp_path):
    thor, ada = pair
    plan = methods.create("stem").plan(thor).attach_names(thor.launches["name"])
    result = evaluate_portability(plan, thor, ada)
    # the Ada card runs the demo 3.95x faster than Thor; the sample must predict it
    assert result["speedup_b_over_a"]["true"] == pytest.approx(108448 / 27425)
    assert result["speedup_b_over_a"]["error"] < 0.05
    assert result["error"] < 0.05
    write_bundle(thor, tmp_path / "thor")
    write_bundle(ada, tmp_path / "ada")
    plan.save(tmp_path / "plan.json")
    out = tmp_path / "port.json"
    run = CliRunner().invoke(portability_cmd, ["--plan", str(tmp_path / "plan.json"),
                                               "--source", str(tmp_path / "thor"),
                                               "--bundle", str(tmp_path / "ada"), "-o", str(out)])
    assert run.exit_code == 0, run.output
    assert json.loads(out.read_text())["error"] == pytest.approx(result["error"])
