"""Summaries of a sweep's results table: per workload the ``hilsim compare`` result of its
grid points (STEM Table 3 columns, :mod:`hilsim.analyzer.compare`), and per workload, card
and grid point the figures of the simulating tasks."""

from __future__ import annotations

from typing import Any

import pandas as pd
from hilsim.analyzer import methods
from hilsim.analyzer.compare import MethodResult

SUMMARY = "summary.csv"
SIM_SUMMARY = "sim_summary.csv"
#: first characters that make a spreadsheet read a cell as a formula (OWASP, CSV injection)
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with every text cell that a spreadsheet would run as a formula (a workload
    name or label starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return)
    prefixed with ``'``, which spreadsheets show as text; numbers are left as they are."""
    out = frame.copy()
    for column in out.columns:
        values = out[column]
        if not (pd.api.types.is_object_dtype(values) or pd.api.types.is_string_dtype(values)):
            continue
        risky = values.map(lambda v: isinstance(v, str) and v.startswith(FORMULA_STARTS))
        if risky.any():
            out[column] = values.where(~risky, "'" + values[risky].astype(str))
    return out


def summarize(results: pd.DataFrame, workload: str) -> dict[str, Any]:
    """One workload's rows as a ``compare`` result (same keys as
    :func:`hilsim.analyzer.compare.compare_methods` returns), one entry per grid point."""
    rows = results[results["workload"] == workload]
    summaries, skipped, notes = [], {}, []
    for label, group in rows.groupby("label", sort=True):
        # scored rows (a failed simulation keeps its plan's score), once per seed: the
        # score does not depend on the simulated card
        ok = group[(group["status"] == "ok") | group["error"].notna()]
        ok = ok.drop_duplicates("seed", keep="first")
        failed = group[group["status"] != "ok"]
        if ok.empty:
            skipped[str(label)] = str(failed["message"].iloc[0])
            continue
        if len(failed):
            notes.append(f"{label}: {len(failed)} of {len(group)} runs failed")
        name = str(group["method"].iloc[0])
        result = MethodResult(
            str(label),
            name,
            tuple(methods.get(name).needs),
            seeds=ok["seed"].astype(int).tolist(),
            errors=ok["error"].astype(float).tolist(),
            speedups=ok["speedup"].astype(float).tolist(),
            samples=ok["n_samples"].astype(int).tolist(),
            sampled_ns=ok["sampled_ns"].astype(float).tolist()
            if "sampled_ns" in ok
            else [float("nan")] * len(ok),
            plan_seconds=ok["plan_seconds"].astype(float).tolist(),
        )
        n_launches = int(ok["n_launches"].iloc[0]) if "n_launches" in ok else 0
        summaries.append(result.summary(n_launches))
    # rows that reduce the simulation first (compare's order), then "no reduction"
    summaries.sort(key=lambda s: (s["no_reduction"] is not None, s["mean_error"]))
    return {
        "workload": workload,
        "methods": summaries,
        "skipped": skipped,
        "holdout": bool(rows["holdout_digest"].notna().any()),
        "seeds": int(rows["seed"].nunique()) if len(rows) else 0,
        "workers_note": "; ".join(notes) or None,
    }


def sim_summary(results: pd.DataFrame) -> pd.DataFrame:
    """Simulating tasks per (workload, card, grid point): runs, failures, mean launches
    and cycles simulated, mean and max error of the simulated estimate against the full
    run's cycles, mean simulated-time speedup and the simulator's wall seconds in all."""
    rows = results[results["card"].notna()]
    out = []
    for (workload, card, label), group in rows.groupby(["workload", "card", "label"],
                                                       sort=True):
        ok = group[group["status"] == "ok"]
        errors = ok["sim_error"].astype(float)
        out.append({
            "workload": workload,
            "card": card,
            "label": label,
            "runs": len(group),
            "failed": int((group["status"] != "ok").sum()),
            "sim_launches": float(ok["sim_launches"].astype(float).mean()) if len(ok) else None,
            "sim_cycles": float(ok["sim_cycles"].astype(float).mean()) if len(ok) else None,
            "sim_error": float(errors.mean()) if errors.notna().any() else None,
            "sim_max_error": float(errors.max()) if errors.notna().any() else None,
            "profile_error": float(ok["error"].astype(float).mean()) if len(ok) else None,
            "sim_speedup": float(ok["sim_speedup"].astype(float).mean()) if len(ok) else None,
            "sim_wall_seconds": float(group["sim_wall_seconds"].astype(float).sum()),
            "first_failure": next(iter(group.loc[group["status"] != "ok", "message"]), None),
        })
    return pd.DataFrame(out)
