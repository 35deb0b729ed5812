"""Guess the format of a profile file from its first 64 KiB.

:func:`sniff_format` reads the file's head once (:class:`Head`: the bytes, gunzipped when
the file is gzip, the text and its lines) and asks each format of the registry
(:data:`hilsim.formats.BUILTIN`), in its order, whether the head is that format. This
module holds the sniffs that load nothing but the ``nsys stats`` header rule; the facts
each relies on are in ``docs/formats.md``:

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

The CSV formats are told apart by the first line that is a header of one of them (an
``nsys stats`` preamble or a program's output may come first). The other sniffs live with
their readers: ``"cupti-records"`` (:func:`hilsim.formats.cupti_format.is_cupti_records_head`)
and ``"gpgpusim-log"`` (``simmodel/gpgpusim/logprofile.py``, named in the registry).
"""

from __future__ import annotations

import csv
import io
import re
import zlib
from pathlib import Path

from hilsim.core.errors import HilsimError
from hilsim.formats import BUILTIN, load
from hilsim.formats.nsys_stats import GPU_TRACE, KERN_EXEC_TRACE, classify_header

SNIFF_BYTES = 64 * 1024
_SQLITE_MAGIC = b"SQLite format 3\x00"
_GZIP_MAGIC = b"\x1f\x8b"
_NUMBER = re.compile(r"^[+-]?(\d+(,\d{3})*|\d*)(\.\d*)?([eE][+-]?\d+)?$")
#: lines of the head the CSV sniffs look at
CSV_SNIFF_LINES = 400
#: characters of the head searched for binary data (a NUL)
BINARY_SNIFF_CHARS = 4096


class Head:
    """The first :data:`SNIFF_BYTES` of a file (gunzipped when the file is gzip) and the
    views the sniffs read, each worked out once."""

    def __init__(self, path: Path, raw: bytes, data: bytes) -> None:
        self.path = path
        #: the file's first bytes as stored
        self.raw = raw
        #: the head's bytes (decompressed as far as the read bytes go for a gzip file)
        self.data = data
        #: the bytes decoded as UTF-8 (a BOM dropped, bad bytes replaced)
        self.text = data.decode("utf-8-sig", errors="replace")
        #: the text starts with a JSON object or array
        self.is_json = self.text.lstrip().startswith(("{", "["))
        #: a NUL in the first :data:`BINARY_SNIFF_CHARS` characters
        self.is_binary = "\x00" in self.text[:BINARY_SNIFF_CHARS]
        self._csv: tuple[str | None, list[list[str]]] | None = None

    @classmethod
    def read(cls, path: str | Path) -> Head:
        """The head of ``path``; :class:`HilsimError` when it cannot be read or is a broken
        gzip stream."""
        source = Path(path)
        try:
            with open(source, "rb") as handle:
                raw = handle.read(SNIFF_BYTES)
        except OSError as exc:
            raise HilsimError(f"{source}: cannot read ({exc.strerror or exc})") from exc
        data = raw
        if raw.startswith(_GZIP_MAGIC):
            try:
                # decompress only what the first KB give; a truncated stream is fine
                data = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(raw, SNIFF_BYTES)
            except zlib.error as exc:
                raise HilsimError(
                    f"{source}: unrecognised format (broken gzip: {exc})"
                ) from exc
        return cls(source, raw, data)

    @property
    def first_line(self) -> str:
        """The stored file's first line as a text file's ``readline(4096)`` gives it (not
        gunzipped, no BOM dropped)."""
        stream = io.TextIOWrapper(io.BytesIO(self.raw), encoding="utf-8", errors="replace")
        return stream.readline(4096)

    def lines(self) -> list[str]:
        """The text's lines, without the last one when the read limit may have cut it."""
        lines = self.text.splitlines()
        if len(self.data) >= SNIFF_BYTES and len(lines) > 1:
            lines = lines[:-1]
        return lines

    def csv_rows(self) -> tuple[str | None, list[list[str]]]:
        """(the CSV format of the first header line among the first
        :data:`CSV_SNIFF_LINES` lines, or ``None``; the rows before it): for text that is
        neither JSON nor binary data, else ``(None, [])``."""
        if self._csv is None:
            self._csv = (None, []) if self.is_json or self.is_binary else _csv_rows(
                self.lines()[:CSV_SNIFF_LINES]
            )
        return self._csv

    def unrecognised(self) -> str:
        """What was seen, for the error when no format accepts the head."""
        if not self.data.strip():
            return "empty file"
        stripped = self.text.lstrip()
        if self.is_json:
            return f"JSON without 'traceEvents': {stripped[:60]!r}"
        if self.is_binary:
            return f"binary data: {self.data[:16]!r}"
        first = next((ln.strip() for ln in self.lines() if ln.strip()), "")
        return f"first line {first[:80]!r}"


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


def _header_format(fields: list[str]) -> str | None:
    """The CSV format whose header line ``fields`` is (nsys stats' two reports, Nsight
    Compute's two pages), or ``None``."""
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
    return None


def _csv_rows(lines: list[str]) -> tuple[str | None, list[list[str]]]:
    rows: list[list[str]] = []
    for line in lines:
        if not line.strip():
            continue
        try:
            fields = next(csv.reader([line]))
        except csv.Error:
            continue
        found = _header_format(fields)
        if found is not None:
            return found, rows
        rows.append(fields)
    return None, rows


# ----------------------------------------------------------------------------- sniffs


def is_sqlite(head: Head) -> bool:
    """An SQLite database: the file starts with SQLite's magic."""
    return head.data.startswith(_SQLITE_MAGIC)


def is_kineto_json(head: Head) -> bool:
    """A Chrome trace as the PyTorch profiler writes it: JSON with a ``traceEvents`` key."""
    return head.is_json and '"traceEvents"' in head.text


def is_nsys_gpu_trace_csv(head: Head) -> bool:
    """The first CSV header line is ``nsys stats``' ``cuda_gpu_trace`` report's."""
    return head.csv_rows()[0] == "nsys-gpu-trace-csv"


def is_nsys_kern_exec_csv(head: Head) -> bool:
    """The first CSV header line is ``nsys stats``' ``cuda_kern_exec_trace`` report's."""
    return head.csv_rows()[0] == "nsys-kern-exec-csv"


def is_ncu_csv_long(head: Head) -> bool:
    """The first CSV header line is Nsight Compute's details page (``"ID"``, ...,
    ``"Metric Name"``, ``"Metric Value"``)."""
    return head.csv_rows()[0] == "ncu-csv-long"


def is_ncu_csv_raw(head: Head) -> bool:
    """The first CSV header line is Nsight Compute's raw page (``"ID"`` and metric
    columns named ``unit__counter.rollup``)."""
    return head.csv_rows()[0] == "ncu-csv-raw"


def is_wide_durations_csv(head: Head) -> bool:
    """No known header line, and a header of names over rows of numbers only (ragged)."""
    found, rows = head.csv_rows()
    return found is None and bool(rows) and _looks_wide(rows)


def sniff_format(path: str | Path) -> str:
    """Return the format name of ``path``: the first format of the registry whose sniff
    accepts the file's first 64 KiB.

    Raises :class:`HilsimError` ``"<path>: unrecognised format (...)"`` saying what
    was seen when no format matches.
    """
    head = Head.read(path)
    for entry in BUILTIN:
        if entry.sniff is not None and load(entry.sniff)(head):
            return entry.name
    raise HilsimError(f"{head.path}: unrecognised format ({head.unrecognised()})")
