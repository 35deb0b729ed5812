"""A CUDA GPU's facts: the lazy CuPy import, device properties, NVML clocks, the pip extra.

Nothing here imports CuPy or pynvml at module import time (``import hilsim.microbench``
works on a machine without a CUDA driver); :func:`require_cupy` does, and turns any
failure into one :class:`~hilsim.core.errors.HilsimError` line. The device the suite
measures on is :class:`hilsim.microbench.cupy_device.CupyDevice`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from hilsim.core.errors import HilsimError

#: Options the suite passes to CuPy's ``RawModule`` (CuPy adds ``-ftz=true``, ``-arch=sm_XX``,
#: ``--device-as-default-execution-space``: see :func:`hilsim.microbench.sass.cupy_options`).
NVRTC_OPTIONS: tuple[str, ...] = ("--std=c++14",)


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type name when it has none)."""
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def gpu_extra_for(compute_capability: str | None, driver_cuda_major: int | None = None) -> str:
    """The pip extra that fits a GPU: by compute capability first, then by driver.

    CUDA 13 (``cupy-cuda13x``, its NVRTC) dropped sm_70/72 and older: a V100 on an R580
    driver reports CUDA 13 in nvidia-smi but needs ``gpu-cuda12`` (a CUDA 12 runtime runs
    on a newer driver). From sm_75, the extra matching the driver's CUDA major.
    """
    try:
        major, minor = (int(x) for x in str(compute_capability).split(".")[:2])
    except (TypeError, ValueError):
        return "gpu-cuda12"
    if (major, minor) < (7, 5):
        return "gpu-cuda12"
    return "gpu-cuda13" if (driver_cuda_major or 13) >= 13 else "gpu-cuda12"


EXTRA_HINT = (
    "pip install 'hilsim[gpu-cuda12]' for compute capability < 7.5 (V100: CUDA 13 has no "
    "sm_70) or a CUDA 12 driver, 'hilsim[gpu-cuda13]' for 7.5+ on a CUDA 13 driver "
    "(hilsim agent probe says which)"
)


def require_cupy() -> Any:
    """Import CuPy and check for a device; ``HilsimError`` (one line) when there is none."""
    try:
        import cupy  # noqa: PLC0415  (lazy by design: no CUDA needed to import hilsim)
    except Exception as exc:  # ImportError, or a CUDA library failing to load
        raise HilsimError(
            f"no CUDA GPU/driver found: cupy is not importable ({first_line(exc)}); "
            + EXTRA_HINT
        ) from None
    try:
        count = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as exc:
        raise HilsimError(f"no CUDA GPU/driver found: {first_line(exc)}") from None
    if count < 1:
        raise HilsimError("no CUDA GPU/driver found: the CUDA runtime reports 0 devices")
    return cupy


def theoretical_dram_gbs(mem_clock_mhz: float | None, bus_width_bits: float | None) -> float | None:
    """Peak DRAM bandwidth in GB/s: memory clock x bus width x 2 (double data rate).

    Uses NVML's memory clock, which for GDDR5/6/6X and HBM is the clock whose double
    data rate gives the data rate (TITAN V: 850 MHz x 3072 bit x 2 = 652.8 GB/s, the
    figure Accel-Sim's ``mem_bw`` prints as its theoretical peak).
    """
    if not mem_clock_mhz or not bus_width_bits:
        return None
    return float(mem_clock_mhz) * 1e6 * 2.0 * float(bus_width_bits) / 8.0 / 1e9


def _decode(value: Any) -> Any:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def nvml_handle(pynvml: Any, pci_bus_id: str | None, device: int) -> Any:
    """NVML's handle of the GPU CUDA calls ``device``: matched by PCI bus id (NVML counts
    in PCI order, CUDA fastest first and after ``CUDA_VISIBLE_DEVICES``), by index only
    when the bus id is unknown."""
    candidates = [pci_bus_id] if pci_bus_id else []
    if pci_bus_id and len(pci_bus_id.split(":")[0]) == 4:
        candidates.append("0000" + pci_bus_id)  # NVML's 8-digit domain form
    for pci in candidates:
        try:
            return pynvml.nvmlDeviceGetHandleByPciBusId(pci)
        except Exception:  # noqa: S112  (try the other spelling)
            continue
    return pynvml.nvmlDeviceGetHandleByIndex(device)


def _nvml_facts(pci_bus_id: str | None, device: int) -> dict[str, Any]:
    """Clocks and bus width from NVML (optional: missing pynvml gives ``{}``)."""
    try:
        import pynvml  # noqa: PLC0415
    except Exception:
        return {}
    facts: dict[str, Any] = {}
    try:
        pynvml.nvmlInit()
    except Exception as exc:
        return {"nvml_error": first_line(exc)}
    try:
        handle = nvml_handle(pynvml, pci_bus_id, device)
        sm, mem = pynvml.NVML_CLOCK_SM, pynvml.NVML_CLOCK_MEM
        calls: dict[str, Callable[[], Any]] = {
            "nvml_name": lambda: _decode(pynvml.nvmlDeviceGetName(handle)),
            "uuid": lambda: _decode(pynvml.nvmlDeviceGetUUID(handle)),
            "driver_version": lambda: _decode(pynvml.nvmlSystemGetDriverVersion()),
            "max_sm_clock_mhz": lambda: int(pynvml.nvmlDeviceGetMaxClockInfo(handle, sm)),
            "max_mem_clock_mhz": lambda: int(pynvml.nvmlDeviceGetMaxClockInfo(handle, mem)),
            "sm_clock_mhz_idle": lambda: int(pynvml.nvmlDeviceGetClockInfo(handle, sm)),
            "memory_bus_width_bits": lambda: int(pynvml.nvmlDeviceGetMemoryBusWidth(handle)),
        }
        for key, call in calls.items():
            try:
                facts[key] = call()
            except Exception:  # noqa: S112  (unsupported on this board: leave it out)
                continue
    finally:
        with contextlib.suppress(Exception):  # a shutdown failure must not hide the facts
            pynvml.nvmlShutdown()
    return facts


def nvml_clocks_mhz(device_facts: dict[str, Any]) -> tuple[float | None, float | None]:
    """Current SM and memory clocks from NVML (while a kernel runs: the clocks under load),
    each None when NVML cannot say."""
    try:
        import pynvml  # noqa: PLC0415

        pynvml.nvmlInit()
    except Exception:
        return None, None
    try:
        uuid = device_facts.get("uuid")
        handle = (
            pynvml.nvmlDeviceGetHandleByUUID(uuid)
            if uuid
            else pynvml.nvmlDeviceGetHandleByIndex(int(device_facts.get("index", 0)))
        )
        out: list[float | None] = []
        for clock in (pynvml.NVML_CLOCK_SM, pynvml.NVML_CLOCK_MEM):
            try:
                out.append(float(pynvml.nvmlDeviceGetClockInfo(handle, clock)))
            except Exception:
                out.append(None)
        return out[0], out[1]
    except Exception:
        return None, None
    finally:
        with contextlib.suppress(Exception):  # a shutdown failure must not hide the clocks
            pynvml.nvmlShutdown()


def nvml_sm_clock_mhz(device_facts: dict[str, Any]) -> float | None:
    """Current SM clock from NVML (while a kernel runs: the clock under load), or None."""
    return nvml_clocks_mhz(device_facts)[0]


def _attribute(runtime: Any, name: str, device: int) -> int | None:
    """``cudaDeviceGetAttribute(name)`` through CuPy, or None when unavailable."""
    try:
        return int(runtime.deviceGetAttribute(getattr(runtime, name), device))
    except Exception:  # optional fact (old CuPy, unsupported attribute)
        return None


#: a memory bus this wide or wider is HBM (each stack has a 1024-bit interface: TITAN V
#: 3072, V100 / GV100 4096, A100 / H100 5120 bits); GDDR buses are 512 bits or narrower
HBM_MIN_BUS_BITS = 1024
GDDR_MAX_BUS_BITS = 512


def memory_type_from_bus(bus_width_bits: float | None) -> tuple[str | None, str]:
    """The memory family (``HBM`` / ``GDDR``, or None) and how it was found. Neither NVML
    nor the CUDA device attributes report the memory type; the bus width tells the two
    families apart (no card has a bus between 512 and 1024 bits)."""
    if not bus_width_bits:
        return None, "no memory bus width reported"
    bits = int(bus_width_bits)
    if bits >= HBM_MIN_BUS_BITS:
        return "HBM", f"memory bus of {bits} bits (HBM stacks are 1024 bits wide each)"
    if bits <= GDDR_MAX_BUS_BITS:
        return "GDDR", f"memory bus of {bits} bits (GDDR: 512 bits or narrower)"
    return None, f"memory bus of {bits} bits: neither HBM's nor GDDR's width"


def with_memory_family(facts: dict[str, Any], bus_key: str) -> dict[str, Any]:
    """``facts`` with ``memory_family`` (where the bus width tells it) and
    ``memory_family_from`` from its bus width (under ``bus_key``). A family, not a
    ``memory_type``: the generation (HBM2e, GDDR6X) is not known, and ``memory_type`` is
    what sets a tuned card's DRAM model."""
    kind, how = memory_type_from_bus(facts.get(bus_key))
    if kind is not None:
        facts["memory_family"] = kind
    facts["memory_family_from"] = how
    return facts


def device_facts(device: int = 0) -> dict[str, Any]:
    """Facts about CUDA device ``device``: CuPy device properties + NVML clocks/bus width.

    Keys: index, name, compute_capability ("9.0"), sm_count, l2_cache_bytes,
    shared_mem_per_sm_bytes, max_threads_per_sm, regs_per_sm, total_memory_bytes,
    memory_bus_width_bits, max_sm_clock_mhz, max_mem_clock_mhz, peak_dram_gbs, cuda
    runtime/driver versions, cupy version, NVML's uuid/driver version where available, and
    ``memory_family`` (HBM / GDDR from the bus width: :func:`memory_type_from_bus`).
    Raises ``HilsimError("no CUDA GPU/driver found: ...")`` without a GPU.
    """
    cp = require_cupy()
    count = int(cp.cuda.runtime.getDeviceCount())
    if not 0 <= device < count:
        raise HilsimError(f"--device {device}: no such CUDA device (found {count})")
    props = {_decode(k): v for k, v in cp.cuda.runtime.getDeviceProperties(device).items()}
    facts: dict[str, Any] = {
        "index": device,
        "name": _decode(props.get("name", "")),
        "compute_capability": f"{props.get('major')}.{props.get('minor')}",
        "cc_major": int(props.get("major", 0)),
        "cc_minor": int(props.get("minor", 0)),
        "sm_count": int(props.get("multiProcessorCount", 0)),
        "l2_cache_bytes": int(props.get("l2CacheSize", 0)),
        "shared_mem_per_sm_bytes": int(props.get("sharedMemPerMultiprocessor", 0)),
        "shared_mem_per_block_bytes": int(props.get("sharedMemPerBlock", 0)),
        "max_threads_per_sm": int(props.get("maxThreadsPerMultiProcessor", 0)),
        "max_threads_per_block": int(props.get("maxThreadsPerBlock", 1024)),
        "regs_per_sm": int(props.get("regsPerMultiprocessor", 0)),
        "warp_size": int(props.get("warpSize", 32)),
        "total_memory_bytes": int(props.get("totalGlobalMem", 0)),
        "cupy_version": str(cp.__version__),
    }
    # CUDA 13 removed clockRate/memoryClockRate from cudaDeviceProp; CuPy 14 fills the
    # keys from cudaDeviceGetAttribute, other builds may not: ask the attribute then
    runtime = cp.cuda.runtime
    bus = props.get("memoryBusWidth") or _attribute(
        runtime, "cudaDevAttrGlobalMemoryBusWidth", device
    )
    if bus:
        facts["memory_bus_width_bits"] = int(bus)
    for key, attr, out in (
        ("clockRate", "cudaDevAttrClockRate", "max_sm_clock_mhz"),
        ("memoryClockRate", "cudaDevAttrMemoryClockRate", "max_mem_clock_mhz"),
    ):
        khz = props.get(key) or _attribute(runtime, attr, device)
        if khz:
            facts[out] = int(khz) / 1000.0
    for key, call in (
        ("cuda_runtime_version", cp.cuda.runtime.runtimeGetVersion),
        ("cuda_driver_version", cp.cuda.runtime.driverGetVersion),
    ):
        try:
            facts[key] = int(call())
        except Exception:  # noqa: S112  (optional fact)
            continue
    try:
        pci_bus_id: str | None = str(cp.cuda.runtime.deviceGetPCIBusId(device))
    except Exception:
        pci_bus_id = None
    facts["pci_bus_id"] = pci_bus_id
    facts.update({k: v for k, v in _nvml_facts(pci_bus_id, device).items() if v is not None})
    facts["peak_dram_gbs"] = theoretical_dram_gbs(
        facts.get("max_mem_clock_mhz"), facts.get("memory_bus_width_bits")
    )
    return with_memory_family(facts, "memory_bus_width_bits")
