"""Sampling plans: ``hilsim.plan/1`` JSON (ARCHITECTURE.md, "Sampling plans").

A plan names the launches to simulate and their weights; the estimate of any
per-launch quantity ``v`` is ``sum(weight * v[launch_id])`` over the samples.
Clusters carry what the method knew when it chose (size, profiled mean and
standard deviation of the duration, number of draws), so the evaluation can give
an interval even where only one launch per cluster was drawn.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from hilsim.analyzer.atomic import write_text_atomic
from hilsim.analyzer.errors import HilsimError

PLAN_SCHEMA = "hilsim.plan/1"


@dataclass
class Plan:
    """A sampling plan.

    Attributes:
        method: registry name of the method that made it.
        params: the method's parameters (JSON-serialisable), seed included.
        source: facts of the bundle it was made from: ``n_launches``,
            ``sequence_digest``, ``path``, ``total_duration_ns``.
        unit: ``launch`` (or ``region`` for region-level methods).
        sampling: ``random`` when samples are random draws within clusters (the
            evaluation then gives a 95% interval), else ``deterministic``.
        clusters: one record per cluster: ``cluster`` id, ``size`` (launches it
            stands for), ``draws`` (samples drawn), ``mean_ns``/``std_ns`` of the
            profiled durations, ``label``; methods may add fields.
        samples: DataFrame with ``launch_id`` (int64), ``weight`` (float64),
            ``cluster`` (int64) and ``draws`` (int64, times drawn); one row per
            distinct sampled launch (draws with replacement are merged).
        notes: human-readable remarks (e.g. metrics that were missing).
        diagnostics: method-specific numbers (e.g. PKA error per K, classifier
            accuracy).
        members: the cluster of every launch (int64, indexed by ``launch_id``; -1 for
            a launch no cluster stands for), set by the method that made the plan,
            or a function that builds it (a method whose plans are made once per seed
            defers the work until someone asks: :meth:`cluster_of_launches`). Kept in
            memory only: it is as long as the bundle, so the JSON does not carry it;
            :func:`hilsim.analyzer.membership.cluster_members` recovers it for a loaded plan.
    """

    method: str
    params: dict[str, Any]
    source: dict[str, Any]
    clusters: list[dict[str, Any]]
    samples: pd.DataFrame
    unit: str = "launch"
    sampling: str = "deterministic"
    notes: list[str] = field(default_factory=list)
    diagnostics: dict[str, Any] = field(default_factory=dict)
    members: np.ndarray | Callable[[], np.ndarray] | None = field(
        default=None, repr=False, compare=False
    )

    def cluster_of_launches(self) -> np.ndarray | None:
        """:attr:`members` as an array (built once if the method deferred it), or None."""
        if callable(self.members):
            self.members = self.members()
        return self.members

    @property
    def n_samples(self) -> int:
        """Distinct launches to simulate."""
        return len(self.samples)

    def attach_names(self, names: pd.Series) -> Plan:
        """Record the kernel name of every sampled launch (for exporters and checks)."""
        ids = self.samples["launch_id"].to_numpy()
        # gather the sampled names only (names is as long as the bundle)
        self.samples["name"] = names.iloc[ids].to_numpy().astype(str) if len(ids) else []
        return self

    def to_dict(self) -> dict[str, Any]:
        samples = self.samples
        names = samples["name"].to_numpy() if "name" in samples else None
        rows = [
            {"launch_id": int(i), "weight": float(w), "cluster": int(c), "draws": int(d)}
            for i, w, c, d in zip(
                samples["launch_id"].to_numpy(),
                samples["weight"].to_numpy(),
                samples["cluster"].to_numpy(),
                samples["draws"].to_numpy(),
                strict=True,
            )
        ]
        if names is not None:
            for row, name in zip(rows, names, strict=True):
                row["name"] = str(name)
        return {
            "schema": PLAN_SCHEMA,
            "method": self.method,
            "params": self.params,
            "source": self.source,
            "unit": self.unit,
            "sampling": self.sampling,
            "clusters": self.clusters,
            "samples": rows,
            "notes": self.notes,
            "diagnostics": self.diagnostics,
        }

    def to_json(self) -> str:
        return json.dumps(_jsonable(self.to_dict()), indent=1)

    def save(self, path: str | Path) -> Path:
        """Write the plan as JSON atomically."""
        return write_text_atomic(path, self.to_json() + "\n")


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return None if not np.isfinite(value) else float(value)
    if isinstance(value, float) and not np.isfinite(value):
        return None
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    if hasattr(value, "__dataclass_fields__"):
        return _jsonable(asdict(value))
    return value


def samples_frame(
    launch_ids: np.ndarray,
    weights: np.ndarray,
    clusters: np.ndarray,
    draws: np.ndarray | None = None,
) -> pd.DataFrame:
    """Build the samples table, merging repeated draws of the same launch."""
    launch_ids = np.asarray(launch_ids, dtype=np.int64)
    frame = pd.DataFrame(
        {
            "launch_id": launch_ids,
            "weight": np.asarray(weights, dtype=np.float64),
            "cluster": np.asarray(clusters, dtype=np.int64),
            "draws": np.ones(len(launch_ids), dtype=np.int64)
            if draws is None
            else np.asarray(draws, dtype=np.int64),
        }
    )
    if frame["launch_id"].duplicated().any():
        frame = (
            frame.groupby("launch_id", sort=True)
            .agg(weight=("weight", "sum"), cluster=("cluster", "first"), draws=("draws", "sum"))
            .reset_index()
        )
    return frame.sort_values("launch_id", kind="stable").reset_index(drop=True)


def members_by_launch(launch_ids: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """:attr:`Plan.members` from the cluster label of each launch-table row.

    ``launch_ids`` are the rows' ids (0..N-1 in a bundle); a label below 0 means no
    cluster stands for that launch.
    """
    launch_ids = np.asarray(launch_ids, dtype=np.int64)
    members = np.full(len(launch_ids), -1, dtype=np.int64)
    members[launch_ids] = np.asarray(labels, dtype=np.int64)
    return members


def load_plan(path: str | Path) -> Plan:
    """Read a plan JSON; one-line :class:`HilsimError` on any problem."""
    from hilsim.analyzer.jsonfile import read_json

    source = Path(path)
    data = read_json(source, PLAN_SCHEMA)
    for key in ("method", "params", "source", "clusters", "samples"):
        if key not in data:
            raise HilsimError(f"{source}: missing key {key!r}")
    rows = data["samples"]
    try:
        samples = pd.DataFrame(
            {
                "launch_id": np.array([r["launch_id"] for r in rows], dtype=np.int64),
                "weight": np.array([r["weight"] for r in rows], dtype=np.float64),
                "cluster": np.array([r["cluster"] for r in rows], dtype=np.int64),
                "draws": np.array([r.get("draws", 1) for r in rows], dtype=np.int64),
            }
        )
        if rows and all("name" in r for r in rows):
            samples["name"] = [str(r["name"]) for r in rows]
    except (KeyError, TypeError, ValueError) as exc:
        raise HilsimError(f"{source}: malformed sample entry ({exc})") from exc
    return Plan(
        method=data["method"],
        params=data["params"],
        source=data["source"],
        clusters=data["clusters"],
        samples=samples,
        unit=data.get("unit", "launch"),
        sampling=data.get("sampling", "deterministic"),
        notes=list(data.get("notes", [])),
        diagnostics=dict(data.get("diagnostics", {})),
    )
