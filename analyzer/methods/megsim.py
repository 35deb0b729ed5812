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
2. **Group normalisation** (III-C), 3. **similarity** (III-D, Euclidean),
4. **clustering** (III-E, k-means, the member closest to the centroid represents
   its cluster) and 5. **scoring** (III-F, BIC): :mod:`hilsim.analyzer.methods.megsim_math`.
   MEGsim's group weights are 0.108 / 0.745 / 0.147 for VSCV / FSCV / PRIM; for
   bundles the default is equal weights over the groups (the kernel vector, then
   each scalar), overridable with ``group_weights``.

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

Frame tables (one row per frame, from a graphics simulator) are
:mod:`hilsim.analyzer.methods.megsim_frames`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from hilsim.analyzer.methods import register
from hilsim.analyzer.methods.base import Method, source_facts
from hilsim.analyzer.methods.megsim_math import (
    BIC_THRESHOLD,
    SEARCH_CONSTRAINTS,
    Clustering,
    group_normalise,
    megsim_cluster,
    resolve_group_weights,
)
from hilsim.analyzer.methods.params import (
    Constraints,
    Interval,
    InvalidParameter,
    Names,
    Options,
    Regex,
    StrMapping,
)
from hilsim.analyzer.methods.support import INSTRUCTIONS

from hilsim.core.bundle import Bundle
from hilsim.core.errors import HilsimError
from hilsim.core.plan import Plan, members_by_launch, samples_frame

WEIGHTS: tuple[str, ...] = ("auto", "instructions", "duration", "count")
OUTSIDE: tuple[str, ...] = ("simulate", "drop", "error")
KERNELS_GROUP = "kernels"
#: the launch columns that place a launch in a region instance (module doc)
REGION_LAUNCH_COLUMNS: tuple[str, ...] = ("region", "region_id", "start_ns")


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
        weights, weight_notes = resolve_group_weights(groups, self.group_weights, False, "megsim")
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
