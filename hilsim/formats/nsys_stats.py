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

Three readers give the same table, tried in this order. The columnar one
(:func:`read_arrow`) memory-maps the file and lets Arrow's multi-threaded CSV reader
convert only the columns the caller needs (integers straight to int64, names, devices
and triples as dictionaries, worked out once per distinct value); it vouches only for a
plain file (integer nanoseconds, every row well formed, UTF-8) and returns ``None`` for
anything else. The fast one (:func:`_read_fast`) takes the header
from the first lines of the file and lets pandas' C parser read only the columns used,
numbers straight to float64 and names, devices and triples as categoricals (their
parsing runs once per distinct value); a row cut short at the end of the file is found
from the last few KiB. It holds no copy of the file and no per-cell Python strings
(10M launches: well under 6 GB). Whatever it does not vouch for (a cell that is not a
number, a row with too few or too many fields, a negative duration, an encoding error,
...) sends the file to the exact reader (:func:`read_exact`), which holds the whole
text and every cell as a string and names the file, line and column of the problem.
"""

from __future__ import annotations

import codecs
import csv
import io
import mmap
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

from hilsim.core.bundle import Bundle, default_manifest
from hilsim.core.errors import HilsimError
from hilsim.core.schema import normalize_launches

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


_LINE_BREAK_RE = re.compile(r"\r\n|\r|\n")
_LINE_RE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def csv_lines(text: str, keepends: bool = False) -> list[str]:
    """The lines of ``text`` as a CSV parser breaks them: at ``\r\n``, ``\r`` or ``\n``
    only. (``str.splitlines`` also breaks at ``\v``, ``\f``, ``\x1c``-``\x1e``, ``\x85``,
    U+2028 and U+2029, which pandas and Arrow read as text of a cell.)"""
    if keepends:
        return _LINE_RE.findall(text)
    lines = _LINE_BREAK_RE.split(text)
    if lines and lines[-1] == "":
        lines.pop()  # (a last line break ends the last line, as splitlines reads it)
    return lines


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
    """``"NVIDIA A100 (0)"`` -> 0, ``"3"`` -> 3; anything else -> NaN. Floats, as every
    number column of the CSV readers (a device number past 2^53 rounds alike in each)."""
    text = values.fillna("").astype(str).str.strip()
    digits = text.str.extract(r"(?:^|\()\s*(\d+)\s*\)?\s*$", expand=False)
    return pd.to_numeric(digits, errors="coerce").astype(float)


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
    if not raw or raw.isspace():  # (raw.strip() would copy the file)
        raise HilsimError(f"{path}: empty file: not an nsys stats CSV")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise HilsimError(
            f"{path}: not a text CSV (byte {exc.start} is not UTF-8): not an nsys stats CSV"
        ) from exc


def read_nsys_stats_csv(path: str | Path, columns: Iterable[str] | None = None) -> pd.DataFrame:
    """Read ``nsys stats --format csv`` output (``cuda_gpu_trace`` or
    ``cuda_kern_exec_trace``, any Nsight Systems version from 2021 on) into a
    bundle-v1 launches table (:func:`hilsim.core.schema.normalize_launches`).

    ``columns``: the launch columns the caller reads (default: all); the columnar reader
    then converts only these plus what every table needs (:data:`ALWAYS_READ`: start,
    duration, name, and the columns that tell a repeated record apart); the others are
    null. ``frame.attrs`` gets ``nsys_report`` (which report was read) and
    ``dropped_non_kernel_rows`` (memcpy/memset rows of ``cuda_gpu_trace``).
    Raises :class:`HilsimError` (one line naming the file, and the 1-based line
    number or the column) for input that is not such a CSV, is truncated, has no
    kernel rows or holds a non-numeric value where a number belongs.
    """
    source = Path(path)
    parsed = read_arrow(source, columns)
    if parsed is None:
        parsed = _read_fast(source)
    if parsed is None:
        parsed = read_exact(source)
    out, report, dropped = parsed
    launches = normalize_launches(out, str(source))
    launches.attrs["nsys_report"] = report
    launches.attrs["dropped_non_kernel_rows"] = dropped
    return launches


def bundle_from_nsys_stats(
    path: str | Path, fmt: str, columns: Iterable[str] | None = None
) -> Bundle:
    """An in-memory bundle of an ``nsys stats`` CSV (:func:`read_nsys_stats_csv`), its
    manifest naming ``fmt`` (the format it was sniffed or named as)."""
    source = Path(path)
    launches = read_nsys_stats_csv(source, columns)
    manifest = csv_manifest(source, fmt, "nsys stats",
                            launches.attrs.get("dropped_non_kernel_rows"))
    return Bundle(launches=launches, manifest=manifest)


def bundle_from_gpu_trace(path: str | Path, columns: Iterable[str] | None = None) -> Bundle:
    """The ``nsys-gpu-trace-csv`` format's reader (:func:`bundle_from_nsys_stats`)."""
    return bundle_from_nsys_stats(path, "nsys-gpu-trace-csv", columns)


def bundle_from_kern_exec(path: str | Path, columns: Iterable[str] | None = None) -> Bundle:
    """The ``nsys-kern-exec-csv`` format's reader (:func:`bundle_from_nsys_stats`)."""
    return bundle_from_nsys_stats(path, "nsys-kern-exec-csv", columns)


def csv_manifest(path: Path, fmt: str, tool: str, dropped: int | None) -> dict[str, Any]:
    """The manifest of an ``nsys stats`` CSV import (in memory or streaming: the same
    facts)."""
    source: dict[str, Any] = {"files": [str(path)], "format": fmt}
    if dropped:
        source["dropped_non_kernel_rows"] = int(dropped)
    return default_manifest(
        profilers=[{"name": tool, "format": fmt, "file": path.name}], source=source
    )


# ----------------------------------------------------------------------------- columnar path

#: launch columns every read converts, whatever the caller asked for: the launch order
#: and identity (start, duration, name) and the columns that tell a kernel record from a
#: repeated one (:data:`hilsim.core.schema.DUPLICATE_KEY_COLUMNS`; ``stream`` is also the
#: overlap warning's stream count)
ALWAYS_READ: tuple[str, ...] = (
    "start_ns", "duration_ns", "name", "device", "stream", "correlation_id",
)
# Integers the float64 path of the other readers holds exactly: a column with a larger
# magnitude is left to them, so every reader gives the same table.
_EXACT_IN_FLOAT = 2**53
# Bytes per block of the columnar reader (each block is parsed by one thread).
_ARROW_BLOCK_BYTES = 1 << 22
# Bytes checked at a time for UTF-8 (a multiple of the page size).
_CHECK_BLOCK_BYTES = 1 << 24
_DEVICE_RE = re.compile(r"(?:^|\()\s*(\d+)\s*\)?\s*$", re.ASCII)
_DIGITS_RE = re.compile(r"[0-9]+", re.ASCII)
# ``0x`` inside names (``foo_0x1``) looked at before the file goes to the other readers
_MAX_HEX_CANDIDATES = 1000


def _is_utf8(path: Path) -> bool:
    """Whether the file is UTF-8 text, window by window of a read-only memory map (each
    window released once checked, so the file is never resident in this process): an
    all-ASCII window is one vectorised maximum, any other is decoded."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        with open(path, "rb") as handle:
            if os.fstat(handle.fileno()).st_size == 0:
                return True
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                data = np.frombuffer(mapped, dtype=np.uint8)
                for start in range(0, len(data), _CHECK_BLOCK_BYTES):
                    window = data[start : start + _CHECK_BLOCK_BYTES]
                    if int(window.max()) >= 0x80 or decoder.getstate()[0]:
                        decoder.decode(window.tobytes())
                    if hasattr(mapped, "madvise"):
                        mapped.madvise(mmap.MADV_DONTNEED, start, len(window))
                del data, window
            decoder.decode(b"", final=True)
    except (OSError, ValueError, UnicodeDecodeError):
        return False
    return True


def _may_hold_hex(path: Path) -> bool:
    """Whether a cell of the file may start with ``0x``/``0X``: Arrow reads such a cell as a
    hexadecimal integer (``0x10`` -> 16, ``0xFFFFFFFFFFFFFFFF`` -> -1) where the other
    readers refuse it as not a number. Each ``0x`` is found by ``mmap.find`` (no copy of
    the file); one not preceded by a letter, digit or ``_`` (a cell's start, after blanks or
    a quote) counts, as do more than :data:`_MAX_HEX_CANDIDATES` of any kind."""
    try:
        with open(path, "rb") as handle:
            if os.fstat(handle.fileno()).st_size == 0:
                return False
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                seen = 0
                for prefix in (b"0x", b"0X"):
                    at = mapped.find(prefix)
                    while at >= 0:
                        seen += 1
                        before = mapped[at - 1 : at] if at else b","
                        if seen > _MAX_HEX_CANDIDATES or not (before.isalnum() or before == b"_"):
                            return True
                        at = mapped.find(prefix, at + 2)
    except (OSError, ValueError):
        return True
    return False


def _dictionary_codes(column: pa.ChunkedArray) -> tuple[np.ndarray, list[str]]:
    """(int32 code per row, -1 for null; the distinct texts) of a dictionary column."""
    column = column.unify_dictionaries()
    values = column.chunk(0).dictionary if column.num_chunks else pa.array([], pa.string())
    if column.num_chunks == 1:
        indices = column.chunk(0).indices
    else:
        indices = pa.concat_arrays([chunk.indices for chunk in column.chunks])
    if indices.null_count:
        indices = indices.fill_null(-1)
    # (no nulls: a view of Arrow's buffer, no copy of N codes)
    codes = indices.to_numpy(zero_copy_only=False).astype(np.int32, copy=False)
    return codes, values.to_pylist()


def _int_column(column: pa.ChunkedArray) -> np.ndarray | pd.api.extensions.ExtensionArray:
    """int64 values, or a nullable ``Int64`` array when some cells were empty."""
    if column.null_count:
        mask = column.is_null().to_numpy(zero_copy_only=False)
        values = column.fill_null(0).to_numpy().astype(np.int64, copy=True)
        return pd.arrays.IntegerArray(values, mask)
    return column.to_numpy().astype(np.int64, copy=False)


def _fits_float(column: pa.ChunkedArray) -> bool:
    """Every value below 2^53 in magnitude (exactly a float64 of the other readers)."""
    if len(column) == column.null_count:
        return True
    low, high = pc.min_max(column).values()
    return low.as_py() > -_EXACT_IN_FLOAT and high.as_py() < _EXACT_IN_FLOAT


def _per_value(codes: np.ndarray, table: np.ndarray) -> np.ndarray:
    """``table[code]`` per row (``table``: a float per text, NaN for none), NaN where the
    code is -1; int64 when every row has a value below 2^53 in magnitude (what the float
    readers' column holds after the int64 check, without the float round trip). Larger
    values stay floats, as the other readers give them: the int64 check of
    :func:`normalize_launches` refuses those past 2^63 (a cast here would wrap them)."""
    exact = bool((np.abs(table) < _EXACT_IN_FLOAT).all())  # (NaN is not)
    if exact and (len(codes) == 0 or int(codes.min()) >= 0):
        if len(table) and (table == table[0]).all():  # one value (e.g. grid_y = 1)
            # a read-only view of one value: no N-long array is written (at 10M launches
            # each would be 80 MB of fresh pages)
            return np.broadcast_to(np.int64(table[0]), (len(codes),))
        return table.astype(np.int64)[codes]
    out = np.append(table.astype(np.float64), np.nan)
    return out[codes]


def _triple_values(texts: list[str]) -> np.ndarray | None:
    """(texts, 3) floats of "x y z" cells; ``None`` unless each is three ASCII integers."""
    out = np.empty((len(texts), 3), dtype=np.float64)
    for row, text in enumerate(texts):
        parts = text.split()
        if len(parts) != 3 or not all(_DIGITS_RE.fullmatch(part) for part in parts):
            return None
        out[row] = [float(part) for part in parts]
    return out


def _device_values(texts: list[str]) -> np.ndarray | None:
    """Device ordinal per text (``"NVIDIA A100 (0)"`` -> 0, ``"3"`` -> 3, else NaN) as
    :func:`_device_numbers` reads them; ``None`` for text that is not ASCII."""
    if not all(text.isascii() for text in texts):
        return None
    out = np.full(len(texts), np.nan)
    for row, text in enumerate(texts):
        found = _DEVICE_RE.search(text.strip())
        if found:
            out[row] = float(found.group(1))
    return out


def _arrow_types(
    layout: FastLayout, wanted: set[str]
) -> dict[str, tuple[str, str, pa.DataType]] | None:
    """Positional label -> (schema column, kind, Arrow type) of the columns to convert;
    ``None`` when one needs the float readers (a time or size in another unit)."""
    text = pa.dictionary(pa.int32(), pa.string())
    out: dict[str, tuple[str, str, pa.DataType]] = {}
    for target, (position, _column, kind, _unit) in layout.columns.items():
        needed = target in wanted or (kind == "triple" and any(
            f"{target}_{axis}" in wanted for axis in "xyz"))
        if layout.report == GPU_TRACE and target == "grid_x":
            needed = True  # tells kernel rows from memcpy/memset rows
        if not needed:
            continue
        if kind == "time" and layout.factors[target] != 1.0:
            return None
        kinds = {"time": pa.int64(), "int": pa.int64(), "size": pa.float64()}
        out[f"c{position}"] = (target, kind, kinds.get(kind, text))
    return out


def arrow_table(source: Path, layout: FastLayout, types: dict[str, pa.DataType]) -> pa.Table | None:
    """The body of ``source`` (from its header line on) parsed by Arrow's CSV reader, only
    the positional columns in ``types`` converted; ``None`` when Arrow refuses a row or a
    cell, the file is not UTF-8 or a cell may be hexadecimal (the other readers then word
    the problem).

    Arrow splits rows as pandas' C parser does (a quote opens a quoted value only at the
    start of a cell, ``""`` inside it is one quote, a quoted value may hold line breaks)
    with one difference: a quote still open at the end of the file ends the last value
    where pandas refuses the file. :func:`read_arrow` refuses that case (the last line's
    quotes or a name holding a line break) before it vouches for the table."""
    if not _is_utf8(source) or _may_hold_hex(source):
        return None
    # Blocks are cut where no quoted value is open (``newlines_in_values``): a cut at a line
    # break inside a quoted value would end that value there and read its remainder as a
    # row of its own (Arrow's line-break cuts do not see quotes), where the other readers
    # read one value holding a line break.
    try:
        with pa.OSFile(str(source)) as body:
            body.seek(layout.body_offset)
            return pa_csv.read_csv(
                body,
                read_options=pa_csv.ReadOptions(
                    column_names=[f"c{i}" for i in range(layout.n_fields)],
                    skip_rows=1,  # the header line
                    block_size=_ARROW_BLOCK_BYTES,
                ),
                parse_options=pa_csv.ParseOptions(newlines_in_values=True),
                convert_options=pa_csv.ConvertOptions(
                    include_columns=list(types),
                    column_types=types,
                    null_values=[""],
                    strings_can_be_null=False,
                    quoted_strings_can_be_null=True,
                ),
            )
    except (pa.ArrowException, OSError, ValueError):
        return None


def read_arrow(
    source: Path, columns: Iterable[str] | None = None
) -> tuple[pd.DataFrame, str, int] | None:
    """The launch columns of a plain file, read by Arrow's multi-threaded CSV reader.

    ``columns``: the schema columns wanted besides :data:`ALWAYS_READ` (``None``: all);
    the others are not converted. Returns what :func:`read_exact` returns, or ``None``
    when the file is anything but plain: not UTF-8, a row with another field count, a
    cell that is not an integer where integer nanoseconds belong, a time in another
    unit, a name that is blank, a value beyond 2^53, a negative duration, no kernel rows
    (the other readers then read it and word any error). Names, devices and "x y z"
    triples are worked out once per distinct text.
    """
    layout = fast_layout(source)
    if layout is None:
        return None
    every = {target for target, _kind in
             (*_GPU_TRACE_COLUMNS.values(), *_KERN_EXEC_COLUMNS.values())}
    wanted = set(ALWAYS_READ) | (every if columns is None else set(columns))
    if "grid_x" in wanted or "block_x" in wanted:
        wanted |= {"grid", "block"}
    plan = _arrow_types(layout, wanted)
    if plan is None:
        return None
    last = _last_line(source, layout.size)
    if last is None or last[1].count('"') % 2:
        return None  # a quote left open at the end (or a tail the other readers must read)
    table = arrow_table(source, layout, {label: kind for label, (_, _, kind) in plan.items()})
    if table is None or table.num_rows == 0 or not check_last_row(source, layout):
        return None

    dropped = 0
    kernel_rows: np.ndarray | None = None
    names_column = f"c{layout.columns['name'][0]}"
    name_codes, name_texts = _dictionary_codes(table.column(names_column))
    stripped = [text.strip() for text in name_texts]
    if (name_codes < 0).any() or any(not text or "\n" in text or "\r" in text
                                     for text in stripped):
        return None  # (a line break: a quoted name over lines, or a quote left open)
    if layout.report == GPU_TRACE:
        grid = layout.columns.get("grid_x")
        if grid is not None:
            is_kernel = table.column(f"c{grid[0]}").is_valid().to_numpy(zero_copy_only=False)
        else:
            copies = np.array([text.startswith("[CUDA ") for text in stripped], dtype=bool)
            is_kernel = ~copies[name_codes]
        dropped = int((~is_kernel).sum())
        if dropped:
            kernel_rows = is_kernel
    if dropped == table.num_rows:
        return None  # no kernel rows: the other readers word it

    def rows(values: Any) -> Any:
        return values if kernel_rows is None else values[kernel_rows]

    out: dict[str, Any] = {}
    for label, (target, kind, _arrow_type) in plan.items():
        column = table.column(label)
        if kind in ("time", "int"):
            if not _fits_float(column):
                return None
            out[target] = rows(_int_column(column))
        elif kind == "size":
            if pc.any(pc.is_nan(column)).as_py():
                return None  # "nan" is a cell the other readers refuse (empty is null)
            numbers = column.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
            out[target] = np.round(rows(numbers) * layout.factors[target])
        elif kind == "text":
            codes = rows(name_codes)
            used = np.unique(codes)
            categories, inverse = np.unique(
                np.array([stripped[i] for i in used], dtype=object), return_inverse=True
            )
            renumber = np.full(len(stripped), -1, dtype=np.int32)
            renumber[used] = inverse
            out[target] = pd.Categorical.from_codes(
                renumber[codes], categories=pd.Index(categories, dtype=object)
            )
        else:
            codes, texts = _dictionary_codes(column)
            codes = rows(codes)
            if kind == "device":
                devices = _device_values(texts)
                if devices is None:
                    return None
                out[target] = _per_value(codes, devices)
            else:
                triple = _triple_values(texts)
                if triple is None or (codes < 0).any():
                    return None
                for index, axis in enumerate("xyz"):
                    out[f"{target}_{axis}"] = _per_value(codes, triple[:, index])
    del table
    duration = out["duration_ns"]
    if isinstance(duration, pd.api.extensions.ExtensionArray) or (duration < 0).any():
        return None  # an empty or negative duration: the other readers name the line
    if isinstance(out["start_ns"], pd.api.extensions.ExtensionArray):
        return None
    frame = pd.DataFrame(out, index=pd.RangeIndex(len(duration)), copy=False)
    return frame, layout.report, dropped


# ----------------------------------------------------------------------------- fast path

# Bytes read from the start of the file for the header (and preamble): many times what
# a preamble takes; a file whose header lies further in is read by the exact path.
_HEAD_BYTES = 1 << 20
# Bytes read from the end of the file for its last line (doubled while that is not enough).
_TAIL_BYTES = 1 << 16
_MAX_TAIL_BYTES = 1 << 24


def _head(path: Path) -> tuple[list[str], list[int], int] | None:
    """Lines of the file's first bytes (as :func:`csv_lines` splits them), the byte
    offset where each starts plus where the last ends, and the file size.

    ``None`` when those bytes are not UTF-8 text or hold nothing but blanks (the exact
    path words the error).
    """
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            raw = handle.read(_HEAD_BYTES)
    except OSError:
        return None
    if len(raw) < size:  # whole lines only
        raw = raw[: raw.rfind(b"\n") + 1]
    bom = 3 if raw.startswith(b"\xef\xbb\xbf") else 0
    try:
        text = raw[bom:].decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not text or text.isspace():
        return None
    lines = csv_lines(text, keepends=True)
    offsets = [bom]
    for line in lines:
        offsets.append(offsets[-1] + len(line.encode("utf-8")))
    return lines, offsets, size


def _last_line(path: Path, size: int) -> tuple[int, str] | None:
    """(byte offset, text) of the last non-blank line, read from the end of the file.

    ``None`` when it cannot be told from the last :data:`_MAX_TAIL_BYTES` or the tail
    breaks lines on a lone ``\\r`` (line numbers would then need the exact path).
    """
    want = _TAIL_BYTES
    with open(path, "rb") as handle:
        while True:
            start = max(0, size - want)
            handle.seek(start)
            tail = handle.read(size - start)
            lines = tail.splitlines(keepends=True)
            # the first line of the tail may be the end of a longer one
            first_whole = 0 if start == 0 else 1
            offset = start + sum(len(line) for line in lines)
            for index in range(len(lines) - 1, first_whole - 1, -1):
                offset -= len(lines[index])
                if lines[index].strip():
                    text = lines[index]
                    if b"\r" in text.rstrip(b"\r\n") or (
                        b"\r" in text and not text.endswith((b"\r\n", b"\n"))
                    ):
                        return None
                    return offset, text.decode("utf-8", errors="replace")
            if start == 0 or want >= _MAX_TAIL_BYTES:
                return None
            want *= 4


def _line_number(path: Path, offset: int) -> int:
    """1-based line number of the line starting at byte ``offset``, lines broken as
    :func:`csv_lines` breaks them (``\n``, ``\r\n`` or a lone ``\r``)."""
    count = 0
    last = b""  # the byte before the block (a \r\n split across two blocks is one break)
    with open(path, "rb") as handle:
        remaining = offset
        while remaining > 0:
            block = handle.read(min(remaining, 1 << 24))
            if not block:
                break
            count += block.count(b"\n") + block.count(b"\r") - block.count(b"\r\n")
            if last == b"\r" and block.startswith(b"\n"):
                count -= 1
            last = block[-1:]
            remaining -= len(block)
    return count + 1


def _recode(categorical: pd.Categorical, values: np.ndarray) -> np.ndarray:
    """``values[code]`` per row of ``categorical`` (one entry per category), NaN for null."""
    codes = categorical.codes
    out = values[np.maximum(codes, 0)].astype(float)
    out[codes < 0] = np.nan
    return out


@dataclass
class FastLayout:
    """Where a file's CSV body starts and how its columns are read (the fast path's plan).

    Attributes:
        report: :data:`GPU_TRACE` or :data:`KERN_EXEC_TRACE`.
        header_index: 0-based line index of the header.
        header_line: the header line's text (with its line break).
        body_offset: byte offset of the header line.
        columns: schema column -> (position, header text, kind, unit).
        n_fields: number of header fields.
        factors: unit factor of each time/size column.
        dtypes: pandas dtype of each positional column ``c0..``.
        numeric: the positional columns read as float64.
        size: the file's size in bytes.
        loose: unused columns whose sampled cells are all numbers: read as float64 first
            (see :func:`fast_table`).
    """

    report: str
    header_index: int
    header_line: str
    body_offset: int
    columns: dict[str, tuple[int, str, str, str | None]]
    n_fields: int
    factors: dict[str, float]
    dtypes: dict[str, object]
    numeric: list[str]
    size: int
    loose: list[str] = field(default_factory=list)


_LOOSE_SAMPLE_ROWS = 256


def _number_columns(rows: list[str], n_fields: int) -> list[int]:
    """Positions whose cells in ``rows`` (CSV lines) are all numbers or empty, with at
    least one number; no positions when a row does not have ``n_fields`` fields."""
    try:
        parsed = list(csv.reader(line.rstrip("\r\n") for line in rows if line.strip()))
    except csv.Error:
        return []
    if not parsed or any(len(row) != n_fields for row in parsed):
        return []
    out = []
    for i in range(n_fields):
        cells = [row[i].strip().replace(",", "") for row in parsed]
        try:
            numbers = [float(cell) for cell in cells if cell]
        except ValueError:
            continue
        if numbers:
            out.append(i)
    return out


def fast_layout(source: Path) -> FastLayout | None:
    """The fast path's plan for ``source``, or ``None`` when only the exact path can read it
    (header not within the first MiB, not UTF-8, the name not the last column, ...)."""
    head = _head(source)
    if head is None:
        return None
    lines, offsets, size = head
    found = _find_header(lines)  # the same line the exact path finds, if among these
    if found is None:
        return None  # (or further in than the first bytes: the exact path searches)
    header_index, report = found
    try:
        fields = next(csv.reader([lines[header_index]]))
    except csv.Error:
        return None
    mapping = _GPU_TRACE_COLUMNS if report == GPU_TRACE else _KERN_EXEC_COLUMNS
    columns: dict[str, tuple[int, str, str, str | None]] = {}
    for position, column in enumerate(fields):
        base, unit = split_header_name(column)
        if base in mapping and mapping[base][0] not in columns:
            target, kind = mapping[base]
            columns[target] = (position, column, kind, unit)
    n_fields = len(fields)
    if any(c not in columns for c in _REQUIRED) or columns["name"][0] != n_fields - 1:
        return None
    try:
        factors = {
            target: _unit_factor(source, column, unit, kind)
            for target, (_, column, kind, unit) in columns.items()
            if kind in ("time", "size")
        }
    except HilsimError:
        return None
    # Every column is read (pandas counts the fields of a row only then: a row with too
    # many is an error with its line number); the unused ones as categoricals, cheap for
    # the few distinct texts they hold. Columns are named by position (header names may
    # repeat). A row with too few fields leaves its name (the last column) empty.
    dtypes: dict[str, object] = {f"c{i}": "category" for i in range(n_fields)}
    for position, _, kind, _ in columns.values():
        if kind not in ("text", "device", "triple"):
            dtypes[f"c{position}"] = np.float64
    numeric = [label for label, dtype in dtypes.items() if dtype is np.float64]
    used = {position for position, _, _, _ in columns.values()}
    sample = lines[header_index + 1 : header_index + 1 + _LOOSE_SAMPLE_ROWS]
    loose = [f"c{i}" for i in _number_columns(sample, n_fields) if i not in used]
    return FastLayout(
        report,
        header_index,
        lines[header_index],
        offsets[header_index],
        columns,
        n_fields,
        factors,
        dtypes,
        numeric,
        size,
        loose,
    )


def fast_table(
    source: Path, layout: FastLayout, body: Any, first_line: int | None = None
) -> pd.DataFrame | None:
    """Parse CSV rows (``body``: a binary file object starting with the header line) into
    the positional columns.

    ``first_line``: ``None`` when ``body`` is the file from its header on; else ``body`` is
    the header line then a block of the file's rows, the first being this 1-based line of
    the file. The first row's fields are counted here (:func:`check_first_row`): pandas
    takes the extra fields of a first row with too many for index columns, where on any
    later row they are an error. Raises a malformed row as one line naming the file line;
    returns ``None`` for anything else it does not vouch for (the exact path then words it).
    """
    line_base = layout.header_index if first_line is None else first_line - 2
    # Unused columns that looked numeric are read as float64 first: a categorical of a
    # column of distinct values (start times, API durations) costs pandas most of the
    # parse (1M-row kern_exec CSV: 4.5 -> 0.9 CPU-s). A later cell that is not a number
    # makes them categoricals after all (a second parse, from the block's start).
    attempts = [layout.dtypes]
    if layout.loose:
        attempts.insert(0, {**layout.dtypes, **dict.fromkeys(layout.loose, np.float64)})
    start = body.tell()
    body.readline()  # the header
    first = layout.header_index + 2 if first_line is None else first_line
    check_first_row(source, body.read(1 << 16), first, layout.n_fields)
    for attempt, dtypes in enumerate(attempts, start=1):
        body.seek(start)
        try:
            table = pd.read_csv(
                body,
                header=None,
                names=list(dtypes),
                skiprows=1,  # the header (counted in the line numbers of errors)
                dtype=dtypes,  # type: ignore[arg-type]
                keep_default_na=False,
                na_values={label: [""] for label in [*layout.numeric, *layout.loose]},
                thousands=",",
                skip_blank_lines=True,
                encoding="utf-8",
                engine="c",
            )
        except pd.errors.ParserError as exc:
            # counted as the exact path counts them (from the header line, blank lines too)
            _raise_parser_error(source, exc, line_base)
        except (ValueError, TypeError, OverflowError, LookupError, UnicodeError, OSError):
            if attempt < len(attempts):
                layout.loose = []  # text in a sampled-numeric column: later blocks skip it
                continue
            return None  # e.g. a cell that is not a number: the exact path names it
        break
    return table


def check_first_row(source: Path, block: bytes, line: int, n_fields: int) -> None:
    """Refuse a block whose first row has too many fields (pandas would take the extra
    ones for index columns, where on any later row they are an error with its line)."""
    for number, raw in enumerate(block.split(b"\n", 16)[:16], start=line):
        if not raw.strip():
            continue
        try:
            fields = next(csv.reader([raw.decode("utf-8", errors="replace").rstrip("\r")]))
        except (csv.Error, StopIteration):
            return
        if len(fields) > n_fields:
            raise HilsimError(
                f"{source}: line {number}: malformed CSV row (Error tokenizing data. C error: "
                f"Expected {n_fields} fields, saw {len(fields)})"
            )
        return


def check_last_row(source: Path, layout: FastLayout) -> bool:
    """Refuse a row cut short at the end of the file (the exact path checks it before the
    rest); ``False`` when the last line cannot be told from the file's tail."""
    last = _last_line(source, layout.size)
    if last is None:
        return False
    last_offset, last_text = last
    if last_offset > layout.body_offset:
        try:
            have = len(next(csv.reader([last_text.rstrip("\r\n")])))
        except csv.Error:
            have = 0
        if have < layout.n_fields:
            raise HilsimError(
                f"{source}: line {_line_number(source, last_offset)}: truncated row "
                f"({have} of {layout.n_fields} fields)"
            )
    return True


def fast_launches(
    source: Path, layout: FastLayout, table: pd.DataFrame
) -> tuple[pd.DataFrame, int] | None:
    """The launch columns (before :func:`normalize_launches`) of parsed rows and the number
    of memcpy/memset rows dropped (no kernel rows gives an empty frame); ``None`` when a
    row is anything but well formed (the exact path then names it)."""
    columns, report, numeric = layout.columns, layout.report, layout.numeric
    names = table[f"c{columns['name'][0]}"].array
    stripped = names.categories.astype(object).str.strip()
    if (names.codes < 0).any() or (stripped == "").any():
        return None  # a row without a name (or short): the exact path names its line
    if any(np.isinf(table[label].to_numpy()).any() for label in numeric):
        return None
    for target in ("start_ns", "duration_ns"):
        if table[f"c{columns[target][0]}"].isna().any():
            return None

    dropped = 0
    kernel_rows = slice(None)
    if report == GPU_TRACE:
        grid = columns.get("grid_x")
        if grid is not None:
            is_kernel = table[f"c{grid[0]}"].notna().to_numpy()
        else:
            copies = np.asarray(stripped.str.startswith("[CUDA "), dtype=bool)
            is_kernel = ~copies[names.codes]
        dropped = int((~is_kernel).sum())
        if dropped:
            kernel_rows = is_kernel  # taken column by column (no copy of the whole table)
    n_kernels = len(table) - dropped

    out = pd.DataFrame(index=pd.RangeIndex(n_kernels))
    for target, (position, column, kind, _unit) in columns.items():
        values = table[f"c{position}"].array[kernel_rows]
        if kind == "text":
            out[target] = _stripped_categorical(values)
        elif kind == "device":
            devices = _device_numbers(pd.Series(values.categories, dtype=object))
            out[target] = _recode(values, devices.to_numpy(dtype=float))
        elif kind == "triple":
            categories = pd.Series(values.categories, dtype=object)
            try:
                triple = _triples(source, categories, column, np.zeros(len(categories)))
            except HilsimError:
                return None
            for axis in ("x", "y", "z"):
                out[f"{target}_{axis}"] = _recode(values, triple[axis].to_numpy(float))
        else:
            numbers = np.asarray(values, dtype=np.float64)
            if kind in ("time", "size"):
                numbers = numbers * layout.factors[target]
            out[target] = np.round(numbers)
    if (out["duration_ns"] < 0).any():
        return None  # the exact path names the line
    return out, dropped


def _read_fast(source: Path) -> tuple[pd.DataFrame, str, int] | None:
    """The launch columns of a well-formed file without holding it as text.

    Returns what :func:`read_exact` returns, or ``None`` when the file is anything but
    well formed (the exact path then reads it and words the error). Raises only errors it
    words exactly as the exact path does: a malformed row (too many fields, a quote left
    open at the end), a truncated last row, a header with no kernel rows.
    """
    layout = fast_layout(source)
    if layout is None:
        return None
    with open(source, "rb") as handle:
        handle.seek(layout.body_offset)
        table = fast_table(source, layout, handle)
    if table is None or not check_last_row(source, layout):
        return None
    parsed = fast_launches(source, layout, table)
    if parsed is None:
        return None
    out, dropped = parsed
    if len(out) == 0:
        raise HilsimError(
            f"{source}: {layout.report} CSV has a header but no kernel rows"
            + (f" ({dropped} memcpy/memset rows dropped)" if dropped else "")
        )
    return out, layout.report, dropped


def _stripped_categorical(names: pd.Categorical) -> pd.Categorical:
    """The names with surrounding blanks removed, as :func:`read_exact` gives them."""
    stripped = np.asarray(names.categories.astype(object).str.strip(), dtype=object)
    categories, inverse = np.unique(stripped, return_inverse=True)
    codes = names.codes
    new_codes = np.where(codes >= 0, inverse[np.maximum(codes, 0)], -1)
    out = pd.Categorical.from_codes(new_codes, categories=pd.Index(categories, dtype=object))
    return out.remove_unused_categories()


# ----------------------------------------------------------------------------- exact path


class OpenQuoteAtEnd(HilsimError):
    """The text parsed ends inside a quoted value (pandas: "EOF inside string"): at the
    end of a file, a malformed file; at the end of a block of a file cut into blocks
    (:mod:`~hilsim.formats.streaming`), a cut that is not between rows."""


def _raise_parser_error(source: Path, exc: Exception, header_index: int) -> None:
    message = str(exc).strip().splitlines()[-1] if str(exc).strip() else "parse error"
    error = OpenQuoteAtEnd if "EOF inside string" in message else HilsimError
    match = re.search(r"line (\d+)", message)
    if match:
        line_no = header_index + int(match.group(1))
        message = re.sub(r"\s*in line \d+", "", message)
        raise error(f"{source}: line {line_no}: malformed CSV row ({message})") from exc
    raise error(f"{source}: malformed CSV ({message})") from exc


def read_exact(
    source: Path, text: str | None = None, line_offset: int = 0, block: bool = False
) -> tuple[pd.DataFrame, str, int]:
    """The whole file as text and every cell as a string: slow, exact error messages.

    Returns the launch columns (before :func:`normalize_launches`), the report and the
    number of memcpy/memset rows dropped.

    ``text``/``line_offset``/``block``: read ``text`` (a header line and a block of the
    file's rows, :mod:`~hilsim.formats.streaming`) instead of the file; line
    numbers in errors are those of ``text`` plus ``line_offset``; a ``block`` is not the
    file's end (its last row is not checked for truncation) and may hold no kernel rows.
    """
    text = _read_text(source) if text is None else text
    lines = csv_lines(text)
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
        _raise_parser_error(source, exc, header_index + line_offset)
    # 1-based file line number of each parsed row (one line per record)
    line_numbers = np.arange(len(table), dtype=np.int64) + header_index + 2 + line_offset
    # blank rows: every cell empty; a line of blanks counts too (the C parser of the fast
    # path skips it as it skips an empty line)
    empty = table.isna() | (table == "")
    blank = np.array(empty.all(axis=1), dtype=bool)
    first_only = empty.iloc[:, 1:].all(axis=1).to_numpy() & ~blank
    if first_only.any():
        first = table.iloc[:, 0].loc[first_only].astype(str).str.strip()
        blank[first_only] = (first == "").to_numpy()
    del empty
    if blank.any():
        table = table.loc[~blank].reset_index(drop=True)
        line_numbers = line_numbers[~blank]

    columns = _exact_columns(source, table, report)

    # a row cut short (truncated file) leaves its last fields missing
    last_index = next(
        (i for i in range(len(lines) - 1, header_index, -1) if lines[i].strip()), header_index
    )
    if last_index > header_index and not block:
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
    if len(table) == 0 and not block:
        raise HilsimError(
            f"{source}: {report} CSV has a header but no kernel rows"
            + (f" ({dropped} memcpy/memset rows dropped)" if dropped else "")
        )

    return _exact_launches(source, table, columns, line_numbers), report, dropped


def _exact_columns(
    source: Path, table: pd.DataFrame, report: str
) -> dict[str, tuple[str, str, str | None]]:
    """Launch column -> (CSV column, kind, unit) of the report's header; one line naming the
    file when a required column is missing."""
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
    return columns


def _exact_launches(
    source: Path,
    table: pd.DataFrame,
    columns: dict[str, tuple[str, str, str | None]],
    line_numbers: np.ndarray,
) -> pd.DataFrame:
    """The kernel rows' cells (strings) converted to the launch columns; errors name the
    file line (``line_numbers``) and the column."""
    out = pd.DataFrame(index=pd.RangeIndex(len(table)))
    for target, (column, kind, unit) in columns.items():
        values = table[column]
        if kind == "text":  # interned like the fast path's names (same categories)
            out[target] = _stripped_categorical(pd.Categorical(values.astype(str).astype(object)))
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
    return out
