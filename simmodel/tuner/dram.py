"""Accel-Sim's DRAM models and timing scaling (``hw_def/common.h``, ``mem_config``).

Accel-Sim paper, Section II-C: the memory options follow from the memory type, the bus
width and the memory clock that the device query reports.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from hilsim.core.errors import HilsimError


class DramModel(NamedTuple):
    """One Accel-Sim DRAM model: channel width, burst length, command frequency ratio."""

    channel_bits: int
    burst_length: int
    command_ratio: int


#: Accel-Sim ``hw_def/common.h`` DRAM models by name
DRAM_MODELS: dict[str, DramModel] = {
    "GDDR5": DramModel(32, 8, 4),
    "GDDR5X": DramModel(32, 8, 4),
    "GDDR6": DramModel(16, 16, 4),
    "HBM": DramModel(128, 2, 2),
}

# reference timings: GDDR5 at 1800 MHz, HBM at 1000 MHz (hw_def/common.h)
_TIMING_KEYS = ("RRD", "RCD", "RAS", "RP", "RC", "CL", "WL", "CDLR", "WR", "CCDL", "RTPL")
_GDDR5_1800 = dict(zip(_TIMING_KEYS, (6, 12, 28, 12, 40, 12, 4, 5, 12, 3, 2), strict=True))
_HBM_1000 = dict(zip(_TIMING_KEYS, (4, 14, 33, 14, 47, 14, 2, 3, 12, 2, 4), strict=True))


def dram_model(kind: str) -> str:
    """Accel-Sim DRAM model for a memory type (HBM2/HBM2e/HBM3 -> HBM, GDDR6X -> GDDR6)."""
    k = kind.upper().replace("-", "")
    if k.startswith("HBM"):
        return "HBM"
    if k.startswith("GDDR6"):
        return "GDDR6"
    if k in DRAM_MODELS:
        return k
    raise HilsimError(f"memory type {kind!r} unknown; expected GDDR5, GDDR5X, GDDR6(X) or HBM*")


def dram_timing(model: str, clock_mhz: float) -> str:
    """``-gpgpu_dram_timing_opt``: the reference timing scaled to the device frequency.

    Accel-Sim ``mem_config``: device frequency = memoryClockRate x 2 / command ratio;
    each timing (except nbk, CCD, nbkgrp) becomes ceil(t x f_dev / f_ref); CCD = burst
    length / command ratio.
    """
    _, burst, ratio = DRAM_MODELS[model]
    dev = clock_mhz * 2 / ratio
    ref_freq, ref = (1000.0, _HBM_1000) if model == "HBM" else (1800.0, _GDDR5_1800)
    t = {k: math.ceil(v * dev / ref_freq - 1e-9) for k, v in ref.items()}
    return (
        f"nbk=16:CCD={burst // ratio}:RRD={t['RRD']}:RCD={t['RCD']}:RAS={t['RAS']}:"
        f"RP={t['RP']}:RC={t['RC']}:CL={t['CL']}:WL={t['WL']}:CDLR={t['CDLR']}:"
        f"WR={t['WR']}:nbkgrp=4:CCDL={t['CCDL']}:RTPL={t['RTPL']}"
    )
