"""Clock locking and the clocks under load, with a stand-in ``nvidia-smi`` that replays the
real H100 output of ``tests/data/silicon/H100/logs/gpu1/clocks-*.log`` (the kit's
``nvidia-smi --query-gpu=...`` lines) and NVML answering with the clocks recorded there.

The stand-in is an executable on ``PATH`` (the agent finds ``nvidia-smi`` like a user's
shell would, and runs it without one): ``--query-gpu`` answers from the recorded CSV,
``-lgc`` / ``-rgc`` answer as ``$FAKE_SMI_MODE`` says (``ok``, ``refuse``: the text
nvidia-smi prints when a setting is not permitted is not in the recorded logs, so the
refusal line here is the stand-in's own), every call is appended to ``$FAKE_SMI_LOG``.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import time
import types
from pathlib import Path

import pytest
from click.testing import CliRunner
from hilsim.agent import probe

from hilsim.cli.main import cli
from tests.fake_cupy import FACTS, FakeCupy

LOGS = Path(__file__).parent / "data" / "silicon" / "H100" / "logs" / "gpu1"

_FAKE_SMI = r'''#!{python}
import os, sys, time
args = sys.argv[1:]
with open(os.environ["FAKE_SMI_LOG"], "a") as log:
    log.write(" ".join(args) + "\n")
mode = os.environ.get("FAKE_SMI_MODE", "ok")
if mode == "hang":
    time.sleep(30)
if any(a.startswith("--query-gpu=") for a in args):
    fields = next(a for a in args if a.startswith("--query-gpu=")).split("=", 1)[1].split(",")
    fmt = next((a for a in args if a.startswith("--format=")), "--format=csv").split("=", 1)[1]
    lines = open(os.environ["FAKE_SMI_CSV"]).read().splitlines()
    header = [h.strip().split(" [")[0] for h in lines[0].split(",")]
    values = [v.strip() for v in lines[1].split(",")]
    row = dict(zip(header, values))
    out = [row[f] for f in fields]
    if "nounits" in fmt:
        out = [v.split(" ")[0] for v in out]
    if "noheader" not in fmt:
        print(", ".join(fields))
    print(", ".join(out))
    sys.exit(0)
if "-lgc" in args or "-rgc" in args:
    if mode == "refuse":
        print("Setting locked GPU clocks is not permitted for GPU 00000000:00:06.0 (stand-in text)")
        sys.exit(0)
    print("done")
    sys.exit(0)
sys.exit(2)
'''


@pytest.fixture()
def smi(tmp_path, monkeypatch) -> Path:
    """The stand-in nvidia-smi on PATH; returns its call log."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "nvidia-smi"
    exe.write_text(_FAKE_SMI.replace("{python}", sys.executable))
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    log = tmp_path / "smi.log"
    log.write_text("")
    csv = tmp_path / "clocks.csv"
    csv.write_text("\n".join((LOGS / "clocks-start.log").read_text().splitlines()[:2]) + "\n")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("FAKE_SMI_LOG", str(log))
    monkeypatch.setenv("FAKE_SMI_CSV", str(csv))
    monkeypatch.setenv("FAKE_SMI_MODE", "ok")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    return log


def _calls(log: Path) -> list[str]:
    return log.read_text().splitlines()


def test_the_recorded_default_clock_is_read(smi) -> None:
    assert probe.default_application_clock_mhz(0) == (1980.0, "")


def test_locks_at_the_default_clock_and_resets(smi) -> None:
    with probe.locked_clocks(0) as lock:
        assert lock.locked and lock.requested_mhz == 1980.0
        assert lock.facts()["clocks_locked"] is True
    assert lock.restored.startswith("reset")
    calls = _calls(smi)
    assert calls[1] == "-i 0 -lgc 1980,1980" and calls[-1] == "-i 0 -rgc"


def test_reset_even_when_the_run_fails(smi) -> None:
    with pytest.raises(RuntimeError), probe.locked_clocks(0):
        raise RuntimeError("a benchmark crashed")
    assert _calls(smi)[-1] == "-i 0 -rgc"


def test_a_refusal_is_one_recorded_line(smi, monkeypatch) -> None:
    """nvidia-smi may exit 0 and only say that the setting did not take."""
    monkeypatch.setenv("FAKE_SMI_MODE", "refuse")
    with probe.locked_clocks(0, mhz=1755.0) as lock:
        pass
    assert not lock.locked and "refused" in lock.result and "\n" not in lock.result
    assert "-i 0 -rgc" not in _calls(smi)


def test_without_nvidia_smi(smi, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    lock = probe.lock_clocks(0)
    assert not lock.locked and lock.result.startswith("nvidia-smi not found")


def test_a_hung_nvidia_smi_times_out(smi, monkeypatch) -> None:
    monkeypatch.setenv("FAKE_SMI_MODE", "hang")
    monkeypatch.setattr(probe, "NVIDIA_SMI_TIMEOUT_S", 1)
    t0 = time.monotonic()
    lock = probe.lock_clocks(0)
    assert time.monotonic() - t0 < 10
    assert not lock.locked and "did not answer" in lock.result


def test_not_root_does_not_call_nvidia_smi(smi, monkeypatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    lock = probe.lock_clocks(0)
    assert not lock.locked and lock.result.startswith("not root")
    assert _calls(smi) == []


def test_opting_out_calls_nothing(smi) -> None:
    with probe.locked_clocks(0, enabled=False) as lock:
        pass
    assert not lock.locked and "--no-lock-clocks" in lock.result and _calls(smi) == []


def _nvml_after_microbench():
    """NVML answering with the SM and memory clocks nvidia-smi recorded right after the
    H100's microbenchmarks (``clocks-after-microbench.log``)."""
    text = (LOGS / "clocks-after-microbench.log").read_text().splitlines()
    header = [h.strip().split(" [")[0] for h in text[0].split(",")]
    row = dict(zip(header, (v.strip() for v in text[1].split(",")), strict=False))
    sm, mem = (float(row[k].split()[0]) for k in ("clocks.current.sm", "clocks.current.memory"))
    return types.SimpleNamespace(
        NVML_CLOCK_SM=0, NVML_CLOCK_MEM=1, nvmlInit=lambda: None, nvmlShutdown=lambda: None,
        nvmlDeviceGetHandleByIndex=lambda i: i, nvmlDeviceGetHandleByUUID=lambda u: 0,
        nvmlDeviceGetClockInfo=lambda h, c: sm if c == 0 else mem,
    ), (sm, mem)


@pytest.fixture()
def gpu(monkeypatch):
    cp = FakeCupy()
    nvml, clocks = _nvml_after_microbench()
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    monkeypatch.setattr(time, "sleep", lambda s: None)
    monkeypatch.setattr("hilsim.agent.microbench.device_facts", lambda device: dict(FACTS))
    return clocks


@pytest.mark.parametrize("lock", [True, False])
def test_microbench_records_the_lock_and_the_clocks_under_load(smi, gpu, tmp_path, lock) -> None:
    out = tmp_path / "mb.json"
    args = ["agent", "microbench", "--only", "clock", "-o", str(out)]
    res = CliRunner().invoke(cli, args + ([] if lock else ["--no-lock-clocks"]))
    assert res.exit_code == 0, res.output
    device = json.loads(out.read_text())["device"]
    assert device["clocks_locked"] is lock
    assert device["clock_lock"]["result"].startswith("locked at 1980" if lock else "not locked")
    assert ("restored" in device["clock_lock"]) is lock
    load = device["clocks_under_load"]
    assert load["sm_mhz"] == 1755.0  # the stand-in's clock64 / %globaltimer
    assert (load["nvml_sm_mhz"], load["nvml_mem_mhz"]) == gpu == (1980.0, 2619.0)
    assert (_calls(smi) != []) is lock
