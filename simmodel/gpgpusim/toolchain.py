"""Find the toolchain GPGPU-Sim builds and runs with, or say in one line what is missing.

GPGPU-Sim 4.2's PTX front end needs a CUDA toolkit <= 11.x (its ``setup_environment``
refuses ``CUDA_VERSION_NUMBER > 11100``): ``nvcc`` and ``cuobjdump`` of that toolkit, plus
``g++``, ``bison``, ``flex``, the zlib headers and ``makedepend`` to build it.

PATH trap: an image may hold CUDA 13 ``nvcc``/``ptxas`` wrappers in ``/usr/local/bin``;
nvcc 11.8 found through such a PATH picks ptxas 13 and fails on ``sm_70``. So the search
prefers ``$CUDA_INSTALL_PATH/bin`` and ``/usr/bin`` over PATH, keeps the first nvcc whose
version is <= 11.x, and :meth:`Toolchain.path_env` puts that toolkit's ``bin`` first.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hilsim.core.errors import HilsimError

MAX_CUDA = (11, 99)
SCRIPT = Path(__file__).with_name("install_toolchain_debian.sh")

# tool -> Debian package that provides it
PACKAGES = {
    "nvcc": "nvidia-cuda-toolkit",
    "cuobjdump": "nvidia-cuda-toolkit",
    "g++": "build-essential",
    "gcc": "build-essential",
    "make": "build-essential",
    "bison": "bison",
    "flex": "flex",
    "makedepend": "xutils-dev",
    "zlib.h": "zlib1g-dev",
}


@dataclass(frozen=True)
class Toolchain:
    """The tools found: paths and the versions the build folder is keyed by."""

    nvcc: Path
    cuobjdump: Path
    cuda_version: str  # "11.8"
    gcc_version: str  # "12.2.0"

    @property
    def cuda_home(self) -> Path:
        """``CUDA_INSTALL_PATH``: the toolkit's prefix (``/usr`` for ``/usr/bin/nvcc``)."""
        return self.nvcc.parent.parent

    @property
    def cuda_version_number(self) -> int:
        """CUDA version as ``setup_environment`` computes it: ``11.8`` -> ``11080``."""
        major, minor = (int(x) for x in self.cuda_version.split(".")[:2])
        return 1000 * major + 10 * minor

    def path_env(self, path: str | None = None) -> str:
        """``PATH`` with this toolkit's ``bin`` first (avoids the CUDA 13 wrapper trap)."""
        path = os.environ.get("PATH", "") if path is None else path
        first = str(self.nvcc.parent)
        rest = [p for p in path.split(os.pathsep) if p and p != first]
        return os.pathsep.join([first, *rest])


def _version_tuple(text: str) -> tuple[int, int] | None:
    m = re.search(r"release (\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def nvcc_version(nvcc: Path) -> tuple[int, int] | None:
    """(major, minor) printed by ``nvcc --version``; None when it does not run."""
    try:
        out = subprocess.run(
            [str(nvcc), "--version"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return _version_tuple(out.stdout + out.stderr)


def gcc_version(gcc: str = "gcc") -> str | None:
    """The ``x.y.z`` of ``gcc --version``'s first line, as ``setup_environment`` reads it."""
    try:
        out = subprocess.run(
            [gcc, "--version"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    first = (out.stdout.splitlines() or [""])[0]
    for token in first.split():
        if re.fullmatch(r"\d+\.\d+\.\d+", token):
            return token
    return None


def _has_zlib_header(gxx: str, path: str) -> bool:
    try:
        out = subprocess.run(
            [gxx, "-E", "-x", "c++", "-"],
            input="#include <zlib.h>\n",
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={**os.environ, "PATH": path},
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0


def _nvcc_candidates(path: str, prefer: Sequence[str]) -> list[Path]:
    seen: list[Path] = []
    for d in [*prefer, *path.split(os.pathsep)]:
        if not d:
            continue
        cand = Path(d) / "nvcc"
        if cand.is_file() and os.access(cand, os.X_OK) and cand not in seen:
            seen.append(cand)
    return seen


def install_hint(packages: Sequence[str]) -> str:
    """The fix, as one sentence: the apt packages and the project's script."""
    pkgs = " ".join(dict.fromkeys(packages))
    return f"install with `apt-get install {pkgs}` or run `bash {SCRIPT}`"


def find_toolchain(
    path: str | None = None,
    prefer: Sequence[str] | None = None,
    need_build_tools: bool = True,
) -> Toolchain:
    """The toolchain, or a one-line :class:`HilsimError` naming every missing piece.

    ``path`` defaults to ``$PATH``; ``prefer`` (searched before it) to
    ``$CUDA_INSTALL_PATH/bin`` and ``/usr/bin``. ``need_build_tools=False`` checks only
    what running needs (nvcc, cuobjdump, gcc).
    """
    path = os.environ.get("PATH", "") if path is None else path
    if prefer is None:
        cip = os.environ.get("CUDA_INSTALL_PATH")
        prefer = [*([str(Path(cip) / "bin")] if cip else []), "/usr/bin"]
    missing: list[str] = []
    packages: list[str] = []

    def need(tool: str, note: str = "") -> None:
        missing.append(f"{tool}{note}")
        packages.append(PACKAGES[tool])

    nvcc: Path | None = None
    cuda: tuple[int, int] | None = None
    too_new: list[str] = []
    for cand in _nvcc_candidates(path, prefer):
        ver = nvcc_version(cand)
        if ver is None:
            continue
        if ver <= MAX_CUDA:
            nvcc, cuda = cand, ver
            break
        too_new.append(f"{cand} is CUDA {ver[0]}.{ver[1]}")
    if nvcc is None:
        found = f"; found only: {', '.join(too_new)}" if too_new else ""
        need("nvcc", f" (CUDA <= 11.x{found})")
    cuobjdump = nvcc.parent / "cuobjdump" if nvcc else None
    if nvcc is not None and not (cuobjdump and cuobjdump.is_file()):
        need("cuobjdump", f" (next to {nvcc})")
    search = os.pathsep.join([*(prefer or []), path])
    tools = ["gcc", "g++", "make", "bison", "flex", "makedepend"] if need_build_tools else ["gcc"]
    for tool in tools:
        if shutil.which(tool, path=search) is None:
            need(tool)
    gxx = shutil.which("g++", path=search)
    if need_build_tools and gxx and not _has_zlib_header(gxx, search):
        need("zlib.h", " (zlib headers)")
    gcc = shutil.which("gcc", path=search)
    gver = gcc_version(gcc) if gcc else None
    if gcc and gver is None:
        need("gcc", f" ({gcc} --version prints no x.y.z)")
    if missing:
        raise HilsimError(
            f"gpgpusim toolchain: missing {', '.join(missing)}: {install_hint(packages)}"
        )
    assert nvcc is not None and cuda is not None and cuobjdump is not None and gver
    return Toolchain(nvcc, cuobjdump, f"{cuda[0]}.{cuda[1]}", gver)
