"""Bandwidth, compute and atomics on a simulated card, on a reduced SM count.

See :mod:`hilsim.microbench.simsuite` for the backend's conventions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hilsim.microbench.measurement import Measurement


def sim_benchmarks(family: str) -> list[tuple[str, Callable[[Any], list[Measurement]]]]:
    """The simulated benchmarks of ``bandwidth``, ``compute`` or ``atomics``."""
    from hilsim.microbench.simsuite import skipped  # noqa: PLC0415

    return [(family, lambda ctx: [skipped(family, "", "not yet on the simulator")])]
