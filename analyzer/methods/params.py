"""Parameter constraints of the sampling methods: declared once, checked in one place.

In the manner of scikit-learn's parameter validation (``_parameter_constraints``
with ``Interval`` / ``StrOptions`` objects), every method class declares what each
of its ``__init__`` parameters accepts::

    parameter_constraints = {
        "epsilon": [Interval(float, 0, 1, closed="neither")],
        "detailed_first": [Interval(int, 1, None), None],   # None: the value may be None
        "stop": [Options("allocation", "eq7")],
        "replacement": [BOOLEAN],
        "seed": [SEED],
    }

and :func:`check_params` checks and converts the values in one place: a value is
accepted by the first constraint that accepts it and stored as that constraint
converts it (``float`` for a number, ``int`` for an integer, a fresh ``list`` for
names), so the plan file records one canonical form. A refused value raises one
line, ``"METHOD: PARAM must be RULE, got VALUE"``
(:class:`InvalidParameter`, a :class:`~hilsim.core.errors.HilsimError`).

Numbers are also accepted as text that reads as one (``hilsim plan -p
epsilon=.05`` passes the text ``".05"``, which is not JSON); an integer may be
given as a whole float (``1e3``). Booleans must be booleans: the text ``"False"``
is refused rather than read as true.
"""

from __future__ import annotations

import math
import numbers
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from hilsim.core.errors import HilsimError


class InvalidParameter(HilsimError):
    """A method parameter outside its constraints; one line naming method, parameter, value.

    ``detail`` is the message without the leading ``"METHOD: "``.
    """

    def __init__(self, method: str, name: str, detail: str) -> None:
        super().__init__(f"{method}: {detail}")
        self.method = method
        self.name = name
        self.detail = detail


class Constraint(ABC):
    """One rule a parameter value may meet."""

    @abstractmethod
    def accepts(self, value: Any) -> bool:
        """Whether ``value`` meets the rule."""

    @abstractmethod
    def describe(self) -> str:
        """The rule as the words after "must be" (``"a number in (0, 1)"``)."""

    def convert(self, value: Any) -> Any:
        """The canonical form of an accepted ``value`` (what the method and its plan keep)."""
        return value

    def reason(self, value: Any) -> str | None:
        """A more precise complaint than "must be ..." for a refused value, or None."""
        return None


def _as_float(value: Any) -> float | None:
    """``value`` as a finite float (a real number, or text that reads as one), else None."""
    if isinstance(value, bool | np.bool_):
        return None
    if isinstance(value, numbers.Real):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


class Interval(Constraint):
    """A number of ``kind`` (``int`` or ``float``) between ``low`` and ``high``.

    ``None`` for a bound leaves that side open-ended; ``closed`` is ``"both"``,
    ``"left"``, ``"right"`` or ``"neither"`` (which bounds belong to the interval).
    ``text`` replaces the generated description (``"an integer in [0, 2**32)"``).
    """

    def __init__(
        self,
        kind: type,
        low: float | None,
        high: float | None,
        *,
        closed: str = "both",
        text: str | None = None,
    ) -> None:
        if kind not in (int, float):
            raise TypeError(f"Interval kind must be int or float, not {kind!r}")
        if closed not in ("both", "left", "right", "neither"):
            raise ValueError(f"Interval closed must be both, left, right or neither: {closed!r}")
        self.kind = kind
        self.low = low
        self.high = high
        self.closed = closed
        self.text = text

    def _number(self, value: Any) -> float | None:
        number = _as_float(value)
        if number is None:
            return None
        if self.kind is int and not number.is_integer():
            return None
        return number

    def accepts(self, value: Any) -> bool:
        number = self._number(value)
        if number is None:
            return False
        low_ok = self.closed in ("both", "left")
        high_ok = self.closed in ("both", "right")
        if self.low is not None and not (number >= self.low if low_ok else number > self.low):
            return False
        return self.high is None or (number <= self.high if high_ok else number < self.high)

    def convert(self, value: Any) -> Any:
        if self.kind is int:
            if isinstance(value, numbers.Integral):
                return int(value)
            return int(float(value))
        return float(value)

    def describe(self) -> str:
        if self.text is not None:
            return self.text
        noun = "an integer" if self.kind is int else "a number"
        low_ok = self.closed in ("both", "left")
        high_ok = self.closed in ("both", "right")
        if self.low is not None and self.high is not None:
            left = "[" if low_ok else "("
            right = "]" if high_ok else ")"
            return f"{noun} in {left}{self.low:g}, {self.high:g}{right}"
        if self.low is not None:
            return f"{noun} {'>=' if low_ok else '>'} {self.low:g}"
        if self.high is not None:
            return f"{noun} {'<=' if high_ok else '<'} {self.high:g}"
        return noun


class Options(Constraint):
    """One of the given texts (listed in this order in messages and help)."""

    def __init__(self, *choices: str) -> None:
        self.choices = tuple(choices)

    def accepts(self, value: Any) -> bool:
        return isinstance(value, str) and value in self.choices

    def convert(self, value: Any) -> Any:
        return str(value)

    def describe(self) -> str:
        return f"one of {', '.join(self.choices)}"


class Boolean(Constraint):
    """``True`` or ``False`` (a Python or numpy bool; text and numbers are refused)."""

    def accepts(self, value: Any) -> bool:
        return isinstance(value, bool | np.bool_)

    def convert(self, value: Any) -> Any:
        return bool(value)

    def describe(self) -> str:
        return "true or false"


class Text(Constraint):
    """A non-empty text, e.g. a metric name (``what`` names it in messages)."""

    def __init__(self, what: str = "a non-empty text") -> None:
        self.what = what

    def accepts(self, value: Any) -> bool:
        return isinstance(value, str) and bool(value)

    def convert(self, value: Any) -> Any:
        return str(value)

    def describe(self) -> str:
        return self.what


class Regex(Constraint):
    """A text that compiles as a Python regular expression."""

    def accepts(self, value: Any) -> bool:
        if not isinstance(value, str):
            return False
        try:
            re.compile(value)
        except re.error:
            return False
        return True

    def convert(self, value: Any) -> Any:
        return str(value)

    def describe(self) -> str:
        return "a regular expression"

    def reason(self, value: Any) -> str | None:
        if isinstance(value, str):
            try:
                re.compile(value)
            except re.error as exc:
                return f"is not a regex ({exc})"
        return None


class Names(Constraint):
    """A list of names (texts), stored as a new list; ``item`` is what one name is.

    ``single``: one text stands for a list of it; ``empty``: the list may be empty,
    and ``None`` then stands for the empty list.
    """

    def __init__(self, item: str, *, single: bool = False, empty: bool = False) -> None:
        self.item = item
        self.single = single
        self.empty = empty

    def accepts(self, value: Any) -> bool:
        if value is None:
            return self.empty
        if isinstance(value, str):
            return self.single and bool(value)
        if not isinstance(value, list | tuple):
            return False
        return (self.empty or len(value) > 0) and all(isinstance(v, str) for v in value)

    def convert(self, value: Any) -> Any:
        if value is None:
            return []
        if isinstance(value, str):
            return [value]
        return [str(v) for v in value]

    def describe(self) -> str:
        if self.single:
            return f"a {self.item} or a list of them"
        return f"a {'' if self.empty else 'non-empty '}list of {self.item}s"


class StrMapping(Constraint):
    """A mapping from texts to numbers (``what`` names it in messages); stored as a dict."""

    def __init__(self, what: str) -> None:
        self.what = what

    def accepts(self, value: Any) -> bool:
        return isinstance(value, Mapping) and all(isinstance(k, str) for k in value)

    def convert(self, value: Any) -> Any:
        return dict(value)

    def describe(self) -> str:
        return self.what


#: ``True`` or ``False``
BOOLEAN = Boolean()
#: the random state of a method: one rule for every method, the range scikit-learn's
#: ``random_state`` accepts (numpy's generators are seeded with the same integer)
SEED = Interval(int, 0, 2**32, closed="left", text="an integer in [0, 2**32)")


Constraints = list[Constraint | None]


def check_value(
    method: str, name: str, value: Any, constraints: Iterable[Constraint | None]
) -> Any:
    """``value`` converted by the first constraint that accepts it (``None`` in
    ``constraints`` accepts ``None`` as is); else :class:`InvalidParameter`."""
    rules = list(constraints)
    for rule in rules:
        if rule is None:
            if value is None:
                return None
        elif rule.accepts(value):
            return rule.convert(value)
    for rule in rules:
        why = rule.reason(value) if rule is not None else None
        if why is not None:
            raise InvalidParameter(method, name, f"{name} {why}")
    allowed = describe_constraints(rules)
    raise InvalidParameter(method, name, f"{name} must be {allowed}, got {value!r}")


def check_params(
    method: str, constraints: Mapping[str, Iterable[Constraint | None]], values: Mapping[str, Any]
) -> dict[str, Any]:
    """Every value of ``values`` checked against its constraints and converted, in
    ``values``' order; a name without constraints is a programming error (KeyError)."""
    return {
        name: check_value(method, name, value, constraints[name]) for name, value in values.items()
    }


def describe_constraints(constraints: Iterable[Constraint | None]) -> str:
    """What a parameter accepts, in words (``hilsim methods NAME``)."""
    return " or ".join(rule.describe() if rule is not None else "None" for rule in constraints)
