"""The whole tuned card's streaming bandwidth, against the memory slice it was tuned on.

Accel-Sim (Khairy et al., ISCA 2020), Section IV: a tuned configuration is judged by
running it as the card. The on-simulator search sets the DRAM channel count on a memory
slice (:mod:`~hilsim.simmodel.tuner.memslice`: ``k`` channels with linear partition
indexing, the card's SMs per channel), so nothing in the search sees the card's own
partition hash or its interconnect carrying every SM and channel. GPGPU-Sim's IPOLY hash
at a channel count that is not a power of two takes the sub-partition modulo the count
(``addrdec.cc``), which loads some channels more than others; a crossbar of every SM and
channel is not the slice's either. After tuning, the cold streaming read
(:func:`~hilsim.microbench.bandwidth.dram_read_slice`) runs on the whole tuned card (every
SM and channel, its own partition indexing) and on the slice, each at two footprints per
channel; the rate is the slope of bytes over simulated cycles between them. One pass is
not enough: on GPGPU-Sim 667834c's SM7_QV100 a read pass on the whole card (80 SMs, 32
channels) takes ~4,100 cycles longer than on its 2-channel, 5-SM slice at 256 KiB and at
512 KiB per channel alike (16,202 vs 12,072 and 26,547 vs 22,426 cycles), so one pass puts
the whole card 25 % or 15 % below the slice by footprint alone, while the slopes agree
within 0.1 %. A whole card's rate off the slice's by more than :data:`TOLERANCE` is
flagged, with the measured target beside both.

Where the L2 clock was searched from a whole GPU's L2 bandwidth, the suite's L2 kernel
(:func:`~hilsim.microbench.bandwidth.l2`: a warm pass, then eight over a quarter of the
L2) runs once more on the whole tuned card (:func:`l2_check`), and a figure off the
measured one by more than the search's own 3 % is flagged: the slice's crossbar carries
a few SMs and channels, the card's every one, and the interconnect and L2 clocks bind
them differently (SM7_QV100, L2 and interconnect at 1x / 2x its clock: the 2-channel,
5-SM slice 1,081 / 1,625 bytes/clk, the whole card 905 / 1,604), and the slice's linear
indexing never shows the card's hash.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

from hilsim.microbench import bandwidth
from hilsim.simmodel.gpgpusim.cards import CardConfig
from hilsim.simmodel.gpgpusim.run import simulations_interruptible
from hilsim.simmodel.gpgpusim.simdevice import GpgpusimDevice, card_device_facts
from hilsim.simmodel.tuner.memslice import MemorySlice

from hilsim.core.errors import HilsimError
from hilsim.core.measurement import Measurement

#: the whole card's streaming bandwidth may differ from its slice's by this fraction
TOLERANCE = 0.05
#: the whole card's L2 bandwidth may differ from the measured one by this fraction (the L2
#: clock search's own tolerance)
L2_TOLERANCE = 0.03
#: bytes read per channel by the shorter pass (the longer reads twice as many): a whole
#: card's pass costs about its channels x the slice's per channel, so a fraction of the
#: tuner's 2 MiB keeps a 40-channel card to minutes
FOOTPRINT_PER_CHANNEL = 128 << 10
#: GPGPU-Sim's partition indexing values
INDEXING_NAMES = {"0": "linear", "1": "XOR", "2": "IPOLY", "3": "pseudo-random",
                  "4": "custom"}


@dataclass(frozen=True)
class StreamingCheck:
    """The whole card's and the slice's streaming rate (GB/s of the whole card: the slope
    between the two passes)."""

    whole_gbps: float
    slice_gbps: float
    channels: int
    sms: int
    indexing: str
    slice_channels: int
    slice_sms: int
    #: the two passes' bytes per channel
    bytes_per_channel: tuple[int, int]
    #: each pass's simulated cycles
    whole_cycles: tuple[float, float]
    slice_cycles: tuple[float, float]
    wall_s: float
    #: the measured ``dram_read_bandwidth`` and whether it is a whole GPU's
    measured_gbps: float | None = None
    measured_whole_gpu: bool = False

    @property
    def ratio(self) -> float:
        """Whole card over slice."""
        return self.whole_gbps / self.slice_gbps

    @property
    def flagged(self) -> bool:
        """The whole card is off its slice by more than :data:`TOLERANCE`."""
        return abs(self.ratio - 1.0) > TOLERANCE

    def line(self) -> str:
        """The console's line."""
        name = INDEXING_NAMES.get(self.indexing, self.indexing)
        text = (f"whole card: streaming read {self.whole_gbps:.1f} GB/s on {self.channels} "
                f"channels and {self.sms} SMs ({name} partition indexing), "
                f"{self.ratio - 1:+.1%} of the {self.slice_gbps:.1f} its "
                f"{self.slice_channels}-channel, {self.slice_sms}-SM slice gives (the slope "
                f"of {self.bytes_per_channel[0] >> 10} and {self.bytes_per_channel[1] >> 10} "
                "KiB per channel)")
        if self.measured_gbps is not None:
            what = "a whole GPU's" if self.measured_whole_gpu else "measured on a slice"
            text += (f"; measured {self.measured_gbps:.1f} ({what}: whole card "
                     f"{self.whole_gbps / self.measured_gbps - 1:+.1%})")
        if self.flagged:
            text += (f": OFF by more than {TOLERANCE:.0%}: the channel count was tuned on "
                     "the slice; the whole card streams at a different rate")
        return text

    def as_dict(self) -> dict[str, Any]:
        """``tune-report.json``'s ``whole_card_streaming``."""
        return {**asdict(self), "ratio": self.ratio, "flagged": self.flagged,
                "tolerance": TOLERANCE, "line": self.line(),
                "indexing_name": INDEXING_NAMES.get(self.indexing, self.indexing)}


def whole_card_device(card: CardConfig, build: Any) -> GpgpusimDevice:
    """``card`` as a memory-slice device of every SM and channel, with the card's own
    partition indexing (a slice's is linear)."""
    channels = int(float(card.option("-gpgpu_n_mem", "1").split()[0]))
    indexing = card.option("-gpgpu_memory_partition_indexing", "0").split()[0]
    return GpgpusimDevice(card, facts=card_device_facts(card), build=build,
                          throughput_sms=card.sm_count, memory_slice_channels=channels,
                          overrides={"-gpgpu_memory_partition_indexing": indexing})


def _slope_gbps(first: Measurement, second: Measurement) -> float:
    """GB/s of the whole card between two passes: the extra bytes over the extra cycles
    (the pass's fixed start and drain cancel), scaled as each pass's figure is."""
    p, q = first.params, second.params
    extra_cycles = q["slice_cycles"] - p["slice_cycles"]
    if q["footprint_bytes"] <= p["footprint_bytes"] or extra_cycles <= 0:
        raise HilsimError(
            "tune --on-simulator: whole-card streaming check: the longer pass read "
            f"{q['footprint_bytes']} B in {q['slice_cycles']} cycles, the shorter "
            f"{p['footprint_bytes']} B in {p['slice_cycles']}: no rate between them")
    per_clk = (q["footprint_bytes"] - p["footprint_bytes"]) / extra_cycles
    scale = p["bytes_per_clk"] / p["slice_bytes_per_clk"]  # the card's channels / the run's
    return per_clk * scale * p["sm_clock_mhz"] / 1e3


def streaming_check(
    card: CardConfig,
    memory_slice: MemorySlice,
    build: Any,
    measured_gbps: float | None = None,
    measured_whole_gpu: bool = False,
    bytes_per_channel: int | None = None,
    runs: list[dict[str, Any]] | None = None,
) -> StreamingCheck:
    """The streaming rate of the whole ``card`` and of ``memory_slice`` of it: each read
    at ``bytes_per_channel`` (default :data:`FOOTPRINT_PER_CHANNEL`; at least one stride
    of the whole card's grid per channel, as a read covers whole strides) and twice that,
    the four simulator processes two at a time; each simulator run is appended to
    ``runs``."""
    def device(whole: bool) -> GpgpusimDevice:
        if whole:
            return whole_card_device(card, build)
        return GpgpusimDevice(card, facts=card_device_facts(card), build=build,
                              throughput_sms=memory_slice.sms,
                              memory_slice_channels=memory_slice.channels)

    # one device per pass (each logs its own runs; the passes run in parallel)
    devices = [device(whole) for whole in (True, True, False, False)]
    whole = devices[0]
    channels = whole.memory_slice_channels
    indexing = whole.overrides["-gpgpu_memory_partition_indexing"]
    # a read covers whole strides of the grid: the shorter pass holds at least one on the
    # whole card, the longer at least two
    stride = -(-bandwidth.grid_stride_bytes(whole) // channels)
    first = max(bytes_per_channel or FOOTPRINT_PER_CHANNEL, stride)
    sizes = (first, 2 * first)
    jobs = list(zip(devices, (*sizes, *sizes), strict=True))

    def one(job: tuple[GpgpusimDevice, int]) -> Measurement:
        dev, n = job
        where = "the whole card" if dev.memory_slice_channels == channels else "the slice"
        try:
            m = bandwidth.dram_read_slice(dev, n)
        except HilsimError as exc:
            raise HilsimError(f"tune --on-simulator: whole-card streaming check on {where}: "
                              f"{exc}") from None
        if not m.valid or not m.value:
            raise HilsimError(f"tune --on-simulator: whole-card streaming check: {where}'s "
                              f"read of {n >> 10} KiB per channel is invalid "
                              f"({m.note or 'no value'})")
        return m

    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=2) as pool, simulations_interruptible():
        # the longest (the whole card's longer pass) first
        order = [1, 0, 3, 2]
        done = dict(zip(order, pool.map(one, [jobs[i] for i in order]), strict=True))
    w1, w2, s1, s2 = (done[i] for i in range(4))
    for dev, _n in jobs:
        for r in dev.runs:
            r["evaluator"] = "whole_card_streaming"
        if runs is not None:
            runs.extend(dev.runs)
    return StreamingCheck(
        _slope_gbps(w1, w2), _slope_gbps(s1, s2), channels, whole.active_sms, indexing,
        memory_slice.channels, devices[2].active_sms, sizes,
        (float(w1.params["slice_cycles"]), float(w2.params["slice_cycles"])),
        (float(s1.params["slice_cycles"]), float(s2.params["slice_cycles"])),
        round(time.monotonic() - t0, 1), measured_gbps, measured_whole_gpu)


@dataclass(frozen=True)
class L2Check:
    """The whole tuned card's L2 bandwidth (bytes/clk) against a whole GPU's measurement."""

    whole_bpc: float
    measured_bpc: float
    channels: int
    sms: int
    l2_mhz: float
    cycles: float
    wall_s: float

    @property
    def relative(self) -> float:
        """Whole card over measured, minus one."""
        return self.whole_bpc / self.measured_bpc - 1.0

    @property
    def flagged(self) -> bool:
        """Off the measured figure by more than :data:`L2_TOLERANCE`."""
        return abs(self.relative) > L2_TOLERANCE

    def line(self) -> str:
        """The console's line."""
        text = (f"whole card: L2 bandwidth {self.whole_bpc:.1f} bytes/clk on {self.channels} "
                f"channels and {self.sms} SMs at L2 {self.l2_mhz:g} MHz, "
                f"{self.relative:+.1%} of the measured {self.measured_bpc:.1f}")
        if self.flagged:
            text += (f": OFF by more than {L2_TOLERANCE:.0%}: the L2 clock was searched on "
                     "the memory slice, whose L2 bandwidth the whole card does not reach")
        return text

    def as_dict(self) -> dict[str, Any]:
        """``tune-report.json``'s ``whole_card_l2``."""
        return {**asdict(self), "relative": self.relative, "flagged": self.flagged,
                "tolerance": L2_TOLERANCE, "line": self.line()}


def l2_check(card: CardConfig, build: Any, measured_bpc: float,
             runs: list[dict[str, Any]] | None = None) -> L2Check:
    """The suite's L2 bandwidth on every SM and channel of ``card`` (its own partition
    indexing) against a whole GPU's ``measured_bpc``."""
    device = whole_card_device(card, build)
    t0 = time.monotonic()
    with simulations_interruptible():
        try:
            m = bandwidth.l2(device)[0]
        except HilsimError as exc:
            raise HilsimError(f"tune --on-simulator: whole-card L2 check: {exc}") from None
    for r in device.runs:
        r["evaluator"] = "whole_card_l2"
    if runs is not None:
        runs.extend(device.runs)
    if not m.valid or not m.value:
        raise HilsimError(f"tune --on-simulator: whole-card L2 check: the read is invalid "
                          f"({m.note or 'no value'})")
    return L2Check(float(m.value), float(measured_bpc), device.memory_slice_channels,
                   device.active_sms,
                   float(card.clock_domains_mhz[2]), float(m.params["slice_cycles"]),
                   round(time.monotonic() - t0, 1))
