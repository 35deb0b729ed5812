"""Analytical timing model: hand-computed occupancy, waves, binding limits, properties."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest
from hilsim.simmodel import model
from hilsim.simmodel.config import Source, Sourced
from hilsim.simmodel.presets import load_preset

from hilsim.core.errors import HilsimError

QV100 = load_preset("QV100").timing
CLOCK = 1132.0  # QV100 preset core clock, MHz
DRAM_BPC = 870.4e9 / (CLOCK * 1e6)  # bytes per core cycle
LAUNCH = 5000.0 + model.FIT["kernel_overhead"]  # launch latency + kernel overhead


def launch(**kw: float) -> pd.DataFrame:
    row = {"grid_x": 640, "grid_y": 1, "grid_z": 1, "block_x": 256, "block_y": 1,
           "block_z": 1, "regs": 32, "smem_static": 0, "smem_dynamic": 0}
    row.update(kw)
    return pd.DataFrame([row])


def test_occupancy_limited_by_registers() -> None:
    # 64 regs x 32 threads = 2048 regs/warp (a multiple of 256); 65536/4 = 16384 per
    # sub-partition -> 8 warps each -> 32 warps/SM -> 4 CTAs of 8 warps
    out = model.predict(QV100, launch(regs=64))
    assert out["ctas_per_sm"].iat[0] == 4
    assert out["occupancy_limit"].iat[0] == "registers"
    assert out["occupancy"].iat[0] == pytest.approx(32 / 64)


def test_register_granularity_rounds_up() -> None:
    # 33 regs x 32 = 1056 -> 1280 (256 units): 16384 // 1280 = 12 warps per sub-partition
    # -> 48 warps -> 6 CTAs of 8 warps
    assert model.predict(QV100, launch(regs=33))["ctas_per_sm"].iat[0] == 6


def test_occupancy_limited_by_shared_memory() -> None:
    # 20000 B -> 20224 B (256 B units); 98304 // 20224 = 4 CTAs
    out = model.predict(QV100, launch(block_x=128, smem_static=12000, smem_dynamic=8000))
    assert out["ctas_per_sm"].iat[0] == 4
    assert out["occupancy_limit"].iat[0] == "shared"
    assert out["occupancy"].iat[0] == pytest.approx(16 / 64)


def test_occupancy_limited_by_warps() -> None:
    out = model.predict(QV100, launch(block_x=1024, regs=16))
    assert out["ctas_per_sm"].iat[0] == 2
    assert out["occupancy_limit"].iat[0] == "warps"
    assert out["occupancy"].iat[0] == 1.0


def test_occupancy_limited_by_cta_slots() -> None:
    out = model.predict(QV100, launch(block_x=32, regs=16))
    assert out["ctas_per_sm"].iat[0] == 32
    assert out["occupancy_limit"].iat[0] == "ctas"


def test_cta_that_cannot_fit_is_an_error() -> None:
    with pytest.raises(HilsimError, match="1 launch.*cannot fit"):
        model.predict(QV100, launch(block_x=1024, regs=255))


def test_waves() -> None:
    # 4 CTAs/SM x 80 SMs = 320 per wave; 1000 CTAs -> 4 waves
    out = model.predict(QV100, launch(grid_x=1000, regs=64))
    assert out["waves"].iat[0] == 4
    out = model.predict(QV100, launch(grid_x=10, grid_y=32, regs=64))
    assert out["waves"].iat[0] == 1 and out["ctas"].iat[0] == 320


def test_dram_bound_launch() -> None:
    out = model.predict(QV100, launch(**{model.DRAM_RD: 6e8, model.DRAM_WR: 4e8}))
    assert out["binding"].iat[0] == "dram"
    expected = 1e9 / DRAM_BPC + LAUNCH
    assert abs(out["cycles"].iat[0] - expected) <= 1e-9 * expected


def test_compute_bound_launch() -> None:
    # 1e8 warp instructions over 640 CTAs; busiest SM runs 8 CTAs = 1/80 of the work,
    # 4 schedulers issue one warp instruction per cycle each, the fitted fraction attained;
    # the FP32 counter is given (zero), so no FP32 share is assumed
    out = model.predict(QV100, launch(**{model.INST: 1e8, model.DRAM_RD: 1e6,
                                         model.FP32_OPS[0]: 0.0}))
    assert out["binding"].iat[0] == "issue"
    expected = 1e8 / 80 / (4 * model.FIT["issue_efficiency"]) + LAUNCH
    assert abs(out["cycles"].iat[0] - expected) <= 1e-9 * expected


def test_fp32_pipe_bound_launch() -> None:
    # 64 FP32 lanes/SM (128 flop/clk/SM, FMA = 2 flop): 6.4e9 thread FFMAs / 80 SMs / 64
    out = model.predict(QV100, launch(**{model.INST: 1e6, model.FP32_OPS[0]: 6.4e9}))
    assert out["binding"].iat[0] == "fp32"
    assert out["fp32_cycles"].iat[0] == pytest.approx(6.4e9 / 80 / 64, rel=1e-12)


def test_latency_bound_launch() -> None:
    # one wave of 640 CTAs x 8 warps; 4 dependent L1-hit loads per warp, 28 cycles each,
    # plus the warp's own issue chain (Hong & Kim: Mem_cycles + Comp_cycles of one warp),
    # plus the 15 other warps of its scheduler (8 CTAs x 8 warps / 4), each delaying it by
    # its compute period between two loads (Comp / #Mem_insts) once per load
    warps = 640 * 8
    out = model.predict(QV100, launch(**{model.GLD_INST: 4 * warps, model.L1_LD: 4 * warps}))
    assert out["binding"].iat[0] == "latency"
    d = model.FIT["dep_issue_cycles"]
    assert out["latency_cycles"].iat[0] == pytest.approx(4 * 28 + 4 * d + 4 * d / 4 * 15)


def test_long_latency_instructions_in_the_warp_chain() -> None:
    # the launch above plus 10 integer rem and 5 SFU instructions per warp: each waits
    # for its own latency (145 / 100 cycles on QV100, -ptx_opcode_latency_int DIV /
    # -ptx_opcode_latency_sfu) instead of the issue delay d; the other 15 warps of the
    # scheduler issue their 16 x 4 instructions during those waits (the scheduler's
    # issue regime caps the Hong & Kim N-warp term), so they add nothing
    warps = 640 * 8
    base = {model.GLD_INST: 4 * warps, model.L1_LD: 4 * warps}
    ll = {**base, model.INT_DIV_INST: 10 * warps, model.SFU_INST: 5 * warps}
    out = model.predict(QV100, launch(**ll))
    d = model.FIT["dep_issue_cycles"]
    assert out["binding"].iat[0] == "latency"
    # (each replaces one issue delay d: with smsp__inst_executed given they are among it)
    assert out["latency_cycles"].iat[0] == pytest.approx(
        4 * 28 + 4 * d + 10 * (145 - d) + 5 * (100 - d))
    # the SFU pipe: 16 lanes/SM, 32 / 16 cycles per warp instruction, 8 CTAs per SM
    assert out["sfu_cycles"].iat[0] == pytest.approx(15 * 8 * 8 * 32 / 16)
    # a card with short DIV / SFU latencies (RTX 3070: 21 / 21) charges less
    rtx = load_preset("RTX3070").timing
    assert model.predict(rtx, launch(**ll))["latency_cycles"].iat[0] < out[
        "latency_cycles"].iat[0]


def test_missing_block_is_an_error() -> None:
    with pytest.raises(HilsimError, match="block_x"):
        model.predict(QV100, pd.DataFrame({"grid_x": [1]}))


def random_counters(n: int, seed: int) -> pd.DataFrame:
    """Seeded launches with every counter the model reads (valid launch configurations)."""
    rng = np.random.default_rng(seed)
    ctas = rng.integers(1, 20000, n)
    block = rng.choice([32, 64, 128, 256, 512, 1024], n)
    inst = ctas * block / 32 * rng.lognormal(5, 1, n)
    l1 = inst * rng.uniform(0, 0.5, n)
    l2 = l1 * rng.uniform(0, 1, n)
    return pd.DataFrame({
        "grid_x": ctas, "grid_y": 1, "grid_z": 1, "block_x": block, "block_y": 1,
        "block_z": 1, "regs": np.minimum(rng.choice([16, 32, 64, 128], n), 65536 // block),
        "smem_static": rng.choice([0, 1024, 16384], n), "smem_dynamic": 0,
        model.INST: inst, model.FP32_OPS[0]: inst * 32 * rng.uniform(0, 0.5, n),
        model.GLD_INST: l1 / 4, model.L1_LD: l1, model.L1_ST: l1 * 0.2,
        model.SHLD_INST: inst * rng.uniform(0, 0.1, n), model.L2_RD: l2,
        model.L2_WR: l1 * 0.2, model.DRAM_RD: l2 * 32 * rng.uniform(0, 1, n),
        model.DRAM_WR: l1 * 6.4,
    })


def test_more_sms_never_slower() -> None:
    counters = random_counters(20000, 1)
    prev = None
    for sms in (20, 40, 80, 160, 320):
        cfg = QV100.set("core.sm_count", Sourced(sms, "SMs", Source("derived", "test")))
        cycles = model.predict(cfg, counters)["cycles"].to_numpy()
        if prev is not None:
            assert (cycles <= prev * (1 + 1e-12)).all()
        prev = cycles


def test_more_dram_bandwidth_never_slower_for_dram_bound() -> None:
    counters = random_counters(20000, 2)
    base = model.predict(QV100, counters)
    faster = QV100.set("dram.bandwidth_gbs", Sourced(1740.8, "GB/s", Source("derived", "t")))
    new = model.predict(faster, counters)
    assert (new["cycles"].to_numpy() <= base["cycles"].to_numpy() * (1 + 1e-12)).all()
    dram = (base["binding"] == "dram").to_numpy()
    assert dram.any()
    assert (new["cycles"].to_numpy()[dram] < base["cycles"].to_numpy()[dram]).all()


def test_larger_l2_reduces_dram_traffic_with_reference() -> None:
    counters = launch(**{model.L1_LD: 1e7, model.L2_RD: 1e7, model.DRAM_RD: 1e8})
    big = QV100.set("l2.capacity_bytes", Sourced(4 * 6291456, "bytes", Source("derived", "t")))
    same = model.predict(big, counters)  # no reference: capacities do not matter
    scaled = model.predict(big, counters, reference=QV100)
    assert same["dram_cycles"].iat[0] == model.predict(QV100, counters)["dram_cycles"].iat[0]
    # 1e8 B of misses: the first 6 MB (one fill of the smaller L2) are compulsory, the
    # rest halve on a 4x L2 (square-root rule)
    cold = 6291456
    expected = (cold + (1e8 - cold) / 2) / 1e8
    assert scaled["dram_cycles"].iat[0] == pytest.approx(same["dram_cycles"].iat[0] * expected)
    # misses that fit in the L2 are all compulsory: a larger L2 does not remove them
    fits = launch(**{model.L1_LD: 1e5, model.L2_RD: 1e5, model.DRAM_RD: 2e6})
    assert model.predict(big, fits, reference=QV100)["dram_cycles"].iat[0] == pytest.approx(
        model.predict(QV100, fits)["dram_cycles"].iat[0])


@pytest.mark.slow
def test_million_launches_vectorised() -> None:
    counters = random_counters(1_000_000, 3)
    t0 = time.perf_counter()
    out = model.predict(QV100, counters)
    elapsed = time.perf_counter() - t0
    assert len(out) == 1_000_000 and np.isfinite(out["cycles"]).all()
    assert elapsed < 10.0, f"1M launches took {elapsed:.2f} s"


def test_ipc_timeline_builds_pkp_inputs() -> None:
    from hilsim.simmodel.pkp import IpcTimeline

    counters = launch(grid_x=1000, regs=64, **{model.INST: 1e7, model.DRAM_RD: 1e8})
    tl = model.ipc_timeline(QV100, counters.iloc[0], windows=3)
    assert isinstance(tl, IpcTimeline)
    pred = model.predict(QV100, counters)
    assert tl.total_cycles == pytest.approx(pred["cycles"].iat[0])
    assert tl.total_ctas == 1000 and tl.ctas_per_wave == 320
    assert tl.complete and tl.cycles.size == 1 + 4 * 3
    assert tl.instructions.sum() == pytest.approx(1e7)
    assert list(tl.ctas_finished[3::3]) == [320, 320, 320, 40]
    many = model.ipc_timeline(QV100, pd.concat([counters, counters]), include_launch=False)
    assert len(many) == 2 and many[0].cycles.size == 16


def test_require_counters_refuses_a_profile_without_counters():
    from hilsim.simmodel.model import require_counters

    from hilsim.core.errors import HilsimError

    frame = pd.DataFrame({"grid_x": [1], "block_x": [32], "duration_ns": [10]})
    with pytest.raises(HilsimError, match="none of the model's counter columns"):
        require_counters(frame, "b")
    require_counters(frame.assign(**{"smsp__inst_executed.sum": [1.0]}), "b")


def _varied_launches(n: int = 400, seed: int = 5) -> pd.DataFrame:
    """Launches spread over every binding component and occupancy limit."""
    rng = np.random.default_rng(seed)
    block = rng.choice([32, 128, 256, 1024], n)
    return pd.DataFrame({
        "grid_x": rng.integers(1, 5000, n), "grid_y": 1, "grid_z": 1, "block_x": block,
        "block_y": 1, "block_z": 1,
        "regs": np.minimum(rng.choice([16, 32, 64, 128, 255], n), 65536 // block),
        "smem_static": rng.choice([0, 1024, 32768, 49152], n), "smem_dynamic": 0,
        model.INST: rng.lognormal(12, 3, n), model.FP32_OPS[0]: rng.lognormal(16, 3, n),
        model.FP64_OPS[0]: rng.lognormal(10, 4, n), model.L1_LD: rng.lognormal(10, 3, n),
        model.L2_RD: rng.lognormal(9, 3, n), model.DRAM_RD: rng.lognormal(14, 3, n),
        model.SHLD_INST: rng.lognormal(8, 3, n),
    }, index=pd.RangeIndex(100, 100 + n))


def test_categorical_columns_match_string_built_ones() -> None:
    """binding / occupancy_limit from codes equal the categoricals built from strings."""
    counters = _varied_launches()
    out = model.predict(QV100, counters)
    stack = np.vstack([out[f"{c}_cycles"].to_numpy() for c in model.COMPONENTS])
    binding = pd.Categorical(
        np.array(model.COMPONENTS)[np.argmax(stack, axis=0)], categories=model.COMPONENTS
    )
    pd.testing.assert_series_equal(
        out["binding"], pd.Series(binding, index=counters.index, name="binding")
    )
    assert out["binding"].nunique() >= 3
    p = model.model_params(QV100)
    threads = counters["block_x"].to_numpy(dtype=float)
    smem = counters["smem_static"].to_numpy(dtype=float)
    lim = model.occupancy_limits(p, threads, counters["regs"].to_numpy(dtype=float), smem)
    names = np.array(["warps", "ctas", "registers", "shared"])
    limit = pd.Categorical(
        names[np.argmin(np.vstack([lim[k] for k in names]), axis=0)], categories=list(names)
    )
    pd.testing.assert_series_equal(
        out["occupancy_limit"], pd.Series(limit, index=counters.index, name="occupancy_limit")
    )
    assert out["occupancy_limit"].nunique() >= 3
    empty = model.predict(QV100, counters.iloc[:0])
    assert len(empty) == 0
    assert list(empty["binding"].cat.categories) == list(model.COMPONENTS)
    assert list(empty["occupancy_limit"].cat.categories) == list(names)


def test_predict_cycles_is_predicts_cycles_and_binding() -> None:
    counters = _varied_launches()
    full = model.predict(QV100, counters, reference=QV100)
    cycles, binding = model.predict_cycles(QV100, counters, reference=QV100)
    np.testing.assert_array_equal(cycles, full["cycles"].to_numpy())
    pd.testing.assert_series_equal(
        pd.Series(binding, index=counters.index, name="binding"), full["binding"]
    )
