"""MEGsim's clustering: group normalisation, k-means and BIC on region vectors.

Ortiz, Corbalán-Navarro, Aragón and González, "MEGsim: A Novel Methodology for
Efficient Simulation of Graphics Workloads in GPUs", section III, steps 2-5.
Arrays in, arrays out: :mod:`hilsim.analyzer.methods.megsim` builds the vectors of
NVTX regions, :mod:`hilsim.analyzer.methods.megsim_frames` those of frame tables.

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
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from hilsim.analyzer.methods.params import SEED, Constraints, Interval

from hilsim.core.errors import HilsimError

#: MEGsim section III-C: power shares of the Geometry (vertex shaders), Raster
#: (fragment shaders) and Tiling (primitives) stages, used as group weights.
MEGSIM_GROUP_WEIGHTS: dict[str, float] = {"vs": 0.108, "fs": 0.745, "prim": 0.147}
#: MEGsim section III-F: the chosen clustering reaches this share of the BIC spread.
BIC_THRESHOLD = 0.85
#: ``sigma^2`` floor, relative to its K = 1 value (keeps a perfect fit's BIC finite).
SIGMA2_FLOOR = 1e-12
#: constraints of the k-means + BIC search, shared by bundles and frame tables
SEARCH_CONSTRAINTS: dict[str, Constraints] = {
    "threshold": [Interval(float, 0, 1)],
    # bounded: each K of 1..k_max runs n_init k-means fits (k_max=50, n_init=3 by default)
    "k_max": [Interval(int, 1, 1000)],
    "n_init": [Interval(int, 1, 100)],
    "patience": [Interval(int, 1, None)],
    "seed": [SEED],
}


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


def resolve_group_weights(
    names: list[str], given: dict[str, float] | None, megsim_default: bool, who: str
) -> tuple[np.ndarray, list[str]]:
    """Group weights in ``names`` order (section III-C); notes when defaults were used.

    ``given`` must name exactly the groups; ``megsim_default``: groups all among
    vs/fs/prim get :data:`MEGSIM_GROUP_WEIGHTS`; otherwise equal weights.
    """
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
