"""Tests of Photon's kernel-level sampling (analyzer/methods/photon.py).

Synthetic launches carry instruction-mix counters whose directions are known
(signature groups); the online leader clustering is checked against a direct
sequential implementation, and the method on the real A100 Kineto trace with
per-kernel ``smsp__sass_thread_inst_executed_op_*`` counters (its durations are
placeholders, so only signatures and grouping are checked there).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hilsim.analyzer import methods
from hilsim.analyzer.evaluate import score_plan
from hilsim.analyzer.methods.photon import INSTRUCTIONS, Photon, leader_clusters, signature_columns
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hilsim.core.bundle import Bundle
from hilsim.core.errors import HilsimError
from hilsim.core.schema import normalize_launches
from hilsim.formats.kineto import bundle_from_kineto

A100 = Path(__file__).parent / "data" / "kineto" / "hta-a100-cupti-counters.trace.json.gz"
OPS = [f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum" for op in ("fadd", "ffma", "fmul")]


def sequential_leaders(points: np.ndarray, radius: float) -> np.ndarray:
    """Photon's online rule, one launch at a time: the reference implementation."""
    rep = np.empty(len(points), dtype=np.int64)
    leaders: list[int] = []
    for i in range(len(points)):
        if leaders:
            dist = np.linalg.norm(points[leaders] - points[i], axis=1)
            if (dist <= radius).any():
                rep[i] = leaders[int(np.argmin(np.where(dist <= radius, dist, np.inf)))]
                continue
        leaders.append(i)
        rep[i] = i
    return rep


def mix_bundle(
    n: int = 600,
    seed: int = 0,
    *,
    names: tuple[str, ...] = ("k",),
    inst_metric: bool = True,
    extra_columns: int = 0,
) -> tuple[Bundle, np.ndarray, np.ndarray]:
    """Launches from 3 signature directions with random magnitudes; time ∝ instructions.

    Returns (bundle, signature group per launch, instruction count per launch).
    """
    rng = np.random.default_rng(seed)
    directions = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.2], [0.3, 0.3, 1.0]])
    group = rng.integers(0, 3, n)
    scale = rng.uniform(1e5, 1e7, n)
    mix = directions[group] * scale[:, None]
    inst = mix.sum(axis=1) * 1.25
    name = np.asarray(names)[rng.integers(0, len(names), n)]
    frame = pd.DataFrame({"name": name, "duration_ns": np.round(inst / 10).astype(np.int64)})
    metrics = pd.DataFrame({"launch_id": np.arange(n, dtype=np.int64)})
    for j, column in enumerate(OPS):
        metrics[column] = mix[:, j]
    for j in range(extra_columns):  # more mix dimensions: all proportional to the group's
        metrics[f"smsp__inst_executed_op_extra{j}.sum"] = mix[:, j % 3] * (1 + j)
    if inst_metric:
        metrics[INSTRUCTIONS] = inst
    return Bundle(normalize_launches(frame, "photon-test"), metrics=metrics), group, inst


def test_one_representative_per_signature_group_and_exact_total() -> None:
    bundle, group, inst = mix_bundle()
    plan = Photon().plan(bundle)
    reps = plan.samples["launch_id"].to_numpy()
    assert sorted(group[reps].tolist()) == [0, 1, 2]
    for g in range(3):  # the first launch of each group is its representative
        assert np.flatnonzero(group == g)[0] in reps
    weights = plan.samples["weight"].to_numpy()
    assert np.dot(weights, inst[reps]) == pytest.approx(inst.sum(), rel=1e-12)
    # time ∝ instructions: the IPC projection reproduces the total time
    assert score_plan(plan, bundle).error < 1e-6
    assert plan.diagnostics["similarity"] == "exact"
    assert plan.diagnostics["instructions"] == INSTRUCTIONS
    assert sum(c["size"] for c in plan.clusters) == len(group)


def test_same_kernel_separates_names_with_equal_mix() -> None:
    bundle, group, _ = mix_bundle(names=("a", "b"))
    names = bundle.launches["name"].astype(str).to_numpy()
    split = Photon().plan(bundle)
    reps = split.samples["launch_id"].to_numpy()
    assert len(reps) == 6 and len({(group[r], names[r]) for r in reps}) == 6
    merged = Photon(same_kernel=False).plan(bundle)
    assert merged.n_samples == 3


def test_threshold_decides_similarity() -> None:
    # second launch at cosine ~0.995 to the first, third at ~0.707
    mix = np.array([[1.0, 0.0, 0.0], [1.0, 0.1, 0.0], [1.0, 1.0, 0.0]]) * 1e6
    frame = pd.DataFrame({"name": ["k"] * 3, "duration_ns": [10, 11, 20]})
    metrics = pd.DataFrame({"launch_id": np.arange(3)})
    for j, column in enumerate(OPS):
        metrics[column] = mix[:, j]
    bundle = Bundle(normalize_launches(frame, "t"), metrics=metrics)
    assert Photon(threshold=0.95).plan(bundle).samples["launch_id"].tolist() == [0, 2]
    assert Photon(threshold=0.999).plan(bundle).samples["launch_id"].tolist() == [0, 1, 2]
    assert Photon(threshold=0.7).plan(bundle).samples["launch_id"].tolist() == [0]


def test_instruction_fallback_and_pca_path() -> None:
    bundle, group, inst = mix_bundle(inst_metric=False, extra_columns=20)
    plan = Photon(max_dims=4).plan(bundle)
    assert plan.diagnostics["similarity"].startswith("approximate")
    assert plan.diagnostics["reduced_dims"] == 4
    assert any("sum of the instruction-mix" in note for note in plan.notes)
    assert sorted(group[plan.samples["launch_id"].to_numpy()].tolist()) == [0, 1, 2]


def test_zero_signatures_group_together() -> None:
    frame = pd.DataFrame({"name": ["k"] * 4, "duration_ns": [5, 6, 7, 8]})
    metrics = pd.DataFrame({"launch_id": np.arange(4)})
    for column in OPS:
        metrics[column] = [0.0, 1e6, 0.0, 0.0]
    plan = Photon().plan(Bundle(normalize_launches(frame, "t"), metrics=metrics))
    assert plan.samples["launch_id"].tolist() == [0, 1]
    assert plan.samples["weight"].tolist() == [3.0, 1.0]
    assert plan.diagnostics["zero_signature_launches"] == 3


def test_missing_mix_metrics_is_one_line_error() -> None:
    bundle, _, _ = mix_bundle(n=40)
    only_inst = Bundle(bundle.launches, metrics=bundle.metrics[["launch_id", INSTRUCTIONS]])
    with pytest.raises(HilsimError, match="no instruction-mix columns") as info:
        Photon().plan(only_inst)
    assert "\n" not in str(info.value)
    partial = Bundle(bundle.launches, metrics=bundle.metrics.iloc[:30])
    with pytest.raises(HilsimError, match="covers 30 of 40 launches"):
        Photon().plan(partial)
    with pytest.raises(HilsimError, match="no metrics"):
        Photon().plan(Bundle(bundle.launches))
    with pytest.raises(HilsimError, match="threshold"):
        Photon(threshold=1.5)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(1, 300),
    dims=st.integers(1, 4),
    radius=st.sampled_from([0.0, 0.05, 0.2, 0.6]),
    batch=st.integers(1, 70),
)
@pytest.mark.slow
def test_property_batched_leaders_equal_sequential(
    seed: int, n: int, dims: int, radius: float, batch: int
) -> None:
    """The vectorised batches pick exactly the sequential leaders, and every launch is
    assigned to an earlier leader at the nearest distance the sequential rule finds."""
    rng = np.random.default_rng(seed)
    points = np.round(rng.random((n, dims)) * rng.integers(1, 5), 1)  # with duplicates
    r = radius + 1e-9
    fast, _ = leader_clusters(points, r, batch)
    slow = sequential_leaders(points, r)
    assert np.array_equal(np.unique(fast), np.unique(slow))
    assert (fast <= np.arange(n)).all()
    near_fast = np.linalg.norm(points - points[fast], axis=1)
    near_slow = np.linalg.norm(points - points[slow], axis=1)
    assert np.allclose(near_fast, near_slow)


def test_real_a100_trace_signatures_and_groups() -> None:
    bundle = bundle_from_kineto(A100)
    metrics = bundle.metrics
    columns = signature_columns(list(metrics.columns))
    assert len(columns) == 9 and all("sass_thread_inst_executed_op" in c for c in columns)
    plan = methods.create("photon").plan(bundle)
    n = bundle.n_launches
    assert n == 77
    mix = metrics.set_index("launch_id").sort_index()[columns].to_numpy(dtype=float)
    names = bundle.launches["name"].astype(str).to_numpy()
    # Photon's rule, directly: a launch is a representative iff no earlier representative
    # of the same kernel has cosine >= 0.95 (all-zero mixes match only each other)
    norms = np.linalg.norm(mix, axis=1)
    unit = np.where(norms[:, None] > 0, mix / np.where(norms > 0, norms, 1)[:, None], 0)
    reps: list[int] = []
    for i in range(n):
        similar = [
            r
            for r in reps
            if names[r] == names[i]
            and (
                (norms[i] == 0 and norms[r] == 0)
                or (norms[i] > 0 and norms[r] > 0 and unit[i] @ unit[r] >= 0.95)
            )
        ]
        if not similar:
            reps.append(i)
    assert plan.samples["launch_id"].tolist() == reps
    assert plan.n_samples < n  # repeated layers are skipped
    assert len(reps) >= len(set(names))
    assert sum(c["size"] for c in plan.clusters) == n
    for record in plan.clusters:
        assert record["label"] == names[record["representative"]]
    # the IPC projection reproduces the total instruction mix wherever the
    # representative executed instructions
    inst = mix.sum(axis=1)
    weights = plan.samples["weight"].to_numpy()
    ids = plan.samples["launch_id"].to_numpy()
    live = inst[ids] > 0
    covered = sum(c["instructions"] for c, ok in zip(plan.clusters, live, strict=True) if ok)
    assert np.dot(weights[live], inst[ids][live]) == pytest.approx(covered, rel=1e-12)
    assert any("placeholders" in note for note in plan.notes)
