"""The Python facade (hilsim.analyzer.Profile): the objects the commands print, the same
figures and files as the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from hilsim.analyzer import methods
from hilsim.analyzer.examples import EXAMPLES
from hilsim.analyzer.report import write_result
from hilsim.analyzer.simexample import shipped_example

from hilsim.cli.main import main
from hilsim.core.errors import HilsimError
from hilsim.core.plan import Plan

NERF = next(e for e in EXAMPLES if e.profile.endswith(".sqlite"))


@pytest.fixture(scope="module")
def nerf_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from hilsim.analyzer import import_bundle

    folder = tmp_path_factory.mktemp("facade") / "nerf.bundle"
    result = import_bundle(NERF.path(NERF.profile), folder)
    assert result.path == folder and result.n_launches == 1106 and result.n_metrics == 0
    assert result.n_kernels > 0 and result.warnings == result.manifest.get("warnings", [])
    return folder


def _drop_timings(value: object) -> object:
    if isinstance(value, dict):
        return {k: _drop_timings(v) for k, v in value.items() if "seconds" not in k}
    if isinstance(value, list):
        return [_drop_timings(v) for v in value]
    return value


def test_lazy_export_from_the_package() -> None:
    import hilsim.analyzer as analyzer
    from hilsim.analyzer.facade import Profile

    assert analyzer.Profile is Profile and "Profile" in dir(analyzer)


def test_import_refuses_an_existing_folder(nerf_bundle: Path) -> None:
    from hilsim.analyzer import import_bundle

    with pytest.raises(HilsimError, match="already exists"):
        import_bundle(NERF.path(NERF.profile), nerf_bundle)


def test_plan_and_evaluate_match_the_commands(nerf_bundle: Path, tmp_path: Path, capsys) -> None:
    from hilsim.analyzer import Profile

    profile = Profile.load(nerf_bundle)
    assert profile.n_launches == 1106 and "1,106 launches" in repr(profile)
    plan = profile.plan("stem", epsilon=0.05, seed=3)
    assert isinstance(plan, Plan) and plan.diagnostics["trace_warnings"]
    assert main(["plan", str(nerf_bundle), "-m", "stem", "-p", "epsilon=0.05", "-p", "seed=3",
                 "-o", str(tmp_path / "stem.json")]) == 0
    assert (tmp_path / "stem.json").read_text() == plan.to_json() + "\n"

    result = profile.evaluate(plan)
    assert result.summary is None and result.error == result.score.error < 0.05
    from_file = profile.evaluate(tmp_path / "stem.json")
    assert main(["evaluate", str(nerf_bundle), "--plan", str(tmp_path / "stem.json"),
                 "-o", str(tmp_path / "r.json")]) == 0
    written = json.loads((tmp_path / "r.json").read_text())
    assert written == json.loads(json.dumps(from_file.to_dict()))
    assert written["plan"] == str(tmp_path / "stem.json") and result.to_dict()["plan"] is None

    over_seeds = profile.evaluate(method="random", params={"fraction": 0.05}, seeds=3)
    assert main(["evaluate", str(nerf_bundle), "-m", "random", "-p", "fraction=0.05",
                 "--seeds", "3", "-o", str(tmp_path / "m.json")]) == 0
    assert _drop_timings(json.loads((tmp_path / "m.json").read_text())) == _drop_timings(
        json.loads(json.dumps(over_seeds.to_dict())))
    assert over_seeds.summary is not None and over_seeds.summary.seeds == [0, 1, 2]
    assert over_seeds.speedup == over_seeds.summary.hmean_speedup
    capsys.readouterr()


def test_a_method_object_or_a_name(nerf_bundle: Path) -> None:
    from hilsim.analyzer import Profile

    profile = Profile.load(nerf_bundle, columns=methods.get("first-n").launch_columns)
    by_object = profile.plan(methods.create("first-n", n_launches=10))
    by_name = profile.plan("first-n", n_launches=10)
    assert by_object.to_json() == by_name.to_json()
    with pytest.raises(HilsimError, match="not both"):
        profile.plan(methods.create("first-n"), n_launches=10)
    with pytest.raises(HilsimError, match="either a plan or a method"):
        profile.evaluate(by_name, method="first-n")
    with pytest.raises(HilsimError, match="unknown method"):
        profile.plan("nope")


def test_compare_returns_the_document_the_command_writes(
    nerf_bundle: Path, tmp_path: Path, capsys
) -> None:
    from hilsim.analyzer import Profile

    comparison = Profile.load(nerf_bundle).compare(
        ["stem", "random", "first-n"], seeds=2, workers=1
    )
    document = comparison.to_dict()
    assert document["schema"] == "hilsim.compare/1"
    assert document["profile"] == str(nerf_bundle) and document["holdout_profile"] is None
    assert document["input"]["kind"] == "bundle" and document["input_warnings"]
    table = comparison.table()
    assert isinstance(table, pd.DataFrame) and len(table) == 3
    assert list(table["method"]) == [m["method"] for m in comparison.methods]
    assert comparison.title.startswith(document["workload"])
    assert comparison.title.endswith(": 1,106 launches")
    folder = comparison.write(tmp_path / "py")
    assert {p.name for p in folder.iterdir()} == {"compare.json", "compare.csv", "pareto.png"}
    # the table and compare.csv have the same columns (one constant, in report.py)
    header = (folder / "compare.csv").read_text().splitlines()[0]
    assert list(table.columns) == header.split(",")

    assert main(["compare", str(nerf_bundle), "--methods", "stem,random,first-n", "--seeds",
                 "2", "--workers", "1", "-o", str(tmp_path / "cli")]) == 0
    capsys.readouterr()
    cli = json.loads((tmp_path / "cli" / "compare.json").read_text())
    py = json.loads((tmp_path / "py" / "compare.json").read_text())
    assert _drop_timings(cli) == _drop_timings(py)


def test_compare_on_a_holdout_names_it_in_the_title(nerf_bundle: Path) -> None:
    from hilsim.analyzer import Profile

    profile = Profile.load(nerf_bundle)
    comparison = profile.compare("first-n", seeds=1, holdout=profile, workers=1)
    assert comparison.document["holdout"] is True
    assert comparison.document["holdout_input"]["sha256"] == comparison.document["input"][
        "sha256"]
    assert comparison.title.endswith(f", scored on {nerf_bundle.name}")


def test_recommend_keeps_the_paths_and_builds_the_winners_plan(nerf_bundle: Path) -> None:
    from hilsim.analyzer import Profile
    from hilsim.analyzer.recommend import winner_plan

    profile = Profile.load(nerf_bundle)
    found = profile.recommend(0.5, seeds=2, budget_s=0.0)  # only the first candidate runs
    document = found.to_dict()
    assert document["profile"] == str(nerf_bundle) and document["holdout"] is None
    assert document["candidates"][0]["status"] == "pass"
    assert found.winner is not None and document["winner"] == found.winner.to_dict()
    plan = winner_plan(profile.bundle, found.winner)
    assert plan.method == found.winner.method and "name" in plan.samples


def test_pkp_matches_the_command(tmp_path: Path, capsys) -> None:
    from hilsim.analyzer import Profile

    example = shipped_example()
    profile = Profile.load(example.reference)
    result = profile.pkp(example.plan("stem"), model=str(example.timing))
    assert result.document["timelines"].startswith("analytical model")
    assert main(["pkp", str(example.reference), "--plan", str(example.plan("stem")),
                 "--model", str(example.timing), "-o", str(tmp_path / "pkp.json")]) == 0
    printed = capsys.readouterr().out
    # the command prints the projection's own table
    assert "PKP on stem plan (analytical model" in printed
    assert f"{result.document['projected_total_cycles']:,.0f}" in printed
    assert f"{100 * result.document['simulated_fraction']:.1f}%" in printed
    write_result(tmp_path / "py.json", result.to_dict())
    assert (tmp_path / "pkp.json").read_bytes() == (tmp_path / "py.json").read_bytes()
    logged = profile.pkp(example.plan("stem"), gpgpusim_log=example.pkp_run, relative=True)
    assert logged.document["timelines"] == f"GPGPU-Sim visualizer samples {example.pkp_run}"
    with pytest.raises(HilsimError, match="exactly one of"):
        profile.pkp(example.plan("stem"))


def test_facade_imports_only_what_plan_and_import_use() -> None:
    """`hilsim plan` and `hilsim import` load the facade: the other analyses (evaluation,
    comparison, recommendation, validation, the simulator models, the streaming importer)
    are imported by the methods that use them, not with it."""
    import subprocess
    import sys

    code = (
        "import sys; import hilsim.analyzer.facade; "
        "loaded = [m for m in ('hilsim.analyzer.evaluate', 'hilsim.analyzer.compare', "
        "'hilsim.analyzer.recommend', 'hilsim.analyzer.validate', 'hilsim.analyzer.report', "
        "'hilsim.formats.streaming', 'hilsim.simmodel.model', "
        "'hilsim.simmodel.pkp', 'matplotlib') if m in sys.modules]; print('LOADED', loaded)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "LOADED []" in done.stdout
