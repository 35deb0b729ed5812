"""Names from the user's files reach matplotlib titles and legends as text: a ``$...$`` in a
workload, bundle or plan name is drawn as written, never parsed as mathtext (which made
``compare`` and ``sweep`` exit 1 after writing their results, and ``validate`` with two or
more plans fail before its report). The sweep's case is in test_reliability_sweep.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hilsim.analyzer.compare import pareto_plot

from tests import reliability_inputs as inputs
from tests.fuzz.promise import run_cli

EXAMPLE = inputs.SIMULATED_V100
NAMES = ["w$\\frac{$", "a$x^{$b", "$\\undefined$", "$$", "p$_$q"]


@pytest.mark.parametrize("name", NAMES)
def test_pareto_plot_draws_names_as_text(name: str, tmp_path: Path) -> None:
    summaries = [{"method": f"{name} {i}", "hmean_speedup": 3.0 + i, "mean_error": 0.01 * i}
                 for i in range(3)]
    path = pareto_plot(summaries, tmp_path / "p.png", f"{name}: 1,044 launches")
    assert path.stat().st_size > 0


def test_compare_with_a_mathtext_workload_name(tmp_path: Path) -> None:
    source = tmp_path / "w$\\frac{$.csv"
    shutil.copyfile(inputs.NSYS_CSV, source)
    bundle = tmp_path / "b"
    assert run_cli(["import", str(source), "-o", str(bundle)], 0)[0] == 0
    out = tmp_path / "cmp"
    code, lines, _ = run_cli(["compare", str(bundle), "--methods", "random,first-n", "--seeds",
                              "2", "--workers", "1", "-o", str(out)], 0)
    assert code == 0, lines
    assert (out / "pareto.png").stat().st_size > 0


@pytest.mark.slow
def test_validate_with_two_plans_named_as_mathtext(tmp_path: Path) -> None:
    plans = []
    for name, source in (("a$\\frac{$", "stem.json"), ("b$x^{$", "pka.json")):
        plans += ["--plan", str(shutil.copyfile(EXAMPLE / "plans" / source,
                                                tmp_path / f"{name}.json"))]
    code, lines, _ = inputs.cli(["validate", "--silicon", EXAMPLE / "reference.bundle", *plans,
                                 "--model", EXAMPLE / "tuned-timing.json", "-o",
                                 tmp_path / "rep"])
    assert code == 0, lines
    assert (tmp_path / "rep.html").stat().st_size > 0
