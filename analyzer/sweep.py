"""Sweeps of workloads x methods x parameter grids x seeds on Dask (issue 18 §1).

A sweep is the ``hilsim compare`` job repeated over many workloads and parameter
settings; every (workload, method, params, seed) is one *task*: plan on the workload's
profile, score on it (or on its holdout run), as STEM section 4.1 defines error and
speedup (:func:`hilsim.analyzer.evaluate.score_plan`). Tasks run on ``dask.distributed``:
an embedded ``LocalCluster`` by default, or any existing cluster given its scheduler
address (SLURM/PBS through ``dask-jobqueue``, see ``docs/sweep.md``).

* **Spec** (TOML, :func:`load_spec`): ``seeds``, optional ``simulate`` and ``cards``,
  ``[[workloads]]`` (``path`` to a bundle folder or profile file, relative to the spec,
  or ``example`` naming a shipped example; optional ``holdout``; for ``simulate``:
  ``program``, ``card``, ``sim_options``, ``sim_timeout``), ``[[methods]]`` (``name``
  and ``params``, where a list value is a grid axis).
* **Simulate** (``simulate = true``; issue 18 §1, "simulate the sampled launches on the
  simulated card"): each task's plan is run on the workload's simulated card by the
  code of ``hilsim simulate`` (:func:`hilsim.analyzer.simulate.simulate_plan`,
  STEM section 3: only the representative launches are simulated) on the worker, and the
  row gains ``sim_*`` columns (cycles of the sample, the estimate of the full run from
  them and its error against the profile's total). The log stays in
  ``OUTPUT/sim/<task key>/`` for ``hilsim validate --sim``.
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
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import itertools
import json
import os
import threading
import time
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from hilsim.core.errors import HilsimError

RESULTS = "results.parquet"
SUMMARY = "summary.csv"
SIM_SUMMARY = "sim_summary.csv"
DIGESTS = ".digests.json"

#: columns of results.parquet, in order, with their dtypes (object: text or JSON)
RESULT_TYPES: dict[str, str] = {
    "task_key": "object",
    "workload": "object",
    "workload_path": "object",
    "workload_digest": "object",
    "holdout_digest": "object",
    "method": "object",
    "label": "object",
    "params": "object",
    "seed": "Int64",
    "card": "object",
    "status": "object",
    "message": "object",
    "error": "float64",
    "speedup": "float64",
    "n_samples": "Int64",
    "n_clusters": "Int64",
    "n_launches": "Int64",
    "truth_ns": "float64",
    "estimate_ns": "float64",
    "sim_launches": "Int64",
    "sim_cycles": "float64",
    "sim_estimate_cycles": "float64",
    "sim_full_cycles": "float64",
    "sim_error": "float64",
    "sim_speedup": "float64",
    "sim_wall_seconds": "float64",
    "sim_cpu_seconds": "float64",
    "sim_dir": "object",
    "load_seconds": "float64",
    "plan_seconds": "float64",
    "score_seconds": "float64",
    "task_seconds": "float64",
    "worker": "object",
    "hilsim_version": "object",
}
RESULT_COLUMNS: tuple[str, ...] = tuple(RESULT_TYPES)
#: columns added with ``simulate``: a table written before them reads with them empty
SIM_COLUMNS: tuple[str, ...] = tuple(c for c in RESULT_TYPES if c.startswith("sim_"))

_SPEC_KEYS = {"seeds", "simulate", "cards", "workloads", "methods"}
_WORKLOAD_KEYS = {
    "name", "path", "example", "holdout", "program", "card", "sim_options", "sim_timeout",
}
#: seconds before a simulation is killed (``hilsim simulate``'s default)
SIM_TIMEOUT = 4 * 3600.0
_METHOD_KEYS = {"name", "params"}


@dataclass(frozen=True)
class Workload:
    """One profile to sample: ``path`` (bundle folder or profile file), optional holdout.

    For ``simulate``: ``program`` (the command that runs the workload on the simulated
    card and takes a launch list, as ``hilsim simulate``), ``card`` (else the spec's
    ``cards``), ``sim_options`` (the card's option overrides) and ``sim_timeout``.
    """

    name: str
    path: Path
    holdout: Path | None = None
    program: tuple[str, ...] | None = None
    card: str | None = None
    sim_options: dict[str, str] = field(default_factory=dict)
    sim_timeout: float = SIM_TIMEOUT


@dataclass(frozen=True)
class MethodGrid:
    """A method and its parameter grid: ``fixed`` values plus ``axes`` (lists) to cross."""

    name: str
    fixed: dict[str, Any]
    axes: dict[str, list[Any]]

    def settings(self) -> list[tuple[str, dict[str, Any]]]:
        """(label, params) for every point of the grid; the label names the grid values."""
        keys = sorted(self.axes)
        out = []
        for values in itertools.product(*(self.axes[k] for k in keys)):
            point = dict(zip(keys, values, strict=True))
            label = self.name
            if point:
                label += "(" + ", ".join(f"{k}={v}" for k, v in point.items()) + ")"
            out.append((label, {**self.fixed, **point}))
        return out


@dataclass
class SweepSpec:
    """A parsed sweep spec (see the module docstring and ``docs/sweep.md``)."""

    workloads: list[Workload]
    methods: list[MethodGrid]
    seeds: list[int]
    simulate: bool = False
    cards: list[str] = field(default_factory=list)
    source: Path | None = None


def _fail(source: Path, message: str) -> HilsimError:
    return HilsimError(f"{source}: {message}")


def _unknown(source: Path, where: str, table: dict[str, Any], allowed: set[str]) -> None:
    extra = sorted(set(table) - allowed)
    if extra:
        raise _fail(
            source,
            f"{where}: unknown key(s) {', '.join(extra)} (known: {', '.join(sorted(allowed))})",
        )


def _resolve(base: Path, value: Any, source: Path, where: str) -> Path:
    if not isinstance(value, str) or not value:
        raise _fail(source, f"{where}: expected a path string, got {value!r}")
    path = Path(value).expanduser()
    path = path if path.is_absolute() else base / path
    if not path.exists():
        raise _fail(source, f"{where}: {path} does not exist")
    return path.resolve()


def _workload(base: Path, entry: Any, index: int, source: Path) -> Workload:
    where = f"workloads[{index}]"
    if not isinstance(entry, dict):
        raise _fail(source, f"{where}: expected a table")
    _unknown(source, where, entry, _WORKLOAD_KEYS)
    if ("path" in entry) == ("example" in entry):
        raise _fail(source, f"{where}: give either 'path' or 'example'")
    if "example" in entry:
        from hilsim.analyzer.examples import EXAMPLES

        known = {e.name: e for e in EXAMPLES}
        example = known.get(entry["example"])
        if example is None:
            raise _fail(
                source, f"{where}: unknown example {entry['example']!r} (known: {', '.join(known)})"
            )
        path = example.path(example.profile).resolve()
        default_name = example.name
    else:
        path = _resolve(base, entry["path"], source, f"{where}.path")
        default_name = path.name.split(".")[0]
    holdout = (
        _resolve(base, entry["holdout"], source, f"{where}.holdout") if "holdout" in entry else None
    )
    name = entry.get("name", default_name)
    if not isinstance(name, str) or not name or "/" in name or name.startswith("."):
        raise _fail(source, f"{where}.name: {name!r} is not a usable folder name")
    return Workload(name, path, holdout, *_simulation(base, entry, where, source))


def _card(base: Path, value: Any, source: Path, where: str) -> str:
    """A card name as given; a config file path resolved against the spec's folder."""
    if not isinstance(value, str) or not value:
        raise _fail(source, f"{where}: expected a card name or a gpgpusim.config path")
    if value.endswith(".config") or os.sep in value:
        return str(_resolve(base, value, source, where))
    return value


def _simulation(
    base: Path, entry: dict[str, Any], where: str, source: Path
) -> tuple[tuple[str, ...] | None, str | None, dict[str, str], float]:
    """A workload's ``program``, ``card``, ``sim_options`` and ``sim_timeout``, checked."""
    program = entry.get("program")
    if program is not None:
        if (
            not isinstance(program, list)
            or not program
            or not all(isinstance(a, str) and a for a in program)
        ):
            raise _fail(source, f"{where}.program: expected a list of strings (the command)")
        first = program[0]
        if os.sep in first:  # a path: relative to the spec; a bare name is looked up on PATH
            first = str(_resolve(base, first, source, f"{where}.program[0]"))
        program = (first, *program[1:])
    card = _card(base, entry["card"], source, f"{where}.card") if "card" in entry else None
    raw = entry.get("sim_options", {})
    if not isinstance(raw, dict) or not all(
        isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in raw.values()
    ):
        raise _fail(source, f"{where}.sim_options: expected a table of option = value")
    from hilsim.simmodel.gpgpusim.cards import normalize_options

    try:
        options = normalize_options(raw)
    except HilsimError as exc:
        raise _fail(source, f"{where}.sim_options: {exc}") from exc
    timeout = entry.get("sim_timeout", SIM_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise _fail(source, f"{where}.sim_timeout: expected seconds > 0, got {timeout!r}")
    return program, card, options, float(timeout)


def _method(entry: Any, index: int, source: Path) -> MethodGrid:
    from hilsim.analyzer import methods

    where = f"methods[{index}]"
    if not isinstance(entry, dict):
        raise _fail(source, f"{where}: expected a table")
    _unknown(source, where, entry, _METHOD_KEYS)
    name = entry.get("name")
    if name not in methods.available():
        raise _fail(
            source,
            f"{where}.name: unknown method {name!r} (known: {', '.join(methods.available())})",
        )
    params = entry.get("params", {})
    if not isinstance(params, dict):
        raise _fail(source, f"{where}.params: expected a table of parameters")
    axes = {k: v for k, v in params.items() if isinstance(v, list)}
    if any(not v for v in axes.values()):
        raise _fail(source, f"{where}.params: an empty list gives no grid point")
    fixed = {k: v for k, v in params.items() if k not in axes}
    grid = MethodGrid(name, fixed, axes)
    if "seed" in params:
        raise _fail(source, f"{where}.params: set seeds with the top-level 'seeds', not params")
    for _, point in grid.settings():
        try:
            methods.create(name, **point)
        except HilsimError as exc:
            raise _fail(source, f"{where}: {exc}") from exc
        except (TypeError, ValueError) as exc:
            raise _fail(source, f"{where}: parameters {point}: {exc}") from exc
    return grid


def parse_spec(data: dict[str, Any], source: Path, base: Path | None = None) -> SweepSpec:
    """Validate a spec's tables; one-line :class:`HilsimError` naming the key on a problem."""
    base = base if base is not None else source.parent
    _unknown(source, "spec", data, _SPEC_KEYS)
    seeds_value = data.get("seeds", 10)
    if isinstance(seeds_value, int) and not isinstance(seeds_value, bool) and seeds_value >= 1:
        seeds = list(range(seeds_value))
    elif (
        isinstance(seeds_value, list)
        and seeds_value
        and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds_value)
    ):
        seeds = sorted(set(seeds_value))
    else:
        raise _fail(source, f"seeds: expected a count >= 1 or a list of seeds, got {seeds_value!r}")
    simulate = data.get("simulate", False)
    if not isinstance(simulate, bool):
        raise _fail(source, f"simulate: expected true or false, got {simulate!r}")
    cards = data.get("cards", [])
    if not isinstance(cards, list):
        raise _fail(source, "cards: expected a list of card names or config paths")
    cards = [_card(base, c, source, f"cards[{i}]") for i, c in enumerate(cards)]
    workloads_raw = data.get("workloads")
    if not isinstance(workloads_raw, list) or not workloads_raw:
        raise _fail(source, "workloads: expected at least one [[workloads]] table")
    methods_raw = data.get("methods")
    if not isinstance(methods_raw, list) or not methods_raw:
        raise _fail(source, "methods: expected at least one [[methods]] table")
    workloads = [_workload(base, w, i, source) for i, w in enumerate(workloads_raw)]
    names = [w.name for w in workloads]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise _fail(source, f"workloads: name(s) {', '.join(dup)} used twice (set 'name')")
    grids = [_method(m, i, source) for i, m in enumerate(methods_raw)]
    for i, workload in enumerate(workloads if simulate else []):
        if workload.program is None:
            raise _fail(
                source,
                f"workloads[{i}]: simulate = true needs 'program' (the command that runs "
                "the workload on the simulated card)",
            )
        if workload.card is None and not cards:
            raise _fail(
                source,
                f"workloads[{i}]: simulate = true needs 'card' (or the top-level 'cards')",
            )
    return SweepSpec(workloads, grids, seeds, simulate, list(cards), source)


def load_spec(path: str | Path) -> SweepSpec:
    """Read a TOML sweep spec (paths in it are relative to its folder)."""
    source = Path(path)
    try:
        data = tomllib.loads(source.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise HilsimError(f"{source}: no such sweep spec") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise HilsimError(f"{source}: cannot read ({exc})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise HilsimError(f"{source}: not valid TOML ({exc})") from exc
    return parse_spec(data, source)


# ----------------------------------------------------------------------------- digests


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def input_digest(path: Path, cache: dict[str, Any] | None = None) -> str:
    """sha256 identifying a profile's contents.

    A bundle folder: the digest of its ``manifest.json`` (which holds the sha256 of every
    table). A profile file: the file's sha256, remembered in ``cache`` under its path,
    size and modification time so a rerun does not hash it again.
    """
    if path.is_dir():
        manifest = path / "manifest.json"
        if not manifest.is_file():
            raise HilsimError(f"{path}: not a hilsim bundle (no manifest.json)")
        return _file_sha256(manifest)
    stat = path.stat()
    stamp = f"{stat.st_size}:{stat.st_mtime_ns}"
    hit = (cache or {}).get(str(path))
    if hit and hit.get("stamp") == stamp:
        return str(hit["sha256"])
    digest = _file_sha256(path)
    if cache is not None:
        cache[str(path)] = {"stamp": stamp, "sha256": digest}
    return digest


# ----------------------------------------------------------------------------- tasks


@dataclass(frozen=True)
class Task:
    """One (workload, method, params, seed[, card]) run; what a worker receives."""

    key: str
    workload: str
    path: str
    holdout: str | None
    workload_digest: str
    holdout_digest: str | None
    method: str
    label: str
    params: dict[str, Any]
    seed: int
    card: str | None = None
    program: tuple[str, ...] | None = None
    sim_options: dict[str, str] | None = None
    sim_timeout: float = SIM_TIMEOUT
    sim_dir: str | None = None  # set by run_sweep: OUTPUT/sim/<key>

    def row(self) -> dict[str, Any]:
        """The row's input columns (results are added by :func:`run_task`)."""
        return {
            "task_key": self.key,
            "workload": self.workload,
            "workload_path": self.path,
            "workload_digest": self.workload_digest,
            "holdout_digest": self.holdout_digest,
            "method": self.method,
            "label": self.label,
            "params": json.dumps(self.params, sort_keys=True),
            "seed": self.seed,
            "card": self.card,
        }


def task_key(
    workload_digest: str,
    holdout_digest: str | None,
    method: str,
    params: dict[str, Any],
    seed: int,
    card: str | None,
    simulation: dict[str, Any] | None = None,
) -> str:
    """sha256 over a task's inputs: what makes two tasks the same.

    ``simulation`` (a simulating task's program, its digest and the card's overrides)
    is part of the key only when given, so keys of sweeps that do not simulate stay
    what they were.
    """
    inputs: list[Any] = [workload_digest, holdout_digest, method, params, seed, card]
    if simulation is not None:
        inputs.append(simulation)
    payload = json.dumps(inputs, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


def _simulation_inputs(workload: Workload, cache: dict[str, Any] | None) -> dict[str, Any]:
    """What a simulating task's result depends on beyond the plan: the command (and the
    sha256 of its program file, so a rebuilt binary makes new tasks) and the overrides."""
    assert workload.program is not None
    first = Path(workload.program[0])
    return {
        "program": list(workload.program),
        "program_sha256": input_digest(first, cache) if first.is_file() else None,
        "sim_options": dict(sorted(workload.sim_options.items())),
    }


def build_tasks(spec: SweepSpec, digest_cache: dict[str, Any] | None = None) -> list[Task]:
    """Every task of ``spec``, grouped by workload then method (deterministic methods once)."""
    from hilsim.analyzer import methods

    tasks: list[Task] = []
    for workload in spec.workloads:
        digest = input_digest(workload.path, digest_cache)
        hold = input_digest(workload.holdout, digest_cache) if workload.holdout else None
        cards: list[str | None] = [None]
        simulation = None
        if spec.simulate:
            cards = [workload.card] if workload.card else list(spec.cards)
            simulation = _simulation_inputs(workload, digest_cache)
        for grid in spec.methods:
            stochastic = methods.get(grid.name).stochastic
            for label, params in grid.settings():
                for seed in spec.seeds if stochastic else spec.seeds[:1]:
                    for card in cards:
                        tasks.append(
                            Task(
                                task_key(digest, hold, grid.name, params, seed, card,
                                         simulation),
                                workload.name,
                                str(workload.path),
                                str(workload.holdout) if workload.holdout else None,
                                digest,
                                hold,
                                grid.name,
                                label,
                                params,
                                seed,
                                card,
                                workload.program if card is not None else None,
                                workload.sim_options if card is not None else None,
                                workload.sim_timeout,
                            )
                        )
    return tasks


# ----------------------------------------------------------------------------- worker side

_WORKER_LOCK = threading.Lock()
_LOADED: dict[str, Any] = {}


def _load(path: str, digest: str) -> Any:
    """The profile at ``path``, read once per worker process (the last one is kept)."""
    from hilsim.analyzer.importers.profile import load_profile

    hit = _LOADED.get(digest)
    if hit is not None:
        return hit
    _LOADED.clear()  # one workload's bundles at a time: memory stays one profile
    bundle = load_profile(path)
    _LOADED[digest] = bundle
    return bundle


def _cache_for(digest: str) -> Any:
    from hilsim.analyzer.tablecache import TableCache

    key = f"cache:{digest}"
    if key not in _LOADED:
        _LOADED[key] = TableCache()
    return _LOADED[key]


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    if isinstance(exc, HilsimError):
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def run_task(task: Task) -> dict[str, Any]:
    """Plan and score one task on this worker; never raises (a failure is a row).

    Tasks in one worker process run one at a time (a lock): each holds the profile and
    its working arrays, so threads of one worker would only add memory.
    """
    import socket

    from hilsim.analyzer import methods
    from hilsim.analyzer.evaluate import score_plan

    from hilsim.core.bundle import hilsim_version

    row: dict[str, Any] = task.row()
    row.update(
        worker=f"{socket.gethostname()}:{os.getpid()}",
        hilsim_version=hilsim_version(),
        status="failed",
        message=None,
    )
    t_task = time.perf_counter()
    with _WORKER_LOCK:
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
            row["message"] = _one_line(exc)
    row["task_seconds"] = time.perf_counter() - t_task
    return row


def _simulate(task: Task, plan: Any, row: dict[str, Any]) -> None:
    """Run ``plan``'s launches on the task's card (``hilsim simulate``'s code) into
    ``task.sim_dir``; fill the row's ``sim_*`` columns. A failure raises one line naming
    the card (the plan's own columns stay filled)."""
    from hilsim.analyzer.simulate import simulate_plan

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
                              options=task.sim_options, timeout_s=task.sim_timeout)
        finally:
            row["sim_wall_seconds"] = time.perf_counter() - t0
    except (HilsimError, OSError) as exc:
        raise HilsimError(f"simulate on {task.card}: {_one_line(exc)}") from exc
    row.update(
        sim_launches=int(s["launches_simulated"]),
        sim_cycles=float(s["sampled_cycles"]),
        sim_estimate_cycles=float(s["estimate_cycles"]),
        sim_full_cycles=s["full_cycles"],
        sim_error=s["estimate_error"],
        sim_speedup=s["simulated_time_speedup"],
        sim_cpu_seconds=float(s["sim_cpu_s"]),
    )


def _load_holdout(task: Task) -> Any:
    from hilsim.analyzer.importers.profile import load_profile

    assert task.holdout is not None and task.holdout_digest is not None
    key = f"holdout:{task.holdout_digest}"
    if key not in _LOADED:
        _LOADED[key] = load_profile(task.holdout)
    return _LOADED[key]


# ----------------------------------------------------------------------------- results


def empty_results() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=object) for c in RESULT_COLUMNS})


def results_frame(rows: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """Rows as the typed results table (one row per task, :data:`RESULT_COLUMNS`)."""
    frame = pd.DataFrame(list(rows), columns=list(RESULT_COLUMNS))
    for column, dtype in RESULT_TYPES.items():
        if dtype != "object":
            frame[column] = pd.to_numeric(frame[column]).astype(dtype)
    return frame


def read_results(folder: Path) -> pd.DataFrame:
    """``results.parquet`` of an earlier run in ``folder`` (empty if none)."""
    path = folder / RESULTS
    if not path.is_file():
        return empty_results()
    try:
        frame = pd.read_parquet(path)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several kinds
        raise HilsimError(f"{path}: cannot read the earlier results ({exc})") from exc
    for column in SIM_COLUMNS:  # a table from before simulate: those columns empty
        if column not in frame.columns:
            frame[column] = pd.Series([None] * len(frame), dtype=RESULT_TYPES[column])
    missing = [c for c in RESULT_COLUMNS if c not in frame.columns]
    if missing:
        raise HilsimError(f"{path}: not a sweep results table (missing {', '.join(missing)})")
    return frame[list(RESULT_COLUMNS)]


def write_results(folder: Path, frame: pd.DataFrame) -> Path:
    """Write the results table atomically (sorted by task key: a stable order)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from hilsim.core.files import write_bytes_atomic

    frame = frame.sort_values("task_key", kind="stable").reset_index(drop=True)
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), buffer, compression="zstd")
    return write_bytes_atomic(folder / RESULTS, buffer.getvalue())


def summarize(results: pd.DataFrame, workload: str) -> dict[str, Any]:
    """One workload's rows as a ``compare`` result (same keys as
    :func:`hilsim.analyzer.compare.compare_methods` returns), one entry per grid point."""
    from hilsim.analyzer import methods
    from hilsim.analyzer.compare import MethodResult

    rows = results[results["workload"] == workload]
    summaries, skipped, notes = [], {}, []
    for label, group in rows.groupby("label", sort=True):
        # scored rows (a failed simulation keeps its plan's score), once per seed: the
        # score does not depend on the simulated card
        ok = group[(group["status"] == "ok") | group["error"].notna()]
        ok = ok.drop_duplicates("seed", keep="first")
        failed = group[group["status"] != "ok"]
        if ok.empty:
            skipped[str(label)] = str(failed["message"].iloc[0])
            continue
        if len(failed):
            notes.append(f"{label}: {len(failed)} of {len(group)} runs failed")
        name = str(group["method"].iloc[0])
        result = MethodResult(
            str(label),
            name,
            tuple(methods.get(name).needs),
            seeds=ok["seed"].astype(int).tolist(),
            errors=ok["error"].astype(float).tolist(),
            speedups=ok["speedup"].astype(float).tolist(),
            samples=ok["n_samples"].astype(int).tolist(),
            sampled_ns=ok["sampled_ns"].astype(float).tolist()
            if "sampled_ns" in ok
            else [float("nan")] * len(ok),
            plan_seconds=ok["plan_seconds"].astype(float).tolist(),
        )
        n_launches = int(ok["n_launches"].iloc[0]) if "n_launches" in ok else 0
        summaries.append(result.summary(n_launches))
    # rows that reduce the simulation first (compare's order), then "no reduction"
    summaries.sort(key=lambda s: (s["no_reduction"] is not None, s["mean_error"]))
    return {
        "workload": workload,
        "methods": summaries,
        "skipped": skipped,
        "holdout": bool(rows["holdout_digest"].notna().any()),
        "seeds": int(rows["seed"].nunique()) if len(rows) else 0,
        "workers_note": "; ".join(notes) or None,
    }


def sim_summary(results: pd.DataFrame) -> pd.DataFrame:
    """Simulating tasks per (workload, card, grid point): runs, failures, mean launches
    and cycles simulated, mean and max error of the simulated estimate against the full
    run's cycles, mean simulated-time speedup and the simulator's wall seconds in all."""
    rows = results[results["card"].notna()]
    out = []
    for (workload, card, label), group in rows.groupby(["workload", "card", "label"],
                                                       sort=True):
        ok = group[group["status"] == "ok"]
        errors = ok["sim_error"].astype(float)
        out.append({
            "workload": workload,
            "card": card,
            "label": label,
            "runs": len(group),
            "failed": int((group["status"] != "ok").sum()),
            "sim_launches": float(ok["sim_launches"].astype(float).mean()) if len(ok) else None,
            "sim_cycles": float(ok["sim_cycles"].astype(float).mean()) if len(ok) else None,
            "sim_error": float(errors.mean()) if errors.notna().any() else None,
            "sim_max_error": float(errors.max()) if errors.notna().any() else None,
            "profile_error": float(ok["error"].astype(float).mean()) if len(ok) else None,
            "sim_speedup": float(ok["sim_speedup"].astype(float).mean()) if len(ok) else None,
            "sim_wall_seconds": float(group["sim_wall_seconds"].astype(float).sum()),
            "first_failure": next(iter(group.loc[group["status"] != "ok", "message"]), None),
        })
    return pd.DataFrame(out)


# ----------------------------------------------------------------------------- the run


@dataclass
class SweepOutcome:
    """What a sweep did: rows run now, rows kept from before, where it ran."""

    results: pd.DataFrame
    ran: int
    failed: int
    skipped: int
    workers: int
    wall_seconds: float
    where: str


def _worker_bytes(spec: SweepSpec) -> int:
    """Memory one worker needs at its peak (compare's factor on the largest profile).

    A bundle's in-memory size is about 250 bytes per launch (``n_launches`` of its
    manifest; measured at 10M launches); a profile file is counted at its size on disk.
    """
    from hilsim.analyzer.compare import WORKER_BUNDLE_FACTOR

    largest = 0
    for workload in spec.workloads:
        size = 0
        for path in (workload.path, workload.holdout):
            if path is None:
                continue
            if path.is_dir():
                try:
                    manifest = json.loads((path / "manifest.json").read_text())
                    size += 250 * int(manifest.get("n_launches", 0))
                except (OSError, ValueError, TypeError):
                    size += sum(f.stat().st_size for f in path.iterdir() if f.is_file())
            else:
                size += path.stat().st_size
        largest = max(largest, size)
    return int(WORKER_BUNDLE_FACTOR * largest)


def local_workers(spec: SweepSpec, n_tasks: int, requested: int | None) -> tuple[int, str | None]:
    """Workers for the embedded cluster: cores (or ``requested``), capped by memory."""
    from hilsim.analyzer.compare import available_bytes, memory_capped_workers

    wanted = requested or min(max(n_tasks, 1), os.cpu_count() or 1)
    return memory_capped_workers(wanted, _worker_bytes(spec), available_bytes())


def run_sweep(
    spec: SweepSpec,
    output: Path,
    scheduler: str | None = None,
    workers: int | None = None,
    retry_failed: bool = False,
    on_event: Callable[[str, dict[str, Any] | int], None] | None = None,
    checkpoint_seconds: float = 5.0,
) -> SweepOutcome:
    """Run every task of ``spec`` not already in ``output/results.parquet``.

    ``scheduler`` (``tcp://HOST:PORT``) uses an existing Dask cluster; otherwise an
    embedded ``LocalCluster`` of :func:`local_workers` single-threaded worker processes
    on 127.0.0.1 runs the tasks. ``on_event("start", n)`` is called with the number of
    tasks to run, then ``on_event("row", row)`` per finished task.
    """
    output.mkdir(parents=True, exist_ok=True)
    digests_path = output / DIGESTS
    try:
        digest_cache = json.loads(digests_path.read_text()) if digests_path.is_file() else {}
    except (OSError, ValueError):
        digest_cache = {}
    tasks = build_tasks(spec, digest_cache)
    sim_root = output.resolve() / "sim"
    tasks = [
        dataclasses.replace(t, sim_dir=str(sim_root / t.key[:16])) if t.card is not None else t
        for t in tasks
    ]
    from hilsim.core.files import write_text_atomic

    write_text_atomic(digests_path, json.dumps(digest_cache, indent=1))
    previous = read_results(output)
    keys = {t.key for t in tasks}
    keep_status = {"ok", "failed"} if not retry_failed else {"ok"}
    kept = previous[previous["task_key"].isin(keys) & previous["status"].isin(keep_status)]
    done = set(kept["task_key"])
    todo = [t for t in tasks if t.key not in done]
    # rows of tasks outside this spec stay in the table (another spec shares the folder)
    others = previous[~previous["task_key"].isin(keys)]
    base_rows = pd.concat([others, kept], ignore_index=True) if len(others) else kept
    if on_event:
        on_event("start", len(todo))
    t_start = time.perf_counter()
    new_rows: list[dict[str, Any]] = []
    n_workers = 0
    where = "nothing to run"
    if todo:
        n_workers, where = _run_on_dask(
            todo,
            scheduler,
            workers,
            spec,
            output,
            base_rows,
            new_rows,
            on_event,
            checkpoint_seconds,
        )
    results = (
        results_frame(itertools.chain(base_rows.to_dict("records"), new_rows))
        if new_rows or len(base_rows)
        else empty_results()
    )
    write_results(output, results)
    failed = sum(1 for r in new_rows if r["status"] != "ok")
    return SweepOutcome(
        results=results,
        ran=len(new_rows),
        failed=failed,
        skipped=len(kept),
        workers=n_workers,
        wall_seconds=time.perf_counter() - t_start,
        where=where,
    )


def _run_on_dask(
    todo: list[Task],
    scheduler: str | None,
    workers: int | None,
    spec: SweepSpec,
    output: Path,
    base_rows: pd.DataFrame,
    new_rows: list[dict[str, Any]],
    on_event: Callable[[str, dict[str, Any] | int], None] | None,
    checkpoint_seconds: float,
) -> tuple[int, str]:
    try:
        from dask.distributed import Client, LocalCluster, as_completed
    except ImportError as exc:  # pragma: no cover - a dependency of hilsim
        raise HilsimError(f"sweep: dask.distributed is not installed ({exc})") from exc
    import logging

    logging.getLogger("distributed").setLevel(logging.ERROR)
    cluster = None
    try:
        if scheduler:
            try:
                client = Client(scheduler, timeout="20s")
            except (OSError, TimeoutError) as exc:
                raise HilsimError(
                    f"sweep: cannot reach the Dask scheduler {scheduler} ({exc})"
                ) from exc
            n_workers = len(client.scheduler_info(n_workers=-1).get("workers", {}))
            if n_workers == 0:
                client.wait_for_workers(1, timeout=60)
                n_workers = len(client.scheduler_info(n_workers=-1).get("workers", {}))
            where = f"Dask cluster {scheduler} ({n_workers} workers)"
        else:
            n_workers, note = local_workers(spec, len(todo), workers)
            cluster = LocalCluster(
                n_workers=n_workers,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                dashboard_address="127.0.0.1:0",
                memory_limit=0,
                silence_logs=logging.ERROR,
            )
            client = Client(cluster)
            where = f"embedded LocalCluster ({n_workers} workers)" + (f"; {note}" if note else "")
        with client:
            # earlier tasks first (priority): workers finish one workload's tasks before the
            # next one's, so each reads a profile about once
            futures = [
                client.submit(run_task, t, key=f"hilsim-sweep-{t.key}", priority=-i, pure=False)
                for i, t in enumerate(todo)
            ]
            by_key = {f.key: t for f, t in zip(futures, todo, strict=True)}
            last = time.perf_counter()
            for future in as_completed(futures):
                try:
                    row = future.result()
                except Exception as exc:  # noqa: BLE001 - a lost worker, not the task
                    task = by_key[future.key]
                    row = task.row()
                    row.update(status="failed", message=_one_line(exc))
                future.release()
                new_rows.append(row)
                if on_event:
                    on_event("row", row)
                if time.perf_counter() - last > checkpoint_seconds:
                    write_results(
                        output,
                        results_frame(itertools.chain(base_rows.to_dict("records"), new_rows)),
                    )
                    last = time.perf_counter()
    finally:
        if cluster is not None:
            cluster.close()
    return n_workers, where
