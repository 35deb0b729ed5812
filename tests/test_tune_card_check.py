"""The whole tuned card's streaming read against the memory slice its channel count was
tuned on (``hilsim tune --on-simulator --card-check``): which card each run is on, what
the report and the console say. The simulator tier runs it on GPGPU-Sim
(tests/test_tune_on_simulator.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hilsim.simmodel.tuner import cardcheck

from hilsim.core import measurement_names as mn
from hilsim.core.errors import HilsimError
from hilsim.core.measurement import Measurement
from tests.tunefiles import whole_gpu_file

DATA = Path(__file__).parent / "data"
ACCEL = DATA / "accelsim"

#: GPGPU-Sim 667834c, SM7_QV100 (1132 MHz): simulated cycles of one cold read pass of 256
#: and 512 KiB per channel on the whole card (80 SMs, 32 channels, IPOLY) and on its
#: 2-channel, 5-SM slice (linear indexing). One pass puts the whole card 25 % / 15 % below
#: the slice; the slopes agree.
QV100_WHOLE = {256 << 10: 16202.0, 512 << 10: 26547.0}
QV100_SLICE = {256 << 10: 12072.0, 512 << 10: 22426.0}


def _tune(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, whole: dict[int, float],
          slice_: dict[int, float], **kw):  # noqa: ANN003, ANN202 - the tuner's result
    """Tune the QV100's channels from a whole GPU's file on a stand-in simulator (26.15 GB/s
    per channel on the slice); the streaming check's passes take ``whole[bytes per
    channel]`` cycles on the whole card and ``slice_[...]`` on the slice, and each pass's
    card is kept in ``_tune.seen``."""
    from hilsim.simmodel.tuner import evaluators, search  # noqa: PLC0415 (under test)

    def evaluate(self, evs, c):  # noqa: ANN001, ANN202
        return {mn.DRAM_READ_BANDWIDTH: 26.15 * float(c.option("-gpgpu_n_mem"))}

    seen: list[tuple[int, int, str, int]] = []

    def read(device, n_bytes):  # noqa: ANN001, ANN202
        opts = {**device.setup_options(cardcheck.bandwidth.Setup.MEMORY_SLICE),
                **device.overrides}
        k = device.memory_slice_channels
        seen.append((k, device.active_sms, opts["-gpgpu_memory_partition_indexing"], n_bytes))
        cycles = (whole if k == device.memory_scale else slice_)[n_bytes]
        per_clk = n_bytes * k / cycles
        scale = device.memory_scale / k
        return Measurement(mn.DRAM_READ_BANDWIDTH, per_clk * scale * 1.132, "GB/s", {
            "slice_cycles": cycles, "footprint_bytes": n_bytes * k, "slice_bytes_per_clk": per_clk,
            "bytes_per_clk": per_clk * scale, "sm_clock_mhz": 1132.0})

    monkeypatch.setattr(cardcheck, "FOOTPRINT_PER_CHANNEL", 256 << 10)
    monkeypatch.setattr(evaluators.CandidateRunner, "evaluate", evaluate)
    monkeypatch.setattr(cardcheck.bandwidth, "dram_read_slice", read)
    path = whole_gpu_file(tmp_path)
    lines: list[str] = []
    kw.setdefault("only", ("mem_channels",))
    result = search.tune_on_simulator(
        path, base=ACCEL / "SM7_QV100.gpgpusim.config", build=object(), workers=1,
        say=lines.append, **kw)
    _tune.seen, _tune.lines = seen, lines
    return result


def test_the_tuned_card_streams_on_every_sm_and_channel_with_its_own_indexing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole card runs on its 80 SMs and 32 channels with its IPOLY indexing, the slice
    on 2 channels and 5 SMs, linear, each at two footprints; replayed from the simulator's
    cycles, the slopes agree (not flagged) where one pass would put the whole card 15 %
    low. A whole card whose longer pass takes 20 % more cycles beyond the same start is
    flagged in the report and on the console."""
    from hilsim.simmodel.tuner import report  # noqa: PLC0415

    result = _tune(monkeypatch, tmp_path, QV100_WHOLE, QV100_SLICE, card_check=True)
    assert sorted(_tune.seen) == [(2, 5, "0", 256 << 10), (2, 5, "0", 512 << 10),
                                  (32, 80, "2", 256 << 10), (32, 80, "2", 512 << 10)]
    doc = report.report(result)["whole_card_streaming"]
    assert doc["ratio"] == pytest.approx((22426 - 12072) / (26547 - 16202))
    assert not doc["flagged"] and abs(doc["ratio"] - 1) < 0.001
    assert (doc["channels"], doc["sms"], doc["indexing_name"]) == (32, 80, "IPOLY")
    assert doc["measured_whole_gpu"] is True
    assert doc["slice_gbps"] == pytest.approx(32 * (256 << 10) / (22426 - 12072) * 1.132)

    slow = {256 << 10: 16202.0, 512 << 10: 16202.0 + 1.2 * (26547 - 16202)}
    result = _tune(monkeypatch, tmp_path, slow, QV100_SLICE, card_check=True)
    doc = report.report(result)["whole_card_streaming"]
    assert doc["flagged"] and doc["ratio"] == pytest.approx(1 / 1.2, rel=1e-3)
    line = next(x for x in report.summary(result) if "whole card: streaming read" in x)
    assert "-16.6% of the" in line and "OFF by more than 5%" in line, line
    assert any(x.startswith("whole card: streaming read") for x in _tune.lines)


def test_a_whole_card_within_tolerance_is_not_flagged_and_the_check_runs_only_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """4 % under the slice is within the 5 %; without ``card_check``, or with no channel
    search, nothing runs."""
    near = {256 << 10: 16202.0, 512 << 10: 16202.0 + (22426 - 12072) / 0.96}
    result = _tune(monkeypatch, tmp_path, near, QV100_SLICE, card_check=True)
    assert result.whole_card_streaming["flagged"] is False
    assert "OFF" not in result.whole_card_streaming["line"]
    result = _tune(monkeypatch, tmp_path, QV100_WHOLE, QV100_SLICE)
    assert result.whole_card_streaming is None and _tune.seen == []
    result = _tune(monkeypatch, tmp_path, QV100_WHOLE, QV100_SLICE, card_check=True,
                   only=("l1_latency",))
    assert result.whole_card_streaming is None and _tune.seen == []


def test_passes_hold_whole_grid_strides_on_a_card_with_many_sms_per_channel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A read covers whole strides of its grid (111 SMs x 1024 threads x 16 B = 1.8 MB on a
    drawn RTX 2060-structure card of 12 channels), so passes of 128 and 256 KiB per
    channel (1.5 and 3 MB) both read one stride; the passes are sized to one and two
    strides per channel instead, and passes that still read as much end in one line, not
    a division by zero."""
    from hilsim.simmodel.gpgpusim.cards import card_config  # noqa: PLC0415
    from hilsim.simmodel.tuner.memslice import choose_slice  # noqa: PLC0415

    from hilsim.core.errors import HilsimError  # noqa: PLC0415

    card = card_config(ACCEL / "SM75_RTX2060.gpgpusim.config").with_options(
        {"-gpgpu_n_clusters": "111"})
    asked: list[int] = []

    def read(device, n_bytes):  # noqa: ANN001, ANN202
        asked.append(n_bytes)
        k, stride = device.memory_slice_channels, cardcheck.bandwidth.grid_stride_bytes(device)
        footprint = max(stride, n_bytes * k // stride * stride)
        cycles = 4000.0 + footprint / (32.0 * k)
        per_clk = footprint / cycles
        return Measurement(mn.DRAM_READ_BANDWIDTH, 1.0, "GB/s", {
            "slice_cycles": cycles, "footprint_bytes": footprint, "slice_bytes_per_clk": per_clk,
            "bytes_per_clk": per_clk * device.memory_scale / k, "sm_clock_mhz": 1000.0})

    monkeypatch.setattr(cardcheck.bandwidth, "dram_read_slice", read)
    check = cardcheck.streaming_check(card, choose_slice(111, 12, 1), None)
    assert check.bytes_per_channel[0] >= 111 * 1024 * 16 / 12
    assert check.ratio == pytest.approx(1.0) and check.whole_gbps == pytest.approx(32 * 12)

    def same(device, n_bytes):  # noqa: ANN001, ANN202
        return read(device, check.bytes_per_channel[0])

    monkeypatch.setattr(cardcheck.bandwidth, "dram_read_slice", same)
    with pytest.raises(HilsimError, match="no rate between them"):
        cardcheck.streaming_check(card, choose_slice(111, 12, 1), None)


#: GPGPU-Sim 667834c, SM7_QV100 with its interconnect and L2 clocks at 1x and 2x its core
#: clock (1132 MHz): the suite's L2 bandwidth (bytes/clk) on the 2-channel, 5-SM slice and
#: on the whole card (80 SMs, 32 channels, IPOLY)
QV100_L2_SLICE = {1.0: 1081.4, 2.0: 1624.6}
QV100_L2_WHOLE = {1.0: 905.0, 2.0: 1604.4}


def _tune_l2(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, measured: float, whole,  # noqa: ANN001
             path: Path | None = None):  # noqa: ANN202 - the tuner's result
    """The L2 clock alone, on a stand-in simulator whose slice follows the QV100's figures
    (linear in the clock ratio between and beyond its two points); the whole-card kernel
    answers ``whole(ratio)`` and records its device in ``_tune_l2.seen``."""
    from hilsim.simmodel.tuner import evaluators, search  # noqa: PLC0415 (under test)

    def slope(points: dict[float, float], ratio: float) -> float:
        (a, fa), (b, fb) = sorted(points.items())
        return fa + (fb - fa) * (ratio - a) / (b - a)

    def ratio_of(c) -> float:  # noqa: ANN001
        core, _icnt, l2, _dram = c.clock_domains_mhz
        return l2 / core

    def evaluate(self, evs, c):  # noqa: ANN001, ANN202
        return {mn.L2_BANDWIDTH: slope(QV100_L2_SLICE, ratio_of(c))}

    seen: list[tuple[int, int, str]] = []

    def l2(device):  # noqa: ANN001, ANN202
        opts = {**device.setup_options(cardcheck.bandwidth.Setup.MEMORY_SLICE),
                **device.overrides}
        seen.append((device.memory_slice_channels, device.active_sms,
                     opts["-gpgpu_memory_partition_indexing"]))
        return [Measurement(mn.L2_BANDWIDTH, whole(ratio_of(device.card)), "bytes/clk",
                            {"slice_cycles": 1000.0})]

    monkeypatch.setattr(evaluators.CandidateRunner, "evaluate", evaluate)
    monkeypatch.setattr(cardcheck.bandwidth, "l2", l2)
    if path is None:
        path = whole_gpu_file(tmp_path)
        doc = json.loads(path.read_text())
        for m in doc["measurements"]:
            if m["name"] == mn.L2_BANDWIDTH:
                m["value"] = measured
        path.write_text(json.dumps(doc))
    lines: list[str] = []
    result = search.tune_on_simulator(
        path, base=ACCEL / "SM7_QV100.gpgpusim.config", build=object(), workers=1,
        only=("l2_clock",), card_check=True, say=lines.append)
    _tune_l2.seen, _tune_l2.lines = seen, lines
    return result


def test_a_whole_gpus_l2_bandwidth_is_checked_on_the_whole_tuned_card(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A card whose L2 and interconnect run at 2x its clock (the whole card measures
    1,604.4 bytes/clk): the slice's search takes 2x (1,624.6), and the whole tuned card
    (its 80 SMs, 32 channels, IPOLY) gives the measured figure: not flagged. A whole card
    that falls short of its slice (0.7 of it at any clock) is flagged."""
    result = _tune_l2(monkeypatch, tmp_path, QV100_L2_WHOLE[2.0],
                      lambda r: QV100_L2_WHOLE[2.0] if r == 2.0 else 0.0)
    assert _tune_l2.seen == [(32, 80, "2")]
    doc = result.whole_card_l2
    assert doc["l2_mhz"] == pytest.approx(2 * 1132) and not doc["flagged"], doc
    assert doc["relative"] == pytest.approx(0.0)

    result = _tune_l2(monkeypatch, tmp_path, QV100_L2_WHOLE[2.0],
                      lambda r: 0.7 * (QV100_L2_SLICE[1.0] + 543.2 * (r - 1.0)))
    doc = result.whole_card_l2
    assert doc["flagged"] and doc["relative"] < -0.25 and "OFF by more than 3%" in doc["line"]


def test_no_whole_card_l2_run_for_a_slices_measurement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The committed simulated file's L2 bandwidth was taken on a 2-SM slice of one
    channel: the L2 clock is searched on that slice (the QV100's slice moves with it),
    and nothing runs on the whole card."""
    result = _tune_l2(monkeypatch, tmp_path, 0.0, lambda r: 1.0,
                      path=DATA / "microbench" / "gpgpusim" / "SM7_QV100.microbench.json")
    assert result.whole_card_l2 is None and _tune_l2.seen == []
    assert [st.knob.key for st in result.knobs] == ["l2_clock"]
    assert mn.L2_BANDWIDTH not in result.skipped


def test_a_whole_card_check_that_cannot_run_is_said_and_the_card_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checks only report on the settled card: a simulator that dies on the whole card
    (SM90_H100 tuned to 41 channels overran its crossbar: SIGSEGV after a 44-minute tune)
    leaves the tuned values, the error in the report and on the console."""
    from hilsim.simmodel.tuner import report  # noqa: PLC0415

    def crash(ratio: float) -> float:
        raise HilsimError("prog on tuned: simulator killed by SIGSEGV")

    checked = _tune_l2(monkeypatch, tmp_path, QV100_L2_WHOLE[2.0], lambda r: 0.0)
    result = _tune_l2(monkeypatch, tmp_path, QV100_L2_WHOLE[2.0], crash)
    assert ({st.knob.key: st.value for st in result.knobs}
            == {st.knob.key: st.value for st in checked.knobs})
    check = report.report(result)["whole_card_l2"]
    assert check["error"].endswith("prog on tuned: simulator killed by SIGSEGV")
    assert any("L2 bandwidth check could not run" in x for x in _tune_l2.lines)
    assert any("could not run" in x for x in report.summary(result))
