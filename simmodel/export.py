"""Export a sampling plan to Accel-Sim's trace-driven front end, and map results back.

Accel-Sim's NVBit tracer (``util/tracer_nvbit``) writes one ``kernel-<N>.trace``
per launch, ``N`` counting the traced process's launches from 1 in launch order
(the trace header repeats it as ``-kernel id = N`` and names the kernel in
``-kernel name = ...``), plus a ``kernelslist`` that the post-processor turns into
``kernelslist.g``: one command per line, ``MemcpyHtoD,<addr>,<bytes>`` or
``kernel-<N>.traceg`` (``.traceg.xz`` when compressed). The trace-driven simulator
(``accel-sim.out -trace LIST``) reads a line as a kernel only if it starts with
``kernel`` and opens it as ``<folder of LIST>/<line>``: a sampled list therefore
lives in the traces folder, beside the tracer's full ``kernelslist.g``.

**Launch ids to trace files.** hilsim's ``launch_id`` counts the profiled launches
from 0 in start order, so with the tracer started at the same first launch
``launch_id`` ``i`` is ``kernel-<i + first_trace_id>`` (``first_trace_id=1``). If
the tracer skipped launches (``DYNAMIC_KERNEL_LIMIT_START``) or the profile was
trimmed, pass the trace id of launch 0 as ``first_trace_id``.

:func:`write_kernelslist` writes the sampled list (sampled launches only, in launch
order) and a weights CSV beside it (launch id, trace file, weight, cluster, kernel
name), atomically. Given the traces folder it keeps the full list's ``MemcpyHtoD``
lines before the sampled kernels that follow them (so memory is filled as in the
full run), takes each trace's file name from the full list, and reads every sampled
trace's header: a missing trace, a ``-kernel id`` other than the expected one, or a
kernel name that disagrees with the profile is a one-line error, so an off-by-one
``first_trace_id`` or a trace of another run cannot go unnoticed.

**Warm-up** (:class:`hilsim.core.plan.Warmup`, the plan's ``warmup``): with
``preceding:K`` the list also holds the ``K`` launches before each sample (windows of
neighbouring samples merged, each launch once), marked ``warmup`` with weight 0 in the
weights CSV; their cycles are discarded. With ``l2-fill`` the full list's ``MemcpyHtoD``
lines fill the L2 when the config sets ``-gpgpu_perf_sim_memcpy 1`` (Accel-Sim replays them
through GPGPU-Sim's ``perf_memcpy_to_gpu``): :func:`warmup_note` says so. The cold bound
(``cold-bound``, ``auto``) needs a second run chosen from the first one's misses: that is
``hilsim simulate``'s job on GPGPU-Sim, not an exported list's.

:func:`match_sim_results` pairs the simulated kernels (in list order, i.e. ascending
``launch_id``, warm-up launches included) with the plan's samples and checks their names.
"""

from __future__ import annotations

import io
import lzma
import os
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
from hilsim.simmodel.gpgpusim.listrun import check_simulated_names, names_disagree
from hilsim.simmodel.gpgpusim.warmup import L2_FILL_OPTION

from hilsim.core.errors import HilsimError
from hilsim.core.files import write_text_atomic
from hilsim.core.plan import Plan, Warmup, warmup_for, warmup_launches

#: the tracer's full list in a traces folder
FULL_LIST = "kernelslist.g"
_KERNEL_ENTRY = re.compile(r"^kernel-(\d+)\.trace(g)?(\.xz)?$")
#: header lines read from each trace before giving up on finding the kernel facts
_HEADER_LINES = 64


def trace_file(launch_id: int, first_trace_id: int = 1) -> str:
    """Trace file name of a launch (``kernel-<launch_id + first_trace_id>.traceg``)."""
    return f"kernel-{int(launch_id) + int(first_trace_id)}.traceg"


def sampled_launches(plan: Plan, first_trace_id: int = 1) -> pd.DataFrame:
    """The plan's samples in simulation (launch) order with their trace file names."""
    samples = plan.samples.sort_values("launch_id", kind="stable").reset_index(drop=True)
    return pd.DataFrame(
        {
            "launch_id": samples["launch_id"].to_numpy(np.int64),
            "trace_file": [trace_file(i, first_trace_id) for i in samples["launch_id"]],
            "weight": samples["weight"].to_numpy(float),
            "cluster": samples["cluster"].to_numpy(np.int64),
            "name": samples["name"].astype(str).to_numpy()
            if "name" in samples
            else np.full(len(samples), "", dtype=object),
        }
    )


def listed_launches(plan: Plan, first_trace_id: int = 1) -> pd.DataFrame:
    """What the exported list simulates, in order: the samples and, with a ``preceding``
    warm-up, the launches before each (``role`` ``warmup``, weight 0, no name: the profile
    names them, the plan does not)."""
    table = sampled_launches(plan, first_trace_id)
    table["role"] = "sample"
    k = plan.warmup.preceding if plan.warmup is not None else 0
    if k <= 0:
        return table
    every, is_sample = warmup_launches(table["launch_id"].to_numpy(np.int64), k)
    extra = every[~is_sample]
    warm = pd.DataFrame({
        "launch_id": extra,
        "trace_file": [trace_file(i, first_trace_id) for i in extra],
        "weight": 0.0,
        "cluster": -1,
        "name": "",
        "role": "warmup",
    })
    return (pd.concat([table, warm], ignore_index=True)
            .sort_values("launch_id", kind="stable").reset_index(drop=True))


def warmup_note(warmup: Warmup | None) -> str:
    """What the Accel-Sim run of an exported list must do for the plan's warm-up."""
    if warmup is None or warmup.label == "none":
        return "no warm-up: every sample starts with the caches the previous one left"
    parts = []
    if warmup.preceding:
        parts.append(f"the list holds the {warmup.preceding} launches before each sample "
                     "(weight 0 in the weights CSV: their cycles are discarded)")
    if warmup.l2_fill:
        parts.append(f"run it with {L2_FILL_OPTION} 1 so the MemcpyHtoD lines fill the L2")
    if warmup.cold_bound:
        parts.append("the cold bound (a second run of the samples the warm run shows warmer "
                     "than the profile) is not exported: `hilsim simulate` runs it on "
                     "GPGPU-Sim")
    return "; ".join(parts)


def export_warmup(plan: Plan, warmup: Warmup | str | None) -> Plan:
    """``plan`` with the warm-up to export (``--warmup``, read as ``hilsim simulate``
    reads it: :func:`hilsim.core.plan.warmup_for`; else the plan's). The cold bound
    (``cold-bound``, ``auto``) is refused: it is chosen from a first run's misses, which
    ``hilsim simulate`` does on GPGPU-Sim."""
    spec = warmup_for(plan, warmup)
    if spec is not None and (spec.cold_bound or spec.auto):
        raise HilsimError(
            f"export: warm-up {spec.label}: the cold bound is chosen from a first "
            "run's misses, which `hilsim simulate` does on GPGPU-Sim; export "
            "l2-fill+preceding:K for Accel-Sim"
        )
    return plan if spec is plan.warmup else replace(plan, warmup=spec)


def weights_path(list_path: str | os.PathLike[str]) -> Path:
    """The weights CSV written beside a sampled list (``X.g`` -> ``X.weights.csv``)."""
    p = Path(list_path)
    return p.with_name((p.stem if p.suffix == ".g" else p.name) + ".weights.csv")


def trace_header(path: str | os.PathLike[str]) -> dict[str, str]:
    """``-key = value`` lines at the top of an Accel-Sim trace (``.traceg``, ``.xz`` too).

    Reads at most :data:`_HEADER_LINES` lines, stopping at the first ``#BEGIN_TB``.
    """
    p = Path(path)
    opener = lzma.open if p.suffix == ".xz" else open
    header: dict[str, str] = {}
    try:
        with opener(p, "rt", encoding="utf-8", errors="replace") as handle:
            for _, line in zip(range(_HEADER_LINES), handle, strict=False):
                if line.startswith("#BEGIN_TB"):
                    break
                if line.startswith("-") and "=" in line:
                    key, value = line[1:].split("=", 1)
                    header[key.strip()] = value.strip()
    except FileNotFoundError:
        raise HilsimError(f"{p}: no such trace file") from None
    except (OSError, lzma.LZMAError) as exc:
        raise HilsimError(f"{p}: unreadable trace ({exc})") from None
    return header


def _full_list_entries(full_list: Path) -> list[str]:
    try:
        return [ln.strip() for ln in full_list.read_text().splitlines() if ln.strip()]
    except FileNotFoundError:
        raise HilsimError(
            f"{full_list}: no such kernelslist (the tracer's post-processing writes it)"
        ) from None


def _from_full_list(table: pd.DataFrame, full_list: Path, first_trace_id: int) -> list[str]:
    """Sampled list lines from the tracer's full list; fills ``table['trace_file']``."""
    wanted = dict(zip(table["launch_id"] + first_trace_id, table.index, strict=True))
    lines: list[str] = []
    pending: list[str] = []
    for entry in _full_list_entries(full_list):
        if entry.startswith("Memcpy"):
            pending.append(entry)
            continue
        match = _KERNEL_ENTRY.match(entry)
        if match is None:
            continue  # other commands (e.g. MemcpyDtoH) are not replayed
        row = wanted.pop(int(match.group(1)), None)
        if row is not None:
            lines.extend(pending)
            pending = []
            lines.append(entry)
            table.loc[row, "trace_file"] = entry
    if wanted:
        first = min(wanted)
        raise HilsimError(
            f"{full_list}: lists no kernel-{first}.traceg for launch {first - first_trace_id} "
            f"({len(wanted)} sampled launches missing): the traces do not cover the profiled "
            "launches or first_trace_id is wrong"
        )
    return lines


def _check_trace_headers(table: pd.DataFrame, folder: Path, first_trace_id: int) -> None:
    """Every sampled trace exists, has the expected ``-kernel id`` and an agreeing name."""
    names = []
    for row in table.itertuples(index=False):  # one file per sampled launch, not per launch
        header = trace_header(folder / row.trace_file)
        expected = int(row.launch_id) + first_trace_id
        kid = header.get("kernel id")
        if kid is not None and kid.isdigit() and int(kid) != expected:
            raise HilsimError(
                f"{folder / row.trace_file}: -kernel id = {kid}, expected {expected} for "
                f"launch {row.launch_id}"
            )
        names.append(header.get("kernel name", ""))
    traced = np.asarray(names, dtype=object)
    profiled = table["name"].astype(str).to_numpy()
    bad = names_disagree(traced, profiled)  # warm-up rows have no name: not checked
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise HilsimError(
            f"{folder / table['trace_file'].iloc[k]}: traces kernel {str(traced[k])!r} but "
            f"launch {int(table['launch_id'].iloc[k])} is {str(profiled[k])!r} "
            f"({int(bad.sum())} of {len(table)} sampled traces disagree): "
            "wrong first_trace_id, or traces of another run"
        )


def write_kernelslist(
    plan: Plan,
    out: str | os.PathLike[str],
    first_trace_id: int = 1,
    traces: str | os.PathLike[str] | None = None,
    full_list: str | os.PathLike[str] | None = None,
) -> tuple[Path, Path]:
    """Write the sampled list ``out`` and its weights CSV (:func:`weights_path`).

    ``traces``: the traces folder (``out`` must lie in it, since Accel-Sim opens list
    entries relative to the list's folder); its full list (``full_list``, default
    ``traces/kernelslist.g``) supplies the trace file names and the ``MemcpyHtoD``
    lines, and every sampled trace's header is checked (module docstring). Without
    ``traces`` the list names ``kernel-<N>.traceg`` files, unchecked, to be placed in
    the traces folder. The plan's ``preceding`` warm-up launches are listed too
    (:func:`listed_launches`). Returns both paths.
    """
    table = listed_launches(plan, first_trace_id)
    if table.empty:
        raise HilsimError("export: the plan has no samples")
    out_path = Path(out)
    if traces is None:
        lines = list(table["trace_file"])
    else:
        folder = Path(traces)
        if not folder.is_dir():
            raise HilsimError(f"{folder}: no such traces folder")
        full = Path(full_list) if full_list is not None else folder / FULL_LIST
        if out_path.resolve().parent != folder.resolve():
            raise HilsimError(
                f"{out_path}: write the sampled list inside {folder}: Accel-Sim opens each "
                "listed trace relative to the list's own folder"
            )
        if out_path.resolve() == full.resolve():
            raise HilsimError(f"{out_path}: would replace the tracer's full list; choose "
                              "another name (e.g. kernelslist.sampled.g)")
        lines = _from_full_list(table, full, first_trace_id)
        _check_trace_headers(table, folder, first_trace_id)
    list_path = write_text_atomic(out_path, "\n".join(lines) + "\n")
    buffer = io.StringIO()
    table.to_csv(buffer, index=False)
    return list_path, write_text_atomic(weights_path(out_path), buffer.getvalue())


def match_sim_results(plan: Plan, simlog: pd.DataFrame) -> pd.DataFrame:
    """Attach simulated results to the plan's samples, in ``kernelslist.g`` order.

    The ``k``-th simulated kernel (``sim_launch`` order) is the ``k``-th sampled launch
    by ascending ``launch_id``; logs whose kernels carry a ``launch_id`` (the workload
    printed ``hilsim-launch K`` marks, :mod:`hilsim.simmodel.gpgpusim.simlog`) are placed by that id
    instead (kernels of launches the plan does not sample are ignored). Returns the
    samples (``launch_id``, ``weight``,
    ``cluster``, ``name``) with every column of ``simlog`` (``kernel`` renamed
    ``sim_kernel``). One-line :class:`HilsimError` when the counts differ or a name
    disagrees.
    """
    table = sampled_launches(plan)
    sim = simlog.sort_values("sim_launch", kind="stable").reset_index(drop=True)
    listed = listed_launches(plan)
    if "launch_id" not in sim.columns and len(listed) != len(table) and len(sim) == len(listed):
        # an exported list with warm-up launches: keep the samples' positions only
        sim = sim[(listed["role"] == "sample").to_numpy()].reset_index(drop=True)
    if "launch_id" in sim.columns:
        # the program marked every launch with its index (hilsim-launch K): place by id
        sim = sim.drop_duplicates("launch_id", keep="first").set_index("launch_id")
        missing = np.setdiff1d(table["launch_id"].to_numpy(), sim.index.to_numpy())
        if len(missing):
            raise HilsimError(
                f"simulation logs lack {len(missing)} of the plan's {len(table)} launches "
                f"(first: launch {int(missing[0])}): simulate the plan's launch list"
            )
        sim = sim.loc[table["launch_id"].to_numpy()].reset_index(drop=True)
    if len(sim) != len(table):
        raise HilsimError(
            f"simulation logs hold {len(sim)} kernels but the plan samples {len(table)} "
            "launches: simulate exactly the exported kernelslist.g"
        )
    check_simulated_names(table["name"].to_numpy(), sim["kernel"].to_numpy(),
                          table["launch_id"].to_numpy())
    return pd.concat([table, sim.rename(columns={"kernel": "sim_kernel"})], axis=1)
