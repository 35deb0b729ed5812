"""One launch list run as several simulator processes at once: local workers or Dask.

A sampled simulation's launch list (the samples and their warm-up windows, in launch
order) splits into *chunks* of consecutive samples; each chunk is one simulator process
that fast-forwards (functional mode) every launch before its first listed launch, runs
its own listed launches in performance mode and is stopped once the statistics block of
its last one is in the log (:func:`hilsim.simmodel.gpgpusim.fastforward.stop_after_launch`).
A program on the skip path gets its chunk's list and makes only those launches. The
chunks' statistics are merged by launch id. What a sample measures depends on the cache
state the launches before it left: in one process that is the previous sample and its
warm-up (functional launches do not touch the timing model, so they leave nothing); a
chunk's first sample would find a cold card instead. So each chunk but the first also
runs, first and in performance mode, the previous chunk's last sample with its window of
warm-up launches (*carried* launches, whose statistics the previous chunk reports): its
first sample then finds the state it finds in one process, up to what older samples left
and the clock domains' phases.

**How many chunks, cut where** (:func:`plan_chunks`). Chunk ``j`` fast-forwards every launch
up to its last listed launch that it does not run in detail, so splitting costs CPU: a
chunk costs ``f x`` (the launches up to its last that it runs functionally) ``+`` (its
performance launches, carried ones included) ``+`` a process's start-up, each launch
weighted by its relative cost (mean 1: the CPU an earlier run of the same simulation
spent on it, else the profile's warp instructions or durations scaled to that CPU, as the
caller gives them; equal without any), with ``f`` the CPU of a functional launch over a
performance one of the same weight. For each number of chunks the cuts (after a sample
only) minimise the longest chunk's cost; the most chunks (at most ``workers``) whose
total stays within ``cpu_factor`` x the one-process cost are used, as long as each more
shortens the longest chunk. ``f`` and the start-up are measured: each finished run's CPU split
(:func:`hilsim.simmodel.gpgpusim.listrun.cpu_split`) gives them for the runs that follow;
before the first run ``f`` is :data:`FUNCTIONAL_COST` (measured on sampled runs of
Rodinia apps) and the start-up 0. On the skip path nothing is fast-forwarded (``f`` = 0).

**Dask** (``scheduler``): each chunk is a task of an existing Dask cluster
(``dask scheduler`` + ``dask worker``, as ``hilsim sweep`` uses); a worker needs hilsim,
the simulator build (``hilsim gpgpusim setup``) and the program and its inputs at the same
paths (a shared folder); a card given as a ``.config`` path must be there too. The task
runs in a temporary folder on the worker and returns its log; a task whose worker dies is
run again on another worker by the scheduler (Dask's ``allowed-failures``).
"""

from __future__ import annotations

import socket
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from hilsim.simmodel.gpgpusim.fastforward import (
    COPY_DIGESTS_ENV,
    LIST_NAME,
    PERF_LAUNCHES_ENV,
    stop_after_launch,
    uids_of_launches,
)
from hilsim.simmodel.gpgpusim.run import LOG_NAME, run_program
from hilsim.simmodel.gpgpusim.skippath import LAUNCH_LIST, launch_list_argv

from hilsim.core.errors import HilsimError

#: a functional launch's CPU over a performance launch's of the same weight before any run
#: measured it: the median of the ratio the sampled runs of the Rodinia training apps
#: measured with launches weighted by their warp instructions (STEM seed 0, ``--warmup
#: auto``, reduced QV100: gaussian 0.17, srad_v2 0.20 and 0.19, lud 0.29;
#: ``functional_cost_measured`` in ``simulate.json``). Weighted by durations the same runs
#: gave 0.17, 0.22, 0.18 and 0.02: instructions weigh a launch's simulation more evenly
FUNCTIONAL_COST = 0.19
#: the chunked runs' total CPU may reach this multiple of the one-process run's
CPU_FACTOR = 1.5


@dataclass(frozen=True)
class ChunkPlan:
    """How a launch list splits: ``bounds[j]`` = (first, end) positions in the list of
    chunk ``j``'s own launches, ``starts[j]`` the position its performance list starts at
    (before ``first`` by the carried warm-up: the previous chunk's last sample and its
    window); the cost model's figures in units of one performance launch of mean cost."""

    bounds: tuple[tuple[int, int], ...]
    samples: tuple[int, ...]  # samples per chunk (the rest of a chunk: their warm-up)
    one_process_cost: float
    chunked_cost: float
    longest_chunk_cost: float
    functional_cost: float
    cpu_factor: float
    starts: tuple[int, ...]

    def carried(self, j: int) -> int:
        """How many launches chunk ``j`` runs in performance mode only to warm its first
        sample (their statistics are the previous chunk's)."""
        return self.bounds[j][0] - self.starts[j]

    def summary(self) -> dict[str, Any]:
        return {"chunks": len(self.bounds),
                "samples_per_chunk": list(self.samples),
                "launches_per_chunk": [int(e - b) for b, e in self.bounds],
                "carried_per_chunk": [self.carried(j) for j in range(len(self.bounds))],
                "cpu_estimate_vs_one_process": round(self.chunked_cost
                                                     / self.one_process_cost, 3),
                "wall_estimate_vs_one_process": round(self.longest_chunk_cost
                                                      / self.one_process_cost, 3),
                "functional_cost": round(self.functional_cost, 4),
                "cpu_factor": self.cpu_factor}


def launch_weights(launch_costs: np.ndarray | None, n: int) -> np.ndarray:
    """Launch ids ``0..n-1``'s weights in the cost model: each known cost (finite, > 0)
    over the mean of all the known ones, 1 where none is known."""
    weights = np.ones(n)
    if launch_costs is None or not len(launch_costs):
        return weights
    given = np.asarray(launch_costs, dtype=np.float64)
    good = np.isfinite(given) & (given > 0)
    if good.any():
        scaled = np.where(good, given / given[good].mean(), 1.0)[:n]
        weights[:len(scaled)] = scaled
    return weights


class _CostModel:
    """Chunk costs of one launch list with prefix sums: a chunk whose performance list is
    positions ``[w, e)`` costs ``f x`` (every launch up to its last that it runs
    functionally) ``+`` (its performance launches) ``+ startup``, each launch weighted by
    its relative cost (``launch_costs``, mean 1; 1 each without them)."""

    def __init__(self, ids: np.ndarray, samples: np.ndarray, f: float,
                 launch_costs: np.ndarray | None, startup: float, carry: bool) -> None:
        costs = launch_weights(launch_costs, int(ids[-1]) + 1)
        self.ids, self.f, self.startup = ids, float(f), float(startup)
        self.upto = np.cumsum(costs)  # cost of launches 0..id
        self.listed = np.concatenate([[0.0], np.cumsum(costs[ids])])
        n = len(ids)
        # where a chunk starting at position b starts its performance list: the previous
        # sample and the window of warm-up launches right before it (consecutive ids): the
        # last position up to b - 1 that begins such a window
        self.start = np.arange(n)
        if carry and n > 1:
            begins = np.ones(n, dtype=bool)
            begins[1:] = samples[:-1] | (ids[1:] != ids[:-1] + 1)
            window = np.maximum.accumulate(np.where(begins, np.arange(n), 0))
            after = np.flatnonzero(samples[:-1]) + 1
            self.start[after] = window[after - 1]

    def cost(self, b: int, e: int | np.ndarray) -> Any:
        """The cost of the chunk of positions ``[b, e)`` (``e`` an array: one per end)."""
        w = int(self.start[b])
        perf = self.listed[e] - self.listed[w]
        return self.f * (self.upto[self.ids[np.asarray(e) - 1]] - perf) + perf + self.startup

    def costs(self, bounds: Sequence[tuple[int, int]]) -> np.ndarray:
        return np.array([float(self.cost(b, e)) for b, e in bounds])


def _balanced(model: _CostModel, ends: np.ndarray, chunks: int
              ) -> tuple[tuple[int, int], ...]:
    """At most ``chunks`` ranges ending only at ``ends`` (after a sample, or the list's
    end) whose longest cost is least: the least threshold (bisection) for which the
    greedy cut, each chunk as long as the threshold allows, needs no more chunks. A
    chunk's cost grows with its end and does not grow with its start, so the greedy cut
    is the fewest chunks for a threshold."""
    n = int(ends[-1])

    def greedy(limit: float) -> list[tuple[int, int]] | None:
        out, b = [], 0
        while b < n:
            later = ends[ends > b]
            fits = later[model.cost(b, later) <= limit]  # a prefix: cost grows with the end
            if not len(fits):
                return None
            out.append((b, int(fits[-1])))
            b = int(fits[-1])
            if len(out) > chunks:
                return None
        return out

    lo, hi = 0.0, float(model.cost(0, n))
    best = greedy(hi) or [(0, n)]
    for _ in range(48):
        mid = (lo + hi) / 2
        got = greedy(mid)
        if got is None:
            lo = mid
        else:
            hi, best = mid, got
        if hi - lo <= 1e-6 * hi:
            break
    return tuple(best)


def plan_chunks(launch_ids: np.ndarray, is_sample: np.ndarray, workers: int,
                functional_cost: float = FUNCTIONAL_COST,
                cpu_factor: float = CPU_FACTOR, *,
                launch_costs: np.ndarray | None = None, startup_cost: float = 0.0,
                carry: bool = True) -> ChunkPlan:
    """The chunks of a sorted launch list for ``workers`` (module docstring): a chunk
    starts only after a sample, so a sample keeps its warm-up window; the cuts balance the
    chunks' costs (``launch_costs``: each launch id's relative cost, e.g. the profile's
    durations); with ``carry`` a chunk also runs the previous chunk's last sample and its
    window first, so its first sample finds the cache state it finds in one process. The
    most chunks whose total stays within ``cpu_factor`` x one process's cost are used, as
    long as each more shortens the longest chunk."""
    ids = np.asarray(launch_ids, dtype=np.int64)
    samples = np.asarray(is_sample, dtype=bool)
    n = len(ids)
    if n == 0:
        raise HilsimError("parallel simulation: an empty launch list")
    model = _CostModel(ids, samples, functional_cost, launch_costs, startup_cost, carry)
    ends = np.concatenate([np.flatnonzero(samples[:-1]) + 1, [n]])
    one = float(model.cost(0, n))
    best: tuple[tuple[int, int], ...] = ((0, n),)
    longest = one
    for chunks in range(2, max(int(workers), 1) + 1):
        bounds = _balanced(model, ends, chunks)
        costs = model.costs(bounds)
        if costs.sum() > cpu_factor * one:
            break
        if costs.max() < longest * (1 - 1e-9):
            best, longest = bounds, float(costs.max())
    costs = model.costs(best)
    per_chunk = tuple(int(samples[b:e].sum()) for b, e in best)
    return ChunkPlan(best, per_chunk, float(one), float(costs.sum()), float(costs.max()),
                     float(functional_cost), float(cpu_factor),
                     tuple(int(model.start[b]) for b, _e in best))


@dataclass(frozen=True)
class ChunkTask:
    """What one chunk's process needs, picklable for a Dask worker."""

    index: int
    argv: tuple[str, ...]
    card: str
    options: dict[str, str]
    env: dict[str, str]
    launch_ids: tuple[int, ...]
    list_text: str  # the launch list file's content (fast-forward uids or skip-path ids)
    list_name: str
    list_env: str | None  # the variable that names the list (fast-forward), else None
    stop_uid: int | None  # stop once this uid's statistics block is in the log
    timeout_s: float
    carried: int = 0  # the leading launch ids run only to warm the chunk's first sample


@dataclass(frozen=True)
class ChunkResult:
    """A finished chunk: its log and what it cost."""

    index: int
    log_text: str
    wall_s: float
    cpu_s: float
    cpu_trace: tuple[tuple[int, float], ...]
    stopped: bool
    overrides: dict[str, str]
    host: str


def run_chunk(task: ChunkTask, folder: str | None = None) -> ChunkResult:
    """Run one chunk in ``folder`` (a temporary one when None, as on a Dask worker)."""
    holder = tempfile.TemporaryDirectory(prefix="hilsim-chunk-") if folder is None else None
    root = Path(holder.name if holder is not None else folder)  # type: ignore[arg-type]
    try:
        root.mkdir(parents=True, exist_ok=True)
        list_path = (root / task.list_name).resolve()
        list_path.write_text(task.list_text)
        env = dict(task.env)
        argv: Sequence[str] = task.argv
        if task.list_env is not None:
            env[task.list_env] = str(list_path)
        else:
            argv = launch_list_argv(task.argv, list_path)
        run_dir = root / "run"
        stop = (stop_after_launch(run_dir / LOG_NAME, task.stop_uid)
                if task.stop_uid is not None else None)
        run = run_program(list(argv), task.card, run_dir, options=task.options,
                          timeout_s=task.timeout_s, env=env, stop=stop)
        return ChunkResult(task.index, run.stdout, run.wall_s, run.cpu_s, run.cpu_trace,
                           run.stopped, dict(task.options), socket.gethostname())
    finally:
        if holder is not None:
            holder.cleanup()


def run_chunks_local(tasks: Sequence[ChunkTask], folders: Sequence[Path],
                     done: Callable[[ChunkResult], None]) -> list[ChunkResult]:
    """Every chunk at once on this machine (a thread each waits for its simulator
    process); ``done`` is called as each finishes. The first failure is raised once all
    have ended (a failed chunk's folder keeps its log)."""
    results: list[ChunkResult | None] = [None] * len(tasks)
    failures: list[BaseException] = []
    with ThreadPoolExecutor(max_workers=max(len(tasks), 1)) as pool:
        futures = {pool.submit(run_chunk, t, str(f)): t.index for t, f in zip(tasks, folders,
                                                                              strict=True)}
        for future in futures:
            try:
                result = future.result()
            except BaseException as exc:  # noqa: BLE001 - every chunk ends before raising
                failures.append(exc)
                continue
            results[futures[future]] = result
            done(result)
    if failures:
        raise failures[0]
    return [r for r in results if r is not None]


def _client(scheduler: str) -> Any:
    try:
        from distributed import Client
    except ImportError:
        raise HilsimError("--scheduler needs dask.distributed (pip install "
                          "'dask[distributed]')") from None
    try:
        return Client(scheduler, timeout="20s")
    except (OSError, TimeoutError) as exc:
        raise HilsimError(f"Dask scheduler {scheduler}: cannot connect ({exc})") from None


def dask_workers(scheduler: str) -> int:
    """The worker threads of the cluster at ``scheduler`` (one chunk each at most)."""
    client = _client(scheduler)
    try:
        return max(int(sum(client.nthreads().values())), 1)
    finally:
        client.close()


def run_chunks_dask(tasks: Sequence[ChunkTask], scheduler: str,
                    done: Callable[[ChunkResult], None]) -> list[ChunkResult]:
    """Every chunk as a task of the Dask cluster at ``scheduler``; ``done`` as each
    finishes. A task whose worker died is rerun by the scheduler; one that fails is
    raised (one line) once the others ended."""
    from distributed import as_completed  # (importable: _client checked it)

    client = _client(scheduler)
    results: dict[int, ChunkResult] = {}
    failures: list[str] = []
    try:
        futures = [client.submit(run_chunk, t, None, pure=False, key=f"hilsim-chunk-{t.index}-"
                                 f"{time.time_ns()}") for t in tasks]
        for future in as_completed(futures):
            try:
                result = future.result()
            except Exception as exc:  # noqa: BLE001 - named in one line below
                failures.append(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
                continue
            results[result.index] = result
            done(result)
    finally:
        client.close()
    if failures:
        raise HilsimError(f"Dask chunk failed: {failures[0]}")
    return [results[i] for i in sorted(results)]


def chunk_tasks(argv: Sequence[str], card: str, options: Mapping[str, str],
                launch_ids: np.ndarray, plan: ChunkPlan, fast_forward: bool,
                timeout_s: float) -> list[ChunkTask]:
    """One task per chunk of ``plan``: its list (uids for fast-forward, launch ids for the
    skip path; the carried warm-up first) and, fast-forwarded, the stop after its last
    listed launch."""
    tasks = []
    for index, (start, (_begin, end)) in enumerate(zip(plan.starts, plan.bounds,
                                                       strict=True)):
        ids = [int(i) for i in launch_ids[start:end]]
        carried = plan.carried(index)
        if fast_forward:
            uids = uids_of_launches(ids).tolist()
            text = "".join(f"{u}\n" for u in uids)
            tasks.append(ChunkTask(index, tuple(argv), card, dict(options),
                                   {COPY_DIGESTS_ENV: "1"}, tuple(ids), text, LIST_NAME,
                                   PERF_LAUNCHES_ENV, int(uids[-1]), timeout_s, carried))
        else:
            text = "".join(f"{i}\n" for i in ids)
            tasks.append(ChunkTask(index, tuple(argv), card, dict(options),
                                   {PERF_LAUNCHES_ENV: ""}, tuple(ids), text, LAUNCH_LIST,
                                   None, None, timeout_s, carried))
    return tasks


__all__ = ["CPU_FACTOR", "FUNCTIONAL_COST", "ChunkPlan", "ChunkResult", "ChunkTask",
           "chunk_tasks", "dask_workers", "launch_weights", "plan_chunks", "run_chunk",
           "run_chunks_dask", "run_chunks_local"]
