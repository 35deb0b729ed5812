"""validate --sim-full: configuration vs sampling error on real GPGPU-Sim logs of
transformer_step (tests/data/gpgpusim/README.md); gzip and slim logs read as the plain log."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from hilsim.analyzer.validate.page import decomposition_html
from hilsim.simmodel.gpgpusim.logprofile import bundle_from_gpgpusim_log
from hilsim.simmodel.gpgpusim.simlog import parse_simlog, read_simlog, read_simlogs, slim_log

from hilsim.cli.main import cli, main
from hilsim.core.plan import load_plan

DATA = Path(__file__).parent / "data" / "gpgpusim"
FULL = DATA / "transformer_step1.SM7_QV100-4sm.log"
SAMPLED = DATA / "transformer_step1.stem-sampled.log"
PLAN = DATA / "transformer_step1.stem.json"
VECADD = DATA / "vecadd_chase.SM7_QV100-1sm.log.gz"


def _validate(tmp_path: Path, full: Path) -> tuple[object, dict]:
    bundle = tmp_path / "ref.bundle"
    runner = CliRunner()
    res = runner.invoke(cli, ["import", str(FULL), "-o", str(bundle)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(cli, ["validate", "--silicon", str(bundle), "--plan", str(PLAN),
                              "--sim", str(SAMPLED), "--sim-full", str(full),
                              "-o", str(tmp_path / "rep")])
    report = json.loads((tmp_path / "rep.json").read_text()) if res.exit_code == 0 else {}
    return res, report


@pytest.mark.slow  # two CLI runs with the report's plots (~8 s)
def test_reference_card_full_run_gives_zero_configuration_error(tmp_path: Path) -> None:
    res, report = _validate(tmp_path, FULL)
    assert res.exit_code == 0, res.output
    d = report["plans"][0]["decomposition"]
    t = d["totals"]
    assert t["configuration_error"] == 0.0
    # sampling error by hand from the logs: sum(weight x sampled cycles) vs full cycles
    plan = load_plan(PLAN)
    sampled = read_simlog(SAMPLED).set_index("launch_id")["cycles"]
    projection = float(np.dot(plan.samples["weight"],
                              sampled.loc[plan.samples["launch_id"]].to_numpy()))
    full = float(read_simlog(FULL)["cycles"].sum())
    assert t["projection"] == projection and t["full"] == full
    assert t["sampling_error"] == (projection - full) / full
    assert t["total_error"] == t["sampling_error"]
    # sampling = selection (the samples' full-run cycles) x state (the samples run alone)
    np.testing.assert_allclose(1 + t["sampling_error"],
                               (1 + t["selection_error"]) * (1 + t["state_error"]), rtol=1e-12)
    # per kernel: the silicon/full sums add up to the totals, 10 kernels
    kernels = d["per_kernel"]
    assert len(kernels) == 10
    assert sum(r["full"] for r in kernels) == full
    assert all(r["configuration_error"] == 0.0 for r in kernels)
    counters = {r["counter"]: r for r in d["per_counter"]}
    assert {"cycles", "instructions", "l2_accesses", "dram_read_sectors"} <= set(counters)
    # instructions against the bundle's smsp__thread_inst_executed.sum: the same run
    assert counters["instructions"]["configuration_error"] == 0.0
    assert "configuration" in (tmp_path / "rep.md").read_text()
    assert "configuration vs sampling error" in (tmp_path / "rep.html").read_text()
    assert "configuration +0.00%" in res.output
    # kernel names are C++ names: escaped in the HTML tables
    d["per_kernel"][0]["kernel"] = "void gemm<float, 4>(T*, int&)"
    page = decomposition_html("a<b>&c", d)
    assert "void gemm&lt;float, 4&gt;(T*, int&amp;)" in page and "a&lt;b&gt;&amp;c" in page
    assert "<float" not in page and "<b>" not in page


@pytest.mark.slow  # two CLI runs with the report's plots (~5 s)
def test_another_full_run_is_configuration_error_and_the_errors_compose(tmp_path: Path) -> None:
    # a "tuned card" whose full run took 10% more cycles per kernel: configuration +10%
    text = FULL.read_text()
    cycles = iter(int(v) for v in re.findall(r"^gpu_sim_cycle = (\d+)", text, re.M))
    slower = re.sub(r"^gpu_sim_cycle = \d+", lambda m: f"gpu_sim_cycle = {next(cycles) * 11}",
                    text, flags=re.M)
    slower = re.sub(r"^gpu_tot_sim_cycle = .*\n", "", slower, flags=re.M)
    tuned = tmp_path / "tuned.log"
    tuned.write_text(slower)
    res, report = _validate(tmp_path, tuned)
    assert res.exit_code == 0, res.output
    t = report["plans"][0]["decomposition"]["totals"]
    np.testing.assert_allclose(t["configuration_error"], 10.0)
    np.testing.assert_allclose(1 + t["total_error"],
                               (1 + t["configuration_error"]) * (1 + t["sampling_error"]))
    # the banner's words are checked against the full run: the sampled projection (the
    # reference log) is far from this full run, so the interval does not "cover" it
    h = report["plans"][0]["headline"]
    assert h["interval_covers_full"] is False
    assert "misses the full run too" in h["interval_note"]
    assert "which the interval covers" not in h["interval_note"]


def test_sim_full_must_cover_every_launch(tmp_path: Path, capsys) -> None:
    bundle = tmp_path / "ref.bundle"
    assert main(["import", str(FULL), "-o", str(bundle)]) == 0
    code = main(["validate", "--silicon", str(bundle), "--plan", str(PLAN), "--sim",
                 str(SAMPLED), "--sim-full", str(SAMPLED), "-o", str(tmp_path / "rep")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip() == ("hilsim: error: validate --sim-full: the logs hold 14 kernels for "
                           "29 launches: give the log of a full run (every launch)")
    assert not (tmp_path / "rep.json").exists()


def test_gzip_log_reads_as_the_plain_one(tmp_path: Path, capsys) -> None:
    gz = tmp_path / "sim.log.gz"
    gz.write_bytes(gzip.compress(FULL.read_bytes()))
    pd.testing.assert_frame_equal(read_simlog(gz), read_simlog(FULL))
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "a.log.gz").write_bytes(gz.read_bytes())
    assert len(read_simlogs([folder])) == 29
    a = bundle_from_gpgpusim_log(gz)
    b = bundle_from_gpgpusim_log(FULL)
    pd.testing.assert_frame_equal(a.launches, b.launches)
    assert main(["import", str(gz), "-o", str(tmp_path / "gz.bundle")]) == 0
    bad = tmp_path / "bad.log.gz"
    bad.write_bytes(gz.read_bytes()[:200])
    assert main(["import", str(bad), "-o", str(tmp_path / "x.bundle")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"hilsim: error: {bad}") and len(err.strip().splitlines()) == 1


def test_slim_log_parses_like_the_whole_log() -> None:
    text = gzip.decompress(VECADD.read_bytes()).decode()
    slim = slim_log(text)
    assert len(slim) < len(text) / 5
    pd.testing.assert_frame_equal(parse_simlog(slim), parse_simlog(text))
    from hilsim.simmodel.gpgpusim.logprofile import parse_gpgpusim_log

    a, b = parse_gpgpusim_log(text, "a"), parse_gpgpusim_log(slim, "b")
    pd.testing.assert_frame_equal(a.launches, b.launches)
    pd.testing.assert_frame_equal(a.metrics, b.metrics)
    assert a.facts == b.facts


def test_the_command_prints_what_validate_run_returns(tmp_path: Path, monkeypatch) -> None:
    """``hilsim validate`` is one library call: the lines it prints are the run's
    ``lines()``: the markdown written, each plan's headline then its decomposition, the
    report written."""
    from hilsim.analyzer.validate import validate_run

    from hilsim.cli import validate as command

    runs = []

    def recorded(*args, **kwargs):
        runs.append(validate_run(*args, **kwargs))
        return runs[-1]

    monkeypatch.setattr(command, "validate_run", recorded)
    res, report = _validate(tmp_path, FULL)
    assert res.exit_code == 0, res.output
    lines = runs[0].lines()
    assert res.output == "\n".join(lines) + "\n"
    assert lines[0] == f"wrote {tmp_path / 'rep.md'}"
    assert lines[1].startswith("transformer_step1.stem: total error ")
    assert lines[2].startswith("transformer_step1.stem: configuration +0.00%, sampling ")
    assert lines[3] == f"wrote {tmp_path / 'rep.html'} and {tmp_path / 'rep.json'}"
    assert len(lines) == 4 and runs[0].report == report
