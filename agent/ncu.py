"""The detailed level: Nsight Compute on a subset of launches, matched to the light pass.

ncu runs as a second pass of the workload::

    ncu --target-processes all --launch-skip S --launch-count N --metrics LIST
        --cache-control none --clock-control none -f -o REP CMD ARGS
    ncu --import REP.ncu-rep --csv --page raw --print-units base

and the CSV is read with :func:`hilsim.formats.ncu_csv.read_ncu_csv`. Caches and clocks
are left as the workload leaves them (:data:`DEFAULT_CACHE_CONTROL`): ncu's own default,
``--cache-control all``, flushes every cache before each profiled launch, so the memory
counters that PKA's features, ``validate``'s DRAM traffic and the warm-state placement
(``analyzer/warmstate.py``) read would be a cold-cache kernel's, not the run's (H100
bundles with the flush: a median L2 read hit rate of 17% for small kernels that read
what the previous kernel wrote). The bundle's manifest records the choice. The k-th launch
ncu profiled is matched to light launch ``S + k`` by order *and* kernel name (and
grid/block where both sides know them). Mismatches are never joined silently
(:func:`match_detailed`):

* equal counts: launches whose names/configs agree are joined, the others are listed
  (an algorithm that cuDNN picks differently under the profiler, PKA section 5.2, shows
  up as isolated substitutions);
* different counts: the sequences have shifted, so only the agreeing prefix before the
  first disagreement is joined and the rest is reported.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hilsim.core.errors import HilsimError
from hilsim.core.metric_names import TABLE2_METRICS
from hilsim.core.schema import names_agree

#: Beyond PKA Table 2: time/cycles, DRAM and L2 traffic, L1/L2 hit rates, instruction
#: mix by precision (STEM section 4.6 lists these categories), branch efficiency.
EXTRA_METRICS: tuple[str, ...] = (
    "gpu__time_duration.sum",
    "gpu__cycles_elapsed.max",
    "sm__cycles_active.avg",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "lts__t_sectors_op_read.sum",
    "lts__t_sectors_op_write.sum",
    "dram__sectors_read.sum",
    "lts__t_sectors_lookup_miss.sum",
    "l1tex__t_sector_hit_rate.pct",
    "lts__t_sector_hit_rate.pct",
    "lts__t_sector_op_read_hit_rate.pct",
    "smsp__sass_thread_inst_executed_op_hadd_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_hmul_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_hfma_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_dadd_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_dmul_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_integer_pred_on.sum",
    "smsp__sass_average_branch_targets_threads_uniform.pct",
    "launch__block_size",
    "launch__registers_per_thread",
)
DEFAULT_METRICS: tuple[str, ...] = tuple(dict.fromkeys((*TABLE2_METRICS, *EXTRA_METRICS)))
#: ncu's ``--cache-control`` values: ``none`` keeps the caches the workload left (the
#: warm state the counters should describe), ``all`` flushes them before every profiled
#: launch (each kernel measured from cold caches, ncu's default)
CACHE_CONTROLS = ("none", "all")
DEFAULT_CACHE_CONTROL = "none"

PERMISSION_MARK = "ERR_NVGPUCTRPERM"
PERMISSION_HINT = (
    "ncu: no permission to read GPU performance counters (ERR_NVGPUCTRPERM): run as root, "
    "or have an admin set 'options nvidia NVreg_RestrictProfilingToAdminUsers=0' in "
    "/etc/modprobe.d and reload the driver (or reboot); see "
    "https://developer.nvidia.com/ERR_NVGPUCTRPERM"
)


@dataclass
class DetailedSelection:
    """Which light launches get detailed counters: ``skip``/``count`` for ncu, ``wanted`` ids."""

    mode: str
    skip: int
    count: int | None
    wanted: list[int] | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "mode": self.mode,
            "launch_skip": self.skip,
            "launch_count": self.count,
        }
        if self.wanted is not None:
            out["requested"] = len(self.wanted)
        return out


def read_plan_ids(path: str | Path) -> list[int]:
    """Launch ids of a plan JSON (``samples[].launch_id``) or a text list ``3,17,42``."""
    source = Path(path)
    if source.is_file():
        try:
            data = json.loads(source.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise HilsimError(f"{source}: not a plan JSON ({exc})") from exc
        samples = data.get("samples") if isinstance(data, dict) else None
        if not isinstance(samples, list):
            raise HilsimError(f"{source}: no 'samples' list (expected a hilsim.plan/1 file)")
        try:
            ids = [int(s["launch_id"]) for s in samples]
        except (KeyError, TypeError, ValueError) as exc:
            raise HilsimError(f"{source}: a sample has no integer launch_id") from exc
    else:
        try:
            ids = [int(x) for x in re.split(r"[,\s]+", str(path).strip()) if x]
        except ValueError as exc:
            raise HilsimError(
                f"--detailed-launches {path!r}: neither a plan file nor a list like 3,17,42"
            ) from exc
    if not ids:
        raise HilsimError(f"--detailed-launches {path!r}: no launch ids")
    if min(ids) < 0:
        raise HilsimError(f"--detailed-launches {path!r}: negative launch id {min(ids)}")
    return sorted(set(ids))


def selection(first: int | None, launches: str | None, every: bool) -> DetailedSelection | None:
    """The detailed selection from the CLI options (at most one may be given)."""
    given = [x for x in (first is not None, launches is not None, every) if x]
    if len(given) > 1:
        raise HilsimError("give one of --detailed-first, --detailed-launches, --detailed-all")
    if first is not None:
        if first <= 0:
            raise HilsimError(f"--detailed-first must be positive, got {first}")
        return DetailedSelection("first", 0, first)
    if launches is not None:
        ids = read_plan_ids(launches)
        # ncu selects a contiguous run: profile the span, keep the requested ids
        return DetailedSelection("launches", ids[0], ids[-1] - ids[0] + 1, ids)
    if every:
        return DetailedSelection("all", 0, None)
    return None


def profile_command(
    ncu: str,
    report: Path,
    sel: DetailedSelection,
    metrics: list[str],
    command: list[str],
    cache_control: str = DEFAULT_CACHE_CONTROL,
) -> list[str]:
    """The ncu collection command (argument list, no shell): clocks as the GPU runs them,
    caches flushed only when ``cache_control`` is ``all``."""
    if cache_control not in CACHE_CONTROLS:
        raise HilsimError(
            f"ncu cache control {cache_control!r}: one of {', '.join(CACHE_CONTROLS)}"
        )
    argv = [ncu, "--target-processes", "all"]
    if sel.skip:
        argv += ["--launch-skip", str(sel.skip)]
    if sel.count is not None:
        argv += ["--launch-count", str(sel.count)]
    argv += ["--metrics", ",".join(metrics), "--cache-control", cache_control,
             "--clock-control", "none", "-f", "-o", str(report)]
    return [*argv, *command]


def import_command(ncu: str, report: Path) -> list[str]:
    """Print a report as the wide raw CSV in base units."""
    return [ncu, "--import", str(report), "--csv", "--page", "raw", "--print-units", "base"]


def check_permission(output: str) -> None:
    """Raise the one-line fix when ncu reported ERR_NVGPUCTRPERM."""
    if PERMISSION_MARK in output:
        raise HilsimError(PERMISSION_HINT)


def report_file(report: Path) -> Path | None:
    """ncu appends ``.ncu-rep`` to ``-o NAME`` (older versions ``.nsight-cuprof-report``)."""
    for candidate in (report, Path(f"{report}.ncu-rep"), Path(f"{report}.nsight-cuprof-report")):
        if candidate.is_file():
            return candidate
    return None


@dataclass
class Match:
    """Result of matching the ncu pass to the light pass."""

    metrics: pd.DataFrame | None
    report: dict[str, Any] = field(default_factory=dict)


def _agree(ncu_names: np.ndarray, light_names: np.ndarray) -> np.ndarray:
    if len(ncu_names) == 0:
        return np.zeros(0, dtype=bool)
    return names_agree(ncu_names, light_names)


def _config_agree(ncu: pd.DataFrame, light: pd.DataFrame) -> np.ndarray:
    ok = np.ones(len(ncu), dtype=bool)
    for column in ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"):
        if column in ncu.columns and column in light.columns:
            a = ncu[column].to_numpy(dtype=np.float64, na_value=np.nan)
            b = light[column].to_numpy(dtype=np.float64, na_value=np.nan)
            ok &= np.isnan(a) | np.isnan(b) | (a == b)
    return ok


def match_detailed(
    launches: pd.DataFrame, table: Any, sel: DetailedSelection, max_listed: int = 20
) -> Match:
    """Match ncu rows to light launches ``sel.skip + k``; never join a disagreeing row.

    ``table`` is an :class:`hilsim.formats.ncu_csv.NcuTable`. Returns the bundle
    ``metrics`` (``launch_id`` + metric columns; rows for matched launches only, and for
    ``--detailed-launches`` only the requested ids) or None when nothing matched, plus the
    report for the manifest: counts, policy, and the first ``max_listed`` mismatches.
    """
    n_light = len(launches)
    ncu_launches = table.launches.reset_index(drop=True)
    n_ncu = len(ncu_launches)
    expected = n_light - sel.skip if sel.count is None else min(sel.count, n_light - sel.skip)
    expected = max(expected, 0)
    positions = np.arange(min(n_ncu, expected), dtype=np.int64)
    target = sel.skip + positions
    light = launches.iloc[target].reset_index(drop=True)
    ncu_part = ncu_launches.iloc[positions].reset_index(drop=True)
    names_ok = _agree(
        ncu_part["name"].astype(str).to_numpy(dtype=object),
        light["name"].astype(str).to_numpy(dtype=object),
    )
    config_ok = _config_agree(ncu_part, light)
    agree = names_ok & config_ok
    same_count = n_ncu == expected
    if same_count:
        policy = "equal counts: agreeing launches joined by order, disagreeing ones not joined"
        joined = agree
    else:
        policy = (
            "different counts: only the agreeing prefix joined (the sequences shifted "
            "after the first disagreement)"
        )
        first_bad = int(np.flatnonzero(~agree)[0]) if (~agree).any() else len(agree)
        joined = np.zeros(len(agree), dtype=bool)
        joined[:first_bad] = True
    if sel.wanted is not None:
        wanted = np.isin(target, np.asarray(sel.wanted, dtype=np.int64))
        joined &= wanted
    mismatches = []
    for k in np.flatnonzero(~agree)[:max_listed]:
        mismatches.append(
            {
                "ncu_id": int(ncu_part["ncu_id"].iloc[k]),
                "launch_id": int(target[k]),
                "ncu_kernel": str(ncu_part["name"].iloc[k])[:200],
                "light_kernel": str(light["name"].iloc[k])[:200],
                "reason": "kernel name differs" if not names_ok[k] else "grid/block differs",
            }
        )
    report: dict[str, Any] = {
        "ncu_launches": n_ncu,
        "light_launches_expected": int(expected),
        "compared": int(len(agree)),
        "agreeing": int(agree.sum()),
        "mismatched": int((~agree).sum()),
        "count_mismatch": not same_count,
        "joined": int(joined.sum()),
        "policy": policy,
        "mismatches": mismatches,
    }
    if sel.wanted is not None:
        report["requested"] = len(sel.wanted)
        report["requested_missing"] = int(len(sel.wanted) - joined.sum())
    if not joined.any():
        return Match(None, report)
    rows = np.flatnonzero(joined)
    ids = ncu_part["ncu_id"].to_numpy(dtype=np.int64)[rows]
    values = table.metrics.set_index("ncu_id").reindex(ids)
    columns: dict[str, np.ndarray] = {"launch_id": target[rows].astype(np.int64)}
    for column in values.columns:
        columns[column] = values[column].to_numpy(dtype=np.float64)
    return Match(pd.DataFrame(columns), report)


def detailed_cost(
    detailed_wall_s: float, baseline_wall_s: float, profiled: int, n_launches: int
) -> dict[str, Any]:
    """Time ncu spent per detailed launch and the extrapolated cost of ``--detailed-all``.

    PKA (Avalos Baddouh et al., MICRO 2021) section 3.1 motivates two-level profiling by
    this cost: detailed profiling replays each kernel once per metric pass, so profiling
    every launch of a long workload takes days. Per launch: ``(detailed wall - baseline
    wall) / profiled``, the baseline being the workload without ncu (the bare run when
    measured, else the light pass); ``--detailed-all`` is then estimated as the baseline
    plus that time for every launch. An estimate: launches differ in their number of
    replay passes and ncu's fixed start-up cost is spread over the profiled launches.
    """
    extra = max(0.0, float(detailed_wall_s) - float(baseline_wall_s))
    per_launch = extra / profiled if profiled > 0 else None
    return {
        "detailed_wall_s": round(float(detailed_wall_s), 6),
        "baseline_wall_s": round(float(baseline_wall_s), 6),
        "launches_profiled": int(profiled),
        "s_per_detailed_launch": None if per_launch is None else round(per_launch, 6),
        "detailed_all_estimate_s": None
        if per_launch is None
        else round(float(baseline_wall_s) + per_launch * n_launches, 3),
        "n_launches": int(n_launches),
    }


__all__ = [
    "CACHE_CONTROLS",
    "DEFAULT_CACHE_CONTROL",
    "DEFAULT_METRICS",
    "PERMISSION_HINT",
    "DetailedSelection",
    "Match",
    "check_permission",
    "detailed_cost",
    "import_command",
    "match_detailed",
    "profile_command",
    "read_plan_ids",
    "selection",
]
