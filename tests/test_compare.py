"""hilsim compare: every method the data allows, skipped ones with reasons, holdout."""

import json

from hilsim.analyzer import compare
from hilsim.analyzer.cli import main
from hilsim.analyzer.compare import (
    WORKER_BUNDLE_FACTOR,
    available_bytes,
    bundle_bytes,
    compare_methods,
    memory_capped_workers,
    pareto_front,
)

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
    monkeypatch.setattr(compare, "available_bytes", lambda: int(1.5 * per_worker))
    result = compare_methods(bundle, ["stem", "random"], seeds=2, workers=2)
    assert result["workers"] == 1
    assert result["workers_note"].startswith("workers reduced from 2 to 1 (runs in this process)")
    for got, want in zip(result["methods"], expected["methods"], strict=True):
        for key in ("method", "runs", "mean_error", "max_error", "hmean_speedup"):
            assert got[key] == want[key]
    assert compare._STATE == {}  # the in-process run keeps no reference to the bundle


def test_a_worker_keeps_one_methods_shared_values_at_a_time() -> None:
    bundle = mixture_bundle([("k", 1000, 300, 3000)], seed=3)
    compare._init_worker(bundle, bundle, {})
    try:
        compare._run("stem", 0)
        cache = compare._STATE["cache"]
        assert len(cache) >= 2  # STEM's sort and the duration total
        compare._run("stem", 1)
        assert compare._STATE["cache"] is cache
        compare._run("random", 0)
        assert compare._STATE["cache"] is not cache
    finally:
        compare._STATE.clear()
