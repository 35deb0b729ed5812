"""Option values several commands parse the same way: method parameters given as
``-p KEY=VALUE`` (``plan``, ``evaluate``) or ``-p METHOD.KEY=VALUE`` (``compare``)."""

from __future__ import annotations

import json
from typing import Any

from hilsim.core.errors import HilsimError


def parse_params(pairs: tuple[str, ...]) -> dict[str, Any]:
    """``("epsilon=0.05", "seed=3")`` -> ``{"epsilon": 0.05, "seed": 3}``.

    A value is read as JSON where it parses (numbers, booleans, lists), else kept as
    text; dashes in a key become underscores.
    """
    params: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise HilsimError(f"--param {pair!r}: expected KEY=VALUE")
        key, raw = pair.split("=", 1)
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        params[key.strip().replace("-", "_")] = value
    return params


def parse_method_params(pairs: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """``("stem.epsilon=0.01",)`` -> ``{"stem": {"epsilon": 0.01}}``."""
    per_method: dict[str, dict[str, Any]] = {}
    for key, value in parse_params(pairs).items():
        if "." not in key:
            raise HilsimError(f"--param {key!r}: expected METHOD.KEY=VALUE")
        name, param = key.split(".", 1)
        per_method.setdefault(name, {})[param] = value
    return per_method
