"""Photon's kernel-level sampling (Liu, Sun and Carlson, Photon, MICRO'23; slides
"Kernel-Sampling"; STEM+ROOT, Chung et al., MICRO'25, Table 1 and section 4.7).

Photon analyses a workload online: "Prior kernels have similar GPU BBV -> skip the
simulation of the kernel, predict the simulation time with prior similar kernels'
IPC; prior kernels do not have similar GPU BBV -> simulate it" (slides), with a
similarity threshold of 95% (STEM Table 1). This module implements that kernel
level (Photon's warp- and basic-block-level sampling inside a simulated kernel are
simulator-side and not part of a plan).

**Signature.** Photon's GPU BBV is a basic-block vector collected with NVBit.
Nsight Compute does not record basic blocks, so the signature here is the launch's
**instruction mix**: every metrics column named ``*inst_executed_op_*.sum``
(``smsp__sass_thread_inst_executed_op_ffma_pred_on.sum``,
``smsp__inst_executed_op_global_ld.sum``, ...; or the columns given in
``signature_metrics``). It *stands in* for the BBV: two launches with the same
opcode-class mix are treated as executing similar code, which is weaker than
equal basic-block frequencies. Because an opcode mix does not identify code the way
basic blocks do, launches are compared only with launches of the **same kernel
name** (``same_kernel=True``; a BBV of another kernel has other basic blocks).

**Similarity.** Cosine similarity of the signature vectors >= ``threshold`` (0.95).
Vectors are L2-normalised, so ``cos >= t`` is the Euclidean ball of radius
``sqrt(2 - 2t)``. Launches whose signature is all zeros are similar to each other
only. With more than ``max_dims`` (16) signature columns the unit vectors are
projected on their first ``max_dims`` principal components (PCA fitted on at most
200,000 seeded rows); the threshold is then tested in that space, an approximation
(a projection only shortens distances, so it can merge launches whose full
vectors differ slightly more) whose captured variance is in the diagnostics. With
16 columns or fewer the test is exact.

**Online algorithm (leader clustering).** Launches are visited in chronological
order; a launch with no earlier representative within the threshold becomes a
representative (is simulated); any other launch is assigned to the most similar
earlier representative. This is done exactly, in vectorised batches of
``batch_size`` launches: (1) a forest of KD-trees over the representatives so far
(Bentley-Saxe: O(log R) trees, rebuilt by merging, so no quadratic rebuild)
finds each launch's nearest earlier representative; (2) among the launches of the
batch with none, the batch's own new representatives are the lexicographically
first greedy choice (a launch is one iff no earlier launch of the batch that is
one is within the threshold), solved in rounds over the within-threshold pairs
(``cKDTree.query_pairs``, identical vectors merged first); (3) each launch takes
the nearest of its earlier representatives. The cost is O(N log R) tree queries
instead of Photon's O(N*R) comparisons (STEM section 4.7: O(NSd) to O(N^2 d)).

**Prediction as weights.** Photon predicts a skipped launch's time from its
representative's IPC: ``time_i = instructions_i / IPC_rep = time_rep *
instructions_i / instructions_rep``. Summed over a representative's members this is
``time_rep * sum_i instructions_i / instructions_rep``, so the representative's
weight is ``sum_i instructions_i / instructions_rep`` (members with the
representative itself) and the plan's ``estimate = sum(weight * value)`` is
Photon's prediction. Instructions are ``instruction_metric``
(``smsp__inst_executed.sum``) when the metrics have it for every launch, else the
sum of the signature columns (noted in the plan). A representative with zero
instructions weighs its member count.

Deviation noted: the STEM authors' re-implementation (``ejchung0406/STEM-AE``,
``figure7/sampling_methods/photon.py``) uses a relative Euclidean distance
``|a - b| / |a| < 0.05`` on raw BBV counts, picks among matches the one with the
most similar warp count, and predicts a skipped launch's time as the
representative's time (count weighting); we follow the slides (similar BBV ->
IPC-based prediction) with the brief's cosine similarity and the nearest match.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from hilsim.analyzer.methods import register
from hilsim.analyzer.methods.base import Method, source_facts
from hilsim.analyzer.methods.params import (
    BOOLEAN,
    SEED,
    Constraints,
    Interval,
    Names,
    Text,
)
from hilsim.analyzer.methods.support import (
    INSTRUCTIONS,
    aligned_metric,
    aligned_metrics,
    cluster_moments,
    metric_rows,
    ordered_launches,
    relative_error,
)
from scipy.spatial import cKDTree

from hilsim.core.bundle import Bundle
from hilsim.core.errors import HilsimError
from hilsim.core.plan import Plan, members_by_launch, samples_frame

#: metric names containing this and ending in ``.sum`` are instruction-mix counts.
SIGNATURE_MARK = "inst_executed_op_"
#: PCA is fitted on at most this many (seeded) rows, then applied to all.
PCA_FIT_ROWS = 200_000
#: coordinate separating kernel names (and all-zero signatures) far beyond any radius.
_FAR = 100.0


def signature_columns(columns: list[str]) -> list[str]:
    """Instruction-mix count columns among ``columns`` (``*inst_executed_op_*.sum``)."""
    return sorted(c for c in columns if SIGNATURE_MARK in c and c.endswith(".sum"))


class _Forest:
    """KD-trees over the representatives so far (Bentley-Saxe logarithmic method)."""

    def __init__(self) -> None:
        self.trees: list[tuple[cKDTree, np.ndarray, np.ndarray]] = []  # tree, rows, points

    def add(self, rows: np.ndarray, points: np.ndarray) -> None:
        if rows.size == 0:
            return
        while self.trees and self.trees[-1][1].size <= rows.size:
            _, old_rows, old_points = self.trees.pop()
            rows = np.concatenate((old_rows, rows))
            points = np.concatenate((old_points, points))
        self.trees.append((cKDTree(points), rows, points))

    def nearest(self, points: np.ndarray, radius: float) -> tuple[np.ndarray, np.ndarray]:
        """Distance and row of the nearest representative within ``radius`` (inf, -1 if none).

        Equal distances go to the earlier representative.
        """
        best_d = np.full(points.shape[0], np.inf)
        best_r = np.full(points.shape[0], -1, dtype=np.int64)
        for tree, rows, _ in self.trees:
            dist, idx = tree.query(points, k=1, distance_upper_bound=radius)
            found = np.isfinite(dist)
            cand = np.where(found, rows[np.minimum(idx, rows.size - 1)], -1)
            better = found & ((dist < best_d) | ((dist == best_d) & (cand < best_r)))
            best_d = np.where(better, dist, best_d)
            best_r = np.where(better, cand, best_r)
        return best_d, best_r


def greedy_leaders(points: np.ndarray, radius: float) -> tuple[np.ndarray, int, int]:
    """Lexicographically first greedy leaders of ``points`` (rows in time order).

    Row ``i`` is a leader iff no earlier leader lies within ``radius``. Identical
    rows are merged first (only the first can lead); the rest is solved in rounds
    over the within-radius pairs: a row with an earlier leader neighbour follows, a
    row whose earlier neighbours are all decided and followers leads. Returns
    (leader mask, rounds, pairs).
    """
    m = points.shape[0]
    if m == 0:
        return np.zeros(0, dtype=bool), 0, 0
    _, first = np.unique(points, axis=0, return_index=True)
    order = np.argsort(first, kind="stable")  # distinct points in time order
    distinct = points[first[order]]
    k = distinct.shape[0]
    pairs = cKDTree(distinct).query_pairs(radius, output_type="ndarray")
    n_pairs = int(pairs.shape[0])
    a = pairs[:, 0].astype(np.int64) if n_pairs else np.zeros(0, dtype=np.int64)
    b = pairs[:, 1].astype(np.int64) if n_pairs else np.zeros(0, dtype=np.int64)
    a, b = np.minimum(a, b), np.maximum(a, b)  # a earlier than b
    state = np.zeros(k, dtype=np.int8)  # 0 undecided, 1 leader, 2 follower
    rounds = 0
    while True:
        rounds += 1
        follow = np.zeros(k, dtype=bool)
        follow[b[state[a] == 1]] = True
        state[(state == 0) & follow] = 2
        keep = state[b] == 0
        a, b = a[keep], b[keep]
        blocked = np.zeros(k, dtype=bool)
        blocked[b[state[a] == 0]] = True
        lead = (state == 0) & ~blocked
        state[lead] = 1
        if not (state == 0).any():
            break
    leader_distinct = np.zeros(k, dtype=bool)
    leader_distinct[state == 1] = True
    mask = np.zeros(m, dtype=bool)
    mask[first[order][leader_distinct]] = True
    return mask, rounds, n_pairs


def leader_clusters(
    points: np.ndarray, radius: float, batch_size: int
) -> tuple[np.ndarray, dict[str, int]]:
    """Online leader clustering of ``points`` in row (time) order; see the module docstring.

    Returns the representative row of every row (a representative maps to itself)
    and counters (batches, most rounds, most pairs in one batch).
    """
    n = points.shape[0]
    rep_of = np.empty(n, dtype=np.int64)
    forest = _Forest()
    stats = {"batches": 0, "max_rounds": 0, "max_pairs": 0, "fallback_rows": 0}
    for start in range(0, n, batch_size):  # one iteration per batch of launches
        stop = min(n, start + batch_size)
        rows = np.arange(start, stop, dtype=np.int64)
        block = points[start:stop]
        best_d, best_r = forest.nearest(block, radius)
        open_rows = rows[~np.isfinite(best_d)]
        mask, rounds, pairs = greedy_leaders(points[open_rows], radius)
        leaders = open_rows[mask]
        stats["batches"] += 1
        stats["max_rounds"] = max(stats["max_rounds"], rounds)
        stats["max_pairs"] = max(stats["max_pairs"], pairs)
        if leaders.size:
            best_d, best_r = _nearest_new(points, block, rows, leaders, radius, best_d, best_r)
            missing = np.flatnonzero(best_r < 0)
            if missing.size:  # an earlier new leader exists but was not among the k nearest
                stats["fallback_rows"] += int(missing.size)
                lead_pts = points[leaders]
                for chunk in np.array_split(missing, max(1, missing.size // 256)):
                    diff = block[chunk, None, :] - lead_pts[None, :, :]
                    dist = np.sqrt(np.einsum("ijk,ijk->ij", diff, diff))
                    dist[leaders[None, :] > rows[chunk, None]] = np.inf
                    j = np.argmin(dist, axis=1)
                    best_r[chunk] = leaders[j]
        if (best_r < 0).any():  # cannot happen: every open row leads or follows
            raise HilsimError("photon: internal error: a launch got no representative")
        rep_of[start:stop] = best_r
        forest.add(leaders, points[leaders])
    return rep_of, stats


def _nearest_new(
    points: np.ndarray,
    block: np.ndarray,
    rows: np.ndarray,
    leaders: np.ndarray,
    radius: float,
    best_d: np.ndarray,
    best_r: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Improve each row's match with the batch's new leaders that precede it."""
    k = int(min(leaders.size, 8))
    dist, idx = cKDTree(points[leaders]).query(block, k=k, distance_upper_bound=radius)
    if k == 1:
        dist, idx = dist[:, None], idx[:, None]
    cand = np.where(idx < leaders.size, leaders[np.minimum(idx, leaders.size - 1)], rows.max() + 1)
    valid = np.isfinite(dist) & (cand <= rows[:, None])
    has = valid.any(axis=1)
    col = np.argmax(valid, axis=1)
    at = np.arange(rows.size)
    new_d = np.where(has, dist[at, col], np.inf)
    new_r = cand[at, col]
    better = has & ((new_d < best_d) | ((new_d == best_d) & (new_r < best_r)) | (best_r < 0))
    return np.where(better, new_d, best_d), np.where(better, new_r, best_r)


@register
class Photon(Method):
    """Photon kernel-level sampling: skip launches similar to a simulated one (IPC projection).

    Args:
        threshold: cosine similarity at or above which a launch is similar to a
            representative (0.95, Photon's 95% threshold).
        same_kernel: compare launches of the same kernel name only.
        max_dims: at most this many signature dimensions (PCA above it).
        batch_size: launches processed per vectorised batch.
        signature_metrics: metrics columns forming the signature; ``None`` takes
            every ``*inst_executed_op_*.sum`` column.
        instruction_metric: instruction count used by the IPC projection (falls
            back to the signature's sum when the metrics lack it).
        seed: random state of the PCA fitting subsample.
    """

    name: ClassVar[str] = "photon"
    needs: ClassVar[tuple[str, ...]] = ("durations", "metrics")
    launch_columns: ClassVar[tuple[str, ...] | None] = ()
    parameter_constraints: ClassVar[dict[str, Constraints]] = {
        "threshold": [Interval(float, -1, 1)],
        "same_kernel": [BOOLEAN],
        "max_dims": [Interval(int, 1, None)],
        "batch_size": [Interval(int, 1, None)],
        "signature_metrics": [Names("metric name"), None],
        "instruction_metric": [Text("a metric name")],
        "seed": [SEED],
    }

    def __init__(
        self,
        threshold: float = 0.95,
        same_kernel: bool = True,
        max_dims: int = 16,
        batch_size: int = 2048,
        signature_metrics: list[str] | None = None,
        instruction_metric: str = INSTRUCTIONS,
        seed: int = 0,
    ) -> None:
        self.init_params(locals())

    def plan(self, bundle: Bundle) -> Plan:
        """Run the online leader clustering over ``bundle``'s launches in time order."""
        launches = ordered_launches(bundle, "photon")
        n = len(launches)
        metrics, _ = metric_rows(bundle, launches, "photon")
        columns = self.signature_metrics or signature_columns(list(metrics.columns))
        if not columns:
            raise HilsimError(
                "photon: the bundle's metrics have no instruction-mix columns "
                f"(*{SIGNATURE_MARK}*.sum, e.g. smsp__sass_thread_inst_executed_op_ffma_pred_on"
                ".sum); Photon's signature needs them for every launch (or pass "
                "signature_metrics)"
            )
        why = "Photon's signature (instruction mix) needs it for every launch"
        signature = aligned_metrics(bundle, launches, columns, "photon", why)
        notes: list[str] = []
        if self.instruction_metric in metrics.columns:
            inst = aligned_metric(
                bundle,
                launches,
                self.instruction_metric,
                "photon",
                "the IPC projection needs each launch's instruction count",
            )
            inst_source = self.instruction_metric
        else:
            inst = signature.sum(axis=1)
            inst_source = "sum of signature columns"
            notes.append(
                f"{self.instruction_metric} not in the metrics: the IPC projection uses the "
                "sum of the instruction-mix columns as each launch's instruction count"
            )
        points, reduce_diag = self._points(signature, launches)
        radius = float(np.sqrt(max(0.0, 2.0 - 2.0 * self.threshold))) * (1 + 1e-9) + 1e-12
        rep_of, stats = leader_clusters(points, radius, self.batch_size)
        reps, labels = np.unique(rep_of, return_inverse=True)  # reps sorted = time order
        labels = labels.reshape(-1)
        k = reps.size
        rep_inst = inst[reps]
        zero = rep_inst[labels] <= 0
        member_w = np.where(zero, 1.0, inst / np.where(zero, 1.0, rep_inst[labels]))
        weights = np.bincount(labels, weights=member_w, minlength=k)
        if (rep_inst <= 0).any():
            notes.append(
                f"{int((rep_inst <= 0).sum())} representative(s) with 0 instructions weigh "
                "their member count"
            )
        durations = launches["duration_ns"].to_numpy(dtype=np.float64)
        sizes, means, stds = cluster_moments(labels, durations, k)
        projected = float(np.dot(weights, durations[reps]))
        if launches.attrs.get("durations_measured") is False:
            notes.append("durations are placeholders (not measured): projected error is moot")
        ids = launches["launch_id"].to_numpy(dtype=np.int64)
        names = launches["name"].cat.categories
        codes = launches["name"].cat.codes.to_numpy(dtype=np.int64)
        inst_sum = np.bincount(labels, weights=inst, minlength=k)
        clusters = [
            {
                "cluster": c,
                "label": str(names[codes[reps[c]]]),
                "size": int(sizes[c]),
                "draws": 1,
                "mean_ns": float(means[c]),
                "std_ns": float(stds[c]),
                "representative": int(ids[reps[c]]),
                "instructions": float(inst_sum[c]),
                "representative_instructions": float(rep_inst[c]),
                "weight": float(weights[c]),
            }
            for c in range(k)
        ]
        return Plan(
            method=self.name,
            params=self.params(),
            source=source_facts(bundle),
            clusters=clusters,
            samples=samples_frame(ids[reps], weights, np.arange(k, dtype=np.int64)),
            notes=notes,
            members=members_by_launch(ids, labels),
            diagnostics={
                "n_launches": n,
                "n_representatives": k,
                "signature_metrics": columns,
                "instructions": inst_source,
                "radius": radius,
                "zero_signature_launches": int((signature.sum(axis=1) == 0).sum()),
                "projected_total_ns": projected,
                "projected_error": relative_error(projected, float(durations.sum())),
                **reduce_diag,
                **stats,
            },
        )

    def _points(self, signature: np.ndarray, launches: Any) -> tuple[np.ndarray, dict[str, Any]]:
        """Unit signature vectors (PCA-reduced above ``max_dims``) + zero and name coordinates."""
        n, d = signature.shape
        norms = np.sqrt(np.einsum("ij,ij->i", signature, signature))
        zero = norms == 0
        unit = signature / np.where(zero, 1.0, norms)[:, None]
        diag: dict[str, Any] = {"signature_dims": d}
        if d > self.max_dims:
            from sklearn.decomposition import PCA

            live = np.flatnonzero(~zero)
            rng = np.random.default_rng(self.seed)
            fit = live if live.size <= PCA_FIT_ROWS else rng.choice(live, PCA_FIT_ROWS, False)
            pca = PCA(n_components=min(self.max_dims, max(1, fit.size)), svd_solver="full")
            pca.fit(unit[np.sort(fit)] if fit.size else unit[:1])
            reduced = np.empty((n, pca.n_components_), dtype=np.float64)
            for lo in range(0, n, 1 << 18):
                reduced[lo : lo + (1 << 18)] = pca.transform(unit[lo : lo + (1 << 18)])
            reduced[zero] = 0.0
            diag.update(
                reduced_dims=int(pca.n_components_),
                explained_variance=float(np.sum(pca.explained_variance_ratio_)),
                similarity="approximate (PCA space)",
            )
        else:
            reduced = unit
            diag.update(reduced_dims=d, explained_variance=1.0, similarity="exact")
        extra = [np.where(zero, _FAR, 0.0)]
        if self.same_kernel:
            extra.append(_FAR * launches["name"].cat.codes.to_numpy(dtype=np.float64))
        return np.column_stack([reduced, *extra]), diag
