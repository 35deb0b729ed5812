"""Registry of sampling methods by name (``hilsim plan --method NAME``).

Each method lives in its own module and registers itself with :func:`register`.
"""

from __future__ import annotations

from typing import Any

from hilsim.analyzer.errors import HilsimError
from hilsim.analyzer.methods.base import Method

_REGISTRY: dict[str, type[Method]] = {}


def register(cls: type[Method]) -> type[Method]:
    """Class decorator: make ``cls`` available under ``cls.name``."""
    _REGISTRY[cls.name] = cls
    return cls


def available() -> list[str]:
    """Names of the registered methods."""
    _load_builtin()
    return sorted(_REGISTRY)


def get(name: str) -> type[Method]:
    """The method class registered as ``name``; one-line error if unknown."""
    _load_builtin()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise HilsimError(
            f"unknown method {name!r}; available: {', '.join(sorted(_REGISTRY))}"
        ) from None


def create(name: str, **params: Any) -> Method:
    """Instantiate method ``name`` with ``params`` (validated by the method)."""
    cls = get(name)
    try:
        return cls(**params)
    except TypeError as exc:
        raise HilsimError(f"method {name!r}: bad parameters ({exc})") from exc


_BUILTIN_LOADED = False


def _load_builtin() -> None:
    """Import the built-in method modules once (they register themselves)."""
    global _BUILTIN_LOADED
    if _BUILTIN_LOADED:
        return
    from hilsim.analyzer.methods import baselines, megsim, photon, pka, sieve, stem, tbpoint  # noqa: F401

    _BUILTIN_LOADED = True
