"""The ``torch`` light backend: the PyTorch profiler inside a Python workload.

``python -m hilsim.agent.torch_launch --out T.json -- script.py ARGS`` exports a Kineto
trace (:mod:`hilsim.agent.torch_launch`), imported with
:func:`hilsim.formats.kineto.bundle_from_kineto`.
"""

from __future__ import annotations

import json
from pathlib import Path

from hilsim.agent.backends.base import Backend, LightResult, ProfileOptions, run_launcher
from hilsim.agent.tools import Tool, torch_tool

from hilsim.formats.kineto import bundle_from_kineto


def run_torch(opts: ProfileOptions, tool: Tool, raw: Path, env: dict[str, str]) -> LightResult:
    """The light pass under the PyTorch-profiler launcher; complete as its status file
    says."""
    trace = raw / "light.pt.trace.json"
    argv, run = run_launcher(
        opts, env, "torch", "hilsim.agent.torch_launch", trace, "PyTorch-profiler")
    complete = True
    status = Path(f"{trace}.status.json")
    if status.is_file():
        complete = bool(json.loads(status.read_text()).get("complete", True))
    bundle = bundle_from_kineto(trace)
    profiler = dict(bundle.manifest["profilers"][0])
    profiler.update(version=tool.version, command=argv)
    return LightResult(bundle, run, profiler, complete)


BACKEND = Backend(
    name="torch",
    detect=torch_tool,
    needs_python=True,
    auto_rank=2,
    not_ready_note="the workload is not a Python program",
    install_name="torch",
    run=run_torch,
)

__all__ = ["BACKEND", "run_torch"]
