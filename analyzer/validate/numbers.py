"""The numbers of a validation: sampled simulation against silicon, JSON-ready.

Inputs: a silicon bundle, one or more plans made on it, and simulated cycles per
launch from either simulator logs (GPGPU-Sim runs of ``hilsim simulate``, with the warm-up
placement it wrote, or Accel-Sim logs of the plan's exported ``kernelslist.g``:
:mod:`hilsim.simmodel.gpgpusim.simlog`, :mod:`hilsim.simmodel.export`) or the analytical model
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
sampled-simulation projection ``sum(weight * sim_cycles)`` over the plan's samples, all
signed (the same names and signs as :mod:`hilsim.analyzer.validate.decompose`):

* configuration error ``= (F - S) / S`` (the simulator's own error, PKA's SimError);
* sampling error ``= (P - F) / F`` (what sampling adds inside the simulator);
* total error ``= (P - S) / S`` (what a user of sampled simulation sees).

When ``F`` is unknown (logs for the sampled launches only) only the total error is
given; the silicon-side sampling error of the same plan (``score_plan`` on
durations) is reported beside it. The interval of ``P`` follows
:mod:`hilsim.analyzer.evaluate` (STEM section 4.1, eq. 4) on the simulated cycles of the
samples, plus the state term ``hilsim simulate`` measured (:mod:`hilsim.analyzer.warmstate`).

**Speedups, named.** *Profiled-time speedup*: the profile's total duration over the
sampled launches' (what the plan promises, ``score_plan``); *simulated-time speedup*: the
full run's cycles over every cycle the sampled simulation simulated, warm-up and cold runs
included (known when the logs come from ``hilsim simulate``).

**Counter correlation** (Accel-Sim, Khairy et al., ISCA 2020, section V): for each
pair of a simulator counter and its Nsight Compute counterpart, over the launches
that have both: cycles and instructions by mean absolute error ``MAE = mean(|sim -
hw| / hw)``, other counters by ``NRMSE = sqrt(mean((sim - hw)^2)) / mean(hw)``, and
Pearson's ``r``. DRAM traffic is compared in 32-byte sectors on both sides (a GPGPU-Sim
request moves bus width x burst length bytes). Per-metric errors of the weighted sums for
every silicon counter follow STEM Fig. 14 (:func:`hilsim.analyzer.evaluate.metric_errors`).

**Per cluster.** Each cluster's samples give its silicon estimate and simulated
projection. Where the cluster members are known (:mod:`hilsim.analyzer.membership`: from
the method, or by re-running it with the plan's parameters) the table adds the
cluster's silicon truth, the error of its estimate and the coefficient of variation
of its launches' durations (STEM+ROOT Fig. 10).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from hilsim.analyzer.evaluate import (
    check_compatible,
    confidence_interval,
    metric_errors,
    score_plan,
)
from hilsim.analyzer.membership import cluster_members
from hilsim.simmodel import model as analytical_model
from hilsim.simmodel.correlation import correlation
from hilsim.simmodel.export import match_sim_results
from hilsim.simmodel.gpgpusim.listrun import check_simulated_names

from hilsim.core.bundle import Bundle
from hilsim.core.errors import HilsimError
from hilsim.core.plan import Plan

SILICON_CYCLES_METRIC = "gpu__cycles_elapsed.max"
VALIDATION_SCHEMA = "hilsim.validation/1"

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
    "dram_read_sectors": ("dram__sectors_read.sum",),
    "dram_write_sectors": ("dram__sectors_write.sum",),
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
            :mod:`hilsim.simmodel.gpgpusim.simlog`), same length; may be empty.
        source: ``"GPGPU-Sim logs"``, ``"Accel-Sim logs"``, ``"hilsim simulate (...)"``
            or ``"analytical model"`` (shown in the report).
        detail: free text (files, config name).
        state_variance: variance the sampled runs' state adds to the estimate (cycles^2,
            :mod:`hilsim.analyzer.warmstate`); 0 when not measured.
        simulated_cycles: every cycle the sampled simulation simulated (warm-up and cold
            runs included), when known.
        warmup: the warm-up the samples were simulated with, when known.
        colder_than_profile: samples the warm-up left colder than the profile, placed
            below their warm cycles (``hilsim simulate``'s ``state``), when known.
    """

    cycles: np.ndarray
    counters: pd.DataFrame = field(default_factory=pd.DataFrame)
    source: str = "simulation"
    detail: str = ""
    state_variance: float = 0.0
    simulated_cycles: float | None = None
    warmup: str | None = None
    colder_than_profile: int | None = None

    @property
    def covers_all(self) -> bool:
        return bool(np.isfinite(self.cycles).all())


@dataclass
class PlanValidation:
    """One plan's validation: its record of the report and what its figures are drawn
    from (the simulated values and the cluster of each launch, where known)."""

    label: str
    plan: Plan
    sim: SimResults
    members: np.ndarray | None
    record: dict[str, Any]


@dataclass
class Validation:
    """Every plan's validation on one bundle.

    Attributes:
        report: the ``hilsim.validation/1`` document (JSON-ready dict): bundle,
            simulation source and one :func:`validate_plan` record per plan.
        plans: the plans' :class:`PlanValidation`, in the report's order.
        silicon: silicon cycles per launch (:func:`silicon_cycles`).
    """

    report: dict[str, Any]
    plans: list[PlanValidation]
    silicon: np.ndarray


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
        if ok.all():
            note = f"{SILICON_CYCLES_METRIC} of every launch"
        elif ok.any():
            note = (f"{SILICON_CYCLES_METRIC} for {int(ok.sum())} launches, "
                    f"duration_ns x {clock_mhz:g} MHz for the other {int((~ok).sum())}")
    return cycles, note


def silicon_metric(bundle: Bundle, names: tuple[str, ...]) -> tuple[str, np.ndarray] | None:
    """The first of ``names`` that the bundle's metrics hold, with its value per launch
    (NaN for launches without a row); None when the bundle has none of them."""
    if bundle.metrics is None:
        return None
    for name in names:
        if name in bundle.metrics.columns:
            values = np.full(bundle.n_launches, np.nan)
            values[bundle.metrics["launch_id"].to_numpy()] = bundle.metrics[name].to_numpy(float)
            return name, values
    return None


def results_from_simlog(plan: Plan, bundle: Bundle, simlog: pd.DataFrame) -> SimResults:
    """Place simulated kernels (in ``kernelslist.g`` order) at the plan's launches.

    A log that covers *every* launch of the bundle (a full simulation) is placed by
    launch order instead, which gives the full-simulation total.
    """
    n = bundle.n_launches
    cycles = np.full(n, np.nan)
    counter_cols = [
        c
        for c in simlog.columns
        if c not in ("sim_launch", "launch_id", "log", "uid", "kernel", "ipc", "tot_cycles",
                     "cycles", "occupancy_pct", "simulator")
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
    names = sorted(set(simlog["simulator"])) if "simulator" in simlog else ["simulator"]
    return SimResults(cycles, counters, " and ".join(names) + " logs",
                      ", ".join(map(str, files[:5])))


def _floats(values: pd.Series) -> np.ndarray:
    """A column of a read-back table as floats, NaN where a cell is not a number (an
    integer past the largest float, which pandas keeps as a Python int, becomes inf)."""
    try:
        return pd.to_numeric(values, errors="coerce").to_numpy(np.float64)
    except (OverflowError, TypeError, ValueError):  # object column: samples, not launches
        return np.array([_float_or_nan(v) for v in values], dtype=np.float64)


def _float_or_nan(value: Any) -> float:
    try:
        return float(value)
    except OverflowError:
        return math.inf
    except (TypeError, ValueError):
        return math.nan


def _column_values(table: pd.DataFrame, column: str, where: str, lowest: float,
                   strictly: bool) -> np.ndarray:
    """``table[column]`` as finite floats >= (or >, with ``strictly``) ``lowest``; one line
    naming the row otherwise."""
    values = _floats(table[column])
    bad = ~np.isfinite(values) | (values <= lowest if strictly else values < lowest)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        want = f"{'> ' if strictly else '>= '}{lowest:g}"
        shown = str(table[column].iloc[row])[:40]
        raise HilsimError(f"{where}: row {row + 1}: {column} {shown} is not a finite number "
                          f"{want}")
    return values


def check_placement(table: pd.DataFrame, where: str) -> None:
    """The values of ``samples.csv`` before any figure is made from them: launch ids
    integers, each once; cycles finite and > 0; weights and state variances finite and
    >= 0; a kernel name per sample (a hand edit or another tool's file is one line)."""
    if "kernel" not in table.columns:
        raise HilsimError(f"{where}: missing column 'kernel' (not written by "
                          "`hilsim simulate`)")
    ids = _floats(table["launch_id"])
    bad = ~np.isfinite(ids) | (ids != np.round(ids)) | (np.abs(ids) >= 2**53)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise HilsimError(f"{where}: row {row + 1}: launch_id "
                          f"{str(table['launch_id'].iloc[row])[:40]} is not an integer")
    repeated = pd.Index(ids).duplicated()
    if repeated.any():
        row = int(np.flatnonzero(repeated)[0])
        raise HilsimError(f"{where}: row {row + 1}: launch {int(ids[row])} appears twice")
    _column_values(table, "cycles", where, 0, strictly=True)
    _column_values(table, "weight", where, 0, strictly=False)
    _column_values(table, "state_variance", where, 0, strictly=False)


def results_from_placement(bundle: Bundle, table: pd.DataFrame, summary: dict[str, Any],
                           where: str) -> SimResults:
    """The samples of a ``hilsim simulate`` folder (``samples.csv``: placed cycles and
    counters per sample, the state variance; ``simulate.json``: what was simulated),
    checked first (:func:`check_placement`).

    Launches the plan did not sample are NaN, as for logs of a sampled run.
    """
    check_placement(table, f"{where}: samples.csv")
    n = bundle.n_launches
    ids = _floats(table["launch_id"]).astype(np.int64)  # (integers below 2^53: checked)
    if len(ids) and (ids.min() < 0 or ids.max() >= n):
        raise HilsimError(f"{where}: samples beyond the bundle's {n} launches: another "
                          "workload's simulation")
    cycles = np.full(n, np.nan)
    cycles[ids] = table["cycles"].to_numpy(np.float64)
    skip = {"launch_id", "weight", "cluster", "kernel", "cycles", "cycles_warm",
            "cycles_cold", "position", "state_variance", "profiled_misses", "misses_warm",
            "misses_cold"}
    columns = [c for c in table.columns if c not in skip
               and pd.api.types.is_numeric_dtype(table[c])]
    counters = pd.DataFrame(np.nan, index=np.arange(n), columns=columns)
    for c in columns:
        counters.loc[ids, c] = table[c].to_numpy(np.float64)
    check_simulated_names(bundle.launches["name"].astype(str).to_numpy()[ids],
                          table["kernel"].astype(str).to_numpy(), ids)
    w = table["weight"].to_numpy(np.float64)
    state_var = float(np.sum(w * w * table["state_variance"].to_numpy(np.float64)))
    warmup = (summary.get("warmup") or {}).get("label")
    return SimResults(cycles, counters, f"hilsim simulate (GPGPU-Sim, warm-up {warmup})",
                      where, state_variance=state_var,
                      simulated_cycles=summary.get("simulated_cycles"), warmup=warmup,
                      colder_than_profile=(summary.get("state") or {}).get(
                          "colder_than_profile"))


def launch_table_with_metrics(bundle: Bundle) -> pd.DataFrame:
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
    inputs = launch_table_with_metrics(bundle)
    if predictor is None:
        predictor = analytical_model.predict
        analytical_model.require_counters(inputs, f"{bundle.path or 'bundle'}: --model")
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


def memo_by_plan(sim_for: Callable[[Plan], SimResults]) -> Callable[[Plan], SimResults]:
    """``sim_for`` computed once per plan object (validate and the decomposition both ask)."""
    done: dict[int, tuple[Plan, SimResults]] = {}

    def cached(plan: Plan) -> SimResults:
        if id(plan) not in done:  # the plan is kept with its result: its id stays its own
            done[id(plan)] = (plan, sim_for(plan))
        return done[id(plan)][1]

    return cached


# --- numbers ------------------------------------------------------------------------------


def _rel(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or not np.isfinite(a) or not np.isfinite(b) or b == 0:
        return None
    return float(abs(a - b) / abs(b))


def _signed(a: float | None, b: float | None) -> float | None:
    """``(a - b) / b``; None when either is missing or ``b`` is 0."""
    if a is None or b is None or not np.isfinite(a) or not np.isfinite(b) or b == 0:
        return None
    return float((a - b) / b)


def interval_note(h: dict[str, Any]) -> str:
    """Why the projection's 95% interval misses the silicon total, in words that follow
    the numbers: which of the configuration and sampling errors is the larger, when both
    are known; "" when the interval contains silicon or there is no interval."""
    if h.get("interval_covers_silicon") is not False:
        return ""
    config, sampling = h.get("configuration_error"), h.get("sampling_error")
    if config is None or sampling is None:
        return ("the interval covers sampling and state only; the simulator's own "
                "(configuration) error is unknown without a full simulation (--sim-full)")
    c, s = f"{100 * config:+.2f}%", f"{100 * sampling:+.2f}%"
    colder = h.get("samples_colder_than_profile") or 0
    why = (f" ({colder} samples the warm-up left colder than the profile: placed below "
           "their warm cycles by an estimate of what their extra DRAM reads cost, a few "
           "of the card's DRAM miss latencies)" if colder else "")
    if abs(config) >= abs(sampling):
        if h.get("interval_covers_full") is False:
            return (f"the simulator's configuration error ({c}) is larger than the sampling "
                    f"error ({s}), and the interval misses the full run too{why}")
        return (f"the simulator's configuration error ({c}) is larger than the sampling "
                f"error ({s}), which the interval covers")
    return (f"the sampling error ({s}) is larger than the configuration error ({c}): "
            f"the interval is too narrow for this sample{why}")


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
    interval = confidence_interval(plan, np.where(np.isfinite(sim.cycles), sim.cycles, 0.0),
                                   extra_variance=sim.state_variance)
    silicon_estimate = float(np.sum(weights * silicon[ids]))
    headline = {
        "silicon_total_cycles": silicon_total,
        "full_simulation_total_cycles": full,
        "sampled_projection_cycles": projection,
        "configuration_error": _signed(full, silicon_total),
        "sampling_error": _signed(projection, full),
        "total_error": _signed(projection, silicon_total),
        "silicon_sampling_error": _signed(silicon_estimate, silicon_total),
        "speedup": score.speedup,
        "speedup_kind": "profiled time",
        "simulated_time_speedup": (full or silicon_total) / sim.simulated_cycles
        if sim.simulated_cycles else None,
        "warmup": sim.warmup,
        "state_sd_cycles": float(np.sqrt(sim.state_variance)),
        "n_samples": score.n_samples,
        "n_clusters": score.n_clusters,
        "interval_cycles": list(interval) if interval else None,
        "interval_covers_silicon": bool(interval[0] <= silicon_total <= interval[1])
        if interval
        else None,
        "interval_covers_full": bool(interval[0] <= full <= interval[1])
        if interval and full is not None
        else None,
        "samples_colder_than_profile": sim.colder_than_profile,
        "interval_note": "",
        "silicon_cycles_from": silicon_note,
        "clock_mhz": clock_mhz,
    }
    headline["interval_note"] = interval_note(headline)
    clusters = cluster_table(plan, bundle, silicon, sampled_sim, members)
    errors, notes = metric_errors(plan, bundle)
    # counter-by-counter correlation over launches that have both values
    corr: list[dict[str, Any]] = []
    c = correlation(sim.cycles, silicon, "MAE")
    corr.append({"sim": "cycles", "silicon": "cycles (" + silicon_note + ")", **c})
    for sim_col, candidates in COUNTER_PAIRS.items():
        if sim_col not in sim.counters.columns:
            continue
        found = silicon_metric(bundle, candidates)
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


def validate_plans(
    bundle: Bundle,
    plans: list[tuple[str, Plan]],
    sim_for: Callable[[Plan], SimResults],
    clock_mhz: float,
) -> Validation:
    """The numbers of every ``(label, plan)`` on ``bundle``: the report document and,
    per plan, what its figures need. ``sim_for`` gives a plan's simulated values."""
    silicon, _ = silicon_cycles(bundle, clock_mhz)
    validated: list[PlanValidation] = []
    for label, plan in plans:
        check_compatible(plan, bundle)  # before re-running the method for its members
        members, members_note = cluster_members(plan, bundle)
        sim = sim_for(plan)
        record = validate_plan(plan, bundle, sim, clock_mhz, label, members, members_note)
        validated.append(PlanValidation(label, plan, sim, members, record))
    first_sim = validated[0].sim if validated else None
    device = bundle.manifest.get("device") or {}
    report = {
        "schema": VALIDATION_SCHEMA,
        "bundle": {
            "path": str(bundle.path) if bundle.path else "",
            "n_launches": bundle.n_launches,
            "device": device.get("name", "unknown") if isinstance(device, dict) else "unknown",
        },
        "simulation": {
            "source": first_sim.source if first_sim else "",
            "detail": first_sim.detail if first_sim else "",
        },
        "plans": [v.record for v in validated],
    }
    return Validation(report, validated, silicon)
