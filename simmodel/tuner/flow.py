"""``tune``: measurements + device facts -> TimingConfig -> Accel-Sim config options.

The flow of Accel-Sim's tuner (Accel-Sim paper, Section II-C), documented in
``docs/tuner.md``: the nearest preset; its timing overlaid by Accel-Sim's printed
output, the device facts and the measurements; the options of the rule table; each
emitted option chosen by priority (printed > derived > preset).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from hilsim.simmodel.accelsim import UbenchOutput, read_ubench_output
from hilsim.simmodel.config import TimingConfig
from hilsim.simmodel.presets import Preset, all_presets, load_preset
from hilsim.simmodel.tuner.basecard import CardKey, choose, device_memory
from hilsim.simmodel.tuner.checks import capacity_checks, launch_latency_note
from hilsim.simmodel.tuner.conventions import CONVENTIONS
from hilsim.simmodel.tuner.dram import DRAM_MODELS, dram_model
from hilsim.simmodel.tuner.emission import OptionChooser, option_file
from hilsim.simmodel.tuner.engine import derive_options
from hilsim.simmodel.tuner.inputs import (
    check_device_facts,
    compute_capability,
    read_device_facts,
    read_microbench,
)
from hilsim.simmodel.tuner.overlay import (
    apply_device_facts,
    apply_measurements,
    apply_ubench_output,
    put,
)
from hilsim.simmodel.tuner.pipeline import fit_emitted, refuse_unrunnable
from hilsim.simmodel.tuner.result import TuneResult

from hilsim.core import measurement_names as mn
from hilsim.core.errors import HilsimError
from hilsim.core.measurement import Measurement

#: the prefix of the note saying which L2 sets and ways hold the device's L2 where
#: Accel-Sim's ``l2_config`` cannot (the console prints it)
L2_GEOMETRY_NOTE = "L2 geometry: "
#: the note on ``simulator-corrected`` offsets applied to hilsim's own chases
CORRECTED_ON_HILSIM_NOTE = (
    "simulator-corrected offsets come from Accel-Sim's own kernels on a TITAN V "
    "(shared_lat adds a dependent shift of ~5-8 cycles, mem_lat a 32 B stride); "
    "hilsim's chases are pure absolute-address chains, so the offsets are "
    "approximate for hilsim measurements (docs/microbench.md)"
)


def tune(
    *,
    measurements: Sequence[Measurement] | None = None,
    ubench: UbenchOutput | None = None,
    facts: dict[str, Any] | None = None,
    facts_where: str = "device facts",
    measurements_where: str = "",
    preset_name: str | None = None,
    convention: str = "accelsim-tuner",
) -> TuneResult:
    """Build the TimingConfig and the Accel-Sim options for one device.

    ``measurements`` are the rows :func:`~hilsim.simmodel.tuner.inputs.read_microbench`
    keeps; ``measurements_where`` (their file's name) and ``facts_where`` start the
    source detail of the values they set.
    """
    if convention not in CONVENTIONS:
        raise HilsimError(f"convention {convention!r} not one of {', '.join(CONVENTIONS)}")
    facts = dict(facts or {})
    check_device_facts(facts, facts_where)
    rows = list(measurements or [])
    preset, reason, name, cc, mismatches = _preset_for(facts, ubench, preset_name)
    cfg = replace(preset.timing, name=str(name or preset.name), notes=())
    if ubench is not None:
        cfg = apply_ubench_output(cfg, ubench)
    if facts:
        cfg = apply_device_facts(cfg, facts, facts_where)
    boost = cfg.get("core.boost_clock_mhz")
    if (
        ubench is None
        and boost is not None
        and boost.source.kind == "device-query"
        and not any(r.name == mn.SM_CLOCK_MHZ for r in rows)
    ):  # no clock under load was measured (e.g. a simulated card): the queried max clock
        cfg = put(
            cfg,
            "core.core_clock_mhz",
            boost.value,
            None,
            "device-query",
            f"{boost.source.detail} (no {mn.SM_CLOCK_MHZ} measurement: the max SM clock)",
        )
    if rows:
        cfg = apply_measurements(cfg, rows, measurements_where)
    cfg = _derive_channels(cfg)
    cfg.validate(f"tuned timing for {cfg.name}")
    result = TuneResult(cfg, preset, reason, convention)
    result.notes.extend(mismatches)
    result.notes.extend(capacity_checks(cfg, rows))
    if rows and convention == "simulator-corrected":
        result.notes.append(CORRECTED_ON_HILSIM_NOTE)
    launch_note = launch_latency_note(rows, cfg)
    if launch_note is not None:
        result.notes.append(launch_note)
    derived = {d.name: d for d in derive_options(cfg, preset, convention, _same_run(ubench))}
    result.notes.extend(
        f"{d.name}: {d.note[d.note.index('below the simulator'):]}" for d in derived.values()
        if "pipeline floor" in d.note
    )
    dl2 = derived.get("-gpgpu_cache:dl2")
    if dl2 is not None and dl2.note:  # sets and ways chosen beyond Accel-Sim's l2_config
        result.notes.append(f"{L2_GEOMETRY_NOTE}-gpgpu_cache:dl2 {dl2.value}: {dl2.note}")
    printed = ubench.options if ubench is not None else {}
    chooser = OptionChooser(cfg, preset, convention, ubench)
    # emission: preset option lists, then new options; each value chosen by priority
    seen: set[str] = set()
    for fname, shipped in (("gpgpusim.config", preset.gpgpusim), ("trace.config", preset.trace)):
        for opt in shipped:
            seen.add(opt.name)
            result.options.append(
                chooser.choose(fname, opt.name, opt, derived.get(opt.name), printed.get(opt.name))
            )
    for n in dict.fromkeys(n for n in [*derived, *printed] if n not in seen):
        result.options.append(
            chooser.choose(option_file(n), n, None, derived.get(n), printed.get(n))
        )
    result.notes.extend(fit_emitted(result.options))
    refuse_unrunnable({o.name: o.value for o in result.options}, "tune")
    return result



def tune_files(
    microbench: str | os.PathLike[str] | None = None,
    *,
    accelsim_output: str | os.PathLike[str] | None = None,
    device_facts: str | os.PathLike[str] | None = None,
    preset_name: str | None = None,
    convention: str = "accelsim-tuner",
) -> TuneResult:
    """:func:`tune` on files: ``microbench.json``, Accel-Sim's printed output, device facts.

    The device facts file's keys win over the ``device`` block of ``microbench.json``.
    Needs at least one of ``microbench``, ``accelsim_output`` and ``preset_name``.
    """
    if microbench is None and accelsim_output is None and preset_name is None:
        raise HilsimError("tune: give MICROBENCH.json, --accelsim-output FILE or --preset NAME")
    measurements, facts, where, source = None, {}, "device facts", ""
    if microbench is not None:
        measurements, facts = read_microbench(microbench)
        source = Path(microbench).name
        where = f"{source} device"
    if device_facts is not None:
        facts = {**facts, **read_device_facts(device_facts)}
        where = Path(device_facts).name
    ubench = read_ubench_output(accelsim_output) if accelsim_output is not None else None
    return tune(
        measurements=measurements,
        ubench=ubench,
        facts=facts,
        facts_where=where,
        measurements_where=source,
        preset_name=preset_name,
        convention=convention,
    )


def _preset_for(
    facts: dict[str, Any], ubench: UbenchOutput | None, preset_name: str | None
) -> tuple[Preset, str, Any, Any, list[str]]:
    """(preset, why, device name, compute capability, mismatches): ``--preset``, else the
    closest by compute capability, memory type and SM count
    (:func:`hilsim.simmodel.tuner.basecard.choose`); the device's name is never used
    to choose (it only names the output)."""
    name = facts.get("name") or (ubench.device_name if ubench else None)
    if isinstance(name, bytes):
        name = name.decode("utf-8", "replace")
    cc = compute_capability(facts)
    if cc is None and ubench is not None:  # the capability Accel-Sim's tuner printed
        printed = {part: ubench.options.get(f"-gpgpu_compute_capability_{part}")
                   for part in ("major", "minor")}
        cc = compute_capability({k: o.value for k, o in printed.items() if o})
    if preset_name:
        return load_preset(preset_name), "chosen with --preset", name, cc, []
    if cc is None:
        raise HilsimError("cannot choose a preset: no compute capability in the device facts; "
                          "pass --preset or --device-facts")
    mem = device_memory(facts)
    sms = facts.get("sm_count") or facts.get("multiProcessorCount")
    device = CardKey("device", str(cc), str(mem) if mem else None, int(sms) if sms else None)
    presets = all_presets()
    keys = [CardKey(p.name, p.compute_capability, _timing(p, "dram.type"),
                    _timing(p, "core.sm_count")) for p in presets]
    choice = choose(device, keys)
    mismatches = [m.replace("base ", "preset ", 1) for m in choice.mismatches]
    preset = next(p for p in presets if p.name == choice.name)
    return preset, choice.reason, name, cc, mismatches


def _timing(preset: Preset, dotted: str) -> Any:
    value = preset.timing.get(dotted)
    return None if value is None else value.value


def _derive_channels(cfg: TimingConfig) -> TimingConfig:
    """Channels from bus width and memory type, unless given (or only the preset's)."""
    bus, mtype, chans = cfg.get("dram.bus_width_bits"), cfg.get("dram.type"), cfg.get(
        "dram.channels"
    )
    if bus is None or mtype is None:
        return cfg
    if chans is not None and not (chans.source.kind == "preset" and bus.source.kind != "preset"):
        return cfg
    cw = DRAM_MODELS[dram_model(str(mtype.value))].channel_bits
    return put(
        cfg,
        "dram.channels",
        int(bus.value) // cw,
        None,
        "derived",
        f"bus width {bus.value} / {cw}-bit channel",
    )


def _same_run(ubench: UbenchOutput | None) -> dict[str, float]:
    """The L1 (L2) latency printed in the same run as the L2 (DRAM) latency."""
    pairs: dict[str, float] = {}
    if ubench is not None:
        for key, val in (
            ("l1_for_l2", "l1_hit_latency@l2_lat"),
            ("l2_for_dram", "l2_hit_latency@mem_lat"),
        ):
            if val in ubench.values:
                pairs[key] = float(ubench.values[val].value)
    return pairs
