"""MEGsim on per-frame feature tables (graphics simulators).

Ortiz, Corbalán-Navarro, Aragón and González, "MEGsim: A Novel Methodology for
Efficient Simulation of Graphics Workloads in GPUs", section III, applied to a
table with one row per frame (the paper's own unit); the clustering is
:mod:`hilsim.analyzer.methods.megsim_math`.

:func:`read_frame_table` reads a per-frame CSV (one row per frame: a frame id
column named ``frame``/``frame_id`` or else the first column, then numeric
feature columns) and :func:`megsim_frames` chooses frames and weights. Column
naming convention for the groups: ``vs_<shader>`` (VSCV), ``fs_<shader>``
(FSCV), ``prim`` or ``prim_<x>`` (PRIM), case-insensitive, ``:`` or ``.``
accepted instead of ``_``; any ``<group>:<name>`` column is in ``<group>``
(e.g. ``ms:meshA`` for mesh shaders); any other column is a group of its own.
A table whose groups are all among vs/fs/prim gets MEGsim's weights; others get
equal weights unless ``group_weights`` names every group.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from hilsim.analyzer.methods.megsim_math import (
    BIC_THRESHOLD,
    SEARCH_CONSTRAINTS,
    group_normalise,
    megsim_cluster,
    resolve_group_weights,
)
from hilsim.analyzer.methods.params import check_params

from hilsim.core.errors import HilsimError

_FRAME_ID_COLUMNS = ("frame", "frame_id", "frame_idx", "frame_index")
_GROUP_PREFIX = re.compile(r"^(vs|fs|prim)(?:[_:.]|$)", re.IGNORECASE)


def column_groups(columns: list[str]) -> list[str]:
    """Group of each frame-table column (module doc, "Frame tables")."""
    groups: list[str] = []
    for column in columns:
        text = str(column).strip()
        match = _GROUP_PREFIX.match(text)
        if match:
            groups.append(match.group(1).lower())
        elif ":" in text:
            groups.append(text.split(":", 1)[0].strip().lower())
        else:
            groups.append(text)
    return groups


def read_frame_table(path: str | Path) -> pd.DataFrame:
    """Read a per-frame feature CSV: a ``frame`` column first, then numeric features.

    The frame id column is the one named ``frame``/``frame_id``/``frame_idx``/
    ``frame_index`` (case-insensitive), else the first column. Feature values
    must be finite and non-negative; one-line errors name the column and row.
    """
    source = Path(path)
    try:
        table = pd.read_csv(source)
    except FileNotFoundError as exc:
        raise HilsimError(f"{source}: no such frame table") from exc
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise HilsimError(f"{source}: not a readable CSV ({exc})") from exc
    table.columns = [str(c).strip() for c in table.columns]
    lower = [c.lower() for c in table.columns]
    id_column = next(
        (table.columns[lower.index(name)] for name in _FRAME_ID_COLUMNS if name in lower),
        table.columns[0],
    )
    features = [c for c in table.columns if c != id_column]
    if not features:
        raise HilsimError(f"{source}: no feature columns besides the frame id {id_column!r}")
    if len(table) == 0:
        raise HilsimError(f"{source}: no frames")
    if table[id_column].isna().any() or table[id_column].duplicated().any():
        bad = table[id_column].isna() | table[id_column].duplicated()
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise HilsimError(
            f"{source}: row {row}: frame id {table[id_column].iloc[row]!r} missing or duplicated"
        )
    out = pd.DataFrame({"frame": table[id_column].to_numpy()})
    for column in features:
        values = pd.to_numeric(table[column], errors="coerce").to_numpy(dtype=np.float64)
        bad = ~np.isfinite(values) | (values < 0)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise HilsimError(
                f"{source}: row {row}, column {column!r}: {table[column].iloc[row]!r} is not "
                "a finite non-negative number"
            )
        out[column] = values
    return out


@dataclass
class FrameSelection:
    """MEGsim's choice over a frame table: representative frames and their weights.

    Attributes:
        frames: one row per cluster: ``frame`` (id of the representative),
            ``weight`` (frames it stands for), ``cluster``, ``row`` (table row).
        labels: cluster of every frame, in table row order.
        clusters: per-cluster records (size, representative, distance).
        k: number of clusters chosen.
        bic: BIC score of every K tried.
        groups: group name -> its columns.
        group_weights: the weight each group was given.
        notes: remarks (e.g. default equal weights).
    """

    frames: pd.DataFrame
    labels: np.ndarray
    clusters: list[dict[str, Any]]
    k: int
    bic: dict[int, float]
    groups: dict[str, list[str]]
    group_weights: dict[str, float]
    notes: list[str] = field(default_factory=list)

    def estimate(self, values: Any) -> float:
        """MEGsim's projection ``sum(weight * value of representative)``.

        ``values``: one value per frame in table row order (array-like), or a
        ``pd.Series`` indexed by frame id.
        """
        if isinstance(values, pd.Series):
            picked = values.loc[self.frames["frame"].to_numpy()].to_numpy(dtype=np.float64)
        else:
            array = np.asarray(values, dtype=np.float64)
            if array.shape != self.labels.shape:
                raise HilsimError(
                    f"megsim: {array.size} values given for {self.labels.size} frames"
                )
            picked = array[self.frames["row"].to_numpy()]
        return float(np.dot(self.frames["weight"].to_numpy(dtype=np.float64), picked))


def megsim_frames(
    table: pd.DataFrame,
    *,
    columns: list[str] | None = None,
    group_weights: dict[str, float] | None = None,
    threshold: float = BIC_THRESHOLD,
    k_max: int = 50,
    n_init: int = 3,
    seed: int = 0,
    patience: int = 1,
) -> FrameSelection:
    """MEGsim (section III) on a frame table from :func:`read_frame_table`.

    ``columns`` restricts the features (default: every column but ``frame``);
    groups follow the naming convention of the module doc; VS/FS/PRIM groups get
    MEGsim's 0.108/0.745/0.147 unless ``group_weights`` says otherwise.
    """
    check_params(
        "megsim",
        SEARCH_CONSTRAINTS,
        {"threshold": threshold, "k_max": k_max, "n_init": n_init, "seed": seed,
         "patience": patience},
    )
    if "frame" not in table.columns:
        raise HilsimError("megsim: the frame table has no 'frame' column (use read_frame_table)")
    names = [c for c in table.columns if c != "frame"] if columns is None else list(columns)
    missing = [c for c in names if c not in table.columns]
    if missing or not names:
        raise HilsimError(
            "megsim: frame table lacks column(s) " + ", ".join(missing)
            if missing
            else "megsim: no feature columns"
        )
    groups = column_groups(names)
    order = list(dict.fromkeys(groups))
    weights, notes = resolve_group_weights(order, group_weights, True, "megsim")
    column_group = np.array([order.index(g) for g in groups], dtype=np.int64)
    x = group_normalise(table[names].to_numpy(dtype=np.float64), column_group, weights)
    result = megsim_cluster(
        x, threshold=threshold, k_max=k_max, n_init=n_init, seed=seed, patience=patience
    )
    ids = table["frame"].to_numpy()
    reps = result.representatives
    frames = pd.DataFrame(
        {
            "frame": ids[reps],
            "weight": result.sizes.astype(np.float64),
            "cluster": np.arange(result.k, dtype=np.int64),
            "row": reps,
        }
    )
    clusters = [
        {
            "cluster": c,
            "size": int(result.sizes[c]),
            "representative": _scalar(ids[reps[c]]),
            "distance": float(result.distances[c]),
        }
        for c in range(result.k)
    ]
    return FrameSelection(
        frames=frames,
        labels=result.labels,
        clusters=clusters,
        k=result.k,
        bic=result.bic,
        groups={g: [n for n, gg in zip(names, groups, strict=True) if gg == g] for g in order},
        group_weights={g: float(w) for g, w in zip(order, weights, strict=True)},
        notes=notes,
    )


def _scalar(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value
