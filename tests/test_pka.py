"""Tests of PKA Principal Kernel Selection (analyzer/methods/pka.py) on synthetic mixtures.

The mixtures have known groups: each group has its own Table 2 metric vector
(1% noise), its own kernel names and launch configuration, and its own
duration scale, so the right answer (K, first launch of each group, group
sizes) is known in advance.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hilsim.analyzer import methods
from hilsim.analyzer.methods import pka as pka_module
from hilsim.analyzer.methods.pka import PKA, select_principal_kernels
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hilsim.core.bundle import Bundle
from hilsim.core.errors import HilsimError
from hilsim.core.metric_names import TABLE2_METRICS
from hilsim.core.schema import normalize_launches

GROUP_DURATIONS = (1_000.0, 30_000.0, 100_000.0, 700_000.0)


def mixture(
    n: int = 600,
    k: int = 3,
    seed: int = 0,
    *,
    metrics_rows: int | None = None,
    drop: tuple[str, ...] = (),
    grid_in_metrics: bool = True,
    cycles: bool = False,
) -> tuple[Bundle, np.ndarray]:
    """A bundle of ``n`` launches from ``k`` well-separated groups; returns (bundle, truth)."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, k, n)
    truth[:k] = rng.permutation(k)  # every group present
    rng.shuffle(truth)
    scale = 10.0 ** (3 + truth)  # group c: counts ~ 10^(3+c)
    noise = 1.0 + 0.01 * rng.standard_normal((n, len(TABLE2_METRICS)))
    values: dict[str, np.ndarray] = {}
    for f, metric in enumerate(TABLE2_METRICS):
        values[metric] = scale * (1.0 + f / 12.0) * noise[:, f]
    values["l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum"] = np.zeros(n)  # constant column
    values["smsp__thread_inst_executed_per_inst_executed.ratio"] = (
        32.0 - 6.0 * truth + 0.05 * rng.standard_normal(n)
    )
    grid_x = (16 * 4**truth).astype(np.int64)
    values["launch__grid_size"] = grid_x.astype(float)
    durations = np.asarray(GROUP_DURATIONS)[truth] * (1.0 + 0.01 * rng.standard_normal(n))
    variant = rng.integers(0, 2, n)
    frame = pd.DataFrame(
        {
            "name": [f"kernel_{c}_{v}" for c, v in zip(truth, variant, strict=True)],
            "duration_ns": np.round(durations).astype(np.int64),
            "grid_x": grid_x,
            "grid_y": 1,
            "grid_z": 1,
            "block_x": (128 * (1 + truth)).astype(np.int64),
            "block_y": 1,
            "block_z": 1,
            "regs": (24 + 8 * truth).astype(np.int64),
        }
    )
    launches = normalize_launches(frame, "synthetic")
    rows = n if metrics_rows is None else metrics_rows
    metrics = pd.DataFrame({"launch_id": np.arange(rows, dtype=np.int64)})
    for metric in TABLE2_METRICS:
        if metric in drop or (metric == "launch__grid_size" and not grid_in_metrics):
            continue
        metrics[metric] = values[metric][:rows]
    if cycles:
        metrics["gpu__cycles_elapsed.max"] = 1.4 * durations[:rows]
    return Bundle(launches=launches, metrics=metrics), truth


def first_of_each(truth: np.ndarray) -> list[int]:
    """Launch ids of the first member of each true group, in launch order."""
    _, first = np.unique(truth, return_index=True)
    return sorted(int(i) for i in first)


def test_three_groups_found_with_first_launch_representatives() -> None:
    bundle, truth = mixture()
    plan = PKA(seed=0).plan(bundle)
    diag = plan.diagnostics
    assert diag["chosen_k"] == 3
    assert diag["target_met"] is True
    assert diag["projected_error"] < 0.05
    errors = [row["error"] for row in diag["error_by_k"]]
    assert [row["k"] for row in diag["error_by_k"]] == [1, 2, 3]
    assert min(errors[:2]) > 0.05 and errors[2] < 0.05
    assert plan.samples["launch_id"].tolist() == first_of_each(truth)
    sizes = np.bincount(truth)
    assert sorted(plan.samples["weight"].tolist()) == sorted(sizes.astype(float).tolist())
    assert plan.samples["weight"].sum() == len(truth)
    # groups numbered chronologically: group 0 holds launch 0
    assert plan.clusters[0]["representative"] == 0
    for record in plan.clusters:
        group = truth[record["representative"]]
        members = bundle.launches["duration_ns"].to_numpy()[truth == group]
        assert record["size"] == members.size
        assert record["draws"] == 1
        assert record["mean_ns"] == pytest.approx(members.mean())
        assert record["std_ns"] == pytest.approx(members.std())
        assert record["label"].startswith(f"kernel_{group}_")
    assert 0.0 < diag["explained_variance"] <= 1.0
    assert diag["explained_variance"] >= 0.95
    assert diag["constant_features"] == 1  # the all-zero local loads
    assert plan.method == "pka"
    assert plan.params == PKA(seed=0).params()
    assert plan.source["n_launches"] == len(truth)
    json.loads(plan.to_json())


def test_representative_is_first_even_when_not_central() -> None:
    bundle, truth = mixture(seed=3)
    firsts = first_of_each(truth)
    metrics = bundle.metrics
    assert metrics is not None
    columns = [c for c in TABLE2_METRICS if c in metrics.columns][:4]
    # push every group's first launch to the edge of its group (3% off, noise is 1%)
    metrics.loc[firsts, columns] *= 1.03
    plan = PKA().plan(bundle)
    assert plan.diagnostics["chosen_k"] == 3
    assert plan.samples["launch_id"].tolist() == firsts


@settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    k=st.integers(min_value=1, max_value=4),
    n=st.integers(min_value=40, max_value=300),
    seed=st.integers(min_value=0, max_value=10_000),
)
@pytest.mark.slow
def test_selection_invariants(k: int, n: int, seed: int) -> None:
    bundle, truth = mixture(n=n, k=k, seed=seed)
    plan = PKA(seed=seed % 7).plan(bundle)
    diag = plan.diagnostics
    durations = bundle.launches["duration_ns"].to_numpy().astype(float)
    weights = plan.samples["weight"].to_numpy()
    ids = plan.samples["launch_id"].to_numpy()
    assert weights.sum() == n
    assert diag["target_met"] is True
    assert 1 <= diag["chosen_k"] <= k
    # the reported error is the plan's own projection against the profiled total
    projected = float(np.dot(weights, durations[ids]))
    total = durations.sum()
    assert diag["projected_error"] == pytest.approx(abs(projected - total) / total)
    assert diag["projected_error"] <= 0.05
    assert all(row["error"] > 0.05 for row in diag["error_by_k"][:-1])
    # launch 0 always represents group 0 (first-chronological representatives)
    assert ids[0] == 0
    assert len(plan.clusters) == len(ids)


def test_select_principal_kernels_first_member_and_sizes() -> None:
    rng = np.random.default_rng(5)
    truth = rng.integers(0, 3, 500)
    features = np.column_stack([10.0**truth, 5.0 * truth]) * (1 + 0.01 * rng.random((500, 2)))
    times = 10.0 ** (2 * truth)
    sel = select_principal_kernels(features, times, seed=1)
    assert sel.sizes.sum() == 500
    for g in range(sel.sizes.size):
        members = np.flatnonzero(sel.labels == g)
        assert sel.first[g] == members[0]
        assert sel.sizes[g] == members.size
    assert np.all(np.diff(sel.first) > 0)  # numbered by first appearance


def test_missing_metrics_noted_and_strict_raises() -> None:
    drop = ("smsp__inst_executed_op_shared_st.sum", "smsp__sass_inst_executed_op_global_atom.sum")
    bundle, _ = mixture(drop=drop)
    plan = PKA().plan(bundle)
    note = " ".join(plan.notes)
    assert all(name in note for name in drop)
    assert plan.diagnostics["features_missing"] == list(drop)
    assert plan.diagnostics["chosen_k"] == 3
    with pytest.raises(HilsimError, match="smsp__inst_executed_op_shared_st.sum"):
        PKA(strict=True).plan(bundle)


def test_grid_size_derived_from_launches() -> None:
    bundle, _ = mixture(grid_in_metrics=False)
    plan = PKA(strict=True).plan(bundle)
    assert plan.diagnostics["grid_size_derived"] is True
    assert "launch__grid_size" in plan.diagnostics["features_used"]
    assert any("grid_x * grid_y * grid_z" in note for note in plan.notes)


def test_no_table2_metric_raises_naming_them() -> None:
    bundle, _ = mixture(drop=TABLE2_METRICS)
    bundle.launches["grid_x"] = pd.array([pd.NA] * len(bundle.launches), dtype="Int64")
    with pytest.raises(HilsimError, match="none of the PKA Table 2 metrics") as err:
        PKA().plan(bundle)
    assert "smsp__inst_executed.sum" in str(err.value)
    assert "\n" not in str(err.value)
    bundle.metrics = None
    with pytest.raises(HilsimError, match="no metrics"):
        PKA().plan(bundle)


def test_target_not_met_picks_smallest_error() -> None:
    bundle, _ = mixture()
    plan = PKA(k_max=2).plan(bundle)
    diag = plan.diagnostics
    assert diag["target_met"] is False
    errors = [row["error"] for row in diag["error_by_k"]]
    assert len(errors) == 2
    assert diag["projected_error"] == min(errors)
    assert diag["chosen_k"] == 1 + int(np.argmin(errors))
    assert any("no K <= 2 reached target_error" in note for note in plan.notes)


def test_cycles_time_metric() -> None:
    bundle, _ = mixture(cycles=True)
    plan = PKA(time_metric="gpu__cycles_elapsed.max").plan(bundle)
    assert plan.diagnostics["time_metric"] == "gpu__cycles_elapsed.max"
    cycles = bundle.metrics["gpu__cycles_elapsed.max"].to_numpy()
    assert plan.diagnostics["profiled_total"] == pytest.approx(cycles.sum())
    bundle_plain, _ = mixture()
    with pytest.raises(HilsimError, match="gpu__cycles_elapsed.max"):
        PKA(time_metric="gpu__cycles_elapsed.max").plan(bundle_plain)


@pytest.mark.slow
def test_minibatch_and_subsampled_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    bundle, truth = mixture(n=900)
    monkeypatch.setattr(pka_module, "KMEANS_FIT_ROWS", 300)
    plan = PKA(minibatch_threshold=200).plan(bundle)
    diag = plan.diagnostics
    assert diag["kmeans"] == "MiniBatchKMeans"
    assert diag["kmeans_fit_rows"] == 300
    assert diag["chosen_k"] == 3
    assert plan.samples["launch_id"].tolist() == first_of_each(truth)


@pytest.mark.slow
def test_deterministic_for_a_seed() -> None:
    bundle, _ = mixture(k=4, n=800, seed=9)
    first = PKA(seed=4).plan(bundle)
    again = PKA(seed=4).plan(bundle)
    pd.testing.assert_frame_equal(first.samples, again.samples)
    assert first.diagnostics == again.diagnostics


def test_partial_metrics_one_level_note() -> None:
    bundle, _ = mixture(n=600, metrics_rows=300)
    plan = PKA().plan(bundle)
    assert plan.samples["weight"].sum() == 300
    assert any("metrics cover 300 of 600" in note for note in plan.notes)


def test_nan_metric_values_filled() -> None:
    bundle, _ = mixture()
    assert bundle.metrics is not None
    bundle.metrics.loc[[5, 9], "smsp__inst_executed.sum"] = np.nan
    plan = PKA().plan(bundle)
    assert any("smsp__inst_executed.sum: 2 missing" in note for note in plan.notes)
    assert plan.diagnostics["chosen_k"] == 3


@pytest.mark.parametrize("classifier", ["sgd", "gnb", "mlp"])
@pytest.mark.slow
def test_two_level_each_classifier(classifier: str) -> None:
    n, j = 3000, 600
    bundle, truth = mixture(n=n, metrics_rows=j, seed=11)
    plan = PKA(detailed_first=j, classifier=classifier, seed=2).plan(bundle)
    diag = plan.diagnostics
    info = diag["classifier"]
    assert diag["mode"] == "two-level"
    assert diag["n_detailed"] == j
    assert info["name"] == classifier
    assert info["accuracy"] >= 0.98
    assert info["stratified"] is True
    assert info["train_size"] + info["test_size"] == j
    assert info["test_size"] == 150
    assert info["n_light"] == n - j
    assert diag["chosen_k"] == 3
    # representatives come from the first j; weights count all N launches
    assert plan.samples["launch_id"].max() < j
    assert plan.samples["launch_id"].tolist() == first_of_each(truth[:j])
    assert plan.samples["weight"].sum() == n
    true_sizes = np.bincount(truth)
    got = {rec["representative"]: rec["size"] for rec in plan.clusters}
    for rep, size in got.items():
        assert size == pytest.approx(true_sizes[truth[rep]], rel=0.02)
    assert sum(rec["detailed_size"] for rec in plan.clusters) == j
    assert diag["all_launches_error"] < 0.05
    json.loads(plan.to_json())


def test_two_level_needs_metrics_for_first_j() -> None:
    bundle, _ = mixture(n=600, metrics_rows=200)
    with pytest.raises(HilsimError, match="first 300 launches have no metrics"):
        PKA(detailed_first=300).plan(bundle)
    with pytest.raises(HilsimError, match="exceeds the 600 launches"):
        PKA(detailed_first=601).plan(bundle)


def test_two_level_single_group_skips_classifier() -> None:
    bundle, _ = mixture(n=400, k=1, metrics_rows=100)
    plan = PKA(detailed_first=100).plan(bundle)
    assert plan.diagnostics["chosen_k"] == 1
    assert plan.diagnostics["classifier"]["skipped"] == "single group"
    assert plan.samples["weight"].tolist() == [400.0]


@pytest.mark.parametrize(
    "params",
    [
        {"target_error": 0},
        {"target_error": 1.5},
        {"k_max": 0},
        {"k_max": 2.5},
        {"pca_variance": 0},
        {"pca_variance": 1.2},
        {"minibatch_threshold": -1},
        {"seed": -1},
        {"detailed_first": 0},
        {"classifier": "svm"},
        {"time_metric": "sm__cycles_active.avg"},
        {"strict": "yes"},
    ],
)
def test_bad_parameters(params: dict) -> None:
    with pytest.raises(HilsimError, match="pka: "):
        PKA(**params)


def test_params_roundtrip_and_registry() -> None:
    method = PKA(detailed_first=10, classifier="gnb", pca_variance=1.0, seed=3)
    params = json.loads(json.dumps(method.params()))
    assert PKA(**params).params() == params
    assert method.with_seed(5).params()["seed"] == 5
    assert methods._REGISTRY["pka"] is PKA
    assert PKA.needs == ("metrics",)


NCU_DATA = Path(__file__).parent / "data" / "ncu"
NCU_RAW = NCU_DATA / "decodebench_flashinfer_b1_ctx4k_raw_2025.csv"
NCU_DETAILS = NCU_DATA / "xplacer_cfd_097K_details_2020.log"


def _bundle_from_ncu(path: Path, duration_column: str) -> Bundle:
    ncu_csv = pytest.importorskip("hilsim.formats.ncu_csv")
    table = ncu_csv.read_ncu_csv(path)
    frame = table.launches.drop(columns=["ncu_id"]).copy()
    frame["duration_ns"] = table.metrics[duration_column].to_numpy()
    launches = normalize_launches(frame, str(path))
    return Bundle(launches=launches, metrics=ncu_csv.join_metrics(launches, table))


def test_real_ncu_csv() -> None:
    """PKA on real Nsight Compute excerpts (tests/data/ncu): neither has the Table 2 counters.

    The 2025 raw-page excerpt (B200, 2 launches) has only ``launch__grid_size``:
    PKA clusters on it, names the 11 missing metrics, and refuses in strict mode.
    The 2020 details excerpt has display names only (``Grid Size``, not
    ``launch__grid_size``) and no grid dimensions: none present, one-line error.
    """
    if not (NCU_RAW.is_file() and NCU_DETAILS.is_file()):
        pytest.skip("real ncu fixtures not present")
    bundle = _bundle_from_ncu(NCU_RAW, "gpu__time_duration.sum")
    plan = PKA().plan(bundle)
    diag = plan.diagnostics
    assert diag["features_used"] == ["launch__grid_size"]
    assert diag["grid_size_derived"] is False
    assert len(diag["features_missing"]) == 11
    assert any("smsp__inst_executed.sum" in note for note in plan.notes)
    assert plan.samples["weight"].sum() == 2
    assert plan.samples["launch_id"].iloc[0] == 0
    assert diag["target_met"] is True
    assert diag["chosen_k"] == 2  # two different kernels, 148 vs 256 blocks
    assert diag["error_by_k"][0]["error"] > 0.05
    assert [c["label"] for c in plan.clusters] == [
        "PersistentVariableLengthMergeStatesKernel",
        "BatchDecodeWithPagedKVCacheKernel",
    ]
    json.loads(plan.to_json())
    with pytest.raises(HilsimError, match="strict"):
        PKA(strict=True).plan(bundle)
    details = _bundle_from_ncu(NCU_DETAILS, "Duration")
    with pytest.raises(HilsimError, match="none of the PKA Table 2 metrics"):
        PKA().plan(details)


def test_two_level_covering_every_launch() -> None:
    bundle, truth = mixture(n=300)
    plan = PKA(detailed_first=300).plan(bundle)
    assert plan.diagnostics["classifier"]["skipped"] == "no lightly profiled launches"
    assert plan.samples["launch_id"].tolist() == first_of_each(truth)
    assert plan.diagnostics["all_launches_error"] == pytest.approx(
        plan.diagnostics["projected_error"]
    )


def test_one_level_pka_reads_only_the_grid_and_plans_the_same(tmp_path: Path) -> None:
    # one-level PKA declares the grid as its launch columns (launch__grid_size when the
    # metrics lack it); the plan from a bundle read with only those is the whole bundle's.
    # Two-level PKA also reads its classifier's light features, and compare asks each
    # method as its parameters make it.
    from hilsim.analyzer.compare import launch_columns

    from hilsim.core.bundle import read_bundle, write_bundle
    from hilsim.formats.read import import_profile

    sqlite = Path(__file__).parent / "data" / "nsys-sqlite" / "casio-nerf-a100.nsys.sqlite"
    folder = write_bundle(import_profile(sqlite), tmp_path / "b")
    one = methods.create("pka")
    assert one.launch_columns == ("grid_x", "grid_y", "grid_z")
    two = methods.create("pka", detailed_first=100)
    assert {"regs", "smem_static", "block_x"} <= set(two.launch_columns or ())
    assert "regs" in (launch_columns(["pka"], {"pka": {"detailed_first": 100}}) or ())
    assert "regs" not in (launch_columns(["pka"]) or ())
    narrow = read_bundle(folder, columns=one.launch_columns)
    assert "regs" not in narrow.launches.columns
    whole = read_bundle(folder)
    for plan_of in (one, methods.create("pka", seed=3)):
        a, b = plan_of.plan(narrow).to_dict(), plan_of.plan(whole).to_dict()
        for d in (a, b):
            d["diagnostics"].pop("plan_seconds", None)
        assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    assert two.plan(read_bundle(folder, columns=two.launch_columns)).clusters
