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
        if m.value is None or not math.isfinite(m.value) or m.value <= 0:
            raise HilsimError(f"{at}: value {m.value!r} is not a positive number")
        if m.unit != mn.unit_of(m.name):
            raise HilsimError(f"{at}: unit {m.unit!r}, expected {mn.unit_of(m.name)!r}")
        out.append(m)
    return out


def read_microbench(path: str | os.PathLike[str]) -> tuple[list[Measurement], dict[str, Any]]:
    """Read ``microbench.json``: the measurements the tuner uses and the device block."""
    p = Path(path)
    measurements, device = read_microbench_json(p)
    return tuner_measurements(measurements, f"{p}: measurements"), device


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
    return data
