"""Bundle and cluster helpers shared by the sampling methods.

The launch table in ``launch_id`` order, metric columns aligned to it (with a
one-line :class:`~hilsim.core.errors.HilsimError` when a metric does not cover
every launch), threads per launch, per-cluster duration moments computed with
``np.bincount`` (no per-launch Python loop) and the relative error of a
projected total. Parameter checks live in :mod:`hilsim.analyzer.methods.params`.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from hilsim.core.bundle import Bundle
from hilsim.core.errors import HilsimError

#: each launch's executed warp instructions (Nsight Compute): what Sieve stratifies
#: on, Photon's IPC projection, MEGsim's vector entries and first-n's prefix count
INSTRUCTIONS = "smsp__inst_executed.sum"


def ordered_launches(bundle: Bundle, method: str) -> pd.DataFrame:
    """The launch table in ``launch_id`` order; one-line error when it is empty."""
    launches = bundle.launches
    if len(launches) == 0:
        raise HilsimError(f"{method}: the bundle has no launches")
    if not launches["launch_id"].is_monotonic_increasing:
        launches = launches.sort_values("launch_id", kind="stable").reset_index(drop=True)
    return launches


def metric_rows(
    bundle: Bundle, launches: pd.DataFrame, method: str
) -> tuple[pd.DataFrame, np.ndarray]:
    """The metrics table and, for each of its rows, the launch-table row it belongs to.

    One-line errors: no metrics at all, no ``launch_id`` column, duplicate or
    unknown launch ids.
    """
    metrics = bundle.metrics
    if metrics is None or len(metrics) == 0:
        raise HilsimError(
            f"{method}: the bundle has no metrics (metrics.parquet); this method needs "
            "Nsight Compute counters for every launch"
        )
    if "launch_id" not in metrics.columns:
        raise HilsimError(f"{method}: metrics table has no 'launch_id' column")
    ids = metrics["launch_id"].to_numpy(dtype=np.int64)
    launch_ids = launches["launch_id"].to_numpy(dtype=np.int64)
    rows = np.searchsorted(launch_ids, ids)
    bad = (rows >= launch_ids.size) | (launch_ids[np.minimum(rows, launch_ids.size - 1)] != ids)
    if bad.any():
        raise HilsimError(
            f"{method}: metrics: launch_id {int(ids[bad][0])} is not in the launches table"
        )
    counts = np.bincount(rows, minlength=launch_ids.size)
    if (counts > 1).any():
        dup = int(launch_ids[int(np.flatnonzero(counts > 1)[0])])
        raise HilsimError(f"{method}: metrics: duplicate launch_id {dup}")
    return metrics, rows


def aligned_metric(
    bundle: Bundle, launches: pd.DataFrame, metric: str, method: str, why: str
) -> np.ndarray:
    """Column ``metric`` as float64 in launch order; it must cover every launch.

    ``why`` completes the error message (what the method uses the metric for).
    """
    return aligned_metrics(bundle, launches, [metric], method, why)[:, 0]


def aligned_metrics(
    bundle: Bundle, launches: pd.DataFrame, columns: list[str], method: str, why: str
) -> np.ndarray:
    """Columns ``columns`` as an ``(n_launches, len(columns))`` float64 matrix.

    Every launch must have a finite, non-negative value of every column;
    otherwise one line names the metric and how many launches it covers.
    """
    metrics, rows = metric_rows(bundle, launches, method)
    n = len(launches)
    out = np.full((n, len(columns)), np.nan, dtype=np.float64)
    for j, column in enumerate(columns):
        if column not in metrics.columns:
            raise HilsimError(f"{method}: metric {column!r} is not in the bundle's metrics; {why}")
        values = pd.to_numeric(metrics[column], errors="coerce").to_numpy(
            dtype=np.float64, na_value=np.nan
        )
        out[rows, j] = values
        have = np.isfinite(out[:, j])
        if not have.all():
            first = int(launches["launch_id"].iloc[int(np.flatnonzero(~have)[0])])
            raise HilsimError(
                f"{method}: metric {column!r} covers {int(have.sum())} of {n} launches "
                f"(first without it: launch_id {first}); {why}"
            )
        if (out[:, j] < 0).any():
            first = int(launches["launch_id"].iloc[int(np.flatnonzero(out[:, j] < 0)[0])])
            raise HilsimError(f"{method}: metric {column!r} is negative at launch_id {first}")
    return out


def cluster_moments(
    labels: np.ndarray, durations: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Size, mean and population standard deviation of the durations of each label."""
    dur = durations.astype(np.float64)
    sizes = np.bincount(labels, minlength=k).astype(np.int64)
    safe = np.maximum(sizes, 1)
    means = np.bincount(labels, weights=dur, minlength=k) / safe
    dev = dur - means[labels]
    stds = np.sqrt(np.bincount(labels, weights=dev * dev, minlength=k) / safe)
    return sizes, means, stds


def relative_error(projected: float, total: float) -> float:
    """``|projected - total| / |total|`` (0 when both are 0, inf when only the total is)."""
    if total == 0:
        return 0.0 if projected == 0 else math.inf
    return abs(projected - total) / abs(total)


def launch_threads(launches: pd.DataFrame) -> np.ndarray | None:
    """grid x*y*z times block x*y*z per launch (int64), or None when not recorded.

    Launches whose configuration is partly unknown get 0.
    """
    columns = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")
    if any(c not in launches.columns for c in columns):
        return None
    product = np.ones(len(launches), dtype=np.int64)
    known = np.ones(len(launches), dtype=bool)
    for column in columns:
        values = launches[column].to_numpy(dtype=np.float64, na_value=np.nan)
        known &= np.isfinite(values)
        product *= np.where(np.isfinite(values), values, 0).astype(np.int64)
    if not known.any():
        return None
    return np.where(known, product, 0)
