"""Guess the format of a profile file from its first few KB.

Recognised (see ``/FORMATS.md`` facts):

* ``"sqlite"``: SQLite database (``nsys export --type sqlite``), magic
  ``SQLite format 3\\0``.
* ``"kineto-json"``: PyTorch profiler (Kineto) Chrome trace, ``.json`` or gzip'd
  ``.json.gz``, with a ``traceEvents`` key.
* ``"nsys-gpu-trace-csv"`` / ``"nsys-kern-exec-csv"``: ``nsys stats --format csv``
  reports ``cuda_gpu_trace`` / ``cuda_kern_exec_trace`` (after any preamble lines).
* ``"ncu-csv-long"``: Nsight Compute ``--csv`` details page (``"ID","Process ID",
  ...,"Metric Name","Metric Unit","Metric Value"``).
* ``"ncu-csv-raw"``: Nsight Compute ``--csv --page raw`` (``"ID"`` plus metric
  columns named like ``gpu__time_duration.sum``; second row = units).
* ``"wide-durations-csv"``: header of kernel names, rows of numbers (ragged).
* ``"gpgpusim-log"``: a GPGPU-Sim run's stdout (its banner ``*** GPGPU-Sim Simulator
  Version`` or ``GPGPU-Sim PTX:`` lines in the first 16 KB).
"""

from __future__ import annotations

import csv
import re
import zlib
from pathlib import Path

from hilsim.analyzer.importers.nsys_stats import GPU_TRACE, KERN_EXEC_TRACE, classify_header

from hilsim.core.errors import HilsimError

SNIFF_BYTES = 64 * 1024
_SQLITE_MAGIC = b"SQLite format 3\x00"
_GZIP_MAGIC = b"\x1f\x8b"
_NUMBER = re.compile(r"^[+-]?(\d+(,\d{3})*|\d*)(\.\d*)?([eE][+-]?\d+)?$")


def _head(path: Path) -> bytes:
    try:
        with open(path, "rb") as handle:
            raw = handle.read(SNIFF_BYTES)
    except OSError as exc:
        raise HilsimError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    if raw.startswith(_GZIP_MAGIC):
        try:
            # decompress only what the first KB give; a truncated stream is fine
            return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(raw, SNIFF_BYTES)
        except zlib.error as exc:
            raise HilsimError(f"{path}: unrecognised format (broken gzip: {exc})") from exc
    return raw


def _is_number(cell: str) -> bool:
    text = cell.strip()
    return bool(text) and bool(_NUMBER.match(text)) and any(c.isdigit() for c in text)


def _looks_wide(rows: list[list[str]]) -> bool:
    header, data = rows[0], rows[1:]
    if not header or not any(h.strip() for h in header) or not data:
        return False
    if any(_is_number(h) for h in header):
        return False
    seen_number = False
    for row in data:
        if len(row) > len(header):
            return False
        for cell in row:
            if cell.strip() and not _is_number(cell):
                return False
            seen_number = seen_number or _is_number(cell)
    return seen_number


def _csv_format(lines: list[str]) -> str | None:
    rows: list[list[str]] = []
    for line in lines:
        if not line.strip():
            continue
        try:
            fields = next(csv.reader([line]))
        except csv.Error:
            continue
        report = classify_header(fields)
        if report == GPU_TRACE:
            return "nsys-gpu-trace-csv"
        if report == KERN_EXEC_TRACE:
            return "nsys-kern-exec-csv"
        stripped = [f.strip() for f in fields]
        if stripped and stripped[0] == "ID":
            if {"Metric Name", "Metric Value"} <= set(stripped):
                return "ncu-csv-long"
            if any("__" in f for f in stripped[1:]):
                return "ncu-csv-raw"
        rows.append(fields)
    if rows and _looks_wide(rows):
        return "wide-durations-csv"
    return None


def sniff_format(path: str | Path) -> str:
    """Return the format name of ``path`` (see module doc) from its first 64 KB.

    Raises :class:`HilsimError` ``"<path>: unrecognised format (...)"`` saying what
    was seen when no format matches.
    """
    source = Path(path)
    raw = _head(source)
    if raw.startswith(_SQLITE_MAGIC):
        return "sqlite"
    if not raw.strip():
        raise HilsimError(f"{source}: unrecognised format (empty file)")
    text = raw.decode("utf-8-sig", errors="replace")
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        if '"traceEvents"' in text:
            return "kineto-json"
        raise HilsimError(
            f"{source}: unrecognised format (JSON without 'traceEvents': {stripped[:60]!r})"
        )
    # lazy: the GPGPU-Sim log parser loads only for files that are neither SQLite nor JSON
    from hilsim.simmodel.gpgpusim.logprofile import looks_like_gpgpusim_log

    if looks_like_gpgpusim_log(text[:16384]):
        return "gpgpusim-log"
    if "\x00" in text[:4096]:
        raise HilsimError(f"{source}: unrecognised format (binary data: {raw[:16]!r})")
    lines = text.splitlines()
    if len(raw) >= SNIFF_BYTES and len(lines) > 1:
        lines = lines[:-1]  # the last line may be cut by the read limit
    found = _csv_format(lines[:400])
    if found is not None:
        return found
    first = next((ln.strip() for ln in lines if ln.strip()), "")
    raise HilsimError(f"{source}: unrecognised format (first line {first[:80]!r})")
