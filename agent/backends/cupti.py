"""The ``cupti`` light backend: CUPTI activity tracing, in any CUDA program or in Python.

Two ways to the same ``hilsim.cupti-records/1`` file, imported with
:func:`hilsim.formats.cupti_records.bundle_from_cupti_records`:

* **injection** (any program, native or Python): the program runs unmodified with
  ``CUDA_INJECTION64_PATH`` naming hilsim's CUPTI injection library
  (:mod:`hilsim.agent.cupti_build`, built on first use), ``NVTX_INJECTION64_PATH`` the
  libcupti it links (unless set already) and ``HILSIM_CUPTI_OUT`` the records file
  (``%p``: one file per process that initialises CUDA; the one with the most kernels is
  imported, the others are named in the manifest). Every record is handled in C.
* **in-process** (Python programs): ``python -m hilsim.agent.cupti_launch --out R.jsonl
  -- script.py ARGS`` (:mod:`hilsim.agent.cupti_launch`, cupti-python), each record read
  in the workload's interpreter.

A native program takes the injection; a Python program too when the library can be built
here and no ``--nvtx-module`` is given (those ranges are recorded by the in-process
launcher itself). ``$HILSIM_CUPTI_MODE`` = ``injection`` or ``in-process`` forces one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from hilsim.agent.backends.base import Backend, LightResult, ProfileOptions, run_launcher, say
from hilsim.agent.cupti_build import build_injection
from hilsim.agent.runner import RunResult, run_workload
from hilsim.agent.tools import Tool, cupti_tool, python_target

from hilsim.core.errors import HilsimError
from hilsim.formats.cupti_records import bundle_from_cupti_records

MODE_VARIABLE = "HILSIM_CUPTI_MODE"
MODES = ("injection", "in-process")
ACTIVITY_KINDS = ["CONCURRENT_KERNEL", "RUNTIME", "DRIVER", "MARKER"]


def _native_refusal(tool: Tool) -> str | None:
    if tool.extra.get("injection"):
        return None
    return ("no CUPTI injection library for native programs: "
            + str(tool.extra.get("injection_detail") or "not detected"))


def cupti_mode(opts: ProfileOptions, tool: Tool) -> tuple[str, str]:
    """``("injection" | "in-process", why)`` for this workload, or a one-line error."""
    forced = os.environ.get(MODE_VARIABLE) or None
    if forced is not None and forced not in MODES:
        raise HilsimError(f"${MODE_VARIABLE} must be one of {', '.join(MODES)}, got {forced!r}")
    is_python = python_target(opts.command) is not None
    injection = bool(tool.extra.get("injection"))
    if forced is None:
        if not is_python:
            forced, why = "injection", "a native program"
        elif opts.nvtx_modules:
            forced, why = "in-process", "--nvtx-module ranges are recorded in-process"
        elif injection:
            forced, why = "injection", "the injection library can be built here"
        else:
            forced, why = "in-process", "no injection library here"
    else:
        why = f"${MODE_VARIABLE}"
    if forced == "injection":
        if not injection:
            raise HilsimError(f"--backend cupti: {_native_refusal(tool)}")
        if opts.nvtx_modules:
            raise HilsimError(f"--nvtx-module needs the in-process CUPTI launcher (unset "
                              f"${MODE_VARIABLE} or set it to in-process)")
        return forced, why
    if not is_python:
        raise HilsimError(f"${MODE_VARIABLE}=in-process needs a Python workload; got "
                          f"{' '.join(opts.command[:3])!r}")
    if not tool.extra.get("in_process", True):
        raise HilsimError("--backend cupti: the in-process launcher needs cupti-python "
                          "(pip install cupti-python)")
    return forced, why


def _header(path: Path) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            head = json.loads(handle.readline(1 << 20))
    except (OSError, ValueError) as exc:
        raise HilsimError(f"{path}: not a CUPTI records file ({exc})") from exc
    return head if isinstance(head, dict) else {}


def pick_records(raw: Path, run: RunResult) -> tuple[Path, list[dict[str, Any]]]:
    """The records file of the process with the most kernels, and the other processes'."""
    found = sorted(raw.glob("light.*.cupti.jsonl"))
    if not found:
        raise HilsimError(
            f"the CUPTI injection library wrote no records (the program exited with code "
            f"{run.exit_code}{', timed out' if run.timed_out else ''}): CUDA loads it at the "
            "program's first CUDA call, so the program made none or found no CUDA driver and "
            "GPU; see its output above")
    headers = {path: _header(path) for path in found}
    working = {p: h for p, h in headers.items() if not h.get("error")}
    if not working:
        head = next(iter(headers.values()))
        raise HilsimError(f"CUPTI could not start in the program (process {head.get('pid')}, "
                          f"exit code {run.exit_code}): {head['error']}")

    def kernels(head: dict[str, Any]) -> int:
        counts = head.get("counts")
        return int(counts.get("kernel", 0)) if isinstance(counts, dict) else 0

    chosen = max(working, key=lambda p: kernels(working[p]))
    others = [{"pid": h.get("pid"), "kernels": kernels(h), "error": h.get("error")}
              for p, h in headers.items() if p != chosen]
    return chosen, others


def injection_argv(command: list[str]) -> list[str]:
    """The program as it is run under injection (a ``script.py`` through its interpreter)."""
    target = python_target(command)
    if target is None:
        return list(command)
    what = ["-m", target.target] if target.mode == "module" else [target.target]
    return [target.interpreter, *target.interpreter_options, *what, *target.args]


def run_injection(opts: ProfileOptions, tool: Tool, raw: Path, env: dict[str, str],
                  why: str) -> LightResult:
    """The light pass with the injection library loaded by the CUDA driver."""
    library = build_injection()
    if library.built_now:
        say(f"built the CUPTI injection library {library.path} ({library.install.describe()})")
    for old in raw.glob("light.*.cupti.jsonl"):
        old.unlink()
    run_env = dict(env)
    run_env["CUDA_INJECTION64_PATH"] = str(library.path)
    run_env["HILSIM_CUPTI_OUT"] = str(raw / "light.%p.cupti.jsonl")
    run_env.setdefault("NVTX_INJECTION64_PATH", str(library.install.library))
    argv = injection_argv(opts.command)
    say(f"light pass (cupti, injection: {why}): CUDA_INJECTION64_PATH={library.path} "
        f"{' '.join(argv)}")
    run = run_workload(argv, opts.timeout_s, env=run_env, grace_s=opts.grace_s)
    records, others = pick_records(raw, run)
    bundle = bundle_from_cupti_records(records)
    profiler = dict(bundle.manifest["profilers"][0])
    profiler.update(
        version=profiler.get("version") or library.install.describe(),
        command=argv,
        mode="injection",
        library=str(library.path),
        cupti=library.install.describe(),
        environment={k: run_env[k] for k in ("CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH")},
        activity_kinds=ACTIVITY_KINDS,
    )
    if others:
        profiler["other_processes"] = others
    return LightResult(bundle, run, profiler, bool(bundle.manifest.get("complete", True)))


def run_cupti(opts: ProfileOptions, tool: Tool, raw: Path, env: dict[str, str]) -> LightResult:
    """The light pass, by injection or in-process (:func:`cupti_mode`); complete as the
    records' header says."""
    mode, why = cupti_mode(opts, tool)
    if mode == "injection":
        return run_injection(opts, tool, raw, env, why)
    records = raw / "light.cupti.jsonl"
    argv, run = run_launcher(opts, env, "cupti", "hilsim.agent.cupti_launch", records, "CUPTI")
    bundle = bundle_from_cupti_records(records)
    profiler = dict(bundle.manifest["profilers"][0])
    profiler.update(
        version=profiler.get("version") or tool.version,
        command=argv,
        mode="in-process",
        activity_kinds=ACTIVITY_KINDS,
    )
    return LightResult(bundle, run, profiler, bool(bundle.manifest.get("complete", True)))


BACKEND = Backend(
    name="cupti",
    detect=cupti_tool,
    native_refusal=_native_refusal,
    auto_rank=1,
    not_ready_note="the workload is not a Python program",
    install_name="the nvidia-cuda-cupti wheel with gcc",
    run=run_cupti,
)

__all__ = ["BACKEND", "MODE_VARIABLE", "cupti_mode", "injection_argv", "pick_records",
           "run_cupti", "run_injection"]
