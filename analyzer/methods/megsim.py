"""MEGsim: representative regions (frames, iterations) by k-means + BIC.

After Ortiz, Corbalán-Navarro, Aragón and González, "MEGsim: A Novel
Methodology for Efficient Simulation of Graphics Workloads in GPUs". MEGsim
picks a few representative *frames* of a video sequence; hilsim applies the
same procedure to any repeated unit a profile marks with NVTX ranges (a training
iteration, an inference request, a frame).

The procedure (paper section III):

1. **Vector of characteristics** (III-B, Fig. 2). Per frame, the count of every
   shader multiplied by its instructions (VSCV, FSCV) plus the primitive count
   (PRIM). In hilsim, per region: one column per kernel (full ``name``), the
   sum over the region's launches of that kernel of

   * ``smsp__inst_executed.sum`` when the bundle's metrics have it (a launch
     without a value takes the mean of its kernel's profiled launches; when a
     kernel in the regions has no profiled launch at all the basis falls back to
     durations and a note says so),
   * else ``duration_ns``,
   * else (``weight="count"``) 1 per launch, the plain execution count;

   plus optional ``scalars`` (launch or metric columns summed per region, one
   group each: hilsim's analogue of PRIM).
2. **Group normalisation** (III-C). "A per-column normalization is performed by
   adding all the values within each group of characteristics which are then
   weighted accordingly": we divide each group's block by the sum of all its
   values (every region, every column of the group) and multiply it by the
   group's weight, so each group carries its weight's share of the total mass.
   MEGsim's weights are 0.108 / 0.745 / 0.147 for VSCV / FSCV / PRIM
   (:data:`MEGSIM_GROUP_WEIGHTS`; used for frame tables with those groups). For
   bundles the default is equal weights over the groups (the kernel vector, then
   each scalar), overridable with ``group_weights``.
3. **Similarity** (III-D): Euclidean distance between vectors.
4. **Clustering** (III-E): k-means (eq. 4) for K = 1, 2, ...; the representative
   of a cluster is the member closest to the centroid (ties: the earliest);
   its statistics are scaled by the cluster size.
5. **Scoring** (III-F): BIC (eq. 5) ``l - p/2 log R`` with ``p = K (d + 1)`` and
   the likelihood of eq. (6)
   ``sum_n R_n log R_n - R log R - R d/2 log(2 pi sigma^2) - d/2 (R - K)``,
   ``sigma^2 = WCSS / (d (R - K))`` (the per-dimension variance estimate that
   makes eq. 6's last term exact; Pelleg & Moore's x-means as corrected in the
   paper's ref. [29]). K grows until the BIC falls below the previous one
   (``patience`` consecutive falls; the paper uses 1) or ``k_max``; the chosen
   clustering is the smallest K whose BIC reaches ``T`` = 0.85 of the spread
   between the smallest and largest BIC seen. Two guards the paper does not
   need: K never exceeds the number of distinct vectors or ``R - 1`` (eq. 6
   needs ``R > K``), and ``sigma^2`` is floored at 1e-12 of its K = 1 value so a
   perfect clustering (identical members) scores a finite BIC.

Regions in a bundle (which regions are "frames")
-------------------------------------------------
* ``region_depth=d``: every NVTX range at nesting depth ``d``;
  ``region_pattern=REGEX``: every range whose ``path`` matches (``re.search``);
  both: ranges meeting both. A selected range whose path lies under another
  selected path (``a/b`` under ``a``) is dropped: the outermost kind wins.
* Default: the depth whose ranges contain the most launches among the depths
  with at least ``min_regions`` (4) ranges, ties to the shallowest; since
  deeper ranges sit inside shallower ones this is the shallowest depth that has
  ``min_regions`` ranges (a single top-level "train" range around the whole run
  is skipped for the per-step ranges below it). No depth qualifying: the depth
  with most ranges, with a note.
* **Which instance a launch belongs to.** A launch's ``region`` column is its
  innermost NVTX path (the importer derives it exactly from the CPU-side launch
  call). A launch is in the selected kind when its path is, or lies under, a
  selected path. Its instance is the latest selected range of that path that
  started at or before (a) the start of the launch's innermost range, when the
  launches table carries that range's ``region_id`` (exact: both are CPU times),
  else (b) the kernel's GPU ``start_ns``. Rule (b) is exact when the GPU keeps
  up with the host within a range's length; when kernels queue longer than a
  range lasts (short API-level ranges such as cuBLAS calls) some are credited
  to a later instance of the same path; the diagnostics name the rule used.
* Regions with no launch are kept (a frame with no GPU work is still a frame).

The plan (``unit="region"``)
----------------------------
Samples are *every launch of each representative region*, each weighted by its
cluster's size in regions, so ``estimate = sum(weight * value)`` over launches
is MEGsim's projection ``sum_c |c| * value(representative of c)``.
Launches outside every selected region (``outside``):

* ``"simulate"`` (default): they form one extra cluster ("outside regions")
  simulated whole, weight 1 — the estimate covers the whole run;
* ``"drop"``: the plan represents only the launches inside regions (a note
  says how many are left out; the weights then sum to the region count);
* ``"error"``: refuse the bundle if any launch lies outside.

The evaluation harness may repeat MEGsim over seeds (``stochastic``): the paper
evaluates it over 100 k-means initialisations (section V-C).

Frame tables (graphics simulators)
----------------------------------
:func:`read_frame_table` reads a per-frame CSV (one row per frame: a frame id
column named ``frame``/``frame_id`` or else the first column, then numeric
feature columns) and :func:`megsim_frames` chooses frames and weights. Column
naming convention for the groups: ``vs_<shader>`` (VSCV), ``fs_<shader>``
(FSCV), ``prim`` or ``prim_<x>`` (PRIM), case-insensitive, ``:`` or ``.``
accepted instead of ``_``; any ``<group>:<name>`` column is in ``<group>``
(e.g. ``ms:meshA`` for mesh shaders); any other column is a group of its own.
A table whose groups are all among vs/fs/prim gets MEGsim's weights; others get
equal weights unless ``group_weights`` names every group.
"""

from __future__ import annotations

import math
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from hilsim.analyzer.methods import register
from hilsim.analyzer.methods.base import Method, source_facts
from hilsim.analyzer.methods.params import (
    SEED,
    Constraints,
    Interval,
    InvalidParameter,
    Names,
    Options,
    Regex,
    StrMapping,
    check_params,
)

from hilsim.core.bundle import Bundle
from hilsim.core.errors import HilsimError
from hilsim.core.plan import Plan, members_by_launch, samples_frame

#: MEGsim section III-C: power shares of the Geometry (vertex shaders), Raster
#: (fragment shaders) and Tiling (primitives) stages, used as group weights.
MEGSIM_GROUP_WEIGHTS: dict[str, float] = {"vs": 0.108, "fs": 0.745, "prim": 0.147}
#: MEGsim section III-F: the chosen clustering reaches this share of the BIC spread.
BIC_THRESHOLD = 0.85
INSTRUCTIONS = "smsp__inst_executed.sum"
WEIGHTS: tuple[str, ...] = ("auto", "instructions", "duration", "count")
OUTSIDE: tuple[str, ...] = ("simulate", "drop", "error")
KERNELS_GROUP = "kernels"
#: ``sigma^2`` floor, relative to its K = 1 value (keeps a perfect fit's BIC finite).
SIGMA2_FLOOR = 1e-12
#: the launch columns that place a launch in a region instance (module doc)
REGION_LAUNCH_COLUMNS: tuple[str, ...] = ("region", "region_id", "start_ns")
#: constraints of the k-means + BIC search, shared by bundles and frame tables
SEARCH_CONSTRAINTS: dict[str, Constraints] = {
    "threshold": [Interval(float, 0, 1)],
    "k_max": [Interval(int, 1, None)],
    "n_init": [Interval(int, 1, None)],
    "patience": [Interval(int, 1, None)],
    "seed": [SEED],
}
_FRAME_ID_COLUMNS = ("frame", "frame_id", "frame_idx", "frame_index")
_GROUP_PREFIX = re.compile(r"^(vs|fs|prim)(?:[_:.]|$)", re.IGNORECASE)


# ---------------------------------------------------------------- clustering
@dataclass
class Clustering:
    """Outcome of MEGsim's k-means + BIC search (section III-E/F).

    Attributes:
        labels: cluster of every row, 0..k-1, numbered by first member (row order).
        sizes: rows per cluster.
        representatives: row of each cluster's member closest to its centroid.
        distances: Euclidean distance of each representative to its centroid.
        k: the chosen number of clusters.
        bic: BIC score (eq. 5) of every K tried.
        bic_cut: the score the chosen K had to reach (``min + T * spread``).
    """

    labels: np.ndarray
    sizes: np.ndarray
    representatives: np.ndarray
    distances: np.ndarray
    k: int
    bic: dict[int, float]
    bic_cut: float


def group_normalise(
    features: np.ndarray, column_group: np.ndarray, weights: np.ndarray
) -> np.ndarray:
    """MEGsim section III-C: each group's block divided by its total, times its weight.

    ``column_group[j]`` is the group index of column ``j``; ``weights[g]`` the
    weight of group ``g``. A group whose values are all zero stays zero.
    """
    features = np.asarray(features, dtype=np.float64)
    column_group = np.asarray(column_group, dtype=np.int64)
    totals = np.bincount(column_group, weights=features.sum(axis=0), minlength=len(weights))
    scale = np.divide(
        np.asarray(weights, dtype=np.float64),
        totals,
        out=np.zeros(len(weights)),
        where=totals > 0,
    )
    return features * scale[column_group]


def _centroids(x: np.ndarray, labels: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    sizes = np.bincount(labels, minlength=k)
    sums = np.zeros((k, x.shape[1]))
    np.add.at(sums, labels, x)
    return sums / np.maximum(sizes, 1)[:, None], sizes


def bic_score(x: np.ndarray, labels: np.ndarray, k: int, sigma2_floor: float = 0.0) -> float:
    """MEGsim eq. (5)-(6): ``l(D) - K (d + 1) / 2 * log R`` of a clustering of ``x``.

    ``sigma^2 = WCSS / (d (R - K))`` (floored at ``sigma2_floor``); requires
    ``R > K``. Returns ``+inf`` for a perfect fit without a floor.
    """
    r, d = x.shape
    centroids, sizes = _centroids(x, labels, k)
    wcss = float(np.sum((x - centroids[labels]) ** 2))
    sigma2 = max(wcss / (d * (r - k)), sigma2_floor)
    if sigma2 <= 0.0:
        return math.inf
    rn = sizes[sizes > 0].astype(np.float64)
    likelihood = (
        float(np.sum(rn * np.log(rn)))
        - r * math.log(r)
        - r * d / 2.0 * math.log(2.0 * math.pi * sigma2)
        - d / 2.0 * (r - k)
    )
    return likelihood - k * (d + 1) / 2.0 * math.log(r)


def _kmeans(x: np.ndarray, k: int, n_init: int, seed: int) -> np.ndarray:
    if k == 1:
        return np.zeros(x.shape[0], dtype=np.int64)
    from sklearn.cluster import KMeans
    from sklearn.exceptions import ConvergenceWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = KMeans(n_clusters=k, n_init=n_init, random_state=seed).fit(x)
    return np.asarray(model.labels_, dtype=np.int64)


def megsim_cluster(
    features: np.ndarray,
    *,
    threshold: float = BIC_THRESHOLD,
    k_max: int = 50,
    n_init: int = 3,
    seed: int = 0,
    patience: int = 1,
) -> Clustering:
    """MEGsim sections III-E/F on the (already normalised) row vectors ``features``.

    K = 1, 2, ... until the BIC falls ``patience`` times in a row below its
    predecessor (or K reaches ``k_max``, the number of distinct rows or R - 1);
    the smallest K whose BIC is at least ``min + threshold * (max - min)`` wins.
    """
    x = np.asarray(features, dtype=np.float64)
    r = x.shape[0]
    if r == 0:
        raise HilsimError("megsim: nothing to cluster (no regions or frames)")
    if x.ndim != 2 or x.shape[1] == 0:
        x = np.zeros((r, 1))
    d = x.shape[1]
    total = float(np.sum((x - x.mean(axis=0)) ** 2))
    distinct = int(np.unique(x, axis=0).shape[0])
    k_limit = max(1, min(int(k_max), distinct, r - 1))
    floor = SIGMA2_FLOOR * total / (d * (r - 1)) if r > 1 else 0.0
    fits: dict[int, np.ndarray] = {}
    bic: dict[int, float] = {}
    falls = 0
    for k in range(1, k_limit + 1 if total > 0 else 2):
        labels = _kmeans(x, k, n_init, seed)
        fits[k] = labels
        bic[k] = bic_score(x, labels, k, floor) if r > k else 0.0
        if k > 1 and bic[k] < bic[k - 1]:
            falls += 1
            if falls >= patience:
                break
        else:
            falls = 0
    scores = np.array(list(bic.values()))
    lo, hi = float(scores.min()), float(scores.max())
    cut = lo + threshold * (hi - lo)
    chosen = min(k for k, score in bic.items() if score >= cut) if hi > lo else 1
    labels = _chronological(fits[chosen])
    centroids, sizes = _centroids(x, labels, chosen)
    dist2 = np.sum((x - centroids[labels]) ** 2, axis=1)
    order = np.lexsort((np.arange(r), dist2, labels))
    firsts = order[np.r_[True, np.diff(labels[order]) != 0]]
    return Clustering(
        labels=labels,
        sizes=sizes,
        representatives=firsts.astype(np.int64),
        distances=np.sqrt(dist2[firsts]),
        k=chosen,
        bic=bic,
        bic_cut=cut,
    )


def _chronological(labels: np.ndarray) -> np.ndarray:
    """Renumber clusters by their first row (cluster 0 holds row 0)."""
    uniq, first = np.unique(labels, return_index=True)
    rank = np.empty(int(uniq.max()) + 1, dtype=np.int64)
    rank[uniq[np.argsort(first)]] = np.arange(uniq.size)
    return rank[labels]


# --------------------------------------------------------------- frame tables
def column_groups(columns: list[str]) -> list[str]:
    """Group of each frame-table column (module doc, "Frame tables")."""
    groups: list[str] = []
    for column in columns:
        text = str(column).strip()
        match = _GROUP_PREFIX.match(text)
        if match:
            groups.append(match.group(1).lower())
        elif ":" in text:
            groups.append(text.split(":", 1)[0].strip().lower())
        else:
            groups.append(text)
    return groups


def read_frame_table(path: str | Path) -> pd.DataFrame:
    """Read a per-frame feature CSV: a ``frame`` column first, then numeric features.

    The frame id column is the one named ``frame``/``frame_id``/``frame_idx``/
    ``frame_index`` (case-insensitive), else the first column. Feature values
    must be finite and non-negative; one-line errors name the column and row.
    """
    source = Path(path)
    try:
        table = pd.read_csv(source)
    except FileNotFoundError as exc:
        raise HilsimError(f"{source}: no such frame table") from exc
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise HilsimError(f"{source}: not a readable CSV ({exc})") from exc
    table.columns = [str(c).strip() for c in table.columns]
    lower = [c.lower() for c in table.columns]
    id_column = next(
        (table.columns[lower.index(name)] for name in _FRAME_ID_COLUMNS if name in lower),
        table.columns[0],
    )
    features = [c for c in table.columns if c != id_column]
    if not features:
        raise HilsimError(f"{source}: no feature columns besides the frame id {id_column!r}")
    if len(table) == 0:
        raise HilsimError(f"{source}: no frames")
    if table[id_column].isna().any() or table[id_column].duplicated().any():
        bad = table[id_column].isna() | table[id_column].duplicated()
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise HilsimError(
            f"{source}: row {row}: frame id {table[id_column].iloc[row]!r} missing or duplicated"
        )
    out = pd.DataFrame({"frame": table[id_column].to_numpy()})
    for column in features:
        values = pd.to_numeric(table[column], errors="coerce").to_numpy(dtype=np.float64)
        bad = ~np.isfinite(values) | (values < 0)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise HilsimError(
                f"{source}: row {row}, column {column!r}: {table[column].iloc[row]!r} is not "
                "a finite non-negative number"
            )
        out[column] = values
    return out


@dataclass
class FrameSelection:
    """MEGsim's choice over a frame table: representative frames and their weights.

    Attributes:
        frames: one row per cluster: ``frame`` (id of the representative),
            ``weight`` (frames it stands for), ``cluster``, ``row`` (table row).
        labels: cluster of every frame, in table row order.
        clusters: per-cluster records (size, representative, distance).
        k: number of clusters chosen.
        bic: BIC score of every K tried.
        groups: group name -> its columns.
        group_weights: the weight each group was given.
        notes: remarks (e.g. default equal weights).
    """

    frames: pd.DataFrame
    labels: np.ndarray
    clusters: list[dict[str, Any]]
    k: int
    bic: dict[int, float]
    groups: dict[str, list[str]]
    group_weights: dict[str, float]
    notes: list[str] = field(default_factory=list)

    def estimate(self, values: Any) -> float:
        """MEGsim's projection ``sum(weight * value of representative)``.

        ``values``: one value per frame in table row order (array-like), or a
        ``pd.Series`` indexed by frame id.
        """
        if isinstance(values, pd.Series):
            picked = values.loc[self.frames["frame"].to_numpy()].to_numpy(dtype=np.float64)
        else:
            array = np.asarray(values, dtype=np.float64)
            if array.shape != self.labels.shape:
                raise HilsimError(
                    f"megsim: {array.size} values given for {self.labels.size} frames"
                )
            picked = array[self.frames["row"].to_numpy()]
        return float(np.dot(self.frames["weight"].to_numpy(dtype=np.float64), picked))


def _resolve_weights(
    names: list[str], given: dict[str, float] | None, megsim_default: bool, who: str
) -> tuple[np.ndarray, list[str]]:
    """Group weights in ``names`` order; notes when defaults were used."""
    notes: list[str] = []
    if given is not None:
        unknown = sorted(set(given) - set(names))
        missing = [g for g in names if g not in given]
        if unknown or missing:
            raise HilsimError(
                f"{who}: group_weights must name exactly the groups {', '.join(names)}"
                + (f"; unknown: {', '.join(unknown)}" if unknown else "")
                + (f"; missing: {', '.join(missing)}" if missing else "")
            )
        weights = np.array([float(given[g]) for g in names])
        if not np.all(np.isfinite(weights)) or (weights < 0).any() or weights.sum() <= 0:
            raise HilsimError(f"{who}: group_weights must be non-negative with a positive sum")
        return weights, notes
    if megsim_default and set(names) <= set(MEGSIM_GROUP_WEIGHTS):
        return np.array([MEGSIM_GROUP_WEIGHTS[g] for g in names]), notes
    if len(names) > 1:
        notes.append(f"equal group weights ({1.0 / len(names):.3g} each) over: {', '.join(names)}")
    return np.full(len(names), 1.0 / len(names)), notes


def megsim_frames(
    table: pd.DataFrame,
    *,
    columns: list[str] | None = None,
    group_weights: dict[str, float] | None = None,
    threshold: float = BIC_THRESHOLD,
    k_max: int = 50,
    n_init: int = 3,
    seed: int = 0,
    patience: int = 1,
) -> FrameSelection:
    """MEGsim (section III) on a frame table from :func:`read_frame_table`.

    ``columns`` restricts the features (default: every column but ``frame``);
    groups follow the naming convention of the module doc; VS/FS/PRIM groups get
    MEGsim's 0.108/0.745/0.147 unless ``group_weights`` says otherwise.
    """
    check_params(
        "megsim",
        SEARCH_CONSTRAINTS,
        {"threshold": threshold, "k_max": k_max, "n_init": n_init, "seed": seed,
         "patience": patience},
    )
    if "frame" not in table.columns:
        raise HilsimError("megsim: the frame table has no 'frame' column (use read_frame_table)")
    names = [c for c in table.columns if c != "frame"] if columns is None else list(columns)
    missing = [c for c in names if c not in table.columns]
    if missing or not names:
        raise HilsimError(
            "megsim: frame table lacks column(s) " + ", ".join(missing)
            if missing
            else "megsim: no feature columns"
        )
    groups = column_groups(names)
    order = list(dict.fromkeys(groups))
    weights, notes = _resolve_weights(order, group_weights, True, "megsim")
    column_group = np.array([order.index(g) for g in groups], dtype=np.int64)
    x = group_normalise(table[names].to_numpy(dtype=np.float64), column_group, weights)
    result = megsim_cluster(
        x, threshold=threshold, k_max=k_max, n_init=n_init, seed=seed, patience=patience
    )
    ids = table["frame"].to_numpy()
    reps = result.representatives
    frames = pd.DataFrame(
        {
            "frame": ids[reps],
            "weight": result.sizes.astype(np.float64),
            "cluster": np.arange(result.k, dtype=np.int64),
            "row": reps,
        }
    )
    clusters = [
        {
            "cluster": c,
            "size": int(result.sizes[c]),
            "representative": _scalar(ids[reps[c]]),
            "distance": float(result.distances[c]),
        }
        for c in range(result.k)
    ]
    return FrameSelection(
        frames=frames,
        labels=result.labels,
        clusters=clusters,
        k=result.k,
        bic=result.bic,
        groups={g: [n for n, gg in zip(names, groups, strict=True) if gg == g] for g in order},
        group_weights={g: float(w) for g, w in zip(order, weights, strict=True)},
        notes=notes,
    )


def _scalar(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


# ------------------------------------------------------------- bundle regions
@dataclass
class RegionSelection:
    """The selected region instances and each launch's instance.

    Attributes:
        regions: the selected NVTX ranges in start order (``instance`` = row).
        instance: per launch-table row, the instance index, -1 outside.
        rule: how the kind was chosen (for the diagnostics).
        assignment: ``region_id`` or ``start_ns`` (module doc).
        notes: remarks.
    """

    regions: pd.DataFrame
    instance: np.ndarray
    rule: dict[str, Any]
    assignment: str
    notes: list[str] = field(default_factory=list)


def _prefixes(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def select_regions(
    bundle: Bundle,
    region_depth: int | None = None,
    region_pattern: str | None = None,
    min_regions: int = 4,
) -> RegionSelection:
    """Choose the region kind and place every launch in one instance (module doc)."""
    regions = bundle.regions
    if regions is None or len(regions) == 0:
        raise HilsimError(
            "megsim: the bundle has no NVTX regions; MEGsim samples regions (iterations, "
            "frames): profile with NVTX ranges around them (nsys), or use a launch-level "
            "method such as stem or pka"
        )
    launches = bundle.launches
    if "region" not in launches.columns or not launches["region"].notna().any():
        raise HilsimError(
            "megsim: no launch lies inside an NVTX region (the launches' 'region' column is "
            "empty); MEGsim needs launches attributed to regions"
        )
    regions = regions.reset_index(drop=True)
    paths = regions["path"].astype(str)
    depth = regions["depth"].to_numpy(dtype=np.int64)
    notes: list[str] = []
    keep = np.ones(len(regions), dtype=bool)
    rule: dict[str, Any] = {}
    if region_pattern is not None:
        keep &= paths.str.contains(region_pattern, regex=True).to_numpy(dtype=bool)
        rule["region_pattern"] = region_pattern
    if region_depth is not None:
        keep &= depth == region_depth
        rule["region_depth"] = region_depth
    region_col = launches["region"].astype("category")
    categories = [str(c) for c in region_col.cat.categories]
    codes = region_col.cat.codes.to_numpy(dtype=np.int64)
    if region_pattern is None and region_depth is None:
        chosen = _default_depth(regions, categories, codes, min_regions, notes)
        keep &= depth == chosen
        rule.update(region_depth=chosen, default=True, min_regions=min_regions)
    if not keep.any():
        raise HilsimError(
            "megsim: no NVTX range matches "
            + ", ".join(f"{k}={v!r}" for k, v in rule.items())
            + f" (depths present: {sorted(set(depth.tolist()))})"
        )
    selected = set(paths[keep])
    nested = {p for p in selected if any(q in selected for q in _prefixes(p)[:-1])}
    if nested:
        keep &= ~paths.isin(nested).to_numpy(dtype=bool)
        notes.append(
            f"{len(nested)} selected path(s) lie under another selected path and were "
            f"dropped (outermost kind kept): {', '.join(sorted(nested)[:5])}"
        )
        selected -= nested
    chosen_regions = regions.loc[keep].sort_values(["start_ns", "region_id"], kind="stable")
    chosen_regions = chosen_regions.reset_index(drop=True)
    # category -> outermost selected prefix (a loop over distinct paths, not launches)
    path_list = sorted(selected)
    path_index = {p: i for i, p in enumerate(path_list)}
    cat_match = np.array(
        [next((path_index[q] for q in _prefixes(c) if q in path_index), -1) for c in categories]
        + [-1],
        dtype=np.int64,
    )
    match = cat_match[codes]  # code -1 (null region) picks the trailing -1
    times, assignment = _launch_times(bundle, launches, regions, match >= 0)
    instance = np.full(len(launches), -1, dtype=np.int64)
    chosen_paths = chosen_regions["path"].astype(str).to_numpy(dtype=object)
    chosen_start = chosen_regions["start_ns"].to_numpy(dtype=np.int64)
    for p, i in path_index.items():
        rows = np.flatnonzero(match == i)
        if rows.size == 0:
            continue
        own = np.flatnonzero(chosen_paths == p)  # instances of this path, start order
        at = np.searchsorted(chosen_start[own], times[rows], side="right") - 1
        instance[rows] = own[np.maximum(at, 0)]
    rule["paths"] = path_list[:20]
    return RegionSelection(chosen_regions, instance, rule, assignment, notes)


def _default_depth(
    regions: pd.DataFrame,
    categories: list[str],
    codes: np.ndarray,
    min_regions: int,
    notes: list[str],
) -> int:
    """The depth whose ranges hold most launches among depths with >= min_regions ranges."""
    depth = regions["depth"].to_numpy(dtype=np.int64)
    path_depth = dict(
        zip(regions["path"].astype(str), depth.tolist(), strict=True)
    )  # path -> depth (the last wins; a path has one depth)
    cat_depth = np.array(
        [path_depth.get(c, c.count("/")) for c in categories] + [-1], dtype=np.int64
    )
    launch_depth = cat_depth[codes]
    n_depths = int(depth.max()) + 1
    inside = launch_depth[launch_depth >= 0]
    per_depth = np.bincount(inside, minlength=n_depths)[:n_depths]
    coverage = np.cumsum(per_depth[::-1])[::-1]  # launches at depth >= d
    ranges = np.bincount(depth, minlength=n_depths)
    ok = ranges >= min_regions
    if not ok.any():
        best = int(np.argmax(ranges))
        notes.append(
            f"no NVTX depth has {min_regions} or more ranges; using depth {best} "
            f"({int(ranges[best])} ranges); set region_depth or region_pattern to choose"
        )
        return best
    return int(np.argmax(np.where(ok, coverage, -1)))


def _launch_times(
    bundle: Bundle, launches: pd.DataFrame, regions: pd.DataFrame, member: np.ndarray
) -> tuple[np.ndarray, str]:
    """Time used to find each member launch's instance (module doc, rules a/b)."""
    n = len(launches)
    if "region_id" in launches.columns and launches.loc[member, "region_id"].notna().all():
        ids = launches["region_id"].to_numpy(dtype=np.float64, na_value=-1).astype(np.int64)
        lookup = pd.Series(
            regions["start_ns"].to_numpy(dtype=np.int64),
            index=regions["region_id"].to_numpy(dtype=np.int64),
        )
        times = np.zeros(n, dtype=np.int64)
        known = member & np.isin(ids, lookup.index.to_numpy())
        if (known != member).any():
            row = int(np.flatnonzero(member & ~known)[0])
            raise HilsimError(
                f"megsim: launch {row}: region_id {ids[row]} is not in the regions table"
            )
        times[member] = lookup.loc[ids[member]].to_numpy()
        return times, "region_id"
    if "start_ns" not in launches.columns:
        raise HilsimError("megsim: launches have no start_ns to place them in region instances")
    start = launches["start_ns"]
    if start[member].isna().any():
        row = int(np.flatnonzero(member & start.isna().to_numpy())[0])
        raise HilsimError(
            f"megsim: launch {row} lies in a region but has no start_ns; cannot tell which "
            "instance of the region it belongs to"
        )
    return start.to_numpy(dtype=np.float64, na_value=0).astype(np.int64), "start_ns"


def _launch_weights(
    bundle: Bundle, rows: np.ndarray, weight: str, notes: list[str]
) -> tuple[np.ndarray, str]:
    """Per-launch weight of the kernel-count vector (module doc, step 1)."""
    launches = bundle.launches
    n = len(launches)
    if weight == "count":
        return np.ones(n), "count"
    if weight in ("auto", "instructions"):
        values, why = _instructions(bundle, rows)
        if values is not None:
            return values, "instructions"
        if weight == "instructions":
            raise HilsimError(f"megsim: weight='instructions' but {why}")
        notes.append(f"vectors weighted by duration_ns: {why}")
    return launches["duration_ns"].to_numpy(dtype=np.float64), "duration"


def _instructions(bundle: Bundle, rows: np.ndarray) -> tuple[np.ndarray | None, str]:
    metrics = bundle.metrics
    if metrics is None or INSTRUCTIONS not in metrics.columns:
        return None, f"the bundle's metrics have no {INSTRUCTIONS}"
    n = bundle.n_launches
    values = np.full(n, np.nan)
    ids = metrics["launch_id"].to_numpy(dtype=np.int64)
    values[ids] = pd.to_numeric(metrics[INSTRUCTIONS], errors="coerce").to_numpy(
        dtype=np.float64, na_value=np.nan
    )
    values[~np.isfinite(values) | (values < 0)] = np.nan
    codes = bundle.launches["name"].cat.codes.to_numpy(dtype=np.int64)
    known = ~np.isnan(values)
    n_names = int(codes.max()) + 1
    total = np.bincount(codes[known], weights=values[known], minlength=n_names)
    count = np.bincount(codes[known], minlength=n_names)
    needed = np.unique(codes[rows])
    if (count[needed] == 0).any():
        bad = needed[count[needed] == 0][0]
        name = str(bundle.launches["name"].cat.categories[bad])
        return None, f"{INSTRUCTIONS} is missing for every launch of {name!r}"
    mean = total / np.maximum(count, 1)
    values[~known] = mean[codes[~known]]
    return values, ""


@register
class MEGsim(Method):
    """MEGsim (section III) over NVTX regions: k-means + BIC, closest-to-centroid regions.

    Args:
        region_depth: select the NVTX ranges at this nesting depth.
        region_pattern: select the ranges whose path matches this regex.
            Neither: the default kind of the module doc.
        min_regions: the default kind needs a depth with this many ranges.
        weight: vector entries: ``auto`` (instructions, else duration),
            ``instructions``, ``duration`` or ``count``.
        scalars: launch or metric columns summed per region, one group each.
        group_weights: weight per group (``kernels`` and each scalar); default equal.
        threshold: T, share of the BIC spread the chosen K must reach (0.85).
        k_max: largest K tried.
        n_init: k-means restarts per K (best inertia kept).
        patience: stop after this many consecutive BIC falls (paper: 1).
        seed: k-means random state.
        outside: launches outside every region: ``simulate``, ``drop`` or ``error``.
    """

    name: ClassVar[str] = "megsim"
    needs: ClassVar[tuple[str, ...]] = ("durations", "regions")
    stochastic: ClassVar[bool] = True
    launch_columns: ClassVar[tuple[str, ...] | None] = REGION_LAUNCH_COLUMNS
    parameter_constraints: ClassVar[dict[str, Constraints]] = {
        "region_depth": [Interval(int, 0, None), None],
        "region_pattern": [Regex(), None],
        "min_regions": [Interval(int, 1, None)],
        "weight": [Options(*WEIGHTS)],
        "scalars": [Names("launch or metric column name", single=True, empty=True)],
        "group_weights": [StrMapping("a mapping group -> weight"), None],
        **SEARCH_CONSTRAINTS,
        "outside": [Options(*OUTSIDE)],
    }

    def __init__(
        self,
        region_depth: int | None = None,
        region_pattern: str | None = None,
        min_regions: int = 4,
        weight: str = "auto",
        scalars: list[str] | None = None,
        group_weights: dict[str, float] | None = None,
        threshold: float = BIC_THRESHOLD,
        k_max: int = 50,
        n_init: int = 3,
        patience: int = 1,
        seed: int = 0,
        outside: str = "simulate",
    ) -> None:
        self.init_params(locals())
        if KERNELS_GROUP in self.scalars:
            raise InvalidParameter(
                self.name,
                "scalars",
                f"scalars must not name {KERNELS_GROUP!r} (the kernel vector's group), "
                f"got {scalars!r}",
            )
        # the region columns and any scalar that is a launch column
        self.launch_columns = (*REGION_LAUNCH_COLUMNS, *self.scalars)  # type: ignore[misc]

    def plan(self, bundle: Bundle) -> Plan:
        """Select regions, build and normalise their vectors, cluster, expand to launches."""
        launches = bundle.launches
        if len(launches) == 0:
            raise HilsimError("megsim: the bundle has no launches")
        if not launches["launch_id"].is_monotonic_increasing:
            raise HilsimError("megsim: launches must be in launch_id order")
        selection = select_regions(bundle, self.region_depth, self.region_pattern, self.min_regions)
        notes = list(selection.notes)
        instance = selection.instance
        n_regions = len(selection.regions)
        member = np.flatnonzero(instance >= 0)
        outside_rows = np.flatnonzero(instance < 0)
        if outside_rows.size and self.outside == "error":
            raise HilsimError(
                f"megsim: {outside_rows.size} of {len(launches)} launches lie outside the "
                f"selected regions (first: launch {int(outside_rows[0])}); use "
                "outside='simulate' or 'drop', or select other regions"
            )
        x, feature_diag = self._features(bundle, member, instance, n_regions, notes)
        result = megsim_cluster(
            x,
            threshold=self.threshold,
            k_max=self.k_max,
            n_init=self.n_init,
            seed=self.seed,
            patience=self.patience,
        )
        k = result.k
        region_cluster = result.labels
        is_rep = np.zeros(n_regions, dtype=bool)
        is_rep[result.representatives] = True
        rows = member[is_rep[instance[member]]]
        cluster_of = region_cluster[instance[rows]]
        ids = [launches["launch_id"].to_numpy(dtype=np.int64)[rows]]
        weights = [result.sizes[cluster_of].astype(np.float64)]
        clusters_col = [cluster_of]
        if outside_rows.size and self.outside == "simulate":
            ids.append(launches["launch_id"].to_numpy(dtype=np.int64)[outside_rows])
            weights.append(np.ones(outside_rows.size))
            clusters_col.append(np.full(outside_rows.size, k, dtype=np.int64))
        elif outside_rows.size:
            notes.append(
                f"{outside_rows.size} of {len(launches)} launches lie outside the selected "
                "regions and are not represented (outside='drop'): the plan estimates the "
                "launches inside regions only"
            )
        samples = samples_frame(
            np.concatenate(ids), np.concatenate(weights), np.concatenate(clusters_col)
        )
        labels = np.full(len(launches), -1, dtype=np.int64)
        labels[member] = region_cluster[instance[member]]
        if self.outside == "simulate":
            labels[outside_rows] = k
        durations = launches["duration_ns"].to_numpy(dtype=np.float64)
        clusters = _cluster_records(
            selection.regions, result, instance, member, durations, outside_rows, self.outside
        )
        diagnostics: dict[str, Any] = {
            "regions": {
                **selection.rule,
                "assignment": selection.assignment,
                "n_regions": n_regions,
                "launches_in_regions": int(member.size),
                "launches_outside": int(outside_rows.size),
                "empty_regions": int(n_regions - np.unique(instance[member]).size),
            },
            **feature_diag,
            "bic_by_k": [{"k": kk, "bic": score} for kk, score in result.bic.items()],
            "bic_cut": result.bic_cut,
            "chosen_k": k,
            "representative_regions": selection.regions["region_id"]
            .to_numpy(dtype=np.int64)[result.representatives]
            .tolist(),
            # cluster of every selected region (region_id order of start), cf. Fig. 6
            "region_ids": selection.regions["region_id"].to_numpy(dtype=np.int64).tolist(),
            "region_clusters": region_cluster.tolist(),
        }
        return Plan(
            method=self.name,
            params=self.params(),
            source=source_facts(bundle),
            clusters=clusters,
            samples=samples,
            unit="region",
            sampling="deterministic",
            notes=notes,
            diagnostics=diagnostics,
            members=members_by_launch(launches["launch_id"].to_numpy(), labels),
        )

    def _features(
        self,
        bundle: Bundle,
        member: np.ndarray,
        instance: np.ndarray,
        n_regions: int,
        notes: list[str],
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Region x (kernels + scalars) matrix, group-normalised (module doc, steps 1-2)."""
        launches = bundle.launches
        w, basis = _launch_weights(bundle, member, self.weight, notes)
        codes = launches["name"].cat.codes.to_numpy(dtype=np.int64)[member]
        kernels, column = np.unique(codes, return_inverse=True)
        width = max(int(kernels.size), 1)
        flat = np.bincount(
            instance[member] * width + column, weights=w[member], minlength=n_regions * width
        )
        blocks = [flat.reshape(n_regions, width)]
        groups = [KERNELS_GROUP]
        column_group = [np.zeros(width, dtype=np.int64)]
        for g, name in enumerate(self.scalars, start=1):
            values = self._scalar_values(bundle, name, notes)
            blocks.append(
                np.bincount(instance[member], weights=values[member], minlength=n_regions)[:, None]
            )
            groups.append(name)
            column_group.append(np.array([g], dtype=np.int64))
        weights, weight_notes = _resolve_weights(groups, self.group_weights, False, "megsim")
        notes.extend(weight_notes)
        x = group_normalise(np.hstack(blocks), np.concatenate(column_group), weights)
        return x, {
            "weight_basis": basis,
            "n_kernels": int(kernels.size),
            "groups": {g: float(v) for g, v in zip(groups, weights, strict=True)},
        }

    def _scalar_values(self, bundle: Bundle, name: str, notes: list[str]) -> np.ndarray:
        launches = bundle.launches
        n = len(launches)
        if name in launches.columns and name not in ("name", "kernel", "region"):
            values = pd.to_numeric(launches[name], errors="coerce").to_numpy(
                dtype=np.float64, na_value=np.nan
            )
        elif bundle.metrics is not None and name in bundle.metrics.columns:
            values = np.full(n, np.nan)
            values[bundle.metrics["launch_id"].to_numpy(dtype=np.int64)] = pd.to_numeric(
                bundle.metrics[name], errors="coerce"
            ).to_numpy(dtype=np.float64, na_value=np.nan)
        else:
            raise HilsimError(f"megsim: scalar {name!r} is neither a launch nor a metric column")
        missing = ~np.isfinite(values)
        if missing.any():
            notes.append(f"scalar {name}: {int(missing.sum())} missing value(s) counted as 0")
            values = np.where(missing, 0.0, values)
        return values


def _cluster_records(
    regions: pd.DataFrame,
    result: Clustering,
    instance: np.ndarray,
    member: np.ndarray,
    durations: np.ndarray,
    outside_rows: np.ndarray,
    outside: str,
) -> list[dict[str, Any]]:
    """One record per region cluster (+ the outside-regions part when simulated)."""
    n_regions = len(regions)
    k = result.k
    region_time = np.bincount(instance[member], weights=durations[member], minlength=n_regions)
    region_launches = np.bincount(instance[member], minlength=n_regions)
    labels = result.labels
    size_launches = np.bincount(labels, weights=region_launches, minlength=k)
    mean = np.bincount(labels, weights=region_time, minlength=k) / result.sizes
    dev = region_time - mean[labels]
    std = np.sqrt(np.bincount(labels, weights=dev * dev, minlength=k) / result.sizes)
    reps = result.representatives
    region_ids = regions["region_id"].to_numpy(dtype=np.int64)
    paths = regions["path"].astype(str).to_numpy(dtype=object)
    starts = regions["start_ns"].to_numpy(dtype=np.int64)
    records: list[dict[str, Any]] = [
        {
            "cluster": c,
            "label": str(paths[reps[c]]),
            "size": int(size_launches[c]),
            "regions": int(result.sizes[c]),
            "draws": 1,
            "mean_ns": float(mean[c]),
            "std_ns": float(std[c]),
            "representative_region": int(region_ids[reps[c]]),
            "representative_start_ns": int(starts[reps[c]]),
            "representative_launches": int(region_launches[reps[c]]),
            "distance": float(result.distances[c]),
        }
        for c in range(k)
    ]
    if outside_rows.size and outside == "simulate":
        records.append(
            {
                "cluster": k,
                "label": "outside regions",
                "size": int(outside_rows.size),
                "regions": 0,
                "draws": int(outside_rows.size),
                "census": True,
                "mean_ns": float(durations[outside_rows].mean()),
                "std_ns": float(durations[outside_rows].std()),
            }
        )
    return records
