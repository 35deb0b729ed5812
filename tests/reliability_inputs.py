"""Small attack inputs built from the real fixtures in ``tests/data``.

Each builder writes one file under a folder and returns its path; the tests and the fuzz
tier share them so every importer is attacked from a real profile, not an invented one.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data"
NSYS_CSV = DATA / "nsys" / "vernier-nsys2026.3.1-rtx5000ada_cuda_gpu_trace.csv"
SQLITE = DATA / "nsys-sqlite" / "casio-nerf-a100.nsys.sqlite"
KINETO = DATA / "kineto" / "hta-v100-ns-resolution.trace.json.gz"
WIDE = DATA / "casio" / "casio-kernel-durations.csv"
NCU_RAW = DATA / "ncu" / "decodebench_flashinfer_b1_ctx4k_raw_2025.csv"


def csv_lines() -> list[str]:
    """The real nsys ``cuda_gpu_trace`` CSV, one string per line (header first)."""
    return NSYS_CSV.read_text(encoding="utf-8").splitlines()


def kernel_row(lines: list[str]) -> int:
    """Index of the first kernel row (one with a grid size) in :func:`csv_lines`."""
    for index, line in enumerate(lines[1:], start=1):
        if line.split(",")[3]:  # GrdX: set for kernels, empty for memcpy rows
            return index
    raise AssertionError("no kernel row in the fixture")


def nsys_csv(folder: Path, column: int | None = None, value: str | None = None,
             name: str = "trace.csv", double: bool = False) -> Path:
    """The real nsys CSV with cell ``column`` of its first kernel row set to ``value``
    (and every data row written twice with ``double``)."""
    lines = csv_lines()
    if column is not None:
        row = kernel_row(lines)
        head, _, tail = lines[row].partition('"')
        cells = head.split(",")
        cells[column] = value or ""
        lines[row] = ",".join(cells) + ('"' + tail if tail else "")
    if double:
        lines = [lines[0], *[line for line in lines[1:] for _ in range(2)]]
    path = folder / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def sqlite_copy(folder: Path, *statements: str, name: str = "trace.sqlite") -> Path:
    """The real nsys SQLite export with ``statements`` applied."""
    path = folder / name
    shutil.copyfile(SQLITE, path)
    conn = sqlite3.connect(path)
    try:
        for statement in statements:
            conn.execute(statement)
        conn.commit()
    finally:
        conn.close()
    return path


def kineto_events(limit: int = 60) -> list[dict[str, Any]]:
    """The first ``limit`` kernel events of the real V100 Kineto trace."""
    data = json.loads(gzip.decompress(KINETO.read_bytes()))
    kernels = [e for e in data["traceEvents"] if e.get("cat") == "kernel"]
    return kernels[:limit]


def kineto_trace(folder: Path, events: list[dict[str, Any]] | None = None,
                 name: str = "trace.json", raw: str | None = None) -> Path:
    """A Kineto trace of ``events`` (default: real kernels); ``raw`` replaces the text."""
    path = folder / name
    text = raw if raw is not None else json.dumps({"traceEvents": events or kineto_events()})
    path.write_text(text, encoding="utf-8")
    return path


def cupti_records(folder: Path, kernels: list[dict[str, Any]] | None = None,
                  name: str = "r.cupti.jsonl", extra_lines: tuple[str, ...] = ()) -> Path:
    """A CUPTI records file (header + kernel records) written as the backend writes it."""
    from hilsim.analyzer.importers.cupti_format import write_cupti_records

    if kernels is None:
        kernels = [
            {"kind": "kernel", "name": "_Z6vecAddPfS_S_i", "start": 1000 + 100 * i,
             "end": 1050 + 100 * i, "correlation_id": 10 + i, "device_id": 0,
             "stream_id": 7, "grid_x": 64, "grid_y": 1, "grid_z": 1, "block_x": 256,
             "block_y": 1, "block_z": 1}
            for i in range(4)
        ]
    path = folder / name
    write_cupti_records(path, {"tool": {"name": "cupti-python"}, "complete": True}, kernels)
    if extra_lines:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write("".join(line + "\n" for line in extra_lines))
    return path


def wide_csv(folder: Path, value: str, name: str = "wide.csv") -> Path:
    """The first 50 lines of the real CASIO wide table with one cell set to ``value``."""
    lines = WIDE.read_text(encoding="utf-8-sig").splitlines()[:50]
    cells = lines[1].split(",")
    cells[0] = value
    lines[1] = ",".join(cells)
    path = folder / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def ncu_kernel_names() -> list[str]:
    """The kernel names of the real ncu raw CSV fixture, in its order."""
    import csv

    rows = list(csv.reader(NCU_RAW.read_text(encoding="utf-8").splitlines()[2:]))
    column = rows[0].index("Kernel Name")
    return [row[column] for row in rows[2:]]
