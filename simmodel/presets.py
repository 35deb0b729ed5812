"""Shipped GPU presets: a :class:`~hilsim.simmodel.config.TimingConfig` plus Accel-Sim options.

Each ``presets/NAME.json`` (schema ``hilsim.preset/1``) holds the timing values of one
card, each with its source (a shipped Accel-Sim config file and option, the Accel-Sim
paper's Table IV, or a named NVIDIA document), and the full option lists of the
card's shipped ``gpgpusim.config`` and ``trace.config`` (Accel-Sim paper, Section IV:
one tuned configuration per GPU generation). The tuner starts from the nearest preset
and replaces what was measured.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from hilsim.simmodel.config import TimingConfig, read_timing

from hilsim.core.errors import HilsimError

PRESET_SCHEMA = "hilsim.preset/1"
PRESET_NAMES = ("QV100", "RTX2060", "RTX3070", "H100-SXM")


@dataclass(frozen=True)
class PresetOption:
    """One Accel-Sim option of a preset, with its source."""

    name: str
    value: str
    source: str


@dataclass(frozen=True)
class Preset:
    """A shipped GPU preset."""

    name: str
    aliases: tuple[str, ...]
    compute_capability: str
    description: str
    timing: TimingConfig
    gpgpusim: tuple[PresetOption, ...]
    trace: tuple[PresetOption, ...]
    options_from_timing: bool

    def option(self, name: str) -> PresetOption | None:
        """The preset's value of an option (gpgpusim.config first, then trace.config)."""
        for opt in (*self.gpgpusim, *self.trace):
            if opt.name == name:
                return opt
        return None


def _options(raw: Any, where: str, key: str) -> tuple[PresetOption, ...]:
    if not isinstance(raw, list):
        raise HilsimError(f"{where}: {key}: expected a list of options")
    out = []
    for i, item in enumerate(raw):
        if (not isinstance(item, dict) or not str(item.get("option", "")).startswith("-")
                or not isinstance(item.get("value"), str) or not item.get("source")):
            raise HilsimError(f"{where}: {key}[{i}]: expected {{option, value, source}}")
        out.append(PresetOption(item["option"], item["value"], str(item["source"])))
    return tuple(out)


def parse_preset(data: Any, where: str) -> Preset:
    """Validate a ``hilsim.preset/1`` object."""
    if not isinstance(data, dict) or data.get("schema") != PRESET_SCHEMA:
        raise HilsimError(f"{where}: expected schema {PRESET_SCHEMA!r}")
    for key in ("name", "compute_capability", "description"):
        if not isinstance(data.get(key), str):
            raise HilsimError(f"{where}: {key}: expected a string")
    timing = TimingConfig.from_json(data.get("timing"), f"{where}: timing")
    return Preset(
        name=data["name"],
        aliases=tuple(str(a) for a in data.get("aliases", [])),
        compute_capability=data["compute_capability"],
        description=data["description"],
        timing=timing,
        gpgpusim=_options(data.get("gpgpusim"), where, "gpgpusim"),
        trace=_options(data.get("trace"), where, "trace"),
        options_from_timing=bool(data.get("options_from_timing", False)),
    )


def load_preset(name: str) -> Preset:
    """Load a shipped preset by name or alias (case-insensitive)."""
    wanted = _norm(name)
    for pname in PRESET_NAMES:
        preset = _load(pname)
        if wanted in {_norm(pname), *(_norm(a) for a in preset.aliases)}:
            return preset
    raise HilsimError(f"unknown preset {name!r}; choose one of {', '.join(PRESET_NAMES)}")


def all_presets() -> list[Preset]:
    """Every shipped preset."""
    return [_load(n) for n in PRESET_NAMES]


def _norm(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


_CACHE: dict[str, Preset] = {}


def _load(name: str) -> Preset:
    if name not in _CACHE:
        ref = resources.files("hilsim.simmodel") / "presets" / f"{name}.json"
        where = f"simmodel/presets/{name}.json"
        try:
            data = json.loads(ref.read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError) as exc:
            raise HilsimError(f"{where}: cannot read preset ({exc})") from None
        _CACHE[name] = parse_preset(data, where)
    return _CACHE[name]


def load_timing_config(spec: str) -> TimingConfig:
    """A timing.json path or a preset name."""
    path = Path(spec)
    if path.suffix == ".json" or path.exists():
        return read_timing(path)
    try:
        return load_preset(spec).timing
    except HilsimError:
        raise HilsimError(f"--config {spec!r}: no such timing.json and not a preset "
                          f"({', '.join(PRESET_NAMES)})") from None
