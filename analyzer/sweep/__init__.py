"""Sweeps of workloads x methods x parameter grids x seeds on Dask.

A sweep is the ``hilsim compare`` job repeated over many workloads and parameter
settings; every (workload, method, params, seed) is one *task*: plan on the workload's
profile, score on it (or on its holdout run), as STEM section 4.1 defines error and
speedup (:func:`hilsim.analyzer.evaluate.score_plan`). Tasks run on ``dask.distributed``:
an embedded ``LocalCluster`` by default, or any existing cluster given its scheduler
address (SLURM/PBS through ``dask-jobqueue``, see ``docs/sweep.md``).

* **Spec** (TOML, :mod:`~hilsim.analyzer.sweep.spec`): ``seeds``, optional ``simulate``
  and ``cards``, ``[[workloads]]`` (``path`` to a bundle folder or profile file, relative
  to the spec, or ``example`` naming a shipped example; optional ``holdout``; for
  ``simulate``: ``program``, ``card``, ``sim_options``, ``sim_timeout``), ``[[methods]]``
  (``name`` and ``params``, where a list value is a grid axis).
* **Simulate** (``simulate = true``: the sampled launches run on the simulated card):
  each task's plan is run on the workload's simulated card by the code of
  ``hilsim simulate`` (:func:`hilsim.analyzer.simulate.simulate_plan`, STEM section 3:
  only the representative launches are simulated) on the worker, and the row gains
  ``sim_*`` columns (cycles of the sample, the estimate of the full run from them and its
  error against the profile's total). The log stays in ``OUTPUT/sim/<task key>/`` for
  ``hilsim validate --sim``.
* **Shared storage, not shipping**: tasks carry paths; each worker reads the profile
  itself and keeps the last one it read (with a
  :class:`~hilsim.analyzer.tablecache.TableCache`, so STEM's sort is shared by the
  seeds a worker runs). Tasks are submitted grouped by workload and method.
* **Resumable**: a task's key is the sha256 of its inputs' digests (a bundle's
  ``manifest.json``, which lists the sha256 of its files, or the profile file's own
  sha256), method, params and seed. Rows already in ``results.parquet`` are not run
  again (failed ones only with ``retry_failed``); the table is rewritten atomically
  every few seconds while the sweep runs, so an interrupted sweep loses little.
* **Failures are rows**: a task that raises gives a row with ``status = "failed"`` and
  its one-line error; the sweep goes on.

One module per job: :mod:`~hilsim.analyzer.sweep.spec` (the TOML spec),
:mod:`~hilsim.analyzer.sweep.tasks` (input digests, task keys, the task list),
:mod:`~hilsim.analyzer.sweep.worker` (one task on a worker: plan, score, simulate),
:mod:`~hilsim.analyzer.sweep.results` (the ``results.parquet`` table),
:mod:`~hilsim.analyzer.sweep.summary` (per-workload and simulation summaries),
:mod:`~hilsim.analyzer.sweep.runner` (the run on Dask; ``dask`` is imported when a sweep
runs) and :mod:`~hilsim.analyzer.sweep.report` (the files written from the results: the
compare folders and summaries, and the lines that say what ran). This package exports the
names its callers use.
"""

from __future__ import annotations

from hilsim.analyzer.sweep.results import (
    RESULT_COLUMNS,
    RESULT_TYPES,
    RESULTS,
    SIM_COLUMNS,
    empty_results,
    read_results,
    results_frame,
    write_results,
)
from hilsim.analyzer.sweep.runner import (
    DIGESTS,
    SweepOutcome,
    local_workers,
    parse_scheduler,
    run_sweep,
)
from hilsim.analyzer.sweep.spec import (
    SIM_TIMEOUT,
    MethodGrid,
    SweepSpec,
    Workload,
    load_spec,
    parse_spec,
)
from hilsim.analyzer.sweep.summary import SIM_SUMMARY, SUMMARY, csv_safe, sim_summary, summarize
from hilsim.analyzer.sweep.tasks import Task, build_tasks, content_sha256, task_key
from hilsim.analyzer.sweep.worker import run_task

__all__ = [
    "DIGESTS",
    "RESULTS",
    "RESULT_COLUMNS",
    "RESULT_TYPES",
    "SIM_COLUMNS",
    "SIM_SUMMARY",
    "SIM_TIMEOUT",
    "SUMMARY",
    "MethodGrid",
    "SweepOutcome",
    "SweepSpec",
    "Task",
    "Workload",
    "build_tasks",
    "csv_safe",
    "empty_results",
    "content_sha256",
    "load_spec",
    "local_workers",
    "parse_scheduler",
    "parse_spec",
    "read_results",
    "results_frame",
    "run_sweep",
    "run_task",
    "sim_summary",
    "summarize",
    "task_key",
    "write_results",
]
