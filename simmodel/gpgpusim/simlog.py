"""Read GPGPU-Sim / Accel-Sim simulation output (stdout logs) into a per-launch table.

After every kernel GPGPU-Sim prints a statistics block (``gpgpu_sim::print_stats``):

.. code-block:: text

    kernel_name = _Z6vecAddPKfS0_Pfi
    kernel_launch_uid = 1
    gpu_sim_cycle = 18803          <- this kernel only
    gpu_sim_insn = 15728640        <- this kernel only
    gpu_ipc =     836.4963
    gpu_tot_sim_cycle = 18803      <- cumulative since the start of the simulation
    gpu_tot_sim_insn = 15728640
    ...
    Total_core_cache_stats_breakdown[GLOBAL_ACC_R][HIT] = 0      (L1D, all SMs)
    total dram reads = 0
    total dram writes = 0
    L2_total_cache_accesses = 393216
    L2_cache_stats_breakdown[GLOBAL_ACC_R][HIT] = 262144
    ...

(see ``tests/data/simlogs/`` for real excerpts and their provenance).

**Per-kernel versus cumulative.** ``gpu_sim_cycle`` / ``gpu_sim_insn`` are per
kernel; ``gpu_tot_sim_cycle`` / ``gpu_tot_sim_insn`` are running totals. A block
that lacks the per-kernel line (older logs, grep excerpts) gets it as the
difference of consecutive ``gpu_tot_*`` values. The cache and DRAM counters
(``L2_*``, ``Total_core_cache_stats_breakdown``, ``L1D_total_*``, ``total dram
reads/writes``) are printed by GPGPU-Sim as totals since the simulation started
(the cache statistics objects are not cleared between kernels; Accel-Sim's
``get_stats.py`` likewise labels them *aggregate*), so with
``counters="cumulative"`` (default) the per-launch value is the difference to the
previous block. Exception: the stream-aware GPGPU-Sim 4.2 (its logs print
``kernel_stream_id``) prints the ``*_stats_breakdown[..]`` rows neither per kernel nor as
running totals (see ``_BREAKDOWN_COLUMNS``): only the first kernel keeps them. A
counter that decreases is reported as a one-line error that suggests
``counters="per-kernel"`` (for simulators patched to clear statistics).

A log whose last kernel block is cut off (no ``gpu_tot_sim_insn`` / no
``gpgpu_simulation_time`` / no ``exit detected`` after the last ``kernel_name``)
is reported as truncated, naming the file.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pandas as pd

from hilsim.core.errors import HilsimError
from hilsim.core.inputs import read_maybe_gzip

#: log key -> clear column name (counters); the per-kernel facts are handled apart
LOG_COUNTERS: dict[str, str] = {
    "L1D_total_cache_accesses": "l1d_accesses",
    "L1D_total_cache_misses": "l1d_misses",
    "Total_core_cache_stats_breakdown[GLOBAL_ACC_R][HIT]": "l1d_global_read_hits",
    "Total_core_cache_stats_breakdown[GLOBAL_ACC_R][MISS]": "l1d_global_read_misses",
    "Total_core_cache_stats_breakdown[GLOBAL_ACC_R][SECTOR_MISS]": "l1d_global_read_sector_misses",
    "Total_core_cache_stats_breakdown[GLOBAL_ACC_R][TOTAL_ACCESS]": "l1d_global_read_accesses",
    "Total_core_cache_stats_breakdown[GLOBAL_ACC_W][HIT]": "l1d_global_write_hits",
    "Total_core_cache_stats_breakdown[GLOBAL_ACC_W][MISS]": "l1d_global_write_misses",
    "Total_core_cache_stats_breakdown[GLOBAL_ACC_W][TOTAL_ACCESS]": "l1d_global_write_accesses",
    "L2_total_cache_accesses": "l2_accesses",
    "L2_total_cache_misses": "l2_misses",
    "L2_cache_stats_breakdown[GLOBAL_ACC_R][HIT]": "l2_global_read_hits",
    "L2_cache_stats_breakdown[GLOBAL_ACC_R][MISS]": "l2_global_read_misses",
    "L2_cache_stats_breakdown[GLOBAL_ACC_R][SECTOR_MISS]": "l2_global_read_sector_misses",
    "L2_cache_stats_breakdown[GLOBAL_ACC_R][TOTAL_ACCESS]": "l2_global_read_accesses",
    "L2_cache_stats_breakdown[GLOBAL_ACC_W][HIT]": "l2_global_write_hits",
    "L2_cache_stats_breakdown[GLOBAL_ACC_W][MISS]": "l2_global_write_misses",
    "L2_cache_stats_breakdown[GLOBAL_ACC_W][TOTAL_ACCESS]": "l2_global_write_accesses",
    "total dram reads": "dram_reads",
    "total dram writes": "dram_writes",
    # shader statistics (``shader_core_stats::print``), running totals like the above
    "gpgpu_n_tot_w_icount": "warp_instructions",
    "gpgpu_n_load_insn": "thread_global_local_loads",
    "gpgpu_n_store_insn": "thread_global_local_stores",
    "gpgpu_n_shmem_insn": "thread_shared_insts",
    "gpgpu_n_mem_read_global": "global_read_requests",
    "gpgpu_n_mem_write_global": "global_write_requests",
    "gpgpu_n_mem_read_local": "local_read_requests",
    "gpgpu_n_mem_write_local": "local_write_requests",
    "gpgpu_n_shmem_bkconflict": "shared_bank_conflicts",
    "gpu_tot_issued_cta": "ctas",
}

#: the ``*_stats_breakdown[TYPE][STATUS]`` rows. The stream-aware GPGPU-Sim 4.2 (its logs
#: print ``kernel_stream_id``) keeps them per stream key and prints the entry of the
#: kernel's key, which neither restarts per kernel nor accumulates over the run: in a real
#: log here (transformer_step, 29 kernels, all on stream 0) the GLOBAL_ACC_R + GLOBAL_ACC_W
#: rows of ``L2_cache_stats_breakdown`` equal the difference of ``L2_total_cache_accesses``
#: for kernels 1-3, then carry on from kernel 1 at kernel 4 (168 + 160 = 328) and restart at
#: kernel 5. Only the first kernel's rows are its own; later kernels get NaN there (the
#: ``*_total_*`` rows, ``total dram`` and the shader counters remain, all running totals).
_BREAKDOWN_COLUMNS = frozenset(v for k, v in LOG_COUNTERS.items() if "_breakdown[" in k)

_SCALARS = {
    "kernel_launch_uid": "uid",
    "gpu_sim_cycle": "cycles",
    "gpu_sim_insn": "instructions",
    "gpu_ipc": "ipc",
    "gpu_tot_sim_cycle": "tot_cycles",
    "gpu_tot_sim_insn": "tot_instructions",
    "gpu_occupancy": "occupancy_pct",
}

#: a workload's own mark, printed just before it issues launch K (see
#: ``hilsim/simmodel/gpgpusim/workloads/README.md``): maps sampled kernels back to launch ids
LAUNCH_MARK = "hilsim-launch "
#: the line a fast-forwarded run starts with (simulator patch 0002): every launch counts
#: in the uids, so a kernel's launch id is its uid minus one
FAST_FORWARD_LINE = re.compile(r"^GPGPU-Sim PTX: hilsim fast-forward: \d+ kernel launch uids",
                               re.M)

_LINE = re.compile(r"^\s*([A-Za-z_][\w\[\] ]*?)\s*=\s*(\S+)")
#: a launch mark's id: ASCII digits only (``str.isdigit`` also passes superscripts and other
#: scripts' digits, which ``int`` then refuses)
_MARK = re.compile(r"hilsim-launch +([0-9]+)(?:\s|$)", re.ASCII)
_INT64_LIMIT = 2**63
#: per-kernel facts that are counts: a value that is not a number is an error (not missing)
_COUNTS = frozenset({"kernel_launch_uid", "gpu_sim_cycle", "gpu_sim_insn", "gpu_tot_sim_cycle",
                     "gpu_tot_sim_insn"})
#: log key of each scalar column (for messages)
_KEY_OF = {column: key for key, column in _SCALARS.items()} | {
    column: key for key, column in LOG_COUNTERS.items()
}

_END_MARKERS = ("gpgpu_simulation_time", "GPGPU-Sim: *** exit detected ***")


def _launch_mark(digits: str, where: str, lineno: int) -> int:
    if len(digits) > 19 or int(digits) >= _INT64_LIMIT:
        raise HilsimError(
            f"{where}: line {lineno}: launch mark {digits[:24]}{'...' if len(digits) > 24 else ''}"
            " is not a launch id (past 2^63)"
        )
    return int(digits)


def _check_values(frame: pd.DataFrame, lines: np.ndarray, where: str) -> None:
    """One-line error at the first kernel whose statistics cannot be true, checked against
    each other: every value finite; ``kernel_launch_uid`` a positive integer below 2^63;
    ``gpu_sim_cycle`` > 0 and ``gpu_sim_insn`` >= 0; running totals that never decrease;
    a kernel's ``gpu_sim_cycle`` / ``gpu_sim_insn`` equal to the growth of
    ``gpu_tot_sim_cycle`` / ``gpu_tot_sim_insn`` since the kernel before (as in every real
    log; the first kernel's may not exceed the total); counters >= 0; no launch marked
    twice."""

    def fail(row: int, message: str) -> HilsimError:
        return HilsimError(
            f"{where}: kernel {row + 1} ({frame['kernel'].iloc[row]}, line "
            f"{int(lines[row])}): {message}"
        )

    def first(mask: np.ndarray) -> int | None:
        found = np.flatnonzero(mask)
        return int(found[0]) if found.size else None

    numeric = [c for c in frame.columns if c not in ("kernel", "launch_id")]
    for column in numeric:
        values = frame[column].to_numpy(dtype=np.float64)
        row = first(np.isinf(values))
        if row is not None:
            raise fail(row, f"{_KEY_OF.get(column, column)} = {values[row]}")
    rules = (
        ("uid", lambda v: (v < 1) | (v >= _INT64_LIMIT) | (v != np.floor(v)),
         "is not a launch uid (an integer from 1 to 2^63)"),
        ("cycles", lambda v: v <= 0, "a kernel runs for at least one cycle"),
        ("instructions", lambda v: v < 0, "is negative"),
        ("tot_cycles", lambda v: v < 0, "is negative"),
        ("tot_instructions", lambda v: v < 0, "is negative"),
    )
    for column, bad, why in rules:
        if column in frame:
            values = frame[column].to_numpy(dtype=np.float64)
            row = first(bad(np.nan_to_num(values, nan=1.0)))
            if row is not None:
                raise fail(row, f"{_KEY_OF[column]} = {values[row]:g}: {why}")
    for per, tot in (("cycles", "tot_cycles"), ("instructions", "tot_instructions")):
        if tot not in frame:
            continue
        total = frame[tot].to_numpy(dtype=np.float64)
        growth = np.diff(total)
        row = first(growth < 0)
        if row is not None:
            raise fail(row + 1, f"{_KEY_OF[tot]} decreases ({total[row]:g} -> "
                       f"{total[row + 1]:g}): not one simulation's log")
        if per not in frame:
            continue
        own = frame[per].to_numpy(dtype=np.float64)
        off = np.zeros(own.size, dtype=bool)  # (NaN, a missing line, compares False)
        off[1:] = np.abs(own[1:] - growth) > 0.5
        off[0] = own[0] > total[0] + 0.5
        row = first(off)
        if row is not None:
            since = "since the start" if row == 0 else "since the kernel before"
            grew = total[0] if row == 0 else growth[row - 1]
            raise fail(row, f"{_KEY_OF[per]} = {own[row]:g} but {_KEY_OF[tot]} grew by "
                       f"{grew:g} {since}: contradictory statistics")
    counters = [c for c in LOG_COUNTERS.values() if c in frame]
    if counters:
        values = frame[counters].to_numpy(dtype=np.float64)
        negative = np.argwhere(values < 0)
        if len(negative):
            row, col = negative[0]
            raise fail(int(row), f"{_KEY_OF[counters[col]]} = {values[row, col]:g} is negative")
    if "launch_id" in frame:
        ids = frame["launch_id"].to_numpy(dtype=np.float64)
        seen = pd.Series(ids).duplicated(keep="first").to_numpy() & ~np.isnan(ids)
        row = first(seen)
        if row is not None:
            before = int(np.flatnonzero(ids == ids[row])[0])
            raise fail(row, f"launch {int(ids[row])} is marked twice (also kernel {before + 1}):"
                       " a block repeated or logs of two runs joined")


_BUSWIDTH = re.compile(r"^-gpgpu_dram_buswidth\s+(\d+)\b", re.M)
_BURST = re.compile(r"^-gpgpu_dram_burst_length\s+(\d+)\b", re.M)
#: bytes of one DRAM request when the log's option dump does not say (16 B bus x burst 2)
DEFAULT_DRAM_REQUEST_BYTES = 32
#: bytes of a DRAM sector as Nsight Compute counts them (``dram__sectors_read.sum``)
DRAM_SECTOR_BYTES = 32
#: DRAM request counters and the same traffic in 32-byte sectors (added by parse_simlog)
DRAM_SECTOR_COLUMNS = {"dram_reads": "dram_read_sectors", "dram_writes": "dram_write_sectors"}


def dram_request_bytes(text: str) -> int:
    """Bytes one DRAM request of the simulated card moves: ``-gpgpu_dram_buswidth`` x
    ``-gpgpu_dram_burst_length`` of the log's option dump (:data:`DEFAULT_DRAM_REQUEST_BYTES`
    where the dump lacks them). GPGPU-Sim's ``total dram reads`` counts such requests."""
    width, burst = _BUSWIDTH.search(text), _BURST.search(text)
    if width is None or burst is None:
        return DEFAULT_DRAM_REQUEST_BYTES
    return int(width.group(1)) * int(burst.group(1))


def _number(text: str) -> float:
    try:
        return float(text.rstrip("%"))
    except ValueError:
        return float("nan")


def _scan_blocks(text: str, where: str) -> tuple[list[dict[str, object]], int, bool]:
    """(one dict per kernel statistics block, the line of the last end marker, whether the
    blocks carry per-stream breakdowns): the log read line by line once."""
    blocks: list[dict[str, object]] = []
    current: dict[str, object] | None = None
    last_end = -1
    per_stream = False
    marked: int | None = None
    for lineno, line in enumerate(text.splitlines(), start=1):
        if line.startswith("kernel_name") and "=" in line:
            current = {"kernel": line.split("=", 1)[1].strip(), "_line": lineno}
            if marked is not None:
                current["launch_id"] = marked
                marked = None
            blocks.append(current)
            continue
        if LAUNCH_MARK in line:  # (the host's mark may follow a statistics line's start)
            mark = _MARK.search(line)
            if mark:
                marked = _launch_mark(mark.group(1), where, lineno)
            continue
        if _END_MARKERS[0] in line or _END_MARKERS[1] in line:  # (no generator: 2.7M lines)
            last_end = lineno
        if current is None or "=" not in line:
            continue
        if not per_stream and line.startswith("kernel_stream_id"):
            per_stream = True
        match = _LINE.match(line)
        if not match:
            continue
        key, value = match.group(1).strip(), match.group(2)
        if key in _SCALARS and _SCALARS[key] not in current:
            number = _number(value)
            if number != number and key in _COUNTS:  # (NaN: the text is not a number)
                raise HilsimError(f"{where}: line {lineno}: {key} = {value[:40]!r} is not a number")
            current[_SCALARS[key]] = number
        elif key in LOG_COUNTERS and LOG_COUNTERS[key] not in current:
            current[LOG_COUNTERS[key]] = _number(value)
    return blocks, last_end, per_stream


def _check_complete(blocks: list[dict[str, object]], last_end: int, where: str) -> None:
    """One-line errors for a log without a kernel block or with its last one cut."""
    if not blocks:
        raise HilsimError(f"{where}: no kernel statistics block (no 'kernel_name = ' line)")
    last = blocks[-1]
    complete = ("tot_instructions" in last or "instructions" in last) and (
        "tot_cycles" in last or "cycles" in last
    )
    if not complete or last_end < int(last["_line"]):  # type: ignore[arg-type]
        raise HilsimError(
            f"{where}: truncated: the statistics block of kernel {len(blocks)} "
            f"({last['kernel']}, line {last['_line']}) is incomplete; the simulation "
            "did not finish or the log was cut"
        )


def _kernel_totals(frame: pd.DataFrame, lines: np.ndarray, where: str) -> None:
    """Each kernel's cycles and instructions (its own line, else the cumulative total's
    growth); a kernel with no cycles is an error."""
    for per, tot in (("cycles", "tot_cycles"), ("instructions", "tot_instructions")):
        if tot in frame:
            delta = frame[tot].diff().fillna(frame[tot])
            frame[per] = frame[per].fillna(delta) if per in frame else delta
    if "cycles" not in frame:
        raise HilsimError(f"{where}: no gpu_sim_cycle or gpu_tot_sim_cycle lines")
    missing = np.flatnonzero(~(frame["cycles"].to_numpy(dtype=np.float64) > 0))
    if missing.size:
        row = int(missing[0])
        raise HilsimError(
            f"{where}: kernel {row + 1} ({frame['kernel'].iloc[row]}, line {int(lines[row])}): "
            "no gpu_sim_cycle and no growth of gpu_tot_sim_cycle: its statistics block is "
            "incomplete"
        )


def _kernel_counters(frame: pd.DataFrame, per_stream: bool, counters: str,
                     where: str) -> list[str]:
    """The counter columns, per kernel (running totals differenced unless ``counters`` is
    ``per-kernel``; per-stream breakdowns kept for the first kernel only), in
    :data:`LOG_COUNTERS` order."""
    if per_stream:
        # only the first kernel's rows are its own (no other kernel has added to any key)
        dropped = [c for c in _BREAKDOWN_COLUMNS if c in frame.columns]
        frame.loc[frame.index[1:], dropped] = np.nan
    counter_cols = [c for c in LOG_COUNTERS.values() if c in frame.columns]
    running = [c for c in counter_cols if not (per_stream and c in _BREAKDOWN_COLUMNS)]
    per_kernel = [c for c in counter_cols if c not in running]
    if counters == "cumulative" and running:
        values = frame[running].to_numpy(dtype=float)
        prev = np.vstack([np.zeros((1, values.shape[1])), values[:-1]])
        delta = values - prev
        bad = np.argwhere(delta < 0)
        if len(bad):
            row, col = bad[0]
            raise HilsimError(
                f"{where}: counter {running[col]} decreases at kernel {row + 1} "
                f"({frame['kernel'].iloc[row]}): the simulator clears statistics per "
                "kernel; read it with counters='per-kernel'"
            )
        frame[running] = delta
    return [c for c in LOG_COUNTERS.values() if c in running or c in per_kernel]


def parse_simlog(text: str, where: str = "<sim log>", counters: str = "cumulative") -> pd.DataFrame:
    """Parse one simulation log into one row per simulated kernel, in simulation order.

    Columns: ``sim_launch`` (0.. in the order the kernels finished), ``launch_id``
    (only when the program printed ``hilsim-launch K`` before each launch: the launch
    index K in the full run, which places the kernels of a sampled run; in a
    fast-forwarded log, :data:`FAST_FORWARD_LINE`, the uid minus one), ``uid``
    (``kernel_launch_uid``, 1-based in GPGPU-Sim), ``kernel`` (the printed name,
    mangled as the simulator prints it), ``cycles`` and ``instructions`` (this
    kernel), ``ipc``, ``tot_cycles`` (cumulative), ``occupancy_pct`` (per kernel; NaN
    unless the simulator collects it, i.e. with ``-power_simulation_enabled 1``), then one
    column per counter of
    :data:`LOG_COUNTERS` found in the log (per kernel, see the module docstring), and the
    DRAM requests in 32-byte sectors (:data:`DRAM_SECTOR_COLUMNS`, request size from the
    option dump: :func:`dram_request_bytes`).

    Raises :class:`HilsimError` naming ``where`` when the log has no kernel block,
    when the last block is truncated, or when a cumulative counter decreases.
    """
    if counters not in ("cumulative", "per-kernel"):
        raise HilsimError(f"{where}: counters must be 'cumulative' or 'per-kernel'")
    blocks, last_end, per_stream = _scan_blocks(text, where)
    _check_complete(blocks, last_end, where)
    frame = pd.DataFrame(blocks)
    lines = frame.pop("_line").to_numpy(dtype=np.int64)
    _check_values(frame, lines, where)
    frame.insert(0, "sim_launch", np.arange(len(frame), dtype=np.int64))
    _kernel_totals(frame, lines, where)
    counter_cols = _kernel_counters(frame, per_stream, counters, where)
    ordered = ["sim_launch", "launch_id", "uid", "kernel", "cycles", "instructions", "ipc",
               "tot_cycles", "occupancy_pct"]
    ordered = [c for c in ordered if c in frame.columns]
    frame = frame[ordered + counter_cols]
    if "launch_id" in frame:
        if frame["launch_id"].isna().any():
            row = int(np.flatnonzero(frame["launch_id"].isna().to_numpy())[0])
            raise HilsimError(
                f"{where}: kernel {row + 1} ({frame['kernel'].iloc[row]}) has no "
                f"'{LAUNCH_MARK.strip()} K' mark before it while other kernels have one"
            )
        frame["launch_id"] = frame["launch_id"].astype(np.int64)
    elif "uid" in frame and FAST_FORWARD_LINE.search(text):
        frame.insert(1, "launch_id", frame["uid"].to_numpy(np.int64) - 1)
    for col in ("uid",):
        if col in frame:
            frame[col] = frame[col].astype("Int64")
    frame["kernel"] = frame["kernel"].astype(str)
    if any(c in frame for c in DRAM_SECTOR_COLUMNS):
        scale = dram_request_bytes(text) / DRAM_SECTOR_BYTES
        for requests, sectors in DRAM_SECTOR_COLUMNS.items():
            if requests in frame:
                frame[sectors] = frame[requests] * scale
    return frame.reset_index(drop=True)


#: the banner Accel-Sim's trace-driven front end prints first (GPGPU-Sim's own follows it)
ACCELSIM_BANNER = "Accel-Sim [build"


def simulator_name(text: str) -> str:
    """``"Accel-Sim"`` for a log whose first lines carry Accel-Sim's banner, else
    ``"GPGPU-Sim"`` (a program run on GPGPU-Sim directly, as ``hilsim simulate`` does)."""
    return "Accel-Sim" if ACCELSIM_BANNER in text[:4096] else "GPGPU-Sim"


def read_log_text(path: str | os.PathLike[str]) -> str:
    """The text of a simulation log, plain or gzip-compressed (``*.gz``, or the gzip magic).

    Shipped logs are compressed (``sim.log.gz``): GPGPU-Sim's option dump and statistics
    compress about 20x. Read by :func:`hilsim.core.inputs.read_maybe_gzip`: regular files
    only (a FIFO or ``/dev/zero`` is refused), inflated at most ``max_decompression_ratio``
    times. Errors name the file in one line.
    """
    raw = read_maybe_gzip(path, "a simulation log")  # regular files, inflation guarded
    return raw.decode("utf-8", errors="replace")


def is_log_file(path: Path) -> bool:
    """Whether a file in a log folder is a simulation log (``*.log``, ``*.log.gz``, ``*.o*``)."""
    name = path.name
    return name.endswith((".log", ".log.gz")) or path.suffix.startswith(".o")


def read_simlog(path: str | os.PathLike[str], counters: str = "cumulative") -> pd.DataFrame:
    """Read one log file, plain or gzip (see :func:`parse_simlog`); errors name the file."""
    p = Path(path)
    return parse_simlog(read_log_text(p), str(p), counters)


def read_simlogs(paths: list[str | os.PathLike[str]] | tuple, counters: str = "cumulative"):
    """Read several logs (one per simulated kernel or one per batch) into one table.

    Files are taken in the order given (a folder contributes its ``*.log``/``*.log.gz``/
    ``*.o*`` files sorted by name); ``sim_launch`` numbers the kernels across all files,
    ``log`` names the file each came from and ``simulator`` the simulator that wrote it
    (:func:`simulator_name`).
    """
    files: list[Path] = []
    for item in paths:
        p = Path(item)
        if p.is_dir():
            found = sorted(f for f in p.iterdir() if f.is_file() and is_log_file(f))
            if not found:
                raise HilsimError(
                    f"{p}: no *.log, *.log.gz or *.o* simulation logs in the folder")
            files.extend(found)
        else:
            files.append(p)
    if not files:
        raise HilsimError("no simulation logs given")
    frames = []
    for f in files:
        text = read_log_text(f)
        frame = parse_simlog(text, str(f), counters)
        frame.insert(1, "log", f.name)
        frame["simulator"] = simulator_name(text)
        frames.append(frame)
    out = pd.concat(frames, ignore_index=True)
    out["sim_launch"] = np.arange(len(out), dtype=np.int64)
    return out


#: line starts :func:`slim_log` keeps besides the statistics keys (what the readers use)
_SLIM_PREFIXES: tuple[str, ...] = (
    "kernel_name", "kernel_stream_id", LAUNCH_MARK, "hilsim-region ", "-gpgpu_",
    "GPGPU-Sim PTX: pushing kernel '", "GPGPU-Sim PTX: Kernel '", "GPGPU-Sim: *** exit",
    "gpgpu_simulation_time", "*** GPGPU-Sim Simulator Version", ACCELSIM_BANNER,
)


def slim_log(text: str) -> str:
    """Only the lines hilsim reads from a GPGPU-Sim log, in order (for shipped examples).

    Kept: the option dump (``-gpgpu_*``), the simulator version, the PTX kernel and launch
    lines, the workload's ``hilsim-*`` marks, each statistics block's ``kernel_name`` and
    the keys of :data:`LOG_COUNTERS` and the per-kernel scalars, and the end markers.
    Dropped: per-DRAM-channel, per-cache and memory-latency tables (about 95% of a
    log). :func:`parse_simlog` and the bundle importer read the result exactly as the full
    log (a test checks it).
    """
    keys = set(LOG_COUNTERS) | set(_SCALARS)
    kept = []
    for line in text.splitlines():
        stripped = line.lstrip()
        if stripped.startswith(_SLIM_PREFIXES) or any(m in line for m in _END_MARKERS):
            kept.append(line)
            continue
        match = _LINE.match(line)
        if match and match.group(1).strip() in keys:
            kept.append(line)
    return "\n".join(kept) + "\n"
