"""Read and write Accel-Sim files: option files and the microbenchmark suite's output.

* ``gpgpusim.config`` / ``trace.config``: GPGPU-Sim option files (``-name value`` per
  line, ``#`` comments, a double-quoted value may span lines). :func:`parse_options`
  keeps every line (comments too) so a file round-trips; :func:`emit_options` writes a
  file with a ``# source:`` comment above every option.
* The printed output of Accel-Sim's ``GPU_Microbenchmark`` suite (``run_all.sh``):
  ``running ./NAME microbenchmark`` blocks closed by a line of slashes, measurement
  lines such as ``L1 Latency  =      33.7331 cycles``, the ``deviceQuery`` blocks and
  the ``//Accel_Sim config:`` option lines that Accel-Sim's ``tuner.py`` copies into its
  config template (Accel-Sim paper, Section II-C).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from hilsim.core.errors import HilsimError
from hilsim.core.inputs import read_input_text


@dataclass(frozen=True)
class OptionLine:
    """One ``-name value`` option as written in a file."""

    name: str
    value: str
    line: int
    comment: str = ""
    quoted: bool = False


@dataclass
class OptionFile:
    """A parsed option file: every entry in order (``str`` = a comment or blank line)."""

    path: str
    entries: list[OptionLine | str] = field(default_factory=list)

    def options(self) -> dict[str, str]:
        """Option name -> value; a repeated option keeps its last value, as GPGPU-Sim does."""
        out: dict[str, str] = {}
        for entry in self.entries:
            if isinstance(entry, OptionLine):
                out[entry.name] = entry.value
        return out

    def option_lines(self) -> list[OptionLine]:
        """The option entries in file order."""
        return [e for e in self.entries if isinstance(e, OptionLine)]


def read_text(path: str | os.PathLike[str]) -> str:
    """A text file's content; one-line errors name the file (the bounded reader of every
    input: regular files only)."""
    return read_input_text(path, "a text file")


def parse_options(text: str, where: str = "<options>") -> OptionFile:
    """Parse GPGPU-Sim option text; keeps comments and blank lines as strings."""
    result = OptionFile(where)
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        raw = lines[i]
        stripped = raw.strip()
        lineno = i + 1
        i += 1
        if not stripped.startswith("-"):
            if stripped and not stripped.startswith("#"):
                raise HilsimError(
                    f"{where}: line {lineno}: expected '-option value' or '# comment', "
                    f"got {stripped[:40]!r}"
                )
            result.entries.append(raw)
            continue
        parts = stripped.split(None, 1)
        name = parts[0]
        rest = parts[1] if len(parts) > 1 else ""
        quoted = rest.startswith('"')
        comment = ""
        if quoted:
            body = rest[1:]
            chunks = []
            while '"' not in body:
                chunks.append(body.strip())
                if i >= len(lines):
                    raise HilsimError(
                        f"{where}: line {lineno}: quoted value of {name} is never closed"
                    )
                body = lines[i]
                i += 1
            end = body.index('"')
            chunks.append(body[:end].strip())
            value = "".join(chunks)
            tail = body[end + 1 :].strip()
            if tail.startswith("#"):
                comment = tail[1:].strip()
        else:
            value, _, comment = rest.partition("#")
            value = value.strip()
            comment = comment.strip()
            if value.startswith("="):  # "-gpgpu_l1_latency  = 33" as printed by l1_lat
                value = value[1:].strip()
        result.entries.append(OptionLine(name, value, lineno, comment, quoted))
    return result


def read_options(path: str | os.PathLike[str]) -> OptionFile:
    """Parse an option file from disk."""
    return parse_options(read_text(path), str(path))


@dataclass(frozen=True)
class EmitOption:
    """An option to write, with the text of its ``# source:`` comment."""

    name: str
    value: str
    source: str


def format_value(value: str) -> str:
    """Quote a value that contains whitespace or ``#``."""
    return f'"{value}"' if (not value or re.search(r"[\s#]", value)) else value


def emit_options(options: list[EmitOption], header: list[str] | None = None) -> str:
    """Option-file text: header comment lines, then ``# source: ...`` above each option."""
    out = [f"# {line}" if line else "#" for line in (header or [])]
    if out:
        out.append("")
    for opt in options:
        source = " ".join(opt.source.split())
        out.append(f"# source: {source}")
        out.append(f"{opt.name} {format_value(opt.value)}")
    return "\n".join(out) + "\n"


# --- the microbenchmark suite's printed output -------------------------------------

_RUNNING = re.compile(r"^running \./(?P<name>\S+) microbenchmark\s*$")
_BLOCK_END = re.compile(r"^/{20,}\s*$")
_DEVICE_SEP = re.compile(r"^\s+/{10,}\s*$")
_CONFIG_HEADER = "//Accel_Sim config:"
_NUM = r"(?P<num>[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"


@dataclass(frozen=True)
class PrintedValue:
    """A number or word printed by a microbenchmark, with where it was printed."""

    value: float | str
    benchmark: str
    line: int
    text: str


@dataclass(frozen=True)
class PrintedOption:
    """An option line printed by a microbenchmark (what Accel-Sim's tuner.py copies)."""

    name: str
    value: str
    benchmark: str
    line: int


@dataclass
class UbenchOutput:
    """Parsed Accel-Sim microbenchmark output."""

    path: str
    benchmarks: list[str] = field(default_factory=list)
    values: dict[str, PrintedValue] = field(default_factory=dict)
    options: dict[str, PrintedOption] = field(default_factory=dict)
    devices: list[dict[str, str]] = field(default_factory=list)
    device_name: str | None = None


# (benchmark, label regex, key, unit scale) - the first match in a block wins.
# Keys are hilsim measurement names (hilsim.core.measurement_names) or, for values with
# no measurement name, internal keys used by hilsim.simmodel.tuner.
_PATTERNS: list[tuple[str, str, str]] = [
    ("l1_lat", r"L1 Latency", "l1_hit_latency"),
    ("l2_lat", r"L2 Hit Latency", "l2_hit_latency"),
    ("l2_lat", r"L1 Latency", "l1_hit_latency@l2_lat"),
    ("mem_lat", r"Mem latency", "dram_latency"),
    ("mem_lat", r"L2 Hit Latency", "l2_hit_latency@mem_lat"),
    ("shared_lat", r"Shared Memory Latency", "shared_latency"),
    ("atomic_add_lat", r"Atomic int32 latency", "atomic_latency"),
    ("kernel_lat", r"Kernel Launch Latency", "launch_latency_cycles"),
    ("MaxFlops_float", r"FLOP per SM", "fp32_throughput"),
    ("MaxFlops_double", r"DPU FLOP per SM", "fp64_throughput"),
    ("MaxFlops_half", r"half FLOP per SM", "fp16_throughput"),
    ("MaxFlops_int32", r"int32 FLOP per SM", "int32_throughput"),
    ("lat_float", r"float-precision FPU latency", "fp32_latency"),
    ("lat_double", r"double-precision DPU latency", "fp64_latency"),
    ("lat_half", r"fpu16 latency", "fp16_latency"),
    ("lat_int32", r"int32 latency", "int32_latency"),
    ("sfu_bw_fsqrt", r"SFU fast sqrt bw", "sfu_throughput"),
    ("sfu_lat_fsqrt", r"SFU fast sqrt latency", "sfu_latency"),
    ("config_tensor", r"FMA tensor bandwidth", "tensor_throughput"),
    ("config_tensor", r"wmma PTX issue bandwidth", "tensor_wmma_issue_rate"),
    ("config_tensor", r"wmma latency", "tensor_latency"),
    ("mem_bw", r"Mem BW", "dram_bandwidth_gbs"),
    ("l2_bw_128", r"L2 bandwidth", "l2_bandwidth"),
    ("l1_bw_128", r"L1 bandwidth", "l1_bandwidth"),
    ("shared_bw", r"Shared Memory Bandwidth", "shared_bandwidth"),
    ("system_config", r"GPU Base Clock rate", "core_clock_mhz"),
    ("system_config", r"GPU Max Clock rate", "boost_clock_mhz"),
    ("system_config", r"SM Count\s*:", "sm_count"),
    ("mem_config", r"Memory Clock rate", "dram_clock_mhz"),
    ("mem_config", r"Memory Bus Width", "dram_bus_width_bits"),
    ("mem_config", r"Memory channels", "dram_channels"),
    ("l2_config", r"L2 Banks number", "l2_banks"),
]
_WORDS: list[tuple[str, str, str]] = [
    ("system_config", r"Device Name", "device_name"),
    ("mem_config", r"Memory type", "dram_type"),
]


def _match_number(label: str, text: str) -> float | None:
    sep = "" if label.endswith(":") else r"\s*[=:]"
    m = re.match(rf"^\s*{label}{sep}\s*{_NUM}", text)
    if m and "Mem BW" in label and "GB/sec" not in text:
        return None  # the first "Mem BW=" line is in Byte/Clk; GB/s is the second
    return float(m.group("num")) if m else None


def parse_ubench_output(text: str, where: str = "<ubench output>") -> UbenchOutput:
    """Parse the printed output of Accel-Sim's microbenchmark suite.

    A file that ends inside a benchmark block, or whose ``//Accel_Sim config:`` header
    is followed by no option, is reported as truncated (one line naming file and line).
    """
    out = UbenchOutput(where)
    lines = text.splitlines()
    current: str | None = None
    start = 0
    pending_header: int | None = None
    device: dict[str, str] = {}
    for idx, raw in enumerate(lines, start=1):
        m = _RUNNING.match(raw.strip())
        if m:
            if current is not None:
                raise HilsimError(
                    f"{where}: line {idx}: block {current!r} (line {start}) has no closing "
                    "'/////' line before the next benchmark"
                )
            current, start, pending_header = m.group("name"), idx, None
            out.benchmarks.append(current)
            continue
        if current is None:
            if raw.strip():
                raise HilsimError(
                    f"{where}: line {idx}: text outside a 'running ./NAME microbenchmark' block;"
                    " not Accel-Sim microbenchmark output?"
                )
            continue
        if _BLOCK_END.match(raw):
            if pending_header is not None:
                raise HilsimError(
                    f"{where}: line {pending_header}: '{_CONFIG_HEADER}' in {current!r} is "
                    "followed by no option"
                )
            if device:
                out.devices.append(device)
                device = {}
            current = None
            continue
        stripped = raw.strip()
        if stripped.startswith(_CONFIG_HEADER):
            pending_header = idx
            continue
        if stripped.startswith("-"):
            parts = stripped.split(None, 1)
            value = parts[1].strip() if len(parts) > 1 else ""
            if value.startswith("="):
                value = value[1:].strip()
            out.options[parts[0]] = PrintedOption(parts[0], value, current, idx)
            pending_header = None
            continue
        if current == "deviceQuery":
            if _DEVICE_SEP.match(raw):
                if device:
                    out.devices.append(device)
                device = {}
            elif ":" in stripped:
                key, _, val = stripped.partition(":")
                device[" ".join(key.split())] = val.strip().strip('"').strip()
            continue
        for bench, label, key in _PATTERNS:
            if (current == bench or current.startswith(bench + "_") or
                    (bench in ("l2_bw_128", "l1_bw_128", "shared_bw")
                     and current.startswith(bench.rsplit("_", 1)[0]))):
                number = _match_number(label, stripped)
                if number is not None:
                    _keep(out, key, PrintedValue(number, current, idx, stripped))
                    break
        for bench, label, key in _WORDS:
            if current == bench:
                wm = re.match(rf"^\s*{label}\s*=\s*(?P<word>.+?)\s*$", stripped)
                if wm:
                    _keep(out, key, PrintedValue(wm.group("word"), current, idx, stripped))
    if current is not None:
        raise HilsimError(
            f"{where}: line {len(lines)}: output ends inside the {current!r} block "
            f"(line {start}); truncated?"
        )
    if not out.benchmarks:
        raise HilsimError(
            f"{where}: no 'running ./NAME microbenchmark' blocks; not Accel-Sim microbenchmark "
            "output"
        )
    name = out.values.get("device_name")
    if name is not None:
        out.device_name = str(name.value)
    elif out.devices:
        out.device_name = out.devices[0].get("Device")
    return out


def _keep(out: UbenchOutput, key: str, value: PrintedValue) -> None:
    """Keep the first value; for bandwidths keep the largest over the *_bw_* variants."""
    old = out.values.get(key)
    larger = (
        old is not None
        and key.endswith("bandwidth")
        and isinstance(value.value, float)
        and isinstance(old.value, float)
        and value.value > old.value
    )
    if old is None or larger:
        out.values[key] = value


def read_ubench_output(path: str | os.PathLike[str]) -> UbenchOutput:
    """Parse an Accel-Sim microbenchmark output file from disk."""
    return parse_ubench_output(read_text(path), str(path))
