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

import re
import resource
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from hilsim.simmodel.gpgpusim.cards import normalize_options
from hilsim.simmodel.gpgpusim.datacheck import (
    CopyDigest,
    ProgramOutputs,
    copy_digests,
    program_outputs,
)
from hilsim.simmodel.gpgpusim.fastforward import (
    LIST_NAME,
    check_fast_forward,
    cpu_per_launch,
    fast_forward_env,
    write_launch_list,
)
from hilsim.simmodel.gpgpusim.logprofile import bundle_from_gpgpusim_log
from hilsim.simmodel.gpgpusim.nvtxmarks import NVTX_INJECTION_ENV, nvtx_environment
from hilsim.simmodel.gpgpusim.run import run_program
from hilsim.simmodel.gpgpusim.simlog import parse_simlog

from hilsim.core.bundle import write_bundle
from hilsim.core.console import progress_bar
from hilsim.core.errors import HilsimError
from hilsim.core.schema import names_agree

#: what replaces this in the program's arguments (else ``--launches FILE`` is appended)
LAUNCHES_PLACEHOLDER = "{launches}"
#: the launch list a run is given (one launch id a line)
LAUNCH_LIST = "launches.txt"
#: how a launch list is run: every other launch functional, or skipped by the program
FAST_FORWARD, SKIP = "fast-forward", "skip"
LAUNCH_MODES = (FAST_FORWARD, SKIP)


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
    #: (log bytes, CPU seconds) while it ran (:attr:`.SimRun.cpu_trace`)
    cpu_trace: tuple[tuple[int, float], ...] = ()


def run_on_card(
    command: Sequence[str],
    card: str,
    run_dir: Path,
    options: Mapping[str, str] | None = None,
    timeout_s: float = 4 * 3600,
    progress: Callable[[int, float], None] | None = None,
    env: Mapping[str, str] | None = None,
) -> CardRun:
    """Run ``command`` on ``card`` (+ ``options`` overrides, ``env`` variables) in
    ``run_dir``; CPU time measured.

    CPU time is the simulator process's user + system time (``RUSAGE_CHILDREN`` around
    the run): on a shared machine it is what the run cost, whatever the wall time.
    ``progress(kernels finished, simulated cycles)`` is called about once a second.
    """
    if not command:
        raise HilsimError("no program given (put it after '--')")
    overrides = normalize_options(options)
    cpu0 = _children_cpu_s()
    run = run_program(list(command), card, run_dir, options=overrides, timeout_s=timeout_s,
                      progress=progress, env=env)
    cpu = _children_cpu_s() - cpu0
    name = Path(card).parent.name if card.endswith(".config") else card
    return CardRun(run.log_path, run.stdout, run.wall_s, cpu, name, overrides, run.run_dir,
                   run.cpu_trace)


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


def digests_record(digests: Sequence[CopyDigest]) -> list[list[Any]]:
    """Copy digests as a manifest keeps them: ``[kind, bytes, digest, after_uid, kernel]``."""
    return [[d.kind, d.nbytes, d.digest, d.after_uid, d.after_kernel] for d in digests]


def digests_from_record(rows: Any, where: str) -> tuple[CopyDigest, ...]:
    """The copy digests a manifest recorded (:func:`digests_record`); one-line error naming
    ``where`` on anything else."""
    try:
        return tuple(CopyDigest(i, str(kind), int(nbytes), str(digest), int(uid), str(kernel))
                     for i, (kind, nbytes, digest, uid, kernel) in enumerate(rows))
    except (TypeError, ValueError) as exc:
        raise HilsimError(f"{where}: copy_digests is not a list of [kind, bytes, digest, "
                          f"uid, kernel] rows ({exc})") from None


def launch_mode_for(command: Sequence[str], skip_launches: bool = False) -> str:
    """How a sampled simulation runs ``command``: on its skip path when asked or when an
    argument holds ``{launches}`` (the program takes the list), else fast-forwarded."""
    if skip_launches or any(LAUNCHES_PLACEHOLDER in str(a) for a in command):
        return SKIP
    return FAST_FORWARD


def launch_list_argv(command: Sequence[str], list_path: Path) -> list[str]:
    """The program's argv with the launch list: ``{launches}`` replaced, else appended."""
    argv = [str(a) for a in command]
    if any(LAUNCHES_PLACEHOLDER in a for a in argv):
        return [a.replace(LAUNCHES_PLACEHOLDER, str(list_path)) for a in argv]
    return [*argv, "--launches", str(list_path)]


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
    program computed (copy digests, launches made), fast-forward runs only.
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
    outputs: ProgramOutputs | None = None

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
            "functional_launches": (None if self.outputs is None
                                    else max(self.outputs.launches - len(self.launch_ids), 0)),
            "cycles": self.cycles,
            "sample_cycles": self.sample_cycles,
            "warmup_cycles": self.cycles - self.sample_cycles,
            "sim_cpu_s": round(self.run.cpu_s, 3),
            "sim_wall_s": round(self.run.wall_s, 3),
            **{f"{part}_cpu_s": round(v, 3) for part, v in parts.items()},
        }


#: a launch of the skip path starts at its mark
_SKIP_MARK = re.compile(r"^hilsim-launch +[0-9]+", re.M)


def cpu_parts(run: CardRun, launch_ids: np.ndarray, is_sample: np.ndarray,
              mode: str) -> dict[str, float]:
    """The run's CPU seconds by part (:class:`ListRun`), from its CPU trace: each launch's
    time (:func:`~hilsim.simmodel.gpgpusim.fastforward.cpu_per_launch`) goes to
    ``sample``, ``warmup`` (a listed launch that is not a sample) or ``fast_forward`` (an
    unlisted launch, run functionally)."""
    if mode == FAST_FORWARD:
        per_launch, host = cpu_per_launch(run.text, run.cpu_trace, run.cpu_s)
        listed = np.zeros(len(per_launch), dtype=bool)
        sampled = np.zeros(len(per_launch), dtype=bool)
        inside = launch_ids < len(per_launch)
        listed[launch_ids[inside]] = True
        sampled[launch_ids[inside & is_sample]] = True
    else:  # the program's marks, one per listed launch in list order
        per_launch, host = cpu_per_launch(run.text, run.cpu_trace, run.cpu_s, _SKIP_MARK)
        listed = np.ones(len(per_launch), dtype=bool)
        sampled = np.zeros(len(per_launch), dtype=bool)
        n = min(len(per_launch), len(is_sample))
        sampled[:n] = is_sample[:n]
    return {"host": host,
            "fast_forward": float(per_launch[~listed].sum()),
            "warmup": float(per_launch[listed & ~sampled].sum()),
            "sample": float(per_launch[sampled].sum())}


class ListRunner:
    """Runs launch lists of one program on one card in a temporary work folder
    (``run(name, launch_ids, is_sample, warmup_label, options, preceding) -> ListRun``),
    fast-forwarded or on the program's skip path (``mode``, :data:`LAUNCH_MODES`)."""

    def __init__(self, command: Sequence[str], card: str, options: Mapping[str, str],
                 timeout_s: float, names: np.ndarray | None, progress: bool,
                 mode: str = FAST_FORWARD) -> None:
        if mode not in LAUNCH_MODES:
            raise HilsimError(f"launch mode {mode!r}: one of {', '.join(LAUNCH_MODES)}")
        self.command, self.card, self.options = list(command), card, dict(options)
        self.timeout_s, self.names, self.progress = timeout_s, names, progress
        self.mode = mode
        self.work = Path(tempfile.mkdtemp(prefix="hilsim-simulate-"))
        self.runs: list[ListRun] = []

    def run(self, name: str, launch_ids: np.ndarray, is_sample: np.ndarray,
            warmup: str, extra: Mapping[str, str], preceding: int = 0) -> ListRun:
        folder = self.work / f"{len(self.runs)}-{name}"
        folder.mkdir()
        label = f"{name} run ({warmup}): {int(is_sample.sum())} samples"
        if (~is_sample).any():
            label += f" + {int((~is_sample).sum())} warm-up launches"
        if self.mode == FAST_FORWARD:
            list_path = write_launch_list(folder / LIST_NAME, launch_ids)
            argv, env = self.command, fast_forward_env(list_path, copy_digests=True)
        else:
            list_path = folder / LAUNCH_LIST
            list_path.write_text("\n".join(str(int(i)) for i in launch_ids) + "\n")
            argv, env = launch_list_argv(self.command, list_path.resolve()), None
        with progress_bar(label, len(launch_ids), self.progress) as advance:
            run = run_on_card(argv, self.card, folder / "run", {**self.options, **extra},
                              self.timeout_s, _cycles_progress(advance, label), env=env)
        stats = parse_simlog(run.text, str(run.log_path))
        outputs = None
        if self.mode == FAST_FORWARD:
            check_fast_forward(run.text, launch_ids, str(run.log_path))
            stats["launch_id"] = stats["uid"].to_numpy(np.int64) - 1
            outputs = program_outputs(run.text)
        elif "launch_id" not in stats.columns:
            raise HilsimError(
                f"{run.log_path}: the program printed no 'hilsim-launch K' marks: the skip "
                "path needs a program that takes the launch list and marks each launch "
                "(see the workloads README); without it, fast-forward runs any program"
            )
        missing = np.setdiff1d(launch_ids, stats["launch_id"].to_numpy())
        if len(missing):
            raise HilsimError(
                f"{run.log_path}: the program did not run {len(missing)} of the "
                f"{len(launch_ids)} listed launches (first: launch {int(missing[0])})"
            )
        if self.names is not None:
            listed = stats.drop_duplicates("launch_id")
            ids = listed["launch_id"].to_numpy(np.int64)
            inside = ids < len(self.names)
            check_simulated_names(self.names[ids[inside]],
                                  listed["kernel"].to_numpy()[inside], ids[inside])
        result = ListRun(name, warmup, launch_ids, is_sample, stats, run, preceding,
                         self.mode, cpu_parts(run, launch_ids, is_sample, self.mode), outputs)
        self.runs.append(result)
        return result

    def cleanup(self, keep_logs: bool = False) -> None:
        """Remove the work folder; with ``keep_logs`` keep it when a run wrote a log (the
        error that ends the simulation names it)."""
        if keep_logs and any(self.work.glob("*/run/sim.log")):
            return
        shutil.rmtree(self.work, ignore_errors=True)
