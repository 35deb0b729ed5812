"""CUPTI activity records written by ``hilsim agent profile --backend cupti``.

Format ``hilsim.cupti-records/1``: JSON Lines, written atomically (temporary file in
the same folder, then rename) by
:func:`~hilsim.formats.cupti_format.write_cupti_records`, the one writer the agent's
in-process backend (:mod:`hilsim.agent.cupti_launch`) uses. One JSON object per line:

* line 1, the header: ``{"schema": "hilsim.cupti-records/1", "kind": "header",
  "tool": {"name": "cupti-python", "version": ...}, "argv": [...], "pid": ...,
  "complete": bool, "reason": str | null, "counts": {...}}``. ``complete`` is false when
  the records were flushed by a signal handler (Ctrl-C, timeout) or after the workload
  raised/exited non-zero; ``reason`` says why.
* ``{"kind": "kernel", ...}``: one per ``CONCURRENT_KERNEL`` activity record, fields as
  cupti-python names them (``docs/formats.md``): ``name``, ``start``, ``end`` (ns, CUPTI
  clock), ``correlation_id``, ``device_id``, ``stream_id``, ``context_id``,
  ``grid_x/y/z``, ``block_x/y/z``, ``registers_per_thread``, ``static_shared_memory``,
  ``dynamic_shared_memory``. Missing fields are omitted or null.
* ``{"kind": "runtime", ...}``: the CUDA runtime/driver call that launched a kernel
  (``start``, ``end``, ``correlation_id``, ``thread_id``, ``process_id``); only calls
  whose ``correlation_id`` matches a kernel are kept.
* ``{"kind": "range", ...}``: an NVTX-like range (``name``, ``start``, ``end``,
  ``thread_id``, ``source`` = ``"annotate"`` for :func:`hilsim.agent.nvtx.annotate` /
  ``--nvtx-module`` ranges, ``"marker"`` for NVTX ranges CUPTI reported).

Region attribution is the Nsight Systems rule (:mod:`hilsim.formats.nsys_sqlite`):
a launch's region is the innermost range on the launching thread that encloses the
runtime call with the launch's correlation id; launches without such a call get none.
Kernel names are demangled with ``c++filt`` when it is installed (CUPTI reports mangled
names); otherwise they are kept as recorded and the manifest says so.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hilsim.core.bundle import Bundle, default_manifest
from hilsim.core.demangle import demangle
from hilsim.core.errors import HilsimError
from hilsim.core.inputs import open_input
from hilsim.core.jsonfile import parse_json_text
from hilsim.core.schema import normalize_launches, shown_value
from hilsim.formats.cupti_format import KINDS, SCHEMA
from hilsim.formats.nsys_sqlite import attribute_launches, nvtx_regions

FORMAT = "cupti-records"

# launches-table column <- kernel record field
_KERNEL_FIELDS: tuple[tuple[str, str], ...] = (
    ("grid_x", "grid_x"),
    ("grid_y", "grid_y"),
    ("grid_z", "grid_z"),
    ("block_x", "block_x"),
    ("block_y", "block_y"),
    ("block_z", "block_z"),
    ("regs", "registers_per_thread"),
    ("smem_static", "static_shared_memory"),
    ("smem_dynamic", "dynamic_shared_memory"),
    ("stream", "stream_id"),
    ("device", "device_id"),
    ("correlation_id", "correlation_id"),
)
_NVTX_PUSH_POP = 59
#: optional integer fields of any record: null or a number below 2^63, nothing else
_INTEGER_FIELDS: tuple[str, ...] = (
    *(field for _, field in _KERNEL_FIELDS),
    "thread_id",
    "process_id",
    "thread_ident",
)


def _lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) of each non-blank line. Read as bytes and decoded line by
    line, so an undecodable byte is reported on its own line (a text-mode reader decodes
    blocks ahead and would blame the line before)."""
    handle = open_input(path, "a CUPTI records file")  # regular files only
    with handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise HilsimError(
                    f"{path}: line {number}: not UTF-8 text (byte {exc.start} of the line)"
                ) from None
            if not line.strip():
                continue
            try:
                item = parse_json_text(line)
            except json.JSONDecodeError as exc:
                raise HilsimError(f"{path}: line {number}: not valid JSON ({exc.msg})") from exc
            except HilsimError as exc:  # an integer of too many digits
                raise HilsimError(f"{path}: line {number}: {exc}") from None
            except ValueError as exc:  # NaN, Infinity, a number past the largest float
                raise HilsimError(f"{path}: line {number}: not valid JSON ({exc})") from None
            except RecursionError as exc:
                raise HilsimError(f"{path}: line {number}: JSON nested too deeply") from exc
            if not isinstance(item, dict):
                raise HilsimError(f"{path}: line {number}: expected a JSON object")
            yield number, item


def read_cupti_records(
    path: str | Path,
) -> tuple[dict[str, Any], pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Read a records file: ``(header, kernels, runtime, ranges)`` as raw frames.

    Raises :class:`HilsimError` naming the file and line for a missing header, a wrong
    schema, an unknown kind, or a record without its required fields.
    """
    source = Path(path)
    header: dict[str, Any] | None = None
    rows: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
    for number, item in _lines(source):
        kind = item.get("kind")
        if header is None:
            if kind != "header" or item.get("schema") != SCHEMA:
                raise HilsimError(
                    f"{source}: line {number}: not a hilsim CUPTI records file "
                    f"(expected a header with schema {SCHEMA!r})"
                )
            for key, kind in (("device", dict), ("tool", dict)):
                if item.get(key) is not None and not isinstance(item[key], kind):
                    raise HilsimError(
                        f"{source}: line {number}: header's {key!r} must be a JSON object, "
                        f"got {shown_value(item[key])}"
                    )
            header = item
            continue
        if not isinstance(kind, str) or kind not in rows:
            raise HilsimError(
                f"{source}: line {number}: unknown record kind {shown_value(kind)}"
            )
        for key in _INTEGER_FIELDS:
            value = item.get(key)
            if value is not None and (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not abs(value) < 2**63
                or (isinstance(value, float) and not value.is_integer())  # 1.5
            ):
                raise HilsimError(
                    f"{source}: line {number}: {kind} record's {key!r} is not an integer "
                    f"below 2^63 (got {shown_value(value)})"
                )
        required = ("name", "start", "end") if kind != "runtime" else ("start", "end")
        for key in required:
            if item.get(key) is None:
                raise HilsimError(f"{source}: line {number}: {kind} record has no {key!r}")
        for key in ("start", "end"):
            value = item[key]
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not abs(value) < 2**63  # also refuses NaN
            ):
                raise HilsimError(
                    f"{source}: line {number}: {kind} record's {key!r} is not a number of ns "
                    f"below 2^63 (got {shown_value(value)})"
                )
        if item["end"] < item["start"]:
            raise HilsimError(f"{source}: line {number}: {kind} record ends before it starts")
        if kind == "kernel" and not isinstance(item["name"], str):
            raise HilsimError(f"{source}: line {number}: kernel record's 'name' is not text")
        rows[kind].append(item)
    if header is None:
        raise HilsimError(f"{source}: empty file (no header line)")
    frames = [pd.DataFrame(rows[kind]) for kind in KINDS]
    return header, frames[0], frames[1], frames[2]


def _launch_frame(kernels: pd.DataFrame, runtime: pd.DataFrame) -> pd.DataFrame:
    frame = pd.DataFrame(
        {
            "name": kernels["name"].astype(str),
            "start_ns": kernels["start"].astype(np.int64),
            "duration_ns": (kernels["end"] - kernels["start"]).astype(np.int64),
        }
    )
    for column, field_name in _KERNEL_FIELDS:
        if field_name in kernels.columns:
            frame[column] = pd.to_numeric(kernels[field_name], errors="coerce")
    frame["call_tid"] = frame["call_start"] = frame["call_end"] = np.nan
    if len(runtime) and "correlation_id" in frame.columns and "thread_id" in runtime.columns:
        calls = runtime.dropna(subset=["correlation_id"]).drop_duplicates(
            "correlation_id", keep="first"
        )
        calls = calls.set_index(calls["correlation_id"].astype(np.int64))
        corr = frame["correlation_id"].astype("Int64")
        frame["call_tid"] = corr.map(calls["thread_id"]).astype(float).to_numpy()
        frame["call_start"] = corr.map(calls["start"]).astype(float).to_numpy()
        frame["call_end"] = corr.map(calls["end"]).astype(float).to_numpy()
    return frame


def _range_threads(ranges: pd.DataFrame, runtime: pd.DataFrame) -> np.ndarray:
    """Thread of each range in the runtime records' numbering.

    Ranges carry the OS thread id (``thread_id``) and Python's ``threading.get_ident()``
    (``thread_ident``, pthread_self on Linux); whichever overlaps the thread ids CUPTI
    reported for the launching calls is used.
    """
    known = set()
    if "thread_id" in runtime.columns:
        known = set(pd.to_numeric(runtime["thread_id"], errors="coerce").dropna().astype(np.int64))
    best, best_hits = None, -1
    for column in ("thread_id", "thread_ident"):
        if column not in ranges.columns:
            continue
        values = pd.to_numeric(ranges[column], errors="coerce").fillna(-1).astype(np.int64)
        hits = int(values.isin(known).sum())
        if hits > best_hits:
            best, best_hits = values, hits
    if best is None:
        return np.zeros(len(ranges), dtype=np.int64)
    return best.to_numpy()


def bundle_from_cupti_records(path: str | Path) -> Bundle:
    """Import a records file as an in-memory :class:`~hilsim.core.bundle.Bundle`."""
    source = Path(path)
    header, kernels, runtime, ranges = read_cupti_records(source)
    if len(kernels) == 0:
        state = "complete" if header.get("complete", True) else "incomplete"
        raise HilsimError(
            f"{source}: no kernel launches recorded ({state} run"
            + (f": {header['reason']}" if header.get("reason") else "")
            + "); does the workload launch CUDA kernels?"
        )
    names, demangled = demangle(kernels["name"].astype(str).tolist())
    kernels = kernels.assign(name=names)
    frame = _launch_frame(kernels, runtime)
    regions: pd.DataFrame | None = None
    if len(ranges):
        nvtx = pd.DataFrame(
            {
                "start_ns": ranges["start"].astype(np.int64),
                "end_ns": ranges["end"].astype(np.int64),
                "event_type": _NVTX_PUSH_POP,
                "tid": _range_threads(ranges, runtime),
                "name": ranges["name"].astype(str),
            }
        ).sort_values(["start_ns", "end_ns"], ascending=[True, False], kind="stable")
        regions, kind, tid = nvtx_regions(nvtx.reset_index(drop=True))
        frame["region"] = attribute_launches(frame, regions, kind, tid)
    launches = normalize_launches(
        frame.drop(columns=["call_tid", "call_start", "call_end"]), str(source)
    )
    tool = header.get("tool") if isinstance(header.get("tool"), dict) else {}
    profiler = {
        "name": "cupti",
        "version": tool.get("version"),
        "format": FORMAT,
        "file": source.name,
        "names_demangled": demangled,
    }
    manifest = default_manifest(
        device=header.get("device") or {},
        profilers=[profiler],
        complete=bool(header.get("complete", True)),
        source={
            "files": [str(source)],
            "format": FORMAT,
            "records": {"kernel": len(kernels), "runtime": len(runtime), "range": len(ranges)},
            "reason_incomplete": header.get("reason"),
            "launches_with_region": int(launches["region"].notna().sum()),
        },
    )
    unclosed = header.get("unclosed_ranges")
    if header.get("complete", True) and isinstance(unclosed, int) and unclosed > 0:
        manifest["warnings"] = [
            *manifest.get("warnings", []),
            f"{source.name}: {unclosed} NVTX range(s) never ended although the run "
            "completed (no marker END matched their START); they close at the stop time "
            "and every later launch nests inside them",
        ]
    return Bundle(launches=launches, regions=regions, manifest=manifest)


__all__ = ["bundle_from_cupti_records", "read_cupti_records"]
