"""``hilsim agent probe``: the device facts a bundle's manifest records.

NVML (``pynvml`` from nvidia-ml-py) gives what the driver knows: name, UUID, max SM and
memory clocks, bus width, memory size, driver and CUDA driver versions, compute
capability. CUDA device properties (CuPy) give the rest: SM count, L2 size, and the CUDA
runtime version. Either source alone still yields a partial probe (``sources`` says which
answered); neither, or no GPU, is a one-line :class:`~hilsim.core.errors.HilsimError`.
Both libraries are imported inside the functions only.

Clocks (:func:`locked_clocks`): a GPU boosts, so the microbenchmarks lock the SM clock
where they can, as Nsight Compute does by default (``--clock-control base``): as root,
``nvidia-smi -lgc F,F`` at the card's default applications clock (``nvidia-smi
--query-gpu=clocks.default_applications.graphics``), reset with ``nvidia-smi -rgc``
afterwards. ``nvidia-smi`` runs without a shell and with a timeout; its absence, a
non-root user or a refusal is one recorded line (``clock_lock`` in the device facts,
``clocks_locked`` false), never an error: the suite then records the clocks under load
(NVML, ``hilsim.microbench.clock``) and converts with those.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from hilsim.agent.tools import all_tools
from hilsim.microbench.gpu import gpu_extra_for, nvml_handle, with_memory_family

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
    ... , ``memory_family`` (HBM / GDDR from the bus width), ``sources`` (which libraries
    answered) and ``tools`` (nsys / ncu / cupti / torch: usable, version, reason). Raises
    :class:`HilsimError` when neither pynvml nor cupy is installed, or when no GPU answers.
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
    with_memory_family(facts, "bus_width_bits")  # the base card choice compares families
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


#: seconds an nvidia-smi call may take
NVIDIA_SMI_TIMEOUT_S = 20
#: words in nvidia-smi's output that mean a clock setting did not take (it may still exit 0,
#: "Treating as warning and moving on")
_REFUSED = re.compile(r"not supported|insufficient|permission|not permitted|fail|error|warning",
                      re.IGNORECASE)


def nvidia_smi(args: list[str], index: int,
               timeout_s: float | None = None) -> tuple[int | None, str]:
    """Run ``nvidia-smi -i INDEX ARGS`` (no shell, ``timeout_s``, default
    :data:`NVIDIA_SMI_TIMEOUT_S`): (exit code, its output), or (None, one line saying why
    it could not run)."""
    timeout_s = NVIDIA_SMI_TIMEOUT_S if timeout_s is None else timeout_s
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None, "nvidia-smi not found on PATH"
    try:
        res = subprocess.run([exe, "-i", str(index), *args], capture_output=True, text=True,
                             timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return None, f"nvidia-smi {' '.join(args)} did not answer within {timeout_s:g} s"
    except OSError as exc:
        return None, f"nvidia-smi could not run: {exc}"
    return res.returncode, (res.stdout + res.stderr).strip()


def _one_line(text: str) -> str:
    return " | ".join(line.strip() for line in text.splitlines() if line.strip())[:300]


def default_application_clock_mhz(index: int) -> tuple[float | None, str]:
    """The card's default applications graphics clock (MHz) from nvidia-smi, or (None, why)."""
    query = ["--query-gpu=clocks.default_applications.graphics", "--format=csv,noheader,nounits"]
    rc, out = nvidia_smi(query, index)
    if rc is None:
        return None, out
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(?:MHz)?\s*", out.splitlines()[0] if out else "")
    if rc != 0 or m is None:
        return None, f"nvidia-smi {query[0]} gave {_one_line(out)!r} (exit {rc})"
    return float(m.group(1)), ""


@dataclass
class ClockLock:
    """What the agent did with the SM clock: recorded in the device facts."""

    locked: bool
    requested_mhz: float | None
    result: str
    restored: str = ""
    index: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def facts(self) -> dict[str, Any]:
        """``clocks_locked`` and ``clock_lock`` for the device facts."""
        lock = {"requested_mhz": self.requested_mhz, "result": self.result, **self.extra}
        if self.restored:
            lock["restored"] = self.restored
        return {"clocks_locked": self.locked, "clock_lock": lock}


def lock_clocks(index: int = 0, mhz: float | None = None) -> ClockLock:
    """Lock GPU ``index``'s SM clock at ``mhz`` (default: its default applications clock)
    with ``nvidia-smi -lgc``, as root only; any obstacle is the returned lock's one line."""
    if os.geteuid() != 0:
        why = f"not root (uid {os.geteuid()}): clocks not locked"
        return ClockLock(False, mhz, why, index=index)
    if mhz is None:
        mhz, why = default_application_clock_mhz(index)
        if mhz is None:
            return ClockLock(False, None, f"{why}: clocks not locked", index=index)
    value = f"{mhz:g}"
    rc, out = nvidia_smi(["-lgc", f"{value},{value}"], index)
    if rc is None:
        return ClockLock(False, mhz, f"{out}: clocks not locked", index=index)
    if rc != 0 or _REFUSED.search(out):
        return ClockLock(False, mhz, f"nvidia-smi -lgc {value},{value} refused (exit {rc}): "
                         f"{_one_line(out)}", index=index)
    return ClockLock(True, mhz, f"locked at {value} MHz: {_one_line(out)}", index=index)


def restore_clocks(lock: ClockLock) -> ClockLock:
    """Undo :func:`lock_clocks` (``nvidia-smi -rgc``) when it locked; the line is recorded."""
    if lock.locked:
        rc, out = nvidia_smi(["-rgc"], lock.index)
        ok = rc == 0 and not _REFUSED.search(out or "")
        lock.restored = ("reset (nvidia-smi -rgc): " if ok else
                         f"nvidia-smi -rgc failed (exit {rc}): ") + _one_line(out)
    return lock


@contextlib.contextmanager
def locked_clocks(index: int = 0, enabled: bool = True,
                  mhz: float | None = None) -> Iterator[ClockLock]:
    """Hold the SM clock locked (when ``enabled`` and permitted) for the ``with`` block and
    restore it afterwards, whatever happens inside."""
    if not enabled:
        yield ClockLock(False, None, "not locked (--no-lock-clocks)", index=index)
        return
    lock = lock_clocks(index, mhz)
    try:
        yield lock
    finally:
        restore_clocks(lock)


def clocks_under_load(measurements: list[Any]) -> dict[str, Any] | None:
    """The SM clock the clock family measured under its all-SM load and NVML's SM and
    memory clocks sampled then (``clocks_under_load`` of the device facts), or None."""
    m = next((m for m in measurements if m.name == "sm_clock_mhz"), None)
    if m is None or m.value is None:
        return None
    return {"sm_mhz": m.value, "nvml_sm_mhz": m.params.get("nvml_sm_clock_mhz"),
            "nvml_mem_mhz": m.params.get("nvml_mem_clock_mhz"),
            "source": "clock family: clock64 / %globaltimer under an all-SM FMA load; NVML then"}
