"""`hilsim recommend` on the shipped real profiles (CASIO durations, NeRF A100 nsys)."""

from __future__ import annotations

import json

import pytest
from hilsim.analyzer.examples import EXAMPLES
from hilsim.analyzer.recommend import recommend, split_halves

from hilsim.cli.main import main
from hilsim.cli.recommend import parse_error
from hilsim.core.errors import HilsimError
from hilsim.formats.read import load_profile

NERF = EXAMPLES[1].path(EXAMPLES[1].profile)

GRID = [("stem", {"epsilon": e}) for e in (0.01, 0.02, 0.05, 0.1)] + [
    ("random", {"fraction": 0.01}),
    ("pka", {}),
]


@pytest.fixture(scope="module")
def casio_result(casio_bundle):
    # no time budget: the choice must not depend on the machine's load
    return recommend(casio_bundle, 0.01, seeds=8, candidates=GRID, budget_s=float("inf"))


@pytest.mark.slow
def test_casio_winner_is_the_fastest_candidate_under_the_target(casio_result) -> None:
    winner = casio_result["winner"]
    assert (winner.method, winner.params) == ("stem", {"epsilon": 0.02})
    assert winner.quantile_error <= 0.01
    by_status = {c.label: c for c in casio_result["candidates"]}
    passing = [c for c in by_status.values() if c.status == "pass"]
    assert all(c.hmean_speedup <= winner.hmean_speedup for c in passing)
    failing = [c for c in by_status.values() if c.status == "fail"]
    assert failing and all(c.quantile_error > 0.01 for c in failing)
    assert "stem(epsilon=0.05)" in {c.label for c in failing}  # faster, but over 1%
    assert by_status["pka"].status == "skipped" and "metrics" in by_status["pka"].reason
    assert "first and second half" in casio_result["protocol"]


@pytest.mark.slow
def test_casio_recommendation_is_deterministic(casio_bundle, casio_result) -> None:
    again = recommend(casio_bundle, 0.01, seeds=8, candidates=GRID[:3], budget_s=float("inf"))
    first = {c.label: c.quantile_error for c in casio_result["candidates"]}
    assert all(first[c.label] == c.quantile_error for c in again["candidates"])


def test_split_halves_are_renumbered_launch_order_halves(casio_bundle) -> None:
    a, b = split_halves(casio_bundle)
    assert a.n_launches + b.n_launches == casio_bundle.n_launches
    assert a.launches["launch_id"].tolist() == list(range(a.n_launches))
    durations = casio_bundle.launches["duration_ns"]
    assert b.launches["duration_ns"].iloc[0] == durations.iloc[a.n_launches]


def test_holdout_mode_scores_on_the_other_run() -> None:
    nerf = load_profile(NERF)
    result = recommend(nerf, 0.02, holdout=nerf, seeds=4, candidates=GRID[:4],
                       budget_s=float("inf"))
    assert result["protocol"].startswith("planned on the profile, scored on the holdout")
    assert result["winner"] is not None and result["winner"].quantile_error <= 0.02


def test_cli_writes_the_winner_plan_and_rejects_bad_targets(tmp_path, capsys) -> None:
    plan = tmp_path / "plan.json"
    code = main(["recommend", str(NERF), "--target-error", "50%", "--seeds", "3",
                 "--budget", "0", "-o", str(plan), "--json", str(tmp_path / "r.json")])
    assert code == 0
    assert json.loads(plan.read_text())["method"] == "stem"
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["winner"]["status"] == "pass"
    assert any(c["status"] == "not run" for c in result["candidates"])  # budget used up
    capsys.readouterr()
    assert main(["recommend", str(NERF), "--target-error", "abc"]) == 2
    assert "--target-error" in capsys.readouterr().err
    with pytest.raises(HilsimError):
        parse_error("150%")
    assert parse_error("1%") == pytest.approx(0.01) and parse_error("0.02") == 0.02
