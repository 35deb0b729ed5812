"""Numbers as text for reports and terminal tables."""

from __future__ import annotations

#: what a missing figure prints as
MISSING = "n/a"


def percent(value: float | None, spec: str = ".2f") -> str:
    """A fraction as a percentage: ``percent(0.1234) == "12.34%"``.

    ``spec`` is the format spec of the percentage (``"+.2f"`` for a signed error,
    ``".3g"`` for three significant digits). ``None`` prints as :data:`MISSING`.
    """
    if value is None:
        return MISSING
    return f"{100 * value:{spec}}%"
