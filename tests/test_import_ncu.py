"""Nsight Compute CSV importer, on real ncu output excerpts (tests/data/ncu/README.md)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hilsim.core.errors import HilsimError
from hilsim.core.schema import normalize_launches
from hilsim.formats.ncu_csv import (
    NcuTable,
    join_metrics,
    read_ncu_csv,
    read_ncu_metrics_for_bundle,
    unit_factor,
)

DATA = Path(__file__).parent / "data" / "ncu"
DETAILS_2020 = DATA / "xplacer_cfd_097K_details_2020.log"
RAW_2025 = DATA / "decodebench_flashinfer_b1_ctx4k_raw_2025.csv"


def _launches_from(ncu: NcuTable, before: list[str] = (), after: list[str] = ()) -> pd.DataFrame:
    """A launches table whose middle matches the ncu rows (names, grid, block)."""
    frame = ncu.launches.drop(columns=["ncu_id", "grid_size", "block_size"], errors="ignore")
    pad = lambda names: pd.DataFrame({"name": list(names)})  # noqa: E731
    frame = pd.concat([pad(before), frame, pad(after)], ignore_index=True)
    frame["duration_ns"] = 1000
    return normalize_launches(frame, "test")


# ---------------------------------------------------------------- details (long) layout


def test_details_2020_parses_launches_and_metrics() -> None:
    ncu = read_ncu_csv(DETAILS_2020)
    assert ncu.layout == "details"
    assert ncu.launches["ncu_id"].tolist() == [0, 1]
    assert ncu.launches["name"].tolist() == ["cuda_compute_step_factor", "cuda_compute_flux"]
    # this ncu version has no Block/Grid columns: only the totals from Launch Statistics
    assert "grid_x" not in ncu.launches.columns
    assert ncu.launches["grid_size"].tolist() == [506, 506]
    assert ncu.launches["block_size"].tolist() == [192, 192]
    m = ncu.metrics.set_index("ncu_id")
    assert m.loc[0, "Duration"] == 10720.0
    assert m.loc[1, "Duration"] == 39200.0
    assert m.loc[0, "Executed Instructions"] == 689172.0
    assert m.loc[1, "Registers Per Thread"] == 58.0
    assert m.loc[0, "Memory Throughput"] == pytest.approx(303122388059.70)
    assert m.loc[1, "Achieved Occupancy"] == 38.71
    assert ncu.units["Duration"] == "nsecond"
    assert ncu.units["Achieved Occupancy"] == "%"
    assert len(m.columns) == 52
    assert all(dtype == np.float64 for dtype in m.dtypes)


def test_details_units_are_converted_per_row(tmp_path: Path) -> None:
    """ncu scales each value separately; a usecond row must become nanoseconds."""
    text = DETAILS_2020.read_text()
    edited = text.replace('"Duration","nsecond","39200"', '"Duration","usecond","39.20"').replace(
        '"Memory Throughput","byte/second","300965714285.71"',
        '"Memory Throughput","Gbyte/second","300.97"',
    )
    assert edited != text
    path = tmp_path / "scaled.csv"
    path.write_text(edited)
    m = read_ncu_csv(path).metrics.set_index("ncu_id")
    assert m.loc[1, "Duration"] == pytest.approx(39200.0)
    assert m.loc[0, "Duration"] == 10720.0
    assert m.loc[1, "Memory Throughput"] == pytest.approx(300.97e9)


def test_locale_grouping_and_na(tmp_path: Path) -> None:
    """Grouped thousands and n/a (as newer ncu prints them), edited into a real file."""
    text = DETAILS_2020.read_text()
    edited = text.replace(
        '"Executed Instructions","inst","4056569"', '"Executed Instructions","inst","4,056,569"'
    )
    edited = edited.replace('"L1 Hit Rate","%","0"', '"L1 Hit Rate","%","n/a"', 1)
    edited = edited.replace('"Threads","thread","97152"', '"Threads","thread","97,152"', 1)
    path = tmp_path / "grouped.csv"
    path.write_text(edited)
    m = read_ncu_csv(path).metrics.set_index("ncu_id")
    assert m.loc[1, "Executed Instructions"] == 4056569.0
    assert m.loc[0, "Threads"] == 97152.0
    assert np.isnan(m.loc[0, "L1 Hit Rate"])
    assert m.loc[1, "L1 Hit Rate"] == 28.67


# ---------------------------------------------------------------- raw (wide) layout


def test_raw_2025_parses_launches_and_metrics() -> None:
    ncu = read_ncu_csv(RAW_2025)
    assert ncu.layout == "raw"
    launches = ncu.launches
    assert launches["ncu_id"].tolist() == [0, 1]
    assert launches["name"].iloc[1].startswith("void BatchDecodeWithPagedKVCacheKernel<0, 2, 1")
    assert launches[["grid_x", "grid_y", "grid_z"]].iloc[0].tolist() == [148, 1, 1]
    assert launches[["block_x", "block_y", "block_z"]].iloc[1].tolist() == [16, 4, 2]
    assert launches["grid_size"].tolist() == [148, 256]
    m = ncu.metrics.set_index("ncu_id")
    assert m.loc[0, "gpu__time_duration.sum"] == 9920.0  # unit "ns" in the file
    assert m.loc[1, "gpu__time_duration.sum"] == 23872.0
    assert ncu.units["gpu__time_duration.sum"] == "nsecond"
    assert m.loc[1, "launch__grid_size"] == 256.0
    assert m.loc[0, "launch__registers_per_thread"] == 40.0
    assert m.loc[1, "sm__inst_executed.sum.per_cycle_active"] == 265.94
    assert m.loc[0, "launch__shared_mem_per_block_dynamic"] == 8704.0
    # text-valued metrics are not numeric columns; the units row is not a launch
    assert "device__attribute_display_name" not in m.columns
    assert "launch__func_cache_config" not in m.columns
    assert len(m) == 2
    assert all(dtype == np.float64 for dtype in m.dtypes)


@pytest.mark.slow
def test_raw_units_conversion(tmp_path: Path) -> None:
    lines = RAW_2025.read_text().splitlines()
    header = lines[2].split('","')
    col = header.index("gpu__time_duration.sum")
    units = lines[3].split('","')
    assert units[col] == "ns"
    units[col] = "us"
    row0 = lines[4].split('","')
    row0[col] = "9.92"
    lines[3], lines[4] = '","'.join(units), '","'.join(row0)
    path = tmp_path / "us.csv"
    path.write_text("\n".join(lines) + "\n")
    m = read_ncu_csv(path).metrics.set_index("ncu_id")
    assert m.loc[0, "gpu__time_duration.sum"] == pytest.approx(9920.0)


def test_unit_factor_table() -> None:
    assert unit_factor("nsecond") == ("nsecond", 1.0)
    assert unit_factor("msecond") == ("nsecond", 1e6)
    assert unit_factor("Kbyte") == ("byte", 1e3)
    assert unit_factor("Mbyte") == ("byte", 1e6)
    assert unit_factor("Gbyte/second") == ("byte/second", 1e9)
    assert unit_factor("cycle/nsecond") == ("cycle/second", pytest.approx(1e9))
    assert unit_factor("%") == ("%", 1.0)
    assert unit_factor("") == ("", 1.0)


# ---------------------------------------------------------------- joining


def test_join_by_order_details() -> None:
    ncu = read_ncu_csv(DETAILS_2020)
    launches = _launches_from(ncu, before=["init", "memset"], after=["tail"])
    metrics = join_metrics(launches, ncu, by="order", first_launch=2)
    assert metrics["launch_id"].tolist() == [2, 3]
    assert metrics["launch_id"].dtype == np.int64
    assert metrics.set_index("launch_id").loc[3, "Duration"] == 39200.0


@pytest.mark.slow
def test_join_by_order_raw_checks_grid_and_block() -> None:
    ncu = read_ncu_csv(RAW_2025)
    launches = _launches_from(ncu)
    metrics = read_ncu_metrics_for_bundle(RAW_2025, launches)
    assert metrics["launch_id"].tolist() == [0, 1]
    assert metrics.set_index("launch_id").loc[1, "gpu__time_duration.sum"] == 23872.0
    # same names, different grid -> error naming both sides
    launches.loc[1, "grid_y"] = 4
    with pytest.raises(HilsimError) as info:
        join_metrics(launches, ncu)
    message = str(info.value)
    assert "\n" not in message
    assert "ID 1" in message and "launch 1" in message
    assert "grid (32, 8, 1)" in message and "grid (32, 4, 1)" in message


def test_join_by_id() -> None:
    ncu = read_ncu_csv(RAW_2025)
    metrics = join_metrics(_launches_from(ncu), ncu, by="id")
    assert metrics["launch_id"].tolist() == [0, 1]


def test_join_name_mismatch_is_one_line() -> None:
    ncu = read_ncu_csv(DETAILS_2020)
    launches = _launches_from(ncu)
    swapped = launches.copy()
    swapped["name"] = pd.Categorical(["cuda_compute_flux", "cuda_compute_step_factor"])
    swapped = normalize_launches(swapped.drop(columns=["kernel"]), "test")
    with pytest.raises(HilsimError) as info:
        join_metrics(swapped, ncu, by="order")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(str(DETAILS_2020))
    assert "ID 0 is 'cuda_compute_step_factor' but launch 0 is 'cuda_compute_flux'" in message
    assert "joined by order from launch 0" in message


def test_join_mismatch_with_demangled_names() -> None:
    ncu = read_ncu_csv(RAW_2025)
    launches = _launches_from(ncu)
    names = launches["name"].astype(str).tolist()
    names[0], names[1] = names[1], names[0]
    launches = normalize_launches(launches.drop(columns=["kernel"]).assign(name=names), "test")
    with pytest.raises(
        HilsimError,
        match="ID 0 is 'PersistentVariableLengthMergeStatesKernel' "
        "but launch 0 is 'BatchDecodeWithPagedKVCacheKernel'",
    ):
        join_metrics(launches, ncu)


def test_join_too_few_launches() -> None:
    ncu = read_ncu_csv(DETAILS_2020)
    launches = _launches_from(ncu)
    with pytest.raises(HilsimError, match="ncu profiled 2 launches but only 1 launches remain"):
        join_metrics(launches, ncu, by="order", first_launch=1)


@pytest.mark.slow
def test_join_truncated_ncu_name_matches() -> None:
    ncu = read_ncu_csv(RAW_2025)
    launches = _launches_from(ncu)
    ncu.launches.loc[1, "name"] = ncu.launches.loc[1, "name"][:40]  # ncu cut the name short
    assert join_metrics(launches, ncu)["launch_id"].tolist() == [0, 1]


# ---------------------------------------------------------------- bad input


def _one_line_naming(info: pytest.ExceptionInfo, path: Path) -> str:
    message = str(info.value)
    assert "\n" not in message
    assert str(path) in message
    return message


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.csv"
    path.write_text("")
    with pytest.raises(HilsimError) as info:
        read_ncu_csv(path)
    assert "empty" in _one_line_naming(info, path)


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.csv"
    with pytest.raises(HilsimError) as info:
        read_ncu_csv(path)
    _one_line_naming(info, path)


def test_truncated_details_file(tmp_path: Path) -> None:
    text = DETAILS_2020.read_text()
    path = tmp_path / "cut.csv"
    path.write_text(text[: text.index('"Theoretical Occupancy","%","46.88"') + 20])
    with pytest.raises(HilsimError) as info:
        read_ncu_csv(path)
    assert "truncated" in _one_line_naming(info, path)


def test_truncated_raw_file(tmp_path: Path) -> None:
    text = RAW_2025.read_text()
    path = tmp_path / "cut.csv"
    path.write_text(text[: len(text) - 3000])
    with pytest.raises(HilsimError) as info:
        read_ncu_csv(path)
    assert "truncated" in _one_line_naming(info, path)


def test_other_tool_csv_is_rejected(tmp_path: Path) -> None:
    """The bundle's own launches table exported as CSV: not ncu output."""
    launches = _launches_from(read_ncu_csv(DETAILS_2020))
    path = tmp_path / "launches.csv"
    launches.to_csv(path, index=False)
    with pytest.raises(HilsimError) as info:
        read_ncu_csv(path)
    assert "not an Nsight Compute CSV" in _one_line_naming(info, path)


def test_header_only_raw_file(tmp_path: Path) -> None:
    path = tmp_path / "header.csv"
    path.write_text("\n".join(RAW_2025.read_text().splitlines()[:4]) + "\n")
    with pytest.raises(HilsimError) as info:
        read_ncu_csv(path)
    assert "no launches" in _one_line_naming(info, path)
