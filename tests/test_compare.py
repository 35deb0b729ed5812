"""hilsim compare: every method the data allows, skipped ones with reasons, holdout."""

import json

from analyzer.cli import main
from analyzer.compare import compare_methods, pareto_front
from tests.conftest import DATA, mixture_bundle


def test_pareto_front() -> None:
    points = [(10.0, 0.01), (100.0, 0.05), (50.0, 0.10), (1000.0, 0.5)]
    assert pareto_front(points) == [0, 1, 3]


def test_compare_skips_methods_without_their_data() -> None:
    bundle = mixture_bundle([("k", 1000, 300, 3000), ("j", 9000, 100, 3000)], seed=3)
    result = compare_methods(bundle, ["stem", "random", "pka"], seeds=3, workers=1)
    assert [m["method"] for m in result["methods"]] == ["stem", "random"]
    assert result["methods"][0]["runs"] == 3
    assert "no metrics" in result["skipped"]["pka"]


def test_compare_with_holdout_scores_on_the_other_run() -> None:
    run_a = mixture_bundle([("k", 1000, 300, 3000)], seed=1, shuffle=False)
    run_b = mixture_bundle([("k", 1500, 300, 3000)], seed=2, shuffle=False)
    same = compare_methods(run_a, ["stem"], seeds=2, workers=2)
    held = compare_methods(run_a, ["stem"], seeds=2, holdout=run_b, workers=2)
    assert held["holdout"] and not same["holdout"]
    assert same["methods"][0]["mean_error"] < 0.05
    # a plan made on run A still estimates run B's total (same launch sequence)
    assert held["methods"][0]["mean_error"] < 0.05


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
    assert {m["method"] for m in result["methods"]} == {"stem", "pka", "random"}
    assert (out / "pareto.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "compare.csv").read_text().startswith("method,runs,hmean_speedup")
