"""Device facts round trip: what ``agent probe`` and the microbench suite write is what the
tuner reads, and the probe does not merge two GPUs.

CuPy and NVML are replaced by stand-ins answering as an H100 PCIe does (114 SMs, 50 MiB
L2, HBM2e at 1593 MHz, 5120-bit bus), a card that must not get the SXM's memory clock.
"""

from __future__ import annotations

import sys
import types

import pytest
from hilsim.agent import probe
from hilsim.microbench import gpu as gpu_facts
from hilsim.microbench.cupy_device import CupyDevice
from hilsim.simmodel.tuner import tune

from hilsim.core import measurement_names as mn


class _Runtime:
    cudaDevAttrClockRate = 13
    cudaDevAttrMemoryClockRate = 36
    cudaDevAttrGlobalMemoryBusWidth = 37

    class CUDARuntimeError(RuntimeError):
        pass

    getDeviceCount = staticmethod(lambda: 1)
    runtimeGetVersion = staticmethod(lambda: 12080)
    driverGetVersion = staticmethod(lambda: 13000)
    deviceGetPCIBusId = staticmethod(lambda index: "0000:C1:00.0")

    @staticmethod
    def getDeviceProperties(index: int) -> dict:
        return {
            "name": b"NVIDIA H100 PCIe", "major": 9, "minor": 0,
            "multiProcessorCount": 114, "l2CacheSize": 50 << 20,
            "totalGlobalMem": 85 << 30, "sharedMemPerBlock": 48 << 10,
            "sharedMemPerMultiprocessor": 228 << 10, "regsPerMultiprocessor": 65536,
            "regsPerBlock": 65536, "maxBlocksPerMultiProcessor": 32,
            "maxThreadsPerMultiProcessor": 2048, "warpSize": 32, "maxThreadsPerBlock": 1024,
            "clockRate": 1755000, "memoryClockRate": 1593000, "memoryBusWidth": 5120,
            "pciBusID": 0xC1, "pciDomainID": 0,
        }

    deviceGetAttribute = staticmethod(lambda attr, index: 0)


def _fake_cupy():
    return types.SimpleNamespace(cuda=types.SimpleNamespace(runtime=_Runtime),
                                 __version__="14.2.0")


class _NVMLError(Exception):
    pass


def _fake_pynvml(gpus: list[dict]):
    """NVML over ``gpus`` (PCI order): each {name, uuid, bus, sm, mem}."""
    handles = {i: g for i, g in enumerate(gpus)}
    by_bus = {g["bus"]: g for g in gpus}

    def by_pci(bus):
        key = bus.upper()
        if key not in by_bus:
            raise _NVMLError("not found")
        return by_bus[key]

    return types.SimpleNamespace(
        NVMLError=_NVMLError, NVML_CLOCK_SM=0, NVML_CLOCK_MEM=1,
        nvmlInit=lambda: None, nvmlShutdown=lambda: None,
        nvmlDeviceGetCount=lambda: len(gpus),
        nvmlDeviceGetHandleByIndex=lambda i: handles[i],
        nvmlDeviceGetHandleByPciBusId=by_pci,
        nvmlDeviceGetName=lambda h: h["name"], nvmlDeviceGetUUID=lambda h: h["uuid"],
        nvmlSystemGetDriverVersion=lambda: "580.65.06",
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(total=85 << 30),
        nvmlDeviceGetMaxClockInfo=lambda h, c: h["sm"] if c == 0 else h["mem"],
        nvmlDeviceGetClockInfo=lambda h, c: 345 if c == 0 else h["mem"],
        nvmlDeviceGetMemoryBusWidth=lambda h: 5120,
        nvmlDeviceGetCudaComputeCapability=lambda h: (9, 0),
        nvmlSystemGetCudaDriverVersion=lambda: 13000,
        nvmlDeviceGetPciInfo=lambda h: types.SimpleNamespace(busId=h["bus"]),
    )


H100_PCIE = {"name": "NVIDIA H100 PCIe", "uuid": "GPU-pcie", "bus": "00000000:C1:00.0",
             "sm": 1755, "mem": 1593}
OTHER = {"name": "NVIDIA A100-SXM4-40GB", "uuid": "GPU-a100", "bus": "00000000:07:00.0",
         "sm": 1410, "mem": 1215}


@pytest.fixture()
def gpu(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy())
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml([OTHER, H100_PCIE]))


def _written(gpu_facts: dict) -> set[str]:
    return set(gpu_facts)


def test_every_key_written_is_known_to_the_tuner(gpu) -> None:
    """A key the probe or the suite writes must be in the one table: tuned, or recorded."""
    keys = _written(gpu_facts.device_facts(0)) | _written(probe.probe_device(0, tools=False))
    unknown = keys - mn.known_fact_keys()
    assert not unknown, f"device facts the tuner does not read: {sorted(unknown)}"


@pytest.mark.parametrize("writer", ["suite", "probe"])
def test_every_tuned_fact_lands_as_device_query(gpu, writer) -> None:
    facts = gpu_facts.device_facts(0) if writer == "suite" else probe.probe_device(0, tools=False)
    cfg = tune(facts=facts, facts_where=writer).timing
    missing = []
    for fact in mn.DEVICE_FACTS:
        if any(k in facts for k in fact.keys):
            got = cfg.get(fact.field)
            if got is None or got.source.kind != "device-query":
                missing.append(fact.field)
    assert not missing, missing
    assert cfg.get("dram.clock_mhz").value == 1593  # not the SXM preset's 2619
    assert cfg.get("l2.capacity_bytes").value == 50 << 20
    assert cfg.get("core.sm_count").value == 114


def test_probe_matches_nvml_to_cuda_by_pci_bus_id(gpu) -> None:
    """CUDA device 0 is NVML's GPU 1 here: name, UUID and clocks come from that one."""
    facts = probe.probe_device(0, tools=False)
    assert facts["uuid"] == "GPU-pcie" and facts["max_mem_clock_mhz"] == 1593
    assert facts["sm_count"] == 114


@pytest.mark.parametrize(("cc", "driver", "extra"), [
    ("7.0", 13, "gpu-cuda12"),  # V100 on an R580 driver: CUDA 13 has no sm_70
    ("7.2", 13, "gpu-cuda12"),
    ("7.5", 13, "gpu-cuda13"),
    ("9.0", 12, "gpu-cuda12"),
    ("9.0", 13, "gpu-cuda13"),
])
def test_extra_is_chosen_by_compute_capability(cc, driver, extra) -> None:
    assert gpu_facts.gpu_extra_for(cc, driver) == extra


def test_probe_names_the_extra(gpu) -> None:
    assert probe.probe_device(0, tools=False)["pip_extra"] == "gpu-cuda13"


def test_require_cupy_names_the_extra_by_compute_capability(monkeypatch) -> None:
    from hilsim.core.errors import HilsimError

    monkeypatch.setitem(sys.modules, "cupy", None)
    with pytest.raises(HilsimError, match=r"gpu-cuda12\]' for compute capability < 7.5"):
        gpu_facts.require_cupy()


def test_compile_failure_on_volta_with_cuda13_names_the_extra() -> None:
    from hilsim.core.errors import HilsimError

    def raw_module(code, options):
        raise RuntimeError("nvrtc: error: invalid value for --gpu-architecture (-arch)")

    cp = types.SimpleNamespace(RawModule=raw_module, __version__="14.2.0")
    ctx = CupyDevice(cp=cp, device=0, facts={"cc_major": 7, "cc_minor": 0,
                                             "cuda_runtime_version": 13000})
    with pytest.raises(HilsimError, match=r"CUDA 13 cannot compile for sm_70.*gpu-cuda12"):
        ctx.kernel("latency.chase", "chase_ca")


def test_clock_and_simulated_card_keys_are_known() -> None:
    """What ``hilsim agent microbench`` adds to the device block (the clock lock, the clocks
    under load) and what a simulated card's facts hold are in the table too."""
    from pathlib import Path  # noqa: PLC0415

    from hilsim.simmodel.gpgpusim.cards import card_config  # noqa: PLC0415
    from hilsim.simmodel.gpgpusim.simdevice import card_device_facts  # noqa: PLC0415

    lock = probe.ClockLock(True, 1980.0, "locked at 1980 MHz", restored="reset").facts()
    written = set(lock) | {"clocks_under_load"}
    config = Path(__file__).parent / "data" / "accelsim" / "SM7_QV100.gpgpusim.config"
    written |= set(card_device_facts(card_config(config))) | {"simulation"}
    assert not written - mn.known_fact_keys(), sorted(written - mn.known_fact_keys())
