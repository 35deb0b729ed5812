"""STEM's sample sizes and ROOT's splitting: the arithmetic of STEM+ROOT on arrays.

Chung et al., "STEM+ROOT", MICRO'25. Arrays in, arrays out; no bundle and no plan
(:mod:`hilsim.analyzer.methods.stem` builds those).

* Sample sizes: eq. (3) for one cluster (:func:`kkt_sample_sizes_single`), the KKT
  solution of Problem 1, eq. (6), for all clusters jointly (:func:`kkt_sample_sizes`,
  with the sum of square roots of the Appendix 8.1 derivation), the error bound
  eq. (4)/(5) a sizing achieves (:func:`cost_and_variance`, :func:`predicted_bound`).
* ROOT (section 3.4, Fig. 6) on *segments*: each kernel group's distinct durations,
  sorted, are a ``[start, end)`` range of weighted points; :func:`best_split` finds
  the exact 1-D 2-means cut of many segments at once with centred prefix sums, and
  :func:`root_clusters` splits recursively while eq. (8) < eq. (7).
  :func:`refine_tree` re-chooses clusters and draws over ROOT's 2-means tree.
* Draws (section 3.5): :func:`draw_samples`, uniform with replacement (or without),
  clusters whose draws reach their size taken whole.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np


def z_score(confidence: float) -> float:
    """Two-sided standard score ``z_{1-alpha/2}`` for ``confidence = 1 - alpha``."""
    return float(NormalDist().inv_cdf(0.5 + confidence / 2.0))


def kkt_sample_sizes(
    sizes: np.ndarray,
    means: np.ndarray,
    stds: np.ndarray,
    epsilon: float,
    z: float,
    *,
    eq6: str = "sum-sqrt",
    fpc: bool = False,
    min_draw: bool = True,
) -> np.ndarray:
    """STEM eq. (6): optimal draws per cluster under the joint error bound (eq. 5).

    ``sizes`` N_i, ``means`` mu_i, ``stds`` sigma_i (population, of the profiled
    durations). Returns int64 draws, at least 1 per cluster unless ``min_draw`` is
    False (then a cluster with zero spread gets 0, as the STEM-AE reference does).
    ``eq6="printed"`` uses the square root outside the sum as eq. (6) is printed
    (undersamples; kept for the ablation). ``fpc`` sizes for draws *without*
    replacement: the variance of cluster i is ``b_i (1/m_i - 1/N_i) N_i/(N_i-1)``,
    so with ``b'_i = b_i N_i/(N_i-1)`` the KKT solution is eq. (6) with ``b'`` and
    ``c' = c + sum_i b'_i / N_i`` (Cochran 1977, section 5.5).
    """
    sizes = np.asarray(sizes, dtype=np.float64)
    a = np.asarray(means, dtype=np.float64)
    b = sizes**2 * np.asarray(stds, dtype=np.float64) ** 2
    c = (epsilon * float(np.sum(sizes * a)) / z) ** 2
    floor = 1.0 if min_draw else 0.0
    m = np.full(len(sizes), floor, dtype=np.float64)
    live = (a > 0) & (b > 0)
    if fpc:
        with np.errstate(divide="ignore", invalid="ignore"):
            b = np.where(sizes > 1, b * sizes / (sizes - 1), 0.0)
        c = c + float(np.sum(np.where(live, b / np.maximum(sizes, 1.0), 0.0)))
    if c > 0 and live.any():
        if eq6 == "printed":
            lead = math.sqrt(float(np.sum(a[live] * b[live]))) / c
        else:
            lead = float(np.sum(np.sqrt(a[live] * b[live]))) / c
        m[live] = np.ceil(lead * np.sqrt(b[live] / a[live]))
    return np.maximum(m, floor).astype(np.int64)


def expand_segments(
    start: np.ndarray, end: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Segment id, offset within segment and absolute position of every element."""
    n = end - start
    total = int(n.sum())
    seg = np.repeat(np.arange(len(start)), n)
    offsets = np.arange(total) - np.repeat(np.cumsum(n) - n, n)
    pos = np.repeat(start, n) + offsets
    return seg, offsets, pos


def segment_moments(
    values: np.ndarray, counts: np.ndarray, start: np.ndarray, end: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Launch count, mean and population std of each segment of weighted points.

    ``values[i]`` occurs ``counts[i]`` times; segments are ``[start, end)`` ranges
    of points. Two-pass (centred), so no precision is lost to cancellation.
    """
    seg, _, pos = expand_segments(start, end)
    v, w = values[pos], counts[pos]
    n = np.bincount(seg, weights=w, minlength=len(start))
    mean = np.bincount(seg, weights=w * v, minlength=len(start)) / n
    dev = v - mean[seg]
    var = np.bincount(seg, weights=w * dev * dev, minlength=len(start)) / n
    return n, mean, np.sqrt(var)


def best_split(
    values: np.ndarray, counts: np.ndarray, start: np.ndarray, end: np.ndarray
) -> dict[str, np.ndarray]:
    """Exact 1-D 2-means split of each segment of sorted distinct weighted points.

    Returns a dict with ``cut`` (point index; left child is ``[start, cut)``),
    ``splittable`` (two or more distinct values), and launch count / mean / std
    of parent, left and right children. Work is O(points) for all segments at
    once: centred prefix sums (centring keeps each segment's running sums near
    zero at its end, so differences lose no precision).
    """
    seg, offsets, pos = expand_segments(start, end)
    v, w = values[pos], counts[pos]
    points = end - start
    first = np.cumsum(points) - points
    last = first + points - 1
    n = np.bincount(seg, weights=w, minlength=len(start))
    mean = np.bincount(seg, weights=w * v, minlength=len(start)) / n
    c = v - mean[seg]
    cw = np.cumsum(w)
    c1 = np.cumsum(w * c)
    c2 = np.cumsum(w * c * c)

    def rebase(prefix: np.ndarray) -> np.ndarray:
        base = np.where(first > 0, prefix[np.maximum(first - 1, 0)], 0.0)
        return prefix - base[seg], prefix[last] - base

    left_n, _ = rebase(cw)
    left1, tot1 = rebase(c1)
    left2, tot2 = rebase(c2)
    right_n = n[seg] - left_n
    valid = right_n > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        sse = (left2 - left1 * left1 / left_n) + (
            (tot2[seg] - left2) - (tot1[seg] - left1) ** 2 / right_n
        )
    sse = np.where(valid, sse, np.inf)
    best = np.minimum.reduceat(sse, first)
    splittable = np.isfinite(best)
    hit = np.flatnonzero(valid & (sse == best[seg]))
    _, first_hit = np.unique(seg[hit], return_index=True)
    chosen = hit[first_hit]
    cut = end.copy()
    cut[seg[chosen]] = pos[chosen] + 1
    at = np.zeros(len(start), dtype=np.int64)
    at[seg[chosen]] = chosen
    ln = np.where(splittable, left_n[at], n)
    rn = n - ln
    l1 = np.where(splittable, left1[at], 0.0)
    l2 = np.where(splittable, left2[at], 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        lmean = mean + l1 / ln
        rmean = np.where(rn > 0, mean + (tot1 - l1) / rn, 0.0)
        lvar = np.maximum((l2 - l1 * l1 / ln) / ln, 0.0)
        rvar = np.where(rn > 0, np.maximum(((tot2 - l2) - (tot1 - l1) ** 2 / rn) / rn, 0.0), 0.0)
    return {
        "cut": cut,
        "splittable": splittable,
        "n": n,
        "mean": mean,
        "std": np.sqrt(np.maximum(tot2 / n, 0.0)),
        "ln": ln,
        "lmean": lmean,
        "lstd": np.sqrt(lvar),
        "rn": rn,
        "rmean": rmean,
        "rstd": np.sqrt(rvar),
    }


def root_clusters(
    values: np.ndarray,
    counts: np.ndarray,
    group_start: np.ndarray,
    group_end: np.ndarray,
    epsilon: float,
    z: float,
    max_depth: int = 64,
    stop: str = "allocation",
    eq6: str = "sum-sqrt",
    min_draw: bool = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ROOT (section 3.4): recursively 2-split each group while eq. (8) < eq. (7).

    ``values`` are each group's distinct durations sorted ascending, occurring
    ``counts`` times, in the point ranges ``[group_start[g], group_end[g])``.
    Returns final ``(start, end, group)`` point ranges, one per cluster. All
    clusters of one recursion level are split in one vectorised pass.

    ``stop`` is the parent's sampled time tau_old that a split must beat:
    ``"eq7"`` recomputes eq. (7) for every cluster on its own (its own error
    budget, as eq. (7) is printed); ``"allocation"`` (default) uses eq. (7) for a
    kernel's top cluster and, below it, the draws the cluster was given by its
    parent's split, eq. (8), times its mean, as the STEM-AE reference does: a
    child already sized at one draw is not split again.
    """
    final_start: list[np.ndarray] = []
    final_end: list[np.ndarray] = []
    final_group: list[np.ndarray] = []
    start = group_start.astype(np.int64)
    end = group_end.astype(np.int64)
    group = np.arange(len(start), dtype=np.int64)
    old_time: np.ndarray | None = None  # tau_old of each candidate ("allocation")
    for _ in range(max_depth):
        candidate = (end - start) >= 2  # two or more distinct durations
        final_start.append(start[~candidate])
        final_end.append(end[~candidate])
        final_group.append(group[~candidate])
        start, end, group = start[candidate], end[candidate], group[candidate]
        if old_time is not None:
            old_time = old_time[candidate]
        if len(start) == 0:
            break
        sp = best_split(values, counts, start, end)
        if stop == "eq7" or old_time is None:
            old = kkt_sample_sizes_single(sp["mean"], sp["std"], epsilon, z) * sp["mean"]  # eq. 7
        else:
            old = old_time
        m1, m2 = pair_draws(
            sp["ln"], sp["lmean"], sp["lstd"], sp["rn"], sp["rmean"], sp["rstd"], epsilon, z,
            eq6, min_draw,
        )
        new = m1 * sp["lmean"] + m2 * sp["rmean"]  # eq. (8)
        accept = sp["splittable"] & (new < old)
        final_start.append(start[~accept])
        final_end.append(end[~accept])
        final_group.append(group[~accept])
        s, e, g, c = start[accept], end[accept], group[accept], sp["cut"][accept]
        old_time = np.concatenate(
            (m1[accept] * sp["lmean"][accept], m2[accept] * sp["rmean"][accept])
        )
        start = np.concatenate((s, c))
        end = np.concatenate((c, e))
        group = np.concatenate((g, g))
    final_start.append(start)
    final_end.append(end)
    final_group.append(group)
    out_start = np.concatenate(final_start)
    out_end = np.concatenate(final_end)
    out_group = np.concatenate(final_group)
    order = np.argsort(out_start, kind="stable")
    return out_start[order], out_end[order], out_group[order]


def kkt_sample_sizes_single(
    means: np.ndarray, stds: np.ndarray, epsilon: float, z: float
) -> np.ndarray:
    """Eq. (3) for many independent clusters at once: ``ceil((z sigma / (mu eps))^2)``, >= 1."""
    with np.errstate(divide="ignore", invalid="ignore"):
        m = np.ceil((z * stds / (means * epsilon)) ** 2)
    m = np.where(np.isfinite(m), m, 1.0)
    return np.maximum(m, 1.0)


def pair_draws(
    ln: np.ndarray,
    lmean: np.ndarray,
    lstd: np.ndarray,
    rn: np.ndarray,
    rmean: np.ndarray,
    rstd: np.ndarray,
    epsilon: float,
    z: float,
    eq6: str = "sum-sqrt",
    min_draw: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Eq. (6) draws of (left, right) for many parent clusters at once (for eq. 8)."""
    a1, a2 = lmean, rmean
    b1, b2 = ln**2 * lstd**2, rn**2 * rstd**2
    c = (epsilon * (ln * lmean + rn * rmean) / z) ** 2
    floor = 1.0 if min_draw else 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        if eq6 == "printed":
            lead = np.sqrt(a1 * b1 + a2 * b2) / c
        else:
            lead = (np.sqrt(a1 * b1) + np.sqrt(a2 * b2)) / c
        m1 = np.ceil(lead * np.sqrt(b1 / a1))
        m2 = np.ceil(lead * np.sqrt(b2 / a2))
    m1 = np.maximum(np.where(np.isfinite(m1), m1, floor), floor)
    m2 = np.maximum(np.where(np.isfinite(m2), m2, floor), floor)
    return m1, m2


def cost_and_variance(
    sizes: np.ndarray,
    means: np.ndarray,
    stds: np.ndarray,
    draws: np.ndarray,
    census: np.ndarray,
    fpc: bool = False,
) -> tuple[float, float]:
    """Expected sampled time ``sum m_i mu_i`` and estimator variance (eq. 4) of a sizing."""
    sizes = np.asarray(sizes, dtype=np.float64)
    m = np.where(census, sizes, draws).astype(np.float64)
    cost = float(np.sum(m * means))
    with np.errstate(divide="ignore", invalid="ignore"):
        var = sizes**2 * stds**2 / m
        if fpc:
            var = var * np.where(sizes > 1, (sizes - m) / (sizes - 1), 0.0)
    var = np.where(census | (m <= 0), 0.0, var)
    return cost, float(np.sum(var))


def refine_tree(
    values: np.ndarray,
    counts: np.ndarray,
    group_start: np.ndarray,
    group_end: np.ndarray,
    anchor_cost: float,
    anchor_var: float,
    depth: int = 8,
    min_draw: bool = True,
) -> tuple[np.ndarray, ...] | None:
    """STEM's Problem 1 over every pruning of ROOT's 2-means tree ("balanced" refine).

    ROOT's eq. (7)/(8) test and the one-draw floor leave most clusters at one draw
    on large workloads, where the error bound of eq. (5) is far from binding; the
    plan's real precision is then set by which clusters exist, not by epsilon. This
    step keeps ROOT's splitter (exact 2-means) but chooses the clusters *and* their
    draws together: for a multiplier ``lam`` every node of the tree (depth
    ``depth`` below each kernel group) is either a cluster with the KKT draws
    ``m = max(1, ceil(sqrt(lam b / a)))`` (eq. 6's form, ``lam = lambda_k`` of
    Appendix 8.1; ``m >= N``: simulated whole) or the union of its two children,
    whichever has the smaller ``tau + lam * var`` (eq. 4 variance), solved bottom-up
    for all nodes of a level at once. ``lam`` is then chosen to make the larger of
    ``tau / anchor_cost`` and ``var / anchor_var`` smallest, where the anchor is the
    ROOT plan itself: the result is never worse than ROOT's plan in expected
    sampled time nor in variance (so it keeps the eq. 5 bound), and improves both
    by the same factor. Returns ``(start, end, group, draws, census, ratio)`` or
    None when no pruning improves on the anchor.
    """
    if anchor_var <= 0 or anchor_cost <= 0:
        return None
    starts, ends, lefts, rights, levels = [group_start.astype(np.int64)], [
        group_end.astype(np.int64)
    ], [], [], [0]
    start, end = starts[0], ends[0]
    base = len(start)
    for _ in range(depth):
        cand = np.flatnonzero((end - start) >= 2)
        left = np.full(len(start), -1, dtype=np.int64)
        right = np.full(len(start), -1, dtype=np.int64)
        if len(cand):
            sp = best_split(values, counts, start[cand], end[cand])
            ok = sp["splittable"]
            cand = cand[ok]
            cut = sp["cut"][ok]
            k = len(cand)
            left[cand] = base + np.arange(k)
            right[cand] = base + k + np.arange(k)
            new_start = np.concatenate((start[cand], cut))
            new_end = np.concatenate((cut, end[cand]))
        else:
            k = 0
        lefts.append(left)
        rights.append(right)
        if k == 0:
            break
        levels.append(base)
        base += 2 * k
        start, end = new_start, new_end
        starts.append(start)
        ends.append(end)
    if len(lefts) < len(starts):
        lefts.append(np.full(len(starts[-1]), -1, dtype=np.int64))
        rights.append(np.full(len(starts[-1]), -1, dtype=np.int64))
    all_start, all_end = np.concatenate(starts), np.concatenate(ends)
    all_left, all_right = np.concatenate(lefts), np.concatenate(rights)
    level_of = np.concatenate([np.full(len(x), i) for i, x in enumerate(starts)])
    n, mean, std = segment_moments(values, counts, all_start, all_end)
    group_of = np.zeros(len(all_start), dtype=np.int64)
    group_of[: len(group_start)] = np.arange(len(group_start))
    for lvl in range(len(starts)):  # children inherit their group
        at = np.flatnonzero((level_of == lvl) & (all_left >= 0))
        group_of[all_left[at]] = group_of[at]
        group_of[all_right[at]] = group_of[at]
    spread = np.where(mean > 0, n * std / np.sqrt(np.maximum(mean, 1e-300)), 0.0)
    floor = 1.0 if min_draw else 0.0
    split_node = all_left >= 0

    per_level = [np.flatnonzero((level_of == lvl) & split_node) for lvl in range(len(starts))]
    kids = [(at, all_left[at], all_right[at]) for at in reversed(per_level) if len(at)]
    var_one = n * n * std * std
    roots = np.arange(len(group_start))

    def solve(lam: float):
        m = np.maximum(np.ceil(math.sqrt(lam) * spread), floor)
        census = m >= n
        m = np.where(census, n, m)
        best_cost = m * mean
        with np.errstate(divide="ignore", invalid="ignore"):
            best_var = np.where(census | (m <= 0), 0.0, var_one / m)
        use_kids = np.zeros(len(n), dtype=bool)
        for at, left, right in kids:  # deepest level first
            kc = best_cost[left] + best_cost[right]
            kv = best_var[left] + best_var[right]
            better = kc + lam * kv < best_cost[at] + lam * best_var[at]
            use_kids[at] = better
            best_cost[at] = np.where(better, kc, best_cost[at])
            best_var[at] = np.where(better, kv, best_var[at])
        return float(best_cost[roots].sum()), float(best_var[roots].sum()), use_kids, m, census

    memo: dict[float, tuple[float, float]] = {}

    def score(lam: float) -> tuple[float, float]:
        if lam not in memo:
            cost, var = solve(lam)[:2]
            memo[lam] = (max(cost / anchor_cost, var / anchor_var),
                         cost / anchor_cost - var / anchor_var)
        return memo[lam]

    lo = hi = anchor_cost / anchor_var  # the exchange rate at the anchor
    for _ in range(40):
        if score(lo)[1] <= 0:
            break
        lo /= 16.0
    for _ in range(40):
        if score(hi)[1] >= 0:
            break
        hi *= 16.0
    for _ in range(20):  # tau(lam) / anchor - var(lam) / anchor rises with lam
        mid = math.sqrt(lo * hi)
        if score(mid)[1] < 0:
            lo = mid
        else:
            hi = mid
    lam = min((lo, hi), key=lambda x: score(x)[0])
    ratio = score(lam)[0]
    if not ratio < 1.0:
        return None
    _, _, use_kids, m, census = solve(lam)
    chosen = np.zeros(len(n), dtype=bool)
    active = np.zeros(len(n), dtype=bool)
    active[: len(group_start)] = True
    for lvl in range(len(starts)):
        at = np.flatnonzero((level_of == lvl) & active)
        go = use_kids[at]
        chosen[at[~go]] = True
        active[all_left[at[go]]] = True
        active[all_right[at[go]]] = True
    idx = np.flatnonzero(chosen)
    idx = idx[np.argsort(all_start[idx], kind="stable")]
    return (
        all_start[idx],
        all_end[idx],
        group_of[idx],
        m[idx].astype(np.int64),
        census[idx],
        ratio,
    )


def root_depth(
    pstart: np.ndarray, pend: np.ndarray, group_start: np.ndarray, group_end: np.ndarray
) -> int:
    """How many 2-splits deep ROOT went (log2 of the most clusters in one group)."""
    per_group = np.bincount(np.searchsorted(group_start, pstart, side="right") - 1)
    return int(math.ceil(math.log2(max(int(per_group.max()) if len(per_group) else 1, 1)))) + 1


def draw_samples(
    order: np.ndarray,
    start: np.ndarray,
    sizes: np.ndarray,
    draws: np.ndarray,
    census: np.ndarray,
    rng: np.random.Generator,
    replacement: bool = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Random draws (section 3.5: with replacement; or without); census clusters whole."""
    sampled = ~census & (draws > 0)
    m = draws[sampled]
    cl = np.flatnonzero(sampled)
    cluster_of_draw = np.repeat(cl, m)
    offsets = np.floor(rng.random(len(cluster_of_draw)) * sizes[cluster_of_draw]).astype(np.int64)
    if not replacement and len(offsets):
        offsets = _distinct_offsets(offsets, cluster_of_draw, sizes, rng)
    positions = start[cluster_of_draw] + offsets
    weight = sizes[cluster_of_draw] / draws[cluster_of_draw]
    cc = np.flatnonzero(census)
    n_c = sizes[cc]
    census_cluster = np.repeat(cc, n_c)
    census_pos = np.repeat(start[cc], n_c) + (
        np.arange(int(n_c.sum())) - np.repeat(np.cumsum(n_c) - n_c, n_c)
    )
    ids = order[np.concatenate((positions, census_pos))]
    weights = np.concatenate((weight, np.ones(len(census_pos))))
    clusters = np.concatenate((cluster_of_draw, census_cluster))
    return ids, weights, clusters, np.ones(len(ids), dtype=np.int64)


def _distinct_offsets(
    offsets: np.ndarray,
    cluster_of_draw: np.ndarray,
    sizes: np.ndarray,
    rng: np.random.Generator,
    rounds: int = 64,
) -> np.ndarray:
    """Redraw repeated (cluster, offset) pairs until every draw is distinct (m < N)."""
    offsets = offsets.copy()
    for _ in range(rounds):
        key = cluster_of_draw * (int(sizes.max()) + 1) + offsets
        _, first = np.unique(key, return_index=True)
        again = np.ones(len(key), dtype=bool)
        again[first] = False
        if not again.any():
            return offsets
        idx = np.flatnonzero(again)
        offsets[idx] = np.floor(rng.random(len(idx)) * sizes[cluster_of_draw[idx]]).astype(np.int64)
    # dense clusters (m close to N): a random permutation of each cluster's offsets
    clusters = np.unique(cluster_of_draw)
    n = sizes[clusters]
    owner = np.repeat(clusters, n)
    offs = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
    perm = np.lexsort((rng.random(len(owner)), owner))  # shuffled within each cluster
    shuffled, owner_sorted = offs[perm], owner[perm]
    firsts = np.searchsorted(owner_sorted, cluster_of_draw)
    within = np.arange(len(cluster_of_draw)) - np.searchsorted(cluster_of_draw, cluster_of_draw)
    return shuffled[firsts + within]


def predicted_bound(
    sizes: np.ndarray,
    means: np.ndarray,
    stds: np.ndarray,
    m: np.ndarray,
    census: np.ndarray,
    z: float,
    fpc: bool = False,
) -> float:
    """Relative half-width z * sqrt(sum N^2 sigma^2 / m) / sum N mu of the plan (eq. 4/5)."""
    total = float(np.sum(sizes * means))
    if total <= 0:
        return 0.0
    _, var = cost_and_variance(sizes, means, stds, m, census, fpc=fpc)
    return float(z * math.sqrt(var) / total)
