"""A latency and its initiation interval on one list entry, searched together.

GPGPU-Sim starts an instruction at pipeline stage ``latency - initiation_interval``
(``shader.cc``, ``pipelined_simd_unit::cycle``): an interval above its entry's latency
crashes the simulator (measured: SIGSEGV, int MAD latency 5 with interval 6). A knob
whose :attr:`~hilsim.simmodel.tuner.rule.Knob.interval_of` names a latency knob is such
an interval: the search keeps every candidate's interval at or below the latency
(:func:`interval_within_latency`), simulates the neighbours of an interval settled next
to its bound in the same round (:func:`extra_candidates`), and moves a pair pinned at
each other's bound together (:func:`joint_candidates`, :func:`joint_step`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from hilsim.simmodel.tuner.candidate import KnobState
from hilsim.simmodel.tuner.rule import SearchContext

#: an interval settled this close to its latency bound (or on a non-monotone history)
#: has its neighbours within this distance simulated, all in one round
NEAR_BOUND = 2


def latency_of(st: KnobState, by_key: Mapping[str, KnobState]) -> KnobState | None:
    """The latency knob an interval knob must stay at or below (None: not an interval,
    or its latency is not searched)."""
    return by_key.get(st.knob.interval_of) if st.knob.interval_of else None


def cap_intervals(states: list[KnobState], proposals: dict[str, int]) -> None:
    """Never an interval above its latency on a candidate: each proposed interval is
    lowered to its latency's proposal."""
    for st in states:
        lat_key = st.knob.interval_of
        if lat_key and lat_key in proposals and proposals[st.knob.key] > proposals[lat_key]:
            proposals[st.knob.key] = proposals[lat_key]


def interval_within_latency(
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
        lat = latency_of(st, by_key)
        if lat is None:
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


def extra_candidates(
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
        if st.frozen or not st.knob.interval_of or not s.settled:
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
        lat = latency_of(st, by_key)
        if lat is not None and not (st.frozen or lat.frozen):
            out.append((lat, st))
    return out


def joint_candidates(
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
    in the same round (:func:`joint_step` takes a pair only when it is nearer on both
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


def joint_step(
    lat: KnobState,
    ini: KnobState,
    pairs: list[tuple[int, int]],
    simulated: Sequence[Mapping[str, float]],
    ctx: SearchContext,
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
        q_lat, q_ini = lat.knob.target(values, ctx), ini.knob.target(values, ctx)
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
