"""Configuration error vs sampling error of a sampled simulation (PKA Table 4 style).

PKA (Baddouh et al., MICRO 2021, ``shared/papers/000``) Table 4 reports a simulator's error
against silicon ("SimError") apart from the error sampling adds ("PKS", "PKA"). With a
simulated card standing in for silicon (issue 14: the *reference card* plays the silicon,
the *tuned card* is the simulator a user built for it) all three totals are known per
launch, so the two errors are measured apart, per kernel and per counter:

* ``S`` (silicon): the reference run, every launch (the ``--silicon`` bundle);
* ``F`` (full simulation): the tuned card's run of every launch (``--sim-full`` logs);
* ``P`` (sampled projection): ``sum(weight * value)`` over the plan's samples, simulated
  alone on the tuned card (``--sim`` logs).

Signed relative errors: configuration error ``(F - S) / S``, sampling error
``(P - F) / F``, total ``(P - S) / S``; they compose as
``1 + total = (1 + configuration) * (1 + sampling)``. With ``--sim-full`` from the reference
card itself ``F = S`` and the configuration error is 0: the pure sampling error.

**Per kernel** (by kernel name): ``S_k``, ``F_k`` over the launches of kernel ``k`` and
``P_k`` over the samples of kernel ``k``. A plan whose clusters mix kernels (PKA's k-means
on counters) lets one kernel's sample stand for another's launches, so its per-kernel
sampling error says how the weight moved, not that the total is wrong.

**Per counter**: the same three sums for every simulator counter of
:mod:`hilsim.simmodel.simlog` that both logs hold (cycles, instructions, L1/L2 accesses and
misses, DRAM reads/writes, ...), against the silicon bundle's Nsight Compute-named metric of
the same meaning (:data:`hilsim.analyzer.validate.COUNTER_PAIRS`) where it has one.

**Selection vs state.** The sampling error splits once more with ``W = sum(weight x
F_i)``, the projection from the *full* run's cycles of the sampled launches: selection
error ``(W - F) / F`` (which launches were chosen, what the plan's error on a profile
shows) and state error ``(P - W) / W`` (the same launches run alone instead of inside the
full run); ``1 + sampling = (1 + selection)(1 + state)``.

**Why a sampled run is not the full run.** A sampled run executes only the samples, back to
back: each starts with the caches the previous *sample* left, not what the launch before it
in the full run left. In a workload whose kernels re-read what the previous kernel touched,
the sample finds a cold L2 and reads DRAM instead; the DRAM-read row of the counter table
shows it (a sampling error in ``dram_reads`` far above the cycle error).
"""

from __future__ import annotations

import html
from typing import Any

import numpy as np
import pandas as pd
from hilsim.analyzer.validate import COUNTER_PAIRS, SimResults, _silicon_metric

from hilsim.core.bundle import Bundle
from hilsim.core.plan import Plan

#: counters of the per-counter table, in this order (those both logs hold are shown)
COUNTERS: tuple[str, ...] = (
    "instructions",
    "warp_instructions",
    "l1d_accesses",
    "l1d_misses",
    "l2_accesses",
    "l2_misses",
    "dram_reads",
    "dram_writes",
    "global_read_requests",
    "global_write_requests",
)


def _signed(a: float | None, b: float | None) -> float | None:
    """``(a - b) / b``; None when either is missing or ``b`` is 0."""
    if a is None or b is None or not np.isfinite(a) or not np.isfinite(b) or b == 0:
        return None
    return float((a - b) / b)


def _abs(x: float | None) -> float | None:
    return None if x is None else abs(x)


def _three(silicon: float | None, full: float, projection: float) -> dict[str, Any]:
    return {
        "silicon": silicon,
        "full": full,
        "projection": projection,
        "configuration_error": _signed(full, silicon),
        "sampling_error": _signed(projection, full),
        "total_error": _signed(projection, silicon),
    }


def decompose(
    plan: Plan,
    bundle: Bundle,
    silicon_cycles: np.ndarray,
    sampled: SimResults,
    full: SimResults,
) -> dict[str, Any]:
    """Totals, per-kernel and per-counter decomposition of one plan's error (JSON-ready).

    ``silicon_cycles`` per launch (:func:`hilsim.analyzer.validate.silicon_cycles`),
    ``sampled`` the plan's sampled simulation, ``full`` a simulation of every launch on the
    same card (``full.covers_all``). Vectorised: ``np.bincount`` over kernel codes.
    """
    ids = plan.samples["launch_id"].to_numpy(np.int64)
    weights = plan.samples["weight"].to_numpy(np.float64)
    names = bundle.launches["name"]
    if isinstance(names.dtype, pd.CategoricalDtype):  # the bundle's names: no string per launch
        codes, kernels = names.cat.codes.to_numpy(), names.cat.categories
    else:
        codes, kernels = pd.factorize(names, sort=False)
    k = len(kernels)
    f_cycles = full.cycles
    s_k = np.bincount(codes, weights=silicon_cycles, minlength=k)
    f_k = np.bincount(codes, weights=f_cycles, minlength=k)
    p_k = np.bincount(codes[ids], weights=weights * sampled.cycles[ids], minlength=k)
    launches_k = np.bincount(codes, minlength=k)
    samples_k = np.bincount(codes[ids], minlength=k)
    total = _three(float(silicon_cycles.sum()), float(f_cycles.sum()), float(p_k.sum()))
    # the sampling error split: which launches (their full-run cycles) vs how they ran alone
    warm = float(np.dot(weights, f_cycles[ids]))
    total["warm_projection"] = warm
    total["selection_error"] = _signed(warm, total["full"])
    total["state_error"] = _signed(total["projection"], warm)
    per_kernel = []
    for j in np.argsort(-s_k, kind="stable"):
        if launches_k[j] == 0:  # a category no launch of this bundle has
            continue
        row = _three(float(s_k[j]), float(f_k[j]), float(p_k[j]))
        row.update(kernel=str(kernels[j]), launches=int(launches_k[j]),
                   samples=int(samples_k[j]),
                   share_of_silicon=float(s_k[j] / s_k.sum()) if s_k.sum() else None)
        per_kernel.append(row)
    per_counter = [{"counter": "cycles", "silicon_metric": "cycles", **total}]
    for col in COUNTERS:
        if col not in sampled.counters.columns or col not in full.counters.columns:
            continue
        f_values = full.counters[col].to_numpy(np.float64)
        p_values = sampled.counters[col].to_numpy(np.float64)[ids]
        if not (np.isfinite(f_values).all() and np.isfinite(p_values).all()):
            continue
        found = _silicon_metric(bundle, COUNTER_PAIRS.get(col, ()))
        s_total = None
        metric = None
        if found is not None and np.isfinite(found[1]).all():
            metric, s_total = found[0], float(found[1].sum())
        per_counter.append({"counter": col, "silicon_metric": metric,
                            **_three(s_total, float(f_values.sum()),
                                     float(np.dot(weights, p_values)))})
    return {
        "definitions": "configuration = (full - silicon) / silicon; sampling = "
        "(projection - full) / full = selection (warm - full) / full x state (projection - "
        "warm) / warm, warm = sum(weight x full-run cycles of the samples); total = "
        "(projection - silicon) / silicon; 1 + total = (1 + configuration)(1 + sampling)",
        "full_simulation": {"source": full.source, "detail": full.detail},
        "totals": total,
        "per_kernel": per_kernel,
        "per_counter": per_counter,
    }


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:+.2f}%"


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f}"


def _rows(d: dict[str, Any], limit: int = 12) -> tuple[list[str], list[list[str]], list[list[str]]]:
    head = ["", "silicon", "full sim", "sampled projection", "configuration error",
            "sampling error", "total error"]
    kernels = [
        [str(r["kernel"]) + f" ({r['launches']} launches, {r['samples']} sampled)",
         _num(r["silicon"]), _num(r["full"]), _num(r["projection"]),
         _pct(r["configuration_error"]), _pct(r["sampling_error"]), _pct(r["total_error"])]
        for r in d["per_kernel"][:limit]
    ]
    counters = [
        [str(r["counter"]) + (f" ({r['silicon_metric']})" if r["silicon_metric"]
                              and r["counter"] != "cycles" else ""),
         _num(r["silicon"]), _num(r["full"]), _num(r["projection"]),
         _pct(r["configuration_error"]), _pct(r["sampling_error"]), _pct(r["total_error"])]
        for r in d["per_counter"]
    ]
    return head, kernels, counters


def render_markdown(label: str, d: dict[str, Any]) -> str:
    """The decomposition of one plan as markdown tables (totals, kernels, counters)."""
    head, kernels, counters = _rows(d)
    t = d["totals"]
    lines = [
        f"### {label}: configuration vs sampling error (PKA Table 4)",
        "",
        f"configuration {_pct(t['configuration_error'])}, sampling "
        f"{_pct(t['sampling_error'])}, total {_pct(t['total_error'])} "
        f"(cycles: silicon {_num(t['silicon'])}, full {_num(t['full'])}, projection "
        f"{_num(t['projection'])})",
        "",
        f"sampling = selection {_pct(t['selection_error'])} (the sampled launches' full-run "
        f"cycles) x state {_pct(t['state_error'])} (the same launches simulated alone: "
        "caches as the previous sample left them)",
        "",
    ]
    for title, rows in (("kernel", kernels), ("counter", counters)):
        lines.append("| " + " | ".join([title, *head[1:]]) + " |")
        lines.append("|" + "---|" * len(head))
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        lines.append("")
    return "\n".join(lines)


def render_html(label: str, d: dict[str, Any]) -> str:
    """The same tables as HTML (every string escaped) for the validation report."""
    e = html.escape
    head, kernels, counters = _rows(d)
    t = d["totals"]
    parts = [
        f"<h3>{e(label)}: configuration vs sampling error (PKA Table 4)</h3>",
        f"<p>configuration error {e(_pct(t['configuration_error']))}, sampling error "
        f"{e(_pct(t['sampling_error']))} (selection {e(_pct(t['selection_error']))}, "
        f"state {e(_pct(t['state_error']))}), total {e(_pct(t['total_error']))}; full "
        f"simulation: {e(str(d['full_simulation']['detail']))}</p>",
        f"<p class='note'>{e(d['definitions'])}. A sampled run starts every sample with the "
        "caches the previous sample left (cold L2 where the full run had the previous "
        "kernel's lines): see the DRAM rows.</p>",
    ]
    from hilsim.analyzer.validate import _table  # the report's one table builder

    for title, rows in (("kernel", kernels), ("counter", counters)):
        parts.append(_table([title, *head[1:]], [[e(c) for c in r] for r in rows]))
    return "\n".join(parts)





def check_full_log(full_log: pd.DataFrame, bundle: Bundle) -> pd.DataFrame:
    """``full_log`` when it holds every launch of ``bundle``; else a one-line error."""
    from hilsim.core.errors import HilsimError

    if len(full_log) != bundle.n_launches:
        raise HilsimError(
            f"validate --sim-full: the logs hold {len(full_log)} kernels for "
            f"{bundle.n_launches} launches: give the log of a full run (every launch)"
        )
    return full_log


def attach_decomposition(
    report: dict[str, Any],
    bundle: Bundle,
    plans: list[tuple[str, Plan]],
    sim_for: Any,
    full_log: pd.DataFrame,
    clock_mhz: float,
) -> str:
    """Add ``decomposition`` to every plan of a validation report; returns the markdown.

    ``full_log`` (:func:`hilsim.simmodel.simlog.read_simlogs`) must hold every launch of
    ``bundle``. The headline's full-simulation total, simulator and sampling errors are
    filled from it (absolute values, as the headline states them). ``sim_for`` is called
    again per plan: pass the one given to :func:`hilsim.analyzer.validate.validate`
    wrapped in :func:`hilsim.analyzer.validate.memo_by_plan`.
    """
    from hilsim.analyzer.validate import results_from_simlog, silicon_cycles

    check_full_log(full_log, bundle)
    silicon, _ = silicon_cycles(bundle, clock_mhz)
    parts = []
    # a log of every launch is placed by launch id / order, whatever the plan (only a plan
    # that samples every launch is placed by its samples): placed once per kind
    placed: dict[bool, Any] = {}
    for (label, plan), record in zip(plans, report["plans"], strict=True):
        every = plan.n_samples == bundle.n_launches
        if every not in placed:
            placed[every] = results_from_simlog(plan, bundle, full_log)
        d = decompose(plan, bundle, silicon, sim_for(plan), placed[every])
        record["decomposition"] = d
        t = d["totals"]
        h = record["headline"]
        h["full_simulation_total_cycles"] = t["full"]
        h["simulator_error"] = _abs(t["configuration_error"])
        h["sampling_error"] = _abs(t["sampling_error"])
        parts.append(render_markdown(label, d))
    return "\n".join(parts)
__all__ = ["COUNTERS", "attach_decomposition", "check_full_log", "decompose", "render_html",
           "render_markdown"]
