"""Side-by-side comparison of sampling methods on one workload.

Every registered method the bundle's data allows runs over seeds; the result is
a table like STEM+ROOT Table 3 (harmonic-mean speedup, mean and max error, plan
time, the profiling level the method needs) and the speedup–error Pareto plot
(STEM Fig. 9). Methods that cannot run on the data are listed with the reason.
:func:`compare_profile` returns the whole ``hilsim.compare/1`` document (what ``hilsim
compare`` prints and writes as ``compare.json``): the table plus what identifies the input,
its trace warnings and the budget the baselines had.

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

import hashlib
import io
import json
import multiprocessing
import os
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from hilsim.analyzer import methods
from hilsim.analyzer.evaluate import score_plan
from hilsim.analyzer.tablecache import TableCache
from hilsim.analyzer.tracecheck import bundle_warnings, method_warnings

from hilsim.core import limits
from hilsim.core.bundle import Bundle, hilsim_version, read_bundle
from hilsim.core.errors import HilsimError
from hilsim.core.files import write_bytes_atomic
from hilsim.core.plottext import plain_text
from hilsim.core.schema import LAUNCH_COLUMNS

#: the ``schema`` of the comparison document (``compare.json``)
COMPARE_SCHEMA = "hilsim.compare/1"

#: what each kind of input costs to collect (STEM Table 5 discussion)
PROFILING_LEVEL = {
    "durations": "light (timeline: nsys/CUPTI/torch)",
    "metrics": "detailed (ncu counters)",
    "regions": "light + NVTX regions",
}

_STATE: dict[str, Any] = {}

#: memory one worker needs at its peak, in bundle sizes (:func:`bundle_bytes`): its copy,
#: the methods' working arrays and the interpreter (default methods, in one process:
#: 0.86 GB for a 0.25 GB bundle at 1M launches, 6.8 GB for 2.5 GB at 10M)
WORKER_BUNDLE_FACTOR = 3.0
GB = 1024**3
# bytes per launch of a nullable integer launch column in memory (values + null mask)
_INT_COLUMN_BYTES = 9


def profiling_level(needs: tuple[str, ...]) -> str:
    """The costliest profiling a method's inputs need (detailed > regions > light)."""
    for kind in ("metrics", "regions", "durations"):
        if kind in needs:
            return PROFILING_LEVEL[kind]
    return ", ".join(needs)


#: a method that simulates this big a share of the launches, or buys less than this
#: speedup, does not reduce the simulation: marked "no reduction" and kept off the Pareto
#: front (megsim on a short trace, first-n with n >= the launch count rank first at 0%
#: error otherwise)
NO_REDUCTION_SPEEDUP = 2.0
NO_REDUCTION_SHARE = 0.5

#: baselines run at the budget of the method they are compared to (``budget_of``)
BUDGET_BASELINES: tuple[str, ...] = ("random", "first-n")
BUDGET_KINDS: tuple[str, ...] = ("time", "launches")


def method_label(name: str, plan: Any) -> str:
    """Method name, flagged with the inputs it really had: PKA on fewer than its 12 Table 2
    metrics ("pka (1/12 metrics)"), TBPoint on light features instead of counters."""
    diagnostics = getattr(plan, "diagnostics", None) or {}
    used = diagnostics.get("features_used")
    if name == "pka" and used is not None and len(used) < 12:
        return f"pka ({len(used)}/12 metrics)"
    if name == "tbpoint" and diagnostics.get("features") == "light":
        return "tbpoint (light features)"
    return name


def reduction_flag(speedup: float, mean_samples: float, n_launches: int) -> str | None:
    """Why a row is "no reduction" (None when it reduces the simulation)."""
    reasons = []
    if speedup < NO_REDUCTION_SPEEDUP:
        reasons.append(f"speedup {format_speedup(speedup)} < {NO_REDUCTION_SPEEDUP:g}x")
    if n_launches and mean_samples >= NO_REDUCTION_SHARE * n_launches:
        reasons.append(
            f"simulates {mean_samples / n_launches:.0%} of the launches "
            f"(>= {NO_REDUCTION_SHARE:.0%})"
        )
    return "; ".join(reasons) or None


def format_speedup(speedup: float) -> str:
    """Speedup with 2-3 significant digits (1.21x, 12.1x, 121x, 3,022x)."""
    if not np.isfinite(speedup):
        return "inf"
    if speedup < 10:
        return f"{speedup:.2f}x"
    if speedup < 100:
        return f"{speedup:.1f}x"
    return f"{speedup:,.0f}x"


@dataclass
class MethodResult:
    """One method (or one budget-matched baseline) over seeds."""

    method: str  # the row's label
    name: str  # registry name
    needs: tuple[str, ...]
    params: dict[str, Any] = field(default_factory=dict)
    budget: dict[str, Any] | None = None
    seeds: list[int] = field(default_factory=list)
    errors: list[float] = field(default_factory=list)
    speedups: list[float] = field(default_factory=list)
    samples: list[int] = field(default_factory=list)
    sampled_ns: list[float] = field(default_factory=list)
    plan_seconds: list[float] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def add(self, outcome: dict[str, Any]) -> None:
        self.seeds.append(outcome["seed"])
        self.errors.append(outcome["error"])
        self.speedups.append(outcome["speedup"])
        self.samples.append(outcome["n_samples"])
        self.sampled_ns.append(outcome["sampled_ns"])
        self.plan_seconds.append(outcome["seconds"])
        if self.method == self.name and outcome["label"] != self.name:
            self.method = outcome["label"]
        for note in outcome["notes"]:
            if note not in self.warnings:
                self.warnings.append(note)

    def summary(self, n_launches: int) -> dict[str, Any]:
        order = np.argsort(self.seeds, kind="stable")
        errors = [self.errors[i] for i in order]
        speedups = np.asarray([self.speedups[i] for i in order], dtype=float)
        mean_samples = float(np.mean(self.samples))
        hmean = float(len(speedups) / np.sum(1.0 / speedups))
        flag = reduction_flag(hmean, mean_samples, n_launches)
        return {
            "method": self.method,
            "name": self.name,
            "params": self.params,
            "budget": self.budget,
            "runs": len(self.errors),
            "seeds": sorted(self.seeds),
            "mean_error": float(np.mean(errors)),
            "max_error": float(np.max(errors)),
            "min_error": float(np.min(errors)),
            "hmean_speedup": hmean,
            "min_speedup": float(speedups.min()),
            "max_speedup": float(speedups.max()),
            "mean_samples": mean_samples,
            "mean_sampled_ns": float(np.mean(self.sampled_ns)),
            "mean_plan_seconds": float(np.mean(self.plan_seconds)),
            "profiling": profiling_level(self.needs),
            "no_reduction": flag,
            "warnings": list(self.warnings),
            "errors": errors,
            "speedups": speedups.tolist(),
        }


def workload_name(bundle: Bundle, path: str | Path | None = None) -> str:
    """The workload's name for titles: the manifest's ``workload.name``, else the profiled
    file's name without its suffixes, else the folder or file given."""
    workload = (bundle.manifest or {}).get("workload") or {}
    if workload.get("name"):
        return str(workload["name"])
    files = ((bundle.manifest or {}).get("source") or {}).get("files") or []
    first = Path(files[0]).name if files else (Path(path).name if path else "workload")
    return first.split(".")[0] or first


def input_identity(path: str | Path) -> dict[str, Any]:
    """What identifies the input: sha256 of a profile file, or for a bundle folder the
    sha256 over its manifest's file digests (content only, not the import time)."""
    source = Path(path)
    if source.is_dir():
        manifest = json.loads((source / "manifest.json").read_text())
        files = {k: v.get("sha256") for k, v in sorted((manifest.get("files") or {}).items())}
        digest = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()
        return {"path": str(source), "kind": "bundle", "sha256": digest, "files": files}
    digest = hashlib.sha256()
    with open(source, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return {"path": str(source), "kind": "file", "sha256": digest.hexdigest()}


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


def launch_columns(
    names: Iterable[str], params: dict[str, dict[str, Any]] | None = None
) -> tuple[str, ...] | None:
    """The launch columns the methods ``names`` ("all": every registered one), with their
    ``params``, read together (:attr:`~hilsim.analyzer.methods.base.Method.launch_columns`
    of each method as created); ``None`` when one of them reads every column. A comparison
    reads only these: at 50M launches each nullable integer column left on disk is 0.45 GB
    not held."""
    chosen = list(names)
    if not chosen or chosen == ["all"]:
        chosen = methods.available()
    params = params or {}
    wanted: dict[str, None] = {}
    for name in chosen:
        try:
            columns = methods.create(name, **params.get(name, {})).launch_columns
        except HilsimError:
            return None  # an unknown name or parameter: the comparison words it
        if columns is None:
            return None
        wanted.update(dict.fromkeys(columns))
    return tuple(wanted)


#: reads the launch columns a method names (``None``: all) into a bundle; see
#: :func:`compare_methods`'s ``columns_of``
ColumnReader = Callable[[tuple[str, ...] | None], Bundle]


def _init_worker(
    bundle: Bundle,
    target: Bundle,
    params: dict[str, dict[str, Any]],
    columns_of: ColumnReader | None = None,
) -> None:
    _STATE.update(bundle=bundle, base=bundle, target=target, params=params,
                  cache=TableCache(), cached=None, columns_of=columns_of)


def bundle_columns_reader(bundle: Bundle, path: str | Path | None) -> ColumnReader | None:
    """A :data:`ColumnReader` that adds the columns ``bundle`` lacks from the bundle folder
    ``path`` (its launch columns shared, not copied); ``None`` when ``path`` is not a
    bundle folder (a profile file is read whole)."""
    if path is None or not Path(path).is_dir():
        return None
    folder = Path(path)

    def read(columns: tuple[str, ...] | None) -> Bundle:
        have = bundle.launches
        wanted = list(LAUNCH_COLUMNS) if columns is None else list(columns)
        missing = [c for c in wanted if c in LAUNCH_COLUMNS and c not in have.columns]
        if not missing:
            return bundle
        read = read_bundle(folder, columns=missing)
        if read.manifest.get("digest") != bundle.manifest.get("digest"):
            raise HilsimError(f"{folder}: changed while it was compared (run compare again)")
        extra = read.launches
        del read
        frame = pd.DataFrame(
            {c: (have[c] if c in have.columns else extra[c]) for c in LAUNCH_COLUMNS
             if c in have.columns or c in extra.columns},
            index=have.index,
            copy=False,
        )
        del extra
        return Bundle(frame, bundle.metrics, bundle.regions, bundle.manifest, bundle.microbench,
                      bundle.path)

    return read


def _run(
    name: str, seed: int, extra: dict[str, Any] | None = None, label: str | None = None
) -> dict[str, Any]:
    """Plan ``name`` at ``seed`` (with the run's parameters plus ``extra``) and score it.

    Returns the outcome as a dict: ``label`` (the row), ``name``, ``seed``, ``error``,
    ``speedup``, ``n_samples``, ``sampled_ns``, ``seconds``, ``notes``, and ``key`` (the
    result it belongs to: ``label`` as given, else ``name``); or ``key``, ``label``,
    ``name`` and ``skipped`` (the one-line reason) when the method cannot run.
    """
    row = label or name
    if _STATE["cached"] != row:
        # runs arrive grouped by method: keep one method's shared values at a time, so
        # STEM's sort (~0.3 GB at 10M) is not held while the next method plans
        _STATE.update(cache=TableCache(), cached=row)
        if _STATE.get("columns_of") is not None:
            # and only its launch columns (as its parameters make them): the previous
            # method's are dropped first
            _STATE["bundle"] = _STATE["base"]
            try:
                created = methods.create(name, **(_STATE["params"].get(name, {}) | (extra or {})))
                _STATE["bundle"] = _STATE["columns_of"](created.launch_columns)
                del created
            except HilsimError as exc:
                return {"key": row, "label": row, "name": name, "skipped": str(exc)}
    bundle: Bundle = _STATE["bundle"]
    target: Bundle = _STATE["target"]
    try:
        method = methods.create(name, **(_STATE["params"].get(name, {}) | (extra or {})))
        if method.stochastic:
            method = method.with_seed(seed)
        with _STATE["cache"]:
            t0 = time.perf_counter()
            plan = method.plan(bundle)
            seconds = time.perf_counter() - t0
            score = score_plan(plan, target)
    except HilsimError as exc:
        return {"key": row, "label": row, "name": name, "skipped": str(exc)}
    return {
        "key": row,
        "label": label or method_label(name, plan),
        "name": name,
        "seed": seed,
        "error": score.error,
        "speedup": score.speedup,
        "n_samples": score.n_samples,
        "sampled_ns": score.sampled_ns,
        "seconds": seconds,
        "notes": list(plan.notes),
    }


def _tasks(names: list[str], seeds: int) -> list[tuple[str, int]]:
    tasks = []
    for name in names:
        stochastic = methods.get(name).stochastic
        tasks.extend((name, s) for s in (range(seeds) if stochastic else [0]))
    return tasks


def _budget_tasks(
    reference: MethodResult, baselines: list[str], seeds: int, kind: str
) -> list[tuple[str, int, dict[str, Any], str]]:
    """Tasks of the baselines at ``reference``'s budget, seed by seed (STEM Table 3 compares
    methods at their speedups; here the baselines get the same simulated time, or the same
    number of simulated launches, as the method they are compared to)."""
    per_seed = dict(
        zip(
            reference.seeds,
            reference.sampled_ns if kind == "time" else reference.samples,
            strict=True,
        )
    )
    mean = float(np.mean(list(per_seed.values())))
    tasks = []
    for name in baselines:
        label = f"{name} ({reference.name}'s {kind})"
        stochastic = methods.get(name).stochastic
        for seed in range(seeds) if stochastic else [0]:
            budget = per_seed.get(seed, mean) if stochastic else mean
            if kind == "time":
                extra: dict[str, Any] = {"budget_ns": float(budget)}
            elif name == "random":
                extra = {"n_samples": max(1, round(budget))}
            else:
                extra = {"n_launches": max(1, round(budget))}
            tasks.append((name, seed, extra, label))
    return tasks


def compare_methods(
    bundle: Bundle,
    names: list[str] | None = None,
    seeds: int = 10,
    holdout: Bundle | None = None,
    params: dict[str, dict[str, Any]] | None = None,
    workers: int | None = None,
    progress: Any = None,
    budget_of: str | None = "stem",
    budget: str = "time",
    columns_of: ColumnReader | None = None,
) -> dict[str, Any]:
    """Run ``names`` (default: every registered method) over ``seeds`` and score them.

    ``columns_of``: when given, ``bundle`` may hold only the columns every method reads
    (``launch_id``, ``name``, ``kernel``, ``duration_ns``); each method's own launch
    columns are read with it when its runs start and dropped when the next method's
    start (runs in this process), or read once for all of them (worker processes). The
    largest method, not the union of all, then sets the memory.

    Baselines at the same budget: when ``budget_of`` (default ``stem``) is among the
    methods and ran, ``random`` and ``first-n`` (those of them in ``names`` whose
    parameters were not set in ``params``) run at that method's budget, seed by seed:
    the same simulated time (``budget="time"``, so the speedups match) or the same
    number of simulated launches (``budget="launches"``). ``budget_of=None`` runs them
    at their own defaults.

    Rows that do not reduce the simulation (:func:`reduction_flag`) are marked
    ``no_reduction`` and left off the Pareto front; every plan note is carried as a
    row's ``warnings``; a method that ran without its inputs is labelled with what it
    had (:func:`method_label`).

    ``workers`` (default: one per CPU, at most one per run) is lowered to what the
    available memory holds (:func:`memory_capped_workers`).

    Returns ``{"methods": [summary...], "skipped": {name: reason}, "holdout": bool,
    "seeds": [int], "budget": {...} | None, "thresholds": {...}, "workers": int,
    "workers_note": str | None}``.
    """
    if budget not in BUDGET_KINDS:
        raise HilsimError(f"compare: budget must be one of {', '.join(BUDGET_KINDS)}")
    limits.check_seeds(seeds, "compare: --seeds")
    if workers is not None and (isinstance(workers, bool) or workers < 1):
        raise HilsimError(f"compare: --workers must be at least 1, got {workers!r}")
    if budget_of is not None and budget_of not in methods.available():
        raise HilsimError(
            f"compare: --budget-of {budget_of!r}: not a method (one of "
            f"{', '.join(methods.available())}, or none)"
        )
    params = params or {}
    available = methods.available()
    names = available if not names or names == ["all"] else names
    unknown = [n for n in [*names, *params] if n not in available]
    if unknown:
        raise HilsimError(f"compare: unknown method(s) {', '.join(dict.fromkeys(unknown))}")
    for name, given in params.items():
        methods.create(name, **given)  # unknown or bad parameters: one line now
    matched = [
        n
        for n in BUDGET_BASELINES
        if budget_of and budget_of in names and n in names and n != budget_of and n not in params
    ]
    first_phase = [n for n in names if n not in matched]
    results: dict[str, MethodResult] = {}
    for n in first_phase:
        cls = methods.get(n)
        merged = methods.create(n, **params.get(n, {})).params()
        merged.pop("seed", None)
        results[n] = MethodResult(n, n, tuple(cls.needs), params=merged)
    skipped: dict[str, str] = {}
    tasks: list[tuple[str, int, dict[str, Any] | None, str | None]] = [
        (name, seed, None, None) for name, seed in _tasks(first_phase, seeds)
    ]
    n_tasks = len(tasks) + sum((seeds if methods.get(n).stochastic else 1) for n in matched)
    workers = workers or min(n_tasks, os.cpu_count() or 1)
    union = launch_columns([*first_phase, *matched], params)
    in_bundle = (
        0 if columns_of is None else bundle.n_launches * _INT_COLUMN_BYTES * sum(
            c not in bundle.launches.columns for c in (union or LAUNCH_COLUMNS)
        )
    )  # the columns a worker would read besides those given (nullable int64: 9 B each)
    per_worker = int(
        WORKER_BUNDLE_FACTOR * (bundle_bytes([bundle, holdout or bundle]) + in_bundle)
    )
    workers, workers_note = memory_capped_workers(workers, per_worker, available_bytes())
    if columns_of is not None and workers > 1:  # workers get every column they read
        bundle = columns_of(union)

    def collect(outcomes: list[dict[str, Any]]) -> None:
        for outcome in outcomes:
            if "skipped" in outcome:
                skipped[outcome["key"]] = outcome["skipped"]
                continue
            results[outcome["key"]].add(outcome)

    def run_all(run: Any, batch: list[tuple[str, int, dict[str, Any] | None, str | None]]):
        outcomes = []
        for outcome in run(batch):
            outcomes.append(outcome)
            if progress:
                progress()
        return outcomes

    def phases(run: Any) -> None:
        collect(run_all(run, tasks))
        reference = results.get(budget_of) if budget_of else None
        if matched and reference is not None and reference.errors:
            second = _budget_tasks(reference, matched, seeds, budget)
            for name in matched:
                label = f"{name} ({reference.name}'s {budget})"
                fixed = methods.create(name).params()
                fixed.pop("seed", None)
                results[label] = MethodResult(
                    label,
                    name,
                    tuple(methods.get(name).needs),
                    params=fixed,
                    budget={"of": reference.name, "kind": budget},
                )
            collect(run_all(run, second))
            for label, result in results.items():
                if result.budget is not None:
                    result.budget["per_seed"] = {t[1]: t[2] for t in second if t[3] == label}
        elif matched:
            # no reference to match: the baselines run at their own defaults
            for name in matched:
                cls = methods.get(name)
                fixed = methods.create(name).params()
                fixed.pop("seed", None)
                results[name] = MethodResult(name, name, tuple(cls.needs), params=fixed)
            collect(run_all(run, [(n, s, None, None) for n, s in _tasks(matched, seeds)]))

    if workers > 1:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(
            max_workers=workers,
            mp_context=context,
            initializer=_init_worker,
            initargs=(bundle, holdout or bundle, params),
        ) as pool:

            def in_pool(batch):
                futures = [pool.submit(_run, *task) for task in batch]
                for future in as_completed(futures):
                    yield future.result()

            phases(in_pool)
    else:
        _init_worker(bundle, holdout or bundle, params, columns_of)
        try:
            phases(lambda batch: (_run(*task) for task in batch))
        finally:
            _STATE.clear()  # the cache and the bundle references
    n = (holdout or bundle).n_launches
    summaries = [r.summary(n) for key, r in results.items() if key not in skipped and r.errors]
    # rows that reduce the simulation first, by error; then the "no reduction" rows
    summaries.sort(key=lambda s: (s["no_reduction"] is not None, s["mean_error"]))
    reduced = [i for i, s in enumerate(summaries) if s["no_reduction"] is None]
    points = [(summaries[i]["hmean_speedup"], summaries[i]["mean_error"]) for i in reduced]
    on_front = {reduced[j] for j in pareto_front(points)}
    for i, summary in enumerate(summaries):
        summary["pareto"] = i in on_front
    return {
        "methods": summaries,
        "skipped": skipped,
        "holdout": holdout is not None,
        "seeds": list(range(seeds)),
        "budget": {"of": budget_of, "kind": budget, "baselines": matched} if matched else None,
        "thresholds": {
            "no_reduction_speedup": NO_REDUCTION_SPEEDUP,
            "no_reduction_share": NO_REDUCTION_SHARE,
        },
        "workers": workers,
        "workers_note": workers_note,
    }


def compare_profile(
    bundle: Bundle,
    path: str | Path | None = None,
    names: list[str] | None = None,
    seeds: int = 10,
    holdout: Bundle | None = None,
    holdout_path: str | Path | None = None,
    params: dict[str, dict[str, Any]] | None = None,
    workers: int | None = None,
    progress: Any = None,
    budget_of: str | None = "stem",
    budget: str = "time",
) -> dict[str, Any]:
    """The ``hilsim.compare/1`` document of :func:`compare_methods` on ``bundle`` (read from
    ``path``; scored on ``holdout``, read from ``holdout_path``, when given).

    Besides the table it holds what identifies the inputs (:func:`input_identity` of the
    files, the launch sequence's digest), the workload and device names, and the trace's
    warnings once (``input_warnings``); STEM's row also carries how much time its CLT rule
    leaves unchecked.
    """
    result = compare_methods(
        bundle, names, seeds, holdout, params, workers, progress, budget_of, budget,
        columns_of=bundle_columns_reader(bundle, path),
    )
    input_warnings = bundle_warnings(bundle) + method_warnings(bundle.launches, "any method")
    for summary in result["methods"]:
        if summary["name"] == "stem":
            summary["warnings"] = method_warnings(bundle.launches, "stem") + summary["warnings"]
    source = input_identity(path) if path is not None else {}
    return {
        "schema": COMPARE_SCHEMA,
        "hilsim_version": hilsim_version(),
        "workload": workload_name(bundle, path),
        "device": (bundle.manifest.get("device") or {}).get("name"),
        "n_launches": bundle.n_launches,
        "input": source | {"sequence_digest": bundle.sequence_digest()},
        "holdout_input": input_identity(holdout_path) if holdout_path is not None else None,
        "profile": str(path) if path is not None else None,
        "holdout_profile": str(holdout_path) if holdout_path is not None else None,
        "input_warnings": input_warnings,
    } | result


def comparison_title(document: dict[str, Any]) -> str:
    """The Pareto plot's title for a :func:`compare_profile` document: workload, device,
    launch count and the holdout run the plans were scored on."""
    device = document.get("device")
    title = (
        f"{document['workload']}"
        + (f" on {device}" if device else "")
        + f": {document['n_launches']:,} launches"
    )
    holdout = document.get("holdout_profile")
    return title + (f", scored on {Path(holdout).name}" if holdout else "")


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


#: errors below this (in %) are drawn on a linear scale, so 0% is drawn at 0 (symlog)
ERROR_LINEAR_BELOW_PCT = 0.1


def _drawable(summary: dict[str, Any]) -> bool:
    values = [summary.get("hmean_speedup"), summary.get("mean_error")]
    if not all(isinstance(v, (int, float)) and np.isfinite(v) for v in values):
        return False
    return bool(values[0] > 0) and all(
        isinstance(summary.get(k, 1.0), (int, float)) and np.isfinite(summary.get(k, 1.0))
        and summary.get(k, 1.0) >= 0
        for k in ("min_speedup", "max_speedup", "min_error", "max_error")
    ) and summary.get("min_speedup", 1.0) > 0


@plain_text()
def pareto_plot(
    summaries: list[dict[str, Any]],
    path: str | Path,
    title: str,
    xlabel: str = "speedup (harmonic mean over seeds)",
    ylabel: str = "mean sampling error (%)",
) -> Path:
    """Speedup–error scatter with the Pareto front (STEM Fig. 9), written as PNG.

    Each row is one marker (its colour and shape named in the legend beside the plot, so
    no labels collide), with bars over seeds from the smallest to the largest error and
    speedup when the summary has them (``min_error``/``max_error``,
    ``min_speedup``/``max_speedup``). The error axis is symmetric-log: linear below
    :data:`ERROR_LINEAR_BELOW_PCT` %, so an error of exactly 0 is drawn at 0, not clipped.
    Rows marked ``no_reduction`` are hollow and left off the front. Rows without a
    finite positive speedup and a finite error (a method whose every seed failed) cannot be
    placed and are left out. Names are drawn as given (:class:`~hilsim.core.plottext.
    plain_text`: a ``$`` in a workload or method label is not mathtext).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summaries = [s for s in summaries if _drawable(s)]

    if summaries and "pareto" in summaries[0]:
        front = {i for i, s in enumerate(summaries) if s.get("pareto")}
    else:
        reduced = [i for i, s in enumerate(summaries) if not s.get("no_reduction")]
        points = [(summaries[i]["hmean_speedup"], summaries[i]["mean_error"]) for i in reduced]
        front = {reduced[j] for j in pareto_front(points)}
    markers = "osD^vPX*h<>p"
    colors = plt.get_cmap("tab10").colors
    fig, ax = plt.subplots(figsize=(8.5, 4.8), dpi=110)
    for i, summary in enumerate(summaries):
        x, y = summary["hmean_speedup"], 100 * summary["mean_error"]
        xerr = yerr = None
        if "min_speedup" in summary and "max_speedup" in summary:
            xerr = [[max(x - summary["min_speedup"], 0)], [max(summary["max_speedup"] - x, 0)]]
        if "min_error" in summary and "max_error" in summary:
            low, high = 100 * summary["min_error"], 100 * summary["max_error"]
            yerr = [[max(y - low, 0)], [max(high - y, 0)]]
        hollow = bool(summary.get("no_reduction"))
        color = colors[i % len(colors)]
        label = summary["method"] + (
            " - no reduction" if hollow else (" - Pareto front" if i in front else "")
        )
        ax.errorbar(
            x,
            y,
            xerr=xerr,
            yerr=yerr,
            fmt=markers[i % len(markers)],
            ms=8,
            color=color,
            mfc="none" if hollow else color,
            ecolor=color,
            elinewidth=1,
            capsize=3,
            label=label,
        )
    ordered = sorted(
        ((summaries[i]["hmean_speedup"], 100 * summaries[i]["mean_error"]) for i in front),
        key=lambda p: p[0],
    )
    if len(ordered) > 1:
        ax.plot(*zip(*ordered, strict=True), color="tab:blue", lw=1, ls="--", zorder=0)
    ax.set_xscale("log")
    if any(s.get("no_reduction") for s in summaries):
        ax.axvspan(
            ax.get_xlim()[0] / 10,
            NO_REDUCTION_SPEEDUP,
            color="0.9",
            zorder=-1,
            label=f"speedup < {NO_REDUCTION_SPEEDUP:g}x: no reduction",
        )
        ax.set_xlim(
            left=min(
                s["min_speedup"] if "min_speedup" in s else s["hmean_speedup"] for s in summaries
            )
            / 1.3
        )
    from matplotlib.ticker import FuncFormatter

    times = FuncFormatter(lambda v, _: f"{v:g}x")
    ax.xaxis.set_major_formatter(times)
    low, high = ax.get_xlim()
    if high / low < 30:  # less than ~1.5 decades: label the minor ticks too
        ax.xaxis.set_minor_formatter(times)
        ax.tick_params(axis="x", which="minor", labelsize=7)
    ax.set_yscale("symlog", linthresh=ERROR_LINEAR_BELOW_PCT, linscale=0.5)
    top = max([100 * s.get("max_error", s["mean_error"]) for s in summaries] or [1.0])
    ax.set_ylim(-0.02, max(top * 1.6, 1.0))
    ax.axhline(0, color="0.7", lw=0.8, zorder=0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel + f" (linear below {ERROR_LINEAR_BELOW_PCT:g}%)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    if summaries:
        ax.legend(
            loc="upper left",
            bbox_to_anchor=(1.02, 1.0),
            fontsize=8,
            title="bars: min-max over seeds" if any("min_error" in s for s in summaries) else None,
            title_fontsize=7,
            frameon=False,
        )
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", bbox_inches="tight")
    plt.close(fig)
    return write_bytes_atomic(path, buffer.getvalue())
