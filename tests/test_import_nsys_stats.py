"""read_nsys_stats_csv on real `nsys stats --format csv` cuda_gpu_trace output.

Fixtures (tests/data/nsys/README.md): cuda_gpu_trace reports of the same saxpy demo
from nsys 2025.3.2 (Jetson AGX Thor) and nsys 2026.3.1 (RTX 5000 Ada laptop GPU).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hilsim.core.errors import HilsimError
from hilsim.core.schema import normalize_launches
from hilsim.formats import nsys_stats
from hilsim.formats.nsys_stats import read_nsys_stats_csv

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
    # header of cuda_kern_exec_trace as documented in docs/formats.md; no real rows found
    path = tmp_path / "kern_exec_header.csv"
    path.write_text(
        "API Start (ns),API Dur (ns),Queue Start (ns),Queue Dur (ns),Kernel Start (ns),"
        "Kernel Dur (ns),Total Dur (ns),PID,TID,DevId,API Function,GridXYZ,BlockXYZ,"
        "Kernel Name\n"
    )
    assert "no kernel rows" in _one_line_error(path)


# ------------------------------------------------------------------ fast and exact paths
# read_nsys_stats_csv reads a well-formed file with the fast path (_read_fast: pandas'
# C parser, numbers straight to float, names as categoricals) and anything else with the
# exact path (read_exact: every cell a string, line-numbered errors). Both must agree.


def _both(path: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    fast = nsys_stats._read_fast(path)
    assert fast is not None, "the fast path should read this file"
    exact = nsys_stats.read_exact(path)
    assert fast[1:] == exact[1:]  # report, dropped rows
    return normalize_launches(fast[0], str(path)), normalize_launches(exact[0], str(path))


def _variants(tmp_path: Path) -> list[Path]:
    """The real files and well-formed rewrites of them (preamble, units, line ends...)."""
    thor = THOR.read_text()
    lines = thor.splitlines(keepends=True)
    out = [THOR, ADA]

    def write(name: str, text: str, newline: str = "\n") -> None:
        path = tmp_path / name
        with open(path, "w", encoding="utf-8", newline=newline) as handle:
            handle.write(text)
        out.append(path)

    write("preamble.csv", "\nGenerating SQLite file r.sqlite\nNOTICE: x\n\n" + thor)
    grouped = [lines[0].replace("(ns)", "(us)")] + lines[1:]
    grouped[3] = grouped[3].replace(",40672,", ',"40,672",', 1)
    write("us_grouped.csv", "".join(grouped))
    write("old_names.csv", thor.replace("CorrId", "CorrID").replace("StcSMem (MB)", "StcSMem"))
    write("crlf.csv", thor, newline="\r\n")
    write("bom.csv", "\ufeff" + thor)
    write("blank_lines.csv", "".join(lines[:5]) + "\n  \n" + "".join(lines[5:]) + "\n\n \n")
    write("padded_name.csv", thor.replace('"vernier::', '"  vernier::'))
    return out


@pytest.mark.slow
def test_fast_and_exact_paths_give_identical_tables(tmp_path: Path) -> None:
    for path in _variants(tmp_path):
        fast, exact = _both(path)
        pd.testing.assert_frame_equal(fast, exact)
        assert list(fast["name"].astype(str).unique()) == [SAXPY]
        public = read_nsys_stats_csv(path)
        pd.testing.assert_frame_equal(public, fast)


def test_kern_exec_rows_fast_and_exact(tmp_path: Path) -> None:
    # rows in the documented cuda_kern_exec_trace layout (no real file of it was found)
    path = tmp_path / "kern_exec.csv"
    path.write_text(
        "API Start (ns),API Dur (ns),Queue Start (ns),Queue Dur (ns),Kernel Start (ns),"
        "Kernel Dur (ns),Total Dur (ns),PID,TID,DevId,API Function,GridXYZ,BlockXYZ,"
        "Kernel Name\n"
        '100,5,105,2,110,40,55,7,7,0,cudaLaunchKernel_v7000,"  4096    1    1",'
        '"  256    1    1",void k<float>(int)\n'
        '200,5,205,2,210,35,50,7,7,1,cudaLaunchKernel_v7000,"    64    2    1",'
        '"  128    1    1",g\n'
    )
    fast, exact = _both(path)
    pd.testing.assert_frame_equal(fast, exact)
    assert list(fast["grid_x"]) == [4096, 64] and list(fast["grid_y"]) == [1, 2]
    assert list(fast["device"]) == [0, 1] and list(fast["duration_ns"]) == [40, 35]
    assert list(fast["kernel"].astype(str)) == ["k", "g"]


def test_unused_number_columns_are_read_as_numbers_and_text_later_on_is_kept(
    tmp_path: Path,
) -> None:
    # the unused start/duration columns look numeric in the sampled first rows: the fast
    # path reads them as float64 (not categoricals of a million distinct values); a text
    # cell past the sample in such a column makes it read them as categoricals after all
    header = (
        "API Start (ns),API Dur (ns),Queue Start (ns),Queue Dur (ns),Kernel Start (ns),"
        "Kernel Dur (ns),Total Dur (ns),PID,TID,DevId,API Function,GridXYZ,BlockXYZ,"
        "Kernel Name\n"
    )
    n = nsys_stats._LOOSE_SAMPLE_ROWS + 40
    rows = [
        f'{100 * i},5,{100 * i + 5},2,{100 * i + 10},{30 + i % 7},50,7,7,0,cudaLaunchKernel,'
        f'"  64    1    1","  128    1    1",k{i % 3}\n'
        for i in range(n)
    ]
    plain = tmp_path / "plain.csv"
    plain.write_text(header + "".join(rows))
    layout = nsys_stats.fast_layout(plain)
    assert layout is not None
    assert layout.loose == ["c0", "c1", "c2", "c3", "c6", "c7", "c8"]  # not the used ones
    late_text = rows.copy()
    late_text[-3] = late_text[-3].replace(f"{100 * (n - 3)},5,", f"{100 * (n - 3)},n/a,", 1)
    odd = tmp_path / "late_text.csv"
    odd.write_text(header + "".join(late_text))
    for path in (plain, odd):
        fast, exact = _both(path)
        pd.testing.assert_frame_equal(fast, exact)
        assert len(fast) == n and list(fast["duration_ns"][:3]) == [30, 31, 32]
    with open(odd, "rb") as handle:  # the first parse fails on "n/a", the second reads it
        handle.seek(layout.body_offset)
        table = nsys_stats.fast_table(odd, layout, handle)
    assert table is not None and str(table["c1"].dtype) == "category"


def _message(read: Callable[[Path], object], path: Path) -> str:
    with pytest.raises(HilsimError) as info:
        read(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message
    return message


def _bad_files(tmp_path: Path) -> dict[str, Path]:
    text = THOR.read_text()
    lines = text.splitlines(keepends=True)
    cases = {
        "truncated_last_row": text[: text.index("292289723,22624,162,") + 20],
        "cut_in_quoted_name": text[: text.index('"vernier::bench') + 20],
        "extra_field": "".join(lines[:6]) + lines[6].rstrip("\n") + ",x\n" + "".join(lines[7:]),
        "not_a_number": text.replace("268682427,40672,", "268682427,4O672,", 1),
        "negative": text.replace("268682427,40672,", "268682427,-40672,", 1),
        "short_row": "".join(lines[:4]) + "268700000,5,129,1,1\n" + "".join(lines[4:]),
        "empty_name": text.replace('"vernier::bench::demo::<unnamed>::saxpyKernel', '" ', 1)
        .replace('(float, const float *, float *, unsigned long)"', '"', 1),
        "copies_only": "".join(line for line in lines if "saxpyKernel" not in line),
        "no_start_column": text.replace("Start (ns)", "Begin (ns)", 1),
    }
    out = {}
    for name, body in cases.items():
        out[name] = tmp_path / f"{name}.csv"
        out[name].write_text(body)
    return out


@pytest.mark.slow
def test_errors_are_worded_as_the_exact_path_words_them(tmp_path: Path) -> None:
    for name, path in _bad_files(tmp_path).items():
        exact = _message(nsys_stats.read_exact, path)
        assert _message(read_nsys_stats_csv, path) == exact, name
        if name in ("truncated_last_row", "cut_in_quoted_name", "extra_field", "copies_only"):
            # raised by the fast path itself (no whole-file fallback for these)
            assert _message(nsys_stats._read_fast, path) == exact, name
        else:
            assert nsys_stats._read_fast(path) is None, name
    assert "line 16: truncated row (4 of 21 fields)" in _message(
        read_nsys_stats_csv, tmp_path / "truncated_last_row.csv"
    )
    assert "line 7: malformed CSV row" in _message(
        read_nsys_stats_csv, tmp_path / "extra_field.csv"
    )
    assert "line 5: row without 'Name'" in _message(
        read_nsys_stats_csv, tmp_path / "short_row.csv"
    )


def test_truncated_last_row_of_a_long_file_is_found_from_its_tail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ~3,000 rows; a small tail window makes the reader widen it, and the line number is
    # counted over the file without the exact path (which must not run)
    lines = THOR.read_text().splitlines(keepends=True)
    body = "".join(lines[1:]) * 200
    cut = lines[3][:25]  # "268682427,40672,128,4096,"
    path = tmp_path / "long_truncated.csv"
    path.write_text(lines[0] + "\n" + body + cut)  # header, a blank line, 3,200 rows
    monkeypatch.setattr(nsys_stats, "_TAIL_BYTES", 16)
    monkeypatch.setattr(nsys_stats, "read_exact", lambda p: pytest.fail("exact path ran"))
    message = _message(read_nsys_stats_csv, path)
    assert message.endswith(f"line {2 + 16 * 200 + 1}: truncated row (5 of 21 fields)")


def test_first_row_with_an_extra_field_is_named_in_a_two_row_file(tmp_path: Path) -> None:
    # pandas turns the extra field of a first row into an index; with evenly spaced values
    # (any two rows) that index is a RangeIndex, so an index-type test missed it
    path = tmp_path / "extra_first.csv"
    path.write_text(
        "API Start (ns),API Dur (ns),Queue Start (ns),Queue Dur (ns),Kernel Start (ns),"
        "Kernel Dur (ns),Total Dur (ns),PID,TID,DevId,API Function,GridXYZ,BlockXYZ,"
        "Kernel Name\n"
        "1,2,3,4,5,6,7,8,9,0,f,1 1 1,1 1 1,k,EXTRA\n"
        "10,2,3,4,50,6,7,8,9,0,f,1 1 1,1 1 1,k\n"
    )
    message = _one_line_error(path)
    assert "line 2: malformed CSV row" in message and "Expected 14 fields, saw 15" in message


# ------------------------------------------------------------------ columnar reader
# read_arrow (Arrow's CSV reader, only the columns asked for) is tried first; it vouches
# only for plain files and must give the fast reader's table on every one it reads.


def _columnar_and_fast(path: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    columnar = nsys_stats.read_arrow(path)
    assert columnar is not None, "the columnar reader should read this file"
    fast = nsys_stats._read_fast(path)
    assert fast is not None and columnar[1:] == fast[1:]  # report, dropped rows
    return normalize_launches(columnar[0], str(path)), normalize_launches(fast[0], str(path))


def test_columnar_reader_gives_the_fast_readers_table(tmp_path: Path) -> None:
    plain = [p for p in _variants(tmp_path) if p.name not in ("us_grouped.csv", "blank_lines.csv")]
    assert len(plain) == 7
    for path in plain:
        columnar, fast = _columnar_and_fast(path)
        pd.testing.assert_frame_equal(columnar, fast)
        pd.testing.assert_frame_equal(read_nsys_stats_csv(path), fast)
    # times in another unit and grouped digits, blank lines: left to the other readers
    for name in ("us_grouped.csv", "blank_lines.csv"):
        assert nsys_stats.read_arrow(tmp_path / name) is None, name


def test_columnar_reader_on_kern_exec_triples_and_devices(tmp_path: Path) -> None:
    path = tmp_path / "kern_exec.csv"
    path.write_text(
        "API Start (ns),API Dur (ns),Queue Start (ns),Queue Dur (ns),Kernel Start (ns),"
        "Kernel Dur (ns),Total Dur (ns),PID,TID,DevId,API Function,GridXYZ,BlockXYZ,"
        "Kernel Name\n"
        '100,5,105,2,110,40,55,7,7,0,cudaLaunchKernel_v7000,"  4096    1    1",'
        '"  256    1    1","void k<float>(int, float*)"\n'
        '200,5,205,2,210,35,50,7,7,1,cudaLaunchKernel_v7000,"    64    2    1",'
        '"  128    1    1",g\n'
        '300,5,305,2,310,33,50,7,7,1,cudaLaunchKernel_v7000,"    64    2    1",'
        '"  128    1    1",  g  \n'
    )
    columnar, fast = _columnar_and_fast(path)
    pd.testing.assert_frame_equal(columnar, fast)
    assert list(columnar["grid_x"]) == [4096, 64, 64] and list(columnar["device"]) == [0, 1, 1]
    assert list(columnar["name"].astype(str)) == ["void k<float>(int, float*)", "g", "g"]
    # only the columns asked for (and those every table needs) are converted
    launches = read_nsys_stats_csv(path, columns=())
    assert launches["grid_x"].isna().all() and launches["block_x"].isna().all()
    for column in ("start_ns", "duration_ns", "device", "name", "kernel", "launch_id"):
        pd.testing.assert_series_equal(launches[column], fast[column])


def test_columnar_reader_leaves_what_it_does_not_vouch_for(tmp_path: Path) -> None:
    # every malformed file goes to the other readers (they word the error)
    for name, path in _bad_files(tmp_path).items():
        assert nsys_stats.read_arrow(path) is None, name
    text = THOR.read_text()
    lines = text.splitlines(keepends=True)
    cases = {
        # a byte that is not UTF-8 in a column the columnar reader does not convert
        "latin1": text.replace("[CUDA memcpy Host-to-Device]", "[CUDA memcpy H\xe9]", 1)
        .encode("latin-1"),
        # past 2^53: the float readers' value would differ from the exact integer
        "huge_start": text.replace("268682427,40672,", f"{2**53 + 1},40672,", 1).encode(),
        # a quote left open in the last name (the rest of the file taken as one value)
        "open_quote": ("".join(lines[:-2]) + lines[-2].rstrip("\n").rstrip('"') + "\n").encode(),
        # a quoted name over two lines
        "name_over_lines": text.replace("saxpyKernel(float,", "saxpyKernel(\nfloat,", 1).encode(),
    }
    for name, body in cases.items():
        path = tmp_path / f"{name}.csv"
        path.write_bytes(body)
        assert nsys_stats.read_arrow(path) is None, name
    assert "not UTF-8" in _one_line_error(tmp_path / "latin1.csv")
    assert "malformed CSV" in _one_line_error(tmp_path / "open_quote.csv")
    fast = nsys_stats._read_fast(tmp_path / "huge_start.csv")
    assert fast is not None
    pd.testing.assert_frame_equal(
        read_nsys_stats_csv(tmp_path / "huge_start.csv"),
        normalize_launches(fast[0], str(tmp_path / "huge_start.csv")),
    )


def test_columnar_reader_reads_a_quoted_line_break_across_its_block_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # blocks are first cut at line breaks; a quoted value holding one across a cut is
    # refused by Arrow there and the file read again with quote-aware cuts: the same table
    monkeypatch.setattr(nsys_stats, "_ARROW_BLOCK_BYTES", 4096)
    header = (
        "API Start (ns),API Dur (ns),Queue Start (ns),Queue Dur (ns),Kernel Start (ns),"
        "Kernel Dur (ns),Total Dur (ns),PID,TID,DevId,API Function,GridXYZ,BlockXYZ,"
        "Kernel Name\n"
    )

    def body(broken: int) -> str:
        rows = []
        for i in range(400):
            api = '"cudaLaunch\nKernel"' if i == broken else "cudaLaunchKernel"
            rows.append(f'{i * 100},5,{i * 100 + 5},2,{i * 100 + 10},{30 + i % 7},50,7,7,0,'
                        f'{api},"    64    2    1","  128    1    1","k{i % 3}"\n')
        return header + "".join(rows)

    path = tmp_path / "kern_exec.csv"
    layout_types = None
    straddles = 0
    for broken in range(20, 80):
        path.write_text(body(broken))
        layout = nsys_stats.fast_layout(path)
        assert layout is not None
        plan = nsys_stats._arrow_types(layout, set(nsys_stats.ALWAYS_READ))
        layout_types = {label: kind for label, (_, _, kind) in plan.items()}
        try:  # line-break cuts only: refused where the quoted value spans a cut
            with nsys_stats.pa.OSFile(str(path)) as handle:
                handle.seek(layout.body_offset)
                nsys_stats.pa_csv.read_csv(
                    handle,
                    read_options=nsys_stats.pa_csv.ReadOptions(
                        column_names=[f"c{i}" for i in range(layout.n_fields)],
                        skip_rows=1, block_size=4096),
                    parse_options=nsys_stats.pa_csv.ParseOptions(newlines_in_values=False),
                    convert_options=nsys_stats.pa_csv.ConvertOptions(
                        include_columns=list(layout_types), column_types=layout_types),
                )
            continue
        except nsys_stats.pa.ArrowInvalid:
            straddles += 1
        columnar, fast = _columnar_and_fast(path)
        pd.testing.assert_frame_equal(columnar, fast)
    assert straddles, "no placement of the quoted line break spans a block cut"
