"""Per-window IPC of simulated launches from GPGPU-Sim's own periodic output (PKA §3.2 input).

GPGPU-Sim prints nothing per window to stdout in a release build: its ``LIVENESS`` line is
compiled only with ``TRACE=1`` and is throttled by wall time. What it does write every
``F`` cycles (``-gpgpu_runtime_stat F``, the sampling frequency of ``gpgpu_sim::cycle`` in
``src/gpgpu-sim/gpu-sim.cc``) is the AerialVision log, when ``-visualizer_enabled 1``: a
gzip file ``gpgpusim_visualizer__<date>.log.gz`` in the run folder
(``src/gpgpu-sim/visualizer.cc``) holding, per sample, among others::

    ShdrCTACount: 8 8 8 8        CTAs resident on each SM at the sample
    ctas_completed: 1            CTAs finished since the previous sample (shader.cc resets it)
    globalcyclecount: 8000       gpu_sim_cycle: cycles of the running kernel so far
    globalinsncount: 1523360     gpu_sim_insn: its instructions so far
    globaltotinsncount: 0        gpu_tot_sim_insn: instructions of the kernels before it

:func:`read_timelines` turns one run folder (this file plus ``sim.log``, whose statistics
give every kernel's final cycles, instructions and CTAs and whose ``hilsim-launch K`` marks
give launch ids) into one :class:`hilsim.simmodel.pkp.IpcTimeline` per launch:

* samples belong to the kernel whose ``gpu_tot_sim_insn`` before it equals
  ``globaltotinsncount`` (exact: the running total only grows);
* windows are the differences of consecutive samples, plus the last stretch from the last
  sample to the kernel's end (from ``sim.log``); a kernel shorter than ``F`` is one window;
* ``ctas_completed`` is cleared only when printed, so CTAs that finish after a kernel's last
  sample are counted in the next sample, of a later kernel: they are moved back (the later
  kernel's first window loses them, the earlier kernel's last window gets them), using each
  kernel's CTA count from ``sim.log``;
* CTAs per wave = the most CTAs resident at any sample of the kernel (``ShdrCTACount``
  summed over SMs), at least 1;
* ``total_instructions`` = the kernel's ``gpu_sim_insn``: a trace-driven simulator knows it
  before simulating (PKA runs on Accel-Sim traces); it lets a grid that fits in one wave be
  projected at stability.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from hilsim.simmodel.pkp import IpcTimeline

from hilsim.core.errors import HilsimError

#: the file GPGPU-Sim names when ``-visualizer_outputfile`` is not given
VISUALIZER_GLOB = "gpgpusim_visualizer_*.log.gz"
#: options a run needs for :func:`read_timelines` (sample every 500 cycles)
VISUALIZER_OPTIONS: dict[str, str] = {"-visualizer_enabled": "1", "-gpgpu_runtime_stat": "500"}

_KEYS = ("ShdrCTACount", "ctas_completed", "globalcyclecount", "globalinsncount",
         "globaltotinsncount")


def find_visualizer_log(folder: Path) -> Path:
    """The visualizer log of a run folder (or of a ``hilsim simulate`` folder's ``run/``)."""
    for where in (folder, folder / "run"):
        found = sorted(where.glob(VISUALIZER_GLOB)) if where.is_dir() else []
        if len(found) > 1:
            raise HilsimError(f"{where}: {len(found)} visualizer logs; keep one run per folder")
        if found:
            return found[0]
    raise HilsimError(
        f"{folder}: no {VISUALIZER_GLOB}: run the simulation with "
        + " ".join(f"-O {k}={v}" for k, v in VISUALIZER_OPTIONS.items())
    )


def read_samples(path: Path) -> dict[str, np.ndarray]:
    """Every sample of a visualizer log as arrays (cycles, insn, tot_insn, ctas_done, resident).

    One line error naming the file for a damaged gzip, a sample missing a field or a log
    without samples.
    """
    # lazy: the simulator-log reader loads only when a log is read (`hilsim plan` imports
    # this module through the library facade and reads none)
    from hilsim.simmodel.gpgpusim.simlog import read_log_text

    text = read_log_text(path)  # plain or gzip; one-line errors naming the file
    rows: list[tuple[int, int, int, int, int]] = []
    current: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        key, sep, value = line.partition(":")
        if not sep or key not in _KEYS:
            continue
        current[key] = value
        if key == "globaltotinsncount":
            try:
                resident = sum(int(x) for x in current.get("ShdrCTACount", "").split())
                rows.append((int(current["globalcyclecount"]), int(current["globalinsncount"]),
                             int(value), int(current["ctas_completed"]), resident))
            except (KeyError, ValueError):
                raise HilsimError(
                    f"{path}: line {number}: sample without a readable "
                    "globalcyclecount/globalinsncount/ctas_completed"
                ) from None
            current = {}
    if not rows:
        raise HilsimError(
            f"{path}: no visualizer samples (globalcyclecount ... globaltotinsncount): not an "
            "AerialVision log of a run with -visualizer_enabled 1"
        )
    table = np.array(rows, dtype=np.int64).reshape(-1, 5)
    return {"cycles": table[:, 0], "insn": table[:, 1], "tot_insn": table[:, 2],
            "ctas_done": table[:, 3], "resident": table[:, 4]}


def read_timelines(run: str | os.PathLike[str]) -> dict[int, IpcTimeline]:
    """``{launch_id: IpcTimeline}`` of every kernel of a run folder (see the module doc).

    ``run``: a folder holding ``sim.log`` (or ``sampled.log``) and the visualizer log (a
    ``hilsim simulate`` output folder works: its ``run/`` is searched), or the log itself.
    """
    from hilsim.simmodel.gpgpusim.simlog import read_simlog  # lazy: see read_samples

    path = Path(run)
    if path.is_dir():
        logs = [p for p in (path / "sim.log", path / "sampled.log", path / "run" / "sim.log",
                            path / "sim.log.gz") if p.is_file()]
        if not logs:
            raise HilsimError(f"{path}: no sim.log or sampled.log in the folder")
        log, folder = logs[0], path
    else:
        log, folder = path, path.parent
    stats = read_simlog(log)
    samples = read_samples(find_visualizer_log(folder))
    if "launch_id" not in stats.columns:
        raise HilsimError(f"{log}: no 'hilsim-launch K' marks: launch ids unknown")
    for col in ("instructions", "ctas"):
        if col not in stats.columns or stats[col].isna().any():
            raise HilsimError(f"{log}: kernels without {col}: not a complete GPGPU-Sim log")
    order = np.argsort(samples["tot_insn"], kind="stable")
    keys = samples["tot_insn"][order]
    out: dict[int, IpcTimeline] = {}
    pending = 0  # CTAs of earlier kernels counted in the next sample
    # gpu_tot_sim_insn before each kernel: the instructions of the kernels before it
    befores = np.cumsum(stats["instructions"].to_numpy(np.int64)) - stats[
        "instructions"].to_numpy(np.int64)
    check_coverage(samples, stats, befores, log)
    for row, before in zip(stats.itertuples(index=False), befores.tolist(), strict=True):
        cycles, insn, ctas = int(row.cycles), int(row.instructions), int(row.ctas)
        lo, hi = np.searchsorted(keys, [before, before + 1])
        mine = np.sort(order[lo:hi])
        s_cycles = samples["cycles"][mine].astype(np.float64)
        s_insn = samples["insn"][mine].astype(np.float64)
        done = samples["ctas_done"][mine].copy()
        if done.size:
            done[0] -= min(pending, int(done[0]))
            pending = 0
        done = np.diff(np.minimum(np.cumsum(done), ctas), prepend=0)
        if s_cycles.size and s_cycles[-1] >= cycles:  # a sample at the kernel's last cycle
            s_cycles[-1], s_insn[-1] = cycles, insn
            ends, insn_ends = s_cycles, s_insn
            done[-1] += ctas - int(done.sum())
            window_done = done
        else:
            ends, insn_ends = np.append(s_cycles, cycles), np.append(s_insn, insn)
            window_done = np.append(done, ctas - int(done.sum()))
        # CTAs finishing after the kernel's last sample are counted in a later sample
        pending += ctas - int(done.sum()) if s_cycles.size else ctas
        window_cycles = np.diff(ends, prepend=0.0)
        window_insn = np.diff(insn_ends, prepend=0.0)
        if (window_cycles <= 0).any() or (window_insn < 0).any():
            raise HilsimError(
                f"{log}: launch {int(row.launch_id)}: visualizer samples out of order "
                "(cycles or instructions decrease)"
            )
        resident = samples["resident"][mine]
        wave = int(resident.max()) if resident.size else ctas
        out[int(row.launch_id)] = IpcTimeline(
            cycles=window_cycles, instructions=window_insn, ctas_finished=window_done,
            total_ctas=max(ctas, 1), ctas_per_wave=max(min(wave, ctas), 1),
            total_instructions=float(insn), kernel=str(row.kernel),
        )
    return out


def check_coverage(samples: dict[str, np.ndarray], stats, befores: np.ndarray,
                   log: Path) -> None:
    """One line unless the visualizer samples belong to the run of ``log`` and cover it.

    Every sample's ``globaltotinsncount`` must be the instructions before one of the log's
    kernels (else the two files are of different runs), and a kernel of ``cycles`` gets
    about ``cycles // F`` samples (``F``, the sampling period, read from the spacing of
    consecutive samples of one kernel): one with two or more periods and fewer than
    ``cycles // F - 1`` samples means the visualizer log was cut.
    """
    keys = samples["tot_insn"]
    known = np.isin(keys, befores)
    if not known.all():
        first = int(np.flatnonzero(~known)[0])
        raise HilsimError(
            f"{log}: visualizer sample {first + 1} (globaltotinsncount {int(keys[first])}) "
            "matches no kernel of the log: the visualizer log is of another run"
        )
    order = np.lexsort((samples["cycles"], keys))
    same = np.diff(keys[order]) == 0
    gaps = np.diff(samples["cycles"][order])[same]
    gaps = gaps[gaps > 0]
    if gaps.size == 0:
        return
    period = float(np.median(gaps))
    counts = np.searchsorted(np.sort(keys), befores, side="right") - np.searchsorted(
        np.sort(keys), befores, side="left")
    expected = np.floor(stats["cycles"].to_numpy(np.float64) / period)
    short = np.flatnonzero((expected >= 2) & (counts < expected - 1))
    if short.size:
        k = int(short[0])
        raise HilsimError(
            f"{log}: the visualizer log holds {int(counts[k])} samples of kernel {k + 1} "
            f"({stats['kernel'].iloc[k]}), whose {int(stats['cycles'].iloc[k])} cycles give "
            f"{int(expected[k])} at one every {period:g} cycles: the visualizer log was cut"
        )


__all__ = ["VISUALIZER_OPTIONS", "check_coverage", "find_visualizer_log", "read_samples",
           "read_timelines", "slim_visualizer"]


def slim_visualizer(text: str) -> str:
    """Only the sample lines :func:`read_samples` reads (for shipped examples; ~2% of it)."""
    keep = tuple(f"{k}:" for k in _KEYS)
    return "\n".join(line for line in text.splitlines() if line.startswith(keep)) + "\n"
