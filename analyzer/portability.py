"""Does a plan chosen on GPU A still work on GPU B? (plan portability)

PKA (Baddouh et al., MICRO 2021, section 5.3) selects kernels on a V100 and checks
them on Turing and Ampere; STEM+ROOT checks H100 -> H200. Here a plan made on bundle
A (``--source``) is evaluated on bundle B of the same workload:

1. **Alignment.** The plan JSON stores only A's sequence digest and the sampled
   names, so A itself is required. Launch sequences are aligned on the short kernel
   names (:func:`align_sequences`): equal runs are matched with vectorised
   comparisons. At a mismatch, a minimum-edit alignment (insertions and deletions) of
   the next ``WINDOW`` launches of each side is computed by a row-vectorised dynamic
   programme and kept up to the first stretch of ``CONFIRM`` agreeing launches after
   its edits (the window doubles, up to ``MAX_WINDOW``, until there is one); its edits
   are placed as late as equal cost allows, so those that only square the window's
   ragged end are never kept. Where the kept edits are bunched at the mismatch, the
   equally cheap ways to split them between A and B are compared, because repeating
   stretches (``x y x y``) make them tie on names: the launch durations decide (the
   right pairing leaves each kernel's B/A speed ratio; a shifted one adds the spread
   of other launches), else the longest agreement. A window in which little agrees
   (one side ran a long stretch the other did not) is bridged by hashing
   ``CONFIRM``-launch windows of both sides to find the nearest point where they agree
   again. Launches left unaligned are listed (first 50) with the share of their side's
   time they hold. Inside a run of one kernel repeated, names cannot say which launch
   an edit removed; the count, names and time of the unaligned launches are what to
   read there.
2. **Estimate on B** ``= sum(weight * duration_B[aligned(launch)])`` over samples
   whose launch aligned; error against B's total (STEM eq. 1).
3. **Per kernel class** (grouped by short kernel name): B's total vs the plan's
   estimate of it, and the ratio of mean durations B/A (which classes moved most).
4. **Speedup prediction** (PKA 5.3): predicted speedup of B over A = sampled
   estimate on A / sampled estimate on B, against the true total A / total B.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from hilsim.analyzer.evaluate import check_compatible

from hilsim.core.bundle import Bundle
from hilsim.core.errors import HilsimError
from hilsim.core.files import check_output
from hilsim.core.jsonfile import write_json
from hilsim.core.plan import Plan, load_plan
from hilsim.formats.read import load_profile

MAX_LISTED = 50
#: matching launches that must follow an edit before the alignment of a window is kept
CONFIRM = 16
#: first window (launches of each side) aligned after a mismatch; doubled until confirmed
WINDOW = 64
#: largest window for the dynamic programme; beyond it, the hashed search for long gaps
MAX_WINDOW = 2048
#: launches whose durations judge between equally cheap resyncs
MISFIT_LAUNCHES = 256
_HASH_SEED = 0x9E3779B97F4A7C15


@dataclass
class Alignment:
    """Index pairs of aligned launches and the launches left unaligned on each side."""

    a: np.ndarray
    b: np.ndarray
    only_a: np.ndarray
    only_b: np.ndarray


def _codes(a_names: pd.Series, b_names: pd.Series) -> tuple[np.ndarray, np.ndarray, pd.Index]:
    """Integer codes of both name columns over one shared vocabulary (no per-launch str)."""
    a_cat = a_names.astype("category") if not hasattr(a_names, "cat") else a_names
    b_cat = b_names.astype("category") if not hasattr(b_names, "cat") else b_names
    vocab = pd.Index(a_cat.cat.categories.astype(str)).append(
        pd.Index(b_cat.cat.categories.astype(str))
    ).unique()
    a_map = vocab.get_indexer(a_cat.cat.categories.astype(str))
    b_map = vocab.get_indexer(b_cat.cat.categories.astype(str))
    a_codes = a_cat.cat.codes.to_numpy().astype(np.int64)
    b_codes = b_cat.cat.codes.to_numpy().astype(np.int64)
    # a missing name (code -1) gets its own code, equal on both sides
    a_out = np.where(a_codes >= 0, a_map[np.maximum(a_codes, 0)], len(vocab))
    b_out = np.where(b_codes >= 0, b_map[np.maximum(b_codes, 0)], len(vocab))
    return a_out.astype(np.int64), b_out.astype(np.int64), vocab


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


def _window_hashes(codes: np.ndarray, length: int) -> np.ndarray:
    """A 64-bit hash of every ``length``-launch window (uint64 arithmetic wraps)."""
    values = codes.astype(np.uint64)
    n = len(values) - length + 1
    weights = np.random.default_rng(_HASH_SEED).integers(
        1, 2**63, size=length, dtype=np.uint64
    ) | np.uint64(1)
    out = np.zeros(max(n, 0), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for t in range(length):  # one vector pass per position: memory stays O(n)
            out += values[t:t + n] * weights[t]
    return out


def _edit_path(wa: np.ndarray, wb: np.ndarray) -> np.ndarray:
    """A minimum-edit alignment of two short windows (insertions and deletions only).

    Row-wise dynamic programme, each row vectorised: with ``T[c] = min(D[r-1][c] + 1,
    D[r-1][c-1] if wa[r-1] == wb[c-1])`` the row is ``D[r][c] = min_{c' <= c}(T[c'] +
    c - c')``, a running minimum. Returns the path from (0, 0) to the end as an int8
    array of moves: 0 = the two launches match, 1 = A's launch unaligned, 2 = B's.
    """
    na, nb = len(wa), len(wb)
    big = np.int32(na + nb + 1)
    idx = np.arange(nb + 1, dtype=np.int32)
    table = np.empty((na + 1, nb + 1), dtype=np.int32)
    table[0] = idx
    eq = wa[:, None] == wb[None, :]
    for r in range(1, na + 1):
        prev = table[r - 1]
        t = prev + 1
        t[1:] = np.minimum(t[1:], np.where(eq[r - 1], prev[:-1], big))
        t[0] = r
        table[r] = np.minimum.accumulate(t - idx) + idx
    moves: list[int] = []
    r, c = na, nb
    # traced back from the end, edits are taken whenever they cost no more than a
    # match: among equal-cost paths, edits sit as late as possible, so the edits that
    # only square the window's ragged end stay at its end (never committed)
    while r or c:  # one step per launch of the window (the window is short)
        if r and table[r, c] == table[r - 1, c] + 1:
            moves.append(1)
            r -= 1
        elif c and table[r, c] == table[r, c - 1] + 1:
            moves.append(2)
            c -= 1
        else:
            moves.append(0)
            r, c = r - 1, c - 1
    return np.asarray(moves[::-1], dtype=np.int8)


def _commit_point(moves: np.ndarray, confirm: int) -> int | None:
    """Moves up to the first run of ``confirm`` matches that follows an edit, or None."""
    match = (moves == 0).astype(np.int8)
    edits = np.flatnonzero(match == 0)
    if not len(edits):
        return len(moves)
    # start of every maximal run of matches and its length
    padded = np.concatenate(([0], match, [0]))
    starts = np.flatnonzero(np.diff(padded) == 1)
    ends = np.flatnonzero(np.diff(padded) == -1)
    long = starts[(ends - starts >= confirm) & (starts > edits[0])]
    return int(long[0]) if len(long) else None


def _duration_misfit(
    a: np.ndarray, b: np.ndarray, la: np.ndarray, lb: np.ndarray, x: int, y: int, run: int
) -> float:
    """How badly launch durations disagree if A's ``x..`` is paired with B's ``y..``.

    Over the first :data:`MISFIT_LAUNCHES` launches of the equal run: the mean squared
    deviation of ``log(duration_B / duration_A)`` from its mean per kernel. The right
    pairing leaves only each kernel's speed ratio between the GPUs plus jitter; a
    pairing shifted onto other launches of the same kernels adds their own spread.
    """
    k = min(run, MISFIT_LAUNCHES)
    if k < 2:
        return float("inf")
    codes = a[x:x + k]
    ratio = lb[y:y + k] - la[x:x + k]
    _, inverse = np.unique(codes, return_inverse=True)
    count = np.bincount(inverse)
    mean = np.bincount(inverse, weights=ratio) / count
    return float(np.mean((ratio - mean[inverse]) ** 2))


def _best_split(
    a: np.ndarray, b: np.ndarray, i: int, j: int, cost: int, confirm: int,
    log_durations: tuple[np.ndarray, np.ndarray] | None,
) -> tuple[int, int]:
    """Of the ways to skip ``cost`` launches bunched at a mismatch, ``(da, cost - da)``,
    the one the launches that follow support best.

    Equal-cost choices are what a repeating stretch creates (``x y x y``: dropping an
    ``x`` of A or a ``y`` of B cost the same), and names alone cannot tell them apart
    until the repetition ends. Among the splits followed by at least ``confirm``
    agreeing launches (or by agreement up to an end), the one whose durations agree
    best (:func:`_duration_misfit`) wins when durations are given; otherwise, or on a
    tie, the one whose agreement lasts longest.
    """
    scored = []
    for da in range(cost + 1):
        x, y = i + da, j + cost - da
        if x <= len(a) and y <= len(b):
            run = _run_length(a, b, x, y)
            confirmed = run >= confirm or x + run >= len(a) or y + run >= len(b)
            misfit = (
                _duration_misfit(a, b, *log_durations, x, y, run)
                if log_durations is not None else 0.0
            )
            scored.append((not confirmed, misfit, -run, da))
    da = min(scored)[3]
    return da, cost - da


def _resync_far(a: np.ndarray, b: np.ndarray, i: int, j: int, confirm: int,
                size: int) -> tuple[int, int] | None:
    """Nearest ``(da, db)`` at which ``confirm`` launches agree, searching windows from
    ``size`` launches (doubled) with hashes of every ``confirm``-launch window: for long
    one-sided gaps (a stretch only one GPU ran). None if nothing further agrees."""
    length = max(1, min(confirm, len(a) - i, len(b) - j))
    while True:
        wa = a[i:i + size + length - 1]
        wb = b[j:j + size + length - 1]
        ha, hb = _window_hashes(wa, length), _window_hashes(wb, length)
        # per hash value, the nearest start on each side; the best pair shares a value
        ua, first_a = np.unique(ha, return_index=True)
        ub, first_b = np.unique(hb, return_index=True)
        _, ia, ib = np.intersect1d(ua, ub, assume_unique=True, return_indices=True)
        da, db = first_a[ia], first_b[ib]
        for k in np.lexsort((da, np.abs(da - db), da + db))[:8]:
            x, y = int(da[k]), int(db[k])  # verified: hash collisions are not trusted
            if (x or y) and np.array_equal(a[i + x:i + x + length], b[j + y:j + y + length]):
                return x, y
        if i + size + length - 1 >= len(a) and j + size + length - 1 >= len(b):
            return None
        size *= 2


def align_sequences(
    a: np.ndarray, b: np.ndarray, window: int = WINDOW, confirm: int = CONFIRM,
    max_window: int = MAX_WINDOW, durations: tuple[np.ndarray, np.ndarray] | None = None,
) -> Alignment:
    """Align two code sequences (see the module docstring).

    ``durations`` (A's and B's launch durations) break ties between equally cheap
    ways to resume after a mismatch (:func:`_best_split`).

    Work is linear in the launches plus, per mismatching stretch, a small dynamic
    programme (or, for long gaps, hashing about as many launches as the gap). One
    Python step per mismatch and per launch of its window, none per aligned launch.
    """
    log_durations = None
    if durations is not None:
        log_durations = (np.log1p(np.maximum(np.asarray(durations[0], np.float64), 0)),
                         np.log1p(np.maximum(np.asarray(durations[1], np.float64), 0)))
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
        size = window
        while True:
            moves = _edit_path(a[i:i + size], b[j:j + size])
            at_end = i + size >= len(a) and j + size >= len(b)
            cut = len(moves) if at_end else _commit_point(moves, confirm)
            if cut is None and size >= max_window:
                # no long agreeing run: keep the first half of the path if it is mostly
                # matches (e.g. other library kernels chosen every few launches, PKA 5.2)
                half = len(moves) // 2
                if np.count_nonzero(moves[:half] == 0) * 2 >= half:
                    cut = half
            if cut is not None or size >= max_window:
                break
            size *= 2
        if cut is None:  # little agrees within max_window: a long gap on one side
            step = _resync_far(a, b, i, j, confirm, size)
            if step is None:
                break  # nothing further agrees: the rest of both sides is unaligned
            oa.append(np.arange(i, i + step[0]))
            ob.append(np.arange(j, j + step[1]))
            i, j = i + step[0], j + step[1]
            continue
        moves = moves[:cut]
        if len(moves) and not np.any(moves == 0):  # edits bunched at the mismatch
            da, db = _best_split(a, b, i, j, len(moves), confirm, log_durations)
            moves = np.concatenate((np.ones(da, np.int8), np.full(db, 2, np.int8)))
        pos_a = i + np.concatenate(([0], np.cumsum(moves != 2)))[:-1]
        pos_b = j + np.concatenate(([0], np.cumsum(moves != 1)))[:-1]
        pa.append(pos_a[moves == 0])
        pb.append(pos_b[moves == 0])
        oa.append(pos_a[moves == 1])
        ob.append(pos_b[moves == 2])
        i += int(np.count_nonzero(moves != 2))
        j += int(np.count_nonzero(moves != 1))
    oa.append(np.arange(i, len(a)))
    ob.append(np.arange(j, len(b)))

    def cat(parts: list[np.ndarray]) -> np.ndarray:
        return np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)

    order_a = cat(pa)
    return Alignment(order_a, cat(pb), np.sort(cat(oa)), np.sort(cat(ob)))


def _listed(launches: pd.DataFrame, ids: np.ndarray) -> list[dict[str, Any]]:
    """``{launch_id, name}`` of the first :data:`MAX_LISTED` launches of ``ids``."""
    ids = ids[:MAX_LISTED]
    names = launches["name"].iloc[ids].astype(str).to_numpy()
    return [{"launch_id": int(i), "name": str(n)} for i, n in zip(ids, names, strict=True)]


def _class_rows(
    vocab: pd.Index, ka: np.ndarray, kb: np.ndarray, dur_a: np.ndarray, dur_b: np.ndarray,
    est_codes: np.ndarray, est_values: np.ndarray, total_b: float,
) -> list[dict[str, Any]]:
    """Per kernel class: launches and time on each side, B's estimate, mean ratio B/A."""
    k = len(vocab) + 1  # the last code: launches without a name
    cnt_a, cnt_b = np.bincount(ka, minlength=k), np.bincount(kb, minlength=k)
    sum_a = np.bincount(ka, weights=dur_a, minlength=k)
    sum_b = np.bincount(kb, weights=dur_b, minlength=k)
    est = np.bincount(est_codes, weights=est_values, minlength=k)
    labels = [*map(str, vocab), ""]
    rows = []
    for c in np.flatnonzero((cnt_a > 0) | (cnt_b > 0)):  # one step per class
        mean_a = sum_a[c] / cnt_a[c] if cnt_a[c] else None
        mean_b = sum_b[c] / cnt_b[c] if cnt_b[c] else None
        ratio = mean_b / mean_a if mean_a and mean_b is not None else None
        rows.append({
            "kernel": labels[c],
            "launches_a": int(cnt_a[c]) if cnt_a[c] else None,
            "launches_b": int(cnt_b[c]) if cnt_b[c] else None,
            "total_b_ns": float(sum_b[c]) if cnt_b[c] else None,
            "estimate_b_ns": float(est[c]),
            "error": float(abs(est[c] - sum_b[c]) / sum_b[c]) if sum_b[c] else None,
            "mean_ratio_b_over_a": float(ratio) if ratio and np.isfinite(ratio) else None,
            "share_of_b": float(sum_b[c] / total_b) if cnt_b[c] and total_b else None,
        })
    rows.sort(key=lambda r: -(r["total_b_ns"] or 0.0))
    return rows


def evaluate_portability(plan: Plan, source: Bundle, target: Bundle) -> dict[str, Any]:
    """Evaluate ``plan`` (made on ``source``) on ``target``; JSON-ready dict."""
    check_compatible(plan, source)
    ka, kb, vocab = _codes(source.launches["kernel"], target.launches["kernel"])
    dur_a = source.launches["duration_ns"].to_numpy(np.float64)
    dur_b = target.launches["duration_ns"].to_numpy(np.float64)
    al = align_sequences(ka, kb, durations=(dur_a, dur_b))
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
    est_values = weights[ok] * dur_b[mapped[ok]]
    est_b = float(est_values.sum())
    rows = _class_rows(vocab, ka, kb, dur_a, dur_b, kb[mapped[ok]], est_values, total_b)
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
            "method": (
                f"short kernel names; equal runs vectorised; after a mismatch the nearest "
                f"point where {CONFIRM} launches agree (hashed windows)"
            ),
            "aligned": int(len(al.a)),
            "unaligned_a": int(len(al.only_a)),
            "unaligned_b": int(len(al.only_b)),
            "unaligned_a_time_fraction": float(dur_a[al.only_a].sum()) / total_a
            if total_a else None,
            "unaligned_b_time_fraction": float(dur_b[al.only_b].sum()) / total_b
            if total_b else None,
            "unaligned_a_first": _listed(source.launches, al.only_a),
            "unaligned_b_first": _listed(target.launches, al.only_b),
            "samples_lost": int((~ok).sum()),
            "samples_lost_first": _listed(source.launches, ids[~ok]),
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


@dataclass
class PortabilityRun:
    """A plan chosen on GPU A scored on GPU B (:func:`evaluate_portability`'s document),
    written to ``output``."""

    document: dict[str, Any]
    output: Path

    def lines(self) -> list[str]:
        """The error on B (and on A), what did not align, the predicted vs true speedup,
        and the file written."""
        al = self.document["alignment"]
        sp = self.document["speedup_b_over_a"]
        return [
            f"error on B {100 * self.document['error']:.2f}% "
            f"(on A {100 * self.document['error_on_a']:.2f}%); "
            f"unaligned: {al['unaligned_a']} A launches "
            f"({100 * (al['unaligned_a_time_fraction'] or 0):.2f}% of A's time), "
            f"{al['unaligned_b']} B launches "
            f"({100 * (al['unaligned_b_time_fraction'] or 0):.2f}% of B's time); "
            f"speedup B/A predicted {sp['predicted']:.3f} vs true {sp['true']:.3f}",
            f"wrote {self.output}",
        ]


def portability_run(plan: Path, source: Path, target: Path, output: Path) -> PortabilityRun:
    """``hilsim portability``: the plan file ``plan`` (made on the profile ``source``)
    evaluated on ``target`` and written as JSON to ``output`` (refused before the work
    when it exists)."""
    check_output(output)
    document = evaluate_portability(load_plan(plan), load_profile(source), load_profile(target))
    write_json(output, document)
    return PortabilityRun(document, output)
