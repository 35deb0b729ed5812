"""Tests of MEGsim (analyzer/methods/megsim.py) on synthetic iterations, frame tables
and the real NVTX ranges of the CASIO NeRF nsys export.

The synthetic profiles have three kinds of iterations, each with its own kernel
mix (names, counts, durations, 1% noise), so the right answer (K = 3, the
members of each kind) is known in advance.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hilsim.analyzer import methods
from hilsim.analyzer.evaluate import score_plan
from hilsim.analyzer.methods.megsim import MEGsim
from hilsim.analyzer.methods.megsim_frames import column_groups, megsim_frames, read_frame_table
from hilsim.analyzer.methods.megsim_math import (
    MEGSIM_GROUP_WEIGHTS,
    bic_score,
    group_normalise,
    megsim_cluster,
)

from hilsim.core.bundle import Bundle
from hilsim.core.errors import HilsimError
from hilsim.core.schema import REGION_COLUMNS, normalize_launches
from hilsim.formats.nsys_sqlite import bundle_from_nsys_sqlite

DATA = Path(__file__).parent / "data"
NERF = DATA / "nsys-sqlite" / "casio-nerf-a100.nsys.sqlite"

#: kernel mix per kind of iteration: (kernel, launches, mean duration ns)
KINDS: tuple[tuple[tuple[str, int, float], ...], ...] = (
    (("gemm", 4, 50_000.0), ("relu", 2, 5_000.0)),
    (("gemm", 1, 50_000.0), ("conv", 5, 80_000.0)),
    (("reduce", 3, 20_000.0), ("copy", 2, 2_000.0)),
)


def iterations_bundle(
    n_iter: int = 90,
    seed: int = 0,
    outside: int = 3,
    region_ids: bool = False,
    noise: float = 0.01,
) -> tuple[Bundle, np.ndarray]:
    """Iterations ``step`` under one ``train`` range, plus ``outside`` launches before.

    Returns the bundle and the kind of each iteration (in start order).
    """
    rng = np.random.default_rng(seed)
    kinds = np.arange(n_iter) % 3
    rng.shuffle(kinds)
    names: list[str] = ["init"] * outside
    durations: list[float] = list(rng.uniform(1_000, 2_000, outside))
    starts: list[int] = list(range(0, 10 * outside, 10))
    regions_of: list[str | None] = [None] * outside
    region_ids_of: list[int] = [-1] * outside
    rows = [(0, "train", "train", 0, 1_000, 10_000_000_000)]
    t = 10_000
    for i, kind in enumerate(kinds):
        begin = t
        for kernel, count, mean in KINDS[kind]:
            for _ in range(count):
                names.append(kernel)
                durations.append(mean * (1.0 + noise * rng.standard_normal()))
                starts.append(t + 100)  # the GPU runs 100 ns behind the host
                regions_of.append("train/step")
                region_ids_of.append(i + 1)
                t += int(durations[-1]) + 1_000
        rows.append((i + 1, "step", "train/step", 1, begin, t))
        t += 5_000
    frame = pd.DataFrame(
        {
            "name": names,
            "duration_ns": np.round(durations).astype(np.int64),
            "start_ns": np.asarray(starts, dtype=np.int64),
            "region": regions_of,
        }
    )
    launches = normalize_launches(frame, "iterations")
    if region_ids:
        launches["region_id"] = pd.array(
            [r if r >= 0 else None for r in region_ids_of], dtype="Int64"
        )
    regions = pd.DataFrame(rows, columns=list(REGION_COLUMNS))
    return Bundle(launches=launches, regions=regions), kinds


def region_kinds(plan, kinds: np.ndarray) -> list[int]:
    """Kind of each cluster's representative region (region_id = iteration + 1)."""
    return [int(kinds[c["representative_region"] - 1]) for c in plan.clusters if c["regions"]]


@pytest.mark.slow
def test_three_kinds_found_closest_to_centroid_and_weights() -> None:
    bundle, kinds = iterations_bundle(seed=1)
    plan = MEGsim(seed=0).plan(bundle)
    diag = plan.diagnostics
    assert diag["regions"]["region_depth"] == 1  # the single "train" range is skipped
    assert diag["regions"]["n_regions"] == 90
    assert diag["regions"]["launches_outside"] == 3
    assert diag["regions"]["assignment"] == "start_ns"
    assert diag["weight_basis"] == "duration"
    assert diag["chosen_k"] == 3
    region_clusters = [c for c in plan.clusters if c["regions"]]
    assert sorted(region_kinds(plan, kinds)) == [0, 1, 2]
    assert sum(c["regions"] for c in region_clusters) == 90
    assert sorted(c["regions"] for c in region_clusters) == [30, 30, 30]
    assert plan.unit == "region" and plan.sampling == "deterministic"
    # the outside launches are simulated whole (weight 1) in their own cluster
    outside = plan.clusters[-1]
    assert outside["label"] == "outside regions" and outside["size"] == 3
    samples = plan.samples.set_index("launch_id")
    assert samples.loc[[0, 1, 2], "weight"].tolist() == [1.0, 1.0, 1.0]
    # every launch of a representative region is sampled, weighted by the cluster size
    assert (samples.drop(index=[0, 1, 2])["weight"] == 30.0).all()
    per_kind = [sum(count for _, count, _ in mix) for mix in KINDS]
    assert len(plan.samples) == 3 + sum(per_kind)
    # estimate = sum(weight * duration) is close to the truth (1% noise)
    assert score_plan(plan, bundle).error < 0.01
    json.loads(plan.to_json())

    # closest to centroid: rebuild the normalised vectors independently (one group,
    # per-kernel total duration per iteration, divided by the group total)
    launches = bundle.launches
    inside = launches["region"].notna().to_numpy()
    starts = bundle.regions["start_ns"].to_numpy()[1:]
    step = np.searchsorted(starts, launches["start_ns"].to_numpy(), side="right") - 1
    table = pd.crosstab(
        step[inside],
        launches["name"].astype(str).to_numpy()[inside],
        values=launches["duration_ns"].to_numpy()[inside],
        aggfunc="sum",
    ).fillna(0.0)
    x = table.to_numpy() / table.to_numpy().sum()
    labels = np.asarray(diag["region_clusters"])
    assert diag["region_ids"] == list(range(1, 91))
    for record in region_clusters:
        members = np.flatnonzero(labels == record["cluster"])
        assert (kinds[members] == kinds[members[0]]).all()
        distance = np.linalg.norm(x[members] - x[members].mean(axis=0), axis=1)
        assert record["representative_region"] - 1 == members[np.argmin(distance)]
        assert record["distance"] == pytest.approx(distance.min(), rel=1e-9)


@pytest.mark.parametrize("seed", [0, 2, 3])
@pytest.mark.slow
def test_clusters_are_pure_over_seeds(seed: int) -> None:
    # MEGsim's isotropic BIC may split a noisier kind in two (kinds with longer
    # kernels have a larger absolute spread), never mix kinds
    bundle, kinds = iterations_bundle(seed=seed)
    plan = MEGsim(seed=0).plan(bundle)
    labels = np.asarray(plan.diagnostics["region_clusters"])
    assert 3 <= plan.diagnostics["chosen_k"] <= 6
    for c in range(plan.diagnostics["chosen_k"]):
        assert len(set(kinds[labels == c].tolist())) == 1
    assert sorted(set(region_kinds(plan, kinds))) == [0, 1, 2]
    assert score_plan(plan, bundle).error < 0.01


@pytest.mark.slow
def test_region_id_column_gives_exact_instances() -> None:
    bundle, kinds = iterations_bundle(seed=1, region_ids=True)
    # make the GPU lag far behind the host: time-based placement would go wrong
    bundle.launches["start_ns"] = bundle.launches["start_ns"] + 3_000_000
    plan = MEGsim(seed=0).plan(bundle)
    assert plan.diagnostics["regions"]["assignment"] == "region_id"
    assert plan.diagnostics["chosen_k"] == 3
    assert sorted(region_kinds(plan, kinds)) == [0, 1, 2]
    assert score_plan(plan, bundle).error < 0.02


@pytest.mark.slow
def test_outside_drop_and_error() -> None:
    bundle, _ = iterations_bundle()
    dropped = MEGsim(outside="drop").plan(bundle)
    assert not (dropped.samples["launch_id"] < 3).any()
    assert any("outside the selected regions" in n for n in dropped.notes)
    assert all(c["label"] != "outside regions" for c in dropped.clusters)
    with pytest.raises(HilsimError, match="3 of .* launches lie outside"):
        MEGsim(outside="error").plan(bundle)


@pytest.mark.slow
def test_region_pattern_and_depth_selection() -> None:
    bundle, _ = iterations_bundle()
    by_pattern = MEGsim(region_pattern=r"/step$").plan(bundle)
    assert by_pattern.diagnostics["regions"]["n_regions"] == 90
    by_depth = MEGsim(region_depth=0).plan(bundle)  # the one "train" range
    assert by_depth.diagnostics["regions"]["n_regions"] == 1
    assert by_depth.diagnostics["chosen_k"] == 1
    assert score_plan(by_depth, bundle).error == pytest.approx(0.0)
    # both paths match: "train/step" lies under "train" and is dropped
    nested = MEGsim(region_pattern="train").plan(bundle)
    assert nested.diagnostics["regions"]["n_regions"] == 1
    assert any("outermost" in n for n in nested.notes)
    with pytest.raises(HilsimError, match="no NVTX range matches"):
        MEGsim(region_pattern="nothing-like-this").plan(bundle)
    with pytest.raises(HilsimError, match="not a regex"):
        MEGsim(region_pattern="(")


@pytest.mark.slow
def test_instructions_weighting_and_scalars() -> None:
    bundle, kinds = iterations_bundle(seed=1)
    n = bundle.n_launches
    rng = np.random.default_rng(1)
    metrics = pd.DataFrame(
        {
            "launch_id": np.arange(n, dtype=np.int64),
            "smsp__inst_executed.sum": bundle.launches["duration_ns"].to_numpy() * 3.0,
            "dram__bytes.sum": bundle.launches["duration_ns"].to_numpy()
            * rng.uniform(19.0, 21.0, n),
        }
    )
    # instructions profiled for half the launches: the others take their kernel's mean
    metrics.loc[1::2, "smsp__inst_executed.sum"] = np.nan
    bundle.metrics = metrics
    plan = MEGsim(scalars=["dram__bytes.sum"]).plan(bundle)
    diag = plan.diagnostics
    assert diag["weight_basis"] == "instructions"
    assert diag["groups"] == {"kernels": 0.5, "dram__bytes.sum": 0.5}
    assert plan.notes == ["equal group weights (0.5 each) over: kernels, dram__bytes.sum"]
    # a launch column as scalar; its nulls count as 0, with a note
    regs = MEGsim(scalars=["regs"]).plan(bundle)
    assert any("scalar regs" in n and "counted as 0" in n for n in regs.notes)
    weighted = MEGsim(
        scalars=["dram__bytes.sum"], group_weights={"kernels": 0.9, "dram__bytes.sum": 0.1}
    ).plan(bundle)
    assert weighted.diagnostics["groups"] == {"kernels": 0.9, "dram__bytes.sum": 0.1}
    assert weighted.diagnostics["chosen_k"] == 3
    with pytest.raises(HilsimError, match="group_weights must name exactly"):
        MEGsim(scalars=["dram__bytes.sum"], group_weights={"kernels": 1.0}).plan(bundle)
    with pytest.raises(HilsimError, match="neither a launch nor a metric"):
        MEGsim(scalars=["nope"]).plan(bundle)
    counts = MEGsim(weight="count").plan(bundle)
    assert counts.diagnostics["weight_basis"] == "count"
    assert counts.diagnostics["chosen_k"] == 3


def test_no_regions_is_a_clear_error() -> None:
    bundle, _ = iterations_bundle()
    bare = Bundle(launches=bundle.launches)
    with pytest.raises(HilsimError, match="the bundle has no NVTX regions"):
        MEGsim().plan(bare)
    empty = Bundle(launches=bundle.launches, regions=bundle.regions.iloc[:0])
    with pytest.raises(HilsimError, match="no NVTX regions"):
        MEGsim().plan(empty)
    unattributed = bundle.launches.copy()
    unattributed["region"] = pd.Categorical([None] * len(unattributed))
    with pytest.raises(HilsimError, match="no launch lies inside an NVTX region"):
        MEGsim().plan(Bundle(launches=unattributed, regions=bundle.regions))


def test_registered_and_parameters_checked() -> None:
    assert "megsim" in methods.available()
    method = methods.create("megsim", seed=3)
    assert method.params()["seed"] == 3 and method.stochastic
    for bad in ({"threshold": 1.5}, {"k_max": 0}, {"outside": "maybe"}, {"weight": "x"}):
        with pytest.raises(HilsimError):
            MEGsim(**bad)


@pytest.mark.slow
def test_bic_picks_three_blobs_and_threshold() -> None:
    rng = np.random.default_rng(0)
    centres = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    x = np.vstack([c + rng.standard_normal((40, 2)) for c in centres])
    result = megsim_cluster(x, seed=0)
    assert result.k == 3
    assert sorted(result.sizes.tolist()) == [40, 40, 40]
    assert list(result.bic) == [1, 2, 3, 4]  # stops at the first fall of the BIC
    assert result.bic[4] < result.bic[3]
    # eq. (5)-(6) by hand for K = 1
    r, d = x.shape
    sigma2 = np.sum((x - x.mean(axis=0)) ** 2) / (d * (r - 1))
    hand = (
        r * np.log(r)
        - r * np.log(r)
        - r * d / 2 * np.log(2 * np.pi * sigma2)
        - d / 2 * (r - 1)
        - (d + 1) / 2 * np.log(r)
    )
    assert bic_score(x, np.zeros(r, dtype=np.int64), 1) == pytest.approx(hand)
    # T = 0 takes K = 1 (the smallest BIC is always reached)
    assert megsim_cluster(x, threshold=0.0).k == 1


def test_identical_rows_form_one_cluster() -> None:
    result = megsim_cluster(np.ones((5, 3)))
    assert result.k == 1 and result.sizes.tolist() == [5]
    assert result.representatives.tolist() == [0]


def test_group_normalise() -> None:
    x = np.array([[1.0, 3.0, 10.0], [1.0, 1.0, 30.0]])
    out = group_normalise(x, np.array([0, 0, 1]), np.array([0.25, 0.75]))
    assert out[:, :2].sum() == pytest.approx(0.25)
    assert out[:, 2].sum() == pytest.approx(0.75)
    assert out[1, 2] == pytest.approx(0.75 * 30 / 40)


@pytest.mark.slow
def test_frame_table_with_megsim_groups(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    n = 90
    kind = np.repeat([0, 1, 2], n // 3)
    rng.shuffle(kind)
    vs = np.array([[100, 50], [300, 10], [100, 50]])[kind]
    fs = np.array([[5000, 0, 200], [5000, 900, 0], [100, 100, 4000]])[kind]
    prim = np.array([2000, 6000, 1500])[kind]
    frame = pd.DataFrame({"frame_id": np.arange(1000, 1000 + n)})
    for j in range(2):
        frame[f"vs_shader{j}"] = vs[:, j] * (1 + 0.01 * rng.standard_normal(n))
    for j in range(3):
        frame[f"FS:shader{j}"] = fs[:, j] * (1 + 0.01 * rng.standard_normal(n))
    frame["prim"] = prim * (1 + 0.01 * rng.standard_normal(n))
    path = tmp_path / "frames.csv"
    frame.to_csv(path, index=False)
    table = read_frame_table(path)
    assert table.columns[0] == "frame" and len(table) == n
    selection = megsim_frames(table, seed=0)
    assert selection.group_weights == MEGSIM_GROUP_WEIGHTS
    assert selection.groups == {
        "vs": ["vs_shader0", "vs_shader1"],
        "fs": ["FS:shader0", "FS:shader1", "FS:shader2"],
        "prim": ["prim"],
    }
    assert selection.k == 3
    assert selection.frames["weight"].sum() == n
    assert sorted(kind[selection.frames["row"]].tolist()) == [0, 1, 2]
    for c in range(3):
        members = kind[selection.labels == c]
        assert (members == members[0]).all()
    # estimate of a per-frame quantity that depends on the kind (cycles)
    cycles = np.array([1e6, 3e6, 2e6])[kind] * (1 + 0.01 * rng.standard_normal(n))
    assert selection.estimate(cycles) == pytest.approx(cycles.sum(), rel=0.02)
    by_id = pd.Series(cycles, index=table["frame"])
    assert selection.estimate(by_id) == pytest.approx(selection.estimate(cycles))
    # other groups: equal weights with a note, or explicit ones
    extra = table.assign(tess_a=1.0)
    equal = megsim_frames(extra)
    assert equal.group_weights["tess_a"] == pytest.approx(0.25)
    assert equal.notes and "equal group weights" in equal.notes[0]
    only = megsim_frames(table, columns=["prim"])
    assert only.groups == {"prim": ["prim"]}


def test_column_groups_convention() -> None:
    assert column_groups(["vs_a", "VS.b", "fs:c", "prim", "prim_tiles", "ms:mesh", "x"]) == [
        "vs",
        "vs",
        "fs",
        "prim",
        "prim",
        "ms",
        "x",
    ]


def test_frame_table_errors(tmp_path: Path) -> None:
    path = tmp_path / "f.csv"
    pd.DataFrame({"frame": [0, 1], "vs_a": [1.0, -2.0]}).to_csv(path, index=False)
    with pytest.raises(HilsimError, match="row 1, column 'vs_a'"):
        read_frame_table(path)
    pd.DataFrame({"frame": [0, 0], "vs_a": [1.0, 2.0]}).to_csv(path, index=False)
    with pytest.raises(HilsimError, match="duplicated"):
        read_frame_table(path)
    pd.DataFrame({"frame": [0, 1]}).to_csv(path, index=False)
    with pytest.raises(HilsimError, match="no feature columns"):
        read_frame_table(path)
    with pytest.raises(HilsimError, match="no such frame table"):
        read_frame_table(tmp_path / "missing.csv")


@pytest.mark.slow
def test_real_nerf_nvtx_regions() -> None:
    bundle = bundle_from_nsys_sqlite(NERF)
    assert len(bundle.regions) == 107
    inside = bundle.launches["region"].notna().to_numpy()
    plan = MEGsim(outside="drop", seed=0).plan(bundle)
    diag = plan.diagnostics
    assert diag["regions"]["paths"] == ["cublasSgemmEx"]
    assert diag["regions"]["n_regions"] == 107
    assert diag["regions"]["launches_in_regions"] == int(inside.sum()) == 143
    assert sum(c["regions"] for c in plan.clusters) == 107
    assert 1 <= diag["chosen_k"] <= 107
    durations = bundle.launches["duration_ns"].to_numpy(dtype=np.float64)
    ids = plan.samples["launch_id"].to_numpy()
    assert inside[ids].all()
    estimate = float(np.dot(plan.samples["weight"].to_numpy(), durations[ids]))
    truth = float(durations[inside].sum())
    assert abs(estimate - truth) / truth < 0.10
    # default: the 963 launches outside the ranges are simulated whole
    whole = MEGsim(seed=0).plan(bundle)
    assert whole.clusters[-1]["size"] == 963
    assert score_plan(whole, bundle).error < 0.05
