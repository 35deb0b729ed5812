"""The unit-operation probes (:mod:`hilsim.microbench.unit_ops`) on the simulated card: each
follows its own entry of ``-ptx_opcode_latency_{int,fp,sfu}`` /
``-ptx_opcode_initiation_{int,sfu}``.

The QV100 runs once as configured, once with every probed latency entry moved by a
different amount and once with every probed initiation entry moved (amounts drawn from a
fixed seed): a latency probe moves by exactly its entry's change (the simulator's pipeline
adds the same ~5.3 cycles to every dependent operation), an initiation probe by its
entry's change within half a cycle. A probe wired to another entry, or to none, moves by
the wrong amount. Three simulations (~20 s of wall time in all on a quiet machine; nvcc
adds ~10 s on a fresh cache), and two more for the one-channel slice (~5 s of CPU).
"""

from __future__ import annotations

import numpy as np
import pytest
from hilsim.microbench import unit_ops
from hilsim.microbench.device import Setup
from hilsim.simmodel.gpgpusim.cards import card_config
from hilsim.simmodel.gpgpusim.simdevice import GpgpusimDevice

from hilsim.core import measurement_names as mn
from tests.simbuild import require_sim_build

pytestmark = pytest.mark.gpgpusim

#: measurement -> (option, list index) it is the probe of
ENTRIES = {
    mn.SFU_LATENCY: ("-ptx_opcode_latency_sfu", 0),
    mn.SFU_INITIATION: ("-ptx_opcode_initiation_sfu", 0),
    mn.INT_DIV_LATENCY: ("-ptx_opcode_latency_int", 4),
    mn.INT_DIV_INITIATION: ("-ptx_opcode_initiation_int", 4),
    mn.FP_DIV_LATENCY: ("-ptx_opcode_latency_fp", 4),
    mn.INT_MAX_LATENCY: ("-ptx_opcode_latency_int", 1),
    mn.FP_MAX_LATENCY: ("-ptx_opcode_latency_fp", 1),
    mn.SHFL_LATENCY: ("-ptx_opcode_latency_int", 5),
    mn.SHFL_INITIATION: ("-ptx_opcode_initiation_int", 5),
    mn.DP_ADD_LATENCY: ("-ptx_opcode_latency_dp", 0),
    mn.DP_ADD_INITIATION: ("-ptx_opcode_initiation_dp", 0),
    mn.DP_MAX_LATENCY: ("-ptx_opcode_latency_dp", 1),
    mn.DP_MAX_INITIATION: ("-ptx_opcode_initiation_dp", 1),
    mn.DP_MUL_LATENCY: ("-ptx_opcode_latency_dp", 2),
    mn.DP_MUL_INITIATION: ("-ptx_opcode_initiation_dp", 2),
    mn.FP_ADD_LATENCY: ("-ptx_opcode_latency_fp", 0),
    mn.FP_MUL_LATENCY: ("-ptx_opcode_latency_fp", 2),
}


def _entries(card, option: str) -> list[int]:
    return [int(float(v)) for v in card.option(option).split(",")]


def _measure(build, options: dict[str, str] | None = None,
             kinds: tuple[str, ...] = ("latency", "initiation")) -> tuple[dict[str, float], object]:
    card = card_config("SM7_QV100", build, options=options)
    device = GpgpusimDevice(card, build=build)
    ms = unit_ops.simulated(device, kinds)
    assert all(m.valid for m in ms), [(m.name, m.note) for m in ms if not m.valid]
    return {m.name: float(m.value) for m in ms}, card


def _moved(card, shift: dict[str, int]) -> dict[str, str]:
    options: dict[str, list[int]] = {}
    for name, step in shift.items():
        option, index = ENTRIES[name]
        values = options.setdefault(option, _entries(card, option))
        values[index] += step
    return {o: ",".join(map(str, v)) for o, v in options.items()}


def test_each_probe_follows_its_own_entry() -> None:
    build = require_sim_build()
    base, card = _measure(build)
    assert list(base) == unit_ops.measurement_names()
    # as configured: every dependent operation pays the entry plus one pipeline offset
    lat_names = [n for n in ENTRIES if "latency" in n]
    offsets = {n: base[n] - _entries(card, ENTRIES[n][0])[ENTRIES[n][1]] for n in lat_names}
    assert all(4.0 <= v <= 7.0 for v in offsets.values()), offsets
    assert max(offsets.values()) - min(offsets.values()) < 0.2, offsets
    # every probed entry moved by a different amount: latencies in one run, initiation
    # intervals in another (the one-warp DIV initiation also grows with the DIV latency)
    rng = np.random.default_rng(26)
    steps = (int(v) for v in rng.permutation(np.arange(3, 3 + 4 * len(lat_names), 4)))
    lat_shift = dict(zip(lat_names, steps, strict=True))
    # the dp and fp MAX entries are the DP and SP pipelines' depths (GPGPU-Sim sizes them
    # by MAX, shader.cc max_dp_latency / max_sp_latency): each keeps the largest shift of
    # its list's entries, so ADD and MUL stay within it
    for unit in ((mn.DP_ADD_LATENCY, mn.DP_MAX_LATENCY, mn.DP_MUL_LATENCY),
                 (mn.FP_ADD_LATENCY, mn.FP_MAX_LATENCY, mn.FP_MUL_LATENCY)):
        top = max(unit, key=lat_shift.__getitem__)
        lat_shift[top], lat_shift[unit[1]] = lat_shift[unit[1]], lat_shift[top]
    # an interval above its latency crashes GPGPU-Sim: dp ADD and MUL (latency 8,
    # interval 4) move by 1 and 2, SFU, DIV and SHFL by 3-5, dp MAX by 7, each by its
    # own amount. The max.f64 initiation kernel runs 6 chains (unit_ops): its rate sits
    # 0.4-1.5 cycles above the interval (QV100, dp MAX latency 19: interval 4 -> 5.07,
    # 6 -> 8.0, 11 -> 12.38), so it moves by 7 to 8.5
    init_names = [n for n in ENTRIES if "initiation" in n]
    small = [mn.DP_ADD_INITIATION, mn.DP_MUL_INITIATION]
    init_shift = dict(zip(small, (int(v) for v in rng.permutation([1, 2])), strict=True))
    init_shift |= dict(zip([mn.SFU_INITIATION, mn.INT_DIV_INITIATION, mn.SHFL_INITIATION],
                           (int(v) for v in rng.permutation([3, 4, 5])), strict=True))
    init_shift[mn.DP_MAX_INITIATION] = 7
    assert set(init_shift) == set(init_names)
    moved_lat, _ = _measure(build, _moved(card, lat_shift), ("latency",))
    moved_init, _ = _measure(build, _moved(card, init_shift), ("initiation",))
    # within 0.1: a 4-cycle chain shares a writeback slot with the loop's counter now and
    # then (QV100 fp ADD/MUL at 4: 9.07, at 23: 28.0), the steps are 4 apart
    for name, step in lat_shift.items():
        assert abs(moved_lat[name] - base[name] - step) <= 0.1, (name, step, moved_lat[name])
    for name, step in init_shift.items():
        # 4 warps of 32 div.u32 chains on one SFU read up to a cycle above the DIV interval
        # (QV100: 8 -> 8.0, 10 -> 10.9, 13 -> 13.8, 16 -> 16.8, 24 -> 25.0)
        wide = (mn.DP_MAX_INITIATION, mn.INT_DIV_INITIATION)
        slack = (-0.5, 1.5) if name in wide else (-0.5, 0.5)
        moved = moved_init[name] - base[name]
        assert step + slack[0] <= moved <= step + slack[1], (name, step, moved_init[name])


def test_the_one_channel_slice_changes_nothing() -> None:
    """Nothing between a probe's clock reads touches memory, so one memory channel (the
    probes' setup: a simulator ticks every channel every cycle) gives the very cycles the
    card's own channels give."""
    build = require_sim_build()
    card = card_config("SM7_QV100", build)
    sliced = {m.name: m.value for m in unit_ops.simulated(GpgpusimDevice(card, build=build))}
    whole = GpgpusimDevice(card, build=build)
    run = whole.run
    whole.run = lambda bench, program, setup, timed=True: run(bench, program, Setup.ONE_SM,
                                                              timed=timed)
    assert {m.name: m.value for m in unit_ops.simulated(whole)} == sliced
    assert whole.runs[-1]["options"].get("-gpgpu_n_mem") is None
