"""What the H100 silicon session measured (``tests/data/silicon/H100``), read back here.

The fixtures are real tool output of one H100 80GB HBM3 (driver 580.159.04, CuPy 14.2,
cupti-python 13.0.1, torch 2.11, ncu 2025.3.1), kept by
``benchmarks/silicon/keep_fixtures.py`` (README beside them). These tests check that
every importer reads that output, that the two light backends agree on the same
workload, that the tuner reads the suite's file, that the sanity ranges hold where the
numbers are sound and warn where one is not, and replay the two defects the session
showed (the CUPTI backend's API flood, its NVTX ranges that never ended).
"""

from __future__ import annotations

import gzip
import json
import shutil
import sys
import types
from enum import IntEnum
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hilsim.agent.cupti_api import launch_cbids, restrict_to_launches
from hilsim.microbench.runner import FAMILIES
from hilsim.microbench.sanity import sanity_warnings

from hilsim.core.bundle import read_bundle
from hilsim.core.measurement import read_microbench_json
from hilsim.formats.cupti_records import bundle_from_cupti_records, read_cupti_records
from hilsim.formats.kineto import bundle_from_kineto
from hilsim.formats.ncu_csv import read_ncu_csv

H100 = Path(__file__).parent / "data" / "silicon" / "H100"
CBIDS = Path(__file__).parent / "data" / "agent" / "cupti-python-13.0.1-cbids.json"


def _gunzip(name: str, tmp_path: Path) -> Path:
    target = tmp_path / name.removesuffix(".gz")
    with gzip.open(H100 / "raw" / name, "rb") as src, target.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return target


def _bundle(name: str):
    return read_bundle(H100 / "bundles" / name)


# ------------------------------------------------------------------ microbenchmarks


def test_every_family_that_ran_has_a_measured_value():
    measurements, facts = read_microbench_json(H100 / "microbench.json")
    assert facts["name"] == "NVIDIA H100 80GB HBM3" and facts["compute_capability"] == "9.0"
    by_name = {m.name: m for m in measurements}
    assert all(m.valid and m.value is not None for m in measurements)
    expected = {
        "clock": ["sm_clock_mhz"],
        "launch": ["launch_latency_us", "launch_roundtrip_us"],
        "latency": ["l1_hit_latency", "l2_hit_latency", "dram_latency", "shared_latency",
                    "l1_capacity_bytes", "l2_capacity_bytes", "l1_sector_bytes"],
        "bandwidth": ["l1_bandwidth", "shared_bandwidth", "l2_bandwidth",
                      "dram_read_bandwidth", "dram_write_bandwidth", "dram_copy_bandwidth"],
        "compute": [f"{t}_{q}" for t in ("fp32", "fp64", "fp16", "int32", "tensor")
                    for q in ("throughput", "latency")],
        "atomics": ["atomic_latency", "atomic_throughput_distinct", "atomic_throughput_same"],
    }
    assert set(expected) == set(FAMILIES)
    missing = [name for names in expected.values() for name in names if name not in by_name]
    assert missing == []


def test_sanity_ranges_hold_and_flag_the_write_bandwidth():
    """Every latency, clock, capacity and bandwidth is inside the Hopper ranges except
    the suite's DRAM write figure (1394 GB/s, 42% of peak), which the driver's own fill
    contradicts on the same card (3214 GB/s: docs/silicon.md)."""
    measurements, facts = read_microbench_json(H100 / "microbench.json")
    warnings = sanity_warnings(measurements, facts)
    assert len(warnings) == 1 and warnings[0].startswith("dram_write_bandwidth = 1394 GB/s")
    fixed = [m for m in measurements if m.name != "dram_write_bandwidth"]
    assert sanity_warnings(fixed, facts) == []


@pytest.mark.parametrize("convention", ["accelsim-tuner", "simulator-corrected"])
def test_the_tuner_reads_the_silicon_suite(tmp_path, convention):
    from hilsim.cli.main import cli

    out = tmp_path / "tuned"
    result = CliRunner().invoke(cli, [
        "tune", str(H100 / "microbench.json"), "--device-facts", str(H100 / "probe.json"),
        "--convention", convention, "-o", str(out)])
    assert result.exit_code == 0, result.output
    options = dict(line.split(" ", 1) for line in (out / "gpgpusim.config").read_text()
                   .splitlines() if line.startswith("-"))
    assert options["-gpgpu_n_clusters"] == "132"  # probe.json
    if convention == "accelsim-tuner":  # the measured L1 32.0 and shared 23.0 cycles
        assert options["-gpgpu_l1_latency"] == "32" and options["-gpgpu_smem_latency"] == "23"
    report = json.loads((out / "tune-report.json").read_text())
    kinds = {row["field"]: row["kind"] for row in report["timing"]}
    assert kinds["core.core_clock_mhz"] == "measured" and kinds["core.sm_count"] == "device-query"


# ------------------------------------------------------------------ importers on real output


def test_cupti_records_reimport_to_the_kept_bundle(tmp_path):
    bundle = bundle_from_cupti_records(_gunzip("transformer.cupti.jsonl.gz", tmp_path))
    kept = _bundle("transformer-cupti")
    assert bundle.n_launches == kept.n_launches == 8803
    for column in ("name", "start_ns", "duration_ns", "grid_x", "block_x"):
        assert np.array_equal(bundle.launches[column].astype(str).to_numpy(),
                              kept.launches[column].astype(str).to_numpy()), column


def test_kineto_trace_cut_is_a_prefix_of_the_full_import(tmp_path):
    """The kept trace holds the events up to the third ``train_step``: its launches are the
    first launches of the whole run's bundle, name for name and duration for duration."""
    bundle = bundle_from_kineto(_gunzip("transformer.pt.trace.json.gz", tmp_path))
    full = _bundle("transformer-torch")
    n = bundle.n_launches
    assert 500 < n < full.n_launches
    for column in ("name", "duration_ns", "grid_x", "block_x"):
        assert np.array_equal(bundle.launches[column].astype(str).to_numpy(),
                              full.launches[column].astype(str).to_numpy()[:n]), column
    assert set(bundle.launches["region"].dropna().astype(str)) <= {
        "train_step", "train_step/Optimizer.step#AdamW.step"}


@pytest.mark.parametrize("workload", ["transformer", "cupy"])
def test_ncu_raw_csv_on_sm90_matches_the_bundle_metrics(tmp_path, workload):
    from hilsim.agent.ncu import DEFAULT_METRICS

    table = read_ncu_csv(_gunzip(f"{workload}.ncu-raw.csv.gz", tmp_path))
    assert len(table.launches) == 200
    # the kept run predates the warm-state placement's two counters (their names exist on
    # sm_90: test_hilsim_metric_names_exist_on_sm90); every other default was collected
    later = {"dram__sectors_read.sum", "lts__t_sectors_lookup_miss.sum"}
    assert set(DEFAULT_METRICS) - set(table.metrics.columns) == later
    metrics = _bundle(f"{workload}-cupti").metrics
    assert metrics is not None and len(metrics) == 200
    column = "smsp__inst_executed.sum"
    assert np.allclose(metrics.sort_values("launch_id")[column].to_numpy(),
                       table.metrics[column].to_numpy(), rtol=0, atol=0)


def test_hilsim_metric_names_exist_on_sm90():
    """ncu --query-metrics on the H100 lists every base name hilsim asks for (the
    ``launch__*`` attributes are launch statistics, which ncu does not list)."""
    from hilsim.agent.ncu import DEFAULT_METRICS

    with gzip.open(H100 / "ncu-metrics-sm90.txt.gz", "rt") as handle:
        names = set(handle.read().split())
    bases = {m.rsplit(".", 1)[0] for m in DEFAULT_METRICS}
    assert sorted(bases - names) == ["launch__block_size", "launch__grid_size",
                                     "launch__registers_per_thread"]


# ------------------------------------------------------------------ backends agree


@pytest.mark.parametrize("workload, n", [("cupy", 85016), ("transformer", 8803),
                                         ("resnet", 4762)])
def test_cupti_and_torch_backends_see_the_same_launches(workload, n):
    cupti, torch = _bundle(f"{workload}-cupti"), _bundle(f"{workload}-torch")
    assert cupti.n_launches == torch.n_launches == n
    names_c = cupti.launches["name"].astype(str).to_numpy()
    names_t = torch.launches["name"].astype(str).to_numpy()
    assert (names_c == names_t).mean() > 0.99
    # same kernels, timed by the same CUPTI underneath: total GPU time within 5%
    dur_c = cupti.launches["duration_ns"].sum()
    dur_t = torch.launches["duration_ns"].sum()
    assert abs(dur_c / dur_t - 1) < 0.05


def test_workload_nvtx_ranges_reach_the_cupti_bundle():
    """NVTX injection on silicon: the transformer's ``torch.cuda.nvtx`` steps and the
    CuPy workload's phases (plus CUB's own ``cub::`` ranges) become regions."""
    run2 = _bundle("transformer-cupti-run2")
    steps = {str(r) for r in run2.launches["region"].dropna()}
    assert steps == {f"step{k}" for k in range(30)}
    cupy = _bundle("cupy-cupti")
    phases = {str(r).split("/")[0] for r in cupy.launches["region"].dropna()}
    assert phases == {f"phase{p}_n2^{n}" for p, n in enumerate((16, 18, 20, 22, 18))}


# ------------------------------------------------------------------ CUPTI defects replayed


class _Kind(IntEnum):
    DRIVER = 2
    RUNTIME = 5
    CONCURRENT_KERNEL = 10
    MARKER = 12


def _enums() -> tuple[type[IntEnum], type[IntEnum]]:
    doc = json.loads(CBIDS.read_text())
    return (IntEnum("driver_api_trace_cbid", [tuple(x) for x in doc["driver"]]),
            IntEnum("runtime_api_trace_cbid", [tuple(x) for x in doc["runtime"]]))


def test_launch_apis_of_the_real_enumerations():
    """The launch set holds every callback id the H100 run recorded for a kernel (driver
    307 cuLaunchKernel from CuPy; runtime 211 cudaLaunchKernel and 430
    cudaLaunchKernelExC from CUB and PyTorch) and no other kind of call."""
    driver, runtime = _enums()
    drv = launch_cbids((m.name, int(m)) for m in driver)
    rt = launch_cbids((m.name, int(m)) for m in runtime)
    assert 307 in drv and {211, 430} <= rt
    names = sorted(m.name for m in driver if int(m) in drv)
    assert "cuLaunchHostFunc" not in names and "cuGraphLaunch" in names
    assert all("Launch" in n for n in names) and len(drv) == 12 and len(rt) == 11
    assert driver(307).name == "cuLaunchKernel" and runtime(307).name != "cudaLaunchKernel"


def _fake_cupti(deliver: list[list[object]], switches: bool = True):
    state: dict[str, object] = {"off": {"driver": set(), "runtime": set()}}
    driver, runtime = _enums()

    def register(requested, completed):
        state["completed"] = completed

    def flush(flag):
        while deliver:
            state["completed"](deliver.pop(0))

    module = types.SimpleNamespace(
        ActivityKind=_Kind, activity_register_callbacks=register,
        activity_enable=lambda kind: None, activity_flush_all=flush,
        get_timestamp=lambda: 10**9, driver_api_trace_cbid=driver,
        runtime_api_trace_cbid=runtime)
    if switches:
        module.activity_enable_driver_api = lambda cbid, on: state["off"]["driver"].add(cbid)
        module.activity_enable_runtime_api = lambda cbid, on: state["off"]["runtime"].add(cbid)
    return types.SimpleNamespace(cupti=module), state


def _kernel(corr: int, start: int, end: int, name: str = "k") -> object:
    return types.SimpleNamespace(
        kind=int(_Kind.CONCURRENT_KERNEL), name=name, start=start, end=end,
        correlation_id=corr, device_id=0, stream_id=7, context_id=1, grid_x=4, grid_y=1,
        grid_z=1, block_x=128, block_y=1, block_z=1, registers_per_thread=32,
        static_shared_memory=0, dynamic_shared_memory=0)


def _call(kind: _Kind, cbid: int, corr: int, start: int) -> object:
    return types.SimpleNamespace(kind=int(kind), cbid=cbid, start=start, end=start + 5,
                                 correlation_id=corr, thread_id=11, process_id=22)


def test_cupti_keeps_launch_calls_only(monkeypatch, tmp_path):
    """CuPy's driver calls around each launch (cuCtxGetCurrent 0x?? and friends) are
    switched off at the source and skipped in the callback where they still arrive."""
    from hilsim.agent.cupti_launch import CuptiRecorder

    driver, _runtime = _enums()
    other = int(driver["cuCtxGetCurrent"])
    batch = [_call(_Kind.DRIVER, other, 900 + i, 10 + i) for i in range(50)]
    batch += [_call(_Kind.DRIVER, 307, 1, 100), _kernel(1, 200, 300),
              _call(_Kind.RUNTIME, 211, 2, 110), _kernel(2, 310, 400),
              _call(_Kind.RUNTIME, 430, 3, 120), _kernel(3, 410, 500)]
    fake, state = _fake_cupti([batch])
    monkeypatch.setitem(sys.modules, "cupti", fake)
    out = tmp_path / "r.jsonl"
    recorder = CuptiRecorder(str(out), ["w.py"])
    recorder.start()
    assert other in state["off"]["driver"] and 307 not in state["off"]["driver"]
    assert {211, 430}.isdisjoint(state["off"]["runtime"])
    recorder.finish(True)
    header, kernels, calls, _ranges = read_cupti_records(out)
    assert header["api_filter"] == "cupti" and header["api_records_skipped"] == 50
    assert sorted(zip(calls["api"], calls["cbid"], strict=True)) == [
        ("driver", 307), ("runtime", 211), ("runtime", 430)]
    assert len(kernels) == 3


def test_cupti_without_per_api_switches_filters_in_the_callback(monkeypatch, tmp_path):
    from hilsim.agent.cupti_launch import CuptiRecorder

    batch = [_call(_Kind.DRIVER, 1, 900, 10), _call(_Kind.DRIVER, 307, 1, 100),
             _kernel(1, 200, 300)]
    fake, _state = _fake_cupti([batch], switches=False)
    monkeypatch.setitem(sys.modules, "cupti", fake)
    recorder = CuptiRecorder(str(tmp_path / "r.jsonl"), ["w.py"])
    recorder.start()
    recorder.finish(True)
    header = read_cupti_records(tmp_path / "r.jsonl")[0]
    assert header["api_filter"].startswith("callback only") and header["api_records_skipped"] == 1


def test_restrict_to_launches_switches_off_exactly_the_rest():
    driver, runtime = _enums()
    off: dict[str, list[int]] = {"driver": [], "runtime": []}
    cupti = types.SimpleNamespace(
        activity_enable_driver_api=lambda cbid, on: off["driver"].append((cbid, on)),
        activity_enable_runtime_api=lambda cbid, on: off["runtime"].append((cbid, on)))
    members = {"driver": [(m.name, int(m)) for m in driver if m.name not in ("INVALID", "SIZE",
                                                                           "FORCE_INT")],
               "runtime": [(m.name, int(m)) for m in runtime if m.name not in (
                   "INVALID", "SIZE", "FORCE_INT")]}
    assert restrict_to_launches(cupti, members) == "cupti"
    for api in ("driver", "runtime"):
        keep = launch_cbids(members[api])
        assert {c for c, _ in off[api]} == {c for _, c in members[api]} - keep
        assert all(on == 0 for _, on in off[api])


def test_real_ranges_that_never_ended_are_reported(monkeypatch, tmp_path):
    """Stand-in for the H100 transformer run with ``--nvtx-module``: its 30 step STARTs
    (real names and timestamps) came with no END that matched, so every step stayed
    open until the run stopped. The recorder counts them and the importer warns."""
    from hilsim.agent.cupti_launch import CuptiRecorder

    _h, kernels, _calls, ranges = read_cupti_records(_gunzip("transformer.cupti.jsonl.gz",
                                                             tmp_path))
    steps = ranges[ranges["name"].str.startswith("step")].sort_values("start")
    assert len(steps) == 30 and steps["end"].nunique() == 1  # all closed at the stop time
    starts = [types.SimpleNamespace(kind=int(_Kind.MARKER), flags_=2, id=k + 1,
                                    timestamp=int(t), name=name, domain="",
                                    object_id=types.SimpleNamespace(
                                        pt=types.SimpleNamespace(thread_id=11)))
              for k, (t, name) in enumerate(zip(steps["start"], steps["name"], strict=True))]
    first = int(kernels["start"].min())
    batch = [*starts, _call(_Kind.RUNTIME, 211, 1, first - 10), _kernel(1, first, first + 9)]
    fake, _state = _fake_cupti([batch])
    monkeypatch.setitem(sys.modules, "cupti", fake)
    monkeypatch.setattr("hilsim.agent.cupti_launch.loaded_library", lambda f: None)
    out = tmp_path / "replay.jsonl"
    recorder = CuptiRecorder(str(out), ["transformer_train.py"])
    recorder.start()
    recorder.finish(True)
    assert read_cupti_records(out)[0]["unclosed_ranges"] == 30
    warnings = bundle_from_cupti_records(out).manifest.get("warnings", [])
    assert any("30 NVTX range(s) never ended" in w for w in warnings)


def test_annotate_is_not_emitted_through_nvtx_under_the_cupti_recorder(monkeypatch, tmp_path):
    """Under the CUPTI backend ``--nvtx-module`` ranges are recorded by the recorder alone:
    the ``nvtx`` package is not called (its domain push is what the H100 run showed
    breaking the workload's own marker pairs)."""
    from hilsim.agent import nvtx as agent_nvtx
    from hilsim.agent.cupti_launch import CuptiRecorder

    calls: list[str] = []

    class _Annotate:
        def __init__(self, message, **kwargs):
            self.message = message

        def __enter__(self):
            calls.append(self.message)

        def __exit__(self, *exc):
            return False

    monkeypatch.setitem(sys.modules, "nvtx", types.SimpleNamespace(annotate=_Annotate))
    with agent_nvtx.annotate("plain"):
        pass
    assert calls == ["plain"]  # no recorder: emitted for nsys
    fake, _state = _fake_cupti([])
    monkeypatch.setitem(sys.modules, "cupti", fake)
    monkeypatch.setattr("hilsim.agent.cupti_launch.loaded_library", lambda f: None)
    recorder = CuptiRecorder(str(tmp_path / "r.jsonl"), ["w.py"])
    recorder.start()
    agent_nvtx.add_range_hook(recorder)
    try:
        with agent_nvtx.annotate("train_step"):
            pass
    finally:
        agent_nvtx.remove_range_hook(recorder)
    assert calls == ["plain"]
    assert [r["name"] for r in recorder.ranges] == ["train_step"]


def test_the_docs_overhead_figures_are_the_kept_runs() -> None:
    """The transformer's CUPTI overhead before and after the fix divides by two bare runs
    33% apart (gpu1, gpu2): docs/silicon.md gives each run's own seconds, read here from
    the kept manifests, not two ratios side by side."""
    before = json.loads((H100 / "bundles" / "transformer-cupti" / "manifest.json").read_text())
    after = json.loads((H100 / "manifests" / "transformer-cupti-light-gpu2.json").read_text())
    b, a = before["overhead"], after["overhead"]
    assert a["bare_wall_s"] / b["bare_wall_s"] > 1.3  # the baselines differ
    doc = (Path(__file__).parents[1] / "docs" / "silicon.md").read_text()
    for seconds in (b["bare_wall_s"], a["bare_wall_s"], b["light_wall_s"], a["light_wall_s"],
                    b["light_wall_s"] - b["bare_wall_s"], a["light_wall_s"] - a["bare_wall_s"]):
        assert f"{seconds:.2f} s" in doc, seconds
    assert "x1.97 -> x1.41," not in doc.replace("\n", " ")
