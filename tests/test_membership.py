"""Cluster membership of plans (analyzer.membership, Plan.members) and its use in reports.

Every registered method runs on a real profile (the CASIO NeRF A100 nsys export with
its NVTX ranges; the A100 Kineto trace with CUPTI instruction-mix counters for the
methods that need metrics), and its membership must agree with the plan it made:
each sampled launch lies in its own cluster and each cluster holds as many launches
as its recorded size. A plan read back from JSON recovers the same membership by
re-running its method; an edited or hand-made plan gets none, with a reason.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hilsim.analyzer import methods
from hilsim.analyzer.membership import cluster_members
from hilsim.analyzer.validate import SimResults, validate, write_report

from hilsim.core.plan import load_plan
from hilsim.formats.kineto import bundle_from_kineto
from hilsim.formats.nsys_sqlite import bundle_from_nsys_sqlite
from tests.test_validate import _bundle, _plan

DATA = Path(__file__).parent / "data"
NERF = DATA / "nsys-sqlite" / "casio-nerf-a100.nsys.sqlite"
A100_COUNTERS = DATA / "kineto" / "hta-a100-cupti-counters.trace.json.gz"
FFMA = "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"


@pytest.fixture(scope="module")
def nerf():
    return bundle_from_nsys_sqlite(NERF)


@pytest.fixture(scope="module")
def counters():
    return bundle_from_kineto(A100_COUNTERS)


CASES = [
    ("stem", {}, "nerf"),
    ("random", {"fraction": 0.05}, "nerf"),
    ("first-n", {"n_launches": 100}, "nerf"),
    ("pka", {}, "nerf"),
    ("tbpoint", {}, "nerf"),
    ("megsim", {"outside": "simulate"}, "nerf"),
    ("photon", {}, "counters"),
    ("sieve", {"instruction_metric": FFMA}, "counters"),
]


@pytest.mark.parametrize(("name", "params", "which"), CASES, ids=[c[0] for c in CASES])
@pytest.mark.slow
def test_members_agree_with_the_plan(name, params, which, request, tmp_path):
    bundle = request.getfixturevalue(which)
    plan = methods.create(name, **params).plan(bundle)
    members = plan.cluster_of_launches()
    assert members is not None and members.dtype == np.int64
    assert len(members) == bundle.n_launches
    ids = plan.samples["launch_id"].to_numpy()
    np.testing.assert_array_equal(members[ids], plan.samples["cluster"].to_numpy())
    counts = np.bincount(members[members >= 0], minlength=len(plan.clusters))
    for record in plan.clusters:
        assert counts[record["cluster"]] == record["size"], record
    # read back from JSON: the method is re-run and reproduces the same membership
    plan.attach_names(bundle.launches["name"]).save(tmp_path / "plan.json")
    loaded = load_plan(tmp_path / "plan.json")
    assert loaded.members is None
    recovered, note = cluster_members(loaded, bundle)
    assert "recomputed" in note
    np.testing.assert_array_equal(recovered, members)


def test_edited_or_unregistered_plans_have_no_members(nerf, tmp_path):
    plan = methods.create("stem").plan(nerf)
    plan.save(tmp_path / "plan.json")
    edited = load_plan(tmp_path / "plan.json")
    edited.samples.loc[0, "weight"] *= 2
    members, note = cluster_members(edited, nerf)
    assert members is None and "chose other samples" in note
    hand = _plan(_bundle())  # method "hand" is not registered
    members, note = cluster_members(hand, _bundle())
    assert members is None and "unknown method 'hand'" in note


@pytest.mark.slow
def test_cluster_truth_error_and_spread_by_hand(tmp_path):
    """first-n (n=2) on durations 1000, 2000, 1000, 4000 ns at 1000 MHz.

    One cluster of all four launches; samples 0 and 1 weigh 2 each: estimate
    2 x (1000 + 2000) = 6000 cycles against a truth of 8000 (error 25%); durations
    have mean 2000 and population std sqrt(1.5e6), CoV 0.6124.
    """
    bundle = _bundle()
    plan = methods.create("first-n", n_launches=2).plan(bundle)
    plan.attach_names(bundle.launches["name"]).save(tmp_path / "p.json")
    sim = SimResults(np.array([1000.0, 2000.0, 1000.0, 4000.0]))
    report, images = validate(bundle, [("p", load_plan(tmp_path / "p.json"))],
                              lambda p: sim, 1000.0)
    (cluster,) = report["plans"][0]["clusters"]
    assert cluster["launches"] == 4
    assert cluster["silicon_truth_cycles"] == pytest.approx(8000)
    assert cluster["silicon_estimate_cycles"] == pytest.approx(6000)
    assert cluster["silicon_sampling_error"] == pytest.approx(0.25)
    assert cluster["duration_cov"] == pytest.approx(np.sqrt(1.5e6) / 2000)
    assert "recomputed" in report["plans"][0]["cluster_members"]
    html_path, _ = write_report(report, images, tmp_path / "r")
    text = html_path.read_text()
    assert "duration CoV" in text and "25.00%" in text and "0.6124" in text


@pytest.mark.slow
def test_cluster_truths_add_up_to_silicon_on_real_profile(nerf):
    """STEM covers every launch: cluster truths sum to the silicon total, and each
    truth is the sum over the launches of the cluster (checked with pandas)."""
    plan = methods.create("stem").plan(nerf).attach_names(nerf.launches["name"])
    clock = 1410.0
    silicon = nerf.launches["duration_ns"].to_numpy(np.float64) * clock / 1000
    report, _ = validate(nerf, [("stem", plan)], lambda p: SimResults(silicon), clock)
    clusters = report["plans"][0]["clusters"]
    assert sum(c["silicon_truth_cycles"] for c in clusters) == pytest.approx(silicon.sum())
    by_pandas = pd.Series(silicon).groupby(plan.cluster_of_launches()).sum()
    for c in clusters:
        assert c["silicon_truth_cycles"] == pytest.approx(by_pandas[c["cluster"]])
