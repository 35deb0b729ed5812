"""The ``hilsim.cupti-records/1`` file: its schema name, its writer and its header check.

The CUPTI launcher (:mod:`hilsim.agent.cupti_launch`) writes this file from inside the
workload's process, so this module needs nothing but the standard library and the
atomic file writes: the workload never loads pandas for it. The format, and how it
becomes a bundle, is described in :mod:`hilsim.formats.cupti_records` and
``docs/formats.md``. The format's sniff (:func:`is_cupti_records_head`) lives here too,
so guessing a file's format does not load the reader.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hilsim.core.files import open_atomic

if TYPE_CHECKING:
    from hilsim.formats.detect import Head

SCHEMA = "hilsim.cupti-records/1"
#: the kinds of record after the header line
KINDS = ("kernel", "runtime", "range")


def write_cupti_records(
    path: str | os.PathLike[str], header: dict[str, Any], records: Iterable[dict[str, Any]]
) -> Path:
    """Write a records file atomically: header line, then one line per record.

    ``header`` gets ``schema`` and ``kind`` set; each record must have ``kind`` in
    ``kernel``, ``runtime``, ``range``. Streams the lines to a temporary file in the
    target folder and renames it, so a reader never sees half a file.
    """
    target = Path(path)
    head = {"schema": SCHEMA, "kind": "header", **header}
    head["schema"], head["kind"] = SCHEMA, "header"
    with open_atomic(target, "w") as handle:
        handle.write(json.dumps(head, default=str) + "\n")
        for record in records:
            handle.write(json.dumps(record, default=str, separators=(",", ":")) + "\n")
    return target


def is_cupti_records(path: str | Path) -> bool:
    """True when the file's first line is a ``hilsim.cupti-records/1`` header."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return is_header_line(handle.readline(4096))
    except OSError:
        return False


def is_header_line(line: str) -> bool:
    """True when ``line`` is a ``hilsim.cupti-records/1`` header (a JSON object naming the
    schema)."""
    try:
        return json.loads(line).get("schema") == SCHEMA
    except (ValueError, AttributeError, RecursionError):
        return False


def is_cupti_records_head(head: Head) -> bool:
    """The ``cupti-records`` format's sniff: the file's first line is a records header
    (the reader reads plain text: a gzip file is not one)."""
    return is_header_line(head.first_line)


__all__ = [
    "KINDS",
    "SCHEMA",
    "is_cupti_records",
    "is_cupti_records_head",
    "is_header_line",
    "write_cupti_records",
]
