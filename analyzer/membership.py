"""Which launches each cluster of a plan stands for (cluster membership).

A plan file lists its samples and the size of each cluster, not the members: the
members are as many as the bundle's launches. Reports that show the spread *inside*
clusters (STEM+ROOT, Chung et al., MICRO'25, Fig. 1 and Fig. 10: launches that PKA,
Sieve or Photon put in one cluster still differ widely in duration) need them.

:func:`cluster_members` takes them from the plan when the method that made it is
still in memory (:meth:`hilsim.core.plan.Plan.cluster_of_launches`); for a plan read
from JSON it re-runs the method with the plan's own parameters (seed included, so the run is
deterministic) on the plan's source bundle, and accepts the result only if that run
chose exactly the plan's samples and weights. Anything else (a hand-made or edited
plan, a method that is not registered, another hilsim version that chooses
differently) gives no membership and a sentence saying why; callers fall back to
grouping by kernel name.
"""

from __future__ import annotations

import numpy as np
from hilsim.analyzer import methods

from hilsim.core.bundle import Bundle
from hilsim.core.errors import HilsimError
from hilsim.core.plan import Plan


def _same_samples(a: Plan, b: Plan) -> bool:
    sa = a.samples.sort_values("launch_id", kind="stable")
    sb = b.samples.sort_values("launch_id", kind="stable")
    if len(sa) != len(sb):
        return False
    return bool(
        np.array_equal(sa["launch_id"].to_numpy(), sb["launch_id"].to_numpy())
        and np.array_equal(sa["cluster"].to_numpy(), sb["cluster"].to_numpy())
        and np.allclose(sa["weight"].to_numpy(), sb["weight"].to_numpy(), rtol=1e-9, atol=0)
    )


def cluster_members(plan: Plan, bundle: Bundle) -> tuple[np.ndarray | None, str]:
    """The cluster of every launch of ``bundle`` under ``plan``, and where it came from.

    Returns ``(members, note)``: ``members`` is int64 of length ``n_launches``
    (``-1`` for launches no cluster stands for) or ``None`` when it cannot be
    recovered; ``note`` is one sentence for the report. ``plan`` must have been made
    on ``bundle`` (the caller checks the sequence digest).
    """
    n = bundle.n_launches
    members = plan.cluster_of_launches()
    if members is not None and len(members) == n:
        return members, "cluster members as the method assigned them"
    try:
        rerun = methods.create(plan.method, **plan.params).plan(bundle)
    except HilsimError as exc:
        return None, (
            f"cluster members unknown: re-running method {plan.method!r} with the plan's "
            f"parameters failed ({exc})"
        )
    members = rerun.cluster_of_launches()
    if members is None or len(members) != n or not _same_samples(plan, rerun):
        return None, (
            f"cluster members unknown: re-running method {plan.method!r} with the plan's "
            "parameters chose other samples (an edited plan, or one made by another "
            "hilsim version)"
        )
    return members, (
        f"cluster members recomputed: method {plan.method!r} re-run with the plan's "
        "parameters reproduced its samples and weights"
    )
