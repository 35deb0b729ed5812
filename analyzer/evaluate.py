"""Honest evaluation of sampling plans (STEM section 4.1 definitions).

* estimate of a per-launch quantity ``v``: ``sum(weight * v)`` over the samples;
* error: ``|estimate - truth| / truth`` (STEM eq. 1);
* speedup: total time of all launches / total time of the *distinct* sampled
  launches (a launch drawn twice is simulated once);
* repeated over seeds for stochastic methods: mean and max error, harmonic-mean
  speedup (STEM section 4.1, after Eeckhout 2024);
* a 95% interval for the estimate from the stratified-sampling variance
  ``sum_i N_i^2 s_i^2 / m_i`` (STEM eq. 4): ``s_i`` is the sample standard
  deviation of the cluster's draws when it has two or more, else the profiled
  coefficient of variation recorded in the plan times the sampled mean; clusters
  simulated whole contribute no variance;
* per-metric error of the weighted sums for every column of ``metrics.parquet``
  (STEM Fig. 14) where the metrics cover every launch.

A plan can be evaluated on a *different* bundle of the same workload (another
run, another GPU): the launch sequences must agree (same count and the same
kernel at every sampled position), otherwise a one-line error says where they
differ.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from hilsim.analyzer.methods.base import Method
from hilsim.analyzer.tablecache import TableCache, derived

from hilsim.core.bundle import Bundle
from hilsim.core.errors import HilsimError
from hilsim.core.plan import Plan


@dataclass
class PlanScore:
    """Evaluation of one plan on one bundle (times in ns)."""

    truth_ns: float
    estimate_ns: float
    error: float
    speedup: float
    sampled_ns: float
    n_samples: int
    n_clusters: int
    interval_ns: tuple[float, float] | None
    metric_errors: dict[str, float | None] = field(default_factory=dict)
    metric_notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "truth_ns": self.truth_ns,
            "estimate_ns": self.estimate_ns,
            "error": self.error,
            "speedup": self.speedup,
            "sampled_ns": self.sampled_ns,
            "n_samples": self.n_samples,
            "n_clusters": self.n_clusters,
            "interval_ns": list(self.interval_ns) if self.interval_ns else None,
            "metric_errors": self.metric_errors,
            "metric_notes": self.metric_notes,
        }


def check_compatible(plan: Plan, bundle: Bundle) -> None:
    """Raise a one-line error when ``bundle`` is not the workload ``plan`` was made on."""
    where = str(bundle.path) if bundle.path else "bundle"
    n_plan = int(plan.source.get("n_launches", -1))
    if n_plan != bundle.n_launches:
        raise HilsimError(
            f"{where}: has {bundle.n_launches} launches but the plan was made on "
            f"{n_plan}: the launch sequences differ (different workload or run length)"
        )
    if plan.samples["launch_id"].max() >= bundle.n_launches:
        raise HilsimError(f"{where}: plan samples launch ids beyond the bundle's launches")
    if "name" in plan.samples:
        ids = plan.samples["launch_id"].to_numpy()
        # only the sampled names (not all N as strings)
        actual = bundle.launches["name"].iloc[ids].to_numpy().astype(str)
        expected = plan.samples["name"].to_numpy().astype(str)
        differ = np.flatnonzero(actual != expected)
        if len(differ):
            k = differ[0]
            raise HilsimError(
                f"{where}: launch {ids[k]} is {actual[k]!r} but the plan sampled "
                f"{expected[k]!r} there: the launch sequences differ "
                f"({len(differ)} of {len(ids)} sampled launches disagree)"
            )
    digest = plan.source.get("sequence_digest")
    if digest and digest != bundle.sequence_digest():
        raise HilsimError(
            f"{where}: kernel-name sequence differs from the plan's source "
            f"({plan.source.get('path') or 'unknown bundle'}) although the sampled "
            "launches agree: the workloads launched different kernels elsewhere"
        )


def confidence_interval(
    plan: Plan, values: np.ndarray, z: float = 1.959963984540054, extra_variance: float = 0.0
) -> tuple[float, float] | None:
    """The interval ``estimate ± z * sqrt(variance)`` of the plan's estimate of
    ``sum(values)`` (95% for the default ``z``), or None.

    ``values`` holds one value per launch of the bundle (only the sampled launches' are
    read). The variance is the stratified-sampling variance ``sum_i N_i^2 s_i^2 / m_i``
    (STEM eq. 4) as the module docstring describes, plus ``extra_variance``: the state
    term of a sampled simulation (:mod:`hilsim.analyzer.warmstate`), independent of which
    launches were drawn. None for a deterministic selection
    (``plan.sampling != "random"``), for clusters without a ``size``, and where a
    cluster's variance is unknown (one draw and no profiled ``mean_ns``/``std_ns``).
    """
    if plan.sampling != "random":
        return None
    samples = plan.samples
    ids = samples["launch_id"].to_numpy()
    draws = samples["draws"].to_numpy()
    cluster = samples["cluster"].to_numpy()
    meta = pd.DataFrame(plan.clusters)
    if meta.empty or "size" not in meta:
        return None
    meta = meta.set_index("cluster")
    x = np.asarray(values[ids], dtype=np.float64)
    frame = pd.DataFrame({"cluster": cluster, "x": x, "d": draws.astype(float)})
    frame["dx"] = frame["d"] * frame["x"]
    frame["dxx"] = frame["d"] * frame["x"] ** 2
    g = frame.groupby("cluster").agg(m=("d", "sum"), sx=("dx", "sum"), sxx=("dxx", "sum"))
    g = g.join(meta[["size"]], how="left")
    census = (
        meta["census"].reindex(g.index).fillna(False).astype(bool)
        if "census" in meta
        else (pd.Series(False, index=g.index))
    )
    sample_mean = g["sx"] / g["m"]
    with np.errstate(invalid="ignore", divide="ignore"):
        sample_var = (g["sxx"] - g["m"] * sample_mean**2) / (g["m"] - 1)
    if {"mean_ns", "std_ns"} <= set(meta.columns):
        cov = (meta["std_ns"] / meta["mean_ns"]).reindex(g.index)
        fallback = (cov * sample_mean) ** 2
    else:
        fallback = pd.Series(np.nan, index=g.index)
    var = sample_var.where(g["m"] >= 2, fallback).clip(lower=0)
    var = var.where(~census, 0.0)
    if var.isna().any():
        return None
    total_var = float((g["size"] ** 2 * var / g["m"]).sum()) + max(float(extra_variance), 0.0)
    estimate = float(np.sum(samples["weight"].to_numpy() * x))
    half = z * float(np.sqrt(total_var))
    return estimate - half, estimate + half


@dataclass
class _MetricTotals:
    """What per-metric errors need from a metrics table, whatever the plan."""

    truth: np.ndarray  # total of each column over every launch (NaN counted as 0)
    row_of: np.ndarray | None  # row of each launch id (None: rows are in launch-id order)


def _metric_totals(metrics: pd.DataFrame) -> _MetricTotals:
    """Column totals and launch-id order of ``metrics``, column by column (no copy of
    the whole table).

    Each column is summed on its own (a plain sum where it has no NaN, ``nansum``
    where it has), in launch-id order, as summing the sorted table did.
    """
    columns = [c for c in metrics.columns if c != "launch_id"]
    launch_ids = metrics["launch_id"].to_numpy()
    row_of = None
    if len(launch_ids) and not (np.diff(launch_ids) > 0).all():
        row_of = np.argsort(launch_ids, kind="stable")
    truth = np.empty(len(columns))
    for j, column in enumerate(columns):
        values = metrics[column].to_numpy(dtype=np.float64, na_value=np.nan)
        if row_of is not None:
            values = values[row_of]
        nan = np.isnan(values).any()
        truth[j] = np.nansum(values) if nan else values.sum()
    return _MetricTotals(truth, row_of)


def metric_errors(plan: Plan, bundle: Bundle) -> tuple[dict[str, float | None], list[str]]:
    """Error of the weighted sum for every metric column (STEM Fig. 14).

    The column totals are computed once per metrics table inside a
    :class:`~hilsim.analyzer.tablecache.TableCache` (scoring over seeds); each plan then
    reads only its sampled rows.
    """
    if bundle.metrics is None:
        return {}, ["no metrics in the bundle"]
    metrics = bundle.metrics
    columns = [c for c in metrics.columns if c != "launch_id"]
    if len(metrics) < bundle.n_launches:
        return {c: None for c in columns}, [
            f"metrics cover {len(metrics)} of {bundle.n_launches} launches: the true totals "
            "are unknown, so per-metric errors are not computed (profile with --detailed-all)"
        ]
    totals = derived(metrics, "metric-totals", lambda: _metric_totals(metrics))
    ids = plan.samples["launch_id"].to_numpy()
    rows = totals.row_of[ids] if totals.row_of is not None else ids
    weights = plan.samples["weight"].to_numpy()
    sampled = metrics.iloc[rows][columns].to_numpy(dtype=np.float64, na_value=np.nan)
    truth = totals.truth
    estimate = np.nansum(sampled * weights[:, None], axis=0)
    out: dict[str, float | None] = {}
    for j, column in enumerate(columns):
        out[column] = None if truth[j] == 0 else float(abs(estimate[j] - truth[j]) / abs(truth[j]))
    return out, []


def score_plan(plan: Plan, bundle: Bundle, value: str = "duration_ns") -> PlanScore:
    """Evaluate ``plan`` on ``bundle`` (the bundle it was made on, or another run)."""
    check_compatible(plan, bundle)
    launches = bundle.launches
    durations = launches["duration_ns"].to_numpy()  # int64: no float copy of all N
    total = derived(launches, "total-duration", lambda: float(durations.sum(dtype=np.float64)))
    if value == "duration_ns":
        values = durations
        truth = total
    else:
        if bundle.metrics is None or value not in bundle.metrics.columns:
            raise HilsimError(f"evaluate: the bundle has no metric {value!r}")
        values = np.full(bundle.n_launches, np.nan)
        values[bundle.metrics["launch_id"].to_numpy()] = bundle.metrics[value].to_numpy(float)
        truth = float(np.nansum(values))
    ids = plan.samples["launch_id"].to_numpy()
    weights = plan.samples["weight"].to_numpy()
    estimate = float(np.sum(weights * values[ids].astype(np.float64)))
    sampled = float(durations[ids].sum(dtype=np.float64))
    errors, notes = metric_errors(plan, bundle)
    return PlanScore(
        truth_ns=truth,
        estimate_ns=estimate,
        error=abs(estimate - truth) / truth if truth else float("nan"),
        speedup=total / sampled if sampled else float("inf"),
        sampled_ns=sampled,
        n_samples=len(ids),
        n_clusters=len(plan.clusters),
        interval_ns=confidence_interval(plan, values),
        metric_errors=errors,
        metric_notes=notes,
    )


@dataclass
class MethodSummary:
    """A method evaluated over seeds (STEM Table 3 columns)."""

    method: str
    params: dict[str, Any]
    seeds: list[int]
    errors: list[float]
    speedups: list[float]
    samples: list[int]
    clusters: list[int]
    plan_seconds: list[float]
    covered: list[bool]
    first_plan: Plan
    first_score: PlanScore

    @property
    def mean_error(self) -> float:
        return float(np.mean(self.errors))

    @property
    def max_error(self) -> float:
        return float(np.max(self.errors))

    @property
    def hmean_speedup(self) -> float:
        s = np.asarray(self.speedups, dtype=float)
        return float(len(s) / np.sum(1.0 / s))

    def to_dict(self) -> dict[str, Any]:
        score = self.first_score
        return {
            "method": self.method,
            "params": self.params,
            "seeds": self.seeds,
            "mean_error": self.mean_error,
            "max_error": self.max_error,
            "hmean_speedup": self.hmean_speedup,
            "mean_samples": float(np.mean(self.samples)),
            "mean_clusters": float(np.mean(self.clusters)),
            "mean_plan_seconds": float(np.mean(self.plan_seconds)),
            "interval_coverage": float(np.mean(self.covered)) if self.covered else None,
            "errors": self.errors,
            "speedups": self.speedups,
            "first_seed": score.to_dict(),
        }


def evaluate_method(
    method: Method,
    bundle: Bundle,
    seeds: int | list[int] = 20,
    on: Bundle | None = None,
    progress: Any = None,
) -> MethodSummary:
    """Plan with ``method`` on ``bundle`` for each seed and score on ``on`` (default same).

    Deterministic methods run once whatever ``seeds`` says. Per-bundle facts the
    seeds share (totals, STEM's sort of the launches) are computed once, in a
    :class:`~hilsim.analyzer.tablecache.TableCache` around the loop: the first seed's plan
    time is what one plan costs alone, later seeds' leave out the shared part.
    """
    seed_list = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    if not method.stochastic:
        seed_list = seed_list[:1] or [0]
    target = on if on is not None else bundle
    errors, speedups, samples, clusters, seconds, covered = [], [], [], [], [], []
    first_plan = first_score = None
    with TableCache():
        for seed in seed_list:
            current = method.with_seed(seed) if method.stochastic else method
            t0 = time.perf_counter()
            plan = current.plan(bundle)
            seconds.append(time.perf_counter() - t0)
            score = score_plan(plan, target)
            if first_plan is None:
                first_plan, first_score = plan, score
            errors.append(score.error)
            speedups.append(score.speedup)
            samples.append(score.n_samples)
            clusters.append(score.n_clusters)
            if score.interval_ns is not None:
                lo, hi = score.interval_ns
                covered.append(bool(lo <= score.truth_ns <= hi))
            if progress is not None:
                progress()
    assert first_plan is not None and first_score is not None
    return MethodSummary(
        method=method.name,
        params=method.params(),
        seeds=seed_list,
        errors=errors,
        speedups=speedups,
        samples=samples,
        clusters=clusters,
        plan_seconds=seconds,
        covered=covered,
        first_plan=first_plan,
        first_score=first_score,
    )
