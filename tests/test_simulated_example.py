"""The shipped simulated-card example (analyzer/examples/simulated-v100):
`hilsim quickstart --example simulated-v100` on real GPGPU-Sim runs, figures checked.

The files are real simulator output (provenance in the example's README); the figures
below were measured on them by ``benchmarks/gpgpusim_loop.py`` and are deterministic
(no seeds), so the tolerances only absorb float summation order.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hilsim.analyzer.simexample import shipped_example

from hilsim.cli.main import main

EX = shipped_example()


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("qs")
    assert main(["quickstart", "--example", "simulated-v100", "-o", str(out)]) == 0
    data = json.loads((out / "result.json").read_text())
    data["_out"] = str(out)
    return data


def test_shipped_files_are_small_and_complete() -> None:
    files = [p for p in EX.root.rglob("*") if p.is_file()]
    total = sum(p.stat().st_size for p in files)
    assert total < 6_000_000, f"example is {total:,} bytes"
    for path in (EX.reference / "manifest.json", EX.rtx3070 / "launches.parquet", EX.timing,
                 EX.plan("stem"), EX.plan("pka"), EX.full_log("tuned"),
                 EX.full_log("reference"), EX.sim_folder("pka", "tuned") / "samples.csv",
                 EX.sim_folder("stem", "reference") / "sampled.log.gz",
                 EX.sim_folder("stem", "reference") / "cold.log.gz",
                 EX.root / "README.md"):
        assert path.is_file(), path
    # no machine paths in what ships
    for summary in EX.root.glob("sims/*/simulate.json"):
        text = summary.read_text()
        assert "/tmp" not in text and "/home" not in text and "/work" not in text


@pytest.mark.slow  # the whole quickstart example (~5 s)
def test_reference_card_has_no_configuration_error(result: dict) -> None:
    for method in ("stem", "pka"):
        r = result["validate"][f"{method}-reference"]
        assert r["configuration_error"] == 0.0
        assert r["total_error"] == pytest.approx(r["sampling_error"], abs=1e-12)


@pytest.mark.slow  # the whole quickstart example (~5 s)
def test_errors_compose_and_tuned_card_has_configuration_error(result: dict) -> None:
    for label, r in result["validate"].items():
        np.testing.assert_allclose(
            1 + r["total_error"], (1 + r["configuration_error"]) * (1 + r["sampling_error"]),
            rtol=1e-12, err_msg=label)
        np.testing.assert_allclose(
            1 + r["sampling_error"], (1 + r["selection_error"]) * (1 + r["state_error"]),
            rtol=1e-12, err_msg=label)
    stem, pka = result["validate"]["stem-tuned"], result["validate"]["pka-tuned"]
    # the same tuned full run under both plans: the same configuration error
    assert stem["configuration_error"] == pytest.approx(pka["configuration_error"], abs=1e-12)
    assert stem["configuration_error"] == pytest.approx(EXPECTED["configuration"], abs=5e-4)
    for label, want in EXPECTED["validate"].items():
        got = result["validate"][label]
        assert got["sampling_error"] == pytest.approx(want[0], abs=5e-4), label
        assert got["total_error"] == pytest.approx(want[1], abs=5e-4), label
        assert got["profiled_time_speedup"] == pytest.approx(want[2], rel=1e-3), label
        assert got["simulated_time_speedup"] == pytest.approx(want[3], rel=1e-3), label


@pytest.mark.slow  # the whole quickstart example (~5 s)
def test_pkp_portability_and_dse(result: dict) -> None:
    pkp = result["pkp"]
    assert pkp["projection_error"] == pytest.approx(EXPECTED["pkp"][0], abs=5e-4)
    assert pkp["simulated_fraction"] == pytest.approx(EXPECTED["pkp"][1], abs=5e-4)
    assert 0 < pkp["n_projected"] <= pkp["n_launches"]
    stem = result["portability"]["stem"]
    assert stem["error_on_b"] == pytest.approx(EXPECTED["portability"][0], abs=5e-4)
    assert stem["speedup_b_over_a"]["true"] == pytest.approx(EXPECTED["portability"][1],
                                                             abs=5e-4)
    rows = {r["variation"]: r for r in result["dse"]}
    assert rows["baseline"]["true_speedup"] == 1.0
    assert set(rows) >= {"sm_count=x2", "l1_latency=x0.5"}


@pytest.mark.slow  # the whole quickstart example (~5 s)
def test_reports_written_and_warm_state_visible(result: dict) -> None:
    out = Path(result["_out"]) / "simulated-v100"
    html = (out / "validate-stem-tuned.html").read_text()
    assert "configuration vs sampling error" in html
    assert "simulated-time speedup" in html and "profiled-time speedup" in html
    assert "accel-sim logs" not in html.lower()
    md = (out / "validate-stem-tuned.md").read_text()
    assert "| dram_read_sectors" in md
    # warmed: the STEM samples' state error is below 0.5% (run alone, cold: +8.01%), and
    # so the estimate is within 1% of the full run with >= 5x less simulated time
    counters = result["validate"]["stem-reference"]["per_counter"]
    assert abs(counters["instructions"]["sampling_error"]) < 0.01
    stem = result["validate"]["stem-reference"]
    assert abs(stem["state_error"]) < 0.005 and abs(stem["selection_error"]) < 0.005
    assert abs(stem["total_error"]) < 0.01 and stem["simulated_time_speedup"] >= 5
    assert result["wall_s"]["validate_s"] < 60


#: measured on the shipped files (benchmarks/gpgpusim_loop.py prints the same figures):
#: validate: (sampling error, total error, profiled-time speedup, simulated-time speedup)
#: per plan-card; the sampled runs are warmed (--warmup auto)
EXPECTED: dict = {
    "configuration": 0.03207,
    "validate": {
        "stem-tuned": (0.00250, 0.03465, 10.328, 7.208),
        "pka-tuned": (-0.02894, 0.00220, 51.284, 24.966),
        "stem-reference": (0.00224, 0.00224, 10.328, 7.388),
        "pka-reference": (-0.00770, -0.00770, 51.284, 25.277),
    },
    "pkp": (0.01034, 0.75712),
    "portability": (0.00738, 0.83748),
}


def test_decomposition_of_the_shipped_runs_without_plots() -> None:
    """The fast-tier check of the headline figures: decompose() on the shipped logs."""
    from hilsim.analyzer import validate as v
    from hilsim.analyzer.validate.decompose import decompose
    from hilsim.simmodel.gpgpusim.simlog import read_simlogs

    from hilsim.core.plan import load_plan
    from hilsim.formats.read import load_profile

    bundle = load_profile(EX.reference)
    silicon, _ = v.silicon_cycles(bundle, v.sm_clock_mhz(bundle))
    from hilsim.analyzer.simulate import read_placement

    from hilsim.core.jsonfile import read_json

    full = read_simlogs([EX.full_log("tuned")])
    for method in ("stem", "pka"):
        plan = load_plan(EX.plan(method))
        folder = EX.sim_folder(method, "tuned")
        sampled = v.results_from_placement(bundle, read_placement(folder),
                                           read_json(folder / "simulate.json"), str(folder))
        d = decompose(plan, bundle, silicon, sampled, v.results_from_simlog(plan, bundle, full))
        t = d["totals"]
        want = EXPECTED["validate"][f"{method}-tuned"]
        assert t["configuration_error"] == pytest.approx(EXPECTED["configuration"], abs=5e-4)
        assert (t["sampling_error"], t["total_error"]) == pytest.approx(want[:2], abs=5e-4)
        # the tuned card runs the same instructions: no configuration error there
        counters = {r["counter"]: r for r in d["per_counter"]}
        assert counters["instructions"]["configuration_error"] == 0.0


def test_visualizer_timelines_cover_each_launch_exactly() -> None:
    from hilsim.simmodel.gpgpusim.simlog import read_simlog
    from hilsim.simmodel.gpgpusim.visualizer import read_timelines

    timelines = read_timelines(EX.pkp_run)
    stats = read_simlog(EX.pkp_run / "sim.log.gz").set_index("launch_id")
    assert sorted(timelines) == sorted(stats.index)
    for lid, t in timelines.items():
        row = stats.loc[lid]
        assert t.total_cycles == row["cycles"]
        assert t.instructions.sum() == row["instructions"]
        # every CTA finishes in exactly one window, also those counted by a later sample
        assert t.ctas_finished.sum() == t.total_ctas == row["ctas"]
        assert 1 <= t.ctas_per_wave <= t.total_ctas
    assert sum(len(t.cycles) > 1 for t in timelines.values()) > len(timelines) / 2


def test_pkp_cli_on_the_shipped_run(tmp_path: Path, capsys) -> None:
    out = tmp_path / "pkp.json"
    assert main(["pkp", str(EX.reference), "--plan", str(EX.plan("stem")), "--gpgpusim-log",
                 str(EX.pkp_run), "--relative", "-o", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["projection_error"] == pytest.approx(EXPECTED["pkp"][0], abs=5e-4)
    assert main(["pkp", str(EX.reference), "--plan", str(EX.plan("stem")), "--gpgpusim-log",
                 str(tmp_path)]) == 2
    assert "no sim.log or sampled.log" in capsys.readouterr().err


def test_damaged_or_empty_visualizer_logs_are_one_line_errors(tmp_path: Path, capsys) -> None:
    import gzip
    import shutil

    run = tmp_path / "run"
    run.mkdir()
    shutil.copyfile(EX.pkp_run / "sim.log.gz", run / "sim.log.gz")
    viz = run / "gpgpusim_visualizer_.log.gz"
    real = (EX.pkp_run / "gpgpusim_visualizer_.log.gz").read_bytes()
    argv = ["pkp", str(EX.reference), "--plan", str(EX.plan("stem")), "--gpgpusim-log", str(run)]
    for body, said in (
        (real[: len(real) // 2], "damaged gzip file"),  # cut short
        (gzip.compress(b"not an AerialVision log\n"), "no visualizer samples"),
    ):
        viz.write_bytes(body)
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert said in err and str(viz) in err and "\n" not in err
