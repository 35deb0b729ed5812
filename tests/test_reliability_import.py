"""Issue 16: what the attack cases broke in the importers stays fixed (F1, F5, F6, F10,
F12, F13), each through the real CLI entry and the real fixtures."""

from __future__ import annotations

import json

import pytest
from hilsim.analyzer.bundle import read_bundle
from hilsim.analyzer.cli import main

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


# ----------------------------------------------------------------------- F1 huge durations

@pytest.mark.parametrize("value", ["9223372036854775807", "1e30", "99999999999999999999"])
def test_f1_nsys_csv_huge_duration_refused(capsys, tmp_path, value):
    source = inputs.nsys_csv(tmp_path, 1, value)
    refused(capsys, tmp_path, source, str(source), "duration_ns", "2^63")


def test_f1_sqlite_end_beyond_int64_refused(capsys, tmp_path):
    source = inputs.sqlite_copy(
        tmp_path,
        'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = start + 10000000000000000000 '
        "WHERE rowid = (SELECT min(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL)",
    )
    refused(capsys, tmp_path, source, str(source), "duration_ns", "2^63")


@pytest.mark.parametrize("dur", ["9223372036854775.807", "1e30", "1" + "0" * 30])
def test_f1_kineto_huge_duration_refused(capsys, tmp_path, dur):
    events = inputs.kineto_events()
    text = json.dumps({"traceEvents": events}).replace(
        f'"dur": {json.dumps(events[3]["dur"])}', f'"dur": {dur}', 1
    )
    source = inputs.kineto_trace(tmp_path, raw=text)
    refused(capsys, tmp_path, source, str(source), "2^63")


@pytest.mark.parametrize("end", [2**63 + 5, 1e30, 10**30])
def test_f1_cupti_records_huge_end_refused(capsys, tmp_path, end):
    kernels = [{"kind": "kernel", "name": "k", "start": 10, "end": end, "correlation_id": 1},
               {"kind": "kernel", "name": "k", "start": 20, "end": 30, "correlation_id": 2}]
    source = inputs.cupti_records(tmp_path, kernels)
    refused(capsys, tmp_path, source, str(source), "2^63")


@pytest.mark.parametrize("value", ["9223372036854775808", "1e30", "1e400"])
def test_f1_wide_table_huge_duration_refused(capsys, tmp_path, value):
    source = inputs.wide_csv(tmp_path, value)
    refused(capsys, tmp_path, source, str(source), "2^63")


def test_f1_start_plus_duration_beyond_int64_refused(capsys, tmp_path):
    source = inputs.nsys_csv(tmp_path, 0, str(2**63 - 10))
    refused(capsys, tmp_path, source, str(source), "2^63")


# ----------------------------------------------------------------------- F10 duplicates

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


def test_f10_sqlite_doubled_kernel_rows_dropped_with_warning(capsys, tmp_path):
    once = _n_once(capsys, tmp_path, inputs.SQLITE)
    doubled = inputs.sqlite_copy(
        tmp_path, "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL"
    )
    bundle, err = imported(capsys, tmp_path, doubled)
    assert once == 1106 and bundle.n_launches == once
    assert len(err) == 1 and "warning" in err[0] and f"dropped {once} duplicated" in err[0]
    assert bundle.manifest["warnings"] == [err[0].removeprefix("hilsim: warning: ")]


def test_f10_nsys_csv_doubled_rows_dropped(capsys, tmp_path):
    once = _n_once(capsys, tmp_path, inputs.NSYS_CSV)
    bundle, err = imported(capsys, tmp_path, inputs.nsys_csv(tmp_path, double=True))
    assert bundle.n_launches == once and len(err) == 1 and f"dropped {once} dup" in err[0]


def test_f10_kineto_doubled_kernels_dropped(capsys, tmp_path):
    events = inputs.kineto_events()
    bundle, err = imported(capsys, tmp_path, inputs.kineto_trace(tmp_path, events + events))
    assert bundle.n_launches == len(events)
    assert len(err) == 1 and f"dropped {len(events)} duplicated" in err[0]


def test_f10_cupti_doubled_records_dropped(capsys, tmp_path):
    kernels = [{"kind": "kernel", "name": "k", "start": 10 * i, "end": 10 * i + 5,
                "correlation_id": i, "device_id": 0, "stream_id": 7} for i in range(5)]
    bundle, err = imported(capsys, tmp_path, inputs.cupti_records(tmp_path, kernels + kernels))
    assert bundle.n_launches == 5 and len(err) == 1 and "dropped 5 duplicated" in err[0]


def test_f10_same_start_other_stream_is_kept(capsys, tmp_path):
    kernels = [{"kind": "kernel", "name": "k", "start": 10, "end": 15, "correlation_id": 1,
                "device_id": 0, "stream_id": s} for s in (7, 8)]
    bundle, err = imported(capsys, tmp_path, inputs.cupti_records(tmp_path, kernels))
    assert bundle.n_launches == 2 and err == []


# ----------------------------------------------------------------------- F6 CUPTI values

@pytest.mark.parametrize(
    "field,value,words",
    [
        ("start", "10", "'start' is not a number"),
        ("end", [1], "'end' is not a number"),
        ("end", float("nan"), "'end' is not a number"),
        ("name", 5, "'name' is not text"),
    ],
)
def test_f6_cupti_odd_values_one_line(capsys, tmp_path, field, value, words):
    kernel = {"kind": "kernel", "name": "k", "start": 10, "end": 20, "correlation_id": 1}
    kernel[field] = value
    source = inputs.cupti_records(tmp_path, [kernel])
    refused(capsys, tmp_path, source, str(source), "line 2", words)


def test_f6_cupti_non_utf8_one_line(capsys, tmp_path):
    source = inputs.cupti_records(tmp_path)
    with open(source, "ab") as handle:
        handle.write(b'{"kind": "kernel", "name": "\xff\xfe"}\n')
    refused(capsys, tmp_path, source, str(source), "not UTF-8")


def test_f6_cupti_huge_grid_one_line(capsys, tmp_path):
    kernel = {"kind": "kernel", "name": "k", "start": 10, "end": 20, "grid_x": 10**30}
    source = inputs.cupti_records(tmp_path, [kernel])
    refused(capsys, tmp_path, source, str(source), "grid_x", "2^63")
