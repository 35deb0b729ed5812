"""Simulator-in-the-loop tuning: options set by simulating candidates until the simulated
microbenchmarks meet the measured ones (``hilsim tune MEASURED.json --on-simulator``).

Accel-Sim (Khairy et al., ISCA 2020), Section II-C: microbenchmarks measure a card and a
tuner turns the numbers into a GPGPU-Sim configuration; Section IV: the configuration is
then correlated against the card. Here the correlation is the tuner: the same
microbenchmark kernels (:data:`~hilsim.simmodel.tuner.knobs.EVALUATORS`, the
suite's families over :class:`~hilsim.simmodel.gpgpusim.simdevice.GpgpusimDevice`) run on
the candidate card, each option entry moves by a secant step on its own measured
quantity (:class:`~hilsim.simmodel.tuner.intsolve.IntSearch`), and a round is repeated
until every entry is settled: the nearest integer to its target, or a bound the
simulator cannot pass (its pipeline floor), which the report states with the closest
value. No pipeline-offset map is assumed, so the card's own clocks, channels and
pipeline are in every candidate.

What is read: the measurements and device facts of ``MEASURED.json`` (never a card
config: the measured card's config is not opened) and the base card's structure
(:mod:`~hilsim.simmodel.tuner.basecard`). Each round's programs run in parallel
(threads, each driving one simulator process; their CPU time is counted from the child
processes). The slices are the suite's: one SM for latencies, the throughput slice for
per-SM rates, one memory channel for L2 and DRAM bandwidth; for a measurement of a whole
GPU the memory slice carries the card's SMs per channel, so the slice is limited where
the GPU is. Kernels whose timed loops touch no global memory (register chains, shared
memory, launch: :data:`~hilsim.simmodel.tuner.knobs.ONE_CHANNEL_EVALUATORS`) run
on one memory channel, the same values for a fraction of the simulator's time; the
pointer chase keeps every channel (its DRAM latency depends on them).
"""

from __future__ import annotations

import dataclasses
import math
import os
import resource
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from hilsim.simmodel.gpgpusim import simhost
from hilsim.simmodel.gpgpusim.build import find_build
from hilsim.simmodel.gpgpusim.cards import CardConfig, card_config
from hilsim.simmodel.gpgpusim.simdevice import GpgpusimDevice, card_device_facts
from hilsim.simmodel.tuner import knobs as tuneknobs
from hilsim.simmodel.tuner.basecard import (
    BASE_CARDS,
    Choice,
    Profile,
    choose,
    device_profile,
)
from hilsim.simmodel.tuner.card import (
    Setting,
    canonical_facts,
    clock_domains,
    device_settings,
    dl2_value,
    intervals_within_latencies,
    list_entries,
    list_rows,
    partition_indexing,
    pipeline_depths,
    valid_channel_counts,
)
from hilsim.simmodel.tuner.intsolve import IntSearch
from hilsim.simmodel.tuner.knobs import (
    EVALUATORS,
    KNOBS,
    LAUNCH_CYCLES_RANGE,
    MEMORY_EVALUATORS,
    ONE_CHANNEL_EVALUATORS,
    Context,
    Knob,
    applicable,
)

from hilsim.core import measurement_names as mn
from hilsim.core.errors import HilsimError
from hilsim.core.measurement import Measurement, read_microbench_json

#: measurements never used as targets, and why
EXCLUDED: dict[str, str] = {
    "dram_write_bandwidth": "not a tuner input (in files written before the suite timed "
    "grid_write, a known-wrong figure: the copy kernel was timed)",
}
#: the program (source module) each evaluator runs
MODULES: dict[str, tuple[str, ...]] = {
    "chase": ("latency.chase",),
    "shared": ("latency.shared_chase",),
    "launch": ("latency.chase",),
    "shared_bw": ("bandwidth.onchip",),
    "l2_bw": ("bandwidth.grid",),
    "dram_bw": ("bandwidth.grid",),
}
CHANNELS = Knob(
    "mem_channels", "-gpgpu_n_mem", None, (mn.DRAM_READ_BANDWIDTH,), "dram_bw",
    lambda m, _c: float(m[mn.DRAM_READ_BANDWIDTH]),
    "DRAM read bandwidth: one channel x channels (bandwidth vs channels)",
)
L2_CLOCK = Knob(
    "l2_clock", "-gpgpu_clock_domains", 2, (mn.L2_BANDWIDTH,), "l2_bw",
    lambda m, _c: float(m[mn.L2_BANDWIDTH]),
    "L2 read bandwidth (L2 and interconnect clocks, at the base card's ratio to each other)",
    tolerance_rel=0.03,
    # the slice's L2 bandwidth is bound by its requests in flight (Little's law): it moves
    # once the L1, L2 and DRAM latencies and the channels are settled
    depends_on=("mem_channels",),
    waits_for=("mem_channels", "l1_latency", "l2_rop_latency", "dram_latency"),
)
#: the memory side of a one-channel run (linear partition indexing: one channel has no
#: hash to spread over)
ONE_CHANNEL = {"-gpgpu_n_mem": "1", "-gpgpu_memory_partition_indexing": "0"}
#: L2 clock / core clock ratios the L2 clock is searched over (finer steps put the L2
#: and core clock edges in beat patterns that make the bandwidth jump non-monotonically)
L2_CLOCK_RATIOS = (0.5, 0.625, 0.75, 0.875, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 4.0)


def _module_of(evaluator: str) -> tuple[str, ...]:
    if evaluator in MODULES:
        return MODULES[evaluator]
    if evaluator.startswith(("lat.", "tput.")):
        return ("compute.arith",)
    return ("compute.ops",)


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
    memory_slice_sms: int
    context: Context
    entry_sources: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def unreachable(self) -> list[KnobState]:
        """Knobs whose target the simulator cannot reach (at a bound)."""
        return [k for k in self.knobs if k.search.unreachable and not k.frozen]


def _units(card: CardConfig) -> dict[str, int]:
    out = {}
    for unit in ("sp", "dp", "int", "sfu"):
        out[unit] = int(float(card.option(f"-gpgpu_num_{unit}_units", "1").split()[0]))
    return out


def _measured(
    rows: list[Measurement],
) -> tuple[dict[str, float], dict[str, Measurement], dict[str, str]]:
    values: dict[str, float] = {}
    by_name: dict[str, Measurement] = {}
    skipped: dict[str, str] = {}
    for m in rows:
        if m.name in EXCLUDED:
            skipped[m.name] = EXCLUDED[m.name]
            continue
        if not m.valid or m.value is None or not math.isfinite(float(m.value)):
            if m.name in {n for k in KNOBS for n in k.inputs}:
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
        device = device_profile(facts) if facts.get("compute_capability") else None
        if device is not None:
            f = card_device_facts(card)
            prof = Profile(card.name, f["compute_capability"], f.get("memory_type"),
                           f.get("sm_count"))
            choice = dataclasses.replace(choose(device, [prof]), reason="chosen with --base")
        return card, choice
    device = device_profile(facts)
    cards = [card_config(name, build) for name in BASE_CARDS]
    profiles = []
    for card in cards:
        f = card_device_facts(card)
        profiles.append(Profile(card.name, f["compute_capability"], f.get("memory_type"),
                                f.get("sm_count")))
    choice = choose(device, profiles)
    return next(c for c in cards if c.name == choice.name), choice


def _first_channels(facts: Mapping[str, Any], base: CardConfig, domain: tuple[int, ...]) -> int:
    """Channels before the loop: the device's bus width over the base's channel width
    when that is a valid count, else the base's count (nearest valid)."""
    per = float(base.option("-gpgpu_dram_buswidth", "4").split()[0]) * float(
        base.option("-gpgpu_n_mem_per_ctrlr", "1").split()[0]) * 8
    bus = facts.get("memory_bus_width_bits")
    want = float(bus) / per if bus else float(base.option("-gpgpu_n_mem"))
    return min(domain, key=lambda n: (abs(n - want), n))


def _memory_slice_sms(by_name: Mapping[str, Measurement], facts: Mapping[str, Any],
                      channels: int) -> int:
    """SMs of the memory slice: the measurement's own simulated slice when it was taken
    on one, else the candidate's SMs per channel (rounded, at least 1: a whole GPU's
    bandwidth is bound where its SMs per channel bind it)."""
    for name in (mn.DRAM_READ_BANDWIDTH, mn.L2_BANDWIDTH):
        m = by_name.get(name)
        if m is not None and m.params.get("sms_simulated"):
            return int(m.params["sms_simulated"])
    sms = int(facts.get("sm_count") or 2)
    return max(1, round(sms / max(1, channels)))


def assemble(
    base: CardConfig,
    device: list[Setting],
    clocks: Any,
    clock_src: dict[str, str],
    states: list[KnobState],
    proposals: Mapping[str, int],
    facts: Mapping[str, Any],
    first_channels: int,
) -> tuple[list[Setting], dict[str, list[dict[str, Any]]]]:
    """Every setting of a candidate: device facts, the knobs' proposals (list options
    entry by entry, the rest of each list the base's), and what follows from them."""
    out = list(device)
    entries: dict[str, list[dict[str, Any]]] = {}
    by_option: dict[str, list[KnobState]] = {}
    for st in states:
        by_option.setdefault(st.knob.option, []).append(st)
    # list options, entry by entry
    lists: dict[str, list[dict[str, Any]]] = {}
    for option, sts in by_option.items():
        if not option.startswith("-ptx_opcode_"):
            continue
        lists[option] = list_rows(base, option)
        for st in sts:
            i = st.knob.entry if st.knob.entry is not None else 0
            x = proposals.get(st.knob.key, st.value) if not st.frozen else st.value
            lists[option][i].update(value=str(x), kind="measured",
                                    measurement=", ".join(st.knob.inputs))
    pipeline_depths(base, lists)
    intervals_within_latencies(base, lists)
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
    # scalar knobs
    for st in states:
        if st.knob.option.startswith("-ptx_opcode_") or st.knob.key in ("mem_channels",
                                                                          "l2_clock"):
            continue
        x = proposals.get(st.knob.key, st.value) if not st.frozen else st.value
        kind = "base" if st.frozen else "measured"
        out.append(Setting(st.knob.option, str(x), kind, st.knob.what))
    # clock domains
    l2 = next((s for s in states if s.knob.key == "l2_clock"), None)
    parts = dict(clocks.__dict__)
    src = dict(clock_src)
    if l2 is not None and not l2.frozen:
        x = proposals.get("l2_clock", l2.value)
        ratio = clocks.icnt / clocks.l2
        parts["l2"], parts["icnt"] = float(x), float(x) * ratio
        src["l2"] = "measured in the loop (L2 bandwidth)"
        src["icnt"] = f"L2 clock x the base card's interconnect:L2 ratio {ratio:g}"
    cd = type(clocks)(**parts)
    out.append(Setting("-gpgpu_clock_domains", cd.text(), "device" if l2 is None or l2.frozen
                       else "measured",
                       "; ".join(f"{k} {v}" for k, v in src.items())))
    entries["-gpgpu_clock_domains"] = [
        {"entry": k, "value": f"{parts[k]:g}", "source": src[k]} for k in ("core", "icnt", "l2",
                                                                          "dram")
    ]
    # channels and the L2 banks over them
    ch = next((s for s in states if s.knob.key == "mem_channels"), None)
    n = proposals.get("mem_channels", ch.value) if ch is not None else first_channels
    n_kind = "measured" if ch is not None else (
        "device" if facts.get("memory_bus_width_bits") else "base")
    n_detail = (ch.knob.what if ch is not None else
                "device memory_bus_width_bits / the base card's channel width")
    if n_kind != "base" or str(n) != base.option("-gpgpu_n_mem"):
        out.append(Setting("-gpgpu_n_mem", str(n), n_kind, n_detail))
    if facts.get("l2_cache_bytes"):
        value, note = dl2_value(int(facts["l2_cache_bytes"]), int(n), base)
        out.append(Setting("-gpgpu_cache:dl2", value, "derived",
                           f"device l2_cache_bytes over the tuned channels: {note}"))
    idx, why = partition_indexing(int(n), base)
    if idx != base.option("-gpgpu_memory_partition_indexing", "0").split()[0]:
        out.append(Setting("-gpgpu_memory_partition_indexing", idx, "derived", why))
    return out, entries


class _Runner:
    """Runs evaluators on candidate cards in parallel and counts what ran."""

    def __init__(self, build: Any, workers: int, memory_slice_sms: int) -> None:
        self.build = build
        self.workers = workers
        self.memory_slice_sms = memory_slice_sms
        self.runs: list[dict[str, Any]] = []
        self.compiled: set[tuple[str, str]] = set()

    def _precompile(self, evaluators: list[str], card: CardConfig) -> None:
        arch = simhost.card_arch(card)
        for ev in evaluators:
            for module in _module_of(ev):
                if (module, arch) not in self.compiled:  # once, before any thread runs it
                    simhost.compiled_program(module, arch)
                    self.compiled.add((module, arch))

    def evaluate_many(
        self, jobs: Sequence[tuple[list[str], CardConfig]]
    ) -> list[dict[str, float]]:
        """Every (evaluators, card) job of a round in one pool: ``workers`` simulator
        processes at a time over all the jobs' programs."""
        if len(jobs) == 1:
            return [self.evaluate(*jobs[0])]
        for evs, card in jobs:
            self._precompile(evs, card)
        pairs = [(i, ev, card) for i, (evs, card) in enumerate(jobs) for ev in evs]
        results: list[dict[str, float]] = [{} for _ in jobs]
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            for i, values in pool.map(lambda p: (p[0], self.evaluate([p[1]], p[2])), pairs):
                results[i].update(values)
        return results

    def evaluate(self, evaluators: list[str], card: CardConfig) -> dict[str, float]:
        self._precompile(evaluators, card)

        def one(ev: str) -> tuple[str, list[Measurement], list[dict[str, Any]]]:
            sms = self.memory_slice_sms if ev in MEMORY_EVALUATORS else 2
            one = dict(ONE_CHANNEL) if ev in ONE_CHANNEL_EVALUATORS else {}
            device = GpgpusimDevice(card, build=self.build, throughput_sms=sms, overrides=one)
            fn = EVALUATORS[ev]
            try:
                out = fn(device)
            except HilsimError as exc:
                raise HilsimError(f"tune --on-simulator: {ev} on the candidate: {exc}") from None
            for r in device.runs:
                r["evaluator"] = ev
            return ev, out, device.runs

        values: dict[str, float] = {}
        with ThreadPoolExecutor(max_workers=max(1, min(self.workers, len(evaluators)))) as pool:
            for _ev, out, runs in pool.map(one, evaluators):
                self.runs.extend(runs)
                for m in out:
                    if m.valid and m.value is not None and math.isfinite(float(m.value)):
                        values[m.name] = float(m.value)
        return values


def _cpu_seconds() -> float:
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    me = resource.getrusage(resource.RUSAGE_SELF)
    return kids.ru_utime + kids.ru_stime + me.ru_utime + me.ru_stime


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
) -> LoopResult:
    """Tune a card from ``MEASURED.json`` by simulating candidates (module docstring).

    ``only``: the knob keys to tune (:data:`~hilsim.simmodel.tuner.knobs.KNOBS`,
    ``mem_channels``, ``l2_clock``); the others keep the base card's values (the tests'
    bounded runs). ``device_facts`` (an ``agent probe`` file's) win over the file's
    device block.
    """
    say = say or (lambda _text: None)
    started, cpu0 = time.monotonic(), _cpu_seconds()
    rows, raw_facts = read_microbench_json(measured_path)
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
    core_clock = clock_domains(base_card, facts, measured)
    clocks, clock_src = core_clock
    device = device_settings(base_card, facts, measured)
    structure = base_card.with_options({s.option: s.value for s in device})
    ctx = Context(clocks.core, _units(structure))
    notes: list[str] = []

    domain = valid_channel_counts(facts.get("l2_cache_bytes"), structure)
    if not domain:
        raise HilsimError(
            f"device L2 of {facts.get('l2_cache_bytes')} B does not divide into the base "
            f"card {base_card.name}'s L2 banks for any channel count"
        )
    first_channels = _first_channels(facts, structure, domain)
    slice_sms = _memory_slice_sms(by_name, facts, first_channels)  # per round below

    states: list[KnobState] = []
    knobs = [k for k in KNOBS if applicable(k, measured)]
    if applicable(CHANNELS, measured):
        knobs.append(dataclasses.replace(CHANNELS, domain=domain))
    l2m = by_name.get(mn.L2_BANDWIDTH)
    if l2m is not None and l2m.params.get("sms_simulated"):
        skipped[mn.L2_BANDWIDTH] = (
            f"measured on a simulated {l2m.params['sms_simulated']}-SM slice of one channel, "
            "where the SMs' requests in flight bound it (not the L2 clock: on SM90_H100's "
            "slice it is the same at L2 = 1x and 2x the core clock): the base card's "
            "L2 and interconnect clocks (as ratios to the core clock) kept"
        )
    elif applicable(L2_CLOCK, measured):
        ratios = sorted({*L2_CLOCK_RATIOS, clocks.l2 / clocks.core})
        mhz = tuple(sorted({int(round(clocks.core * r)) for r in ratios}))
        knobs.append(dataclasses.replace(L2_CLOCK, lo=mhz[0], hi=mhz[-1], domain=mhz))
    if only is not None:
        unknown = set(only) - {k.key for k in (*KNOBS, CHANNELS, L2_CLOCK)}
        if unknown:
            raise HilsimError(f"tune --on-simulator: unknown knob {', '.join(sorted(unknown))}")
        knobs = [k for k in knobs if k.key in only]
    for knob in knobs:
        target = knob.target(measured, ctx)
        if knob.key == "launch_latency" and not (
            LAUNCH_CYCLES_RANGE[0] <= target <= LAUNCH_CYCLES_RANGE[1]
        ):
            skipped[mn.LAUNCH_LATENCY_US] = (
                f"{target:.0f} cycles is outside {LAUNCH_CYCLES_RANGE} (a host round trip?): "
                "the base card's value kept"
            )
            continue
        first = knob.first_guess(measured, ctx)
        if knob.key == "mem_channels":
            first = first_channels
        elif knob.key == "l2_clock":
            first = int(round(clocks.l2))
        search = IntSearch(
            target=target, first_guess=first, lo=knob.lo, hi=knob.hi,
            slope_prior=knob.slope_prior, domain=knob.domain,
            tolerance=max(1e-9 * abs(target), knob.tolerance_rel * abs(target)),
            proportional=knob.key == "mem_channels",
        )
        base_value = _base_value(structure, knob)
        states.append(KnobState(knob, target, search, base_value))
    for name in tuneknobs.PROBE_KNOBS:
        if name not in measured:
            skipped.setdefault(name, "not in the measurements: the base card's entry kept")
    used = {n for st in states for n in st.knob.inputs} | {mn.SM_CLOCK_MHZ}  # the core clock
    for name in measured:
        if name not in used:
            skipped.setdefault(name, "measured, not a target: no option is set from it here")

    runner = _Runner(build, workers or max(1, os.cpu_count() or 1), slice_sms)
    rounds: list[Round] = []
    final_sim: dict[str, float] = {}
    last_run: dict[str, dict[str, str]] = {}  # evaluator -> the candidate it last ran on
    previous: dict[str, int] = {}
    by_key = {st.knob.key: st for st in states}
    tried_joint: set[tuple[str, int, int]] = set()  # (interval key, latency, interval)
    for r in range(max_rounds + 1):
        _interval_within_latency(states, by_key, previous)
        proposals = {st.knob.key: _proposal(st, by_key, previous) for st in states}
        for st in states:  # never an interval above its latency on a candidate
            lat_key = f"{st.knob.key[:-len('_initiation')]}_latency"
            if st.knob.key.endswith("_initiation") and lat_key in st.knob.depends_on and (
                lat_key in proposals and proposals[st.knob.key] > proposals[lat_key]
            ):
                proposals[st.knob.key] = proposals[lat_key]
        changed = {k for k, v in proposals.items() if previous.get(k, v) != v}
        for st in states:  # a dependency moved: this knob's earlier points are stale
            if changed & set(st.knob.depends_on) and st.search.history:
                st.search.history.clear()
                st.search.first_guess = proposals[st.knob.key]
        settings, _entries = assemble(base_card, device, clocks, clock_src, states, proposals,
                                      facts, first_channels)
        options = {s.option: s.value for s in settings}
        runner.memory_slice_sms = _memory_slice_sms(
            by_name, facts, int(options.get("-gpgpu_n_mem") or first_channels))
        card = base_card.with_options(options)
        evaluators = sorted({st.knob.evaluator for st in states
                             if _needs_run(st, options, last_run, by_key)})
        # intervals next to their latency: the neighbours simulated in the same round
        extras = _extra_candidates(states, by_key, proposals, changed)
        extra_jobs: list[tuple[list[str], CardConfig]] = []
        extra_props: list[dict[str, int]] = []
        for j in range(max((len(v) for v in extras.values()), default=0)):
            props = dict(proposals)
            props.update({k: v[j] for k, v in extras.items() if j < len(v)})
            extra_settings, _ = assemble(base_card, device, clocks, clock_src, states, props,
                                         facts, first_channels)
            extra_jobs.append((
                sorted({by_key[k].knob.evaluator for k, v in extras.items() if j < len(v)}),
                base_card.with_options({s.option: s.value for s in extra_settings}),
            ))
            extra_props.append({k: v[j] for k, v in extras.items() if j < len(v)})
        # a latency and its interval pinned at each other's bound: pairs one step lower
        joints = _joint_candidates(states, by_key, changed, set(extras), tried_joint)
        joint_jobs: list[tuple[list[str], CardConfig]] = []
        joint_opts: list[dict[str, str]] = []
        for lat_key, ini_key, pairs in joints:
            for pair in pairs:
                tried_joint.add((ini_key, *pair))
                props = {**proposals, lat_key: pair[0], ini_key: pair[1]}
                joint_settings, _ = assemble(base_card, device, clocks, clock_src, states,
                                             props, facts, first_channels)
                joint_opts.append({s.option: s.value for s in joint_settings})
                joint_jobs.append((
                    sorted({by_key[lat_key].knob.evaluator, by_key[ini_key].knob.evaluator}),
                    base_card.with_options(joint_opts[-1]),
                ))
        t0, n0 = time.monotonic(), len(runner.runs)
        sim, *extra_sim = runner.evaluate_many([(evaluators, card), *extra_jobs, *joint_jobs])
        extra_sim, joint_sim = extra_sim[:len(extra_jobs)], extra_sim[len(extra_jobs):]
        for ev in evaluators:
            last_run[ev] = options
        for props, values in zip(extra_props, extra_sim, strict=True):
            for key, x in props.items():
                st = by_key[key]
                if all(n in values for n in st.knob.inputs):
                    st.search.record(x, st.knob.quantity(values, ctx))
        rounds.append(Round(r, proposals, sim, len(runner.runs) - n0,
                            round(time.monotonic() - t0, 1)))
        final_sim.update(sim)
        for st in states:
            if st.knob.evaluator not in evaluators or not all(n in sim for n in st.knob.inputs):
                continue
            q = st.knob.quantity(sim, ctx)
            x = proposals[st.knob.key]
            if st.knob.key == "l2_clock" and not st.search.history and x:
                st.search.slope_prior = q / x  # bandwidth grows with the clock, at most
            st.search.record(x, q)
            _check_insensitive(st)
        previous = dict(proposals)
        at = 0
        for lat_key, ini_key, pairs in joints:
            j = _joint_step(by_key[lat_key], by_key[ini_key], pairs,
                            joint_sim[at:at + len(pairs)], ctx, say)
            if j is not None:  # the pair taken is the candidate from here on
                previous.update({lat_key: pairs[j][0], ini_key: pairs[j][1]})
                final_sim.update(joint_sim[at + j])
                for ev in joint_jobs[at + j][0]:
                    last_run[ev] = joint_opts[at + j]
            at += len(pairs)
        unsettled = [st.knob.key for st in states if not (st.frozen or st.search.settled)]
        moved = [st.knob.key for st in states
                 if _proposal(st, by_key, previous) != proposals[st.knob.key]]
        say(f"round {r}: {rounds[-1].runs} simulator runs ({', '.join(evaluators)}) in "
            f"{rounds[-1].wall_s:g} s; "
            + (f"unsettled: {', '.join(unsettled)}" if unsettled else "every option settled"))
        pending = _extra_candidates(states, by_key, previous, set()) or _joint_candidates(
            states, by_key, set(), set(), tried_joint)
        if not unsettled and not moved and not pending:
            break
    else:
        notes.append(f"stopped after {max_rounds + 1} rounds with unsettled options: the "
                     "report's simulated values are the last round's")
    for st in states:
        if st.search.unreachable and not st.frozen:
            st.note = st.search.unreachable
            if st.search.lo > st.knob.lo and st.search.best() == st.search.lo:
                st.note += ("; the bound is the same entry's initiation interval (an "
                            "interval above its latency crashes GPGPU-Sim)")
            if st.search.hi < st.knob.hi and st.search.best() == st.search.hi:
                st.note += ("; the bound is the same entry's tuned latency (an interval "
                            "above its latency crashes GPGPU-Sim), not the simulator's")
            say(f"unreachable: {st.knob.option}"
                f"{f' entry {st.knob.entry}' if st.knob.entry is not None else ''} "
                f"({', '.join(st.knob.inputs)}): {st.note}")
    settings, entries = assemble(base_card, device, clocks, clock_src, states,
                                 {st.knob.key: st.value for st in states}, facts,
                                 first_channels)
    return LoopResult(
        str(measured_path), base_card, choice, facts, measured, states, settings, rounds,
        runner.runs, skipped, notes, final_sim, _cpu_seconds() - cpu0,
        time.monotonic() - started, runner.workers, runner.memory_slice_sms, ctx, entries,
    )


def _interval_within_latency(
    states: list[KnobState], by_key: Mapping[str, KnobState], previous: Mapping[str, int]
) -> None:
    """Keep every candidate's initiation interval at or below its entry's latency:
    GPGPU-Sim crashes otherwise (measured: SIGSEGV, int MAD latency 5 with interval 6).
    The latency's search starts at the interval (a target below it is reported as
    unreachable at that bound) and the interval's ends at the latency; simulated points
    outside the new bounds are dropped. The latency's bound is the interval's best value
    so far when that is above the last one simulated: a trial interval below it (the
    search checking the neighbour under a rate slightly above the target) must not pull
    the latency, and with it the interval's own bound, down."""
    for st in states:
        lat = next((by_key[k] for k in st.knob.depends_on
                    if k in by_key and k.endswith("_latency")), None)
        if lat is None or not st.knob.key.endswith("_initiation"):
            continue
        ini_now = st.value if st.frozen else previous.get(st.knob.key, st.search.first_guess)
        if not st.frozen and st.search.best() is not None:
            # a trial below the interval's best does not lower the latency's bound (the
            # latency would follow it down and cap the interval there)
            ini_now = max(ini_now, st.search.best())
        if not lat.frozen:
            lat.search.lo = max(lat.knob.lo, ini_now)
        lat_now = lat.value if lat.frozen else previous.get(
            lat.knob.key, max(lat.search.lo, lat.search.first_guess))
        if not st.frozen:
            st.search.hi = max(st.knob.lo, min(st.knob.hi, lat_now))
        for s_ in (lat.search, st.search):
            for x in [x for x in s_.history if not s_.lo <= x <= s_.hi]:
                del s_.history[x]


#: an interval settled this close to its latency bound (or on a non-monotone history)
#: has its neighbours within this distance simulated, all in one round
NEAR_BOUND = 2


def _extra_candidates(
    states: list[KnobState],
    by_key: Mapping[str, KnobState],
    proposals: Mapping[str, int],
    changed: set[str],
) -> dict[str, list[int]]:
    """Initiation intervals to simulate beside the round's card, per knob.

    GPGPU-Sim's full-occupancy rate is not monotone in the interval next to the
    entry's latency (measured, RTX 2060 structure, fp32 MAD latency 7: interval 6 gives
    7.37 cycles per instruction per unit, interval 7 gives 7.20), so a secant or bracket
    result there can stop on the wrong side. When a search has settled without an exact
    match and its best value lies within :data:`NEAR_BOUND` of its upper bound (the
    latency: an interval above it crashes the simulator) or its history is not
    monotone, every untested value within :data:`NEAR_BOUND` of the best, inside the
    bounds, is simulated in this round; the search then keeps the value whose simulated
    rate is nearest the measured one (:meth:`IntSearch.best`). Only while the knobs it
    depends on are settled and unchanged this round (their points would be stale)."""
    out: dict[str, list[int]] = {}
    for st in states:
        s = st.search
        if st.frozen or not st.knob.key.endswith("_initiation") or not s.settled:
            continue
        deps = [by_key[k] for k in st.knob.depends_on if k in by_key]
        if any(k in changed for k in st.knob.depends_on) or any(
            not (d.frozen or d.search.settled) for d in deps
        ):
            continue
        b = s.best()
        if b is None or abs(s.history[b] - s.target) <= s.tolerance:
            continue
        xs = sorted(s.history)
        monotone = all(s.history[a] <= s.history[c] for a, c in zip(xs, xs[1:], strict=False))
        if b < s.hi - NEAR_BOUND and monotone:
            continue
        cands = [x for x in range(max(s.lo, b - NEAR_BOUND), min(s.hi, b + NEAR_BOUND) + 1)
                 if x not in s.history and x != proposals.get(st.knob.key)]
        if cands:
            out[st.knob.key] = cands
    return out


def _pinned_pairs(
    states: list[KnobState], by_key: Mapping[str, KnobState]
) -> list[tuple[KnobState, KnobState]]:
    """(latency, interval) knob pairs of one list entry, neither frozen."""
    out = []
    for st in states:
        lat = next((by_key[k] for k in st.knob.depends_on
                    if k in by_key and k.endswith("_latency")), None)
        if lat is not None and st.knob.key.endswith("_initiation") and not (
            st.frozen or lat.frozen
        ):
            out.append((lat, st))
    return out


def _joint_candidates(
    states: list[KnobState],
    by_key: Mapping[str, KnobState],
    changed: set[str],
    busy: set[str],
    tried: set[tuple[str, int, int]],
) -> list[tuple[str, str, list[tuple[int, int]]]]:
    """(latency key, interval key, [(latency, interval), ...]) to simulate in one round,
    for every entry whose latency and interval are pinned at each other's bound.

    An interval above its latency crashes GPGPU-Sim, so the latency's search is bounded
    below by the interval and the interval's above by the latency. A first-guess interval
    one above the card's (the measured rate floored: GPGPU-Sim's rate sits above the
    interval, and at the interval equal to its latency above the next one: on a drawn
    QV100-structure card, DP latency 6 / interval 6 simulate 7.855 cycles per DFMA per
    unit, 7 / 7 7.418) then holds the latency one above the card's, and at that latency
    no interval gives the rate: each search alone ends at the other's bound, both
    unmatched. Here the pair moves together: when the latency has settled at its lower
    bound, that bound is the interval (not the option's own floor), its chain is still
    above the target, and the interval has settled at that latency with no untested
    neighbour left (``busy``: intervals whose neighbours this round simulates), the
    latency one secant step lower (at least one below, at most to the option's floor)
    is simulated with every interval within :data:`NEAR_BOUND` below it, one card each,
    in the same round (:func:`_joint_step` takes a pair only when it is nearer on both
    targets). A latency wanting more than its interval is never pinned (nothing bounds
    a latency above), so there is no upward step."""
    out = []
    for lat, ini in _pinned_pairs(states, by_key):
        ls, is_ = lat.search, ini.search
        if not (ls.settled and is_.settled) or ini.knob.key in busy or (
            {lat.knob.key, ini.knob.key} | set(ini.knob.depends_on)) & changed:
            continue
        lb, ib = ls.best(), is_.best()
        if lb is None or ib is None or lb != ls.lo or ls.lo <= lat.knob.lo or ib != lb:
            continue
        if ls.history[lb] - ls.target <= ls.tolerance:  # the chain is not above the target
            continue
        step = (ls.target - ls.history[lb]) / ls.slope()
        new_lat = int(max(lat.knob.lo, min(lb - 1, math.floor(lb + step + 0.5))))
        pairs = [(new_lat, i) for i in range(new_lat, max(ini.knob.lo, new_lat - NEAR_BOUND) - 1,
                                             -1)
                 if (ini.knob.key, new_lat, i) not in tried]
        if pairs:
            out.append((lat.knob.key, ini.knob.key, pairs))
    return out


def _joint_step(
    lat: KnobState,
    ini: KnobState,
    pairs: list[tuple[int, int]],
    simulated: Sequence[Mapping[str, float]],
    ctx: Context,
    say: Callable[[str], None],
) -> int | None:
    """Take the simulated pair (index into ``pairs``) nearest the two targets when it is
    at least as near as the settled pair on both the chain and the rate, and nearer on
    one (ties: the smaller interval); the searches then go on from it (the latency's
    history keeps its points, the interval's restarts from the pair's latency). None:
    no pair is nearer on both; the settled pair stays."""
    ls, is_ = lat.search, ini.search
    lb, ib = ls.best(), is_.best()
    assert lb is not None and ib is not None
    now = (abs(ls.history[lb] - ls.target), abs(is_.history[ib] - is_.target))
    scored = []
    for j, values in enumerate(simulated):
        if not all(n in values for n in (*lat.knob.inputs, *ini.knob.inputs)):
            continue
        q_lat, q_ini = lat.knob.quantity(values, ctx), ini.knob.quantity(values, ctx)
        err = (abs(q_lat - ls.target), abs(q_ini - is_.target))
        scored.append((j, q_lat, q_ini, err))
    better = [s for s in scored if s[3][0] <= now[0] and s[3][1] <= now[1] and s[3] != now]
    what = (f"{lat.knob.key}/{ini.knob.key} {lb}/{ib} (chain {ls.history[lb]:.4g} for "
            f"{ls.target:.4g}, rate {is_.history[ib]:.4g} for {is_.target:.4g})")
    if not better:
        say(f"joint step: {what} kept: no pair of "
            + ", ".join(f"{a}/{b}" for a, b in pairs) + " is nearer on both")
        return None
    j, q_lat, q_ini, _ = min(better, key=lambda s: (s[3][0] + s[3][1], pairs[s[0]][1]))
    new_lat, new_ini = pairs[j]
    ls.record(new_lat, q_lat)
    ls.lo = max(lat.knob.lo, new_ini)
    is_.history.clear()  # its points were simulated at the old latency
    for (a, b), (_j, _ql, qi, _e) in zip((pairs[s[0]] for s in scored), scored, strict=True):
        if a == new_lat:
            is_.record(b, qi)
    is_.first_guess, is_.hi = new_ini, new_lat
    say(f"joint step: {what} -> {new_lat}/{new_ini} (chain {q_lat:.4g}, rate {q_ini:.4g})")
    return j


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
    relevant = {st.knob.option, "-gpgpu_clock_domains", "-gpgpu_n_mem", "-gpgpu_cache:dl2"}
    relevant |= {by_key[k].knob.option for k in st.knob.depends_on if k in by_key}
    return any(before.get(o) != options.get(o) for o in relevant)


def _check_insensitive(st: KnobState) -> None:
    """A knob whose measurement does not move with the option (two values 10% apart give
    under 1% difference while the target is missed) keeps the base card's value."""
    h = st.search.history
    if st.knob.key != "l2_clock" or len(h) < 2 or st.search.settled:
        return
    xs = sorted(h)
    lo, hi = xs[0], xs[-1]
    if hi >= 1.1 * lo and abs(h[hi] - h[lo]) < 0.01 * abs(h[lo]):
        st.frozen = True
        st.note = (
            f"the simulated L2 bandwidth does not move with the L2 clock on this slice "
            f"({h[lo]:.4g} at {lo} MHz, {h[hi]:.4g} at {hi} MHz; target {st.target:.4g}): "
            "the base card's ratio to the core clock kept"
        )


def _base_value(card: CardConfig, knob: Knob) -> str:
    if knob.key == "l2_clock":
        return f"{card.clock_domains_mhz[2]:g}"
    if knob.option.startswith("-ptx_opcode_"):
        vals = list_entries(card, knob.option)
        return vals[knob.entry if knob.entry is not None else 0]
    return card.option(knob.option, "").split()[0] if card.option(knob.option, "") else ""
