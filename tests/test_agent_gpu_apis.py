"""GPU-library contracts of the agent and the microbenchmarks, checked without a GPU.

* Fakes of cupti-python / torch / CuPy stand in for the libraries where the behaviour
  matters (incomplete CUPTI records after a forced flush, a stop signal during a trace
  export, CUDA 13 device properties without the clock fields).
* API-shape checks against the real packages run when they are installed (CuPy is in
  the test extra; cupti-python, nvtx and nvidia-ml-py are skipped when absent).
"""

from __future__ import annotations

import inspect
import json
import os
import signal
import sys
import threading
import types
from enum import IntEnum

import pytest

from hilsim.formats.cupti_records import bundle_from_cupti_records, read_cupti_records

# ------------------------------------------------------------------ fake cupti-python


class _Kind(IntEnum):
    DRIVER = 2
    RUNTIME = 5
    CONCURRENT_KERNEL = 10


def _fake_cupti(deliver: list[list[object]], fail: Exception | None = None):
    """A ``cupti`` package whose ``activity_flush_all`` hands ``deliver`` to the callback."""
    state: dict[str, object] = {"enabled": [], "flushes": 0}

    def activity_register_callbacks(requested, completed):
        size, max_records = requested()
        assert size > 0 and max_records == 0
        state["completed"] = completed

    def activity_enable(kind):
        if fail is not None:
            raise fail
        state["enabled"].append(kind)

    def activity_flush_all(flag):
        assert flag == 1
        state["flushes"] += 1
        while deliver:
            state["completed"](deliver.pop(0))

    module = types.SimpleNamespace(
        ActivityKind=_Kind,
        activity_register_callbacks=activity_register_callbacks,
        activity_enable=activity_enable,
        activity_flush_all=activity_flush_all,
        get_timestamp=lambda: 1000,
    )
    return types.SimpleNamespace(cupti=module), state


def _kernel(corr: int, start: int, end: int, name: str = "k") -> object:
    return types.SimpleNamespace(
        kind=int(_Kind.CONCURRENT_KERNEL), name=name, start=start, end=end,
        correlation_id=corr, device_id=0, stream_id=7, context_id=1, grid_x=4, grid_y=1,
        grid_z=1, block_x=128, block_y=1, block_z=1, registers_per_thread=32,
        static_shared_memory=0, dynamic_shared_memory=0,
    )


def _call(corr: int, start: int, end: int, kind: _Kind = _Kind.DRIVER) -> object:
    return types.SimpleNamespace(
        kind=int(kind), start=start, end=end, correlation_id=corr, thread_id=11,
        process_id=22, cbid=307,
    )


def test_cupti_forced_flush_drops_incomplete_records(monkeypatch, tmp_path):
    """Records of work in flight (CUPTI_TIMESTAMP_UNKNOWN = 0) never reach the file."""
    from hilsim.agent.cupti_launch import CuptiRecorder

    batches = [[
        _call(1, 100, 110), _kernel(1, 200, 300),
        _call(2, 120, 130, _Kind.RUNTIME), _kernel(2, 310, 0),  # still running: no end
        _call(3, 140, 0), _kernel(3, 0, 0),  # call cut short, kernel not started
    ]]
    fake, state = _fake_cupti(batches)
    monkeypatch.setitem(sys.modules, "cupti", fake)
    out = tmp_path / "r.jsonl"
    recorder = CuptiRecorder(str(out), ["w.py"])
    recorder.start()
    assert state["enabled"] == [_Kind.CONCURRENT_KERNEL, _Kind.RUNTIME, _Kind.DRIVER]
    recorder.finish(False, "stopped by SIGINT")
    header, kernels, runtime, _ranges = read_cupti_records(out)
    assert header["dropped_incomplete"] == 3
    assert kernels["correlation_id"].tolist() == [1] and runtime["correlation_id"].tolist() == [1]
    bundle = bundle_from_cupti_records(out)  # the importer accepts what was written
    assert bundle.n_launches == 1 and bundle.manifest["complete"] is False


def test_cupti_finish_from_a_handler_inside_a_locked_section(monkeypatch, tmp_path):
    """A stop handler's finish() on the thread that holds the lock must not deadlock."""
    from hilsim.agent.cupti_launch import CuptiRecorder

    fake, _state = _fake_cupti([[_call(1, 1, 2), _kernel(1, 3, 4)]])
    monkeypatch.setitem(sys.modules, "cupti", fake)
    recorder = CuptiRecorder(str(tmp_path / "r.jsonl"), ["w.py"])
    recorder.start()

    def interrupted_pop() -> None:
        with recorder._lock:  # as if SIGINT arrived inside pop()
            recorder.finish(False, "stopped by SIGINT")

    worker = threading.Thread(target=interrupted_pop, daemon=True)
    worker.start()
    worker.join(10)
    assert not worker.is_alive(), "finish() deadlocked on the recorder's own lock"
    assert len(read_cupti_records(tmp_path / "r.jsonl")[1]) == 1


def test_cupti_start_failure_is_one_line(monkeypatch, capsys, tmp_path):
    from hilsim.agent import cupti_launch

    fake, _state = _fake_cupti([], fail=RuntimeError("CUPTI_ERROR_NOT_INITIALIZED\ndetail"))
    monkeypatch.setitem(sys.modules, "cupti", fake)
    with pytest.raises(SystemExit) as stop:
        cupti_launch.main(["--out", str(tmp_path / "r.jsonl"), "--", "w.py"])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "CUPTI_ERROR_NOT_INITIALIZED" in err[0]


# --------------------------------------------------------- stop signals during export


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                    reason="signal handlers need the main thread")
def test_deferred_stop_signals_delivers_after_the_block():
    from hilsim.agent.launch import deferred_stop_signals

    seen: list[str] = []
    old = signal.signal(signal.SIGTERM, lambda s, f: seen.append("handler"))
    try:
        with deferred_stop_signals():
            os.kill(os.getpid(), signal.SIGTERM)
            seen.append("block done")
        assert seen == ["block done", "handler"]
        assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, old)


def test_torch_recorder_signal_during_export(monkeypatch, tmp_path):
    """SIGTERM while the trace is exported: the export completes, then the handler runs."""
    from hilsim.agent.torch_launch import TorchRecorder

    out = tmp_path / "t.json"
    recorder = TorchRecorder(str(out))
    handled: list[bool] = []

    class Profiler:
        def stop(self) -> None:
            pass

        def export_chrome_trace(self, path: str) -> None:
            os.kill(os.getpid(), signal.SIGTERM)  # a timeout's signal, mid-export
            with open(path, "w") as handle:
                json.dump({"traceEvents": []}, handle)

    recorder.profiler = Profiler()
    recorder._torch = types.SimpleNamespace(
        cuda=types.SimpleNamespace(is_available=lambda: False), __version__="2.11.0"
    )

    def handler(signum, frame):  # what install_stop_handlers does, minus the exit
        recorder.finish(False, "stopped by SIGTERM")
        handled.append(out.is_file())

    old = signal.signal(signal.SIGTERM, handler)
    try:
        recorder.finish(True)
    finally:
        signal.signal(signal.SIGTERM, old)
    assert handled == [True]
    assert json.loads(out.read_text()) == {"traceEvents": []}
    assert json.loads((tmp_path / "t.json.status.json").read_text())["complete"] is True


# ------------------------------------------------- CUDA 13 properties without clocks


class _Runtime:
    """CuPy's runtime module of a build whose properties lack the removed CUDA 13 fields."""

    cudaDevAttrClockRate = 13
    cudaDevAttrMemoryClockRate = 36
    cudaDevAttrGlobalMemoryBusWidth = 37

    class CUDARuntimeError(RuntimeError):
        pass

    @staticmethod
    def getDeviceCount() -> int:
        return 1

    @staticmethod
    def getDeviceProperties(index: int) -> dict:
        return {
            "name": b"NVIDIA H100 80GB HBM3", "major": 9, "minor": 0,
            "multiProcessorCount": 132, "l2CacheSize": 50 << 20,
            "totalGlobalMem": 80 << 30, "sharedMemPerBlock": 48 << 10,
            "sharedMemPerMultiprocessor": 228 << 10, "regsPerMultiprocessor": 65536,
            "maxThreadsPerMultiProcessor": 2048, "warpSize": 32, "maxThreadsPerBlock": 1024,
        }

    @staticmethod
    def deviceGetAttribute(attr: int, index: int) -> int:
        return {13: 1980000, 36: 2619000, 37: 5120}[attr]

    runtimeGetVersion = staticmethod(lambda: 13000)
    driverGetVersion = staticmethod(lambda: 13000)

    @staticmethod
    def deviceGetPCIBusId(index: int) -> str:
        return "0000:18:00.0"


def _fake_cupy():
    return types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=_Runtime),
                                 __version__="14.2.0")


def test_probe_cuda_facts_without_clock_properties(monkeypatch):
    from hilsim.agent import probe

    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy())
    facts = probe.cuda_facts(0)
    assert facts["max_sm_clock_mhz"] == 1980.0 and facts["max_mem_clock_mhz"] == 2619.0
    assert facts["bus_width_bits"] == 5120 and facts["name"] == "NVIDIA H100 80GB HBM3"


def test_microbench_device_facts_without_clock_properties(monkeypatch):
    from hilsim.microbench import gpu

    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy())
    monkeypatch.setitem(sys.modules, "pynvml", None)  # NVML absent: CUDA attributes only
    facts = gpu.device_facts(0)
    assert facts["max_sm_clock_mhz"] == 1980.0 and facts["max_mem_clock_mhz"] == 2619.0
    assert facts["memory_bus_width_bits"] == 5120
    assert facts["peak_dram_gbs"] == pytest.approx(3352.32)  # H100 SXM: 3.35 TB/s


# ------------------------------------------------------- shapes of the real packages


@pytest.mark.slow
def test_cupy_runtime_names_used():
    cupy = pytest.importorskip("cupy")
    runtime = cupy.cuda.runtime
    for name in ("cudaDevAttrClockRate", "cudaDevAttrMemoryClockRate",
                 "cudaDevAttrGlobalMemoryBusWidth", "deviceGetAttribute",
                 "getDeviceProperties", "getDeviceCount", "runtimeGetVersion",
                 "driverGetVersion", "deviceGetPCIBusId", "memGetInfo", "CUDARuntimeError"):
        assert hasattr(runtime, name), name
    for name in ("get_elapsed_time", "Event", "get_current_stream", "Device"):
        assert hasattr(cupy.cuda, name), name
    assert hasattr(cupy, "RawModule") and hasattr(cupy, "get_default_memory_pool")


def test_cupti_python_names_used():
    try:
        from cupti import cupti
    except Exception as exc:  # noqa: BLE001 - not installed, or libcupti not loadable
        pytest.skip(f"cupti-python not importable: {exc}")
    for kind in ("CONCURRENT_KERNEL", "RUNTIME", "DRIVER"):
        assert hasattr(cupti.ActivityKind, kind)
    for name in ("activity_register_callbacks", "activity_enable", "activity_flush_all",
                 "get_timestamp"):
        assert callable(getattr(cupti, name)), name


def test_nvtx_annotate_arguments():
    nvtx = pytest.importorskip("nvtx")
    params = inspect.signature(nvtx.annotate.__init__).parameters
    assert {"message", "color", "domain"} <= set(params)
    with nvtx.annotate(message="hilsim", color="blue", domain="hilsim"):
        pass


def test_pynvml_names_used():
    pynvml = pytest.importorskip("pynvml")
    for name in ("nvmlInit", "nvmlShutdown", "nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex",
                 "nvmlDeviceGetHandleByPciBusId", "nvmlDeviceGetHandleByUUID",
                 "nvmlDeviceGetName", "nvmlDeviceGetUUID", "nvmlSystemGetDriverVersion",
                 "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetMaxClockInfo",
                 "nvmlDeviceGetClockInfo", "nvmlDeviceGetMemoryBusWidth",
                 "nvmlDeviceGetCudaComputeCapability", "nvmlSystemGetCudaDriverVersion",
                 "nvmlDeviceGetPciInfo", "NVML_CLOCK_SM", "NVML_CLOCK_MEM", "NVMLError"):
        assert hasattr(pynvml, name), name
    assert issubclass(pynvml.NVMLError_NotSupported, pynvml.NVMLError)


def test_gpu_extras_pull_nvrtc():
    """A host with only the driver compiles the suite: each GPU extra installs CuPy >= 14
    (which finds NVRTC installed from PyPI) and NVRTC of its CUDA major."""
    import re  # noqa: PLC0415
    import tomllib  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    extras = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())[
        "project"]["optional-dependencies"]
    for major in (12, 13):
        deps = extras[f"gpu-cuda{major}"]
        cupy = next(d for d in deps if d.startswith(f"cupy-cuda{major}x"))
        assert re.search(r">=\s*14", cupy), cupy
        toolkit = next(d for d in deps if d.startswith("cuda-toolkit["))
        parts = re.fullmatch(r"cuda-toolkit\[([a-z,]+)\]==(\d+)\.\*", toolkit)
        assert parts and "nvrtc" in parts.group(1).split(",") and int(parts.group(2)) == major


@pytest.mark.parametrize(("bus", "family"), [(5120, "HBM"), (4096, "HBM"), (3072, "HBM"),
                                             (384, "GDDR"), (256, "GDDR"), (192, "GDDR"),
                                             (768, None), (None, None)])
def test_memory_family_from_the_bus_width(bus, family):
    from hilsim.microbench import gpu

    assert gpu.memory_type_from_bus(bus)[0] == family


def test_the_probe_and_the_suite_give_the_family_the_base_choice_compares(monkeypatch):
    """An A100-like device (cc 8.0, 5120-bit bus): both fact sources say HBM, and the base
    choice, whose nearest card by compute capability is a GDDR6 one, says the families
    differ (without the family it chose silently)."""
    from hilsim.agent import probe
    from hilsim.microbench import gpu
    from hilsim.simmodel.tuner.basecard import CardKey, choose, device_key

    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy())
    monkeypatch.setitem(sys.modules, "pynvml", None)
    suite = gpu.device_facts(0)
    probed = probe.probe_device(0, tools=False)
    assert suite["memory_family"] == probed["memory_family"] == "HBM"
    assert "5120 bits" in suite["memory_family_from"]
    assert "memory_type" not in suite  # the generation is not known: no DRAM model from it
    bases = [CardKey("SM86_RTX3070", "8.6", "GDDR6", 46), CardKey("SM7_QV100", "7.0", "HBM", 80)]
    for facts in (suite, probed):
        a100 = {**facts, "compute_capability": "8.0", "sm_count": 108}
        choice = choose(device_key(a100), bases)
        assert choice.name == "SM86_RTX3070"
        assert any("HBM memory" in m or "GDDR6 memory" in m for m in choice.mismatches), choice
        assert "memory HBM" in choice.reason
