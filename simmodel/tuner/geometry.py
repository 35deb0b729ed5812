"""Accel-Sim's sizing arithmetic: powers of two and the L2 bank geometry (``l2_config``).

Accel-Sim paper, Section II-C: ``l2_config`` prints ``-gpgpu_cache:dl2`` from the queried
L2 size and the number of memory channels.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from hilsim.core.errors import HilsimError


def round_up_pow2(x: float) -> int:
    """Accel-Sim ``round_up_2n``: the next power of two >= ceil(x)."""
    n = max(1, math.ceil(x))
    return 1 << (n - 1).bit_length()


def is_pow2(n: int) -> bool:
    """Whether ``n`` is a positive power of two."""
    return n > 0 and n & (n - 1) == 0


class L2Geometry(NamedTuple):
    """One L2 bank: sets, ways, set-index letter (``P`` IPOLY, ``X`` XOR, ``L`` linear), note."""

    sets: int
    assoc: int
    index: str
    note: str


def _pow2_index(sets: int) -> str:
    """The set index of a power-of-two set count: IPOLY where it exists (16-64), XOR
    otherwise."""
    return "P" if 16 <= sets <= 64 else "X"


def l2_geometry(capacity: int, banks: int, line: int = 128) -> L2Geometry:
    """(sets, assoc, set-index letter, note) per L2 bank, as Accel-Sim ``l2_config``.

    Power-of-two bank size: 16 ways, IPOLY ('P') when sets <= 64 else XOR ('X').
    Otherwise 24 ways; 'P' when sets is a power of two and banks <= 64. When 24 does
    not divide the bank (Accel-Sim asserts), hilsim picks the largest assoc <= 32 that
    gives power-of-two sets and says so in the note. GPGPU-Sim's IPOLY set index exists
    for 16, 32 and 64 sets only (``hashing.cc`` asserts otherwise): fewer sets get XOR.
    """
    per_bank = capacity // banks
    lines = per_bank // line
    if is_pow2(per_bank):
        sets = lines // 16
        return L2Geometry(sets, 16, _pow2_index(sets), "")
    if lines % 24 == 0:
        sets = lines // 24
        if is_pow2(sets):
            return L2Geometry(sets, 24, "P" if banks <= 64 and 16 <= sets <= 64 else "X", "")
        return L2Geometry(sets, 24, "L", "")
    for assoc in range(32, 0, -1):
        if lines % assoc == 0 and is_pow2(lines // assoc):
            sets = lines // assoc
            return L2Geometry(
                sets,
                assoc,
                _pow2_index(sets),
                (
                    f"hilsim extension: {per_bank} B per bank is not divisible into 24 ways "
                    f"(Accel-Sim l2_config asserts); {assoc} ways gives {sets} sets"
                ),
            )
    raise HilsimError(f"L2 of {capacity} bytes over {banks} banks has no usable geometry")
