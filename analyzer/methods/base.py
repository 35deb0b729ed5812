"""The method interface: ``Method(**params).plan(bundle) -> Plan``.

As in scikit-learn, each sampling method is one class whose parameters are set
in ``__init__``, validated once, and written into the plan file so a plan can be
reproduced from its JSON alone. A method declares its parameters once: their
defaults in ``__init__``'s signature, their constraints in
``parameter_constraints`` (:mod:`hilsim.analyzer.methods.params`), their meaning
in the ``Args:`` section of the class docstring. ``__init__`` hands its arguments
to :meth:`Method.init_params`; :meth:`Method.params` is derived from them.
"""

from __future__ import annotations

import copy
import functools
import inspect
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

from hilsim.analyzer.methods.params import Constraints, check_params

from hilsim.core.bundle import Bundle
from hilsim.core.plan import Plan


class Method(ABC):
    """Base class of sampling methods.

    Subclasses set ``name`` (registry key), ``needs`` (what the bundle must hold:
    ``"durations"``, ``"metrics"``, ``"regions"``), ``parameter_constraints``
    (one entry per ``__init__`` parameter), implement :meth:`plan`, and start
    ``__init__`` with ``self.init_params(locals())``.
    """

    name: ClassVar[str]
    needs: ClassVar[tuple[str, ...]] = ("durations",)
    #: whether the method draws at random (evaluation repeats it over seeds)
    stochastic: ClassVar[bool] = False
    #: the launch columns :meth:`plan` reads (``None``: any); commands read only these
    #: from a bundle (``launch_id``, ``name``, ``kernel``, ``duration_ns`` always)
    launch_columns: ClassVar[tuple[str, ...] | None] = None
    #: parameter name -> the constraints its value must meet (the first that accepts
    #: it converts it; ``None`` in the list admits ``None``)
    parameter_constraints: ClassVar[dict[str, Constraints]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Refuse a method class whose ``__init__`` parameters and
        ``parameter_constraints`` name different parameters (a declaration error)."""
        super().__init_subclass__(**kwargs)
        declared, signature = set(cls.parameter_constraints), set(cls.parameters())
        if declared != signature:
            raise TypeError(
                f"{cls.__name__}: parameter_constraints must name exactly the __init__ "
                f"parameters; without constraints: {sorted(signature - declared)}, "
                f"not parameters: {sorted(declared - signature)}"
            )

    @classmethod
    def parameters(cls) -> dict[str, Any]:
        """The keyword parameters of ``__init__`` and their defaults
        (``inspect.Parameter.empty`` when there is none), in signature order."""
        return dict(_signature_defaults(cls.__init__))

    def init_params(self, values: Mapping[str, Any]) -> None:
        """Check ``__init__``'s arguments (its ``locals()``) against
        ``parameter_constraints`` and keep them, converted, as attributes.

        Raises :class:`~hilsim.analyzer.methods.params.InvalidParameter` (one line)
        on the first value its constraints refuse.
        """
        given = {name: values[name] for name in self.parameters()}
        for name, value in check_params(self.name, self.parameter_constraints, given).items():
            setattr(self, name, value)

    def params(self) -> dict[str, Any]:
        """Parameters as a JSON-serialisable dict in signature order (stored in the plan)."""
        return {name: copy.deepcopy(getattr(self, name)) for name in self.parameters()}

    @abstractmethod
    def plan(self, bundle: Bundle) -> Plan:
        """Choose the launches to simulate and their weights."""

    def with_seed(self, seed: int) -> Method:
        """A copy of this method with another seed (stochastic methods only)."""
        params = self.params()
        if "seed" in params:
            params["seed"] = seed
        return type(self)(**params)


@functools.cache
def _signature_defaults(init: Any) -> tuple[tuple[str, Any], ...]:
    """(name, default) of the keyword parameters of an ``__init__`` (cached per function)."""
    signature = inspect.signature(init)
    return tuple(
        (p.name, p.default)
        for p in signature.parameters.values()
        if p.name != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    )


def source_facts(bundle: Bundle) -> dict[str, Any]:
    """What a plan records about the bundle it came from."""
    return {
        "path": str(bundle.path) if bundle.path else None,
        "n_launches": int(bundle.n_launches),
        "sequence_digest": bundle.sequence_digest(),
        "total_duration_ns": int(bundle.launches["duration_ns"].sum()),
        "device": (bundle.manifest.get("device") or {}).get("name"),
    }
