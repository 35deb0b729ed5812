"""Which profilers are usable here, their versions, and how to launch a Python workload.

Nothing here imports a GPU library: ``cupti`` and ``torch`` are looked up with
``importlib.util.find_spec`` and ``importlib.metadata`` (no import, no CUDA init).
Executables are found on ``PATH``; ``$HILSIM_NSYS`` / ``$HILSIM_NCU`` override.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hilsim.agent.cupti_build import injection_status

from hilsim.core.errors import HilsimError

VERSION_TIMEOUT_S = 60
_PYTHON_NAME = re.compile(r"^python(\d+(\.\d+)*)?$")
# interpreter options that take a value (python -X dev, -W error, ...)
_PY_OPTS_WITH_VALUE = ("-X", "-W", "-Q")


@dataclass
class Tool:
    """One profiler: usable or not, with version and the reason when not."""

    name: str
    usable: bool
    version: str | None = None
    path: str | None = None
    reason: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v not in (None, {})}


def find_executable(name: str) -> str | None:
    """``$HILSIM_<NAME>`` (a path or a command name) first, then ``PATH``."""
    override = os.environ.get(f"HILSIM_{name.upper()}")
    if override:
        return override if Path(override).is_file() else shutil.which(override)
    return shutil.which(name)


def _run_quiet(argv: list[str]) -> tuple[int, str]:
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=VERSION_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return -1, str(exc)
    return done.returncode, done.stdout + done.stderr


_VERSION = re.compile(r"(?:version|Version)\s+v?(\d+(?:\.\d+)+[\w.\-]*)")


def parse_version(text: str) -> str | None:
    """The version in ``nsys --version`` / ``ncu --version`` output, e.g. ``2024.3.2.0``."""
    match = _VERSION.search(text)
    if match:
        return match.group(1)
    match = re.search(r"\b(\d{4}\.\d+(?:\.\d+)*)\b", text)
    return match.group(1) if match else None


def nsys_tool() -> Tool:
    """Nsight Systems: usable when ``nsys --version`` runs; ``extra.export`` says whether
    ``nsys export --help`` runs (a host may have ``nsys`` without a working exporter)."""
    path = find_executable("nsys")
    if path is None:
        return Tool("nsys", False, reason="nsys not on PATH")
    code, text = _run_quiet([path, "--version"])
    if code != 0:
        return Tool("nsys", False, path=path, reason=f"'nsys --version' failed ({code})")
    export_code, export_text = _run_quiet([path, "export", "--help"])
    tool = Tool("nsys", True, parse_version(text), path)
    tool.extra["export"] = export_code == 0
    if export_code != 0:
        last = [ln for ln in export_text.splitlines() if ln.strip()]
        tool.extra["export_error"] = (last[-1] if last else f"exit code {export_code}")[:200]
    return tool


def ncu_tool() -> Tool:
    """Nsight Compute: usable when ``ncu --version`` runs."""
    path = find_executable("ncu")
    if path is None:
        return Tool("ncu", False, reason="ncu not on PATH")
    code, text = _run_quiet([path, "--version"])
    if code != 0:
        return Tool("ncu", False, path=path, reason=f"'ncu --version' failed ({code})")
    return Tool("ncu", True, parse_version(text), path)


def _dist_version(*names: str) -> str | None:
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _find_spec(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def cupti_tool() -> Tool:
    """CUPTI: the injection library for any CUDA program (CUPTI headers and library, a C
    compiler: :func:`hilsim.agent.cupti_build.injection_status`) and the in-process
    launcher for Python programs (``cupti`` importable, checked without importing it).

    ``extra``: ``injection`` (bool), ``injection_detail`` (what it builds from, or why it
    cannot), ``in_process`` (bool).
    """
    injection = injection_status()
    in_process = _find_spec("cupti")
    extra = {"injection": injection.ready, "injection_detail": injection.detail,
             "in_process": in_process}
    version = _dist_version("cupti-python", "cupti_python") if in_process else None
    if not injection.ready and not in_process:
        return Tool("cupti", False, reason=(
            f"no CUPTI injection library ({injection.detail}) and cupti-python not installed "
            "(pip install cupti-python)"), extra=extra)
    return Tool("cupti", True, version, extra=extra)


def torch_tool() -> Tool:
    """PyTorch profiler: usable when ``torch`` is importable (checked without importing it)."""
    if not _find_spec("torch"):
        return Tool("torch", False, reason="torch not installed")
    return Tool("torch", True, _dist_version("torch"))


def all_tools() -> dict[str, Tool]:
    """nsys, ncu, cupti, torch."""
    return {t.name: t for t in (nsys_tool(), ncu_tool(), cupti_tool(), torch_tool())}


@dataclass
class PythonTarget:
    """A Python workload split into interpreter, what to run, and its arguments.

    ``mode`` is ``"script"`` (``target`` a path) or ``"module"`` (``python -m target``).
    """

    interpreter: str
    mode: str
    target: str
    args: list[str]
    interpreter_options: list[str] = field(default_factory=list)

    def launcher_argv(self, module: str, options: list[str]) -> list[str]:
        """``interpreter [opts] -m module OPTIONS -- target args`` (``-m`` kept for modules)."""
        what = ["-m", self.target] if self.mode == "module" else [self.target]
        return [
            self.interpreter, *self.interpreter_options, "-m", module, *options, "--",
            *what, *self.args,
        ]


def python_target(command: list[str]) -> PythonTarget | None:
    """Recognise ``script.py ARGS``, ``python [opts] script.py ARGS`` or ``python -m mod ARGS``.

    Returns None for anything else (a binary, ``python -c``): such workloads can only be
    profiled from outside (nsys, ncu).
    """
    if not command:
        return None
    first = command[0]
    if first.endswith(".py"):
        return PythonTarget(sys.executable, "script", first, list(command[1:]))
    if not _PYTHON_NAME.match(Path(first).name):
        return None
    interpreter = shutil.which(first) or first
    options: list[str] = []
    i = 1
    while i < len(command):
        arg = command[i]
        if arg == "-m" and i + 1 < len(command):
            return PythonTarget(interpreter, "module", command[i + 1], command[i + 2 :], options)
        if arg == "-c" or arg == "-":
            return None
        if arg in _PY_OPTS_WITH_VALUE and i + 1 < len(command):
            options += [arg, command[i + 1]]
            i += 2
            continue
        if arg.startswith("-"):
            options.append(arg)
            i += 1
            continue
        return PythonTarget(interpreter, "script", arg, command[i + 1 :], options)
    return None


def hilsim_pythonpath(env: dict[str, str] | None = None) -> dict[str, str]:
    """Environment with this hilsim's package root prepended to ``PYTHONPATH``.

    The launchers (``python -m hilsim.agent.launch`` ...) then import even when the workload's
    interpreter is another environment's python.
    """
    out = dict(os.environ if env is None else env)
    root = str(Path(__file__).resolve().parent.parent)
    parts = [p for p in out.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in parts:
        out["PYTHONPATH"] = os.pathsep.join([root, *parts])
    return out


def require_python_target(command: list[str], what: str) -> PythonTarget:
    """:func:`python_target` or a one-line error naming ``what`` needs it."""
    target = python_target(command)
    if target is None:
        raise HilsimError(
            f"{what} needs a Python workload ('script.py ARGS', 'python script.py ARGS' or "
            f"'python -m module ARGS'); got {' '.join(command[:3])!r}"
        )
    return target
