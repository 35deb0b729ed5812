"""Tests of TBPoint (analyzer/methods/tbpoint.py): hierarchical clustering of launches.

Well-separated synthetic groups (PKA Table 2 metrics with 1% noise, their own
launch configurations and durations) must be recovered exactly; the memory guard
must refuse large inputs with one line naming the sizes.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hilsim.analyzer import methods
from hilsim.analyzer.evaluate import score_plan
from hilsim.analyzer.methods.tbpoint import (
    SWEEP_THRESHOLDS,
    TBPoint,
    condensed_bytes,
    max_launches,
)

from hilsim.core.bundle import Bundle
from hilsim.core.errors import HilsimError
from hilsim.core.metric_names import TABLE2_METRICS
from hilsim.core.schema import normalize_launches

DURATIONS = (1_000.0, 40_000.0, 900_000.0)


def groups(n: int = 300, seed: int = 0, metrics: bool = True) -> tuple[Bundle, np.ndarray]:
    """``n`` launches from 3 well-separated groups; returns (bundle, true group)."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 3, n)
    truth[:3] = [2, 0, 1]
    scale = 10.0 ** (3 + 2 * truth)
    frame = pd.DataFrame(
        {
            "name": [f"kernel_{g}" for g in truth],
            "duration_ns": np.round(
                np.asarray(DURATIONS)[truth] * (1 + 0.01 * rng.standard_normal(n))
            ).astype(np.int64),
            "grid_x": (8 * 8**truth).astype(np.int64),
            "grid_y": 1,
            "grid_z": 1,
            "block_x": (64 * 2**truth).astype(np.int64),
            "block_y": 1,
            "block_z": 1,
            "regs": (16 + 16 * truth).astype(np.int64),
        }
    )
    table = None
    if metrics:
        table = pd.DataFrame({"launch_id": np.arange(n, dtype=np.int64)})
        for f, metric in enumerate(TABLE2_METRICS):
            table[metric] = scale * (1 + f / 12) * (1 + 0.01 * rng.standard_normal(n))
    return Bundle(normalize_launches(frame, "tbpoint-test"), metrics=table), truth


def test_recovers_well_separated_clusters() -> None:
    bundle, truth = groups()
    plan = TBPoint().plan(bundle)
    assert plan.diagnostics["features"] == "metrics"
    assert plan.diagnostics["n_clusters"] == 3
    reps = plan.samples["launch_id"].to_numpy()
    assert sorted(truth[reps].tolist()) == [0, 1, 2]
    sizes = {truth[c["representative"]]: c["size"] for c in plan.clusters}
    assert sizes == {g: int((truth == g).sum()) for g in range(3)}
    assert plan.samples["weight"].sum() == len(truth)
    assert score_plan(plan, bundle).error < 0.02
    # clusters are numbered by their first launch
    assert [truth[c["representative"]] for c in plan.clusters] == [2, 0, 1]


def test_representative_is_closest_to_centre() -> None:
    bundle, truth = groups(n=120, seed=4)
    plan = TBPoint().plan(bundle)
    metrics = bundle.metrics[list(TABLE2_METRICS)].to_numpy(dtype=float)
    x = np.log2(1 + metrics)
    z = (x - x.mean(axis=0)) / x.std(axis=0)
    for record in plan.clusters:
        members = np.flatnonzero(truth == truth[record["representative"]])
        dist = ((z[members] - z[members].mean(axis=0)) ** 2).sum(axis=1)
        assert record["representative"] == members[np.argmin(dist)]


def test_light_features_without_metrics() -> None:
    bundle, truth = groups(metrics=False)
    plan = TBPoint().plan(bundle)
    assert plan.diagnostics["features"] == "light"
    assert "duration_ns" in plan.diagnostics["features_used"]
    assert any("light features" in note for note in plan.notes)
    assert plan.n_samples == 3
    with pytest.raises(HilsimError, match="features='metrics'"):
        TBPoint(features="metrics").plan(bundle)


def test_threshold_sweep_picks_fewest_clusters_within_target() -> None:
    bundle, truth = groups(n=200, seed=2)
    plan = TBPoint(threshold_sweep=True).plan(bundle)
    tried = plan.diagnostics["error_by_threshold"]
    assert 1 <= len(tried) <= 20
    assert [t["threshold"] for t in tried] == sorted(SWEEP_THRESHOLDS, reverse=True)[: len(tried)]
    assert all(t["error"] > 0.05 for t in tried[:-1])
    assert tried[-1]["error"] <= 0.05
    assert plan.diagnostics["projected_error"] <= 0.05
    # fewest clusters: every smaller cut height gives at least as many clusters
    assert plan.diagnostics["n_clusters"] == min(t["clusters"] for t in tried if t["error"] <= 0.05)


def test_refuses_above_memory_limit_naming_sizes() -> None:
    assert max_launches(4e9) == 31_623
    assert condensed_bytes(31_623) <= 4e9 < condensed_bytes(31_624)
    n = 40_000
    frame = pd.DataFrame({"name": ["k"] * n, "duration_ns": np.arange(1, n + 1)})
    bundle = Bundle(normalize_launches(frame, "big"))
    with pytest.raises(HilsimError) as info:
        TBPoint().plan(bundle)
    message = str(info.value)
    assert "40,000 launches" in message and "6.4 GB" in message
    assert "memory_limit_gb=4" in message and "31,623" in message
    assert "\n" not in message
    small, _ = groups(n=100)
    with pytest.raises(HilsimError, match="100 launches"):
        TBPoint(memory_limit_gb=1e-6).plan(small)


def test_degenerate_inputs_and_parameters() -> None:
    frame = pd.DataFrame({"name": ["k"] * 5, "duration_ns": [7] * 5})
    plan = TBPoint().plan(Bundle(normalize_launches(frame, "flat")))
    assert plan.n_samples == 1 and plan.samples["weight"].tolist() == [5.0]
    one = pd.DataFrame({"name": ["k"], "duration_ns": [7]})
    assert TBPoint().plan(Bundle(normalize_launches(one, "one"))).n_samples == 1
    for bad in ({"threshold": 2}, {"linkage": "ward2"}, {"memory_limit_gb": 0}):
        with pytest.raises(HilsimError):
            TBPoint(**bad)
    assert methods.get("tbpoint") is TBPoint
