"""Measurement record, repeat-until-stable statistics and the hilsim.microbench/1 file."""

from __future__ import annotations

import json
import math
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hilsim.core.errors import HilsimError
from hilsim.core.measurement import (
    SCHEMA,
    Measurement,
    read_microbench_json,
    relative_spread,
    repeat_until_stable,
    write_microbench_json,
)


def seq(values):
    it = iter(values)
    return lambda: next(it)


def test_spread_is_relative_interdecile_range() -> None:
    assert relative_spread([10.0]) == 0.0
    assert relative_spread([5.0, 5.0, 5.0]) == 0.0
    # p10 = 10.2, p90 = 11.8 on 10, 10.5, 11, 11.5, 12 -> width 1.6 over median 11
    assert relative_spread([10, 10.5, 11, 11.5, 12]) == pytest.approx(1.6 / 11)
    assert math.isinf(relative_spread([-1.0, 0.0, 1.0]))


def test_stops_as_soon_as_a_window_settles() -> None:
    calls = []

    def fn():
        calls.append(1)
        return [100.0, 50.0, 50.5, 50.2, 99.0][len(calls) - 1]

    stab = repeat_until_stable(fn, max_reps=5, rel_spread_bound=0.02, min_reps=3)
    assert stab.stable and stab.reps == 4
    assert stab.samples == [100.0, 50.0, 50.5, 50.2]
    assert stab.value == pytest.approx(50.2)  # median of the settled window only
    assert stab.spread <= 0.02


def test_unsettled_reports_last_window_and_not_stable() -> None:
    stab = repeat_until_stable(seq([1, 2, 1, 2, 1, 2]), max_reps=6, rel_spread_bound=0.01)
    assert not stab.stable and stab.reps == 6
    assert stab.value == 2.0  # median of the last window [2, 1, 2]


def test_nan_never_settles() -> None:
    stab = repeat_until_stable(seq([math.nan] * 3 + [7.0] * 3), max_reps=6, min_reps=3)
    assert stab.stable and stab.reps == 6 and stab.value == 7.0


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        repeat_until_stable(seq([1.0]), max_reps=2, min_reps=3)


@settings(max_examples=50, deadline=None)
@given(
    base=st.floats(1.0, 1e6),
    noise=st.lists(st.floats(-0.004, 0.004), min_size=3, max_size=10),
)
def test_small_noise_always_settles_at_min_reps(base: float, noise: list[float]) -> None:
    stab = repeat_until_stable(seq([base * (1 + e) for e in noise]), 10, 0.01, 3)
    assert stab.stable and stab.reps == 3
    assert abs(stab.value - base) <= 0.005 * base


def test_json_roundtrip_schema_and_nan(tmp_path) -> None:
    ms = [
        Measurement(
            "latency.l1_hit", 33.7, "cycles", {"footprint_bytes": 8192}, [34.0, 33.7, 33.7], 0.01
        ),
        Measurement("latency.dram", math.nan, "cycles", valid=False, note="failed: x"),
    ]
    path = write_microbench_json(tmp_path / "out" / "mb.json", ms, {"name": "TITAN V"})
    doc = json.loads(path.read_text())
    assert doc["schema"] == SCHEMA == "hilsim.microbench/1"
    assert doc["device"] == {"name": "TITAN V"}
    first = doc["measurements"][0]
    assert {"name", "value", "unit", "params", "samples", "spread"} <= first.keys()
    assert doc["measurements"][1]["value"] is None  # NaN is not JSON
    back, facts = read_microbench_json(path)
    assert back[0] == ms[0] and facts["name"] == "TITAN V"
    assert back[1].value is None and not back[1].valid


def test_write_is_atomic(tmp_path, monkeypatch) -> None:
    path = tmp_path / "mb.json"
    write_microbench_json(path, [Measurement("a", 1.0, "x")], {})
    before = path.read_text()

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        write_microbench_json(path, [Measurement("b", 2.0, "x")], {})
    assert path.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["mb.json"]  # no temp file left


def test_read_rejects_other_files_in_one_line(tmp_path) -> None:
    bad = tmp_path / "x.json"
    bad.write_text('{"schema": "hilsim.plan/1"}')
    with pytest.raises(HilsimError) as err:
        read_microbench_json(bad)
    assert "\n" not in str(err.value) and "hilsim.microbench/1" in str(err.value)
    with pytest.raises(HilsimError, match="no such file"):
        read_microbench_json(tmp_path / "missing.json")
