"""Suite runner and CLI without a GPU: one-line errors, lazy GPU imports, --help."""

from __future__ import annotations

import subprocess
import sys
import types

import pytest
from click.testing import CliRunner
from hilsim.microbench import runner
from hilsim.microbench.runner import FAMILIES, parse_only

from hilsim.cli.microbench import microbench_cmd
from hilsim.core.errors import HilsimError


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
