"""hilsim analyzer: sampling methods, evaluation, reports (runs without a GPU; the profile
readers are :mod:`hilsim.formats`).

From Python, :class:`~hilsim.analyzer.facade.Profile` is the entry point::

    from hilsim.analyzer import Profile
    p = Profile.load("run.bundle")
    result = p.evaluate(p.plan("stem", epsilon=0.05))

The names below are imported on first use (PEP 562), so ``from hilsim.core.errors
import HilsimError`` and ``hilsim --help`` do not pay for pandas and pyarrow.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_LAZY = {
    "Comparison": "hilsim.analyzer.facade",
    "Evaluation": "hilsim.analyzer.facade",
    "ImportResult": "hilsim.analyzer.facade",
    "Profile": "hilsim.analyzer.facade",
    "Projection": "hilsim.analyzer.facade",
    "import_bundle": "hilsim.analyzer.facade",
    "Bundle": "hilsim.core.bundle",
    "read_bundle": "hilsim.core.bundle",
    "write_bundle": "hilsim.core.bundle",
    "HilsimError": "hilsim.core.errors",
    "Plan": "hilsim.core.plan",
    "load_plan": "hilsim.core.plan",
}

__all__ = [
    "Bundle",
    "Comparison",
    "Evaluation",
    "HilsimError",
    "ImportResult",
    "Plan",
    "Profile",
    "Projection",
    "import_bundle",
    "load_plan",
    "read_bundle",
    "write_bundle",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'hilsim.analyzer' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
