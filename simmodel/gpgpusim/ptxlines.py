"""Long-latency instruction counts per launch from GPGPU-Sim's PTX line statistics.

GPGPU-Sim times PTX: an integer ``div``/``rem`` is one instruction at the config's int
DIV latency (``-ptx_opcode_latency_int``, 5th entry), ``sin``/``cos``/``ex2``/``lg2``/
``rsqrt``/``sqrt``/``rcp`` one at ``-ptx_opcode_latency_sfu``, an FP32 ``div`` one at
``-ptx_opcode_latency_fp`` (5th entry) (``cuda-sim.cc``
``ptx_instruction::set_opcode_and_latency``). None of the per-kernel counters in the
simulator's log shows them; ``-enable_ptx_file_line_stats 1`` writes, at every kernel's
end, the running thread-level execution count of every PTX line
(``ptx-stats.cc ptx_file_line_stats_write_file``). This module reads that file and the
PTX, and apportions each kernel's totals to its launches: a long-latency line executed
at most once per thread (outside loops) by the launch's threads, one inside a loop by
the launch's share of the kernel's thread instructions. On silicon the same counts are
Nsight Compute's instruction mix (``smsp__inst_executed_pipe_xu.sum``, the MUFU
instructions of the transcendental unit; ``docs/gpgpusim-metrics.md``).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from hilsim.core.demangle import demangle
from hilsim.core.errors import HilsimError

#: counter names (warp-level, as ``smsp__inst_executed``) added to a correlation table
INT_DIV = "sim__inst_executed_op_int_div.sum"
SFU = "smsp__inst_executed_pipe_xu.sum"
FP32_DIV = "sim__inst_executed_op_fp32_div.sum"
CLASSES = (INT_DIV, SFU, FP32_DIV)

_ENTRY = re.compile(r"^(?:\.visible\s+|\.weak\s+)?\.entry\s+([\w$]+)\s*\(")
_FUNC = re.compile(r"^(?:\.visible\s+|\.weak\s+)?\.func\b")
_OP = re.compile(r"^\s*(?:@!?%\w+\s+)?([a-z][\w.]*)")
_SFU_OPS = ("sin", "cos", "ex2", "lg2", "rsqrt", "sqrt", "rcp")


def classify(opcode: str) -> str | None:
    """The long-latency class of a PTX opcode (``rem.s32`` -> INT_DIV), or None."""
    parts = opcode.split(".")
    if parts[0] in ("div", "rem"):
        if "f32" in parts:
            return FP32_DIV
        if "f64" in parts:
            return None  # fp64 divides are not in the calibration workloads
        return INT_DIV
    if parts[0] in _SFU_OPS and "f64" not in parts:
        return SFU
    return None


def ptx_lines(ptx: str) -> pd.DataFrame:
    """One row per instruction line of ``ptx``: ``line`` (1-based), ``kernel``, ``cls``.

    Lines of a ``.func`` (a device function not inlined) belong to no kernel and are left
    out: their executions cannot be told apart by caller.
    """
    rows = []
    kernel = None
    for i, text in enumerate(ptx.splitlines(), start=1):
        got = _ENTRY.match(text)
        if got:
            kernel = got.group(1)
            continue
        if _FUNC.match(text):
            kernel = None
            continue
        if kernel is None:
            continue
        op = _OP.match(text)
        if op and not text.lstrip().startswith((".", "$", "{", "}", "//")):
            rows.append((i, kernel, classify(op.group(1))))
    return pd.DataFrame(rows, columns=["line", "kernel", "cls"])


def line_stats(text: str, source: str) -> pd.DataFrame:
    """``file``, ``line``, ``count`` (thread executions) of a PTX line statistics file."""
    rows = []
    for n, raw in enumerate(text.splitlines()[1:], start=2):
        head, sep, tail = raw.partition(" : ")
        if not sep:
            continue
        name, _, line = head.rpartition(" ")
        try:
            rows.append((name, int(line), int(tail.split()[0])))
        except (ValueError, IndexError):
            raise HilsimError(f"{source}: row {n}: not 'file line : count ...'") from None
    return pd.DataFrame(rows, columns=["file", "line", "count"])


def kernel_totals(ptx_path: Path, stats_path: Path) -> pd.DataFrame:
    """Per kernel (mangled name): thread executions of all lines, of its first line, and
    per class split into lines run at most once per thread (``<cls>:once``) and the rest."""
    try:
        ptx_text = ptx_path.read_text(errors="replace")
        stats_text = stats_path.read_text(errors="replace")
    except OSError as exc:
        raise HilsimError(f"PTX line statistics: cannot read {exc.filename}: "
                          f"{exc.strerror}") from None
    lines = ptx_lines(ptx_text)
    st = line_stats(stats_text, str(stats_path))
    st = st[st["file"] == ptx_path.name]
    df = lines.merge(st[["line", "count"]], on="line", how="left").fillna({"count": 0})
    out = {}
    for kernel, g in df.groupby("kernel", sort=False):
        entry = float(g["count"].iat[0])
        row = {"all": float(g["count"].sum()), "entry": entry}
        for cls in CLASSES:
            c = g.loc[g["cls"] == cls, "count"]
            once = c <= entry
            row[f"{cls}:once"] = float(c[once].sum())
            row[f"{cls}:loop"] = float(c[~once].sum())
        out[kernel] = row
    return pd.DataFrame.from_dict(out, orient="index")


def apportion(table: pd.DataFrame, totals: pd.DataFrame, mangled: pd.Series) -> pd.DataFrame:
    """Per-launch warp-level counts of :data:`CLASSES` for ``table``'s launches.

    ``mangled``: each launch's PTX kernel name. Lines run once per thread go to launches
    by their threads (in full warps of the launch's CTAs), loop lines by their share of
    the kernel's thread instructions (at the launch's threads per warp instruction).
    """
    threads = (table["grid_x"] * table["grid_y"] * table["grid_z"]
               * table["block_x"] * table["block_y"] * table["block_z"]).astype(float)
    tinst = table["smsp__thread_inst_executed.sum"].astype(float)
    winst = table["smsp__inst_executed.sum"].astype(float)
    simt = (tinst / winst.where(winst > 0)).fillna(32.0)
    key = mangled.to_numpy()
    known = pd.Index(totals.index)
    if not known.is_unique or not set(key) <= set(known):
        missing = sorted(set(key) - set(known))
        raise HilsimError(f"PTX line statistics: no lines for kernel(s) {missing[:3]}")
    t = totals.loc[key].reset_index(drop=True)
    t.index = table.index
    sum_threads = threads.groupby(key).transform("sum")
    sum_tinst = tinst.groupby(key).transform("sum")
    # once-per-thread lines run in the launch's (full) warps; loop lines at its average
    # threads per warp instruction
    block = (table["block_x"] * table["block_y"] * table["block_z"]).astype(float)
    per_warp_once = block / np.ceil(block / 32.0)
    out = pd.DataFrame(index=table.index)
    for cls in CLASSES:
        once = t[f"{cls}:once"] * threads / sum_threads.where(sum_threads > 0)
        loop = t[f"{cls}:loop"] * tinst / sum_tinst.where(sum_tinst > 0)
        out[cls] = np.round(once.fillna(0) / per_warp_once + loop.fillna(0) / simt, 1)
    return out


def demangled_names(names: list[str]) -> dict[str, str]:
    """Mangled -> demangled kernel names, as the log importer names them
    (:func:`hilsim.core.demangle.demangle`; an unreadable name is kept)."""
    pretty, _ = demangle(list(names))
    return dict(zip(names, pretty, strict=True))


def add_long_latency(table: pd.DataFrame, ptx_path: Path, stats_path: Path) -> pd.DataFrame:
    """:data:`CLASSES` columns for ``table``'s launches (one program's, matched by ``name``,
    the demangled kernel signature) from that program's PTX and line statistics files."""
    totals = kernel_totals(ptx_path, stats_path)
    by_name = {v: k for k, v in demangled_names(list(totals.index)).items()}
    names = table["name"].astype(str)
    missing = sorted(set(names) - set(by_name))
    if missing:
        raise HilsimError(f"{ptx_path}: no .entry for kernel(s) {missing[:3]}")
    return apportion(table, totals, names.map(by_name))
