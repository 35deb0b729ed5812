"""The memory slice of `hilsim tune --on-simulator` (no simulator): the channels and SMs
the L2 and DRAM bandwidth evaluators run on.

A slice's L2 bandwidth is bound by its SMs' requests in flight, so the slice carries the
card's SMs per channel: the fewest channels whose SM count (whole clusters) is within 5 %
of the card's ratio. One channel with round(SMs / channels) SMs is the mutant: 2 SMs for
a V100's or RTX 2060's 2.5 (-20 %), 1 for an A100's 0.42 (+137 %).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from hilsim.simmodel.tuner.memslice import MemorySlice, choose_slice

from hilsim.core import measurement_names as mn
from hilsim.core.errors import HilsimError
from hilsim.core.measurement import Measurement
from tests.tunefiles import whole_gpu_file

DATA = Path(__file__).parent / "data"
ACCEL = DATA / "accelsim"

#: (card, SMs, channels, SMs per cluster) -> (slice channels, slice SMs)
CARDS = {
    "V100 (80 SMs, 32 HBM2 channels)": ((80, 32, 1), (2, 5)),
    "RTX 2060 (30 SMs, 12 GDDR6 channels)": ((30, 12, 1), (2, 5)),
    # 3.3 SMs per channel: 1 channel 3 SMs is -9.1 %, 2 channels 7 SMs +6.1 %
    "H100 SXM (132 SMs, 40 channels as SM90_H100)": ((132, 40, 1), (3, 10)),
    # 0.42: 5 channels 2 SMs is -5.2 %, 7 channels 3 SMs +1.6 %
    "A100 from SM86_RTX3070 (108 SMs, 256 channels)": ((108, 256, 1), (7, 3)),
    # two SMs per cluster: 1 channel 4 SMs is +20 %, 2 channels 6 SMs -10 %
    "TITAN V (80 SMs in clusters of 2, 24 channels)": ((80, 24, 2), (3, 10)),
    # 2.125: 1-3 channels are -5.9 %, 4 channels 9 SMs +5.9 %, 5 channels 11 SMs +3.5 %
    "RTX 2060 SUPER (34 SMs, 16 channels)": ((34, 16, 1), (5, 11)),
}


@pytest.mark.parametrize("name", list(CARDS))
def test_the_slice_carries_the_cards_sms_per_channel(name: str) -> None:
    (sms, channels, per_cluster), want = CARDS[name]
    got = choose_slice(sms, channels, per_cluster)
    assert (got.channels, got.sms) == want
    assert abs(got.ratio_error) <= 0.05
    assert got.sms % per_cluster == 0
    # no fewer channels reach the tolerance
    for k in range(1, got.channels):
        k_sms = per_cluster * max(1, round(k * sms / channels / per_cluster))
        assert abs(k_sms / k / (sms / channels) - 1) > 0.05, (k, k_sms)


def test_a_card_no_slice_within_the_cap_fits_says_its_residual_error() -> None:
    """1 SM over 256 channels (0.004 SMs per channel) has no slice of at most 16 channels
    within 5 %: the nearest (16 channels, 1 SM) is taken and its error stated."""
    got = choose_slice(1, 256)
    assert (got.channels, got.sms) == (16, 1)
    assert got.ratio_error == pytest.approx(256 / 16 - 1)
    assert "nearest within 16 channels" in got.source
    assert "+1500.0 %" in got.line()
    capped = choose_slice(80, 32, max_channels=1)  # V100 on one channel: 3 SMs (+20 %)
    assert (capped.channels, capped.sms) == (1, 3) and "nearest" in capped.source
    assert choose_slice(4, 2) == MemorySlice(1, 2, 4, 2)  # exact on one channel
    with pytest.raises(HilsimError, match="each must be at least 1"):
        choose_slice(0, 32)


def _search(sm_count: int, rows: list[Measurement]) -> SimpleNamespace:
    return SimpleNamespace(structure=SimpleNamespace(facts={"sm_count": sm_count}),
                           by_name={m.name: m for m in rows})


def _gpu_rows() -> list[Measurement]:
    return [Measurement(mn.DRAM_READ_BANDWIDTH, 850.0, "GB/s", {"grid": 640}),
            Measurement(mn.L2_BANDWIDTH, 2100.0, "bytes/clk", {"grid": 640})]


def test_the_search_sizes_the_slice_of_a_whole_gpu_by_its_ratio() -> None:
    """The search's slice for a candidate: a whole GPU's measurement gets the slice of the
    candidate's SMs per channel (channels and clusters of the candidate); a measurement
    taken on a simulated slice keeps its own channels and SMs."""
    from hilsim.simmodel.tuner.search import Search  # noqa: PLC0415 (the module under test)

    v100 = Search.memory_slice(_search(80, _gpu_rows()), 32)
    assert (v100.channels, v100.sms) == (2, 5) and v100.ratio_error == 0.0
    a100 = Search.memory_slice(_search(108, _gpu_rows()), 256)
    assert (a100.channels, a100.sms) == (7, 3)
    titan = Search.memory_slice(_search(80, _gpu_rows()), 24, 2)
    assert (titan.channels, titan.sms) == (3, 10)
    params = {"sms_simulated": 2, "mem_channels_simulated": 1, "mem_channels": 32}
    own = Search.memory_slice(
        _search(80, [Measurement(mn.DRAM_READ_BANDWIDTH, 836.8, "GB/s", dict(params))]), 32)
    assert (own.channels, own.sms) == (1, 2) and "simulated slice" in own.source
    params["mem_channels_simulated"] = 2
    own = Search.memory_slice(
        _search(80, [Measurement(mn.L2_BANDWIDTH, 1203.4, "bytes/clk", dict(params))]), 32)
    assert (own.channels, own.sms) == (2, 2)


def test_the_loop_runs_the_bandwidth_on_the_slice_and_reports_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The channel search on a stand-in simulator (26.15 GB/s per channel, whatever the
    slice) for a whole-GPU V100 measurement: every DRAM run is on the 2-channel, 5-SM
    slice, the console names it once, and tune-report.json records it."""
    from hilsim.simmodel.tuner import evaluators, report, search  # noqa: PLC0415

    slices: list[MemorySlice] = []

    def evaluate(self, evs, c):  # noqa: ANN001, ANN202
        assert evs == ["dram_bw"]
        slices.append(self.memory_slice)
        return {mn.DRAM_READ_BANDWIDTH: 26.15 * float(c.option("-gpgpu_n_mem"))}

    monkeypatch.setattr(evaluators.CandidateRunner, "evaluate", evaluate)
    path = whole_gpu_file(tmp_path)
    lines: list[str] = []
    result = search.tune_on_simulator(
        path, base=ACCEL / "SM7_QV100.gpgpusim.config", build=object(), workers=1,
        say=lines.append, only=("mem_channels",))
    assert slices and {(s.channels, s.sms) for s in slices} == {(2, 5)}
    said = [line for line in lines if line.startswith("memory slice:")]
    assert said == ["memory slice: 2 channels, 5 SMs (2.5 SMs per channel; the card's "
                    "80/32 = 2.5, +0.0 %; the card's SMs per channel)"], lines
    doc = report.report(result)
    assert doc["memory_slice_sms"] == 5
    assert doc["memory_slice"] == {
        "channels": 2, "sms": 5, "sms_per_channel": 2.5, "card_sms": 80, "card_channels": 32,
        "card_sms_per_channel": 2.5, "ratio_error": 0.0,
        "source": "the card's SMs per channel"}


def test_the_runner_builds_the_memory_slice_evaluators_device_on_the_slice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The bandwidth evaluators' device has the slice's channels and SMs; the others keep
    the 2-SM throughput slice on one channel."""
    from hilsim.simmodel.gpgpusim.cards import card_config  # noqa: PLC0415
    from hilsim.simmodel.tuner import evaluators  # noqa: PLC0415 (the module under test)

    built: dict[str, tuple[int, int]] = {}

    class Recorder:
        def __init__(self, card, *, build, throughput_sms, memory_slice_channels,  # noqa: ANN001
                     overrides) -> None:
            self.slice = (memory_slice_channels, throughput_sms)
            self.runs: list[dict] = []

    def recorded(name: str, memory_slice: bool) -> evaluators.Evaluator:
        def run(device: Recorder) -> list[Measurement]:
            built[name] = device.slice
            return []
        return evaluators.Evaluator(run, (), memory_slice=memory_slice)

    monkeypatch.setattr(evaluators, "GpgpusimDevice", Recorder)
    monkeypatch.setitem(evaluators.EVALUATORS, "dram_bw", recorded("dram_bw", True))
    monkeypatch.setitem(evaluators.EVALUATORS, "l2_bw", recorded("l2_bw", True))
    monkeypatch.setitem(evaluators.EVALUATORS, "shared_bw", recorded("shared_bw", False))
    monkeypatch.setattr(evaluators.simhost, "card_arch", lambda _card: "sm_70")
    runner = evaluators.CandidateRunner(None, 1, choose_slice(80, 32))
    runner.evaluate(["dram_bw", "l2_bw", "shared_bw"],
                    card_config(ACCEL / "SM7_QV100.gpgpusim.config"))
    assert built == {"dram_bw": (2, 5), "l2_bw": (2, 5), "shared_bw": (1, 2)}
