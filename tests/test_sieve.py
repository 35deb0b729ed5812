"""Tests of Sieve (analyzer/methods/sieve.py) on synthetic kernels with known strata.

Three kernels with known instruction-count behaviour: ``const`` (every launch the
same count: stratum 1), ``mild`` (CoV ~0.1: stratum 2) and ``modal`` (two modes
1e6 and 8e6 instructions: CoV > 0.4, stratum 3, two KDE sub-strata). Durations are
proportional to instructions, so the right projection is known.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hilsim.analyzer import methods
from hilsim.analyzer.evaluate import score_plan
from hilsim.analyzer.methods.sieve import INSTRUCTIONS, Sieve, kde_cuts, kde_labels
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hilsim.core.bundle import Bundle
from hilsim.core.errors import HilsimError
from hilsim.core.plan import load_plan
from hilsim.core.schema import normalize_launches


def kernels(n: int = 900, seed: int = 0) -> tuple[Bundle, dict[str, np.ndarray]]:
    """A bundle of three kernels with known strata; returns (bundle, truth arrays)."""
    rng = np.random.default_rng(seed)
    kernel = rng.integers(0, 3, n)
    kernel[:3] = [1, 0, 2]
    mild = rng.normal(2e6, 2e5, n)
    modal = np.where(rng.random(n) < 0.5, rng.normal(1e6, 1e3, n), rng.normal(8e6, 8e3, n))
    inst = np.round(np.select([kernel == 0, kernel == 1], [np.full(n, 1e6), mild], modal))
    grid = np.where(rng.random(n) < 0.3, 2, 4)  # launch size 4 dominates
    names = np.array(["const", "mild", "modal"])[kernel]
    frame = pd.DataFrame(
        {
            "name": names,
            "duration_ns": np.round(inst / 100).astype(np.int64),
            "grid_x": grid,
            "grid_y": 1,
            "grid_z": 1,
            "block_x": 128,
            "block_y": 1,
            "block_z": 1,
        }
    )
    metrics = pd.DataFrame({"launch_id": np.arange(n, dtype=np.int64), INSTRUCTIONS: inst})
    bundle = Bundle(normalize_launches(frame, "sieve-test"), metrics=metrics)
    return bundle, {"kernel": kernel, "inst": inst, "grid": grid, "names": names}


def by_label(plan) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for record in plan.clusters:
        out.setdefault(record["label"], []).append(record)
    return out


def test_strata_and_first_dominant_representative() -> None:
    bundle, truth = kernels()
    plan = Sieve().plan(bundle)
    groups = by_label(plan)
    assert [r["stratum"] for r in groups["const"]] == [1]
    assert [r["stratum"] for r in groups["mild"]] == [2]
    assert sorted(r["stratum"] for r in groups["modal"]) == [3, 3]  # two KDE modes
    for label, records in groups.items():
        for record in records:
            rep = record["representative"]
            assert truth["grid"][rep] == 4  # the dominant launch size
            if label != "modal":  # one stratum per kernel: the first launch of size 4
                rows = np.flatnonzero((truth["names"] == label) & (truth["grid"] == 4))
                assert rep == rows[0]
    # modal sub-strata: the first size-4 launch of each mode
    for record in groups["modal"]:
        low = record["representative_instructions"] < 4e6
        mode = (truth["names"] == "modal") & ((truth["inst"] < 4e6) == low)
        assert record["representative"] == np.flatnonzero(mode & (truth["grid"] == 4))[0]
    assert plan.samples["weight"].sum() == pytest.approx(len(truth["inst"]))
    assert plan.sampling == "deterministic"
    assert plan.diagnostics["by_stratum"]["3"]["strata"] == 2


def test_dominant_size_beats_earlier_launch() -> None:
    """Stratum 1 kernel: first two launches small, the rest larger -> first larger one."""
    n = 10
    frame = pd.DataFrame(
        {
            "name": ["k"] * n,
            "duration_ns": 100,
            "grid_x": [1, 1] + [8] * (n - 2),
            "grid_y": 1,
            "grid_z": 1,
            "block_x": 64,
            "block_y": 1,
            "block_z": 1,
        }
    )
    metrics = pd.DataFrame({"launch_id": np.arange(n), INSTRUCTIONS: np.full(n, 5e5)})
    plan = Sieve().plan(Bundle(normalize_launches(frame, "t"), metrics=metrics))
    assert plan.samples["launch_id"].tolist() == [2]
    assert plan.samples["weight"].tolist() == [10.0]
    assert plan.clusters[0]["stratum"] == 1


def test_kde_off_keeps_one_stratum_per_kernel() -> None:
    bundle, _ = kernels()
    plan = Sieve(kde=False).plan(bundle)
    assert len(plan.clusters) == 3
    assert sorted(r["stratum"] for r in plan.clusters) == [1, 2, 3]


def test_instruction_weighting_reproduces_instructions_and_time() -> None:
    bundle, truth = kernels()
    plan = Sieve(weighting="instructions").plan(bundle)
    ids = plan.samples["launch_id"].to_numpy()
    weights = plan.samples["weight"].to_numpy()
    assert np.dot(weights, truth["inst"][ids]) == pytest.approx(truth["inst"].sum(), rel=1e-12)
    # durations are instructions / 100 rounded: the IPC projection is nearly exact
    assert score_plan(plan, bundle).error < 1e-4
    counted = Sieve(weighting="count").plan(bundle)
    assert score_plan(counted, bundle).error > score_plan(plan, bundle).error


def test_random_representative_seeded_and_in_dominant_size() -> None:
    bundle, truth = kernels()
    a = Sieve(representative="random", seed=1).plan(bundle)
    b = Sieve(representative="random", seed=1).plan(bundle)
    c = Sieve(representative="random", seed=2).plan(bundle)
    assert a.samples.equals(b.samples)
    assert not a.samples["launch_id"].equals(c.samples["launch_id"])
    assert a.sampling == "random" and Sieve(representative="random").stochastic
    assert not Sieve().stochastic
    assert (truth["grid"][a.samples["launch_id"].to_numpy()] == 4).all()
    assert score_plan(a, bundle).interval_ns is not None


def test_missing_or_partial_instruction_metric_is_one_line_error() -> None:
    bundle, _ = kernels(n=50)
    no_metric = Bundle(bundle.launches, metrics=bundle.metrics[["launch_id"]])
    with pytest.raises(HilsimError, match="smsp__inst_executed.sum.*not in the bundle"):
        Sieve().plan(no_metric)
    partial = Bundle(bundle.launches, metrics=bundle.metrics.iloc[:40])
    with pytest.raises(HilsimError, match="covers 40 of 50 launches") as info:
        Sieve().plan(partial)
    assert "\n" not in str(info.value)
    with pytest.raises(HilsimError, match="no metrics"):
        Sieve().plan(Bundle(bundle.launches))
    renamed = Bundle(bundle.launches, metrics=bundle.metrics.rename(columns={INSTRUCTIONS: "x"}))
    assert Sieve(instruction_metric="x").plan(renamed).n_samples == Sieve().plan(bundle).n_samples


def test_bad_parameters() -> None:
    for bad in (
        {"cov_threshold": 0},
        {"representative": "middle"},
        {"weighting": "time"},
        {"kde": "yes"},
        {"seed": -1},
    ):
        with pytest.raises(HilsimError):
            Sieve(**bad)


def test_registry_and_plan_json_round_trip(tmp_path) -> None:
    assert methods.get("sieve") is Sieve
    bundle, _ = kernels(n=120)
    plan = methods.create("sieve", weighting="instructions").plan(bundle)
    plan.attach_names(bundle.launches["name"])
    path = plan.save(tmp_path / "plan.json")
    loaded = load_plan(path)
    assert loaded.params == json.loads(json.dumps(plan.params))
    assert np.allclose(loaded.samples["weight"], plan.samples["weight"])
    assert score_plan(loaded, bundle).error == pytest.approx(score_plan(plan, bundle).error)


def test_kde_cuts_between_modes_only() -> None:
    rng = np.random.default_rng(3)
    two = np.r_[rng.normal(1e6, 1e4, 300), rng.normal(5e6, 5e4, 200)]
    cuts = kde_cuts(two)
    assert cuts.size == 1 and 1.1e6 < cuts[0] < 4.8e6
    one = rng.normal(1e6, 1e5, 1000)
    # a unimodal sample is at most trimmed in its sparse tails (a KDE property)
    assert np.bincount(kde_labels(one, "silverman")).max() >= 950
    assert kde_cuts(np.full(10, 7.0)).size == 0
    three = np.r_[two, rng.normal(3e6, 1e4, 100)]
    assert np.bincount(kde_labels(three, "silverman")).tolist() == [300, 100, 200]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(1, 300),
    n_kernels=st.integers(1, 6),
    weighting=st.sampled_from(["count", "instructions"]),
    kde=st.booleans(),
)
@pytest.mark.slow
def test_property_every_launch_in_one_stratum(
    seed: int, n: int, n_kernels: int, weighting: str, kde: bool
) -> None:
    """Strata partition the launches; count weights sum to N; instruction weights
    reproduce the total instruction count exactly; one sample per stratum."""
    rng = np.random.default_rng(seed)
    kernel = rng.integers(0, n_kernels, n)
    inst = np.round(rng.lognormal(12, rng.uniform(0, 2, n_kernels)[kernel]))
    frame = pd.DataFrame(
        {
            "name": [f"k{k}" for k in kernel],
            "duration_ns": rng.integers(1, 10_000, n),
            "grid_x": rng.integers(1, 3, n),
            "grid_y": 1,
            "grid_z": 1,
            "block_x": 32,
            "block_y": 1,
            "block_z": 1,
        }
    )
    metrics = pd.DataFrame({"launch_id": np.arange(n), INSTRUCTIONS: inst})
    plan = Sieve(weighting=weighting, kde=kde).plan(
        Bundle(normalize_launches(frame, "p"), metrics=metrics)
    )
    sizes = [r["size"] for r in plan.clusters]
    assert sum(sizes) == n
    assert plan.n_samples == len(plan.clusters)
    ids = plan.samples["launch_id"].to_numpy()
    weights = plan.samples["weight"].to_numpy()
    if weighting == "count":
        assert weights.sum() == pytest.approx(n)
    else:
        assert np.dot(weights, inst[ids]) == pytest.approx(inst.sum(), rel=1e-9)
    for record in plan.clusters:
        if record["stratum"] == 1:
            assert record["instructions"] == pytest.approx(
                record["size"] * record["representative_instructions"]
            )
