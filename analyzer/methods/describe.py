"""What ``hilsim methods NAME`` prints: a method's paper, inputs and parameters.

Everything comes from the code itself (no second copy to keep in step): the paper
and section from the first paragraph of the method module's docstring, each
parameter's default from ``__init__``'s signature, the values it accepts from the
method's ``parameter_constraints``, its meaning from the ``Args:`` section of the
class docstring (Google style).
"""

from __future__ import annotations

import inspect
import re
import sys
from dataclasses import dataclass

from hilsim.analyzer import methods
from hilsim.analyzer.methods.params import describe_constraints


@dataclass(frozen=True)
class ParamInfo:
    """One parameter: name, default (as text), meaning, and the values it accepts."""

    name: str
    default: str
    meaning: str
    accepts: str = ""


@dataclass(frozen=True)
class MethodInfo:
    """A method as ``hilsim methods NAME`` shows it."""

    name: str
    summary: str
    paper: str
    needs: tuple[str, ...]
    stochastic: bool
    params: list[ParamInfo]


def _args_section(doc: str) -> dict[str, str]:
    """``{name: meaning}`` from the ``Args:`` section of a Google-style docstring."""
    lines = inspect.cleandoc(doc).splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == "Args:")
    except StopIteration:
        return {}
    found: dict[str, str] = {}
    current: str | None = None
    for line in lines[start + 1 :]:
        if line.strip() and not line.startswith(" "):
            break  # the next section
        match = re.match(r"^ {4}(\w+)(?: \([^)]*\))?: ?(.*)$", line)
        if match:
            current = match.group(1)
            found[current] = match.group(2).strip()
        elif current is not None and line.strip():
            found[current] = f"{found[current]} {line.strip()}".strip()
    # a parameter documented as "a, or b: ..." (first-n) is split by the regex; keep as is
    return found


def _first_paragraph(doc: str | None) -> str:
    text = inspect.cleandoc(doc or "").split("\n\n")[0]
    return " ".join(text.split()).replace("``", "`")


def describe(name: str) -> MethodInfo:
    """Describe the registered method ``name`` (one-line error if unknown)."""
    cls = methods.get(name)
    meanings = _args_section(cls.__doc__ or "")
    params = [
        ParamInfo(
            key,
            "(required)" if default is inspect.Parameter.empty else repr(default),
            meanings.get(key, "").replace("``", "`"),
            describe_constraints(cls.parameter_constraints.get(key, ())),
        )
        for key, default in methods.parameters(cls).items()
    ]
    module = sys.modules.get(cls.__module__)
    return MethodInfo(
        name=name,
        summary=_first_paragraph(cls.__doc__),
        paper=_first_paragraph(module.__doc__ if module else None),
        needs=tuple(cls.needs),
        stochastic=bool(cls.stochastic),
        params=params,
    )
