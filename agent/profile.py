"""``hilsim agent profile``: two-level profile of a workload (PKA section 3.1) into a bundle.

Light level, every launch, one backend of :mod:`hilsim.agent.backends` (``auto`` picks
the first usable one in ``auto_rank`` order and says why): ``nsys`` (any workload; when
its export fails after the run, ``auto`` falls back to the next backend), ``cupti`` and
``torch`` (Python workloads, in-process launchers). ``gpgpusim`` runs the workload on a
simulated card, which is its own light and detailed level, and writes the bundle itself.

Detailed level (optional): Nsight Compute as a second run on a subset
(:mod:`hilsim.agent.ncu`), matched to the light launches by order and kernel name; mismatches
are reported in the manifest (``detailed``), never joined silently.

A workload that exits non-zero, is interrupted or times out still yields a bundle with
every launch captured so far and ``complete: false``.
"""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hilsim.agent import ncu as ncu_mod
from hilsim.agent import probe
from hilsim.agent.backends import (
    auto_order,
    backend_named,
    detect_tools,
    light_backends,
    whole_run_backend,
)
from hilsim.agent.backends.base import (
    Backend,
    ExportFailed,
    LightResult,
    ProfileOptions,
    say,
    workload_argv,
)
from hilsim.agent.runner import RunResult, run_workload
from hilsim.agent.tools import Tool, hilsim_pythonpath, python_target, require_python_target

from hilsim.core.bundle import Bundle, write_bundle
from hilsim.core.errors import HilsimError
from hilsim.formats.ncu_csv import read_ncu_csv


def choose_backend(
    requested: str, command: list[str], tools: dict[str, Tool]
) -> tuple[list[str], str]:
    """Light backends to try in order, and why the first was chosen.

    ``auto``: the usable ones in ``auto_rank`` order (nsys when it runs and can export,
    else cupti, else torch; the last two only for Python workloads). An explicit backend
    that is not usable is an error.
    """
    light = light_backends()
    names = ("auto", *(b.name for b in light))
    if requested not in names:
        raise HilsimError(f"--backend must be one of {', '.join(names)}, got {requested!r}")
    if requested != "auto":
        backend = backend_named(requested)
        backend.check_requested(tools[requested], command)
        return [requested], "requested"
    is_python = python_target(command) is not None
    candidates = auto_order()
    order: list[str] = []
    why: list[str] = []
    for backend in candidates:
        skip = backend.auto_skip_reason(tools[backend.name], is_python)
        if skip is None:
            order.append(backend.name)
        else:
            why.append(f"{backend.name}: {skip}")
    if not order:
        host = [b.install_name for b in candidates if b.install_name and not b.needs_python]
        python = [b.install_name for b in candidates if b.install_name and b.needs_python]
        hint = "install " + ", ".join(host)
        if python:
            hint += ", or " + " / ".join(python) + " for Python workloads"
        raise HilsimError(
            "agent profile: no usable light profiler (" + "; ".join(why) + "); " + hint
        )
    first = ", ".join(b.name for b in candidates)
    reason = f"auto: first usable of {first}" + (f" ({'; '.join(why)})" if why else "")
    return order, reason


@dataclass
class ProfileResult:
    """The written bundle: its path, its manifest as written (``n_launches``, file
    digests) and the backend that made it."""

    path: Path
    manifest: dict[str, Any]
    backend: Backend

    @property
    def complete(self) -> bool:
        return bool(self.manifest.get("complete", True))

    def summary(self) -> str:
        """One line: what was written, by which backend, how the workload ran."""
        return self.backend.summary(self.path, self.manifest)


def _device_facts(opts: ProfileOptions) -> dict[str, Any]:
    if not opts.probe:
        return {}
    try:
        return probe.probe_device(opts.device_index, tools=False)
    except HilsimError as exc:
        if "neither" in str(exc):
            say("warning: pynvml and cupy are missing; device facts come from the profiler")
            return {}
        raise HilsimError(f"agent profile: {exc} (use --no-probe to skip the check)") from exc


def _detailed(
    opts: ProfileOptions,
    sel: ncu_mod.DetailedSelection,
    tool: Tool,
    raw: Path,
    env: dict[str, str],
    bundle: Bundle,
) -> tuple[dict[str, Any], Any]:
    assert tool.path is not None
    if sel.skip >= bundle.n_launches:
        raise HilsimError(
            f"detailed selection starts at launch {sel.skip} but the light pass recorded "
            f"{bundle.n_launches} launches"
        )
    rep = raw / "detailed"
    argv = ncu_mod.profile_command(
        tool.path, rep, sel, opts.metrics, workload_argv(opts.command, opts.nvtx_modules),
        opts.cache_control,
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
        "options": {"clock_control": "none", "cache_control": opts.cache_control,
                    "metrics": opts.metrics, **sel.as_dict()},
        "run": run.as_dict(),
        "launches_with_metrics": 0 if match.metrics is None else len(match.metrics),
        "match": match.report,
    }
    return info, match.metrics


def profile_workload(opts: ProfileOptions) -> ProfileResult:
    """Run the profile and write the bundle: the two-level profile of a light backend, or
    the whole run of a backend that writes the bundle itself (``gpgpusim``)."""
    whole = whole_run_backend(opts)
    if whole is not None and whole.profile is not None:
        path, manifest = whole.profile(opts)
        return ProfileResult(path, manifest, whole)
    sel = ncu_mod.selection(opts.detailed_first, opts.detailed_launches, opts.detailed_all)
    if not opts.command:
        raise HilsimError("agent profile: no command given (put it after '--')")
    if opts.out.exists() and not opts.force:
        raise HilsimError(f"{opts.out}: already exists (use --force to replace it)")
    tools = detect_tools()
    order, reason = choose_backend(opts.backend, opts.command, tools)
    if sel is not None and not tools["ncu"].usable:
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
        path, manifest = _profile(opts, sel, tools, order, reason, device, env, raw)
    finally:
        raw_ctx.cleanup()
    return ProfileResult(path, manifest, backend_named(manifest["agent"]["backend"]))


def _profile(
    opts: ProfileOptions,
    sel: ncu_mod.DetailedSelection | None,
    tools: dict[str, Tool],
    order: list[str],
    reason: str,
    device: dict[str, Any],
    env: dict[str, str],
    raw: Path,
) -> tuple[Path, dict[str, Any]]:
    overhead: dict[str, Any] | None = None
    bare: RunResult | None = None
    warm_up: RunResult | None = None
    if opts.measure_overhead:
        # the first run of a process pays for cold caches (module loads, kernel caches,
        # page cache): the ratio is taken against a second, warm, bare run
        say("overhead: running the workload twice without a profiler (warm-up, then bare)")
        argv = workload_argv(opts.command, opts.nvtx_modules)
        warm_up = run_workload(argv, opts.timeout_s, env=env, grace_s=opts.grace_s)
        bare = run_workload(argv, opts.timeout_s, env=env, grace_s=opts.grace_s)
    light: LightResult | None = None
    fallbacks: list[str] = []
    chosen = order[0]
    for index, name in enumerate(order):
        chosen = name
        say(f"light backend: {name} ({reason if index == 0 else 'fallback'})")
        try:
            runner = backend_named(name).run
            assert runner is not None
            light = runner(opts, tools[name], raw, env)
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
            "warm_up_wall_s": round(warm_up.wall_s, 6) if warm_up is not None else None,
            "light_wall_s": round(run.wall_s, 6),
            "ratio": round(run.wall_s / bare.wall_s, 4) if bare.wall_s > 0 else None,
            "bare_exit_code": bare.exit_code,
            "note": "bare: the second of two runs without a profiler (the first warms the "
                    "caches); light wall time includes the profiler's start-up and report "
                    "writing",
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
    if sel is not None:
        if not complete:
            profilers.append(
                {"name": "nsight-compute", "level": "detailed", "skipped": "light pass incomplete"}
            )
        else:
            try:
                info, metrics = _detailed(opts, sel, tools["ncu"], raw, env, bundle)
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
    return path, bundle.manifest  # as written: n_launches and the files' digests


__all__ = ["ProfileResult", "choose_backend", "profile_workload"]
