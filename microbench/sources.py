"""Every CUDA C source of the suite, by name (``family.source``).

Tests compile all of them with NVRTC for sm_70/75/86/90 without a GPU
(``tests/test_microbench_nvrtc.py``); :class:`hilsim.microbench._gpu.Context` compiles them on
the device with CuPy ``RawModule``. The sources include no headers (PTX inline
assembly and NVRTC built-ins only), so they compile the same under NVRTC 12 and 13.
"""

from __future__ import annotations

from hilsim.microbench import atomics, bandwidth, clock, compute, latency, launch

FAMILY_MODULES = {
    "latency": latency,
    "bandwidth": bandwidth,
    "compute": compute,
    "atomics": atomics,
    "launch": launch,
    "clock": clock,
}


def all_sources() -> dict[str, str]:
    """``{"family.name": cuda_source}`` for every kernel source of the suite."""
    return {
        f"{family}.{name}": code
        for family, module in FAMILY_MODULES.items()
        for name, code in module.SOURCES.items()
    }


def kernel_names() -> dict[str, list[str]]:
    """``{"family.name": [extern "C" kernel names]}`` (what CuPy's ``get_function`` takes)."""
    import re  # noqa: PLC0415

    pattern = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(\w+)\s*\(')
    return {name: pattern.findall(code) for name, code in all_sources().items()}
