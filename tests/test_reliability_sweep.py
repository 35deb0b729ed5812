"""Sweeps: tasks of different workloads (or method tables) never collapse into one row,
specs that would fail after every task ran (or build a billion seeds) are refused at the
spec check, an earlier results table of the wrong types or a damaged digest cache is one
line or recomputed, summary.csv cannot run formulas, names reach plots as text, and a
successful sweep prints no warning lines."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from hilsim.analyzer.sweep import (
    RESULT_COLUMNS,
    RESULTS,
    csv_safe,
    read_results,
    write_results,
)

from tests import reliability_inputs as inputs
from tests.fuzz.promise import run_cli

BUNDLE = inputs.SIMULATED_V100 / "reference.bundle"


def _sweep(spec: Path, out: Path, *extra: str) -> tuple[int, list[str], str]:
    return inputs.cli(["sweep", spec, "-o", out, "--workers", "1", *extra])


def _spec(folder: Path, text: str) -> Path:
    path = folder / "spec.toml"
    path.write_text(text)
    return path


@pytest.mark.slow
def test_identical_profiles_and_method_tables_stay_apart(tmp_path: Path) -> None:
    """Two workloads with the same profile bytes and two identical [[methods]] tables: once
    all rows landed under the first workload, twice, and the second had no methods."""
    for name in ("a", "b"):
        shutil.copytree(BUNDLE, tmp_path / f"{name}.bundle")
    spec = _spec(tmp_path, (
        'seeds = 2\n[[workloads]]\nname = "first"\npath = "a.bundle"\n'
        '[[workloads]]\nname = "+SUM(1,1)"\npath = "b.bundle"\n'
        '[[workloads]]\nname = "w$\\\\frac{$"\npath = "a.bundle"\n'
        '[[methods]]\nname = "random"\nparams = { fraction = 0.05 }\n'
        '[[methods]]\nname = "random"\nparams = { fraction = 0.05 }\n'))
    out = tmp_path / "out"
    out.mkdir()
    (out / ".digests.json").write_text("[1, 2]")  # a damaged cache: recomputed
    code, lines, text = _sweep(spec, out)
    assert code == 0 and lines == [], lines
    rows = read_results(out)
    assert len(rows) == 3 * 2 * 2 and rows["task_key"].is_unique
    assert sorted(rows.groupby("workload").size().tolist()) == [4, 4, 4]
    assert set(rows["label"]) == {"random", "random #1"}
    for workload in ("first", "+SUM(1,1)", "w$\\frac{$"):
        compare = json.loads((out / workload / "compare.json").read_text())
        assert len(compare["methods"]) == 2, workload
        assert (out / workload / "pareto.png").stat().st_size > 0
    summary = pd.read_csv(out / "summary.csv")
    assert "'+SUM(1,1)" in set(summary["workload"])
    assert not summary["workload"].astype(str).str.match(r"[=+\-@]").any()
    assert isinstance(json.loads((out / ".digests.json").read_text()), dict)


@pytest.mark.parametrize("seeds, what", [
    ("1000000000", "max_seeds"), ("[9223372036854775808]", "in [0, 2**32)"),
    ("[18446744073709551616]", "in [0, 2**32)"), ("[4294967296]", "in [0, 2**32)"),
    ("0", "expected a count >= 1"),
])
def test_seeds_that_no_sweep_can_run(seeds: str, what: str, tmp_path: Path) -> None:
    spec = _spec(tmp_path, f'seeds = {seeds}\n[[workloads]]\npath = "{BUNDLE}"\n'
                           '[[methods]]\nname = "random"\n')
    code, lines, grown = run_cli(["sweep", str(spec), "-o", str(tmp_path / "o")], 0)
    assert code == 2 and what in lines[0], lines
    assert grown is None or grown < 200 << 20
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("name", ["results.parquet", "summary.csv", "sim_summary.csv", "sim",
                                  "x" * 300, "a\nb", ".hidden", "a/b"])
def test_workload_names_that_would_fail_after_the_run(name: str, tmp_path: Path) -> None:
    spec = _spec(tmp_path, f'[[workloads]]\nname = {json.dumps(name)}\npath = "{BUNDLE}"\n'
                           '[[methods]]\nname = "random"\n')
    code, lines, _ = run_cli(["sweep", str(spec), "-o", str(tmp_path / "o")], 0)
    assert code == 2 and "is not a usable folder name" in lines[0], lines
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("address", ["tcp://", "inproc://x", "ucx://host:1", "tls://host",
                                     "tcp://[::1:8786", "tcp://host:99999", "host:8786"])
def test_scheduler_addresses_are_checked_first(address: str, tmp_path: Path) -> None:
    spec = _spec(tmp_path, f'[[workloads]]\npath = "{BUNDLE}"\n[[methods]]\nname = "random"\n')
    code, lines, _ = run_cli(["sweep", str(spec), "-o", str(tmp_path / "o"), "--scheduler",
                              address], 0)
    assert code == 2 and "--scheduler" in lines[0], lines


def test_tls_without_configuration_is_one_line(tmp_path: Path) -> None:
    spec = _spec(tmp_path, f'[[workloads]]\npath = "{BUNDLE}"\n[[methods]]\nname = "random"\n')
    code, lines, _ = run_cli(["sweep", str(spec), "-o", str(tmp_path / "o"), "--scheduler",
                              "tls://127.0.0.1:1"], 0)
    assert code == 2 and "cannot reach the Dask scheduler" in lines[0], lines


@pytest.mark.parametrize("column, value", [("seed", "abc"), ("error", "x"),
                                           ("task_key", 5), ("n_samples", 1.5)])
def test_a_resumed_table_of_wrong_types_is_one_line(column: str, value, tmp_path: Path):
    out = tmp_path / "o"
    out.mkdir()
    row = {"task_key": "k", "workload": "w", "method": "random", "label": "random",
           "params": "{}", "seed": 0, "status": "ok", "error": 0.1, "n_samples": 3}
    row[column] = value
    frame = pd.DataFrame([{c: row.get(c) for c in RESULT_COLUMNS}])
    frame.to_parquet(out / RESULTS)
    spec = _spec(tmp_path, f'[[workloads]]\npath = "{BUNDLE}"\n[[methods]]\nname = "random"\n')
    code, lines, _ = run_cli(["sweep", str(spec), "-o", str(out)], 0)
    assert code == 2 and f"column {column}" in lines[0], lines


def test_results_written_by_this_version_read_back(tmp_path: Path) -> None:
    from hilsim.analyzer.sweep import results_frame

    frame = results_frame([{"task_key": "k", "workload": "w", "seed": 3, "status": "ok",
                            "error": 0.5, "n_samples": 2}])
    write_results(tmp_path, frame)
    back = read_results(tmp_path)
    assert back["seed"].iloc[0] == 3 and back["error"].iloc[0] == 0.5


def test_csv_safe_neutralises_formula_cells() -> None:
    frame = pd.DataFrame({"workload": ["=1+1", "+SUM(1,1)", "-2", "@x", "\tA", "ok"],
                          "error": [-0.5, 1, 2, 3, 4, 5]})
    safe = csv_safe(frame)
    assert safe["workload"].tolist() == ["'=1+1", "'+SUM(1,1)", "'-2", "'@x", "'\tA", "ok"]
    assert safe["error"].tolist() == frame["error"].tolist()
