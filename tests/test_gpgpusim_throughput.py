"""Throughput and atomics on the simulated card: the suite's own kernels on the GPGPU-Sim
device's 2-SM slice give back what the card's config says.

* fp32 throughput on a QV100 whose ``-ptx_opcode_initiation_fp`` is drawn (seeded):
  flop/clk/SM within [0.85, 1.0] of 2 x units x 32 lanes / interval, and the tuner's
  formula (``-ptx_opcode_initiation_fp``, Accel-Sim ``config_fpu``) gives the drawn
  interval back;
* same-address atomic throughput: GPGPU-Sim serves one atomic per L2 bank and L2 cycle,
  so the rate is at most 1 per clock (L2 clock = core clock on the QV100) and, with 4096
  threads queueing, above 0.8;
* the tuned unit latencies (``gpgpusim`` convention, the unit map of
  ``simmodel/tuner/calibration.py``) re-simulated give the committed QV100 file's
  ``lat_*`` cycles back.

Each runs one to three short simulations (~15 s of wall time in all when the programs
are compiled; nvcc adds ~10 s per source module on a fresh cache).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hilsim.microbench import atomics, compute
from hilsim.simmodel.gpgpusim.cards import card_config
from hilsim.simmodel.gpgpusim.simdevice import GpgpusimDevice
from hilsim.simmodel.tuner.calibration import UNIT_OPTIONS
from hilsim.simmodel.tuner.closedloop import tune_simulated
from hilsim.simmodel.tuner.geometry import round_up_pow2

from tests.simbuild import require_sim_build

pytestmark = pytest.mark.gpgpusim


def _build():
    return require_sim_build()


def _device(options: dict[str, str] | None = None):
    build = _build()
    card = card_config("SM7_QV100", build, options=options)
    return GpgpusimDevice(card, build=build), card


def test_fp32_throughput_recovers_a_drawn_initiation_interval() -> None:
    interval = int(np.random.default_rng(7).choice([1, 2, 4]))
    device, card = _device(
        {"-ptx_opcode_initiation_fp": f"{interval},{interval},{interval},{interval},{2 * interval}"}
    )
    m = compute.throughput(device, "fp32", target=12000)
    units = int(card.option("-gpgpu_num_sp_units"))
    truth = 2 * units * 32 / interval
    assert m.valid, m.note
    assert m.params["sms_simulated"] == 2 and m.params["sms_seen"] == 2
    assert 0.85 * truth <= m.value <= 1.0 * truth, (interval, m.value, truth)
    schedulers = int(card.option("-gpgpu_num_sched_per_core"))
    tuned = max(1, math.floor(32 / (round_up_pow2(m.value / 2) / schedulers)))
    assert tuned == interval, (m.value, tuned, interval)


def test_same_address_atomics_are_one_per_l2_cycle_at_most() -> None:
    device, card = _device()
    core, _icnt, l2, _dram = card.clock_domains_mhz
    assert core == l2
    m = atomics.atomic_throughput(device, same=True)
    assert m.valid, m.note  # the one counter equals threads x updates
    assert m.params["instruction"].startswith("red.global.add.u32 (simulated as atom")
    assert 0.8 <= m.params["atomics_per_clk"] <= 1.0, m.params["atomics_per_clk"]
    assert m.value == pytest.approx(m.params["atomics_per_clk"] * core * 1e6)


def test_tuned_unit_latencies_reproduce_the_measured_ones() -> None:
    """Re-simulate ``lat_*`` under the tuned ``-ptx_opcode_latency_*`` (gpgpusim
    convention) of the committed QV100 file: the same cycles per operation (±1)."""
    bench = Path(__file__).parent / "data" / "microbench" / "gpgpusim" / "SM7_QV100.microbench.json"
    measured = {m["name"]: m["value"] for m in json.loads(bench.read_text())["measurements"]}
    tuned = {o.name: o.value for o in tune_simulated(bench).options}
    device, _card = _device({opt: tuned[opt] for opt in UNIT_OPTIONS.values()})
    for unit in UNIT_OPTIONS:
        m = compute.latency(device, unit)
        assert abs(m.value - measured[f"{unit}_latency"]) <= 1, (unit, m.value, tuned)
