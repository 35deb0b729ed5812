"""sniff_format on real tool output in tests/data, plus minimal files for the
formats whose real samples live with other importers' tests.

The SQLite sample is written by the sqlite3 library (the magic is the library's);
the Kineto and Nsight Compute headers are built from the layouts documented in
docs/formats.md (real ncu CSV excerpts are read in tests/test_formats_common.py).
"""

from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path

import pytest

from hilsim.core.errors import HilsimError
from hilsim.formats.detect import sniff_format

DATA = Path(__file__).parent / "data"


def test_real_nsys_gpu_trace_fixtures() -> None:
    for path in sorted((DATA / "nsys").glob("*cuda_gpu_trace.csv")):
        assert sniff_format(path) == "nsys-gpu-trace-csv"


def test_real_casio_wide_durations() -> None:
    assert sniff_format(DATA / "casio" / "casio-kernel-durations.csv") == "wide-durations-csv"


def test_nsys_preamble_then_header(tmp_path: Path) -> None:
    real = (DATA / "nsys" / "vernier-nsys2025.3.2-thor_cuda_gpu_trace.csv").read_text()
    path = tmp_path / "stats.csv"
    path.write_text(
        "Generating SQLite file r.sqlite from r.nsys-rep\nProcessing [r.sqlite] with "
        "[cuda_gpu_trace.py]... \n\n" + real
    )
    assert sniff_format(path) == "nsys-gpu-trace-csv"


def test_kern_exec_header(tmp_path: Path) -> None:
    path = tmp_path / "kern.csv"
    path.write_text(
        "API Start (ns),API Dur (ns),Queue Start (ns),Queue Dur (ns),Kernel Start (ns),"
        "Kernel Dur (ns),Total Dur (ns),PID,TID,DevId,API Function,GridXYZ,BlockXYZ,"
        "Kernel Name\n"
    )
    assert sniff_format(path) == "nsys-kern-exec-csv"


def test_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE t (x INTEGER)")
    connection.close()
    assert sniff_format(path) == "sqlite"


@pytest.mark.parametrize("compressed", [False, True])
def test_kineto_json(tmp_path: Path, compressed: bool) -> None:
    body = json.dumps({"schemaVersion": 1, "traceEvents": [{"ph": "X", "cat": "kernel"}]})
    if compressed:
        path = tmp_path / "t.json.gz"
        path.write_bytes(gzip.compress(body.encode()))
    else:
        path = tmp_path / "t.json"
        path.write_text(body)
    assert sniff_format(path) == "kineto-json"


def test_ncu_long_and_raw_headers(tmp_path: Path) -> None:
    long_csv = tmp_path / "long.csv"
    long_csv.write_text(
        '==PROF== Disconnected from process 1\n"ID","Process ID","Process Name","Host Name",'
        '"Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC",'
        '"Section Name","Metric Name","Metric Unit","Metric Value"\n'
    )
    raw_csv = tmp_path / "raw.csv"
    raw_csv.write_text(
        '"ID","Process ID","Kernel Name","gpu__time_duration.sum","launch__grid_size"\n'
        '"","","","nsecond",""\n'
    )
    assert sniff_format(long_csv) == "ncu-csv-long"
    assert sniff_format(raw_csv) == "ncu-csv-raw"


@pytest.mark.parametrize(
    ("content", "seen"),
    [
        (b"", "empty"),
        (b'{"foo": 1}', "traceEvents"),
        (b"running ./L1asso.csv microbenchmark\nL1 hit latency = 28\n", "running"),
        (b"\x00\x01\x02binary", "binary"),
    ],
)
def test_unrecognised_is_one_line_naming_file(tmp_path: Path, content: bytes, seen: str) -> None:
    path = tmp_path / "mystery.dat"
    path.write_bytes(content)
    with pytest.raises(HilsimError) as info:
        sniff_format(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: unrecognised format (")
    assert seen in message
