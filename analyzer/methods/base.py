"""The method interface: ``Method(**params).plan(bundle) -> Plan``.

As in scikit-learn, each sampling method is one class whose parameters are set
in ``__init__``, validated once, and written into the plan file so a plan can be
reproduced from its JSON alone.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from hilsim.core.bundle import Bundle
from hilsim.core.plan import Plan


class Method(ABC):
    """Base class of sampling methods.

    Subclasses set ``name`` (registry key), ``needs`` (what the bundle must hold:
    ``"durations"`` and/or ``"metrics"``), implement :meth:`plan`, and expose
    their parameters through :meth:`params`.
    """

    name: ClassVar[str]
    needs: ClassVar[tuple[str, ...]] = ("durations",)
    #: whether the method draws at random (evaluation repeats it over seeds)
    stochastic: ClassVar[bool] = False
    #: the launch columns :meth:`plan` reads (``None``: any); commands read only these
    #: from a bundle (``launch_id``, ``name``, ``kernel``, ``duration_ns`` always)
    launch_columns: ClassVar[tuple[str, ...] | None] = None

    @abstractmethod
    def params(self) -> dict[str, Any]:
        """Parameters as a JSON-serialisable dict (stored in the plan)."""

    @abstractmethod
    def plan(self, bundle: Bundle) -> Plan:
        """Choose the launches to simulate and their weights."""

    def with_seed(self, seed: int) -> Method:
        """A copy of this method with another seed (stochastic methods only)."""
        params = self.params()
        if "seed" in params:
            params["seed"] = seed
        return type(self)(**params)


def source_facts(bundle: Bundle) -> dict[str, Any]:
    """What a plan records about the bundle it came from."""
    return {
        "path": str(bundle.path) if bundle.path else None,
        "n_launches": int(bundle.n_launches),
        "sequence_digest": bundle.sequence_digest(),
        "total_duration_ns": int(bundle.launches["duration_ns"].sum()),
        "device": (bundle.manifest.get("device") or {}).get("name"),
    }
