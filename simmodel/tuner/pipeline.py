"""The tuner's answer to GPGPU-Sim's pipeline constraints: list options a card can run.

GPGPU-Sim starts an instruction at pipeline stage ``latency - initiation_interval`` of
its unit, whose depth is one entry of a list (``shader.cc``: ``pipelined_simd_unit::cycle``,
``shader_core_config::set_pipeline_latency``; the conditions are
:mod:`hilsim.simmodel.gpgpusim.runnable`'s). Every tuner keeps its lists inside them:

* the on-simulator card (:func:`pipeline_depths`, :func:`intervals_within_latencies`):
  a tuned latency above its unit's depth raises the depth entry; a base card's interval
  above a tuned latency is lowered to it;
* the analytic conventions (:func:`fit_emitted`): a latency below its entry's
  initiation interval is raised to the interval (the measured rate kept: the measured
  chain is then below what the simulator can give, e.g. a 4-cycle silicon FFMA mapped to
  latency 1 next to interval 2), and a depth entry too short for its unit's start stages
  is raised.

Accel-Sim (Khairy et al., ISCA 2020), Section II-C: the latency and initiation lists
are the tuner's ``config_fpu``/``config_dpu``/``config_int``/``config_sfu`` output.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hilsim.simmodel.gpgpusim.cards import CardConfig
from hilsim.simmodel.gpgpusim.runnable import (
    ENTRIES,
    PAIRS,
    TRACE_PAIRS,
    lists,
    problems,
    unit_depths,
)
from hilsim.simmodel.tuner.card import list_rows
from hilsim.simmodel.tuner.result import EmittedOption

from hilsim.core.errors import HilsimError

#: GPGPU-Sim sizes each unit's pipeline by one entry of its list (``shader.cc``,
#: ``shader_core_config::set_pipeline_latency``): an instruction whose latency exceeds it
#: overruns the pipeline (measured: SIGSEGV). (list, depth entries, entries it must cover)
PIPELINE_DEPTH: tuple[tuple[str, tuple[int, ...], tuple[int, ...]], ...] = (
    ("-ptx_opcode_latency_fp", (1,), (0, 1, 2, 3)),
    ("-ptx_opcode_latency_dp", (1,), (0, 1, 2, 3)),
    ("-ptx_opcode_latency_int", (1, 5), (0, 1, 2, 3, 5)),
)
DEPTH_NOTE = (
    "GPGPU-Sim sizes the unit's pipeline by its MAX entry (SHFL too for int; shader.cc "
    "set_pipeline_latency): a longer latency overruns it, so MAX is raised to it"
)


def intervals_within_latencies(
    base: CardConfig, lists: dict[str, list[dict[str, Any]]]
) -> None:
    """Lower a base card's initiation interval to its entry's tuned latency where the
    latency came out below it: GPGPU-Sim starts an instruction at pipeline stage
    ``latency - initiation_interval`` (``shader.cc``, ``pipelined_simd_unit::cycle``), a
    negative index for an interval above its latency (measured: SIGSEGV). Intervals set
    in the loop are kept at or below their latency there; this covers the entries whose
    latency is measured and whose interval is not."""
    for unit in ("int", "fp", "dp", "sfu"):
        lat_option = f"-ptx_opcode_latency_{unit}"
        if lat_option not in lists:
            continue
        ini_option = f"-ptx_opcode_initiation_{unit}"
        rows = lists.get(ini_option) or list_rows(base, ini_option)
        lats = lists[lat_option]
        moved = False
        for i, row in enumerate(rows):
            if i >= len(lats) or row["kind"] == "measured":
                continue
            lat = int(float(lats[i]["value"]))
            if int(float(row["value"])) > lat:
                row.update(value=str(lat), kind="derived",
                           note="a base interval above its entry's tuned latency crashes "
                           "GPGPU-Sim (it starts the instruction at stage latency - "
                           "interval): lowered to the latency")
                moved = True
        if moved:
            lists[ini_option] = rows


def pipeline_depths(base: CardConfig, lists: dict[str, list[dict[str, Any]]]) -> None:
    """Raise each unit's depth entry (MAX) to its longest latency where a tuned entry
    exceeds it; and the SFU's (``max(dp DIV, sfu)``) to the fp and int DIV entries."""
    for option, depth, covered in PIPELINE_DEPTH:
        rows = lists.get(option)
        if rows is None:
            continue
        need = max(int(float(rows[i]["value"])) for i in covered if i < len(rows))
        have = max(int(float(rows[i]["value"])) for i in depth if i < len(rows))
        if need > have:
            row = rows[depth[0]]
            if row["kind"] == "measured":
                row["note"] = (f"MAX measured {row['value']}, raised to {need}: {DEPTH_NOTE}")
            row.update(value=str(need), kind="derived" if row["kind"] != "measured"
                       else "measured")
            row.setdefault("note", DEPTH_NOTE)
    divs = [lists[o][4] for o in ("-ptx_opcode_latency_fp", "-ptx_opcode_latency_int")
            if o in lists and len(lists[o]) > 4]
    if not divs:
        return
    need = max(int(float(r["value"])) for r in divs)
    for o in ("-ptx_opcode_latency_dp", "-ptx_opcode_latency_sfu"):
        if o not in lists:
            lists[o] = list_rows(base, o)
    dp_div, sfu = lists["-ptx_opcode_latency_dp"][4], lists["-ptx_opcode_latency_sfu"][0]
    if need > max(int(float(dp_div["value"])), int(float(sfu["value"]))):
        target = dp_div if sfu["kind"] == "measured" else sfu
        target.update(value=str(need), kind="derived" if target["kind"] == "base"
                      else target["kind"],
                      note="GPGPU-Sim runs every DIV on the SFU, whose pipeline is "
                      "max(dp DIV, SFU) deep (shader.cc): raised to the longest DIV")


#: the note of an analytic latency raised to its interval
RAISED_NOTE = ("raised to the initiation interval: GPGPU-Sim starts an instruction at "
               "pipeline stage latency - interval, and a negative stage crashes it "
               "(SIGSEGV); the measured rate is kept")
#: unit -> (list, entry) that sets its depth (the one raised when too short)
_DEPTH_ENTRY = {"SP": ("fp", 1), "DP": ("dp", 1), "INT": ("int", 1), "SFU": ("dp", 4),
                "TENSOR": ("tensor", 0)}


def _parts(value: str) -> list[str]:
    return [p.strip() for p in str(value).split(",") if p.strip()]


def _set(option: EmittedOption, index: int, value: int, note: str) -> None:
    parts = _parts(option.value)
    parts[index] = str(value)
    option.value = ",".join(parts)
    option.note = "; ".join(filter(None, [option.note, note]))


def fit_emitted(options: Sequence[EmittedOption]) -> list[str]:
    """Make the emitted list options runnable on GPGPU-Sim (module docstring); returns
    one note per change (``pipeline: ...``), each also on the changed option."""
    by = {o.name: o for o in options}
    notes: list[str] = []
    for lat_name, ini_name in PAIRS.values():
        lat, ini = by.get(lat_name), by.get(ini_name)
        if lat is None or ini is None:
            continue
        lats, inis = _parts(lat.value), _parts(ini.value)
        raised = [i for i in range(min(len(lats), len(inis)))
                  if int(float(inis[i])) > int(float(lats[i]))]
        if not raised:
            continue
        what = ", ".join(f"{ENTRIES[i] if len(lats) > 1 else 'value'} {lats[i]} -> {inis[i]}"
                         for i in raised)
        for i in raised:
            lats[i] = str(int(float(inis[i])))
        lat.value = ",".join(lats)
        lat.note = "; ".join(filter(None, [lat.note, f"{what}: {RAISED_NOTE}"]))
        notes.append(f"pipeline: {lat_name} {what}: {RAISED_NOTE}")
    for name in TRACE_PAIRS:
        pair = by.get(name)
        parts = _parts(pair.value) if pair is not None else []
        if len(parts) >= 2 and int(float(parts[1])) > int(float(parts[0])):
            _set(pair, 0, int(float(parts[1])), f"latency {parts[0]} {RAISED_NOTE}")
            notes.append(f"pipeline: {name} latency {parts[0]} -> {parts[1]}: {RAISED_NOTE}")
    notes += _fit_depths(by)
    return notes


def _fit_depths(by: dict[str, EmittedOption]) -> list[str]:
    """Raise each unit's depth entry to cover its entries' start stages (GPGPU-Sim's
    defaults stand in for lists not emitted)."""
    notes = []
    options = {name: o.value for name, o in by.items()}
    ls = lists(options)
    need: dict[str, tuple[int, str]] = {}
    for (unit, e), (runs_on, depth) in unit_depths(options).items():
        lat, ini = ls[unit][0][e], ls[unit][1][e]
        if lat - ini >= depth and lat - ini + 1 > need.get(runs_on, (0, ""))[0]:
            need[runs_on] = (lat - ini + 1, f"{PAIRS[unit][0]} {ENTRIES[e]}")
    for runs_on, (depth, why) in need.items():
        unit, e = _DEPTH_ENTRY[runs_on]
        option = by.get(PAIRS[unit][0])
        if option is None:
            continue
        text = (f"{ENTRIES[e] if unit != 'tensor' else 'value'} raised to {depth}: the "
                f"{runs_on} pipeline's depth (this entry, shader.cc set_pipeline_latency) "
                f"must exceed latency - interval of {why}, which runs on it")
        _set(option, e, depth, text)
        notes.append(f"pipeline: {PAIRS[unit][0]} {text}")
    return notes


def refuse_unrunnable(options: Mapping[str, str], what: str) -> None:
    """A one-line error when GPGPU-Sim cannot run ``options``
    (:func:`hilsim.simmodel.gpgpusim.runnable.problems`): nothing is written."""
    bad = problems(options)
    if bad:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise HilsimError(f"{what}: refusing to write a card GPGPU-Sim cannot run: "
                          f"{bad[0]}{more}")
