"""The base card a tuned card starts from: chosen from measured facts, never from a name.

Accel-Sim (Khairy et al., ISCA 2020), Section IV: one tuned configuration per GPU
generation; a new card starts from its generation's configuration. What decides the
base here is what a device reports about itself: the compute capability (same
generation first: same major, then the nearest minor), then the memory technology
(HBM or GDDR: Accel-Sim's DRAM models differ in channel width, burst and command
ratio), then the SM count. A device's name is never read: a folder or product name says
nothing a measurement does not say better (a card renamed must get the same base).

The candidates are :data:`BASE_CARDS`, one per generation the project calibrated on
(and the H100, a project card); cards the project holds out for evaluation
(``SM7_GV100``, ``SM7_TITANV``, ``SM75_RTX2060_S``) are never chosen, only named with
``--base``. :func:`closeness` is the one ranking, also used for the tuner's presets.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hilsim.simmodel.tuner.inputs import compute_capability

from hilsim.core.errors import HilsimError

#: the cards a base is chosen from, by compute capability (GPGPU-Sim's shipped Volta,
#: Turing and Ampere cards, and the project's H100)
BASE_CARDS: tuple[str, ...] = ("SM7_QV100", "SM75_RTX2060", "SM86_RTX3070", "SM90_H100")


def cc_number(cc: Any) -> int:
    """``"8.6"`` -> 86 (a one-line error otherwise)."""
    text = str(cc)
    major, _, minor = text.partition(".")
    try:
        return int(major) * 10 + int(minor or 0)
    except ValueError:
        raise HilsimError(f"compute capability {text!r} is not MAJOR.MINOR") from None


def memory_family(memory_type: str | None) -> str | None:
    """``HBM`` or ``GDDR`` (None when unknown)."""
    if not memory_type:
        return None
    kind = str(memory_type).upper()
    if kind.startswith("HBM"):
        return "HBM"
    if kind.startswith("GDDR"):
        return "GDDR"
    return None


@dataclass(frozen=True)
class CardKey:
    """What a candidate (a card or a preset) and the device are compared by."""

    name: str
    compute_capability: str
    memory_type: str | None
    sm_count: int | None


@dataclass(frozen=True)
class Choice:
    """The chosen candidate, why, and what differs from the device (printed)."""

    name: str
    reason: str
    mismatches: list[str] = field(default_factory=list)


def closeness(device: CardKey, candidate: CardKey) -> tuple[float, ...]:
    """Sort key: same major, nearest compute capability (older on ties), same memory
    family, nearest SM count (log ratio)."""
    d, c = cc_number(device.compute_capability), cc_number(candidate.compute_capability)
    fam_d, fam_c = memory_family(device.memory_type), memory_family(candidate.memory_type)
    sms = (
        abs(math.log(device.sm_count / candidate.sm_count))
        if device.sm_count and candidate.sm_count
        else 0.0
    )
    return (
        float(d // 10 != c // 10),
        float(abs(d - c)),
        float(c > d),
        float(fam_d is not None and fam_c is not None and fam_d != fam_c),
        sms,
    )


def choose(device: CardKey, candidates: Sequence[CardKey]) -> Choice:
    """The closest candidate (:func:`closeness`) and the differences worth printing."""
    if not candidates:
        raise HilsimError("no base card to choose from")
    best = min(candidates, key=lambda c: closeness(device, c))
    mismatches = []
    if best.compute_capability != device.compute_capability:
        mismatches.append(
            f"base {best.name} is compute capability {best.compute_capability}, the device "
            f"{device.compute_capability}: its structure (units, pipeline, caches) is "
            "another generation's"
        )
    fam_d, fam_b = memory_family(device.memory_type), memory_family(best.memory_type)
    if fam_d and fam_b and fam_d != fam_b:
        mismatches.append(
            f"base {best.name} has {best.memory_type} memory, the device {device.memory_type}: "
            "DRAM channel width, burst and timings are the base's"
        )
    parts = [f"compute capability {device.compute_capability}"]
    if device.memory_type:
        parts.append(f"memory {device.memory_type}")
    else:
        parts.append("memory type not reported")
    if device.sm_count:
        parts.append(f"{device.sm_count} SMs")
    reason = (
        f"closest to the device's {', '.join(parts)}: {best.name} "
        f"(cc {best.compute_capability}, {best.memory_type or '?'}, {best.sm_count or '?'} SMs)"
    )
    return Choice(best.name, reason, mismatches)


def device_key(facts: Mapping[str, Any]) -> CardKey:
    """The device's key from its facts (a one-line error without a compute
    capability)."""
    cc = compute_capability(facts)
    if cc is None:
        raise HilsimError(
            "device facts give no compute capability: cannot choose a base card (give --base)"
        )
    sms = facts.get("sm_count", facts.get("multiProcessorCount"))
    mem = device_memory(facts)
    return CardKey("device", cc, str(mem) if mem else None, int(sms) if sms else None)


def device_memory(facts: Mapping[str, Any]) -> str | None:
    """The device's memory type, else its family as the probe and the suite infer it
    from the bus width (``memory_family``: HBM / GDDR), else None."""
    mem = facts.get("memory_type") or facts.get("memoryType") or facts.get("memory_family")
    return str(mem) if mem else None
