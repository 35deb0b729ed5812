"""Simulator-in-the-loop tuning: options set by simulating candidates until the simulated
microbenchmarks meet the measured ones (``hilsim tune MEASURED.json --on-simulator``).

Accel-Sim (Khairy et al., ISCA 2020), Section II-C: microbenchmarks measure a card and a
tuner turns the numbers into a GPGPU-Sim configuration; Section IV: the configuration is
then correlated against the card. Here the correlation is the tuner: the same
microbenchmark kernels (:data:`~hilsim.simmodel.tuner.evaluators.EVALUATORS`, the
suite's families over :class:`~hilsim.simmodel.gpgpusim.simdevice.GpgpusimDevice`) run on
the candidate card, each option entry (a :class:`~hilsim.simmodel.tuner.rule.Knob` of
its option's rule, :mod:`hilsim.simmodel.tuner.knobs`) moves by a secant step on its own
measured quantity (:class:`~hilsim.simmodel.tuner.intsolve.IntSearch`), and a round is
repeated until every entry is settled: the nearest integer to its target, or a bound
the simulator cannot pass (its pipeline floor), which the report states with the
closest value. No pipeline-offset map is assumed, so the card's own clocks, channels
and pipeline are in every candidate.

What is read: the measurements and device facts of ``MEASURED.json`` (never a card
config: the measured card's config is not opened) and the base card's structure
(:mod:`~hilsim.simmodel.tuner.basecard`). Each round's programs run in parallel
(threads, each driving one simulator process; their CPU time is counted from the child
processes). The slices are the suite's: one SM for latencies, the throughput slice for
per-SM rates, a memory slice for L2 and DRAM bandwidth; for a measurement of a whole
GPU the memory slice is the fewest channels whose SMs carry the card's SMs per channel
(:func:`~hilsim.simmodel.tuner.memslice.choose_slice`), so the slice is limited where
the GPU is. Kernels whose timed loops touch no global memory (register chains, shared
memory, launch: :data:`~hilsim.simmodel.tuner.evaluators.ONE_CHANNEL_EVALUATORS`) run
on one memory channel, the same values for a fraction of the simulator's time; the
pointer chase keeps every channel (its DRAM latency depends on them).

The search is :func:`prepare` (the base card, the knobs and their first guesses),
:func:`one_round` as often as needed, and :func:`finish` (the tuned card's settings);
:func:`tune_on_simulator` runs the three.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hilsim.simmodel.gpgpusim.build import find_build
from hilsim.simmodel.gpgpusim.cards import CardConfig, card_config
from hilsim.simmodel.gpgpusim.simdevice import card_device_facts
from hilsim.simmodel.tuner.basecard import BASE_CARDS, CardKey, Choice, choose, device_key
from hilsim.simmodel.tuner.candidate import (
    KnobState,
    Structure,
    assemble,
    base_value,
    candidate,
    options_of,
)
from hilsim.simmodel.tuner.card import (
    ClockDomains,
    Setting,
    canonical_facts,
    clock_domains,
    device_settings,
    l2_bank,
    valid_channel_counts,
)
from hilsim.simmodel.tuner.cardcheck import l2_check, streaming_check
from hilsim.simmodel.tuner.evaluators import EVALUATORS, CandidateRunner, cpu_seconds
from hilsim.simmodel.tuner.inputs import check_device_facts, check_measurement_value
from hilsim.simmodel.tuner.intsolve import IntSearch
from hilsim.simmodel.tuner.knobs import KNOBS, applicable
from hilsim.simmodel.tuner.memslice import MemorySlice, choose_slice
from hilsim.simmodel.tuner.pairs import (
    cap_intervals,
    extra_candidates,
    interval_within_latency,
    joint_candidates,
    joint_step,
)
from hilsim.simmodel.tuner.ports import port_step
from hilsim.simmodel.tuner.rule import Knob, SearchContext, Slot

from hilsim.core import measurement_names as mn
from hilsim.core.errors import HilsimError
from hilsim.core.measurement import Measurement, read_microbench_json

#: measurements never used as targets, and why
EXCLUDED: dict[str, str] = {
    "dram_write_bandwidth": "not a tuner input (in files written before the suite timed "
    "grid_write, a known-wrong figure: the copy kernel was timed)",
}
#: L2 clock / core clock ratios the L2 clock is searched over (finer steps put the L2
#: and core clock edges in beat patterns that make the bandwidth jump non-monotonically)
L2_CLOCK_RATIOS = (0.5, 0.625, 0.75, 0.875, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0)
#: options every evaluator's result may depend on besides its knobs' own
SHARED_OPTIONS = ("-gpgpu_clock_domains", "-gpgpu_n_mem", "-gpgpu_cache:dl2")


@dataclass
class Round:
    """One round: the knob values simulated and what the simulator measured."""

    index: int
    proposals: dict[str, int]
    simulated: dict[str, float]
    runs: int
    wall_s: float


@dataclass
class LoopResult:
    """Everything ``--on-simulator`` found (:mod:`hilsim.simmodel.tuner.report`
    writes it)."""

    measured_path: str
    base: CardConfig
    choice: Choice
    facts: dict[str, Any]
    measured: dict[str, float]
    knobs: list[KnobState]
    settings: list[Setting]
    rounds: list[Round]
    runs: list[dict[str, Any]]
    skipped: dict[str, str]
    notes: list[str]
    final: dict[str, float]
    cpu_s: float
    wall_s: float
    workers: int
    memory_slice: MemorySlice
    context: SearchContext
    entry_sources: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: the register-file port trial (:func:`~hilsim.simmodel.tuner.ports.port_step`), if run
    port_trial: dict[str, Any] | None = None
    #: the whole tuned card's streaming read against its slice
    #: (:func:`~hilsim.simmodel.tuner.cardcheck.streaming_check`), if run
    whole_card_streaming: dict[str, Any] | None = None
    #: the whole tuned card's L2 bandwidth against a whole GPU's measurement
    #: (:func:`~hilsim.simmodel.tuner.cardcheck.l2_check`), if run
    whole_card_l2: dict[str, Any] | None = None

    @property
    def unreachable(self) -> list[KnobState]:
        """Knobs whose target the simulator cannot reach (at a bound)."""
        return [k for k in self.knobs if k.search.unreachable and not k.frozen]


@dataclass
class Search:
    """The search between rounds (:func:`prepare` makes it, :func:`one_round` moves it)."""

    measured_path: str
    structure: Structure
    choice: Choice
    measured: dict[str, float]
    by_name: dict[str, Measurement]
    skipped: dict[str, str]
    ctx: SearchContext
    states: list[KnobState]
    runner: CandidateRunner
    started: float
    cpu0: float
    notes: list[str] = field(default_factory=list)
    rounds: list[Round] = field(default_factory=list)
    #: what the simulator measured on the candidates kept (the report's simulated values)
    final_sim: dict[str, float] = field(default_factory=dict)
    #: evaluator -> the candidate's options it last ran on
    last_run: dict[str, dict[str, str]] = field(default_factory=dict)
    #: the values the last round simulated (or the joint step took)
    previous: dict[str, int] = field(default_factory=dict)
    #: (interval key, latency, interval) pairs the joint step simulated
    tried_joint: set[tuple[str, int, int]] = field(default_factory=set)
    #: the memory slice the console last named
    slice_said: MemorySlice | None = None
    #: what the register-file port trial simulated and took (None: not run)
    port_trial: dict[str, Any] | None = None
    #: the whole-card streaming check (None: not run)
    whole_card_streaming: dict[str, Any] | None = None
    #: the whole-card L2 bandwidth check (None: not run)
    whole_card_l2: dict[str, Any] | None = None

    @property
    def by_key(self) -> dict[str, KnobState]:
        """Each knob's state by key."""
        return {st.knob.key: st for st in self.states}

    def memory_slice(self, channels: int, per_cluster: int = 1) -> MemorySlice:
        """The memory slice of a candidate of ``channels`` channels and ``per_cluster`` SMs
        per cluster: the measurement's own simulated slice (its channels and SMs) when it
        was taken on one, else the fewest channels whose SMs carry the candidate's SMs per
        channel (:func:`~hilsim.simmodel.tuner.memslice.choose_slice`: a whole GPU's
        bandwidth is bound where its SMs per channel bind it)."""
        sms = int(self.structure.facts.get("sm_count") or 2)
        channels = max(1, channels)
        for name in (mn.DRAM_READ_BANDWIDTH, mn.L2_BANDWIDTH):
            m = self.by_name.get(name)
            if m is not None and m.params.get("sms_simulated"):
                return MemorySlice(int(m.params.get("mem_channels_simulated") or 1),
                                   int(m.params["sms_simulated"]), sms, channels,
                                   f"the simulated slice {name} was measured on")
        return choose_slice(sms, channels, per_cluster)


# --- prepare ------------------------------------------------------------------------


def _units(card: CardConfig) -> dict[str, int]:
    out = {}
    for unit in ("sp", "dp", "int", "sfu"):
        out[unit] = int(float(card.option(f"-gpgpu_num_{unit}_units", "1").split()[0]))
    return out


def _measured(
    rows: list[Measurement],
) -> tuple[dict[str, float], dict[str, Measurement], dict[str, str]]:
    """(valid values by name, their rows, skipped name -> why)."""
    values: dict[str, float] = {}
    by_name: dict[str, Measurement] = {}
    skipped: dict[str, str] = {}
    inputs = {n for k in KNOBS for n in k.inputs}
    for m in rows:
        if m.name in EXCLUDED:
            skipped[m.name] = EXCLUDED[m.name]
            continue
        if not m.valid or m.value is None or not math.isfinite(float(m.value)):
            if m.name in inputs:
                skipped[m.name] = f"invalid in the file ({m.note or 'no value'})"
            continue
        values[m.name] = float(m.value)
        by_name[m.name] = m
    return values, by_name, skipped


def choose_base(
    facts: dict[str, Any], base: str | os.PathLike[str] | None, build: Any
) -> tuple[CardConfig, Choice]:
    """The base card: ``base`` when given, else the closest of :data:`BASE_CARDS`."""
    if base is not None:
        card = card_config(base, build)
        choice = Choice(card.name, "chosen with --base", [])
        device = device_key(facts) if facts.get("compute_capability") else None
        if device is not None:
            f = card_device_facts(card)
            key = CardKey(card.name, f["compute_capability"], f.get("memory_type"),
                           f.get("sm_count"))
            choice = dataclasses.replace(choose(device, [key]), reason="chosen with --base")
        return card, choice
    device = device_key(facts)
    cards = [card_config(name, build) for name in BASE_CARDS]
    keys = []
    for card in cards:
        f = card_device_facts(card)
        keys.append(CardKey(card.name, f["compute_capability"], f.get("memory_type"),
                                f.get("sm_count")))
    choice = choose(device, keys)
    return next(c for c in cards if c.name == choice.name), choice


def _no_l2_bank(l2_bytes: int, base: CardConfig) -> str:
    """Why the L2 fits no bank geometry (at the base's own channel count)."""
    try:
        l2_bank(l2_bytes, int(float(base.option("-gpgpu_n_mem", "1").split()[0])), base)
    except HilsimError as e:
        return str(e)
    return "no channel count holds it exactly or within the size tolerance"


def _first_channels(facts: Mapping[str, Any], base: CardConfig, domain: tuple[int, ...]) -> int:
    """Channels before the loop: the device's bus width over the base's channel width
    when that is a valid count, else the base's count (nearest valid)."""
    per = float(base.option("-gpgpu_dram_buswidth", "4").split()[0]) * float(
        base.option("-gpgpu_n_mem_per_ctrlr", "1").split()[0]) * 8
    bus = facts.get("memory_bus_width_bits")
    want = float(bus) / per if bus else float(base.option("-gpgpu_n_mem"))
    return min(domain, key=lambda n: (abs(n - want), n))


def _searched(
    measured: Mapping[str, float],
    by_name: Mapping[str, Measurement],
    skipped: dict[str, str],
    channels: tuple[int, ...],
    clocks: ClockDomains,
    only: Sequence[str] | None,
) -> list[Knob]:
    """The knobs this file's measurements can set, with the domains of the candidate
    (channel counts that hold the device's L2, L2 clocks at :data:`L2_CLOCK_RATIOS` of
    the core clock); ``only``: the keys to keep."""
    knobs = []
    for knob in KNOBS:
        if not applicable(knob, measured):
            continue
        if knob.slot is Slot.CHANNELS:
            knob = dataclasses.replace(knob, domain=channels)
        elif knob.slot is Slot.L2_CLOCK:
            ratios = sorted({*L2_CLOCK_RATIOS, clocks.l2 / clocks.core})
            mhz = tuple(sorted({int(round(clocks.core * r)) for r in ratios}))
            knob = dataclasses.replace(knob, lo=mhz[0], hi=mhz[-1], domain=mhz)
        knobs.append(knob)
    if only is not None:
        unknown = set(only) - {k.key for k in KNOBS}
        if unknown:
            raise HilsimError(f"tune --on-simulator: unknown knob {', '.join(sorted(unknown))}")
        knobs = [k for k in knobs if k.key in only]
    return knobs


def _start(
    knob: Knob, measured: Mapping[str, float], ctx: SearchContext, s: Structure,
    structure: CardConfig, skipped: dict[str, str],
) -> KnobState | None:
    """The knob's search from its first guess; None (and why, in ``skipped``) when its
    target is outside the knob's range."""
    target = knob.target(measured, ctx)
    if knob.target_range is not None and not (
        knob.target_range[0] <= target <= knob.target_range[1]
    ):
        skipped[knob.inputs[0]] = knob.out_of_range.format(target=target,
                                                            range=knob.target_range)
        return None
    if knob.slot is Slot.CHANNELS:
        first = s.first_channels
    elif knob.slot is Slot.L2_CLOCK:
        first = int(round(s.clocks.l2))
    else:
        first = knob.first_guess(measured, ctx)
    search = IntSearch(
        target=target, first_guess=first, lo=knob.lo, hi=knob.hi,
        slope_prior=knob.slope_prior, domain=knob.domain,
        tolerance=max(1e-9 * abs(target), knob.tolerance_rel * abs(target)),
        proportional=knob.proportional,
    )
    return KnobState(knob, target, search, base_value(structure, knob))


def _note_unused(states: list[KnobState], measured: Mapping[str, float],
                 skipped: dict[str, str]) -> None:
    """Why a knob's measurement is missing, and which measurements set nothing."""
    for knob in KNOBS:
        for name in knob.inputs:
            if knob.missing_note and name not in measured:
                skipped.setdefault(name, knob.missing_note)
    used = {n for st in states for n in st.knob.inputs} | {mn.SM_CLOCK_MHZ}  # the core clock
    for name in measured:
        if name not in used:
            skipped.setdefault(name, "measured, not a target: no option is set from it here")


def prepare(
    measured_path: str | os.PathLike[str],
    *,
    base: str | os.PathLike[str] | None = None,
    build: Any = None,
    workers: int | None = None,
    say: Callable[[str], None],
    only: Sequence[str] | None = None,
    device_facts: Mapping[str, Any] | None = None,
) -> Search:
    """Read the file, choose the base card, and start every knob's search
    (:func:`tune_on_simulator` has the arguments)."""
    started, cpu0 = time.monotonic(), cpu_seconds()
    rows, raw_facts = read_microbench_json(measured_path)
    check_device_facts(raw_facts, f"{measured_path}: device")
    for i, row in enumerate(rows):
        if row.valid and row.value is not None and row.name not in EXCLUDED:
            check_measurement_value(row, f"{measured_path}: measurements[{i}] ({row.name})")
    if device_facts:
        check_device_facts(device_facts, "device facts")
    facts = canonical_facts({**raw_facts, **(device_facts or {})})
    measured, by_name, skipped = _measured(rows)
    build = build or find_build()
    if build is None:
        raise HilsimError("tune --on-simulator: no GPGPU-Sim build found (run `hilsim gpgpusim "
                          "setup`)")
    base_card, choice = choose_base(facts, base, build)
    say(f"base card {base_card.name}: {choice.reason}")
    for line in choice.mismatches:
        say(f"warning: {line}")
    clocks, clock_src = clock_domains(base_card, facts, measured)
    device = device_settings(base_card, facts, measured)
    structure = base_card.with_options({s.option: s.value for s in device})
    ctx = SearchContext(clocks.core, _units(structure))
    channels = valid_channel_counts(facts.get("l2_cache_bytes"), structure)
    if not channels:
        raise HilsimError(
            f"device L2 of {facts.get('l2_cache_bytes')} B fits the base card "
            f"{base_card.name}'s L2 banks over no channel count: "
            f"{_no_l2_bank(int(facts['l2_cache_bytes']), structure)}"
        )
    s = Structure(base_card, device, clocks, clock_src, facts,
                  _first_channels(facts, structure, channels))
    states = []
    for knob in _searched(measured, by_name, skipped, channels, clocks, only):
        st = _start(knob, measured, ctx, s, structure, skipped)
        if st is not None:
            states.append(st)
    _note_unused(states, measured, skipped)
    runner = CandidateRunner(build, workers or max(1, os.cpu_count() or 1),
                             MemorySlice(1, 2, 2, 1))
    search = Search(str(measured_path), s, choice, measured, by_name, skipped, ctx, states,
                    runner, started, cpu0)
    runner.memory_slice = search.memory_slice(  # per round below
        s.first_channels, _per_cluster(structure))
    return search


def _per_cluster(card: CardConfig) -> int:
    return int(float(card.option("-gpgpu_n_cores_per_cluster", "1").split()[0]))


# --- one round ----------------------------------------------------------------------


def _proposal(
    st: KnobState, by_key: Mapping[str, KnobState], previous: Mapping[str, int]
) -> int:
    """The value to simulate next: the search's, or the value it last had while a knob
    it waits for is unsettled (its first guess before any), or the base card's when
    the knob is frozen."""
    if st.frozen:
        return st.value
    waiting = [by_key[k] for k in st.knob.waits_for if k in by_key]
    if any(not (w.frozen or w.search.settled) for w in waiting):
        return previous.get(st.knob.key, st.search.first_guess)
    return st.search.propose()


def _needs_run(
    st: KnobState,
    options: Mapping[str, str],
    last_run: Mapping[str, Mapping[str, str]],
    by_key: Mapping[str, KnobState],
) -> bool:
    """An evaluator runs unless every knob it serves is settled and it already ran on a
    candidate that differs from this one only in options its knobs do not depend on
    (other knobs' entries of the same list included)."""
    before = last_run.get(st.knob.evaluator)
    if before is None:
        return True
    if not (st.frozen or st.search.settled):
        return True
    relevant = {st.knob.option, *SHARED_OPTIONS}
    relevant |= {by_key[k].knob.option for k in st.knob.depends_on if k in by_key}
    return any(before.get(o) != options.get(o) for o in relevant)


def _check_insensitive(st: KnobState) -> None:
    """A knob whose measurement does not move with the option (two values 10% apart give
    under 1% difference while the target is missed) keeps the base card's value."""
    h = st.search.history
    if not st.knob.insensitive_note or len(h) < 2 or st.search.settled:
        return
    xs = sorted(h)
    lo, hi = xs[0], xs[-1]
    if hi >= 1.1 * lo and abs(h[hi] - h[lo]) < 0.01 * abs(h[lo]):
        st.frozen = True
        st.note = st.knob.insensitive_note.format(lo=lo, lo_q=h[lo], hi=hi, hi_q=h[hi],
                                                  target=st.target)


def _propose(s: Search) -> tuple[dict[str, int], set[str]]:
    """The round's values (no interval above its latency) and the knobs that moved; the
    earlier points of a knob whose dependency moved are dropped."""
    by_key = s.by_key
    interval_within_latency(s.states, by_key, s.previous)
    proposals = {st.knob.key: _proposal(st, by_key, s.previous) for st in s.states}
    cap_intervals(s.states, proposals)
    changed = {k for k, v in proposals.items() if s.previous.get(k, v) != v}
    for st in s.states:  # a dependency moved: this knob's earlier points are stale
        if changed & set(st.knob.depends_on) and st.search.history:
            st.search.history.clear()
            st.search.first_guess = proposals[st.knob.key]
    return proposals, changed


@dataclass
class _Jobs:
    """A round's candidates: the round's own card (``options``, its ``evaluators``),
    intervals beside it (``extra``: their values by knob) and latency/interval pairs one
    step lower (``joints``: as :func:`joint_candidates` gives them, ``joint_options``
    each pair's card)."""

    options: dict[str, str]
    evaluators: list[str]
    extra: list[dict[str, int]]
    joints: list[tuple[str, str, list[tuple[int, int]]]]
    joint_options: list[dict[str, str]]
    cards: list[tuple[list[str], CardConfig]]


def _jobs(s: Search, proposals: dict[str, int], changed: set[str]) -> _Jobs:
    by_key = s.by_key
    settings, _entries = assemble(s.structure, s.states, proposals)
    options = options_of(settings)
    card = s.structure.base.with_options(options)
    s.runner.memory_slice = s.memory_slice(
        int(options.get("-gpgpu_n_mem") or s.structure.first_channels), _per_cluster(card))
    evaluators = sorted({st.knob.evaluator for st in s.states
                         if _needs_run(st, options, s.last_run, by_key)})
    cards = [(evaluators, card)]
    # intervals next to their latency: the neighbours simulated in the same round
    extras = extra_candidates(s.states, by_key, proposals, changed)
    extra = []
    for j in range(max((len(v) for v in extras.values()), default=0)):
        values = {k: v[j] for k, v in extras.items() if j < len(v)}
        cards.append((sorted({by_key[k].knob.evaluator for k in values}),
                      candidate(s.structure, s.states, {**proposals, **values})))
        extra.append(values)
    # a latency and its interval pinned at each other's bound: pairs one step lower
    joints = joint_candidates(s.states, by_key, changed, set(extras), s.tried_joint)
    joint_options = []
    for lat_key, ini_key, pairs in joints:
        for pair in pairs:
            s.tried_joint.add((ini_key, *pair))
            props = {**proposals, lat_key: pair[0], ini_key: pair[1]}
            joint_options.append(options_of(assemble(s.structure, s.states, props)[0]))
            cards.append((sorted({by_key[lat_key].knob.evaluator,
                                  by_key[ini_key].knob.evaluator}),
                          s.structure.base.with_options(joint_options[-1])))
    return _Jobs(options, evaluators, extra, joints, joint_options, cards)


def _record(s: Search, proposals: dict[str, int], evaluators: list[str],
            sim: Mapping[str, float]) -> None:
    """Each knob's simulated quantity at its proposal (the round's own card)."""
    for st in s.states:
        if st.knob.evaluator not in evaluators or not all(n in sim for n in st.knob.inputs):
            continue
        q = st.knob.target(sim, s.ctx)
        x = proposals[st.knob.key]
        if st.knob.slope_from_first_point and not st.search.history and x:
            st.search.slope_prior = q / x
        st.search.record(x, q)
        _check_insensitive(st)


def _take_joints(s: Search, jobs: _Jobs, joint_sim: Sequence[dict[str, float]],
                 say: Callable[[str], None]) -> None:
    """The joint step's pairs taken (the candidate from here on)."""
    by_key = s.by_key
    at = 0
    for lat_key, ini_key, pairs in jobs.joints:
        j = joint_step(by_key[lat_key], by_key[ini_key], pairs,
                       joint_sim[at:at + len(pairs)], s.ctx, say)
        if j is not None:  # the pair taken is the candidate from here on
            s.previous.update({lat_key: pairs[j][0], ini_key: pairs[j][1]})
            s.final_sim.update(joint_sim[at + j])
            for ev in jobs.cards[1 + len(jobs.extra) + at + j][0]:
                s.last_run[ev] = jobs.joint_options[at + j]
        at += len(pairs)


def one_round(s: Search, index: int, say: Callable[[str], None]) -> bool:
    """Simulate the round's candidates and record what they measured; True when every
    knob is settled, none moved and no extra candidate is pending."""
    proposals, changed = _propose(s)
    jobs = _jobs(s, proposals, changed)
    if s.runner.memory_slice != s.slice_said and any(
        EVALUATORS[ev].memory_slice for evs, _card in jobs.cards for ev in evs
    ):
        s.slice_said = s.runner.memory_slice
        say(s.slice_said.line())
    t0, n0 = time.monotonic(), len(s.runner.runs)
    sim, *extra_sim = s.runner.evaluate_many(jobs.cards)
    extra_sim, joint_sim = extra_sim[:len(jobs.extra)], extra_sim[len(jobs.extra):]
    for ev in jobs.evaluators:
        s.last_run[ev] = jobs.options
    by_key = s.by_key
    for values_by_key, values in zip(jobs.extra, extra_sim, strict=True):
        for key, x in values_by_key.items():
            st = by_key[key]
            if all(n in values for n in st.knob.inputs):
                st.search.record(x, st.knob.target(values, s.ctx))
    s.rounds.append(Round(index, proposals, sim, len(s.runner.runs) - n0,
                          round(time.monotonic() - t0, 1)))
    s.final_sim.update(sim)
    _record(s, proposals, jobs.evaluators, sim)
    s.previous = dict(proposals)
    _take_joints(s, jobs, joint_sim, say)
    unsettled = [st.knob.key for st in s.states if not (st.frozen or st.search.settled)]
    moved = [st.knob.key for st in s.states
             if _proposal(st, by_key, s.previous) != proposals[st.knob.key]]
    say(f"round {index}: {s.rounds[-1].runs} simulator runs ({', '.join(jobs.evaluators)}) in "
        f"{s.rounds[-1].wall_s:g} s; "
        + (f"unsettled: {', '.join(unsettled)}" if unsettled else "every option settled"))
    pending = extra_candidates(s.states, by_key, s.previous, set()) or joint_candidates(
        s.states, by_key, set(), set(), s.tried_joint)
    return not unsettled and not moved and not pending


# --- finish -------------------------------------------------------------------------


def whole_card_check(s: Search, say: Callable[[str], None]) -> None:
    """The settled card on every SM and channel (:mod:`~hilsim.simmodel.tuner.cardcheck`):
    its streaming read against its memory slice, where the channel count was searched;
    its L2 bandwidth against a whole GPU's, where the L2 clock was searched from one."""
    searched = {st.knob.slot for st in s.states if not st.frozen}
    tuned = candidate(s.structure, s.states, {st.knob.key: st.value for st in s.states})
    l2 = s.by_name.get(mn.L2_BANDWIDTH)
    if Slot.L2_CLOCK in searched and l2 is not None and not l2.params.get("sms_simulated"):
        say("whole card: the L2 bandwidth kernel on every SM and channel ...")
        try:
            l2c = l2_check(tuned, s.runner.build, float(l2.value), runs=s.runner.runs)
            s.whole_card_l2 = l2c.as_dict()
        except HilsimError as exc:
            s.whole_card_l2 = _check_not_run("L2 bandwidth", exc)
        say(s.whole_card_l2["line"])
    if Slot.CHANNELS not in searched:
        return
    m = s.by_name.get(mn.DRAM_READ_BANDWIDTH)
    say("whole card: streaming read on every SM and channel (the tuned card's partition "
        "indexing) and on its slice ...")
    try:
        check = streaming_check(
            tuned, s.memory_slice(int(float(tuned.option("-gpgpu_n_mem"))),
                                  _per_cluster(tuned)),
            s.runner.build, measured_gbps=None if m is None else float(m.value),
            measured_whole_gpu=m is not None and not m.params.get("sms_simulated"),
            runs=s.runner.runs)
        s.whole_card_streaming = check.as_dict()
    except HilsimError as exc:
        s.whole_card_streaming = _check_not_run("streaming read", exc)
    say(s.whole_card_streaming["line"])


def _check_not_run(what: str, exc: HilsimError) -> dict[str, Any]:
    """A whole-card check whose simulation failed: said, and the tuned card still written
    (the check only reports on the card; it sets nothing)."""
    return {"error": str(exc),
            "line": f"whole card: the {what} check could not run, the card is written "
                    f"without it: {exc}"}


def finish(s: Search, say: Callable[[str], None]) -> LoopResult:
    """Each knob's settled value (the unreachable ones said why) and the tuned card's
    settings."""
    for st in s.states:
        if st.search.unreachable and not st.frozen:
            st.note = st.search.unreachable
            if st.search.lo > st.knob.lo and st.search.best() == st.search.lo:
                st.note += ("; the bound is the same entry's initiation interval (an "
                            "interval above its latency crashes GPGPU-Sim)")
            if st.search.hi < st.knob.hi and st.search.best() == st.search.hi:
                st.note += ("; the bound is the same entry's tuned latency (an interval "
                            "above its latency crashes GPGPU-Sim), not the simulator's")
            trial = (s.port_trial or {}).get("chains", {}).get(st.knob.key)
            if trial is not None and st.note:
                ports = s.port_trial["taken"] or s.port_trial["base"]
                most = str(s.port_trial["trials"][-1])
                st.note += (f"; at {ports} register-file ports "
                            f"(-gpgpu_reg_file_port_throughput; {most} give "
                            f"{trial['chain_by_ports'].get(most, float('nan')):.4g} at "
                            f"latency {trial['option_value']}: more ports do not lower it)")
            say(f"unreachable: {st.knob.option}"
                f"{f' entry {st.knob.entry}' if st.knob.entry is not None else ''} "
                f"({', '.join(st.knob.inputs)}): {st.note}")
    settings, entries = assemble(s.structure, s.states,
                                 {st.knob.key: st.value for st in s.states})
    return LoopResult(
        s.measured_path, s.structure.base, s.choice, dict(s.structure.facts), s.measured,
        s.states, settings, s.rounds, s.runner.runs, s.skipped, s.notes, s.final_sim,
        cpu_seconds() - s.cpu0, time.monotonic() - s.started, s.runner.workers,
        s.runner.memory_slice, s.ctx, entries, s.port_trial, s.whole_card_streaming,
        s.whole_card_l2,
    )


def tune_on_simulator(
    measured_path: str | os.PathLike[str],
    *,
    base: str | os.PathLike[str] | None = None,
    build: Any = None,
    workers: int | None = None,
    max_rounds: int = 8,
    say: Callable[[str], None] | None = None,
    only: Sequence[str] | None = None,
    device_facts: Mapping[str, Any] | None = None,
    card_check: bool = False,
) -> LoopResult:
    """Tune a card from ``MEASURED.json`` by simulating candidates (module docstring).

    ``only``: the knob keys to tune (:data:`~hilsim.simmodel.tuner.knobs.KNOBS`); the
    others keep the base card's values (the tests' bounded runs). ``device_facts`` (an
    ``agent probe`` file's) win over the file's device block. ``card_check``: once the
    channel count or the L2 clock is tuned, run the tuned card whole
    (:func:`whole_card_check`).
    """
    say = say or (lambda _text: None)
    s = prepare(measured_path, base=base, build=build, workers=workers, say=say, only=only,
                device_facts=device_facts)
    index = 0
    for phase in range(2):  # the second: after the register-file ports changed
        for _ in range(max_rounds + 1):
            index += 1
            if one_round(s, index - 1, say):
                break
        else:
            s.notes.append(f"stopped after {max_rounds + 1} rounds with unsettled options: "
                           "the report's simulated values are the last round's")
            break
        if phase or not port_step(s, say):
            break
    if card_check:
        whole_card_check(s, say)
    return finish(s, say)
