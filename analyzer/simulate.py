"""The simulated card as profiler and as sampled simulator.

* :func:`profile_on_card`: run a CUDA program fully on a GPGPU-Sim card and write a normal
  profile bundle from its log (:mod:`hilsim.analyzer.importers.gpgpusim_log`): what
  ``hilsim agent profile --backend gpgpusim`` does.
* :func:`simulate_plan`: run only a plan's sampled launches (the program's launch-list
  option, ``--launches FILE`` by default, see ``workloads/README.md``) and keep the log
  where ``hilsim validate --sim`` reads it; the kernels carry their full-run launch ids
  (``hilsim-launch K`` marks), so the log is placed by id, not by position. This is the
  "simulate only the representative kernels" step of STEM (section 3) and PKA (section 3.1).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from hilsim.analyzer.importers.gpgpusim_log import bundle_from_gpgpusim_log
from hilsim.simmodel.export import match_sim_results
from hilsim.simmodel.gpgpusim.cards import normalize_options
from hilsim.simmodel.gpgpusim.logprofile import core_clock_mhz, scan_log
from hilsim.simmodel.gpgpusim.run import run_program
from hilsim.simmodel.simlog import parse_simlog

from hilsim.core.bundle import write_bundle
from hilsim.core.errors import HilsimError
from hilsim.core.files import write_text_atomic
from hilsim.core.plan import load_plan

#: what replaces this in the program's arguments (else ``--launches FILE`` is appended)
LAUNCHES_PLACEHOLDER = "{launches}"
SAMPLED_LOG = "sampled.log"
LAUNCH_LIST = "launches.txt"
SUMMARY_JSON = "simulate.json"


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@dataclass
class CardRun:
    """A finished run on the card: its log text, wall and CPU seconds, the card's name."""

    log_path: Path
    text: str
    wall_s: float
    cpu_s: float
    card: str
    overrides: dict[str, str]
    run_dir: Path


def run_on_card(
    command: Sequence[str],
    card: str,
    run_dir: Path,
    options: Mapping[str, str] | None = None,
    timeout_s: float = 4 * 3600,
) -> CardRun:
    """Run ``command`` on ``card`` (+ ``options`` overrides) in ``run_dir``; CPU time measured.

    CPU time is the simulator process's user + system time (``RUSAGE_CHILDREN`` around
    the run): on a shared machine it is what the run cost, whatever the wall time.
    """
    if not command:
        raise HilsimError("no program given (put it after '--')")
    overrides = normalize_options(options)
    cpu0 = _children_cpu_s()
    run = run_program(list(command), card, run_dir, options=overrides, timeout_s=timeout_s)
    cpu = _children_cpu_s() - cpu0
    name = Path(card).parent.name if card.endswith(".config") else card
    return CardRun(run.log_path, run.stdout, run.wall_s, cpu, name, overrides, run.run_dir)


def profile_on_card(
    command: Sequence[str],
    card: str,
    out: Path,
    *,
    options: Mapping[str, str] | None = None,
    timeout_s: float = 4 * 3600,
    keep_raw: Path | None = None,
    force: bool = False,
) -> tuple[Path, dict[str, Any]]:
    """Run ``command`` fully on ``card`` and write the bundle ``out``; returns (path, manifest).

    The simulator's log is kept as ``keep_raw/sim.log`` when ``keep_raw`` is given.
    """
    if out.exists() and not force:
        raise HilsimError(f"{out}: already exists (use --force to replace it)")
    tmp = tempfile.TemporaryDirectory(prefix="hilsim-gpgpusim-")
    run_dir = Path(tmp.name) if keep_raw is None else keep_raw
    try:
        run = run_on_card(command, card, run_dir, options, timeout_s)
        bundle = bundle_from_gpgpusim_log(run.log_path, card=run.card)
        manifest = bundle.manifest
        manifest["device"]["overrides"] = run.overrides
        manifest["workload"] = {
            "argv": list(command),
            "cwd": str(Path.cwd()),
            "exit_code": 0,
            "wall_s": round(run.wall_s, 3),
            "cpu_s": round(run.cpu_s, 3),
        }
        manifest["profilers"][0].update(
            backend="gpgpusim", card=run.card, overrides=run.overrides,
            sim_wall_s=round(run.wall_s, 3), sim_cpu_s=round(run.cpu_s, 3),
            regions=0 if bundle.regions is None else len(bundle.regions),
        )
        if keep_raw is not None:
            manifest["profilers"][0]["log"] = str(run.log_path)
        path = write_bundle(bundle, out, overwrite=force)
        return path, manifest
    finally:
        tmp.cleanup()


def launch_list_argv(command: Sequence[str], list_path: Path) -> list[str]:
    """The program's argv with the launch list: ``{launches}`` replaced, else appended."""
    argv = [str(a) for a in command]
    if any(LAUNCHES_PLACEHOLDER in a for a in argv):
        return [a.replace(LAUNCHES_PLACEHOLDER, str(list_path)) for a in argv]
    return [*argv, "--launches", str(list_path)]


def simulate_plan(
    plan_path: Path,
    command: Sequence[str],
    card: str,
    out_dir: Path,
    *,
    options: Mapping[str, str] | None = None,
    timeout_s: float = 4 * 3600,
    full_cycles: float | None = None,
) -> dict[str, Any]:
    """Simulate only the plan's launches on ``card``; write ``out_dir/sampled.log``.

    ``out_dir`` gets ``launches.txt`` (the sorted launch ids), ``sampled.log`` (the
    simulator's log, read by ``hilsim validate --sim OUT_DIR``), ``simulate.json`` (the
    summary returned here) and ``run/`` (the run folder). The saving is reported against
    ``full_cycles`` when given, else against the plan's source total (``total_duration_ns``
    at the card's core clock, which is exact when the plan was made on a bundle of this
    card). The summary's ``estimate_cycles`` is the plan's estimate of the full run from
    the simulation (sum of weight x simulated cycles over the plan's draws) and
    ``estimate_error`` its relative difference from ``full_cycles``.
    """
    plan = load_plan(plan_path)
    ids = np.unique(plan.samples["launch_id"].to_numpy(np.int64))
    if len(ids) == 0:
        raise HilsimError(f"{plan_path}: the plan has no samples")
    out_dir.mkdir(parents=True, exist_ok=True)
    list_path = (out_dir / LAUNCH_LIST).resolve()
    write_text_atomic(list_path, "\n".join(str(int(i)) for i in ids) + "\n")
    run_dir = out_dir / "run"
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run = run_on_card(launch_list_argv(command, list_path), card, run_dir, options, timeout_s)
    stats = parse_simlog(run.text, str(run.log_path))
    if "launch_id" not in stats.columns:
        raise HilsimError(
            f"{run.log_path}: the program printed no 'hilsim-launch K' marks: it must accept "
            "a launch list and mark each launch (see the workloads README)"
        )
    # one-line error if a launch is missing or misnamed; one row per sample with its weight
    matched = match_sim_results(plan, stats)
    log_out = out_dir / SAMPLED_LOG
    tmp_log = out_dir / f".{SAMPLED_LOG}.tmp{os.getpid()}"
    shutil.copyfile(run.log_path, tmp_log)
    os.replace(tmp_log, log_out)

    clock = core_clock_mhz(scan_log(run.text, str(run.log_path))["options"], str(run.log_path),
                            None)
    sampled_cycles = float(stats["cycles"].sum())
    # the sampled simulation's estimate of the full run: sum(weight * cycles) over the draws
    estimate_cycles = float((matched["weight"] * matched["cycles"].astype(float)).sum())
    source = plan.source or {}
    n_full = int(source.get("n_launches") or 0)
    if full_cycles is None and source.get("total_duration_ns"):
        full_cycles = float(source["total_duration_ns"]) * clock / 1000.0
    summary: dict[str, Any] = {
        "plan": str(plan_path),
        "method": plan.method,
        "card": run.card,
        "overrides": run.overrides,
        "core_clock_mhz": clock,
        "launches_simulated": int(len(stats)),
        "launches_full": n_full or None,
        "sampled_cycles": sampled_cycles,
        "full_cycles": full_cycles,
        "cycle_fraction": (sampled_cycles / full_cycles) if full_cycles else None,
        "simulated_time_speedup": (full_cycles / sampled_cycles) if full_cycles and
        sampled_cycles else None,
        "estimate_cycles": estimate_cycles,
        "estimate_error": abs(estimate_cycles - full_cycles) / full_cycles if full_cycles
        else None,
        "sim_wall_s": round(run.wall_s, 3),
        "sim_cpu_s": round(run.cpu_s, 3),
        "log": str(log_out),
        "launch_list": str(list_path),
    }
    write_text_atomic(out_dir / SUMMARY_JSON, json.dumps(summary, indent=2) + "\n")
    return summary


__all__ = ["CardRun", "launch_list_argv", "profile_on_card", "run_on_card", "simulate_plan"]
