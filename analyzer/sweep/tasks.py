"""Sweep tasks: one per (workload, method, grid point, seed[, card]), each keyed by the
sha256 of its inputs so a rerun skips what is done.

A profile's inputs are its contents: a bundle folder's ``manifest.json`` (which lists the
sha256 of every table) or a profile file's own sha256.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hilsim.analyzer import methods
from hilsim.analyzer.sweep.spec import SIM_TIMEOUT, SweepSpec, Workload

from hilsim.core.errors import HilsimError
from hilsim.core.inputs import input_kind, open_input


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open_input(path, "a profile file or bundle manifest") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def content_sha256(path: Path, cache: dict[str, Any] | None = None) -> str:
    """sha256 identifying the contents of a bundle folder or a file (profile or program).

    A bundle folder: the digest of its ``manifest.json`` (which holds the sha256 of every
    table). A file: its sha256, remembered in ``cache`` under its path,
    size and modification time so a rerun does not hash it again.
    """
    if input_kind(path, "a bundle folder or a profile file") == "folder":
        manifest = path / "manifest.json"
        if not manifest.exists():
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
    sim_dir: str | None = None  # set by the runner: OUTPUT/sim/<key>

    def row(self) -> dict[str, Any]:
        """The row's input columns (results are added by
        :func:`hilsim.analyzer.sweep.worker.run_task`)."""
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
    workload: str | None = None,
    entry: int | None = None,
) -> str:
    """sha256 over a task's inputs: what makes two tasks the same.

    ``workload`` (its name in the spec) and ``entry`` (the index of its ``[[methods]]``
    table) are part of the key: two workloads whose profiles have the same bytes, or two
    identical method tables, are different tasks whose rows must not collapse into one
    (one Dask key, one row). ``simulation`` (a simulating task's program, its digest and
    the card's overrides) is part of the key only when given.
    """
    inputs: list[Any] = [workload_digest, holdout_digest, method, params, seed, card]
    if simulation is not None:
        inputs.append(simulation)
    if workload is not None or entry is not None:
        inputs.append({"workload": workload, "entry": entry})
    payload = json.dumps(inputs, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


def _simulation_inputs(workload: Workload, cache: dict[str, Any] | None) -> dict[str, Any]:
    """What a simulating task's result depends on beyond the plan: the command (and the
    sha256 of its program file, so a rebuilt binary makes new tasks) and the overrides."""
    assert workload.program is not None
    first = Path(workload.program[0])
    return {
        "program": list(workload.program),
        "program_sha256": content_sha256(first, cache) if first.is_file() else None,
        "sim_options": dict(sorted(workload.sim_options.items())),
    }


def _labels(spec: SweepSpec) -> list[list[str]]:
    """Each method table's grid labels, made unique across tables (see build_tasks)."""
    seen: set[str] = set()
    out = []
    for entry, grid in enumerate(spec.methods):
        labels = []
        for label, _ in grid.settings():
            labels.append(label if label not in seen else f"{label} #{entry}")
            seen.add(label)
        out.append(labels)
    return out


def build_tasks(spec: SweepSpec, digest_cache: dict[str, Any] | None = None) -> list[Task]:
    """Every task of ``spec``, grouped by workload then method (deterministic methods once).

    A grid point that two ``[[methods]]`` tables both give keeps its label in the first
    and gets `` #N`` (N, the table's index) in the others, so summaries keep them apart.
    """
    tasks: list[Task] = []
    labels = _labels(spec)
    for workload in spec.workloads:
        digest = content_sha256(workload.path, digest_cache)
        hold = content_sha256(workload.holdout, digest_cache) if workload.holdout else None
        cards: list[str | None] = [None]
        simulation = None
        if spec.simulate:
            cards = [workload.card] if workload.card else list(spec.cards)
            simulation = _simulation_inputs(workload, digest_cache)
        for entry, grid in enumerate(spec.methods):
            stochastic = methods.get(grid.name).stochastic
            for point, (_, params) in enumerate(grid.settings()):
                label = labels[entry][point]
                for seed in spec.seeds if stochastic else spec.seeds[:1]:
                    for card in cards:
                        tasks.append(
                            Task(
                                task_key(digest, hold, grid.name, params, seed, card,
                                         simulation, workload.name, entry),
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
