"""Warnings about real traces that make sampled estimates mean less than they seem.

One line each, computed with whole-column numpy operations (10M launches: well under
a second; no per-launch Python), written into the bundle's manifest (``warnings``) by
every import (in memory, :mod:`hilsim.formats.read`, or streaming) and printed by
``hilsim import`` / ``plan`` / ``compare``:

* **communication kernels** (NCCL, RCCL, NVSHMEM, c10d collectives) holding a large
  share of kernel time: their durations wait on other ranks and the network, which a
  single-GPU simulator does not model;
* **overlapping kernels** across streams: the sum of kernel durations (what every
  method estimates, STEM section 4.1) exceeds the time the GPU was busy, so an
  estimate of the sum is not the wall time;
* **microsecond timer resolution** (PyTorch profiler / Kineto writes whole µs): short
  launches are quantised, and durations-only methods cluster on the rounding;
* **launch order not real** (wide per-kernel duration tables): the order is
  round-robin by row, so order-based methods (first-n, region methods) and sequence
  checks see a made-up sequence.

The warnings about sampling a trace with a given method (plan time) are the analyzer's
(:mod:`hilsim.analyzer.tracecheck`).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

#: kernel names of inter-GPU communication libraries and collectives
COMMUNICATION = re.compile(
    r"nccl|rccl|msccl|nvshmem|c10d|allreduce|all_reduce|allgather|all_gather|"
    r"reducescatter|reduce_scatter|alltoall|all_to_all|sendrecv",
    re.IGNORECASE,
)
#: share of kernel time in communication kernels above which we warn
COMMUNICATION_SHARE = 0.05
#: sum of durations over busy time above which kernels overlap enough to warn
OVERLAP_RATIO = 1.05
#: share of launches whose duration is a whole number of µs above which the timer
#: is taken to count microseconds
MICROSECOND_SHARE = 0.99


def communication_share(launches: pd.DataFrame) -> tuple[float, int]:
    """Share of kernel time, and number of launches, of communication kernels."""
    names = launches["name"]
    if not isinstance(names.dtype, pd.CategoricalDtype):
        names = names.astype("category")
    categories = names.cat.categories.astype(str)
    hit = np.fromiter((bool(COMMUNICATION.search(c)) for c in categories), bool, len(categories))
    if not hit.any():
        return 0.0, 0
    codes = names.cat.codes.to_numpy()
    mask = np.zeros(len(codes), dtype=bool)
    valid = codes >= 0
    mask[valid] = hit[codes[valid]]
    durations = launches["duration_ns"].to_numpy()
    total = float(durations.sum(dtype=np.float64))
    return (float(durations[mask].sum(dtype=np.float64)) / total if total else 0.0), int(mask.sum())


def busy_time(start_ns: np.ndarray, duration_ns: np.ndarray) -> float:
    """Length of the union of ``[start, start + duration)`` intervals (vectorised:
    sort by start, running maximum of the ends, a new busy block wherever a launch
    starts after every earlier one ended)."""
    if len(start_ns) == 0:
        return 0.0
    start = np.asarray(start_ns, dtype=np.int64)
    duration = np.asarray(duration_ns, dtype=np.int64)
    if not (start[1:] >= start[:-1]).all():  # bundles are in start order already
        order = np.argsort(start, kind="stable")
        start, duration = start[order], duration[order]
    end = start + duration
    if (start[1:] >= end[:-1]).all():  # each launch starts after the one before ended
        return float(duration.sum(dtype=np.float64))
    reach = np.maximum.accumulate(end)
    new_block = np.empty(len(start), dtype=bool)
    new_block[0] = True
    new_block[1:] = start[1:] > reach[:-1]
    first = np.flatnonzero(new_block)
    last = np.append(first[1:] - 1, len(start) - 1)
    return float((reach[last] - start[first]).sum(dtype=np.float64))


def trace_warnings(launches: pd.DataFrame, manifest: dict[str, Any] | None = None) -> list[str]:
    """Warnings about the trace itself (import time), one line each."""
    warnings: list[str] = []
    n = len(launches)
    if n == 0:
        return warnings
    durations = launches["duration_ns"].to_numpy()
    share, count = communication_share(launches)
    if share > COMMUNICATION_SHARE:
        warnings.append(
            f"communication kernels (NCCL etc.) hold {share:.0%} of kernel time "
            f"({count:,} launches): their durations wait on other GPUs and the network, "
            "which a single-GPU simulation does not model; sample and report them apart"
        )
    start = launches.get("start_ns")
    formats = {p.get("format") for p in (manifest or {}).get("profilers", [])}
    wide = "wide-durations-csv" in formats
    if start is not None and not wide and not start.isna().any():
        busy = busy_time(start.to_numpy(dtype=np.int64), durations)
        total = float(durations.sum(dtype=np.float64))
        if busy and total / busy > OVERLAP_RATIO:
            streams = launches["stream"].nunique() if "stream" in launches else 0
            warnings.append(
                f"kernels overlap in time ({streams} streams): the sum of durations is "
                f"{total / busy:.2f}x the time the GPU was busy, so estimates of the summed "
                "kernel time are not the wall time"
            )
    whole_us = float(np.mean(durations % 1000 == 0))
    if whole_us >= MICROSECOND_SHARE:  # a ns timer gives whole µs 0.1% of the time
        short = float(np.mean(durations <= 5_000))
        warnings.append(
            f"{whole_us:.0%} of durations are whole microseconds (a µs timer, e.g. Kineto): "
            f"{short:.0%} of launches last 5 µs or less and are quantised by up to 1 µs"
        )
    if wide:
        warnings.append(
            "the launch order is not real: a wide table of per-kernel durations lists each "
            "kernel's launches in its own column (interleaved round-robin here), so "
            "first-n, region methods and sequence checks see a made-up order"
        )
    return warnings
