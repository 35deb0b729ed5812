"""Import large nsys profiles chunk by chunk, in bounded memory.

A GPT-scale training trace has tens of millions of launches (STEM's GPT-2 run: 50M);
the in-memory importers hold the whole table, several copies deep, while they parse,
normalise and sort it (about 16 GB at 50M). This module reads an ``nsys stats``
``cuda_gpu_trace``/``cuda_kern_exec_trace`` CSV or an ``nsys export --type sqlite``
database in chunks and writes the bundle's ``launches.parquet`` row group by row group:

1. **Chunks.** The CSV is cut at line ends into blocks of :data:`CSV_BLOCK_BYTES`, each
   parsed by the in-memory importer's fast reader
   (:func:`~hilsim.formats.nsys_stats.fast_table`); a block it does not vouch
   for goes to the exact reader with the block's line numbers, so a bad row mid-file is
   one error naming the file and its line. The SQLite launches are read in rowid order
   (no sort: nsys writes them in time order) with ``fetchmany`` chunks of
   :data:`SQLITE_CHUNK_ROWS`; a database whose rows are not in start order is read
   again ``ORDER BY start, rowid`` (SQLite's external sort, bounded memory).
2. **Normalise.** Each chunk goes through
   :func:`~hilsim.core.schema.normalize_launches` (int64 checks, end past 2^63,
   stable sort by start, duplicates dropped), errors naming the row of the whole input.
   Chunks must follow each other in start order (each chunk's first start at or after
   the previous chunk's last): a CSV that is not falls back to the in-memory importer.
   The launches sharing the last start of a chunk are held back and compared with the
   next chunk's, so duplicates across a chunk boundary are dropped as one pass would.
3. **Intern.** Kernel names (and NVTX region paths) get ids from one dictionary built
   as chunks arrive; a first file stores the ids. When every chunk is in, the ids are
   renumbered to the sorted names the in-memory importer gives, and the file is
   rewritten row group by row group as ``launches.parquet`` with categorical ``name``,
   ``kernel`` and ``region`` columns: the bundle is the one the in-memory import writes
   (same table read back, same manifest facts and warnings).
4. **Warnings.** The trace warnings (:mod:`~hilsim.formats.tracewarnings`) are computed
   from the four columns they read (``name``, ``duration_ns``, ``start_ns``, ``stream``)
   of the written table.

Used by ``hilsim import`` for such files of :data:`STREAM_MIN_BYTES` or more when no
``--ncu`` join is asked for (a join needs the whole table). Peak memory is a few chunks
plus the four warning columns (50M launches: about 5.5 GB). The output is written into
a temporary folder renamed into place (:func:`~hilsim.core.files.atomic_directory`).
"""

from __future__ import annotations

import io
import re
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from hilsim.core import limits
from hilsim.core.bundle import LAUNCHES, REGIONS, finish_manifest, write_table
from hilsim.core.errors import HilsimError
from hilsim.core.files import atomic_directory
from hilsim.core.schema import (
    DUPLICATE_KEY_COLUMNS,
    LAUNCH_COLUMNS,
    REGION_COLUMNS,
    duplicate_warning,
    kernel_base_name,
    missing_category_column,
    normalize_launches,
)
from hilsim.formats import FORMATS
from hilsim.formats.read import resolve_format
from hilsim.formats.tracewarnings import trace_warnings

#: the launch columns :func:`hilsim.formats.tracewarnings.trace_warnings` reads
WARNING_COLUMNS = ("name", "duration_ns", "start_ns", "stream")

#: profiles at least this large are imported in chunks (smaller ones fit in memory)
STREAM_MIN_BYTES = 256 << 20
#: bytes of CSV parsed at a time (about 1.5M nsys cuda_gpu_trace rows)
CSV_BLOCK_BYTES = 256 << 20
#: SQLite rows fetched at a time
SQLITE_CHUNK_ROWS = 2_000_000

_STAGE = ".launches-ids.parquet"


class Fallback(Exception):  # noqa: N818 (a signal, not an error)
    """The input cannot be read in chunks (e.g. not in start order): import it in memory."""


@dataclass
class StreamResult:
    """What a streaming import wrote: the bundle folder, its manifest and sizes."""

    path: Path
    manifest: dict[str, Any]
    n_launches: int
    n_kernels: int


@dataclass
class _Dictionary:
    """Ids of texts in order of first appearance (one dictionary for every chunk)."""

    ids: dict[str, int] = field(default_factory=dict)

    def codes(self, values: pd.Categorical) -> np.ndarray:
        """Global int32 ids of a categorical's rows (-1 for null)."""
        lookup = np.empty(len(values.categories) + 1, dtype=np.int32)
        lookup[-1] = -1
        for index, text in enumerate(values.categories):
            lookup[index] = self.ids.setdefault(str(text), len(self.ids))
        return lookup[np.asarray(values.codes, dtype=np.int64)]

    def sorted_renumbering(self) -> tuple[list[str], np.ndarray]:
        """(texts sorted, new id of each old id): the order the in-memory importer gives."""
        texts = list(self.ids)
        order = sorted(range(len(texts)), key=texts.__getitem__)
        renumber = np.empty(len(texts) + 1, dtype=np.int64)
        renumber[-1] = -1
        renumber[np.asarray(order, dtype=np.int64)] = np.arange(len(texts))
        return [texts[i] for i in order], renumber


_ROW_RE = re.compile(r"^(?P<head>.*?): row (?P<row>\d+): ")


class LaunchWriter:
    """Normalises chunks of raw launch columns and writes them in start order.

    ``add`` takes the columns an importer reads (before
    :func:`~hilsim.core.schema.normalize_launches`); ``finish`` writes
    ``launches.parquet`` into ``folder``.
    """

    def __init__(self, folder: Path, source: str) -> None:
        self.folder, self.source = folder, source
        self.names, self.regions = _Dictionary(), _Dictionary()
        self.rows_in = 0  # raw rows seen (errors name rows of the whole input)
        self.duplicates = 0
        self.last_start: int | None = None
        self.device_counts: pd.Series = pd.Series(dtype=np.int64)
        self._tail: pd.DataFrame | None = None
        self._writer: pq.ParquetWriter | None = None
        self._schema: pa.Schema | None = None

    # ---------------------------------------------------------------- chunks in
    def add(self, raw: pd.DataFrame) -> None:
        """Normalise one chunk and queue it (raises :class:`Fallback` when the chunks are
        not in start order)."""
        if len(raw) == 0:
            return
        offset = self.rows_in
        try:
            out = normalize_launches(raw, self.source)
        except HilsimError as exc:
            raise _shift_row(exc, offset) from exc
        self.rows_in += len(raw)
        self.duplicates += len(raw) - len(out)
        start = out["start_ns"]
        if start.isna().any():
            self._abandon("launches without a start time")
        starts = start.to_numpy(dtype=np.int64)
        if self.last_start is not None and starts[0] < self.last_start:
            self._abandon("launches not in start order")
        self.last_start = int(starts[-1])
        devices = out["device"].dropna()
        if len(devices):
            self.device_counts = self.device_counts.add(
                devices.astype(np.int64).value_counts(), fill_value=0
            )
        chunk = out.drop(columns=["kernel", "launch_id"])
        chunk["name"] = self.names.codes(out["name"].array)
        chunk["region"] = self.regions.codes(out["region"].array)
        if self._tail is not None:
            chunk = self._join_tail(chunk, starts)
        last = chunk["start_ns"].to_numpy(dtype=np.int64)
        cut = int(np.searchsorted(last, last[-1], side="left"))
        self._tail = chunk.iloc[cut:].reset_index(drop=True)
        if cut:
            self._write_stage(chunk.iloc[:cut])

    def _abandon(self, reason: str) -> None:
        """Close and remove the first file, then raise :class:`Fallback`."""
        self.discard()
        raise Fallback(reason)

    def discard(self) -> None:
        """Close and remove the first file (the rows are to be read again)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        (self.folder / _STAGE).unlink(missing_ok=True)

    def _join_tail(self, chunk: pd.DataFrame, starts: np.ndarray) -> pd.DataFrame:
        """The held-back launches of the last start, then ``chunk`` without the launches
        that repeat one of them (a duplicate across the chunk boundary)."""
        tail = self._tail
        assert tail is not None
        same = int(np.searchsorted(starts, int(tail["start_ns"].iloc[0]), side="right"))
        if same:
            keys = [c for c in (*DUPLICATE_KEY_COLUMNS, "name") if c in chunk.columns]
            both = pd.concat([tail[keys], chunk[keys].iloc[:same]], ignore_index=True)
            repeated = both.duplicated(keep="first").to_numpy()[len(tail) :]
            if repeated.any():
                keep = np.ones(len(chunk), dtype=bool)
                keep[:same] = ~repeated
                self.duplicates += int(repeated.sum())
                chunk = chunk.iloc[np.flatnonzero(keep)]
        return pd.concat([tail, chunk], ignore_index=True)

    def _write_stage(self, chunk: pd.DataFrame) -> None:
        table = pa.Table.from_pandas(chunk, preserve_index=False)
        if self._writer is None:
            self._schema = table.schema
            self._writer = pq.ParquetWriter(self.folder / _STAGE, table.schema, compression="zstd")
        self._writer.write_table(table.cast(self._schema))

    # ---------------------------------------------------------------- table out
    def finish(self) -> tuple[int, pd.DataFrame]:
        """Write ``launches.parquet`` (ids renumbered to sorted names); return the row count
        and the columns the trace warnings read (:data:`WARNING_COLUMNS`), kept as each row
        group is written instead of read back."""
        if self._tail is not None and len(self._tail):
            self._write_stage(self._tail)
            self._tail = None
        if self._writer is None:
            raise HilsimError(f"{self.source}: empty profile: no kernel launches found")
        self._writer.close()
        names, name_ids = self.names.sorted_renumbering()
        regions, region_ids = self.regions.sorted_renumbering()
        short = np.asarray([kernel_base_name(n) for n in names], dtype=object)
        kernels, kernel_of_name = np.unique(short, return_inverse=True)
        kernel_of_name = np.append(kernel_of_name.astype(np.int64), -1)
        name_index = pd.Index(names, dtype=object)
        kernel_index = pd.Index(kernels, dtype=object)
        region_index = pd.Index(regions, dtype=object)
        stage = pq.ParquetFile(self.folder / _STAGE)
        first_id = 0
        kept: list[pd.DataFrame] = []
        with pq.ParquetWriter(
            self.folder / LAUNCHES,
            _final_schema(stage, name_index, kernel_index, region_index),
            compression="zstd",
        ) as writer:
            for group in range(stage.num_row_groups):
                frame = stage.read_row_group(group).to_pandas()
                name = name_ids[frame["name"].to_numpy(dtype=np.int64)]
                frame["name"] = pd.Categorical.from_codes(name, categories=name_index)
                frame["kernel"] = pd.Categorical.from_codes(
                    kernel_of_name[name], categories=kernel_index
                )
                region = region_ids[frame["region"].to_numpy(dtype=np.int64)]
                frame["region"] = (
                    pd.Categorical.from_codes(region, categories=region_index)
                    if len(region_index)
                    else missing_category_column(len(frame))
                )
                frame["launch_id"] = np.arange(first_id, first_id + len(frame), dtype=np.int64)
                first_id += len(frame)
                table = pa.Table.from_pandas(frame[list(LAUNCH_COLUMNS)], preserve_index=False)
                writer.write_table(table.cast(writer.schema))
                kept.append(frame[list(WARNING_COLUMNS)])
                del frame, table
        del stage
        (self.folder / _STAGE).unlink()
        return first_id, pd.concat(kept, ignore_index=True)


def _final_schema(
    stage: pq.ParquetFile, names: pd.Index, kernels: pd.Index, regions: pd.Index
) -> pa.Schema:
    """The launches table's schema as ``write_bundle`` writes it (from one row)."""
    frame = stage.read_row_group(0).slice(0, 1).to_pandas()
    frame["name"] = pd.Categorical.from_codes([0], categories=names)
    frame["kernel"] = pd.Categorical.from_codes([0], categories=kernels)
    frame["region"] = (
        pd.Categorical.from_codes([-1], categories=regions)
        if len(regions)
        else missing_category_column(1)
    )
    frame["launch_id"] = np.zeros(1, dtype=np.int64)
    return pa.Table.from_pandas(frame[list(LAUNCH_COLUMNS)], preserve_index=False).schema


def _shift_row(exc: HilsimError, offset: int) -> HilsimError:
    """A chunk's "SOURCE: row N: ..." error as the row of the whole input."""
    message = str(exc)
    match = _ROW_RE.match(message)
    if match is None or not offset:
        return exc
    row = int(match.group("row")) + offset
    return HilsimError(f"{match.group('head')}: row {row}: {message[match.end() :]}")


# ----------------------------------------------------------------------------- CSV

# The CSV and SQLite readers (nsys_stats; nsys_sqlite with sqlite3) are imported inside the
# functions that stream their format: `hilsim import` of one format, and `hilsim plan`,
# which imports this module through the library facade, load no other format's reader.


def _csv_chunks(source: Path, block_bytes: int) -> Iterator[tuple[pd.DataFrame, int]]:
    """(launch columns, memcpy/memset rows dropped) of each block of the CSV."""
    from hilsim.formats import nsys_stats  # lazy: see the note above

    layout = nsys_stats.fast_layout(source)
    if layout is None or not nsys_stats.check_last_row(source, layout):
        raise Fallback("not a plain CSV the fast reader vouches for")
    with open(source, "rb") as handle:
        handle.seek(layout.body_offset)
        header = handle.readline()
        offset = layout.body_offset + len(header)
        line = layout.header_index + 2  # 1-based file line of the block's first row
        carry = b""
        while True:
            data = handle.read(block_bytes)
            at_end = not data
            data = carry + data
            if not data:
                return
            if at_end:
                block, carry = data, b""
            else:
                cut = row_cut(data)
                if cut == 0:  # a row longer than a block: read on
                    carry = data
                    continue
                block, carry = data[:cut], data[cut:]
            if block.count(b"\r") != block.count(b"\r\n"):
                raise Fallback("line breaks other than \\n and \\r\\n")
            try:
                out, dropped = _csv_block(source, layout, header, block, line, offset)
            except nsys_stats.OpenQuoteAtEnd:
                if at_end:
                    raise
                # the cut is inside a quoted value after all (a quote inside an unquoted
                # cell is text, not counted apart by row_cut): one pass reads the file
                raise Fallback("a block cut inside a quoted value") from None
            yield out, dropped
            line += block.count(b"\n")
            offset += len(block)


def row_cut(data: bytes) -> int:
    """Offset just past the last line break of ``data`` (which starts at a row's start)
    outside quotes, 0 when there is none: a line break with an odd number of ``"`` before
    it lies inside a quoted value (a name holding a line break), and cutting there would
    read the rest of that value as a row of its own. Quotes are counted once each."""
    quotes = data.count(b'"')
    end = len(data)
    after = 0  # quotes after ``end``
    while True:
        cut = data.rfind(b"\n", 0, end)
        if cut < 0:
            return 0
        after += data.count(b'"', cut, end)
        if (quotes - after) % 2 == 0:
            return cut + 1
        end = cut


def _csv_block(
    source: Path, layout: Any, header: bytes, block: bytes, line: int, offset: int
) -> tuple[pd.DataFrame, int]:
    """(launch columns, memcpy/memset rows dropped) of one block of whole rows, its first
    row the file's 1-based ``line`` at byte ``offset``: the fast reader, or the exact one
    for a block the fast one does not vouch for."""
    from hilsim.formats import nsys_stats  # lazy: see the note above

    table = nsys_stats.fast_table(source, layout, io.BytesIO(header + block), first_line=line)
    parsed = None if table is None else nsys_stats.fast_launches(source, layout, table)
    del table
    if parsed is not None:
        return parsed
    try:
        text = block.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HilsimError(
            f"{source}: not a text CSV (byte {offset + exc.start} is not UTF-8): "
            "not an nsys stats CSV"
        ) from exc
    out, _, dropped = nsys_stats.read_exact(
        source, text=layout.header_line + text, line_offset=line - 2, block=True
    )
    return out, dropped


def _import_csv(source: Path, fmt: str, folder: Path, block_bytes: int) -> dict[str, Any]:
    from hilsim.formats import nsys_stats  # lazy: see the note above

    writer = LaunchWriter(folder, str(source))
    dropped = 0
    for out, n_dropped in _csv_chunks(source, block_bytes):
        dropped += n_dropped
        writer.add(out)
    if writer.rows_in == 0:
        layout = nsys_stats.fast_layout(source)
        report = layout.report if layout else ""
        raise HilsimError(
            f"{source}: {report} CSV has a header but no kernel rows"
            + (f" ({dropped} memcpy/memset rows dropped)" if dropped else "")
        )
    n, columns = writer.finish()
    manifest = nsys_stats.csv_manifest(source, fmt, "nsys stats", dropped)
    return {"manifest": manifest, "writer": writer, "n": n, "warning_columns": columns}


# ----------------------------------------------------------------------------- SQLite


def _import_sqlite_rows(
    conn: sqlite3.Connection,
    tables: dict[str, str],
    source: Path,
    folder: Path,
    order: str,
    chunk_rows: int,
    nvtx: tuple[pd.DataFrame, np.ndarray, np.ndarray] | None,
    columnar: bool = True,
) -> tuple[LaunchWriter, int]:
    from hilsim.formats import nsys_sqlite  # lazy: see the note above

    sql, strings = nsys_sqlite.kernel_query(conn, tables, source)
    string_table = nsys_sqlite.read_string_table(conn, strings)
    writer = LaunchWriter(folder, str(source))
    chunks = nsys_sqlite.kernel_frames(
        conn, source, f"{sql} ORDER BY {order}", chunk_rows, columnar=columnar
    )
    try:
        return _write_sqlite_chunks(
            chunks, writer, string_table, source, strings, tables[nsys_sqlite.KERNEL_TABLE.lower()],
            nvtx,
        )
    except nsys_sqlite.ColumnarReadFailed:
        writer.discard()
        raise
    finally:
        chunks.close()


def _write_sqlite_chunks(
    chunks: Iterator[pd.DataFrame],
    writer: LaunchWriter,
    string_table: Any,
    source: Path,
    strings: str,
    kernel_table: str,
    nvtx: tuple[pd.DataFrame, np.ndarray, np.ndarray] | None,
) -> tuple[LaunchWriter, int]:
    from hilsim.formats import nsys_sqlite  # lazy: see the note above

    last_row: Any = None
    with_region = 0
    for frame in chunks:
        # a correlation id reused by two runtime rows must not duplicate the launch
        frame = frame.drop_duplicates("_row", keep="first")
        if last_row is not None:
            frame = frame[frame["_row"].to_numpy() != last_row]
        if len(frame) == 0:
            continue
        last_row = frame["_row"].iloc[-1]
        frame = nsys_sqlite.resolve_names(frame.drop(columns="_row").reset_index(drop=True),
                                          string_table)
        missing = frame["name"].isna().to_numpy()
        if missing.any():
            row = writer.rows_in + int(np.flatnonzero(missing)[0])
            raise HilsimError(f"{source}: launch {row}: kernel name id not found in {strings}")
        if nvtx is not None:
            frame["region"] = nsys_sqlite.attribute_launches(frame, *nvtx)
            with_region += int(frame["region"].notna().sum())
        writer.add(frame.drop(columns=["call_tid", "call_start", "call_end", "global_pid"]))
    if writer.rows_in == 0:
        raise HilsimError(
            f"{source}: no kernel launches recorded ({kernel_table} is empty)"
        )
    return writer, with_region


def _import_sqlite(source: Path, folder: Path, chunk_rows: int) -> dict[str, Any]:
    from hilsim.formats import nsys_sqlite  # lazy: see the note above

    nsys_sqlite.check_sqlite_file(source)
    conn = nsys_sqlite.connect_read_only(source)
    try:
        tables = nsys_sqlite.table_names(conn, source)
        nsys_sqlite.kernel_query(conn, tables, source)  # the missing-table errors first
        nvtx_frame = nsys_sqlite.read_nvtx(conn, tables)
        regions, nvtx = None, None
        if nvtx_frame is not None:
            regions, kind, tid = nsys_sqlite.nvtx_regions(nvtx_frame)
            nvtx = (regions, kind, tid)
        meta = nsys_sqlite.export_meta(conn, tables)
        columnar = True
        while True:
            try:  # rowid order is start order in nsys's exports: no sort
                try:
                    writer, with_region = _import_sqlite_rows(
                        conn, tables, source, folder, "k.rowid", chunk_rows, nvtx, columnar
                    )
                except Fallback:  # not in start order: SQLite sorts them (on disk)
                    writer, with_region = _import_sqlite_rows(
                        conn, tables, source, folder, "k.start, k.rowid", chunk_rows, nvtx,
                        columnar,
                    )
                break
            except nsys_sqlite.ColumnarReadFailed:  # a column that is not all integers
                (folder / _STAGE).unlink(missing_ok=True)
                columnar = False
        device = nsys_sqlite.device_info(conn, tables, writer.device_counts)
    except (sqlite3.Error, pd.errors.DatabaseError) as exc:
        raise nsys_sqlite.database_error(source, exc) from exc
    finally:
        conn.close()
    n, columns = writer.finish()
    if regions is not None:
        write_table(regions[list(REGION_COLUMNS)], folder / REGIONS)
    manifest = nsys_sqlite.sqlite_manifest(
        source, nsys_sqlite.nsys_tool_entry(meta), meta.get("EXPORT_SCHEMA_VERSION"), device,
        0 if regions is None else len(regions), with_region,
    )
    return {"manifest": manifest, "writer": writer, "n": n, "warning_columns": columns}


# ----------------------------------------------------------------------------- entry


def can_stream(path: Path, fmt: str, ncu: object = None) -> bool:
    """Is ``path`` (sniffed as ``fmt``) imported in chunks? A large file of a format the
    registry marks ``streams`` (nsys CSV/SQLite), no --ncu."""
    entry = FORMATS.get(fmt)
    if ncu is not None or entry is None or not entry.streams:
        return False
    try:
        return path.stat().st_size >= STREAM_MIN_BYTES
    except OSError:
        return False


def stream_import(
    path: str | Path,
    fmt: str,
    output: str | Path,
    overwrite: bool = False,
    block_bytes: int | None = None,
    chunk_rows: int | None = None,
) -> StreamResult | None:
    """Import ``path`` (an nsys CSV or SQLite export, format ``fmt``) into the bundle folder
    ``output`` chunk by chunk; ``None`` when it must be imported in memory instead
    (a CSV not in start order, odd line breaks, a header the fast reader does not find).

    Raises :class:`HilsimError` (one line naming the file and line or row) on bad input;
    nothing is left at ``output`` then.
    """
    source, target = Path(path), Path(output)
    limits.check_sparse(source)
    try:
        with atomic_directory(target, overwrite=overwrite) as folder:
            if fmt == "sqlite":
                done = _import_sqlite(source, folder, chunk_rows or SQLITE_CHUNK_ROWS)
            else:
                done = _import_csv(source, fmt, folder, block_bytes or CSV_BLOCK_BYTES)
            manifest, writer = done["manifest"], done["writer"]
            warnings = [duplicate_warning(str(source), writer.duplicates)] if (
                writer.duplicates) else []
            manifest["warnings"] = [*warnings, *trace_warnings(done.pop("warning_columns"),
                                                               manifest)]
            manifest = finish_manifest(folder, manifest, done["n"])
    except Fallback:
        return None
    except FileExistsError as exc:
        raise HilsimError(f"{target}: already exists (use --force to replace it)") from exc
    return StreamResult(target, manifest, done["n"], len(writer.names.ids))


def stream_profile(
    path: str | Path,
    output: str | Path,
    fmt: str = "auto",
    ncu: object = None,
    overwrite: bool = False,
) -> StreamResult | None:
    """``hilsim import``'s streaming path: the bundle written, or ``None`` when ``path`` is
    imported in memory (small, another format, --ncu, a folder or missing file, a CSV not
    in start order: the in-memory importer then reads it and words any error)."""
    source = Path(path)
    if ncu is not None or not source.is_file() or source.suffix in (".nsys-rep", ".qdrep"):
        return None
    if source.stat().st_size < STREAM_MIN_BYTES:  # small: not even sniffed here
        return None
    fmt = resolve_format(source, fmt)
    if not can_stream(source, fmt, ncu):
        return None
    return stream_import(source, fmt, output, overwrite=overwrite)
