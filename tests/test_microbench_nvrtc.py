"""Every CUDA source of the microbenchmark suite compiles with NVRTC (no GPU needed).

NVRTC comes from ``cupy-cuda12x`` + ``nvidia-cuda-nvrtc-cu12`` (NVRTC 12.x covers
compute_70 ... compute_90; CUDA 13 dropped sm_70). Without NVRTC the tests skip, except
under CI (env var ``CI`` set), where they fail: CI must prove the kernels compile.
Under NVRTC 13 (``cupy-cuda13x``, the GPU hosts) the architectures it no longer knows
(compute_70/72) are skipped; :func:`test_source_compiles_to_sm90_cubin` compiles the
sources the way CuPy does on an H100 (``-arch=sm_90``: SASS, not PTX).
"""

from __future__ import annotations

import os

import pytest
from hilsim.microbench.sources import all_sources, kernel_names

ARCHS = ["compute_70", "compute_75", "compute_86", "compute_90"]


def _nvrtc():
    try:
        from cupy_backends.cuda.libs import nvrtc

        nvrtc.getVersion()  # loads libnvrtc: raises when the shared library is missing
    except Exception as exc:  # ImportError, or RuntimeError/OSError from the loader
        if os.environ.get("CI"):
            pytest.fail(
                f"CI: NVRTC not loadable ({exc}); install cupy-cuda12x and nvidia-cuda-nvrtc-cu12"
            )
        pytest.skip(f"NVRTC not loadable: {exc}")
    return nvrtc


def _skip_unsupported(nvrtc, arch: str) -> None:
    major = int(nvrtc.getVersion()[0])
    if major >= 13 and int(arch.split("_")[1]) < 75:
        pytest.skip(f"NVRTC {major} dropped {arch} (CUDA 13 supports sm_75 and newer)")


def _compile(nvrtc, source: str, name: str, arch: str) -> str:
    _skip_unsupported(nvrtc, arch)
    prog = nvrtc.createProgram(source, f"{name}.cu", [], [])
    try:
        try:
            nvrtc.compileProgram(prog, [f"-arch={arch}", "--std=c++14"])
        except Exception as exc:
            log = nvrtc.getProgramLog(prog)
            raise AssertionError(f"{name} for {arch}: {exc}\n{log}") from None
        ptx = nvrtc.getPTX(prog)
    finally:
        nvrtc.destroyProgram(prog)
    return ptx.decode() if isinstance(ptx, bytes) else ptx


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", sorted(all_sources()))
def test_source_compiles(name: str, arch: str) -> None:
    nvrtc = _nvrtc()
    ptx = _compile(nvrtc, all_sources()[name], name, arch)
    for kernel in kernel_names()[name]:
        assert f".entry {kernel}(" in ptx, f"{name}: kernel {kernel} missing for {arch}"


@pytest.mark.parametrize("name", sorted(all_sources()))
def test_source_compiles_to_sm90_cubin(name: str) -> None:
    """As CuPy's RawModule compiles on an H100: ``-arch=sm_90`` straight to a cubin, with
    the options CuPy adds (``-ftz=true``, ``--device-as-default-execution-space``)."""
    nvrtc = _nvrtc()
    options = ["-arch=sm_90", "--std=c++14", "-ftz=true", "--device-as-default-execution-space"]
    prog = nvrtc.createProgram(all_sources()[name], f"{name}.cu", [], [])
    try:
        try:
            nvrtc.compileProgram(prog, options)
        except Exception as exc:
            raise AssertionError(f"{name} for sm_90: {exc}\n{nvrtc.getProgramLog(prog)}") from None
        cubin = nvrtc.getCUBIN(prog)
    finally:
        nvrtc.destroyProgram(prog)
    assert bytes(cubin[:4]) == b"\x7fELF"
    for kernel in kernel_names()[name]:
        assert kernel.encode() in bytes(cubin), f"{name}: kernel {kernel} missing from the cubin"


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
    ("arch", "shape"),
    [
        ("compute_70", "m8n8k4"),
        ("compute_75", "m16n8k8"),
        ("compute_86", "m16n8k16"),
        ("compute_90", "m16n8k16"),
    ],
)
def test_mma_shape_follows_arch(arch: str, shape: str) -> None:
    nvrtc = _nvrtc()
    ptx = _compile(nvrtc, all_sources()["compute.mma"], "mma", arch)
    assert f"mma.sync.aligned.{shape}" in ptx


def test_chase_keeps_cache_operators() -> None:
    nvrtc = _nvrtc()
    ptx = _compile(nvrtc, all_sources()["latency.chase"], "chase", "compute_90")
    assert "ld.global.ca.u64" in ptx and "ld.global.cg.u64" in ptx


def test_arith_chains_survive_compilation() -> None:
    """The unrolled FMA/IMAD chains reach PTX (nothing folded or eliminated)."""
    nvrtc = _nvrtc()
    ptx = _compile(nvrtc, all_sources()["compute.arith"], "arith", "compute_80")
    for ins in ("fma.rn.f32", "fma.rn.f64", "fma.rn.f16x2", "mad.lo.s32"):
        assert ptx.count(ins) >= 128 + 64, ins
