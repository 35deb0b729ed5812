"""Running a comparison's (method, seed) tasks: in worker processes or in this one.

Workers use the "spawn" start method (forking a parent that already runs BLAS/OpenMP
threads can deadlock); each receives the bundle once through its initializer and keeps
what one method's seeds share (totals, STEM's sort) in a
:class:`~hilsim.analyzer.tablecache.TableCache`, so a method's mean plan time is per plan
when planning all its seeds (a worker's first STEM plan pays for the sort, the next ones
reuse it). With one worker the tasks run in this process, on the bundle already in memory.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

from hilsim.analyzer import methods
from hilsim.analyzer.compare.columns import ColumnReader
from hilsim.analyzer.compare.scoring import method_label
from hilsim.analyzer.evaluate import score_plan
from hilsim.analyzer.tablecache import TableCache

from hilsim.core.bundle import Bundle
from hilsim.core.errors import HilsimError

#: one run: (method name, seed, parameters besides the run's, row label or None)
Task = tuple[str, int, dict[str, Any] | None, str | None]
#: runs tasks and yields their outcomes (:func:`plan_and_score`) as they finish
TaskRunner = Callable[[Iterable[Task]], Iterator[dict[str, Any]]]

_STATE: dict[str, Any] = {}


def init_worker(
    bundle: Bundle,
    target: Bundle,
    params: dict[str, dict[str, Any]],
    columns_of: ColumnReader | None = None,
) -> None:
    """What every task of this process plans on (``bundle``), scores on (``target``) and
    with (``params``, per method); ``columns_of`` reads a method's own launch columns."""
    _STATE.update(bundle=bundle, base=bundle, target=target, params=params,
                  cache=TableCache(), cached=None, columns_of=columns_of)


def plan_and_score(
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


@contextlib.contextmanager
def task_runner(
    workers: int,
    bundle: Bundle,
    target: Bundle,
    params: dict[str, dict[str, Any]],
    columns_of: ColumnReader | None = None,
) -> Iterator[TaskRunner]:
    """A :data:`TaskRunner` over ``workers`` spawned processes (each given ``bundle``,
    which then holds every column the tasks read), or in this process for one worker
    (reading each method's columns with ``columns_of``; nothing kept afterwards)."""
    if workers > 1:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(
            max_workers=workers,
            mp_context=context,
            initializer=init_worker,
            initargs=(bundle, target, params),
        ) as pool:

            def in_pool(batch: Iterable[Task]) -> Iterator[dict[str, Any]]:
                futures = [pool.submit(plan_and_score, *task) for task in batch]
                for future in as_completed(futures):
                    yield future.result()

            yield in_pool
        return
    init_worker(bundle, target, params, columns_of)
    try:
        yield lambda batch: (plan_and_score(*task) for task in batch)
    finally:
        _STATE.clear()  # the cache and the bundle references
