"""Streaming import: chunk by chunk gives the bundle the in-memory import gives.

Inputs are the real fixtures (tests/data/nsys: nsys stats cuda_gpu_trace CSVs;
tests/data/nsys-sqlite: an nsys SQLite export with 1,106 launches of 116 kernels and NVTX
ranges), read with tiny chunks so that chunk boundaries fall inside names, duplicates
and runs of equal starts; and files made from them (rows repeated with other names,
a row doubled, a bad cell mid-file, rows out of order).
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from hilsim.cli.main import main
from hilsim.core.bundle import read_bundle, write_bundle
from hilsim.core.errors import HilsimError
from hilsim.formats import nsys_sqlite, streaming
from hilsim.formats.read import import_profile
from hilsim.formats.streaming import stream_import

DATA = Path(__file__).parent / "data"
THOR = DATA / "nsys" / "vernier-nsys2025.3.2-thor_cuda_gpu_trace.csv"
ADA = DATA / "nsys" / "vernier-nsys2026.3.1-rtx5000ada_cuda_gpu_trace.csv"
NERF = DATA / "nsys-sqlite" / "casio-nerf-a100.nsys.sqlite"
CSV = "nsys-gpu-trace-csv"
#: manifest keys that differ between two writes of the same bundle
WRITE_FACTS = {"created", "files", "digest"}


def _in_memory(path: Path, out: Path) -> Path:
    return write_bundle(import_profile(path), out)


def _assert_same_bundle(streamed: Path, in_memory: Path) -> None:
    a, b = read_bundle(streamed), read_bundle(in_memory)
    pd.testing.assert_frame_equal(a.launches, b.launches)
    assert (a.regions is None) == (b.regions is None)
    if b.regions is not None:
        pd.testing.assert_frame_equal(a.regions, b.regions)
    facts = {k: v for k, v in a.manifest.items() if k not in WRITE_FACTS}
    assert facts == {k: v for k, v in b.manifest.items() if k not in WRITE_FACTS}
    assert set(a.manifest["files"]) == set(b.manifest["files"])


def _rows_with_names(tmp_path: Path, copies: int = 12) -> tuple[Path, list[str]]:
    """THOR's rows repeated ``copies`` times, later copies starting later, each copy's
    kernel renamed (7 names: one dictionary must serve every chunk)."""
    lines = THOR.read_text().splitlines()
    header, body = lines[0], lines[1:]
    out = [header]
    for copy in range(copies):
        for line in body:
            start, rest = line.split(",", 1)
            shifted = str(int(start) + copy * 10**9)
            out.append(f"{shifted},{rest.replace('saxpyKernel', f'k{copy % 7}Kernel')}")
    path = tmp_path / "many_cuda_gpu_trace.csv"
    path.write_text("\n".join(out) + "\n")
    return path, out


@pytest.mark.parametrize("fixture", [THOR, ADA], ids=["nsys2025.3.2", "nsys2026.3.1"])
@pytest.mark.parametrize("block", [16, 300, 1 << 20])
def test_csv_fixture_streams_to_the_in_memory_bundle(tmp_path, fixture, block) -> None:
    result = stream_import(fixture, CSV, tmp_path / "s", block_bytes=block)
    assert result is not None and result.n_launches == 4 and result.n_kernels == 1
    _assert_same_bundle(tmp_path / "s", _in_memory(fixture, tmp_path / "m"))
    assert read_bundle(tmp_path / "s").manifest["source"]["dropped_non_kernel_rows"] == 12


@pytest.mark.parametrize("rows", [7, 100, 5000])
def test_sqlite_fixture_streams_to_the_in_memory_bundle(tmp_path, rows) -> None:
    result = stream_import(NERF, "sqlite", tmp_path / "s", chunk_rows=rows)
    assert result is not None and (result.n_launches, result.n_kernels) == (1106, 116)
    _assert_same_bundle(tmp_path / "s", _in_memory(NERF, tmp_path / "m"))
    bundle = read_bundle(tmp_path / "s")
    assert bundle.regions is not None and bundle.launches["region"].notna().any()


def test_sqlite_rows_out_of_start_order_are_sorted_by_sqlite(tmp_path) -> None:
    shuffled = tmp_path / "shuffled.sqlite"
    shutil.copy(NERF, shuffled)
    with sqlite3.connect(shuffled) as conn:  # rowid order now the reverse of start order
        conn.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET rowid = -rowid")
    result = stream_import(shuffled, "sqlite", tmp_path / "s", chunk_rows=50)
    assert result is not None and result.n_launches == 1106
    _assert_same_bundle(tmp_path / "s", _in_memory(shuffled, tmp_path / "m"))


def test_names_and_duplicates_across_chunk_boundaries(tmp_path) -> None:
    path, lines = _rows_with_names(tmp_path)
    kernel_rows = [i for i in range(1, len(lines)) if "Kernel" in lines[i]]
    doubled = lines[kernel_rows[10]]
    # the same record twice (dropped), and a record sharing its start but not its
    # correlation id (kept); every line its own block, so the boundary splits them
    start, duration, corr, rest = doubled.split(",", 3)
    twin = f"{start},{duration},{int(corr) + 1},{rest}"
    edited = [*lines[: kernel_rows[10] + 1], doubled, twin, *lines[kernel_rows[10] + 1 :]]
    path.write_text("\n".join(edited) + "\n")
    smallest_line = min(len(line) for line in edited[1:])
    result = stream_import(path, CSV, tmp_path / "s", block_bytes=smallest_line)
    assert result is not None
    assert result.n_launches == 12 * 4 + 1 and result.n_kernels == 7
    _assert_same_bundle(tmp_path / "s", _in_memory(path, tmp_path / "m"))
    warnings = read_bundle(tmp_path / "s").manifest["warnings"]
    assert any("dropped 1 duplicated kernel record" in w for w in warnings)


def _error(call) -> str:
    with pytest.raises(HilsimError) as info:
        call()
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(
    "edit",
    [
        lambda fields: fields.__setitem__(1, "1x5"),  # not a number
        lambda fields: fields.insert(3, "7"),  # a field too many
        lambda fields: fields.__setitem__(1, "1e30"),  # beyond int64
        lambda fields: fields.__setitem__(1, "-5"),  # negative duration
    ],
    ids=["not-a-number", "extra-field", "int64", "negative"],
)
def test_bad_row_mid_file_is_one_error_naming_file_and_row(tmp_path, edit) -> None:
    path, lines = _rows_with_names(tmp_path)
    target = [i for i in range(1, len(lines)) if "Kernel" in lines[i]][25]
    fields = lines[target].split(",")
    edit(fields)
    lines[target] = ",".join(fields)
    path.write_text("\n".join(lines) + "\n")
    expected = _error(lambda: import_profile(path))
    for block in (40, 1000, 1 << 20):
        got = _error(lambda b=block: stream_import(path, CSV, tmp_path / "s", block_bytes=b))
        assert got == expected
        assert str(path) in got and ("line" in got or "row" in got)
        assert not (tmp_path / "s").exists()


def test_csv_not_in_start_order_falls_back_to_memory(tmp_path) -> None:
    path, lines = _rows_with_names(tmp_path)
    body = lines[1:]
    half = len(body) // 2
    path.write_text("\n".join([lines[0], *body[half:], *body[:half]]) + "\n")
    assert stream_import(path, CSV, tmp_path / "s", block_bytes=200) is None
    assert not (tmp_path / "s").exists()
    # one block: the chunk is sorted as the in-memory import sorts it
    assert stream_import(path, CSV, tmp_path / "one", block_bytes=1 << 20) is not None
    _assert_same_bundle(tmp_path / "one", _in_memory(path, tmp_path / "m"))


def test_cli_import_streams_large_files(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setattr(streaming, "STREAM_MIN_BYTES", 0)
    monkeypatch.setattr(streaming, "SQLITE_CHUNK_ROWS", 100)
    calls: list[str] = []
    real = streaming.stream_import
    monkeypatch.setattr(
        streaming, "stream_import", lambda *a, **k: calls.append(str(a[0])) or real(*a, **k)
    )
    assert main(["import", str(NERF), "-o", str(tmp_path / "s")]) == 0
    assert calls == [str(NERF)]
    assert "1106 launches, 116 kernels" in capsys.readouterr().out
    _assert_same_bundle(tmp_path / "s", _in_memory(NERF, tmp_path / "m"))
    path, lines = _rows_with_names(tmp_path)
    lines[30] = lines[30].replace(",", ",,", 1)
    path.write_text("\n".join(lines) + "\n")
    assert main(["import", str(path), "-o", str(tmp_path / "bad")]) != 0
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1
    assert str(path) in err.replace("\n", "") and "line 31" in err


def test_sqlite_columnar_reader_stopping_mid_way_restarts_with_sqlite3(
    tmp_path, monkeypatch
) -> None:
    # a REAL cell in an integer column after several chunks were written: the columnar
    # reader stops, the first file is discarded and the rows are read again by sqlite3
    odd = tmp_path / "odd.sqlite"
    shutil.copy(NERF, odd)
    with sqlite3.connect(odd) as conn:
        last = conn.execute("SELECT max(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
        conn.execute(f"UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET gridX = 9.5 WHERE rowid = {last}")
    conn.close()
    readers = []
    original = nsys_sqlite.kernel_frames

    def spy(*args, **kwargs):
        readers.append(kwargs.get("columnar", True))
        return original(*args, **kwargs)

    monkeypatch.setattr(nsys_sqlite, "kernel_frames", spy)
    result = stream_import(odd, "sqlite", tmp_path / "s", chunk_rows=100)
    assert readers == [True, False]
    assert result is not None and result.n_launches == 1106
    _assert_same_bundle(tmp_path / "s", _in_memory(odd, tmp_path / "m"))
    assert not (tmp_path / "s" / streaming._STAGE).exists()
