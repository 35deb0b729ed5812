"""Column contracts of profile bundle v1 (docs/architecture.md, "Contracts").

Every importer produces a launches table through :func:`normalize_launches`, so
the analyzer sees one typed layout whatever tool produced the data:

* ``launch_id`` int64 0..N-1 in start order, ``name`` (full demangled) and
  ``kernel`` (short base name) as pandas categoricals (names interned once, as
  Holistic Trace Analysis does, so group-bys run on integer codes),
* optional launch facts as nullable ``Int64`` (absent when the tool does not
  record them, e.g. a table of durations only),
* ``duration_ns`` int64, required and non-negative,
* ``region`` categorical NVTX path, null when none.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pandas as pd

from hilsim.core.errors import HilsimError

REQUIRED_LAUNCH_COLUMNS: tuple[str, ...] = ("launch_id", "name", "kernel", "duration_ns")
OPTIONAL_INT_COLUMNS: tuple[str, ...] = (
    "grid_x",
    "grid_y",
    "grid_z",
    "block_x",
    "block_y",
    "block_z",
    "regs",
    "smem_static",
    "smem_dynamic",
    "stream",
    "device",
    "start_ns",
    "correlation_id",
)
LAUNCH_COLUMNS: tuple[str, ...] = (
    "launch_id",
    "name",
    "kernel",
    *OPTIONAL_INT_COLUMNS[:11],
    "start_ns",
    "duration_ns",
    "correlation_id",
    "region",
)
LAUNCH_CONFIG_COLUMNS: tuple[str, ...] = (
    "grid_x",
    "grid_y",
    "grid_z",
    "block_x",
    "block_y",
    "block_z",
)
#: launch configuration plus per-CTA resources: what occupancy and light features use
LAUNCH_RESOURCE_COLUMNS: tuple[str, ...] = (
    *LAUNCH_CONFIG_COLUMNS,
    "regs",
    "smem_static",
    "smem_dynamic",
)
REGION_COLUMNS: tuple[str, ...] = ("region_id", "name", "path", "depth", "start_ns", "end_ns")


def kernel_base_name(full_name: str) -> str:
    """Short base name of a (demangled) kernel name.

    ``void at::native::foo<float, 4>(int, float*)`` -> ``foo``;
    ``sgemm_128x64_nn`` -> ``sgemm_128x64_nn``. Template arguments and the
    parameter list are removed at bracket depth 0, then the last ``::`` component
    is kept. Names that are not C++ signatures are returned unchanged (stripped).
    """
    text = full_name.strip()
    if text.startswith("void "):
        text = text[5:]
    out: list[str] = []
    depth = 0
    for ch in text:
        if ch in "<(":
            depth += 1
            continue
        if ch in ">)":
            depth = max(0, depth - 1)
            continue
        if depth == 0:
            out.append(ch)
    base = "".join(out).strip()
    # "(anonymous namespace)" leaves "::" behind; take the last real component
    parts = [p for p in base.split("::") if p.strip()]
    base = parts[-1].strip() if parts else text
    # a return type left in front ("float foo") -> keep the last word
    base = base.split()[-1] if base.split() else text
    return base or text



def names_agree(ncu_names: np.ndarray, launch_names: np.ndarray) -> np.ndarray:
    """Per row: do the two kernel names denote the same kernel?

    Used wherever two tools name the same launches differently (ncu vs the light
    profiler; a simulator's mangled names vs the profile's demangled ones).

    Equal short base names (:func:`kernel_base_name`) agree; so do names where one side is
    a prefix of the other (ncu truncates long names) or where one side's base name occurs in
    the other full name (mangled vs demangled). Work is done once per distinct pair.
    """
    pairs = pd.DataFrame({"a": ncu_names, "b": launch_names})
    codes, uniques = pd.MultiIndex.from_frame(pairs).factorize()
    verdict = np.empty(len(uniques), dtype=bool)
    for index, (a, b) in enumerate(uniques):
        a_full, b_full = str(a).strip(), str(b).strip()
        a_base, b_base = kernel_base_name(a_full), kernel_base_name(b_full)
        verdict[index] = (
            a_base == b_base
            or (len(a_base) >= 3 and a_base in b_full)
            or (len(b_base) >= 3 and b_base in a_full)
            or (len(a_full) >= 8 and b_full.startswith(a_full))
            or (len(b_full) >= 8 and a_full.startswith(b_full))
        )
    return verdict[codes]

def _as_category(values: pd.Series) -> pd.Series:
    if isinstance(values.dtype, pd.CategoricalDtype):
        cats = values.cat.categories
        if cats.dtype != object:
            values = values.cat.rename_categories(cats.astype(str).astype(object))
        return values
    return values.astype(str).astype("category")


def _kernel_from_names(names: pd.Series) -> pd.Series:
    """Short names for a categorical of full names, computed once per unique name."""
    short = np.asarray([kernel_base_name(str(c)) for c in names.cat.categories], dtype=object)
    uniq, inverse = np.unique(short, return_inverse=True)
    codes = names.cat.codes.to_numpy()
    # one gather in the codes' own width: the last entry answers the null code -1
    lookup = np.append(inverse, -1).astype(codes.dtype)
    return pd.Series(
        pd.Categorical.from_codes(
            lookup[codes], categories=pd.Index(uniq, dtype=object), validate=False
        ),
        index=names.index,
    )


def missing_int_column(length: int) -> pd.api.extensions.ExtensionArray:
    """A nullable Int64 array of ``length`` nulls (no per-element Python work), its values
    and mask read-only views of one value each (pandas copies them on write): no N-long
    buffer is written for a column the profile does not have."""
    return pd.arrays.IntegerArray(
        np.broadcast_to(np.int64(0), (length,)), np.broadcast_to(np.True_, (length,))
    )


def missing_category_column(length: int) -> pd.Categorical:
    """A categorical of ``length`` nulls and no categories (no N-element Python list)."""
    return pd.Categorical.from_codes(np.full(length, -1, dtype=np.int8), categories=[])


#: the largest integer a launches-table column holds (int64); nanoseconds beyond it
#: (292 years) are refused, never wrapped
INT64_MAX = 2**63 - 1
#: columns that identify one kernel record: two rows equal in all of them are one launch
#: recorded twice (a doubled export), not two launches
DUPLICATE_KEY_COLUMNS: tuple[str, ...] = (
    "start_ns",
    "duration_ns",
    "device",
    "stream",
    "correlation_id",
)


def _refuse_negative(ints: np.ndarray, null: np.ndarray, source: str, column: str,
                     shown: Callable[[int], object]) -> None:
    """One line naming the first row of ``ints`` (not ``null``) below zero."""
    negative = (ints < 0) & ~null
    if negative.any():
        row = int(np.flatnonzero(negative)[0])
        raise HilsimError(
            f"{source}: row {row}: {column} must be a non-negative number, "
            f"got {shown_value(shown(row))}"
        )


def checked_int64(
    values: pd.Series | np.ndarray | list,
    source: str,
    column: str,
    *,
    required: bool = False,
    nonnegative: bool = False,
) -> np.ndarray | pd.api.extensions.ExtensionArray:
    """``values`` as int64 (``required``) or nullable ``Int64``, refused where they do not fit.

    The one validation every importer's integer columns pass through (durations, starts,
    grid sizes, ...): a value that is not finite or not below 2^63 in magnitude is a
    :class:`HilsimError` naming ``source``, the row and the value as the input gave it,
    never a wrapped int64. Text that is not a number is null for optional columns and
    refused for ``required`` ones; ``nonnegative`` refuses values below 0.
    """
    exact = _exact_int64(values)
    if exact is not None:  # int64 already: nothing can be out of range or text
        ints, null = exact
        if required and null.any():
            row = int(np.flatnonzero(null)[0])
            raise HilsimError(f"{source}: row {row}: {column} must be a number, got "
                              f"{shown_value(pd.NA)}")
        if nonnegative:
            _refuse_negative(ints, null, source, column, lambda row: ints[row])
        return ints if required else pd.arrays.IntegerArray(ints, null)
    raw = values.reset_index(drop=True) if isinstance(values, pd.Series) else pd.Series(values)
    numeric = pd.to_numeric(raw, errors="coerce")
    kind = numeric.dtype.kind
    if kind == "u":
        bad = numeric.to_numpy() > INT64_MAX
        floats = None
    elif kind in "iu" or isinstance(numeric.dtype, pd.Int64Dtype):
        bad = np.zeros(len(numeric), dtype=bool)
        floats = None
    else:
        floats = numeric.to_numpy(dtype=np.float64, na_value=np.nan)
        with np.errstate(invalid="ignore"):
            bad = np.isinf(floats) | (np.abs(floats) >= 2.0**63)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise HilsimError(
            f"{source}: row {row}: {column} {shown_value(raw.iloc[row])} does not fit in int64 "
            "(values must be finite and below 2^63)"
        )
    null = numeric.isna().to_numpy()
    if required and null.any():
        row = int(np.flatnonzero(null)[0])
        raise HilsimError(
            f"{source}: row {row}: {column} must be a number, got {shown_value(raw.iloc[row])}"
        )
    if floats is not None:
        ints = np.zeros(len(floats), dtype=np.int64)
        ok = ~null
        ints[ok] = np.round(floats[ok]).astype(np.int64)
    else:
        ints = numeric.to_numpy(dtype=np.int64, na_value=0)
    if nonnegative:
        _refuse_negative(ints, null, source, column, lambda row: raw.iloc[row])
    if required:
        return ints
    return pd.arrays.IntegerArray(ints, null.copy())


def _exact_int64(
    values: pd.Series | np.ndarray | list | pd.api.extensions.ExtensionArray,
) -> tuple[np.ndarray, np.ndarray] | None:
    """(int64 values, null mask) of a column that holds int64 already (a numpy int64
    array, or pandas' int64 or nullable ``Int64``), without a conversion or a copy of
    the values; ``None`` for anything else (it goes through the full check)."""
    array = values.array if isinstance(values, pd.Series) else values
    if isinstance(array, pd.arrays.IntegerArray) and array.dtype == pd.Int64Dtype():
        ints = array.to_numpy(dtype=np.int64, na_value=0)
        return ints, np.asarray(array.isna(), dtype=bool).copy()
    if isinstance(array, pd.arrays.NumpyExtensionArray):
        array = array.to_numpy()
    if isinstance(array, np.ndarray) and array.dtype == np.int64:
        return array, np.zeros(len(array), dtype=bool)
    return None


def shown_value(value: object) -> str:
    """A value for a message: its repr, cut to 60 characters (a 400-digit number stays short)."""
    if isinstance(value, np.generic):
        value = value.item()
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}...({len(text)} characters)"


def duplicate_warning(source: str, dropped: int) -> str:
    """The import warning for ``dropped`` duplicated kernel records."""
    return (
        f"{source}: dropped {dropped} duplicated kernel record(s) (same start, duration, "
        "device, stream, correlation id and name as another)"
    )


def drop_duplicate_launches(frame: pd.DataFrame, source: str) -> tuple[pd.DataFrame, int]:
    """Drop kernel records that repeat another's start, duration, device, stream,
    correlation id and name (a doubled export); return the frame and how many were dropped.

    ``frame`` must be sorted by ``start_ns``: only rows that share a start with a
    neighbour are compared (few in real traces), so this stays O(N) on 10M launches.
    """
    if len(frame) < 2 or frame["start_ns"].isna().any():
        return frame, 0
    start = frame["start_ns"].to_numpy(dtype=np.int64)
    same = start[1:] == start[:-1]
    if not same.any():
        return frame, 0
    candidate = np.zeros(len(start), dtype=bool)
    candidate[1:] |= same
    candidate[:-1] |= same
    rows = np.flatnonzero(candidate)
    keys = pd.DataFrame(
        {c: frame[c].to_numpy()[rows] for c in DUPLICATE_KEY_COLUMNS if c in frame.columns}
    )
    keys["name"] = frame["name"].cat.codes.to_numpy()[rows]
    duplicated = keys.duplicated(keep="first").to_numpy()
    if not duplicated.any():
        return frame, 0
    keep = np.ones(len(frame), dtype=bool)
    keep[rows[duplicated]] = False
    return frame.iloc[np.flatnonzero(keep)].reset_index(drop=True), int(duplicated.sum())


def _ends_fit(start: pd.api.extensions.ExtensionArray, duration: np.ndarray) -> bool:
    """Whether no launch can end past 2^63 ns: the largest start plus the largest duration
    stays below it (two maxima; the per-row sum is needed only when it does not)."""
    if len(duration) == 0:
        return True
    latest = start.max(skipna=True)
    return latest is pd.NA or int(latest) + int(duration.max()) < 2**63


def _refuse_line_breaks(names: pd.Series, source: str) -> None:
    """One line naming the first row whose kernel name holds a line break: no profiler
    writes one (a quote out of place in a CSV makes one), and a name is one line of a
    launch list, a simulator log and a report. Checked once per distinct name."""
    categories = names.cat.categories
    broken = np.flatnonzero(categories.astype(str).str.contains(r"[\r\n]", regex=True))
    if len(broken) == 0:
        return
    row = int(np.flatnonzero(np.isin(names.cat.codes.to_numpy(), broken))[0])
    first_line = re.split(r"[\r\n]", str(names.iloc[row]), maxsplit=1)[0]
    raise HilsimError(
        f"{source}: row {row}: kernel name holds a line break (after "
        f"{shown_value(first_line)})"
    )


def normalize_launches(frame: pd.DataFrame, source: str) -> pd.DataFrame:
    """Return ``frame`` as a bundle-v1 launches table (typed, ordered, validated).

    ``frame`` must have ``name`` and ``duration_ns``; any of the optional columns
    may be present. Rows are sorted by ``start_ns`` when present (stable, so the
    given order breaks ties), ``launch_id`` is assigned 0..N-1 and ``kernel`` is
    derived from ``name`` when missing. ``source`` names the file for errors.

    Every integer column goes through :func:`checked_int64` (no value wraps); a launch
    whose end (start + duration) passes 2^63 is refused; kernel records repeated exactly
    (:func:`drop_duplicate_launches`) are dropped, and the count is left in
    ``attrs["warnings"]`` for the caller to report.
    """
    if len(frame) == 0:
        raise HilsimError(f"{source}: empty profile: no kernel launches found")
    for column in ("name", "duration_ns"):
        if column not in frame.columns:
            raise HilsimError(f"{source}: missing column '{column}'")
    columns: dict[str, object] = {}  # columns, framed once at the end (no copy per column)
    names = _as_category(frame["name"].reset_index(drop=True))
    if names.isna().any():
        row = int(np.flatnonzero(names.isna().to_numpy())[0])
        raise HilsimError(f"{source}: row {row}: kernel name is empty")
    _refuse_line_breaks(names, source)
    duration = checked_int64(
        frame["duration_ns"], source, "duration_ns", required=True, nonnegative=True
    )
    for column in OPTIONAL_INT_COLUMNS:
        if column in frame.columns:
            columns[column] = checked_int64(frame[column], source, column)
        else:
            columns[column] = missing_int_column(len(frame))
    start = columns["start_ns"]
    if not start.isna().all() and not _ends_fit(start, duration):
        ends = start.to_numpy(dtype=np.float64, na_value=0.0) + duration.astype(np.float64)
        over = ends >= 2.0**63
        if over.any():
            row = int(np.flatnonzero(over)[0])
            raise HilsimError(
                f"{source}: row {row}: launch ends after 2^63 ns "
                f"(start_ns {shown_value(frame['start_ns'].iloc[row])}, "
                f"duration_ns {shown_value(frame['duration_ns'].iloc[row])})"
            )
    columns["name"] = names.array
    if "kernel" in frame.columns:
        columns["kernel"] = _as_category(frame["kernel"].reset_index(drop=True)).array
    else:
        columns["kernel"] = _kernel_from_names(names).array
    columns["duration_ns"] = duration
    if "region" in frame.columns:
        columns["region"] = frame["region"].reset_index(drop=True).astype("category").array
    else:
        columns["region"] = missing_category_column(len(frame))
    columns["launch_id"] = np.arange(len(frame), dtype=np.int64)
    table = pd.DataFrame(
        {column: columns[column] for column in LAUNCH_COLUMNS},
        index=pd.RangeIndex(len(frame)),
        copy=False,
    )
    warnings: list[str] = []
    out = table
    if out["start_ns"].notna().all():
        start = out["start_ns"].to_numpy(dtype=np.int64)
        if not (start[1:] >= start[:-1]).all():  # (already in start order: no sort, no copy)
            out = out.iloc[np.argsort(start, kind="stable")].reset_index(drop=True)
        out, dropped = drop_duplicate_launches(out, source)
        if dropped:
            warnings.append(duplicate_warning(source, dropped))
    if out is not table:  # reordered or rows dropped: ids follow the new order
        out["launch_id"] = np.arange(len(out), dtype=np.int64)
    out.attrs["warnings"] = warnings
    return out


def launch_config_key(launches: pd.DataFrame, by_config: bool = True) -> np.ndarray:
    """Integer cluster key per launch: kernel name (+ grid/block when known).

    Returns int64 codes 0..G-1 in order of first appearance (as
    ``groupby(sort=False).ngroup()`` numbers the (name, grid, block) tuples). Columns
    are folded into one int64 key one at a time (mixed radix of each column's value
    range, or of its factorized codes when the range is wide) and the key is factorized
    once: a few N-long integer arrays at any time, no N-row DataFrame or group-by
    (at 50M launches a 7-column group-by's temporaries alone exceed several GB).
    All-null and constant columns are skipped (they split nothing).
    """
    key = launches["name"].cat.codes.to_numpy(dtype=np.int64)
    span = int(key.max()) + 2 if len(key) else 1  # codes are >= -1
    if by_config:
        for column in LAUNCH_CONFIG_COLUMNS:
            if column not in launches.columns:
                continue
            series = launches[column]
            if not series.notna().any():
                continue
            values = series.to_numpy(dtype=np.int64, na_value=-1)
            low, high = int(values.min()), int(values.max())
            if low == high:
                continue
            width = high - low + 1
            if width > (1 << 24):
                values, uniques = pd.factorize(values)
                low, width = 0, len(uniques)
            if span * width >= (1 << 62):  # re-densify the key before it could overflow
                key, uniques = pd.factorize(key)
                span = len(uniques)
            key *= width
            key += values - low if low else values
            span *= width
            del values
    codes, _ = pd.factorize(key)
    return codes.astype(np.int64, copy=False)
