"""Size guards on untrusted input (issue 16 F4, F5; stated in ``docs/limits.md``).

A small file must not cost unbounded time or memory: a gzip stream that inflates a
thousandfold, a number of a billion digits, JSON nested a million deep, a CSV followed by
gigabytes of zero bytes (a sparse hole), or a bundle of 5 MB that claims 400 million rows.
Each guard refuses in one line that names the limit and how to raise it: the global
option ``hilsim --limit NAME=VALUE ...`` or the environment variable ``HILSIM_<NAME>``
(upper case).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from hilsim.analyzer.errors import HilsimError


@dataclass(frozen=True)
class Limit:
    """One guard: its name, default and what it bounds."""

    name: str
    default: int
    what: str


LIMITS: dict[str, Limit] = {
    limit.name: limit
    for limit in (
        Limit(
            "max_decompression_ratio",
            200,
            "decompressed bytes per compressed byte of a .gz input (real traces: 5-30)",
        ),
        Limit("max_number_digits", 100, "characters of one number in a text input"),
        Limit("max_json_depth", 64, "nesting depth of JSON objects and arrays"),
        Limit(
            "max_zero_run_bytes",
            1 << 20,
            "bytes of NUL (a sparse hole or zero fill) in one run inside a text input",
        ),
        Limit(
            "max_rows_per_byte",
            16,
            "rows a bundle table may hold per byte of its parquet file (real bundles: < 1)",
        ),
    )
}

_overrides: dict[str, int] = {}


def value(name: str) -> int:
    """The limit in force: ``--limit`` (this process), else ``HILSIM_<NAME>``, else default."""
    if name in _overrides:
        return _overrides[name]
    raw = os.environ.get(f"HILSIM_{name.upper()}")
    if raw is not None:
        try:
            return int(raw)
        except ValueError:
            raise HilsimError(f"HILSIM_{name.upper()}={raw!r}: expected an integer") from None
    return LIMITS[name].default


def set_limit(assignment: str) -> None:
    """Apply one ``NAME=VALUE`` from ``hilsim --limit``."""
    name, sep, raw = assignment.partition("=")
    name = name.strip().replace("-", "_")
    if not sep or name not in LIMITS:
        raise HilsimError(
            f"--limit {assignment!r}: expected NAME=VALUE with NAME one of {', '.join(LIMITS)}"
        )
    try:
        number = int(raw)
    except ValueError:
        raise HilsimError(f"--limit {assignment!r}: VALUE must be an integer") from None
    if number < 1:
        raise HilsimError(f"--limit {assignment!r}: VALUE must be at least 1")
    _overrides[name] = number


def reset() -> None:
    """Forget ``--limit`` overrides (each CLI invocation starts from the defaults)."""
    _overrides.clear()


def exceeded(source: object, name: str, detail: str) -> HilsimError:
    """The one-line refusal: what was seen, the limit, and how to raise it."""
    return HilsimError(
        f"{source}: {detail}: over the limit {name}={value(name)} "
        f"(raise it with `hilsim --limit {name}=N ...` or HILSIM_{name.upper()})"
    )
