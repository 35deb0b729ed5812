"""A plan's warm-up (:class:`hilsim.core.plan.Warmup`) as GPGPU-Sim options.

The warm-up is a contract of the plan (the ``K`` launches before each sample, the L2
filled by the host's copies, the cold bound); what the simulator must be told for it is
this module's: the L2 fill is GPGPU-Sim's ``-gpgpu_perf_sim_memcpy`` (``gpu-sim.cc``:
"Fill the L2 cache on memcpy"; Accel-Sim's trace front end replays ``MemcpyHtoD`` lines
through the same function), set explicitly on every run so a card's own value never
decides it.
"""

from __future__ import annotations

from hilsim.core.plan import Warmup

#: GPGPU-Sim option that makes host-to-device copies fill the L2
L2_FILL_OPTION = "-gpgpu_perf_sim_memcpy"


def warm_options(spec: Warmup) -> dict[str, str]:
    """Simulator options of the warm run (the L2 fill on or off, explicitly)."""
    return {L2_FILL_OPTION: "1" if spec.l2_fill else "0"}


def cold_options() -> dict[str, str]:
    """Simulator options of the cold run: no warm-up of any kind (the L2 fill off)."""
    return {L2_FILL_OPTION: "0"}
