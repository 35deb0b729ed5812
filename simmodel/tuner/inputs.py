"""The tuner's input files: ``microbench.json`` and a device-facts JSON.

``microbench.json`` (``hilsim.microbench/1``) is read through
:func:`hilsim.core.measurement.read_microbench_json`, the one reader of the file the
microbenchmark suite writes (Accel-Sim paper, Section II-C: the facts the tuner
consumes); this module keeps the rows the tuner uses and checks them against
:mod:`hilsim.core.measurement_names`.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from hilsim.core import measurement_names as mn
from hilsim.core.errors import HilsimError
from hilsim.core.jsonfile import read_json
from hilsim.core.measurement import Measurement, read_microbench_json


def tuner_measurements(
    measurements: Iterable[Measurement], where: str = "measurements"
) -> list[Measurement]:
    """The rows the tuner uses, checked; ``where`` prefixes errors (``FILE: measurements``).

    Rows named in :data:`~hilsim.core.measurement_names.SUITE_ONLY` (recorded for the
    report) and rows that failed their own validation (``valid`` false) are skipped, so
    the preset value stays. Any other row must carry a known name, a positive finite
    value and exactly its declared unit; otherwise a one-line :class:`HilsimError`.
    """
    out = []
    for i, m in enumerate(measurements):
        at = f"{where}[{i}] ({m.name})"
        if m.name in mn.SUITE_ONLY or not m.valid:
            continue
        if m.name not in mn.MEASUREMENTS:
            raise HilsimError(
                f"{where}[{i}]: unknown measurement name {m.name!r} "
                "(see hilsim/core/measurement_names.py)"
            )
        check_measurement_value(m, at)
        if m.unit != mn.unit_of(m.name):
            raise HilsimError(f"{at}: unit {m.unit!r}, expected {mn.unit_of(m.name)!r}")
        out.append(m)
    return out


def check_measurement_value(m: Measurement, at: str) -> None:
    """A valid row's value: a positive finite number, and a clock (MHz) one a GPU runs at
    (a clock that rounds to 0 MHz makes a card the simulator never finishes on)."""
    if m.value is None or not math.isfinite(m.value) or m.value <= 0:
        raise HilsimError(f"{at}: value {m.value!r} is not a positive number")
    if m.unit == "MHz" and not 1 <= m.value <= 100_000:
        raise HilsimError(f"{at}: value {m.value!r} MHz is not a clock a GPU runs at "
                          "(1..100000 MHz)")


def read_microbench(path: str | os.PathLike[str]) -> tuple[list[Measurement], dict[str, Any]]:
    """Read ``microbench.json``: the measurements the tuner uses and the device block."""
    p = Path(path)
    measurements, device = read_microbench_json(p)
    check_device_facts(device, f"{p}: device")
    return tuner_measurements(measurements, f"{p}: measurements"), device


def _fact_number(value: Any) -> float | None:
    """A fact's number (numbers, or text such as ``"132"``); None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def check_device_facts(facts: Mapping[str, Any], where: str) -> None:
    """Refuse, in one line naming ``where`` and the key, a device fact the tuner reads
    that is not a number a GPU can have (:data:`~hilsim.core.measurement_names.FACT_RANGES`,
    in the timing field's unit) or a compute capability that is not ``MAJOR.MINOR``. Every
    key a fact is written under is checked (the tuner takes the first present)."""
    for fact in mn.DEVICE_FACTS:
        bounds = mn.FACT_RANGES.get(fact.field)
        for key in fact.keys:
            value = facts.get(key)
            if value in (None, ""):
                continue
            if bounds is None:  # text (the memory type)
                if not isinstance(value, str):
                    raise HilsimError(f"{where}: {key} must be text, got {value!r}"[:300])
                continue
            number = _fact_number(value)
            low, high, integral = bounds
            scaled = None if number is None else number * fact.scale
            if (
                scaled is None
                or not math.isfinite(scaled)
                or not low <= scaled <= high
                or (integral and not float(number).is_integer())
            ):
                unit = "" if fact.scale == 1 else f" (x {fact.scale:g} = {fact.field})"
                raise HilsimError(
                    f"{where}: {key} {str(value)[:40]!r}{unit} is not a value a GPU has "
                    f"({'an integer ' if integral else ''}{low:g}..{high:g})"
                )
    for key in ("cc_major", "cc_minor", "major", "minor"):
        value = facts.get(key)
        if value is not None and not re.fullmatch(r"[0-9]{1,2}", str(value), re.ASCII):
            raise HilsimError(f"{where}: {key} {str(value)[:40]!r} is not a compute "
                              "capability's MAJOR or MINOR (0..99)")
    cc = compute_capability(facts)
    if cc is not None and not re.fullmatch(r"[0-9]{1,2}(\.[0-9]{1,2})?", cc, re.ASCII):
        raise HilsimError(
            f"{where}: compute capability {cc[:40]!r} is not MAJOR.MINOR (e.g. 9.0)"
        )


def describe_measurement(m: Measurement, where: str = "") -> str:
    """A measurement's provenance: ``[where ]name, N samples[, spread S]``."""
    text = f"{where} {m.name}" if where else m.name
    text += f", {len(m.samples)} samples"
    if math.isfinite(m.spread):
        text += f", spread {m.spread:g}"
    return text


def compute_capability(facts: Mapping[str, Any]) -> str | None:
    """The compute capability in device facts as ``MAJOR.MINOR`` text: ``compute_capability``
    (text, or a ``[major, minor]`` list), else a major and minor pair (``cc_major`` /
    ``cc_minor``, or cudaDeviceProp's ``major`` / ``minor``); None when neither is there."""
    cc = facts.get("compute_capability")
    if cc is None:
        major = facts.get("cc_major", facts.get("major"))
        minor = facts.get("cc_minor", facts.get("minor"))
        if major is not None and minor is not None:
            cc = f"{major}.{minor}"
    if isinstance(cc, list | tuple):
        cc = ".".join(str(x) for x in cc)
    return None if cc is None else str(cc)


def read_device_facts(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a device-facts JSON file (a probe's ``device`` object, or a flat object)."""
    p = Path(path)
    data = read_json(p)
    if isinstance(data, dict) and isinstance(data.get("device"), dict):
        data = data["device"]
    if not isinstance(data, dict):
        raise HilsimError(f"{p}: expected a JSON object of device facts")
    check_device_facts(data, str(p))
    return data
