"""Registry of sampling methods by name (``hilsim plan --method NAME``).

Each method lives in its own module and registers itself with :func:`register`.
The built-in modules are imported only when their method is named (``hilsim plan -m
stem`` does not pay for scikit-learn), or all at once when every name is asked for.
:func:`create` checks the parameter names here and their values through the method's
declared constraints (:mod:`hilsim.analyzer.methods.params`).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from hilsim.analyzer.methods.base import Method
from hilsim.analyzer.methods.params import InvalidParameter

from hilsim.core.errors import HilsimError

_REGISTRY: dict[str, type[Method]] = {}

#: built-in method name -> the module that registers it (imported on first use)
BUILTIN: dict[str, str] = {
    "first-n": "hilsim.analyzer.methods.baselines",
    "megsim": "hilsim.analyzer.methods.megsim",
    "photon": "hilsim.analyzer.methods.photon",
    "pka": "hilsim.analyzer.methods.pka",
    "random": "hilsim.analyzer.methods.baselines",
    "sieve": "hilsim.analyzer.methods.sieve",
    "stem": "hilsim.analyzer.methods.stem",
    "tbpoint": "hilsim.analyzer.methods.tbpoint",
}


def register(cls: type[Method]) -> type[Method]:
    """Class decorator: make ``cls`` available under ``cls.name``."""
    _REGISTRY[cls.name] = cls
    return cls


def available() -> list[str]:
    """Names of the registered methods (built-in ones without importing them)."""
    return sorted(set(_REGISTRY) | set(BUILTIN))


def get(name: str) -> type[Method]:
    """The method class registered as ``name``; one-line error if unknown."""
    if name not in _REGISTRY and name in BUILTIN:
        import_module(BUILTIN[name])
    try:
        return _REGISTRY[name]
    except KeyError:
        raise HilsimError(
            f"unknown method {name!r}; available: {', '.join(available())}"
        ) from None


def create(name: str, **params: Any) -> Method:
    """Instantiate method ``name`` with ``params``; one-line error for an unknown
    parameter or a value its constraints refuse."""
    cls = get(name)
    accepted = parameters(cls)
    unknown = [key for key in params if key not in accepted]
    if unknown:
        raise HilsimError(
            f"method {name!r}: unknown parameter(s) {', '.join(unknown)}; "
            f"it takes {', '.join(accepted) or 'none'} (see `hilsim methods {name}`)"
        )
    try:
        return cls(**params)
    except InvalidParameter as exc:
        raise HilsimError(
            f"method {name!r}: bad parameter value: {exc.detail} (see `hilsim methods {name}`)"
        ) from exc
    except (TypeError, ValueError) as exc:
        given = ", ".join(f"{k}={v!r}" for k, v in params.items())
        raise HilsimError(f"method {name!r}: bad parameter value ({given}): {exc}") from exc


def parameters(cls: type[Method]) -> dict[str, Any]:
    """The keyword parameters of a method class and their defaults (``inspect.Parameter.empty``
    when there is none), in signature order."""
    return cls.parameters()
