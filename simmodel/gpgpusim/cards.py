"""A simulated card: a GPGPU-Sim ``gpgpusim.config``, its overrides and the files it names.

A card is a shipped name (any folder under the build's ``configs/tested-cfgs/``, e.g.
``SM7_QV100``, ``SM75_RTX2060``, ``SM86_RTX3070``, or a project card under
``simmodel/gpgpusim/cards/``, e.g. ``SM90_H100``: package data, resolved without a
build) or a path to any ``gpgpusim.config`` (or to a folder holding one). Both go
through the same code: the file is parsed with
:func:`hilsim.simmodel.accelsim.parse_options`, files it references
(``-inter_config_file`` and other ``*_file`` options) are resolved relative to the
config's folder and copied into the run folder, and caller overrides are appended after
the card's text (GPGPU-Sim keeps the last value of a repeated option). Shipped files
lack a final newline; one is added before
anything is appended.

Card facts other modules need (core clock, SM count, L1/L2 geometry, latencies) come from
the options with the same geometry parsing the tuner uses (Accel-Sim paper, Section II-C:
the config options that a tuned card is described by).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from hilsim.simmodel.accelsim import OptionFile, format_value, parse_options, read_text
from hilsim.simmodel.cache_option import cache_geometry

from hilsim.core.errors import HilsimError
from hilsim.core.files import write_text_atomic

CONFIG_NAME = "gpgpusim.config"
# options that name an input file read by the simulator (relative to its working folder)
FILE_OPTIONS = (
    "-inter_config_file",
    "-accelwattch_xml_file",
    "-gpuwattch_xml_file",
    "-hw_perf_file_name",
)
# read when power simulation is on and no -accelwattch_xml_file is given (gpu-sim.cc)
DEFAULT_ACCELWATTCH_XML = "accelwattch_sass_sim.xml"
_OPTION_NAME = re.compile(r"^-[A-Za-z0-9_:.]+$")
# GPGPU-Sim 4.2 reads six integer latencies / initiation intervals <ADD,MAX,MUL,MAD,DIV,SHFL>
# with one sscanf (cuda-sim.cc, ptx_instruction::set_opcode_and_latency, and shader.cc); the
# shipped SM75_RTX2060 and SM86_RTX3070 configs give five, so SHFL's entry is left unset
# (seen: std::out_of_range in grid_read_cg, SIGSEGV in softmax_rows). A short list is
# completed from the simulator's own defaults (its option help text).
INT_LIST_DEFAULTS = {
    "-ptx_opcode_latency_int": "1,1,19,25,145,32",
    "-ptx_opcode_initiation_int": "1,1,4,4,32,4",
}


def project_cards_dir() -> Path:
    """The project's own cards (package data ``simmodel/gpgpusim/cards/NAME/``)."""
    return Path(str(resources.files("hilsim.simmodel.gpgpusim").joinpath("cards")))


def project_cards() -> list[str]:
    """Names of the project's cards (folders with a gpgpusim.config)."""
    root = project_cards_dir()
    if not root.is_dir():
        return []
    return sorted(p.parent.name for p in root.glob(f"*/{CONFIG_NAME}"))


def shipped_cards(build: Any) -> list[str]:
    """Names of the shipped card configs: the build's (folders with a gpgpusim.config)
    and the project's (:func:`project_cards`)."""
    names = set(project_cards())
    root = Path(build.configs_dir) if build is not None else None
    if root is not None and root.is_dir():
        names.update(p.parent.name for p in root.glob(f"*/{CONFIG_NAME}"))
    return sorted(names)


def normalize_options(options: Mapping[str, Any] | None) -> dict[str, str]:
    """Overrides as ``{"-name": "value"}``; a name without its dash gets one."""
    out: dict[str, str] = {}
    for raw_name, raw_value in (options or {}).items():
        name = raw_name if raw_name.startswith("-") else f"-{raw_name}"
        if not _OPTION_NAME.match(name):
            raise HilsimError(f"option {raw_name!r}: not a GPGPU-Sim option name (-name)")
        value = str(raw_value)
        if "\n" in value or "\r" in value or '"' in value:
            raise HilsimError(f"option {name}: value {value!r} has a newline or a quote")
        out[name] = value
    return out


def completed_int_options(options: Mapping[str, str]) -> dict[str, str]:
    """Integer latency/initiation lists shorter than the simulator reads, completed.

    Returns only the options that need completing, as override lines: the given entries
    first, then GPGPU-Sim's defaults for the missing tail (SHFL: latency 32, interval 4).
    """
    out: dict[str, str] = {}
    for name, default in INT_LIST_DEFAULTS.items():
        value = options.get(name)
        if value is None:
            continue
        given = [part.strip() for part in str(value).split(",") if part.strip()]
        full = default.split(",")
        if len(given) < len(full):
            out[name] = ",".join(given + full[len(given):])
    return out


def dram_memory(options: Mapping[str, str]) -> tuple[float, int]:
    """(memory clock MHz, bus width bits) of a config, as a device query reports them.

    ``-gpgpu_clock_domains``' DRAM entry is the command clock; the memory clock is command
    clock x ``-dram_data_command_freq_ratio`` / 2 (Accel-Sim mem_config, inverted); the bus
    is channels x ``-gpgpu_n_mem_per_ctrlr`` x ``-gpgpu_dram_buswidth`` bytes. Peak DRAM
    bandwidth = memory clock x 2 (DDR) x bus bytes. GPGPU-Sim's defaults fill missing options.
    """

    def num(name: str, default: str) -> float:
        return float(str(options.get(name, default)).split()[0].split(",")[0])

    command_mhz = float(str(options.get("-gpgpu_clock_domains", "0:0:0:0")).split(":")[3])
    mem_clock = command_mhz * num("-dram_data_command_freq_ratio", "2") / 2
    bus_bits = int(num("-gpgpu_n_mem", "8") * num("-gpgpu_n_mem_per_ctrlr", "1")
                   * num("-gpgpu_dram_buswidth", "4") * 8)
    return mem_clock, bus_bits


def peak_dram_gbs(mem_clock_mhz: float, bus_bits: int) -> float:
    """Peak DRAM bandwidth in GB/s: memory clock x 2 (DDR) x bus bytes."""
    return mem_clock_mhz * 1e6 * 2 * bus_bits / 8 / 1e9


def parse_override(text: str) -> tuple[str, str]:
    """``-name=value`` or ``-name value`` (the CLI's ``-O``) -> (name, value)."""
    name, sep, value = text.partition("=")
    if not sep:
        name, _, value = text.strip().partition(" ")
    name, value = name.strip(), value.strip()
    if not name.startswith("-"):
        name = f"-{name}"
    if not _OPTION_NAME.match(name) or not value:
        raise HilsimError(f"-O {text!r}: expected -option=value, e.g. -gpgpu_n_clusters=1")
    return name, value


@dataclass
class CardConfig:
    """One card's option file plus overrides; writes a run folder's ``gpgpusim.config``."""

    name: str
    path: Path
    text: str
    parsed: OptionFile
    overrides: dict[str, str] = field(default_factory=dict)

    # --- options ---------------------------------------------------------------------
    def options(self) -> dict[str, str]:
        """Every option's effective value: the file's, then the overrides."""
        return {**self.parsed.options(), **self.overrides}

    def option(self, name: str, default: str | None = None) -> str:
        """One option's effective value; a missing option without default is an error."""
        value = self.options().get(name, default)
        if value is None:
            raise HilsimError(f"{self.path}: no option {name}")
        return value

    def with_options(self, options: Mapping[str, Any] | None) -> CardConfig:
        """A copy with more overrides (later ones win)."""
        return CardConfig(
            self.name, self.path, self.text, self.parsed,
            {**self.overrides, **normalize_options(options)},
        )

    # --- facts -----------------------------------------------------------------------
    def _int(self, name: str, default: str | None = None) -> int:
        value = self.option(name, default)
        try:
            return int(float(value))
        except ValueError:
            raise HilsimError(f"{self.path}: option {name} {value!r} is not a number") from None

    @property
    def clock_domains_mhz(self) -> tuple[float, float, float, float]:
        """``-gpgpu_clock_domains``: core, interconnect, L2, DRAM clocks in MHz."""
        value = self.option("-gpgpu_clock_domains")
        try:
            parts = tuple(float(x) for x in value.split(":"))
        except ValueError:
            parts = ()
        if len(parts) != 4:
            raise HilsimError(
                f"{self.path}: -gpgpu_clock_domains {value!r} is not core:icnt:l2:dram MHz"
            )
        return parts  # type: ignore[return-value]

    @property
    def core_clock_mhz(self) -> float:
        """The SM clock (first of ``-gpgpu_clock_domains``)."""
        return self.clock_domains_mhz[0]

    @property
    def counts_dram_reads(self) -> bool:
        """Whether the card's log counts DRAM reads. The simple DRAM model
        (``-gpgpu_simple_dram_model 1``: a fixed latency, ``simple_dram_model_cycle`` in
        ``l2cache.cc``) serves L2 misses without the DRAM model whose counters the log's
        ``total dram reads`` sums, so it stays 0 on such a card (SM90_H100) while its L2
        misses are counted."""
        return self.option("-gpgpu_simple_dram_model", "0").strip() != "1"

    @property
    def sm_count(self) -> int:
        """``-gpgpu_n_clusters`` x ``-gpgpu_n_cores_per_cluster``."""
        return self._int("-gpgpu_n_clusters") * self._int("-gpgpu_n_cores_per_cluster", "1")

    @property
    def l2_banks(self) -> int:
        """Memory sub-partitions (L2 banks): ``-gpgpu_n_mem`` x sub-partitions per channel."""
        return self._int("-gpgpu_n_mem") * self._int("-gpgpu_n_sub_partition_per_mchannel", "1")

    def cache(self, which: str) -> dict[str, int]:
        """Geometry of ``dl1`` or ``dl2`` (per bank): sets, line, assoc, bytes."""
        sets, line, assoc = cache_geometry(self.option(f"-gpgpu_cache:{which}"))
        return {"sets": sets, "line": line, "assoc": assoc, "bytes": sets * line * assoc}

    def facts(self) -> dict[str, Any]:
        """The card's facts as plain values (for device facts and closed-loop checks)."""
        opts = self.options()
        dl1, dl2 = self.cache("dl1"), self.cache("dl2")
        out: dict[str, Any] = {
            "card": self.name,
            "config": str(self.path),
            "core_clock_mhz": self.core_clock_mhz,
            "dram_clock_mhz": self.clock_domains_mhz[3],
            "sm_count": self.sm_count,
            "l1_bytes": dl1["bytes"],
            "l1_line": dl1["line"],
            "l2_bytes": dl2["bytes"] * self.l2_banks,
            "l2_line": dl2["line"],
            "l2_banks": self.l2_banks,
        }
        if "-gpgpu_unified_l1d_size" in opts:
            out["unified_l1d_kib"] = self._int("-gpgpu_unified_l1d_size")
        for key, name in (
            ("l1_latency", "-gpgpu_l1_latency"),
            ("smem_latency", "-gpgpu_smem_latency"),
            ("l2_rop_latency", "-gpgpu_l2_rop_latency"),
            ("dram_latency", "-dram_latency"),
            ("shmem_bytes", "-gpgpu_shmem_size"),
        ):
            if name in opts:
                out[key] = self._int(name)
        return out

    @property
    def interconnect_nodes(self) -> int:
        """Nodes on the interconnect: one per SM cluster and one per L2 sub-partition
        (``InterconnectInterface::_CreateNodeMap``: ``n_shader + n_mem``)."""
        return self._int("-gpgpu_n_clusters") + self.l2_banks

    def _booksim(self) -> bool:
        return self.option("-network_mode", "1").strip() == "1"

    # --- files -----------------------------------------------------------------------
    def referenced_files(self) -> dict[str, Path]:
        """Option name -> existing input file it names (relative to the config's folder)."""
        opts = self.options()
        out: dict[str, Path] = {}
        names = [n for n in opts if n in FILE_OPTIONS or n.endswith("_config_file")]
        for name in names:
            value = opts[name]
            p = Path(value).expanduser()
            base = Path.cwd() if name in self.overrides else self.path.parent
            cand = p if p.is_absolute() else base / p
            if cand.is_file():
                out[name] = cand.resolve()
        power = opts.get("-power_simulation_enabled", "0").strip() == "1"
        default_xml = self.path.parent / DEFAULT_ACCELWATTCH_XML
        if power and "-accelwattch_xml_file" not in out and default_xml.is_file():
            out["-accelwattch_xml_file"] = default_xml.resolve()
        return out

    def config_text(self, extra: Mapping[str, str] | None = None) -> str:
        """The run folder's ``gpgpusim.config``: the card's text, then the overrides."""
        text = self.text if self.text.endswith("\n") else self.text + "\n"
        lines = {**self.overrides, **(extra or {})}
        if not lines:
            return text
        out = [text, f"\n# hilsim: overrides of {self.name} (the last value of an option wins)\n"]
        out += [f"{name} {format_value(value)}\n" for name, value in lines.items()]
        return "".join(out)

    def write(self, run_dir: str | os.PathLike[str]) -> Path:
        """Write ``gpgpusim.config`` and copy the files it references into ``run_dir``.

        A referenced file lands under its own base name; when that differs from what the
        option says, an override line points the option at the copy. Integer latency lists
        shorter than the simulator reads get their tail (:func:`completed_int_options`).
        The interconnect's config (booksim, ``-network_mode 1``) is fitted to the card's
        node count (:func:`fit_interconnect`).
        """
        run = Path(run_dir)
        run.mkdir(parents=True, exist_ok=True)
        extra: dict[str, str] = {}
        for name, src in self.referenced_files().items():
            dst = run / src.name
            if name == "-inter_config_file" and self._booksim():
                text = read_text(src)
                fitted = fit_interconnect(text, self.interconnect_nodes)
                if src != dst.resolve() or fitted != text:
                    write_text_atomic(dst, fitted)
            elif src != dst.resolve():
                shutil.copyfile(src, dst)
            if self.options().get(name) != src.name and name in self.options():
                extra[name] = src.name
        extra.update(completed_int_options(self.options()))
        target = run / CONFIG_NAME
        write_text_atomic(target, self.config_text(extra))
        return target


_BOOKSIM_INT = r"^(\s*{}\s*=\s*)(\d+)(\s*;)"


def fit_interconnect(text: str, nodes: int) -> str:
    """A booksim config (``-inter_config_file``) whose network holds ``nodes`` nodes.

    A ``fly`` network of ``n`` stages of radix ``k`` has ``k ** n`` nodes, and GPGPU-Sim's
    interconnect puts an SM cluster or an L2 sub-partition on each
    (:attr:`CardConfig.interconnect_nodes`); with more of them than nodes it indexes past
    its tables and the simulator dies with SIGSEGV before the first launch (SM90_H100's
    ``k = 212`` is its 132 SMs and 80 sub-partitions: 41 channels crash it). ``k`` is
    raised to the smallest radix that holds them (a line says so); a config that holds
    them already, or of another topology, is returned as it is."""
    topology = re.search(r"^\s*topology\s*=\s*(\w+)\s*;", text, re.M)
    k_found = re.search(_BOOKSIM_INT.format("k"), text, re.M)
    n_found = re.search(_BOOKSIM_INT.format("n"), text, re.M)
    if topology is None or topology.group(1) != "fly" or k_found is None or n_found is None:
        return text
    k, stages = int(k_found.group(2)), max(int(n_found.group(2)), 1)
    if k ** stages >= nodes:
        return text
    radix = k
    while radix ** stages < nodes:
        radix += 1
    line = (f"{k_found.group(1)}{radix}{k_found.group(3)}  // hilsim: raised from {k}: "
            f"{nodes} nodes (SM clusters + L2 sub-partitions)")
    return text[:k_found.start()] + line + text[k_found.end():]


def _resolve(card: str | os.PathLike[str], build: Any) -> tuple[str, Path]:
    text = str(card)
    p = Path(text).expanduser()
    looks_like_path = os.sep in text or text.endswith(".config") or p.exists()
    if looks_like_path:
        if p.is_dir():
            p = p / CONFIG_NAME
        if not p.is_file():
            raise HilsimError(f"{p}: no such GPGPU-Sim config file")
        name = p.parent.name if p.name == CONFIG_NAME else p.name.removesuffix(".config")
        name = name.removesuffix(".gpgpusim") or name
        return name, p.resolve()
    own = project_cards_dir() / text / CONFIG_NAME
    if own.is_file():
        return text, own
    if build is None:
        raise HilsimError(
            f"card {text!r}: a shipped card name needs a GPGPU-Sim build "
            "(run `hilsim gpgpusim setup`), or give a path to a gpgpusim.config "
            f"(project cards: {', '.join(project_cards()) or 'none'})"
        )
    cfg = Path(build.configs_dir) / text / CONFIG_NAME
    if not cfg.is_file():
        names = ", ".join(shipped_cards(build)) or "none"
        raise HilsimError(f"card {text!r}: not a shipped card (shipped: {names}) nor a path")
    return text, cfg


def card_config(
    card: str | os.PathLike[str],
    build: Any = None,
    options: Mapping[str, Any] | None = None,
) -> CardConfig:
    """The card's config: a shipped name (needs ``build``) or a path to a gpgpusim.config."""
    name, path = _resolve(card, build)
    text = read_text(path)
    parsed = parse_options(text, str(path))
    return CardConfig(name, path, text, parsed, normalize_options(options))
