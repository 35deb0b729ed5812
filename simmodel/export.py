"""Export a sampling plan to Accel-Sim's trace-driven front end, and map results back.

Accel-Sim's NVBit tracer (``util/tracer_nvbit``) writes one ``kernel-<N>.trace``
per launch, ``N`` counting the traced process's launches from 1 in launch order,
plus a ``kernelslist`` that the post-processor turns into ``kernelslist.g``: one
command per line, ``MemcpyHtoD,<addr>,<bytes>`` or ``kernel-<N>.traceg``. The
trace-driven simulator (``accel-sim.out -trace kernelslist.g``) runs the listed
kernels in file order.

**Launch ids to trace files.** hilsim's ``launch_id`` counts the profiled launches
from 0 in start order, so with the tracer started at the same first launch
``launch_id`` ``i`` is ``kernel-<i + first_trace_id>.traceg`` (``first_trace_id=1``).
If the tracer skipped launches (``DYNAMIC_KERNEL_LIMIT_START``) or the profile was
trimmed, pass the trace id of launch 0 as ``first_trace_id``. ``weights.csv`` lists,
for every sampled launch, its trace file, weight, cluster and kernel name, so the
mapping can be checked by hand against the trace headers (``-kernel name = ...``).

:func:`write_kernelslist` writes ``kernelslist.g`` (sampled launches only, in
launch order; the ``MemcpyHtoD`` lines of an existing list can be kept so the L2 is
filled as in the full run) and ``weights.csv`` atomically.
:func:`match_sim_results` pairs the simulated kernels (in ``kernelslist.g`` order,
i.e. ascending ``launch_id``) with the plan's samples and checks their names.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
import pandas as pd

from analyzer.atomic import write_text_atomic
from analyzer.errors import HilsimError
from analyzer.plan import Plan
from analyzer.schema import kernel_base_name

KERNELSLIST = "kernelslist.g"
WEIGHTS = "weights.csv"


def trace_file(launch_id: int, first_trace_id: int = 1) -> str:
    """Trace file name of a launch (``kernel-<launch_id + first_trace_id>.traceg``)."""
    return f"kernel-{int(launch_id) + int(first_trace_id)}.traceg"


def sampled_launches(plan: Plan, first_trace_id: int = 1) -> pd.DataFrame:
    """The plan's samples in simulation (launch) order with their trace file names."""
    samples = plan.samples.sort_values("launch_id", kind="stable").reset_index(drop=True)
    out = pd.DataFrame(
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
    return out


def write_kernelslist(
    plan: Plan,
    out_dir: str | os.PathLike[str],
    first_trace_id: int = 1,
    memcpy_from: str | os.PathLike[str] | None = None,
) -> tuple[Path, Path]:
    """Write ``kernelslist.g`` and ``weights.csv`` for ``plan`` into ``out_dir``.

    ``memcpy_from``: an existing (full) ``kernelslist.g`` whose ``MemcpyHtoD`` lines
    are kept in place relative to the kernels (a copy is emitted before the first
    sampled kernel that follows it in the full list). Returns both paths.
    """
    table = sampled_launches(plan, first_trace_id)
    if table.empty:
        raise HilsimError("export: the plan has no samples")
    lines: list[str] = []
    if memcpy_from is None:
        lines = list(table["trace_file"])
    else:
        src = Path(memcpy_from)
        try:
            full = [ln.strip() for ln in src.read_text().splitlines() if ln.strip()]
        except FileNotFoundError:
            raise HilsimError(f"{src}: no such kernelslist") from None
        wanted = set(table["trace_file"])
        pending: list[str] = []
        for entry in full:
            if entry.startswith("Memcpy"):
                pending.append(entry)
            elif entry in wanted:
                lines.extend(pending)
                pending = []
                lines.append(entry)
                wanted.discard(entry)
        if wanted:
            missing = sorted(wanted, key=lambda s: int(s.split("-")[1].split(".")[0]))
            raise HilsimError(
                f"{src}: lists no {missing[0]} ({len(missing)} sampled trace files missing): "
                "the trace does not cover the profiled launches or first_trace_id is wrong"
            )
    out = Path(out_dir)
    list_path = write_text_atomic(out / KERNELSLIST, "\n".join(lines) + "\n")
    buffer = io.StringIO()
    table.to_csv(buffer, index=False)
    weights_path = write_text_atomic(out / WEIGHTS, buffer.getvalue())
    return list_path, weights_path


def _names_agree(plan_name: str, sim_name: str) -> bool:
    """Whether a profiled (demangled) name and a simulator-printed (mangled) name agree.

    Equal strings agree; otherwise the profiled name's short base name must occur in
    the simulated one (``vecAdd`` in ``_Z6vecAddPKfS0_Pfi``).
    """
    if not plan_name or plan_name == sim_name:
        return True
    base = kernel_base_name(plan_name)
    return bool(base) and base in sim_name


def match_sim_results(plan: Plan, simlog: pd.DataFrame) -> pd.DataFrame:
    """Attach simulated results to the plan's samples, in ``kernelslist.g`` order.

    The ``k``-th simulated kernel (``sim_launch`` order) is the ``k``-th sampled launch
    by ascending ``launch_id``. Returns the samples (``launch_id``, ``weight``,
    ``cluster``, ``name``) with every column of ``simlog`` (``kernel`` renamed
    ``sim_kernel``). One-line :class:`HilsimError` when the counts differ or a name
    disagrees.
    """
    table = sampled_launches(plan)
    sim = simlog.sort_values("sim_launch", kind="stable").reset_index(drop=True)
    if len(sim) != len(table):
        raise HilsimError(
            f"simulation logs hold {len(sim)} kernels but the plan samples {len(table)} "
            "launches: simulate exactly the exported kernelslist.g"
        )
    sim_names = sim["kernel"].astype(str).to_numpy()
    for k, (plan_name, sim_name) in enumerate(zip(table["name"], sim_names, strict=True)):
        if not _names_agree(str(plan_name), sim_name):
            raise HilsimError(
                f"simulated kernel {k + 1} is {sim_name!r} but sampled launch "
                f"{int(table['launch_id'].iloc[k])} is {plan_name!r}: the logs are not "
                "in kernelslist.g order or belong to another plan"
            )
    merged = pd.concat([table, sim.rename(columns={"kernel": "sim_kernel"})], axis=1)
    return merged
