"""Sampled simulation: only a plan's launches simulated, their state warmed, the full run
estimated with its interval.

:func:`simulate_plan` runs only a plan's sampled launches (the program's launch-list
option, run by :class:`hilsim.simmodel.gpgpusim.listrun.ListRunner`) with their state
warmed, and keeps the logs where ``hilsim validate --sim`` reads them; the kernels carry
their full-run launch ids (``hilsim-launch K`` marks), so the logs are placed by id, not
by position. This is the "simulate only the representative kernels" step of STEM
(section 3) and PKA (section 3.1), with the warm-up both leave open (STEM section 5.2).
This module holds the statistics (which runs, which warm-up each sample keeps, the
placement between warm and cold, the estimate and its interval); the simulator package
runs the lists and turns a warm-up into its options
(:mod:`hilsim.simmodel.gpgpusim.warmup`).

**Warm-up** (:class:`hilsim.core.plan.Warmup`). The *warm run* simulates the samples
after their warm-up (the ``K`` launches before each, cycles discarded; the L2 filled by
the host's copies); with ``cold-bound`` the samples the profile shows colder than their
warm run are simulated once more without warm-up (*cold run*) and each is placed between
the two by its profiled DRAM reads (:mod:`hilsim.analyzer.warmstate`), which also gives the
state term of the estimate's 95% interval. ``auto`` runs the samples the warm run
leaves colder than the profile again with ``K`` = 1, 2, 4, 8 launches before each (only
those samples: the cost follows the need), while they hold more than
:data:`AUTO_COLD_SHARE` of the sampled cycles, the previous ``K`` helped, and (past the first
step, always tried) the warm-up stays within ``budget`` times the samples' own profiled
time.
Every simulated cycle (warm-up launches, cold run, runs ``auto`` tried and dropped) counts
in the reported simulated time.

**Output folder.** ``OUT`` gets ``sampled.log`` (the warm run, what ``validate --sim OUT``
reads), ``warm-precedingK.log`` (``auto``'s longer warm-ups, when it ran any),
``cold.log`` (the cold run, when there was one), ``samples.csv`` (per sample: warm, cold
and placed cycles and counters, the warm-up kept, the state variance), ``plan.warmup.json`` (the
plan with the warm-up it was simulated with), ``launches.txt`` (the warm run's launch
list) and ``simulate.json`` (the :class:`SimulationResult` :func:`simulate_plan`
returns), and the warm run's
visualizer log when the card writes one (``hilsim pkp --gpgpusim-log OUT``). The simulator
runs in a
temporary folder outside ``OUT``; the outputs are written into a temporary folder beside
``OUT`` that replaces it in one exchange, under a lock on ``OUT``: ``OUT`` always holds one
whole simulation (a previous one is replaced only with ``force``), other files in it are
kept, and a second ``simulate -o OUT`` meanwhile refuses. A failed run's folder is kept
and named in the error.
"""

from __future__ import annotations

import dataclasses
import io
import json
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from hilsim.analyzer.evaluate import confidence_interval
from hilsim.analyzer.warmstate import (
    MISS_TOLERANCE_SECTORS,
    StatePlacement,
    colder_than_warm,
    dram_miss_cycles,
    place_samples,
    profiled_misses,
    warmer_than_profile,
)
from hilsim.simmodel.gpgpusim.build import find_build
from hilsim.simmodel.gpgpusim.cards import card_config
from hilsim.simmodel.gpgpusim.datacheck import (
    ProgramOutputs,
    digests_from_record,
    find_divergences,
)
from hilsim.simmodel.gpgpusim.listrun import (
    CPU_FACTOR,
    CPU_PARTS,
    FAST_FORWARD,
    LAUNCH_LIST,
    ListRun,
    ListRunner,
)
from hilsim.simmodel.gpgpusim.logprofile import core_clock_mhz, scan_log
from hilsim.simmodel.gpgpusim.visualizer import VISUALIZER_GLOB
from hilsim.simmodel.gpgpusim.warmup import cold_options, warm_options

from hilsim.core.bundle import Bundle
from hilsim.core.errors import HilsimError
from hilsim.core.files import atomic_directory, output_lock, write_text_atomic
from hilsim.core.plan import (
    Plan,
    Warmup,
    load_plan,
    parse_warmup,
    warmup_for,
    warmup_launches,
)
from hilsim.formats.read import load_profile

SAMPLED_LOG = "sampled.log"
COLD_LOG = "cold.log"
SAMPLES_CSV = "samples.csv"
PLAN_JSON = "plan.warmup.json"
SUMMARY_JSON = "simulate.json"
#: the warm runs ``auto`` added for samples left colder than the profile
EXTRA_WARM_LOG = "warm-preceding{k}.log"
#: the logs of a chunked run's second, third, ... process (the first is the run's log)
PART_LOG = "{run}.part{k}.log"
#: files simulate_plan writes into its output folder (and replaces only with force)
OUTPUT_FILES = (SAMPLED_LOG, COLD_LOG, SAMPLES_CSV, PLAN_JSON, LAUNCH_LIST, SUMMARY_JSON)
#: ``auto``: the warm-up lengths tried, in order
AUTO_PRECEDING = (1, 2, 4, 8)
#: ``auto``: raise K while the samples the warm run leaves colder than the profile hold
#: more than this share of the weighted sampled cycles
AUTO_COLD_SHARE = 0.02
#: warm-up cycles allowed, as a multiple of the samples' own cycles (``auto``)
WARMUP_BUDGET = 1.0
#: samples run cold for the ratio pilot when the profile has no DRAM reads or L2 misses
PILOT_SAMPLES = 8


def resolve_warmup(warmup: Warmup | str | None, plan: Plan) -> Warmup:
    """The warm-up to simulate with: the one given (:func:`hilsim.core.plan.warmup_for`),
    else the plan's, else ``auto``."""
    return warmup_for(plan, warmup) or parse_warmup("auto")


def _profile_bundle(profile: Path | Bundle | None, plan: Plan,
                    plan_path: Path) -> Bundle | None:
    """The profile the plan was made on: given, else the plan's source path if it exists."""
    if isinstance(profile, Bundle):
        return profile
    if profile is not None:
        return load_profile(profile)
    source = (plan.source or {}).get("path")
    if source:
        for candidate in (Path(source), plan_path.parent / source):
            if candidate.exists():
                return load_profile(candidate)
    return None


def _weighted_share(mask: np.ndarray, weights: np.ndarray, cycles: np.ndarray) -> float:
    total = float(np.dot(weights, cycles))
    return float(np.dot(weights[mask], cycles[mask]) / total) if total > 0 else 0.0


def _sample_table(plan: Plan) -> pd.DataFrame:
    samples = plan.samples.sort_values("launch_id", kind="stable").reset_index(drop=True)
    return samples[["launch_id", "weight", "cluster"]]


def _check_output(out_dir: Path, force: bool) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise HilsimError(f"{out_dir}: exists and is not a folder")
    if not force and out_dir.is_dir():
        mine = [name for name in OUTPUT_FILES if (out_dir / name).exists()]
        if mine:
            raise HilsimError(f"{out_dir}: already holds a simulation ({mine[0]}; use --force "
                              "to replace it)")


def _copy_log(src: Path, dst: Path) -> None:
    tmp = dst.with_name(f".{dst.name}.tmp")
    shutil.copyfile(src, tmp)
    tmp.replace(dst)


@dataclass
class SimulationResult:
    """What ``hilsim simulate`` found: ``simulate.json`` field by field (:meth:`to_dict`),
    and the lines the command prints (:meth:`lines`).

    ``estimate_cycles`` is the plan's estimate of the full run from the placed sample
    cycles and ``interval_cycles`` its 95% interval (selection and state terms) for a
    random plan; ``simulated_cycles`` counts every simulated cycle (warm-up launches,
    cold run, the runs ``auto`` tried and dropped); the speedups are against
    ``full_cycles`` (given, else the plan's source total at the card's clock) and the
    full run's simulator CPU time when the profile records it.
    """

    plan: str
    method: str
    card: str
    overrides: dict[str, str]
    core_clock_mhz: float
    #: the warm-up simulated (:meth:`Warmup.to_dict`), the one requested and how many
    #: samples kept each ``K``
    warmup: dict[str, Any]
    #: the placement between warm and cold runs (:meth:`StatePlacement.summary`)
    state: dict[str, Any]
    runs: list[dict[str, Any]]
    launches_simulated: int
    samples: int
    launches_full: int | None
    sampled_cycles: float
    simulated_cycles: float
    full_cycles: float | None
    full_cycles_from: str | None
    cycle_fraction: float | None
    simulated_time_speedup: float | None
    estimate_cycles: float
    estimate_error: float | None
    estimate_error_signed: float | None
    interval_cycles: list[float] | None
    sim_wall_s: float
    sim_cpu_s: float
    full_run_cpu_s: float | None
    cpu_time_speedup: float | None
    #: the warm run's log and launch list (in the output folder once written)
    log: str
    launch_list: str
    #: ``fast-forward`` (every unlisted launch run functionally) or ``skip``
    launch_mode: str = FAST_FORWARD
    #: every run's CPU seconds by part: host, fast_forward, warmup, sample
    sim_cpu_parts: dict[str, float] = dataclasses.field(default_factory=dict)
    #: the data check (:func:`data_check`): reference, copies compared, divergences
    data_check: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: what the user should know about this simulation (card vs profile, ...)
    notes: list[str] = dataclasses.field(default_factory=list)
    #: the parallelism asked for: local worker processes, or a Dask scheduler's address
    workers: int = 1
    scheduler: str | None = None
    #: the simulator processes every run used (1 each without chunks)
    processes: int = 1

    def to_dict(self) -> dict[str, Any]:
        """``simulate.json``'s object."""
        return dataclasses.asdict(self)

    def lines(self) -> list[str]:
        """What ``hilsim simulate`` prints: the estimate, the simulated time (every run's
        cycles, warm-up included) and the simulator's CPU time, each speedup named."""
        w, state = self.warmup, self.state
        lines = [f"warm-up {w['label']}"
                 + (f" (chosen by auto from {w['requested']})" if w["requested"] != w["label"]
                    else "")
                 + f"; {state['bracketed']} of {state['samples']} samples also run cold"
                 + (f", placed by the profile's {state['profile_metric']}"
                    if state["placement"] == "profile" else "")
                 + (", placed at the midpoint by a pilot's cold/warm ratios"
                    if state["placement"] == "pilot" else "")]
        est = (f"estimate {self.estimate_cycles:,.0f} cycles (placed "
               f"{100 * (state['state_correction'] or 0.0):+.2f}% from the warm runs' "
               "cycles between warm and cold")
        if self.interval_cycles:
            lo, hi = self.interval_cycles
            est += f"; 95% interval [{lo:,.0f}, {hi:,.0f}], selection and state"
        est += ")"
        if self.full_cycles:
            whose = {"profile": "the profile's total at this card's clock",
                     "profile cycles": "the profile's cycles"}.get(self.full_cycles_from or "",
                                                                   "the full run")
            est += (f" vs {self.full_cycles:,.0f}, {whose} "
                    f"({100 * (self.estimate_error_signed or 0.0):+.2f}%)")
        lines.append(est)
        line = (f"simulated {self.launches_simulated:,} launches in {len(self.runs)} run(s) "
                f"for {self.samples:,} samples: {self.simulated_cycles:,.0f} simulated "
                "cycles, warm-up and cold runs included")
        if self.full_cycles:
            line += (f" ({100 * (self.cycle_fraction or 0.0):.2f}% of "
                     f"{self.full_cycles:,.0f}: simulated-time speedup "
                     f"{self.simulated_time_speedup or 0.0:.1f}x)")
        lines.append(line)
        cpu = f"simulator: {self.sim_cpu_s:.1f} CPU s, {self.sim_wall_s:.1f} s wall"
        parts = self.sim_cpu_parts
        if parts:
            cpu += (f" (fast-forward {parts.get('fast_forward', 0.0):.1f}, warm-up "
                    f"{parts.get('warmup', 0.0):.1f}, samples {parts.get('sample', 0.0):.1f}, "
                    f"host {parts.get('host', 0.0):.1f})")
        if self.cpu_time_speedup:
            cpu += (f" (the full run took {self.full_run_cpu_s or 0.0:.1f} CPU s: CPU-time "
                    f"speedup {self.cpu_time_speedup:.1f}x)")
        if self.processes > len(self.runs):
            where = f"Dask at {self.scheduler}" if self.scheduler else \
                f"{self.workers} local workers"
            cpu += f"; {self.processes} simulator processes on {where}"
            split = ["/".join(str(k) for k in r["chunks"]["samples_per_chunk"])
                     + f" ({sum(r['chunks'].get('carried_per_chunk', []))} carried)"
                     for r in self.runs if r.get("chunks")]
            cpu += f" (samples per chunk: {', '.join(split)})" if split else ""
        lines.append(cpu + f"; log {self.log}")
        check = self.data_check
        if check.get("reference") and check.get("copies"):
            lines.append(f"data check: the copies to the host of {check['runs']} simulator "
                         f"process(es) equal the {check['reference']}'s ({check['copies']} "
                         "copies)")
        elif check.get("reference"):
            lines.append(f"data check: {check['launches']} simulated launches executed the "
                         "instructions the profile counts")
        elif check.get("why"):
            lines.append(f"data check: not made ({check['why']})")
        lines += [f"note: {note}" for note in [*(state.get("notes") or []), *self.notes]]
        return lines


def simulate_plan(
    plan_path: Path,
    command: Sequence[str],
    card: str,
    out_dir: Path,
    *,
    options: Mapping[str, str] | None = None,
    timeout_s: float = 4 * 3600,
    full_cycles: float | None = None,
    warmup: Warmup | str | None = None,
    profile: Path | Bundle | None = None,
    force: bool = False,
    progress: bool = True,
    budget: float = WARMUP_BUDGET,
    launch_mode: str = FAST_FORWARD,
    workers: int = 1,
    scheduler: str | None = None,
    cpu_factor: float = CPU_FACTOR,
    run_to_end: bool = False,
) -> SimulationResult:
    """Simulate the plan's samples on ``card`` with their state warmed; write ``out_dir``.

    ``warmup``: a :class:`Warmup` or its text (``none``, ``l2-fill``, ``preceding:K``,
    ``bracket``, ``auto``, ...); default the plan's recorded warm-up, else ``auto``.
    ``profile``: the bundle the plan was made on (its DRAM reads place each sample between
    its warm and cold run; default the plan's source path when it exists). The saving is
    reported against ``full_cycles`` when given, else against the plan's source total
    (``total_duration_ns`` at the card's core clock, exact when the plan was made on a
    bundle of this card). ``launch_mode``: ``fast-forward`` (any program: every launch
    outside the lists runs functionally, the program's copies to the host checked against
    the profile's or the first run's, :func:`data_check`) or ``skip`` (the program runs only
    the listed launches itself). ``workers`` > 1 (local processes) or ``scheduler`` (a Dask
    scheduler's address) run each launch list as chunks of consecutive samples in parallel
    processes, as many as keep the CPU time within ``cpu_factor`` x one process's
    (:mod:`hilsim.simmodel.gpgpusim.parallel`). A fast-forwarded run stops once its last
    listed launch is simulated (the program's tail costs CPU and measures nothing; the
    data check covers the copies made before its last listed launch) unless ``run_to_end``.
    Returns what ``simulate.json`` holds (:class:`SimulationResult`).
    """
    plan = load_plan(plan_path)
    _check_output(out_dir, force)
    spec = resolve_warmup(warmup, plan)
    samples = _sample_table(plan)
    ids = samples["launch_id"].to_numpy(np.int64)
    weights = samples["weight"].to_numpy(np.float64)
    if len(ids) == 0:
        raise HilsimError(f"{plan_path}: the plan has no samples")
    bundle = _profile_bundle(profile, plan, plan_path)
    names = bundle.launches["name"].astype(str).to_numpy() if bundle is not None else None
    counts_dram = card_counts_dram(card, options or {})
    found = (profiled_misses(bundle, ids, card_counts_dram=counts_dram)
             if bundle is not None else None)
    metric, miss_column, misses = found if found is not None else (None, "l2_misses", None)
    runner = ListRunner(command, card, options or {}, timeout_s, names, progress,
                        launch_mode, workers, scheduler, cpu_factor, run_to_end,
                        launch_costs(bundle))
    try:
        warm = warm_run(runner, spec, ids, weights, misses, miss_column, bundle, budget)
        cold = None
        if spec.cold_bound:
            cold = _cold_run(runner, ids, weights, warm, misses, miss_column)
        placement = place_samples(samples, warm.stats, None if cold is None
                                  else cold.samples(), misses, metric, miss_column,
                                  dram_miss_cycles(warm.base.run.text))
        placement.table.insert(4, "preceding", warm.preceding)
        k = int(warm.preceding.max())
        result = _result(plan, plan_path, spec, k, runner, warm, cold, placement,
                         full_cycles, bundle)
        result.data_check = data_check(runner, bundle)
        result.workers, result.scheduler = workers, scheduler
        result.processes = sum(len(r.logs) or 1 for r in runner.runs)
        result.notes = card_notes(bundle, card, runner.runs[0].run.overrides)
        if not counts_dram and metric is not None:
            result.notes.append(
                f"the card's simple DRAM model counts no DRAM reads: each sample's state "
                f"is judged by its L2 misses ({metric}) against the profile's")
        _write_outputs(out_dir, plan, spec, k, warm, cold, placement, result, force)
    except HilsimError:
        runner.cleanup(keep_logs=True)  # a failed run's log stays: the error names it
        raise
    except BaseException:
        runner.cleanup()
        raise
    runner.cleanup()
    return result


@dataclass
class WarmRuns:
    """The warm run of every sample, and the warm-up each sample kept.

    ``base`` ran every sample with the spec's ``K``; ``auto`` re-ran the samples it left
    colder than the profile with longer warm-ups (``extra``); ``stats`` holds, per sample
    in launch order, the statistics of the run each sample kept, ``preceding`` its ``K``.
    """

    base: ListRun
    extra: list[ListRun]
    stats: pd.DataFrame
    preceding: np.ndarray


def warm_run(runner: ListRunner, spec: Warmup, ids: np.ndarray, weights: np.ndarray,
             misses: np.ndarray | None, miss_column: str, bundle: Bundle | None,
             budget: float) -> WarmRuns:
    """The warm run with the spec's K. ``auto``: the samples it leaves colder than the
    profile (:func:`hilsim.analyzer.warmstate.warmer_than_profile`) run again with K = 1, 2,
    4, 8 launches before each, while they hold more than :data:`AUTO_COLD_SHARE` of the
    weighted sampled cycles, the previous K brought at least one of them closer to its
    profiled misses, and (past the first step, always tried) the warm-up stays within
    ``budget`` x the samples' own profiled time; each sample keeps the run whose misses are
    nearest its profile's."""
    k = spec.preceding
    every, is_sample = warmup_launches(ids, k)
    base = runner.run("warm", every, is_sample, replace(spec, preceding=k, auto=False).label,
                      warm_options(spec), k)
    stats = base.samples().set_index("launch_id").loc[ids].reset_index()
    chosen = np.full(len(ids), k, dtype=np.int64)
    extra: list[ListRun] = []
    if not spec.auto or misses is None:
        return WarmRuns(base, extra, stats, chosen)
    own = _profiled_ns(bundle, ids)
    spent = 0.0
    for candidate in AUTO_PRECEDING:
        if candidate <= k:
            continue
        m_warm = stats[miss_column].to_numpy(np.float64)
        too_cold = warmer_than_profile(misses, m_warm)
        if not too_cold.any() or _weighted_share(
                too_cold, weights, stats["cycles"].to_numpy(np.float64)) <= AUTO_COLD_SHARE:
            break
        sub = ids[too_cold]
        every, is_sample = warmup_launches(sub, candidate)
        cost = _profiled_ns(bundle, every[~is_sample])
        # the first step is always tried: with a sample or two per cluster, one launch of
        # warm-up each already costs about the samples' own time (Rodinia's srad_v2: two
        # samples left cold at K = 0, +8.7%, where K = 1 gave -2.8%)
        if own is None or cost is None or (extra and spent + cost > budget * own):
            break
        spent += cost
        trial = runner.run("warm", every, is_sample,
                           replace(spec, preceding=candidate, auto=False).label,
                           warm_options(spec), candidate)
        extra.append(trial)
        got = trial.samples().set_index("launch_id").loc[sub].reset_index()
        rows = np.flatnonzero(too_cold)
        before = np.abs(m_warm[rows] - misses[rows])
        after = np.abs(got[miss_column].to_numpy(np.float64) - misses[rows])
        better = after < before - MISS_TOLERANCE_SECTORS
        if not better.any():
            break
        keep = rows[better]
        stats = stats.copy()
        for column in stats.columns:
            if column in got.columns:
                stats.loc[keep, column] = got[column].to_numpy()[better]
        chosen[keep] = candidate
    return WarmRuns(base, extra, stats, chosen)


#: the profile's per-launch warp instructions: what a launch costs the simulator
WARP_INSTRUCTIONS_METRIC = "smsp__inst_executed.sum"


def launch_costs(bundle: Bundle | None) -> np.ndarray | None:
    """Each launch's relative cost to simulate, where parallel chunks are cut
    (:mod:`hilsim.simmodel.gpgpusim.parallel`): its warp instructions where the profile
    counts them for every launch, else its profiled duration; None without a profile.
    GPGPU-Sim's CPU follows the instructions it executes more closely than the launch's
    time, above all when the profile comes from another SM count: on the shipped
    transformer example (profiled at 80 SMs, simulated at 4) four chunks' shares of the
    CPU were 0.21 / 0.34 / 0.28 / 0.17, of the warp instructions 0.23 / 0.38 / 0.26 / 0.13,
    of the durations 0.27 / 0.25 / 0.27 / 0.21."""
    if bundle is None:
        return None
    metrics = bundle.metrics
    if metrics is not None and WARP_INSTRUCTIONS_METRIC in metrics.columns:
        counted = metrics.dropna(subset=[WARP_INSTRUCTIONS_METRIC])
        ids = counted["launch_id"].to_numpy(np.int64)
        if len(np.unique(ids)) == bundle.n_launches and \
                (len(ids) == 0 or (ids.min() >= 0 and ids.max() < bundle.n_launches)):
            costs = np.full(bundle.n_launches, np.nan)
            costs[ids] = counted[WARP_INSTRUCTIONS_METRIC].to_numpy(np.float64)
            return costs
    return bundle.launches["duration_ns"].to_numpy(np.float64)


def _light_profiler(bundle: Bundle | None) -> dict[str, Any]:
    """The manifest entry of the profile's light profiler (who timed every launch: the
    simulated card's record holds its card, options, CPU time and copy digests); empty
    without a profile."""
    profilers = bundle.manifest.get("profilers") if bundle is not None else None
    first = profilers[0] if isinstance(profilers, list) and profilers else {}
    return first if isinstance(first, dict) else {}


def data_check(runner: ListRunner, bundle: Bundle | None) -> dict[str, Any]:
    """Did every fast-forwarded run compute what the full run computed? Each run's copies
    to the host (their digests, :mod:`hilsim.simmodel.gpgpusim.datacheck`) and launch count
    against the profile's when it was made on the simulator (``copy_digests`` in its
    manifest), else against the first run's. A difference is a one-line error naming the
    run and the first copy that differs (the launches between the last equal copy and it
    computed other data: a kernel whose result depends on timing, a race); the runs' logs
    are kept. The skip path makes only the listed launches: nothing to compare."""
    if runner.mode != FAST_FORWARD:
        return _skip_path_check(runner, bundle)
    processes = [(f"{r.name} run ({r.warmup})" + (f", chunk {i + 1}" if len(r.outputs) > 1
                                                    else ""), out)
                 for r in runner.runs for i, out in enumerate(r.outputs)]
    reference, label = None, ""
    prof = _light_profiler(bundle)
    if prof.get("copy_digests"):
        digests = digests_from_record(prof["copy_digests"], "the profile's manifest")
        reference = ProgramOutputs(digests, (), {}, bundle.n_launches if bundle else 0)
        label = "profiled full run"
    elif len(processes) > 1:
        # a process that ran to the program's end, else the one that went farthest
        best = max(range(len(processes)), key=lambda i: (processes[i][1].complete,
                                                         len(processes[i][1].digests)))
        label, reference = processes.pop(best)
    if reference is None:
        return {"reference": None, "why": "one run and a profile without copy digests"}
    if not reference.digests:
        return {"reference": None, "why": f"the {label} made no copies to the host"}
    for name, outputs in processes:
        found = find_divergences(reference, outputs, (label, name))
        if found:
            raise HilsimError(
                "data check: " + "; ".join(found) + ": the sampled simulation computed "
                f"other data than the full run (logs kept in {runner.work})")
    return {"reference": label, "runs": len(processes), "copies": len(reference.digests),
            "launches": reference.launches}


#: the profile's per-launch instruction count the skip path's check compares
INSTRUCTIONS_METRIC = "smsp__thread_inst_executed.sum"


def _skip_path_check(runner: ListRunner, bundle: Bundle | None) -> dict[str, Any]:
    """The skip path's rule (skipped launches change no later launch's data or branches),
    checked where it can be: each simulated launch's thread instructions against the
    profile's, when the profile was made on the simulator (the same PTX counted the same
    way; silicon counts SASS). A difference is a one-line error naming the launch."""
    metrics = bundle.metrics if bundle is not None else None
    if (_light_profiler(bundle).get("backend") != "gpgpusim" or metrics is None
            or INSTRUCTIONS_METRIC not in metrics.columns):
        return {"reference": None, "why": "the skip path runs only the listed launches, and "
                "the profile has no simulator instruction counts to check them against"}
    profiled = metrics.set_index("launch_id")[INSTRUCTIONS_METRIC]
    checked = 0
    for run in runner.runs:
        got = run.stats.drop_duplicates("launch_id").set_index("launch_id")["instructions"]
        common = got.index.intersection(profiled.index)
        differ = common[got.loc[common].to_numpy() != profiled.loc[common].to_numpy()]
        if len(differ):
            k = int(differ[0])
            raise HilsimError(
                f"data check: launch {k} executed {got.loc[k]:,.0f} thread instructions in "
                f"the {run.name} run ({run.warmup}) but {profiled.loc[k]:,.0f} in the profile "
                f"({len(differ)} of {len(common)} launches differ): skipping launches changed "
                "what later launches compute; run without --skip-launches (fast-forward) "
                f"(logs kept in {runner.work})")
        checked += len(common)
    return {"reference": "profile (instructions per launch)", "runs": len(runner.runs),
            "copies": 0, "launches": checked}


def card_counts_dram(card: str, options: Mapping[str, str]) -> bool:
    """Whether ``card`` (with ``options``) counts DRAM reads in its log
    (:attr:`hilsim.simmodel.gpgpusim.cards.CardConfig.counts_dram_reads`). A card that
    cannot be read here is taken to count them: its runs then say what is wrong with it."""
    try:
        return card_config(card, find_build(), options).counts_dram_reads
    except HilsimError:
        return True


def card_notes(bundle: Bundle | None, card: str, overrides: Mapping[str, str]) -> list[str]:
    """A warning when the profile was made on a simulated card other than this one (card
    or options): its durations and counters then describe another machine, and the
    estimate's error against them is the two cards' difference as much as sampling's.
    The warm-up's own option is not compared (simulate sets it per run)."""
    prof = _light_profiler(bundle)
    if prof.get("backend") != "gpgpusim":
        return []
    skip = set(warm_options(parse_warmup("none")))
    theirs = {k: str(v) for k, v in (prof.get("overrides") or {}).items() if k not in skip}
    mine = {k: str(v) for k, v in overrides.items() if k not in skip}
    their_card = str(prof.get("card") or "")
    my_card = Path(card).parent.name if card.endswith(".config") else card
    if their_card == my_card and theirs == mine:
        return []
    differ = sorted(k for k in set(theirs) | set(mine) if theirs.get(k) != mine.get(k))
    what = [f"card {their_card} vs {my_card}"] if their_card != my_card else []
    what += [f"{k} {theirs.get(k, '(card)')} vs {mine.get(k, '(card)')}" for k in differ[:4]]
    return [f"the profile was made on another simulated card ({'; '.join(what)}): its "
            "figures describe that card, so the error against it mixes the cards' "
            "difference with the sampling error (give the same -O options to compare "
            "sampling alone)"]


#: the per-launch cycles a simulated profile carries (what ``validate`` compares against)
CYCLES_METRIC = "gpu__cycles_elapsed.max"


def _profiled_cycles(bundle: Bundle | None) -> float | None:
    """The full run's cycles as the profile counted them, when it was made on the
    simulator and counts every launch (durations x clock would round each launch)."""
    if bundle is None or bundle.metrics is None or CYCLES_METRIC not in bundle.metrics:
        return None
    if _light_profiler(bundle).get("backend") != "gpgpusim":
        return None
    cycles = bundle.metrics[CYCLES_METRIC].to_numpy(np.float64)
    if len(cycles) != bundle.n_launches or not np.isfinite(cycles).all():
        return None
    return float(cycles.sum())


def _profiled_ns(bundle: Bundle | None, launch_ids: np.ndarray) -> float | None:
    """Profiled duration of these launches (the cost unit of ``auto``'s budget)."""
    if bundle is None or len(launch_ids) == 0:
        return 0.0 if bundle is not None else None
    durations = bundle.launches["duration_ns"].to_numpy(np.float64)
    if int(np.max(launch_ids)) >= len(durations):
        return None
    return float(durations[launch_ids].sum())


def _cold_run(runner: ListRunner, ids: np.ndarray, weights: np.ndarray, warm: WarmRuns,
              misses: np.ndarray | None, miss_column: str) -> ListRun | None:
    """The cold run of the samples the profile shows colder than their warm run (or of a
    pilot, without profiled misses); None when no sample needs it."""
    stats = warm.stats
    if misses is not None:
        chosen = colder_than_warm(misses, stats[miss_column].to_numpy(np.float64))
    else:
        cycles = stats["cycles"].to_numpy(np.float64)
        order = np.argsort(-(weights * cycles), kind="stable")[:PILOT_SAMPLES]
        chosen = np.zeros(len(ids), dtype=bool)
        chosen[order] = True
    if not chosen.any():
        return None
    cold_ids = ids[chosen]
    return runner.run("cold", cold_ids, np.ones(len(cold_ids), dtype=bool), "none",
                      cold_options())


def _result(plan: Plan, plan_path: Path, spec: Warmup, k: int, runner: ListRunner,
            warm: WarmRuns, cold: ListRun | None, placement: StatePlacement,
            full_cycles: float | None, bundle: Bundle | None) -> SimulationResult:
    run = warm.base.run
    clock = core_clock_mhz(scan_log(run.text, str(run.log_path))["options"],
                           str(run.log_path), None)
    source = plan.source or {}
    n_full = int(source.get("n_launches") or 0)
    full_from = "given" if full_cycles is not None else None
    if full_cycles is None:
        full_cycles = _profiled_cycles(bundle)
        full_from = "profile cycles" if full_cycles is not None else None
    if full_cycles is None and source.get("total_duration_ns"):
        full_cycles = float(source["total_duration_ns"]) * clock / 1000.0
        full_from = "profile"
    simulated = float(sum(r.cycles for r in runner.runs))
    cpu = float(sum(r.run.cpu_s for r in runner.runs))
    estimate = placement.estimate()
    n = bundle.n_launches if bundle is not None else n_full
    per_launch = np.zeros(max(n, int(placement.table["launch_id"].max()) + 1))
    per_launch[placement.table["launch_id"].to_numpy(np.int64)] = placement.table[
        "cycles"].to_numpy(np.float64)
    interval = confidence_interval(plan, per_launch, extra_variance=placement.state_variance)
    full_cpu = _light_profiler(bundle).get("sim_cpu_s")
    chosen = replace(spec, preceding=k, auto=False)
    return SimulationResult(
        plan=str(plan_path),
        method=plan.method,
        card=run.card,
        overrides=run.overrides,
        core_clock_mhz=clock,
        warmup={**chosen.to_dict(), "requested": spec.label,
                "samples_by_preceding": {str(int(v)): int(n) for v, n in zip(
                    *np.unique(warm.preceding, return_counts=True), strict=True)}},
        state=placement.summary(),
        runs=[r.record() for r in runner.runs],
        launches_simulated=int(sum(len(r.launch_ids) for r in runner.runs)),
        samples=int(len(placement.table)),
        launches_full=n_full or None,
        sampled_cycles=float(warm.stats["cycles"].sum()),
        simulated_cycles=simulated,
        full_cycles=full_cycles,
        full_cycles_from=full_from,
        cycle_fraction=(simulated / full_cycles) if full_cycles else None,
        simulated_time_speedup=(full_cycles / simulated) if full_cycles and simulated
        else None,
        estimate_cycles=estimate,
        estimate_error=abs(estimate - full_cycles) / full_cycles if full_cycles else None,
        estimate_error_signed=(estimate - full_cycles) / full_cycles if full_cycles
        else None,
        interval_cycles=list(interval) if interval else None,
        sim_wall_s=round(float(sum(r.run.wall_s for r in runner.runs)), 3),
        sim_cpu_s=round(cpu, 3),
        full_run_cpu_s=full_cpu,
        cpu_time_speedup=(float(full_cpu) / cpu) if full_cpu and cpu else None,
        log=SAMPLED_LOG,
        launch_list=LAUNCH_LIST,
        launch_mode=runner.mode,
        sim_cpu_parts={part: round(sum((r.cpu_parts or {}).get(part, 0.0)
                                       for r in runner.runs), 3)
                       for part in CPU_PARTS},
    )


def _is_simulation_file(name: str) -> bool:
    """A file a simulation writes into ``OUT`` (module doc)."""
    return (name in OUTPUT_FILES or Path(name).match(EXTRA_WARM_LOG.format(k="*"))
            or Path(name).match(PART_LOG.format(run="*", k="*"))
            or Path(name).match(VISUALIZER_GLOB))


def _carry_other_files(out_dir: Path, tmp: Path) -> None:
    """The entries of ``out_dir`` that are not a simulation's, into the folder ``tmp``
    that replaces it (hard links where the file system allows, else copies)."""
    if not out_dir.is_dir():
        return
    for item in out_dir.iterdir():
        if _is_simulation_file(item.name):
            continue
        if item.is_dir() and not item.is_symlink():
            shutil.copytree(item, tmp / item.name, symlinks=True)
        elif item.is_symlink():
            (tmp / item.name).symlink_to(item.readlink())
        else:
            try:
                (tmp / item.name).hardlink_to(item)
            except OSError:
                shutil.copy2(item, tmp / item.name)


def _write_outputs(out_dir: Path, plan: Plan, spec: Warmup, k: int, warm: WarmRuns,
                   cold: ListRun | None, placement: StatePlacement,
                   result: SimulationResult, force: bool = False) -> None:
    """Every output file, written into a temporary folder beside ``out_dir`` that then
    replaces it in one exchange (``hilsim.core.files.atomic_directory``): at every instant
    ``out_dir`` holds one whole simulation, the old or the new, whatever kills the run.
    ``out_dir`` is locked meanwhile (``output_lock``: a concurrent ``simulate -o`` into it
    refuses in one line), and checked again under the lock, so a simulation written there
    since :func:`_check_output` is replaced only with ``force``. Other files in
    ``out_dir`` are carried over."""
    with output_lock(out_dir, "hilsim simulate"):
        _check_output(out_dir, force)
        result.log = str(out_dir / SAMPLED_LOG)
        result.launch_list = str((out_dir / LAUNCH_LIST).resolve())
        with atomic_directory(out_dir, overwrite=True) as tmp:
            _carry_other_files(out_dir, tmp)
            _copy_log(warm.base.run.log_path, tmp / SAMPLED_LOG)
            named = [(warm.base, "sampled"), (cold, "cold"),
                     *((run, f"warm-preceding{run.preceding}") for run in warm.extra)]
            for run, name in named:  # a chunked run's other processes' logs
                for part, log in enumerate(run.logs[1:] if run is not None else (), start=2):
                    _copy_log(log, tmp / PART_LOG.format(run=name, k=part))
            for run in warm.extra:
                _copy_log(run.run.log_path, tmp / EXTRA_WARM_LOG.format(k=run.preceding))
            if cold is not None:
                _copy_log(cold.run.log_path, tmp / COLD_LOG)
            # the warm run's visualizer log (with -O -visualizer_enabled=1), for hilsim pkp
            for found in sorted(warm.base.run.run_dir.glob(VISUALIZER_GLOB)):
                _copy_log(found, tmp / found.name)
            write_text_atomic(tmp / LAUNCH_LIST,
                              "\n".join(str(int(i)) for i in warm.base.launch_ids) + "\n")
            buffer = io.StringIO()
            placement.table.to_csv(buffer, index=False)
            write_text_atomic(tmp / SAMPLES_CSV, buffer.getvalue())
            recorded = replace(plan, warmup=replace(spec, preceding=k, auto=False))
            recorded.save(tmp / PLAN_JSON)
            write_text_atomic(tmp / SUMMARY_JSON,
                              json.dumps(result.to_dict(), indent=2) + "\n")


def read_placement(folder: Path) -> pd.DataFrame | None:
    """The per-sample table ``simulate`` wrote in ``folder`` (``samples.csv``), or None."""
    path = Path(folder) / SAMPLES_CSV
    if not Path(folder).is_dir() or not path.exists():
        return None
    try:
        table = pd.read_csv(path)
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise HilsimError(f"{path}: unreadable ({exc})") from None
    for column in ("launch_id", "weight", "cycles", "state_variance"):
        if column not in table.columns:
            raise HilsimError(f"{path}: missing column {column!r} (not written by "
                              "`hilsim simulate`)")
    return table


__all__ = [
    "AUTO_COLD_SHARE",
    "AUTO_PRECEDING",
    "OUTPUT_FILES",
    "SimulationResult",
    "WarmRuns",
    "read_placement",
    "resolve_warmup",
    "simulate_plan",
    "warm_run",
]
