"""Running a sweep: the tasks of a spec not already in ``results.parquet``, on an embedded
``LocalCluster`` or an existing Dask cluster, with the table rewritten as rows come in.
``dask.distributed`` is imported when a sweep runs."""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from hilsim.analyzer.compare import WORKER_BUNDLE_FACTOR, available_bytes, memory_capped_workers
from hilsim.analyzer.sweep.results import empty_results, read_results, results_frame, write_results
from hilsim.analyzer.sweep.spec import SweepSpec
from hilsim.analyzer.sweep.tasks import Task, build_tasks
from hilsim.analyzer.sweep.worker import one_line, run_task

from hilsim.core.errors import HilsimError
from hilsim.core.files import folder_lock, write_text_atomic
from hilsim.core.inputs import read_input_text

#: the digest cache of profile files (path, size, mtime -> sha256) in the output folder
DIGESTS = ".digests.json"


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


def _read_digests(path: Path) -> dict[str, Any]:
    """The digest cache of an earlier run: ``{path: {"stamp": str, "sha256": str}}``.

    It is this command's own cache, so anything else in its place (damaged JSON, a list,
    entries of other types) is dropped and the digests are computed again; a path that is
    not a regular file is refused (:mod:`hilsim.core.inputs`).
    """
    if not os.path.lexists(path):
        return {}
    try:
        data = json.loads(read_input_text(path, "the sweep's digest cache (JSON)"))
    except (ValueError, RecursionError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {
        str(key): entry
        for key, entry in data.items()
        if isinstance(entry, dict)
        and isinstance(entry.get("stamp"), str)
        and isinstance(entry.get("sha256"), str)
    }


def parse_scheduler(address: str) -> str:
    """``address`` if it names a Dask scheduler this command can reach: ``tcp://HOST:PORT``
    (or ``tls://HOST:PORT`` with TLS configured in Dask's configuration); else one line.

    ``inproc://`` (a scheduler in this very process) and ``ucx://`` (the optional UCX
    transport) are refused: a sweep's command line never has the one, and hilsim does not
    ship the other.
    """
    scheme, sep, rest = address.partition("://")
    if not sep or scheme not in ("tcp", "tls"):
        raise HilsimError(
            f"--scheduler {address!r}: expected tcp://HOST:PORT (or tls://HOST:PORT with TLS "
            "configured in Dask's configuration)"
        )
    host, colon, port = rest.rpartition(":")
    if host.startswith("[") != host.endswith("]"):
        host = ""
    if not colon or not host.strip("[]") or not port.isascii() or not port.isdigit() or not (
        0 < int(port) < 65536
    ):
        raise HilsimError(
            f"--scheduler {address!r}: expected {scheme}://HOST:PORT with a port in 1-65535"
        )
    return address


def _worker_bytes(spec: SweepSpec) -> int:
    """Memory one worker needs at its peak (compare's factor on the largest profile).

    A bundle's in-memory size is about 250 bytes per launch (``n_launches`` of its
    manifest; measured at 10M launches); a profile file is counted at its size on disk.
    """
    largest = 0
    for workload in spec.workloads:
        size = 0
        for path in (workload.path, workload.holdout):
            if path is None:
                continue
            if path.is_dir():
                try:
                    manifest = json.loads(read_input_text(path / "manifest.json"))
                    size += 250 * int(manifest.get("n_launches", 0))
                except (HilsimError, OSError, ValueError, TypeError, AttributeError, OverflowError):
                    size += sum(f.stat().st_size for f in path.iterdir() if f.is_file())
            else:
                size += path.stat().st_size
        largest = max(largest, size)
    return int(WORKER_BUNDLE_FACTOR * largest)


def local_workers(spec: SweepSpec, n_tasks: int, requested: int | None) -> tuple[int, str | None]:
    """Workers for the embedded cluster: cores (or ``requested``), capped by memory."""
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
    tasks to run, then ``on_event("row", row)`` per finished task. The folder is locked
    (:func:`hilsim.core.files.folder_lock`): a second sweep into it refuses at once.
    """
    with folder_lock(output, "sweep"):  # (re-entrant: the command holds it already)
        return _run_locked(spec, output, scheduler, workers, retry_failed, on_event,
                           checkpoint_seconds)


def _run_locked(
    spec: SweepSpec,
    output: Path,
    scheduler: str | None,
    workers: int | None,
    retry_failed: bool,
    on_event: Callable[[str, dict[str, Any] | int], None] | None,
    checkpoint_seconds: float,
) -> SweepOutcome:
    digests_path = output / DIGESTS
    digest_cache = _read_digests(digests_path)
    tasks = build_tasks(spec, digest_cache)
    sim_root = output.resolve() / "sim"
    tasks = [
        dataclasses.replace(t, sim_dir=str(sim_root / t.key[:16])) if t.card is not None else t
        for t in tasks
    ]
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
    logging.getLogger("distributed").setLevel(logging.ERROR)
    cluster = None
    try:
        if scheduler:
            try:
                client = Client(parse_scheduler(scheduler), timeout="20s")
            except HilsimError:
                raise
            except Exception as exc:  # noqa: BLE001 - refused, timed out, TLS not configured
                raise HilsimError(
                    f"sweep: cannot reach the Dask scheduler {scheduler} "
                    f"({type(exc).__name__}: {exc})"
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
                    row.update(status="failed", message=one_line(exc))
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
