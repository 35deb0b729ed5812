"""hilsim compare: every method the data allows, skipped ones with reasons, holdout."""

import json

import numpy as np
import pytest
from hilsim.analyzer.compare import (
    WORKER_BUNDLE_FACTOR,
    available_bytes,
    bundle_bytes,
    compare_methods,
    memory,
    memory_capped_workers,
    pareto_front,
    pool,
)

from hilsim.cli.main import main
from hilsim.core.bundle import Bundle
from tests.conftest import DATA, mixture_bundle


def test_pareto_front() -> None:
    points = [(10.0, 0.01), (100.0, 0.05), (50.0, 0.10), (1000.0, 0.5)]
    assert pareto_front(points) == [0, 1, 3]


def test_compare_skips_methods_without_their_data() -> None:
    bundle = mixture_bundle([("k", 1000, 300, 3000), ("j", 9000, 100, 3000)], seed=3)
    result = compare_methods(bundle, ["stem", "random", "pka"], seeds=3, workers=1)
    assert [m["method"] for m in result["methods"]] == ["stem", "random (stem's time)"]
    assert result["methods"][0]["runs"] == 3
    assert "no metrics" in result["skipped"]["pka"]


@pytest.mark.slow
def test_compare_with_holdout_scores_on_the_other_run() -> None:
    run_a = mixture_bundle([("k", 1000, 300, 3000)], seed=1, shuffle=False)
    # run B is the same launches on a slower card: each launch 1.5x its run-A time with
    # 2% per-launch noise (an independent redraw would leave nothing for a plan to carry
    # over: no sampling method estimates launch-level noise it never saw)
    launches = run_a.launches.copy()
    noise = np.random.default_rng(2).normal(1.0, 0.02, len(launches))
    launches["duration_ns"] = (launches["duration_ns"] * 1.5 * noise).round().astype("int64")
    run_b = Bundle(launches)
    same = compare_methods(run_a, ["stem"], seeds=2, workers=2)
    held = compare_methods(run_a, ["stem"], seeds=2, holdout=run_b, workers=2)
    assert held["holdout"] and not same["holdout"]
    assert same["methods"][0]["mean_error"] < 0.05
    # a plan made on run A still estimates run B's total (same launch sequence)
    assert held["methods"][0]["mean_error"] < 0.05


@pytest.mark.slow
def test_compare_command_writes_table_and_plot(tmp_path, capsys) -> None:
    out = tmp_path / "cmp"
    code = main(
        [
            "compare",
            str(DATA / "nsys-sqlite" / "casio-nerf-a100.nsys.sqlite"),
            "--methods",
            "stem,pka,random",
            "--seeds",
            "2",
            "-o",
            str(out),
        ]
    )
    assert code == 0, capsys.readouterr().err
    result = json.loads((out / "compare.json").read_text())
    labels = {m["method"] for m in result["methods"]}
    assert labels == {"stem", "pka (1/12 metrics)", "random (stem's time)"}
    assert (out / "pareto.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "compare.csv").read_text().startswith("method,runs,hmean_speedup")
    # what the run was: version, input digest, every method's parameters and seeds
    assert result["hilsim_version"] and result["seeds"] == [0, 1]
    assert len(result["input"]["sha256"]) == 64 and result["input"]["kind"] == "file"
    assert result["workload"] == "casio-nerf-a100"
    rows = {m["name"]: m for m in result["methods"]}
    assert rows["stem"]["params"]["epsilon"] == 0.05 and rows["stem"]["seeds"] == [0, 1]
    assert rows["random"]["budget"]["of"] == "stem"
    # PKA ran on 1 of its 12 metrics: labelled so, and its notes carried as warnings
    assert any("missing" in w for w in rows["pka"]["warnings"])
    printed = capsys.readouterr().out
    assert "pka (1/12 metrics)" in printed and "missing" in printed


def test_memory_capped_workers() -> None:
    gb = 1024**3
    assert memory_capped_workers(2, 3 * gb, 20 * gb) == (2, None)
    assert memory_capped_workers(2, 3 * gb, None) == (2, None)  # unknown: as asked
    assert memory_capped_workers(1, 3 * gb, 1 * gb) == (1, None)
    workers, note = memory_capped_workers(4, 3 * gb, 10 * gb)
    assert workers == 3 and note.startswith("workers reduced from 4 to 3")
    workers, note = memory_capped_workers(2, 3 * gb, 4 * gb)
    assert workers == 1 and "in this process" in note and "4.0 GB is available" in note


def test_compare_lowers_workers_to_what_memory_holds(monkeypatch) -> None:
    bundle = mixture_bundle([("k", 1000, 300, 3000), ("j", 9000, 100, 3000)], seed=3)
    assert available_bytes() is None or available_bytes() > 0
    expected = compare_methods(bundle, ["stem", "random"], seeds=2, workers=1)
    assert expected["workers"] == 1 and expected["workers_note"] is None
    per_worker = WORKER_BUNDLE_FACTOR * bundle_bytes([bundle])
    monkeypatch.setattr(memory, "available_bytes", lambda: int(1.5 * per_worker))
    result = compare_methods(bundle, ["stem", "random"], seeds=2, workers=2)
    assert result["workers"] == 1
    assert result["workers_note"].startswith("workers reduced from 2 to 1 (runs in this process)")
    for got, want in zip(result["methods"], expected["methods"], strict=True):
        for key in ("method", "runs", "mean_error", "max_error", "hmean_speedup"):
            assert got[key] == want[key]
    assert pool._STATE == {}  # the in-process run keeps no reference to the bundle


def test_a_worker_keeps_one_methods_shared_values_at_a_time() -> None:
    bundle = mixture_bundle([("k", 1000, 300, 3000)], seed=3)
    pool.init_worker(bundle, bundle, {})
    try:
        pool.plan_and_score("stem", 0)
        cache = pool._STATE["cache"]
        assert len(cache) >= 2  # STEM's sort and the duration total
        pool.plan_and_score("stem", 1)
        assert pool._STATE["cache"] is cache
        pool.plan_and_score("random", 0)
        assert pool._STATE["cache"] is not cache
    finally:
        pool._STATE.clear()


def test_speedup_keeps_two_to_three_significant_digits() -> None:
    from hilsim.analyzer.compare import format_speedup

    assert format_speedup(1.214) == "1.21x"
    assert format_speedup(12.14) == "12.1x"
    assert format_speedup(121.4) == "121x"
    assert format_speedup(3021.7) == "3,022x"


def test_no_reduction_rows_are_marked_and_kept_off_the_front() -> None:
    """first-n with n >= the launch count simulates everything: 0% error at 1x must not
    rank first nor sit on the Pareto front."""
    bundle = mixture_bundle([("k", 1000, 300, 3000), ("j", 9000, 100, 3000)], seed=3)
    result = compare_methods(
        bundle,
        ["stem", "first-n"],
        seeds=2,
        workers=1,
        params={"first-n": {"n_launches": 10_000}},
        budget_of=None,
    )
    rows = {m["name"]: m for m in result["methods"]}
    full = rows["first-n"]
    assert full["mean_error"] == 0.0 and full["hmean_speedup"] == 1.0
    assert "speedup 1.00x < 2x" in full["no_reduction"]
    assert not full["pareto"]
    assert result["methods"][-1]["name"] == "first-n"  # after every row that reduces
    assert rows["stem"]["no_reduction"] is None and rows["stem"]["pareto"]


@pytest.mark.slow
def test_baselines_run_at_the_reference_budget_seed_by_seed() -> None:
    bundle = mixture_bundle([("k", 1000, 300, 20_000), ("j", 9000, 2000, 20_000)], seed=5)
    by_time = compare_methods(bundle, ["stem", "random", "first-n"], seeds=3, workers=1)
    rows = {m["name"]: m for m in by_time["methods"]}
    stem = rows["stem"]
    assert by_time["budget"] == {"of": "stem", "kind": "time", "baselines": ["random", "first-n"]}
    per_seed = rows["random"]["budget"]["per_seed"]
    assert sorted(per_seed) == [0, 1, 2]
    # random draws what the time buys on average; first-n the prefix within the time
    assert 0.5 < rows["random"]["mean_sampled_ns"] / stem["mean_sampled_ns"] < 2.0
    assert rows["first-n"]["mean_sampled_ns"] <= stem["mean_sampled_ns"]
    by_count = compare_methods(
        bundle, ["stem", "random", "first-n"], seeds=3, workers=1, budget="launches"
    )
    rows = {m["name"]: m for m in by_count["methods"]}
    assert rows["random"]["mean_samples"] == rows["stem"]["mean_samples"]
    assert abs(rows["first-n"]["mean_samples"] - rows["stem"]["mean_samples"]) <= 0.5


def test_random_and_first_n_at_a_fixed_budget() -> None:
    from hilsim.analyzer import methods

    bundle = mixture_bundle([("k", 1000, 300, 5000), ("j", 9000, 100, 5000)], seed=2)
    durations = bundle.launches["duration_ns"].to_numpy()
    plan = methods.create("random", n_samples=37, seed=1).plan(bundle)
    assert plan.n_samples == 37 and plan.samples["launch_id"].is_unique
    assert abs(plan.samples["weight"].sum() - bundle.n_launches) < 1e-6
    budget = 50 * durations.mean()
    assert methods.create("random", budget_ns=budget).plan(bundle).n_samples == 50
    prefix = methods.create("first-n", budget_ns=float(durations[:10].sum())).plan(bundle)
    assert prefix.n_samples == 10


@pytest.mark.slow
def test_pareto_plot_draws_zero_error_without_clipping(tmp_path) -> None:
    """0% error is drawn at 0 on the symlog axis (was clipped to 1e-4 %)."""
    from hilsim.analyzer.compare import pareto_plot

    summaries = [
        {"method": "all", "hmean_speedup": 1.0, "mean_error": 0.0, "no_reduction": "x"},
        {
            "method": "stem",
            "hmean_speedup": 300.0,
            "mean_error": 0.005,
            "min_error": 0.001,
            "max_error": 0.01,
            "min_speedup": 250.0,
            "max_speedup": 320.0,
        },
    ]
    path = pareto_plot(summaries, tmp_path / "p.png", "wl")
    assert path.read_bytes()[:4] == b"\x89PNG"


def test_compare_reads_the_union_of_the_methods_launch_columns() -> None:
    # what `hilsim compare` reads of a bundle: the launch columns its methods declare
    from hilsim.analyzer import methods
    from hilsim.analyzer.compare import launch_columns

    assert launch_columns(["random", "first-n"]) == ()
    stem = launch_columns(["stem", "random"])
    assert stem == methods.get("stem").launch_columns
    every = launch_columns(["all"])
    assert every is not None and {"stream", "device", "correlation_id"}.isdisjoint(every)
    for name in methods.available():
        declared = methods.get(name).launch_columns
        assert declared is not None and set(declared) <= set(every), name


def test_methods_read_their_own_columns_from_the_bundle_folder(tmp_path) -> None:
    # compare given only the columns every method reads: STEM's grid/block are read from
    # the folder when its runs start (in this process and for workers), and the table is
    # the one of the whole bundle; without them STEM's clusters differ on this profile
    from hilsim.analyzer.compare import bundle_columns_reader

    from hilsim.core.bundle import read_bundle, write_bundle
    from hilsim.formats.read import import_profile

    folder = write_bundle(
        import_profile(DATA / "nsys-sqlite" / "casio-nerf-a100.nsys.sqlite"), tmp_path / "b"
    )
    whole = read_bundle(folder)
    base = read_bundle(folder, columns=())
    assert "grid_x" not in base.launches.columns
    names = ["stem", "random", "first-n"]

    def table(result: dict) -> list:
        return [(m["method"], m["errors"], m["speedups"], m["mean_samples"])
                for m in result["methods"]]

    expected = table(compare_methods(whole, names, seeds=2, workers=1))
    for workers in (1, 2):
        got = compare_methods(base, names, seeds=2, workers=workers,
                              columns_of=bundle_columns_reader(base, folder))
        assert table(got) == expected, workers
    blind = compare_methods(base, ["stem"], seeds=2, workers=1)  # no reader: no grid/block
    assert table(blind)[0] != expected[[m[0] for m in expected].index("stem")]
