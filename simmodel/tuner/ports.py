"""The register file's read ports, searched when a dependent chain stays above its
measurement at the latency option's floor.

Accel-Sim (Khairy et al., ISCA 2020), Section II-C sets each option from the
microbenchmark that isolates it; a dependent FMA chain isolates the unit's latency only
down to what the rest of GPGPU-Sim's pipeline adds per instruction: issue, operand
collection, one execute cycle and the scoreboard's release at writeback. The operand
collector reads the register banks ``-gpgpu_reg_file_port_throughput`` times a cycle, and
at the base cards' 2 a chain of latency 1 takes ~6.3 cycles per instruction where the
simulator's own floor is ~5.3 (the H100's FFMA chain measures 4.07 on silicon). The
option is a structure option the suite does not measure directly, so it is searched
only here: when a MAD/unit latency search ends at its lower bound with its chain still
above the target, the settled candidate is simulated again with each of
:data:`TRIAL_PORTS` ports; the fewest ports that bring every such chain to its lowest
value are taken when they bring one nearer its target, and every search restarts from
its settled value on the new structure (the ports move every instruction's operand
reads, the chases' loads included). The report states what was simulated at each
port count and which count the simulator's floor stops at.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Protocol

from hilsim.simmodel.tuner.candidate import KnobState, Structure, candidate
from hilsim.simmodel.tuner.card import Setting
from hilsim.simmodel.tuner.evaluators import CandidateRunner
from hilsim.simmodel.tuner.rule import SearchContext, Slot


class Search(Protocol):
    """What the port step reads and moves of the on-simulator search
    (:class:`hilsim.simmodel.tuner.search.Search`)."""

    structure: Structure
    states: list[KnobState]
    runner: CandidateRunner
    ctx: SearchContext
    last_run: dict[str, dict[str, str]]
    tried_joint: set[tuple[str, int, int]]
    port_trial: dict[str, Any] | None


PORT_OPTION = "-gpgpu_reg_file_port_throughput"
#: port counts simulated beside the base's (GPGPU-Sim reads at most this many operands per
#: bank and cycle; the largest shows whether the floor moved further)
TRIAL_PORTS: tuple[int, ...] = (4, 8)


def base_ports(search: Search) -> int:
    """The register-file ports of the search's structure (the base's unless set)."""
    for setting in search.structure.device:
        if setting.option == PORT_OPTION:
            return int(setting.value)
    return int(float(search.structure.base.option(PORT_OPTION, "1").split()[0]))


def chains_below_floor(search: Search) -> list[KnobState]:
    """Latency-list searches that ended at their lower bound with the simulated chain
    still above the measured one."""
    out = []
    for st in search.states:
        if st.frozen or st.knob.slot is not Slot.LIST_ENTRY or "initiation" in st.knob.option:
            continue
        h = st.search.history
        if st.search.unreachable and h and h[st.value] > st.target and st.value == min(h):
            out.append(st)
    return out


def port_step(search: Search, say: Callable[[str], None]) -> bool:
    """Simulate the settled candidate at each of :data:`TRIAL_PORTS` ports when a chain is
    below the floor; take the fewest ports that give every such chain its lowest value
    if that brings one nearer its target. True when the structure changed (the searches
    then restart from their settled values and the caller runs more rounds)."""
    below = chains_below_floor(search)
    ports = base_ports(search)
    trials = [p for p in TRIAL_PORTS if p > ports]
    if not below or not trials or search.port_trial is not None:
        return False
    settled = candidate(search.structure, search.states,
                        {st.knob.key: st.value for st in search.states})
    evaluators = sorted({st.knob.evaluator for st in below})
    cards = [(evaluators, settled.with_options({PORT_OPTION: str(p)})) for p in trials]
    simulated = search.runner.evaluate_many(cards)
    rows: dict[str, dict[str, Any]] = {}
    for st in below:
        chain = {str(ports): st.search.history[st.value]}
        for p, sim in zip(trials, simulated, strict=True):
            if all(n in sim for n in st.knob.inputs):
                chain[str(p)] = st.knob.target(sim, search.ctx)
        rows[st.knob.key] = {"measurement": st.knob.inputs[0], "target": st.target,
                             "option_value": st.value, "chain_by_ports": chain}
    lowest = {k: min(r["chain_by_ports"].values()) for k, r in rows.items()}
    take = next((p for p in trials if all(
        rows[k]["chain_by_ports"].get(str(p), float("inf")) <= lowest[k] + 0.01 for k in rows)),
        None)
    nearer = take is not None and any(
        abs(r["chain_by_ports"][str(take)] - r["target"])
        < abs(r["chain_by_ports"][str(ports)] - r["target"]) - 0.01 for r in rows.values())
    taken = take if nearer else None
    search.port_trial = {"option": PORT_OPTION, "base": ports, "trials": trials,
                         "chains": rows, "taken": taken}
    text = "; ".join(
        f"{r['measurement']} {r['target']:.4g}: "
        + ", ".join(f"{c:.4g} at {p}" for p, c in r["chain_by_ports"].items())
        + f" (latency {r['option_value']})" for r in rows.values())
    if taken is None:
        say(f"register-file ports: chains below the floor ({text}); more ports do not "
            f"lower them: {PORT_OPTION} {ports} kept")
        return False
    say(f"register-file ports: chains below the floor at {ports} ports ({text}): "
        f"{PORT_OPTION} {taken}; every search restarts from its settled value")
    setting = Setting(PORT_OPTION, str(taken), "measured",
                      f"the dependent chains below GPGPU-Sim's floor at the base's {ports} "
                      f"ports ({text}); {taken} is the fewest ports that give each its "
                      "lowest value")
    device = [s for s in search.structure.device if s.option != PORT_OPTION]
    search.structure = dataclasses.replace(search.structure, device=[*device, setting])
    for st in search.states:
        if st.frozen:
            continue
        st.search.first_guess = st.value
        st.search.history.clear()
    search.last_run.clear()
    search.tried_joint.clear()
    return True
