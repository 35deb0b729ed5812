"""The CUPTI backend records NVTX ranges the workload emits itself (marker records).

A fake ``cupti`` package delivers activity records shaped as cupti-python's
``ActivityMarker2`` (fields ``flags_``, ``id``, ``timestamp``, ``name``, ``domain``,
``object_id.pt.thread_id``); the flag values are CUPTI's (START 2, END 4) as cupti-python
13.0.1 enumerates them. What the recorder writes is read back by the real importer.
"""

from __future__ import annotations

import os
import sys
import types
from enum import IntEnum

import pytest
from hilsim.agent.cupti_launch import CuptiRecorder, drop_duplicate_ranges, loaded_library

from hilsim.formats.cupti_records import bundle_from_cupti_records, read_cupti_records


class _Kind(IntEnum):
    DRIVER = 2
    RUNTIME = 5
    CONCURRENT_KERNEL = 10
    MARKER = 12


def _fake(batches: list[list[object]], now: int = 10_000):
    state: dict[str, object] = {"enabled": []}

    def register(requested, completed):
        state["completed"] = completed

    def flush(flag):
        while batches:
            state["completed"](batches.pop(0))

    module = types.SimpleNamespace(
        ActivityKind=_Kind, activity_register_callbacks=register,
        activity_enable=lambda kind: state["enabled"].append(kind),
        activity_flush_all=flush, get_timestamp=lambda: now)
    return types.SimpleNamespace(cupti=module), state


def _marker(flags: int, ident: int, stamp: int, name: str | None = None, tid: int = 11):
    return types.SimpleNamespace(
        kind=int(_Kind.MARKER), flags_=flags, id=ident, timestamp=stamp, name=name,
        domain="", object_id=types.SimpleNamespace(pt=types.SimpleNamespace(thread_id=tid)))


def _kernel(corr: int, start: int, end: int):
    return types.SimpleNamespace(
        kind=int(_Kind.CONCURRENT_KERNEL), name="k", start=start, end=end,
        correlation_id=corr, device_id=0, stream_id=7, context_id=1, grid_x=4, grid_y=1,
        grid_z=1, block_x=128, block_y=1, block_z=1, registers_per_thread=32,
        static_shared_memory=0, dynamic_shared_memory=0)


def _call(corr: int, start: int, end: int, tid: int = 11):
    return types.SimpleNamespace(kind=int(_Kind.RUNTIME), start=start, end=end,
                                 correlation_id=corr, thread_id=tid, process_id=22, cbid=211)


@pytest.fixture
def injection_env(monkeypatch, tmp_path):
    lib = tmp_path / "libcupti.so.2025.3.1"
    monkeypatch.delenv("NVTX_INJECTION64_PATH", raising=False)
    monkeypatch.setattr("hilsim.agent.cupti_launch.loaded_library", lambda fragment: str(lib))
    yield str(lib)
    os.environ.pop("NVTX_INJECTION64_PATH", None)


def test_workload_nvtx_ranges_become_regions(monkeypatch, tmp_path, injection_env):
    batches = [[
        _marker(2, 1, 100, "step0"), _call(1, 110, 120), _kernel(1, 130, 200),
        _marker(2, 2, 150, "forward"), _call(2, 160, 170), _kernel(2, 210, 260),
        _marker(4, 2, 180),  # end of "forward" (name is NULL on end records)
        _call(3, 185, 190), _kernel(3, 270, 300),
    ], [
        _marker(4, 1, 400),  # end of step0 arrives in a later buffer
        _marker(2, 3, 500, "step1"), _call(4, 510, 520), _kernel(4, 530, 560),
        # step1 never ends: the run is stopped inside it
    ]]
    fake, state = _fake(batches, now=900)
    monkeypatch.setitem(sys.modules, "cupti", fake)
    out = tmp_path / "r.jsonl"
    recorder = CuptiRecorder(str(out), ["train.py"])
    recorder.start()
    assert _Kind.MARKER in state["enabled"]
    assert os.environ["NVTX_INJECTION64_PATH"] == injection_env
    recorder.finish(False, "stopped by SIGINT")
    header, _k, _r, ranges = read_cupti_records(out)
    assert header["nvtx_injection"] == injection_env
    got = sorted(zip(ranges["name"], ranges["start"], ranges["end"], strict=True))
    assert got == [("forward", 150, 180), ("step0", 100, 400), ("step1", 500, 900)]
    bundle = bundle_from_cupti_records(out)
    # enclosing ranges of each launching call (outer/inner), on the launching thread
    assert bundle.launches["region"].astype(str).tolist() == [
        "step0", "step0/forward", "step0", "step1"]


def test_user_injection_path_is_kept(monkeypatch, tmp_path, injection_env):
    monkeypatch.setenv("NVTX_INJECTION64_PATH", "/opt/my/tool.so")
    fake, _state = _fake([])
    monkeypatch.setitem(sys.modules, "cupti", fake)
    recorder = CuptiRecorder(str(tmp_path / "r.jsonl"), ["w.py"])
    recorder.start()
    assert os.environ["NVTX_INJECTION64_PATH"] == "/opt/my/tool.so"


def test_no_libcupti_mapped_means_no_markers(monkeypatch, tmp_path, capsys):
    monkeypatch.delenv("NVTX_INJECTION64_PATH", raising=False)
    monkeypatch.setattr("hilsim.agent.cupti_launch.loaded_library", lambda fragment: None)
    fake, state = _fake([])
    monkeypatch.setitem(sys.modules, "cupti", fake)
    CuptiRecorder(str(tmp_path / "r.jsonl"), ["w.py"]).start()
    assert _Kind.MARKER not in state["enabled"]
    assert "NVTX_INJECTION64_PATH" not in os.environ
    assert "own NVTX ranges are not recorded" in capsys.readouterr().err


def test_annotate_range_seen_as_marker_is_written_once():
    markers = [{"name": "step", "start": 1_000_000, "end": 9_000_000}]
    annotated = [
        {"name": "step", "start": 1_020_000, "end": 8_990_000},  # the same range, twice seen
        {"name": "step", "start": 20_000_000, "end": 29_000_000},  # a later step: kept
        {"name": "other", "start": 1_000_000, "end": 9_000_000},  # another name: kept
    ]
    kept = drop_duplicate_ranges(annotated, markers)
    assert [(r["name"], r["start"]) for r in kept] == [("step", 20_000_000), ("other", 1_000_000)]


def test_loaded_library_reads_the_maps_file(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text(
        "7f00-7f01 r--p 00000000 08:01 1 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
        "7f02-7f03 r-xp 00000000 08:01 2 /site/nvidia/cuda_cupti/lib/libcupti.so.13\n"
        "7f04-7f05 rw-p 00000000 00:00 0 [heap]\n")
    assert loaded_library("libcupti.so", str(maps)) == "/site/nvidia/cuda_cupti/lib/libcupti.so.13"
    assert loaded_library("libnothere", str(maps)) is None
    assert loaded_library("libcupti.so", str(tmp_path / "absent")) is None
