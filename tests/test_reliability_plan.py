"""A plan's values and structure are checked once, in the plan loader, so
``evaluate``, ``validate`` and ``export`` refuse a tampered plan in one line (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hilsim.cli.main import main
from tests import reliability_inputs as inputs


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> tuple[Path, dict]:
    """A real bundle (the nsys SQLite fixture) and a STEM plan made on it by the CLI."""
    folder = tmp_path_factory.mktemp("plan")
    bundle = folder / "bundle"
    assert main(["import", str(inputs.SQLITE), "-o", str(bundle)]) == 0
    plan = folder / "plan.json"
    assert main(["plan", str(bundle), "-m", "stem", "-o", str(plan)]) == 0
    return bundle, json.loads(plan.read_text())


@pytest.fixture(scope="module")
def timing(tmp_path_factory) -> Path:
    from hilsim.simmodel.presets import load_preset

    path = tmp_path_factory.mktemp("timing") / "timing.json"
    path.write_text(load_preset("QV100").timing.dumps())
    return path


def _tampered(data: dict, where: str, value) -> dict:
    data = json.loads(json.dumps(data))
    if where.startswith("samples."):
        _, index, key = where.split(".")
        data["samples"][int(index)][key] = value
    elif where == "samples.dup":
        data["samples"][1]["launch_id"] = data["samples"][0]["launch_id"]
    else:
        data[where] = value
    return data


CASES = [
    ("samples.0.weight", -1.0, "weight must be a finite non-negative"),
    ("samples.0.weight", float("nan"), "not valid JSON"),
    ("samples.0.weight", float("inf"), "not valid JSON"),
    ("samples.0.weight", None, "weight must be a finite non-negative"),
    ("samples.0.launch_id", -1, "launch_id must be a non-negative integer"),
    ("samples.0.launch_id", True, "launch_id must be a non-negative integer"),
    ("samples.0.launch_id", 1.5, "launch_id must be a non-negative integer"),
    ("samples.0.launch_id", 10**30, "beyond the source's 1106 launches"),
    ("samples.0.draws", 0, "draws must be an integer >= 1"),
    ("samples.0.draws", -3, "draws must be an integer >= 1"),
    ("samples.1.launch_id", "dup", "sampled twice"),
    ("samples", [], "no samples"),
    ("source", [], "'source' must be a JSON object"),
    ("clusters", "x", "'clusters' must be a JSON array"),
    ("notes", 5, "'notes' must be a JSON array"),
    ("params", [1], "'params' must be a JSON object"),
]


def _write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))  # NaN / Infinity written as JSON's extensions
    return path


@pytest.mark.parametrize("where,value,words", CASES)
def test_tampered_plan_refused_by_evaluate_validate_export(
    capsys, tmp_path, made, timing, where, value, words
):
    bundle, data = made
    if value == "dup":
        data = json.loads(json.dumps(data))
        data["samples"][1]["launch_id"] = data["samples"][0]["launch_id"]
    else:
        data = _tampered(data, where, value)
    plan = _write(tmp_path, data)
    commands = [
        ["evaluate", str(bundle), "--plan", str(plan), "-o", str(tmp_path / "r.json")],
        ["validate", "--silicon", str(bundle), "--plan", str(plan), "--model", str(timing),
         "-o", str(tmp_path / "v")],
        ["export", str(plan), "-o", str(tmp_path / "list.g")],
    ]
    for argv in commands:
        code = main(argv)
        err = capsys.readouterr().err.splitlines()
        assert code == 2, (argv[0], err)
        assert len(err) == 1 and words in err[0] and str(plan) in err[0], (argv[0], err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json"]  # nothing written


def test_untampered_plan_still_evaluates_and_exports(capsys, tmp_path, made):
    bundle, data = made
    plan = _write(tmp_path, data)
    assert main(["evaluate", str(bundle), "--plan", str(plan)]) == 0
    assert "%" in capsys.readouterr().out
    assert main(["export", str(plan), "-o", str(tmp_path / "list.g")]) == 0


def test_deeply_nested_plan_one_line(capsys, tmp_path, made):
    bundle, _ = made
    plan = tmp_path / "deep.json"
    plan.write_text("[" * 100_000 + "]" * 100_000)
    assert main(["evaluate", str(bundle), "--plan", str(plan)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "nested too deeply" in err[0]
