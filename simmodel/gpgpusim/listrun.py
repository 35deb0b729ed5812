"""Programs run on a simulated card: whole (the simulator as the profiler) or a launch list
(only the listed launches, each marked with its full-run id).

* :func:`run_on_card`: one run of a command on a card with option overrides, its
  simulator CPU time measured;
* :func:`profile_on_card`: a command run whole and its log written as a profile bundle
  (``hilsim agent profile --backend gpgpusim``);
* :class:`ListRunner`: runs of one program on one card, each given a launch list (the
  program's launch-list option, ``--launches FILE`` by default, see
  ``workloads/README.md``) whose kernels print ``hilsim-launch K`` marks, checked against
  the profile's kernel names (:func:`check_simulated_names`). ``hilsim simulate``
  (:mod:`hilsim.analyzer.simulate`, STEM section 3, PKA section 3.1) decides which lists
  to run; this module only runs them.
"""

from __future__ import annotations

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
from hilsim.simmodel.gpgpusim.logprofile import bundle_from_gpgpusim_log
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
    progress: Callable[[int, float], None] | None = None,
) -> CardRun:
    """Run ``command`` on ``card`` (+ ``options`` overrides) in ``run_dir``; CPU time measured.

    CPU time is the simulator process's user + system time (``RUSAGE_CHILDREN`` around
    the run): on a shared machine it is what the run cost, whatever the wall time.
    ``progress(kernels finished, simulated cycles)`` is called about once a second.
    """
    if not command:
        raise HilsimError("no program given (put it after '--')")
    overrides = normalize_options(options)
    cpu0 = _children_cpu_s()
    run = run_program(list(command), card, run_dir, options=overrides, timeout_s=timeout_s,
                      progress=progress)
    cpu = _children_cpu_s() - cpu0
    name = Path(card).parent.name if card.endswith(".config") else card
    return CardRun(run.log_path, run.stdout, run.wall_s, cpu, name, overrides, run.run_dir)


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
    try:
        with progress_bar(f"simulating {Path(command[0]).name if command else ''} on {card}",
                          None, progress) as advance:
            run = run_on_card(command, card, run_dir, options, timeout_s,
                              _cycles_progress(advance, "full run"))
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
    """One run of a launch list: the statistics of its kernels and what it cost."""

    name: str
    warmup: str
    launch_ids: np.ndarray
    is_sample: np.ndarray
    stats: pd.DataFrame
    run: CardRun
    preceding: int = 0

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
        return {
            "run": self.name,
            "warmup": self.warmup,
            "preceding": self.preceding,
            "launches": int(len(self.launch_ids)),
            "samples": int(self.is_sample.sum()),
            "warmup_launches": int((~self.is_sample).sum()),
            "cycles": self.cycles,
            "sample_cycles": self.sample_cycles,
            "warmup_cycles": self.cycles - self.sample_cycles,
            "sim_cpu_s": round(self.run.cpu_s, 3),
            "sim_wall_s": round(self.run.wall_s, 3),
        }


class ListRunner:
    """Runs launch lists of one program on one card in a temporary work folder
    (``run(name, launch_ids, is_sample, warmup_label, options, preceding) -> ListRun``)."""

    def __init__(self, command: Sequence[str], card: str, options: Mapping[str, str],
                 timeout_s: float, names: np.ndarray | None, progress: bool) -> None:
        self.command, self.card, self.options = list(command), card, dict(options)
        self.timeout_s, self.names, self.progress = timeout_s, names, progress
        self.work = Path(tempfile.mkdtemp(prefix="hilsim-simulate-"))
        self.runs: list[ListRun] = []

    def run(self, name: str, launch_ids: np.ndarray, is_sample: np.ndarray,
            warmup: str, extra: Mapping[str, str], preceding: int = 0) -> ListRun:
        folder = self.work / f"{len(self.runs)}-{name}"
        folder.mkdir()
        list_path = folder / LAUNCH_LIST
        list_path.write_text("\n".join(str(int(i)) for i in launch_ids) + "\n")
        label = f"{name} run ({warmup}): {int(is_sample.sum())} samples"
        if (~is_sample).any():
            label += f" + {int((~is_sample).sum())} warm-up launches"
        with progress_bar(label, len(launch_ids), self.progress) as advance:
            run = run_on_card(launch_list_argv(self.command, list_path.resolve()), self.card,
                              folder / "run", {**self.options, **extra}, self.timeout_s,
                              _cycles_progress(advance, label))
        stats = parse_simlog(run.text, str(run.log_path))
        if "launch_id" not in stats.columns:
            raise HilsimError(
                f"{run.log_path}: the program printed no 'hilsim-launch K' marks: it must "
                "accept a launch list and mark each launch (see the workloads README)"
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
        result = ListRun(name, warmup, launch_ids, is_sample, stats, run, preceding)
        self.runs.append(result)
        return result

    def cleanup(self, keep_logs: bool = False) -> None:
        """Remove the work folder; with ``keep_logs`` keep it when a run wrote a log (the
        error that ends the simulation names it)."""
        if keep_logs and any(self.work.glob("*/run/sim.log")):
            return
        shutil.rmtree(self.work, ignore_errors=True)
