"""The profiler backends of ``hilsim agent profile``, one module each.

Each module declares one :class:`~hilsim.agent.backends.base.Backend` named ``BACKEND``;
:data:`REGISTRY` lists them in ``--backend``'s order. ``--backend auto`` walks the light
backends (those with a ``run``) by ``auto_rank``; a backend with ``profile`` writes the
whole bundle itself and runs only when its ``claims`` says the options ask for it.
"""

from __future__ import annotations

from hilsim.agent.backends import cupti, gpgpusim, nsys, torch
from hilsim.agent.backends.base import Backend, ProfileOptions
from hilsim.agent.tools import Tool, all_tools

#: every backend, in the order ``--backend`` lists them
REGISTRY: tuple[Backend, ...] = (nsys.BACKEND, cupti.BACKEND, torch.BACKEND, gpgpusim.BACKEND)

#: ``--backend``'s choices: ``auto`` and every backend's name
CHOICES: tuple[str, ...] = ("auto", *(b.name for b in REGISTRY))


def light_backends() -> list[Backend]:
    """The light backends (a ``detect`` and a ``run``), in registry order."""
    return [b for b in REGISTRY if b.run is not None and b.detect is not None]


def auto_order() -> list[Backend]:
    """The light backends ``--backend auto`` tries, lowest ``auto_rank`` first."""
    ranked = [b for b in light_backends() if b.auto_rank is not None]
    return sorted(ranked, key=lambda b: b.auto_rank or 0)


def backend_named(name: str) -> Backend:
    """The backend called ``name``; KeyError when there is none."""
    for backend in REGISTRY:
        if backend.name == name:
            return backend
    raise KeyError(name)


def whole_run_backend(opts: ProfileOptions) -> Backend | None:
    """The backend that writes the whole bundle itself and is asked for by ``opts``."""
    return next(
        (b for b in REGISTRY if b.profile is not None and b.claims is not None and b.claims(opts)),
        None,
    )


def detect_tools() -> dict[str, Tool]:
    """The host's profilers (:func:`~hilsim.agent.tools.all_tools`: nsys, ncu, cupti,
    torch) and any other light backend's tool, detected without importing a GPU library."""
    tools = all_tools()
    for backend in light_backends():
        if backend.name not in tools and backend.detect is not None:
            tools[backend.name] = backend.detect()
    return tools


__all__ = [
    "CHOICES",
    "REGISTRY",
    "auto_order",
    "backend_named",
    "detect_tools",
    "light_backends",
    "whole_run_backend",
]
