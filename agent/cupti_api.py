"""Which CUDA API records the CUPTI backend keeps: the calls that launch kernels.

The light level needs, per kernel, the API call that launched it (its thread and start
time place the launch inside the workload's NVTX ranges; PKA section 3.1's light level
is "every launch", nothing more). CUPTI's ``RUNTIME`` and ``DRIVER`` activity kinds record
*every* API call, and a CuPy workload makes many driver calls per kernel: on an H100 the
silicon kit's ``cupy_mix.py`` loop took 44.9 s under the backend that kept them all, for
1.6 s bare (whole process x24.1), while a PyTorch training loop, with few calls per
kernel, took 0.70 s for 0.58 s.
Each record was built into a Python object in the completion callback and most were
dropped at the end for want of a kernel with their correlation id.

Two filters, both by callback id (``cbid``) — the driver and runtime ids are two separate
numberings (driver 307 is ``cuLaunchKernel``, runtime 307 ``cudaGraphAddDependencies``):

* at the source, ``cuptiActivityEnableDriverApi`` / ``cuptiActivityEnableRuntimeApi``
  (cupti-python ``activity_enable_driver_api`` / ``activity_enable_runtime_api``) switch
  off the records of every non-launch API, so CUPTI never fills buffers with them;
* in the completion callback, a record whose ``cbid`` is not a launch API is skipped
  before any field is read (the fallback where the per-API switch is missing or ignored;
  the records file counts what it skipped).

Launch APIs are recognised by name in cupti-python's ``driver_api_trace_cbid`` and
``runtime_api_trace_cbid`` enumerations (:data:`LAUNCH_API`): ``cuLaunchKernel``,
``cuLaunchKernelEx``, ``cuLaunchCooperativeKernel``, ``cuGraphLaunch``, the legacy
``cuLaunch``/``cuLaunchGrid``, their ``_ptsz`` forms and the runtime's ``cudaLaunch*`` /
``cudaGraphLaunch`` (``_v7000``-style suffixes included); ``cu*LaunchHostFunc`` starts
no kernel and is left out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

#: A kernel-launching driver or runtime API, by its cupti-python enumeration name.
LAUNCH_API = re.compile(r"(?:^|_)cu(?:da)?(?:Graph)?Launch(?!HostFunc)")
_PSEUDO = frozenset({"INVALID", "SIZE", "FORCE_INT"})


def launch_cbids(members: Iterable[tuple[str, int]]) -> frozenset[int]:
    """Callback ids of the launch APIs among ``(name, cbid)`` enumeration members."""
    return frozenset(int(value) for name, value in members if LAUNCH_API.search(name))


def _members(enumeration: Any) -> list[tuple[str, int]]:
    return [(m.name, int(m)) for m in enumeration if m.name not in _PSEUDO]


def api_enumerations(cupti: Any) -> dict[str, list[tuple[str, int]]]:
    """``{"driver": [(name, cbid), ...], "runtime": [...]}`` from cupti-python, or ``{}``
    when this cupti-python does not enumerate them."""
    out: dict[str, list[tuple[str, int]]] = {}
    for api, attribute in (("driver", "driver_api_trace_cbid"),
                           ("runtime", "runtime_api_trace_cbid")):
        enumeration = getattr(cupti, attribute, None)
        if enumeration is not None:
            out[api] = _members(enumeration)
    return out


def restrict_to_launches(cupti: Any, members: dict[str, list[tuple[str, int]]]) -> str:
    """Switch off CUPTI's records of every non-launch API; say what was done.

    Call after enabling the ``DRIVER`` / ``RUNTIME`` kinds. Returns ``"cupti"`` when both
    per-API switches took every id, else why not (the callback filter still applies).
    """
    switches = {"driver": getattr(cupti, "activity_enable_driver_api", None),
                "runtime": getattr(cupti, "activity_enable_runtime_api", None)}
    missing = [api for api in ("driver", "runtime") if switches[api] is None or api not in members]
    if missing:
        return f"callback only (no per-API switch for {', '.join(missing)} in this cupti-python)"
    refused = 0
    for api, switch in switches.items():
        keep = launch_cbids(members[api])
        for _name, cbid in members[api]:
            if cbid in keep:
                continue
            try:
                switch(cbid, 0)
            except Exception:  # noqa: BLE001 - an id this CUPTI does not know
                refused += 1
    return "cupti" if refused == 0 else f"cupti ({refused} ids refused)"


__all__ = ["LAUNCH_API", "api_enumerations", "launch_cbids", "restrict_to_launches"]
