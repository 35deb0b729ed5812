"""Per-SM rates from per-block clock records (Accel-Sim Section II-C: the per-SM unit and
bandwidth figures its tuner reads).

Throughput kernels record, per block, ``(smid, clock start, clock end)``; the clock is a
per-SM counter (``clock64`` on a GPU, ``%clock`` on GPGPU-Sim), so spans are only
comparable within one SM.
"""

from __future__ import annotations

import math

import numpy as np


def per_sm_spans(records: np.ndarray) -> list[int]:
    """For every SM seen (ascending id): ``max(end) - min(start)`` over its blocks."""
    rec = np.asarray(records, dtype=np.int64).reshape(-1, 3)
    return [
        int(rec[rec[:, 0] == sm, 2].max() - rec[rec[:, 0] == sm, 1].min())
        for sm in np.unique(rec[:, 0])
    ]


def per_sm_rate(records: np.ndarray, work_per_block: float) -> tuple[float, int]:
    """Work per SM clock from per-block ``(smid, clock start, clock end)`` records.

    For every SM the blocks it ran are grouped, and the SM's rate is their total work over
    ``max(end) - min(start)``. Returns (median rate over SMs, number of SMs seen).
    Robust to the block scheduler putting several blocks (or none) on an SM.
    """
    rec = np.asarray(records, dtype=np.int64).reshape(-1, 3)
    rates = []
    for sm in np.unique(rec[:, 0]):
        rows = rec[rec[:, 0] == sm]
        span = int(rows[:, 2].max() - rows[:, 1].min())
        if span > 0:
            rates.append(work_per_block * len(rows) / span)
    if not rates:
        return math.nan, 0
    return float(np.median(rates)), len(rates)
