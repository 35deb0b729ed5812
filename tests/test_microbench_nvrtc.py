"""Every CUDA source of the microbenchmark suite compiles with NVRTC (no GPU needed).

NVRTC comes from the ``sass`` extra (``nvidia-cuda-nvrtc-cu12``: NVRTC 12.x covers
compute_70 ... compute_90; CUDA 13 dropped sm_70), loaded by
:mod:`hilsim.microbench.sass` through ``ctypes``. Without it the tests skip, except
under CI (``CI`` or ``HILSIM_REQUIRE_SASS=1`` set), where they fail: CI must prove the
kernels compile. Under NVRTC 13 the architectures it no longer knows are skipped;
:func:`test_source_compiles_to_sm90_cubin` compiles the sources the way CuPy does on an
H100 (``-arch=sm_90``: SASS, not PTX). ``tests/test_microbench_sass.py`` reads that SASS.
"""

from __future__ import annotations

import os

import pytest
from hilsim.microbench import sass
from hilsim.microbench.sources import all_sources, kernel_names

from hilsim.core.errors import HilsimError

ARCHS = [70, 75, 86, 90]


def _require_nvrtc() -> tuple[int, int]:
    try:
        return sass.nvrtc_version()
    except HilsimError as exc:
        if os.environ.get("CI") or os.environ.get("HILSIM_REQUIRE_SASS") == "1":
            pytest.fail(f"CI: {exc}")
        pytest.skip(str(exc))


def _ptx(name: str, arch: int) -> str:
    major, _ = _require_nvrtc()
    if major >= 13 and arch < 75:
        pytest.skip(f"NVRTC {major} dropped compute_{arch} (CUDA 13 supports sm_75 and newer)")
    return sass.compile_ptx(all_sources()[name], arch, f"{name}.cu")


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", sorted(all_sources()))
def test_source_compiles(name: str, arch: int) -> None:
    ptx = _ptx(name, arch)
    for kernel in kernel_names()[name]:
        assert f".entry {kernel}(" in ptx, f"{name}: kernel {kernel} missing for {arch}"


@pytest.mark.parametrize("name", sorted(all_sources()))
def test_source_compiles_to_sm90_cubin(name: str) -> None:
    """As CuPy's RawModule compiles on an H100: ``-arch=sm_90`` straight to a cubin, with
    the options CuPy adds (``-ftz=true``, ``--device-as-default-execution-space``)."""
    _require_nvrtc()
    assert "-ftz=true" in sass.cupy_options(90)
    cubin = sass.compile_cubin(all_sources()[name], 90, f"{name}.cu")
    assert cubin[:4] == b"\x7fELF"
    for kernel in kernel_names()[name]:
        assert kernel.encode() in cubin, f"{name}: kernel {kernel} missing from the cubin"


def test_registry_names_every_kernel() -> None:
    names = kernel_names()
    assert all(names.values()), [n for n, k in names.items() if not k]
    assert {
        "latency.chase",
        "bandwidth.grid",
        "compute.mma",
        "atomics.atomic",
        "launch.empty",
        "clock.probe",
    } <= set(names)


@pytest.mark.parametrize(
    ("arch", "shape"), [(70, "m8n8k4"), (75, "m16n8k8"), (86, "m16n8k16"), (90, "m16n8k16")]
)
def test_mma_shape_follows_arch(arch: int, shape: str) -> None:
    assert f"mma.sync.aligned.{shape}" in _ptx("compute.mma", arch)


def test_chase_keeps_cache_operators() -> None:
    ptx = _ptx("latency.chase", 90)
    assert "ld.global.ca.u64" in ptx and "ld.global.cg.u64" in ptx


def test_arith_chains_survive_compilation() -> None:
    """The unrolled FMA/IMAD chains reach PTX (nothing folded or eliminated)."""
    ptx = _ptx("compute.arith", 86)
    for ins in ("fma.rn.f32", "fma.rn.f64", "fma.rn.f16x2", "mad.lo.s32"):
        assert ptx.count(ins) >= 128 + 64, ins
