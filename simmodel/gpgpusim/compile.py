"""Compile CUDA sources into a host program that runs on the simulated card.

GPGPU-Sim (PTX mode) replaces ``libcudart.so`` at run time, so the program must link the
CUDA runtime dynamically (``-cudart shared``) and carry PTX the simulator can read: nvcc of
a toolkit <= 11.x (the toolchain check picks it past the CUDA 13 wrappers in
``/usr/local/bin``), ``-arch=sm_70`` style (PTX + SASS for that arch). Kernels must read
``%clock`` (inline PTX), not ``clock()``/``clock64()`` (both become ``%clock64``, which the
simulator aborts on: ``ptx_sim.cc:205``).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

from hilsim.simmodel.gpgpusim.toolchain import Toolchain, find_toolchain

from hilsim.core.errors import HilsimError

_ARCH = re.compile(r"^(sm|compute)_\d{2,3}[a-z]?$")


def first_error(text: str) -> str:
    """nvcc's first error line (``file(line): error: ...``), else its first non-empty line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if re.search(r"\berror\b", ln, re.IGNORECASE):
            return ln
    return lines[0] if lines else "(no output)"


def compile_cuda(
    sources: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    out: str | os.PathLike[str],
    *,
    arch: str = "sm_70",
    extra_flags: Sequence[str] = (),
    toolchain: Toolchain | None = None,
    timeout_s: float = 600,
) -> Path:
    """Compile ``sources`` into the executable ``out`` with nvcc <= 11.x, ``-cudart shared``.

    A compile error is one :class:`HilsimError` line naming the first source and nvcc's
    first error. The output is written to a temporary sibling and renamed when complete.
    """
    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    srcs = [Path(s) for s in sources]
    if not srcs:
        raise HilsimError("compile_cuda: no source files")
    for s in srcs:
        if not s.is_file():
            raise HilsimError(f"{s}: no such CUDA source file")
    if not _ARCH.match(arch):
        raise HilsimError(f"arch {arch!r}: expected sm_NN (e.g. sm_70)")
    tc = toolchain or find_toolchain(need_build_tools=False)
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp{os.getpid()}")
    argv = [
        str(tc.nvcc),
        "-cudart", "shared",
        f"-arch={arch}",
        *extra_flags,
        "-o", str(tmp),
        *(str(s) for s in srcs),
    ]
    env = {**os.environ, "PATH": tc.path_env()}
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, env=env, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        tmp.unlink(missing_ok=True)
        raise HilsimError(f"{srcs[0]}: nvcc {tc.cuda_version} took over {timeout_s:g} s") from None
    if proc.returncode != 0 or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        raise HilsimError(
            f"{srcs[0]}: nvcc {tc.cuda_version} failed: {first_error(proc.stderr + proc.stdout)}"
        )
    os.replace(tmp, target)
    return target
