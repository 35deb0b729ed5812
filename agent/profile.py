"""``hilsim agent profile``: two-level profile of a workload (PKA section 3.1) into a bundle.

Light level, every launch, one backend (``auto`` picks the first usable one in this
order and says why):

* ``nsys``:  ``nsys profile --trace=cuda,nvtx --sample=none --cpuctxsw=none -o REP -f true
  CMD...``, then ``nsys export --type sqlite ...`` and
  :func:`hilsim.analyzer.importers.nsys_sqlite.bundle_from_nsys_sqlite` (any workload; NVTX ranges
  the workload emits become regions). Chosen by ``auto`` only when ``nsys export --help``
  works; when the export fails after the run, ``auto`` falls back to the next backend
  (one more run) and the report is kept as ``OUT.nsys-rep``.
* ``cupti``: ``python -m hilsim.agent.cupti_launch --out R.jsonl -- script.py ARGS`` (Python
  workloads), imported with
  :func:`hilsim.analyzer.importers.cupti_records.bundle_from_cupti_records`.
* ``torch``: ``python -m hilsim.agent.torch_launch --out T.json -- script.py ARGS`` (Python
  workloads), imported with :func:`hilsim.analyzer.importers.kineto.bundle_from_kineto`.

Detailed level (optional): Nsight Compute as a second run on a subset
(:mod:`hilsim.agent.ncu`), matched to the light launches by order and kernel name; mismatches
are reported in the manifest (``detailed``), never joined silently.

A workload that exits non-zero, is interrupted or times out still yields a bundle with
every launch captured so far and ``complete: false``.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hilsim.agent import ncu as ncu_mod
from hilsim.agent.runner import GRACE_S, RunResult, run_workload
from hilsim.agent.tools import (
    Tool,
    all_tools,
    hilsim_pythonpath,
    python_target,
    require_python_target,
)

from hilsim.core.bundle import Bundle, write_bundle
from hilsim.core.errors import HilsimError

BACKENDS: tuple[str, ...] = ("auto", "nsys", "cupti", "torch")
NSYS_PROFILE_ARGS: tuple[str, ...] = (
    "profile",
    "--trace=cuda,nvtx",
    "--sample=none",
    "--cpuctxsw=none",
    # one row per kernel node of a replayed CUDA graph (the default, graph, records the
    # whole graph as one row and drops its kernels; ncu and CUPTI see every node)
    "--cuda-graph-trace=node",
)


def say(message: str) -> None:
    """Progress line on stderr (stdout belongs to the workload)."""
    print(f"hilsim: {message}", file=sys.stderr, flush=True)


@dataclass
class ProfileOptions:
    """Everything ``hilsim agent profile`` was asked to do."""

    command: list[str]
    out: Path
    backend: str = "auto"
    detailed: ncu_mod.Selection | None = None
    metrics: list[str] = field(default_factory=lambda: list(ncu_mod.DEFAULT_METRICS))
    timeout_s: float | None = None
    detailed_timeout_s: float | None = None
    measure_overhead: bool = False
    nvtx_modules: list[str] = field(default_factory=list)
    force: bool = False
    keep_raw: Path | None = None
    probe: bool = True
    device_index: int = 0
    grace_s: float = GRACE_S


def choose_backend(
    requested: str, command: list[str], tools: dict[str, Tool]
) -> tuple[list[str], str]:
    """Backends to try in order, and why the first was chosen.

    ``auto``: nsys when it runs and can export, else cupti, else torch (the last two
    only for Python workloads). An explicit backend that is not usable is an error.
    """
    if requested not in BACKENDS:
        raise HilsimError(f"--backend must be one of {', '.join(BACKENDS)}, got {requested!r}")
    is_python = python_target(command) is not None
    nsys = tools["nsys"]
    if requested == "nsys":
        if not nsys.usable:
            raise HilsimError(f"--backend nsys: {nsys.reason} (install Nsight Systems)")
        return ["nsys"], "requested"
    if requested in ("cupti", "torch"):
        tool = tools[requested]
        if not tool.usable:
            raise HilsimError(f"--backend {requested}: {tool.reason}")
        require_python_target(command, f"--backend {requested}")
        return [requested], "requested"
    order: list[str] = []
    why: list[str] = []
    if nsys.usable and nsys.extra.get("export", False):
        order.append("nsys")
    else:
        why.append(f"nsys: {nsys.reason or 'nsys export does not work here'}")
    for name in ("cupti", "torch"):
        tool = tools[name]
        if tool.usable and is_python:
            order.append(name)
        else:
            why.append(f"{name}: {tool.reason or 'the workload is not a Python program'}")
    if not order:
        raise HilsimError(
            "agent profile: no usable light profiler (" + "; ".join(why) + "); install "
            "Nsight Systems, or cupti-python / torch for Python workloads"
        )
    reason = "auto: first usable of nsys, cupti, torch" + (f" ({'; '.join(why)})" if why else "")
    return order, reason


def _nvtx_options(modules: list[str]) -> list[str]:
    return [x for m in modules for x in ("--nvtx", m)]


def workload_argv(command: list[str], nvtx_modules: list[str]) -> list[str]:
    """The command itself, or run through ``hilsim.agent.launch`` with ``--nvtx-module``."""
    if not nvtx_modules:
        return list(command)
    target = require_python_target(command, "--nvtx-module")
    return target.launcher_argv("hilsim.agent.launch", _nvtx_options(nvtx_modules))


@dataclass
class LightResult:
    bundle: Bundle
    run: RunResult
    profiler: dict[str, Any]
    recorded_complete: bool = True


class ExportFailed(HilsimError):
    """nsys ran but its report could not be exported (auto may fall back)."""


def _light_nsys(opts: ProfileOptions, tool: Tool, raw: Path, env: dict[str, str]) -> LightResult:
    from hilsim.analyzer.importers.nsys_rep import REPORT_SUFFIXES, export_nsys_rep
    from hilsim.analyzer.importers.nsys_sqlite import bundle_from_nsys_sqlite

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


def _run_launcher(
    opts: ProfileOptions,
    env: dict[str, str],
    backend: str,
    module: str,
    output: Path,
    what: str,
) -> tuple[list[str], RunResult]:
    """Run the workload under an in-process launcher that must write ``output``."""
    target = require_python_target(opts.command, f"--backend {backend}")
    argv = target.launcher_argv(module, ["--out", str(output), *_nvtx_options(opts.nvtx_modules)])
    say(f"light pass ({backend}): {' '.join(argv)}")
    run = run_workload(argv, opts.timeout_s, env=env, grace_s=opts.grace_s)
    if not output.is_file():
        raise HilsimError(
            f"the {what} launcher wrote no output (exit code {run.exit_code}"
            + (", timed out" if run.timed_out else "")
            + "): see the output above"
        )
    return argv, run


def _light_cupti(opts: ProfileOptions, tool: Tool, raw: Path, env: dict[str, str]) -> LightResult:
    from hilsim.analyzer.importers.cupti_records import bundle_from_cupti_records

    records = raw / "light.cupti.jsonl"
    argv, run = _run_launcher(opts, env, "cupti", "hilsim.agent.cupti_launch", records, "CUPTI")
    bundle = bundle_from_cupti_records(records)
    profiler = dict(bundle.manifest["profilers"][0])
    profiler.update(
        version=profiler.get("version") or tool.version,
        command=argv,
        activity_kinds=["CONCURRENT_KERNEL", "RUNTIME", "DRIVER"],
    )
    return LightResult(bundle, run, profiler, bool(bundle.manifest.get("complete", True)))


def _light_torch(opts: ProfileOptions, tool: Tool, raw: Path, env: dict[str, str]) -> LightResult:
    import json

    from hilsim.analyzer.importers.kineto import bundle_from_kineto

    trace = raw / "light.pt.trace.json"
    argv, run = _run_launcher(
        opts, env, "torch", "hilsim.agent.torch_launch", trace, "PyTorch-profiler")
    complete = True
    status = Path(f"{trace}.status.json")
    if status.is_file():
        complete = bool(json.loads(status.read_text()).get("complete", True))
    bundle = bundle_from_kineto(trace)
    profiler = dict(bundle.manifest["profilers"][0])
    profiler.update(version=tool.version, command=argv)
    return LightResult(bundle, run, profiler, complete)


_LIGHT = {"nsys": _light_nsys, "cupti": _light_cupti, "torch": _light_torch}


def _device_facts(opts: ProfileOptions) -> dict[str, Any]:
    if not opts.probe:
        return {}
    from hilsim.agent.probe import probe_device

    try:
        return probe_device(opts.device_index, tools=False)
    except HilsimError as exc:
        if "neither" in str(exc):
            say("warning: pynvml and cupy are missing; device facts come from the profiler")
            return {}
        raise HilsimError(f"agent profile: {exc} (use --no-probe to skip the check)") from exc


def _detailed(
    opts: ProfileOptions, tool: Tool, raw: Path, env: dict[str, str], bundle: Bundle
) -> tuple[dict[str, Any], Any]:
    from hilsim.analyzer.importers.ncu_csv import read_ncu_csv

    sel = opts.detailed
    assert sel is not None and tool.path is not None
    if sel.skip >= bundle.n_launches:
        raise HilsimError(
            f"detailed selection starts at launch {sel.skip} but the light pass recorded "
            f"{bundle.n_launches} launches"
        )
    rep = raw / "detailed"
    argv = ncu_mod.profile_command(
        tool.path, rep, sel, opts.metrics, workload_argv(opts.command, opts.nvtx_modules)
    )
    log = raw / "ncu.log"
    say(f"detailed pass (ncu, {sel.mode}): {' '.join(argv[:9])} ... (log: {log})")
    run = run_workload(argv, opts.detailed_timeout_s, env=env, log=log, grace_s=opts.grace_s)
    text = log.read_text(encoding="utf-8", errors="replace")
    ncu_mod.check_permission(text)
    report = ncu_mod.report_file(rep)
    if report is None:
        last = [ln for ln in text.splitlines() if ln.strip()]
        raise HilsimError(
            f"ncu wrote no report (exit code {run.exit_code}): "
            + (last[-1][:200] if last else "no output")
        )
    csv_path = raw / "detailed.csv"
    import_log = raw / "ncu-import.log"
    with open(csv_path, "wb") as handle, open(import_log, "wb") as errors:
        import subprocess

        done = subprocess.run(
            ncu_mod.import_command(tool.path, report),
            stdout=handle,
            stderr=errors,
            check=False,
            timeout=3600,
        )
    ncu_mod.check_permission(import_log.read_text(errors="replace"))
    if done.returncode != 0:
        raise HilsimError(f"'ncu --import {report.name} --csv' failed (exit {done.returncode})")
    table = read_ncu_csv(csv_path)
    match = ncu_mod.match_detailed(bundle.launches, table, sel)
    info: dict[str, Any] = {
        "name": "nsight-compute",
        "level": "detailed",
        "version": tool.version,
        "command": argv,
        "import_command": ncu_mod.import_command(tool.path, report),
        "options": {"clock_control": "none", "metrics": opts.metrics, **sel.as_dict()},
        "run": run.as_dict(),
        "launches_with_metrics": 0 if match.metrics is None else len(match.metrics),
        "match": match.report,
    }
    return info, match.metrics


def profile_workload(opts: ProfileOptions) -> tuple[Path, dict[str, Any]]:
    """Run the two-level profile and write the bundle; returns (path, manifest)."""
    if not opts.command:
        raise HilsimError("agent profile: no command given (put it after '--')")
    if opts.out.exists() and not opts.force:
        raise HilsimError(f"{opts.out}: already exists (use --force to replace it)")
    tools = all_tools()
    order, reason = choose_backend(opts.backend, opts.command, tools)
    if opts.detailed is not None and not tools["ncu"].usable:
        raise HilsimError(
            f"--detailed-*: {tools['ncu'].reason} (install Nsight Compute or drop the option)"
        )
    if opts.nvtx_modules:
        require_python_target(opts.command, "--nvtx-module")
    device = _device_facts(opts)
    env = hilsim_pythonpath()
    raw_ctx = tempfile.TemporaryDirectory(prefix="hilsim-profile-")
    raw = Path(raw_ctx.name) if opts.keep_raw is None else opts.keep_raw
    raw.mkdir(parents=True, exist_ok=True)
    try:
        return _profile(opts, tools, order, reason, device, env, raw)
    finally:
        raw_ctx.cleanup()


def _profile(
    opts: ProfileOptions,
    tools: dict[str, Tool],
    order: list[str],
    reason: str,
    device: dict[str, Any],
    env: dict[str, str],
    raw: Path,
) -> tuple[Path, dict[str, Any]]:
    overhead: dict[str, Any] | None = None
    bare: RunResult | None = None
    if opts.measure_overhead:
        say("overhead: running the workload once without a profiler")
        bare = run_workload(
            workload_argv(opts.command, opts.nvtx_modules),
            opts.timeout_s,
            env=env,
            grace_s=opts.grace_s,
        )
    light: LightResult | None = None
    fallbacks: list[str] = []
    chosen = order[0]
    for index, name in enumerate(order):
        chosen = name
        say(f"light backend: {name} ({reason if index == 0 else 'fallback'})")
        try:
            light = _LIGHT[name](opts, tools[name], raw, env)
            break
        except ExportFailed as exc:
            if index + 1 < len(order):
                fallbacks.append(f"{name}: {exc}")
                say(f"warning: {exc}; trying {order[index + 1]}")
                continue
            raise
    assert light is not None
    bundle, run = light.bundle, light.run
    complete = run.ok and light.recorded_complete
    if bare is not None:
        overhead = {
            "bare_wall_s": round(bare.wall_s, 6),
            "light_wall_s": round(run.wall_s, 6),
            "ratio": round(run.wall_s / bare.wall_s, 4) if bare.wall_s > 0 else None,
            "bare_exit_code": bare.exit_code,
            "note": "light wall time includes the profiler's start-up and report writing",
        }
    light_profiler = {
        "level": "light",
        "backend": chosen,
        "backend_reason": reason,
        **light.profiler,
        "run": run.as_dict(),
    }
    if fallbacks:
        light_profiler["fallbacks"] = fallbacks
    profilers: list[dict[str, Any]] = [light_profiler]
    detailed_error: str | None = None
    if opts.detailed is not None:
        if not complete:
            profilers.append(
                {"name": "nsight-compute", "level": "detailed", "skipped": "light pass incomplete"}
            )
        else:
            try:
                info, metrics = _detailed(opts, tools["ncu"], raw, env, bundle)
                baseline = bare if bare is not None else run
                info["cost"] = ncu_mod.detailed_cost(
                    info["run"]["wall_s"], baseline.wall_s, info["match"]["ncu_launches"],
                    bundle.n_launches,
                )
                cost = info["cost"]
                if cost["s_per_detailed_launch"] is not None:
                    say(
                        f"detailed pass: {cost['launches_profiled']} launches in "
                        f"{cost['detailed_wall_s']:.1f} s, {cost['s_per_detailed_launch']:.3f} "
                        f"s per launch over the {'bare' if bare is not None else 'light'} run; "
                        f"--detailed-all would take about {cost['detailed_all_estimate_s']:,.0f}"
                        f" s for {bundle.n_launches:,} launches"
                    )
                profilers.append(info)
                bundle.metrics = metrics
                mism = info["match"]["mismatched"]
                if mism or info["match"]["count_mismatch"]:
                    say(
                        f"warning: {mism} detailed launches disagree with the light pass "
                        "(not joined; see manifest profilers[].match)"
                    )
            except HilsimError as exc:
                detailed_error = str(exc)
                profilers.append(
                    {"name": "nsight-compute", "level": "detailed", "error": detailed_error}
                )
    manifest = bundle.manifest
    imported_device = manifest.get("device") or {}
    manifest["device"] = {**imported_device, **device}
    manifest["workload"] = {
        "argv": list(opts.command),
        "cwd": str(Path.cwd()),
        "exit_code": run.exit_code,
        "wall_s": round(run.wall_s, 6),
        "timed_out": run.timed_out,
        "interrupted": run.interrupted,
        "stopped_with": run.stopped_with,
        "nvtx_modules": list(opts.nvtx_modules),
    }
    manifest["profilers"] = profilers
    manifest["complete"] = complete
    manifest["agent"] = {
        "backend": chosen,
        "tools": {k: t.as_dict() for k, t in tools.items()},
        "timeout_s": opts.timeout_s,
    }
    if overhead is not None:
        manifest["overhead"] = overhead
    path = write_bundle(bundle, opts.out, overwrite=opts.force)
    if detailed_error is not None:
        raise HilsimError(
            f"{detailed_error} (the light-level bundle was written to {path} without metrics)"
        )
    return path, bundle.manifest  # as written: n_launches, file digests (issue 16 F13)


__all__ = ["BACKENDS", "ProfileOptions", "choose_backend", "profile_workload", "workload_argv"]
