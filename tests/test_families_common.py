"""Checks every microbenchmark family must pass (``microbench/sources.py``'s
``FAMILY_MODULES``), as ``tests/test_methods_common.py`` runs one list over every method.

Each family's ``benchmarks(device)`` runs on two stand-in devices: the CuPy device over
the numpy stand-in for CuPy (``tests/fake_cupy.py``: the suite's kernels emulated on the
host) and the same device made to answer as a simulator does (deterministic, one run a
measurement, launches timed in cycles, without the features GPGPU-Sim lacks), so both
branches of a family run. Then:

* every benchmark returns measurements, without raising;
* every measurement is named in ``hilsim.core.measurement_names``: the tuner's
  (``MEASUREMENTS``) or the suite's own (``SUITE_MEASUREMENTS``), never a name spelled
  only in the family;
* every measurement carries the unit its name declares, and an invalid one says why;
* every kernel a family launches is an ``extern "C"`` kernel of a source in the suite's
  list (``sources.all_sources()``, what ``tests/test_microbench_nvrtc.py`` compiles for
  sm_70/75/86/90), and every source the family ships is on that list;
* no module of ``microbench/`` spells a measurement name as a string: it imports the
  constant.

Each check is run once on a mutant (a family that breaks it) and must report it.
"""

from __future__ import annotations

import ast
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType, SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hilsim.microbench import sources
from hilsim.microbench.cupy_device import CupyDevice, CupyRun
from hilsim.microbench.device import Setup
from hilsim.microbench.program import Launch, Program
from hilsim.simmodel.gpgpusim.simdevice import UNSUPPORTED

from hilsim.core import measurement_names as mn
from hilsim.core.measurement import Measurement, Stability
from tests.fake_cupy import FACTS, FakeCupy

FAMILIES = list(sources.FAMILY_MODULES)
#: every name a family may write, with its unit
DECLARED = {**mn.MEASUREMENTS, **mn.SUITE_MEASUREMENTS}


@dataclass
class SimulatedFake(CupyDevice):
    """The CuPy stand-in answering as a simulated card: one run per measurement, every
    launch timed as 1,000 cycles, a 2-SM slice on one of 4 memory channels, and the
    features GPGPU-Sim lacks missing."""

    simulated: bool = field(default=True, init=False)
    unsupported: Any = field(default_factory=lambda: MappingProxyType(dict(UNSUPPORTED)),
                             init=False)
    backend_params: dict[str, Any] = field(default_factory=lambda: {"backend": "fake"},
                                           init=False)
    kernel_clock_params: dict[str, Any] = field(
        default_factory=lambda: {"backend": "fake", "clock": "fake cycles"}, init=False)
    cold_l2_note: str = field(default="cold by the fake's setting", init=False)
    memory_scale_note: str = field(default="fake channels", init=False)
    memory_slice_channels: int = field(default=1, init=False)

    @property
    def active_sms(self) -> int:
        return 2

    @property
    def memory_scale(self) -> int:
        return 4

    def sample(self, fn: Callable[[], float], max_reps: int, rel_spread_bound: float,
               min_reps: int) -> Stability:
        value = float(fn())
        return Stability([value], value, 0.0, True)

    def slice_params(self) -> dict[str, Any]:
        return {**self.kernel_clock_params, "sms_simulated": self.active_sms}

    def run(self, bench: str, program: Program, setup: Setup, *, timed: bool = True) -> CupyRun:
        result = super().run(bench, program, setup, timed=timed)
        result.kernel_cycles = [1000.0 for _ in program.launches]
        return result


class Recording:
    """A device whose every run is recorded: (source name, kernels launched)."""

    def __init__(self, device: CupyDevice) -> None:
        self.device = device
        self.runs: list[tuple[str, list[str]]] = []
        run = device.run

        def recorded(bench: str, program: Program, setup: Setup, *, timed: bool = True):
            kernels = [s.kernel for s in program.steps if isinstance(s, Launch)]
            self.runs.append((program.module, kernels))
            return run(bench, program, setup, timed=timed)

        device.run = recorded  # type: ignore[method-assign]


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


DEVICES = {
    "gpu": lambda cp: CupyDevice(cp=cp, device=0, facts=dict(FACTS)),
    "simulated": lambda cp: SimulatedFake(cp=cp, device=0, facts={
        **FACTS, "max_sm_clock_mhz": 1380.0, "unified_l1_shared_bytes": 32 << 10}),
}


def run_family(module: Any, device: CupyDevice) -> tuple[list[Measurement], Recording]:
    """Every benchmark of ``module`` on ``device``, in order (none may raise)."""
    recording = Recording(device)
    out: list[Measurement] = []
    for _name, bench in module.benchmarks(device):
        out.extend(bench(device))
    return out, recording


# --- the checks: each returns what is wrong ------------------------------------------------

def unnamed(measurements: list[Measurement]) -> list[str]:
    """Measurements named nowhere in ``hilsim.core.measurement_names``."""
    return [m.name for m in measurements if m.name not in DECLARED]


def wrong_units(measurements: list[Measurement]) -> list[str]:
    """Measurements without the unit their name declares."""
    return [f"{m.name}: {m.unit!r} != {DECLARED[m.name].unit!r}" for m in measurements
            if m.name in DECLARED and m.unit != DECLARED[m.name].unit]


def unexplained(measurements: list[Measurement]) -> list[str]:
    """Invalid measurements that do not say why (skipped, failed, or the check that
    refused them)."""
    return [m.name for m in measurements if not m.valid and not m.note.strip()]


def unlisted_kernels(runs: list[tuple[str, list[str]]], module: Any, family: str) -> list[str]:
    """Kernels launched from, or sources shipped outside, the suite's compiled list."""
    listed = sources.kernel_names()
    bad = [f"{source}:{k}" for source, kernels in runs for k in kernels
           if k not in listed.get(source, [])]
    bad += [f"{family}.{name} not compiled" for name in module.SOURCES
            if f"{family}.{name}" not in sources.all_sources()]
    return bad


def literal_names(path: Path) -> list[str]:
    """Strings in the source, docstrings and dictionary keys aside (a params key may read
    like a name: ``sm_clock_mhz``), that spell a measurement name."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and node.body \
                and isinstance(node.body[0], ast.Expr):
            skip.add(id(node.body[0].value))
        if isinstance(node, ast.Dict):
            skip.update(id(k) for k in node.keys if k is not None)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "get" and node.args:
            skip.add(id(node.args[0]))
    return [f"{path.name}:{n.lineno}: {n.value}" for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in skip and n.value in DECLARED]


# --- over every family ---------------------------------------------------------------------

@pytest.mark.parametrize("kind", list(DEVICES))
@pytest.mark.parametrize("family", FAMILIES)
def test_family_runs_on_the_fake_device_and_names_what_it_measures(
    fake: FakeCupy, family: str, kind: str
) -> None:
    module = sources.FAMILY_MODULES[family]
    measurements, recording = run_family(module, DEVICES[kind](fake))
    assert measurements, family
    assert all(isinstance(m, Measurement) for m in measurements)
    assert unnamed(measurements) == []
    assert wrong_units(measurements) == []
    assert unlisted_kernels(recording.runs, module, family) == []
    assert unexplained(measurements) == []


@pytest.mark.parametrize(
    "module", sorted(p.name for p in Path(sources.__file__).parent.glob("*.py")))
def test_microbench_spells_no_measurement_name(module: str) -> None:
    """Families, their unit probes, the runner and the sanity ranges alike."""
    assert literal_names(Path(sources.__file__).parent / module) == []


def test_the_simulated_branches_take_the_devices_own_notes(fake: FakeCupy) -> None:
    """The cold-L2 and memory-channel notes in the params are the device's words."""
    device = DEVICES["simulated"](fake)
    by_name = {m.name: m for family in ("latency", "bandwidth")
               for m in run_family(sources.FAMILY_MODULES[family], device)[0]}
    assert by_name[mn.DRAM_LATENCY].params["cold"] == "cold by the fake's setting"
    assert by_name[mn.DRAM_READ_BANDWIDTH].params["cold"] == (
        "cold by the fake's setting (L2 cold after the copies)")
    assert by_name[mn.DRAM_READ_BANDWIDTH].params["scaling"] == (
        "x 4 fake channels: channels are independent")


def test_a_slice_of_several_channels_gives_the_bandwidth_per_channel(fake: FakeCupy) -> None:
    """L2 and DRAM bandwidth on a memory slice of k channels: the footprint per channel is
    the one-channel slice's, and the slice's bytes per clock are divided by k before the
    card's channels multiply them. The stand-in times every launch 1,000 cycles, so the
    same bytes per channel give the same figure on 1 and 2 channels (a slice's figure not
    divided by its channels would double)."""
    from hilsim.microbench import bandwidth  # noqa: PLC0415 (the module under test)

    def measured(k: int) -> dict[str, Measurement]:
        device = DEVICES["simulated"](fake)
        device.memory_slice_channels = k
        return {m.name: m for m in (*bandwidth.l2(device), bandwidth.dram_read_slice(device),
                                    *bandwidth.dram_write_copy_slice(device))}

    one, two = measured(1), measured(2)
    for name in (mn.L2_BANDWIDTH, mn.DRAM_READ_BANDWIDTH, mn.DRAM_WRITE_BANDWIDTH,
                 mn.DRAM_COPY_BANDWIDTH):
        assert two[name].params["mem_channels_simulated"] == 2, name
        assert two[name].params["footprint_bytes"] == 2 * one[name].params["footprint_bytes"]
        assert two[name].params["slice_bytes_per_clk"] == pytest.approx(
            2 * one[name].params["slice_bytes_per_clk"]), name
        assert two[name].value == pytest.approx(one[name].value), name
    assert two[mn.DRAM_READ_BANDWIDTH].params["scaling"] == (
        "x 4 / 2 fake channels: channels are independent")


# --- each check catches its mutant -----------------------------------------------------------

def _mutant(benchmarks: Callable[[Any], list], sources_: dict[str, str] | None = None) -> Any:
    return SimpleNamespace(SOURCES=sources_ or {}, benchmarks=benchmarks)


def test_the_name_check_catches_a_name_the_family_made_up() -> None:
    typo = Measurement("l1_hit_latancy", 28.0, "cycles")
    assert unnamed([typo, Measurement(mn.L1_HIT_LATENCY, 28.0, "cycles")]) == ["l1_hit_latancy"]


def test_the_explanation_check_catches_a_silent_invalid_row() -> None:
    rows = [Measurement(mn.L1_HIT_LATENCY, None, "cycles", valid=False, note=""),
            Measurement(mn.L2_HIT_LATENCY, None, "cycles", valid=False, note="skipped: no L2")]
    assert unexplained(rows) == ["l1_hit_latency"]


def test_the_unit_check_catches_a_missing_or_other_unit() -> None:
    rows = [Measurement(mn.L2_BANDWIDTH, 64.0, "GB/s"), Measurement(mn.LAUNCH_ROUNDTRIP_US, 9.0,
                                                                      "")]
    assert wrong_units(rows) == ["l2_bandwidth: 'GB/s' != 'bytes/clk'",
                                 "launch_roundtrip_us: '' != 'us'"]


def test_the_source_check_catches_an_unlisted_kernel_and_source(fake: FakeCupy) -> None:
    def bench(device: Any) -> list[Measurement]:
        program = Program("latency.chase").buf("out", 8)
        program.launch("chase_nowhere", 1, 1, [("buf", "out")])
        device.run("mutant", program, Setup.ONE_SM)
        return []

    module = _mutant(lambda device: [("mutant", bench)], {"extra": "__global__ void k() {}"})
    recording = Recording(DEVICES["gpu"](fake))
    recording.device.kernel = lambda module, name: (lambda *a, **k: None)  # type: ignore
    for _name, run in module.benchmarks(recording.device):
        run(recording.device)
    assert unlisted_kernels(recording.runs, module, "mutant") == [
        "latency.chase:chase_nowhere", "mutant.extra not compiled"]


def test_the_literal_check_catches_a_spelled_name(tmp_path: Path) -> None:
    path = tmp_path / "family.py"
    path.write_text('"""Measures ``l1_hit_latency``."""\n\n'
                    'def bench(device, mhz):\n'
                    '    params = {"sm_clock_mhz": mhz, "n": device.facts.get("sm_clock_mhz")}\n'
                    '    return [Measurement("l1_hit_latency", 28.0, "cycles", params)]\n')
    assert literal_names(path) == ["family.py:5: l1_hit_latency"]


def test_every_family_is_checked() -> None:
    """The registry is what the suite runs: a family left out of it runs nowhere."""
    folder = Path(sources.__file__).parent
    with_benchmarks = {p.stem for p in folder.glob("*.py")
                       if "\ndef benchmarks(" in p.read_text(encoding="utf-8")}
    assert with_benchmarks - {"unit_ops"} == set(FAMILIES)
    assert np.all([hasattr(sources.FAMILY_MODULES[f], "SOURCES") for f in FAMILIES])
