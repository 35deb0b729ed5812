"""Profile bundle v1: writer (atomic), reader and validator.

The contract is docs/architecture.md "Contracts", "Profile bundle v1": a folder
with ``manifest.json`` (schema ``hilsim.bundle/1``, sha256 of every other file),
``launches.parquet``, and optionally ``metrics.parquet``, ``regions.parquet`` and
``microbench.json``. Readers report a wrong schema, a missing column, a negative
duration, a duplicate ``launch_id`` or a file whose digest disagrees with the
manifest as one :class:`~hilsim.core.errors.HilsimError` line naming file and row.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import platform
import socket
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

import hilsim
from hilsim.core import limits
from hilsim.core.errors import HilsimError
from hilsim.core.files import atomic_directory, recover
from hilsim.core.jsonfile import read_json
from hilsim.core.schema import (
    LAUNCH_COLUMNS,
    OPTIONAL_INT_COLUMNS,
    REGION_COLUMNS,
    REQUIRED_LAUNCH_COLUMNS,
)

BUNDLE_SCHEMA = "hilsim.bundle/1"
MANIFEST = "manifest.json"
LAUNCHES = "launches.parquet"
METRICS = "metrics.parquet"
REGIONS = "regions.parquet"
MICROBENCH = "microbench.json"


def hilsim_version() -> str:
    """Installed hilsim version (``0+unknown`` when running from a bare checkout): the
    package's ``hilsim.__version__``, read from the installed metadata once."""
    return str(hilsim.__version__)


@dataclass
class Bundle:
    """A profile in memory: the bundle-v1 tables plus the manifest.

    Attributes:
        launches: one row per kernel launch (see :mod:`hilsim.core.schema`).
        metrics: detailed counters for a subset, ``launch_id`` + one float column
            per Nsight Compute metric; ``None`` when not profiled.
        regions: NVTX ranges; ``None`` when none were recorded.
        manifest: the manifest dict (device, workload, profilers, ...).
        microbench: microbenchmark measurements, or ``None``.
        path: where the bundle was read from, if anywhere.
    """

    launches: pd.DataFrame
    metrics: pd.DataFrame | None = None
    regions: pd.DataFrame | None = None
    manifest: dict[str, Any] = field(default_factory=dict)
    microbench: list[dict[str, Any]] | None = None
    path: Path | None = None
    _digest: tuple[tuple[int, int], str] | None = field(default=None, repr=False, compare=False)

    @property
    def n_launches(self) -> int:
        return len(self.launches)

    def sequence_digest(self) -> str:
        """sha256 over the kernel-name sequence (order-sensitive, category-order-free).

        Two runs of the same workload that launched the same kernels in the same
        order have the same digest; plans record it to detect a different
        workload when evaluated elsewhere. Computed once per launches table (every
        plan and every score asks for it; hashing 10M names takes a fraction of a
        second each time).
        """
        key = (id(self.launches), len(self.launches))
        if self._digest is None or self._digest[0] != key:
            hashes = pd.util.hash_pandas_object(self.launches["name"], index=False)
            # (hashed through the buffer protocol: the same bytes, no copy of them)
            digest = hashlib.sha256(np.ascontiguousarray(hashes.to_numpy(dtype=np.uint64)))
            digest.update(str(len(self.launches)).encode())
            self._digest = (key, digest.hexdigest())
        return self._digest[1]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def default_manifest(**sections: Any) -> dict[str, Any]:
    """A manifest with the fields every bundle carries; ``sections`` override."""
    manifest: dict[str, Any] = {
        "schema": BUNDLE_SCHEMA,
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "hilsim_version": hilsim_version(),
        "host": {"hostname": socket.gethostname(), "platform": platform.platform()},
        "device": {},
        "workload": {},
        "profilers": [],
        "complete": True,
    }
    manifest.update(sections)
    return manifest


def manifest_digest(manifest: dict[str, Any]) -> str:
    """sha256 of the manifest's own facts: every key but ``digest``, as canonical JSON.

    Written as ``manifest["digest"]`` and checked on read, so an edited
    fact (``n_launches``, a file's size or sha256, the device) is caught even when the
    files it describes are untouched. Like the files' sha256 it is an integrity checksum
    against accidental damage, not a signature: it is unkeyed, anyone can recompute it
    (docs/limits.md, "What a bundle promises").
    """
    facts = {key: value for key, value in manifest.items() if key != "digest"}
    text = json.dumps(facts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def write_table(frame: pd.DataFrame, path: Path) -> None:
    """Write ``frame`` (without its index) as a zstd-compressed Parquet file at ``path``:
    how every table of a bundle is stored."""
    import pyarrow.parquet as pq  # lazy: a command that writes no bundle never loads it

    table = pa.Table.from_pandas(frame, preserve_index=False)
    pq.write_table(table, path, compression="zstd")


def finish_manifest(folder: Path, manifest: dict[str, Any], n_launches: int) -> dict[str, Any]:
    """Write ``folder``'s manifest: the sha256 and size of every file in it, ``n_launches``
    and the digest of the facts; return the manifest as a reader gets it back."""
    manifest = dict(manifest)
    manifest.setdefault("schema", BUNDLE_SCHEMA)
    files = manifest.get("source", {}).get("files") if isinstance(
        manifest.get("source"), dict) else None
    check_manifest_sections(
        manifest, files[0] if isinstance(files, list) and files else folder / MANIFEST
    )
    manifest["files"] = {
        item.name: {"sha256": _sha256(item), "bytes": item.stat().st_size}
        for item in sorted(folder.iterdir())
    }
    manifest["n_launches"] = int(n_launches)
    manifest.pop("digest", None)
    manifest = json.loads(json.dumps(manifest, default=str))  # as read back
    manifest["digest"] = manifest_digest(manifest)
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2))
    return manifest


def write_bundle(bundle: Bundle, path: str | Path, overwrite: bool = False) -> Path:
    """Write ``bundle`` to the folder ``path`` atomically (temp folder, then rename).

    Returns the bundle path. The manifest's ``files`` section gets the sha256 and
    size of every file written. Raises :class:`HilsimError` if ``path`` exists
    and ``overwrite`` is false.
    """
    target = Path(path)
    manifest = dict(bundle.manifest) if bundle.manifest else default_manifest()
    manifest.setdefault("schema", BUNDLE_SCHEMA)
    try:
        with atomic_directory(target, overwrite=overwrite) as tmp:
            write_table(bundle.launches[list(LAUNCH_COLUMNS)], tmp / LAUNCHES)
            if bundle.metrics is not None:
                write_table(bundle.metrics, tmp / METRICS)
            if bundle.regions is not None:
                write_table(bundle.regions[list(REGION_COLUMNS)], tmp / REGIONS)
            if bundle.microbench is not None:
                (tmp / MICROBENCH).write_text(json.dumps(bundle.microbench, indent=1))
            manifest = finish_manifest(tmp, manifest, len(bundle.launches))
    except FileExistsError as exc:
        raise HilsimError(f"{target}: already exists (use --force to replace it)") from exc
    bundle.manifest = manifest
    bundle.path = target
    return target


def _read_manifest(folder: Path) -> dict[str, Any]:
    manifest_path = folder / MANIFEST
    if not folder.exists():
        recover(folder)  # a replacement killed between its two renames (no RENAME_EXCHANGE)
    if not folder.is_dir():
        raise HilsimError(f"{folder}: not a bundle folder (no such directory)")
    if not manifest_path.is_file():
        raise HilsimError(f"{manifest_path}: missing; {folder} is not a hilsim bundle")

    manifest = read_json(manifest_path, BUNDLE_SCHEMA)
    if not isinstance(manifest.get("files"), dict):
        raise HilsimError(f"{manifest_path}: no 'files' section with sha256 digests")
    check_manifest_sections(manifest, manifest_path)
    for name, entry in manifest["files"].items():
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("sha256"), str)
            and isinstance(entry.get("bytes"), int)
            and not isinstance(entry.get("bytes"), bool)
            and entry["bytes"] >= 0
        ):
            raise HilsimError(
                f"{manifest_path}: files[{name!r}] must give a sha256 and a size in bytes >= 0"
            )
    n = manifest.get("n_launches")
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise HilsimError(f"{manifest_path}: n_launches must be a positive integer, got {n!r}")
    if manifest.get("digest") != manifest_digest(manifest):
        what = "has no digest" if "digest" not in manifest else "digest differs from its facts"
        raise HilsimError(
            f"{manifest_path}: {what} (manifest edited or written by another tool; re-import)"
        )
    return manifest


_MANIFEST_SECTIONS: dict[str, type] = {
    "device": dict,
    "workload": dict,
    "host": dict,
    "profilers": list,
    "source": dict,
    "warnings": list,
}
_JSON_KIND: dict[type, str] = {dict: "object", list: "array"}


def check_manifest_sections(manifest: dict[str, Any], where: object) -> None:
    """Each section of :data:`_MANIFEST_SECTIONS` present has its JSON type; one line
    naming ``where`` otherwise. Checked on read and before a manifest is written, so no
    bundle is written that its readers refuse."""
    for key, kind in _MANIFEST_SECTIONS.items():
        if key in manifest and not isinstance(manifest[key], kind):
            raise HilsimError(
                f"{where}: {key!r} must be a JSON {_JSON_KIND[kind]}, "
                f"got {type(manifest[key]).__name__}"
            )


def _verify_files(folder: Path, manifest: dict[str, Any]) -> None:
    """Check every file the manifest lists against its sha256."""
    _read_verified(folder, manifest, keep=())


def _read_verified(
    folder: Path, manifest: dict[str, Any], keep: tuple[str, ...]
) -> dict[str, pa.Buffer]:
    """Check every listed file against the manifest; return the bytes of those in ``keep``.

    Each file is read once: the files named in ``keep`` (the tables :func:`read_bundle`
    parses next) are hashed from the same bytes they are then parsed from, so a bundle is
    not read twice from disk; the others are hashed block by block.
    """
    files = manifest["files"]
    if LAUNCHES not in files:
        raise HilsimError(f"{folder / MANIFEST}: does not list {LAUNCHES}")
    _refuse_unlisted(folder, files)
    kept: dict[str, pa.Buffer] = {}
    for name, entry in files.items():
        if Path(name).name != name:
            raise HilsimError(f"{folder / MANIFEST}: unsafe file name {name!r} in 'files'")
        item = folder / name
        if not item.is_file():
            raise HilsimError(f"{item}: listed in the manifest but missing")
        size = item.stat().st_size
        if size != entry["bytes"]:
            raise HilsimError(
                f"{item}: sha256 differs from the manifest (file changed or corrupted: "
                f"{size} bytes, the manifest says {entry['bytes']})"
            )
        expected = entry.get("sha256") if isinstance(entry, dict) else None
        data: pa.Buffer | None = None
        if name in keep:
            data = _read_arrow_buffer(item, size)
            digest = hashlib.sha256(data).hexdigest()
        else:
            digest = _sha256(item)
        if expected != digest:
            raise HilsimError(
                f"{item}: sha256 differs from the manifest (file changed or corrupted)"
            )
        if data is not None:
            kept[name] = data
    return kept


def _read_arrow_buffer(item: Path, size: int) -> pa.Buffer:
    """The file's ``size`` bytes in memory Arrow owns (not a Python ``bytes``).

    Parquet decoding runs on Arrow's thread pool, whose workers may drop their last
    reference to the source buffer after the read has returned. A buffer wrapping a Python
    object takes the GIL to release it; when that happens while the interpreter is
    finalizing (a command that fails right after a read), the worker thread is ended
    inside a C++ destructor and the process aborts ("terminate called without an active
    exception", exit 134). An Arrow-allocated buffer is released without Python.
    """
    buffer = pa.allocate_buffer(size)
    view = memoryview(buffer).cast("B")
    try:
        with open(item, "rb") as handle:
            got = handle.readinto(view)
    except OSError as exc:
        raise HilsimError(f"{item}: cannot read ({exc.strerror or exc})") from exc
    finally:
        view.release()
    if got != size:
        raise HilsimError(
            f"{item}: sha256 differs from the manifest (file changed while read: {got} of "
            f"{size} bytes)"
        )
    return buffer


def _refuse_unlisted(folder: Path, files: dict[str, Any]) -> None:
    """A bundle table the manifest does not list is never loaded unverified."""
    for name in (METRICS, REGIONS, MICROBENCH):
        if name not in files and (folder / name).exists():
            raise HilsimError(
                f"{folder / name}: present but not listed in {MANIFEST} (not verified); "
                "remove it or re-import the profile"
            )


def _parquet_footer(path: Path, data: pa.Buffer | None, expected: int | None = None) -> Any:
    """The parquet footer (``FileMetaData``), its row count checked before any row is
    materialised.

    Refuses a table holding more rows per byte of file than ``max_rows_per_byte`` (a tiny
    file that would expand to gigabytes) and, with ``expected``, a count other than the
    manifest's ``n_launches``.
    """
    import pyarrow.parquet as pq  # lazy: a plan from a CSV reads no Parquet

    source: Any = pa.BufferReader(data) if data is not None else path
    try:
        meta = pq.read_metadata(source)
    except (pa.ArrowException, OSError) as exc:
        raise HilsimError(f"{path}: cannot read parquet ({exc})") from exc
    size = len(data) if data is not None else path.stat().st_size
    rows = int(meta.num_rows)
    grouped = sum(int(meta.row_group(g).num_rows) for g in range(meta.num_row_groups))
    if grouped != rows or any(
        meta.row_group(g).num_rows < 0 for g in range(meta.num_row_groups)
    ):
        # the reader materialises the row groups' rows, whatever the file-level count says
        raise HilsimError(
            f"{path}: the parquet footer says {rows} rows but its row groups hold {grouped} "
            "(file rewritten or damaged)"
        )
    if rows > limits.value("max_rows_per_byte") * max(size, 1):
        raise limits.exceeded(
            path, "max_rows_per_byte", f"{rows} rows in a {size}-byte file"
        )
    if expected is not None and rows == 0:
        raise HilsimError(f"{path}: empty profile: no kernel launches")
    if expected is not None:
        limits.check_launch_memory(path, rows)
    if expected is not None and rows != expected:
        raise HilsimError(
            f"{path}: holds {rows} rows but the manifest says n_launches {expected} "
            "(another bundle's table?)"
        )
    return meta


#: Arrow type checks of the launches table's columns, before conversion
_INT_COLUMNS = ("launch_id", "duration_ns")


def _check_launch_types(table_schema: pa.Schema, source: Path) -> None:
    """Column types of a launches table, from the schema: integer columns are signed (the
    contract's int64; an unsigned column holds values past 2^63 that numpy arithmetic
    mixes with int64 into floats or refuses), names are text."""
    for name in table_schema.names:
        kind = table_schema.field(name).type
        if (name in _INT_COLUMNS or name in OPTIONAL_INT_COLUMNS) and (
            pa.types.is_unsigned_integer(kind)
        ):
            raise HilsimError(
                f"{source}: column {name} must be signed integers (int64), got {kind}"
            )
        if name in _INT_COLUMNS and not pa.types.is_integer(kind):
            raise HilsimError(f"{source}: column {name} must be integers, got {kind}")
        if name in OPTIONAL_INT_COLUMNS and not (
            pa.types.is_integer(kind) or pa.types.is_null(kind)
        ):
            raise HilsimError(f"{source}: column {name} must be integers, got {kind}")
        if name in ("name", "kernel", "region"):
            value_type = kind.value_type if pa.types.is_dictionary(kind) else kind
            if not (
                pa.types.is_string(value_type)
                or pa.types.is_large_string(value_type)
                or pa.types.is_null(value_type)
            ):
                raise HilsimError(f"{source}: column {name} must be text, got {kind}")


def _nullable_int64(column: pa.ChunkedArray) -> pd.arrays.IntegerArray:
    """A nullable ``Int64`` array from an Arrow integer column: values + mask, one copy.

    pandas' own conversion (``Int64Dtype.__from_arrow__``) copies every chunk, builds a
    mask per chunk and concatenates them again; this gives the same array in one pass.
    """
    if not pa.types.is_integer(column.type):  # e.g. an all-null column of type null
        return pd.Int64Dtype().__from_arrow__(column)
    if column.null_count:
        mask = column.is_null().to_numpy()
        column = column.fill_null(0)
    else:
        mask = np.zeros(len(column), dtype=bool)
    values = np.asarray(column.to_numpy(), dtype=np.int64)
    if not values.flags.writeable:
        values = values.copy()
    return pd.arrays.IntegerArray(values, mask)


def _as_write_table_writes(schema: pa.Schema) -> bool:
    """Whether the table is laid out as :func:`write_table` writes one: no stored index
    column, no repeated column name."""
    metadata = schema.pandas_metadata or {}
    stored_index = any(isinstance(i, str) for i in metadata.get("index_columns", []))
    return not stored_index and len(set(schema.names)) == len(schema.names)


def _nullable_columns(schema: pa.Schema) -> set[str]:
    """Columns pandas wrote as nullable ``Int64`` (from the schema's pandas metadata)."""
    metadata = schema.pandas_metadata or {}
    return {
        c.get("name") for c in metadata.get("columns", []) if c.get("numpy_type") == "Int64"
    }


def _table_to_frame(table: pa.Table) -> pd.DataFrame:
    """Arrow table -> pandas, as ``table.to_pandas()`` gives it, without its slow paths.

    Columns pandas wrote as nullable ``Int64`` are built from numpy values and a null
    mask (:func:`_nullable_int64`); the others are combined into one chunk each and
    converted without consolidating them into 2-D blocks (float columns without nulls
    are then taken over without a copy).
    """
    names = list(table.column_names)
    if not _as_write_table_writes(table.schema):
        return table.to_pandas()
    nullable = _nullable_columns(table.schema)
    ints = {}
    for name in names:
        if name in nullable:
            ints[name] = _nullable_int64(table.column(name))
            # drop the Arrow column as soon as it is converted: the table shrinks while the
            # frame grows, so the peak is about one copy of the columns, not two
            table = table.drop_columns([name])
    rest = table.combine_chunks()
    del table
    frame = rest.to_pandas(split_blocks=True, self_destruct=True)
    del rest
    if not ints:
        return frame
    columns = {name: ints[name] if name in ints else frame[name] for name in names}
    return pd.DataFrame(columns, index=frame.index, copy=False)


def _constant_int_columns(meta: Any, wanted: list[str]) -> dict[str, int]:
    """Integer columns of ``wanted`` that hold one value in every row, from the Parquet
    footer's row-group statistics (exact for integers): no null, the same minimum and
    maximum in every row group. Such a column is never decoded."""
    if meta.num_rows == 0 or meta.num_row_groups == 0:
        return {}
    index = {meta.schema.column(i).name: i for i in range(meta.num_columns)}
    out: dict[str, int] = {}
    for name in wanted:
        position = index.get(name)
        if position is None or meta.schema.column(position).physical_type != "INT64":
            continue
        values = set()
        for group in range(meta.num_row_groups):
            stats = meta.row_group(group).column(position).statistics
            if stats is None or not stats.has_min_max or stats.null_count != 0:
                values = set()
                break
            values.update((stats.min, stats.max))
            if len(values) > 1:
                break
        if len(values) == 1:
            out[name] = int(values.pop())
    return out


#: rows decoded at a time when constant columns are checked against their pages
_CHECK_BATCH_ROWS = 1 << 16


def _check_constant_columns(
    path: Path, source: Any, meta: Any, constants: dict[str, int]
) -> None:
    """Check that each column of ``constants`` holds its one value in every row, as the
    footer's statistics claim: statistics are a hint a tool (or an edit) may get wrong,
    and a column taken from them is never decoded otherwise. The columns are decoded a
    batch at a time (memory of :data:`_CHECK_BATCH_ROWS` rows, delta-encoded pages decode
    at ~1 ns per value), and a disagreement is one line naming the first row."""
    import pyarrow.compute as pc  # lazy: with pyarrow.parquet, only where bundles are read
    import pyarrow.parquet as pq  # lazy: a plan from a CSV reads no Parquet

    handle = pq.ParquetFile(source, metadata=meta)
    first = 0
    for batch in handle.iter_batches(
        batch_size=_CHECK_BATCH_ROWS, columns=list(constants), use_threads=False
    ):
        for name, value in constants.items():
            column = batch.column(name)
            differs = pc.fill_null(pc.not_equal(column, pa.scalar(value, column.type)), True)
            if pc.any(differs).as_py():
                at = int(np.flatnonzero(differs.to_numpy(zero_copy_only=False))[0])
                held = column[at].as_py()
                raise HilsimError(
                    f"{path}: row {first + at}: column {name} holds "
                    f"{'null' if held is None else held} where the parquet footer's "
                    f"statistics say every row holds {value} (statistics rewritten or "
                    "damaged; re-import the profile)"
                )
        first += batch.num_rows


def _with_constant_columns(
    frame: pd.DataFrame, constants: dict[str, int], order: list[str], schema: pa.Schema
) -> pd.DataFrame:
    """``frame`` with each constant column added back as a read-only view of its one value
    (pandas copies it on write), in the file's column order: a column the profile holds one
    value in costs no N-long buffer (at 50M launches each would be 400 MB)."""
    nullable = _nullable_columns(schema)
    n = len(frame)
    columns: dict[str, Any] = {}
    for name in order:
        if name not in constants:
            columns[name] = frame[name]
            continue
        values = np.broadcast_to(np.int64(constants[name]), (n,))
        columns[name] = (
            pd.arrays.IntegerArray(values, np.broadcast_to(np.False_, (n,)))
            if name in nullable else values
        )
    out = pd.DataFrame(columns, index=frame.index, copy=False)
    out.attrs = frame.attrs
    return out


def _read_parquet(
    path: Path,
    data: pa.Buffer | None = None,
    columns: list[str] | None = None,
    expected_rows: int | None = None,
    launches: bool = False,
) -> pd.DataFrame:
    """Read one parquet table (only ``columns`` when given: the others are never decoded),
    from ``data`` (its bytes, already read into an Arrow buffer) when given.

    The footer is read once and checked first (:func:`_parquet_footer`; with ``launches``
    the column types too), so a table that would not fit is refused before it is
    materialised.
    """
    import pyarrow.parquet as pq  # lazy: a plan from a CSV reads no Parquet

    meta = _parquet_footer(path, data, expected_rows)
    source: Any = pa.BufferReader(data) if data is not None else path
    try:
        schema = meta.schema.to_arrow_schema()
        if launches:
            _check_launch_types(schema, path)
        if columns is not None:
            present = set(schema.names)
            columns = [c for c in columns if c in present]
        constants: dict[str, int] = {}
        if launches and _as_write_table_writes(schema):
            wanted = list(schema.names) if columns is None else columns
            constants = _constant_int_columns(meta, wanted)
            if constants:
                order, columns = wanted, [c for c in wanted if c not in constants]
                checked = pa.BufferReader(data) if data is not None else path
                _check_constant_columns(path, checked, meta, constants)
                del checked
        del data  # (the caller passed its only reference) so the bytes go once parsed
        tables = [pq.read_table(source, columns=columns)]
        del source
        if tables[0].num_rows != meta.num_rows:
            raise HilsimError(
                f"{path}: holds {tables[0].num_rows} rows where its parquet footer says "
                f"{meta.num_rows} (file rewritten or damaged)"
            )
        frame = _table_to_frame(tables.pop())  # hands over the only reference
        if not constants:
            return frame
        return _with_constant_columns(frame, constants, order, schema)
    except (pa.ArrowException, OSError) as exc:
        raise HilsimError(f"{path}: cannot read parquet ({exc})") from exc


def validate_launches(
    launches: pd.DataFrame, source: str, required: tuple[str, ...] = LAUNCH_COLUMNS
) -> None:
    """Check a launches table against bundle v1; raise one line naming the row.

    ``required``: the columns that must be present (a read of some columns only checks
    those it read, plus the ones checked here).
    """
    missing = [c for c in required if c not in launches.columns]
    if missing:
        raise HilsimError(f"{source}: missing column(s) {', '.join(missing)}")
    if len(launches) == 0:
        raise HilsimError(f"{source}: empty profile: no kernel launches")
    ids = launches["launch_id"].to_numpy()
    expected = np.arange(len(launches))
    if not np.array_equal(ids, expected):
        dup = pd.Index(ids).duplicated()
        if dup.any():
            row = int(np.flatnonzero(dup)[0])
            raise HilsimError(f"{source}: row {row}: duplicate launch_id {ids[row]}")
        row = int(np.flatnonzero(ids != expected)[0])
        raise HilsimError(
            f"{source}: row {row}: launch_id {ids[row]} out of order (expected {row})"
        )
    durations = launches["duration_ns"].to_numpy()
    if durations.dtype.kind not in "iu":
        raise HilsimError(f"{source}: column duration_ns must be integer nanoseconds")
    negative = durations < 0
    if negative.any():
        row = int(np.flatnonzero(negative)[0])
        raise HilsimError(f"{source}: row {row}: negative duration_ns {durations[row]}")
    if launches["name"].isna().any():
        row = int(np.flatnonzero(launches["name"].isna().to_numpy())[0])
        raise HilsimError(f"{source}: row {row}: kernel name is null")


def validate_metrics(metrics: pd.DataFrame, n_launches: int, source: str) -> None:
    """Check a metrics table: ``launch_id`` present, unique, within the launches."""
    if "launch_id" not in metrics.columns:
        raise HilsimError(f"{source}: missing column launch_id")
    ids = metrics["launch_id"].to_numpy()
    dup = pd.Index(ids).duplicated()
    if dup.any():
        row = int(np.flatnonzero(dup)[0])
        raise HilsimError(f"{source}: row {row}: duplicate launch_id {ids[row]}")
    outside = (ids < 0) | (ids >= n_launches)
    if outside.any():
        row = int(np.flatnonzero(outside)[0])
        raise HilsimError(
            f"{source}: row {row}: launch_id {ids[row]} has no launch "
            f"(bundle has {n_launches} launches)"
        )
    if ids.dtype.kind not in "iu":
        raise HilsimError(f"{source}: column launch_id must be integers, got {ids.dtype}")
    for column in metrics.columns:
        if column != "launch_id" and metrics[column].dtype.kind not in "fiu":
            raise HilsimError(f"{source}: metric column {column!r} is not numeric")
        if column != "launch_id" and metrics[column].dtype.kind == "f":
            infinite = np.isinf(metrics[column].to_numpy())
            if infinite.any():
                row = int(np.flatnonzero(infinite)[0])
                raise HilsimError(f"{source}: row {row}: metric {column!r} is not finite")


def _as_categoricals(launches: pd.DataFrame) -> pd.DataFrame:
    for column in ("name", "kernel", "region"):
        if column in launches.columns and not isinstance(
            launches[column].dtype, pd.CategoricalDtype
        ):
            launches[column] = launches[column].astype("category")
    return launches


def read_bundle(
    path: str | Path, verify: bool = True, columns: Iterable[str] | None = None
) -> Bundle:
    """Read and validate a bundle folder.

    With ``verify`` (default) every file's sha256 is checked against the manifest; each
    table is hashed from the same bytes it is then parsed from (one read per file).
    ``columns``: read only these launch columns (plus ``launch_id``, ``name``, ``kernel``
    and ``duration_ns``, always read); the others are not decoded at all (at 50M
    launches each nullable integer column is 0.45 GB in memory). Default: every column.
    Raises :class:`HilsimError` with one line naming the file (and row) on any
    problem.
    """
    folder = Path(path)
    manifest = _read_manifest(folder)
    # the tables' verified bytes: each file is read from disk once, hashed, then parsed
    if verify:
        raw = _read_verified(folder, manifest, (LAUNCHES, METRICS, REGIONS))
    else:
        _refuse_unlisted(folder, manifest["files"])
        raw = {}
    listed = manifest["files"]
    wanted = None
    if columns is not None:
        wanted = list(dict.fromkeys([*REQUIRED_LAUNCH_COLUMNS, *columns]))
        wanted = [c for c in LAUNCH_COLUMNS if c in wanted]
    launches = _as_categoricals(
        _read_parquet(
            folder / LAUNCHES,
            raw.pop(LAUNCHES, None),
            wanted,
            expected_rows=manifest["n_launches"],
            launches=True,
        )
    )
    validate_launches(
        launches,
        str(folder / LAUNCHES),
        LAUNCH_COLUMNS if wanted is None else tuple(REQUIRED_LAUNCH_COLUMNS),
    )
    metrics = None
    if METRICS in listed:
        metrics = _read_parquet(folder / METRICS, raw.pop(METRICS, None))
        validate_metrics(metrics, len(launches), str(folder / METRICS))
    regions = None
    if REGIONS in listed:
        regions = _read_parquet(folder / REGIONS, raw.pop(REGIONS, None))
        missing = [c for c in REGION_COLUMNS if c not in regions.columns]
        if missing:
            raise HilsimError(f"{folder / REGIONS}: missing column(s) {', '.join(missing)}")
    microbench = None
    if MICROBENCH in listed:
        microbench = read_json(folder / MICROBENCH)
        if not isinstance(microbench, list | dict):
            raise HilsimError(f"{folder / MICROBENCH}: expected JSON measurements")
    return Bundle(launches, metrics, regions, manifest, microbench, folder)
