"""The pointer chases on the simulated card (tier ``gpgpusim``): each follows its latency
option one for one. The stop clock does not wait for the last load, so one chase of 64
loads moves by 63/64 of an option's change; the slope of two step counts
(:func:`hilsim.microbench.latency.chase_latencies`) moves by all of it. Two runs of the
chases and the shared chase on SM7_QV100 (~50 s each on a quiet machine)."""

from __future__ import annotations

import pytest
from hilsim.microbench import latency
from hilsim.simmodel.gpgpusim.cards import card_config
from hilsim.simmodel.gpgpusim.simdevice import GpgpusimDevice

from tests.simbuild import require_sim_build

pytestmark = pytest.mark.gpgpusim

#: option -> (its change, the measurement that moves by that, within): the DRAM chase's
#: later loads meet DRAM rows its earlier ones left (64 -> 64.23 cycles on SM7_QV100)
MOVED = {
    "-gpgpu_l1_latency": (48, "l1_hit_latency", 0.05),
    "-gpgpu_smem_latency": (40, "shared_latency", 0.05),
    "-dram_latency": (64, "dram_latency", 0.4),
}


def _chases(build, overrides: dict[str, str]) -> dict[str, float]:
    device = GpgpusimDevice(card_config("SM7_QV100", build), build=build, overrides=overrides)
    ms = latency.chase_latencies(device) + [latency.shared_latency(device)]
    assert all(m.valid for m in ms), [(m.name, m.note) for m in ms if not m.valid]
    return {m.name: float(m.value) for m in ms}


def test_each_chase_moves_by_its_options_change() -> None:
    build = require_sim_build()
    card = card_config("SM7_QV100", build)
    base = _chases(build, {})
    moved = _chases(build, {o: str(int(float(card.option(o))) + step)
                            for o, (step, _name, _abs) in MOVED.items()})
    for step, name, within in MOVED.values():
        assert moved[name] - base[name] == pytest.approx(step, abs=within), (name, base, moved)
    assert moved["l2_hit_latency"] == pytest.approx(base["l2_hit_latency"], abs=0.1)
