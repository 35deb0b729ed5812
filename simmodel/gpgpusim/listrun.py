"""Programs run on a simulated card: whole (the simulator as the profiler) or a launch list
(only the listed launches in detail, each placed by its full-run id).

* :func:`run_on_card`: one run of a command on a card with option overrides, its
  simulator CPU time measured;
* :func:`profile_on_card`: a command run whole and its log written as a profile bundle
  (``hilsim agent profile --backend gpgpusim``), with the digest of every copy to the host
  in the manifest (the reference of the data check) and the program's NVTX ranges as
  regions (:mod:`hilsim.simmodel.gpgpusim.nvtxmarks`);
* :class:`ListRunner`: runs of one program on one card, each given a launch list, in one
  of two modes (:data:`LAUNCH_MODES`):

  - ``fast-forward`` (any program linked with ``-cudart shared``): the listed launches
    run in performance mode and every other launch functionally
    (:mod:`hilsim.simmodel.gpgpusim.fastforward`); a launch's id is its simulator uid
    minus one, and the program's copies to the host are kept for the data check
    (:mod:`hilsim.simmodel.gpgpusim.datacheck`);
  - ``skip`` (the optional fast path of ``workloads/README.md``): the program takes the
    list (``--launches FILE`` or ``{launches}``), makes only those launches and prints
    ``hilsim-launch K`` before each;

  both checked against the profile's kernel names (:func:`check_simulated_names`).
  ``hilsim simulate`` (:mod:`hilsim.analyzer.simulate`, STEM section 3, PKA section 3.1)
  decides which lists to run; this module only runs them.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from hilsim.simmodel.gpgpusim.cards import normalize_options
from hilsim.simmodel.gpgpusim.datacheck import (
    ProgramOutputs,
    before_launch,
    copy_digests,
    digests_record,
    program_outputs,
)
from hilsim.simmodel.gpgpusim.fastforward import (
    LIST_NAME,
    check_fast_forward,
    cpu_per_launch,
    fast_forward_env,
    stop_after_launch,
    write_launch_list,
)
from hilsim.simmodel.gpgpusim.logprofile import bundle_from_gpgpusim_log
from hilsim.simmodel.gpgpusim.nvtxmarks import NVTX_INJECTION_ENV, nvtx_environment
from hilsim.simmodel.gpgpusim.parallel import (
    CPU_FACTOR,
    FUNCTIONAL_COST,
    ChunkPlan,
    ChunkResult,
    chunk_tasks,
    dask_workers,
    launch_weights,
    plan_chunks,
    run_chunks_dask,
    run_chunks_local,
)
from hilsim.simmodel.gpgpusim.run import LOG_NAME, run_program
from hilsim.simmodel.gpgpusim.simlog import parse_simlog
from hilsim.simmodel.gpgpusim.skippath import (
    LAUNCH_LIST,
    SKIP_MARK,
    launch_list_argv,
    takes_launch_list,
)

from hilsim.core.bundle import write_bundle
from hilsim.core.console import progress_bar
from hilsim.core.errors import HilsimError
from hilsim.core.schema import names_agree

#: how a launch list is run: every other launch functional, or skipped by the program
FAST_FORWARD, SKIP = "fast-forward", "skip"
LAUNCH_MODES = (FAST_FORWARD, SKIP)
#: the parts a run's CPU time is split into (:func:`cpu_split`)
CPU_PARTS = ("host", "fast_forward", "warmup", "sample")


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
    #: (log bytes, CPU seconds) while it ran (:attr:`.SimRun.cpu_trace`)
    cpu_trace: tuple[tuple[int, float], ...] = ()
    #: ended by its ``stop`` condition once it had what it ran for (not at the program's end)
    stopped: bool = False


def run_on_card(
    command: Sequence[str],
    card: str,
    run_dir: Path,
    options: Mapping[str, str] | None = None,
    timeout_s: float = 4 * 3600,
    progress: Callable[[int, float], None] | None = None,
    env: Mapping[str, str] | None = None,
    stop: Callable[[], bool] | None = None,
) -> CardRun:
    """Run ``command`` on ``card`` (+ ``options`` overrides, ``env`` variables) in
    ``run_dir``; CPU time measured.

    CPU time is the simulator process's user + system time (``wait4`` of that child:
    :attr:`~hilsim.simmodel.gpgpusim.run.SimRun.cpu_s`): on a shared machine it is what the
    run cost, whatever the wall time.
    ``progress(kernels finished, simulated cycles)`` is called about once a second.
    """
    if not command:
        raise HilsimError("no program given (put it after '--')")
    overrides = normalize_options(options)
    run = run_program(list(command), card, run_dir, options=overrides, timeout_s=timeout_s,
                      progress=progress, env=env, stop=stop)
    name = Path(card).parent.name if card.endswith(".config") else card
    return CardRun(run.log_path, run.stdout, run.wall_s, run.cpu_s, name, overrides,
                   run.run_dir, run.cpu_trace, run.stopped)


def _cycles_progress(advance: Callable[..., None], label: str) -> Callable[[int, float], None]:
    """A ``run_on_card`` progress callback that moves a bar to the kernels finished."""
    seen = [0]

    def update(kernels: int, cycles: float) -> None:
        advance(kernels - seen[0], f"{label}: {cycles:,.0f} simulated cycles")
        seen[0] = kernels

    return update


def profile_on_card(
    command: Sequence[str],
    card: str,
    out: Path,
    *,
    options: Mapping[str, str] | None = None,
    timeout_s: float = 4 * 3600,
    keep_raw: Path | None = None,
    force: bool = False,
    progress: bool = True,
) -> tuple[Path, dict[str, Any]]:
    """Run ``command`` fully on ``card`` and write the bundle ``out`` (the log read by
    :func:`hilsim.simmodel.gpgpusim.logprofile.bundle_from_gpgpusim_log`); returns (path,
    manifest).

    The simulator's log is kept as ``keep_raw/sim.log`` when ``keep_raw`` is given. On a
    terminal a progress line on stderr shows the kernels finished and the simulated cycles.
    """
    if out.exists() and not force:
        raise HilsimError(f"{out}: already exists (use --force to replace it)")
    tmp = tempfile.TemporaryDirectory(prefix="hilsim-gpgpusim-")
    run_dir = Path(tmp.name) if keep_raw is None else keep_raw
    nvtx, no_nvtx = nvtx_environment()
    try:
        with progress_bar(f"simulating {Path(command[0]).name if command else ''} on {card}",
                          None, progress) as advance:
            run = run_on_card(command, card, run_dir, options, timeout_s,
                              _cycles_progress(advance, "full run"),
                              env={**fast_forward_env(None, copy_digests=True), **nvtx})
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
            nvtx=nvtx.get(NVTX_INJECTION_ENV) or f"not injected: {no_nvtx}",
        )
        digests = copy_digests(run.text)
        if digests:  # a simulator with the fast-forward patch: the data check's reference
            manifest["profilers"][0]["copy_digests"] = digests_record(digests)
        if keep_raw is not None:
            manifest["profilers"][0]["log"] = str(run.log_path)
        path = write_bundle(bundle, out, overwrite=force)
        return path, manifest
    finally:
        tmp.cleanup()


def launch_mode_for(command: Sequence[str], skip_launches: bool = False) -> str:
    """How a sampled simulation runs ``command``: on its skip path when asked or when an
    argument holds ``{launches}`` (the program takes the list), else fast-forwarded."""
    if skip_launches or takes_launch_list(command):
        return SKIP
    return FAST_FORWARD


def names_disagree(named: np.ndarray, profiled: np.ndarray) -> np.ndarray:
    """Rows whose two names denote different kernels; an empty name on either side
    is not checked (:func:`hilsim.core.schema.names_agree`: demangled vs mangled)."""
    named = np.asarray(named, dtype=object).astype(str)
    profiled = np.asarray(profiled, dtype=object).astype(str)
    known = (named != "") & (profiled != "")
    bad = np.zeros(len(named), dtype=bool)
    if known.any():
        bad[known] = ~names_agree(named[known], profiled[known])
    return bad


def check_simulated_names(
    profiled: np.ndarray, simulated: np.ndarray, launch_ids: np.ndarray
) -> None:
    """One-line error at the first simulated kernel whose name disagrees with its launch.

    ``profiled[k]`` is the profile's name of launch ``launch_ids[k]`` and
    ``simulated[k]`` the name the simulator printed for the ``k``-th kernel (see
    :func:`names_disagree`).
    """
    bad = names_disagree(simulated, profiled)
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise HilsimError(
            f"simulated kernel {k + 1} is {str(simulated[k])!r} but launch "
            f"{int(launch_ids[k])} is {str(profiled[k])!r} ({int(bad.sum())} of "
            f"{len(bad)} disagree): the logs are not in kernelslist order or belong to "
            "another plan or run"
        )


@dataclass
class ListRun:
    """One run of a launch list: the statistics of its kernels and what it cost.

    ``cpu_parts``: the run's CPU seconds split into ``host`` (start-up, PTX parsing, host
    code between launches' lines), ``fast_forward`` (functional launches), ``warmup`` and
    ``sample`` (performance launches), to the trace's resolution
    (:func:`hilsim.simmodel.gpgpusim.fastforward.cpu_per_launch`). ``outputs``: what the
    program computed (copy digests, launches made), one per simulator process,
    fast-forward runs only. ``chunks``: the split into parallel processes
    (:meth:`hilsim.simmodel.gpgpusim.parallel.ChunkPlan.summary`), None for one process;
    ``logs``: every process's log, in launch order.
    """

    name: str
    warmup: str
    launch_ids: np.ndarray
    is_sample: np.ndarray
    stats: pd.DataFrame
    run: CardRun
    preceding: int = 0
    mode: str = FAST_FORWARD
    cpu_parts: dict[str, float] | None = None
    outputs: tuple[ProgramOutputs, ...] = ()
    chunks: dict[str, Any] | None = None
    logs: tuple[Path, ...] = ()
    #: a functional launch's CPU over a performance one's of the same weight, measured on
    #: this run (:meth:`ListRunner._learn_costs`); None when it had too little CPU to tell
    functional_cost: float | None = None

    @property
    def cycles(self) -> float:
        return float(self.stats["cycles"].sum())

    @property
    def sample_cycles(self) -> float:
        keep = self.stats["launch_id"].isin(self.launch_ids[self.is_sample])
        return float(self.stats.loc[keep, "cycles"].sum())

    def samples(self) -> pd.DataFrame:
        """Statistics of the sampled launches only (warm-up launches dropped)."""
        keep = self.stats["launch_id"].isin(self.launch_ids[self.is_sample])
        return self.stats[keep].drop_duplicates("launch_id")

    def record(self) -> dict[str, Any]:
        parts = self.cpu_parts or {}
        return {
            "run": self.name,
            "warmup": self.warmup,
            "preceding": self.preceding,
            "mode": self.mode,
            "launches": int(len(self.launch_ids)),
            "samples": int(self.is_sample.sum()),
            "warmup_launches": int((~self.is_sample).sum()),
            "functional_launches": (None if not self.outputs else sum(
                max(o.launches - len(self.launch_ids), 0) for o in self.outputs[-1:])),
            "processes": 1 if self.chunks is None else self.chunks["chunks"],
            "cycles": self.cycles,
            "sample_cycles": self.sample_cycles,
            "warmup_cycles": self.cycles - self.sample_cycles,
            "sim_cpu_s": round(self.run.cpu_s, 3),
            "sim_wall_s": round(self.run.wall_s, 3),
            **{f"{part}_cpu_s": round(v, 3) for part, v in parts.items()},
            **({"chunks": self.chunks} if self.chunks is not None else {}),
            **({"functional_cost_measured": round(self.functional_cost, 4)}
               if self.functional_cost is not None else {}),
        }


#: CPU seconds a run part needs before its cost ratio is trusted (the trace ticks every
#: 0.2 s: five points)
MIN_MEASURED_CPU_S = 1.0


@dataclass
class _Piece:
    """One simulator process of a run: its run, statistics (of its own listed launches),
    outputs, the wall time of the run it belongs to, and the launches it ran in
    performance mode."""

    run: CardRun
    stats: pd.DataFrame
    outputs: ProgramOutputs | None
    wall_s: float
    launch_ids: np.ndarray  # its performance launches (carried warm-up first)
    is_sample: np.ndarray  # of ``launch_ids`` (carried ones count as warm-up)


def _summed(parts: Sequence[dict[str, float]]) -> dict[str, float]:
    return {k: float(sum(p.get(k, 0.0) for p in parts)) for k in CPU_PARTS}


def _merged_run(runs: Sequence[CardRun], wall_s: float) -> CardRun:
    """The processes of one chunked run as one: the first's log and options (the card is
    the same), CPU seconds summed, the wall time of the parallel section."""
    first = runs[0]
    return CardRun(first.log_path, first.text, wall_s, float(sum(r.cpu_s for r in runs)),
                   first.card, first.overrides, first.run_dir, ())


@dataclass(frozen=True)
class CpuSplit:
    """One simulator process's CPU seconds, from its CPU trace: by part (:class:`ListRun`)
    and per performance launch (``launch_ids`` and their seconds)."""

    parts: dict[str, float]
    launch_ids: np.ndarray
    seconds: np.ndarray


def cpu_split(run: CardRun, launch_ids: np.ndarray, is_sample: np.ndarray,
              mode: str) -> CpuSplit:
    """The run's CPU by part and per performance launch: each launch's time
    (:func:`~hilsim.simmodel.gpgpusim.fastforward.cpu_per_launch`) goes to ``sample``,
    ``warmup`` (a listed launch that is not a sample) or ``fast_forward`` (an unlisted
    launch, run functionally); the rest (start-up, PTX parsing) to ``host``."""
    if mode == FAST_FORWARD:
        per_launch, host = cpu_per_launch(run.text, run.cpu_trace, run.cpu_s)
        inside = launch_ids < len(per_launch)
        ids = launch_ids[inside]
        at = ids  # a fast-forwarded log has a line per launch: index = launch id
        sampled_at = launch_ids[inside & is_sample]
    else:  # the program's marks, one per listed launch in list order
        per_launch, host = cpu_per_launch(run.text, run.cpu_trace, run.cpu_s, SKIP_MARK)
        n = min(len(per_launch), len(launch_ids))
        ids, at = launch_ids[:n], np.arange(n)
        sampled_at = np.flatnonzero(is_sample[:n])
    listed = np.zeros(len(per_launch), dtype=bool)
    sampled = np.zeros(len(per_launch), dtype=bool)
    listed[at] = True
    sampled[sampled_at] = True
    parts = {"host": host,
             "fast_forward": float(per_launch[~listed].sum()),
             "warmup": float(per_launch[listed & ~sampled].sum()),
             "sample": float(per_launch[sampled].sum())}
    return CpuSplit(parts, ids, per_launch[at])


class ListRunner:
    """Runs launch lists of one program on one card in a temporary work folder
    (``run(name, launch_ids, is_sample, warmup_label, options, preceding) -> ListRun``),
    fast-forwarded or on the program's skip path (``mode``, :data:`LAUNCH_MODES`); with
    ``workers`` > 1 or a Dask ``scheduler``, as chunks in parallel processes
    (:mod:`hilsim.simmodel.gpgpusim.parallel`) where the cost model allows."""

    def __init__(self, command: Sequence[str], card: str, options: Mapping[str, str],
                 timeout_s: float, names: np.ndarray | None, progress: bool,
                 mode: str = FAST_FORWARD, workers: int = 1, scheduler: str | None = None,
                 cpu_factor: float = CPU_FACTOR, run_to_end: bool = False,
                 launch_costs: np.ndarray | None = None) -> None:
        if mode not in LAUNCH_MODES:
            raise HilsimError(f"launch mode {mode!r}: one of {', '.join(LAUNCH_MODES)}")
        if workers < 1:
            raise HilsimError(f"workers {workers}: at least 1")
        self.command, self.card, self.options = list(command), card, dict(options)
        self.timeout_s, self.names, self.progress = timeout_s, names, progress
        if scheduler is not None and workers == 1:  # as many chunks as the cluster runs
            workers = dask_workers(scheduler)
        self.mode, self.workers, self.scheduler = mode, workers, scheduler
        self.cpu_factor, self.run_to_end = cpu_factor, run_to_end
        #: a functional launch's CPU over a performance one's: the prior until a run
        #: measured it (:meth:`_learn_costs`)
        self.functional_cost = FUNCTIONAL_COST
        #: a process's start-up CPU in performance launches of mean cost (measured, as f)
        self.startup_cost = 0.0
        #: each launch id's relative cost for the chunk cuts before a run measured it (the
        #: profile's warp instructions or durations, ``analyzer.simulate.launch_costs``)
        self.launch_costs = None if launch_costs is None else np.asarray(launch_costs,
                                                                         dtype=np.float64)
        #: CPU seconds of the launches earlier runs simulated in performance mode (launch
        #: id -> seconds, the last run's): the later runs' chunk cuts weigh them so
        self.measured_cpu: dict[int, float] = {}
        self.work = Path(tempfile.mkdtemp(prefix="hilsim-simulate-"))
        self.runs: list[ListRun] = []

    def run(self, name: str, launch_ids: np.ndarray, is_sample: np.ndarray,
            warmup: str, extra: Mapping[str, str], preceding: int = 0) -> ListRun:
        folder = self.work / f"{len(self.runs)}-{name}"
        folder.mkdir()
        label = f"{name} run ({warmup}): {int(is_sample.sum())} samples"
        if (~is_sample).any():
            label += f" + {int((~is_sample).sum())} warm-up launches"
        options = {**self.options, **extra}
        plan = None
        if self.workers > 1 or self.scheduler is not None:
            plan = plan_chunks(launch_ids, is_sample, self.workers,
                               self.functional_cost if self.mode == FAST_FORWARD else 0.0,
                               self.cpu_factor, launch_costs=self._launch_costs(),
                               startup_cost=self.startup_cost)
        if plan is not None and len(plan.bounds) > 1:
            pieces = self._run_chunks(folder, label, launch_ids, is_sample, options, plan)
        else:
            pieces = [self._run_one(folder, label, launch_ids, is_sample, options)]
        stats = pd.concat([p.stats for p in pieces], ignore_index=True).sort_values(
            "launch_id", kind="stable").reset_index(drop=True)
        self._check_ran(stats, launch_ids, pieces[0].run.log_path)
        runs = [p.run for p in pieces]
        merged = runs[0] if len(runs) == 1 else _merged_run(runs, pieces[0].wall_s)
        splits = [cpu_split(p.run, p.launch_ids, p.is_sample, self.mode) for p in pieces]
        parts = _summed([split.parts for split in splits])
        outputs = tuple(p.outputs for p in pieces if p.outputs is not None)
        result = ListRun(name, warmup, launch_ids, is_sample, stats, merged, preceding,
                         self.mode, parts, outputs,
                         None if plan is None or len(plan.bounds) < 2 else {
                             **plan.summary(),
                             "cpu_s_per_chunk": [round(p.run.cpu_s, 2) for p in pieces],
                             "wall_s_per_chunk": [round(p.run.wall_s, 2) for p in pieces]},
                         tuple(r.log_path for r in runs))
        for split in splits:
            self.measured_cpu.update(zip(split.launch_ids.tolist(), split.seconds.tolist(),
                                         strict=True))
        result.functional_cost = self._learn_costs(pieces, parts)
        self.runs.append(result)
        return result

    def _run_one(self, folder: Path, label: str, launch_ids: np.ndarray,
                 is_sample: np.ndarray, options: Mapping[str, str]) -> _Piece:
        """The whole list in one simulator process; fast-forwarded, stopped once its last
        listed launch is simulated unless ``run_to_end``."""
        stop = None
        if self.mode == FAST_FORWARD:
            list_path = write_launch_list(folder / LIST_NAME, launch_ids)
            argv, env = self.command, fast_forward_env(list_path, copy_digests=True)
            if not self.run_to_end:
                stop = stop_after_launch(folder / "run" / LOG_NAME, int(launch_ids.max()) + 1)
        else:
            list_path = folder / LAUNCH_LIST
            list_path.write_text("\n".join(str(int(i)) for i in launch_ids) + "\n")
            argv, env = launch_list_argv(self.command, list_path.resolve()), None
        with progress_bar(label, len(launch_ids), self.progress) as advance:
            run = run_on_card(argv, self.card, folder / "run", options, self.timeout_s,
                              _cycles_progress(advance, label), env=env, stop=stop)
        stats, outputs = self._read(run, launch_ids, stop_uid=None if stop is None
                                    else int(launch_ids.max()) + 1)
        return _Piece(run, stats, outputs, run.wall_s, launch_ids, is_sample)

    def _run_chunks(self, folder: Path, label: str, launch_ids: np.ndarray,
                    is_sample: np.ndarray, options: Mapping[str, str], plan: ChunkPlan
                    ) -> list[_Piece]:
        """The list as ``plan``'s chunks, each a process of its own (local or Dask)."""
        tasks = chunk_tasks(self.command, self.card, normalize_options(options), launch_ids,
                            plan, self.mode == FAST_FORWARD, self.timeout_s)
        folders = [folder / f"chunk{t.index}" for t in tasks]
        started = time.monotonic()
        where = f"Dask at {self.scheduler}" if self.scheduler else "local processes"
        with progress_bar(f"{label} in {len(tasks)} chunks ({where})", len(tasks),
                          self.progress) as advance:
            def done(_result: ChunkResult) -> None:
                advance(1)

            if self.scheduler is not None:
                results = run_chunks_dask(tasks, self.scheduler, done)
            else:
                results = run_chunks_local(tasks, folders, done)
        wall = time.monotonic() - started
        pieces = []
        card_name = Path(self.card).parent.name if self.card.endswith(".config") else self.card
        for task, result, chunk_folder, (begin, end) in zip(tasks, results, folders,
                                                            plan.bounds, strict=True):
            start = begin - task.carried
            log = chunk_folder / "run" / "sim.log"
            if not log.exists():  # a Dask worker's log comes back as text
                log.parent.mkdir(parents=True, exist_ok=True)
                log.write_text(result.log_text)
            run = CardRun(log, result.log_text, result.wall_s, result.cpu_s, card_name,
                          dict(result.overrides), log.parent, result.cpu_trace)
            ids = np.asarray(task.launch_ids, dtype=np.int64)
            stats, outputs = self._read(run, ids, stop_uid=task.stop_uid)
            stats = stats[stats["launch_id"].isin(ids[task.carried:])]  # carried: warm-up
            sampled = is_sample[start:end].copy()
            sampled[:task.carried] = False
            pieces.append(_Piece(run, stats, outputs, wall, ids, sampled))
        return pieces

    def _read(self, run: CardRun, launch_ids: np.ndarray, stop_uid: int | None = None
              ) -> tuple[pd.DataFrame, ProgramOutputs | None]:
        """A run's statistics placed by launch id and, fast-forwarded, its outputs; a run
        told to stop after launch ``stop_uid`` keeps the outputs it made for certain by then
        (:func:`~hilsim.simmodel.gpgpusim.datacheck.before_launch`), whether or not the
        program ended before the stop came."""
        stats = parse_simlog(run.text, str(run.log_path))
        if self.mode == FAST_FORWARD:
            check_fast_forward(run.text, launch_ids, str(run.log_path))
            stats["launch_id"] = stats["uid"].to_numpy(np.int64) - 1
            outputs = program_outputs(run.text)
            return stats, (outputs if stop_uid is None else before_launch(outputs, stop_uid))
        if "launch_id" not in stats.columns:
            raise HilsimError(
                f"{run.log_path}: the program printed no 'hilsim-launch K' marks: the skip "
                "path needs a program that takes the launch list and marks each launch "
                "(see the workloads README); without it, fast-forward runs any program"
            )
        return stats, None

    def _check_ran(self, stats: pd.DataFrame, launch_ids: np.ndarray, log: Path) -> None:
        """Every listed launch simulated, each with the profile's kernel name."""
        missing = np.setdiff1d(launch_ids, stats["launch_id"].to_numpy())
        if len(missing):
            raise HilsimError(
                f"{log}: the program did not run {len(missing)} of the "
                f"{len(launch_ids)} listed launches (first: launch {int(missing[0])})"
            )
        if self.names is not None:
            listed = stats.drop_duplicates("launch_id")
            ids = listed["launch_id"].to_numpy(np.int64)
            inside = ids < len(self.names)
            check_simulated_names(self.names[ids[inside]],
                                  listed["kernel"].to_numpy()[inside], ids[inside])

    def _launch_costs(self) -> np.ndarray | None:
        """Each launch id's relative cost for the next chunk plan: the CPU seconds an
        earlier run spent on it in performance mode where one did, the profile's costs
        (:attr:`launch_costs`) for the others, scaled to those seconds by their median ratio
        where both are known (a profile from another card or SM count weighs launches
        otherwise than this card does); NaN where neither is known."""
        prior = self.launch_costs
        if not self.measured_cpu:
            return prior
        ids = np.fromiter(self.measured_cpu, dtype=np.int64)
        seconds = np.fromiter(self.measured_cpu.values(), dtype=np.float64)
        n = max(int(ids.max()) + 1, 0 if prior is None else len(prior))
        costs = np.full(n, np.nan)
        if prior is not None:
            inside = ids < len(prior)
            known, spent = ids[inside], seconds[inside]
            both = (prior[known] > 0) & (spent > 0)
            scale = float(np.median(spent[both] / prior[known][both])) if both.any() else 1.0
            costs[:len(prior)] = prior * scale
        costs[ids] = seconds
        return costs

    def _learn_costs(self, pieces: Sequence[_Piece], parts: Mapping[str, float]
                     ) -> float | None:
        """The functional cost and start-up the next run's chunk plan uses, measured on
        this run (each launch weighted by its relative cost): fast-forward CPU per unit of
        functional launches over performance CPU per unit of performance launches, and the
        host CPU per process in performance units (each kept when the run had too little
        CPU to tell). Returns the functional cost measured, None when it was not."""
        perf_cpu = parts.get("warmup", 0.0) + parts.get("sample", 0.0)
        if perf_cpu <= MIN_MEASURED_CPU_S:
            return None
        last = max(int(p.launch_ids.max()) for p in pieces) + 1
        made = max([last, *[p.outputs.launches for p in pieces if p.outputs is not None]])
        costs = launch_weights(self._launch_costs(), made)
        perf_units = sum(float(costs[p.launch_ids].sum()) for p in pieces)
        per_unit = perf_cpu / perf_units
        self.startup_cost = parts.get("host", 0.0) / len(pieces) / per_unit
        functional = sum(float(costs[:p.outputs.launches].sum()
                               - costs[p.launch_ids[p.launch_ids < p.outputs.launches]].sum())
                         for p in pieces if p.outputs is not None)
        if functional > 0 and parts.get("fast_forward", 0.0) > MIN_MEASURED_CPU_S:
            self.functional_cost = float(np.clip(parts["fast_forward"] / functional
                                                 / per_unit, 0.001, 1.0))
            return self.functional_cost
        return None

    def cleanup(self, keep_logs: bool = False) -> None:
        """Remove the work folder; with ``keep_logs`` keep it when a run wrote a log (the
        error that ends the simulation names it)."""
        if keep_logs and any(self.work.glob("*/run/sim.log")):
            return
        shutil.rmtree(self.work, ignore_errors=True)
