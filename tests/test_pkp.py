"""Tests of Principal Kernel Projection (simmodel/pkp.py, PKA section 3.2).

The synthetic launches retire their CTAs in waves: a wave of W CTAs, each CTA
executing I instructions; in the stable phase the GPU runs at IPC 8, so a wave
takes W * I / 8 = 6000 cycles, longer than PKP's 3000-cycle window. A warm-up at
lower IPC precedes it, so the true total is known exactly and a perfectly stable
tail must be projected exactly.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hilsim.simmodel.pkp import (
    IpcTimeline,
    project_launch,
    project_plan,
    read_cta_trace,
    rolling_ipc,
    timeline_from_ctas,
)

from hilsim.core.errors import HilsimError
from hilsim.core.plan import Plan, samples_frame

BIN = 100  # cycles per window
WAVE = 8  # CTAs per wave
CTA_INST = 6000.0  # instructions per CTA: a stable wave lasts 6000 cycles


def waves_timeline(
    n_waves: int,
    warmup_ipc: tuple[float, ...] = (2.0, 4.0, 6.0, 4.0),
    stable_ipc: float = 8.0,
    noise: float = 0.0,
    seed: int = 0,
    total_instructions: bool = False,
) -> tuple[IpcTimeline, float]:
    """Warm-up windows, then IPC ``stable_ipc``; CTAs finish when their wave's work is done.

    Returns the timeline and its true total cycles.
    """
    rng = np.random.default_rng(seed)
    total_inst = n_waves * WAVE * CTA_INST
    ipc: list[float] = list(warmup_ipc)
    done_inst = sum(warmup_ipc) * BIN
    while done_inst < total_inst - 1e-9:
        value = stable_ipc * (1.0 + noise * rng.standard_normal()) if noise else stable_ipc
        value = min(value, (total_inst - done_inst) / BIN)
        ipc.append(value)
        done_inst += value * BIN
    inst = np.array(ipc) * BIN
    cumulative = np.cumsum(inst)
    wave_work = WAVE * CTA_INST
    waves_done = np.floor(cumulative / wave_work + 1e-9).astype(np.int64)
    finished = np.diff(np.concatenate(([0], waves_done))) * WAVE
    timeline = IpcTimeline(
        cycles=np.full(inst.size, float(BIN)),
        instructions=inst,
        ctas_finished=finished,
        total_ctas=n_waves * WAVE,
        ctas_per_wave=WAVE,
        total_instructions=total_inst if total_instructions else None,
    )
    return timeline, float(inst.size * BIN)


def test_stops_after_first_full_wave_and_projects_exactly() -> None:
    timeline, truth = waves_timeline(8)
    assert timeline.complete and timeline.total_cycles == truth == 48_200.0
    result = project_launch(timeline)  # paper defaults: 3000 cycles, s = 0.25
    done = np.cumsum(timeline.ctas_finished)
    mean, std, full = rolling_ipc(timeline)
    # the warm-up (400 cycles) leaves the trailing window at window 33 (cycles 400..3400),
    # during the first wave; PKP then runs until that wave's 8 CTAs have finished
    onset = int(np.flatnonzero(full & (std < 0.25))[0])
    assert onset == 33 and done[onset] == 0
    assert result.stable
    assert result.stop_window == 61 and result.stop_cycle == 6200.0
    assert done[result.stop_window] == WAVE and done[result.stop_window - 1] == 0
    assert result.stable_ipc == pytest.approx(8.0)
    assert result.projected_cycles == pytest.approx(truth, rel=1e-12)
    assert result.true_cycles == truth
    assert result.error == pytest.approx(0.0, abs=1e-12)
    assert result.simulated_fraction == pytest.approx(6200.0 / truth)


def test_known_total_instructions_gives_the_same_exact_projection() -> None:
    timeline, truth = waves_timeline(8, total_instructions=True)
    result = project_launch(timeline)
    assert result.stop_cycle == 6200.0
    assert result.projected_cycles == pytest.approx(truth, rel=1e-12)


def test_waits_for_the_wave_in_which_stability_occurs() -> None:
    # a long unstable warm-up (IPC 4, 8, 4, ...): stability is first seen during the
    # second wave, so PKP runs until 16 CTAs have finished
    warm = (4.0, 8.0) * 30
    timeline, truth = waves_timeline(8, warmup_ipc=warm)
    result = project_launch(timeline)
    done = np.cumsum(timeline.ctas_finished)
    mean, std, full = rolling_ipc(timeline)
    onset = int(np.flatnonzero(full & (std < 0.25))[0])
    assert done[onset] == WAVE
    assert result.stop_window == 134
    assert done[result.stop_window] == 2 * WAVE and done[result.stop_window - 1] == WAVE
    assert result.projected_cycles == pytest.approx(truth, rel=1e-12)


def test_unstable_timeline_is_simulated_fully() -> None:
    timeline, truth = waves_timeline(8, noise=0.3, seed=1)
    result = project_launch(timeline)
    assert not result.stable
    assert result.stop_cycle == result.projected_cycles == truth
    assert result.simulated_fraction == 1.0
    assert result.reason == "IPC never stable"
    # the same timeline passes a looser relative bound (std / mean < 0.5)
    loose = project_launch(timeline, s=0.5, relative=True)
    assert loose.stable and loose.stop_cycle < truth


def test_grid_smaller_than_a_wave_is_simulated_fully() -> None:
    # 6 CTAs, a wave holds 8: all CTAs run at once and finish together at the end
    n = 60
    timeline = IpcTimeline(
        cycles=np.full(n, 100.0),
        instructions=np.full(n, 600.0),
        ctas_finished=np.r_[np.zeros(n - 1, dtype=np.int64), 6],
        total_ctas=6,
        ctas_per_wave=WAVE,
    )
    result = project_launch(timeline)
    assert not result.stable
    assert result.stop_cycle == result.projected_cycles == 6000.0
    assert result.simulated_fraction == 1.0
    assert "one wave" in result.reason


def test_grid_smaller_than_a_wave_stops_at_stability_when_work_is_known() -> None:
    n = 60
    timeline = IpcTimeline(
        cycles=np.full(n, 100.0),
        instructions=np.full(n, 600.0),
        ctas_finished=np.r_[np.zeros(n - 1, dtype=np.int64), 6],
        total_ctas=6,
        ctas_per_wave=WAVE,
        total_instructions=600.0 * n,
    )
    result = project_launch(timeline)
    assert result.stable and result.stop_window == 29  # first full 3000-cycle window
    assert result.projected_cycles == pytest.approx(6000.0)
    assert result.simulated_fraction == pytest.approx(0.5)


def test_rolling_window_counts_cycles_not_windows() -> None:
    cycles = np.r_[np.full(10, 100.0), np.full(10, 300.0)]
    timeline = IpcTimeline(cycles, cycles * 2.0, np.zeros(20, dtype=np.int64), 4, 4)
    mean, std, full = rolling_ipc(timeline, window_cycles=1000)
    assert not full[:9].any() and full[9]
    assert np.allclose(mean, 2.0) and np.allclose(std, 0.0, atol=1e-9)
    # the last windows are 300 cycles long: only 3 start inside 1000 cycles
    assert full[-1]


def test_truncated_unstable_timeline_is_an_error() -> None:
    timeline = IpcTimeline(
        np.full(10, 100.0), np.arange(10) * 100.0, np.zeros(10, dtype=np.int64), 8, 8
    )
    with pytest.raises(HilsimError, match="cannot be projected"):
        project_launch(timeline)


def test_timeline_validation() -> None:
    with pytest.raises(HilsimError, match="equal length"):
        IpcTimeline(np.ones(3), np.ones(2), np.zeros(3), 1, 1)
    with pytest.raises(HilsimError, match="positive"):
        IpcTimeline(np.zeros(3), np.ones(3), np.zeros(3), 1, 1)
    with pytest.raises(HilsimError, match="grid has"):
        IpcTimeline(np.ones(3), np.ones(3), np.ones(3), 2, 1)
    with pytest.raises(HilsimError, match="s must be positive"):
        project_launch(waves_timeline(2)[0], s=0)


def test_project_plan_combines_weights_and_fractions() -> None:
    stable, stable_truth = waves_timeline(8)
    noisy, noisy_truth = waves_timeline(4, noise=0.3, seed=2)
    plan = Plan(
        method="pka",
        params={},
        source={"n_launches": 100},
        clusters=[],
        samples=samples_frame(np.array([3, 40]), np.array([10.0, 5.0]), np.array([0, 1])),
    )
    out = project_plan(plan, {3: stable, 40: noisy, 99: stable})
    assert out["projected_total_cycles"] == pytest.approx(10 * stable_truth + 5 * noisy_truth)
    assert out["full_total_cycles"] == pytest.approx(10 * stable_truth + 5 * noisy_truth)
    assert out["projection_error"] == pytest.approx(0.0, abs=1e-12)
    assert out["n_projected"] == 1
    assert out["simulated_cycles"] == pytest.approx(6200.0 + noisy_truth)
    assert out["simulated_fraction"] == pytest.approx(
        (6200.0 + noisy_truth) / (stable_truth + noisy_truth)
    )
    json.dumps(out)
    with pytest.raises(HilsimError, match="no IPC timeline for 1 of"):
        project_plan(plan, {3: stable})


def _cta_trace(n_waves: int = 6, per_wave: int = 8, n_sm: int = 4) -> pd.DataFrame:
    """CTAs in waves: 2 per SM at once, 1000 cycles each; the first wave is slower."""
    rows = []
    cta = 0
    t = 0
    for wave in range(n_waves):
        length = 1500 if wave == 0 else 1000
        for slot in range(per_wave):
            rows.append((7, cta, slot % n_sm, t, t + length, 4000))
            cta += 1
        t += length
    return pd.DataFrame(
        rows, columns=["launch_id", "cta_id", "sm_id", "start_cycle", "end_cycle", "instructions"]
    )


def test_cta_trace_reader_builds_timelines(tmp_path: Path) -> None:
    trace = _cta_trace()
    other = trace.assign(launch_id=9).head(8)
    path = tmp_path / "ctas.csv"
    pd.concat([trace, other]).to_csv(path, index=False)
    timelines = read_cta_trace(path, bin_cycles=100)
    assert sorted(timelines) == [7, 9]
    tl = timelines[7]
    assert tl.total_ctas == 48 and tl.ctas_per_wave == 8  # 4 SMs x 2 resident
    assert tl.total_instructions == pytest.approx(48 * 4000)
    assert tl.instructions.sum() == pytest.approx(48 * 4000)
    assert tl.total_cycles == 6500 and tl.complete
    assert np.cumsum(tl.ctas_finished)[14] == 8  # first wave ends at cycle 1500
    result = project_launch(tl)
    assert result.stable
    assert result.projected_cycles == pytest.approx(6500.0, rel=1e-9)
    assert result.stop_cycle < 6500.0
    # one wave only: fits in a wave, total work known -> stops at stability
    small = timelines[9]
    assert small.total_ctas == 8 and small.ctas_per_wave == 8


def test_cta_trace_errors(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    trace = _cta_trace(2)
    trace.drop(columns=["sm_id"]).to_csv(path, index=False)
    with pytest.raises(HilsimError, match="missing column"):
        read_cta_trace(path)
    bad = trace.copy()
    bad.loc[3, "end_cycle"] = -5
    bad.to_csv(path, index=False)
    with pytest.raises(HilsimError, match="row 3, column end_cycle"):
        read_cta_trace(path)
    bad = trace.copy()
    bad.loc[2, "end_cycle"] = 0
    bad.loc[2, "start_cycle"] = 10
    bad.to_csv(path, index=False)
    with pytest.raises(HilsimError, match="row 2: end_cycle is before"):
        read_cta_trace(path)
    pd.concat([trace, trace.head(1)]).to_csv(path, index=False)
    with pytest.raises(HilsimError, match="duplicate"):
        read_cta_trace(path)


def test_timeline_from_ctas_spreads_instructions_evenly() -> None:
    tl = timeline_from_ctas(
        np.array([0.0, 50.0]),
        np.array([200.0, 250.0]),
        np.array([200.0, 400.0]),
        np.array([0, 0]),
        bin_cycles=100,
    )
    assert tl.cycles.tolist() == [100.0, 100.0, 50.0]
    assert tl.instructions.tolist() == pytest.approx([100.0 + 100.0, 100.0 + 200.0, 100.0])
    assert tl.ctas_finished.tolist() == [0, 1, 1]
    assert tl.ctas_per_wave == 2
