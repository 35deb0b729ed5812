"""The whole CuPy suite on a numpy stand-in for CuPy (``tests/fake_cupy.py``): every family
runs through :class:`~hilsim.microbench.cupy_device.CupyDevice`, validates what the
emulated kernels return, and writes the measurements (names, units, param keys, in order)
of the suite's real H100 run (``tests/data/silicon/H100/microbench.json``). Both devices
implement the :class:`~hilsim.microbench.device.Device` protocol."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hilsim.microbench import runner, unit_ops
from hilsim.microbench.cupy_device import CupyDevice
from hilsim.microbench.device import FEATURES, Device, Setup
from hilsim.microbench.program import Program
from hilsim.simmodel.gpgpusim.cards import card_config
from hilsim.simmodel.gpgpusim.simdevice import GpgpusimDevice

from hilsim.core.errors import HilsimError
from tests.fake_cupy import FACTS, FakeCupy

H100 = Path(__file__).parent / "data" / "silicon" / "H100" / "microbench.json"
QV100 = Path(__file__).parent / "data" / "accelsim" / "SM7_QV100.gpgpusim.config"


@pytest.fixture()
def fake(monkeypatch) -> FakeCupy:
    cp = FakeCupy()
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setitem(sys.modules, "pynvml", None)
    host = [0]

    def perf_counter_ns() -> int:  # a host that queues a launch per microsecond
        host[0] += 1000
        return host[0]

    monkeypatch.setattr(time, "perf_counter_ns", perf_counter_ns)
    monkeypatch.setattr(time, "perf_counter", lambda: perf_counter_ns() / 1e9)
    monkeypatch.setattr(time, "sleep", lambda s: None)
    return cp


def test_suite_writes_what_the_h100_run_wrote(fake: FakeCupy) -> None:
    got = runner.run_suite(None, progress=False, facts=dict(FACTS))
    silicon = json.loads(H100.read_text())["measurements"]
    # the unit-operation probes (SFU, division, min/max, shuffle) came after the H100 run
    probes = unit_ops.measurement_names()
    assert [m.name for m in got if m.name not in probes] == [m["name"] for m in silicon]
    assert [m.name for m in got if m.name in probes] == probes
    for m, s in zip([m for m in got if m.name not in probes], silicon, strict=True):
        # the DRAM bandwidths also name the kernel they timed since the H100 run
        added = ["kernel"] if m.name in ("dram_write_bandwidth", "dram_copy_bandwidth") else []
        # and the clocks: NVML's memory clock under load, the DRAM chase's own clock
        later = {"sm_clock_mhz": ["nvml_mem_clock_mhz"]}.get(m.name, [])
        if m.name in ("dram_latency", "dram_latency_page_stride"):
            later = ["chase_sm_clock_mhz", "sm_clock_mhz", "clock_source",
                     "cycles_at_chase_clock", "clock_conversion"]
        assert m.unit == s["unit"], m.name
        assert list(m.params) == added + list(s["params"]) + later, m.name
    # the stand-in's kernels answer as the families expect (its stride curve is flat)
    assert [m.name for m in got if not m.valid] == ["l1_sector_bytes"]
    by_name = {m.name: m for m in got}
    assert by_name["l1_hit_latency"].value == 30.0
    assert by_name["dram_latency"].value == 500.0
    assert by_name["l1_capacity_bytes"].value == 256 << 10
    assert by_name["sm_clock_mhz"].value == 1755.0
    assert by_name["l2_bandwidth"].params["sm_clock_mhz"] == 1755.0  # measured, then used
    # launch latency is the empty kernels' %globaltimer spacing (4 us in the stand-in),
    # not the host's round trip (its perf_counter advances 1 us a call)
    assert by_name["launch_latency_us"].value == pytest.approx(4.0)
    assert by_name["launch_roundtrip_us"].value != pytest.approx(4.0)
    # lat_*: 64 n x 4 + 5 cycles, a slope of 4 per operation; init_*: 4 warps, the last
    # stopping 4 x 1024 n cycles after the first starts (the span, not warp 0's time)
    assert by_name["sfu_latency"].value == 4.0 and by_name["int_max_latency"].value == 4.0
    assert by_name["shfl_initiation"].value == pytest.approx(1024 / (32 * 4))
    assert by_name["int_div_initiation"].value == pytest.approx(1024 / 32)
    assert all(by_name[n].unit == "cycles" and by_name[n].valid for n in probes)
    kernels = {k[0] for k in fake.launches}
    assert {"spin_kernel", "empty_kernel", "chase_ca", "chase_cg", "chase_shared", "l1_read",
            "shared_read", "grid_read_ca", "grid_read_cg", "grid_copy", "grid_write",
            "tput_fp16x2",
            "lat_int32", "mma_tput", "mma_lat", "atomic_lat", "atomic_tput",
            "clock_probe", "lat_sfu", "init_sfu", "lat_int_div", "init_int_div", "lat_fp_div",
            "lat_int_max", "lat_fp_max", "lat_shfl", "init_shfl"} <= kernels


def test_dram_write_bandwidth_launches_grid_write(fake: FakeCupy) -> None:
    """The H100 run's write figure (1394 GB/s) was exactly half its copy figure (2795):
    the write measurement picked its kernel by ``name.endswith("write")``, which
    ``dram_write_bandwidth`` never satisfies, so it timed ``grid_copy`` and counted the
    bytes once. The same kernel timed alone on that card wrote 3144 GB/s."""
    got = {m.name: m for m in runner.run_suite(["bandwidth"], progress=False,
                                                facts=dict(FACTS))}
    assert "grid_write" in {k[0] for k in fake.launches}
    assert got["dram_write_bandwidth"].params["kernel"] == "grid_write"
    assert got["dram_copy_bandwidth"].params["kernel"] == "grid_copy"


def test_batch_timing_keeps_resets_outside_the_window(fake: FakeCupy) -> None:
    device = CupyDevice(cp=fake, device=0, facts=dict(FACTS))
    program = Program("atomics.atomic").buf("data", 4)
    index = program.launch("atomic_tput", 1, 32, [("buf", "data"), ("i32", 4), ("i32", 1)],
                           timing="batch", reset=["data"])
    program.read("data")
    res = device.run("atomics", program, Setup.SM_SLICE)
    k = res.batch[index]
    assert k == 10 and res.ms[index] == pytest.approx(1.0)  # >= 10 ms of 1 ms launches
    assert int(res.array("data", np.uint32)[0]) == k * 32 * 4  # reset before the window
    assert len(fake.launches) == 1 + k


def test_both_devices_implement_the_protocol() -> None:
    gpu = CupyDevice(cp=FakeCupy(), device=0, facts=dict(FACTS))
    sim = GpgpusimDevice(card_config(QV100))
    members = [m for m in Device.__dict__ if not m.startswith("_")]
    for device in (gpu, sim):
        missing = [m for m in members if not hasattr(device, m)]
        assert not missing, (type(device).__name__, missing)
    assert all(gpu.supports(f) for f in FEATURES) and not gpu.simulated
    assert sim.simulated and set(sim.unsupported) <= set(FEATURES)


def test_dram_latency_is_converted_to_the_suite_clock(fake: FakeCupy, monkeypatch) -> None:
    """One warp runs at the 1980 MHz boost while the all-SM load holds 1755 MHz: the
    chase's cycles are 1980 MHz cycles, the tuner's core clock is the 1755 MHz one."""
    probe = fake.kernels.clock_probe

    def boosting(g, b, n, a, bb, magic, out, rec) -> None:
        probe(g, b, n, a, bb, magic, out, rec)
        if g == 1:  # one block of one warp
            rec.a.view(np.uint64)[:2] = [int(n) * 1980, int(n) * 1000]

    monkeypatch.setattr(fake.kernels, "clock_probe", boosting)
    got = {m.name: m for m in runner.run_suite(["clock", "latency"], progress=False,
                                                facts=dict(FACTS))}
    dram = got["dram_latency"]
    assert dram.params["chase_sm_clock_mhz"] == 1980.0 and dram.params["sm_clock_mhz"] == 1755.0
    assert dram.params["cycles_at_chase_clock"] == 500.0  # the stand-in's DRAM chase
    assert dram.value == pytest.approx(500.0 * 1755 / 1980)
    assert dram.params["clock_conversion"] == pytest.approx(1755 / 1980)
    # without the clock family there is no all-SM clock to convert to
    alone = {m.name: m for m in runner.run_suite(["latency"], progress=False,
                                                  facts=dict(FACTS))}["dram_latency"]
    assert alone.value == 500.0 and alone.params["clock_conversion"] == 1.0


def test_a_missing_nvrtc_names_the_extra(fake: FakeCupy, monkeypatch) -> None:
    """A driver-only host without NVRTC: CuPy cannot load libnvrtc; the error says so and
    names the extra that installs it (not a compute-capability problem)."""
    def no_nvrtc(code: str, options: tuple = ()) -> None:
        raise RuntimeError("CuPy failed to load libnvrtc.so.12: OSError: libnvrtc.so.12: "
                           "cannot open shared object file: No such file or directory")

    monkeypatch.setattr(fake, "RawModule", no_nvrtc)
    device = CupyDevice(cp=fake, device=0, facts=dict(FACTS))
    with pytest.raises(HilsimError) as err:
        device.kernel("compute.ops", "lat_sfu")
    message = str(err.value)
    assert "\n" not in message and "NVRTC is missing" in message and "gpu-cuda12" in message
