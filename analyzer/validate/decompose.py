"""Configuration error vs sampling error of a sampled simulation (PKA Table 4 style).

PKA (Baddouh et al., MICRO 2021) Table 4 reports a simulator's error against silicon
("SimError") apart from the error sampling adds ("PKS", "PKA"). With a simulated card
standing in for silicon (the *reference card* plays the silicon, the *tuned card* is the
simulator a user built for it) all three totals are known per launch, so the two errors
are measured apart, per kernel and per counter:

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
:mod:`hilsim.simmodel.gpgpusim.simlog` that both logs hold (cycles, instructions, L1/L2 accesses and
misses, DRAM reads/writes, ...), against the silicon bundle's Nsight Compute-named metric of
the same meaning (:data:`hilsim.analyzer.validate.numbers.COUNTER_PAIRS`) where it has one.

**Selection vs state.** The sampling error splits once more with ``W = sum(weight x
F_i)``, the projection from the *full* run's cycles of the sampled launches: selection
error ``(W - F) / F`` (which launches were chosen, what the plan's error on a profile
shows) and state error ``(P - W) / W`` (the same launches run alone instead of inside the
full run); ``1 + sampling = (1 + selection)(1 + state)``.

**Why a sampled run is not the full run.** A sampled run executes only the samples (and
their warm-up), so each starts with the caches its warm-up left, not what the launch before
it in the full run left. Where the L2 holds less than in the full run the sample reads DRAM
instead; the DRAM-read row of the counter table shows it (a sampling error in
``dram_read_sectors`` far above the cycle error). ``hilsim simulate`` warms the samples and
places each between a warm and a cold run (:mod:`hilsim.analyzer.warmstate`); the state
error left is what this decomposition measures.

The tables as text and markdown are :mod:`hilsim.analyzer.validate.text`'s; the HTML page
shows them (:mod:`hilsim.analyzer.validate.page`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
from hilsim.analyzer.validate.numbers import (
    COUNTER_PAIRS,
    SimResults,
    interval_note,
    results_from_simlog,
    silicon_cycles,
    silicon_metric,
)
from hilsim.analyzer.validate.text import decomposition_markdown

from hilsim.core.bundle import Bundle
from hilsim.core.errors import HilsimError
from hilsim.core.plan import Plan

#: counters of the per-counter table, in this order (those both logs hold are shown)
COUNTERS: tuple[str, ...] = (
    "instructions",
    "warp_instructions",
    "l1d_accesses",
    "l1d_misses",
    "l2_accesses",
    "l2_misses",
    "dram_read_sectors",
    "dram_write_sectors",
    "global_read_requests",
    "global_write_requests",
)


def _signed(a: float | None, b: float | None) -> float | None:
    """``(a - b) / b``; None when either is missing or ``b`` is 0."""
    if a is None or b is None or not np.isfinite(a) or not np.isfinite(b) or b == 0:
        return None
    return float((a - b) / b)


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

    ``silicon_cycles`` per launch (:func:`hilsim.analyzer.validate.numbers.silicon_cycles`),
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
        found = silicon_metric(bundle, COUNTER_PAIRS.get(col, ()))
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


def check_full_log(full_log: pd.DataFrame, bundle: Bundle) -> pd.DataFrame:
    """``full_log`` when it holds every launch of ``bundle``; else a one-line error."""
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
    sim_for: Callable[[Plan], SimResults],
    full_log: pd.DataFrame,
    clock_mhz: float,
) -> str:
    """Add ``decomposition`` to every plan of a validation report; returns the markdown.

    ``full_log`` (:func:`hilsim.simmodel.gpgpusim.simlog.read_simlogs`) must hold every launch of
    ``bundle``. The headline's full-simulation total, configuration and sampling errors
    (signed, as here) and the words about the interval are filled from it. ``sim_for`` is called
    again per plan: pass the one given to :func:`hilsim.analyzer.validate.validate`
    wrapped in :func:`hilsim.analyzer.validate.numbers.memo_by_plan`.
    """
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
        h["configuration_error"] = t["configuration_error"]
        h["sampling_error"] = t["sampling_error"]
        interval = h.get("interval_cycles")
        if interval and t["full"] is not None:
            h["interval_covers_full"] = bool(interval[0] <= t["full"] <= interval[1])
        h["interval_note"] = interval_note(h)
        parts.append(decomposition_markdown(label, d))
    return "\n".join(parts)


__all__ = ["COUNTERS", "attach_decomposition", "check_full_log", "decompose"]
