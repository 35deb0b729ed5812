"""Fuzz tier: every importer, fed mutations of the real fixtures, keeps the
promise of :mod:`tests.fuzz.promise` through ``hilsim import``.

Bounded (``max_examples`` per test, :data:`~tests.fuzz.promise.TIME_LIMIT_S` per case),
deterministic (``derandomize=True``, no example database). Run: ``pytest -m fuzz tests/fuzz``.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import tempfile
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests import reliability_inputs as inputs
from tests.csv_agreement import assert_line_breaks_agree, assert_readers_agree
from tests.fuzz.csv_files import gpu_trace_csv
from tests.fuzz.promise import check_import
from tests.fuzz.strategies import (
    byte_mutations,
    cell_text,
    fuzz_settings,
    json_values,
    kineto_bytes,
    kineto_window,
    seed_files,
    sqlite_values,
)

pytestmark = pytest.mark.fuzz


def _import_bytes(name: str, data: bytes, *extra: str) -> int:
    with tempfile.TemporaryDirectory(prefix="hilsim-fuzz-") as folder:
        source = Path(folder) / name
        source.write_bytes(data)
        return check_import(source, Path(folder), *extra)


# ----------------------------------------------------------------------- byte level

@fuzz_settings(160)
@given(st.data())
def test_fuzz_text_inputs_byte_mutations(data):
    name = data.draw(st.sampled_from(sorted(seed_files())))
    _import_bytes(name, data.draw(byte_mutations(seed_files()[name])))


@cache
def _cupti_seed() -> bytes:
    with tempfile.TemporaryDirectory() as folder:
        kernels = [
            {"kind": "kernel", "name": name, "start": 1000 + 100 * i, "end": 1050 + 100 * i,
             "correlation_id": 10 + i, "device_id": 0, "stream_id": 7, "grid_x": 64,
             "grid_y": 1, "grid_z": 1, "block_x": 256, "block_y": 1, "block_z": 1}
            for i, name in enumerate(["_Z6vecAddPfS_S_i", "k2", "_Z6vecAddPfS_S_i", "k3"])
        ]
        calls = [{"kind": "runtime", "start": 990 + 100 * i, "end": 995 + 100 * i,
                  "correlation_id": 10 + i, "thread_id": 555} for i in range(4)]
        ranges = [{"kind": "range", "name": "step", "start": 980, "end": 1400,
                   "thread_id": 555}]
        path = inputs.cupti_records(Path(folder), [*kernels, *calls, *ranges])
        return path.read_bytes()


@fuzz_settings(40)
@given(st.data())
def test_fuzz_cupti_records_byte_mutations(data):
    _import_bytes("r.cupti.jsonl", data.draw(byte_mutations(_cupti_seed())))


@fuzz_settings(12)
@given(st.data())
def test_fuzz_sqlite_byte_mutations(data):
    _import_bytes("trace.sqlite", data.draw(byte_mutations(inputs.SQLITE.read_bytes())))


# ----------------------------------------------------------------------- structured

@fuzz_settings(70)
@given(st.data())
def test_fuzz_nsys_csv_cells(data):
    lines = inputs.csv_lines()
    for _ in range(data.draw(st.integers(1, 3))):
        row = data.draw(st.integers(1, len(lines) - 1))
        head, quote, name = lines[row].partition('"')
        cells = head.split(",")
        column = data.draw(st.integers(0, len(cells) - 2))
        cells[column] = data.draw(cell_text).replace(",", ";").replace("\n", " ")
        lines[row] = ",".join(cells) + quote + name
    _import_bytes("trace.csv", ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass"))


@fuzz_settings(40)
@given(gpu_trace_csv(), st.sampled_from(["\n", "\r\n", "\r"]), st.sampled_from([64, 300, 4096]))
def test_fuzz_csv_readers_agree(text, newline, block_bytes):
    """Generated nsys CSVs (cells past int64, hexadecimal, ``nan``, quoted line breaks)
    in one line-break style: every reader gives the exact reader's launches or refusal,
    the streaming import (blocks of ``block_bytes``) the in-memory import's bundle, and
    the file's ``\\n``, ``\\r\\n`` and ``\\r`` copies import alike."""
    with tempfile.TemporaryDirectory(prefix="hilsim-fuzz-") as folder:
        source = Path(folder) / "generated_cuda_gpu_trace.csv"
        source.write_bytes(text.replace("\n", newline).encode("utf-8"))
        assert_readers_agree(source, block_bytes=block_bytes)
        check_import(source, Path(folder))
        assert_line_breaks_agree(Path(folder) / "styles_cuda_gpu_trace.csv", text)


@fuzz_settings(30)
@given(st.data())
def test_fuzz_wide_table_cells(data):
    lines = inputs.WIDE.read_text(encoding="utf-8-sig").splitlines()[:40]
    row = data.draw(st.integers(1, len(lines) - 1))
    cells = lines[row].split(",")
    cells[data.draw(st.integers(0, len(cells) - 1))] = data.draw(cell_text).replace(",", ";")
    lines[row] = ",".join(cells).replace("\n", " ")
    _import_bytes("wide.csv", ("\n".join(lines) + "\n").encode("utf-8", "surrogatepass"))


_KINETO_FIELDS = ("ts", "dur", "name", "cat", "ph", "pid", "tid", "args")
_KINETO_ARGS = ("grid", "block", "stream", "device", "correlation", "registers per thread",
                "shared memory", "External id")


@fuzz_settings(80)
@given(st.data())
def test_fuzz_kineto_event_fields(data):
    events = [dict(e) for e in kineto_window()]
    for _ in range(data.draw(st.integers(1, 3))):
        kernels = [i for i, e in enumerate(events) if e.get("cat") == "kernel"] or [0]
        index = data.draw(st.one_of(st.sampled_from(kernels),
                                    st.integers(0, len(events) - 1)))
        event = events[index]
        if data.draw(st.booleans()) and isinstance(event.get("args"), dict):
            event["args"] = dict(event["args"])
            event["args"][data.draw(st.sampled_from(_KINETO_ARGS))] = data.draw(json_values)
        else:
            event[data.draw(st.sampled_from(_KINETO_FIELDS))] = data.draw(json_values)
    if data.draw(st.booleans()):  # repeated events (a doubled export)
        events += events[: data.draw(st.integers(1, len(events)))]
    _import_bytes("trace.json", kineto_bytes(events))


_CUPTI_FIELDS = ("name", "start", "end", "correlation_id", "device_id", "stream_id", "grid_x",
                 "block_x", "registers_per_thread", "kind", "thread_id")
_CUPTI_HEADER_FIELDS = ("device", "tool", "complete", "reason", "unclosed_ranges")


@fuzz_settings(50)
@given(st.data())
def test_fuzz_cupti_record_fields(data):
    lines = _cupti_seed().decode().splitlines()
    for _ in range(data.draw(st.integers(1, 3))):
        row = data.draw(st.integers(0, len(lines) - 1))  # 0: the header
        record = json.loads(lines[row])
        fields = _CUPTI_HEADER_FIELDS if row == 0 else _CUPTI_FIELDS
        record[data.draw(st.sampled_from(fields))] = data.draw(
            st.one_of(json_values, st.floats(-1e6, 1e6).filter(lambda v: not v.is_integer())))
        lines[row] = json.dumps(record)
    _import_bytes("r.cupti.jsonl", ("\n".join(lines) + "\n").encode())


_SQLITE_COLUMNS = ("start", '"end"', "deviceId", "streamId", "correlationId", "demangledName",
                   "gridX", "blockX", "registersPerThread", "staticSharedMemory")


@fuzz_settings(45)
@given(st.data())
def test_fuzz_sqlite_kernel_fields(data):
    with tempfile.TemporaryDirectory(prefix="hilsim-fuzz-") as folder:
        source = inputs.sqlite_copy(Path(folder))
        conn = sqlite3.connect(source)
        try:
            for _ in range(data.draw(st.integers(1, 3))):
                column = data.draw(st.sampled_from([*_SQLITE_COLUMNS, "StringIds.value"]))
                value = data.draw(sqlite_values)
                if column == "StringIds.value":
                    offset = data.draw(st.integers(0, 1105))
                    with contextlib.suppress(sqlite3.IntegrityError):  # NOT NULL value
                        conn.execute("UPDATE StringIds SET value = ? WHERE id = "
                                     "(SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL "
                                     "LIMIT 1 OFFSET ?)", (value, offset))
                else:
                    rows = data.draw(st.sampled_from(["one", "all"]))
                    where = "" if rows == "all" else (
                        f" WHERE rowid = {data.draw(st.integers(1, 1106))}")
                    with contextlib.suppress(sqlite3.IntegrityError):  # NOT NULL columns
                        conn.execute(
                            f"UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET {column} = ?{where}",
                            (value,),
                        )
            if data.draw(st.booleans()):
                conn.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM "
                             "CUPTI_ACTIVITY_KIND_KERNEL LIMIT 50")
            conn.commit()
            if data.draw(st.booleans()):  # (outside a transaction, where it takes effect)
                conn.execute("PRAGMA journal_mode=WAL")  # a reader must not write -shm/-wal
        finally:
            conn.close()
        before = sorted(p.name for p in Path(folder).iterdir())
        check_import(source, Path(folder))
        after = sorted(p.name for p in Path(folder).iterdir() if p.name != "out")
        assert after == before, "the import wrote beside its input"


@cache
def _profile_for_ncu() -> bytes:
    kernels = [{"kind": "kernel", "name": name, "start": 10 * i, "end": 10 * i + 5}
               for i, name in enumerate(inputs.ncu_kernel_names())]
    with tempfile.TemporaryDirectory() as folder:
        return inputs.cupti_records(Path(folder), kernels).read_bytes()


@fuzz_settings(40)
@given(st.data())
def test_fuzz_ncu_csv_with_a_profile(data):
    ncu = data.draw(byte_mutations(inputs.NCU_RAW.read_bytes()))
    join = data.draw(st.sampled_from(["order", "id"]))
    with tempfile.TemporaryDirectory(prefix="hilsim-fuzz-") as folder:
        profile = Path(folder) / "r.cupti.jsonl"
        profile.write_bytes(_profile_for_ncu())
        metrics = Path(folder) / "ncu.csv"
        metrics.write_bytes(ncu)
        check_import(profile, Path(folder), "--ncu", str(metrics), "--ncu-join", join)
