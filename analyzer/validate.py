"""Validate sampled simulation against silicon: numbers (JSON) and one HTML report.

Inputs: a silicon bundle, one or more plans made on it, and simulated cycles per
launch from either Accel-Sim logs of the plan's exported ``kernelslist.g``
(:mod:`hilsim.simmodel.simlog`, :mod:`hilsim.simmodel.export`) or the analytical model
(``hilsim.simmodel.model.predict``) run on every launch.

**Silicon cycles.** ``gpu__cycles_elapsed.max`` from ``metrics.parquet`` where it is
present for a launch; otherwise ``duration_ns * f / 1000`` with ``f`` the SM clock in
MHz: ``--clock-mhz``, else the manifest's ``device.max_sm_clock_mhz``, else the timing
config's ``core.core_clock_mhz``. (Durations are wall time at whatever clock the GPU
ran; ``max_sm_clock_mhz`` is the boost clock, so locked-clock profiles match best.)

**Error decomposition** (PKA, Baddouh et al., MICRO 2021, Table 4 separates the
simulator's error against silicon, "SimError", from the sampling errors "PKS"/"PKA").
With ``S`` = silicon total cycles, ``F`` = full-simulation total (every launch
simulated: the model on all launches, or logs covering all launches) and ``P`` =
sampled-simulation projection ``sum(weight * sim_cycles)`` over the plan's samples:

* simulator error ``= |F - S| / S``;
* sampling error ``= |P - F| / F`` (what sampling adds inside the simulator);
* total error ``= |P - S| / S`` (what a user of sampled simulation sees).

When ``F`` is unknown (logs for the sampled launches only) only the total error is
given; the silicon-side sampling error of the same plan (``score_plan`` on
durations) is reported beside it. Speedup and the 95% interval follow
:mod:`hilsim.analyzer.evaluate` (STEM section 4.1); the interval of ``P`` uses the simulated
cycles of the samples.

**Counter correlation** (Accel-Sim, Khairy et al., ISCA 2020, section V): for each
pair of a simulator counter and its Nsight Compute counterpart, over the launches
that have both: cycles and instructions by mean absolute error ``MAE = mean(|sim -
hw| / hw)``, other counters by ``NRMSE = sqrt(mean((sim - hw)^2)) / mean(hw)``, and
Pearson's ``r``. Per-metric errors of the weighted sums for every silicon counter
follow STEM Fig. 14 (:func:`hilsim.analyzer.evaluate.metric_errors`).

**Per cluster.** Each cluster's samples give its silicon estimate and simulated
projection. Where the cluster members are known (:mod:`hilsim.analyzer.membership`: from
the method, or by re-running it with the plan's parameters) the table adds the
cluster's silicon truth, the error of its estimate and the coefficient of variation
of its launches' durations, and the histograms show each cluster's own launches
(STEM+ROOT Fig. 10); otherwise histograms are per kernel name (STEM Fig. 1).

Plots are matplotlib PNGs embedded as base64; every string in the HTML is escaped
with :func:`html.escape`. Histograms are built from binned counts; scatter plots show
at most :data:`MAX_SCATTER` points drawn with a fixed seed (said in the title).
"""

from __future__ import annotations

import base64
import html
import io
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from hilsim.analyzer.evaluate import _interval, check_compatible, metric_errors, score_plan
from hilsim.analyzer.membership import cluster_members
from hilsim.simmodel.correlation import correlation

from hilsim.core.bundle import Bundle
from hilsim.core.errors import HilsimError
from hilsim.core.files import write_text_atomic
from hilsim.core.plan import Plan, _jsonable

SILICON_CYCLES_METRIC = "gpu__cycles_elapsed.max"
MAX_SCATTER = 5000
SCATTER_SEED = 0
TOP_KERNELS = 6
MAX_CLUSTER_ROWS = 100
#: clusters shown in the page's table (by share of the projection); the rest, up to
#: MAX_CLUSTER_ROWS, behind a <details> toggle
TOP_CLUSTER_ROWS = 12
#: kernel names longer than this are shortened in tables (the full name is a tooltip)
NAME_CHARS = 60

#: simulator column -> candidate Nsight Compute metrics (first present is used)
COUNTER_PAIRS: dict[str, tuple[str, ...]] = {
    "instructions": ("smsp__thread_inst_executed.sum", "thread_inst_executed"),
    "warp_instructions": ("smsp__inst_executed.sum", "sm__inst_executed.sum", "inst_executed"),
    "l1d_global_read_accesses": ("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",),
    "l1d_global_read_hits": ("l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_hit.sum",),
    "l2_global_read_accesses": ("lts__t_sectors_srcunit_tex_op_read.sum",),
    "l2_global_read_hits": ("lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum",),
    "l2_global_write_accesses": ("lts__t_sectors_srcunit_tex_op_write.sum",),
    "l2_accesses": ("lts__t_sectors.sum", "lts__t_requests.sum"),
    "dram_reads": ("dram__sectors_read.sum",),
    "dram_writes": ("dram__sectors_write.sum",),
    "l1d_accesses": ("l1tex__t_sectors.sum",),
    "l1d_misses": ("l1tex__t_sectors_lookup_miss.sum",),
    "l2_misses": ("lts__t_sectors_lookup_miss.sum",),
    "global_read_requests": ("lts__t_requests_srcunit_tex_op_read.sum",),
    "global_write_requests": ("lts__t_requests_srcunit_tex_op_write.sum",),
}
MAE_COUNTERS = ("cycles", "instructions", "warp_instructions")


@dataclass
class SimResults:
    """Simulated values per launch of the bundle (NaN where a launch was not simulated).

    Attributes:
        cycles: float array of length ``n_launches``.
        counters: other simulated counters per launch (columns as in
            :mod:`hilsim.simmodel.simlog`), same length; may be empty.
        source: ``"accel-sim logs"`` or ``"analytical model"`` (shown in the report).
        detail: free text (files, config name).
    """

    cycles: np.ndarray
    counters: pd.DataFrame = field(default_factory=pd.DataFrame)
    source: str = "simulation"
    detail: str = ""

    @property
    def covers_all(self) -> bool:
        return bool(np.isfinite(self.cycles).all())


# --- inputs ------------------------------------------------------------------------------


def sm_clock_mhz(bundle: Bundle, clock_mhz: float | None = None, timing: Any = None) -> float:
    """SM clock used to turn durations into cycles (see the module docstring)."""
    if clock_mhz:
        return float(clock_mhz)
    device = bundle.manifest.get("device") or {}
    value = device.get("max_sm_clock_mhz") if isinstance(device, dict) else None
    if value:
        return float(value)
    if timing is not None:
        for dotted in ("core.core_clock_mhz", "core.boost_clock_mhz"):
            item = timing.get(dotted)
            if item is not None:
                return float(item.value)
    where = str(bundle.path) if bundle.path else "bundle"
    raise HilsimError(
        f"{where}: no SM clock to convert durations to cycles: the manifest has no "
        "device.max_sm_clock_mhz; pass --clock-mhz"
    )


def silicon_cycles(bundle: Bundle, clock_mhz: float) -> tuple[np.ndarray, str]:
    """Silicon cycles per launch and a note saying where they come from."""
    cycles = bundle.launches["duration_ns"].to_numpy(np.float64) * clock_mhz / 1000.0
    note = f"duration_ns x {clock_mhz:g} MHz"
    if bundle.metrics is not None and SILICON_CYCLES_METRIC in bundle.metrics.columns:
        ids = bundle.metrics["launch_id"].to_numpy()
        measured = bundle.metrics[SILICON_CYCLES_METRIC].to_numpy(np.float64)
        ok = np.isfinite(measured)
        cycles[ids[ok]] = measured[ok]
        note = (
            f"{SILICON_CYCLES_METRIC} for {int(ok.sum())} launches, "
            f"duration_ns x {clock_mhz:g} MHz for the rest"
        )
    return cycles, note


def results_from_simlog(plan: Plan, bundle: Bundle, simlog: pd.DataFrame) -> SimResults:
    """Place simulated kernels (in ``kernelslist.g`` order) at the plan's launches.

    A log that covers *every* launch of the bundle (a full simulation) is placed by
    launch order instead, which gives the full-simulation total.
    """
    from hilsim.simmodel.export import check_simulated_names, match_sim_results

    n = bundle.n_launches
    cycles = np.full(n, np.nan)
    counter_cols = [
        c
        for c in simlog.columns
        if c not in ("sim_launch", "launch_id", "log", "uid", "kernel", "ipc", "tot_cycles",
                     "cycles", "occupancy_pct")
    ]
    counters = pd.DataFrame(np.nan, index=np.arange(n), columns=counter_cols)
    if "launch_id" in simlog.columns and len(simlog) == n and (
        np.sort(simlog["launch_id"].to_numpy()) == np.arange(n)
    ).all():
        values = simlog.sort_values("launch_id", kind="stable")
        ids = values["launch_id"].to_numpy()
        check_simulated_names(bundle.launches["name"].astype(str).to_numpy()[ids],
                              values["kernel"].to_numpy(), ids)
    elif len(simlog) == n and len(simlog) != plan.n_samples:
        ordered = simlog.sort_values("sim_launch", kind="stable")
        ids = np.arange(n)
        check_simulated_names(bundle.launches["name"].astype(str).to_numpy(),
                              ordered["kernel"].to_numpy(), ids)
        values = ordered
    else:
        values = match_sim_results(plan, simlog)
        ids = values["launch_id"].to_numpy()
    cycles[ids] = values["cycles"].to_numpy(np.float64)
    for c in counter_cols:
        counters.loc[ids, c] = values[c].to_numpy(np.float64)
    files = sorted(set(simlog["log"])) if "log" in simlog else []
    return SimResults(cycles, counters, "accel-sim logs", ", ".join(map(str, files[:5])))


def model_input(bundle: Bundle) -> pd.DataFrame:
    """Launches joined with their metrics (one row per launch, ``launch_id`` order)."""
    frame = bundle.launches
    if bundle.metrics is not None:
        frame = frame.merge(bundle.metrics, on="launch_id", how="left")
    return frame


def results_from_model(
    bundle: Bundle,
    config: Any,
    predictor: Callable[[Any, pd.DataFrame], pd.DataFrame] | None = None,
) -> SimResults:
    """Run the analytical model on every launch (``hilsim.simmodel.model.predict``)."""
    inputs = model_input(bundle)
    if predictor is None:
        from hilsim.simmodel.model import predict as predictor  # type: ignore[no-redef]
        from hilsim.simmodel.model import require_counters

        require_counters(inputs, f"{bundle.path or 'bundle'}: --model")
    out = predictor(config, inputs)
    if "cycles" not in out.columns or len(out) != bundle.n_launches:
        raise HilsimError(
            f"--model: the model returned {len(out)} rows without a 'cycles' column for "
            f"{bundle.n_launches} launches"
        )
    cycles = out["cycles"].to_numpy(np.float64)
    counters = out.drop(columns=[c for c in ("cycles", "launch_id") if c in out.columns])
    counters = counters.select_dtypes("number").reset_index(drop=True)
    name = getattr(config, "name", "") or ""
    return SimResults(cycles, counters, "analytical model", str(name))


# --- numbers ------------------------------------------------------------------------------


def _rel(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or not np.isfinite(a) or not np.isfinite(b) or b == 0:
        return None
    return float(abs(a - b) / abs(b))


def _silicon_metric(bundle: Bundle, names: tuple[str, ...]) -> tuple[str, np.ndarray] | None:
    if bundle.metrics is None:
        return None
    for name in names:
        if name in bundle.metrics.columns:
            values = np.full(bundle.n_launches, np.nan)
            values[bundle.metrics["launch_id"].to_numpy()] = bundle.metrics[name].to_numpy(float)
            return name, values
    return None


def cluster_table(
    plan: Plan,
    bundle: Bundle,
    silicon: np.ndarray,
    sampled_sim: np.ndarray,
    members: np.ndarray | None,
) -> list[dict[str, Any]]:
    """One record per cluster, largest projected share first.

    Always: the weighted sums of the cluster's samples on silicon and in simulation.
    With ``members``: the cluster's silicon truth (sum over its launches), the error
    of its silicon estimate against that truth, and the coefficient of variation of
    its launches' durations (STEM Fig. 10: the spread a cluster hides). Vectorised
    with ``np.bincount`` over launches.
    """
    ids = plan.samples["launch_id"].to_numpy()
    weights = plan.samples["weight"].to_numpy(np.float64)
    cluster_of = plan.samples["cluster"].to_numpy(np.int64)
    known = [int(c["cluster"]) for c in plan.clusters if "cluster" in c]
    k = int(max([*known, int(cluster_of.max()) if len(cluster_of) else -1])) + 1
    n_samples = np.bincount(cluster_of, minlength=k)
    sil_est = np.bincount(cluster_of, weights=weights * silicon[ids], minlength=k)
    sim_est = np.bincount(cluster_of, weights=weights * sampled_sim, minlength=k)
    truth = count = cov = None
    if members is not None:
        inside = members >= 0
        m = members[inside]
        durations = bundle.launches["duration_ns"].to_numpy(np.float64)[inside]
        count = np.bincount(m, minlength=k)[:k]
        truth = np.bincount(m, weights=silicon[inside], minlength=k)[:k]
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.bincount(m, weights=durations, minlength=k)[:k] / count
            dev = durations - mean[m]
            std = np.sqrt(np.bincount(m, weights=dev * dev, minlength=k)[:k] / count)
            cov = std / mean
    names_by_cluster: dict[int, list[str]] = {}
    if "name" in plan.samples:
        for cid, name in zip(cluster_of, plan.samples["name"].astype(str), strict=True):
            seen = names_by_cluster.setdefault(int(cid), [])
            if name not in seen and len(seen) < 3:
                seen.append(name)
    meta = {int(c["cluster"]): c for c in plan.clusters if "cluster" in c}
    projection = float(sim_est.sum())
    records = []
    for cid in np.flatnonzero(n_samples):
        info = meta.get(int(cid), {})
        record: dict[str, Any] = {
            "cluster": int(cid),
            "label": str(info.get("label", "")),
            "size": int(info["size"]) if "size" in info else None,
            "samples": int(n_samples[cid]),
            "kernels": names_by_cluster.get(int(cid), []),
            "silicon_estimate_cycles": float(sil_est[cid]),
            "sim_projection_cycles": float(sim_est[cid]),
            "sim_over_silicon": float(sim_est[cid] / sil_est[cid]) if sil_est[cid] else None,
            "share_of_projection": float(sim_est[cid] / projection) if projection else None,
        }
        if truth is not None and count is not None and cov is not None:
            record["launches"] = int(count[cid])
            record["silicon_truth_cycles"] = float(truth[cid])
            record["silicon_sampling_error"] = _rel(float(sil_est[cid]), float(truth[cid]))
            record["duration_cov"] = float(cov[cid]) if np.isfinite(cov[cid]) else None
        records.append(record)
    records.sort(key=lambda c: -(c["sim_projection_cycles"] or 0.0))
    return records


def validate_plan(
    plan: Plan,
    bundle: Bundle,
    sim: SimResults,
    clock_mhz: float,
    label: str = "plan",
    members: np.ndarray | None = None,
    members_note: str = "",
) -> dict[str, Any]:
    """All numbers of the report for one plan (JSON-ready).

    ``members`` (:func:`hilsim.analyzer.membership.cluster_members`) adds each cluster's
    silicon truth, its sampling error and the spread of its launches' durations.
    """
    score = score_plan(plan, bundle)  # checks the plan belongs to this bundle
    silicon, silicon_note = silicon_cycles(bundle, clock_mhz)
    ids = plan.samples["launch_id"].to_numpy()
    weights = plan.samples["weight"].to_numpy(np.float64)
    sampled_sim = sim.cycles[ids]
    if not np.isfinite(sampled_sim).all():
        k = int(np.flatnonzero(~np.isfinite(sampled_sim))[0])
        raise HilsimError(
            f"{label}: no simulated cycles for sampled launch {int(ids[k])}: the "
            "simulation does not cover the plan's samples"
        )
    silicon_total = float(silicon.sum())
    full = float(sim.cycles.sum()) if sim.covers_all else None
    projection = float(np.sum(weights * sampled_sim))
    interval = _interval(plan, np.where(np.isfinite(sim.cycles), sim.cycles, 0.0))
    silicon_estimate = float(np.sum(weights * silicon[ids]))
    headline = {
        "silicon_total_cycles": silicon_total,
        "full_simulation_total_cycles": full,
        "sampled_projection_cycles": projection,
        "simulator_error": _rel(full, silicon_total),
        "sampling_error": _rel(projection, full),
        "total_error": _rel(projection, silicon_total),
        "silicon_sampling_error": _rel(silicon_estimate, silicon_total),
        "speedup": score.speedup,
        "n_samples": score.n_samples,
        "n_clusters": score.n_clusters,
        "interval_cycles": list(interval) if interval else None,
        "interval_covers_silicon": bool(interval[0] <= silicon_total <= interval[1])
        if interval
        else None,
        "silicon_cycles_from": silicon_note,
        "clock_mhz": clock_mhz,
    }
    clusters = cluster_table(plan, bundle, silicon, sampled_sim, members)
    errors, notes = metric_errors(plan, bundle)
    # counter-by-counter correlation over launches that have both values
    corr: list[dict[str, Any]] = []
    c = correlation(sim.cycles, silicon, "MAE")
    corr.append({"sim": "cycles", "silicon": "cycles (" + silicon_note + ")", **c})
    for sim_col, candidates in COUNTER_PAIRS.items():
        if sim_col not in sim.counters.columns:
            continue
        found = _silicon_metric(bundle, candidates)
        if found is None:
            continue
        name, hw = found
        kind = "MAE" if sim_col in MAE_COUNTERS else "NRMSE"
        corr.append(
            {
                "sim": sim_col,
                "silicon": name,
                **correlation(sim.counters[sim_col].to_numpy(float), hw, kind),
            }
        )
    return {
        "label": label,
        "method": plan.method,
        "params": plan.params,
        "sampling": plan.sampling,
        "simulation": {
            "source": sim.source,
            "detail": sim.detail,
            "covers_all_launches": sim.covers_all,
        },
        "headline": headline,
        "silicon_score": score.to_dict(),
        "cluster_members": members_note or "cluster members unknown",
        "clusters": clusters,
        "metric_errors": errors,
        "metric_notes": notes,
        "correlation": corr,
    }


# --- plots --------------------------------------------------------------------------------


def _png(fig: Any) -> str:
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90)
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def scatter_png(sim: np.ndarray, hw: np.ndarray, title: str) -> str | None:
    """Log-log scatter of simulated vs silicon values (subsampled with a fixed seed)."""
    ok = np.isfinite(sim) & np.isfinite(hw) & (sim > 0) & (hw > 0)
    idx = np.flatnonzero(ok)
    if len(idx) == 0:
        return None
    note = f"{len(idx)} launches"
    if len(idx) > MAX_SCATTER:
        idx = np.sort(np.random.default_rng(SCATTER_SEED).choice(idx, MAX_SCATTER, replace=False))
        note = f"{MAX_SCATTER} of {int(ok.sum())} launches, random subsample seed {SCATTER_SEED}"
    plt = _plt()
    fig, ax = plt.subplots(figsize=(4.2, 4.0))
    ax.scatter(hw[idx], sim[idx], s=6, alpha=0.5)
    lo = float(min(hw[idx].min(), sim[idx].min()))
    hi = float(max(hw[idx].max(), sim[idx].max()))
    ax.plot([lo, hi], [lo, hi], color="gray", lw=1, ls="--")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("silicon")
    ax.set_ylabel("simulated")
    ax.set_title(f"{title}\n({note})", fontsize=8)
    fig.tight_layout()
    return _png(fig)


def histograms_png(
    bundle: Bundle,
    plan: Plan,
    members: np.ndarray | None = None,
    clusters: list[dict[str, Any]] | None = None,
) -> str | None:
    """Duration histograms (40 log bins, binned counts) with the sampled launches marked.

    With ``members``: one panel per cluster, the :data:`TOP_KERNELS` clusters with the
    largest projected share (``clusters`` as :func:`cluster_table` orders them), each
    showing the durations of the launches the cluster stands for (STEM Fig. 10: the
    spread inside one cluster). Without: one panel per kernel name, the kernels with
    the most time (STEM Fig. 1), sampled launches coloured by cluster. Clusters and
    kernels of one launch get no panel (a single bar says nothing); None when nothing is
    left to draw. Durations in µs on a log axis, counts of launches on the other.
    """
    durations = bundle.launches["duration_ns"].to_numpy(np.float64)
    ids = plan.samples["launch_id"].to_numpy()
    cluster_of = plan.samples["cluster"].to_numpy()
    panels: list[tuple[str, np.ndarray, np.ndarray, np.ndarray]] = []
    if members is not None:
        # a one-launch cluster has no distribution to show: no panel for it
        order = [
            int(c["cluster"])
            for c in (clusters or [])
            if (c.get("launches") if c.get("launches") is not None else c.get("size") or 2) > 1
        ][:TOP_KERNELS]
        labels = {int(c["cluster"]): str(c.get("label", "")) for c in clusters or []}
        by_cluster = np.argsort(members, kind="stable")
        sorted_members = members[by_cluster]
        for cid in order:
            lo, hi = np.searchsorted(sorted_members, [cid, cid + 1])
            values = durations[by_cluster[lo:hi]]
            mine = cluster_of == cid
            cov = float(values.std() / values.mean()) if len(values) and values.mean() else 0.0
            title = f"cluster {cid}: {labels.get(cid, '')}"
            title = (title[:44] + "...") if len(title) > 44 else title
            title += f"\n{len(values):,} launches, CoV {cov:.3f}"
            panels.append((title, values, durations[ids[mine]], cluster_of[mine]))
        heading = (
            "Duration histograms of the clusters with the largest projected share "
            "(40 log bins; vertical lines: the cluster's sampled launches)"
        )
    else:
        names = bundle.launches["name"]
        codes = names.cat.codes.to_numpy() if hasattr(names, "cat") else pd.factorize(names)[0]
        categories = names.cat.categories if hasattr(names, "cat") else pd.unique(names)
        totals = np.bincount(codes, weights=durations)
        counts_by_code = np.bincount(codes, minlength=len(totals))
        totals = np.where(counts_by_code > 1, totals, -1.0)  # one launch: no panel
        sample_codes = codes[ids]
        for code in [c for c in np.argsort(totals)[::-1] if totals[c] >= 0][:TOP_KERNELS]:
            label = str(categories[code])
            title = (label[:44] + "...") if len(label) > 44 else label
            mine = sample_codes == code
            panels.append((title, durations[codes == code], durations[ids[mine]],
                           cluster_of[mine]))
        heading = (
            "Duration histograms of the kernels with the most time "
            "(40 log bins; vertical lines: sampled launches, coloured by cluster)"
        )
    if not panels:
        return None
    plt = _plt()
    from matplotlib.ticker import FuncFormatter

    cols = 3
    rows = max(1, int(np.ceil(len(panels) / cols)))
    fig, axes = plt.subplots(rows, cols, figsize=(12, 3.2 * rows), squeeze=False)
    microseconds = FuncFormatter(lambda v, _: f"{v / 1000:,.4g}")
    cmap = plt.get_cmap("tab10")
    for ax, (title, values, sampled, sampled_cluster) in zip(axes.ravel(), panels,
                                                              strict=False):
        positive = values[values > 0]
        lo, hi = (positive.min(), positive.max()) if len(positive) else (1.0, 10.0)
        edges = np.geomspace(max(lo, 1.0), max(hi, lo * 1.01, 2.0), 41)
        counts, _ = np.histogram(values, bins=edges)
        ax.stairs(counts, edges, fill=True, alpha=0.6)
        for value, cid in zip(sampled[:200], sampled_cluster[:200], strict=True):
            ax.axvline(value, color=cmap(int(cid) % 10), lw=0.8)
        ax.set_xscale("log")
        # four ticks spread over the panel's own range (a narrow range has no decade tick)
        ticks = np.unique([float(f"{t:.2g}") for t in np.geomspace(edges[0], edges[-1], 4)])
        ax.set_xticks(ticks)
        ax.xaxis.set_major_formatter(microseconds)
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
        ax.tick_params(labelsize=9)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("duration (µs, log scale)", fontsize=9)
        ax.set_ylabel("launches", fontsize=9)
    for ax in axes.ravel()[len(panels):]:
        ax.axis("off")
    fig.suptitle(heading, fontsize=10)
    fig.tight_layout()
    return _png(fig)


def pareto_png(results: list[dict[str, Any]], n_launches: int = 0) -> str:
    """Speedup vs total error of several plans (STEM Fig. 9), via compare.pareto_plot."""
    import tempfile

    from hilsim.analyzer.compare import pareto_plot, reduction_flag

    summaries = [
        {
            "method": r["label"],
            "hmean_speedup": r["headline"]["speedup"],
            "mean_error": r["headline"]["total_error"] or 0.0,
            "no_reduction": reduction_flag(
                r["headline"]["speedup"],
                r["headline"]["n_samples"],
                n_launches,
            ),
        }
        for r in results
    ]
    with tempfile.TemporaryDirectory() as tmp:
        path = pareto_plot(
            summaries,
            Path(tmp) / "pareto.png",
            "speedup vs total error (sampled simulation vs silicon)",
            xlabel="speedup (silicon time / time of the sampled launches)",
            ylabel="total error vs silicon (%)",
        )
        return base64.b64encode(path.read_bytes()).decode("ascii")


# --- report -------------------------------------------------------------------------------

_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em auto;padding:0 1.5em;max-width:1200px;
color:#222}
main{max-width:100%}
table{border-collapse:collapse;margin:0.6em 0;font-size:13px;max-width:100%}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:right;white-space:nowrap}
th{background:#f0f0f0;white-space:normal}
td.l,th.l{text-align:left;max-width:20em;white-space:normal;overflow-wrap:anywhere}
h2{border-bottom:1px solid #ddd;margin-top:1.6em}.note{color:#555;font-size:12px}
img{max-width:100%;height:auto}.grid{display:flex;flex-wrap:wrap;gap:8px}
.flag{background:#fde8e8;border-left:5px solid #c00;padding:0.5em 0.9em;color:#900;
font-weight:600}
td.miss{background:#fde8e8;color:#b00;font-weight:700}td.ok{color:#070}
details{margin:0.4em 0}summary{cursor:pointer;color:#05a}
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _name(text: Any, limit: int = NAME_CHARS) -> str:
    """A kernel name for a table cell: escaped, shortened, the full name as a tooltip."""
    full = str(text)
    if len(full) <= limit:
        return _e(full)
    return f"<span title='{_e(full)}'>{_e(full[: limit - 3])}...</span>"


def _fmt(value: Any, kind: str = "num") -> str:
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return "n/a"
    if kind == "pct":
        return f"{100 * float(value):.2f}%"
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"
    return _e(value)


def _table(headers: list[str], rows: list[list[str]], left: int = 1) -> str:
    head = "".join(
        f"<th class='l'>{_e(h)}</th>" if i < left else f"<th>{_e(h)}</th>"
        for i, h in enumerate(headers)
    )
    body = "".join(
        "<tr>"
        + "".join(
            f"<td class='l'>{c}</td>" if i < left else f"<td>{c}</td>" for i, c in enumerate(r)
        )
        + "</tr>"
        for r in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _img(b64: str | None, alt: str) -> str:
    if not b64:
        return ""
    return f"<img alt='{_e(alt)}' src='data:image/png;base64,{b64}'>"


def _interval_cell(h: dict[str, Any]) -> str:
    """The 95% interval's verdict: a red cell when it misses the silicon total."""
    covers = h.get("interval_covers_silicon")
    if covers is None:
        return "<td>n/a</td>"
    if covers:
        return "<td class='ok'>contains silicon</td>"
    return "<td class='miss'>MISSES silicon</td>"


def _cluster_rows(clusters: list[dict[str, Any]], with_members: bool) -> list[list[str]]:
    rows = []
    for c in clusters:
        row = [
            _e(c["cluster"]),
            _name(c["label"]),
            "<br>".join(_name(k) for k in c["kernels"] if k != c["label"]),
            _fmt(c["size"]),
            _fmt(c["samples"]),
            _fmt(c["silicon_estimate_cycles"]),
            _fmt(c["sim_projection_cycles"]),
            _fmt(c["sim_over_silicon"]),
            _fmt(c["share_of_projection"], "pct"),
        ]
        if with_members:
            row += [
                _fmt(c.get("silicon_truth_cycles")),
                _fmt(c.get("silicon_sampling_error"), "pct"),
                _fmt(c.get("duration_cov")),
            ]
        rows.append(row)
    return rows


def render_html(report: dict[str, Any], images: dict[str, Any]) -> str:
    """The self-contained HTML (inline CSS, base64 images, escaped strings).

    Order: the headline (errors, speedup, whether each 95% interval contains the silicon
    total, flagged in red when it does not) and the figures first; then per plan its
    histograms, the :data:`TOP_CLUSTER_ROWS` clusters with the largest share of the
    projection (the rest behind a ``<details>`` toggle), counter correlation and
    per-metric errors. Tables wrap long cells so the page fits its 1200 px column.
    """
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>{_e('hilsim validation: ' + report['bundle']['path'])}</title>",
        f"<style>{_CSS}</style></head><body><main>",
        "<h1>Sampled simulation vs silicon</h1>",
        f"<p class='note'>bundle {_e(report['bundle']['path'])}: "
        f"{_e(report['bundle']['n_launches'])} launches on {_e(report['bundle']['device'])}; "
        f"simulation: {_e(report['simulation']['source'])} {_e(report['simulation']['detail'])}"
        "</p>",
    ]
    for r in report["plans"]:
        h = r["headline"]
        if h.get("interval_covers_silicon") is False:
            lo, hi = h["interval_cycles"]
            parts.append(
                f"<p class='flag'>Plan {_e(r['label'])}: the 95% interval of the sampled "
                f"projection [{_fmt(lo)}, {_fmt(hi)}] cycles misses the silicon total "
                f"{_fmt(h['silicon_total_cycles'])} cycles: the simulator's error, not "
                "sampling, dominates (or the interval is too narrow).</p>"
            )
    parts.append("<h2>Headline</h2>")
    headline_rows, total_rows = [], []
    for r in report["plans"]:
        h = r["headline"]
        interval = h["interval_cycles"]
        cells = [
            f"<td class='l'>{_e(r['label'])}</td>",
            f"<td class='l'>{_e(r['method'])}</td>",
            f"<td>{_fmt(h['total_error'], 'pct')}</td>",
            f"<td>{_fmt(h['simulator_error'], 'pct')}</td>",
            f"<td>{_fmt(h['sampling_error'], 'pct')}</td>",
            f"<td>{_fmt(h['silicon_sampling_error'], 'pct')}</td>",
            f"<td>{_fmt(h['speedup'])}</td>",
            f"<td>{_fmt(h['n_samples'])}</td>",
            _interval_cell(h),
        ]
        headline_rows.append("<tr>" + "".join(cells) + "</tr>")
        total_rows.append(
            [
                _e(r["label"]),
                _fmt(h["silicon_total_cycles"]),
                _fmt(h["full_simulation_total_cycles"]),
                _fmt(h["sampled_projection_cycles"]),
                "n/a" if not interval else f"[{_fmt(interval[0])}, {_fmt(interval[1])}]",
            ]
        )
    head = ["plan", "method", "total error", "simulator error", "sampling error",
            "silicon sampling error", "speedup", "samples", "95% interval vs silicon"]
    parts.append(
        "<table><tr>"
        + "".join(f"<th class='l'>{_e(x)}</th>" if i < 2 else f"<th>{_e(x)}</th>"
                  for i, x in enumerate(head))
        + "</tr>" + "".join(headline_rows) + "</table>"
    )
    parts.append(
        "<p class='note'>total error = |sampled projection - silicon| / silicon (what a "
        "user of sampled simulation sees); simulator error = |full sim - silicon| / "
        "silicon; sampling error = |sampled projection - full sim| / full sim (PKA "
        "Table 4: SimError vs sampling error); silicon sampling error: the plan's error "
        "on the profiled durations alone.</p>"
    )
    if images.get("pareto"):
        parts += ["<h2>Speedup vs error</h2>", _img(images["pareto"], "Pareto plot")]
    parts.append("<h3>Totals (cycles)</h3>")
    parts.append(
        _table(["plan", "silicon", "full simulation", "sampled projection",
                "95% interval of the projection"], total_rows)
    )
    if report["plans"]:
        parts.append(
            f"<p class='note'>silicon cycles: "
            f"{_e(report['plans'][0]['headline']['silicon_cycles_from'])}</p>"
        )
    for i, r in enumerate(report["plans"]):
        parts.append(f"<h2>Plan {_e(r['label'])} ({_e(r['method'])})</h2>")
        parts.append("<h3>Duration histograms</h3>")
        if images["hist"][i]:
            parts.append(_img(images["hist"][i], "duration histograms"))
        else:
            parts.append("<p class='note'>every cluster holds one launch: no histogram</p>")
        with_members = any("launches" in c for c in r["clusters"])
        parts.append(
            "<h3>Clusters</h3><p class='note'>largest share of the projection first; "
            "estimates are weighted sums of the cluster's samples; truth, error and "
            "duration CoV (std / mean of the launches' durations, the spread the cluster "
            "hides: STEM Fig. 10) need the cluster's members: "
            f"{_e(r['cluster_members'])}</p>"
        )
        headers = ["cluster", "label", "other sampled kernels", "size", "samples",
                   "silicon estimate", "sim projection", "sim / silicon", "share of projection"]
        if with_members:
            headers += ["silicon truth", "silicon sampling error", "duration CoV"]
        clusters = r["clusters"][:MAX_CLUSTER_ROWS]
        top, rest = clusters[:TOP_CLUSTER_ROWS], clusters[TOP_CLUSTER_ROWS:]
        parts.append(_table(headers, _cluster_rows(top, with_members), left=3))
        if rest:
            share = sum(c["share_of_projection"] or 0.0 for c in rest)
            parts.append(
                f"<details><summary>{len(rest)} more clusters ({_fmt(share, 'pct')} of the "
                "projection)</summary>"
                + _table(headers, _cluster_rows(rest, with_members), left=3)
                + "</details>"
            )
        if len(r["clusters"]) > MAX_CLUSTER_ROWS:
            parts.append(
                f"<p class='note'>first {MAX_CLUSTER_ROWS} of {len(r['clusters'])} "
                "clusters by projected share; all are in the JSON</p>"
            )
        if r.get("decomposition"):
            from hilsim.analyzer.decompose import render_html as decomposition_html

            parts.append(decomposition_html(r["label"], r["decomposition"]))
        parts.append("<h3>Counter correlation, simulator vs silicon</h3>")
        parts.append(
            _table(
                ["simulator", "silicon", "launches", "error kind", "error", "Pearson r"],
                [
                    [
                        _e(c["sim"]),
                        _e(c["silicon"]),
                        _fmt(c["n"]),
                        _e(c["kind"]),
                        _fmt(c["error"], "pct"),
                        _fmt(c["pearson_r"]),
                    ]
                    for c in r["correlation"]
                ],
                left=2,
            )
        )
        parts.append(
            "<div class='grid'>"
            + "".join(_img(b, f"scatter {name}") for name, b in images["scatter"][i])
            + "</div>"
        )
        parts.append("<h3>Per-metric error of the weighted sums (STEM Fig. 14)</h3>")
        if r["metric_errors"]:
            parts.append(
                _table(
                    ["metric", "error"],
                    [[_e(k), _fmt(v, "pct")] for k, v in sorted(r["metric_errors"].items())],
                )
            )
        for note in r["metric_notes"]:
            parts.append(f"<p class='note'>{_e(note)}</p>")
    parts.append("</main></body></html>")
    return "\n".join(parts)


def memo_by_plan(sim_for: Callable[[Plan], SimResults]) -> Callable[[Plan], SimResults]:
    """``sim_for`` computed once per plan object (validate and the decomposition both ask)."""
    done: dict[int, tuple[Plan, SimResults]] = {}

    def cached(plan: Plan) -> SimResults:
        if id(plan) not in done:  # the plan is kept with its result: its id stays its own
            done[id(plan)] = (plan, sim_for(plan))
        return done[id(plan)][1]

    return cached


def validate(
    bundle: Bundle,
    plans: list[tuple[str, Plan]],
    sim_for: Callable[[Plan], SimResults],
    clock_mhz: float,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Numbers (JSON dict) and images for every plan."""
    results = []
    images: dict[str, Any] = {"scatter": [], "hist": [], "pareto": None}
    silicon, _ = silicon_cycles(bundle, clock_mhz)
    first_sim: SimResults | None = None
    for label, plan in plans:
        check_compatible(plan, bundle)  # before re-running the method for its members
        members, members_note = cluster_members(plan, bundle)
        sim = sim_for(plan)
        first_sim = first_sim or sim
        result = validate_plan(plan, bundle, sim, clock_mhz, label, members, members_note)
        results.append(result)
        scatters = [("cycles", scatter_png(sim.cycles, silicon, "cycles"))]
        for c in result["correlation"][1:]:
            found = _silicon_metric(bundle, (c["silicon"],))
            if found is not None:
                scatters.append(
                    (
                        c["sim"],
                        scatter_png(sim.counters[c["sim"]].to_numpy(float), found[1], c["sim"]),
                    )
                )
        images["scatter"].append(scatters)
        images["hist"].append(histograms_png(bundle, plan, members, result["clusters"]))
    if len(results) > 1:
        images["pareto"] = pareto_png(results, bundle.n_launches)
    device = bundle.manifest.get("device") or {}
    report = {
        "schema": "hilsim.validation/1",
        "bundle": {
            "path": str(bundle.path) if bundle.path else "",
            "n_launches": bundle.n_launches,
            "device": device.get("name", "unknown") if isinstance(device, dict) else "unknown",
        },
        "simulation": {
            "source": first_sim.source if first_sim else "",
            "detail": first_sim.detail if first_sim else "",
        },
        "plans": results,
    }
    return report, images


def write_report(
    report: dict[str, Any], images: dict[str, Any], out: str | os.PathLike[str]
) -> tuple[Path, Path]:
    """Write ``OUT.html`` and ``OUT.json`` (atomically); ``out`` may end in .html."""
    base = Path(out)
    if base.suffix in (".html", ".json"):
        base = base.with_suffix("")
    html_path = write_text_atomic(base.with_suffix(".html"), render_html(report, images))
    json_path = write_text_atomic(
        base.with_suffix(".json"), json.dumps(_jsonable(report), indent=1) + "\n"
    )
    return html_path, json_path
