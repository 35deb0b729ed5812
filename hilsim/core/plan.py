"""Sampling plans: ``hilsim.plan/1`` JSON (docs/architecture.md, "Contracts").

A plan names the launches to simulate and their weights; the estimate of any
per-launch quantity ``v`` is ``sum(weight * v[launch_id])`` over the samples.
Clusters carry what the method knew when it chose (size, profiled mean and
standard deviation of the duration, number of draws), so the evaluation can give
an interval even where only one launch per cluster was drawn.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hilsim.core.errors import HilsimError
from hilsim.core.files import write_text_atomic
from hilsim.core.jsonfile import json_safe, read_json

PLAN_SCHEMA = "hilsim.plan/1"


@dataclass(frozen=True)
class Warmup:
    """The warm-up a plan's sampled launches need before they are measured.

    A sampled simulation runs only the samples, back to back, so each starts with the
    caches the previous *sample* left instead of what the launch before it left in the full
    run (STEM+ROOT, MICRO 2025, section 5.2: warm-up of GPU state is left open there; SMARTS'
    functional warming, Wunderlich et al., ISCA 2003, is the CPU answer). The parts, combined
    with ``+`` in :meth:`label` / :func:`parse_warmup`:

    * ``preceding:K``: the ``K`` launches before each sample are simulated first and their
      cycles discarded; the windows of neighbouring samples are merged, so a launch is
      simulated once and a sample inside another's window warms it too (contiguous windows);
    * ``l2-fill``: the program's host-to-device copies fill the L2 before its first kernel
      (the simulator's options for it: :mod:`hilsim.simmodel.gpgpusim.warmup`), a
      functional warm-up that costs no simulated cycle;
    * ``cold-bound``: the samples whose profiled DRAM reads exceed their warm run's are also
      run without any warm-up (no L2 fill either), and each is placed between its warm and
      cold cycles by its profiled misses (``hilsim simulate``, the state term);
    * ``auto``: ``l2-fill+cold-bound`` with ``K`` raised (0, 1, 2, 4, ...) while the warm
      run stays colder than the profile (more misses) for a share of the samples, within a
      cost budget.

    ``none`` is no warm-up: every sample as the previous sample left the caches.
    """

    preceding: int = 0
    l2_fill: bool = False
    cold_bound: bool = False
    auto: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.preceding, int) or isinstance(self.preceding, bool) \
                or self.preceding < 0:
            raise HilsimError(f"warm-up: preceding must be an integer >= 0, got "
                              f"{self.preceding!r}")

    @property
    def label(self) -> str:
        """The canonical text of this warm-up (what :func:`parse_warmup` reads back)."""
        if self.auto:
            parts = ["auto"]
        else:
            parts = [p for p, on in (("l2-fill", self.l2_fill),
                                     ("cold-bound", self.cold_bound)) if on]
        if self.preceding:
            parts.append(f"preceding:{self.preceding}")
        return "+".join(parts) or "none"

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "preceding": self.preceding, "l2_fill": self.l2_fill,
                "cold_bound": self.cold_bound, "auto": self.auto}


#: what each word of a warm-up text turns on
_WARMUP_WORDS: dict[str, dict[str, bool]] = {
    "none": {},
    "l2-fill": {"l2_fill": True},
    "cold-bound": {"cold_bound": True},
    "bracket": {"l2_fill": True, "cold_bound": True},
    "auto": {"l2_fill": True, "cold_bound": True, "auto": True},
}


def parse_warmup(text: str) -> Warmup:
    """A warm-up from its text: words of :data:`_WARMUP_WORDS` and ``preceding:K`` joined
    by ``+`` (``l2-fill+preceding:2``); one-line :class:`HilsimError` otherwise."""
    fields: dict[str, Any] = {}
    for word in str(text).strip().lower().split("+"):
        word = word.strip()
        if word.startswith("preceding:"):
            k = word.split(":", 1)[1].strip()
            # ASCII digits only (``str.isdigit`` also takes "²", which ``int`` refuses), and
            # fewer than 19 of them (below 2^63; ``int`` refuses past 4,300 digits)
            if not (re.fullmatch(r"[0-9]{1,18}", k, re.ASCII)):
                raise HilsimError(
                    f"warm-up {str(text)[:80]!r}: preceding:K needs an integer K >= 0 of at "
                    "most 18 digits"
                )
            fields["preceding"] = int(k)
        elif word in _WARMUP_WORDS:
            fields.update(_WARMUP_WORDS[word])
        else:
            raise HilsimError(
                f"warm-up {text!r}: unknown part {word!r} (use none, l2-fill, cold-bound, "
                "bracket, auto and preceding:K, joined by '+')"
            )
    return Warmup(**fields)


def warmup_from_dict(data: Any, where: str) -> Warmup:
    """A plan's ``warmup`` object (:meth:`Warmup.to_dict`); one-line error naming ``where``."""
    if not isinstance(data, dict):
        raise HilsimError(f"{where}: 'warmup' must be a JSON object")
    preceding = data.get("preceding", 0)
    if not _is_int(preceding) or preceding < 0:
        raise HilsimError(f"{where}: warmup.preceding must be an integer >= 0, got "
                          f"{preceding!r}"[:300])
    flags = {}
    for key in ("l2_fill", "cold_bound", "auto"):
        value = data.get(key, False)
        if not isinstance(value, bool):
            raise HilsimError(f"{where}: warmup.{key} must be true or false")
        flags[key] = value
    return Warmup(preceding=preceding, **flags)


def warmup_launches(sample_ids: np.ndarray, preceding: int) -> tuple[np.ndarray, np.ndarray]:
    """Launches to simulate for samples with ``preceding`` warm-up launches each.

    Returns the sorted distinct launch ids (each sample's window ``[id - K, id]`` clipped at
    0; overlapping windows merged) and a mask of which of them are samples (the others'
    cycles are discarded). Vectorised: one ``np.unique`` over ``len(ids) x (K + 1)`` ids.
    """
    ids = np.unique(np.asarray(sample_ids, dtype=np.int64))
    if preceding <= 0 or len(ids) == 0:
        return ids, np.ones(len(ids), dtype=bool)
    # windows are clipped at 0, so none reaches further back than the last id: what is
    # built is the union of the windows, at most ``ids[-1] + 1`` launches whatever K is
    k = min(int(preceding), int(ids[-1]))
    starts = np.maximum(ids - k, 0)
    # a window opens a new run where it starts past the previous window's end + 1
    opens = np.ones(len(ids), dtype=bool)
    opens[1:] = starts[1:] > ids[:-1] + 1
    first = np.flatnonzero(opens)
    run_starts = starts[first]
    run_ends = ids[np.append(first[1:] - 1, len(ids) - 1)]
    lengths = run_ends - run_starts + 1
    before = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    every = np.arange(int(lengths.sum()), dtype=np.int64) + np.repeat(run_starts - before,
                                                                       lengths)
    return every, np.isin(every, ids)


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
        warmup: the warm-up its samples need in a sampled simulation (:class:`Warmup`);
            None when not recorded (plans written before the field existed read as None).
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
    warmup: Warmup | None = None
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
        data = {
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
        if self.warmup is not None:
            data["warmup"] = self.warmup.to_dict()
        return data

    def to_json(self) -> str:
        return json.dumps(json_safe(self.to_dict()), indent=1)

    def save(self, path: str | Path) -> Path:
        """Write the plan as JSON atomically."""
        return write_text_atomic(path, self.to_json() + "\n")


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


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    """A finite JSON number (not a bool, not NaN or Infinity, not beyond float range)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _check_plan_data(data: dict[str, Any], source: Path) -> None:
    """The one validator of a plan's structure and values.

    Refuses, naming the file and the sample or cluster: keys of the wrong type
    (``source`` a list, ``clusters`` text, ``notes`` a number, ...), an empty sample
    list, a launch id that is not a non-negative integer below the source's
    ``n_launches`` (``-1``, ``true``, ``1.5``), a launch sampled twice, a weight that is
    not a finite non-negative number (negative, NaN, Infinity, null), draws below 1.
    """
    expected: dict[str, type | tuple[type, ...]] = {
        "method": str,
        "params": dict,
        "source": dict,
        "clusters": list,
        "samples": list,
        "unit": str,
        "sampling": str,
        "notes": list,
        "diagnostics": dict,
    }
    for key, kind in expected.items():
        if key in data and not isinstance(data[key], kind):
            want = kind.__name__ if isinstance(kind, type) else kind
            raise HilsimError(
                f"{source}: {key!r} must be a JSON {_JSON_NAMES.get(want, want)}, "
                f"got {type(data[key]).__name__}"
            )
    if data.get("sampling", "deterministic") not in ("random", "deterministic"):
        raise HilsimError(
            f"{source}: sampling must be 'random' or 'deterministic', got {data['sampling']!r}"
        )
    if not all(isinstance(note, str) for note in data.get("notes", [])):
        raise HilsimError(f"{source}: 'notes' must be a list of text lines")
    n_launches = data["source"].get("n_launches")
    if n_launches is not None and (not _is_int(n_launches) or n_launches < 1):
        raise HilsimError(f"{source}: source.n_launches must be a positive integer")
    for index, cluster in enumerate(data["clusters"]):
        if not isinstance(cluster, dict):
            raise HilsimError(f"{source}: cluster {index}: expected a JSON object")
        for key in ("size", "draws"):
            value = cluster.get(key)
            if value is not None and (not _is_int(value) or value < 0):
                raise HilsimError(
                    f"{source}: cluster {index}: {key} must be a non-negative integer"
                )
    rows = data["samples"]
    if not rows:
        raise HilsimError(f"{source}: plan has no samples (nothing to simulate)")
    for index, row in enumerate(rows):
        where = f"{source}: sample {index}"
        if not isinstance(row, dict):
            raise HilsimError(f"{where}: expected a JSON object")
        for key in ("launch_id", "weight", "cluster"):
            if key not in row:
                raise HilsimError(f"{where}: missing key {key!r}")
        launch = row["launch_id"]
        if not _is_int(launch) or launch < 0:
            raise HilsimError(
                f"{where}: launch_id must be a non-negative integer, got {launch!r}"[:300]
            )
        if n_launches is not None and launch >= n_launches:
            raise HilsimError(
                f"{where}: launch_id {launch} is beyond the source's {n_launches} launches"
            )
        if not _is_number(row["weight"]) or row["weight"] < 0:
            raise HilsimError(
                f"{where}: weight must be a finite non-negative number, "
                f"got {row['weight']!r}"[:300]
            )
        if not _is_int(row["cluster"]) or abs(row["cluster"]) >= 2**63:
            raise HilsimError(f"{where}: cluster must be an integer, got {row['cluster']!r}"[:300])
        draws = row.get("draws", 1)
        if not _is_int(draws) or not 1 <= draws < 2**63:
            raise HilsimError(f"{where}: draws must be an integer >= 1, got {draws!r}"[:300])
        if "name" in row and not isinstance(row["name"], str):
            raise HilsimError(f"{where}: name must be text")
    ids = np.array([row["launch_id"] for row in rows], dtype=np.int64)
    duplicated = pd.Index(ids).duplicated()
    if duplicated.any():
        index = int(np.flatnonzero(duplicated)[0])
        raise HilsimError(
            f"{source}: sample {index}: launch_id {ids[index]} sampled twice "
            "(repeated draws are one sample with draws > 1)"
        )


_JSON_NAMES = {"str": "string", "dict": "object", "list": "array"}


def load_plan(path: str | Path) -> Plan:
    """Read a plan JSON; one-line :class:`HilsimError` on any problem.

    Every value is checked first (:func:`_check_plan_data`), so ``evaluate``,
    ``validate`` and ``export`` never score or write a malformed plan.
    """
    source = Path(path)
    data = read_json(source, PLAN_SCHEMA)
    for key in ("method", "params", "source", "clusters", "samples"):
        if key not in data:
            raise HilsimError(f"{source}: missing key {key!r}")
    _check_plan_data(data, source)
    rows = data["samples"]
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
        warmup=warmup_from_dict(data["warmup"], str(source)) if "warmup" in data else None,
    )


def warmup_for(plan: Plan, given: Warmup | str | None) -> Warmup | None:
    """The warm-up to run ``plan`` with: ``given`` (a :class:`Warmup` or its text, read by
    :func:`parse_warmup`), else the plan's own (None when it records none). ``hilsim
    simulate`` and ``hilsim export`` both read ``--warmup`` here."""
    if isinstance(given, Warmup):
        return given
    if given is not None:
        return parse_warmup(given)
    return plan.warmup
