"""DSE: variation parsing, full vs sampled speedups, and the ``dse`` command."""

from __future__ import annotations

import json
from pathlib import Path

import click
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from hilsim.simmodel import model
from hilsim.simmodel.dse import counters_from_bundle, dse, vary
from hilsim.simmodel.presets import load_preset

from hilsim.cli.dse import dse_cmd
from hilsim.core.bundle import Bundle, write_bundle
from hilsim.core.errors import HilsimError
from hilsim.core.plan import Plan, samples_frame
from hilsim.core.schema import normalize_launches

QV100 = load_preset("QV100").timing


def test_vary_scale_and_set() -> None:
    assert vary(QV100, "l2_size=x2").get("l2.capacity_bytes").value == 2 * 6291456
    half = vary(QV100, "sm_count=x0.5")
    assert half.get("core.sm_count").value == 40
    assert half.get("core.sm_count").source.kind == "derived"
    assert vary(QV100, "dram_bandwidth=1000").get("dram.bandwidth_gbs").value == 1000.0
    # unset in the preset: scaled from the model's derived value (64 banks x 32 B)
    assert vary(QV100, "l2_bandwidth=x2").get("l2.bandwidth").value == 4096.0
    vary(QV100, "l1_size=X0.5").validate()



def test_clock_variations_carry_what_runs_on_each_clock() -> None:
    p = model.model_params(QV100)
    dram = vary(QV100, "dram_clock=x2")
    assert dram.get("dram.clock_mhz").value == 1700.0
    assert dram.get("dram.bandwidth_gbs").value == pytest.approx(2 * 870.4)
    assert model.model_params(dram).dram_latency.value == p.dram_latency.value
    # the DRAM part of the latency (DRAM - L2) is time off the SM clock: x1.2 cycles
    fast = model.model_params(vary(QV100, "sm_clock=x1.2"))
    assert fast.dram_latency.value == pytest.approx(
        p.l2_latency.value + 1.2 * (p.dram_latency.value - p.l2_latency.value))
    assert fast.l2_latency.value == p.l2_latency.value


@pytest.mark.parametrize("spec", ["l2_size", "l2_size=", "nope=x2", "sm_count=xabc",
                                  "sm_count=-1"])
def test_vary_errors(spec: str) -> None:
    with pytest.raises(HilsimError, match="--vary"):
        vary(QV100, spec)


def workload(n_per: int = 50) -> pd.DataFrame:
    """Two kernels: a DRAM-bound stream and an issue-bound compute kernel, 2 sizes each."""
    rows = []
    for i in range(n_per):
        big = 1 + (i % 2)
        rows.append({"name": "stream", "grid_x": 640 * big, "block_x": 256, "regs": 32,
                     model.DRAM_RD: 2e8 * big, model.L2_RD: 2e8 / 32 * big,
                     model.L1_LD: 2e8 / 32 * big, model.INST: 1e6 * big})
        rows.append({"name": "compute", "grid_x": 160 * big, "block_x": 128, "regs": 64,
                     model.INST: 5e7 * big, model.FP32_OPS[0]: 1e9 * big})
    return pd.DataFrame(rows).fillna(0.0)


def plan_for(n: int, ids: list[int], weights: list[float]) -> Plan:
    return Plan(method="test", params={}, source={"n_launches": n}, clusters=[],
                samples=samples_frame(np.array(ids), np.array(weights), np.zeros(len(ids))))


def test_full_plan_has_zero_error() -> None:
    counters = workload()
    n = len(counters)
    result = dse(QV100, counters, plan_for(n, list(range(n)), [1.0] * n),
                 ["sm_count=x0.5", "dram_bandwidth=x2"])
    assert [r.variation for r in result.rows] == ["baseline", "sm_count=x0.5",
                                                  "dram_bandwidth=x2"]
    for r in result.rows:
        assert r.estimate_error == pytest.approx(0, abs=1e-12)
        assert r.speedup_error == pytest.approx(0, abs=1e-12)
    assert result.rows[0].true_speedup == 1.0
    assert result.rows[1].true_speedup < 1.0 < result.rows[2].true_speedup


def test_sampled_estimate_vs_truth() -> None:
    counters = workload()
    n = len(counters)
    # one small launch of each kernel stands for all of its launches: biased low
    plan = plan_for(n, [0, 1], [n / 2, n / 2])
    result = dse(QV100, counters, plan, ["dram_bandwidth=x2", "l2_size=x2"])
    base, faster, l2 = result.rows
    assert base.sampled_cycles < base.full_cycles and base.estimate_error > 0
    assert faster.true_speedup > 1 and faster.sampled_speedup > 1
    assert faster.speedup_error == pytest.approx(
        abs(faster.sampled_speedup - faster.true_speedup) / faster.true_speedup)
    assert l2.true_speedup > 1  # square-root rule: fewer DRAM reads on a larger L2
    json.dumps(result.to_dict())


def test_rows_are_what_the_full_model_table_gives() -> None:
    """dse reads only cycles and binding: the same totals and binding counts (and
    their order) as from predict's full table."""
    counters = workload()
    n = len(counters)
    plan = plan_for(n, [0, 1, 5], [40.0, 50.0, 10.0])
    variations = ["sm_count=x0.5", "dram_bandwidth=x0.25"]
    result = dse(QV100, counters, plan, variations)
    configs = [QV100] + [vary(QV100, v) for v in variations]
    for row, cfg in zip(result.rows, configs, strict=True):
        pred = model.predict(cfg, counters, reference=QV100)
        cycles = pred["cycles"].to_numpy()
        assert row.full_cycles == float(cycles.sum())
        assert row.sampled_cycles == float(np.dot([40.0, 50.0, 10.0], cycles[[0, 1, 5]]))
        expected = {str(k): int(v) for k, v in pred["binding"].value_counts().items() if v}
        assert list(row.binding.items()) == list(expected.items())
    # issue at the attained rate; stream launches by DRAM
    assert set(result.rows[0].binding) == {"dram", "issue"}


def test_speedup_is_old_time_over_new_time() -> None:
    """Hand example: a compute-bound launch (issue-bound, no memory) takes the same
    cycles at 1.2x the clock, so it runs 1.2x faster; cycles alone would say 1.0."""
    counters = pd.DataFrame([{"grid_x": 320, "block_x": 256, "regs": 32,
                              model.INST: 4e8}])
    plan = plan_for(1, [0], [1.0])
    base, fast = dse(QV100, counters, plan, ["sm_clock=x1.2"]).rows
    assert fast.clock_mhz == pytest.approx(1.2 * base.clock_mhz)
    assert fast.full_cycles == pytest.approx(base.full_cycles)  # same cycles ...
    by_hand = (base.full_cycles / base.clock_mhz) / (fast.full_cycles / fast.clock_mhz)
    assert fast.true_speedup == pytest.approx(by_hand)
    assert fast.true_speedup == pytest.approx(1.2)  # ... in 1/1.2 of the time
    assert fast.sampled_speedup == pytest.approx(1.2)
    # a DRAM-bound launch: bandwidth is GB/s, so more cycles at the higher clock, same time
    stream = pd.DataFrame([{"grid_x": 6400, "block_x": 256, "regs": 32,
                            model.DRAM_RD: 4e9, model.INST: 1e6}])
    base, fast = dse(QV100, stream, plan, ["sm_clock=x1.2"]).rows
    assert fast.full_cycles > 1.19 * base.full_cycles
    assert fast.true_speedup == pytest.approx(1.0, abs=0.01)


def test_dse_rejects_out_of_range_plan() -> None:
    with pytest.raises(HilsimError, match="samples launch 99"):
        dse(QV100, workload(5), plan_for(10, [99], [1.0]), [])


def write_workload_bundle(tmp: Path, drop_metrics: int = 0) -> tuple[Path, Path]:
    frame = workload(10)
    frame["duration_ns"] = 1000
    launches = normalize_launches(frame[["name", "duration_ns", "grid_x", "block_x",
                                         "regs"]].assign(grid_y=1, grid_z=1, block_y=1,
                                                         block_z=1, smem_static=0,
                                                         smem_dynamic=0), "test")
    metric_cols = [c for c in frame.columns if "__" in c]
    metrics = frame[metric_cols].assign(launch_id=np.arange(len(frame)))
    metrics = metrics.iloc[drop_metrics:].reset_index(drop=True)
    bundle = Bundle(launches, metrics[["launch_id", *metric_cols]])
    path = write_bundle(bundle, tmp / "b")
    plan = plan_for(len(frame), [0, 1], [10.0, 10.0])
    plan_path = plan.save(tmp / "plan.json")
    return path, plan_path


def test_counters_from_bundle_names_missing_metrics(tmp_path: Path) -> None:
    from hilsim.core.bundle import read_bundle

    path, _ = write_workload_bundle(tmp_path, drop_metrics=3)
    with pytest.raises(HilsimError, match="3 of 20 launches have no metrics"):
        counters_from_bundle(read_bundle(path))


def test_dse_command(tmp_path: Path) -> None:
    path, plan_path = write_workload_bundle(tmp_path)
    group = click.Group()
    group.add_command(dse_cmd)
    out = tmp_path / "dse.json"
    result = CliRunner().invoke(group, ["dse", str(path), "--plan", str(plan_path),
                                        "--config", "QV100", "--vary", "l2_size=x2",
                                        "--vary", "sm_count=x0.5", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "sm_count=x0.5" in result.output and "true speedup" in result.output
    data = json.loads(out.read_text())
    assert data["schema"] == "hilsim.dse/1" and len(data["rows"]) == 3


def test_dse_command_bad_config(tmp_path: Path) -> None:
    path, plan_path = write_workload_bundle(tmp_path)
    result = CliRunner().invoke(dse_cmd, [str(path), "--plan", str(plan_path),
                                          "--config", "NOPE"])
    assert result.exit_code != 0
    assert isinstance(result.exception, HilsimError)
    assert "not a preset" in str(result.exception)
