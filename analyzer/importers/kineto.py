"""PyTorch profiler (Kineto) Chrome-trace importer: launches, regions, counters, device.

Reads the JSON trace that ``torch.profiler`` / libkineto writes (``.json`` or gzip'd
``.json.gz``; the top level is an object with ``traceEvents``). Facts the code relies on,
checked against real traces (see ``tests/data/kineto/README.md``):

* **Times.** ``ts`` and ``dur`` are always microseconds. Traces written with nanosecond
  resolution (``"displayTimeUnit": "ns"``, e.g. the V100 HTA trace) still use microseconds,
  with three decimals (``"ts": 1712195495505582.988``); ``displayTimeUnit`` is only a viewer
  hint. A float64 holds epoch microseconds (~1.7e15) to 0.25 us only, so ``json.loads``'s
  default float parsing would lose up to 125 ns per timestamp; numbers are parsed as
  :class:`~decimal.Decimal` and converted exactly to int64 nanoseconds (round half even).
* **Kernels** are ``"ph": "X"`` events with ``cat`` ``"kernel"`` (older ``"Kernel"``).
  ``args``: ``device``, ``stream``, ``correlation``, ``registers per thread``, ``grid``
  and ``block`` ``[x, y, z]``, ``shared memory``. Kineto writes ``shared memory`` as
  ``staticSharedMemory + dynamicSharedMemory`` of the CUPTI kernel record (bytes per block):
  the split is lost, so the total goes to ``smem_static`` and ``smem_dynamic`` stays null
  (``launches.attrs["smem_static_is_total"]`` says so).
* **Copies.** ``gpu_memcpy`` / ``gpu_memset`` (older ``Memcpy`` / ``Memset``) events are
  not kernels: dropped and counted in ``launches.attrs``.
* **Regions.** ``gpu_user_annotation`` events are GPU-side ranges (``record_function`` /
  profiler steps projected onto the kernels they launched), one lane per ``pid`` (device)
  and ``tid`` (stream). Nesting is by containment in a lane (sorted by start, longest first;
  a range partially overlapping the open one closes it and becomes a sibling); ``depth`` 0
  is outermost and ``path`` joins the names with ``/``. A kernel's ``region`` is the path of
  the deepest range on its device whose ``[start, end]`` contains the kernel's
  ``[start, end]`` (ties at equal depth prefer the kernel's own stream). Without GPU
  ranges, the CPU-side ``user_annotation`` ranges are used instead: the kernel's
  ``correlation`` is the id of its ``ac2g`` flow and equals the ``correlation`` of the
  launching ``cuda_runtime`` / ``cuda_driver`` event, whose thread and time pick the
  deepest annotation on that thread containing the launch call.
* **CUPTI range profiler.** With ``experimental_config(profiler_metrics=[...],
  profiler_measure_per_kernel=True)`` Kineto writes one ``cuda_profiler_range`` event per
  kernel (``name`` = kernel name, ``"__missing__"`` when CUPTI had none; ``args`` = counter
  name -> value, e.g. ``smsp__sass_thread_inst_executed_op_ffma_pred_on.sum``) and *no*
  ``kernel`` events. Their ``ts``/``dur`` are placeholders: the profiled span cut into equal
  slices (every ``dur`` equal), not measured kernel times. Such a trace yields launches built
  from the ranges (``launches.attrs["durations_measured"] = False``) and ``metrics`` from
  their args. As Holistic Trace Analysis does, the ranges are paired in order with the
  ``cudaLaunchKernel``-like runtime calls when the counts agree, which gives each launch a
  ``correlation_id`` and a CPU ``user_annotation`` region. When a trace has both kernel
  events and ranges, the ranges are joined to the kernels in start order; the counts must
  agree and so must the names (``"__missing__"`` matches anything), else a one-line
  :class:`~analyzer.errors.HilsimError`.

Every failure (unreadable or truncated gzip, not JSON, no ``traceEvents``, no kernels, file
larger than ``max_bytes``) is one ``HilsimError`` line naming the file.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections import Counter
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analyzer.bundle import Bundle, default_manifest
from analyzer.errors import HilsimError
from analyzer.schema import REGION_COLUMNS, normalize_launches

FORMAT = "kineto-json"
PROFILER_NAME = "pytorch-profiler (kineto)"
MAX_TRACE_BYTES = 2 * 1024**3
"""Default limit on the (decompressed) trace size; larger files are refused."""

KERNEL_CATS = frozenset({"kernel", "Kernel"})
COPY_CATS = {
    "gpu_memcpy": "n_gpu_memcpy",
    "Memcpy": "n_gpu_memcpy",
    "gpu_memset": "n_gpu_memset",
    "Memset": "n_gpu_memset",
}
GPU_ANNOTATION_CAT = "gpu_user_annotation"
CPU_ANNOTATION_CAT = "user_annotation"
RANGE_CAT = "cuda_profiler_range"
LAUNCH_API_CATS = frozenset({"cuda_runtime", "cuda_driver"})
MISSING_RANGE_NAME = "__missing__"
REGION_MODES = ("auto", "gpu", "cpu", "none")

_GZIP_MAGIC = b"\x1f\x8b"
_DEVICE_KEYS = {
    "id": "id",
    "totalGlobalMem": "memory_bytes",
    "numSms": "sm_count",
    "maxThreadsPerBlock": "max_threads_per_block",
    "maxThreadsPerMultiprocessor": "max_threads_per_sm",
    "regsPerBlock": "regs_per_block",
    "regsPerMultiprocessor": "regs_per_sm",
    "warpSize": "warp_size",
    "sharedMemPerBlock": "smem_per_block",
    "sharedMemPerMultiprocessor": "smem_per_sm",
    "sharedMemPerBlockOptin": "smem_per_block_optin",
}


@dataclass
class KinetoProfile:
    """What a Kineto trace holds, as bundle-v1 tables.

    Attributes:
        launches: bundle-v1 launches table (:func:`~analyzer.schema.normalize_launches`);
            ``attrs`` carries import counts and caveats (``n_gpu_memcpy``,
            ``n_gpu_memset``, ``dropped_non_kernel_rows``, ``launch_source``,
            ``durations_measured``, ``smem_static_is_total``, ``region_source``).
        regions: annotation ranges with exactly :data:`~analyzer.schema.REGION_COLUMNS`,
            or ``None`` when the trace has none (or ``regions="none"``).
        metrics: ``launch_id`` + one float64 column per CUPTI range-profiler counter
            (named as Kineto names them), or ``None`` without ``cuda_profiler_range``.
        device: the kernels' device from ``deviceProperties`` (``name``,
            ``compute_capability`` like ``"7.0"``, ``sm_count``, ``memory_bytes``, ...).
        meta: the trace's top-level fields except ``traceEvents`` / ``deviceProperties``
            (``schemaVersion``, ``traceName``, ``displayTimeUnit``, ...).
    """

    launches: pd.DataFrame
    regions: pd.DataFrame | None = None
    metrics: pd.DataFrame | None = None
    device: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)


# ----------------------------------------------------------------------------- reading


def _load_json(path: Path, max_bytes: int) -> dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            magic = handle.read(2)
            handle.seek(0)
            if magic == _GZIP_MAGIC:
                with gzip.GzipFile(fileobj=handle) as stream:
                    raw = stream.read(max_bytes + 1)
            else:
                raw = handle.read(max_bytes + 1)
    except EOFError as exc:
        raise HilsimError(f"{path}: truncated gzip file (stream ended early: {exc})") from exc
    except (gzip.BadGzipFile, zlib.error) as exc:
        raise HilsimError(f"{path}: corrupt gzip file ({exc})") from exc
    except OSError as exc:
        raise HilsimError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    if len(raw) > max_bytes:
        raise HilsimError(
            f"{path}: trace larger than {max_bytes} bytes (decompressed); refusing to load it "
            "(raise max_bytes to read it anyway)"
        )
    if not raw.strip():
        raise HilsimError(f"{path}: empty file: not a Kineto trace")
    try:
        data = json.loads(raw, parse_float=Decimal)
    except json.JSONDecodeError as exc:
        raise HilsimError(
            f"{path}: not a Kineto trace: invalid JSON at line {exc.lineno} column "
            f"{exc.colno} ({exc.msg})"
        ) from exc
    except (UnicodeDecodeError, RecursionError, ValueError) as exc:
        raise HilsimError(f"{path}: not a Kineto trace: not readable JSON ({exc})") from exc
    if not isinstance(data, dict) or "traceEvents" not in data:
        what = "an object without" if isinstance(data, dict) else f"a JSON {type(data).__name__}"
        raise HilsimError(
            f"{path}: not a Kineto trace: {what} a 'traceEvents' key "
            "(expected the PyTorch profiler's Chrome trace JSON)"
        )
    if not isinstance(data["traceEvents"], list):
        raise HilsimError(f"{path}: 'traceEvents' is not a list of events")
    return data


def _ns(value: Any) -> int | None:
    """Microseconds (int, Decimal or float) -> int nanoseconds, exactly for int/Decimal."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value * 1000
    if isinstance(value, Decimal):
        try:
            return int((value * 1000).to_integral_value(rounding=ROUND_HALF_EVEN))
        except (InvalidOperation, OverflowError, ValueError):
            return None
    if isinstance(value, float) and np.isfinite(value):
        return round(value * 1000)
    return None


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, Decimal | float):
        try:
            return int(round(value))
        except (InvalidOperation, OverflowError, ValueError):
            return None
    return None


def _float(value: Any) -> float:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float | Decimal):
        return float(value)
    return np.nan


def _plain(value: Any) -> Any:
    """Decimals -> float, recursively (for meta / device dicts that end up in JSON)."""
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _triple(value: Any) -> tuple[int | None, int | None, int | None]:
    if isinstance(value, list) and len(value) == 3:
        x, y, z = (_int(v) for v in value)
        return x, y, z
    return None, None, None


def _int_array(values: list[int | None]) -> pd.arrays.IntegerArray:
    return pd.array(values, dtype="Int64")


@dataclass
class _Events:
    """The events of interest, sorted into per-category lists in one pass."""

    kernels: list[dict[str, Any]] = field(default_factory=list)
    ranges: list[dict[str, Any]] = field(default_factory=list)
    gpu_annotations: list[dict[str, Any]] = field(default_factory=list)
    cpu_annotations: list[dict[str, Any]] = field(default_factory=list)
    launch_calls: list[dict[str, Any]] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)
    categories: Counter = field(default_factory=Counter)


def _scan(events: list[Any]) -> _Events:
    out = _Events()
    for event in events:
        if not isinstance(event, dict) or event.get("ph") != "X":
            continue
        cat = event.get("cat")
        out.categories[cat] += 1
        if cat in KERNEL_CATS:
            out.kernels.append(event)
        elif cat in COPY_CATS:
            out.counts[COPY_CATS[cat]] += 1
        elif cat == GPU_ANNOTATION_CAT:
            out.gpu_annotations.append(event)
        elif cat == CPU_ANNOTATION_CAT:
            out.cpu_annotations.append(event)
        elif cat in LAUNCH_API_CATS:
            out.launch_calls.append(event)
        elif cat == RANGE_CAT:
            out.ranges.append(event)
    return out


def _span(path: Path, event: dict[str, Any], what: str) -> tuple[int, int]:
    start, dur = _ns(event.get("ts")), _ns(event.get("dur"))
    if start is None or dur is None:
        raise HilsimError(
            f"{path}: {what} {str(event.get('name', '?'))[:80]!r} has no numeric ts/dur "
            f"(ts={event.get('ts')!r}, dur={event.get('dur')!r})"
        )
    return start, dur


# ----------------------------------------------------------------------------- tables


def _kernel_frame(path: Path, kernels: list[dict[str, Any]]) -> pd.DataFrame:
    n = len(kernels)
    names: list[str] = []
    start = np.empty(n, dtype=np.int64)
    dur = np.empty(n, dtype=np.int64)
    ints: dict[str, list[int | None]] = {
        c: []
        for c in (
            "device",
            "stream",
            "correlation_id",
            "regs",
            "smem_static",
            "grid_x",
            "grid_y",
            "grid_z",
            "block_x",
            "block_y",
            "block_z",
            "pid",
            "tid",
        )
    }
    for i, event in enumerate(kernels):
        args = event.get("args") if isinstance(event.get("args"), dict) else {}
        names.append(str(event.get("name", "")))
        start[i], dur[i] = _span(path, event, "kernel")
        device = _int(args.get("device"))
        ints["device"].append(device if device is not None else _int(event.get("pid")))
        stream = _int(args.get("stream"))
        ints["stream"].append(stream if stream is not None else _int(event.get("tid")))
        ints["correlation_id"].append(_int(args.get("correlation")))
        ints["regs"].append(_int(args.get("registers per thread")))
        ints["smem_static"].append(_int(args.get("shared memory")))
        for prefix, key in (("grid", "grid"), ("block", "block")):
            x, y, z = _triple(args.get(key))
            ints[f"{prefix}_x"].append(x)
            ints[f"{prefix}_y"].append(y)
            ints[f"{prefix}_z"].append(z)
        ints["pid"].append(_int(event.get("pid")))
        ints["tid"].append(_int(event.get("tid")))
    frame = pd.DataFrame({"name": names, "start_ns": start, "duration_ns": dur})
    for column, values in ints.items():
        frame[column] = _int_array(values)
    return frame


def _range_frame(path: Path, ranges: list[dict[str, Any]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Launch rows and counter columns from ``cuda_profiler_range`` events (input order)."""
    n = len(ranges)
    names: list[str] = []
    start = np.empty(n, dtype=np.int64)
    dur = np.empty(n, dtype=np.int64)
    device: list[int | None] = []
    counters: dict[str, np.ndarray] = {}
    for i, event in enumerate(ranges):
        names.append(str(event.get("name", MISSING_RANGE_NAME)))
        start[i], dur[i] = _span(path, event, "cuda_profiler_range")
        device.append(_int(event.get("pid")))
        args = event.get("args") if isinstance(event.get("args"), dict) else {}
        for key, value in args.items():
            if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
                continue
            column = counters.get(key)
            if column is None:
                column = counters[key] = np.full(n, np.nan)
            column[i] = float(value)
    frame = pd.DataFrame({"name": names, "start_ns": start, "duration_ns": dur})
    frame["device"] = _int_array(device)
    return frame, pd.DataFrame(counters, index=pd.RangeIndex(n))


def _lane_codes(*keys: list[Any]) -> list[np.ndarray]:
    """Factorize lane keys (pid, tid may be int or str) jointly across several lists."""
    joined = [str(k) for ks in keys for k in ks]
    codes, _ = pd.factorize(pd.Index(joined, dtype=object))
    out, offset = [], 0
    for ks in keys:
        out.append(codes[offset : offset + len(ks)].astype(np.int64))
        offset += len(ks)
    return out


def _nest(path: Path, annotations: list[dict[str, Any]], what: str) -> pd.DataFrame:
    """Regions table (plus ``lane`` and ``pid``/``tid``) with depth/path by containment."""
    rows = []
    for event in annotations:
        start, dur = _span(path, event, what)
        rows.append(
            (str(event.get("name", "")), start, start + dur, event.get("pid"), event.get("tid"))
        )
    frame = pd.DataFrame(rows, columns=["name", "start_ns", "end_ns", "pid", "tid"])
    frame["lane_key"] = [f"{p!s}\x00{t!s}" for p, t in zip(frame["pid"], frame["tid"], strict=True)]
    frame = frame.sort_values(
        ["lane_key", "start_ns", "end_ns"], ascending=[True, True, False], kind="stable"
    ).reset_index(drop=True)
    depth = np.zeros(len(frame), dtype=np.int64)
    paths: list[str] = []
    stack: list[tuple[int, str]] = []  # (end_ns, path) of the open ranges of this lane
    lane = None
    for i, (key, name, end) in enumerate(
        zip(frame["lane_key"], frame["name"], frame["end_ns"].to_numpy(), strict=True)
    ):
        if key != lane:
            lane, stack = key, []
        while stack and stack[-1][0] < end:  # open range does not contain this one
            stack.pop()
        depth[i] = len(stack)
        full = f"{stack[-1][1]}/{name}" if stack else name
        paths.append(full)
        stack.append((int(end), full))
    frame["depth"] = depth
    frame["path"] = paths
    frame = frame.sort_values(["start_ns", "depth"], kind="stable").reset_index(drop=True)
    frame["region_id"] = np.arange(len(frame), dtype=np.int64)
    return frame


def _innermost(
    point_lane: np.ndarray,
    point_start: np.ndarray,
    point_end: np.ndarray,
    point_pref: np.ndarray,
    reg_lane: np.ndarray,
    reg_pref: np.ndarray,
    regions: pd.DataFrame,
) -> np.ndarray:
    """Index of the deepest region containing each point interval (-1 if none).

    A point matches regions whose ``reg_lane`` equals its ``point_lane``; among regions of
    equal depth, one whose ``reg_pref`` equals ``point_pref`` wins (e.g. the same stream).
    Vectorised per (region sub-lane, depth) group with ``searchsorted``: within a group the
    ranges do not nest, so the candidate is the last one starting at or before the point.
    """
    best = np.full(len(point_lane), -1, dtype=np.int64)
    best_depth = np.full(len(point_lane), -1, dtype=np.int64)
    if len(regions) == 0 or len(point_lane) == 0:
        return best
    starts = regions["start_ns"].to_numpy(dtype=np.int64)
    ends = regions["end_ns"].to_numpy(dtype=np.int64)
    depths = regions["depth"].to_numpy(dtype=np.int64)
    groups = pd.DataFrame({"lane": reg_lane, "pref": reg_pref, "depth": depths})
    for (lane, pref, depth), index in groups.groupby(["lane", "pref", "depth"]).indices.items():
        members = index[np.argsort(starts[index], kind="stable")]
        sel = np.flatnonzero(point_lane == lane)
        if len(sel) == 0:
            continue
        pos = np.searchsorted(starts[members], point_start[sel], side="right") - 1
        candidate = members[np.maximum(pos, 0)]
        inside = (pos >= 0) & (point_end[sel] <= ends[candidate])
        better = (depth > best_depth[sel]) | (
            (depth == best_depth[sel]) & (point_pref[sel] == pref)
        )
        take = inside & better
        best[sel[take]] = candidate[take]
        best_depth[sel[take]] = depth
    return best


def _gpu_regions(
    path: Path, frame: pd.DataFrame, annotations: list[dict[str, Any]]
) -> tuple[pd.DataFrame, np.ndarray]:
    regions = _nest(path, annotations, GPU_ANNOTATION_CAT)
    reg_device = [str(_int(p)) for p in regions["pid"]]
    reg_stream = [str(_int(t)) for t in regions["tid"]]
    k_device = [str(v) for v in frame["device"].astype(object).fillna(-1)]
    k_stream = [str(v) for v in frame["stream"].astype(object).fillna(-1)]
    reg_lane, k_lane = _lane_codes(reg_device, k_device)
    reg_pref, k_pref = _lane_codes(reg_stream, k_stream)
    start = frame["start_ns"].to_numpy(dtype=np.int64)
    end = start + frame["duration_ns"].to_numpy(dtype=np.int64)
    index = _innermost(k_lane, start, end, k_pref, reg_lane, reg_pref, regions)
    return regions, index


def _cpu_regions(
    path: Path,
    frame: pd.DataFrame,
    annotations: list[dict[str, Any]],
    launch_calls: list[dict[str, Any]],
) -> tuple[pd.DataFrame, np.ndarray] | None:
    """Regions from CPU ``user_annotation`` via kernel correlation -> launching API call."""
    calls: dict[int, tuple[str, int, int]] = {}
    for event in launch_calls:
        args = event.get("args") if isinstance(event.get("args"), dict) else {}
        corr = _int(args.get("correlation"))
        start, dur = _ns(event.get("ts")), _ns(event.get("dur"))
        if corr is None or start is None or dur is None:
            continue
        calls[corr] = (f"{event.get('pid')!s}\x00{event.get('tid')!s}", start, start + dur)
    if not calls:
        return None
    regions = _nest(path, annotations, CPU_ANNOTATION_CAT)
    reg_keys = list(regions["lane_key"])
    found = [calls.get(c) if c is not None else None for c in frame["correlation_id"].tolist()]
    call_keys = [f[0] if f else "\x01none" for f in found]
    reg_lane, k_lane = _lane_codes(reg_keys, call_keys)
    k_start = np.fromiter((f[1] if f else -1 for f in found), dtype=np.int64, count=len(found))
    k_end = np.fromiter((f[2] if f else -1 for f in found), dtype=np.int64, count=len(found))
    zeros_k = np.zeros(len(found), dtype=np.int64)
    zeros_r = np.zeros(len(regions), dtype=np.int64)
    index = _innermost(k_lane, k_start, k_end, zeros_k, reg_lane, zeros_r, regions)
    index[np.asarray([f is None for f in found], dtype=bool)] = -1
    return regions, index


def _pair_ranges_with_launch_calls(frame: pd.DataFrame, launch_calls: list[dict[str, Any]]) -> bool:
    """Give range-built launches the correlation of the n-th kernel-launch API call."""
    launches = []
    for event in launch_calls:
        name = str(event.get("name", ""))
        if "Launch" not in name or "Kernel" not in name:
            continue
        args = event.get("args") if isinstance(event.get("args"), dict) else {}
        start = _ns(event.get("ts"))
        launches.append((start if start is not None else 0, _int(args.get("correlation"))))
    if len(launches) != len(frame) or not launches:
        return False
    launches.sort(key=lambda item: item[0])
    frame["correlation_id"] = _int_array([c for _, c in launches])
    return True


def _check_names(path: Path, kernel_names: pd.Series, range_names: pd.Series) -> None:
    k = kernel_names.astype(str).to_numpy()
    r = range_names.astype(str).to_numpy()
    bad = (k != r) & (r != MISSING_RANGE_NAME)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise HilsimError(
            f"{path}: cuda_profiler_range #{i} is for kernel {r[i][:80]!r} but kernel #{i} in "
            f"start order is {k[i][:80]!r}: counters cannot be joined to kernels"
        )


def _device(properties: Any, device_id: int | None) -> dict[str, Any]:
    if not isinstance(properties, list) or not properties:
        return {}
    chosen = next(
        (p for p in properties if isinstance(p, dict) and _int(p.get("id")) == device_id),
        properties[0] if isinstance(properties[0], dict) else {},
    )
    out: dict[str, Any] = {}
    if "name" in chosen:
        out["name"] = str(chosen["name"])
    major, minor = _int(chosen.get("computeMajor")), _int(chosen.get("computeMinor"))
    if major is not None and minor is not None:
        out["compute_capability"] = f"{major}.{minor}"
    for key, name in _DEVICE_KEYS.items():
        if key in chosen:
            out[name] = _plain(chosen[key])
    out["devices_in_trace"] = len(properties)
    return out


def read_kineto_trace(
    path: str | Path, regions: str = "auto", max_bytes: int = MAX_TRACE_BYTES
) -> KinetoProfile:
    """Read a PyTorch profiler (Kineto) trace into bundle-v1 tables (module doc for details).

    ``regions``: ``"auto"`` (GPU annotations if any, else CPU annotations linked by
    correlation), ``"gpu"``, ``"cpu"`` or ``"none"``. Files above ``max_bytes``
    (decompressed) are refused. Raises :class:`HilsimError` (one line naming the file).
    """
    source = Path(path)
    if regions not in REGION_MODES:
        raise HilsimError(f"regions must be one of {', '.join(REGION_MODES)}, got {regions!r}")
    data = _load_json(source, max_bytes)
    scan = _scan(data["traceEvents"])
    meta = {k: _plain(v) for k, v in data.items() if k not in ("traceEvents", "deviceProperties")}
    attrs: dict[str, Any] = {
        "n_gpu_memcpy": int(scan.counts["n_gpu_memcpy"]),
        "n_gpu_memset": int(scan.counts["n_gpu_memset"]),
        "n_cuda_profiler_range": len(scan.ranges),
    }
    attrs["dropped_non_kernel_rows"] = attrs["n_gpu_memcpy"] + attrs["n_gpu_memset"]

    metrics_frame: pd.DataFrame | None = None
    if scan.kernels:
        frame = _kernel_frame(source, scan.kernels)
        frame = frame.iloc[np.argsort(frame["start_ns"].to_numpy(), kind="stable")]
        frame = frame.reset_index(drop=True)
        attrs["launch_source"] = "kernel"
        attrs["durations_measured"] = True
        attrs["smem_static_is_total"] = True
        if scan.ranges:
            ranges, counters = _range_frame(source, scan.ranges)
            order = np.argsort(ranges["start_ns"].to_numpy(), kind="stable")
            if len(order) != len(frame):
                raise HilsimError(
                    f"{source}: {len(order)} cuda_profiler_range events but {len(frame)} "
                    "kernels: counters cannot be joined to kernels"
                )
            _check_names(source, frame["name"], ranges["name"].iloc[order])
            metrics_frame = counters.iloc[order].reset_index(drop=True)
    elif scan.ranges:
        frame, counters = _range_frame(source, scan.ranges)
        order = np.argsort(frame["start_ns"].to_numpy(), kind="stable")
        frame = frame.iloc[order].reset_index(drop=True)
        metrics_frame = counters.iloc[order].reset_index(drop=True)
        attrs["launch_source"] = RANGE_CAT
        attrs["durations_measured"] = False
        attrs["n_unnamed_ranges"] = int((frame["name"] == MISSING_RANGE_NAME).sum())
        attrs["ranges_paired_with_launch_calls"] = _pair_ranges_with_launch_calls(
            frame, scan.launch_calls
        )
    else:
        seen = ", ".join(f"{c}" for c, _ in scan.categories.most_common(6)) or "none"
        raise HilsimError(
            f"{source}: no GPU kernel events (cat 'kernel') in the Kineto trace "
            f"({len(data['traceEvents'])} events; categories seen: {seen}); "
            "was it recorded with ProfilerActivity.CUDA?"
        )

    region_table: pd.DataFrame | None = None
    region_index: np.ndarray | None = None
    region_source: str | None = None
    by_time = attrs["launch_source"] == "kernel"  # placeholder range times: no GPU overlap
    if regions in ("auto", "gpu") and scan.gpu_annotations and by_time:
        region_table, region_index = _gpu_regions(source, frame, scan.gpu_annotations)
        region_source = GPU_ANNOTATION_CAT
    elif regions in ("auto", "cpu") and scan.cpu_annotations and "correlation_id" in frame:
        found = _cpu_regions(source, frame, scan.cpu_annotations, scan.launch_calls)
        if found is not None:
            region_table, region_index = found
            region_source = CPU_ANNOTATION_CAT
    if region_table is not None and region_index is not None:
        paths = region_table["path"].to_numpy(dtype=object)
        labels = np.where(region_index >= 0, paths[np.maximum(region_index, 0)], None)
        frame["region"] = pd.Categorical(labels)
        region_table = region_table[list(REGION_COLUMNS)].copy()
        attrs["n_launches_in_region"] = int((region_index >= 0).sum())
    attrs["region_source"] = region_source

    launches = normalize_launches(frame.drop(columns=["pid", "tid"], errors="ignore"), str(source))
    launches.attrs.update(attrs)
    metrics: pd.DataFrame | None = None
    if metrics_frame is not None:
        metrics = pd.concat(
            [pd.DataFrame({"launch_id": launches["launch_id"].to_numpy()}), metrics_frame],
            axis=1,
        )
        metrics = metrics.astype({c: np.float64 for c in metrics_frame.columns})
    devices = launches["device"].dropna()
    device_id = int(devices.mode().iloc[0]) if len(devices) else None
    device = _device(data.get("deviceProperties"), device_id)
    return KinetoProfile(launches, region_table, metrics, device, meta)


def bundle_from_kineto(path: str | Path, regions: str = "auto") -> Bundle:
    """Import a Kineto trace as an in-memory :class:`~analyzer.bundle.Bundle`."""
    source = Path(path)
    profile = read_kineto_trace(source, regions=regions)
    attrs = profile.launches.attrs
    profiler: dict[str, Any] = {
        "name": PROFILER_NAME,
        "format": FORMAT,
        "file": source.name,
        "schema_version": profile.meta.get("schemaVersion"),
        "launch_source": attrs.get("launch_source"),
        "durations_measured": attrs.get("durations_measured"),
    }
    if profile.metrics is not None:
        profiler["counters"] = [c for c in profile.metrics.columns if c != "launch_id"]
    source_info: dict[str, Any] = {
        "files": [str(source)],
        "format": FORMAT,
        "dropped_non_kernel_rows": attrs.get("dropped_non_kernel_rows", 0),
        "region_source": attrs.get("region_source"),
    }
    for key in ("traceName", "displayTimeUnit"):
        if key in profile.meta:
            source_info[key] = profile.meta[key]
    manifest = default_manifest(device=profile.device, profilers=[profiler], source=source_info)
    return Bundle(
        launches=profile.launches,
        metrics=profile.metrics,
        regions=profile.regions,
        manifest=manifest,
    )
