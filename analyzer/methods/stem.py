"""STEM+ROOT kernel sampling (Chung et al., MICRO'25; ``shared/papers/001``).

* Clusters start as the launches of one kernel (by full name, and by launch
  configuration, grid and block, when the profile records it) — section 3.
* ROOT (section 3.4, Fig. 6) splits every cluster recursively in two with 1-D
  k-means (k = 2, the paper's choice) on the execution times, and accepts a split
  only when the STEM-optimal sampled time of the two children, eq. (8), is below
  that of the parent, eq. (7).  We solve the 2-means problem *exactly* (the
  optimal threshold of sorted values, found with prefix sums), which is the
  global optimum of the objective Lloyd's k-means approximates; all clusters of
  one recursion level are processed together with vectorised numpy.
* STEM (section 3.3) then sizes the samples of all final clusters jointly with
  the KKT solution of Problem 1, eq. (6), with ``a_i = mu_i``,
  ``b_i = N_i^2 sigma_i^2`` and ``c = (epsilon * sum_i N_i mu_i / z)^2``:
  ``m_i = ceil(sum_j sqrt(a_j b_j) / c * sqrt(b_i / a_i))``; for one cluster this
  is eq. (3).  Note: eq. (6) as printed (and the last line of Appendix 8.1) puts
  the square root *outside* the sum, ``sqrt(sum_j a_j b_j)``; the appendix's own
  derivation gives ``lambda_k = (sum_i sqrt(a_i b_i) / c)^2``, i.e. the sum of
  square roots, and only that form satisfies the error constraint eq. (5) (the
  printed one undersamples whenever there are two or more clusters). We follow
  the derivation; ``tests/test_stem.py`` checks eq. (5) holds.
* Samples are drawn uniformly at random *with replacement* (section 3.5, for the
  i.i.d. assumption of the CLT); each draw weighs ``N_i / m_i``.

Two choices the paper leaves open, stated here:
  - every cluster gets at least one draw (eq. 3/6 give 0 when sigma = 0);
  - a cluster whose ``m_i`` reaches its size ``N_i`` is simulated whole (each
    launch weight 1, zero sampling error): drawing ``m_i >= N_i`` launches with
    replacement would cost at least as much as simulating them all. The eq. (7)/(8)
    split decision uses the formulas exactly as written.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from hilsim.analyzer.methods import register
from hilsim.analyzer.methods.base import Method, source_facts
from hilsim.analyzer.tablecache import derived

from hilsim.core.bundle import Bundle
from hilsim.core.errors import HilsimError
from hilsim.core.plan import Plan, samples_frame
from hilsim.core.schema import LAUNCH_CONFIG_COLUMNS, launch_config_key


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


def _expand(start: np.ndarray, end: np.ndarray):
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
    seg, _, pos = _expand(start, end)
    v, w = values[pos], counts[pos]
    n = np.bincount(seg, weights=w, minlength=len(start))
    mean = np.bincount(seg, weights=w * v, minlength=len(start)) / n
    dev = v - mean[seg]
    var = np.bincount(seg, weights=w * dev * dev, minlength=len(start)) / n
    return n, mean, np.sqrt(var)


def _best_split(
    values: np.ndarray, counts: np.ndarray, start: np.ndarray, end: np.ndarray
) -> dict[str, np.ndarray]:
    """Exact 1-D 2-means split of each segment of sorted distinct weighted points.

    Returns a dict with ``cut`` (point index; left child is ``[start, cut)``),
    ``splittable`` (two or more distinct values), and launch count / mean / std
    of parent, left and right children. Work is O(points) for all segments at
    once: centred prefix sums (centring keeps each segment's running sums near
    zero at its end, so differences lose no precision).
    """
    seg, offsets, pos = _expand(start, end)
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
        sp = _best_split(values, counts, start, end)
        if stop == "eq7" or old_time is None:
            old = kkt_sample_sizes_single(sp["mean"], sp["std"], epsilon, z) * sp["mean"]  # eq. 7
        else:
            old = old_time
        m1, m2 = _pair_draws(
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


def _pair_draws(ln, lmean, lstd, rn, rmean, rstd, epsilon, z, eq6="sum-sqrt", min_draw=True):
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


def _pair_stem_time(ln, lmean, lstd, rn, rmean, rstd, epsilon, z) -> np.ndarray:
    """Eq. (8) for many parent clusters at once, each split into (left, right)."""
    m1, m2 = _pair_draws(ln, lmean, lstd, rn, rmean, rstd, epsilon, z)
    return m1 * lmean + m2 * rmean


def _cost_and_variance(sizes, means, stds, draws, census, fpc=False):
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
            sp = _best_split(values, counts, start[cand], end[cand])
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


STOP_RULES = ("allocation", "eq7")
REFINES = ("balanced", "none")
EQ6_FORMS = ("sum-sqrt", "printed")


@register
class STEM(Method):
    """STEM+ROOT (MICRO'25, sections 3.2–3.5): execution-time-driven kernel sampling.

    Args:
        epsilon: error bound on the total time (eq. 5), default 0.05.
        confidence: confidence level 1 - alpha of the bound, default 0.95 (z = 1.96).
        seed: random seed of the draws.
        by_config: key clusters by kernel name *and* grid/block (when recorded).
        root: apply ROOT's recursive splitting (False = one cluster per kernel key).
        max_depth: recursion limit of ROOT (a guard; the eq. 7/8 test stops first).
        stop: ROOT's tau_old, ``"allocation"`` (the draws a cluster got from its
            parent's split, as the STEM-AE reference) or ``"eq7"`` (eq. 7 on its own).
        refine: ``"balanced"`` re-chooses clusters and draws over ROOT's 2-means tree
            so that both the expected sampled time and the variance are no higher
            than ROOT's plan (:func:`refine_tree`); ``"none"`` keeps ROOT's plan.
        eq6: ``"sum-sqrt"`` (the Appendix 8.1 derivation) or ``"printed"``.
        replacement: draw with replacement (section 3.5) or without (with the
            finite-population correction in the sample sizes and the bound).
        min_draw: every cluster gets at least one draw (False: a zero-spread
            cluster gets none, as in the reference).
        census: a cluster whose draws reach its size is simulated whole.
    """

    name: ClassVar[str] = "stem"
    needs: ClassVar[tuple[str, ...]] = ("durations",)
    stochastic: ClassVar[bool] = True
    launch_columns: ClassVar[tuple[str, ...] | None] = LAUNCH_CONFIG_COLUMNS

    def __init__(
        self,
        epsilon: float = 0.05,
        confidence: float = 0.95,
        seed: int = 0,
        by_config: bool = True,
        root: bool = True,
        max_depth: int = 64,
        stop: str = "allocation",
        refine: str = "balanced",
        eq6: str = "sum-sqrt",
        replacement: bool = True,
        min_draw: bool = True,
        census: bool = True,
    ) -> None:
        if not 0 < float(epsilon) < 1:
            raise HilsimError(f"stem: epsilon must be in (0, 1), got {epsilon}")
        if not 0 < float(confidence) < 1:
            raise HilsimError(f"stem: confidence must be in (0, 1), got {confidence}")
        for label, value, allowed in (
            ("stop", stop, STOP_RULES),
            ("refine", refine, REFINES),
            ("eq6", eq6, EQ6_FORMS),
        ):
            if value not in allowed:
                raise HilsimError(
                    f"stem: {label} must be one of {', '.join(allowed)}, got {value!r}"
                )
        self.epsilon = float(epsilon)
        self.confidence = float(confidence)
        self.seed = int(seed)
        self.by_config = bool(by_config)
        self.root = bool(root)
        self.max_depth = int(max_depth)
        self.stop = str(stop)
        self.refine = str(refine)
        self.eq6 = str(eq6)
        self.replacement = bool(replacement)
        self.min_draw = bool(min_draw)
        self.census = bool(census)

    def params(self) -> dict[str, Any]:
        return {
            "epsilon": self.epsilon,
            "confidence": self.confidence,
            "seed": self.seed,
            "by_config": self.by_config,
            "root": self.root,
            "max_depth": self.max_depth,
            "stop": self.stop,
            "refine": self.refine,
            "eq6": self.eq6,
            "replacement": self.replacement,
            "min_draw": self.min_draw,
            "census": self.census,
        }

    @staticmethod
    def refine_depth(root_depth: int) -> int:
        """Depth of the tree the refine searches: two levels below ROOT's deepest split
        (at least 3, at most 8): a cluster ROOT left at one draw may pay to split."""
        return int(min(max(root_depth + 2, 3), 8))

    def _clusters(self, points: tuple[np.ndarray, ...], z: float) -> dict[str, Any]:
        """Clusters and their draws: everything but the random draws (seed-free)."""
        _, run_start, values, counts, group_start, group_end = points
        fpc = not self.replacement
        if self.root:
            pstart, pend, group = root_clusters(
                values, counts, group_start, group_end, self.epsilon, z, self.max_depth,
                self.stop, self.eq6, self.min_draw,
            )
        else:
            pstart, pend, group = group_start, group_end, np.arange(len(group_start))
        _, means, stds = segment_moments(values, counts, pstart, pend)
        sizes = run_start[pend] - run_start[pstart]
        draws = kkt_sample_sizes(
            sizes, means, stds, self.epsilon, z, eq6=self.eq6, fpc=fpc, min_draw=self.min_draw
        )  # eq. (6)
        if not self.replacement:
            draws = np.minimum(draws, sizes)
        census = draws >= sizes if (self.census or not self.replacement) else np.zeros(
            len(sizes), dtype=bool
        )
        refined = None
        if self.root and self.refine == "balanced" and self.replacement:
            cost, var = _cost_and_variance(sizes, means, stds, draws, census)
            refined = refine_tree(
                values, counts, group_start, group_end, cost, var,
                depth=self.refine_depth(_depth_of(pstart, pend, group_start, group_end)),
                min_draw=self.min_draw,
            )
        if refined is not None:
            pstart, pend, group, draws, census, _ = refined
            _, means, stds = segment_moments(values, counts, pstart, pend)
            sizes = run_start[pend] - run_start[pstart]
        return {
            "pstart": pstart,
            "pend": pend,
            "group": group,
            "means": means,
            "stds": stds,
            "sizes": sizes,
            "draws": draws,
            "census": census,
            "refined": refined is not None,
            "refine_ratio": None if refined is None else float(refined[5]),
        }

    def plan(self, bundle: Bundle) -> Plan:
        launches = bundle.launches
        z = z_score(self.confidence)
        # the same for every seed: computed once per launches table while a
        # TableCache is open (evaluate / compare over seeds)
        points = derived(
            launches, ("stem-points", self.by_config), lambda: _points(launches, self.by_config)
        )
        order, run_start = points[0], points[1]
        key = tuple((k, v) for k, v in self.params().items() if k != "seed")
        cl = derived(launches, ("stem-clusters", key), lambda: self._clusters(points, z))
        pstart, pend, group = cl["pstart"], cl["pend"], cl["group"]
        means, stds, sizes = cl["means"], cl["stds"], cl["sizes"]
        draws, census = cl["draws"], cl["census"]
        start, end = run_start[pstart], run_start[pend]  # ranges of sorted launches
        rng = np.random.default_rng(self.seed)
        ids, weights, cluster_of, draw_count = _draw(
            order, start, sizes, draws, census, rng, replacement=self.replacement
        )
        samples = samples_frame(ids, weights, cluster_of, draw_count)
        clusters = _cluster_records(
            launches, order, start, end, group, sizes, means, stds, draws, census, self.by_config
        )
        predicted = _predicted_bound(
            sizes, means, stds, np.where(census, sizes, draws), census, z,
            fpc=not self.replacement,
        )
        launch_ids = launches["launch_id"].to_numpy()

        def members() -> np.ndarray:  # built only if asked (not once per seed)
            cluster_of_position, _, positions = _expand(start, end)
            out = np.full(len(launch_ids), -1, dtype=np.int64)
            out[launch_ids[order[positions]]] = cluster_of_position
            return out

        return Plan(
            method=self.name,
            params=self.params(),
            source=source_facts(bundle),
            clusters=clusters,
            samples=samples,
            sampling="random",
            diagnostics={
                "z": z,
                "kernel_groups": int(len(points[4])),
                "clusters": int(len(start)),
                "total_draws": int(draws[~census].sum() + sizes[census].sum()),
                "census_clusters": int(census.sum()),
                "predicted_error_bound": predicted,
                "refined": cl["refined"],
                "refine_ratio": cl["refine_ratio"],
            },
            members=members,
        )


def _depth_of(pstart, pend, group_start, group_end) -> int:
    """How many 2-splits deep ROOT went (log2 of the most clusters in one group)."""
    per_group = np.bincount(np.searchsorted(group_start, pstart, side="right") - 1)
    return int(math.ceil(math.log2(max(int(per_group.max()) if len(per_group) else 1, 1)))) + 1


def _points(launches: pd.DataFrame, by_config: bool) -> tuple[np.ndarray, ...]:
    """Launches sorted by (cluster key, duration) and their distinct (key, duration) points.

    Returns ``order`` (launch rows in that order), ``run_start`` (where each point's
    run of equal launches starts in ``order``, plus the end), the points' ``values``
    and ``counts``, and each kernel key's ``[group_start, group_end)`` point range.
    ROOT's work is O(distinct durations), exact because 2-means never cuts between
    equal values. Independent of the seed (and of epsilon and confidence).
    """
    keys = launch_config_key(launches, by_config)
    durations = launches["duration_ns"].to_numpy()
    order = _sort_by_key_then_value(keys, durations)
    sorted_keys = keys[order]
    sorted_durations = durations[order]
    change = np.flatnonzero((np.diff(sorted_keys) != 0) | (np.diff(sorted_durations) != 0)) + 1
    run_start = np.concatenate(([0], change, [len(order)])).astype(np.int64)
    counts = np.diff(run_start).astype(np.float64)
    values = sorted_durations[run_start[:-1]].astype(np.float64)
    point_keys = sorted_keys[run_start[:-1]]
    boundaries = np.flatnonzero(np.diff(point_keys)) + 1
    group_start = np.concatenate(([0], boundaries)).astype(np.int64)
    group_end = np.concatenate((boundaries, [len(values)])).astype(np.int64)
    out = (order, run_start, values, counts, group_start, group_end)
    for array in out:
        array.flags.writeable = False  # shared by the plans of every seed
    return out


def _sort_by_key_then_value(keys: np.ndarray, durations: np.ndarray) -> np.ndarray:
    """Stable order by (cluster key, duration): one int64 argsort when it fits."""
    if (
        len(durations)
        and durations.min() >= 0
        and durations.max() < (1 << 40)
        and (keys.max() < (1 << 22))
    ):
        combined = (keys.astype(np.int64) << 40) | durations.astype(np.int64)
        return np.argsort(combined, kind="stable")
    return np.lexsort((durations, keys))


def _draw(order, start, sizes, draws, census, rng, replacement=True):
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


def _distinct_offsets(offsets, cluster_of_draw, sizes, rng, rounds: int = 64):
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


def _predicted_bound(sizes, means, stds, m, census, z, fpc=False) -> float:
    """Relative half-width z * sqrt(sum N^2 sigma^2 / m) / sum N mu of the plan (eq. 4/5)."""
    total = float(np.sum(sizes * means))
    if total <= 0:
        return 0.0
    _, var = _cost_and_variance(sizes, means, stds, m, census, fpc=fpc)
    return float(z * math.sqrt(var) / total)


def _cluster_records(
    launches, order, start, end, group, sizes, means, stds, draws, census, by_config
) -> list[dict[str, Any]]:
    first_ids = order[start]
    names = launches["name"].iloc[first_ids].to_numpy() if len(first_ids) else []
    values = launches.iloc[first_ids] if len(first_ids) else launches.iloc[:0]
    config_cols = (
        [c for c in LAUNCH_CONFIG_COLUMNS if c in values and values[c].notna().any()]
        if by_config
        else []
    )
    records: list[dict[str, Any]] = []
    lows = launches["duration_ns"].to_numpy()[order[start]]
    highs = launches["duration_ns"].to_numpy()[order[end - 1]]
    config = values[config_cols].astype("float64").to_numpy() if config_cols else None
    for i in range(len(start)):
        record: dict[str, Any] = {
            "cluster": i,
            "label": str(names[i]),
            "group": int(group[i]),
            "size": int(sizes[i]),
            "draws": int(sizes[i] if census[i] else draws[i]),
            "census": bool(census[i]),
            "mean_ns": float(means[i]),
            "std_ns": float(stds[i]),
            "min_ns": int(lows[i]),
            "max_ns": int(highs[i]),
        }
        if config is not None:
            record["config"] = {
                c: (None if pd.isna(config[i, j]) else int(config[i, j]))
                for j, c in enumerate(config_cols)
            }
        records.append(record)
    return records
