"""The ``cupti`` light backend: CUPTI activity tracing inside a Python workload.

``python -m hilsim.agent.cupti_launch --out R.jsonl -- script.py ARGS`` records every
kernel with the launching call (:mod:`hilsim.agent.cupti_launch`); the records are
imported with :func:`hilsim.formats.cupti_records.bundle_from_cupti_records`.
"""

from __future__ import annotations

from pathlib import Path

from hilsim.agent.backends.base import Backend, LightResult, ProfileOptions, run_launcher
from hilsim.agent.tools import Tool, cupti_tool

from hilsim.formats.cupti_records import bundle_from_cupti_records


def run_cupti(opts: ProfileOptions, tool: Tool, raw: Path, env: dict[str, str]) -> LightResult:
    """The light pass under the CUPTI launcher; complete as its records' header says."""
    records = raw / "light.cupti.jsonl"
    argv, run = run_launcher(opts, env, "cupti", "hilsim.agent.cupti_launch", records, "CUPTI")
    bundle = bundle_from_cupti_records(records)
    profiler = dict(bundle.manifest["profilers"][0])
    profiler.update(
        version=profiler.get("version") or tool.version,
        command=argv,
        activity_kinds=["CONCURRENT_KERNEL", "RUNTIME", "DRIVER"],
    )
    return LightResult(bundle, run, profiler, bool(bundle.manifest.get("complete", True)))


BACKEND = Backend(
    name="cupti",
    detect=cupti_tool,
    needs_python=True,
    auto_rank=1,
    not_ready_note="the workload is not a Python program",
    install_name="cupti-python",
    run=run_cupti,
)

__all__ = ["BACKEND", "run_cupti"]
