"""Warnings on real traces: real files where they show the case,
synthetic launches for the cases no shipped trace has (NCCL, overlapping streams)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hilsim.analyzer.examples import EXAMPLES
from hilsim.analyzer.tracecheck import method_warnings

from hilsim.cli.main import main
from hilsim.core.schema import normalize_launches
from hilsim.formats.read import import_profile
from hilsim.formats.tracewarnings import busy_time, trace_warnings
from tests.conftest import DATA


def _launches(names, starts, durations, streams) -> pd.DataFrame:
    frame = pd.DataFrame(
        {"name": names, "start_ns": starts, "duration_ns": durations, "stream": streams}
    )
    return normalize_launches(frame, "synthetic")


def test_busy_time_is_the_union_of_intervals() -> None:
    start = np.array([0, 5, 20, 22, 40])
    duration = np.array([10, 10, 5, 1, 0])
    # [0,15) [20,25) [40,40): 15 + 5 + 0
    assert busy_time(start, duration) == 20.0
    rng = np.random.default_rng(0)
    start = rng.integers(0, 10_000, 500)
    duration = rng.integers(0, 100, 500)
    covered = np.zeros(11_000, dtype=bool)
    for s, d in zip(start, duration, strict=True):
        covered[s : s + d] = True
    assert busy_time(start, duration) == covered.sum()


def test_communication_and_overlap_warnings() -> None:
    n = 1000
    names = ["ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)"] * 200 + ["gemm"] * 800
    starts = np.concatenate([np.arange(200) * 1000, np.arange(800) * 1000])  # two streams
    durations = np.full(n, 900)
    streams = [7] * 200 + [13] * 800
    warnings = trace_warnings(_launches(names, starts, durations, streams))
    assert any(w.startswith("communication kernels (NCCL etc.) hold 20%") for w in warnings)
    assert any(
        w.startswith("kernels overlap in time (2 streams): the sum of durations is 1.25x")
        for w in warnings
    )
    serial = trace_warnings(_launches(["gemm"] * n, np.arange(n) * 1000, durations, [1] * n))
    assert serial == []


def test_microsecond_timer_on_a_real_kineto_trace() -> None:
    """hta-a100-cupti-counters: a real Kineto trace with whole-µs durations; the V100
    trace of the same project has ns timestamps and must not warn."""
    bundle = import_profile(DATA / "kineto" / "hta-a100-cupti-counters.trace.json.gz")
    assert any("whole microseconds" in w for w in bundle.manifest["warnings"])
    ns = import_profile(DATA / "kineto" / "hta-v100-ns-resolution.trace.json.gz")
    assert ns.manifest["warnings"] == []


def test_wide_table_order_and_few_launches(tmp_path, capsys) -> None:
    wide = EXAMPLES[0]
    code = main(["import", str(wide.path(wide.profile)), "-o", str(tmp_path / "b")])
    err = capsys.readouterr().err
    assert code == 0
    assert "hilsim: warning: the launch order is not real" in err
    assert len([line for line in err.splitlines() if line.startswith("hilsim: warning")]) == 1
    manifest = (tmp_path / "b" / "manifest.json").read_text()
    assert "launch order is not real" in manifest
    nerf = import_profile(DATA / "nsys-sqlite" / "casio-nerf-a100.nsys.sqlite")
    assert nerf.manifest["warnings"] == []
    few = method_warnings(nerf.launches, "stem")
    assert len(few) == 1 and few[0].startswith("only 1,106 launches for stem")
    assert "fewer than 30 launches" in few[0]
    code = main(["plan", str(tmp_path / "b"), "-m", "stem", "-o", str(tmp_path / "p.json")])
    assert code == 0
    assert "launch order is not real" in capsys.readouterr().err


def test_busy_time_without_overlaps_equals_the_general_rule() -> None:
    # the shortcut (each launch starts after the previous ended: busy = sum of durations)
    # against the block rule on the same launches, touching, apart and overlapping
    rng = np.random.default_rng(3)
    duration = rng.integers(0, 50, 2000)
    gaps = rng.integers(0, 5, 2000)  # 0: touching
    start = np.cumsum(np.concatenate(([0], duration[:-1] + gaps[:-1])))
    assert busy_time(start, duration) == float(duration.sum())
    overlapping = start.copy()
    overlapping[1::7] -= 3  # some launches start before the previous one ended
    order = np.argsort(overlapping, kind="stable")
    s, d = overlapping[order], duration[order]
    end = np.maximum.accumulate(s + d)
    covered = np.zeros(int(end.max()) + 1, dtype=bool)
    for a, b in zip(s, s + d, strict=True):
        covered[a:b] = True
    assert busy_time(overlapping, duration) == float(covered.sum())
