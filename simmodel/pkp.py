"""Principal Kernel Projection (PKA (Avalos Baddouh et al., MICRO'21), section 3.2).

PKP shortens the simulation of *one* launch: simulate until the IPC is stable,
then project the cycles the rest of the grid would take. PKA = PKS (launch
selection, :mod:`hilsim.analyzer.methods.pka`) + PKP; :func:`project_plan` combines PKP
with any launch-level plan (``pka``, ``stem``, ``megsim``, ...).

Input: an :class:`IpcTimeline` per launch, i.e. the launch cut into consecutive
cycle windows, each with its cycles, instructions and the CTAs that finished in
it (from a timing model, a simulator log, or a per-CTA trace via
:func:`read_cta_trace`). It is the full run of the launch, or the part run so far.

Stopping rule (section 3.2), evaluated at the end of every window:

* **IPC quasi-stable**: over the trailing ``window_cycles`` cycles (the paper's
  n = 3000; the windows that *start* inside that span, at least two of them,
  and at least ``window_cycles`` cycles simulated) the standard deviation of the
  per-window IPC (cycle-weighted) is below ``s`` (0.25). The paper's ``s`` is
  an absolute IPC spread; ``relative=True`` compares ``std / mean`` instead, for
  timelines whose IPC scale (whole GPU vs one SM) makes an absolute bound
  meaningless.
* **A full wave**: "the number of finished thread blocks must be more than
  [...] a wave", and "once enough thread blocks have finished to complete the
  wave where quasi-stability occurs, we consider the signal stable": with ``F``
  CTAs finished when stability is first seen and ``W`` CTAs per wave, the wave
  in progress is number ``F // W + 1``, so simulation continues until
  ``(F // W + 1) * W`` CTAs (at most the grid) have finished, then stops. This
  implies at least one full wave. The paper does not re-test stability at
  that point; neither do we.
* **Grids that fit in one wave** (``total_ctas <= ctas_per_wave``) skip the wave
  condition and stop at stability (paper) — but only when the timeline knows the
  launch's total instructions (``total_instructions``, as an Accel-Sim trace
  does): all CTAs run at once, so none has finished and no per-CTA work can be
  measured. Without it such a launch is simulated whole (our choice; the paper
  does not say how it projects them).

Projection ("take the number of unfinished thread blocks and linearly project
the number of cycles left"): the remaining instructions run at the stable IPC
(instructions / cycles of the trailing window at the stop):
``projected = stop_cycle + remaining_instructions / stable_ipc`` with
``remaining_instructions = total_instructions - executed`` when the total is
known, else ``(total_ctas - F_stop) * I_cta`` plus the unfinished part of the
in-flight CTAs, i.e. ``total_ctas * I_cta - executed``, where ``I_cta`` is the
instructions executed up to the last window in which a CTA finished divided by
the CTAs finished by then (the linear, per-CTA projection; exact when CTAs
retire in waves; it overestimates per-CTA work by the in-flight share when CTAs
retire continuously). A launch whose IPC never stabilises, or that reaches its
last CTA before the stop, is simulated whole (``projected`` = its cycles).

``simulated_fraction`` = cycles simulated / projected cycles of the launch.

Why not a registered method: a ``Method`` chooses launches from a bundle; PKP
acts inside a launch on simulator timelines a bundle does not hold. It is
exposed as functions; :func:`project_plan` applies it to any plan.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hilsim.core.errors import HilsimError
from hilsim.core.inputs import open_input
from hilsim.core.plan import Plan
from hilsim.core.schema import names_agree

#: PKA section 3.2: the rolling window ("the last n cycles", n = 3000).
WINDOW_CYCLES = 3000
#: PKA section 3.2: the standard-deviation threshold s used in all experiments.
STD_THRESHOLD = 0.25
#: per-CTA trace columns read by :func:`read_cta_trace`.
CTA_TRACE_COLUMNS: tuple[str, ...] = (
    "launch_id",
    "cta_id",
    "sm_id",
    "start_cycle",
    "end_cycle",
    "instructions",
)


@dataclass(frozen=True)
class IpcTimeline:
    """One launch as consecutive cycle windows (PKA section 3.2 input).

    Attributes:
        cycles: cycles of each window (> 0; windows may differ in length).
        instructions: instructions executed in each window (>= 0).
        ctas_finished: CTAs (thread blocks) that finished in each window.
        total_ctas: CTAs of the launch's grid.
        ctas_per_wave: CTAs that fill the GPU at the kernel's occupancy (a wave).
        total_instructions: the launch's instructions, when known (trace-driven
            simulators know it); sharpens the projection and lets grids smaller
            than a wave stop early.
        kernel: the name the simulator gave the launch, when known: checked against
            the plan's name of the launch by :func:`project_plan`.
    """

    cycles: np.ndarray
    instructions: np.ndarray
    ctas_finished: np.ndarray
    total_ctas: int
    ctas_per_wave: int
    total_instructions: float | None = None
    kernel: str | None = None

    def __post_init__(self) -> None:
        cycles = np.asarray(self.cycles, dtype=np.float64).ravel()
        inst = np.asarray(self.instructions, dtype=np.float64).ravel()
        done = np.asarray(self.ctas_finished, dtype=np.int64).ravel()
        if not (cycles.size == inst.size == done.size) or cycles.size == 0:
            raise HilsimError(
                "IpcTimeline: cycles, instructions and ctas_finished must be non-empty and of "
                f"equal length (got {cycles.size}, {inst.size}, {done.size})"
            )
        if not np.all(np.isfinite(cycles)) or (cycles <= 0).any():
            raise HilsimError("IpcTimeline: every window needs a positive, finite cycle count")
        if not np.all(np.isfinite(inst)) or (inst < 0).any() or (done < 0).any():
            raise HilsimError("IpcTimeline: instructions and ctas_finished must be >= 0")
        if int(self.total_ctas) < 1 or int(self.ctas_per_wave) < 1:
            raise HilsimError("IpcTimeline: total_ctas and ctas_per_wave must be >= 1")
        if int(done.sum()) > int(self.total_ctas):
            raise HilsimError(
                f"IpcTimeline: {int(done.sum())} CTAs finished but the grid has "
                f"{int(self.total_ctas)}"
            )
        if self.total_instructions is not None and not (
            math.isfinite(float(self.total_instructions))
            and float(self.total_instructions) >= float(inst.sum()) * (1 - 1e-9)
        ):
            raise HilsimError(
                "IpcTimeline: total_instructions is below the instructions in the timeline"
            )
        object.__setattr__(self, "cycles", cycles)
        object.__setattr__(self, "instructions", inst)
        object.__setattr__(self, "ctas_finished", done)
        object.__setattr__(self, "total_ctas", int(self.total_ctas))
        object.__setattr__(self, "ctas_per_wave", int(self.ctas_per_wave))
        if self.total_instructions is not None:
            object.__setattr__(self, "total_instructions", float(self.total_instructions))

    @property
    def complete(self) -> bool:
        """Whether the timeline runs until the grid's last CTA finished."""
        return int(self.ctas_finished.sum()) == self.total_ctas

    @property
    def total_cycles(self) -> float:
        """Cycles covered by the timeline."""
        return float(self.cycles.sum())

    @property
    def ipc(self) -> np.ndarray:
        """IPC of each window."""
        return self.instructions / self.cycles


@dataclass(frozen=True)
class PkpResult:
    """Outcome of :func:`project_launch`.

    Attributes:
        stop_cycle: cycles that had to be simulated.
        projected_cycles: projected cycles of the whole launch.
        simulated_fraction: ``stop_cycle / projected_cycles``.
        stable: whether the launch was stopped early and projected.
        stable_ipc: IPC the rest was projected at (None when not projected).
        stop_window: index of the last simulated window (None: simulated whole).
        true_cycles: the timeline's cycles when it covers the whole launch.
        reason: why it stopped where it did.
    """

    stop_cycle: float
    projected_cycles: float
    simulated_fraction: float
    stable: bool
    stable_ipc: float | None = None
    stop_window: int | None = None
    true_cycles: float | None = None
    reason: str = ""

    @property
    def error(self) -> float | None:
        """Relative error of the projection against the full timeline, when known."""
        if self.true_cycles is None or self.true_cycles == 0:
            return None
        return abs(self.projected_cycles - self.true_cycles) / self.true_cycles


def rolling_ipc(
    timeline: IpcTimeline, window_cycles: float = WINDOW_CYCLES
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cycle-weighted mean and std of the window IPCs over the trailing ``window_cycles``.

    Returns ``(mean, std, full)`` per window end; ``full`` marks the ends where
    at least ``window_cycles`` cycles have run and two or more windows start
    inside the trailing span. Prefix sums of centred values: O(windows).
    """
    c = timeline.cycles
    x = timeline.ipc
    end = np.cumsum(c)
    start = end - c
    centre = float(np.dot(c, x) / end[-1])
    y = x - centre
    p0 = np.concatenate(([0.0], end))
    p1 = np.concatenate(([0.0], np.cumsum(c * y)))
    p2 = np.concatenate(([0.0], np.cumsum(c * y * y)))
    first = np.searchsorted(start, end - window_cycles, side="left")
    last = np.arange(1, c.size + 1)
    n = p0[last] - p0[first]
    # n is 0 where one window is longer than the rolling span; those ends are not
    # "full" below, so their NaN statistics are never used
    with np.errstate(divide="ignore", invalid="ignore"):
        m1 = (p1[last] - p1[first]) / n
        var = np.maximum((p2[last] - p2[first]) / n - m1 * m1, 0.0)
    full = (end >= window_cycles * (1 - 1e-12)) & (last - first >= 2)
    return m1 + centre, np.sqrt(var), full


def project_launch(
    timeline: IpcTimeline,
    window_cycles: float = WINDOW_CYCLES,
    s: float = STD_THRESHOLD,
    relative: bool = False,
) -> PkpResult:
    """PKP (PKA section 3.2) on one launch's timeline; see the module doc."""
    if not (math.isfinite(float(window_cycles)) and float(window_cycles) > 0):
        raise HilsimError(f"pkp: window_cycles must be positive, got {window_cycles!r}")
    if not (math.isfinite(float(s)) and float(s) > 0):
        raise HilsimError(f"pkp: s must be positive, got {s!r}")
    end = np.cumsum(timeline.cycles)
    done = np.cumsum(timeline.ctas_finished)
    total = timeline.total_ctas
    true_cycles = float(end[-1]) if timeline.complete else None
    mean, std, full = rolling_ipc(timeline, window_cycles)
    bound = s * np.abs(mean) if relative else s
    eligible = np.flatnonzero(full & (std < bound) & (mean > 0))

    def whole(reason: str) -> PkpResult:
        if not timeline.complete:
            raise HilsimError(
                f"pkp: the timeline stops after {int(done[-1])} of {total} CTAs and the launch "
                f"cannot be projected ({reason}); give the full timeline"
            )
        cycles = float(end[-1])
        return PkpResult(cycles, cycles, 1.0, False, None, None, true_cycles, reason)

    if eligible.size == 0:
        return whole("IPC never stable")
    onset = int(eligible[0])
    small = total <= timeline.ctas_per_wave
    if small:
        if timeline.total_instructions is None:
            return whole("grid fits in one wave and total_instructions is unknown")
        stop = onset
    else:
        wave = timeline.ctas_per_wave
        needed = min((int(done[onset]) // wave + 1) * wave, total)
        reached = np.flatnonzero(done[onset:] >= needed)
        if reached.size == 0:
            return whole("the wave in which IPC stabilised never finished")
        stop = onset + int(reached[0])
    if int(done[stop]) >= total:
        cycles = float(end[stop])
        return PkpResult(
            cycles, cycles, 1.0, False, None, None, true_cycles, "last CTA finished at the stop"
        )
    executed = float(timeline.instructions[: stop + 1].sum())
    if timeline.total_instructions is not None:
        remaining = max(timeline.total_instructions - executed, 0.0)
    else:
        finish = np.flatnonzero(timeline.ctas_finished[: stop + 1] > 0)[-1]
        per_cta = float(timeline.instructions[: finish + 1].sum()) / float(done[finish])
        remaining = max(total * per_cta - executed, 0.0)
    ipc = float(mean[stop])
    simulated = float(end[stop])
    projected = simulated + remaining / ipc
    return PkpResult(
        simulated,
        projected,
        simulated / projected,
        True,
        ipc,
        stop,
        true_cycles,
        "grid within one wave: stopped at stability" if small else "stable after a full wave",
    )


def _check_kernel_names(plan: Plan, timelines: list[IpcTimeline], ids: np.ndarray) -> None:
    """One line at the first sampled launch whose timeline names another kernel than the
    plan does (launch marks of the run not matching the profile)."""
    if "name" not in plan.samples or any(t.kernel is None for t in timelines):
        return
    profiled = plan.samples["name"].astype(str).to_numpy(dtype=object)
    simulated = np.array([t.kernel for t in timelines], dtype=object)
    known = (profiled != "") & (simulated != "")
    bad = np.zeros(len(ids), dtype=bool)
    if known.any():
        bad[known] = ~names_agree(simulated[known].astype(str), profiled[known].astype(str))
    if bad.any():
        k = int(np.flatnonzero(bad)[0])
        raise HilsimError(
            f"pkp: launch {int(ids[k])} is {profiled[k]!r} in the plan but its timeline is of "
            f"{simulated[k]!r} ({int(bad.sum())} of {len(bad)} disagree): the run's launch "
            "marks do not match the profile"
        )


def project_plan(
    plan: Plan,
    timelines: Mapping[int, IpcTimeline],
    window_cycles: float = WINDOW_CYCLES,
    s: float = STD_THRESHOLD,
    relative: bool = False,
) -> dict[str, Any]:
    """PKA = a launch-level plan + PKP on each sampled launch (PKA section 3).

    Returns ``projected_total_cycles`` = sum(weight * projected cycles of the
    sampled launch), ``full_total_cycles`` (the same with every sampled launch
    simulated whole; None unless every timeline is complete) and the projection
    error between them, ``simulated_cycles`` / ``sampled_cycles`` (cycles of the
    distinct sampled launches simulated vs projected) and their ratio
    ``simulated_fraction``, and one record per sampled launch.
    """
    ids = plan.samples["launch_id"].to_numpy(dtype=np.int64)
    weights = plan.samples["weight"].to_numpy(dtype=np.float64)
    missing = [int(i) for i in ids if int(i) not in timelines]
    if missing:
        raise HilsimError(
            f"pkp: no IPC timeline for {len(missing)} of the plan's {ids.size} sampled launches "
            f"(first: launch {missing[0]})"
        )
    _check_kernel_names(plan, [timelines[int(i)] for i in ids], ids)
    results = [project_launch(timelines[int(i)], window_cycles, s, relative) for i in ids]
    projected = np.array([r.projected_cycles for r in results])
    stopped = np.array([r.stop_cycle for r in results])
    truth = [r.true_cycles for r in results]
    full_total = (
        float(np.dot(weights, np.array(truth, dtype=np.float64)))
        if all(t is not None for t in truth)
        else None
    )
    projected_total = float(np.dot(weights, projected))
    sampled = float(projected.sum())
    return {
        "method": plan.method,
        "window_cycles": float(window_cycles),
        "s": float(s),
        "relative": bool(relative),
        "projected_total_cycles": projected_total,
        "full_total_cycles": full_total,
        "projection_error": (
            abs(projected_total - full_total) / full_total if full_total else None
        ),
        "simulated_cycles": float(stopped.sum()),
        "sampled_cycles": sampled,
        "simulated_fraction": float(stopped.sum()) / sampled if sampled else 1.0,
        "n_launches": int(ids.size),
        "n_projected": int(sum(r.stable for r in results)),
        "launches": [
            {
                "launch_id": int(i),
                "weight": float(w),
                "stop_cycle": r.stop_cycle,
                "projected_cycles": r.projected_cycles,
                "true_cycles": r.true_cycles,
                "simulated_fraction": r.simulated_fraction,
                "stable": r.stable,
                "reason": r.reason,
            }
            for i, w, r in zip(ids, weights, results, strict=True)
        ],
    }


# ------------------------------------------------------------ per-CTA traces
def timeline_from_ctas(
    start: np.ndarray,
    end: np.ndarray,
    instructions: np.ndarray,
    sm: np.ndarray,
    *,
    bin_cycles: int = 100,
    n_sms: int | None = None,
    ctas_per_wave: int | None = None,
) -> IpcTimeline:
    """IPC timeline of one launch from its CTAs' lifetimes (see :func:`read_cta_trace`).

    Each CTA's instructions are spread evenly over ``[start, end)`` (a zero-length
    CTA over one cycle); windows of ``bin_cycles`` run from the first start to
    the last end (the last one shorter). A CTA finishes in the window holding
    its end cycle. The wave is ``n_sms`` (default: distinct ``sm_id``) times the
    most CTAs resident at once on one SM, unless ``ctas_per_wave`` is given.
    ``total_instructions`` is the trace's sum.
    """
    start = np.asarray(start, dtype=np.float64)
    length = np.maximum(np.asarray(end, dtype=np.float64) - start, 1.0)
    stop = start + length
    inst = np.asarray(instructions, dtype=np.float64)
    t0, t1 = float(start.min()), float(stop.max())
    n_bins = max(1, math.ceil((t1 - t0) / bin_cycles))
    edges = np.minimum(t0 + bin_cycles * np.arange(n_bins + 1, dtype=np.float64), t1)
    edges[-1] = t1
    # cumulative instructions are piecewise linear between CTA starts and ends
    times = np.concatenate((start, stop))
    slopes = np.concatenate((inst / length, -inst / length))
    order = np.argsort(times, kind="stable")
    t, slope = times[order], np.cumsum(slopes[order])
    cum = np.concatenate(([0.0], np.cumsum(slope[:-1] * np.diff(t))))
    per_bin = np.diff(np.interp(edges, t, cum))
    finished_bin = np.minimum(np.searchsorted(edges[1:], stop, side="left"), n_bins - 1)
    finished = np.bincount(finished_bin, minlength=n_bins)
    if ctas_per_wave is None:
        sm = np.asarray(sm, dtype=np.int64)
        ev_sm = np.concatenate((sm, sm))
        ev_t = np.concatenate((start, stop))
        ev_d = np.concatenate((np.ones(sm.size), -np.ones(sm.size)))  # ends sort first
        order = np.lexsort((ev_d, ev_t, ev_sm))
        resident = int(np.cumsum(ev_d[order]).max())
        sms = int(np.unique(sm).size) if n_sms is None else int(n_sms)
        ctas_per_wave = max(1, sms * resident)
    return IpcTimeline(
        cycles=np.diff(edges),
        instructions=np.maximum(per_bin, 0.0),
        ctas_finished=finished,
        total_ctas=int(start.size),
        ctas_per_wave=int(ctas_per_wave),
        total_instructions=float(inst.sum()),
    )


def read_cta_trace(
    path: str | Path,
    *,
    bin_cycles: int = 100,
    n_sms: int | None = None,
    ctas_per_wave: int | None = None,
) -> dict[int, IpcTimeline]:
    """Per-CTA timing trace CSV -> one :class:`IpcTimeline` per launch.

    Columns (header required, extra columns ignored): ``launch_id``, ``cta_id``,
    ``sm_id``, ``start_cycle``, ``end_cycle`` (cycles since any origin, end >=
    start), ``instructions`` (warp instructions the CTA executed). One row per
    CTA; ``(launch_id, cta_id)`` must be unique. ``n_sms`` is the GPU's SM count
    (default: the SMs the launch used), ``bin_cycles`` the window length; see
    :func:`timeline_from_ctas`. Errors name the file and row.
    """
    source = Path(path)
    try:
        with open_input(source, "a CTA trace (CSV)") as handle:  # regular files only
            frame = pd.read_csv(handle)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise HilsimError(f"{source}: not a readable CSV ({exc})") from exc
    frame.columns = [str(c).strip() for c in frame.columns]
    missing = [c for c in CTA_TRACE_COLUMNS if c not in frame.columns]
    if missing:
        raise HilsimError(f"{source}: missing column(s) {', '.join(missing)}")
    if len(frame) == 0:
        raise HilsimError(f"{source}: no CTAs")
    if int(bin_cycles) < 1:
        raise HilsimError(f"pkp: bin_cycles must be >= 1, got {bin_cycles!r}")
    values = {}
    for column in CTA_TRACE_COLUMNS:
        numbers = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=np.float64)
        bad = ~np.isfinite(numbers) | (numbers < 0)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise HilsimError(
                f"{source}: row {row}, column {column}: {frame[column].iloc[row]!r} is not a "
                "non-negative number"
            )
        values[column] = numbers
    backwards = values["end_cycle"] < values["start_cycle"]
    if backwards.any():
        row = int(np.flatnonzero(backwards)[0])
        raise HilsimError(f"{source}: row {row}: end_cycle is before start_cycle")
    launch = values["launch_id"].astype(np.int64)
    dup = pd.DataFrame({"l": launch, "c": values["cta_id"].astype(np.int64)}).duplicated()
    if dup.any():
        row = int(np.flatnonzero(dup.to_numpy())[0])
        raise HilsimError(f"{source}: row {row}: duplicate (launch_id, cta_id)")
    order = np.argsort(launch, kind="stable")
    bounds = np.flatnonzero(np.diff(launch[order])) + 1
    timelines: dict[int, IpcTimeline] = {}
    for rows in np.split(order, bounds):  # one iteration per launch
        timelines[int(launch[rows[0]])] = timeline_from_ctas(
            values["start_cycle"][rows],
            values["end_cycle"][rows],
            values["instructions"][rows],
            values["sm_id"][rows],
            bin_cycles=int(bin_cycles),
            n_sms=n_sms,
            ctas_per_wave=ctas_per_wave,
        )
    return timelines
