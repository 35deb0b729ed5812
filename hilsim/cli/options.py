"""What several commands declare or parse the same way.

Options: ``-p/--param`` (:func:`param_option`), ``-o/--output`` (:func:`output_option`)
and ``--force`` (:func:`force_option`), each with the command's own help. Values: method
parameters given as ``-p KEY=VALUE`` (``plan``, ``evaluate``; :func:`parse_params`) or
``-p METHOD.KEY=VALUE`` (``compare``; :func:`parse_method_params`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from hilsim.core.errors import HilsimError

F = TypeVar("F", bound=Callable[..., Any])


def param_option(help: str, metavar: str = "KEY=VALUE") -> Callable[[F], F]:
    """``-p/--param`` (repeatable, into ``params``): a method parameter, parsed by
    :func:`parse_params` or :func:`parse_method_params`."""
    return click.option("-p", "--param", "params", multiple=True, metavar=metavar, help=help)


def output_option(
    help: str,
    *,
    required: bool = False,
    file_only: bool = False,
    default: Path | None = None,
) -> Callable[[F], F]:
    """``-o/--output`` (into ``output``, a :class:`~pathlib.Path`); ``file_only``: not a
    folder; a ``default`` is shown in the help."""
    kind = click.Path(dir_okay=False, path_type=Path) if file_only else click.Path(
        path_type=Path)
    extra: dict[str, Any] = {} if default is None else {"default": default,
                                                       "show_default": True}
    return click.option("-o", "--output", required=required, type=kind, help=help, **extra)


def force_option(help: str) -> Callable[[F], F]:
    """``--force`` (a flag, into ``force``): replace what the output names."""
    return click.option("--force", is_flag=True, help=help)


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
