"""The figures of the validation report: matplotlib PNGs as base64 text.

Scatter plots of simulated vs silicon values per counter (Accel-Sim, Khairy et al., ISCA
2020, section V) show at most :data:`MAX_SCATTER` points drawn with a fixed seed (said in
the title). Duration histograms are built from binned counts: per cluster where the
cluster members are known (STEM+ROOT Fig. 10), else per kernel name (STEM Fig. 1). Several
plans add a speedup vs error plot (STEM Fig. 9). matplotlib is imported when a figure is
drawn, not with this module.
"""

from __future__ import annotations

import base64
import io
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from hilsim.analyzer.compare import pareto_plot, reduction_flag
from hilsim.analyzer.validate.numbers import Validation, silicon_metric

from hilsim.core.bundle import Bundle
from hilsim.core.plan import Plan
from hilsim.core.plottext import plain_text

MAX_SCATTER = 5000
SCATTER_SEED = 0
TOP_KERNELS = 6


def _png(fig: Any) -> str:
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90)
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


#: a scatter whose values span less than this factor gets limits this factor apart
NARROW_RANGE = 1.5


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


@plain_text()
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
    if hi < lo * NARROW_RANGE:  # (one value, or nearly): a log axis needs a decade to label
        ax.set_xlim(lo / NARROW_RANGE, hi * NARROW_RANGE)
        ax.set_ylim(lo / NARROW_RANGE, hi * NARROW_RANGE)
    ax.set_xlabel("silicon")
    ax.set_ylabel("simulated")
    ax.set_title(f"{title}\n({note})", fontsize=8)
    fig.tight_layout()
    return _png(fig)


@plain_text()
def histograms_png(
    bundle: Bundle,
    plan: Plan,
    members: np.ndarray | None = None,
    clusters: list[dict[str, Any]] | None = None,
) -> str | None:
    """Duration histograms (40 log bins, binned counts) with the sampled launches marked.

    With ``members``: one panel per cluster, the :data:`TOP_KERNELS` clusters with the
    largest projected share (``clusters`` as
    :func:`hilsim.analyzer.validate.numbers.cluster_table` orders them), each showing the
    durations of the launches the cluster stands for (STEM Fig. 10: the spread inside
    one cluster). Without: one panel per kernel name, the kernels with the most time
    (STEM Fig. 1), sampled launches coloured by cluster. Clusters and kernels of one
    launch get no panel (a single bar says nothing); None when nothing is left to draw.
    Durations in µs on a log axis, counts of launches on the other.
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


@plain_text()
def pareto_png(results: list[dict[str, Any]], n_launches: int = 0) -> str:
    """Speedup vs total error of several plans (STEM Fig. 9), via compare.pareto_plot."""
    summaries = [
        {
            "method": r["label"],
            "hmean_speedup": r["headline"]["speedup"],
            "mean_error": abs(r["headline"]["total_error"] or 0.0),
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


def report_images(bundle: Bundle, validation: Validation) -> dict[str, Any]:
    """Every figure of the report, as :func:`hilsim.analyzer.validate.page.render_html`
    takes them: ``scatter`` (per plan, ``(counter, png)`` pairs: cycles first, then each
    correlated counter), ``hist`` (per plan, a png or None) and ``pareto`` (several
    plans only, else None)."""
    images: dict[str, Any] = {"scatter": [], "hist": [], "pareto": None}
    for v in validation.plans:
        scatters = [("cycles", scatter_png(v.sim.cycles, validation.silicon, "cycles"))]
        for c in v.record["correlation"][1:]:
            found = silicon_metric(bundle, (c["silicon"],))
            if found is not None:
                scatters.append(
                    (
                        c["sim"],
                        scatter_png(v.sim.counters[c["sim"]].to_numpy(float), found[1], c["sim"]),
                    )
                )
        images["scatter"].append(scatters)
        images["hist"].append(histograms_png(bundle, v.plan, v.members, v.record["clusters"]))
    if len(validation.plans) > 1:
        images["pareto"] = pareto_png([v.record for v in validation.plans], bundle.n_launches)
    return images
