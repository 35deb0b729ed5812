"""NVTX ranges of an unmodified program as regions on the simulated card.

``nvtx_marks.c`` is an NVTX injection library: a program that calls NVTX loads the
library named by ``NVTX_INJECTION64_PATH`` at its first NVTX call, and this one prints
``hilsim-region push NAME`` / ``pop NAME`` on the program's stdout, which GPGPU-Sim's log
shares, so :mod:`hilsim.simmodel.gpgpusim.logprofile` reads the ranges as regions
(``regions.parquet``) without a change to the program. It is compiled here with the host's
C compiler against the CUDA toolkit's ``nvtx3`` headers, once, into
``~/.cache/hilsim/nvtx-marks/KEY/`` (``$HILSIM_CACHE`` moves it), keyed by the source, the
compiler and the headers' folder.

A program that does not call NVTX never loads the library; one built with NVTX v2's
``libnvToolsExt`` honours the same variable. Where no compiler or no ``nvtx3`` headers are
found, runs go on without it and the profile says why (:func:`nvtx_environment`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from hilsim.core.errors import HilsimError
from hilsim.core.files import cache_root

SOURCE = Path(__file__).with_name("nvtx_marks.c")
LIBRARY_NAME = "libhilsim_nvtx_marks.so"
#: the variable NVTX reads the injection library's path from
NVTX_INJECTION_ENV = "NVTX_INJECTION64_PATH"
COMPILE_TIMEOUT_S = 120


def nvtx_include(cuda_home: Path | None = None) -> Path | None:
    """The folder holding ``nvtx3/nvToolsExt.h``: the toolkit's, else the usual places."""
    roots = [cuda_home / "include"] if cuda_home is not None else []
    roots += [Path("/usr/include"), Path("/usr/local/cuda/include")]
    for root in roots:
        if (root / "nvtx3" / "nvToolsExt.h").is_file():
            return root
    return None


def build_nvtx_marks(cuda_home: Path | None = None, cache: Path | None = None) -> Path:
    """The injection library, compiled when the cache lacks it; one-line HilsimError when
    there is no C compiler, no ``nvtx3`` headers, or the compiler fails."""
    compiler = next((c for c in (os.environ.get("CC"), "gcc", "cc") if c and shutil.which(c)),
                    None)
    if compiler is None:
        raise HilsimError("NVTX marks: no C compiler found (install gcc or set $CC)")
    include = nvtx_include(cuda_home)
    if include is None:
        raise HilsimError("NVTX marks: no nvtx3/nvToolsExt.h in the CUDA toolkit's include "
                          "folder, /usr/include or /usr/local/cuda/include")
    key = hashlib.sha256(SOURCE.read_bytes() + f"\0{shutil.which(compiler)}\0{include}".encode()
                         ).hexdigest()[:16]
    library = (cache or cache_root("nvtx-marks")) / key / LIBRARY_NAME
    if library.is_file():
        return library
    library.parent.mkdir(parents=True, exist_ok=True)
    tmp = library.with_name(f".{library.name}.{os.getpid()}.tmp")
    argv = [compiler, "-std=gnu11", "-O2", "-Wall", "-fPIC", "-shared", f"-I{include}",
            "-o", str(tmp), str(SOURCE)]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S,
                              check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise HilsimError(f"NVTX marks: cannot run {compiler}: {exc}") from None
    if done.returncode != 0:
        tmp.unlink(missing_ok=True)
        lines = done.stderr.splitlines()
        first = next((ln for ln in lines if "error" in ln), lines[0] if lines else "no output")
        raise HilsimError(f"NVTX marks: {compiler} exit {done.returncode}: {first[:300]}")
    os.replace(tmp, library)
    return library


def nvtx_environment(cuda_home: Path | None = None) -> tuple[dict[str, str], str | None]:
    """(variables that make the program's NVTX ranges print region marks, why not): the
    variables are empty, and the reason given, where the library cannot be built."""
    try:
        return {NVTX_INJECTION_ENV: str(build_nvtx_marks(cuda_home))}, None
    except HilsimError as exc:
        return {}, str(exc)
