"""Choose a sampling method and its parameters for a target error.

None of the papers offers this; it is what a user asks: "I can afford 1% error,
what do I simulate?". Every candidate of a bounded grid (:data:`DEFAULT_GRID`: STEM
at several epsilons, random at several fractions, every other registered method at
its defaults) is run over seeds with :func:`hilsim.analyzer.evaluate.evaluate_method`;
a candidate *passes* when the ``quantile`` (default 0.95) of its errors over the
seeds is at most the target. The winner is the passing candidate with the highest
harmonic-mean speedup; its plan is built on the whole profile (seed 0).

Where the error is measured:
* with a holdout (another run of the same workload): plans are made on the profile
  and scored on the holdout (``evaluate_method(..., on=holdout)``);
* without: the profile is split by launch order into its first and second half,
  each half planned and scored on its own, and a candidate must pass on *both*
  halves (its speedup is the lower of the two). The two halves are different parts
  of the run (other iterations, other phases), so a choice that only fits one of them
  fails; in-sample scoring on the whole profile would be the optimistic figure.
  Methods that need NVTX regions are skipped in split mode (regions are not cut).

Bounded time: the grid has 14 candidates; a time budget (default 300 s) stops the
search, and candidates not run are listed as such. Deterministic methods run once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hilsim.analyzer import methods
from hilsim.analyzer.compare import format_speedup
from hilsim.analyzer.evaluate import MethodSummary, evaluate_method
from rich.table import Table

from hilsim.core.bundle import Bundle
from hilsim.core.errors import HilsimError
from hilsim.core.formatting import percent
from hilsim.core.plan import Plan

#: (method, parameters) candidates: STEM's epsilon and random's fraction swept, the
#: other registered methods at their paper defaults
DEFAULT_GRID: list[tuple[str, dict[str, Any]]] = [
    *[("stem", {"epsilon": e}) for e in (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3)],
    *[("random", {"fraction": f}) for f in (0.0001, 0.001, 0.01, 0.1)],
]


@dataclass
class Candidate:
    """One (method, parameters) choice and how it did."""

    method: str
    params: dict[str, Any]
    status: str = "not run"  # pass / fail / skipped / not run
    reason: str = ""
    quantile_error: float | None = None
    mean_error: float | None = None
    hmean_speedup: float | None = None
    seeds: int = 0
    seconds: float = 0.0
    parts: list[dict[str, float]] = field(default_factory=list)

    @property
    def label(self) -> str:
        shown = ", ".join(f"{k}={v}" for k, v in self.params.items())
        return f"{self.method}({shown})" if shown else self.method

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "params": self.params,
            "status": self.status,
            "reason": self.reason,
            "quantile_error": self.quantile_error,
            "mean_error": self.mean_error,
            "hmean_speedup": self.hmean_speedup,
            "seeds": self.seeds,
            "seconds": self.seconds,
            "parts": self.parts,
        }


def default_candidates() -> list[tuple[str, dict[str, Any]]]:
    """The grid plus every other registered method at its defaults."""
    swept = {name for name, _ in DEFAULT_GRID}
    others = [(name, {}) for name in methods.available() if name not in swept]
    return [*DEFAULT_GRID, *others]


def split_halves(bundle: Bundle) -> list[Bundle]:
    """The first and second half of ``bundle`` by launch order, each renumbered 0..n-1
    (metrics kept for their launches; regions dropped)."""
    n = bundle.n_launches
    if n < 4:
        raise HilsimError(f"recommend: {n} launches are too few to split in two halves")
    halves = []
    for lo, hi in ((0, n // 2), (n // 2, n)):
        launches = bundle.launches.iloc[lo:hi].reset_index(drop=True)
        launches["launch_id"] = np.arange(hi - lo, dtype=np.int64)
        metrics = None
        if bundle.metrics is not None:
            ids = bundle.metrics["launch_id"].to_numpy()
            keep = (ids >= lo) & (ids < hi)
            metrics = bundle.metrics[keep].reset_index(drop=True)
            metrics["launch_id"] = metrics["launch_id"] - lo
        halves.append(Bundle(launches=launches, metrics=metrics, manifest=bundle.manifest))
    return halves


def _score(summary: MethodSummary, quantile: float) -> dict[str, float]:
    errors = np.asarray(summary.errors, dtype=float)
    return {
        "quantile_error": float(np.quantile(errors, quantile)),
        "mean_error": float(errors.mean()),
        "hmean_speedup": summary.hmean_speedup,
    }


def recommend(
    bundle: Bundle,
    target_error: float,
    holdout: Bundle | None = None,
    seeds: int = 20,
    quantile: float = 0.95,
    candidates: list[tuple[str, dict[str, Any]]] | None = None,
    budget_s: float = 300.0,
    progress: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Run the candidates and pick the fastest one that meets the target (module doc).

    Returns ``{"winner": Candidate | None, "candidates": [Candidate...], "protocol": str,
    ...}``; candidates are sorted: passing ones by speedup (best first), then failing
    ones by error, then skipped and not run.
    """
    if not 0 < target_error < 1:
        raise HilsimError(f"recommend: --target-error must be in (0, 1), got {target_error}")
    if not 0 < quantile <= 1:
        raise HilsimError(f"recommend: quantile must be in (0, 1], got {quantile}")
    grid = candidates if candidates is not None else default_candidates()
    if holdout is not None:
        pairs = [(bundle, holdout)]
        protocol = "planned on the profile, scored on the holdout run"
    else:
        first, second = split_halves(bundle)
        pairs = [(first, first), (second, second)]
        protocol = (
            "profile split by launch order into first and second half; each half planned and "
            "scored on its own; a candidate must pass on both halves"
        )
    results: list[Candidate] = []
    t_start = time.perf_counter()
    for name, params in grid:
        cand = Candidate(name, dict(params))
        results.append(cand)
        if results[:-1] and time.perf_counter() - t_start > budget_s:  # the first always runs
            cand.reason = f"time budget of {budget_s:.0f} s used up"
            continue
        t0 = time.perf_counter()
        try:
            method = methods.create(name, **params)
            if holdout is None and "regions" in method.needs:
                raise HilsimError("needs NVTX regions, which the half split does not cut")
            parts = []
            for plan_on, score_on in pairs:
                summary = evaluate_method(method, plan_on, seeds, on=score_on)
                parts.append(_score(summary, quantile))
                cand.seeds = len(summary.seeds)
        except HilsimError as exc:
            cand.status, cand.reason = "skipped", str(exc)
            cand.seconds = time.perf_counter() - t0
            if progress:
                progress()
            continue
        cand.seconds = time.perf_counter() - t0
        cand.parts = parts
        cand.quantile_error = max(p["quantile_error"] for p in parts)
        cand.mean_error = max(p["mean_error"] for p in parts)
        cand.hmean_speedup = min(p["hmean_speedup"] for p in parts)
        if cand.quantile_error <= target_error:
            cand.status = "pass"
        else:
            cand.status = "fail"
            cand.reason = (
                f"{percent(quantile, '.3g')} error {percent(cand.quantile_error, '.3g')} "
                f"> target {percent(target_error, '.3g')}"
            )
        if progress:
            progress()
    passing = sorted(
        (c for c in results if c.status == "pass"), key=lambda c: -(c.hmean_speedup or 0.0)
    )
    winner = passing[0] if passing else None
    for c in passing[1:]:
        c.reason = (
            f"passes, but {format_speedup(c.hmean_speedup)} < "
            f"winner's {format_speedup(winner.hmean_speedup)}"
        )
    order = {"pass": 0, "fail": 1, "skipped": 2, "not run": 3}
    results.sort(
        key=lambda c: (
            order[c.status],
            -(c.hmean_speedup or 0.0) if c.status == "pass" else (c.quantile_error or 0.0),
        )
    )
    return {
        "winner": winner,
        "candidates": results,
        "protocol": protocol,
        "target_error": target_error,
        "quantile": quantile,
        "seeds": seeds,
        "seconds": time.perf_counter() - t_start,
    }


@dataclass
class Recommendation:
    """What :func:`recommend` found on a profile, with where the profile came from.

    Attributes:
        result: :func:`recommend`'s dict (``winner``, ``candidates``, ``protocol``, ...).
        profile: the profile's path as given (``None`` for a bundle made in memory).
        holdout: the holdout run's path, if one was used.
    """

    result: dict[str, Any]
    profile: str | None = None
    holdout: str | None = None

    @property
    def winner(self) -> Candidate | None:
        return self.result["winner"]

    def to_dict(self) -> dict[str, Any]:
        """The JSON document of ``hilsim recommend --json``: every candidate's figures."""
        winner = self.winner
        return {
            "profile": self.profile,
            "holdout": self.holdout,
            **{k: v for k, v in self.result.items() if k not in ("winner", "candidates")},
            "winner": winner.to_dict() if winner else None,
            "candidates": [c.to_dict() for c in self.result["candidates"]],
        }


def winner_plan(bundle: Bundle, winner: Candidate) -> Plan:
    """The winner's plan built on the whole ``bundle`` (its parameters, seed 0), with the
    sampled launches' names."""
    method = methods.create(winner.method, **winner.params)
    return method.plan(bundle).attach_names(bundle.launches["name"])


def result_table(result: dict[str, Any]) -> Table:
    """A rich table of every candidate: status, errors, speedup and why it lost."""
    q = result["quantile"]
    table = Table(
        title=f"recommend: target {percent(result['target_error'], '.3g')} at the "
        f"{percent(q, '.3g')} quantile over {result['seeds']} seeds ({result['protocol']})",
        title_justify="left",
    )
    for column in ("", "candidate", f"p{100 * q:g} error", "mean error", "hmean speedup",
                   "seconds", "why not chosen"):
        left = column in ("candidate", "why not chosen")
        table.add_column(column, justify="left" if left else "right")
    winner = result["winner"]
    for c in result["candidates"]:
        mark = "★" if c is winner else ""
        table.add_row(
            mark,
            c.label,
            "" if c.quantile_error is None else percent(c.quantile_error, ".3g"),
            "" if c.mean_error is None else percent(c.mean_error, ".3g"),
            "" if c.hmean_speedup is None else format_speedup(c.hmean_speedup),
            f"{c.seconds:.1f}",
            "chosen: fastest that meets the target" if c is winner else (c.reason or c.status),
        )
    return table
