"""Measure GPGPU-Sim's option -> latency map on a card (see
:mod:`hilsim.simmodel.tuner.calibration` for the model and the file).

``hilsim gpgpusim calibrate SM7_QV100 [-o FILE]`` (:func:`write_calibration`) runs the
latency chases and the shared chase at a calibration point (the card's values raised by
``BASE``) and
once per option raised by ``STEP`` more, plus an empty-kernel launch at two
``-gpgpu_kernel_launch_latency`` values, and merges the result into the calibration
file under the card's compute capability.

``--units`` instead measures the execution units' map (``lat_{fp32,fp64,int32}`` with the
ADD/MAX/MUL/MAD entries of ``-ptx_opcode_latency_*`` at the card's MAD + 4 and + 20) into
``unit_latency_calibration.json``.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import subprocess
from pathlib import Path
from typing import Any

from hilsim.microbench import compute, latency, launch
from hilsim.simmodel.gpgpusim.build import find_build
from hilsim.simmodel.gpgpusim.cards import card_config
from hilsim.simmodel.gpgpusim.simdevice import GpgpusimDevice
from hilsim.simmodel.tuner.calibration import (
    FILE,
    LATENCY_OPTIONS,
    LAUNCH_OPTION,
    SCHEMA,
    UNIT_FILE,
    UNIT_OPTIONS,
    UNIT_SCHEMA,
    quantities,
)

from hilsim.core.files import write_text_atomic

BASE = {
    "-gpgpu_l1_latency": 8,
    "-gpgpu_l2_rop_latency": 20,
    "-dram_latency": 20,
    "-gpgpu_smem_latency": 8,
}
STEP = {
    "-gpgpu_l1_latency": 16,
    "-gpgpu_l2_rop_latency": 40,
    "-dram_latency": 40,
    "-gpgpu_smem_latency": 16,
}
LAUNCH_POINTS = (1000, 3000)
UNIT_POINTS = (4, 20)  # added to the card's MAD latency
STEPS = latency.CHASE_STEPS


def measure_point(device: GpgpusimDevice, options: dict[str, int]) -> dict[str, float]:
    """Latency measurements (by name) with ``options`` overriding the card."""
    at = dataclasses.replace(device, overrides={k: str(v) for k, v in options.items()})
    ms = latency.chase_latencies(at, steps=STEPS) + [latency.shared_latency(at, steps=STEPS)]
    bad = [m.name for m in ms if not m.valid]
    if bad:
        raise SystemExit(f"calibration run failed validation: {', '.join(bad)}")
    return {m.name: float(m.value) for m in ms if m.value is not None}


def _commit() -> str:
    """The hilsim commit the map is measured with (empty outside a git checkout)."""
    return subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).parent,
    ).stdout.strip()


def calibrate(card_name: str) -> dict[str, Any]:
    """The calibration entry for one card (runs the simulator ~10 times)."""
    build = find_build()
    card = card_config(card_name, build)
    device = GpgpusimDevice(card, build=build)
    own = {o: int(float(card.option(o))) for o in LATENCY_OPTIONS}
    base = {o: own[o] + BASE[o] for o in LATENCY_OPTIONS}
    points = []
    for j in range(-1, len(LATENCY_OPTIONS)):
        opts = dict(base)
        if j >= 0:
            opts[LATENCY_OPTIONS[j]] += STEP[LATENCY_OPTIONS[j]]
        values = measure_point(device, opts)
        points.append(
            {"options": opts, "measured": values, "quantities": quantities(values).tolist()}
        )
    launches = []
    for x in LAUNCH_POINTS:
        at = dataclasses.replace(device, overrides={LAUNCH_OPTION: str(x)})
        m = launch.launch_latency(at)[0]
        launches.append([x, m.params["cycles"]])
    return {
        "card": card.name,
        "build": build.key,
        "commit": _commit(),
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "card_values": own,
        "steps_per_chase": STEPS,
        "points": points,
        "launch": {"option": LAUNCH_OPTION, "points": launches},
        "runs": device.runs,
    }


def calibrate_units(card_name: str) -> dict[str, Any]:
    """The unit-latency entry for one card: per unit, two (MAD option, measured) points."""
    build = find_build()
    card = card_config(card_name, build)
    device = GpgpusimDevice(card, build=build)
    units: dict[str, Any] = {}
    for unit, option in UNIT_OPTIONS.items():
        entries = card.option(option).split(",")
        mad = int(float(entries[3]))
        points = []
        for add in UNIT_POINTS:
            value = mad + add
            mine = {option: ",".join([str(value)] * 4 + entries[4:])}
            m = compute.latency(dataclasses.replace(device, overrides=mine), unit)
            if not m.valid:
                raise SystemExit(f"unit calibration run failed: {m.note}")
            points.append([value, float(m.value)])
        units[unit] = {"option": option, "entry": "MAD (4th)", "card_value": mad, "points": points}
    return {
        "card": card.name,
        "build": build.key,
        "commit": _commit(),
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "units": units,
        "runs": device.runs,
    }


def write_calibration(
    card_name: str, output: Path | None = None, units: bool = False
) -> tuple[str, Path]:
    """Calibrate ``card_name`` (:func:`calibrate`, or :func:`calibrate_units` with
    ``units``) and merge its entry, under the card's compute capability, into ``output``
    (default: the shipped file beside :mod:`~hilsim.simmodel.tuner.calibration`).

    Returns the compute capability and the file written.
    """
    if output is None:
        output = Path(__file__).with_name(UNIT_FILE if units else FILE)
    card = card_config(card_name, find_build())
    cc = (
        f"{int(float(card.option('-gpgpu_compute_capability_major')))}."
        f"{int(float(card.option('-gpgpu_compute_capability_minor')))}"
    )
    entry = calibrate_units(card_name) if units else calibrate(card_name)
    data = {"schema": UNIT_SCHEMA if units else SCHEMA, "calibrations": {}}
    if output.is_file():
        data = json.loads(output.read_text())
    data["calibrations"][cc] = entry
    data["calibrations"] = dict(sorted(data["calibrations"].items()))
    return cc, write_text_atomic(output, json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    raise SystemExit(
        "calibrate: run `hilsim gpgpusim calibrate CARD [-o FILE] [--units]`"
    )
