"""``docs/tuner.md``'s option table, generated from the rule table.

One row per rule (consecutive rules with the same formula, inputs, Accel-Sim function
and search share a row), in emission order: the option, its formula, the timing fields
it reads with the measurement or device query that sets each, the Accel-Sim function it
follows (Accel-Sim paper, Section II-C), and what the on-simulator search sets of it
(each :class:`~hilsim.simmodel.tuner.rule.Knob`: its key, list entry and microbenchmark).
``benchmarks/tuner_docs.py`` writes it; ``tests/test_tune_rules.py`` fails when the file
is out of date.
"""

from __future__ import annotations

from collections.abc import Sequence

from hilsim.simmodel.tuner.overlay import MEASURED_FIELDS
from hilsim.simmodel.tuner.rule import LatencyKind, OptionRule, Slot
from hilsim.simmodel.tuner.rules import OPTION_RULES

from hilsim.core import measurement_names as mn
from hilsim.core.errors import HilsimError

BEGIN = (
    "<!-- option table: generated from simmodel/tuner/rules.py by "
    "`python benchmarks/tuner_docs.py`; do not edit by hand -->"
)
END = "<!-- end of the generated option table -->"

_QUERIED = {f.field for f in mn.DEVICE_FACTS} | {"compute_capability"}


def field_origin(dotted: str) -> str:
    """Where a timing field's value comes from, besides the preset."""
    names = [f"`{m}`" for m, f in MEASURED_FIELDS.items() if f == dotted]
    if dotted == "core.launch_latency_cycles":
        names.append(f"`{mn.LAUNCH_LATENCY_US}` x core clock")
    if dotted in _QUERIED:
        names.append("device query")
    return " or ".join(names) or "preset"


def _formula(rule: OptionRule) -> str:
    text = rule.doc or rule.formula
    if not isinstance(text, str):
        raise HilsimError(f"{rule.option}: a rule with a computed formula needs doc text")
    if rule.latency is not LatencyKind.NONE:
        text += f" ({rule.latency.value}: see Conventions)"
    return text


def _inputs(rule: OptionRule) -> str:
    fields = dict.fromkeys((*rule.inputs, *rule.requires))
    return "; ".join(f"`{f}` ({field_origin(f)})" for f in fields)


#: list entry names (GPGPU-Sim's ``-ptx_opcode_*`` order)
ENTRIES = ("ADD", "MAX", "MUL", "MAD", "DIV", "SHFL")


def _search(rule: OptionRule) -> str:
    parts = []
    for k in rule.search:
        entry = (f" {ENTRIES[k.entry]}" if k.slot is Slot.LIST_ENTRY and k.entry is not None
                 else f" ({k.slot.value})" if k.slot is not Slot.VALUE else "")
        own = "" if k.quantity is not None else "; quantity: the rule's value"
        parts.append(f"`{k.key}`{entry}: {k.what}{own}")
    return "; ".join(parts) or "-"


def option_table(rules: Sequence[OptionRule] = OPTION_RULES) -> str:
    """The markdown table of ``rules`` (without the markers)."""
    rows: list[tuple[list[str], str, str, str, str]] = []
    for rule in rules:
        cells = (_formula(rule), _inputs(rule), f"`{rule.accelsim}`", _search(rule))
        if rows and rows[-1][1:] == cells:
            rows[-1][0].append(rule.option)
        else:
            rows.append(([rule.option], *cells))
    lines = [
        "| option | formula | from (timing field: measurement or device query) | Accel-Sim "
        "| on-simulator search (knob, entry: microbenchmark) |",
        "|---|---|---|---|---|",
    ]
    for options, formula, inputs, accelsim, search in rows:
        names = ", ".join(f"`{o}`" for o in options)
        lines.append(f"| {names} | {formula.replace('|', '/')} | {inputs} | {accelsim} "
                     f"| {search.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def with_option_table(text: str, rules: Sequence[OptionRule] = OPTION_RULES) -> str:
    """``text`` (``docs/tuner.md``) with the part between the markers regenerated."""
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise HilsimError("docs/tuner.md: expected one generated option table between markers")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n\n{option_table(rules)}\n{END}{tail}"
