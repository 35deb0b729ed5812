"""Import the CSV output of ``nsys stats --format csv`` (NVIDIA Nsight Systems).

Two per-launch reports are understood:

* ``cuda_gpu_trace`` (called ``gputrace`` before Nsight Systems 2021.x): one row per
  GPU operation, ``Start (ns)``, ``Duration (ns)``, ``CorrId`` (``CorrID`` in some
  versions), ``GrdX..GrdZ``, ``BlkX..BlkZ``, ``Reg/Trd``, ``StcSMem (MB)``,
  ``DymSMem (MB)`` (``StcSMem``/``DymSMem`` without a unit in older versions),
  ``Bytes (MB)``, ``Throughput (MB/s)`` (``Throughput (MBps)`` in older versions),
  ``SrcMemKd``, ``DstMemKd``, ``Device``, ``Ctx``, ``GreenCtx`` (2024+), ``Strm``,
  ``Name``. Memcpy/memset rows (``[CUDA memcpy Host-to-Device]``, ``[CUDA memset]``,
  no grid) are mixed in; they are dropped and counted in
  ``frame.attrs["dropped_non_kernel_rows"]``. The ``cuda_gpu_trace:nvtx-name``
  variant (kernel names prefixed with their NVTX range) has the same columns and is
  read the same way; the prefixed name is kept as the kernel name.
* ``cuda_kern_exec_trace`` (``kernexectrace`` before 2021.x): ``API Start (ns)``,
  ``API Dur (ns)``, ``Queue Start (ns)``, ``Queue Dur (ns)``, ``Kernel Start (ns)``,
  ``Kernel Dur (ns)``, ``Total Dur (ns)``, ``PID``, ``TID``, ``DevId``,
  ``API Function``, ``GridXYZ``, ``BlockXYZ`` (space-separated triples),
  ``Kernel Name``. This is the layout the STEM+ROOT artifact reads.

Times are converted to ns from the unit in the header (``ns``, ``us``, ``ms``,
``s``). Sizes in ``MB`` are taken as 10**6 bytes: in real ``cuda_gpu_trace``
output a 4,194,304-byte copy reads ``Bytes (MB) 4.194``. nsys prints MB with three
decimals, so shared-memory sizes below 500 bytes read as 0 (a limit of the format).
Numbers may carry locale grouping inside quotes (``"1,234"``).

``nsys stats`` may print lines before the CSV header (``Generating SQLite file
...``, ``Processing [...] with [...]...``, ``NOTICE: ...``, blank lines); everything
before the first line that is a known header is skipped.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import numpy as np
import pandas as pd

from analyzer.errors import HilsimError
from analyzer.schema import normalize_launches

GPU_TRACE = "cuda_gpu_trace"
KERN_EXEC_TRACE = "cuda_kern_exec_trace"

# How many leading lines are searched for the header (nsys preambles are short).
_MAX_PREAMBLE_LINES = 200

_UNIT_RE = re.compile(r"^(?P<base>.*?)\s*\((?P<unit>[^()]*)\)\s*$")

_TIME_UNITS: dict[str, float] = {
    "ns": 1.0,
    "us": 1e3,
    "µs": 1e3,
    "μs": 1e3,
    "usec": 1e3,
    "ms": 1e6,
    "msec": 1e6,
    "s": 1e9,
    "sec": 1e9,
}
_SIZE_UNITS: dict[str, float] = {
    "b": 1.0,
    "byte": 1.0,
    "bytes": 1.0,
    "kb": 1e3,
    "mb": 1e6,
    "gb": 1e9,
    "kib": 1024.0,
    "mib": 1024.0**2,
    "gib": 1024.0**3,
}

# header base name (lower case, unit removed) -> (schema column, kind)
_GPU_TRACE_COLUMNS: dict[str, tuple[str, str]] = {
    "start": ("start_ns", "time"),
    "duration": ("duration_ns", "time"),
    "corrid": ("correlation_id", "int"),
    "grdx": ("grid_x", "int"),
    "grdy": ("grid_y", "int"),
    "grdz": ("grid_z", "int"),
    "blkx": ("block_x", "int"),
    "blky": ("block_y", "int"),
    "blkz": ("block_z", "int"),
    "reg/trd": ("regs", "int"),
    "stcsmem": ("smem_static", "size"),
    "dymsmem": ("smem_dynamic", "size"),
    "strm": ("stream", "int"),
    "device": ("device", "device"),
    "name": ("name", "text"),
}
_KERN_EXEC_COLUMNS: dict[str, tuple[str, str]] = {
    "kernel start": ("start_ns", "time"),
    "kernel dur": ("duration_ns", "time"),
    "devid": ("device", "device"),
    "gridxyz": ("grid", "triple"),
    "blockxyz": ("block", "triple"),
    "kernel name": ("name", "text"),
}
_REQUIRED = ("start_ns", "duration_ns", "name")


def split_header_name(column: str) -> tuple[str, str | None]:
    """``"Start (ns)"`` -> ``("start", "ns")``; ``"Name"`` -> ``("name", None)``."""
    text = column.strip().lstrip("\ufeff")
    match = _UNIT_RE.match(text)
    if match:
        return match.group("base").strip().lower(), match.group("unit").strip()
    return text.lower(), None


def classify_header(fields: list[str]) -> str | None:
    """Which ``nsys stats`` report a CSV header row belongs to, or ``None``.

    Returns :data:`GPU_TRACE` or :data:`KERN_EXEC_TRACE`.
    """
    bases = {split_header_name(f)[0] for f in fields}
    if {"kernel start", "kernel dur", "kernel name"} <= bases:
        return KERN_EXEC_TRACE
    if {"start", "duration", "name"} <= bases and ({"grdx", "corrid"} & bases):
        return GPU_TRACE
    return None


def _find_header(lines: list[str]) -> tuple[int, str] | None:
    """(0-based line index, report) of the first header line among ``lines``."""
    for index, line in enumerate(lines[:_MAX_PREAMBLE_LINES]):
        if "," not in line:
            continue
        try:
            fields = next(csv.reader([line]))
        except csv.Error:
            continue
        report = classify_header(fields)
        if report is not None:
            return index, report
    return None


def _unit_factor(path: Path, column: str, unit: str | None, kind: str) -> float:
    if unit is None:
        # unit-less headers of old versions: times in ns, sizes in bytes
        return 1.0
    table = _TIME_UNITS if kind == "time" else _SIZE_UNITS
    key = unit if kind == "time" else unit.lower()
    if key not in table:
        raise HilsimError(f"{path}: column '{column}': unknown unit '{unit}'")
    return table[key]


def _numbers(
    path: Path,
    values: pd.Series,
    column: str,
    line_numbers: np.ndarray,
    required: bool,
) -> pd.Series:
    """Parse a column of text cells to float (NaN for empty), naming the bad line."""
    text = values.fillna("").astype(str).str.strip()
    if text.str.contains(",", regex=False).any():
        text = text.str.replace(",", "", regex=False)
    numbers = pd.to_numeric(text, errors="coerce")
    empty = (text == "").to_numpy()
    bad = numbers.isna().to_numpy() & ~empty
    if required:
        bad |= empty
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        got = values.iloc[row]
        what = "empty" if empty[row] else f"not a number: {got!r}"
        raise HilsimError(f"{path}: line {int(line_numbers[row])}: column '{column}' is {what}")
    return numbers.astype(float)


def _device_numbers(values: pd.Series) -> pd.Series:
    """``"NVIDIA A100 (0)"`` -> 0, ``"3"`` -> 3; anything else -> NaN."""
    text = values.fillna("").astype(str).str.strip()
    digits = text.str.extract(r"(?:^|\()\s*(\d+)\s*\)?\s*$", expand=False)
    return pd.to_numeric(digits, errors="coerce")


def _triples(path: Path, values: pd.Series, column: str, line_numbers: np.ndarray) -> pd.DataFrame:
    """``"  4096 1 1"`` -> three float columns; naming the line of a malformed cell."""
    text = values.fillna("").astype(str).str.strip()
    parts = text.str.split(r"\s+", regex=True, expand=True)
    if parts.shape[1] < 3:
        parts = parts.reindex(columns=range(3))
    numbers = parts.iloc[:, :3].apply(pd.to_numeric, errors="coerce")
    bad = numbers.isna().any(axis=1).to_numpy() & (text != "").to_numpy()
    if parts.shape[1] > 3:
        bad |= parts.iloc[:, 3:].notna().any(axis=1).to_numpy()
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise HilsimError(
            f"{path}: line {int(line_numbers[row])}: column '{column}' is not three "
            f"space-separated integers: {values.iloc[row]!r}"
        )
    numbers.columns = ["x", "y", "z"]
    return numbers


def _read_text(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise HilsimError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    if not raw.strip():
        raise HilsimError(f"{path}: empty file: not an nsys stats CSV")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise HilsimError(
            f"{path}: not a text CSV (byte {exc.start} is not UTF-8): not an nsys stats CSV"
        ) from exc


def read_nsys_stats_csv(path: str | Path) -> pd.DataFrame:
    """Read ``nsys stats --format csv`` output (``cuda_gpu_trace`` or
    ``cuda_kern_exec_trace``, any Nsight Systems version from 2021 on) into a
    bundle-v1 launches table (:func:`analyzer.schema.normalize_launches`).

    ``frame.attrs`` gets ``nsys_report`` (which report was read) and
    ``dropped_non_kernel_rows`` (memcpy/memset rows of ``cuda_gpu_trace``).
    Raises :class:`HilsimError` (one line naming the file, and the 1-based line
    number or the column) for input that is not such a CSV, is truncated, has no
    kernel rows or holds a non-numeric value where a number belongs.
    """
    source = Path(path)
    text = _read_text(source)
    lines = text.splitlines()
    found = _find_header(lines)
    if found is None:
        first = next((ln.strip() for ln in lines if ln.strip()), "")
        raise HilsimError(
            f"{source}: not an nsys stats cuda_gpu_trace/cuda_kern_exec_trace CSV "
            f"(no header with Start/Duration/Name or Kernel Start/Kernel Dur/Kernel Name; "
            f"first line {first[:80]!r})"
        )
    header_index, report = found
    body = "\n".join(lines[header_index:])
    try:
        table = pd.read_csv(
            io.StringIO(body),
            dtype=str,
            keep_default_na=False,
            skip_blank_lines=False,
            engine="c",
        )
    except pd.errors.ParserError as exc:
        message = str(exc).strip().splitlines()[-1] if str(exc).strip() else "parse error"
        match = re.search(r"line (\d+)", message)
        if match:
            line_no = header_index + int(match.group(1))
            message = re.sub(r"\s*in line \d+", "", message)
            raise HilsimError(f"{source}: line {line_no}: malformed CSV row ({message})") from exc
        raise HilsimError(f"{source}: malformed CSV ({message})") from exc
    # 1-based file line number of each parsed row (one line per record)
    line_numbers = np.arange(len(table), dtype=np.int64) + header_index + 2
    blank = table.isna().all(axis=1).to_numpy() | (table.fillna("") == "").all(axis=1).to_numpy()
    if blank.any():
        table = table.loc[~blank].reset_index(drop=True)
        line_numbers = line_numbers[~blank]

    mapping = _GPU_TRACE_COLUMNS if report == GPU_TRACE else _KERN_EXEC_COLUMNS
    columns: dict[str, tuple[str, str, str | None]] = {}
    for column in table.columns:
        base, unit = split_header_name(str(column))
        if base in mapping and mapping[base][0] not in columns:
            target, kind = mapping[base]
            columns[target] = (str(column), kind, unit)
    missing = [c for c in _REQUIRED if c not in columns]
    if missing:
        raise HilsimError(f"{source}: {report} CSV lacks column(s) {', '.join(missing)}")

    # a row cut short (truncated file) leaves its last fields missing
    last_index = max((i for i, ln in enumerate(lines) if ln.strip()), default=header_index)
    if last_index > header_index:
        try:
            have = len(next(csv.reader([lines[last_index]])))
        except csv.Error:
            have = 0
        if have < table.shape[1]:
            raise HilsimError(
                f"{source}: line {last_index + 1}: truncated row "
                f"({have} of {table.shape[1]} fields)"
            )
    short = np.logical_or(
        table.isna().any(axis=1).to_numpy(),
        (table[columns["name"][0]].fillna("").astype(str).str.strip() == "").to_numpy(),
    )
    if short.any():
        row = int(np.flatnonzero(short)[0])
        raise HilsimError(
            f"{source}: line {int(line_numbers[row])}: row without "
            f"'{columns['name'][0]}' (truncated or malformed)"
        )

    name_column = columns["name"][0]
    dropped = 0
    if report == GPU_TRACE:
        grid_column = columns.get("grid_x", (None,))[0]
        names = table[name_column].astype(str).str.strip()
        if grid_column is not None:
            is_kernel = (table[grid_column].astype(str).str.strip() != "").to_numpy()
        else:
            is_kernel = ~names.str.startswith("[CUDA ").to_numpy()
        dropped = int((~is_kernel).sum())
        table = table.loc[is_kernel].reset_index(drop=True)
        line_numbers = line_numbers[is_kernel]
    if len(table) == 0:
        raise HilsimError(
            f"{source}: {report} CSV has a header but no kernel rows"
            + (f" ({dropped} memcpy/memset rows dropped)" if dropped else "")
        )

    out = pd.DataFrame(index=pd.RangeIndex(len(table)))
    for target, (column, kind, unit) in columns.items():
        values = table[column]
        if kind == "text":
            out[target] = values.astype(str).str.strip()
        elif kind == "device":
            out[target] = _device_numbers(values)
        elif kind == "triple":
            triple = _triples(source, values, column, line_numbers)
            for axis in ("x", "y", "z"):
                out[f"{target}_{axis}"] = triple[axis].to_numpy()
        else:
            required = target in ("start_ns", "duration_ns")
            numbers = _numbers(source, values, column, line_numbers, required)
            if kind in ("time", "size"):
                numbers = numbers * _unit_factor(source, column, unit, kind)
            out[target] = numbers.round()
    negative = (out["duration_ns"] < 0).to_numpy()
    if negative.any():
        row = int(np.flatnonzero(negative)[0])
        raise HilsimError(
            f"{source}: line {int(line_numbers[row])}: negative duration "
            f"{table[columns['duration_ns'][0]].iloc[row]!r}"
        )
    launches = normalize_launches(out, str(source))
    launches.attrs["nsys_report"] = report
    launches.attrs["dropped_non_kernel_rows"] = dropped
    return launches
