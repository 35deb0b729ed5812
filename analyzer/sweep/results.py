"""The sweep's results table, ``results.parquet``: one row per task with the columns and
dtypes of :data:`RESULT_TYPES`, rewritten atomically (sorted by task key)."""

from __future__ import annotations

import io
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from hilsim.core.errors import HilsimError
from hilsim.core.files import write_bytes_atomic
from hilsim.core.inputs import open_input

RESULTS = "results.parquet"

#: columns of results.parquet, in order, with their dtypes (object: text or JSON)
RESULT_TYPES: dict[str, str] = {
    "task_key": "object",
    "workload": "object",
    "workload_path": "object",
    "workload_digest": "object",
    "holdout_digest": "object",
    "method": "object",
    "label": "object",
    "params": "object",
    "seed": "Int64",
    "card": "object",
    "status": "object",
    "message": "object",
    "error": "float64",
    "speedup": "float64",
    "n_samples": "Int64",
    "n_clusters": "Int64",
    "n_launches": "Int64",
    "truth_ns": "float64",
    "estimate_ns": "float64",
    "sim_launches": "Int64",
    "sim_cycles": "float64",
    "sim_estimate_cycles": "float64",
    "sim_full_cycles": "float64",
    "sim_error": "float64",
    "sim_speedup": "float64",
    "sim_wall_seconds": "float64",
    "sim_cpu_seconds": "float64",
    "sim_dir": "object",
    "load_seconds": "float64",
    "plan_seconds": "float64",
    "score_seconds": "float64",
    "task_seconds": "float64",
    "worker": "object",
    "hilsim_version": "object",
}
RESULT_COLUMNS: tuple[str, ...] = tuple(RESULT_TYPES)
#: columns added with ``simulate``: a table written before them reads with them empty
SIM_COLUMNS: tuple[str, ...] = tuple(c for c in RESULT_TYPES if c.startswith("sim_"))


def empty_results() -> pd.DataFrame:
    """A results table without rows (every column of :data:`RESULT_COLUMNS`)."""
    return pd.DataFrame({c: pd.Series(dtype=object) for c in RESULT_COLUMNS})


def results_frame(rows: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """Rows as the typed results table (one row per task, :data:`RESULT_COLUMNS`)."""
    frame = pd.DataFrame(list(rows), columns=list(RESULT_COLUMNS))
    for column, dtype in RESULT_TYPES.items():
        if dtype != "object":
            frame[column] = pd.to_numeric(frame[column]).astype(dtype)
    return frame


def read_results(folder: Path) -> pd.DataFrame:
    """``results.parquet`` of an earlier run in ``folder`` (empty if none), with the
    columns and types of :data:`RESULT_TYPES`; a table that does not have them (a file
    edited or written by something else) is one line naming the column."""
    path = folder / RESULTS
    if not os.path.lexists(path):
        return empty_results()
    try:
        with open_input(path, "the sweep's results table (parquet)") as handle:
            frame = pd.read_parquet(handle)
    except HilsimError:
        raise
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several kinds
        raise HilsimError(f"{path}: cannot read the earlier results ({exc})") from exc
    for column in SIM_COLUMNS:  # a table from before simulate: those columns empty
        if column not in frame.columns:
            frame[column] = pd.Series([None] * len(frame), dtype=RESULT_TYPES[column])
    missing = [c for c in RESULT_COLUMNS if c not in frame.columns]
    if missing:
        raise HilsimError(f"{path}: not a sweep results table (missing {', '.join(missing)})")
    frame = frame[list(RESULT_COLUMNS)].copy()
    for column, dtype in RESULT_TYPES.items():
        values = frame[column]
        if dtype == "object":
            present = values.dropna()  # (a column without values reads back as NaN floats)
            kind = pd.api.types.infer_dtype(present, skipna=True) if len(present) else "empty"
            if kind not in ("string", "empty"):
                raise HilsimError(
                    f"{path}: column {column} holds {kind} values, not text: not a results "
                    "table this version wrote (move it away to start afresh)"
                )
            continue
        if str(values.dtype) == dtype:
            continue
        try:
            frame[column] = pd.to_numeric(values).astype(dtype)
        except (ValueError, TypeError, OverflowError) as exc:
            raise HilsimError(
                f"{path}: column {column} is not {dtype} ({' '.join(str(exc).split())[:80]}): "
                "not a results table this version wrote (move it away to start afresh)"
            ) from None
    return frame


def write_results(folder: Path, frame: pd.DataFrame) -> Path:
    """Write the results table atomically (sorted by task key: a stable order)."""
    frame = frame.sort_values("task_key", kind="stable").reset_index(drop=True)
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), buffer, compression="zstd")
    return write_bytes_atomic(folder / RESULTS, buffer.getvalue())
