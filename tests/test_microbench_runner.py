"""Suite runner and CLI without a GPU: one-line errors, lazy GPU imports, --help."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import pytest
from click.testing import CliRunner
from hilsim.microbench import runner
from hilsim.microbench.runner import FAMILIES, parse_only

from hilsim.cli.microbench import microbench_cmd
from hilsim.core.errors import HilsimError
from tests.fake_cupy import FACTS, FakeCupy


def test_importing_the_suite_loads_no_gpu_module() -> None:
    code = (
        "import sys, microbench, microbench.runner, microbench.sources;"
        "bad = [m for m in ('cupy', 'pynvml') if m in sys.modules];"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_parse_only() -> None:
    assert parse_only(None) == list(FAMILIES)
    assert parse_only("bandwidth, latency") == ["latency", "bandwidth"]  # suite order
    assert parse_only(["ATOMICS"]) == ["atomics"]
    with pytest.raises(HilsimError) as err:
        parse_only("latency,cache")
    assert "\n" not in str(err.value) and "unknown family cache" in str(err.value)


def test_unknown_family_fails_before_touching_the_gpu(monkeypatch) -> None:
    monkeypatch.setattr(runner, "device_facts", lambda device: pytest.fail("GPU touched"))
    with pytest.raises(HilsimError, match="unknown family"):
        runner.run_suite(["nope"])


def test_no_cupy_is_one_line_error(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy -> ImportError
    with pytest.raises(HilsimError) as err:
        runner.run_suite(["latency"], progress=False)
    message = str(err.value)
    assert message.startswith("no CUDA GPU/driver found:") and "\n" not in message


def test_no_driver_is_one_line_error(monkeypatch) -> None:
    class Runtime:
        @staticmethod
        def getDeviceCount() -> int:
            raise RuntimeError("cudaErrorInsufficientDriver: CUDA driver version is\ninsufficient")

    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=Runtime), __version__="0")
    monkeypatch.setitem(sys.modules, "cupy", fake)
    with pytest.raises(HilsimError) as err:
        runner.device_facts(0)
    assert str(err.value) == (
        "no CUDA GPU/driver found: cudaErrorInsufficientDriver: CUDA driver version is"
    )


def test_zero_devices(monkeypatch) -> None:
    runtime = types.SimpleNamespace(getDeviceCount=lambda: 0)
    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=runtime), __version__="0")
    monkeypatch.setitem(sys.modules, "cupy", fake)
    with pytest.raises(HilsimError, match="0 devices"):
        runner.device_facts(0)


def test_cli_help() -> None:
    result = CliRunner().invoke(microbench_cmd, ["--help"])
    assert result.exit_code == 0
    for option in ("-o, --output", "--only", "--device", "microbench.json"):
        assert option in result.output
    assert microbench_cmd.name == "microbench"


def test_cli_without_gpu_raises_hilsim_error(monkeypatch, tmp_path) -> None:
    monkeypatch.setitem(sys.modules, "cupy", None)
    out = tmp_path / "mb.json"
    result = CliRunner().invoke(microbench_cmd, ["-o", str(out), "--only", "latency"])
    assert isinstance(result.exception, HilsimError)
    assert not out.exists()
    bad = CliRunner().invoke(microbench_cmd, ["--only", "warp"])
    assert isinstance(bad.exception, HilsimError) and "unknown family warp" in str(bad.exception)


# --- --skip / --quick -------------------------------------------------------------------

def _suite(monkeypatch, **kwargs):

    cp = FakeCupy()
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setitem(sys.modules, "pynvml", None)
    return runner.run_suite(["latency"], progress=False, facts=dict(FACTS), **kwargs), cp


def test_quick_skips_the_sweeps_and_says_so(monkeypatch) -> None:
    got, cp = _suite(monkeypatch, quick=True)
    by_name = {m.name: m for m in got}
    for name in runner.QUICK_SKIP:
        m = by_name[name]
        assert not m.valid and m.value is None and m.note == "skipped: not run (--quick)"
    assert "l1_capacity_bytes" not in by_name  # the sweep's products are not invented
    assert by_name["l1_hit_latency"].valid
    full, cp_full = _suite(monkeypatch)
    assert len(cp.launches) < len(cp_full.launches) / 2  # the sweeps are most of the launches


def test_skip_names_a_benchmark_of_this_device(monkeypatch) -> None:
    got, _ = _suite(monkeypatch, skip=["shared_latency"])
    assert {m.name: m.note for m in got}["shared_latency"] == "skipped: not run (--skip)"
    with pytest.raises(HilsimError) as err:
        _suite(monkeypatch, skip=["l1_footprint_sweep"])
    assert "\n" not in str(err.value) and "latency_footprint_sweep" in str(err.value)


def test_the_tuner_works_on_what_a_quick_run_leaves(tmp_path) -> None:
    """The committed simulated QV100 file with the sweep's rows as ``--quick`` writes them:
    ``hilsim tune`` succeeds and emits the same options (it takes the L1 size from the
    device facts, which it prefers to the sweep anyway)."""

    from hilsim.cli.main import main  # noqa: PLC0415

    data = Path(__file__).parent / "data" / "microbench" / "gpgpusim"
    doc = json.loads((data / "SM7_QV100.microbench.json").read_text())
    sweep = {"latency_footprint_sweep", "l1_capacity_bytes", "l2_capacity_bytes"}
    quick = dict(doc)
    quick["measurements"] = [m for m in doc["measurements"] if m["name"] not in sweep] + [
        {"name": "latency_footprint_sweep", "value": None, "unit": "", "params": {},
         "samples": [], "spread": 0.0, "valid": False, "note": "skipped: not run (--quick)"}]
    (tmp_path / "quick.json").write_text(json.dumps(quick))
    for name in ("full", "quick"):
        src = data / "SM7_QV100.microbench.json" if name == "full" else tmp_path / "quick.json"
        assert main(["tune", str(src), "--preset", "QV100", "-o", str(tmp_path / name)]) == 0
    full = (tmp_path / "full" / "gpgpusim.config").read_text().splitlines()
    fast = (tmp_path / "quick" / "gpgpusim.config").read_text().splitlines()
    assert [line for line in full if line.startswith("-")] == [
        line for line in fast if line.startswith("-")]


# --- the command: one call on the device the factory gives --------------------------------

def test_the_command_runs_on_the_device_the_factory_gives(monkeypatch, tmp_path) -> None:
    """``hilsim agent microbench`` asks :func:`~hilsim.agent.microbench.suite_device` for
    its device, runs the suite there once, writes the file and prints the run's table,
    the file written and its lines (the skipped benchmarks, the simulation's cost)."""
    from hilsim.agent import microbench as suite

    from hilsim.cli import microbench as command
    from hilsim.core.measurement import Measurement, read_microbench_json

    asked: list[tuple[str, dict]] = []

    class Simulated:
        def measure(self, families, skip, quick, output):
            asked.append(("measure", {"families": families, "skip": skip, "quick": quick}))
            rows = [Measurement("l1_hit_latency", 28.0, "cycles", valid=True),
                    Measurement("latency_footprint_sweep", None, "", valid=False,
                                note="skipped: not run (--quick)")]
            sim = {"sim_cycles": 12345.0, "wall_s": 61.0, "runs": [{}, {}], "build": "k1",
                   "families": {"latency": 60.4}, "families_cpu_s": {"latency": 58.6}}
            return rows, {"name": "GPGPU-Sim SM7_QV100", "compute_capability": "7.0",
                          "simulation": sim}

    def factory(backend, **options):
        asked.append((backend, options))
        return Simulated()

    monkeypatch.setattr(command, "suite_device", factory)
    out = tmp_path / "mb.json"
    res = CliRunner().invoke(microbench_cmd, ["--backend", "gpgpusim", "--card", "SM7_QV100",
                                              "--only", "latency", "--quick", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert asked[0][0] == "gpgpusim" and asked[0][1]["card"] == "SM7_QV100"
    assert asked[1] == ("measure", {"families": ["latency"], "skip": [], "quick": True})
    measurements, facts = read_microbench_json(out)
    assert [m.name for m in measurements] == ["l1_hit_latency", "latency_footprint_sweep"]
    run = suite.MicrobenchRun(out, measurements, facts)
    assert run.written() == f"wrote {out} (2 measurements, 1 invalid)"
    assert run.lines() == [
        "skipped latency_footprint_sweep: not run (--quick)",
        "simulated 12,345 cycles in 61 s wall (2 simulator runs, build k1)",
        "wall time per family: latency 60 s (59 s CPU)",
    ]
    printed = res.output.splitlines()
    assert printed[-3:] == run.lines() and run.written() in printed
    # a card names a simulated device: the GPU backend refuses it before running anything
    bad = CliRunner().invoke(microbench_cmd, ["--card", "SM7_QV100", "-o", str(out)])
    assert bad.exit_code == 2 and "--card needs --backend gpgpusim" in bad.output
    assert len(asked) == 2


def test_the_device_factory_names_each_backend() -> None:
    from hilsim.agent.microbench import BACKENDS, GpuSuite, SimulatedSuite, suite_device

    assert isinstance(suite_device("cupy", device=1), GpuSuite)
    assert suite_device("cupy", device=1).device == 1
    assert isinstance(suite_device("gpgpusim", card="SM7_QV100"), SimulatedSuite)
    with pytest.raises(HilsimError, match="needs --card"):
        suite_device("gpgpusim").measure(["latency"], [], False, Path("unused.json"))
    with pytest.raises(HilsimError, match="choose from cupy, gpgpusim"):
        suite_device("opencl")
    assert BACKENDS == ("cupy", "gpgpusim")
