"""Does a plan chosen on GPU A still work on GPU B? (plan portability)

PKA (Baddouh et al., MICRO 2021, section 5.3) selects kernels on a V100 and checks
them on Turing and Ampere; STEM+ROOT checks H100 -> H200. Here a plan made on bundle
A (``--source``) is evaluated on bundle B of the same workload:

1. **Alignment.** The plan JSON stores only A's sequence digest and the sampled
   names, so A itself is required. Launch sequences are aligned on the short kernel
   names (:func:`align_sequences`): equal runs are matched with vectorised
   comparisons, and only at a mismatch :class:`difflib.SequenceMatcher` runs on a
   bounded window (``window`` launches of each side) to find the next common block of
   at least ``min_block`` launches; what lies before it is unaligned (dropped from A
   or inserted in B). Cost is linear in the launches plus ``window**2`` per
   mismatching stretch, instead of difflib's quadratic worst case on the whole
   sequence. Launches that cannot be aligned are listed on both sides (first 50) with
   the share of A's and of B's time they hold.
2. **Estimate on B** ``= sum(weight * duration_B[aligned(launch)])`` over samples
   whose launch aligned; error against B's total (STEM eq. 1).
3. **Per kernel class** (grouped by short kernel name): B's total vs the plan's
   estimate of it, and the ratio of mean durations B/A (which classes moved most).
4. **Speedup prediction** (PKA 5.3): predicted speedup of B over A = sampled
   estimate on A / sampled estimate on B, against the true total A / total B.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from analyzer.bundle import Bundle
from analyzer.errors import HilsimError
from analyzer.evaluate import check_compatible
from analyzer.plan import Plan

MAX_LISTED = 50


@dataclass
class Alignment:
    """Index pairs of aligned launches and the launches left unaligned on each side."""

    a: np.ndarray
    b: np.ndarray
    only_a: np.ndarray
    only_b: np.ndarray


def _codes(a_names: pd.Series, b_names: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    both = pd.concat([a_names.astype(str), b_names.astype(str)], ignore_index=True)
    codes, _ = pd.factorize(both)
    return codes[: len(a_names)].astype(np.int64), codes[len(a_names):].astype(np.int64)


def _run_length(a: np.ndarray, b: np.ndarray, i: int, j: int) -> int:
    """Length of the equal run starting at a[i], b[j] (vectorised, doubling chunks)."""
    n = 0
    chunk = 256
    while i + n < len(a) and j + n < len(b):
        m = min(chunk, len(a) - i - n, len(b) - j - n)
        neq = np.flatnonzero(a[i + n:i + n + m] != b[j + n:j + n + m])
        if len(neq):
            return n + int(neq[0])
        n += m
        chunk *= 2
    return n


def align_sequences(
    a: np.ndarray, b: np.ndarray, window: int = 256, min_block: int = 1
) -> Alignment:
    """Align two code sequences (see the module docstring)."""
    pa: list[np.ndarray] = []
    pb: list[np.ndarray] = []
    oa: list[np.ndarray] = []
    ob: list[np.ndarray] = []
    i = j = 0
    while i < len(a) and j < len(b):
        run = _run_length(a, b, i, j)
        if run:
            pa.append(np.arange(i, i + run))
            pb.append(np.arange(j, j + run))
            i += run
            j += run
            continue
        wa, wb = a[i:i + window].tolist(), b[j:j + window].tolist()
        matcher = difflib.SequenceMatcher(None, wa, wb, autojunk=False)
        block = next(
            (m for m in matcher.get_matching_blocks()
             if m.size >= min(min_block, len(wa) - m.a, len(wb) - m.b) and m.size > 0),
            None,
        )
        if block is None:
            step_a, step_b = len(wa), len(wb)
        else:
            step_a, step_b = block.a, block.b
            if step_a == 0 and step_b == 0:  # cannot happen (run was 0); guard anyway
                step_a = step_b = 1
        oa.append(np.arange(i, i + step_a))
        ob.append(np.arange(j, j + step_b))
        i += step_a
        j += step_b
    oa.append(np.arange(i, len(a)))
    ob.append(np.arange(j, len(b)))

    def cat(parts: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)

    return Alignment(cat(pa), cat(pb), cat(oa), cat(ob))


def evaluate_portability(plan: Plan, source: Bundle, target: Bundle) -> dict[str, Any]:
    """Evaluate ``plan`` (made on ``source``) on ``target``; JSON-ready dict."""
    check_compatible(plan, source)
    ka, kb = _codes(source.launches["kernel"].astype(str), target.launches["kernel"].astype(str))
    al = align_sequences(ka, kb)
    dur_a = source.launches["duration_ns"].to_numpy(np.float64)
    dur_b = target.launches["duration_ns"].to_numpy(np.float64)
    a_to_b = np.full(source.n_launches, -1, dtype=np.int64)
    a_to_b[al.a] = al.b
    ids = plan.samples["launch_id"].to_numpy()
    weights = plan.samples["weight"].to_numpy(np.float64)
    mapped = a_to_b[ids]
    ok = mapped >= 0
    if not ok.any():
        raise HilsimError("portability: none of the plan's sampled launches aligns with B")
    total_a, total_b = float(dur_a.sum()), float(dur_b.sum())
    est_a = float(np.sum(weights * dur_a[ids]))
    est_b = float(np.sum(weights[ok] * dur_b[mapped[ok]]))
    names_a = source.launches["name"].astype(str).to_numpy()
    names_b = target.launches["name"].astype(str).to_numpy()
    unaligned_a_time = float(dur_a[al.only_a].sum())
    unaligned_b_time = float(dur_b[al.only_b].sum())
    lost = [
        {"launch_id": int(i), "name": str(n)}
        for i, n in zip(ids[~ok][:MAX_LISTED],
                        plan.samples["name"].to_numpy()[~ok][:MAX_LISTED]
                        if "name" in plan.samples else [""] * MAX_LISTED, strict=False)
    ]
    # per kernel class
    kern_a = source.launches["kernel"].astype(str).to_numpy()
    kern_b = target.launches["kernel"].astype(str).to_numpy()
    est_by = pd.Series(weights[ok] * dur_b[mapped[ok]]).groupby(kern_b[mapped[ok]]).sum()
    sa = pd.DataFrame({"k": kern_a, "d": dur_a}).groupby("k")["d"].agg(["sum", "mean", "size"])
    sb = pd.DataFrame({"k": kern_b, "d": dur_b}).groupby("k")["d"].agg(["sum", "mean", "size"])
    classes = sb.add_suffix("_b").join(sa.add_suffix("_a"), how="outer")
    classes["estimate_b"] = est_by.reindex(classes.index).fillna(0.0)
    rows = []
    for name, r in classes.iterrows():
        truth = r["sum_b"]
        ratio = r["mean_b"] / r["mean_a"] if r["mean_a"] and np.isfinite(r["mean_a"]) else None
        rows.append({
            "kernel": str(name),
            "launches_a": None if np.isnan(r["size_a"]) else int(r["size_a"]),
            "launches_b": None if np.isnan(r["size_b"]) else int(r["size_b"]),
            "total_b_ns": None if np.isnan(truth) else float(truth),
            "estimate_b_ns": float(r["estimate_b"]),
            "error": float(abs(r["estimate_b"] - truth) / truth)
            if truth and np.isfinite(truth) else None,
            "mean_ratio_b_over_a": None if ratio is None or not np.isfinite(ratio)
            else float(ratio),
            "share_of_b": float(truth / total_b) if np.isfinite(truth) else None,
        })
    rows.sort(key=lambda r: -(r["total_b_ns"] or 0.0))
    moved = sorted((r for r in rows if r["mean_ratio_b_over_a"]),
                   key=lambda r: -abs(np.log(r["mean_ratio_b_over_a"])))[:10]
    predicted_speedup = est_a / est_b if est_b else None
    true_speedup = total_a / total_b if total_b else None
    return {
        "schema": "hilsim.portability/1",
        "plan": {"method": plan.method, "n_samples": plan.n_samples,
                 "source_digest": plan.source.get("sequence_digest")},
        "source": {"path": str(source.path or ""), "n_launches": source.n_launches,
                   "total_ns": total_a},
        "target": {"path": str(target.path or ""), "n_launches": target.n_launches,
                   "total_ns": total_b},
        "alignment": {
            "method": "vectorised equal runs + difflib on 256-launch windows, short names",
            "aligned": int(len(al.a)),
            "unaligned_a": int(len(al.only_a)),
            "unaligned_b": int(len(al.only_b)),
            "unaligned_a_time_fraction": unaligned_a_time / total_a if total_a else None,
            "unaligned_b_time_fraction": unaligned_b_time / total_b if total_b else None,
            "unaligned_a_first": [
                {"launch_id": int(i), "name": str(names_a[i])} for i in al.only_a[:MAX_LISTED]
            ],
            "unaligned_b_first": [
                {"launch_id": int(i), "name": str(names_b[i])} for i in al.only_b[:MAX_LISTED]
            ],
            "samples_lost": int((~ok).sum()),
            "samples_lost_first": lost,
        },
        "estimate_b_ns": est_b,
        "error": abs(est_b - total_b) / total_b if total_b else None,
        "estimate_a_ns": est_a,
        "error_on_a": abs(est_a - total_a) / total_a if total_a else None,
        "speedup_b_over_a": {
            "predicted": predicted_speedup,
            "true": true_speedup,
            "error": abs(predicted_speedup - true_speedup) / true_speedup
            if predicted_speedup and true_speedup else None,
        },
        "classes": rows,
        "moved_most": moved,
    }
