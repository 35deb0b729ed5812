"""The memory slice the on-simulator tuner measures L2 and DRAM bandwidth on.

Accel-Sim (Khairy et al., ISCA 2020), Section II-C: each bandwidth option follows from a
streaming microbenchmark. Simulating every channel of a candidate costs a cycle of
every channel and L2 bank per simulated cycle, so the tuner streams on a slice of
``k`` channels (linear partition indexing) and divides the slice's bandwidth by ``k``.
A slice's L2 bandwidth is bound by the requests its SMs keep in flight (Little's law:
on SM90_H100 3,353 bytes/clk per channel with 3 SMs, 4,276 with 4), so the slice must
carry the card's SMs per channel: one channel with ``round(SMs / channels)`` SMs gives
2 for a V100's 2.5 (-20 %) and 1 for an A100's 0.42 (+137 %). :func:`choose_slice`
takes the fewest channels whose whole-cluster SM count holds the card's ratio within a
tolerance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from hilsim.core.errors import HilsimError

#: the largest slice, in channels: each simulated cycle steps every channel and its L2
#: banks, and the slice's SMs grow with it
MAX_SLICE_CHANNELS = 16
#: how far the slice's SMs per channel may be from the card's
RATIO_TOLERANCE = 0.05


@dataclass(frozen=True)
class MemorySlice:
    """A slice of ``channels`` memory channels driven by ``sms`` SMs, for a card of
    ``card_sms`` SMs over ``card_channels`` channels."""

    channels: int
    sms: int
    card_sms: int
    card_channels: int
    #: where the slice came from (the card's ratio, or the measurement's own slice)
    source: str = "the card's SMs per channel"

    @property
    def sms_per_channel(self) -> float:
        """The slice's SMs per channel."""
        return self.sms / self.channels

    @property
    def card_sms_per_channel(self) -> float:
        """The card's SMs per channel."""
        return self.card_sms / self.card_channels

    @property
    def ratio_error(self) -> float:
        """The slice's SMs per channel relative to the card's, minus 1."""
        return self.sms_per_channel / self.card_sms_per_channel - 1.0

    def as_dict(self) -> dict[str, Any]:
        """The slice as ``tune-report.json`` records it."""
        return {
            "channels": self.channels,
            "sms": self.sms,
            "sms_per_channel": round(self.sms_per_channel, 4),
            "card_sms": self.card_sms,
            "card_channels": self.card_channels,
            "card_sms_per_channel": round(self.card_sms_per_channel, 4),
            "ratio_error": round(self.ratio_error, 4),
            "source": self.source,
        }

    def line(self) -> str:
        """The console's line."""
        return (f"memory slice: {self.channels} channel{'s' if self.channels > 1 else ''}, "
                f"{self.sms} SMs ({self.sms_per_channel:.3g} SMs per channel; the card's "
                f"{self.card_sms}/{self.card_channels} = {self.card_sms_per_channel:.3g}, "
                f"{100 * self.ratio_error:+.1f} %; {self.source})")


def _half_up(x: float) -> int:
    return math.floor(x + 0.5)


def choose_slice(
    sms: int,
    channels: int,
    per_cluster: int = 1,
    *,
    tolerance: float = RATIO_TOLERANCE,
    max_channels: int = MAX_SLICE_CHANNELS,
) -> MemorySlice:
    """The slice of the fewest channels ``k`` (at most ``max_channels`` and the card's)
    whose ``round(k x sms / channels)`` SMs, in whole clusters of ``per_cluster``, are
    within ``tolerance`` of the card's SMs per channel; where none is, the ``k`` nearest
    (the fewest channels among equals), its residual error in
    :attr:`MemorySlice.ratio_error`."""
    if sms < 1 or channels < 1 or per_cluster < 1:
        raise HilsimError(f"memory slice of {sms} SMs over {channels} channels in clusters of "
                          f"{per_cluster}: each must be at least 1")
    ratio = sms / channels
    best: MemorySlice | None = None
    for k in range(1, min(channels, max(1, max_channels)) + 1):
        k_sms = per_cluster * max(1, _half_up(k * ratio / per_cluster))
        cand = MemorySlice(k, k_sms, sms, channels)
        if abs(cand.ratio_error) <= tolerance:
            return cand
        if best is None or abs(cand.ratio_error) < abs(best.ratio_error):
            best = cand
    assert best is not None
    return MemorySlice(best.channels, best.sms, sms, channels,
                       f"the card's SMs per channel, nearest within {best.channels} channels")
