"""Evaluation: definitions, intervals, per-metric errors, cross-bundle checks."""

import contextlib

import numpy as np
import pandas as pd
import pytest
from hilsim.analyzer.evaluate import evaluate_method, score_plan
from hilsim.analyzer.methods.baselines import FirstN, RandomUniform
from hilsim.analyzer.methods.stem import STEM
from hilsim.analyzer.tablecache import TableCache

from hilsim.core.bundle import Bundle
from hilsim.core.errors import HilsimError
from hilsim.core.plan import Plan, load_plan, samples_frame
from hilsim.core.schema import normalize_launches
from tests.conftest import mixture_bundle


def hand_plan(bundle: Bundle, ids, weights) -> Plan:
    from hilsim.analyzer.methods.base import source_facts

    return Plan(
        method="hand",
        params={},
        source=source_facts(bundle),
        clusters=[{"cluster": 0, "size": bundle.n_launches}],
        samples=samples_frame(np.array(ids), np.array(weights), np.zeros(len(ids))),
    )


def test_definitions_on_a_hand_computed_case() -> None:
    frame = pd.DataFrame({"name": ["a", "a", "b", "b"], "duration_ns": [10, 30, 100, 100]})
    bundle = Bundle(normalize_launches(frame, "t"))
    plan = hand_plan(bundle, [0, 2], [2.0, 2.0])
    score = score_plan(plan, bundle)
    assert score.truth_ns == 240
    assert score.estimate_ns == 2 * 10 + 2 * 100
    assert score.error == pytest.approx(20 / 240)
    assert score.speedup == pytest.approx(240 / 110)
    assert score.interval_ns is None  # a hand-picked (deterministic) plan has no interval


def test_speedup_counts_a_launch_drawn_twice_once() -> None:
    bundle = mixture_bundle([("k", 1000, 10, 3)])
    plan = hand_plan(bundle, [1, 1], [1.5, 1.5])
    assert len(plan.samples) == 1 and plan.samples["weight"].iloc[0] == 3.0
    assert plan.samples["draws"].iloc[0] == 2
    score = score_plan(plan, bundle)
    d = bundle.launches["duration_ns"].to_numpy()
    assert score.speedup == pytest.approx(d.sum() / d[1])


@pytest.mark.slow
def test_interval_covers_truth_about_95_percent() -> None:
    """Property on a known wide mixture: the 95% interval holds in ~95% of seeds."""
    bundle = mixture_bundle([("w", 5_000, 3_000, 20_000), ("n", 40_000, 200, 5_000)], seed=2)
    summary = evaluate_method(STEM(epsilon=0.05), bundle, seeds=80)
    coverage = np.mean(summary.covered)
    assert 0.85 <= coverage <= 1.0


def test_random_baseline_weights_and_interval() -> None:
    bundle = mixture_bundle([("k", 1000, 300, 50_000)])
    plan = RandomUniform(fraction=0.01, seed=1).plan(bundle)
    assert plan.samples["weight"].sum() == pytest.approx(bundle.n_launches)
    assert 300 < plan.n_samples < 700
    score = score_plan(plan, bundle)
    lo, hi = score.interval_ns
    assert lo < score.estimate_ns < hi and score.error < 0.05


def test_first_n_scales_the_prefix() -> None:
    bundle = mixture_bundle([("k", 1000, 0.0, 100)], shuffle=False)
    plan = FirstN(n_launches=10).plan(bundle)
    assert plan.samples["launch_id"].tolist() == list(range(10))
    assert score_plan(plan, bundle).error == pytest.approx(0.0)


def test_first_n_by_instructions_needs_counts() -> None:
    bundle = mixture_bundle([("k", 1000, 1.0, 10)], shuffle=False)
    with pytest.raises(HilsimError, match="smsp__inst_executed.sum"):
        FirstN(n_instructions=1e6).plan(bundle)
    bundle.metrics = pd.DataFrame(
        {"launch_id": np.arange(10), "smsp__inst_executed.sum": np.full(10, 1e5)}
    )
    plan = FirstN(n_instructions=3e5).plan(bundle)
    assert plan.n_samples == 3
    assert plan.samples["weight"].iloc[0] == pytest.approx(10 / 3)


def test_per_metric_errors_need_full_coverage() -> None:
    bundle = mixture_bundle([("k", 1000, 100, 1000)], seed=4)
    ids = np.arange(1000)
    bundle.metrics = pd.DataFrame(
        {
            "launch_id": ids,
            "inst": bundle.launches["duration_ns"].to_numpy() * 3.0,
            "zero": np.zeros(1000),
        }
    )
    plan = STEM(epsilon=0.05, seed=0).plan(bundle)
    score = score_plan(plan, bundle)
    assert score.metric_errors["inst"] == pytest.approx(score.error)
    assert score.metric_errors["zero"] is None
    bundle.metrics = bundle.metrics.iloc[:10]
    score = score_plan(plan, bundle)
    assert score.metric_errors["inst"] is None and "cover 10 of 1000" in score.metric_notes[0]


def test_plan_evaluated_on_another_run_of_the_same_workload(tmp_path) -> None:
    run_a = mixture_bundle([("k", 1000, 100, 2000), ("j", 5000, 50, 2000)], seed=1, shuffle=False)
    run_b = mixture_bundle([("k", 1100, 100, 2000), ("j", 5200, 50, 2000)], seed=2, shuffle=False)
    plan = STEM(seed=0).plan(run_a).attach_names(run_a.launches["name"])
    plan.save(tmp_path / "p.json")
    loaded = load_plan(tmp_path / "p.json")
    score = score_plan(loaded, run_b)
    assert score.truth_ns == run_b.launches["duration_ns"].sum()
    assert score.error < 0.05


def test_plan_on_a_different_workload_is_refused() -> None:
    run_a = mixture_bundle([("k", 1000, 100, 2000)], seed=1)
    shorter = mixture_bundle([("k", 1000, 100, 1999)], seed=1)
    plan = STEM().plan(run_a).attach_names(run_a.launches["name"])
    with pytest.raises(HilsimError, match="has 1999 launches but the plan was made on 2000"):
        score_plan(plan, shorter)
    other = mixture_bundle([("k", 1000, 100, 1000), ("x", 1000, 100, 1000)], seed=1)
    with pytest.raises(HilsimError, match="launch sequences differ"):
        score_plan(plan, other)


def reference_metric_errors(plan: Plan, metrics: pd.DataFrame) -> dict[str, float | None]:
    """Per-metric errors as first written: the whole sorted table, nansum over it."""
    columns = [c for c in metrics.columns if c != "launch_id"]
    table = metrics.set_index("launch_id").sort_index()[columns].to_numpy(dtype=float)
    ids = plan.samples["launch_id"].to_numpy()
    weights = plan.samples["weight"].to_numpy()
    truth = np.nansum(table, axis=0)
    estimate = np.nansum(table[ids] * weights[:, None], axis=0)
    return {
        c: None if truth[j] == 0 else abs(estimate[j] - truth[j]) / abs(truth[j])
        for j, c in enumerate(columns)
    }


def test_metric_errors_match_the_whole_table_formula() -> None:
    """Unsorted launch ids and NaN values: the same errors as summing the sorted table."""
    bundle = mixture_bundle([("k", 1000, 100, 1500), ("j", 300, 30, 500)], seed=6)
    d = bundle.launches["duration_ns"].to_numpy().astype(float)
    rng = np.random.default_rng(0)
    inst = d * rng.uniform(2, 4, len(d))
    inst[rng.choice(len(d), 40, replace=False)] = np.nan
    shuffled = rng.permutation(len(d))
    bundle.metrics = pd.DataFrame(
        {"launch_id": shuffled, "inst": inst[shuffled], "bytes": d[shuffled] * 7}
    )
    plan = STEM(epsilon=0.05, seed=3).plan(bundle)
    expected = reference_metric_errors(plan, bundle.metrics)
    for cache in (None, TableCache()):
        with cache or contextlib.nullcontext():
            errors = score_plan(plan, bundle).metric_errors
            assert errors == pytest.approx(expected, rel=1e-12)
            assert score_plan(plan, bundle).metric_errors == errors  # from the cache


def test_cached_totals_follow_replaced_metrics_and_launches() -> None:
    bundle = mixture_bundle([("k", 1000, 100, 2000)], seed=4)
    d = bundle.launches["duration_ns"].to_numpy().astype(float)
    ids = np.arange(len(d))
    bundle.metrics = pd.DataFrame({"launch_id": ids, "inst": d * 3.0})
    plan = STEM(epsilon=0.05, seed=0).plan(bundle)
    with TableCache() as cache:
        first = score_plan(plan, bundle)
        assert first.metric_errors["inst"] == pytest.approx(first.error)
        assert len(cache) == 2  # the duration total and the metric totals
        bundle.metrics = pd.DataFrame({"launch_id": ids, "inst": d * 3.0 + ids})
        second = score_plan(plan, bundle)
        assert second.metric_errors == pytest.approx(
            reference_metric_errors(plan, bundle.metrics), rel=1e-12
        )
        assert second.metric_errors["inst"] != pytest.approx(first.metric_errors["inst"])
        launches = bundle.launches.copy()
        launches["duration_ns"] = launches["duration_ns"] * 2
        bundle.launches = launches
        third = score_plan(plan, bundle)
        assert third.truth_ns == 2 * first.truth_ns
        assert third.error == pytest.approx(first.error)


def test_scores_over_seeds_equal_scores_of_single_plans() -> None:
    """evaluate_method's shared per-bundle values change no number."""
    bundle = mixture_bundle([("w", 5_000, 3_000, 3_000), ("n", 40_000, 200, 1_000)], seed=2)
    d = bundle.launches["duration_ns"].to_numpy().astype(float)
    bundle.metrics = pd.DataFrame({"launch_id": np.arange(len(d)), "inst": d * 1.5 + 7})
    summary = evaluate_method(STEM(epsilon=0.05), bundle, seeds=4)
    for seed in range(4):
        score = score_plan(STEM(epsilon=0.05, seed=seed).plan(bundle), bundle)
        assert summary.errors[seed] == score.error
        assert summary.speedups[seed] == score.speedup
        if seed == 0:
            assert summary.first_score == score
