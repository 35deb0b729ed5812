"""What the attack inputs once broke in the importers stays fixed (huge values, size
guards, odd values, duplicates, ``.nsys-rep`` export, messages, warnings), each through
the real CLI entry and the real fixtures."""

from __future__ import annotations

import gzip
import json
import os
import time
import warnings

import numpy as np
import pytest

from hilsim.cli.main import main
from hilsim.core import limits
from hilsim.core.bundle import read_bundle
from hilsim.core.errors import HilsimError
from tests import reliability_inputs as inputs


def run(capsys, *argv: str) -> tuple[int, list[str], str]:
    """``hilsim ARGV`` in-process: (exit code, stderr lines, stdout)."""
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.err.splitlines(), captured.out


def refused(capsys, tmp_path, source, *words: str) -> str:
    """Import ``source``: exit 2, one stderr line containing ``words``, no bundle."""
    out = tmp_path / "bundle"
    code, err, _ = run(capsys, "import", source, "-o", out)
    assert code == 2, err
    assert len(err) == 1, err
    for word in words:
        assert word in err[0], err
    assert "Traceback" not in err[0] and "9223372036854775808" not in err[0]
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".bundle")]
    return err[0]


# --------------------------------------------------------------------------- huge durations

@pytest.mark.parametrize("value", ["9223372036854775807", "1e30", "99999999999999999999"])
def test_nsys_csv_huge_duration_refused(capsys, tmp_path, value):
    source = inputs.nsys_csv(tmp_path, 1, value)
    refused(capsys, tmp_path, source, str(source), "duration_ns", "2^63")


def test_sqlite_end_beyond_int64_refused(capsys, tmp_path):
    source = inputs.sqlite_copy(
        tmp_path,
        'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = start + 10000000000000000000 '
        "WHERE rowid = (SELECT min(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL)",
    )
    refused(capsys, tmp_path, source, str(source), "duration_ns", "2^63")


@pytest.mark.parametrize("dur", ["9223372036854775.807", "1e30", "1" + "0" * 30])
def test_kineto_huge_duration_refused(capsys, tmp_path, dur):
    events = inputs.kineto_events()
    text = json.dumps({"traceEvents": events}).replace(
        f'"dur": {json.dumps(events[3]["dur"])}', f'"dur": {dur}', 1
    )
    source = inputs.kineto_trace(tmp_path, raw=text)
    refused(capsys, tmp_path, source, str(source), "2^63")


@pytest.mark.parametrize("end", [2**63 + 5, 1e30, 10**30])
def test_cupti_records_huge_end_refused(capsys, tmp_path, end):
    kernels = [{"kind": "kernel", "name": "k", "start": 10, "end": end, "correlation_id": 1},
               {"kind": "kernel", "name": "k", "start": 20, "end": 30, "correlation_id": 2}]
    source = inputs.cupti_records(tmp_path, kernels)
    refused(capsys, tmp_path, source, str(source), "2^63")


@pytest.mark.parametrize("value", ["9223372036854775808", "1e30", "1e400"])
def test_wide_table_huge_duration_refused(capsys, tmp_path, value):
    source = inputs.wide_csv(tmp_path, value)
    refused(capsys, tmp_path, source, str(source), "2^63")


def test_start_plus_duration_beyond_int64_refused(capsys, tmp_path):
    source = inputs.nsys_csv(tmp_path, 0, str(2**63 - 10))
    refused(capsys, tmp_path, source, str(source), "2^63")


# ------------------------------------------------------------------------------- duplicates

def imported(capsys, tmp_path, source) -> tuple[object, list[str]]:
    out = tmp_path / "bundle"
    code, err, _ = run(capsys, "import", source, "-o", out)
    assert code == 0, err
    return read_bundle(out), err


def _n_once(capsys, tmp_path, source) -> int:
    folder = tmp_path / "once"
    folder.mkdir()
    bundle, err = imported(capsys, folder, source)
    assert err == []
    return bundle.n_launches


def test_sqlite_doubled_kernel_rows_dropped_with_warning(capsys, tmp_path):
    once = _n_once(capsys, tmp_path, inputs.SQLITE)
    doubled = inputs.sqlite_copy(
        tmp_path, "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL"
    )
    bundle, err = imported(capsys, tmp_path, doubled)
    assert once == 1106 and bundle.n_launches == once
    assert len(err) == 1 and "warning" in err[0] and f"dropped {once} duplicated" in err[0]
    assert bundle.manifest["warnings"] == [err[0].removeprefix("hilsim: warning: ")]


def test_nsys_csv_doubled_rows_dropped(capsys, tmp_path):
    once = _n_once(capsys, tmp_path, inputs.NSYS_CSV)
    bundle, err = imported(capsys, tmp_path, inputs.nsys_csv(tmp_path, double=True))
    assert bundle.n_launches == once and len(err) == 1 and f"dropped {once} dup" in err[0]


def test_kineto_doubled_kernels_dropped(capsys, tmp_path):
    events = inputs.kineto_events()
    bundle, err = imported(capsys, tmp_path, inputs.kineto_trace(tmp_path, events + events))
    assert bundle.n_launches == len(events)
    assert len(err) == 1 and f"dropped {len(events)} duplicated" in err[0]


def test_cupti_doubled_records_dropped(capsys, tmp_path):
    kernels = [{"kind": "kernel", "name": "k", "start": 10 * i, "end": 10 * i + 5,
                "correlation_id": i, "device_id": 0, "stream_id": 7} for i in range(5)]
    bundle, err = imported(capsys, tmp_path, inputs.cupti_records(tmp_path, kernels + kernels))
    assert bundle.n_launches == 5 and len(err) == 1 and "dropped 5 duplicated" in err[0]


def test_same_start_other_stream_is_kept(capsys, tmp_path):
    kernels = [{"kind": "kernel", "name": "k", "start": 10, "end": 15, "correlation_id": 1,
                "device_id": 0, "stream_id": s} for s in (7, 8)]
    bundle, err = imported(capsys, tmp_path, inputs.cupti_records(tmp_path, kernels))
    # kept, with no duplicate warning (the overlapping-streams warning is right here)
    assert bundle.n_launches == 2 and not [line for line in err if "duplicated" in line]


# ------------------------------------------------------------------------- odd CUPTI values

@pytest.mark.parametrize(
    "field,value,words",
    [
        ("start", "10", "'start' is not a number"),
        ("end", [1], "'end' is not a number"),
        ("end", float("nan"), "NaN is not a JSON value"),  # strict JSON, as every reader
        ("name", 5, "'name' is not text"),
    ],
)
def test_cupti_odd_values_one_line(capsys, tmp_path, field, value, words):
    kernel = {"kind": "kernel", "name": "k", "start": 10, "end": 20, "correlation_id": 1}
    kernel[field] = value
    source = inputs.cupti_records(tmp_path, [kernel])
    refused(capsys, tmp_path, source, str(source), "line 2", words)


@pytest.mark.parametrize(
    "field,value,words",
    [
        ("correlation_id", 1.5, "'correlation_id' is not an integer"),
        ("device_id", 0.25, "'device_id' is not an integer"),
        ("grid_x", "RAW:" + "9" * 5001, "max_number_digits"),
    ],
)
def test_cupti_integer_fields_that_are_not_integers_one_line(capsys, tmp_path, field, value,
                                                              words):
    kernel = {"kind": "kernel", "name": "k", "start": 10, "end": 20, "correlation_id": 1}
    kernel[field] = 0 if isinstance(value, str) else value
    source = inputs.cupti_records(tmp_path, [kernel])
    if isinstance(value, str):  # a number JSON can hold but Python's int() refuses
        text = source.read_text().replace('"grid_x":0', '"grid_x":' + value[4:])
        source.write_text(text)
    refused(capsys, tmp_path, source, str(source), "line 2", words)


@pytest.mark.parametrize("device", [["A100"], "A100", 5])
def test_cupti_header_device_not_an_object_one_line(capsys, tmp_path, device):
    """A header whose ``device`` is not an object is refused at import, not copied into
    a bundle that every reader then refuses."""
    source = inputs.cupti_records(tmp_path)
    lines = source.read_text().splitlines(keepends=True)
    header = json.loads(lines[0])
    header["device"] = device
    source.write_text(json.dumps(header) + "\n" + "".join(lines[1:]))
    refused(capsys, tmp_path, source, str(source), "line 1", "'device' must be a JSON object")


def test_no_bundle_is_written_that_its_readers_refuse(tmp_path):
    from hilsim.core.bundle import Bundle, write_bundle
    from hilsim.formats.read import import_profile

    bundle = import_profile(inputs.cupti_records(tmp_path))
    bundle.manifest["device"] = ["A100"]
    with pytest.raises(HilsimError, match="'device' must be a JSON object"):
        write_bundle(Bundle(bundle.launches, None, None, bundle.manifest), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_cupti_non_utf8_one_line(capsys, tmp_path):
    source = inputs.cupti_records(tmp_path)
    with open(source, "ab") as handle:
        handle.write(b'{"kind": "kernel", "name": "\xff\xfe"}\n')
    refused(capsys, tmp_path, source, str(source), "not UTF-8")


def test_cupti_huge_grid_one_line(capsys, tmp_path):
    kernel = {"kind": "kernel", "name": "k", "start": 10, "end": 20, "grid_x": 10**30}
    source = inputs.cupti_records(tmp_path, [kernel])
    refused(capsys, tmp_path, source, str(source), "grid_x", "2^63")


# ------------------------------------------------------------------------------ size guards

def test_gzip_bomb_of_whitespace_refused_quickly(capsys, tmp_path):
    source = tmp_path / "ws.json.gz"
    source.write_bytes(gzip.compress(b'{"traceEvents": [' + b" " * (64 << 20) + b"]}"))
    began = time.perf_counter()
    line = refused(capsys, tmp_path, source, str(source), "max_decompression_ratio", "--limit")
    assert time.perf_counter() - began < 10, line


def test_limit_flag_raises_the_guard(capsys, tmp_path):
    source = tmp_path / "ws.json.gz"
    events = json.dumps(inputs.kineto_events(20)).encode()
    source.write_bytes(gzip.compress(b'{"traceEvents": ' + events + b" " * (8 << 20) + b"}"))
    out = tmp_path / "bundle"
    assert run(capsys, "import", source, "-o", out)[0] == 2
    code, err, _ = run(capsys, "--limit", "max_decompression_ratio=100000", "import", source,
                       "-o", out)
    assert code == 0, err
    assert main(["import", str(source), "-o", str(tmp_path / "again")]) == 2  # not sticky


def test_number_of_a_million_digits_refused(capsys, tmp_path):
    source = tmp_path / "digits.json.gz"
    source.write_bytes(gzip.compress(b'{"traceEvents": [{"ph": "X", "ts": 1'
                                     + b"0" * (1 << 20) + b"}]}"))
    refused(capsys, tmp_path, source, str(source), "max_number_digits")


def test_digit_run_split_across_blocks_is_counted():
    guard = limits.DigitRuns("x")
    guard.feed(b'{"ts": ' + b"1" * 60)
    with pytest.raises(HilsimError, match="max_number_digits"):
        guard.feed(b"2" * 60 + b"}")


def test_csv_followed_by_a_sparse_hole_refused(capsys, tmp_path):
    source = tmp_path / "hole.csv"
    with open(source, "wb") as handle:
        handle.write(inputs.WIDE.read_bytes())
        handle.truncate(3 << 30)  # 3 GiB of zero bytes, no disk blocks
    if os.stat(source).st_blocks * 512 >= 1 << 30:
        pytest.skip("this file system does not make sparse files")
    refused(capsys, tmp_path, source, str(source), "max_zero_run_bytes", "sparse")


def test_real_gzip_traces_pass_the_ratio_guard(capsys, tmp_path):
    for index, trace in enumerate(sorted(inputs.KINETO.parent.glob("*.json.gz"))):
        assert main(["import", str(trace), "-o", str(tmp_path / f"b{index}")]) == 0, trace
    capsys.readouterr()


# -------------------------------------------------------------- odd values in other formats

@pytest.mark.parametrize("cat", [["kernel"], {"a": 1}])
def test_kineto_cat_list_or_dict(capsys, tmp_path, cat):
    events = inputs.kineto_events(10)
    events[0]["cat"] = cat
    bundle, err = imported(capsys, tmp_path, inputs.kineto_trace(tmp_path, events))
    assert bundle.n_launches == 9 and err == []


@pytest.mark.parametrize("name", ["deep.json", "deep_events.json"])
def test_deeply_nested_json_one_line(capsys, tmp_path, name):
    body = "[" * 100_000 + "]" * 100_000
    text = body if name == "deep.json" else '{"traceEvents": [' + body + "]}"
    source = tmp_path / name
    source.write_text(text)
    refused(capsys, tmp_path, source, str(source))


@pytest.mark.parametrize("value", ["inf", "1" + "0" * 400, "-inf"])
def test_inf_and_400_digit_numbers_in_csv_columns(capsys, tmp_path, value):
    source = inputs.nsys_csv(tmp_path, 3, value)  # GrdX
    refused(capsys, tmp_path, source, str(source), "grid_x")


def test_int_beyond_int64_in_optional_column(capsys, tmp_path):
    source = inputs.nsys_csv(tmp_path, 2, "99999999999999999999999")  # CorrId
    refused(capsys, tmp_path, source, str(source), "correlation_id", "2^63")


def test_sqlite_names_stored_as_non_utf8_blobs(capsys, tmp_path):
    source = inputs.sqlite_copy(
        tmp_path,
        "UPDATE StringIds SET value = CAST(x'ff41fe' AS BLOB) "
        "WHERE id = (SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1)",
    )
    bundle, err = imported(capsys, tmp_path, source)
    assert bundle.n_launches == 1106
    assert "\ufffdA\ufffd" in set(bundle.launches["name"].astype(str))


# ------------------------------------------------------------------------- .nsys-rep export

def test_nsys_rep_export_goes_to_a_private_folder(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("HILSIM_NSYS", str(inputs.DATA / "agent" / "nsys"))
    monkeypatch.setenv("FAKE_NSYS_SQLITE", str(inputs.SQLITE))
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    report = inbox / "run.nsys-rep"
    report.write_text(str(inputs.SQLITE))
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (inbox / "run.sqlite").symlink_to(victim)  # a planted link where the export used to go
    bundle, err = imported(capsys, tmp_path, report)
    assert bundle.n_launches == 1106 and err == []
    assert victim.read_text() == "keep me"
    assert sorted(p.name for p in inbox.iterdir()) == ["run.nsys-rep", "run.sqlite"]
    assert bundle.manifest["source"]["files"] == [str(report)]


# --------------------------------------------------------------------------------- messages

def test_directory_input_says_directory(capsys, tmp_path):
    folder = tmp_path / "profiles"
    folder.mkdir()
    line = refused(capsys, tmp_path, folder, str(folder), "is a directory")
    assert "no such file" not in line


def test_messages_show_the_input_value_not_a_wrapped_int64(capsys, tmp_path):
    source = inputs.nsys_csv(tmp_path, 1, "9223372036854775808")
    line = refused(capsys, tmp_path, source)
    assert "-9223372036854775808" not in line and "9.223372036854776e+18" in line


# --------------------------------------------------------------------------------- warnings

def test_numpy_runtime_warnings_never_reach_stderr(capsys, tmp_path, monkeypatch):
    """numpy warns (0/0 in a reduction) inside a command: stdout has the result, stderr
    stays empty on success and holds only the error line on failure."""
    from hilsim.formats import read

    real = read.import_profile

    def warning_import(*args, **kwargs):
        np.array([0.0]) / np.array([0.0])  # RuntimeWarning: invalid value in divide
        np.log(np.zeros(1))  # RuntimeWarning: divide by zero in log
        return real(*args, **kwargs)

    monkeypatch.setattr(read, "import_profile", warning_import)
    with warnings.catch_warnings():
        warnings.simplefilter("default")  # as a user's Python shows them
        code, err, _ = run(capsys, "import", inputs.NSYS_CSV, "-o", tmp_path / "b")
        assert code == 0 and err == [], err
        code, err, _ = run(capsys, "import", tmp_path / "missing.csv", "-o", tmp_path / "c")
        assert code == 2 and len(err) == 1, err


# --------------------------------------------------------------------------- ncu CSV values

def _ncu(tmp_path, column: str, value: str, row: int = 0):
    import csv
    import io

    lines = inputs.NCU_RAW.read_text(encoding="utf-8").splitlines()
    preamble, table = lines[:2], list(csv.reader(lines[2:]))
    table[2 + row][table[0].index(column)] = value  # (row 1 holds the units)
    text = io.StringIO()
    csv.writer(text, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(table)
    path = tmp_path / "ncu.csv"
    path.write_text("\n".join(preamble) + "\n" + text.getvalue(), encoding="utf-8")
    return path


def _two_launches(tmp_path):
    """A 2-launch cupti profile whose kernels are the ncu fixture's (names and configs)."""
    kernels = [{"kind": "kernel", "name": name, "start": 10 * i, "end": 10 * i + 5}
               for i, name in enumerate(inputs.ncu_kernel_names())]
    return inputs.cupti_records(tmp_path, kernels)


@pytest.mark.parametrize(
    "column,value,words",
    [
        ("gpu__time_duration.sum", "1e400", "not a finite number"),
        ("gpu__time_duration.sum", "inf", "not a finite number"),
        ("ID", "99999999999999999999999", "is not a launch number"),
        ("ID", "-1", "is not a launch number"),
        ("Grid Size", "(99999999999999999999999, 1, 1)", "2^63"),
    ],
)
def test_ncu_values_refused(capsys, tmp_path, column, value, words):
    source = _ncu(tmp_path, column, value)
    out = tmp_path / "bundle"
    code, err, _ = run(capsys, "import", _two_launches(tmp_path), "--ncu", source, "-o", out)
    assert code == 2 and len(err) == 1 and words in err[0] and str(source) in err[0], err
    assert not out.exists()


def test_ncu_fixture_joins_untampered(capsys, tmp_path):
    out = tmp_path / "bundle"
    code, err, _ = run(capsys, "import", _two_launches(tmp_path), "--ncu", inputs.NCU_RAW,
                       "-o", out)
    assert code == 0, err
    assert read_bundle(out).metrics is not None
