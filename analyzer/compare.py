"""Side-by-side comparison of sampling methods on one workload (issue 7).

Every registered method the bundle's data allows runs over seeds; the result is
a table like STEM+ROOT Table 3 (harmonic-mean speedup, mean and max error, plan
time, the profiling level the method needs) and the speedup–error Pareto plot
(STEM Fig. 9). Methods that cannot run on the data are listed with the reason.

With a *holdout* bundle (another run of the same workload), plans are chosen on
the first bundle and scored on the second: the honest number for methods that
look at the very durations they are scored on.

(method, seed) runs are spread over worker processes ("spawn" start method:
forking a parent that already runs BLAS/OpenMP threads can deadlock); each worker
receives the bundle once through its initializer and keeps what one method's seeds
share (totals, STEM's sort) in a :class:`~hilsim.analyzer.tablecache.TableCache`, so a method's
mean plan time is per plan when planning all its seeds (a worker's first STEM plan
pays for the sort, the next ones reuse it). A rich progress bar counts finished runs.

Memory: every worker holds its own copy of the bundle (and of the holdout), so
memory grows with the number of workers (about 14 GB with 2 workers at 10M
launches). :func:`memory_capped_workers` lowers the number of workers to what the
available memory (``MemAvailable`` of ``/proc/meminfo``) holds, and the result says
so (``workers_note``); with one worker the runs happen in this process, on the
bundle already in memory. (Workers reading the bundle from disk instead would not
help: each would still hold its own decoded copy.)
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from hilsim.analyzer import methods
from hilsim.analyzer.bundle import Bundle
from hilsim.analyzer.errors import HilsimError
from hilsim.analyzer.evaluate import score_plan
from hilsim.analyzer.tablecache import TableCache

#: what each kind of input costs to collect (STEM Table 5 discussion)
PROFILING_LEVEL = {
    "durations": "light (every launch timed: nsys / CUPTI / torch)",
    "metrics": "detailed (Nsight Compute counters)",
    "regions": "light + NVTX regions (iterations, frames)",
}

_STATE: dict[str, Any] = {}

#: memory one worker needs at its peak, in bundle sizes (:func:`bundle_bytes`): its copy,
#: the methods' working arrays and the interpreter (default methods, in one process:
#: 0.86 GB for a 0.25 GB bundle at 1M launches, 6.8 GB for 2.5 GB at 10M)
WORKER_BUNDLE_FACTOR = 3.0
GB = 1024**3


def profiling_level(needs: tuple[str, ...]) -> str:
    """The costliest profiling a method's inputs need (detailed > regions > light)."""
    for kind in ("metrics", "regions", "durations"):
        if kind in needs:
            return PROFILING_LEVEL[kind]
    return ", ".join(needs)


@dataclass
class MethodResult:
    """One method over seeds."""

    method: str
    needs: tuple[str, ...]
    errors: list[float] = field(default_factory=list)
    speedups: list[float] = field(default_factory=list)
    samples: list[int] = field(default_factory=list)
    plan_seconds: list[float] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        speedups = np.asarray(self.speedups, dtype=float)
        return {
            "method": self.method,
            "runs": len(self.errors),
            "mean_error": float(np.mean(self.errors)),
            "max_error": float(np.max(self.errors)),
            "hmean_speedup": float(len(speedups) / np.sum(1.0 / speedups)),
            "mean_samples": float(np.mean(self.samples)),
            "mean_plan_seconds": float(np.mean(self.plan_seconds)),
            "profiling": profiling_level(self.needs),
        }


def bundle_bytes(bundles: Iterable[Bundle]) -> int:
    """In-memory size of the bundles' tables (distinct bundles counted once)."""
    total, seen = 0, set()
    for bundle in bundles:
        if id(bundle) in seen:
            continue
        seen.add(id(bundle))
        for table in (bundle.launches, bundle.metrics, bundle.regions):
            if table is not None:
                total += int(table.memory_usage(index=True, deep=True).sum())
    return total


def available_bytes() -> int | None:
    """``MemAvailable`` of ``/proc/meminfo`` in bytes; None where it cannot be read."""
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def memory_capped_workers(
    requested: int, per_worker: int, available: int | None
) -> tuple[int, str | None]:
    """Workers that fit in ``available`` bytes at ``per_worker`` bytes each, and why fewer.

    Returns ``(workers, note)``; ``note`` is None when ``requested`` fits or
    ``available`` is unknown. Fewer than two fitting workers means one: the runs
    then happen in this process, which holds the bundle already.
    """
    if requested <= 1 or available is None or per_worker <= 0:
        return requested, None
    fit = int(available // per_worker)
    if fit >= requested:
        return requested, None
    workers = max(fit, 1)
    return workers, (
        f"workers reduced from {requested} to {workers}"
        + (" (runs in this process)" if workers == 1 else "")
        + f": each worker holds its own copy of the bundle (~{per_worker / GB:.1f} GB "
        f"with its working memory) and {available / GB:.1f} GB is available"
    )


def _init_worker(bundle: Bundle, target: Bundle, params: dict[str, dict[str, Any]]) -> None:
    _STATE.update(bundle=bundle, target=target, params=params, cache=TableCache(), cached=None)


def _run(name: str, seed: int) -> tuple[str, int, float, float, int, float] | tuple[str, str]:
    bundle: Bundle = _STATE["bundle"]
    target: Bundle = _STATE["target"]
    method = methods.create(name, **_STATE["params"].get(name, {}))
    if method.stochastic:
        method = method.with_seed(seed)
    if _STATE["cached"] != name:
        # runs arrive grouped by method: keep one method's shared values at a time, so
        # STEM's sort (~0.3 GB at 10M) is not held while the next method plans
        _STATE.update(cache=TableCache(), cached=name)
    try:
        with _STATE["cache"]:
            t0 = time.perf_counter()
            plan = method.plan(bundle)
            seconds = time.perf_counter() - t0
            score = score_plan(plan, target)
    except HilsimError as exc:
        return name, str(exc)
    return name, seed, score.error, score.speedup, score.n_samples, seconds


def _tasks(names: list[str], seeds: int) -> list[tuple[str, int]]:
    tasks = []
    for name in names:
        stochastic = methods.get(name).stochastic
        tasks.extend((name, s) for s in (range(seeds) if stochastic else [0]))
    return tasks


def compare_methods(
    bundle: Bundle,
    names: list[str] | None = None,
    seeds: int = 10,
    holdout: Bundle | None = None,
    params: dict[str, dict[str, Any]] | None = None,
    workers: int | None = None,
    progress: Any = None,
) -> dict[str, Any]:
    """Run ``names`` (default: every registered method) over ``seeds`` and score them.

    ``workers`` (default: one per CPU, at most one per run) is lowered to what the
    available memory holds (:func:`memory_capped_workers`).

    Returns ``{"methods": [summary...], "skipped": {name: reason}, "holdout": bool,
    "seeds": int, "workers": int, "workers_note": str | None}``.
    """
    available = methods.available()
    names = available if not names or names == ["all"] else names
    unknown = [n for n in names if n not in available]
    if unknown:
        raise HilsimError(f"compare: unknown method(s) {', '.join(unknown)}")
    tasks = _tasks(names, seeds)
    results: dict[str, MethodResult] = {
        n: MethodResult(n, tuple(methods.get(n).needs)) for n in names
    }
    skipped: dict[str, str] = {}
    workers = workers or min(len(tasks), os.cpu_count() or 1)
    per_worker = int(WORKER_BUNDLE_FACTOR * bundle_bytes([bundle, holdout or bundle]))
    workers, workers_note = memory_capped_workers(workers, per_worker, available_bytes())
    outcomes = []
    if workers > 1:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(
            max_workers=workers,
            mp_context=context,
            initializer=_init_worker,
            initargs=(bundle, holdout or bundle, params or {}),
        ) as pool:
            futures = [pool.submit(_run, name, seed) for name, seed in tasks]
            for future in as_completed(futures):
                outcomes.append(future.result())
                if progress:
                    progress()
    else:
        _init_worker(bundle, holdout or bundle, params or {})
        try:
            for name, seed in tasks:
                outcomes.append(_run(name, seed))
                if progress:
                    progress()
        finally:
            _STATE.clear()  # the cache and the bundle references
    for outcome in outcomes:
        if len(outcome) == 2:
            skipped[outcome[0]] = outcome[1]
            continue
        name, _, error, speedup, n_samples, seconds = outcome
        r = results[name]
        r.errors.append(error)
        r.speedups.append(speedup)
        r.samples.append(n_samples)
        r.plan_seconds.append(seconds)
    summaries = [r.summary() for n, r in results.items() if n not in skipped and r.errors]
    summaries.sort(key=lambda s: s["mean_error"])
    return {
        "methods": summaries,
        "skipped": skipped,
        "holdout": holdout is not None,
        "seeds": seeds,
        "workers": workers,
        "workers_note": workers_note,
    }


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indices of points not dominated in (higher speedup, lower error)."""
    front = []
    for i, (s_i, e_i) in enumerate(points):
        dominated = any(
            (s_j >= s_i and e_j <= e_i) and (s_j > s_i or e_j < e_i)
            for j, (s_j, e_j) in enumerate(points)
            if j != i
        )
        if not dominated:
            front.append(i)
    return front


def pareto_plot(
    summaries: list[dict[str, Any]],
    path: str | Path,
    title: str,
    xlabel: str = "speedup (harmonic mean over seeds)",
    ylabel: str = "mean sampling error (%)",
) -> Path:
    """Speedup–error scatter with the Pareto front (STEM Fig. 9), written as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from hilsim.analyzer.atomic import write_bytes_atomic

    points = [(s["hmean_speedup"], max(s["mean_error"], 1e-6)) for s in summaries]
    front = set(pareto_front(points))
    fig, ax = plt.subplots(figsize=(6, 4.5), dpi=110)
    for i, (summary, (speedup, error)) in enumerate(zip(summaries, points, strict=True)):
        ax.scatter(
            speedup,
            100 * error,
            s=60,
            marker="o" if i in front else "x",
            color="tab:blue" if i in front else "tab:gray",
        )
        ax.annotate(
            summary["method"],
            (speedup, 100 * error),
            textcoords="offset points",
            xytext=(5, 4),
            fontsize=8,
        )
    ordered = sorted((points[i] for i in front), key=lambda p: p[0])
    if len(ordered) > 1:
        ax.plot(
            [p[0] for p in ordered],
            [100 * p[1] for p in ordered],
            color="tab:blue",
            lw=1,
            ls="--",
            label="Pareto front",
        )
        ax.legend(loc="best", fontsize=8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    import io

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return write_bytes_atomic(path, buffer.getvalue())
