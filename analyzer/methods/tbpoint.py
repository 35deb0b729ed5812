"""TBPoint's inter-launch sampling (Huang et al., IPDPS 2014), as PKA describes and
re-implements it (Avalos Baddouh et al., MICRO'21, sections 2, 3.1 and 5.1).

PKA section 2: TBPoint "performs hierarchical clustering on a feature vector"
of each kernel launch and simulates "the kernel closest to the center of each
group" (STEM+ROOT section 6); PKA section 3.1: hierarchical clustering
"demands an impractical amount of memory and runtime" for millions of kernels;
PKA section 5.1: "In lieu of the hand-tuned threshold setting that TBPoint
originally required, our implementation of TBPoint sweeps across 20 threshold
values between 0.01 and 0.2 and follows the same criteria Principal Kernel
Selection does to decide the best one."

What this module does:

* **Features.** With ``features="auto"`` the PKA Table 2 metrics present for
  every launch (at least one) are used, as in PKA's comparison; otherwise, or
  with ``features="light"``, the launch facts every profile has: grid and block
  sizes, registers, static and dynamic shared memory and the duration. TBPoint
  itself used microarchitecture-independent statistics from functional
  simulation, which a profile does not have; both sets stand in for them. Each
  column is transformed with ``log2(1 + v)`` (counts span orders of magnitude),
  columns constant over all launches are dropped, and the rest are standardised
  (z-scores).
* **Clustering.** Agglomerative clustering, ``scipy.cluster.hierarchy.linkage``
  (``average`` linkage by default, Euclidean distance) cut with ``fcluster(...,
  criterion="distance")``. The threshold is relative: the cut height is
  ``threshold`` times the height of the dendrogram's last merge, so 0.01-0.2 (the
  range PKA sweeps) has the same meaning on any feature scale. (TBPoint's own
  normalisation is not in our corpus; this is our choice.)
* **Sweep** (``threshold_sweep=True``): the 20 thresholds of PKA section 5.1,
  ``linspace(0.01, 0.2, 20)``, from the largest (fewest clusters) down; the first
  whose projected total time (``sum(cluster size * representative time)``) is
  within ``target_error`` (5%) of the profiled total is chosen, as PKS chooses K;
  when none is, the one with the smallest error (noted in the plan).
* **Representative**: the launch closest to its cluster's centroid in the
  standardised feature space (ties: the earliest); weight = cluster size.
* **Memory guard.** ``linkage`` needs the condensed distance matrix,
  ``n(n-1)/2`` float64 values. Above ``memory_limit_gb`` (4 GB: about 32,000
  launches) the method refuses with one line naming the launch count, the bytes it
  would need and the limit (PKA section 3.1's point; use ``pka`` or ``stem``).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from hilsim.analyzer.methods import register
from hilsim.analyzer.methods.base import Method, source_facts
from hilsim.analyzer.methods.params import BOOLEAN, Constraints, Interval, Options
from hilsim.analyzer.methods.pka import LIGHT_INT_COLUMNS
from hilsim.analyzer.methods.support import cluster_moments, ordered_launches, relative_error

from hilsim.core.bundle import Bundle
from hilsim.core.errors import HilsimError
from hilsim.core.metric_names import GRID_SIZE, TABLE2_METRICS
from hilsim.core.plan import Plan, members_by_launch, samples_frame

#: PKA section 5.1: "20 threshold values between 0.01 and 0.2".
SWEEP_THRESHOLDS: tuple[float, ...] = tuple(float(t) for t in np.linspace(0.01, 0.2, 20))
LINKAGES: tuple[str, ...] = (
    "average",
    "complete",
    "single",
    "ward",
    "centroid",
    "median",
    "weighted",
)
FEATURE_SETS: tuple[str, ...] = ("auto", "metrics", "light")
#: light features: the launch facts PKA's two-level classifier uses, plus the duration
LIGHT_COLUMNS: tuple[str, ...] = (*LIGHT_INT_COLUMNS, "duration_ns")


def condensed_bytes(n: int) -> int:
    """Bytes of the condensed float64 distance matrix of ``n`` points."""
    return n * (n - 1) // 2 * 8


def max_launches(memory_limit_bytes: float) -> int:
    """Largest ``n`` whose condensed distance matrix fits in ``memory_limit_bytes``."""
    n = int((1 + math.sqrt(1 + memory_limit_bytes)) / 2) + 2
    while n > 1 and condensed_bytes(n) > memory_limit_bytes:
        n -= 1
    return n


@register
class TBPoint(Method):
    """TBPoint inter-launch sampling: hierarchical clustering, centre representative.

    Args:
        threshold: cut height as a share of the dendrogram's last merge height
            (used when ``threshold_sweep`` is false).
        threshold_sweep: try PKA's 20 thresholds 0.01..0.2 and keep the one with
            fewest clusters whose projected error is within ``target_error``.
        target_error: largest acceptable projected error of the sweep (5%).
        linkage: scipy linkage method (``average`` by default).
        features: ``auto`` (PKA Table 2 metrics when present for every launch,
            else light), ``metrics`` (require them) or ``light``.
        memory_limit_gb: refuse when the condensed distance matrix would exceed
            this many GB (10^9 bytes).
    """

    name: ClassVar[str] = "tbpoint"
    needs: ClassVar[tuple[str, ...]] = ("durations",)
    launch_columns: ClassVar[tuple[str, ...] | None] = LIGHT_INT_COLUMNS
    parameter_constraints: ClassVar[dict[str, Constraints]] = {
        "threshold": [Interval(float, 0, 1)],
        "threshold_sweep": [BOOLEAN],
        "target_error": [Interval(float, 0, 1, closed="neither")],
        "linkage": [Options(*LINKAGES)],
        "features": [Options(*FEATURE_SETS)],
        "memory_limit_gb": [Interval(float, 0, None, closed="neither")],
    }

    def __init__(
        self,
        threshold: float = 0.1,
        threshold_sweep: bool = False,
        target_error: float = 0.05,
        linkage: str = "average",
        features: str = "auto",
        memory_limit_gb: float = 4.0,
    ) -> None:
        self.init_params(locals())

    def plan(self, bundle: Bundle) -> Plan:
        """Cluster ``bundle``'s launches hierarchically and take each cluster's centre launch."""
        launches = ordered_launches(bundle, "tbpoint")
        n = len(launches)
        limit = self.memory_limit_gb * 1e9
        need = condensed_bytes(n)
        if need > limit:
            raise HilsimError(
                f"tbpoint: {n:,} launches need a {need / 1e9:.1f} GB condensed distance matrix "
                f"(n(n-1)/2 x 8 bytes), above memory_limit_gb={self.memory_limit_gb:g} "
                f"(at most {max_launches(limit):,} launches); hierarchical clustering does not "
                "scale (PKA section 3.1): use pka or stem, or raise memory_limit_gb"
            )
        notes: list[str] = []
        raw, used, source = self._features(bundle, launches, notes)
        z, dropped = _standardise(raw)
        durations = launches["duration_ns"].to_numpy(dtype=np.float64)
        total = float(durations.sum())
        heights: np.ndarray | None = None
        tree = None
        if n >= 2 and z.shape[1] > 0:
            from scipy.cluster.hierarchy import linkage

            tree = linkage(z, method=self.linkage, metric="euclidean")
            heights = tree[:, 2]
        thresholds = (
            sorted(SWEEP_THRESHOLDS, reverse=True) if self.threshold_sweep else [self.threshold]
        )
        tried: list[dict[str, Any]] = []
        best: tuple[float, float, np.ndarray, np.ndarray, np.ndarray] | None = None
        chosen = None
        for t in thresholds:
            labels = _cut(tree, heights, t, n)
            sizes, reps = _centre_representatives(z, labels)
            projected = float(np.dot(sizes, durations[reps]))
            error = relative_error(projected, total)
            tried.append({"threshold": t, "clusters": int(sizes.size), "error": error})
            if best is None or error < best[0]:
                best = (error, t, labels, sizes, reps)
            if error <= self.target_error:
                chosen = (error, t, labels, sizes, reps)
                break
        assert best is not None
        if chosen is None and self.threshold_sweep:
            notes.append(
                f"no threshold in 0.01..0.2 reached target_error {self.target_error:g}; chose "
                f"threshold {best[1]:g} with the smallest projected error {best[0]:.4f}"
            )
        error, t, labels, sizes, reps = chosen if chosen is not None else best
        k = int(sizes.size)
        _, means, stds = cluster_moments(labels, durations, k)
        ids = launches["launch_id"].to_numpy(dtype=np.int64)
        names = launches["name"].cat.categories
        codes = launches["name"].cat.codes.to_numpy(dtype=np.int64)
        clusters = [
            {
                "cluster": c,
                "label": str(names[codes[reps[c]]]),
                "size": int(sizes[c]),
                "draws": 1,
                "mean_ns": float(means[c]),
                "std_ns": float(stds[c]),
                "representative": int(ids[reps[c]]),
            }
            for c in range(k)
        ]
        return Plan(
            method=self.name,
            params=self.params(),
            source=source_facts(bundle),
            clusters=clusters,
            samples=samples_frame(ids[reps], sizes, np.arange(k, dtype=np.int64)),
            notes=notes,
            members=members_by_launch(ids, labels),
            diagnostics={
                "n_launches": n,
                "features": source,
                "features_used": used,
                "features_constant_dropped": [used[j] for j in dropped],
                "chosen_threshold": t,
                "cut_height": float(t * heights[-1]) if heights is not None else 0.0,
                "n_clusters": k,
                "projected_total_ns": float(np.dot(sizes, durations[reps])),
                "projected_error": error,
                "error_by_threshold": tried,
                "distance_matrix_bytes": need,
            },
        )

    def _features(
        self, bundle: Bundle, launches: pd.DataFrame, notes: list[str]
    ) -> tuple[np.ndarray, list[str], str]:
        """Raw feature matrix, its column names, and which set it is (metrics/light)."""
        if self.features != "light":
            matrix, used = _table2(bundle, launches)
            if used:
                return matrix, used, "metrics"
            if self.features == "metrics":
                raise HilsimError(
                    "tbpoint: features='metrics' but no PKA Table 2 metric covers every launch "
                    "(profile them with ncu, or use features='light')"
                )
            notes.append(
                "no PKA Table 2 metric covers every launch: clustered on light features "
                "(grid, block, registers, shared memory, duration)"
            )
        columns, used = [], []
        for column in LIGHT_COLUMNS:
            if column not in launches.columns or not launches[column].notna().any():
                continue
            values = launches[column].to_numpy(dtype=np.float64, na_value=0.0)
            columns.append(values)
            used.append(column)
        return np.column_stack(columns), used, "light"


def _table2(bundle: Bundle, launches: pd.DataFrame) -> tuple[np.ndarray, list[str]]:
    """Table 2 metrics that are finite for every launch (grid size derived if needed)."""
    n = len(launches)
    metrics = bundle.metrics
    columns: list[np.ndarray] = []
    used: list[str] = []
    if metrics is not None and len(metrics) and "launch_id" in metrics.columns:
        launch_ids = launches["launch_id"].to_numpy(dtype=np.int64)
        ids = metrics["launch_id"].to_numpy(dtype=np.int64)
        rows = np.searchsorted(launch_ids, ids)
        ok = (rows < n) & (launch_ids[np.minimum(rows, n - 1)] == ids)
        for metric in TABLE2_METRICS:
            if metric not in metrics.columns:
                continue
            values = np.full(n, np.nan)
            column = pd.to_numeric(metrics[metric], errors="coerce")
            values[rows[ok]] = column.to_numpy(dtype=np.float64, na_value=np.nan)[ok]
            if np.isfinite(values).all():
                columns.append(values)
                used.append(metric)
    if used and GRID_SIZE not in used:
        grid = np.ones(n)
        for axis in ("grid_x", "grid_y", "grid_z"):
            if axis not in launches.columns:
                grid = None
                break
            grid = grid * launches[axis].to_numpy(dtype=np.float64, na_value=np.nan)
        if grid is not None and np.isfinite(grid).all():
            columns.append(grid)
            used.append(GRID_SIZE)
    if not used:
        return np.empty((n, 0)), []
    return np.column_stack(columns), used


def _standardise(raw: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """log2(1 + |v|) with sign, constant columns dropped, then z-scores."""
    x = np.sign(raw) * np.log2(1.0 + np.abs(raw))
    spread = x.std(axis=0) if x.shape[0] else np.zeros(x.shape[1])
    keep = spread > 0
    dropped = [int(j) for j in np.flatnonzero(~keep)]
    x = x[:, keep]
    z = (x - x.mean(axis=0)) / spread[keep]
    return np.ascontiguousarray(z), dropped


def _cut(tree: np.ndarray | None, heights: np.ndarray | None, t: float, n: int) -> np.ndarray:
    """Cluster label (0..k-1, numbered by first launch) of every launch at relative height t."""
    if tree is None or heights is None or heights[-1] <= 0:
        return np.zeros(n, dtype=np.int64)
    from scipy.cluster.hierarchy import fcluster

    raw = fcluster(tree, t=t * float(heights[-1]), criterion="distance").astype(np.int64) - 1
    k = int(raw.max()) + 1
    first = np.full(k, n, dtype=np.int64)
    np.minimum.at(first, raw, np.arange(n, dtype=np.int64))
    remap = np.empty(k, dtype=np.int64)
    remap[np.argsort(first, kind="stable")] = np.arange(k, dtype=np.int64)
    return remap[raw]


def _centre_representatives(z: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cluster sizes and, per cluster, the row closest to its centroid (ties: earliest)."""
    k = int(labels.max()) + 1
    sizes = np.bincount(labels, minlength=k).astype(np.int64)
    n = labels.size
    if z.shape[1] == 0:
        first = np.full(k, n, dtype=np.int64)
        np.minimum.at(first, labels, np.arange(n, dtype=np.int64))
        return sizes, first
    centroids = np.empty((k, z.shape[1]))
    for j in range(z.shape[1]):  # loop over feature columns, not launches
        centroids[:, j] = np.bincount(labels, weights=z[:, j], minlength=k) / sizes
    diff = z - centroids[labels]
    dist = np.einsum("ij,ij->i", diff, diff)
    order = np.lexsort((np.arange(n), dist, labels))
    firsts = order[np.r_[True, np.diff(labels[order]) != 0]]
    reps = np.empty(k, dtype=np.int64)
    reps[labels[firsts]] = firsts
    return sizes, reps
