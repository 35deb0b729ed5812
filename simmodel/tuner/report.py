"""What ``hilsim tune --on-simulator`` writes and prints: the tuned card folder and
``tune-report.json`` (every option with its kind and source, every measured target with
the value the tuned card simulates, the runs and their cost).

Accel-Sim (Khairy et al., ISCA 2020), Section II-C: the tuner's output is a
configuration; Section IV: its error against the card. The report is both: the options
(kind ``measured``, ``device``, ``derived``; every option not listed is the base card's
own, unchanged) and, per measured option, the measured value beside the simulated one at
the tuned configuration, with the targets the simulator cannot reach named and every
other target the tuned card leaves farther off than its tolerance flagged
(``off_target``, :meth:`~hilsim.simmodel.tuner.candidate.KnobState.tolerance`), in the
report and on the console: a settled search is never taken for a met target.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

from hilsim.simmodel.accelsim import OptionLine
from hilsim.simmodel.tuner.card import config_text, icnt_for, write_card
from hilsim.simmodel.tuner.pipeline import refuse_unrunnable
from hilsim.simmodel.tuner.search import LoopResult

from hilsim.core.files import atomic_directory

SCHEMA = "hilsim.tune-on-simulator/1"


def _knob_rows(result: LoopResult) -> list[dict[str, Any]]:
    rows = []
    written = {s.option: s.value for s in result.settings}
    for st in result.knobs:
        k = st.knob
        simulated = (
            k.quantity(result.final, result.context) if all(n in result.final for n in k.inputs)
            else None
        )
        unreachable = st.note if st.search.unreachable and not st.frozen else ""
        rows.append({
            "knob": k.key,
            "option": k.option,
            "entry": k.entry,
            "measurements": list(k.inputs),
            "quantity": k.what,
            "measured": st.target,
            "simulated": simulated,
            # a knob that kept the base: what the card file has (not the search's guess)
            "value": written.get(k.option, st.base_value) if st.frozen else st.value,
            "base_value": st.base_value,
            "first_guess": st.search.first_guess,
            "settled": bool(st.frozen or st.search.settled),
            "kept_base": st.frozen,
            "tolerance": None if simulated is None else st.tolerance(simulated),
            "unreachable": unreachable,
            # every other target the tuned card leaves farther off than its tolerance
            "off_target": None if unreachable else st.off_target(simulated),
            "note": st.note,
            "history": {str(x): m for x, m in sorted(st.search.history.items())},
        })
    return rows


def report(result: LoopResult) -> dict[str, Any]:
    """``tune-report.json``."""
    base_values = result.base.options()
    options = []
    for s in result.settings:
        row = {"option": s.option, "value": s.value, "kind": s.kind, "source": s.detail,
               "base_value": base_values.get(s.option)}
        if s.option in result.entry_sources:
            row["entries"] = result.entry_sources[s.option]
        options.append(row)
    written = {s.option for s in result.settings}
    targets = _knob_rows(result)
    return {
        "schema": SCHEMA,
        "measured": Path(result.measured_path).name,
        "base": {
            "card": result.base.name,
            "reason": result.choice.reason,
            "mismatches": result.choice.mismatches,
            "options_unchanged": sorted(set(base_values) - written),
        },
        "options": options,
        "targets": targets,
        "off_target": [
            {"knob": t["knob"], "option": t["option"], "entry": t["entry"], **t["off_target"]}
            for t in targets if t["off_target"]
        ],
        "skipped": result.skipped,
        "rounds": [
            {"round": r.index, "runs": r.runs, "wall_s": r.wall_s, "proposals": r.proposals}
            for r in result.rounds
        ],
        "simulator_runs": len(result.runs),
        "cpu_s": round(result.cpu_s, 1),
        "wall_s": round(result.wall_s, 1),
        "workers": result.workers,
        "memory_slice_sms": result.memory_slice.sms,
        "memory_slice": result.memory_slice.as_dict(),
        "notes": result.notes,
        "register_file_ports": result.port_trial,
        "whole_card_streaming": result.whole_card_streaming,
        "whole_card_l2": result.whole_card_l2,
        "runs": result.runs,
    }


def card_text(result: LoopResult) -> str:
    """The tuned ``gpgpusim.config``."""
    header = [
        f"hilsim tune --on-simulator {Path(result.measured_path).name}",
        f"base card {result.base.name} ({result.choice.reason})",
        "each set option: kind (measured in the loop | device fact | derived) and source;",
        "every other option is the base card's, unchanged; tune-report.json has the targets",
    ]
    return config_text(result.base, result.settings, header)


def _icnt(result: LoopResult) -> tuple[str, str] | None:
    """The interconnect file rewritten for the tuned card's nodes, when it must be."""
    src = result.base.referenced_files().get("-inter_config_file")
    if src is None:
        return None
    opts = {**result.base.options(), **{s.option: s.value for s in result.settings}}
    sms = int(opts["-gpgpu_n_clusters"]) * int(opts.get("-gpgpu_n_cores_per_cluster", "1"))
    banks = int(opts["-gpgpu_n_mem"]) * int(opts.get("-gpgpu_n_sub_partition_per_mchannel", "1"))
    text, note = icnt_for(src.read_text(encoding="utf-8"), sms + banks)
    if note:
        result.notes.append(f"{src.name}: {note}")
        return src.name, text
    return None


def write(result: LoopResult, folder: str | os.PathLike[str], overwrite: bool = False) -> Path:
    """The tuned card folder (``gpgpusim.config``, the files it names, ``tune-report.json``),
    written atomically."""
    refuse_unrunnable({**result.base.options(), **{s.option: s.value for s in result.settings}},
                      "tune --on-simulator")
    icnt = _icnt(result)
    with atomic_directory(folder, overwrite=overwrite) as tmp:
        write_card(tmp, result.base, card_text(result), icnt)
        (tmp / "tune-report.json").write_text(json.dumps(report(result), indent=1) + "\n",
                                              encoding="utf-8")
    return Path(folder)


def summary(result: LoopResult) -> list[str]:
    """The console's closing lines."""
    kinds = Counter(s.kind for s in result.settings)
    unchanged = len({e.name for e in result.base.parsed.entries if isinstance(e, OptionLine)}
                    - {s.option for s in result.settings})
    lines = [
        f"{len(result.runs)} simulator runs in {len(result.rounds)} rounds: "
        f"{result.cpu_s / 60:.1f} CPU-min, {result.wall_s:.0f} s wall on {result.workers} "
        "workers",
        "options: " + ", ".join(f"{kinds[k]} {k}" for k in ("measured", "device", "derived")
                                if kinds[k])
        + f"; {unchanged} of the base card's unchanged",
    ]
    dl2 = next((s for s in result.settings if s.option == "-gpgpu_cache:dl2"), None)
    if dl2 is not None:  # the L2 sets and ways chosen for the device's L2
        lines.append(f"  L2 geometry: -gpgpu_cache:dl2 {dl2.value}: {dl2.detail}")
    for row in _knob_rows(result):
        if row["simulated"] is None:
            continue
        where = row["option"] + (f"[{row['entry']}]" if row["entry"] is not None else "")
        flag = " UNREACHABLE" if row["unreachable"] else (" (base kept)" if row["kept_base"]
                                                          else "")
        off = row["off_target"]
        if off:
            flag += (f" OFF TARGET by {100 * off['relative']:+.1f}% (tolerance "
                     f"{100 * off['tolerance_relative']:.1f}%)")
        lines.append(f"  {where} = {row['value']} (base {row['base_value']}): measured "
                     f"{row['measured']:.4g}, simulated {row['simulated']:.4g}{flag}")
    for check in (result.whole_card_l2, result.whole_card_streaming):
        if check is not None:
            lines.append("  " + check["line"])
    off = [row["knob"] for row in _knob_rows(result) if row["off_target"]]
    if off:
        lines.append(f"  {len(off)} target(s) OFF TARGET by more than their tolerance: "
                     f"{', '.join(off)} (tune-report.json: off_target)")
    by_reason: dict[str, list[str]] = {}
    for name, why in sorted(result.skipped.items()):
        by_reason.setdefault(why, []).append(name)
    for why, names in by_reason.items():
        lines.append(f"  not used: {', '.join(names)}: {why}")
    return lines
