"""Every CUDA C source of the suite, by name (``family.source``), and its families.

Tests compile all of them with NVRTC for sm_70/75/86/90 without a GPU
(``tests/test_microbench_nvrtc.py``); :class:`hilsim.microbench.cupy_device.CupyDevice`
compiles them on the device with CuPy ``RawModule``, the GPGPU-Sim device with nvcc into
one host program per source. The sources include no headers (PTX inline assembly and
NVRTC built-ins only), so they compile the same under NVRTC 12 and 13.
"""

from __future__ import annotations

import re

from hilsim.microbench import atomics, bandwidth, clock, compute, latency, launch

#: the family modules by family name, in suite order (``clock`` first: the others convert
#: with the clock it measures); each has ``SOURCES`` and ``benchmarks(device)``
FAMILY_MODULES = {
    "clock": clock,
    "launch": launch,
    "latency": latency,
    "bandwidth": bandwidth,
    "compute": compute,
    "atomics": atomics,
}

_KERNEL = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(\w+)\s*\(')


def all_sources() -> dict[str, str]:
    """``{"family.name": cuda_source}`` for every kernel source of the suite (read from
    each family's ``SOURCES`` at call time)."""
    return {
        f"{family}.{name}": code
        for family, module in FAMILY_MODULES.items()
        for name, code in module.SOURCES.items()
    }


def kernel_names() -> dict[str, list[str]]:
    """``{"family.name": [extern "C" kernel names]}`` (what CuPy's ``get_function`` takes)."""
    return {name: _KERNEL.findall(code) for name, code in all_sources().items()}
