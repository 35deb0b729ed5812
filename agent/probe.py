"""``hilsim agent probe``: the device facts a bundle's manifest records.

NVML (``pynvml`` from nvidia-ml-py) gives what the driver knows: name, UUID, max SM and
memory clocks, bus width, memory size, driver and CUDA driver versions, compute
capability. CUDA device properties (CuPy) give the rest: SM count, L2 size, and the CUDA
runtime version. Either source alone still yields a partial probe (``sources`` says which
answered); neither, or no GPU, is a one-line :class:`~hilsim.core.errors.HilsimError`.
Both libraries are imported inside the functions only.
"""

from __future__ import annotations

import contextlib
from typing import Any

from hilsim.agent.tools import all_tools
from hilsim.microbench.gpu import gpu_extra_for, nvml_handle

from hilsim.core.errors import HilsimError


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def nvml_facts(index: int = 0, pci_bus_id: str | None = None) -> dict[str, Any]:
    """Facts NVML knows about CUDA device ``index`` (matched by ``pci_bus_id`` when CUDA
    gave one: NVML's own index order is PCI order, CUDA's need not be). Raises ImportError /
    RuntimeError."""
    import pynvml  # lazy: GPU extra

    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        raise RuntimeError(f"NVML could not start ({exc}): no NVIDIA driver or GPU") from exc
    try:
        count = pynvml.nvmlDeviceGetCount()
        if count == 0:
            raise RuntimeError("NVML sees no NVIDIA GPU")
        if pci_bus_id is None and not 0 <= index < count:
            raise RuntimeError(f"no GPU {index} (NVML sees {count})")
        handle = nvml_handle(pynvml, pci_bus_id, index)
        facts: dict[str, Any] = {
            "index": index,
            "name": _text(pynvml.nvmlDeviceGetName(handle)),
            "uuid": _text(pynvml.nvmlDeviceGetUUID(handle)),
            "driver": _text(pynvml.nvmlSystemGetDriverVersion()),
            "memory_bytes": int(pynvml.nvmlDeviceGetMemoryInfo(handle).total),
            "devices_visible": int(count),
        }
        optional = {
            "max_sm_clock_mhz": lambda: pynvml.nvmlDeviceGetMaxClockInfo(
                handle, pynvml.NVML_CLOCK_SM
            ),
            "max_mem_clock_mhz": lambda: pynvml.nvmlDeviceGetMaxClockInfo(
                handle, pynvml.NVML_CLOCK_MEM
            ),
            "sm_clock_mhz": lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
            "mem_clock_mhz": lambda: pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM),
            "bus_width_bits": lambda: pynvml.nvmlDeviceGetMemoryBusWidth(handle),
            "compute_capability": lambda: "{}.{}".format(
                *pynvml.nvmlDeviceGetCudaComputeCapability(handle)
            ),
            "cuda_driver_version": lambda: _cuda_version(pynvml.nvmlSystemGetCudaDriverVersion()),
            "pci_bus_id": lambda: _text(pynvml.nvmlDeviceGetPciInfo(handle).busId),
        }
        for key, getter in optional.items():
            try:
                facts[key] = getter()
            except (pynvml.NVMLError, AttributeError, TypeError):
                continue
        return facts
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()


def _cuda_version(code: int) -> str:
    """CUDA's integer version (12040) as text (``12.4``)."""
    code = int(code)
    return f"{code // 1000}.{(code % 1000) // 10}"


def _attribute(runtime: Any, name: str, index: int) -> int | None:
    """``cudaDeviceGetAttribute(name)`` through CuPy, or None when unavailable."""
    try:
        return int(runtime.deviceGetAttribute(getattr(runtime, name), index))
    except Exception:  # noqa: BLE001 - optional fact (old CuPy, unsupported attribute)
        return None


def cuda_facts(index: int = 0) -> dict[str, Any]:
    """Facts from CUDA device properties via CuPy. Raises ImportError / RuntimeError."""
    import cupy  # lazy: GPU extra

    runtime = cupy.cuda.runtime
    try:
        count = runtime.getDeviceCount()
        if not 0 <= index < count:
            raise RuntimeError(f"no GPU {index} (CUDA sees {count})")
        props = runtime.getDeviceProperties(index)
        runtime_version = runtime.runtimeGetVersion()
        driver_version = runtime.driverGetVersion()
    except runtime.CUDARuntimeError as exc:
        raise RuntimeError(f"CUDA could not open a GPU ({exc})") from exc

    def prop(key: str) -> Any:
        value = props.get(key)
        return _text(value) if isinstance(value, bytes) else value

    facts: dict[str, Any] = {
        "name": prop("name"),
        "compute_capability": f"{prop('major')}.{prop('minor')}",
        "sm_count": prop("multiProcessorCount"),
        "l2_bytes": prop("l2CacheSize"),
        "memory_bytes": prop("totalGlobalMem"),
        "bus_width_bits": prop("memoryBusWidth"),
        "shared_mem_per_block_bytes": prop("sharedMemPerBlock"),
        "shared_mem_per_sm_bytes": prop("sharedMemPerMultiprocessor"),
        "regs_per_sm": prop("regsPerMultiprocessor"),
        "max_threads_per_sm": prop("maxThreadsPerMultiProcessor"),
        "warp_size": prop("warpSize"),
        "cuda_runtime": _cuda_version(runtime_version),
        "cuda_driver_version": _cuda_version(driver_version),
        "cupy_version": cupy.__version__,
    }
    try:
        facts["pci_bus_id"] = _text(runtime.deviceGetPCIBusId(index))
    except Exception:  # noqa: BLE001 - optional: NVML then falls back to its index
        facts["pci_bus_id"] = None
    # kHz. CUDA 13 removed clockRate/memoryClockRate from cudaDeviceProp; CuPy 14 still
    # fills the keys from cudaDeviceGetAttribute, other builds may leave them out: ask
    # the attribute directly then (NVML's clocks win in probe_device anyway)
    for key, attr, out in (
        ("clockRate", "cudaDevAttrClockRate", "max_sm_clock_mhz"),
        ("memoryClockRate", "cudaDevAttrMemoryClockRate", "max_mem_clock_mhz"),
    ):
        value = props.get(key)
        if not isinstance(value, int) or value <= 0:
            value = _attribute(runtime, attr, index)
        if isinstance(value, int) and value > 0:
            facts[out] = value / 1000.0
    if facts["bus_width_bits"] is None:
        facts["bus_width_bits"] = _attribute(runtime, "cudaDevAttrGlobalMemoryBusWidth", index)
    uuid = props.get("uuid")
    if isinstance(uuid, bytes) and len(uuid) == 16:
        h = uuid.hex()
        facts["uuid"] = f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
    return {k: v for k, v in facts.items() if v is not None}


def probe_device(index: int = 0, tools: bool = True) -> dict[str, Any]:
    """Device facts of GPU ``index`` (NVML first, CUDA properties for the rest) plus tools.

    Keys: name, uuid, compute_capability, sm_count, max_sm_clock_mhz, max_mem_clock_mhz,
    bus_width_bits, memory_bytes, l2_bytes, driver, cuda_runtime, cuda_driver_version,
    ... , ``sources`` (which libraries answered) and ``tools`` (nsys / ncu / cupti /
    torch: usable, version, reason). Raises :class:`HilsimError` when neither pynvml nor
    cupy is installed, or when no GPU answers.
    """
    facts: dict[str, Any] = {}
    sources: list[str] = []
    problems: list[str] = []
    missing: list[str] = []
    pci: dict[str, Any] = {}

    def cuda(i: int) -> dict[str, Any]:
        got = cuda_facts(i)
        pci["bus"] = got.get("pci_bus_id")
        return got

    # CUDA first: its PCI bus id picks NVML's handle of the same GPU
    for label, package, getter in (
        ("cuda", "cupy", cuda),
        ("nvml", "nvidia-ml-py (pynvml)", lambda i: nvml_facts(i, pci.get("bus"))),
    ):
        try:
            got = getter(index)
        except ImportError:
            missing.append(package)
            continue
        except RuntimeError as exc:
            problems.append(f"{label}: {exc}")
            continue
        sources.append(label)
        for key, value in got.items():
            if label == "nvml" or key not in facts:  # NVML wins where both answer
                facts[key] = value
    if not sources:
        if len(missing) == 2:
            raise HilsimError(
                "agent probe: neither nvidia-ml-py (pynvml) nor cupy is installed; "
                "install the GPU extra on the GPU host: "
                "pip install 'hilsim[gpu-cuda12]' (compute capability < 7.5, or a CUDA 12 "
                "driver) or 'hilsim[gpu-cuda13]'"
            )
        detail = "; ".join(problems) or "no answer"
        hint = f" ({', '.join(missing)} not installed)" if missing else ""
        raise HilsimError(f"agent probe: no usable NVIDIA GPU: {detail}{hint}")
    facts["sources"] = sources
    driver = str(facts.get("cuda_driver_version") or "")
    facts["pip_extra"] = gpu_extra_for(
        facts.get("compute_capability"), int(driver.split(".")[0]) if driver[:1].isdigit() else None
    )
    if missing:
        facts["missing_packages"] = missing
    if tools:
        facts["tools"] = {name: t.as_dict() for name, t in all_tools().items()}
    return facts


DEVICE_KEYS: tuple[str, ...] = (
    "name", "uuid", "compute_capability", "sm_count", "max_sm_clock_mhz", "max_mem_clock_mhz",
    "bus_width_bits", "memory_bytes", "l2_bytes", "driver", "cuda_runtime",
    "cuda_driver_version",
)
