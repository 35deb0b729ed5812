"""hilsim.analyzer.validate: error decomposition, escaping, self-containment, JSON consistency."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from hilsim.analyzer.evaluate import score_plan
from hilsim.analyzer.validate import (
    SimResults,
    results_from_simlog,
    validate,
    validate_plan,
    write_report,
)
from hilsim.analyzer.validate.text import count, fraction, number, signed
from hilsim.simmodel.correlation import correlation

from hilsim.cli.validate import validate_cmd
from hilsim.core.bundle import Bundle, write_bundle
from hilsim.core.errors import HilsimError
from hilsim.core.formatting import percent
from hilsim.core.jsonfile import json_safe, write_json
from hilsim.core.plan import Plan, samples_frame
from hilsim.core.schema import normalize_launches

EVIL = "void f<A&B, C<D>>(int) \"'<script>"


def _bundle() -> Bundle:
    frame = pd.DataFrame(
        {"name": [EVIL, "k2", EVIL, "k2"], "duration_ns": [1000, 2000, 1000, 4000]}
    )
    b = Bundle(normalize_launches(frame, "hand"))
    b.manifest = {"device": {"name": "GPU <x> & y", "max_sm_clock_mhz": 1000.0}}
    return b


def _plan(bundle: Bundle) -> Plan:
    # cluster 0 = launches {0, 2} (sample 0, weight 2); cluster 1 = {1, 3} (sample 3, weight 2)
    samples = samples_frame(np.array([0, 3]), np.array([2.0, 2.0]), np.array([0, 1]))
    plan = Plan(
        "hand",
        {"seed": 0},
        {"n_launches": 4, "sequence_digest": bundle.sequence_digest()},
        [{"cluster": 0, "size": 2, "label": "a<b>"}, {"cluster": 1, "size": 2}],
        samples,
    )
    return plan.attach_names(bundle.launches["name"])


def test_decomposition_hand_case():
    bundle = _bundle()
    plan = _plan(bundle)
    # silicon cycles at 1000 MHz = durations: 1000, 2000, 1000, 4000 -> S = 8000
    sim = SimResults(np.array([1100.0, 2200.0, 1100.0, 4400.0]))  # F = 8800
    h = validate_plan(plan, bundle, sim, 1000.0)["headline"]
    assert h["silicon_total_cycles"] == 8000
    assert h["full_simulation_total_cycles"] == pytest.approx(8800)
    p = 2 * 1100 + 2 * 4400  # = 11000
    assert h["sampled_projection_cycles"] == pytest.approx(p)
    # signed, named as in the decomposition (configuration, sampling, total)
    assert h["configuration_error"] == pytest.approx(0.1)
    assert h["sampling_error"] == pytest.approx((p - 8800) / 8800)
    assert h["total_error"] == pytest.approx((p - 8000) / 8000)
    score = score_plan(plan, bundle)
    assert abs(h["silicon_sampling_error"]) == pytest.approx(score.error)
    assert h["speedup"] == pytest.approx(score.speedup)


def test_sampled_only_gives_total_error_only():
    bundle = _bundle()
    sim = SimResults(np.array([1100.0, np.nan, np.nan, 4400.0]))
    h = validate_plan(_plan(bundle), bundle, sim, 1000.0)["headline"]
    assert h["full_simulation_total_cycles"] is None
    assert h["configuration_error"] is None and h["sampling_error"] is None
    assert h["total_error"] == pytest.approx(3000 / 8000)
    with pytest.raises(HilsimError, match="sampled launch 3"):
        validate_plan(_plan(bundle), bundle, SimResults(np.array([1.0, 1, 1, np.nan])), 1000.0)


def test_correlation_definitions():
    c = correlation(np.array([110.0, 180.0]), np.array([100.0, 200.0]), "MAE")
    assert c["error"] == pytest.approx(0.1)
    n = correlation(np.array([1.0, 3.0]), np.array([2.0, 2.0]), "NRMSE")
    assert n["error"] == pytest.approx(0.5) and n["pearson_r"] is None


@pytest.mark.slow
def test_report_is_escaped_self_contained_and_matches_json(tmp_path):
    bundle = _bundle()
    plan = _plan(bundle)
    sim = SimResults(np.array([1100.0, 2200.0, 1100.0, 4400.0]), source="model <m>")
    report, images = validate(bundle, [("p<1>", plan), ("p2", plan)], lambda p: sim, 1000.0)
    html_path, json_path = write_report(report, images, tmp_path / "r")
    text = html_path.read_text()
    assert "&lt;script&gt;" in text and "<script" not in text
    assert "A&amp;B" in text and "GPU &lt;x&gt; &amp; y" in text
    assert "p&lt;1&gt;" in text
    assert not re.search(r"(src|href)=['\"]?https?:", text)
    assert "http://" not in text and "https://" not in text
    assert text.count("data:image/png;base64,") >= 3  # scatter, histograms, pareto
    data = json.loads(json_path.read_text())
    h = data["plans"][0]["headline"]
    assert h["total_error"] == pytest.approx(report["plans"][0]["headline"]["total_error"])
    assert f"{100 * h['total_error']:+.2f}%" in text
    assert data["plans"][0]["silicon_score"]["error"] == pytest.approx(
        score_plan(plan, bundle).error
    )


@pytest.mark.slow
def test_cli_sim_and_model_paths(tmp_path, monkeypatch):
    bundle = _bundle()
    # the model refuses a bundle with no counters at all; give it instruction counts
    bundle.metrics = pd.DataFrame(
        {
            "launch_id": np.arange(bundle.n_launches),
            "smsp__inst_executed.sum": np.full(bundle.n_launches, 1e4),
        }
    )
    write_bundle(bundle, tmp_path / "b")
    plan = _plan(bundle)
    plan.save(tmp_path / "plan.json")
    logs = tmp_path / "logs"
    logs.mkdir()
    blocks, total = [], 0
    for i, (name, cyc) in enumerate([("_Z1fv", 1100), ("k2", 4400)], start=1):
        total += cyc  # the running total grows by each kernel's cycles, as in a real log
        blocks.append(
            f"kernel_name = {name}\nkernel_launch_uid = {i}\ngpu_sim_cycle = {cyc}\n"
            f"gpu_sim_insn = 10\ngpu_tot_sim_cycle = {total}\ngpgpu_simulation_time = 1\n"
        )
    from hilsim.core.schema import kernel_base_name

    (logs / "run.log").write_text("".join(blocks).replace("_Z1fv", kernel_base_name(EVIL)))
    out = tmp_path / "rep"
    result = CliRunner().invoke(
        validate_cmd,
        [
            "--silicon",
            str(tmp_path / "b"),
            "--plan",
            str(tmp_path / "plan.json"),
            "--sim",
            str(logs),
            "-o",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    h = json.loads((tmp_path / "rep.json").read_text())["plans"][0]["headline"]
    assert h["sampled_projection_cycles"] == pytest.approx(11000)
    # --model with a stand-in predictor injected for hilsim.simmodel.model.predict
    import hilsim.simmodel.model as model

    monkeypatch.setattr(
        model,
        "predict",
        lambda cfg, frame: pd.DataFrame({"cycles": frame["duration_ns"].to_numpy() * 1.1}),
    )
    from hilsim.simmodel.presets import load_preset

    (tmp_path / "t.json").write_text(load_preset("QV100").timing.dumps())
    result = CliRunner().invoke(
        validate_cmd,
        [
            "--silicon",
            str(tmp_path / "b"),
            "--plan",
            str(tmp_path / "plan.json"),
            "--model",
            str(tmp_path / "t.json"),
            "-o",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    h = json.loads((tmp_path / "rep.json").read_text())["plans"][0]["headline"]
    assert h["configuration_error"] == pytest.approx(0.1)
    bad = CliRunner().invoke(
        validate_cmd,
        ["--silicon", str(tmp_path / "b"), "--plan", str(tmp_path / "plan.json"), "-o", str(out)],
    )
    assert bad.exit_code != 0


@pytest.mark.slow
def test_long_kernel_names_are_shortened_escaped_and_kept_as_tooltip(tmp_path):
    long_evil = "void k<'x'>(" + "Eigen::TensorMap<A&B>, " * 10 + ") <script>alert(1)</script>"
    frame = pd.DataFrame({"name": [long_evil, "k2"], "duration_ns": [1000, 2000]})
    bundle = Bundle(normalize_launches(frame, "hand"))
    bundle.manifest = {"device": {"name": "gpu", "max_sm_clock_mhz": 1000.0}}
    samples = samples_frame(np.array([0, 1]), np.array([1.0, 1.0]), np.array([0, 1]))
    plan = Plan("hand", {}, {"n_launches": 2, "sequence_digest": bundle.sequence_digest()},
                [{"cluster": 0, "size": 1, "label": long_evil}, {"cluster": 1, "size": 1}],
                samples).attach_names(bundle.launches["name"])
    report, images = validate(bundle, [("p", plan)], lambda p: SimResults(np.ones(2)), 1000.0)
    text = write_report(report, images, tmp_path / "r")[0].read_text()
    assert "<script" not in text and "'x'" not in text
    assert "title='void k&lt;&#x27;x&#x27;&gt;(Eigen::TensorMap&lt;A&amp;B&gt;" in text
    assert "&lt;/script&gt;'>" in text  # the tooltip holds the whole name
    assert "...</span>" in text


def test_full_simulation_logs_are_name_checked():
    bundle = _bundle()
    names = [EVIL, "k2", EVIL, "k2"]
    log = pd.DataFrame({"sim_launch": range(4), "kernel": names, "cycles": [1.0, 2, 3, 4]})
    sim = results_from_simlog(_plan(bundle), bundle, log)
    assert sim.covers_all and sim.cycles.tolist() == [1.0, 2, 3, 4]
    swapped = log.assign(kernel=["k2", EVIL, EVIL, "k2"])
    with pytest.raises(HilsimError, match="simulated kernel 1 is 'k2' but launch 0"):
        results_from_simlog(_plan(bundle), bundle, swapped)


def test_numbers_as_text():
    assert number(12345.678) == "12,346" and number(0.123456) == "0.1235" and number(7) == "7"
    assert number(None) == number(float("nan")) == "n/a"
    assert fraction(0.12345) == "12.35%" and fraction(float("inf")) == "n/a"
    assert signed(0.015) == "+1.50%" and signed(-0.0025) == "-0.25%" and signed(None) == "n/a"
    assert count(1234567.8) == "1,234,568" and count(None) == "n/a"
    assert percent(0.01234, ".3g") == "1.23%" and percent(None) == "n/a"


def test_report_json_is_plain_json(tmp_path):
    from dataclasses import dataclass

    @dataclass
    class Point:
        x: np.int64
        y: float

    value = {1: np.float64(0.5), "nan": float("nan"), "a": np.arange(2),
             "p": Point(np.int64(3), 1.0), "t": (np.float32(np.inf),)}
    assert json_safe(value) == {"1": 0.5, "nan": None, "a": [0, 1], "p": {"x": 3, "y": 1.0},
                                "t": [None]}
    path = write_json(tmp_path / "r.json", value)
    assert path.read_text() == json.dumps(json_safe(value), indent=1) + "\n"


def test_importing_the_report_leaves_matplotlib_unloaded():
    """The figures import matplotlib when they are drawn, not with the package."""
    import subprocess
    import sys

    code = ("import sys; import hilsim.analyzer.validate, hilsim.analyzer.validate.decompose; "
            "print('LOADED', [m for m in ('matplotlib',) if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "LOADED []" in done.stdout


def test_interval_words_follow_the_numbers():
    """The banner names the larger error from the numbers beside it (it said "the
    simulator's error, not sampling, dominates" next to "simulator 0.00%, sampling 9.32%")."""
    from hilsim.analyzer.validate.numbers import interval_note

    base = {"interval_covers_silicon": False}
    sampling_larger = interval_note({**base, "configuration_error": 0.0,
                                     "sampling_error": 0.0932})
    assert "sampling error (+9.32%) is larger than the configuration error (+0.00%)" \
        in sampling_larger
    config_larger = interval_note({**base, "configuration_error": -0.05,
                                   "sampling_error": 0.01})
    assert config_larger.startswith("the simulator's configuration error (-5.00%) is larger")
    # "which the interval covers" only when the interval holds the full run
    both_miss = interval_note({**base, "configuration_error": -0.05, "sampling_error": 0.01,
                               "interval_covers_full": False,
                               "samples_colder_than_profile": 3})
    assert "which the interval covers" not in both_miss
    assert "misses the full run too (3 samples the warm-up left colder" in both_miss
    unknown = interval_note({**base, "configuration_error": None, "sampling_error": None})
    assert "unknown without a full simulation" in unknown
    assert interval_note({"interval_covers_silicon": True, "configuration_error": 0.3,
                          "sampling_error": 0.0}) == ""


def test_state_variance_widens_the_interval():
    bundle = _bundle()
    plan = _plan(bundle)
    plan.sampling = "random"  # one draw per cluster: the profiled CoV gives its variance
    plan.clusters = [{**c, "mean_ns": 1000.0, "std_ns": 100.0} for c in plan.clusters]
    cycles = np.array([1100.0, 2200.0, 1100.0, 4400.0])
    plain = validate_plan(plan, bundle, SimResults(cycles), 1000.0)["headline"]
    widened = validate_plan(plan, bundle, SimResults(cycles, state_variance=400.0**2),
                            1000.0)["headline"]
    lo, hi = plain["interval_cycles"]
    wlo, whi = widened["interval_cycles"]
    half, whalf = (hi - lo) / 2, (whi - wlo) / 2
    assert whalf == pytest.approx(np.hypot(half, 1.959963984540054 * 400.0))
    assert widened["state_sd_cycles"] == pytest.approx(400.0)

