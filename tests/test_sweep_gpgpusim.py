"""``hilsim sweep`` with ``simulate = true``: the sampled launches of every task simulated
on the simulated card.

The gpgpusim-tier test compiles the shipped ``transformer_step.cu`` and sweeps the
profile of its one-step run on the reduced SM7_QV100 (``tests/data/gpgpusim``, 29
launches) with first-n and random plans of 3 launches: each task's plan runs on the
simulated card on a Dask worker, through ``hilsim simulate``'s code. A workload whose
program fails gives failed rows with the one-line error while the sweep goes on; a
rerun skips every task. The spec checks and task keys run without a simulator.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hilsim.analyzer.sweep import (
    RESULTS,
    SIM_SUMMARY,
    build_tasks,
    load_spec,
    read_results,
)

from hilsim.cli.main import main
from tests.simbuild import require_sim_build

DATA = Path(__file__).parent / "data" / "gpgpusim"
FULL = DATA / "transformer_step1.SM7_QV100-4sm.log"
CLOCK_MHZ = 1132.0  # SM7_QV100's core clock (the log's -gpgpu_clock_domains)

SIM_SPEC = """
seeds = [0]
simulate = true

[[workloads]]
name = "ts1"
path = "{full}"
program = ["{program}", "--steps", "1"]
card = "SM7_QV100"
sim_options = {{ gpgpu_n_clusters = 4, gpgpu_kernel_launch_latency = 0, gpgpu_perf_sim_memcpy = 0 }}
sim_timeout = 300

[[workloads]]
name = "broken"
path = "{full}"
program = ["/bin/false"]
card = "SM7_QV100"

[[methods]]
name = "first-n"
params = {{ n_launches = 3 }}

[[methods]]
name = "random"
params = {{ fraction = 0.05 }}
"""


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> Path:
    from hilsim.simmodel.gpgpusim.workloads import build_transformer_step

    require_sim_build()
    return build_transformer_step(tmp_path_factory.mktemp("bin") / "transformer_step")


@pytest.mark.gpgpusim
def test_sweep_simulates_each_plan_on_the_card(program: Path, tmp_path: Path, capsys) -> None:
    from hilsim.simmodel.gpgpusim.simlog import parse_simlog, read_simlogs

    from hilsim.core.plan import load_plan
    from hilsim.formats.read import load_profile

    spec = tmp_path / "sim.toml"
    spec.write_text(SIM_SPEC.format(full=FULL.as_posix(), program=program.as_posix()))
    out = tmp_path / "out"
    assert main(["sweep", str(spec), "-o", str(out), "--workers", "1"]) == 0
    said = capsys.readouterr().out
    results = read_results(out).set_index(["workload", "method"])
    assert len(results) == 4

    # the failing program: rows with the one-line error, the plan's own score kept
    for method in ("first-n", "random"):
        row = results.loc[("broken", method)]
        assert row["status"] == "failed"
        assert row["message"].startswith("simulate on SM7_QV100: false on SM7_QV100: exit 1")
        assert "\n" not in row["message"] and row["error"] == row["error"]  # not NaN

    profile = load_profile(FULL)
    total_ns = float(profile.launches["duration_ns"].sum())
    full_ids, full_list = _ids_cycles(parse_simlog(FULL.read_text(), str(FULL)))
    full_cycles = dict(zip(full_ids, full_list, strict=True))
    for method in ("first-n", "random"):
        row = results.loc[("ts1", method)]
        assert row["status"] == "ok", row["message"]
        sim_dir = Path(row["sim_dir"])
        plan = load_plan(sim_dir / "plan.json")
        ids = np.unique(plan.samples["launch_id"].to_numpy())
        # warmed (the default, auto): the warm run holds the plan's launches, each once
        ids_log, cycles = _ids_cycles(read_simlogs([sim_dir / "sampled.log"]))
        assert sorted(ids_log) == ids.tolist()
        summary_json = json.loads((sim_dir / "simulate.json").read_text())
        assert row["sim_launches"] == summary_json["launches_simulated"] >= len(ids) >= 3
        by_id = dict(zip(ids_log, cycles, strict=True))
        assert row["sim_cycles"] == sum(by_id.values()) > 0
        # the estimate from the placed cycles of samples.csv (the state term applied)
        placed = pd.read_csv(sim_dir / "samples.csv").set_index("launch_id")["cycles"]
        weights = plan.samples["weight"].to_numpy(float)
        estimate = float(sum(w * placed[int(i)] for w, i in
                             zip(weights, plan.samples["launch_id"], strict=True)))
        assert row["sim_estimate_cycles"] == pytest.approx(estimate, rel=1e-12)
        # the full run: the profile's total at the card's clock
        assert row["sim_full_cycles"] == pytest.approx(total_ns * CLOCK_MHZ / 1000, rel=1e-12)
        assert row["sim_error"] == pytest.approx(
            abs(estimate - row["sim_full_cycles"]) / row["sim_full_cycles"], rel=1e-9)
        # every simulated cycle counts: the cold run's too
        assert row["sim_speedup"] == pytest.approx(
            row["sim_full_cycles"] / summary_json["simulated_cycles"])
        assert row["sim_wall_seconds"] > 0 and row["sim_cpu_seconds"] > 0
    # first-n samples launches 0-2, the start of the full run: their cold run repeats the
    # full run's state (an empty L2, the same prefix), the profile's DRAM reads place them
    # at its cold end, so the placed cycles are the full run's exactly
    first_dir = Path(results.loc[("ts1", "first-n"), "sim_dir"])
    placed = pd.read_csv(first_dir / "samples.csv").set_index("launch_id")["cycles"]
    assert [placed[i] for i in (0, 1, 2)] == [full_cycles[i] for i in (0, 1, 2)]

    summary = pd.read_csv(out / SIM_SUMMARY).set_index(["workload", "label"])
    assert summary.loc[("ts1", "first-n"), "failed"] == 0
    assert summary.loc[("broken", "random"), "failed"] == 1
    assert "simulated ts1 / SM7_QV100 / first-n" in said

    # a rerun runs nothing: every task (failed ones too) is in the table
    before = pd.read_parquet(out / RESULTS)
    assert main(["sweep", str(spec), "-o", str(out), "--workers", "1"]) == 0
    assert "0 task(s) run (0 failed), 4 already done" in capsys.readouterr().out
    pd.testing.assert_frame_equal(pd.read_parquet(out / RESULTS), before)


def _ids_cycles(stats: pd.DataFrame) -> tuple[list[int], list[float]]:
    return stats["launch_id"].astype(int).tolist(), stats["cycles"].astype(float).tolist()


# ------------------------------------------------------------- spec and keys (no simulator)


def _write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(body)
    return path


BASE = '[[workloads]]\nexample = "casio-durations"\n{extra}\n[[methods]]\nname = "stem"\n'


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ('program = ["./nope"]\ncard = "X"', "workloads[0].program[0]:"),
        ('program = "ls"\ncard = "X"', "workloads[0].program: expected a list of strings"),
        ('program = ["ls"]\ncard = "X"\nsim_options = { "bad name" = 1 }',
         "workloads[0].sim_options: option 'bad name': not a GPGPU-Sim option name"),
        ('program = ["ls"]\ncard = "X"\nsim_timeout = 0', "workloads[0].sim_timeout:"),
        ('program = ["ls"]\ncard = "cfg/missing.config"', "workloads[0].card:"),
    ],
)
def test_bad_simulation_keys_are_one_line(tmp_path, capsys, extra, message) -> None:
    spec = _write(tmp_path, "simulate = true\n" + BASE.format(extra=extra))
    assert main(["sweep", str(spec), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and str(spec) in err


def test_simulating_tasks_and_keys(tmp_path) -> None:
    (tmp_path / "bin").mkdir()
    binary = tmp_path / "bin" / "prog"
    binary.write_bytes(b"\x7fELF not really")
    extra = 'program = ["bin/prog", "--steps", "1"]\nsim_options = {{ gpgpu_n_clusters = {n} }}'
    plain = load_spec(_write(tmp_path, "seeds = 2\n" + BASE.format(extra="")))
    two_cards = load_spec(_write(
        tmp_path, 'seeds = 2\nsimulate = true\ncards = ["SM7_QV100", "SM75_RTX2060"]\n'
        + BASE.format(extra=extra.format(n=4))))
    # the program path is resolved against the spec's folder, options normalised
    workload = two_cards.workloads[0]
    assert workload.program == (str(binary.resolve()), "--steps", "1")
    assert workload.sim_options == {"-gpgpu_n_clusters": "4"}
    # keys of a sweep that does not simulate: the inputs, the workload and its method table
    for task in build_tasks(plain):
        payload = json.dumps([task.workload_digest, None, "stem", task.params, task.seed, None,
                              {"workload": task.workload, "entry": 0}], sort_keys=True)
        assert task.key == hashlib.sha256(payload.encode()).hexdigest()
        assert task.card is None and task.program is None
    # every seed on every card of the top-level list; a workload's own card wins
    tasks = build_tasks(two_cards)
    assert [(t.seed, t.card) for t in tasks] == [
        (0, "SM7_QV100"), (0, "SM75_RTX2060"), (1, "SM7_QV100"), (1, "SM75_RTX2060")]
    assert all(t.program == workload.program for t in tasks)
    own = load_spec(_write(
        tmp_path, 'seeds = 1\nsimulate = true\ncards = ["SM7_QV100"]\n'
        + BASE.format(extra=extra.format(n=4) + '\ncard = "SM86_RTX3070"')))
    assert [t.card for t in build_tasks(own)] == ["SM86_RTX3070"]
    # the overrides and the program's bytes are part of the key
    keys = {t.key for t in tasks}
    other = load_spec(_write(
        tmp_path, 'seeds = 2\nsimulate = true\ncards = ["SM7_QV100", "SM75_RTX2060"]\n'
        + BASE.format(extra=extra.format(n=2))))
    assert not keys & {t.key for t in build_tasks(other)}
    binary.write_bytes(b"\x7fELF rebuilt")
    assert not keys & {t.key for t in build_tasks(two_cards)}
