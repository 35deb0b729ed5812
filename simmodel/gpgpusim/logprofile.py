"""A GPGPU-Sim log parsed into a profile's tables: the simulator used as the profiler.

One log of a program run on GPGPU-Sim (PTX mode, kernels run one at a time) holds, per
kernel, the lines this module reads (see ``tests/data/gpgpusim/`` for real excerpts):

* ``GPGPU-Sim PTX: Kernel 'NAME' : regs=R, lmem=L, smem=S, cmem=C`` (ptxas info, printed
  once per kernel when the PTX is loaded) -> ``regs``, ``smem_static``;
* ``GPGPU-Sim PTX: pushing kernel 'NAME' to stream S, gridDim= (x,y,z) blockDim = (x,y,z)``
  -> the launch geometry and stream;
* the statistics block after the kernel (``kernel_name = ...``, ``gpu_sim_cycle``, ...), read
  by :func:`hilsim.simmodel.gpgpusim.simlog.parse_simlog`, which turns GPGPU-Sim's running totals
  (cache, DRAM and shader counters) into per-kernel differences;
* ``-gpgpu_clock_domains CORE:ICNT:L2:DRAM`` from the option dump at the top: the core clock
  that turns cycles into nanoseconds.

A workload may print its own marks (``hilsim/simmodel/gpgpusim/workloads/README.md``):
``hilsim-launch K NAME`` before launch K (placed into ``launch_id`` order; a sampled run
keeps its full-run ids in the manifest) and ``hilsim-region push NAME`` / ``pop NAME``
(NVTX-like ranges -> ``regions.parquet``, each launch's ``region`` is the innermost open
range's ``outer/inner`` path, as the nsys importer does).

Time line: a kernel starts where the previous one ended (``gpu_tot_sim_cycle`` minus its
own ``gpu_sim_cycle``); a region opens at the end of the kernel before its push mark.
Per-launch counters are named as Nsight Compute names them where the meaning matches
(:data:`NCU_METRICS`; ``docs/gpgpusim-metrics.md`` lists what maps and what does not).

This module is the reader of the ``gpgpusim-log`` profile format: the format registry
(:mod:`hilsim.formats`) names :func:`is_gpgpusim_log` and :func:`bundle_from_gpgpusim_log`
by their module path, so ``hilsim import`` and ``validate --sim`` load it only for a log
(``docs/formats.md``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from hilsim.simmodel.gpgpusim.simlog import parse_simlog, read_log_text

from hilsim.core.bundle import Bundle, default_manifest
from hilsim.core.demangle import demangle
from hilsim.core.errors import HilsimError
from hilsim.core.schema import REGION_COLUMNS, normalize_launches

if TYPE_CHECKING:
    from hilsim.formats.detect import Head

#: ``simlog`` column -> Nsight Compute metric of the same meaning (PKA Table 2 names where
#: the table has one; the others pair with ``hilsim.analyzer.validate.COUNTER_PAIRS``).
#: Units and what does not map: ``docs/gpgpusim-metrics.md``.
NCU_METRICS: dict[str, str] = {
    "cycles": "gpu__cycles_elapsed.max",
    "warp_instructions": "smsp__inst_executed.sum",
    "instructions": "smsp__thread_inst_executed.sum",
    "thread_global_local_loads": "smsp__inst_executed_op_global_ld.sum",
    "thread_global_local_stores": "smsp__inst_executed_op_global_st.sum",
    "l1d_accesses": "l1tex__t_sectors.sum",
    "l1d_misses": "l1tex__t_sectors_lookup_miss.sum",
    "l2_accesses": "lts__t_sectors.sum",
    "l2_misses": "lts__t_sectors_lookup_miss.sum",
    "global_read_requests": "lts__t_requests_srcunit_tex_op_read.sum",
    "global_write_requests": "lts__t_requests_srcunit_tex_op_write.sum",
    "dram_reads": "dram__sectors_read.sum",
    "dram_writes": "dram__sectors_write.sum",
    "occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "ctas": "launch__grid_size",
}
#: derived metrics (computed from the above and the launch facts)
DERIVED_METRICS: tuple[str, ...] = (
    "gpu__time_duration.sum",
    "smsp__thread_inst_executed_per_inst_executed.ratio",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "lts__t_sector_hit_rate.pct",
    "launch__block_size",
    "launch__registers_per_thread",
    "launch__shared_mem_per_block_static",
)
#: region nesting accepted from ``hilsim-region push`` marks (every path is stored whole,
#: so depth and path length bound the regions table; real NVTX ranges nest < 10 deep)
MAX_REGION_DEPTH = 64
MAX_REGION_PATH = 4096
#: a core clock above this (MHz) is not a clock domain of any GPU
MAX_CLOCK_MHZ = 100_000.0
#: bytes per DRAM access when the log names no bus width and burst length (QV100: 16 B x 2)
DRAM_ATOM_BYTES = 32
#: bytes in one Nsight Compute DRAM sector (``dram__sectors_*``)
SECTOR_BYTES = 32

_EVENT = re.compile(
    r"^(?:"
    r"hilsim-launch (?P<lid>\d+)\b.*"
    r"|hilsim-region (?P<rop>push|pop) ?(?P<rname>.*)"
    r"|GPGPU-Sim PTX: pushing kernel '(?P<pname>[^']+)' to stream (?P<stream>\d+), "
    r"gridDim= \((?P<gx>\d+),(?P<gy>\d+),(?P<gz>\d+)\) "
    r"blockDim = \((?P<bx>\d+),(?P<by>\d+),(?P<bz>\d+)\)\s*"
    r"|GPGPU-Sim PTX: Kernel '(?P<kname>[^']+)' : regs=(?P<regs>\d+), lmem=(?P<lmem>\d+), "
    r"smem=(?P<smem>\d+), cmem=(?P<cmem>\d+)\s*"
    r"|kernel_name = (?P<done>\S+)\s*"
    r"|-gpgpu_clock_domains\s+(?P<clocks>[\d.:]+)(?:\s+#.*)?\s*"
    r"|-gpgpu_n_clusters\s+(?P<clusters>\d+)(?:\s+#.*)?\s*"
    r"|-gpgpu_n_cores_per_cluster\s+(?P<cores>\d+)(?:\s+#.*)?\s*"
    r"|-gpgpu_dram_buswidth\s+(?P<busw>\d+)(?:\s+#.*)?\s*"
    r"|-gpgpu_dram_burst_length\s+(?P<bl>\d+)(?:\s+#.*)?\s*"
    r"|\s*\*\*\* GPGPU-Sim Simulator Version (?P<version>\S+).*"
    r")$",
    re.M | re.ASCII,
)
SNIFF_MARKERS: tuple[str, ...] = ("*** GPGPU-Sim Simulator Version", "GPGPU-Sim PTX: ")


#: how much of a file's head :func:`is_gpgpusim_log` searches for the markers
SNIFF_CHARS = 16384


def looks_like_gpgpusim_log(head: str) -> bool:
    """Whether the first KB of a file are a GPGPU-Sim log (its banner or PTX lines)."""
    return any(marker in head for marker in SNIFF_MARKERS)


def is_gpgpusim_log(head: Head) -> bool:
    """The ``gpgpusim-log`` format's sniff: text that is not JSON, with the simulator's
    banner or ``GPGPU-Sim PTX:`` lines in its first :data:`SNIFF_CHARS` characters."""
    return not head.is_json and looks_like_gpgpusim_log(head.text[:SNIFF_CHARS])


@dataclass
class SimLogProfile:
    """A parsed log: launches (bundle columns), metrics, regions and facts for the manifest."""

    launches: pd.DataFrame
    metrics: pd.DataFrame
    regions: pd.DataFrame | None
    facts: dict[str, Any]
    #: the per-kernel statistics they were made from
    #: (:func:`~hilsim.simmodel.gpgpusim.simlog.parse_simlog`)
    stats: pd.DataFrame | None = None


#: lines the host thread prints (:func:`unglue_host_lines`)
HOST_LINE_STARTS = ("hilsim-launch ", "hilsim-region ", "GPGPU-Sim PTX: pushing kernel ")


def unglue_host_lines(text: str) -> str:
    """``text`` with a line break before every host-thread line that follows the start of
    another line: the host thread prints its marks and launches while the simulation
    thread may be half-way through a line of the previous kernel's statistics (seen:
    ``LD_mem_lat_dist GPGPU-Sim PTX: ...``). ``str.find`` over the few such starts: the
    text is copied only when one is found."""
    glued: list[int] = []
    for start in HOST_LINE_STARTS:
        at = text.find(start)
        while at != -1:
            if at > 0 and text[at - 1] != "\n":
                glued.append(at)
            at = text.find(start, at + len(start))
    if not glued:
        return text
    glued.sort()
    cuts = [0, *glued, len(text)]
    return "\n".join(text[a:b] for a, b in zip(cuts[:-1], cuts[1:], strict=True))


def scan_log(text: str, where: str) -> dict[str, Any]:
    """One regex pass: geometry per pushed kernel, ptxas info, marks, options (host lines
    glued to a statistics line first put on their own, :func:`unglue_host_lines`)."""
    text = unglue_host_lines(text)
    pushed: list[tuple[Any, ...]] = []  # (name, stream, gx..bz, region path)
    resources: dict[str, tuple[int, int, int]] = {}
    regions: list[list[Any]] = []  # [name, path, depth, start_kernel, end_kernel]
    stack: list[int] = []
    done = 0
    opts: dict[str, str] = {}
    for m in _EVENT.finditer(text):
        if m.group("lid") is not None:
            continue  # launch marks: read by simlog.parse_simlog
        if m.group("pname") is not None:
            path = regions[stack[-1]][1] if stack else None
            pushed.append((m.group("pname"), int(m.group("stream")),
                           *(int(m.group(k)) for k in ("gx", "gy", "gz", "bx", "by", "bz")),
                           path))
        elif m.group("done") is not None:
            done += 1
        elif m.group("rop") is not None:
            name = m.group("rname").strip() or "(unnamed)"
            if m.group("rop") == "push":
                parent = regions[stack[-1]][1] + "/" if stack else ""
                if len(stack) >= MAX_REGION_DEPTH or len(parent) + len(name) > MAX_REGION_PATH:
                    line = text.count("\n", 0, m.start()) + 1
                    raise HilsimError(
                        f"{where}: line {line}: region {name[:40]!r} nested {len(stack) + 1} "
                        f"deep (path of {len(parent) + len(name)} characters): past "
                        f"{MAX_REGION_DEPTH} levels or {MAX_REGION_PATH} characters"
                    )
                regions.append([name, parent + name, len(stack), done, None])
                stack.append(len(regions) - 1)
            elif stack:
                regions[stack.pop()][4] = done
        elif m.group("kname") is not None:
            resources[m.group("kname")] = (int(m.group("regs")), int(m.group("smem")),
                                           int(m.group("lmem")))
        else:
            for key in ("clocks", "clusters", "cores", "busw", "bl", "version"):
                if m.group(key) is not None:
                    opts.setdefault(key, m.group(key))
    for index in stack:  # ranges still open when the log ends
        regions[index][4] = done
    return {"pushed": pushed, "resources": resources, "regions": regions, "options": opts}


def dram_atom_bytes(options: dict[str, str]) -> int:
    """Bytes one GPGPU-Sim DRAM request moves: ``-gpgpu_dram_buswidth`` (bytes per
    channel per beat) x ``-gpgpu_dram_burst_length`` from the log's option dump
    (:func:`scan_log`), :data:`DRAM_ATOM_BYTES` where the dump lacks them."""
    try:
        return int(options["busw"]) * int(options["bl"])
    except (KeyError, ValueError):
        return DRAM_ATOM_BYTES


def core_clock_mhz(options: dict[str, str], where: str, clock_mhz: float | None) -> float:
    """The core clock (MHz): ``clock_mhz`` when given, else the first field of the log's
    ``-gpgpu_clock_domains``; one line unless it is a frequency (0 < f <= 100 GHz)."""
    if clock_mhz is not None:
        text, shown = str(clock_mhz), f"--clock-mhz {clock_mhz}"
    else:
        clocks = options.get("clocks")
        if not clocks:
            raise HilsimError(
                f"{where}: no '-gpgpu_clock_domains' line (the simulator's option dump) to "
                "turn cycles into ns; pass the core clock (--clock-mhz)"
            )
        text, shown = clocks.split(":")[0], f"-gpgpu_clock_domains {clocks}"
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (math.isfinite(value) and 0 < value <= MAX_CLOCK_MHZ):
        raise HilsimError(
            f"{where}: {shown}: the core clock {text!r} is not a frequency in MHz "
            f"(0 < f <= {MAX_CLOCK_MHZ:g}); pass the core clock (--clock-mhz)"
        )
    return value


def parse_gpgpusim_log(
    text: str, where: str = "<gpgpusim log>", clock_mhz: float | None = None
) -> SimLogProfile:
    """Parse a whole GPGPU-Sim log into a bundle's tables (see the module docstring).

    Raises :class:`HilsimError` naming ``where`` for a log with no kernel, a truncated last
    kernel (from :func:`~hilsim.simmodel.gpgpusim.simlog.parse_simlog`), or kernels whose launch
    lines and statistics blocks disagree (concurrent kernels: not supported).
    """
    stats = parse_simlog(text, where, "cumulative")
    scan = scan_log(text, where)
    clock = core_clock_mhz(scan["options"], where, clock_mhz)
    n = len(stats)
    pushed = scan["pushed"]
    if len(pushed) < n:
        raise HilsimError(
            f"{where}: {n} kernel statistics blocks but {len(pushed)} 'pushing kernel' lines"
        )
    pushed = pushed[:n]
    geo = pd.DataFrame(pushed, columns=["pname", "stream", "grid_x", "grid_y", "grid_z",
                                        "block_x", "block_y", "block_z", "region"])
    names = stats["kernel"].astype(str).to_numpy()
    bad = np.flatnonzero(geo["pname"].to_numpy(dtype=object) != names)
    if len(bad):
        k = int(bad[0])
        raise HilsimError(
            f"{where}: kernel {k + 1} finished as {names[k]!r} but the launch at that place "
            f"is {geo['pname'].iloc[k]!r}: kernels ran concurrently (one launch at a time "
            "is needed; synchronise after each launch)"
        )
    cycles = stats["cycles"].to_numpy(np.float64)
    tot = stats["tot_cycles"].to_numpy(np.float64) if "tot_cycles" in stats else np.cumsum(cycles)
    ns_per_cycle = 1000.0 / clock
    res = scan["resources"]
    unique = list(dict.fromkeys(names.tolist()))
    pretty, _ = demangle(unique)
    pretty_of = dict(zip(unique, pretty, strict=True))
    frame = pd.DataFrame(
        {
            "name": [pretty_of[x] for x in names],
            "grid_x": geo["grid_x"], "grid_y": geo["grid_y"], "grid_z": geo["grid_z"],
            "block_x": geo["block_x"], "block_y": geo["block_y"], "block_z": geo["block_z"],
            "regs": [res.get(x, (np.nan,))[0] for x in names],
            "smem_static": [res.get(x, (np.nan, np.nan))[1] for x in names],
            "smem_dynamic": np.zeros(n, dtype=np.int64),
            "stream": geo["stream"],
            "device": np.zeros(n, dtype=np.int64),
            "start_ns": np.rint((tot - cycles) * ns_per_cycle).astype(np.int64),
            "duration_ns": np.rint(cycles * ns_per_cycle).astype(np.int64),
            "correlation_id": stats["uid"].astype("Int64") if "uid" in stats else None,
            "region": geo["region"],
        }
    )
    launch_ids = stats["launch_id"].to_numpy(np.int64) if "launch_id" in stats else None
    launches = normalize_launches(frame, where)  # start order == log order: ids 0..n-1
    metrics = _metrics(stats, launches, dram_atom_bytes(scan["options"]))
    facts: dict[str, Any] = {
        "core_clock_mhz": clock,
        "dram_request_bytes": dram_atom_bytes(scan["options"]),
        "simulator_version": scan["options"].get("version"),
        "total_cycles": float(cycles.sum()),
        "full_run_launch_ids": None if launch_ids is None else launch_ids.tolist(),
    }
    opts = scan["options"]
    if "clusters" in opts:
        facts["sm_count"] = int(opts["clusters"]) * int(opts.get("cores", "1"))
    regions = _regions(scan["regions"], tot, ns_per_cycle)
    return SimLogProfile(launches, metrics, regions, facts, stats)


def bundle_from_gpgpusim_log(
    path: str | Path, clock_mhz: float | None = None, card: str | None = None
) -> Bundle:
    """An in-memory bundle from one GPGPU-Sim log file (``hilsim import``, ``validate
    --sim``): the tables :func:`parse_gpgpusim_log` reads from the log, with the manifest
    of a simulated device and the simulator as its profiler."""
    source = Path(path)
    text = read_log_text(source)  # plain or gzip (shipped logs are sim.log.gz)
    parsed = parse_gpgpusim_log(text, str(source), clock_mhz)
    facts = parsed.facts
    device: dict[str, Any] = {
        "name": f"GPGPU-Sim {card}" if card else "GPGPU-Sim simulated GPU",
        "simulated": True,
        "max_sm_clock_mhz": facts["core_clock_mhz"],
    }
    if card:
        device["card"] = card
    if "sm_count" in facts:
        device["sm_count"] = facts["sm_count"]
    profiler: dict[str, Any] = {
        "name": "gpgpu-sim",
        "level": "light+detailed",
        "version": facts["simulator_version"],
        "file": source.name,
        "clock_mhz": facts["core_clock_mhz"],
        "total_cycles": facts["total_cycles"],
        "metrics": "per-kernel statistics; cumulative counters differenced (simlog)",
    }
    source_info: dict[str, Any] = {"files": [str(source)], "format": "gpgpusim-log"}
    if facts["full_run_launch_ids"] is not None:
        ids = facts["full_run_launch_ids"]
        if ids != list(range(len(ids))):
            source_info["full_run_launch_ids"] = ids
    manifest = default_manifest(device=device, profilers=[profiler], source=source_info)
    manifest["n_launches"] = len(parsed.launches)
    return Bundle(launches=parsed.launches, metrics=parsed.metrics, regions=parsed.regions,
                  manifest=manifest)


def _metrics(stats: pd.DataFrame, launches: pd.DataFrame, atom_bytes: int) -> pd.DataFrame:
    """Per-launch metrics under their Nsight Compute names; DRAM requests (``atom_bytes``
    each) counted in 32-byte sectors and bytes as Nsight Compute counts them."""
    out = pd.DataFrame({"launch_id": launches["launch_id"].to_numpy(np.int64)})
    for col, metric in NCU_METRICS.items():
        if col in stats.columns:
            values = stats[col].to_numpy(np.float64)
            if col in ("dram_reads", "dram_writes"):
                values = values * (atom_bytes / SECTOR_BYTES)
            if np.isfinite(values).any():
                out[metric] = values
    out["gpu__time_duration.sum"] = launches["duration_ns"].to_numpy(np.float64)
    warp = out.get("smsp__inst_executed.sum")
    if warp is not None and "smsp__thread_inst_executed.sum" in out:
        with np.errstate(divide="ignore", invalid="ignore"):
            out["smsp__thread_inst_executed_per_inst_executed.ratio"] = np.where(
                warp > 0, out["smsp__thread_inst_executed.sum"] / warp, np.nan)
    for sectors, nbytes in (("dram__sectors_read.sum", "dram__bytes_read.sum"),
                            ("dram__sectors_write.sum", "dram__bytes_write.sum")):
        if sectors in out:
            out[nbytes] = out[sectors] * SECTOR_BYTES
    if "l2_misses" in stats and "l2_accesses" in stats:
        acc = stats["l2_accesses"].to_numpy(np.float64)
        miss = stats["l2_misses"].to_numpy(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            out["lts__t_sector_hit_rate.pct"] = np.where(acc > 0, 100.0 * (1 - miss / acc),
                                                         np.nan)
    block = launches[["block_x", "block_y", "block_z"]].astype("float64").prod(axis=1)
    out["launch__block_size"] = block.to_numpy(np.float64)
    out["launch__registers_per_thread"] = launches["regs"].astype("float64").to_numpy()
    out["launch__shared_mem_per_block_static"] = launches["smem_static"].astype(
        "float64").to_numpy()
    if "launch__grid_size" not in out:
        grid = launches[["grid_x", "grid_y", "grid_z"]].astype("float64").prod(axis=1)
        out["launch__grid_size"] = grid.to_numpy(np.float64)
    return out


def _regions(rows: list[list[Any]], tot: np.ndarray, ns_per_cycle: float) -> pd.DataFrame | None:
    if not rows:
        return None
    ends = np.concatenate([[0.0], tot])  # time after k finished kernels
    start_k = np.array([r[3] for r in rows], dtype=np.int64)
    end_k = np.array([r[4] for r in rows], dtype=np.int64)
    frame = pd.DataFrame(
        {
            "region_id": np.arange(len(rows), dtype=np.int64),
            "name": [r[0] for r in rows],
            "path": [r[1] for r in rows],
            "depth": np.array([r[2] for r in rows], dtype=np.int64),
            "start_ns": np.rint(ends[start_k] * ns_per_cycle).astype(np.int64),
            "end_ns": np.rint(ends[end_k] * ns_per_cycle).astype(np.int64),
        }
    )
    return frame[list(REGION_COLUMNS)]


__all__ = [
    "NCU_METRICS",
    "SNIFF_MARKERS",
    "SimLogProfile",
    "bundle_from_gpgpusim_log",
    "core_clock_mhz",
    "dram_atom_bytes",
    "is_gpgpusim_log",
    "looks_like_gpgpusim_log",
    "parse_gpgpusim_log",
    "scan_log",
]
