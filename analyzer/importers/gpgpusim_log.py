"""A GPGPU-Sim log as a profile bundle (``hilsim import``, ``validate --sim``): the tables
:func:`hilsim.simmodel.gpgpusim.logprofile.parse_gpgpusim_log` reads from the log, with
the manifest of a simulated device and the simulator as its profiler."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hilsim.simmodel.gpgpusim.logprofile import parse_gpgpusim_log
from hilsim.simmodel.simlog import read_log_text

from hilsim.core.bundle import Bundle, default_manifest


def bundle_from_gpgpusim_log(
    path: str | Path, clock_mhz: float | None = None, card: str | None = None
) -> Bundle:
    """An in-memory bundle from one GPGPU-Sim log file (see :func:`parse_gpgpusim_log`)."""
    source = Path(path)
    text = read_log_text(source)  # plain or gzip (shipped logs are sim.log.gz)
    parsed = parse_gpgpusim_log(text, str(source), clock_mhz)
    facts = parsed.facts
    device: dict[str, Any] = {
        "name": f"GPGPU-Sim {card}" if card else "GPGPU-Sim simulated GPU",
        "simulated": True,
        "max_sm_clock_mhz": facts["core_clock_mhz"],
    }
    if card:
        device["card"] = card
    if "sm_count" in facts:
        device["sm_count"] = facts["sm_count"]
    profiler: dict[str, Any] = {
        "name": "gpgpu-sim",
        "level": "light+detailed",
        "version": facts["simulator_version"],
        "file": source.name,
        "clock_mhz": facts["core_clock_mhz"],
        "total_cycles": facts["total_cycles"],
        "metrics": "per-kernel statistics; cumulative counters differenced (simlog)",
    }
    source_info: dict[str, Any] = {"files": [str(source)], "format": "gpgpusim-log"}
    if facts["full_run_launch_ids"] is not None:
        ids = facts["full_run_launch_ids"]
        if ids != list(range(len(ids))):
            source_info["full_run_launch_ids"] = ids
    manifest = default_manifest(device=device, profilers=[profiler], source=source_info)
    manifest["n_launches"] = len(parsed.launches)
    return Bundle(launches=parsed.launches, metrics=parsed.metrics, regions=parsed.regions,
                  manifest=manifest)


__all__ = ["bundle_from_gpgpusim_log"]
