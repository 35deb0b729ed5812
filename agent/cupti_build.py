"""Find CUPTI and build hilsim's CUPTI injection library (``agent/native/``) with gcc.

The library is the ``cupti`` light backend for any CUDA program (docs/agent.md, "The
native CUPTI profiler"): the CUDA driver loads it through ``CUDA_INJECTION64_PATH``.
It is compiled on this host, on first use, into a cache folder
(``$HILSIM_CACHE/cupti-inject``, else ``~/.cache/hilsim/cupti-inject``) keyed by the
sources, the CUPTI headers and library and the compiler; ``hilsim agent cupti-build``
builds it ahead of time (so that a timed run does not include the compile) and says
what it was built from. Built here rather than shipped: it must match the host's CUPTI
(12.x and 13.x records differ) and its C library.

Where CUPTI is looked for, first found wins:

* ``$HILSIM_CUPTI_ROOT``: a folder with ``include/cupti.h`` and ``lib/`` or ``lib64/``;
* the ``nvidia-cuda-cupti`` wheels on ``sys.path``: ``nvidia/cu13/{include,lib}`` (13.x)
  and ``nvidia/cuda_cupti/{include,lib}`` (``nvidia-cuda-cupti-cu12``), newest first;
* a CUDA toolkit: ``$CUDA_HOME``, ``/usr/local/cuda`` (``include/`` or
  ``extras/CUPTI/``).

The CUPTI headers include ``cuda.h`` and ``builtin_types.h``: they are taken from the
CUPTI folder itself, a sibling wheel folder (``nvidia-cuda-runtime``), ``$CUDA_HOME``,
``/usr/local/cuda`` or ``/usr/include``, first found. The launch-API callback ids come
from the same headers, by the rule of :mod:`hilsim.agent.cupti_api`. Nothing here loads
a GPU library.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hilsim.agent.cupti_api import launch_cbids

from hilsim.core.errors import HilsimError
from hilsim.core.files import cache_root

NATIVE = Path(__file__).resolve().parent / "native"
LIBRARY_SOURCES = ("hilsim_cupti.c", "cupti_records.c")
HEADERS = ("cupti_records.h",)
LIBRARY_NAME = "libhilsim_cupti.so"
LAUNCH_HEADER = "hs_launch_cbids.h"
COMPILE_TIMEOUT_S = 300
_CBID = {
    "driver": ("cupti_driver_cbid.h", re.compile(r"CUPTI_DRIVER_TRACE_CBID_(\w+)\s*=\s*(\d+)")),
    "runtime": ("cupti_runtime_cbid.h", re.compile(r"CUPTI_RUNTIME_TRACE_CBID_(\w+)\s*=\s*(\d+)")),
}
_API_VERSION = re.compile(r"#define\s+CUPTI_API_VERSION\s+(\d+)")


@dataclass(frozen=True)
class CuptiInstall:
    """One CUPTI: its headers, its library file, the folder holding ``cuda.h``, where it
    was found and its ``CUPTI_API_VERSION``."""

    include: Path
    library: Path
    cuda_include: Path | None
    found_in: str
    api_version: int

    @property
    def major(self) -> int:
        """CUDA major of this CUPTI (API 19-28: 12.x; from 13.0: xxyyzz)."""
        return self.api_version // 10000 if self.api_version >= 130000 else 12

    def describe(self) -> str:
        return f"CUPTI API {self.api_version} from {self.found_in} ({self.library})"


def _api_version(include: Path) -> int:
    try:
        match = _API_VERSION.search((include / "cupti_version.h").read_text(errors="replace"))
    except OSError:
        return 0
    return int(match.group(1)) if match else 0


def _library_in(folder: Path) -> Path | None:
    """``libcupti.so.N`` (newest N) or ``libcupti.so`` in ``folder``."""
    if not folder.is_dir():
        return None
    versioned = sorted(folder.glob("libcupti.so.*"), key=lambda p: [
        int(x) if x.isdigit() else 0 for x in p.name.split(".so.")[-1].split(".")])
    plain = folder / "libcupti.so"
    if versioned:
        return versioned[-1]
    return plain if plain.is_file() else None


def _candidate(root: Path, found_in: str) -> CuptiInstall | None:
    """CUPTI under ``root`` (``include/`` + ``lib``/``lib64``, or ``extras/CUPTI``)."""
    for base in (root, root / "extras" / "CUPTI"):
        include = base / "include"
        if not (include / "cupti_activity.h").is_file():
            continue
        for libdir in (base / "lib", base / "lib64", base / "lib" / "x86_64-linux-gnu"):
            library = _library_in(libdir)
            if library is not None:
                return CuptiInstall(include, library, _cuda_include(include), found_in,
                                    _api_version(include))
    return None


def _wheel_roots() -> list[tuple[Path, str]]:
    """The ``nvidia`` namespace folders on sys.path (found without importing them)."""
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return []
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    roots = []
    for folder in folders:
        for sub in ("cu13", "cuda_cupti", "cu12"):
            roots.append((Path(folder) / sub, f"the nvidia-cuda-cupti wheel ({folder}/{sub})"))
    return roots


def _toolkit_roots() -> list[tuple[Path, str]]:
    roots = []
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(variable):
            roots.append((Path(os.environ[variable]), f"${variable}"))
    roots.append((Path("/usr/local/cuda"), "/usr/local/cuda"))
    return roots


def _cuda_include(cupti_include: Path) -> Path | None:
    """The first folder with ``cuda.h`` and ``builtin_types.h`` for these CUPTI headers."""
    candidates = [cupti_include, cupti_include.parent.parent / "cuda_runtime" / "include"]
    candidates += [Path(os.environ[v]) / "include" for v in ("CUDA_HOME", "CUDA_PATH")
                   if os.environ.get(v)]
    candidates += [Path("/usr/local/cuda/include"), Path("/usr/include")]
    for folder in candidates:
        if (folder / "cuda.h").is_file() and (folder / "builtin_types.h").is_file():
            return folder
    return None


def cupti_candidates() -> list[CuptiInstall]:
    """Every CUPTI found, in the order :func:`find_cupti` prefers them (wheels newest
    first, then toolkits; ``$HILSIM_CUPTI_ROOT`` alone when set), one per header folder."""
    root = os.environ.get("HILSIM_CUPTI_ROOT")
    if root:
        found = _candidate(Path(root), "$HILSIM_CUPTI_ROOT")
        if found is None:
            raise HilsimError(
                f"$HILSIM_CUPTI_ROOT={root}: no include/cupti_activity.h with a libcupti.so* "
                "in lib/ or lib64/ there")
        return [found]
    wheels = [c for r, where in _wheel_roots() if (c := _candidate(r, where)) is not None]
    wheels.sort(key=lambda c: -c.api_version)
    toolkits = [c for r, where in _toolkit_roots() if (c := _candidate(r, where)) is not None]
    seen: set[Path] = set()
    out = []
    for install in (*wheels, *toolkits):
        if install.include.resolve() not in seen:
            seen.add(install.include.resolve())
            out.append(install)
    return out


def find_cupti() -> CuptiInstall:
    """The CUPTI to build against (see the module doc); HilsimError naming where it looked."""
    found = cupti_candidates()
    if found:
        return found[0]
    raise HilsimError(
        "CUPTI not found: install the nvidia-cuda-cupti wheel matching the driver "
        "(pip install 'nvidia-cuda-cupti==13.*' or nvidia-cuda-cupti-cu12) or set "
        "$HILSIM_CUPTI_ROOT to a folder with include/cupti.h and lib/libcupti.so*")


def find_compiler() -> str:
    """``$CC``, else gcc or cc on PATH; HilsimError when none."""
    for name in (os.environ.get("CC"), "gcc", "cc"):
        if name:
            path = shutil.which(name)
            if path:
                return path
    raise HilsimError("no C compiler found to build the CUPTI injection library "
                      "(install gcc or set $CC)")


def launch_header(include: Path) -> str:
    """C arrays of the launch-API callback ids of these headers (``hs_launch_cbids.h``)."""
    lines = ["/* generated by hilsim.agent.cupti_build from the CUPTI headers */",
             "#include <stdint.h>"]
    for api, (header, pattern) in _CBID.items():
        try:
            text = (include / header).read_text(errors="replace")
        except OSError as exc:
            raise HilsimError(f"{include / header}: cannot read ({exc.strerror})") from exc
        members = [(m.group(1), int(m.group(2))) for m in pattern.finditer(text)]
        ids = sorted(launch_cbids((n, v) for n, v in members if n not in ("INVALID", "SIZE")))
        if not ids:
            raise HilsimError(f"{include / header}: no launch API callback ids found")
        name = f"HS_{api.upper()}_LAUNCH_CBIDS"
        lines.append(f"static const uint32_t {name}[] = {{{', '.join(map(str, ids))}}};")
    return "\n".join(lines) + "\n"


def cache_dir() -> Path:
    """``$HILSIM_CACHE/cupti-inject``, else ``$XDG_CACHE_HOME`` or ~/.cache /hilsim/cupti-inject."""
    return cache_root("cupti-inject")


def compile_c(
    compiler: str, sources: list[Path], output: Path, include_dirs: list[Path],
    shared: bool, install: CuptiInstall | None = None,
) -> None:
    """``gcc -O2`` the sources into ``output`` (a shared library when ``shared``; linked to
    ``install``'s libcupti, found at run time through an rpath, when given). Written
    through a temporary name; HilsimError with the compiler's first error line."""
    flags = ["-std=gnu11", "-O2", "-Wall", "-fPIC", "-fvisibility=hidden"]
    link: list[str] = ["-lpthread", "-ldl"]
    if install is not None:
        libdir = install.library.parent
        link = [f"-L{libdir}", f"-l:{install.library.name}", f"-Wl,-rpath,{libdir}", *link]
    tmp = output.with_name(f".{output.name}.{os.getpid()}.tmp")
    argv = [compiler, *flags, *(["-shared"] if shared else []), "-o", str(tmp),
            *map(str, sources), *(f"-I{d}" for d in include_dirs), *link]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S,
                              check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise HilsimError(f"cannot run the C compiler {compiler}: {exc}") from exc
    if done.returncode != 0:
        tmp.unlink(missing_ok=True)
        lines = done.stderr.splitlines()
        errors = [ln for ln in lines if "error" in ln] or lines
        raise HilsimError(
            f"building {output.name} failed ({compiler} exit {done.returncode}): "
            + (errors[0][:300] if errors else "no output"))
    os.replace(tmp, output)


def _digest(install: CuptiInstall, compiler: str, generated: str) -> str:
    sha = hashlib.sha256()
    for name in (*LIBRARY_SOURCES, *HEADERS):
        sha.update((NATIVE / name).read_bytes())
    stat = install.library.stat()
    for part in (generated, str(install.include), str(install.library), str(stat.st_size),
                 str(int(stat.st_mtime)), str(install.cuda_include), compiler,
                 str(install.api_version)):
        sha.update(part.encode() + b"\0")
    return sha.hexdigest()[:16]


@dataclass(frozen=True)
class InjectionLibrary:
    """The built library, the libcupti it runs with (NVTX_INJECTION64_PATH) and whether
    this call compiled it."""

    path: Path
    install: CuptiInstall
    built_now: bool


def include_dirs(install: CuptiInstall, generated: Path) -> list[Path]:
    """``-I`` folders of the native sources: the generated header's, the sources', CUPTI's
    and ``cuda.h``'s (HilsimError when ``cuda.h`` was not found)."""
    if install.cuda_include is None:
        raise HilsimError(
            f"cuda.h (with builtin_types.h) not found for the CUPTI headers in {install.include}: "
            "install the CUDA toolkit headers or the nvidia-cuda-runtime wheel, or set $CUDA_HOME")
    return [generated, NATIVE, install.include, install.cuda_include]


def build_injection(force: bool = False, cache: Path | None = None,
                    install: CuptiInstall | None = None) -> InjectionLibrary:
    """The injection library for this host's CUPTI (or ``install``), compiled into the
    cache when missing."""
    install = install or find_cupti()
    include_dirs(install, NATIVE)  # cuda.h found, or one line saying it is not
    compiler = find_compiler()
    generated = launch_header(install.include)
    key = _digest(install, compiler, generated)
    folder = (cache or cache_dir()) / f"cupti{install.api_version}-{key}"
    library = folder / LIBRARY_NAME
    if library.is_file() and not force:
        return InjectionLibrary(library, install, False)
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="hilsim-cupti-build-") as scratch:
        (Path(scratch) / LAUNCH_HEADER).write_text(generated)
        compile_c(compiler, [NATIVE / s for s in LIBRARY_SOURCES], library,
                  include_dirs(install, Path(scratch)), shared=True, install=install)
    return InjectionLibrary(library, install, True)


@dataclass(frozen=True)
class InjectionStatus:
    """Whether the injection library can be used here (built, or buildable), and why not."""

    ready: bool
    detail: str


def injection_status() -> InjectionStatus:
    """Cheap check for ``--backend`` detection: CUPTI, ``cuda.h`` and a compiler found
    (nothing compiled, no GPU library loaded)."""
    try:
        install = find_cupti()
        if install.cuda_include is None:
            return InjectionStatus(False, f"cuda.h not found for {install.include}")
        compiler = find_compiler()
    except HilsimError as exc:
        return InjectionStatus(False, str(exc))
    return InjectionStatus(True, f"{install.describe()}, built with {compiler}")


__all__ = [
    "CuptiInstall",
    "InjectionLibrary",
    "InjectionStatus",
    "build_injection",
    "cache_dir",
    "compile_c",
    "cupti_candidates",
    "find_compiler",
    "find_cupti",
    "include_dirs",
    "injection_status",
    "launch_header",
]
