"""STEM+ROOT kernel sampling (Chung et al., MICRO'25).

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

from typing import Any, ClassVar

import numpy as np
import pandas as pd
from hilsim.analyzer.methods import register
from hilsim.analyzer.methods.base import Method, source_facts
from hilsim.analyzer.methods.params import BOOLEAN, SEED, Constraints, Interval, Options
from hilsim.analyzer.methods.stem_math import (
    cost_and_variance,
    draw_samples,
    expand_segments,
    kkt_sample_sizes,
    predicted_bound,
    refine_tree,
    root_clusters,
    root_depth,
    segment_moments,
    z_score,
)
from hilsim.analyzer.tablecache import derived

from hilsim.core.bundle import Bundle
from hilsim.core.plan import Plan, samples_frame
from hilsim.core.schema import LAUNCH_CONFIG_COLUMNS, launch_config_key

STOP_RULES: tuple[str, ...] = ("allocation", "eq7")
REFINES: tuple[str, ...] = ("balanced", "none")
EQ6_FORMS: tuple[str, ...] = ("sum-sqrt", "printed")


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
    parameter_constraints: ClassVar[dict[str, Constraints]] = {
        "epsilon": [Interval(float, 0, 1, closed="neither")],
        # from 1e-6: below it the normal quantile z rounds to 0 and Eq. 6 divides by it
        "confidence": [Interval(float, 1e-6, 1, closed="left")],
        "seed": [SEED],
        "by_config": [BOOLEAN],
        "root": [BOOLEAN],
        "max_depth": [Interval(int, 0, None)],
        "stop": [Options(*STOP_RULES)],
        "refine": [Options(*REFINES)],
        "eq6": [Options(*EQ6_FORMS)],
        "replacement": [BOOLEAN],
        "min_draw": [BOOLEAN],
        "census": [BOOLEAN],
    }

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
        self.init_params(locals())

    @staticmethod
    def refine_depth(deepest: int) -> int:
        """Depth of the tree the refine searches: two levels below ROOT's deepest split
        (at least 3, at most 8): a cluster ROOT left at one draw may pay to split."""
        return int(min(max(deepest + 2, 3), 8))

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
            cost, var = cost_and_variance(sizes, means, stds, draws, census)
            refined = refine_tree(
                values, counts, group_start, group_end, cost, var,
                depth=self.refine_depth(root_depth(pstart, pend, group_start, group_end)),
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
        ids, weights, cluster_of, draw_count = draw_samples(
            order, start, sizes, draws, census, rng, replacement=self.replacement
        )
        samples = samples_frame(ids, weights, cluster_of, draw_count)
        clusters = _cluster_records(
            launches, order, start, end, group, sizes, means, stds, draws, census, self.by_config
        )
        predicted = predicted_bound(
            sizes, means, stds, np.where(census, sizes, draws), census, z,
            fpc=not self.replacement,
        )
        launch_ids = launches["launch_id"].to_numpy()

        def members() -> np.ndarray:  # built only if asked (not once per seed)
            cluster_of_position, _, positions = expand_segments(start, end)
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
    combined = _combined_key(keys, durations)
    if combined is not None:
        order, run_start, point_keys, point_values = _sorted_runs(combined)
    else:
        order = np.lexsort((durations, keys))
        sorted_keys = keys[order]
        sorted_durations = durations[order]
        change = np.flatnonzero(
            (np.diff(sorted_keys) != 0) | (np.diff(sorted_durations) != 0)
        ) + 1
        run_start = np.concatenate(([0], change, [len(order)])).astype(np.int64)
        point_keys = sorted_keys[run_start[:-1]]
        point_values = sorted_durations[run_start[:-1]]
    counts = np.diff(run_start).astype(np.float64)
    values = point_values.astype(np.float64)
    boundaries = np.flatnonzero(np.diff(point_keys)) + 1
    group_start = np.concatenate(([0], boundaries)).astype(np.int64)
    group_end = np.concatenate((boundaries, [len(values)])).astype(np.int64)
    out = (order, run_start, values, counts, group_start, group_end)
    for array in out:
        array.flags.writeable = False  # shared by the plans of every seed
    return out


# Bits of the duration in the one-integer (key, duration) sort key.
_DURATION_BITS = 40


def _combined_key(keys: np.ndarray, durations: np.ndarray) -> np.ndarray | None:
    """``key << 40 | duration`` per launch (ordered as the pair is), or ``None`` when a
    duration is negative or past 2^40 ns or a key past 2^22 (the pair then sorts as two)."""
    if not (
        len(durations)
        and durations.min() >= 0
        and durations.max() < (1 << _DURATION_BITS)
        and keys.max() < (1 << 22)
    ):
        return None
    combined = keys.astype(np.int64) << _DURATION_BITS
    combined |= durations
    return combined


def _sorted_runs(combined: np.ndarray) -> tuple[np.ndarray, ...]:
    """(stable order of ``combined``, start of each run of equal values in it plus the
    end, each run's key, each run's duration).

    The distinct values are found by hashing (one O(N) pass) and sorted alone; each
    launch's rank among them is then sorted stably (a radix sort while there are fewer
    than 2^16 distinct values, as in a profile of kernels that repeat), and the run
    lengths are the ranks' counts: no N-long gathers, differences or comparisons.
    Same order as a stable sort of ``combined`` itself.
    """
    codes, distinct = pd.factorize(combined, sort=False)
    by_value = np.argsort(distinct, kind="stable")
    rank_type = np.uint16 if len(distinct) <= np.iinfo(np.uint16).max else np.int64
    rank = np.empty(len(distinct), dtype=rank_type)
    rank[by_value] = np.arange(len(distinct), dtype=rank_type)
    counts = np.bincount(codes, minlength=len(distinct))[by_value]
    ranks = rank[codes]
    del codes
    order = np.argsort(ranks, kind="stable")
    run_start = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    points = distinct[by_value]
    return order, run_start, points >> _DURATION_BITS, points & ((1 << _DURATION_BITS) - 1)


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
