"""Typed GPU timing configuration (``hilsim.timing/1``) with a source on every value.

A :class:`TimingConfig` describes a GPU the way the Accel-Sim tuner sees it (Accel-Sim
paper, Section II-C and Table IV): SM count and clocks, warps and registers per SM,
shared memory, L1/L2 geometry and latencies, DRAM latency/bandwidth/channels, and
per-unit latency and throughput. Values are *hardware* quantities (what a
microbenchmark or the device query reports); the simulator options derived from them
live in ``hilsim.simmodel.tuner`` and are emitted by ``hilsim.simmodel.accelsim``.

Every value is a :class:`Sourced`: the value, its unit and a :class:`Source`
(``kind`` = measured | device-query | preset | derived, plus a free-text ``detail``
such as ``"SM7_QV100.gpgpusim.config -gpgpu_n_clusters"``).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from typing import Any

from hilsim.core.errors import HilsimError
from hilsim.core.jsonfile import read_json

TIMING_SCHEMA = "hilsim.timing/1"
SOURCE_KINDS = ("measured", "device-query", "preset", "derived")

Scalar = int | float | str


@dataclass(frozen=True)
class Source:
    """Where a value comes from: ``kind`` (one of :data:`SOURCE_KINDS`) and ``detail``."""

    kind: str
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}" if self.detail else self.kind


@dataclass(frozen=True)
class Sourced:
    """A value with its unit and source."""

    value: Scalar
    unit: str
    source: Source


def _sf(vtype: type, unit: str | None) -> Any:
    """A ``Sourced | None`` dataclass field holding a ``vtype`` value in ``unit``."""
    return field(default=None, metadata={"vtype": vtype, "unit": unit})


@dataclass(frozen=True)
class CoreConfig:
    """SM-level resources (CUDA deviceProp / public whitepapers)."""

    sm_count: Sourced | None = _sf(int, "SMs")
    core_clock_mhz: Sourced | None = _sf(float, "MHz")
    boost_clock_mhz: Sourced | None = _sf(float, "MHz")
    warp_size: Sourced | None = _sf(int, "threads")
    max_threads_per_sm: Sourced | None = _sf(int, "threads")
    max_ctas_per_sm: Sourced | None = _sf(int, "CTAs")
    registers_per_sm: Sourced | None = _sf(int, "registers")
    registers_per_block: Sourced | None = _sf(int, "registers")
    shared_mem_per_sm: Sourced | None = _sf(int, "bytes")
    shared_mem_per_block: Sourced | None = _sf(int, "bytes")
    schedulers_per_sm: Sourced | None = _sf(int, "schedulers")
    launch_latency_cycles: Sourced | None = _sf(float, "cycles")
    atomic_latency_cycles: Sourced | None = _sf(float, "cycles")


@dataclass(frozen=True)
class CacheConfig:
    """A data cache (L1 per SM, or the whole L2)."""

    capacity_bytes: Sourced | None = _sf(int, "bytes")
    line_bytes: Sourced | None = _sf(int, "bytes")
    sector_bytes: Sourced | None = _sf(int, "bytes")
    sets: Sourced | None = _sf(int, "sets")
    assoc: Sourced | None = _sf(int, "ways")
    banks: Sourced | None = _sf(int, "banks")
    hit_latency_cycles: Sourced | None = _sf(float, "cycles")
    bandwidth: Sourced | None = _sf(float, None)  # bytes/clk (L2, whole GPU) or bytes/clk/SM (L1)


@dataclass(frozen=True)
class SharedMemConfig:
    """Shared memory (scratchpad) timing."""

    latency_cycles: Sourced | None = _sf(float, "cycles")
    banks: Sourced | None = _sf(int, "banks")
    bandwidth: Sourced | None = _sf(float, "bytes/clk/SM")


@dataclass(frozen=True)
class DramConfig:
    """Device memory."""

    type: Sourced | None = _sf(str, "")
    clock_mhz: Sourced | None = _sf(float, "MHz")
    bus_width_bits: Sourced | None = _sf(int, "bits")
    channels: Sourced | None = _sf(int, "channels")
    latency_cycles: Sourced | None = _sf(float, "cycles")
    bandwidth_gbs: Sourced | None = _sf(float, "GB/s")
    capacity_bytes: Sourced | None = _sf(int, "bytes")


@dataclass(frozen=True)
class UnitConfig:
    """An execution unit class (fp32, fp64, int32, sfu, fp16, tensor)."""

    count: Sourced | None = _sf(int, "units/SM")
    latency_cycles: Sourced | None = _sf(float, "cycles")
    throughput: Sourced | None = _sf(float, "ops/clk/SM")
    #: divide / remainder latency (GPGPU-Sim -ptx_opcode_latency_int/_fp 5th entry)
    div_latency_cycles: Sourced | None = _sf(float, "cycles")


UNIT_NAMES = ("fp32", "fp64", "int32", "sfu", "fp16", "tensor")


@dataclass(frozen=True)
class TimingConfig:
    """A GPU timing model; serialises to ``hilsim.timing/1``."""

    name: str
    compute_capability: Sourced | None = _sf(str, "")
    core: CoreConfig = field(default_factory=CoreConfig)
    l1: CacheConfig = field(default_factory=CacheConfig)
    l2: CacheConfig = field(default_factory=CacheConfig)
    shared: SharedMemConfig = field(default_factory=SharedMemConfig)
    dram: DramConfig = field(default_factory=DramConfig)
    units: dict[str, UnitConfig] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The ``hilsim.timing/1`` JSON object (only values that are set)."""
        out: dict[str, Any] = {"schema": TIMING_SCHEMA, "name": self.name}
        if self.compute_capability is not None:
            out["compute_capability"] = _sourced_json(self.compute_capability)
        for part in ("core", "l1", "l2", "shared", "dram"):
            out[part] = _section_json(getattr(self, part))
        out["units"] = {k: _section_json(v) for k, v in sorted(self.units.items())}
        out["notes"] = list(self.notes)
        return out

    def dumps(self) -> str:
        """JSON text (sorted sections, two-space indent, trailing newline)."""
        return json.dumps(self.to_json(), indent=2) + "\n"

    @classmethod
    def from_json(cls, data: Any, where: str = "timing config") -> TimingConfig:
        """Parse and validate a ``hilsim.timing/1`` object; errors name ``where`` and field."""
        if not isinstance(data, dict):
            raise HilsimError(f"{where}: expected a JSON object")
        if data.get("schema") != TIMING_SCHEMA:
            raise HilsimError(
                f"{where}: schema is {data.get('schema')!r}, expected {TIMING_SCHEMA!r}"
            )
        name = data.get("name")
        if not isinstance(name, str) or not name:
            raise HilsimError(f"{where}: name: expected a non-empty string")
        known = {"schema", "name", "compute_capability", "core", "l1", "l2", "shared", "dram"}
        known |= {"units", "notes"}
        extra = sorted(set(data) - known)
        if extra:
            raise HilsimError(f"{where}: unknown key {extra[0]!r}")
        cc = data.get("compute_capability")
        cfg = cls(
            name=name,
            compute_capability=None
            if cc is None
            else _parse_sourced(cc, str, "", where, "compute_capability"),
            core=_parse_section(CoreConfig, data.get("core", {}), where, "core"),
            l1=_parse_section(CacheConfig, data.get("l1", {}), where, "l1"),
            l2=_parse_section(CacheConfig, data.get("l2", {}), where, "l2"),
            shared=_parse_section(SharedMemConfig, data.get("shared", {}), where, "shared"),
            dram=_parse_section(DramConfig, data.get("dram", {}), where, "dram"),
            units=_parse_units(data.get("units", {}), where),
            notes=tuple(_parse_notes(data.get("notes", []), where)),
        )
        cfg.validate(where)
        return cfg

    def validate(self, where: str = "timing config") -> None:
        """Check types, units and ranges; raise a one-line ``HilsimError`` on the first fault."""
        if self.compute_capability is not None:
            _check(self.compute_capability, str, "", where, "compute_capability")
            cc = str(self.compute_capability.value)
            parts = cc.split(".")
            if len(parts) != 2 or not all(p.isdigit() for p in parts):
                raise HilsimError(f"{where}: compute_capability: {cc!r} is not MAJOR.MINOR")
        for part in ("core", "l1", "l2", "shared", "dram"):
            section = getattr(self, part)
            for f in fields(section):
                value = getattr(section, f.name)
                if value is not None:
                    _check(
                        value, f.metadata["vtype"], f.metadata["unit"], where, f"{part}.{f.name}"
                    )
        for uname, unit in self.units.items():
            if uname not in UNIT_NAMES:
                raise HilsimError(f"{where}: units: unknown unit {uname!r}")
            for f in fields(unit):
                value = getattr(unit, f.name)
                if value is not None:
                    _check(value, f.metadata["vtype"], None, where, f"units.{uname}.{f.name}")

    def get(self, dotted: str) -> Sourced | None:
        """The value at ``"l1.hit_latency_cycles"`` / ``"units.fp32.latency_cycles"``."""
        parts = dotted.split(".")
        obj: Any = self
        for p in parts:
            obj = obj.get(p) if isinstance(obj, dict) else getattr(obj, p, None)
            if obj is None:
                return None
        return obj if isinstance(obj, Sourced) else None

    def set(self, dotted: str, value: Sourced) -> TimingConfig:
        """A copy with the value at ``dotted`` replaced."""
        parts = dotted.split(".")
        if len(parts) == 1:
            return replace(self, **{parts[0]: value})
        if parts[0] == "units":
            units = dict(self.units)
            unit = units.get(parts[1], UnitConfig())
            units[parts[1]] = replace(unit, **{parts[2]: value})
            return replace(self, units=units)
        section = getattr(self, parts[0])
        return replace(self, **{parts[0]: replace(section, **{parts[1]: value})})

    def items(self) -> list[tuple[str, Sourced]]:
        """Every set value as ``(dotted path, Sourced)`` in a stable order."""
        out: list[tuple[str, Sourced]] = []
        if self.compute_capability is not None:
            out.append(("compute_capability", self.compute_capability))
        for part in ("core", "l1", "l2", "shared", "dram"):
            section = getattr(self, part)
            for f in fields(section):
                value = getattr(section, f.name)
                if value is not None:
                    out.append((f"{part}.{f.name}", value))
        for uname in sorted(self.units):
            for f in fields(self.units[uname]):
                value = getattr(self.units[uname], f.name)
                if value is not None:
                    out.append((f"units.{uname}.{f.name}", value))
        return out


def unit_for(dotted: str) -> str:
    """The declared unit of a dotted field (units.* throughputs: ``ops/clk/SM``)."""
    parts = dotted.split(".")
    if parts[0] == "compute_capability":
        return ""
    cls = {
        "core": CoreConfig,
        "l1": CacheConfig,
        "l2": CacheConfig,
        "shared": SharedMemConfig,
        "dram": DramConfig,
        "units": UnitConfig,
    }[parts[0]]
    name = parts[-1]
    for f in fields(cls):
        if f.name == name:
            return str(f.metadata["unit"] or "")
    raise KeyError(dotted)


def vtype_for(dotted: str) -> type:
    """The value type (int, float, str) of a dotted field."""
    parts = dotted.split(".")
    if parts[0] == "compute_capability":
        return str
    cls = {
        "core": CoreConfig,
        "l1": CacheConfig,
        "l2": CacheConfig,
        "shared": SharedMemConfig,
        "dram": DramConfig,
        "units": UnitConfig,
    }[parts[0]]
    for f in fields(cls):
        if f.name == parts[-1]:
            return f.metadata["vtype"]
    raise KeyError(dotted)


def read_timing(path: str | os.PathLike[str]) -> TimingConfig:
    """Read a ``timing.json`` file; one-line errors name the file."""
    return TimingConfig.from_json(read_json(path), str(Path(path)))


# --- helpers --------------------------------------------------------------------------


def _sourced_json(v: Sourced) -> dict[str, Any]:
    return {
        "value": v.value,
        "unit": v.unit,
        "source": {"kind": v.source.kind, "detail": v.source.detail},
    }


def _section_json(section: Any) -> dict[str, Any]:
    assert is_dataclass(section)
    return {
        f.name: _sourced_json(getattr(section, f.name))
        for f in fields(section)
        if getattr(section, f.name) is not None
    }


def _check(v: Sourced, vtype: type, unit: str | None, where: str, name: str) -> None:
    if not isinstance(v, Sourced):
        raise HilsimError(f"{where}: {name}: expected a sourced value")
    value = v.value
    if vtype is str:
        if not isinstance(value, str) or not value:
            raise HilsimError(f"{where}: {name}: expected a non-empty string, got {value!r}")
    elif vtype is int:
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise HilsimError(f"{where}: {name}: expected a positive integer, got {value!r}")
    else:
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value <= 0
        ):
            raise HilsimError(f"{where}: {name}: expected a positive number, got {value!r}")
    if unit is not None and v.unit != unit:
        raise HilsimError(f"{where}: {name}: unit {v.unit!r}, expected {unit!r}")
    if v.source.kind not in SOURCE_KINDS:
        raise HilsimError(
            f"{where}: {name}: source kind {v.source.kind!r} not one of {', '.join(SOURCE_KINDS)}"
        )


def _parse_sourced(raw: Any, vtype: type, unit: str | None, where: str, name: str) -> Sourced:
    if not isinstance(raw, dict) or "value" not in raw or "source" not in raw:
        raise HilsimError(f"{where}: {name}: expected {{value, unit, source}}")
    src = raw["source"]
    if not isinstance(src, dict) or not isinstance(src.get("kind"), str):
        raise HilsimError(f"{where}: {name}: source: expected {{kind, detail}}")
    value = raw["value"]
    if vtype is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    v = Sourced(
        value=value,
        unit=str(raw.get("unit", unit or "")),
        source=Source(src["kind"], str(src.get("detail", ""))),
    )
    _check(v, vtype, unit, where, name)
    return v


def _parse_section(cls: type, raw: Any, where: str, part: str) -> Any:
    if not isinstance(raw, dict):
        raise HilsimError(f"{where}: {part}: expected a JSON object")
    by_name = {f.name: f for f in fields(cls)}
    kwargs = {}
    for key, value in raw.items():
        f = by_name.get(key)
        if f is None:
            raise HilsimError(f"{where}: {part}: unknown field {key!r}")
        unit = f.metadata["unit"] if cls is not UnitConfig else None
        kwargs[key] = _parse_sourced(value, f.metadata["vtype"], unit, where, f"{part}.{key}")
    return cls(**kwargs)


def _parse_units(raw: Any, where: str) -> dict[str, UnitConfig]:
    if not isinstance(raw, dict):
        raise HilsimError(f"{where}: units: expected a JSON object")
    out = {}
    for name, section in raw.items():
        if name not in UNIT_NAMES:
            raise HilsimError(f"{where}: units: unknown unit {name!r}")
        out[name] = _parse_section(UnitConfig, section, where, f"units.{name}")
    return out


def _parse_notes(raw: Any, where: str) -> list[str]:
    if not isinstance(raw, list) or not all(isinstance(n, str) for n in raw):
        raise HilsimError(f"{where}: notes: expected a list of strings")
    return raw
