"""Cache geometry from latency curves (pure numpy, no GPU).

Accel-Sim's tuner derives cache configuration from microbenchmarks (Khairy et al.,
ISCA 2020, Section II-C; Section IV: L1/L2 geometry per generation). The classic
method is the pointer chase over growing footprints (Wong et al., ISPASS 2010; Mei &
Chu, TPDS 2017): latency is flat while the footprint fits a cache level and steps up
when it no longer does.

* :func:`detect_plateaus` segments a latency-vs-footprint curve into flat levels.
* :func:`cache_levels` turns the plateaus into capacities (L1 = end of the first
  plateau, L2 = end of the last plateau before the memory plateau).
* :func:`line_size_from_stride_sweep`: the smallest stride at which every access
  misses, from a mean-latency-vs-stride curve.
* :func:`fine_grained_granularity`: the period of misses in a per-access latency trace
  (Mei & Chu's fine-grained chase), per latency level.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Plateau:
    """A run of consecutive sweep points whose latencies agree within a tolerance.

    ``first``/``last`` index the sweep; ``last_footprint`` is the largest footprint seen
    on the plateau, ``next_footprint`` the next footprint of the sweep (``None`` at the
    end): a capacity lies in ``[last_footprint, next_footprint)``.
    """

    first: int
    last: int
    latency: float
    first_footprint: float
    last_footprint: float
    next_footprint: float | None

    @property
    def points(self) -> int:
        """Number of sweep points on the plateau."""
        return self.last - self.first + 1


@dataclass(frozen=True)
class CacheLevels:
    """Capacities read off a footprint sweep (bytes; ``None`` when not found)."""

    plateaus: list[Plateau]
    l1_bytes: float | None
    l1_upper_bytes: float | None
    l2_bytes: float | None
    l2_upper_bytes: float | None
    l1_latency: float | None
    l2_latency: float | None
    memory_latency: float | None


def _check_curve(x: np.ndarray, y: np.ndarray) -> None:
    if x.ndim != 1 or x.shape != y.shape:
        raise ValueError("footprints and latencies must be 1-D and the same length")
    if x.size and np.any(np.diff(x) <= 0):
        raise ValueError("footprints must be strictly increasing")
    if np.any(~np.isfinite(y)) or np.any(y <= 0):
        raise ValueError("latencies must be finite and positive")


def detect_plateaus(
    footprints: np.ndarray | list[float],
    latencies: np.ndarray | list[float],
    rel_tol: float = 0.10,
    min_points: int = 3,
) -> list[Plateau]:
    """Flat levels of a latency curve, in footprint order.

    Greedy segmentation in log-latency: a segment grows while the next point is within
    ``rel_tol`` of the segment's median; a segment with at least ``min_points`` points
    is a plateau, shorter ones are the transition between levels. Adjacent plateaus
    whose latencies agree within ``rel_tol`` are merged (noise inside one level).
    """
    x = np.asarray(footprints, dtype=float)
    y = np.asarray(latencies, dtype=float)
    _check_curve(x, y)
    log_tol = math.log1p(rel_tol)
    logy = np.log(y)
    segments: list[tuple[int, int]] = []
    start = 0
    n = len(y)
    while start < n:
        end = start
        while end + 1 < n and abs(logy[end + 1] - np.median(logy[start : end + 1])) <= log_tol:
            end += 1
        segments.append((start, end))
        start = end + 1
    kept = [s for s in segments if s[1] - s[0] + 1 >= min_points]
    merged: list[tuple[int, int]] = []
    for seg in kept:
        if merged:
            prev = merged[-1]
            gap_is_flat = all(
                abs(logy[i] - np.median(logy[prev[0] : prev[1] + 1])) <= log_tol
                for i in range(prev[1] + 1, seg[0])
            )
            same_level = (
                abs(np.median(logy[seg[0] : seg[1] + 1]) - np.median(logy[prev[0] : prev[1] + 1]))
                <= log_tol
            )
            if same_level and gap_is_flat:
                merged[-1] = (prev[0], seg[1])
                continue
        merged.append(seg)
    return [
        Plateau(
            first=a,
            last=b,
            latency=float(np.median(y[a : b + 1])),
            first_footprint=float(x[a]),
            last_footprint=float(x[b]),
            next_footprint=float(x[b + 1]) if b + 1 < n else None,
        )
        for a, b in merged
    ]


def cache_levels(
    footprints: np.ndarray | list[float],
    latencies: np.ndarray | list[float],
    rel_tol: float = 0.10,
    min_points: int = 3,
    ends_in_memory: bool = True,
) -> CacheLevels:
    """L1 and L2 capacity (and plateau latencies) from a footprint sweep.

    With ``ends_in_memory`` (the suite sweeps to several times the L2 size) the last
    plateau is DRAM: L1 is the first plateau and L2 the last cache plateau before DRAM.
    Intermediate plateaus (H100's far L2 partition; a TLB step) are kept in
    ``plateaus``; on H100 the L2 capacity is therefore the whole L2, and the near
    partition shows up as an extra plateau. ``l2_latency`` is the first plateau after
    L1 (the ordinary L2 hit, Accel-Sim's ``l2_lat``). Capacities are lower bounds, the
    ``*_upper_bytes`` the next sweep point (the true size lies in between).
    """
    plateaus = detect_plateaus(footprints, latencies, rel_tol=rel_tol, min_points=min_points)
    caches = plateaus[:-1] if ends_in_memory and len(plateaus) >= 2 else list(plateaus)
    memory = plateaus[-1] if ends_in_memory and len(plateaus) >= 2 else None
    l1 = caches[0] if caches else None
    l2 = caches[-1] if len(caches) >= 2 else None
    return CacheLevels(
        plateaus=plateaus,
        l1_bytes=l1.last_footprint if l1 else None,
        l1_upper_bytes=l1.next_footprint if l1 else None,
        l2_bytes=l2.last_footprint if l2 else None,
        l2_upper_bytes=l2.next_footprint if l2 else None,
        l1_latency=l1.latency if l1 else None,
        l2_latency=caches[1].latency if l2 else None,
        memory_latency=memory.latency if memory else None,
    )


def line_size_from_stride_sweep(
    strides: np.ndarray | list[float],
    latencies: np.ndarray | list[float],
    frac: float = 0.9,
) -> float | None:
    """The fetch granularity from a stride sweep: smallest stride where all accesses miss.

    In a sequential chase with stride ``s`` over a footprint that does not fit the
    cache, one access in ``line / s`` misses, so the mean latency rises with ``s`` until
    ``s`` reaches the line (on NVIDIA L1: the 32 B sector) and is flat after. Returns
    the smallest stride whose latency reaches ``frac`` of the way from the lowest to the
    highest latency of the sweep, ``None`` for a flat curve.
    """
    s = np.asarray(strides, dtype=float)
    y = np.asarray(latencies, dtype=float)
    _check_curve(s, y)
    low, high = float(y.min()), float(y.max())
    if s.size < 2 or high <= low * 1.05:
        return None
    threshold = low + frac * (high - low)
    return float(s[np.argmax(y >= threshold)])


def fine_grained_granularity(
    latencies: np.ndarray | list[float],
    elem_bytes: int,
    level_gap: float = 1.5,
    skip_first: bool = True,
) -> list[tuple[float, int]]:
    """Miss periods in a per-access latency trace of a unit-stride chase (Mei & Chu).

    The distinct latency levels are found by sorting the values and cutting where one
    exceeds the previous by ``level_gap`` x. For each level boundary the accesses at or
    above it are "misses of that level"; the most common distance between consecutive
    misses times ``elem_bytes`` is that level's fetch granularity. Returns
    ``[(boundary latency, granularity bytes), ...]`` from the lowest boundary up. The
    first access (cold TLB and caches) is skipped by default.
    """
    y = np.asarray(latencies, dtype=float)
    if skip_first:
        y = y[1:]
    values = np.sort(y)
    boundaries = [
        float(values[i]) for i in range(1, len(values)) if values[i] > level_gap * values[i - 1]
    ]
    result: list[tuple[float, int]] = []
    for bound in boundaries:
        positions = np.flatnonzero(y >= bound)
        if positions.size < 2:
            continue
        gaps, counts = np.unique(np.diff(positions), return_counts=True)
        result.append((bound, int(gaps[np.argmax(counts)]) * int(elem_bytes)))
    return result
