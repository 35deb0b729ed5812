"""read_nsys_stats_csv on real `nsys stats --format csv` cuda_gpu_trace output.

Fixtures (tests/data/nsys/README.md): cuda_gpu_trace reports of the same saxpy demo
from nsys 2025.3.2 (Jetson AGX Thor) and nsys 2026.3.1 (RTX 5000 Ada laptop GPU).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from analyzer.errors import HilsimError
from analyzer.importers.nsys_stats import read_nsys_stats_csv

DATA = Path(__file__).parent / "data"
NSYS = DATA / "nsys"
THOR = NSYS / "vernier-nsys2025.3.2-thor_cuda_gpu_trace.csv"
ADA = NSYS / "vernier-nsys2026.3.1-rtx5000ada_cuda_gpu_trace.csv"
SAXPY = "vernier::bench::demo::<unnamed>::saxpyKernel(float, const float *, float *, unsigned long)"


def _one_line_error(path: Path) -> str:
    with pytest.raises(HilsimError) as info:
        read_nsys_stats_csv(path)
    message = str(info.value)
    assert "\n" not in message
    assert str(path) in message
    return message


@pytest.mark.parametrize("fixture", [THOR, ADA], ids=["nsys2025.3.2", "nsys2026.3.1"])
def test_real_gpu_trace_keeps_kernels_drops_copies(fixture: Path) -> None:
    launches = read_nsys_stats_csv(fixture)
    assert len(launches) == 4
    assert launches.attrs["nsys_report"] == "cuda_gpu_trace"
    assert launches.attrs["dropped_non_kernel_rows"] == 12
    assert list(launches["launch_id"]) == [0, 1, 2, 3]
    assert set(launches["name"].astype(str)) == {SAXPY}
    assert set(launches["kernel"].astype(str)) == {"saxpyKernel"}
    assert (launches["grid_x"] == 4096).all() and (launches["block_x"] == 256).all()
    assert (launches["grid_y"] == 1).all() and (launches["block_z"] == 1).all()
    assert (launches["regs"] == 16).all()
    assert (launches["smem_static"] == 0).all() and (launches["smem_dynamic"] == 0).all()
    assert (launches["device"] == 0).all()
    assert list(launches["stream"]) == [13, 13, 14, 14]
    assert list(launches["correlation_id"]) == [128, 135, 153, 162]
    assert np.all(np.diff(launches["start_ns"].to_numpy(dtype=np.int64)) > 0)
    assert launches["duration_ns"].dtype == np.int64


def test_values_match_the_file() -> None:
    launches = read_nsys_stats_csv(THOR)
    assert list(launches["start_ns"]) == [268682427, 269756795, 291318875, 292289723]
    assert list(launches["duration_ns"]) == [40672, 22528, 22624, 22624]
    ada = read_nsys_stats_csv(ADA)
    assert list(ada["duration_ns"]) == [7072, 6945, 6816, 6592]


def test_preamble_lines_before_header_are_skipped(tmp_path: Path) -> None:
    text = THOR.read_text()
    path = tmp_path / "with_preamble.csv"
    path.write_text(
        "\nGenerating SQLite file report1.sqlite from report1.nsys-rep\n"
        "Processing [report1.sqlite] with [/opt/nvidia/nsight-systems/reports/"
        "cuda_gpu_trace.py]... \n\n" + text
    )
    launches = read_nsys_stats_csv(path)
    assert list(launches["duration_ns"]) == [40672, 22528, 22624, 22624]


def test_us_header_and_grouped_numbers_are_converted(tmp_path: Path) -> None:
    # the real file with its time unit rewritten to us and one quoted grouped number
    lines = THOR.read_text().splitlines(keepends=True)
    lines[0] = (
        lines[0].replace("Start (ns)", "Start (us)").replace("Duration (ns)", "Duration (us)")
    )
    lines[3] = lines[3].replace(",40672,", ',"40,672",', 1)
    path = tmp_path / "us.csv"
    path.write_text("".join(lines))
    launches = read_nsys_stats_csv(path)
    assert launches["duration_ns"].iloc[0] == 40672 * 1000
    assert launches["start_ns"].iloc[0] == 268682427 * 1000


def test_old_column_names_are_accepted(tmp_path: Path) -> None:
    lines = THOR.read_text().splitlines(keepends=True)
    lines[0] = (
        lines[0]
        .replace("CorrId", "CorrID")
        .replace("Throughput (MB/s)", "Throughput (MBps)")
        .replace("StcSMem (MB)", "StcSMem")
        .replace("DymSMem (MB)", "DymSMem")
    )
    path = tmp_path / "old.csv"
    path.write_text("".join(lines))
    launches = read_nsys_stats_csv(path)
    assert list(launches["correlation_id"]) == [128, 135, 153, 162]


def test_truncated_file_names_file_and_line(tmp_path: Path) -> None:
    text = THOR.read_text()
    cut = text.index("268682427,40672,128,4096,1,1,256,") + len("268682427,40672,128,4096,1,1,256,")
    path = tmp_path / "truncated.csv"
    path.write_text(text[:cut])
    message = _one_line_error(path)
    assert "line 4" in message


def test_truncated_inside_quoted_name(tmp_path: Path) -> None:
    text = THOR.read_text()
    cut = text.index('"vernier::bench') + 20
    path = tmp_path / "truncated_quote.csv"
    path.write_text(text[:cut])
    _one_line_error(path)


def test_non_numeric_duration_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "bad_duration.csv"
    path.write_text(THOR.read_text().replace("268682427,40672,", "268682427,4O672,", 1))
    message = _one_line_error(path)
    assert "line 4" in message and "Duration (ns)" in message


def test_header_without_kernel_rows(tmp_path: Path) -> None:
    lines = THOR.read_text().splitlines(keepends=True)
    path = tmp_path / "copies_only.csv"
    path.write_text("".join(line for line in lines if "saxpyKernel" not in line))
    message = _one_line_error(path)
    assert "no kernel rows" in message and "12 memcpy/memset" in message


def test_csv_from_another_tool_is_refused() -> None:
    message = _one_line_error(DATA / "casio" / "casio-kernel-durations.csv")
    assert "not an nsys stats" in message


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.csv"
    path.write_text("")
    assert "empty" in _one_line_error(path)


def test_kern_exec_layout_header_only_is_no_kernels(tmp_path: Path) -> None:
    # header of cuda_kern_exec_trace as documented in FORMATS.md; no real rows found
    path = tmp_path / "kern_exec_header.csv"
    path.write_text(
        "API Start (ns),API Dur (ns),Queue Start (ns),Queue Dur (ns),Kernel Start (ns),"
        "Kernel Dur (ns),Total Dur (ns),PID,TID,DevId,API Function,GridXYZ,BlockXYZ,"
        "Kernel Name\n"
    )
    assert "no kernel rows" in _one_line_error(path)
