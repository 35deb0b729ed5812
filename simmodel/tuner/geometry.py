"""Accel-Sim's sizing arithmetic: powers of two and the L2 bank geometry (``l2_config``).

Accel-Sim paper, Section II-C: ``l2_config`` prints ``-gpgpu_cache:dl2`` from the queried
L2 size and the number of memory channels. Where its fixed ways (16 or 24) cannot hold
the device's L2 over the banks (a 40 MiB or 50 MiB L2 over a base's 24-way banks),
:func:`bank_geometry` chooses sets and ways together.
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


#: the most ways :func:`bank_geometry` gives an L2 bank (GPGPU-Sim probes every way of a
#: set on each access; silicon L2s have 16-32)
MAX_L2_WAYS = 64
#: how far an L2 that no geometry holds exactly may be represented off its size
L2_SIZE_TOLERANCE = 0.02


def set_index_fits(letter: str, sets: int) -> bool:
    """Whether GPGPU-Sim's set index ``letter`` uses every one of ``sets`` sets
    (``gpu-cache.cc``, ``cache_config::hash_function``): IPOLY (``P``) exists for 16, 32
    and 64 sets, the Fermi hash (``H``) for 32 and 64; bitwise XOR (``X``) and linear
    (``L``) mask the line address with ``sets - 1``, so any count but a power of two
    leaves sets unused (linear) or indexes past them (XOR)."""
    if not is_pow2(sets):
        return False
    return {"P": sets in (16, 32, 64), "H": sets in (32, 64)}.get(letter, True)


def bank_geometry(capacity: int, banks: int, line: int, ways: int, index: str) -> L2Geometry:
    """Sets, ways and set index of one of ``banks`` L2 banks of ``line``-byte lines that
    hold ``capacity`` bytes, starting from a base bank of ``ways`` ways indexed by
    ``index``. Sets are a power of two (:func:`set_index_fits`) and ways 1 to
    :data:`MAX_L2_WAYS`. Exact totals first, the base's ways kept where they give one
    (the sets change), else the ways nearest the base's (ties: the set count the
    base's index can hash, then fewer ways); with no exact total, the nearest one within
    :data:`L2_SIZE_TOLERANCE`, said so in the note. The set index stays the base's where
    it can index the sets, else linear (``L``). No geometry: one-line HilsimError."""
    if capacity <= 0 or banks <= 0 or line <= 0:
        raise HilsimError(f"L2 of {capacity} B over {banks} banks of {line} B lines: "
                          "nothing to size")
    per_set_way = banks * line
    want = capacity / per_set_way  # lines per bank
    found: list[tuple[int, int, int]] = []  # (total - capacity, sets, ways)
    sets = 1
    while sets <= want:
        exact = capacity % (per_set_way * sets) == 0
        w = capacity // (per_set_way * sets) if exact else max(1, round(want / sets))
        if w <= MAX_L2_WAYS:
            found.append((per_set_way * sets * w - capacity, sets, w))
        sets *= 2

    def rank(c: tuple[int, int, int]) -> tuple[int, int, int, bool, int]:
        return (abs(c[0]), c[2] != ways, abs(c[2] - ways), not set_index_fits(index, c[1]),
                c[2])

    if not found or abs(min(found, key=rank)[0]) > L2_SIZE_TOLERANCE * capacity:
        near = (f"; nearest {capacity + min(found, key=rank)[0]} B" if found else
                f"; under one {line} B line per bank")
        raise HilsimError(
            f"L2 of {capacity} B has no geometry over {banks} banks of {line} B lines "
            f"(power-of-two sets, 1-{MAX_L2_WAYS} ways, within "
            f"{100 * L2_SIZE_TOLERANCE:g}% of the size){near}")
    gap, sets, w = min(found, key=rank)
    notes = []
    if gap:
        notes.append(f"{capacity} B is no whole power-of-two set count of {line} B lines "
                     f"over {banks} banks: nearest {capacity + gap} B "
                     f"({100 * gap / capacity:+.2f}%)")
    if w != ways:
        notes.append(f"ways {ways} -> {w} (the base's {ways} ways divide {round(want)} "
                     "lines per bank into no power-of-two set count)" if not gap else
                     f"ways {ways} -> {w}")
    letter = index
    if not set_index_fits(index, sets):
        letter = "L"
        notes.append(f"set index {index} cannot index {sets} sets: linear (L)")
    return L2Geometry(sets, w, letter, "; ".join(notes))


def _pow2_index(sets: int) -> str:
    """The set index of a power-of-two set count: IPOLY where it exists (16-64), XOR
    otherwise."""
    return "P" if 16 <= sets <= 64 else "X"


def l2_geometry(capacity: int, banks: int, line: int = 128) -> L2Geometry:
    """(sets, assoc, set-index letter, note) per L2 bank, as Accel-Sim ``l2_config``.

    Power-of-two bank size: 16 ways, IPOLY ('P') when sets <= 64 else XOR ('X').
    Otherwise 24 ways of power-of-two sets; 'P' when banks <= 64. Anything else (24 ways
    do not divide the bank, Accel-Sim asserts; or leave a set count that is no power of
    two, which GPGPU-Sim's linear index only partly uses; or the L2 is no whole number of
    lines per bank): hilsim's :func:`bank_geometry` from 24 ways, said so in the note.
    GPGPU-Sim's IPOLY set index exists for 16, 32 and 64 sets only (``hashing.cc``
    asserts otherwise): other power-of-two counts get XOR.
    """
    per_bank = capacity // banks
    lines = per_bank // line
    whole = capacity % (banks * line) == 0
    if whole and is_pow2(per_bank) and lines >= 16:
        sets = lines // 16
        return L2Geometry(sets, 16, _pow2_index(sets), "")
    if whole and lines % 24 == 0 and is_pow2(lines // 24):
        sets = lines // 24
        return L2Geometry(sets, 24, "P" if banks <= 64 and 16 <= sets <= 64 else "X", "")
    g = bank_geometry(capacity, banks, line, 24, "P")
    total = g.sets * g.assoc * line * banks
    return g._replace(index=_pow2_index(g.sets), note=(
        f"hilsim extension: {capacity} B over {banks} banks fits neither 16 ways of a "
        f"power-of-two bank nor 24 ways of power-of-two sets (Accel-Sim l2_config asserts "
        f"or sizes sets its linear index leaves unused): {g.sets} sets x {g.assoc} ways"
        + (f", nearest {total} B ({100 * (total - capacity) / capacity:+.2f}%)"
           if total != capacity else "")))
