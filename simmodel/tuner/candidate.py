"""One candidate card of the on-simulator search: the base card with the device's facts,
each knob's proposed value where its :class:`~hilsim.simmodel.tuner.rule.Slot` puts it,
and what follows from them (Accel-Sim, Khairy et al., ISCA 2020, Section II-C: the
tuner writes a configuration from the device query and the microbenchmarks).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hilsim.simmodel.gpgpusim.cards import CardConfig
from hilsim.simmodel.tuner.card import (
    ClockDomains,
    Setting,
    dl2_value,
    list_entries,
    list_rows,
    partition_indexing,
)
from hilsim.simmodel.tuner.intsolve import IntSearch
from hilsim.simmodel.tuner.pipeline import intervals_within_latencies, pipeline_depths
from hilsim.simmodel.tuner.rule import Knob, Slot


@dataclass
class KnobState:
    """One knob's search, target and what the report says about it."""

    knob: Knob
    target: float
    search: IntSearch
    base_value: str
    note: str = ""
    frozen: bool = False  # the measurement does not move with the option: base kept

    @property
    def value(self) -> int:
        """The settled (best) option value."""
        best = self.search.best()
        return self.search.first_guess if best is None or self.frozen else best

    def tolerance(self, simulated: float) -> float:
        """How far the settled value's ``simulated`` quantity may lie from the target: the
        search's own tolerance, or half the change one option step makes toward the
        target at the knob's expected slope (the nearest integer can do no better),
        whichever is larger. A simulator that jumps across the target between adjacent
        values (a rate not monotone next to the latency) is not excused by the jump."""
        step = self.search.step_change(self.value, up=simulated < self.target)
        return max(self.search.tolerance, 0.5 * step)

    def off_target(self, simulated: float | None) -> dict[str, float] | None:
        """The gap when the tuned card's ``simulated`` quantity lies farther from the
        measured target than :meth:`tolerance` (None: within it, or not simulated)."""
        if simulated is None or not math.isfinite(simulated):
            return None
        tol = self.tolerance(simulated)
        if abs(simulated - self.target) <= tol:
            return None
        scale = abs(self.target) or 1.0
        return {"measured": self.target, "simulated": simulated,
                "relative": (simulated - self.target) / scale, "tolerance": tol,
                "tolerance_relative": tol / scale}


@dataclass(frozen=True)
class Structure:
    """What every candidate shares: the base card, the device's settings, the clock
    domains before the search (with each part's source), the facts and the channel
    count before the search."""

    base: CardConfig
    device: list[Setting]
    clocks: ClockDomains
    clock_src: dict[str, str]
    facts: Mapping[str, Any]
    first_channels: int


def base_value(card: CardConfig, knob: Knob) -> str:
    """The base card's value of the knob's slot."""
    if knob.slot is Slot.L2_CLOCK:
        return f"{card.clock_domains_mhz[2]:g}"
    if knob.slot is Slot.LIST_ENTRY:
        vals = list_entries(card, knob.option)
        return vals[knob.entry if knob.entry is not None else 0]
    return card.option(knob.option, "").split()[0] if card.option(knob.option, "") else ""


def _proposed(st: KnobState, proposals: Mapping[str, int]) -> int:
    return proposals.get(st.knob.key, st.value) if not st.frozen else st.value


def _lists(
    s: Structure, states: list[KnobState], proposals: Mapping[str, int]
) -> tuple[list[Setting], dict[str, list[dict[str, Any]]]]:
    """The list options, entry by entry (the rest of each list the base card's)."""
    lists: dict[str, list[dict[str, Any]]] = {}
    for st in states:
        if st.knob.slot is not Slot.LIST_ENTRY:
            continue
        if st.knob.option not in lists:
            lists[st.knob.option] = list_rows(s.base, st.knob.option)
        i = st.knob.entry if st.knob.entry is not None else 0
        lists[st.knob.option][i].update(value=str(_proposed(st, proposals)), kind="measured",
                                        measurement=", ".join(st.knob.inputs))
    pipeline_depths(s.base, lists)
    intervals_within_latencies(s.base, lists)
    out: list[Setting] = []
    entries: dict[str, list[dict[str, Any]]] = {}
    for option, rows in lists.items():
        if all(r["kind"] == "base" for r in rows):
            continue
        entries[option] = rows
        parts = []
        for kind, text in (("measured", "measured in the loop"),
                           ("derived", "derived from the tuned entries (below)"),
                           ("base", "the base card's (no microbenchmark measures them)")):
            names = [r["entry"] for r in rows if r["kind"] == kind]
            if names:
                parts.append(f"{', '.join(names)}: {text}")
        notes = sorted({r["note"] for r in rows if r.get("note")})
        kind = "measured" if any(r["kind"] == "measured" for r in rows) else "derived"
        out.append(Setting(option, ",".join(r["value"] for r in rows), kind,
                           "; ".join(parts + notes)))
    return out, entries


def _clock_domains(
    s: Structure, states: list[KnobState], proposals: Mapping[str, int]
) -> tuple[Setting, list[dict[str, Any]]]:
    """``-gpgpu_clock_domains`` with the L2 knob's clock (the interconnect's at the base
    card's ratio to it) and each part's source."""
    l2 = next((st for st in states if st.knob.slot is Slot.L2_CLOCK), None)
    parts = dict(s.clocks.__dict__)
    src = dict(s.clock_src)
    if l2 is not None and not l2.frozen:
        x = proposals.get(l2.knob.key, l2.value)
        ratio = s.clocks.icnt / s.clocks.l2
        parts["l2"], parts["icnt"] = float(x), float(x) * ratio
        src["l2"] = "measured in the loop (L2 bandwidth)"
        src["icnt"] = f"L2 clock x the base card's interconnect:L2 ratio {ratio:g}"
    cd = ClockDomains(**parts)
    setting = Setting("-gpgpu_clock_domains", cd.text(),
                      "device" if l2 is None or l2.frozen else "measured",
                      "; ".join(f"{k} {v}" for k, v in src.items()))
    rows = [{"entry": k, "value": f"{parts[k]:g}", "source": src[k]}
            for k in ("core", "icnt", "l2", "dram")]
    return setting, rows


def _memory(s: Structure, states: list[KnobState], proposals: Mapping[str, int]) -> list[Setting]:
    """The channels (the knob's, else the device's bus over the base card's channel
    width) and the L2 banks over them."""
    out = []
    ch = next((st for st in states if st.knob.slot is Slot.CHANNELS), None)
    n = proposals.get(ch.knob.key, ch.value) if ch is not None else s.first_channels
    n_kind = "measured" if ch is not None else (
        "device" if s.facts.get("memory_bus_width_bits") else "base")
    n_detail = (ch.knob.what if ch is not None else
                "device memory_bus_width_bits / the base card's channel width")
    if n_kind != "base" or str(n) != s.base.option("-gpgpu_n_mem"):
        out.append(Setting("-gpgpu_n_mem", str(n), n_kind, n_detail))
    if s.facts.get("l2_cache_bytes"):
        value, note = dl2_value(int(s.facts["l2_cache_bytes"]), int(n), s.base)
        out.append(Setting("-gpgpu_cache:dl2", value, "derived",
                           f"device l2_cache_bytes over the tuned channels: {note}"))
    idx, why = partition_indexing(int(n), s.base)
    if idx != s.base.option("-gpgpu_memory_partition_indexing", "0").split()[0]:
        out.append(Setting("-gpgpu_memory_partition_indexing", idx, "derived", why))
    return out


def assemble(
    s: Structure, states: list[KnobState], proposals: Mapping[str, int]
) -> tuple[list[Setting], dict[str, list[dict[str, Any]]]]:
    """Every setting of a candidate: device facts, the knobs' proposals (list options
    entry by entry, the rest of each list the base's), and what follows from them; and
    each list option's (and the clock domains') entries with their sources."""
    lists, entries = _lists(s, states, proposals)
    scalars = [
        Setting(st.knob.option, str(_proposed(st, proposals)),
                "base" if st.frozen else "measured", st.knob.what)
        for st in states if st.knob.slot is Slot.VALUE
    ]
    clocks, entries["-gpgpu_clock_domains"] = _clock_domains(s, states, proposals)
    return [*s.device, *lists, *scalars, clocks, *_memory(s, states, proposals)], entries


def candidate(s: Structure, states: list[KnobState], proposals: Mapping[str, int]) -> CardConfig:
    """The candidate card of ``proposals``."""
    settings, _entries = assemble(s, states, proposals)
    return s.base.with_options(options_of(settings))


def options_of(settings: list[Setting]) -> dict[str, str]:
    """Option -> value of a candidate's settings."""
    return {s.option: s.value for s in settings}
