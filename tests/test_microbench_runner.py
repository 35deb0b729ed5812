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
