"""One sweep task on a Dask worker: load the profile (once per worker process), plan,
score (STEM section 4.1, :func:`hilsim.analyzer.evaluate.score_plan`) and, for a
simulating task, run the plan's launches on the task's simulated card. A failure becomes
the task's row with its one-line error."""

from __future__ import annotations

import os
import socket
import threading
import time
import warnings
from pathlib import Path
from typing import Any

from hilsim.analyzer import methods
from hilsim.analyzer.evaluate import score_plan
from hilsim.analyzer.simulate import simulate_plan
from hilsim.analyzer.sweep.tasks import Task
from hilsim.analyzer.tablecache import TableCache
from hilsim.simmodel.gpgpusim.listrun import launch_mode_for

from hilsim.core.bundle import hilsim_version
from hilsim.core.errors import HilsimError
from hilsim.formats.read import load_profile

_WORKER_LOCK = threading.Lock()
_LOADED: dict[str, Any] = {}


def _load(path: str, digest: str) -> Any:
    """The profile at ``path``, read once per worker process (the last one is kept)."""
    hit = _LOADED.get(digest)
    if hit is not None:
        return hit
    _LOADED.clear()  # one workload's bundles at a time: memory stays one profile
    bundle = load_profile(path)
    _LOADED[digest] = bundle
    return bundle


def _cache_for(digest: str) -> Any:
    key = f"cache:{digest}"
    if key not in _LOADED:
        _LOADED[key] = TableCache()
    return _LOADED[key]


def one_line(exc: BaseException) -> str:
    """``exc`` as the one-line message of a failed task's row: a :class:`HilsimError`'s
    text, else the exception's type and text."""
    text = " ".join(str(exc).split())
    if isinstance(exc, HilsimError):
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def run_task(task: Task) -> dict[str, Any]:
    """Plan and score one task on this worker; never raises (a failure is a row).

    Tasks in one worker process run one at a time (a lock): each holds the profile and
    its working arrays, so threads of one worker would only add memory.
    """
    row: dict[str, Any] = task.row()
    row.update(
        worker=f"{socket.gethostname()}:{os.getpid()}",
        hilsim_version=hilsim_version(),
        status="failed",
        message=None,
    )
    t_task = time.perf_counter()
    # numpy/pandas/sklearn warnings (0/0, a k-means that converged early) are checked
    # where they matter and never printed: a worker's stderr is the user's terminal
    with _WORKER_LOCK, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            t0 = time.perf_counter()
            bundle = _load(task.path, task.workload_digest)
            target = _load_holdout(task) if task.holdout else bundle
            row["load_seconds"] = time.perf_counter() - t0
            row["n_launches"] = int(bundle.n_launches)
            method = methods.create(task.method, **task.params)
            if method.stochastic:
                method = method.with_seed(task.seed)
            with _cache_for(task.workload_digest):
                t0 = time.perf_counter()
                plan = method.plan(bundle)
                row["plan_seconds"] = time.perf_counter() - t0
                t0 = time.perf_counter()
                score = score_plan(plan, target)
                row["score_seconds"] = time.perf_counter() - t0
            row.update(
                error=float(score.error),
                speedup=float(score.speedup),
                n_samples=int(score.n_samples),
                n_clusters=int(score.n_clusters),
                truth_ns=float(score.truth_ns),
                estimate_ns=float(score.estimate_ns),
            )
            if task.card is not None:
                _simulate(task, plan, row)
            row["status"] = "ok"
        except Exception as exc:  # noqa: BLE001 - every failure becomes the task's row
            row["message"] = one_line(exc)
    row["task_seconds"] = time.perf_counter() - t_task
    return row


def _simulate(task: Task, plan: Any, row: dict[str, Any]) -> None:
    """Run ``plan``'s launches on the task's card (``hilsim simulate``'s code) into
    ``task.sim_dir``; fill the row's ``sim_*`` columns. A failure raises one line naming
    the card (the plan's own columns stay filled)."""
    if task.sim_dir is None or task.program is None:
        raise HilsimError("sweep: a simulating task without its program or output folder")
    out = Path(task.sim_dir)
    row["sim_dir"] = str(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        plan_path = plan.save(out / "plan.json")
        t0 = time.perf_counter()
        try:
            s = simulate_plan(plan_path, list(task.program), str(task.card), out,
                              options=task.sim_options, timeout_s=task.sim_timeout,
                              launch_mode=launch_mode_for(task.program))
        finally:
            row["sim_wall_seconds"] = time.perf_counter() - t0
    except (HilsimError, OSError) as exc:
        raise HilsimError(f"simulate on {task.card}: {one_line(exc)}") from exc
    row.update(
        sim_launches=int(s.launches_simulated),
        sim_cycles=float(s.sampled_cycles),
        sim_estimate_cycles=float(s.estimate_cycles),
        sim_full_cycles=s.full_cycles,
        sim_error=s.estimate_error,
        sim_speedup=s.simulated_time_speedup,
        sim_cpu_seconds=float(s.sim_cpu_s),
    )


def _load_holdout(task: Task) -> Any:
    assert task.holdout is not None and task.holdout_digest is not None
    key = f"holdout:{task.holdout_digest}"
    if key not in _LOADED:
        _LOADED[key] = load_profile(task.holdout)
    return _LOADED[key]
