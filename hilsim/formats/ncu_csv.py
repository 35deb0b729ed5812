"""Nsight Compute (``ncu``) CSV importer: per-launch hardware metrics for a bundle.

Two CSV layouts are read, whichever ``ncu`` version wrote them:

* **details** (the default of ``ncu --csv`` and ``ncu --import x.ncu-rep --csv``): long, one
  row per (launch, metric). Header ``"ID","Process ID","Process Name","Host Name",
  "Kernel Name",...,"Section Name","Metric Name","Metric Unit","Metric Value"``. Handled
  variants: Nsight Compute 2019.x/2020.x (``"Kernel Time"`` column, no ``"Block Size"`` /
  ``"Grid Size"`` columns), 2021+ (``"Block Size"``, ``"Grid Size"``, ``"Device"``, ``"CC"``)
  and 2023+ (trailing ``"Rule Name"``, ``"Rule Type"``, ``"Rule Description"``,
  ``"Estimated Speedup ..."`` columns; rule rows without a metric are dropped). Extra or
  missing descriptive columns are tolerated; ``ID``, ``Kernel Name``, ``Metric Name`` and
  ``Metric Value`` are required.
* **raw** (``--page raw``): wide, one row per launch and one column per metric (names such as
  ``gpu__time_duration.sum`` exactly as Nsight Compute spells them). The row after the header
  holds units (its ``ID`` cell is empty) and is used for conversion, not as data.

Common to both: lines before the header (``==PROF==``, ``==WARNING==``, the profiled program's
own output) and ``==...==`` lines after it are skipped; values may carry locale grouping
(``"1,048,576"``: the comma is taken as the thousands separator, the point as the decimal
mark); ``n/a`` (unsupported metric) and empty cells become NaN; text-valued metrics (device
names, policies) are dropped. Values are converted to base units: times to ``nsecond``
(``ns``/``usecond``/``us``/``msecond``/``ms``/``second``/``s``), sizes to ``byte``
(``Kbyte``/``Mbyte``/``Gbyte``/``Tbyte`` decimal, ``KiB``... binary), rates to ``.../second``,
frequencies to ``hz``; percentages and counts are left as they are. In the details layout the
unit is applied per row (ncu scales each value separately unless ``--print-units base``).

The summary layout (``--print-summary``) and nvprof CSV are a different shape and are
rejected with a :class:`~hilsim.core.errors.HilsimError` naming the file.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from hilsim.core.errors import HilsimError
from hilsim.core.schema import checked_int64, kernel_base_name, names_agree

DETAILS = "details"
RAW = "raw"

_ID = "ID"
_NAME = "Kernel Name"
_METRIC = "Metric Name"
_UNIT = "Metric Unit"
_VALUE = "Metric Value"
_NA_STRINGS = ("", "n/a", "N/A", "nan", "NaN", "-", "--")

# prefix -> factor, per unit family; the base name each family converts to
_TIME_NUM = {
    "ns": 1.0,
    "nsecond": 1.0,
    "us": 1e3,
    "usecond": 1e3,
    "ms": 1e6,
    "msecond": 1e6,
    "s": 1e9,
    "second": 1e9,
    "ps": 1e-3,
    "psecond": 1e-3,
}
_TIME_DEN = {k: v / 1e9 for k, v in _TIME_NUM.items()}
_BYTE = {
    "byte": 1.0,
    "B": 1.0,
    "Kbyte": 1e3,
    "KB": 1e3,
    "Mbyte": 1e6,
    "MB": 1e6,
    "Gbyte": 1e9,
    "GB": 1e9,
    "Tbyte": 1e12,
    "TB": 1e12,
    "KiB": 2.0**10,
    "MiB": 2.0**20,
    "GiB": 2.0**30,
    "TiB": 2.0**40,
}
_HZ = {
    "hz": 1.0,
    "Hz": 1.0,
    "khz": 1e3,
    "Khz": 1e3,
    "KHz": 1e3,
    "mhz": 1e6,
    "Mhz": 1e6,
    "MHz": 1e6,
    "ghz": 1e9,
    "Ghz": 1e9,
    "GHz": 1e9,
}
_SCALED = {
    "cycle": ("cycle", {"cycle": 1.0, "Kcycle": 1e3, "Mcycle": 1e6, "Gcycle": 1e9}),
    "inst": ("inst", {"inst": 1.0, "Kinst": 1e3, "Minst": 1e6, "Ginst": 1e9}),
}


def _unit_part(part: str, denominator: bool) -> tuple[str, float]:
    part = part.strip()
    if part in _TIME_NUM:
        return ("second", _TIME_DEN[part]) if denominator else ("nsecond", _TIME_NUM[part])
    if part in _BYTE:
        return "byte", _BYTE[part]
    if part in _HZ:
        return "hz", _HZ[part]
    for base, scales in _SCALED.values():
        if part in scales:
            return base, scales[part]
    return part, 1.0


def unit_factor(unit: str) -> tuple[str, float]:
    """``(base unit, factor)`` so that ``value * factor`` is in the base unit.

    ``usecond`` -> ``("nsecond", 1000)``, ``Gbyte/second`` -> ``("byte/second", 1e9)``,
    ``cycle/nsecond`` -> ``("cycle/second", 1e9)``, ``%`` -> ``("%", 1)``.
    """
    text = str(unit).strip()
    if not text or "/" not in text:
        base, factor = _unit_part(text, denominator=False) if text else ("", 1.0)
        return base, factor
    numerator, _, denominator = text.partition("/")
    num_base, num_factor = _unit_part(numerator, denominator=False)
    den_base, den_factor = _unit_part(denominator, denominator=True)
    return f"{num_base}/{den_base}", num_factor / den_factor


@dataclass
class NcuTable:
    """An Nsight Compute CSV as two tables.

    Attributes:
        launches: one row per profiled launch in ncu ``ID`` order: ``ncu_id`` (int64), ``name``
            (kernel name as ncu printed it), ``grid_x/y/z`` and ``block_x/y/z`` (nullable
            ``Int64``) where the file gives them, and ``grid_size`` / ``block_size`` (total
            blocks / threads per block) where only totals are known.
        metrics: ``ncu_id`` + one float64 column per numeric metric, named exactly as in the
            file (raw metric names, or display names such as ``Duration`` in details CSVs
            written without ``--metrics``), in base units (see :func:`unit_factor`).
        units: metric column -> base unit after conversion (``""`` when unitless).
        layout: ``"details"`` (long) or ``"raw"`` (wide, ``--page raw``).
        source: the file name, for messages.
    """

    launches: pd.DataFrame
    metrics: pd.DataFrame
    units: dict[str, str] = field(default_factory=dict)
    layout: str = DETAILS
    source: str = ""


def _fail(source: str, message: str) -> HilsimError:
    return HilsimError(f"{source}: {message}")


def _find_header(lines: list[str], source: str) -> int:
    for index, line in enumerate(lines):
        text = line.lstrip("\ufeff").lstrip()
        if text.startswith('"ID",') or text.startswith("ID,"):
            return index
    sample = next((ln.strip() for ln in lines if ln.strip() and not ln.startswith("==")), "")
    hint = ""
    if "Invocations" in sample or "Metric Description" in sample:
        hint = " (this looks like nvprof or an ncu --print-summary table)"
    elif sample:
        hint = f" (first line: {sample[:60]!r})"
    raise _fail(
        source,
        'not an Nsight Compute CSV: no header line starting with "ID" '
        f"(expected ncu --csv or --csv --page raw output){hint}",
    )


def _read_table(path: Path, source: str) -> tuple[pd.DataFrame, int]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise _fail(source, f"cannot read file ({exc.strerror or exc})") from exc
    text = raw.decode("utf-8", errors="replace")
    if not text.strip():
        raise _fail(source, "empty file: no Nsight Compute CSV output")
    lines = text.splitlines()
    start = _find_header(lines, source)
    body = [ln for ln in lines[start:] if ln.strip() and not ln.startswith("==")]
    try:
        frame = pd.read_csv(
            io.StringIO("\n".join(body)),
            dtype=str,
            keep_default_na=False,
            na_filter=False,
            quoting=csv.QUOTE_MINIMAL,
        )
    except (pd.errors.ParserError, ValueError, csv.Error) as exc:
        detail = " ".join(str(exc).split())
        raise _fail(
            source, f"malformed CSV after line {start + 1} ({detail}); the file may be truncated"
        ) from exc
    return frame, start


def _check_complete(frame: pd.DataFrame, source: str, header_line: int, columns: list[str]) -> None:
    """A truncated last line leaves its trailing cells missing (read as NaN)."""
    if not len(frame):
        return
    missing = frame[columns].isna().any(axis=1).to_numpy()
    if missing.any():
        row = int(np.flatnonzero(missing)[0])
        raise _fail(
            source,
            f"line {header_line + row + 2}: row has fewer fields than the header (file truncated?)",
        )


def _to_float(values: pd.Series) -> pd.Series:
    """Vectorised: strip grouping commas, map n/a and empty to NaN, parse floats."""
    text = values.astype(str).str.strip()
    text = text.where(~text.isin(_NA_STRINGS), "")
    cleaned = text.str.replace(",", "", regex=False)
    return pd.to_numeric(cleaned.where(cleaned != "", None), errors="coerce").astype(np.float64)


_DIM3 = re.compile(r"^\s*\(?\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)?\s*$")


def _dim3(values: pd.Series, prefix: str, source: str) -> pd.DataFrame:
    parts = values.astype(str).str.replace("\u202f", "", regex=False).str.extract(_DIM3)
    parts.columns = [f"{prefix}_x", f"{prefix}_y", f"{prefix}_z"]
    return pd.DataFrame(
        {c: checked_int64(parts[c], source, c) for c in parts.columns},
        index=parts.index,
    )


def _parse_ids(ids: pd.Series, source: str, header_line: int, offset: int = 0) -> np.ndarray:
    parsed = pd.to_numeric(ids.astype(str).str.strip(), errors="coerce")
    floats = parsed.to_numpy(dtype=np.float64, na_value=np.nan)
    with np.errstate(invalid="ignore"):
        bad = ~((floats >= 0) & (floats < 2.0**63) & (np.floor(floats) == floats))
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise _fail(
            source,
            f"line {header_line + row + 2 + offset}: ID {ids.iloc[row]!r} is not a launch number",
        )
    return parsed.to_numpy(dtype=np.int64)


def _details(frame: pd.DataFrame, source: str, header_line: int) -> NcuTable:
    for column in (_ID, _NAME, _METRIC, _VALUE):
        if column not in frame.columns:
            raise _fail(source, f"details CSV lacks the column {column!r}")
    _check_complete(frame, source, header_line, [_ID, _NAME, _METRIC, _VALUE])
    frame = frame[frame[_METRIC].astype(str).str.strip() != ""]
    if not len(frame):
        raise _fail(source, "no metric rows (ncu profiled no kernels, or the CSV is empty)")
    ids = _parse_ids(frame[_ID], source, header_line)
    frame = frame.assign(ncu_id=ids)
    values = _to_float(frame[_VALUE])
    units = frame[_UNIT] if _UNIT in frame.columns else pd.Series("", index=frame.index)
    unit_text = units.astype(str).str.strip().to_numpy()
    uniq_units, unit_codes = np.unique(unit_text, return_inverse=True)
    conversions = [unit_factor(u) for u in uniq_units]
    factors = np.array([c[1] for c in conversions], dtype=np.float64)
    bases = np.array([c[0] for c in conversions], dtype=object)
    long = pd.DataFrame(
        {
            "ncu_id": ids,
            "metric": frame[_METRIC].astype(str).str.strip().to_numpy(),
            "value": values.to_numpy() * factors[unit_codes],
            "unit": bases[unit_codes],
            "raw": frame[_VALUE].astype(str).to_numpy(),
        }
    )
    # a display name may repeat inside one launch (two sections); keep the first
    long = long.drop_duplicates(["ncu_id", "metric"], keep="first")
    # drop text-valued metrics (every present value non-numeric)
    present = ~long["raw"].str.strip().isin(_NA_STRINGS)
    numeric_any = (
        long.assign(ok=long["value"].notna() | ~present).groupby("metric", sort=False)["ok"].all()
    )
    keep = numeric_any[numeric_any].index
    long = long[long["metric"].isin(keep)]
    metric_order = pd.unique(long["metric"])
    wide = long.pivot(index="ncu_id", columns="metric", values="value")
    wide = wide.reindex(columns=metric_order).astype(np.float64)
    wide.columns.name = None
    unit_map = long.groupby("metric", sort=False)["unit"].agg(lambda s: s.mode().iloc[0]).to_dict()
    first = frame.drop_duplicates("ncu_id", keep="first").set_index("ncu_id").loc[wide.index]
    launches = pd.DataFrame({"ncu_id": wide.index.to_numpy(dtype=np.int64)})
    launches["name"] = first[_NAME].astype(str).to_numpy()
    for column, prefix in (("Grid Size", "grid"), ("Block Size", "block")):
        if column in first.columns:
            dims = _dim3(first[column].reset_index(drop=True), prefix, source)
            for dim in dims.columns:
                launches[dim] = dims[dim].to_numpy()
    metrics = wide.reset_index()
    metrics["ncu_id"] = metrics["ncu_id"].astype(np.int64)
    _add_totals(
        launches, metrics, ("launch__grid_size", "Grid Size"), ("launch__block_size", "Block Size")
    )
    return NcuTable(launches, metrics.reset_index(drop=True), unit_map, DETAILS, source)


_DESCRIPTIVE = (
    "ID",
    "Process ID",
    "Process Name",
    "Host Name",
    "Kernel Name",
    "Kernel Time",
    "Context",
    "Stream",
    "Block Size",
    "Grid Size",
    "Device",
    "CC",
    "thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg",
    "Id:Domain:Start/Stop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg",
)


def _raw(frame: pd.DataFrame, source: str, header_line: int) -> NcuTable:
    if _NAME not in frame.columns:
        raise _fail(source, f"raw CSV lacks the column {_NAME!r}")
    _check_complete(frame, source, header_line, list(frame.columns))
    offset = 0
    units_row: pd.Series | None = None
    if len(frame) and str(frame[_ID].iloc[0]).strip() == "":
        units_row = frame.iloc[0]
        frame = frame.iloc[1:].reset_index(drop=True)
        offset = 1
    if not len(frame):
        raise _fail(source, "no launches: the CSV has a header but no data rows")
    ids = _parse_ids(frame[_ID], source, header_line, offset)
    order = np.argsort(ids, kind="stable")
    frame = frame.iloc[order].reset_index(drop=True)
    ids = ids[order]
    metric_columns = [
        c
        for c in frame.columns
        if c not in _DESCRIPTIVE and not str(c).startswith(("thread Domain:", "Id:Domain:"))
    ]
    # parse every metric cell in one vectorised pass, then reshape to (launches, metrics)
    cells = pd.Series(frame[metric_columns].to_numpy(dtype=object).ravel())
    shape = (len(frame), len(metric_columns))
    parsed = _to_float(cells).to_numpy().reshape(shape)
    present = (~cells.astype(str).str.strip().isin(_NA_STRINGS)).to_numpy().reshape(shape)
    text_valued = present.any(axis=0) & ~(present & ~np.isnan(parsed)).any(axis=0)
    columns: dict[str, np.ndarray] = {"ncu_id": ids}
    unit_map: dict[str, str] = {}
    for index, column in enumerate(metric_columns):
        if text_valued[index]:
            continue
        unit = "" if units_row is None else str(units_row[column]).strip()
        base, factor = unit_factor(unit)
        columns[column] = parsed[:, index] * factor
        unit_map[column] = base
    metrics = pd.DataFrame(columns)
    launches = pd.DataFrame({"ncu_id": ids, "name": frame[_NAME].astype(str).to_numpy()})
    for column, prefix, dims in (
        ("Grid Size", "grid", ("launch__grid_dim_x", "launch__grid_dim_y", "launch__grid_dim_z")),
        (
            "Block Size",
            "block",
            ("launch__block_dim_x", "launch__block_dim_y", "launch__block_dim_z"),
        ),
    ):
        if column in frame.columns:
            parts = _dim3(frame[column], prefix, source)
            for dim in parts.columns:
                launches[dim] = parts[dim].to_numpy()
        elif all(d in metrics.columns for d in dims):
            for axis, dim in zip("xyz", dims, strict=True):
                launches[f"{prefix}_{axis}"] = metrics[dim].round().astype("Int64").to_numpy()
    _add_totals(launches, metrics, ("launch__grid_size",), ("launch__block_size",))
    return NcuTable(launches, metrics, unit_map, RAW, source)


def _add_totals(
    launches: pd.DataFrame,
    metrics: pd.DataFrame,
    grid_names: tuple[str, ...],
    block_names: tuple[str, ...],
) -> None:
    for target, names in (("grid_size", grid_names), ("block_size", block_names)):
        for name in names:
            if name in metrics.columns:
                launches[target] = metrics[name].round().astype("Int64").to_numpy()
                break


def read_ncu_csv(path: str | Path) -> NcuTable:
    """Read an Nsight Compute CSV (details or ``--page raw`` layout) into an :class:`NcuTable`.

    See the module docstring for the versions and variants handled. Raises
    :class:`HilsimError` (one line naming the file) for a missing, empty, truncated or
    non-ncu file.
    """
    file = Path(path)
    source = str(file)
    frame, header_line = _read_table(file, source)
    if _ID not in frame.columns:
        raise _fail(source, 'not an Nsight Compute CSV: the header has no "ID" column')
    if _METRIC in frame.columns and _VALUE in frame.columns:
        return _details(frame, source, header_line)
    if _METRIC in frame.columns or "Invocations" in frame.columns:
        raise _fail(
            source,
            "unsupported ncu CSV layout (summary?): use the default details page or --page raw",
        )
    return _raw(frame, source, header_line)


def _how(by: str, first_launch: int) -> str:
    return f"joined by order from launch {first_launch}" if by == "order" else "joined by ID"


def _config_mismatch(
    launches: pd.DataFrame, rows: np.ndarray, ncu_launches: pd.DataFrame
) -> tuple[int, str, str] | None:
    """First row where grid/block disagree where both sides know them."""
    bad = np.zeros(len(rows), dtype=bool)
    checks: list[tuple[str, list[str]]] = [
        ("grid", ["grid_x", "grid_y", "grid_z"]),
        ("block", ["block_x", "block_y", "block_z"]),
    ]
    for _label, cols in checks:
        for col in cols:
            if col in ncu_launches.columns and col in launches.columns:
                ours = launches[col].to_numpy(dtype=np.float64, na_value=np.nan)[rows]
                theirs = ncu_launches[col].to_numpy(dtype=np.float64, na_value=np.nan)
                bad |= ~np.isnan(ours) & ~np.isnan(theirs) & (ours != theirs)
    for total, cols in (("grid_size", checks[0][1]), ("block_size", checks[1][1])):
        if total in ncu_launches.columns and all(c in launches.columns for c in cols):
            prod = np.ones(len(rows))
            for col in cols:
                prod = prod * launches[col].to_numpy(dtype=np.float64, na_value=np.nan)[rows]
            theirs = ncu_launches[total].to_numpy(dtype=np.float64, na_value=np.nan)
            bad |= ~np.isnan(prod) & ~np.isnan(theirs) & (prod != theirs)
    if not bad.any():
        return None
    k = int(np.flatnonzero(bad)[0])

    def describe(frame: pd.DataFrame, i: int) -> str:
        parts = []
        for label, cols, total in (
            ("grid", checks[0][1], "grid_size"),
            ("block", checks[1][1], "block_size"),
        ):
            if all(c in frame.columns for c in cols) and frame[cols].iloc[i].notna().all():
                parts.append(f"{label} ({', '.join(str(int(v)) for v in frame[cols].iloc[i])})")
            elif total in frame.columns and pd.notna(frame[total].iloc[i]):
                parts.append(f"{label} {int(frame[total].iloc[i])}")
        return " ".join(parts) or "unknown launch configuration"

    return k, describe(ncu_launches, k), describe(launches, int(rows[k]))


def join_metrics(
    launches: pd.DataFrame,
    ncu: NcuTable,
    by: str = "order",
    first_launch: int = 0,
) -> pd.DataFrame:
    """Attach ncu metrics to bundle launches; return a bundle ``metrics`` table.

    ``by="order"``: the k-th ncu launch (``ID`` order) is launch ``first_launch + k`` (ncu
    profiled a contiguous run, e.g. ``--launch-skip S --launch-count N``; apply kernel-name
    filters only if the launches table was filtered the same way). ``by="id"``: ncu ``ID``
    equals ``launch_id``. Kernel names must agree (short base names, see
    :func:`hilsim.core.schema.kernel_base_name`) and grid/block must agree where both sides know
    them; otherwise a one-line :class:`HilsimError` names the ncu ID, the launch and both names.

    Returns ``launch_id`` (int64) + one float64 column per metric.
    """
    source = ncu.source or "ncu CSV"
    if by not in ("order", "id"):
        raise HilsimError(f"join_metrics: by must be 'order' or 'id', got {by!r}")
    n_ncu = len(ncu.launches)
    n_launch = len(launches)
    ncu_ids = ncu.launches["ncu_id"].to_numpy(dtype=np.int64)
    if by == "order":
        if first_launch < 0:
            raise HilsimError(f"{source}: first launch must be >= 0, got {first_launch}")
        target = first_launch + np.arange(n_ncu, dtype=np.int64)
        if n_ncu > n_launch - first_launch:
            raise HilsimError(
                f"{source}: ncu profiled {n_ncu} launches but only "
                f"{max(n_launch - first_launch, 0)} launches remain from launch {first_launch} "
                f"(the bundle has {n_launch}): wrong --first-launch or a different run"
            )
    else:
        target = ncu_ids.copy()
        outside = (target < 0) | (target >= n_launch)
        if outside.any():
            k = int(np.flatnonzero(outside)[0])
            raise HilsimError(
                f"{source}: ID {ncu_ids[k]} has no launch (the bundle has {n_launch} launches, "
                "joined by ID)"
            )
    ids = launches["launch_id"].to_numpy(dtype=np.int64)
    if np.array_equal(ids, np.arange(n_launch)):
        rows = target
    else:
        rows = pd.Index(ids).get_indexer(target)
        if (rows < 0).any():
            k = int(np.flatnonzero(rows < 0)[0])
            raise HilsimError(f"{source}: launch {target[k]} is not in the launches table")
    ncu_names = ncu.launches["name"].astype(str).to_numpy(dtype=object)
    launch_names = launches["name"].astype(str).to_numpy(dtype=object)[rows]
    agree = names_agree(ncu_names, launch_names)
    if not agree.all():
        k = int(np.flatnonzero(~agree)[0])
        raise HilsimError(
            f"{source}: ID {ncu_ids[k]} is '{kernel_base_name(ncu_names[k])}' but launch "
            f"{target[k]} is '{kernel_base_name(launch_names[k])}' ({_how(by, first_launch)}): "
            "the two runs launched different kernels"
        )
    mismatch = _config_mismatch(launches, rows, ncu.launches)
    if mismatch is not None:
        k, theirs, ours = mismatch
        raise HilsimError(
            f"{source}: ID {ncu_ids[k]} '{kernel_base_name(ncu_names[k])}' has {theirs} but "
            f"launch {target[k]} '{kernel_base_name(launch_names[k])}' has {ours} "
            f"({_how(by, first_launch)}): the two runs launched different configurations"
        )
    metrics = ncu.metrics.set_index("ncu_id").reindex(ncu_ids)
    columns: dict[str, np.ndarray] = {"launch_id": target.astype(np.int64)}
    for column in metrics.columns:
        columns[column] = metrics[column].to_numpy(dtype=np.float64)
    return pd.DataFrame(columns)


def read_ncu_metrics_for_bundle(
    path: str | Path,
    launches: pd.DataFrame,
    by: str = "order",
    first_launch: int = 0,
) -> pd.DataFrame:
    """:func:`read_ncu_csv` then :func:`join_metrics`: a bundle ``metrics`` table.

    A metric value that is not finite (``inf``, a number beyond float range) is refused
    naming the file and the metric: bundle metrics are finite or absent (NaN).
    """
    metrics = join_metrics(launches, read_ncu_csv(path), by=by, first_launch=first_launch)
    for column in metrics.columns[1:]:
        infinite = np.isinf(metrics[column].to_numpy(dtype=np.float64))
        if infinite.any():
            row = int(np.flatnonzero(infinite)[0])
            raise HilsimError(
                f"{path}: launch {int(metrics['launch_id'].iloc[row])}: metric {column!r} "
                "is not a finite number"
            )
    return metrics


__all__ = [
    "NcuTable",
    "join_metrics",
    "read_ncu_csv",
    "read_ncu_metrics_for_bundle",
    "unit_factor",
]
