"""The tuned card: the base card's config with every option the tuner sets, each with
where its value comes from, written as a runnable card folder.

Accel-Sim (Khairy et al., ISCA 2020), Section II-C: the tuner writes a configuration
from the device query and the microbenchmarks. Each option of a tuned card is one of

* ``measured``: set in the loop until the simulated microbenchmark meets the measured one
  (:mod:`hilsim.simmodel.tuner.search`);
* ``device``: a fact the device reports about itself (SM count, clocks, cache and shared
  memory sizes, registers): read, not recovered;
* ``derived``: follows from the two above and the base card's structure (the L2 sets,
  and the ways where the base's cannot, that keep the device's L2 size over the tuned
  channels; the partition indexing when
  the base's does not fit the channel count; the interconnect's size);
* ``base``: the base card's own value, unchanged (every other option).

:func:`device_settings` gives the device rows, :func:`config_text` the file (the base
card's text with each set option replaced where it stands, a comment above it saying
its kind and source), :func:`write_card` the folder (config + the files it names).
"""

from __future__ import annotations

import math
import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hilsim.simmodel.accelsim import OptionLine, format_value
from hilsim.simmodel.gpgpusim.cards import INT_LIST_DEFAULTS, CardConfig
from hilsim.simmodel.gpgpusim.runnable import ipoly_fits
from hilsim.simmodel.gpgpusim.unitprobe import ENTRY_NAMES
from hilsim.simmodel.tuner.geometry import L2Geometry, bank_geometry
from hilsim.simmodel.tuner.inputs import compute_capability

from hilsim.core import measurement_names as mn
from hilsim.core.errors import HilsimError

KINDS = ("measured", "device", "derived", "base")


@dataclass
class Setting:
    """One option's tuned value and where it comes from."""

    option: str
    value: str
    kind: str
    detail: str


def _num(value: Any) -> float:
    return float(str(value).split()[0].split(",")[0])


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.6g}"


#: timing field -> the key :func:`canonical_facts` stores it under
_FACT_KEYS = {
    "core.sm_count": "sm_count",
    "core.boost_clock_mhz": "max_sm_clock_mhz",
    "dram.clock_mhz": "max_mem_clock_mhz",
    "l2.capacity_bytes": "l2_cache_bytes",
    "dram.bus_width_bits": "memory_bus_width_bits",
    "core.registers_per_sm": "regs_per_sm",
    "core.shared_mem_per_sm": "shared_mem_per_sm_bytes",
    "core.shared_mem_per_block": "shared_mem_per_block_bytes",
    "core.max_threads_per_sm": "max_threads_per_sm",
    "core.warp_size": "warp_size",
    "l1.capacity_bytes": "unified_l1_shared_bytes",
    "dram.type": "memory_type",
}


def canonical_facts(facts: Mapping[str, Any]) -> dict[str, Any]:
    """Device facts under one name each, whichever writer's keys they came in
    (cudaDeviceProp, ``agent probe``, the suite: the tuner's table,
    :data:`hilsim.core.measurement_names.DEVICE_FACTS`, first key present wins)."""
    out: dict[str, Any] = {}
    for fact in mn.DEVICE_FACTS:
        key = _FACT_KEYS.get(fact.field)
        if key is None or key in out:
            continue
        for name in fact.keys:
            value = facts.get(name)
            if value not in (None, ""):
                out[key] = value if fact.field == "dram.type" else float(value) * fact.scale
                break
    cc = compute_capability(facts)
    if cc is not None:
        out["compute_capability"] = cc
    return out


def list_entries(card: CardConfig, option: str) -> list[str]:
    """A list option's entries (``-ptx_opcode_*``), completed to the length GPGPU-Sim
    reads (the integer lists have six: a shorter list leaves SHFL unset in the
    simulator) with GPGPU-Sim's own defaults."""
    given = [p.strip() for p in card.option(option, "").split(",") if p.strip()]
    default = INT_LIST_DEFAULTS.get(option)
    if default is not None:
        full = default.split(",")
        given = given + full[len(given):]
    return given


@dataclass(frozen=True)
class ClockDomains:
    """``-gpgpu_clock_domains``: core, interconnect, L2, DRAM (command clock) in MHz."""

    core: float
    icnt: float
    l2: float
    dram: float

    def text(self) -> str:
        """The option value."""
        return ":".join(_fmt(round(x, 3)) for x in (self.core, self.icnt, self.l2, self.dram))


def core_clock(facts: Mapping[str, Any], measured: Mapping[str, float]) -> tuple[float, str]:
    """The SM clock: the clock measured under load (``sm_clock_mhz``) where the suite
    measured one, else the device's maximum SM clock."""
    if measured.get("sm_clock_mhz"):
        return float(measured["sm_clock_mhz"]), "sm_clock_mhz (measured under load)"
    if facts.get("max_sm_clock_mhz"):
        return float(facts["max_sm_clock_mhz"]), "device max SM clock"
    raise HilsimError("device facts give no SM clock (max_sm_clock_mhz)")


def clock_domains(
    base: CardConfig, facts: Mapping[str, Any], measured: Mapping[str, float]
) -> tuple[ClockDomains, dict[str, str]]:
    """The tuned clock domains before the loop (the interconnect and L2 clocks at the base
    card's ratio to its core clock) and each part's source."""
    core, core_src = core_clock(facts, measured)
    b_core, b_icnt, b_l2, b_dram = base.clock_domains_mhz
    ratio = float(_num(base.option("-dram_data_command_freq_ratio", "2")))
    dram, dram_src = b_dram, "base card"
    mem = facts.get("max_mem_clock_mhz")
    if mem:
        dram = float(mem) * 2 / ratio
        dram_src = f"device max_mem_clock_mhz {float(mem):g} x 2 / command ratio {ratio:g}"
    out = ClockDomains(core, core * b_icnt / b_core, core * b_l2 / b_core, dram)
    parts = dict(zip(("core", "interconnect", "L2", "DRAM"), (out.core, out.icnt, out.l2,
                                                               out.dram), strict=True))
    for part, mhz in parts.items():
        # GPGPU-Sim runs a 0 MHz domain forever (the option is written to 3 decimals)
        if not (math.isfinite(mhz) and 1 <= round(mhz, 3) <= 100_000):
            raise HilsimError(
                f"the {part} clock would be {mhz:.6g} MHz (-gpgpu_clock_domains "
                f"{out.text()}; from {core_src}): a clock must be 1..100000 MHz"
            )
    sources = {
        "core": core_src,
        "icnt": f"base card's interconnect:core ratio {b_icnt / b_core:g}",
        "l2": f"base card's L2:core ratio {b_l2 / b_core:g}",
        "dram": dram_src,
    }
    return out, sources


def dl2_parts(base: CardConfig) -> tuple[int, int, int, str, str]:
    """(sets, line, assoc, set-index letter, the rest) of the base's ``-gpgpu_cache:dl2``."""
    value = base.option("-gpgpu_cache:dl2")
    head, _, rest = value.partition(",")
    m = re.match(r"^[A-Z]:(\d+):(\d+):(\d+)$", head.strip())
    policy = rest.split(",")[0].split(":")
    if not m or len(policy) < 5:
        raise HilsimError(f"{base.path}: -gpgpu_cache:dl2 {value!r} is not S:sets:line:assoc,...")
    return int(m[1]), int(m[2]), int(m[3]), policy[4], rest


def _l2_banks(channels: int, base: CardConfig) -> int:
    return channels * int(_num(base.option("-gpgpu_n_sub_partition_per_mchannel", "1")))


def l2_bank(l2_bytes: int, channels: int, base: CardConfig) -> L2Geometry:
    """The L2 bank (sets, ways, set index, note) that holds ``l2_bytes`` over ``channels``
    of the base's sub-partitions, from the base's line, ways and set index
    (:func:`~hilsim.simmodel.tuner.geometry.bank_geometry`)."""
    _sets, line, assoc, index, _rest = dl2_parts(base)
    return bank_geometry(l2_bytes, _l2_banks(channels, base), line, assoc, index)


def _holds(l2_bytes: int, channels: int, base: CardConfig) -> L2Geometry | None:
    try:
        return l2_bank(l2_bytes, channels, base)
    except HilsimError:
        return None


def valid_channel_counts(
    l2_bytes: int | None, base: CardConfig, upto: int = 256
) -> tuple[int, ...]:
    """Channel counts whose L2 banks (the base's line and sub-partitions; sets and ways
    chosen, :func:`l2_bank`) hold the device's L2, exactly or within the size tolerance
    (the channels set the bandwidth; a count the L2 does not divide into is held to the
    nearest size the simulator represents, and the note says so)."""
    if not l2_bytes:
        return tuple(range(1, upto + 1))
    return tuple(n for n in range(1, upto + 1) if _holds(int(l2_bytes), n, base) is not None)


def dl2_value(l2_bytes: int, channels: int, base: CardConfig) -> tuple[str, str]:
    """``-gpgpu_cache:dl2`` for the device's L2 over ``channels`` and a note saying what
    was chosen (sets; ways and set index where the base's do not fit)."""
    b_sets, line, _assoc, index, rest = dl2_parts(base)
    g = l2_bank(l2_bytes, channels, base)
    banks = _l2_banks(channels, base)
    note = (f"sets {b_sets} -> {g.sets}: L2 {l2_bytes} B over {channels} channels "
            f"({banks} banks of {g.sets} x {line} B x {g.assoc} ways)")
    if g.note:
        note += f"; {g.note}"
    if g.index != index:
        policy = rest.split(",")
        parts = policy[0].split(":")
        parts[4] = g.index
        policy[0] = ":".join(parts)
        rest = ",".join(policy)
    return f"S:{g.sets}:{line}:{g.assoc},{rest}", note


def partition_indexing(channels: int, base: CardConfig) -> tuple[str, str]:
    """``-gpgpu_memory_partition_indexing``: the base's, unless it cannot hash this many
    channels evenly, then consecutive (0). IPOLY (2) hashes a power of two of L2 slices
    (16, 32 or 64 with the sub-partitions): at any other channel count GPGPU-Sim folds the
    next power of two's hash modulo the slices, which loads some channels more than
    others (``addrdec.cc``; measured: SM7_QV100's structure at 12 channels streams 25 %
    below its slice with IPOLY, 5 % with consecutive indexing); bitwise XOR (1) needs a
    power of two."""
    value = base.option("-gpgpu_memory_partition_indexing", "0").split()[0]
    sub = int(_num(base.option("-gpgpu_n_sub_partition_per_mchannel", "1")))
    ok = {"2": ipoly_fits(channels, sub), "1": channels & (channels - 1) == 0}.get(value, True)
    if ok:
        return value, "base card"
    why = ("hashes only a power of two of 16, 32 or 64 L2 slices evenly"
           if value == "2" else "needs a power-of-two channel count")
    return "0", f"base's {value} {why}, not {channels} x {sub}: consecutive (0)"


def device_settings(
    base: CardConfig, facts: Mapping[str, Any], measured: Mapping[str, float]
) -> list[Setting]:
    """The options the device's facts set (kind ``device``): SMs, compute capability,
    registers, threads, shared memory and the unified L1 size, in base-card terms."""
    out: list[Setting] = []

    def put(option: str, value: Any, detail: str) -> None:
        out.append(Setting(option, str(value), "device", detail))

    cc = facts.get("compute_capability")
    if cc:
        major, _, minor = str(cc).partition(".")
        put("-gpgpu_compute_capability_major", int(major), "device compute_capability")
        put("-gpgpu_compute_capability_minor", int(minor or 0), "device compute_capability")
    sms = facts.get("sm_count")
    if sms:
        per = int(_num(base.option("-gpgpu_n_cores_per_cluster", "1")))
        if int(sms) % per:
            put("-gpgpu_n_cores_per_cluster", 1, f"device sm_count {sms} is not a multiple "
                f"of the base's {per} SMs per cluster")
            per = 1
        put("-gpgpu_n_clusters", int(sms) // per,
            f"device sm_count {sms} / {per} SM per cluster (base)")
    for key, options in (
        ("regs_per_sm", ("-gpgpu_shader_registers",)),
        ("shared_mem_per_sm_bytes", ("-gpgpu_shmem_size", "-gpgpu_shmem_sizeDefault")),
        ("shared_mem_per_block_bytes", ("-gpgpu_shmem_per_block",)),
    ):
        if facts.get(key):
            for option in options:
                put(option, int(facts[key]), f"device {key}")
    threads, warp = facts.get("max_threads_per_sm"), facts.get("warp_size")
    if threads and warp:
        put("-gpgpu_shader_core_pipeline", f"{int(threads)}:{int(warp)}",
            "device max_threads_per_sm:warp_size")
    if facts.get("unified_l1_shared_bytes"):
        put("-gpgpu_unified_l1d_size", int(facts["unified_l1_shared_bytes"]) // 1024,
            "device unified_l1_shared_bytes / 1024")
    return out


def icnt_nodes(text: str) -> int | None:
    """Nodes of a booksim ``fly`` network (k^n), None for another topology."""
    topo = re.search(r"^\s*topology\s*=\s*(\w+)\s*;", text, re.M)
    k = re.search(r"^\s*k\s*=\s*(\d+)\s*;", text, re.M)
    n = re.search(r"^\s*n\s*=\s*(\d+)\s*;", text, re.M)
    if not (topo and k and n) or topo[1] != "fly":
        return None
    return int(k[1]) ** int(n[1])


def icnt_for(text: str, nodes: int) -> tuple[str, str]:
    """The booksim file for ``nodes`` SMs + L2 banks: ``k`` raised when too small
    (a one-stage fly, ``n = 1``), else unchanged; and a note."""
    have = icnt_nodes(text)
    if have is None or have >= nodes:
        return text, ""
    n = re.search(r"^\s*n\s*=\s*(\d+)\s*;", text, re.M)
    if n is None or int(n[1]) != 1:
        raise HilsimError(f"interconnect has {have} nodes, the tuned card needs {nodes}")
    text = re.sub(r"^(\s*k\s*=\s*)\d+(\s*;)", rf"\g<1>{nodes}\g<2>", text, count=1, flags=re.M)
    return text, f"k {have} -> {nodes} (SMs + L2 banks of the tuned card)"


def config_text(base: CardConfig, settings: list[Setting], header: list[str]) -> str:
    """The base card's text with every setting in place (its kind and source in a
    comment above it); options the base does not write are appended at the end."""
    by_name = {s.option: s for s in settings}
    lines = base.text.splitlines()
    single = {
        e.line: e for e in base.parsed.entries
        if isinstance(e, OptionLine) and e.name in by_name and not e.quoted
    }
    last_line = {}
    for e in base.parsed.entries:
        if isinstance(e, OptionLine):
            last_line[e.name] = e.line
    out = [f"# {h}" if h else "#" for h in header] + [""]
    done: set[str] = set()
    for i, raw in enumerate(lines, start=1):
        e = single.get(i)
        if e is not None and last_line.get(e.name) == i:
            s = by_name[e.name]
            out.append(f"# hilsim {s.kind}: {' '.join(s.detail.split())} (base: {e.value})")
            out.append(f"{s.option} {format_value(s.value)}")
            done.add(s.option)
        else:
            out.append(raw)
    rest = [s for s in settings if s.option not in done]
    if rest:
        out += ["", "# hilsim: options the base card does not write in place "
                "(the last value of an option wins)"]
        for s in rest:
            out.append(f"# hilsim {s.kind}: {' '.join(s.detail.split())}")
            out.append(f"{s.option} {format_value(s.value)}")
    return "\n".join(out) + "\n"


def write_card(
    folder: str | os.PathLike[str],
    base: CardConfig,
    text: str,
    icnt: tuple[str, str] | None,
) -> list[str]:
    """Write ``gpgpusim.config`` (``text``) and the base's referenced files into
    ``folder`` (an existing, empty temporary folder); ``icnt``: (file name, text) of a
    rewritten interconnect file. Returns the file names written."""
    root = Path(folder)
    names = ["gpgpusim.config"]
    (root / "gpgpusim.config").write_text(text, encoding="utf-8")
    for option, src in base.referenced_files().items():
        if option == "-accelwattch_xml_file":
            continue
        if icnt is not None and src.name == icnt[0]:
            (root / src.name).write_text(icnt[1], encoding="utf-8")
        else:
            shutil.copyfile(src, root / src.name)
        names.append(src.name)
    return names


def list_rows(base: CardConfig, option: str) -> list[dict[str, Any]]:
    """A list option's entries as report rows (entry name, value, kind ``base``)."""
    values = list_entries(base, option)
    return [
        {"entry": ENTRY_NAMES[i] if len(values) > 1 else "value", "value": v, "kind": "base",
         "base": v}
        for i, v in enumerate(values)
    ]
