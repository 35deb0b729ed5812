"""Import a wide table of per-kernel durations.

Layout (e.g. ``figure1/runtime-example.csv`` of the STEM+ROOT artifact, durations in
ns measured with Nsight Systems on CASIO workloads): the header holds kernel names,
one column per kernel; each column lists the successive launches of its kernel,
top to bottom; columns are ragged (they end at different rows, the rest of the
column left empty). A UTF-8 BOM and CRLF line ends are accepted.

The launch order is not recorded by this layout; launches are interleaved
round-robin by row (row 0 column 0, row 0 column 1, ..., row 1 column 0, ...),
skipping empty cells. Values are taken as nanoseconds.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hilsim.core.bundle import Bundle, default_manifest
from hilsim.core.errors import HilsimError
from hilsim.core.schema import normalize_launches

FORMAT = "wide-durations-csv"


def _header(path: Path) -> list[str]:
    try:
        with open(path, encoding="utf-8-sig", newline="") as handle:
            first = handle.readline()
    except UnicodeDecodeError as exc:
        raise HilsimError(f"{path}: not a UTF-8 text CSV (byte {exc.start})") from exc
    except OSError as exc:
        raise HilsimError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    if not first.strip():
        raise HilsimError(f"{path}: empty file or empty header: no kernel columns")
    return [name.strip() for name in next(csv.reader([first]))]


def read_wide_durations(path: str | Path) -> pd.DataFrame:
    """Read a wide per-kernel duration table (see module doc) into a bundle-v1
    launches table with ``name`` and ``duration_ns`` (launch order: round-robin
    by row).

    Vectorised: parsing is pandas' C reader, interleaving one ``numpy.nonzero`` over
    the cell mask. Raises :class:`HilsimError` naming file, line (1-based) and
    column for a non-numeric or negative cell, and for a file without numeric
    columns.
    """
    source = Path(path)
    names = _header(source)
    try:
        table = pd.read_csv(
            source,
            header=None,
            skiprows=1,
            names=list(range(len(names))),
            encoding="utf-8-sig",
            skip_blank_lines=False,
            keep_default_na=False,
            na_values=[""],
            thousands=",",
            engine="c",
            low_memory=False,
        )
    except pd.errors.EmptyDataError:
        table = pd.DataFrame(columns=list(range(len(names))))
    except pd.errors.ParserError as exc:
        message = str(exc).strip().splitlines()[-1]
        raise HilsimError(f"{source}: malformed CSV row ({message})") from exc
    except UnicodeDecodeError as exc:
        raise HilsimError(f"{source}: not a UTF-8 text CSV (byte {exc.start})") from exc

    keep = [i for i, name in enumerate(names) if name or table[i].notna().any()]
    for index in keep:
        column = table[index]
        if column.dtype.kind in "fiu":
            continue
        text = column.astype("string").str.strip()
        numbers = pd.to_numeric(text.str.replace(",", "", regex=False), errors="coerce")
        bad = (numbers.isna() & text.notna() & (text != "")).to_numpy()
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise HilsimError(
                f"{source}: line {row + 2}: column '{names[index]}' is not a number: "
                f"{column.iloc[row]!r}"
            )
        table[index] = numbers.astype(float)
    if not keep or len(table) == 0 or not table[keep].notna().to_numpy().any():
        raise HilsimError(f"{source}: no numeric duration columns (header {names[:6]!r})")

    values = table[keep].to_numpy(dtype=np.float64)
    rows, cols = np.nonzero(~np.isnan(values))  # row-major: round-robin by row
    durations = values[rows, cols]
    negative = durations < 0
    if negative.any():
        first = int(np.flatnonzero(negative)[0])
        raise HilsimError(
            f"{source}: line {int(rows[first]) + 2}: column '{names[keep[cols[first]]]}' "
            f"is negative: {durations[first]!r}"
        )
    kept_names = [names[i] or f"column_{i + 1}" for i in keep]
    codes, uniques = pd.factorize(pd.Index(kept_names, dtype=object))
    name_cat = pd.Categorical.from_codes(codes[cols], categories=pd.Index(uniques, dtype=object))
    frame = pd.DataFrame({"name": name_cat, "duration_ns": durations})
    launches = normalize_launches(frame, str(source))
    launches.attrs["layout"] = "wide-durations"
    return launches


def bundle_from_wide_durations(path: str | Path) -> Bundle:
    """The ``wide-durations-csv`` format's reader: :func:`read_wide_durations` as an
    in-memory bundle."""
    source = Path(path)
    launches = read_wide_durations(source)
    profiler: dict[str, Any] = {"name": "wide duration table", "format": FORMAT,
                                "file": source.name}
    manifest = default_manifest(
        profilers=[profiler], source={"files": [str(source)], "format": FORMAT}
    )
    return Bundle(launches=launches, manifest=manifest)
