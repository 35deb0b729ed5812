"""read_wide_durations on the real CASIO per-kernel duration table (tests/data/casio)."""

from __future__ import annotations

import csv
import time
from pathlib import Path

import numpy as np
import pytest

from hilsim.core.errors import HilsimError
from hilsim.formats.wide_durations import read_wide_durations

CASIO = Path(__file__).parent / "data" / "casio" / "casio-kernel-durations.csv"


def _columns() -> tuple[list[str], list[list[int]]]:
    """The file read cell by cell with the csv module (independent reference)."""
    with open(CASIO, encoding="utf-8-sig", newline="") as handle:
        rows = list(csv.reader(handle))
    header = rows[0]
    columns = [
        [int(r[i]) for r in rows[1:] if i < len(r) and r[i].strip()] for i in range(len(header))
    ]
    return header, columns


def _one_line_error(path: Path) -> str:
    with pytest.raises(HilsimError) as info:
        read_wide_durations(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message
    return message


def test_casio_counts_and_sums_match_columns() -> None:
    header, columns = _columns()
    launches = read_wide_durations(CASIO)
    assert header[0] == "max_pool"  # BOM stripped
    assert len(launches) == sum(len(c) for c in columns)
    assert list(launches["launch_id"]) == list(range(len(launches)))
    sums = launches.groupby("name", observed=True)["duration_ns"].sum()
    counts = launches["name"].value_counts()
    for name, values in zip(header, columns, strict=True):
        assert counts[name] == len(values)
        assert sums[name] == sum(values)


@pytest.mark.slow
def test_casio_round_robin_order() -> None:
    header, columns = _columns()
    launches = read_wide_durations(CASIO)
    expected_names = []
    expected_durations = []
    for row in range(max(len(c) for c in columns)):
        for name, values in zip(header, columns, strict=True):
            if row < len(values):
                expected_names.append(name)
                expected_durations.append(values[row])
    # the columns are ragged only at the end, so row-major order equals this
    assert list(launches["name"].astype(str)[:12]) == expected_names[:12]
    assert launches["duration_ns"].to_numpy().tolist() == expected_durations
    assert list(launches["name"].astype(str)) == expected_names


def test_speed_casio_well_under_a_second() -> None:
    start = time.perf_counter()
    read_wide_durations(CASIO)
    assert time.perf_counter() - start < 1.0


def test_non_numeric_cell_names_line_and_column(tmp_path: Path) -> None:
    lines = CASIO.read_text(encoding="utf-8-sig").splitlines()
    cells = lines[4].split(",")
    cells[2] = "n/a"
    lines[4] = ",".join(cells)
    path = tmp_path / "bad.csv"
    path.write_text("\n".join(lines))
    message = _one_line_error(path)
    assert "line 5" in message and "unrolled_elementwise" in message


def test_no_numeric_columns(tmp_path: Path) -> None:
    path = tmp_path / "header_only.csv"
    path.write_text("max_pool,bn_fw_inf\n")
    assert "no numeric" in _one_line_error(path)


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.csv"
    path.write_text("")
    _one_line_error(path)


@pytest.mark.slow
def test_two_million_cells_in_seconds(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    values = rng.integers(10000, 99999, size=(200_000, 10))
    path = tmp_path / "big.csv"
    # fixed-width digits: build the file as bytes without a per-row Python loop
    digits = values.astype("S5").view(np.uint8).reshape(len(values), 10, 5)
    block = np.full((len(values), 10, 6), ord(","), dtype=np.uint8)
    block[:, :, :5] = digits
    block[:, -1, 5] = ord("\n")
    header = ",".join(f"k{i}" for i in range(10)) + "\n"
    path.write_bytes(header.encode() + block.tobytes())
    start = time.perf_counter()
    launches = read_wide_durations(path)
    elapsed = time.perf_counter() - start
    assert len(launches) == values.size
    assert launches["duration_ns"].iloc[:10].tolist() == values[0].tolist()
    assert elapsed < 5.0  # ~0.6 s here; 10M cells take ~3 s
