"""The ``nsys`` light backend: Nsight Systems around any workload.

``nsys profile --trace=cuda,nvtx --sample=none --cpuctxsw=none --cuda-graph-trace=node
-o REP -f true CMD...``, then ``nsys export --type sqlite`` and
:func:`hilsim.formats.nsys_sqlite.bundle_from_nsys_sqlite`; NVTX ranges the
workload emits become regions. ``auto`` picks it first, but only when ``nsys export
--help`` works; when the export fails after the run, ``auto`` falls back to the next
backend (one more run) and the report is kept as ``OUT.nsys-rep``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from hilsim.agent.backends.base import (
    Backend,
    ExportFailed,
    LightResult,
    ProfileOptions,
    say,
    workload_argv,
)
from hilsim.agent.runner import run_workload
from hilsim.agent.tools import Tool, nsys_tool

from hilsim.core.errors import HilsimError
from hilsim.formats.nsys_rep import REPORT_SUFFIXES, export_nsys_rep
from hilsim.formats.nsys_sqlite import bundle_from_nsys_sqlite

NSYS_PROFILE_ARGS: tuple[str, ...] = (
    "profile",
    "--trace=cuda,nvtx",
    "--sample=none",
    "--cpuctxsw=none",
    # one row per kernel node of a replayed CUDA graph (the default, graph, records the
    # whole graph as one row and drops its kernels; ncu and CUPTI see every node)
    "--cuda-graph-trace=node",
)


def run_nsys(opts: ProfileOptions, tool: Tool, raw: Path, env: dict[str, str]) -> LightResult:
    """The light pass under ``nsys profile``, exported to SQLite and imported."""
    assert tool.path is not None
    rep = raw / "light"
    argv = [
        tool.path,
        *NSYS_PROFILE_ARGS,
        "-o",
        str(rep),
        "-f",
        "true",
        *workload_argv(opts.command, opts.nvtx_modules),
    ]
    say(f"light pass (nsys): {' '.join(argv[:8])} ...")
    run = run_workload(argv, opts.timeout_s, env=env, grace_s=opts.grace_s)
    report = next((Path(f"{rep}{s}") for s in REPORT_SUFFIXES if Path(f"{rep}{s}").is_file()), None)
    if report is None:
        raise HilsimError(
            f"nsys wrote no report (exit code {run.exit_code}"
            + (", timed out" if run.timed_out else "")
            + "): see its output above"
        )
    try:
        sqlite = export_nsys_rep(report, raw, nsys=tool.path)
    except HilsimError as exc:
        kept = opts.out.parent / f"{opts.out.name}.nsys-rep"
        shutil.copyfile(report, kept)
        raise ExportFailed(f"{exc} (report kept as {kept})") from exc
    bundle = bundle_from_nsys_sqlite(sqlite)
    profiler = dict(bundle.manifest["profilers"][0])
    profiler.update(
        version=profiler.get("version") or tool.version,
        command=argv,
        export="nsys export --type sqlite",
    )
    return LightResult(bundle, run, profiler)


def _exports(tool: Tool) -> bool:
    return tool.usable and bool(tool.extra.get("export", False))


BACKEND = Backend(
    name="nsys",
    detect=nsys_tool,
    needs_python=False,
    auto_rank=0,
    auto_ready=_exports,
    not_ready_note="nsys export does not work here",
    install_hint="install Nsight Systems",
    install_name="Nsight Systems",
    run=run_nsys,
)

__all__ = ["BACKEND", "NSYS_PROFILE_ARGS", "run_nsys"]
