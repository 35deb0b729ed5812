"""JSON files: reading with one-line errors (missing file, bad JSON, wrong schema), and
writing results whose values JSON cannot hold as they are (numpy scalars and arrays,
NaN, dataclasses)."""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from hilsim.core import limits
from hilsim.core.errors import HilsimError
from hilsim.core.files import write_text_atomic
from hilsim.core.inputs import read_input_text


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is past the largest float")
    return value


def _bounded_int(text: str) -> int:
    digits = len(text) - text.startswith("-")
    if digits > limits.value("max_number_digits"):
        raise limits.exceeded("JSON", "max_number_digits", f"an integer of {digits} digits")
    return int(text)


def parse_json_text(text: str | bytes) -> Any:
    """``text`` parsed as strict JSON (as :func:`read_json` parses a file): ``ValueError``
    for text that is not JSON, ``NaN``/``Infinity`` or a number past the largest float;
    :class:`HilsimError` for an integer of more than ``max_number_digits`` digits."""
    return json.loads(text, parse_constant=_not_json, parse_float=_finite_float,
                      parse_int=_bounded_int)


def read_json(path: str | os.PathLike[str], schema: str | None = None) -> Any:
    """Parse ``path`` as JSON; with ``schema``, require an object whose ``schema`` equals it.

    Every failure is a :class:`HilsimError` naming the file; the file is read by
    :func:`hilsim.core.inputs.read_input_text` (regular files only, bounded). Strict JSON:
    ``NaN``, ``Infinity`` and numbers past the largest float (``1e999``) are refused, as
    every JSON file hilsim writes is strict (no reader downstream expects them), and so are
    integers of more than ``max_number_digits`` digits.
    """
    source = Path(path)
    text = read_input_text(source, "a JSON file")  # regular files only, bounded
    try:
        data = parse_json_text(text)
    except HilsimError as exc:
        raise HilsimError(f"{source}: {exc}") from None
    except ValueError as exc:  # JSONDecodeError, a non-finite number
        raise HilsimError(f"{source}: not valid JSON ({exc})") from None
    except RecursionError:
        raise HilsimError(f"{source}: not valid JSON (nested too deeply)") from None
    if schema is not None and (not isinstance(data, dict) or data.get("schema") != schema):
        got = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise HilsimError(f"{source}: schema is {got!r}, expected {schema!r}")
    return data


def json_safe(value: Any) -> Any:
    """``value`` as plain JSON types, recursively.

    Dict keys become strings; tuples and numpy arrays lists; numpy integers ``int`` and
    numpy floats ``float``; a NaN or infinite float ``None`` (JSON has no NaN); a
    dataclass its fields (:func:`dataclasses.asdict`). Anything else is returned as is.
    """
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return None if not np.isfinite(value) else float(value)
    if isinstance(value, float) and not np.isfinite(value):
        return None
    if isinstance(value, np.ndarray):
        return json_safe(value.tolist())
    if hasattr(value, "__dataclass_fields__"):
        return json_safe(asdict(value))
    return value


def write_json(path: str | os.PathLike[str], value: Any) -> Path:
    """Write :func:`json_safe` ``value`` to ``path`` atomically: JSON indented by one
    space, with a final newline (the layout of every result file hilsim writes). The text
    is strict JSON: no ``NaN`` or ``Infinity`` ever reaches the file."""
    return write_text_atomic(path, json.dumps(json_safe(value), indent=1, allow_nan=False) + "\n")
