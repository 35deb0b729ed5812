"""PyTorch profiler (Kineto) trace importer on real HTA traces and broken inputs."""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hilsim.core.bundle import read_bundle, write_bundle
from hilsim.core.errors import HilsimError
from hilsim.core.schema import LAUNCH_COLUMNS, REGION_COLUMNS
from hilsim.formats.detect import sniff_format
from hilsim.formats.kineto import bundle_from_kineto, read_kineto_trace

DATA = Path(__file__).parent / "data" / "kineto"
V100 = DATA / "hta-v100-ns-resolution.trace.json.gz"
CUPTI = DATA / "hta-a100-cupti-counters.trace.json.gz"
FFMA = "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"
HFMA = "smsp__sass_thread_inst_executed_op_hfma_pred_on.sum"


def _raw(path: Path) -> dict:
    with gzip.open(path, "rb") as handle:
        return json.loads(handle.read(), parse_float=Decimal)


@pytest.fixture(scope="module")
def v100_raw() -> dict:
    return _raw(V100)


@pytest.fixture(scope="module")
def v100():
    return read_kineto_trace(V100)


@pytest.fixture(scope="module")
def cupti():
    return read_kineto_trace(CUPTI)


def _write(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data))
    return path


def _kernel(name: str, ts: float, dur: float, corr: int, **args: object) -> dict:
    base = {"device": 0, "stream": 7, "correlation": corr, "grid": [1, 1, 1], "block": [32, 1, 1]}
    base.update(args)
    return {
        "ph": "X",
        "cat": "kernel",
        "name": name,
        "pid": 0,
        "tid": 7,
        "ts": ts,
        "dur": dur,
        "args": base,
    }


def _trace(*events: dict) -> dict:
    return {"schemaVersion": 1, "deviceProperties": [], "traceEvents": list(events)}


# ------------------------------------------------------------------ V100 (ns resolution)


@pytest.mark.slow
def test_v100_kernel_count_matches_direct_json_count(v100, v100_raw):
    events = v100_raw["traceEvents"]
    kernels = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "Kernel")]
    copies = [e for e in events if e.get("cat") in ("gpu_memcpy", "gpu_memset")]
    assert len(kernels) == 4350
    assert len(v100.launches) == len(kernels)
    assert list(v100.launches.columns) == list(LAUNCH_COLUMNS)
    assert v100.launches.attrs["n_gpu_memcpy"] == 1600
    assert v100.launches.attrs["n_gpu_memset"] == 145
    assert v100.launches.attrs["dropped_non_kernel_rows"] == len(copies) == 1745
    assert v100.launches["launch_id"].tolist() == list(range(4350))
    assert (np.diff(v100.launches["start_ns"].to_numpy(dtype=np.int64)) >= 0).all()


def test_v100_device_and_meta(v100):
    assert v100.device["name"] == "Tesla V100-SXM2-32GB"
    assert v100.device["compute_capability"] == "7.0"
    assert v100.device["sm_count"] == 80
    assert v100.device["memory_bytes"] == 34079637504
    assert v100.meta["schemaVersion"] == 1
    assert v100.meta["displayTimeUnit"] == "ns"
    assert v100.meta["traceName"] == "/tmp/libkineto_activities_1102.json"


def test_v100_first_kernel_exact_ns(v100):
    first = v100.launches.iloc[0]
    assert first["kernel"] == "CatArrayBatchedCopy_aligned16_contig"
    assert (first["grid_x"], first["grid_y"], first["grid_z"]) == (4, 106, 1)
    assert (first["block_x"], first["block_y"], first["block_z"]) == (128, 1, 1)
    assert first["regs"] == 30 and first["smem_static"] == 0 and pd.isna(first["smem_dynamic"])
    assert (first["device"], first["stream"], first["correlation_id"]) == (0, 7, 135071)
    # "ts": 1712195495505582.988 (us, three decimals); float64 would give ...583000
    assert first["start_ns"] == 1712195495505582988
    assert first["duration_ns"] == 4928
    assert v100.launches.attrs["smem_static_is_total"] is True


def test_v100_times_are_exact_against_the_json_text(v100, v100_raw):
    kernels = [e for e in v100_raw["traceEvents"] if e.get("cat") == "kernel"]
    expected = np.sort(np.array([int(e["ts"] * 1000) for e in kernels], dtype=np.int64))
    assert np.array_equal(v100.launches["start_ns"].to_numpy(dtype=np.int64), expected)
    total = sum(int(e["dur"] * 1000) for e in kernels)
    assert int(v100.launches["duration_ns"].sum()) == total


def test_v100_gpu_annotation_regions(v100, v100_raw):
    regions = v100.regions
    assert list(regions.columns) == list(REGION_COLUMNS)
    assert len(regions) == 15
    assert regions["region_id"].tolist() == list(range(15))
    assert (regions["depth"] == 0).all()
    assert v100.launches.attrs["region_source"] == "gpu_user_annotation"
    launches = v100.launches
    assert launches["region"].iloc[0] == "DistributedDataParallel.forward"
    counts = launches["region"].value_counts()
    assert counts["DistributedDataParallel.forward"] == 1495
    assert counts["Optimizer.step#SGD.step"] == 45
    assert counts["## backward ##"] == 30
    assert launches["region"].notna().sum() == 1570
    # brute force: a kernel is in a region iff its [start, end] lies inside one
    start = launches["start_ns"].to_numpy(dtype=np.int64)
    end = start + launches["duration_ns"].to_numpy(dtype=np.int64)
    inside = np.zeros(len(launches), dtype=bool)
    for r_start, r_end in zip(regions["start_ns"], regions["end_ns"], strict=True):
        inside |= (start >= r_start) & (end <= r_end)
    assert np.array_equal(inside, launches["region"].notna().to_numpy())


@pytest.mark.slow
def test_v100_cpu_annotation_regions_via_correlation():
    profile = read_kineto_trace(V100, regions="cpu")
    assert profile.launches.attrs["region_source"] == "user_annotation"
    assert len(profile.regions) == 70
    assert profile.regions["depth"].max() == 3
    first = profile.launches["region"].iloc[0]
    assert first == "ProfilerStep#101/## forward ##/DistributedDataParallel.forward"
    step = profile.regions[profile.regions["name"] == "ProfilerStep#101"].iloc[0]
    assert step["depth"] == 0 and step["path"] == "ProfilerStep#101"
    # kernels launched from the annotated main thread get a ProfilerStep path
    regions = profile.launches["region"].dropna().astype(str)
    assert regions.str.startswith("ProfilerStep#").all()
    assert len(regions) == 1570


def test_regions_none():
    profile = read_kineto_trace(CUPTI, regions="none")
    assert profile.regions is None
    assert profile.launches["region"].isna().all()


# ------------------------------------------------------------------ A100 CUPTI counters


def test_cupti_ranges_become_launches_and_metrics(cupti):
    raw = _raw(CUPTI)["traceEvents"]
    ranges = [e for e in raw if e.get("cat") == "cuda_profiler_range"]
    assert not [e for e in raw if e.get("cat") in ("kernel", "Kernel")]
    launches, metrics = cupti.launches, cupti.metrics
    assert len(launches) == len(ranges) == 77
    assert launches.attrs["launch_source"] == "cuda_profiler_range"
    assert launches.attrs["durations_measured"] is False
    assert launches.attrs["n_unnamed_ranges"] == 1
    assert launches["kernel"].iloc[0] == "distribution_elementwise_grid_stride_kernel"
    assert launches["name"].iloc[1] == "__missing__"
    assert metrics["launch_id"].tolist() == list(range(77))
    assert len(metrics.columns) == 10
    assert all(metrics[c].dtype == np.float64 for c in metrics.columns if c != "launch_id")
    assert metrics.loc[0, FFMA] == 38731776.0
    assert metrics.loc[0, HFMA] == 4866048.0
    assert metrics.loc[1, FFMA] == 9119334400.0
    assert cupti.device["name"] == "NVIDIA A100-PG509-200"
    assert cupti.device["compute_capability"] == "8.0"
    assert cupti.device["sm_count"] == 108


def test_cupti_ranges_paired_with_launch_calls(cupti):
    launches = cupti.launches
    assert launches.attrs["ranges_paired_with_launch_calls"] is True
    assert launches["correlation_id"].notna().all()
    assert launches["correlation_id"].iloc[0] == 221
    assert launches.attrs["region_source"] == "user_annotation"
    assert launches["region"].iloc[0] == "[param|cuda]"
    assert launches["region"].astype(str).str.contains(r"measure\|forward").sum() == 38


def test_bundle_from_kineto_round_trip(tmp_path):
    bundle = bundle_from_kineto(CUPTI)
    assert bundle.manifest["device"]["name"] == "NVIDIA A100-PG509-200"
    profiler = bundle.manifest["profilers"][0]
    assert profiler["name"] == "pytorch-profiler (kineto)"
    assert profiler["schema_version"] == 1
    assert profiler["durations_measured"] is False
    assert FFMA in profiler["counters"]
    written = read_bundle(write_bundle(bundle, tmp_path / "b"))
    assert written.n_launches == 77
    assert written.metrics.loc[0, FFMA] == 38731776.0
    assert len(written.regions) == 8


def test_sniff_format_recognises_fixtures():
    assert sniff_format(V100) == "kineto-json"
    assert sniff_format(CUPTI) == "kineto-json"


# ------------------------------------------------------------------ synthetic edge cases


def test_plain_json_old_kernel_cat_and_memcpy(tmp_path):
    events = [
        _kernel("k2", 20.5, 1.25, 2),
        _kernel("k1", 10, 2, 1, **{"shared memory": 1024, "registers per thread": 40}),
        {
            "ph": "X",
            "cat": "gpu_memcpy",
            "name": "Memcpy HtoD",
            "pid": 0,
            "tid": 7,
            "ts": 12,
            "dur": 1,
            "args": {},
        },
        {"ph": "f", "cat": "ac2g", "id": 1, "pid": 0, "tid": 7, "ts": 10},
    ]
    events[0]["cat"] = "Kernel"
    profile = read_kineto_trace(_write(tmp_path / "t.json", _trace(*events)))
    launches = profile.launches
    assert launches["name"].tolist() == ["k1", "k2"]
    assert launches["start_ns"].tolist() == [10000, 20500]
    assert launches["duration_ns"].tolist() == [2000, 1250]
    assert launches["smem_static"].iloc[0] == 1024 and pd.isna(launches["smem_static"].iloc[1])
    assert launches["regs"].iloc[0] == 40
    assert launches.attrs["n_gpu_memcpy"] == 1
    assert profile.regions is None and profile.metrics is None


def test_nested_gpu_annotations_innermost_wins(tmp_path):
    def ann(name, ts, dur, tid=7):
        return {
            "ph": "X",
            "cat": "gpu_user_annotation",
            "name": name,
            "pid": 0,
            "tid": tid,
            "ts": ts,
            "dur": dur,
        }

    events = [
        ann("step", 0, 100),
        ann("fwd", 10, 40),
        ann("attn", 20, 10),
        ann("other-stream", 0, 100, tid=9),
        _kernel("a", 5, 1, 1),  # step only
        _kernel("b", 12, 2, 2),  # step/fwd
        _kernel("c", 21, 3, 3),  # step/fwd/attn
        _kernel("d", 29, 2, 4),  # crosses attn's end -> step/fwd
        _kernel("e", 150, 1, 5),  # outside
    ]
    profile = read_kineto_trace(_write(tmp_path / "n.json", _trace(*events)))
    assert profile.launches["region"].tolist()[:4] == [
        "step",
        "step/fwd",
        "step/fwd/attn",
        "step/fwd",
    ]
    assert pd.isna(profile.launches["region"].iloc[4])
    regions = profile.regions.set_index("path")
    assert regions.loc["step/fwd/attn", "depth"] == 2
    assert regions.loc["step/fwd/attn", "start_ns"] == 20000
    assert regions.loc["step/fwd/attn", "end_ns"] == 30000


def test_kernels_and_ranges_joined_in_order_and_name_checked(tmp_path):
    def rng(name, ts, value):
        return {
            "ph": "X",
            "cat": "cuda_profiler_range",
            "name": name,
            "pid": 0,
            "tid": 0,
            "ts": ts,
            "dur": 1,
            "args": {"m.sum": value},
        }

    good = _trace(_kernel("a", 1, 1, 1), _kernel("b", 5, 1, 2), rng("a", 100, 3), rng("b", 101, 4))
    profile = read_kineto_trace(_write(tmp_path / "good.json", good))
    assert profile.metrics["m.sum"].tolist() == [3.0, 4.0]
    assert profile.launches["duration_ns"].tolist() == [1000, 1000]
    missing = _trace(_kernel("a", 1, 1, 1), rng("__missing__", 100, 3))
    assert read_kineto_trace(_write(tmp_path / "m.json", missing)).metrics["m.sum"].iloc[0] == 3
    bad = _trace(_kernel("a", 1, 1, 1), _kernel("b", 5, 1, 2), rng("b", 100, 3), rng("a", 101, 4))
    with pytest.raises(HilsimError, match=r"bad\.json: cuda_profiler_range #0 is for kernel 'b'"):
        read_kineto_trace(_write(tmp_path / "bad.json", bad))
    short = _trace(_kernel("a", 1, 1, 1), _kernel("b", 5, 1, 2), rng("a", 100, 3))
    with pytest.raises(HilsimError, match="1 cuda_profiler_range events but 2 kernels"):
        read_kineto_trace(_write(tmp_path / "short.json", short))


# ------------------------------------------------------------------ bad inputs


def _one_line(exc: pytest.ExceptionInfo, path: Path) -> str:
    message = str(exc.value)
    assert "\n" not in message and str(path) in message
    return message


def test_not_json(tmp_path):
    path = tmp_path / "x.json"
    path.write_text("{not json")
    with pytest.raises(HilsimError) as exc:
        read_kineto_trace(path)
    assert "invalid JSON" in _one_line(exc, path)


def test_truncated_gzip(tmp_path):
    path = tmp_path / "cut.json.gz"
    path.write_bytes(CUPTI.read_bytes()[:20000])
    with pytest.raises(HilsimError) as exc:
        read_kineto_trace(path)
    assert "truncated gzip" in _one_line(exc, path)


def test_corrupt_gzip(tmp_path):
    path = tmp_path / "bad.json.gz"
    data = bytearray(CUPTI.read_bytes()[:4000])
    data[3] = 0xFF  # reserved flag bits set
    path.write_bytes(bytes(data))
    with pytest.raises(HilsimError) as exc:
        read_kineto_trace(path)
    assert "gzip" in _one_line(exc, path)


def test_json_without_trace_events(tmp_path):
    path = _write(tmp_path / "o.json", {"schemaVersion": 1, "events": []})
    with pytest.raises(HilsimError) as exc:
        read_kineto_trace(path)
    assert "'traceEvents'" in _one_line(exc, path)
    path = _write(tmp_path / "l.json", [{"ph": "X"}])
    with pytest.raises(HilsimError, match="a JSON list"):
        read_kineto_trace(path)


def test_trace_without_kernels(tmp_path):
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 1, "dur": 2}
    ]
    path = _write(tmp_path / "cpu.json", _trace(*events))
    with pytest.raises(HilsimError) as exc:
        read_kineto_trace(path)
    message = _one_line(exc, path)
    assert "no GPU kernel events" in message and "cpu_op" in message


def test_too_large_and_empty(tmp_path):
    with pytest.raises(HilsimError, match="larger than 1000 bytes"):
        read_kineto_trace(CUPTI, max_bytes=1000)
    empty = tmp_path / "e.json"
    empty.write_text("")
    with pytest.raises(HilsimError, match="empty file"):
        read_kineto_trace(empty)
    with pytest.raises(HilsimError, match="regions must be one of"):
        read_kineto_trace(CUPTI, regions="nvtx")


# ------------------------------------------------------------------ streaming reader
# The trace is read in blocks; runs of whole events are decoded by msgspec, anything else
# (a block cut inside an event, items that are not objects, NaN, invalid JSON) event by
# event by the stdlib scanner. Tiny blocks and runs exercise every boundary.


def _tiny_blocks(monkeypatch: pytest.MonkeyPatch, read: int = 65_521, chunk: int = 40_009) -> None:
    import hilsim.formats.kineto as kineto

    monkeypatch.setattr(kineto, "_READ_BYTES", read)
    monkeypatch.setattr(kineto, "_CHUNK_CHARS", chunk)


def _same_profile(a, b) -> None:
    pd.testing.assert_frame_equal(a.launches, b.launches)
    assert a.launches.attrs == b.launches.attrs
    for x, y in ((a.regions, b.regions), (a.metrics, b.metrics)):
        assert (x is None) == (y is None)
        if x is not None:
            pd.testing.assert_frame_equal(x, y)
    assert a.device == b.device and a.meta == b.meta


@pytest.mark.parametrize("regions", ["auto", "cpu"])
@pytest.mark.slow
def test_block_and_run_boundaries_do_not_change_the_tables(v100, monkeypatch, regions):
    whole = v100 if regions == "auto" else read_kineto_trace(V100, regions=regions)
    cupti = read_kineto_trace(CUPTI, regions=regions)
    _tiny_blocks(monkeypatch)
    _same_profile(read_kineto_trace(V100, regions=regions), whole)
    _same_profile(read_kineto_trace(CUPTI, regions=regions), cupti)


def _json_loads_error(text: str) -> str:
    with pytest.raises(json.JSONDecodeError) as info:
        json.loads(text, parse_float=Decimal)
    e = info.value
    return f"invalid JSON at line {e.lineno} column {e.colno} ({e.msg})"


@pytest.mark.parametrize("tiny", [False, True], ids=["default", "tiny-blocks"])
@pytest.mark.slow
def test_invalid_json_is_located_as_json_loads_locates_it(tmp_path, monkeypatch, tiny):
    with gzip.open(V100, "rt", encoding="utf-8") as handle:
        text = handle.read()
    start = text.index('"traceEvents"')
    bad = {
        # a real trace cut short (profiler killed): inside a number, a string, between events
        "cut_number": text[: text.index('"ts": 1712195495506', start) + 14],
        "cut_string": text[: text.index('"name": "', start) + 12],
        "cut_between": text[: text.index("},", start + 200000) + 2],
        "missing_comma": text.replace("},\n  {", "}\n  {", 700),
        "trailing_comma": text.replace("}\n  ],", "},\n  ],", 1),
        "bad_literal": text.replace('"ph": "X"', '"ph": X', 1500),
        "extra_data": text + "x",
    }
    if tiny:
        _tiny_blocks(monkeypatch)
    for name, body in bad.items():
        path = tmp_path / f"{name}.json"
        path.write_text(body, encoding="utf-8")
        with pytest.raises(HilsimError) as exc:
            read_kineto_trace(path)
        assert _one_line(exc, path) == f"{path}: not a Kineto trace: {_json_loads_error(body)}"


def test_events_msgspec_refuses_are_read_as_json_loads_reads_them(tmp_path, monkeypatch):
    # items that are not objects are counted and skipped; NaN (accepted by json.loads) is
    # no number; args that are not objects read as no args; a repeated traceEvents key
    # keeps its last value, as in json.loads
    events = [
        _kernel("a", 10, 1, 1),
        5,
        "text",
        _kernel("b\u00e9", 20, 1, 2),
        {**_kernel("c", 30, 1, 3), "args": None},
        _kernel("d", 40, 2, 4, grid=[2, 2.5, True], device=1.5, stream="s"),
    ]
    path = _write(tmp_path / "odd.json", _trace(*events))
    for tiny in (False, True):
        if tiny:
            _tiny_blocks(monkeypatch, read=64, chunk=100)
        launches = read_kineto_trace(path).launches
        assert launches["name"].astype(str).tolist() == ["a", "b\u00e9", "c", "d"]
        assert launches["correlation_id"].tolist()[:2] == [1, 2]
        assert pd.isna(launches["correlation_id"].iloc[2]) and pd.isna(launches["grid_x"].iloc[2])
        assert launches["device"].iloc[2] == 0  # no args: the event's pid
        d = launches.iloc[3]
        assert (d["grid_x"], d["grid_y"], pd.isna(d["grid_z"])) == (2, 2, True)  # 2.5: even
        assert d["device"] == 2 and d["stream"] == 7  # 1.5 rounds to 2; text: the tid
    nan = tmp_path / "nan.json"
    nan.write_text(json.dumps(_trace(_kernel("k", 1, 1, 1))).replace('"ts": 1', '"ts": NaN'))
    with pytest.raises(
        HilsimError, match=r"kernel 'k': ts/dur not a number of ns below 2\^63 \(ts=nan, dur=1\)"
    ):
        read_kineto_trace(nan)
    twice = tmp_path / "twice.json"
    body = json.dumps(_trace(_kernel("first", 1, 1, 1)))
    twice.write_text(body[:-1] + ', "traceEvents": ' + json.dumps([_kernel("last", 2, 1, 2)]) + "}")
    assert read_kineto_trace(twice).launches["name"].astype(str).tolist() == ["last"]


def test_times_are_exact_ns_whatever_their_digits(tmp_path, monkeypatch):
    # microseconds with 0-12 decimals, exponents, integers and their mix in one batch:
    # nanoseconds exactly as Decimal gives them (round half even)
    texts = ["1.0005", "1.0015", "1712195495505582.988", "2.000000000100", "1e-05", "1.5E+3",
             "7", "0.0025", "123.4565", "1.99999999999"]
    body = '{"traceEvents": [' + ", ".join(
        f'{{"ph": "X", "cat": "kernel", "name": "k{i}", "ts": {t}, "dur": {t}}}'
        for i, t in enumerate(texts)
    ) + "]}"
    path = tmp_path / "digits.json"
    path.write_text(body)
    expected = {
        f"k{i}": int((Decimal(t) * 1000).to_integral_value(rounding="ROUND_HALF_EVEN"))
        for i, t in enumerate(texts)
    }
    for tiny in (False, True):
        if tiny:
            _tiny_blocks(monkeypatch, read=50, chunk=60)
        launches = read_kineto_trace(path).launches
        got = dict(zip(launches["name"].astype(str), launches["duration_ns"], strict=True))
        assert got == expected
        starts = dict(zip(launches["name"].astype(str), launches["start_ns"], strict=True))
        assert starts == expected


def test_not_utf8_names_the_byte_as_json_loads_does(tmp_path):
    with gzip.open(CUPTI, "rb") as handle:
        raw = handle.read()
    at = raw.index(b'"traceEvents"') + 5000
    path = tmp_path / "latin1.json"
    path.write_bytes(raw[:at] + b"\xe9" + raw[at + 1 :])
    with pytest.raises(HilsimError) as exc:
        read_kineto_trace(path)
    assert _one_line(exc, path).endswith(
        f"not readable JSON ('utf-8' codec can't decode byte 0xe9 in position {at}: "
        "invalid continuation byte)"
    )
