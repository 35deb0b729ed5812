"""Fast-forward: run chosen launches of an unmodified program in detail, the others functionally.

The project's simulator patch ``patches/0002-fast-forward-launch-list.patch`` makes
GPGPU-Sim read ``$HILSIM_PERF_LAUNCHES``, a file of kernel launch uids: exactly those
launches run in performance mode (the timing model: caches, DRAM, cycles, a statistics
block in the log) and every other launch functionally (the same instructions on the same
memory, no timing model), so the program's data are right everywhere and only the sample
and its warm-up cost cycle-level time. No program cooperation: the simulator's uid counts
every launch of the process, whatever its mode.

**Launch ids.** GPGPU-Sim's ``kernel_launch_uid`` is 1 for the first launch of the
process and one more per launch; hilsim's ``launch_id`` is the 0-based index of the launch
in the full run. So ``uid = launch_id + 1`` (:func:`uids_of_launches`), and the file this
module writes holds uids, the numbers the log prints.

**File format** (read by the simulator, ``cuda_sim::read_hilsim_launch_list``): whole
decimal numbers from 1 separated by white space, ``#`` to the end of a line is a comment,
an empty list runs every launch functionally. A word that is not a uid stops the program
with one ``ERROR`` line naming the file and line.

**What the log shows** (the variable set): once, ``GPGPU-Sim PTX: hilsim fast-forward: N
kernel launch uids from FILE run in performance mode, every other launch functionally``;
per launch, its ``cudaLaunch ... (mode=functional simulation|performance simulation)`` line
and ``GPGPU-Sim PTX: hilsim fast-forward: launch uid U 'KERNEL' runs in functional|
performance mode``; a functional launch prints ``GPGPU-Sim: Performing Functional
Simulation, executing kernel ...`` and ``Done functional simulation`` and no statistics
block; each performance launch its usual block (``kernel_name``, ``kernel_launch_uid =
U``, ``gpu_sim_cycle``, ...). ``gpu_tot_sim_cycle`` sums the performance launches only.
:func:`check_fast_forward` reads this back and refuses a run whose performance launches
are not exactly the listed ones.

``$HILSIM_COPY_DIGESTS=1`` adds a line per copy to the host (``hilsim copy digest:``),
read by :mod:`hilsim.simmodel.gpgpusim.datacheck`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from hilsim.simmodel.gpgpusim.build import SimBuild, find_build
from hilsim.simmodel.gpgpusim.cards import CardConfig
from hilsim.simmodel.gpgpusim.run import AppendedLines, SimRun, run_program

from hilsim.core.errors import HilsimError
from hilsim.core.files import write_text_atomic

#: the simulator reads the launch list from the file this variable names
PERF_LAUNCHES_ENV = "HILSIM_PERF_LAUNCHES"
#: ``1``: the simulator prints a digest of every copy to the host
COPY_DIGESTS_ENV = "HILSIM_COPY_DIGESTS"
#: the list's name in a run folder
LIST_NAME = "perf_launches.txt"
#: the patch that implements both variables (a build without it ignores them)
PATCH_NAME = "0002-fast-forward-launch-list.patch"
#: the largest uid the simulator accepts (its counter is a C ``unsigned``)
MAX_UID = 0xFFFFFFFF

_HEADER = re.compile(
    r"^GPGPU-Sim PTX: hilsim fast-forward: (\d+) kernel launch uids from (.*) run in "
    r"performance mode", re.M)
# (not anchored at a line's start: the host thread prints it while the simulation thread
# may be half-way through a line of the previous kernel's statistics)
_LAUNCH = re.compile(
    r"GPGPU-Sim PTX: hilsim fast-forward: launch uid (\d+) '([^']*)' runs in "
    r"(functional|performance) mode", re.M)
_STATS_UIDS = re.compile(r"^kernel_launch_uid = ([\d ]*)$", re.M)


def uids_of_launches(launch_ids: Iterable[int] | np.ndarray) -> np.ndarray:
    """GPGPU-Sim kernel launch uids of hilsim launch ids (``uid = launch_id + 1``), sorted,
    unique. A launch id that is not a whole number from 0 is an error."""
    ids = np.asarray(list(launch_ids) if not isinstance(launch_ids, np.ndarray) else launch_ids)
    if ids.size == 0:
        return np.zeros(0, dtype=np.int64)
    whole = ids.dtype.kind in "iu" or (
        ids.dtype.kind == "f" and bool(np.all(np.isfinite(ids)))
        and bool(np.all(ids == np.floor(ids))))
    if not whole:
        raise HilsimError(f"launch ids must be whole numbers, got {ids.dtype} values")
    ids = ids.astype(np.int64)
    if ids.min() < 0 or ids.max() >= MAX_UID:
        bad = ids[(ids < 0) | (ids >= MAX_UID)][0]
        raise HilsimError(f"launch id {int(bad)} is outside 0..{MAX_UID - 1}")
    return np.unique(ids) + 1


def launches_of_uids(uids: Iterable[int] | np.ndarray) -> np.ndarray:
    """hilsim launch ids of GPGPU-Sim kernel launch uids (``launch_id = uid - 1``)."""
    return np.asarray(list(uids) if not isinstance(uids, np.ndarray) else uids,
                      dtype=np.int64) - 1


def write_launch_list(path: str | os.PathLike[str], launch_ids: Iterable[int] | np.ndarray,
                      *, note: str = "") -> Path:
    """Write the simulator's launch list for ``launch_ids`` (hilsim ids) to ``path``.

    One uid per line after a comment saying what the numbers are; written to a temporary
    file and renamed. Returns the path.
    """
    uids = uids_of_launches(launch_ids)
    lines = ["# hilsim fast-forward launch list: GPGPU-Sim kernel launch uids "
             "(hilsim launch id + 1), run in performance mode; every other launch "
             "runs functionally"]
    if note:
        lines += [f"# {line}" for line in note.splitlines()]
    lines += [str(u) for u in uids.tolist()]
    return write_text_atomic(path, "\n".join(lines) + "\n")


def read_launch_list(path: str | os.PathLike[str]) -> np.ndarray:
    """The uids of a launch list file, parsed as the simulator parses it (sorted, unique)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise HilsimError(f"{p}: cannot read the launch list ({exc})") from None
    uids: set[int] = set()
    for lineno, line in enumerate(text.splitlines(), start=1):
        for word in line.split("#", 1)[0].split():
            if not word.isascii() or not word.isdigit() or not 1 <= int(word) <= MAX_UID:
                raise HilsimError(f"{p}: line {lineno}: {word[:40]!r} is not a kernel launch "
                                  "uid (a whole number from 1)")
            uids.add(int(word))
    return np.array(sorted(uids), dtype=np.int64)


def fast_forward_env(list_path: str | os.PathLike[str] | None, *,
                     copy_digests: bool = True) -> dict[str, str]:
    """The variables of a run: the launch list (``None``: every launch as the card says,
    the variable set empty so that one exported by the caller does not leak in) and the
    copy digests."""
    return {
        PERF_LAUNCHES_ENV: "" if list_path is None else str(Path(list_path).resolve()),
        COPY_DIGESTS_ENV: "1" if copy_digests else "",
    }


def require_fast_forward_build(build: SimBuild) -> None:
    """Refuse a cached build whose provenance lists its patches without the fast-forward
    one (a tree from ``$HILSIM_GPGPUSIM_HOME`` has no list: its log is checked instead)."""
    patches = build.provenance.get("patches")
    if isinstance(patches, list) and PATCH_NAME not in patches:
        raise HilsimError(
            f"GPGPU-Sim build {build.key} lacks the fast-forward patch {PATCH_NAME}: run "
            "`hilsim gpgpusim setup` with this hilsim (a new build key)")


@dataclass(frozen=True)
class FastForwardRun:
    """A finished fast-forwarded run, checked: the run and which launches ran how."""

    run: SimRun
    launches: int  # launches the program made (uids 1..launches)
    performance_uids: tuple[int, ...]  # in uid order
    kernels: tuple[str, ...]  # the kernel of each launch, index uid - 1

    @property
    def functional_launches(self) -> int:
        """Launches that ran functionally."""
        return self.launches - len(self.performance_uids)


def launch_modes(log_text: str, where: str = "<sim log>") -> list[tuple[int, str, str]]:
    """(uid, kernel, mode) of every launch of a fast-forwarded log, in launch order.

    Raises :class:`HilsimError` when the log does not say that the launch list was read
    (a simulator without the fast-forward patch ignores the variable and runs everything
    in detail) or when the uids do not count 1, 2, 3, ...
    """
    if not _HEADER.search(log_text):
        raise HilsimError(
            f"{where}: the simulator did not read {PERF_LAUNCHES_ENV} (no 'hilsim "
            f"fast-forward' line): a GPGPU-Sim build without {PATCH_NAME}?")
    out = [(int(m.group(1)), m.group(2), m.group(3)) for m in _LAUNCH.finditer(log_text)]
    for expected, (uid, kernel, _mode) in enumerate(out, start=1):
        if uid != expected:
            raise HilsimError(f"{where}: launch {expected} ({kernel}) has uid {uid}: the "
                              "simulator's uids must count the host's launches (device-side "
                              "launches are not supported)")
    return out


def stats_uids(log_text: str) -> list[int]:
    """The ``kernel_launch_uid`` of every statistics block, in log order (a block that
    reports kernels that ran together lists each)."""
    return [int(u) for m in _STATS_UIDS.finditer(log_text) for u in m.group(1).split()]


def cpu_per_launch(log_text: str, trace: Sequence[tuple[int, float]],
                   total_cpu_s: float, marks: re.Pattern[str] | None = None
                   ) -> tuple[np.ndarray, float]:
    """CPU seconds per launch of a fast-forwarded run (index ``uid - 1``) and the rest (the
    host: the simulator's start-up, PTX parsing, copies before the first launch).

    ``marks``: the line that starts a launch (default the patch's per-launch mode line;
    a program's ``hilsim-launch K`` marks for a run of the skip path, index = mark order).

    ``trace`` holds (log bytes, CPU seconds) points a fifth of a second apart
    (:attr:`hilsim.simmodel.gpgpusim.run.SimRun.cpu_trace`); the CPU spent between two
    points is shared evenly by the launches that ran in between (the one whose start line
    was the last printed at the first point, and every one started before the second), the
    CPU after the last point (up to ``total_cpu_s``, the process's whole time) likewise.
    A launch's line is printed as it starts, so a launch longer than the interval gets its
    own time to the interval, and short launches share theirs with their neighbours.
    """
    starts = np.array([m.start() for m in (marks or _LAUNCH).finditer(log_text)],
                      dtype=np.int64)
    if not trace:
        return np.zeros(len(starts), dtype=np.float64), float(total_cpu_s)
    offsets = np.array([0, *(p[0] for p in trace), len(log_text)], dtype=np.int64)
    cpu = np.array([0.0, *(p[1] for p in trace), 0.0], dtype=np.float64)
    cpu[-1] = max(float(total_cpu_s), float(cpu[-2]))
    cpu = np.maximum.accumulate(cpu)
    spent = np.diff(cpu)
    # the launch running at each point (index + 1; 0: before any launch, the host)
    owner = np.searchsorted(starts, offsets, side="right")
    first, last = owner[:-1], owner[1:]
    share = spent / (last - first + 1)
    ranges = np.zeros(len(starts) + 2, dtype=np.float64)
    np.add.at(ranges, first, share)
    np.add.at(ranges, last + 1, -share)
    per_owner = np.cumsum(ranges)[:-1]
    return per_owner[1:], float(per_owner[0])


_BLOCK_END = b"gpgpu_simulation_time"


def stop_after_launch(log: Path, uid: int) -> Callable[[], bool]:
    """A ``run_program`` stop condition: true once the log holds the whole statistics
    block of launch ``uid`` (its ``kernel_launch_uid`` line, then the block's closing
    ``gpgpu_simulation_time`` line). Reads only what was appended since the last call."""
    wanted = re.compile(rb"^kernel_launch_uid = (?:\d+ )*" + str(int(uid)).encode()
                        + rb"(?: \d+)* ?$", re.M)
    lines = AppendedLines(log)
    seen = [False]

    def stop() -> bool:
        whole = lines.poll()
        if not seen[0]:
            found = wanted.search(whole)
            if found is None:
                return False
            seen[0] = True
            whole = whole[found.end():]
        return _BLOCK_END in whole

    return stop


def check_fast_forward(log_text: str, launch_ids: Iterable[int] | np.ndarray,
                       where: str = "<sim log>") -> tuple[int, tuple[int, ...], tuple[str, ...]]:
    """Check a fast-forwarded log against its launch list; (launches, performance uids,
    kernel per launch).

    Refused, naming the uids: a listed launch the program never made (the list was made for
    another program or input, or is off by one), a launch that ran in the wrong mode, a
    statistics block for a launch that was not listed, a listed launch without one.
    """
    wanted = uids_of_launches(launch_ids)
    modes = launch_modes(log_text, where)
    launches = len(modes)
    beyond = wanted[wanted > launches]
    if beyond.size:
        raise HilsimError(
            f"{where}: the program made {launches} launches but the list names uid "
            f"{', '.join(map(str, beyond[:5].tolist()))}{' ...' if beyond.size > 5 else ''} "
            "(launch id = uid - 1): a list for another program or input?")
    listed = set(wanted.tolist())
    wrong = [uid for uid, _k, mode in modes if (mode == "performance") != (uid in listed)]
    if wrong:
        raise HilsimError(f"{where}: launch uid {wrong[0]} ran in the wrong mode "
                          f"({len(wrong)} launches differ from the list)")
    blocks = stats_uids(log_text)
    if sorted(blocks) != sorted(listed):
        extra = sorted(set(blocks) - listed)
        missing = sorted(listed - set(blocks))
        raise HilsimError(
            f"{where}: statistics blocks do not match the list: "
            + (f"blocks for unlisted uids {extra[:5]}" if extra else "")
            + ("; " if extra and missing else "")
            + (f"no block for listed uids {missing[:5]}" if missing else ""))
    return launches, tuple(sorted(listed)), tuple(k for _u, k, _m in modes)


def run_fast_forward(
    argv: Sequence[str | os.PathLike[str]],
    card: str | os.PathLike[str] | CardConfig,
    run_dir: str | os.PathLike[str],
    launch_ids: Iterable[int] | np.ndarray,
    *,
    options: Mapping[str, Any] | None = None,
    timeout_s: float = 600,
    build: SimBuild | None = None,
    copy_digests: bool = True,
    progress: Callable[[int, float], None] | None = None,
) -> FastForwardRun:
    """Run ``argv`` on ``card`` with ``launch_ids`` (hilsim ids) in performance mode and every
    other launch functionally; the checked run (:func:`check_fast_forward`).

    The list is written to ``run_dir/perf_launches.txt``; an empty ``launch_ids`` runs the
    whole program functionally. Failures are the one-line errors of
    :func:`~hilsim.simmodel.gpgpusim.run.run_program`.
    """
    ids = np.asarray(list(launch_ids) if not isinstance(launch_ids, np.ndarray) else launch_ids)
    build = build or find_build()
    if build is not None:  # (None: run_program says that no build was found)
        require_fast_forward_build(build)
    run_path = Path(run_dir).expanduser().resolve()
    run_path.mkdir(parents=True, exist_ok=True)
    list_path = write_launch_list(run_path / LIST_NAME, ids)
    run = run_program(argv, card, run_path, options=options, timeout_s=timeout_s, build=build,
                      env=fast_forward_env(list_path, copy_digests=copy_digests),
                      progress=progress)
    launches, perf, kernels = check_fast_forward(run.stdout, ids, str(run.log_path))
    return FastForwardRun(run, launches, perf, kernels)
