"""GPGPU-Sim ``-gpgpu_cache:*`` option strings: their geometry and Accel-Sim's printed form.

A data-cache option reads ``<S|N>:sets:line:assoc,policy,...`` (GPGPU-Sim
``cache_config``); Accel-Sim's ``l1_config`` / ``l2_config`` microbenchmarks print the
first three fields with commas (``S:4,128,64,...``; Accel-Sim paper, Section II-C).
"""

from __future__ import annotations

from hilsim.core.errors import HilsimError


def cache_geometry(value: str) -> tuple[int, int, int]:
    """(sets, line bytes, assoc) of a cache option value; ``:`` or ``,`` separators.

    ``cache_geometry("S:4:128:64,L:T:m:L:L,...") == (4, 128, 64)``; the ``S:``/``N:``
    prefix is optional. A value without three leading integers is a one-line
    :class:`HilsimError`.
    """
    head = value.split(":", 1)[1] if value[:2] in ("S:", "N:") else value
    nums = head.replace(":", ",").split(",")[:3]
    try:
        return int(nums[0]), int(nums[1]), int(nums[2])
    except (ValueError, IndexError):
        raise HilsimError(f"cache geometry {value!r} is not <S|N>:sets:line:assoc,...") from None


def normalize_cache_string(value: str) -> str:
    """Accel-Sim's l1_config/l2_config print ``S:4,128,64,...``; GPGPU-Sim wants ``S:4:128:64``."""
    kind, _, rest = value.partition(":")
    parts = rest.split(",")
    if len(parts) >= 3 and all(p.isdigit() for p in parts[:3]):
        rest = ":".join(parts[:3]) + "," + ",".join(parts[3:])
    return f"{kind}:{rest}"
