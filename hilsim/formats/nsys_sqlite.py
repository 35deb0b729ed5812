"""Import an Nsight Systems SQLite export (``nsys export --type sqlite``).

:func:`read_nsys_sqlite` reads the kernel launches, the NVTX ranges, the device
description and the export's schema/tool versions; :func:`bundle_from_nsys_sqlite`
wraps them as an in-memory :class:`~hilsim.core.bundle.Bundle`. Facts used are in
``docs/formats.md`` (``sqlite``):

* Table names are resolved through ``sqlite_master`` (nsys creates tables lazily,
  so a profile without CUDA tracing has no ``CUPTI_ACTIVITY_KIND_KERNEL``).
* Kernel names are ``StringIds`` values of ``demangledName`` (falling back to
  ``shortName``, then ``mangledName``); rows are read ``ORDER BY start`` because
  newer exports do not store them in time order.
* ``globalTid`` packs pid and tid: pid = ``(globalTid >> 24) & 0xFFFFFF``; the
  kernel table's ``globalPid`` equals ``globalTid & ~0xFFFFFF`` of its threads.

NVTX attribution rule (what ``region`` of a launch means)
---------------------------------------------------------
A kernel is matched to the CUDA runtime call that launched it: the row of
``CUPTI_ACTIVITY_KIND_RUNTIME`` with the same ``correlationId`` whose
``globalTid & ~0xFFFFFF`` equals the kernel's ``globalPid`` (correlation ids are
per process). The launch's region is then the *innermost* NVTX range enclosing
that call, innermost meaning latest start (ties: the shorter range):

1. push/pop ranges (``eventType`` 59) on the launching thread (same
   ``globalTid``) with ``range.start <= call.start`` and ``call.end <= range.end``;
2. if none, start/end ranges (``eventType`` 60) of the same process (any thread)
   with the same containment.

The launch's ``region`` is that range's ``path``. Kernels whose runtime call is
not recorded, or that no range encloses, get a null region. Push/pop ranges are
nested per thread: a range's parent is the latest-starting range on the same
thread that contains it, ``depth`` counts its ancestors and ``path`` joins the
names from the outermost one (``"outer/inner"``); start/end ranges are not
thread-bound and are listed with depth 0 and path = name.

Both the nesting and the attribution are vectorised: ranges are sorted by
(thread, start, -end) and each query ("the last range at or before position k
whose end reaches x") is answered for all launches at once by binary lifting
over a sparse table of running end maxima, O((launches + ranges) log ranges);
depths come from pointer doubling and paths are built one nesting level at a time.
"""

from __future__ import annotations

import sqlite3
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import pandas as pd

from hilsim.core.bundle import Bundle, default_manifest
from hilsim.core.errors import HilsimError
from hilsim.core.schema import REGION_COLUMNS, missing_int_column, normalize_launches

KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"
RUNTIME_TABLE = "CUPTI_ACTIVITY_KIND_RUNTIME"
NVTX_TABLE = "NVTX_EVENTS"
STRINGS_TABLE = "StringIds"
GPU_TABLE = "TARGET_INFO_GPU"
CUDA_DEVICE_TABLE = "TARGET_INFO_CUDA_DEVICE"
# newer exports name the export metadata META_DATA_EXPORT, 2021-era ones EXPORT_META_DATA
META_TABLES = ("META_DATA_EXPORT", "EXPORT_META_DATA", "META_DATA_CAPTURE")

NVTX_PUSH_POP = 59
NVTX_START_END = 60
PID_MASK = ~0xFFFFFF  # globalTid & PID_MASK == globalPid (serialized pid bits)

_SQLITE_MAGIC = b"SQLite format 3\x00"
_UNNAMED = "(unnamed)"
#: prefix of the launches query's kernel-name id columns (``_name0``, ``_name1``, ...)
NAME_ID_PREFIX = "_name"
# Rows per batch of the columnar reader when the caller reads the table whole.
_ADBC_BATCH_ROWS = 1 << 20

# launches-table column <- kernel-table column (optional: NULL when the export lacks it)
_KERNEL_COLUMNS: tuple[tuple[str, str], ...] = (
    ("grid_x", "gridX"),
    ("grid_y", "gridY"),
    ("grid_z", "gridZ"),
    ("block_x", "blockX"),
    ("block_y", "blockY"),
    ("block_z", "blockZ"),
    ("regs", "registersPerThread"),
    ("smem_static", "staticSharedMemory"),
    ("smem_dynamic", "dynamicSharedMemory"),
    ("stream", "streamId"),
    ("device", "deviceId"),
    ("correlation_id", "correlationId"),
    ("global_pid", "globalPid"),
)


@dataclass
class NsysSqliteProfile:
    """What an Nsight Systems SQLite export holds that hilsim uses.

    Attributes:
        launches: bundle-v1 launches table (:func:`hilsim.core.schema.normalize_launches`),
            ``region`` set by the NVTX attribution rule in the module doc.
        regions: NVTX ranges (``REGION_COLUMNS``), ``None`` when none were recorded.
        device: the GPU most launches ran on (name, uuid, compute_capability,
            sm_count, memory_bytes, memory_bandwidth, chip, ...); keys the export
            does not record are absent.
        schema_version: the export's ``EXPORT_SCHEMA_VERSION``, or ``None``.
        tool: ``{"name": "nsys", "version": ..., "product": ...}`` as recorded.
        source: the file read.
    """

    launches: pd.DataFrame
    regions: pd.DataFrame | None
    device: dict[str, Any] = field(default_factory=dict)
    schema_version: str | None = None
    tool: dict[str, Any] = field(default_factory=dict)
    source: Path | None = None


# --------------------------------------------------------------------------- opening


def check_sqlite_file(path: Path) -> None:
    """Reject a missing, non-SQLite or truncated file before SQLite sees it."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as handle:
            header = handle.read(100)
    except FileNotFoundError as exc:
        raise HilsimError(f"{path}: no such file") from exc
    except OSError as exc:
        raise HilsimError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    if not header.startswith(_SQLITE_MAGIC):
        raise HilsimError(
            f"{path}: not a SQLite file (expected an 'nsys export --type sqlite' database)"
        )
    if len(header) < 100:
        raise HilsimError(f"{path}: truncated SQLite file ({size} bytes, header incomplete)")
    (page_size,) = struct.unpack(">H", header[16:18])
    page_size = 65536 if page_size == 1 else page_size
    change_counter, n_pages = struct.unpack(">II", header[24:32])
    (valid_for,) = struct.unpack(">I", header[92:96])
    # the in-header page count is authoritative only when valid_for == change counter
    if n_pages and valid_for == change_counter and size < n_pages * page_size:
        raise HilsimError(
            f"{path}: truncated SQLite file ({size} bytes, header says "
            f"{n_pages} pages of {page_size} bytes = {n_pages * page_size})"
        )


def read_only_uri(path: Path) -> str:
    """The URI that opens ``path`` read-only without writing beside it: ``immutable=1``
    (no locks, no ``-shm``/``-wal`` files: ``mode=ro`` alone makes SQLite create both
    beside a WAL-mode database). A write-ahead log beside the file holds transactions the
    file itself lacks, which an immutable read would miss: refused in one line."""
    wal = path.with_name(path.name + "-wal")
    try:
        pending = wal.stat().st_size > 0
    except OSError:
        pending = False
    if pending:
        raise HilsimError(
            f"{path}: a write-ahead log ({wal.name}) beside it holds transactions not yet in "
            "the database; checkpoint it (open it once with sqlite3 and close it) or copy "
            "both, then import"
        )
    return f"file:{quote(str(path))}?mode=ro&immutable=1"


def connect_read_only(path: Path) -> sqlite3.Connection:
    """The database opened read-only (:func:`read_only_uri`); one-line error when SQLite
    refuses."""
    uri = read_only_uri(path)
    try:
        conn = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as exc:
        raise HilsimError(f"{path}: cannot open SQLite database ({exc})") from exc
    # nsys stores some environment blobs that are not UTF-8; never fail on a name
    conn.text_factory = lambda raw: raw.decode("utf-8", errors="replace")
    return conn


def database_error(path: Path, exc: BaseException) -> HilsimError:
    """The one-line error for a SQLite failure while reading ``path``."""
    cause = exc.__cause__ if isinstance(exc.__cause__, sqlite3.Error) else exc
    return HilsimError(f"{path}: cannot read SQLite database ({cause})")


def _query(conn: sqlite3.Connection, sql: str) -> pd.DataFrame:
    return pd.read_sql_query(sql, conn)


def table_names(conn: sqlite3.Connection, source: Path | None = None) -> dict[str, str]:
    """Lower-cased table name -> name as stored. With ``source``, a table whose values
    are computed as they are read is refused in one line naming it: a virtual table or a
    virtual generated column (``GENERATED ALWAYS AS (...)``), which a few KB of schema
    can make yield gigabytes per row; Nsight Systems writes neither."""
    rows = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall()
    if source is not None:
        for name, sql in rows:
            if str(sql or "").lstrip().upper().startswith("CREATE VIRTUAL"):
                raise HilsimError(f"{source}: table {name} is a virtual table (computed as "
                                  "read; not an Nsight Systems export)")
            computed = [str(row[1]) for row in
                        conn.execute(f'PRAGMA table_xinfo("{name}")').fetchall()
                        if row[6] == 2]  # hidden 2: a virtual generated column
            if computed:
                raise HilsimError(f"{source}: column {name}.{computed[0]} is computed as it "
                                  "is read (a generated column; not an Nsight Systems export)")
    return {str(name).lower(): str(name) for (name, _sql) in rows}


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {str(row[1]) for row in conn.execute(f'PRAGMA table_info("{table}")').fetchall()}


# --------------------------------------------------------------------------- intervals


def _last_covering(ends: np.ndarray, k: np.ndarray, x: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """For each query q: the largest j with lo[q] <= j <= k[q] and ends[j] >= x[q], else -1.

    Binary lifting over a sparse table of block maxima: ``table[p][j]`` is the max
    of ``ends`` over the 2**p positions ending at j (clipped at 0); starting at
    k, every block whose maximum is below x is skipped, largest blocks first.
    """
    n = len(ends)
    cur = np.asarray(k, dtype=np.int64).copy()
    if n == 0 or len(cur) == 0:
        return np.full(len(cur), -1, dtype=np.int64)
    levels = [np.asarray(ends, dtype=np.int64)]
    while (1 << len(levels)) <= n:
        prev, half = levels[-1], 1 << (len(levels) - 1)
        nxt = prev.copy()
        nxt[half:] = np.maximum(prev[half:], prev[:-half])
        levels.append(nxt)
    for p in range(len(levels) - 1, -1, -1):
        active = np.flatnonzero(cur >= 0)
        skip = levels[p][cur[active]] < x[active]
        cur[active[skip]] -= 1 << p
    cur[cur < lo] = -1
    return cur


def _sorted_ranges(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Order of ranges by (group, start, -end): outer ranges before the ones they contain."""
    return np.lexsort((-end, start, group))


def _innermost(
    r_group: np.ndarray,
    r_start: np.ndarray,
    r_end: np.ndarray,
    q_group: np.ndarray,
    q_start: np.ndarray,
    q_end: np.ndarray,
) -> np.ndarray:
    """Index of the latest-starting range of the same group enclosing each query, else -1."""
    n_r, n_q = len(r_start), len(q_start)
    if n_r == 0 or n_q == 0:
        return np.full(n_q, -1, dtype=np.int64)
    order = _sorted_ranges(r_group, r_start, r_end)
    g, s, e = r_group[order], r_start[order], r_end[order]
    # position of each query among the sorted ranges: ranges at the same
    # (group, time) sort before the query, so k = last range starting at or before it
    time = np.concatenate([s, q_start])
    grp = np.concatenate([g, q_group])
    kind = np.concatenate([np.zeros(n_r, np.int8), np.ones(n_q, np.int8)])
    neg_end = np.concatenate([-e, np.zeros(n_q, np.int64)])
    merged = np.lexsort((neg_end, kind, time, grp))
    ranges_up_to = np.cumsum(kind[merged] == 0)
    position = np.empty(n_r + n_q, dtype=np.int64)
    position[merged] = np.arange(n_r + n_q)
    k = ranges_up_to[position[n_r:]] - 1
    lo = np.searchsorted(g, q_group, side="left")
    found = _last_covering(e, k, q_end, lo)
    return np.where(found >= 0, order[np.maximum(found, 0)], -1)


def _nest(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Parent index of each range (latest-starting other range of its group containing it)."""
    n = len(start)
    order = _sorted_ranges(group, start, end)
    g, e = group[order], end[order]
    lo = np.searchsorted(g, g, side="left")
    found = _last_covering(e, np.arange(n, dtype=np.int64) - 1, e, lo)
    parent = np.full(n, -1, dtype=np.int64)
    parent[order] = np.where(found >= 0, order[np.maximum(found, 0)], -1)
    return parent


def _depth_and_path(names: np.ndarray, parent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ancestor count (pointer doubling) and "outer/inner" path, built level by level."""
    depth = (parent >= 0).astype(np.int64)
    up = parent.copy()
    while (has := up >= 0).any():  # after round r, up is the 2**r-th ancestor
        depth[has] += depth[up[has]]
        up[has] = up[up[has]]
    path = names.astype(object)
    order = np.argsort(depth, kind="stable")
    bounds = np.searchsorted(depth[order], np.arange(1, int(depth.max(initial=0)) + 2))
    for level in range(len(bounds) - 1):  # parents' paths are complete before children's
        rows = order[bounds[level] : bounds[level + 1]]
        path[rows] = path[parent[rows]] + "/" + names[rows].astype(object)
    return depth, path


# --------------------------------------------------------------------------- reading


def kernel_query(conn: sqlite3.Connection, tables: dict[str, str], path: Path) -> tuple[str, str]:
    """The launches' SELECT (no ORDER BY) and the name of the strings table.

    Columns: ``_row`` (the kernel row's rowid: a correlation id reused by two runtime rows
    repeats it), ``start_ns``, ``duration_ns``, the launch facts, the name's ``StringIds``
    ids ``_name0``, ``_name1``, ... (demangled, short, mangled: those the table has; see
    :func:`resolve_names`) and the launching call's ``call_tid``/``call_start``/``call_end``
    (NULL without a runtime table). Every column is an integer: no text per row.
    """
    kernel = tables.get(KERNEL_TABLE.lower())
    if kernel is None:
        if STRINGS_TABLE.lower() in tables or any(t.lower() in tables for t in META_TABLES):
            raise HilsimError(
                f"{path}: no kernel launches recorded (no {KERNEL_TABLE} table; "
                "profile with 'nsys profile --trace=cuda')"
            )
        shown = ", ".join(sorted(tables.values())[:8]) or "none"
        raise HilsimError(
            f"{path}: not an Nsight Systems SQLite export: no kernel launches recorded "
            f"(no {KERNEL_TABLE} table; tables: {shown})"
        )
    strings = tables.get(STRINGS_TABLE.lower())
    if strings is None:
        raise HilsimError(f"{path}: no {STRINGS_TABLE} table, kernel names cannot be resolved")
    columns = _columns(conn, kernel)
    for required in ("start", "end"):
        if required not in columns:
            raise HilsimError(f"{path}: {kernel} has no '{required}' column")
    name_columns = [c for c in ("demangledName", "shortName", "mangledName") if c in columns]
    if not name_columns:
        raise HilsimError(f"{path}: {kernel} has no kernel-name column (demangledName)")
    select = ["k.rowid AS _row", "k.start AS start_ns", 'k."end" - k.start AS duration_ns']
    select += [
        f'k."{src}" AS {dst}' if src in columns else f"NULL AS {dst}"
        for dst, src in _KERNEL_COLUMNS
    ]
    # the names' StringIds ids, best first (resolved by resolve_names, not joined per row)
    select += [f'k."{col}" AS {NAME_ID_PREFIX}{i}' for i, col in enumerate(name_columns)]
    joins: list[str] = []
    runtime = tables.get(RUNTIME_TABLE.lower())
    if runtime is not None and {"correlationId", "globalPid"} <= columns:
        select += ["r.globalTid AS call_tid", "r.start AS call_start", 'r."end" AS call_end']
        joins.append(
            f'LEFT JOIN "{runtime}" AS r ON r.correlationId = k.correlationId '
            f"AND (r.globalTid & {PID_MASK}) = k.globalPid"
        )
    else:
        select += ["NULL AS call_tid", "NULL AS call_start", "NULL AS call_end"]
    sql = f'SELECT {", ".join(select)} FROM "{kernel}" AS k {" ".join(joins)}'  # noqa: S608
    return sql, strings


@dataclass
class StringTable:
    """The ``StringIds`` table: ids in ascending order and their texts (``None`` for a NULL
    or empty value: such an id names nothing, as ``NULLIF(value, '')`` has it)."""

    ids: np.ndarray
    texts: np.ndarray

    def position(self, ids: np.ndarray, known: np.ndarray) -> np.ndarray:
        """Row of each id in the table, -1 where it is unknown, unnamed or not ``known``."""
        if len(self.ids) == 0:
            return np.full(len(ids), -1, dtype=np.int64)
        where = np.minimum(np.searchsorted(self.ids, ids), len(self.ids) - 1)
        found = known & (self.ids[where] == ids)
        found[found] = self.texts[where[found]] != None  # noqa: E711 (element-wise)
        return np.where(found, where, -1)


def read_string_table(conn: sqlite3.Connection, strings: str) -> StringTable:
    """The whole ``StringIds`` table (one row per distinct string of the export: names,
    NVTX texts; far fewer than launches). Values are read as text (``CAST``: a BLOB comes
    back through the connection's text_factory, invalid UTF-8 replaced)."""
    rows = conn.execute(
        f'SELECT id, CAST(value AS TEXT) FROM "{strings}" WHERE typeof(id) = \'integer\' '  # noqa: S608
        "ORDER BY id"
    ).fetchall()
    ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
    texts = np.array([row[1] or None for row in rows] + [None], dtype=object)[:-1]
    if len(ids) > 1 and not (ids[1:] > ids[:-1]).all():  # a repeated id: its first row
        ids, first = np.unique(ids, return_index=True)
        texts = texts[first]
    return StringTable(ids, texts)


def resolve_names(frame: pd.DataFrame, table: StringTable) -> pd.DataFrame:
    """``frame`` with its ``_name0``, ``_name1``, ... id columns replaced by ``name``: the
    text of the first id the table names (a categorical of the distinct names, sorted as
    the launches table interns them; null where no id names anything)."""
    id_columns = [c for c in frame.columns if str(c).startswith(NAME_ID_PREFIX)]
    pick = np.full(len(frame), -1, dtype=np.int64)
    for column in id_columns:
        ids, known = _int64_and_known(frame[column])
        found = table.position(ids, known)
        take = (pick < 0) & (found >= 0)
        pick[take] = found[take]
    used = np.unique(pick[pick >= 0])
    categories, inverse = np.unique(table.texts[used].astype(object), return_inverse=True)
    renumber = np.full(len(table.texts) + 1, -1, dtype=np.int64)
    renumber[used] = inverse
    names = pd.Categorical.from_codes(
        renumber[pick], categories=pd.Index(categories, dtype=object)
    )
    out = frame.drop(columns=id_columns)
    out["name"] = names
    return out


def _int64_and_known(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(int64 values, 0 where unknown; which rows hold an integer) of an id column as a
    reader gives it (int64, nullable Int64, float with NaN, or objects)."""
    if values.dtype == np.int64:
        return values.to_numpy(), np.ones(len(values), dtype=bool)
    if isinstance(values.dtype, pd.Int64Dtype):
        return values.to_numpy(dtype=np.int64, na_value=0), values.notna().to_numpy()
    numbers = pd.to_numeric(values, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    known = np.isfinite(numbers) & (numbers == np.round(numbers)) & (np.abs(numbers) < 2.0**63)
    return np.where(known, numbers, 0).astype(np.int64), known


def kernel_frames(
    conn: sqlite3.Connection, path: Path, sql: str, chunk_rows: int | None = None,
    columnar: bool = True,
) -> Iterator[pd.DataFrame]:
    """The rows of ``sql`` as DataFrames of at most ``chunk_rows`` rows (``None``: one).

    With ``columnar`` (and ADBC's SQLite driver installed) the rows come straight into
    Arrow columns (:func:`_adbc_frames`; no Python object per cell) and a column that is
    not all integers raises :class:`ColumnarReadFailed` (read the rows again with
    ``columnar=False``); else they come through ``sqlite3`` and pandas.
    """
    if columnar:
        frames = _adbc_frames(path, sql, chunk_rows)
        if frames is not None:
            yield from frames
            return
    if chunk_rows is None:
        yield _query(conn, sql)
        return
    yield from pd.read_sql_query(sql, conn, chunksize=chunk_rows)


class ColumnarReadFailed(Exception):  # noqa: N818 (a signal, not an error)
    """The columnar reader met what it does not vouch for: read with ``sqlite3`` instead."""


def _adbc_frames(path: Path, sql: str, chunk_rows: int | None) -> Iterator[pd.DataFrame] | None:
    """Batches of ``sql`` read by ADBC's SQLite driver, as DataFrames of int64 columns
    (nullable ``Int64`` where a batch has NULLs); ``None`` when the driver is not
    installed or cannot open the file."""
    try:
        from adbc_driver_sqlite import dbapi  # lazy: only the SQLite import reads through it
    except ImportError:
        return None
    uri = read_only_uri(path)
    try:
        conn = dbapi.connect(uri)
    except Exception:  # noqa: BLE001 (any failure: the sqlite3 reader words it)
        return None

    def frames() -> Iterator[pd.DataFrame]:
        cursor = conn.cursor()
        try:
            cursor.adbc_statement.set_options(
                **{"adbc.sqlite.query.batch_rows": str(chunk_rows or _ADBC_BATCH_ROWS)}
            )
            cursor.execute(sql)
            reader = cursor.fetch_record_batch()
            pending: list[pd.DataFrame] = []
            for batch in reader:
                frame = _batch_frame(batch)
                if chunk_rows is None:
                    pending.append(frame)
                else:
                    yield frame
            if chunk_rows is None:
                yield (pd.concat(pending, ignore_index=True) if len(pending) > 1 else
                       pending[0] if pending else _empty_frame(reader.schema))
        except ColumnarReadFailed:
            raise
        except Exception as exc:  # noqa: BLE001 (a type the driver refuses mid-way, ...)
            raise ColumnarReadFailed(str(exc)) from exc
        finally:
            cursor.close()
            conn.close()

    return frames()


def _batch_frame(batch: Any) -> pd.DataFrame:
    """An Arrow batch of integer (or all-NULL) columns as a DataFrame; anything else raises
    :class:`ColumnarReadFailed`."""
    import pyarrow as pa  # (loaded with the driver already)

    columns: dict[str, Any] = {}
    for name, column in zip(batch.schema.names, batch.columns, strict=True):
        if pa.types.is_null(column.type):
            columns[name] = missing_int_column(len(column))
        elif column.type == pa.int64():
            if column.null_count:
                mask = column.is_null().to_numpy(zero_copy_only=False)
                values = column.fill_null(0).to_numpy().copy()
                columns[name] = pd.arrays.IntegerArray(values, mask)
            else:
                columns[name] = column.to_numpy().copy()
        else:
            raise ColumnarReadFailed(f"column {name} holds {column.type}")
    return pd.DataFrame(columns, index=pd.RangeIndex(batch.num_rows), copy=False)


def _empty_frame(schema: Any) -> pd.DataFrame:
    return pd.DataFrame({name: np.zeros(0, dtype=np.int64) for name in schema.names})


def _read_kernels(conn: sqlite3.Connection, tables: dict[str, str], path: Path) -> pd.DataFrame:
    sql, strings = kernel_query(conn, tables, path)
    kernel = tables[KERNEL_TABLE.lower()]
    ordered = sql + " ORDER BY k.start, k.rowid"
    try:
        (frame,) = kernel_frames(conn, path, ordered)
    except ColumnarReadFailed:
        (frame,) = kernel_frames(conn, path, ordered, columnar=False)
    # a correlation id reused by two runtime rows must not duplicate the launch
    frame = frame.drop_duplicates("_row", keep="first").drop(columns="_row")
    if len(frame) == 0:
        raise HilsimError(f"{path}: no kernel launches recorded ({kernel} is empty)")
    frame = resolve_names(frame, read_string_table(conn, strings))
    missing = frame["name"].isna().to_numpy()
    if missing.any():
        row = int(np.flatnonzero(missing)[0])
        raise HilsimError(f"{path}: launch {row}: kernel name id not found in {strings}")
    return frame.reset_index(drop=True)


def read_nvtx(conn: sqlite3.Connection, tables: dict[str, str]) -> pd.DataFrame | None:
    """The NVTX push/pop ranges of the export, or None when it has no NVTX table."""
    nvtx = tables.get(NVTX_TABLE.lower())
    if nvtx is None:
        return None
    columns = _columns(conn, nvtx)
    if not {"start", "end", "eventType", "globalTid"} <= columns:
        return None
    text = "n.text" if "text" in columns else "NULL"
    strings = tables.get(STRINGS_TABLE.lower())
    join, text_id = "", "NULL"
    if strings is not None and "textId" in columns:
        join, text_id = f'LEFT JOIN "{strings}" AS s ON s.id = n.textId', "s.value"
    sql = (
        f'SELECT n.start AS start_ns, n."end" AS end_ns, n.eventType AS event_type, '  # noqa: S608
        f"n.globalTid AS tid, COALESCE({text}, {text_id}) AS name "
        f'FROM "{nvtx}" AS n {join} '
        f"WHERE n.eventType IN ({NVTX_PUSH_POP}, {NVTX_START_END}) "
        'AND n."end" IS NOT NULL AND n."end" >= n.start AND n.globalTid IS NOT NULL '
        'ORDER BY n.start, n."end" DESC, n.rowid'
    )
    frame = _query(conn, sql)
    return frame if len(frame) else None


def nvtx_regions(nvtx: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """Regions table (start order) plus each region's event type and globalTid."""
    start = nvtx["start_ns"].to_numpy(dtype=np.int64)
    end = nvtx["end_ns"].to_numpy(dtype=np.int64)
    tid = nvtx["tid"].to_numpy(dtype=np.int64)
    kind = nvtx["event_type"].to_numpy(dtype=np.int64)
    names = nvtx["name"].fillna(_UNNAMED).astype(str).to_numpy(dtype=object)
    push_pop = kind == NVTX_PUSH_POP
    # start/end ranges are not thread-bound: each is its own root (unique group)
    group = np.where(push_pop, tid, -1 - np.arange(len(tid), dtype=np.int64))
    parent = _nest(group, start, end)
    depth, path = _depth_and_path(names, parent)
    regions = pd.DataFrame(
        {
            "region_id": np.arange(len(nvtx), dtype=np.int64),
            "name": names,
            "path": path,
            "depth": depth,
            "start_ns": start,
            "end_ns": end,
        }
    )
    return regions[list(REGION_COLUMNS)], kind, tid


def attribute_launches(
    frame: pd.DataFrame, regions: pd.DataFrame, kind: np.ndarray, tid: np.ndarray
):
    """Path of each launch's innermost enclosing range (module doc), None where none."""
    n = len(frame)
    known = frame[["call_tid", "call_start", "call_end"]].notna().all(axis=1).to_numpy()
    rows = np.flatnonzero(known)
    result = np.full(n, None, dtype=object)
    if len(rows) == 0:
        return result
    q_tid, q_start, q_end = (_known_ints(frame[c], rows) for c in
                             ("call_tid", "call_start", "call_end"))
    start = regions["start_ns"].to_numpy(dtype=np.int64)
    end = regions["end_ns"].to_numpy(dtype=np.int64)
    paths = regions["path"].to_numpy(dtype=object)
    found = np.full(len(rows), -1, dtype=np.int64)
    for event_type, r_group, q_group in (
        (NVTX_PUSH_POP, tid, q_tid),
        (NVTX_START_END, tid & PID_MASK, q_tid & PID_MASK),
    ):
        pick = np.flatnonzero(kind == event_type)
        todo = np.flatnonzero(found < 0)
        if len(pick) == 0 or len(todo) == 0:
            continue
        hit = _innermost(
            r_group[pick], start[pick], end[pick], q_group[todo], q_start[todo], q_end[todo]
        )
        found[todo] = np.where(hit >= 0, pick[np.maximum(hit, 0)], -1)
    ok = found >= 0
    result[rows[ok]] = paths[found[ok]]
    return result


def _known_ints(values: pd.Series, rows: np.ndarray) -> np.ndarray:
    """The int64 values of ``rows`` (rows that hold a value) of a column."""
    if isinstance(values.dtype, pd.Int64Dtype):
        return values.to_numpy(dtype=np.int64, na_value=0)[rows]
    return values.to_numpy()[rows].astype(np.int64)


def export_meta(conn: sqlite3.Connection, tables: dict[str, str]) -> dict[str, str]:
    """The export's metadata (name -> value) from its meta tables."""
    meta: dict[str, str] = {}
    for name in META_TABLES:
        table = tables.get(name.lower())
        if table is None or not {"name", "value"} <= _columns(conn, table):
            continue
        for key, value in conn.execute(f'SELECT name, value FROM "{table}"').fetchall():  # noqa: S608
            meta.setdefault(str(key), str(value))
    return meta


def nsys_tool_entry(meta: dict[str, str]) -> dict[str, Any]:
    """The manifest's profiler entry for Nsight Systems (name, version from the export)."""
    tool: dict[str, Any] = {"name": "nsys"}
    version = meta.get("EXPORT_PRODUCT_VERSION")
    if version is None:
        version = next(
            (v for k, v in meta.items() if "VERSION" in k.upper() and "NSYS" in k.upper()), None
        )
    if version:
        tool["version"] = version
    if meta.get("EXPORT_PRODUCT_NAME"):
        tool["product"] = meta["EXPORT_PRODUCT_NAME"]
    return tool


def _positive(value: Any) -> int | None:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None


def _device(conn: sqlite3.Connection, tables: dict[str, str], launches: pd.DataFrame):
    """Description of the GPU that ran most launches (CUDA ordinal = kernel deviceId)."""
    return device_info(conn, tables, launches["device"].dropna().value_counts())


def device_info(conn: sqlite3.Connection, tables: dict[str, str], counts: pd.Series):
    """Description of the GPU that ran most launches, from ``counts`` (launches per CUDA
    ordinal = kernel deviceId; ties: the lowest ordinal)."""
    counts = counts[counts > 0]
    ordinal = int(counts.index[counts == counts.max()].min()) if len(counts) else None
    info: dict[str, Any] = {}
    if ordinal is not None:
        info["cuda_device"] = ordinal
        if len(counts) > 1:
            info["n_devices_used"] = int(len(counts))
    gpu_id, cuda_row = None, None
    cuda_table = tables.get(CUDA_DEVICE_TABLE.lower())
    if cuda_table is not None and ordinal is not None:
        cuda = _query(conn, f'SELECT * FROM "{cuda_table}"')  # noqa: S608
        if "cudaId" in cuda.columns:
            match = cuda[cuda["cudaId"] == ordinal]
            if len(match):
                cuda_row = match.iloc[0]
                gpu_id = cuda_row.get("gpuId")
    gpu_table = tables.get(GPU_TABLE.lower())
    row = None
    if gpu_table is not None:
        gpus = _query(conn, f'SELECT * FROM "{gpu_table}"')  # noqa: S608
        if len(gpus):
            filled = gpus["smCount"].fillna(0) > 0 if "smCount" in gpus.columns else True
            gpus = gpus.assign(_filled=filled).sort_values("_filled", ascending=False)
            candidates = gpus.iloc[0:0]
            if gpu_id is not None and "id" in gpus.columns:
                candidates = gpus[gpus["id"] == gpu_id]
            if not len(candidates) and ordinal is not None and "cuDevice" in gpus.columns:
                candidates = gpus[gpus["cuDevice"] == ordinal]
            if not len(candidates) and ordinal is not None and "id" in gpus.columns:
                candidates = gpus[gpus["id"] == ordinal]
            if not len(candidates):
                candidates = gpus
            row = candidates.iloc[0]
    if row is not None:
        if row.get("name"):
            info["name"] = str(row["name"])
        if row.get("uuid"):
            info["uuid"] = str(row["uuid"])
        major, minor = _positive(row.get("computeMajor")), row.get("computeMinor")
        if major is not None and minor is not None and not pd.isna(minor):
            info["compute_capability"] = f"{major}.{int(minor)}"
        for key, column in (
            ("sm_count", "smCount"),
            ("memory_bytes", "totalMemory"),
            ("memory_bandwidth", "memoryBandwidth"),
            ("l2_bytes", "l2CacheSize"),
        ):
            value = _positive(row.get(column))
            if value is not None:
                info[key] = value
        clock = _positive(row.get("clockRate"))
        if clock is not None:
            info["max_sm_clock_mhz"] = clock / 1e6
        if row.get("chipName"):
            info["chip"] = str(row["chipName"])
        if row.get("busLocation"):
            info["bus"] = str(row["busLocation"])
    if cuda_row is not None:
        if "uuid" not in info and cuda_row.get("uuid"):
            info["uuid"] = str(cuda_row["uuid"])
        sm = _positive(cuda_row.get("numMultiprocessors"))
        if "sm_count" not in info and sm is not None:
            info["sm_count"] = sm
    return info


def read_nsys_sqlite(path: str | Path) -> NsysSqliteProfile:
    """Read an ``nsys export --type sqlite`` file (see the module doc for the rules).

    Raises :class:`HilsimError` (one line naming the file) for a missing file, a
    file that is not SQLite, a truncated or corrupt database, a database without
    Nsight Systems kernel records, or an empty kernel table.
    """
    source = Path(path)
    check_sqlite_file(source)
    conn = connect_read_only(source)
    try:
        tables = table_names(conn, source)
        frame = _read_kernels(conn, tables, source)
        nvtx = read_nvtx(conn, tables)
        meta = export_meta(conn, tables)
        regions = None
        if nvtx is not None:
            regions, kind, tid = nvtx_regions(nvtx)
            frame["region"] = attribute_launches(frame, regions, kind, tid)
        launches = normalize_launches(
            frame.drop(columns=["call_tid", "call_start", "call_end", "global_pid"]),
            str(source),
        )
        device = _device(conn, tables, launches)
    except (sqlite3.Error, pd.errors.DatabaseError) as exc:
        raise database_error(source, exc) from exc
    finally:
        conn.close()
    launches.attrs["source"] = str(source)
    return NsysSqliteProfile(
        launches=launches,
        regions=regions,
        device=device,
        schema_version=meta.get("EXPORT_SCHEMA_VERSION"),
        tool=nsys_tool_entry(meta),
        source=source,
    )


def bundle_from_nsys_sqlite(path: str | Path) -> Bundle:
    """An in-memory bundle (launches, regions, manifest) from an nsys SQLite export."""
    profile = read_nsys_sqlite(path)
    manifest = sqlite_manifest(
        Path(path), profile.tool, profile.schema_version, profile.device,
        0 if profile.regions is None else len(profile.regions),
        int(profile.launches["region"].notna().sum()),
    )
    return Bundle(launches=profile.launches, regions=profile.regions, manifest=manifest)


def sqlite_manifest(
    path: Path,
    tool: dict[str, Any],
    schema_version: Any,
    device: dict[str, Any],
    nvtx_ranges: int,
    launches_with_region: int,
) -> dict[str, Any]:
    """The manifest of an nsys SQLite import (in memory or streaming: the same facts)."""
    profiler: dict[str, Any] = {"name": "nsys", "version": tool.get("version")}
    profiler["export_schema_version"] = schema_version
    profiler["format"] = "sqlite"
    profiler["file"] = path.name
    return default_manifest(
        device=device,
        profilers=[profiler],
        source={
            "files": [str(path)],
            "format": "sqlite",
            "nvtx_ranges": nvtx_ranges,
            "launches_with_region": launches_with_region,
        },
    )
