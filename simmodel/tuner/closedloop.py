"""Closed loop: the tuner on a simulated card's microbenchmarks recovers the card's config.

(Accel-Sim, Khairy et al., ISCA'20, Section II-C: microbenchmarks -> tuner -> config.)
A card is simulated from a known ``gpgpusim.config``; the suite runs on it
(``hilsim agent microbench --backend gpgpusim``); ``hilsim tune --convention gpgpusim``
turns the measurements and the device facts into options; :func:`compare` puts every
recovered option beside the configured one with the tolerance :data:`TOLERANCE` states.

Convention of the latency options (``gpgpusim``): the option values that make GPGPU-Sim
reproduce the measured load-to-use latencies, through the map measured on the simulator
(:mod:`hilsim.simmodel.tuner.calibration`), rounded to an integer.

Unit latencies (``gpgpusim`` convention, the unit map of
:mod:`hilsim.simmodel.tuner.calibration`): the multiply-add entry (4th) of
``-ptx_opcode_latency_{fp,dp,int}``.

Throughput-derived options (measured on a 2-SM slice of the GPGPU-Sim device,
:mod:`hilsim.simmodel.gpgpusim.simdevice`): the initiation intervals of the
fp32/fp64/int32 units (Accel-Sim's ``config_fpu`` / ``config_dpu`` / ``config_int``:
first entry of ``-ptx_opcode_initiation_*``) and the shared-memory banks (from the
shared bandwidth). The DRAM read bandwidth (one channel x the channel count) is compared
with the configured card's peak (``dram_read_gbs``, a relative tolerance), and the peak
the tuned options give with the configured one (``dram_peak_gbs``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hilsim.simmodel.cache_option import cache_geometry
from hilsim.simmodel.gpgpusim.cards import card_config, dram_memory, peak_dram_gbs
from hilsim.simmodel.tuner import read_microbench, tune

#: option -> (absolute tolerance, what it is); latencies in the option's own unit
TOLERANCE: dict[str, tuple[float, str]] = {
    "-gpgpu_l1_latency": (1, "cycles"),
    "-gpgpu_smem_latency": (1, "cycles"),
    "-gpgpu_l2_rop_latency": (1, "cycles"),
    "-dram_latency": (1, "cycles"),
    "-gpgpu_kernel_launch_latency": (1, "cycles"),
    "sm_count": (0, "SMs (-gpgpu_n_clusters x cores per cluster)"),
    "core_clock_mhz": (0, "MHz (-gpgpu_clock_domains core)"),
    "dram_clock_mhz": (0.5, "MHz (-gpgpu_clock_domains DRAM)"),
    "l1_unified_kib": (0, "KiB (-gpgpu_unified_l1d_size)"),
    "l2_bytes": (0, "bytes (-gpgpu_cache:dl2 x L2 banks)"),
    "-gpgpu_n_mem": (0, "memory channels"),
    "-gpgpu_dram_buswidth": (0, "bytes per channel"),
    "-gpgpu_dram_burst_length": (0, "beats"),
    "-dram_data_command_freq_ratio": (0, "ratio"),
    "-ptx_opcode_latency_fp": (1, "cycles (fp32 multiply-add, 4th entry)"),
    "-ptx_opcode_latency_dp": (1, "cycles (fp64 multiply-add, 4th entry)"),
    "-ptx_opcode_latency_int": (1, "cycles (int32 multiply-add, 4th entry)"),
    "-ptx_opcode_initiation_fp": (0, "cycles (fp32 unit, first entry)"),
    "-ptx_opcode_initiation_dp": (0, "cycles (fp64 unit, first entry)"),
    "-ptx_opcode_initiation_int": (0, "cycles (int32 unit, first entry)"),
    "-gpgpu_shmem_num_banks": (0, "banks"),
    "dram_peak_gbs": (0.5, "GB/s (channels x bus x 2 x memory clock)"),
    "dram_read_gbs": (0.05, "relative: measured read bandwidth vs the configured peak"),
}
#: quantities whose tolerance is a fraction of the configured value
RELATIVE = ("dram_read_gbs",)
#: quantities the tuner reads from the device facts, which a simulated card's are its
#: config read back: shown, never counted as recovered
READ_FROM_DEVICE = (
    "sm_count", "core_clock_mhz", "dram_clock_mhz", "l1_unified_kib", "l2_bytes",
    "-gpgpu_n_mem", "-gpgpu_dram_buswidth", "-gpgpu_dram_burst_length",
    "-dram_data_command_freq_ratio", "dram_peak_gbs",
)
#: a row's category: measured (and recovered or not), read from the device, the preset's
CATEGORIES = ("measured", "device", "preset")
_INT_OPTIONS = (
    "-gpgpu_l1_latency",
    "-gpgpu_smem_latency",
    "-gpgpu_l2_rop_latency",
    "-dram_latency",
    "-gpgpu_kernel_launch_latency",
    "-gpgpu_n_mem",
    "-gpgpu_dram_buswidth",
    "-gpgpu_dram_burst_length",
    "-dram_data_command_freq_ratio",
    "-ptx_opcode_initiation_fp",
    "-ptx_opcode_initiation_dp",
    "-ptx_opcode_initiation_int",
    "-gpgpu_shmem_num_banks",
)


def _num(value: str) -> float:
    return float(str(value).split()[0].split(",")[0])


def values_of(options: dict[str, str]) -> dict[str, float]:
    """The compared quantities from a flat option dict (a card config or tuned output)."""
    out: dict[str, float] = {}
    for name in _INT_OPTIONS:
        if name in options:
            out[name] = _num(options[name])
    for name in ("-ptx_opcode_latency_fp", "-ptx_opcode_latency_dp", "-ptx_opcode_latency_int"):
        entries = str(options[name]).split()[0].split(",") if name in options else []
        if len(entries) >= 4:  # ADD, MAX, MUL, MAD, ...: the suite's chain measures MAD
            out[name] = float(entries[3])
    if "-gpgpu_n_clusters" in options:
        out["sm_count"] = _num(options["-gpgpu_n_clusters"]) * _num(
            options.get("-gpgpu_n_cores_per_cluster", "1")
        )
    if "-gpgpu_clock_domains" in options:
        parts = [float(p) for p in options["-gpgpu_clock_domains"].split(":")]
        out["core_clock_mhz"], out["dram_clock_mhz"] = parts[0], parts[3]
    if "-gpgpu_unified_l1d_size" in options:
        out["l1_unified_kib"] = _num(options["-gpgpu_unified_l1d_size"])
    if "-gpgpu_cache:dl2" in options and "-gpgpu_n_mem" in options:
        sets, line, assoc = cache_geometry(options["-gpgpu_cache:dl2"])
        banks = _num(options["-gpgpu_n_mem"]) * _num(
            options.get("-gpgpu_n_sub_partition_per_mchannel", "1")
        )
        out["l2_bytes"] = sets * line * assoc * banks
    peak = dram_peak_gbs(options)
    if peak is not None:
        out["dram_peak_gbs"] = peak
    return out


def dram_peak_gbs(options: dict[str, str]) -> float | None:
    """Theoretical DRAM bandwidth of a config: channels x bus bytes x 2 x memory clock.

    One formula with the device facts (:func:`hilsim.simmodel.gpgpusim.cards.dram_memory`);
    ``None`` when the config lacks the channel count, bus width or clocks.
    """
    need = ("-gpgpu_n_mem", "-gpgpu_dram_buswidth", "-gpgpu_clock_domains")
    if not all(k in options for k in need):
        return None
    return peak_dram_gbs(*dram_memory(options))


@dataclass(frozen=True)
class Row:
    """One compared quantity."""

    quantity: str
    configured: float | None
    tuned: float | None
    tolerance: float
    unit: str

    relative: bool = False
    #: :data:`CATEGORIES`: only ``measured`` rows are recoveries
    category: str = "measured"

    @property
    def ok(self) -> bool:
        """Recovered within the tolerance (a fraction of the configured value if relative)."""
        if self.configured is None or self.tuned is None:
            return False
        tol = self.tolerance * abs(self.configured) if self.relative else self.tolerance
        return abs(self.tuned - self.configured) <= tol


def tune_simulated(microbench: str | os.PathLike[str], convention: str = "gpgpusim") -> Any:
    """``hilsim tune`` on a simulated card's ``microbench.json`` (a :class:`TuneResult`)."""
    rows, facts = read_microbench(microbench)
    return tune(
        measurements=rows, facts=facts, facts_where=Path(microbench).name, convention=convention
    )


#: measurement (also its :func:`configured_rates` key) -> unit
RATES: dict[str, str] = {
    "fp32_throughput": "flop/clk/SM",
    "fp64_throughput": "flop/clk/SM",
    "int32_throughput": "flop/clk/SM",
    "shared_bandwidth": "B/clk/SM",
    "dram_read_bandwidth": "GB/s",
}


def configured_rates(options: dict[str, str]) -> dict[str, float]:
    """The peak rates a config implies, in the suite's units (for measured vs configured).

    Unit throughput = ops per lane x units x 32 lanes / initiation interval (first entry
    of ``-ptx_opcode_initiation_*``; an FMA is 2 flops; fp16x2 is left out: which unit
    and interval GPGPU-Sim gives it is not a config option we read); shared =
    ``-gpgpu_shmem_num_banks`` x 4 B; DRAM = :func:`dram_peak_gbs`.
    """
    out: dict[str, float] = {}
    for name, units, init, ops in (
        ("fp32_throughput", "-gpgpu_num_sp_units", "-ptx_opcode_initiation_fp", 2),
        ("fp64_throughput", "-gpgpu_num_dp_units", "-ptx_opcode_initiation_dp", 2),
        ("int32_throughput", "-gpgpu_num_int_units", "-ptx_opcode_initiation_int", 2),
    ):
        if units in options and init in options and _num(options[units]) > 0:
            out[name] = ops * _num(options[units]) * 32 / _num(options[init])
    if "-gpgpu_shmem_num_banks" in options:
        out["shared_bandwidth"] = 4 * _num(options["-gpgpu_shmem_num_banks"])
    peak = dram_peak_gbs(options)
    if peak is not None:
        out["dram_read_bandwidth"] = peak
    return out


def measured_values(microbench: str | os.PathLike[str]) -> dict[str, float]:
    """Valid measurement values by name from a ``microbench.json``."""
    rows, _facts = read_microbench(microbench)
    return {r.name: float(r.value) for r in rows if r.value is not None}


def compare(
    card_options: dict[str, str],
    tuned_options: dict[str, str],
    measured: dict[str, float] | None = None,
) -> list[Row]:
    """Configured vs tuned for every quantity of :data:`TOLERANCE`.

    ``measured`` (:func:`measured_values`) gives ``dram_read_gbs``: the measured DRAM
    read bandwidth against the configured card's peak.
    """
    want, got = values_of(card_options), values_of(tuned_options)
    want["dram_read_gbs"] = want.get("dram_peak_gbs")  # type: ignore[assignment]
    if measured and "dram_read_bandwidth" in measured:
        got["dram_read_gbs"] = measured["dram_read_bandwidth"]
    return [
        Row(q, want.get(q), got.get(q), tol, unit, q in RELATIVE,
            "device" if q in READ_FROM_DEVICE else "measured")
        for q, (tol, unit) in TOLERANCE.items()
    ]


def preset_rows(card_options: dict[str, str], result: Any) -> list[Row]:
    """The options ``result`` (a :class:`~hilsim.simmodel.tuner.TuneResult`) copied from
    its preset, beside the card's own value where the card writes the option: 1 when
    equal, else 0 (never counted as recovered)."""
    out = []
    for o in result.options:
        if o.file != "gpgpusim.config" or o.kind != "preset" or o.name not in card_options:
            continue
        same = " ".join(str(card_options[o.name]).split()) == " ".join(o.value.split())
        out.append(Row(o.name, 1.0, 1.0 if same else 0.0, 0, "equal to the card's (1/0)",
                       category="preset"))
    return out


def markdown_table(rows: list[Row]) -> str:
    """The docs table: quantity | configured | tuned | tolerance | ok, in three parts:
    measured (recovered or not), read from the device (the config read back: not a
    recovery), the preset's (a count of those equal to the card's own)."""
    lines = ["| quantity | configured | tuned | tolerance | ok |", "|---|---:|---:|---|---|"]
    heads = {
        "measured": "**measured** (through the calibration map)",
        "device": "**read from the device** (the config, read back: not recovered)",
    }
    for category in ("measured", "device"):
        part = [r for r in rows if r.category == category]
        if not part:
            continue
        lines.append(f"| {heads[category]} | | | | |")
        lines.extend(_table_lines(part))
    preset = [r for r in rows if r.category == "preset"]
    if preset:
        equal = sum(1 for r in preset if r.tuned == 1.0)
        lines.append(f"| **from the preset**: {len(preset)} options the card also writes, "
                     f"{equal} equal to its own | | | | not counted |")
    return "\n".join(lines)


def _table_lines(rows: list[Row]) -> list[str]:
    lines = []
    for r in rows:

        def fmt(v: float | None) -> str:
            return "-" if v is None else f"{v:g}"

        lines.append(
            f"| `{r.quantity}` | {fmt(r.configured)} | {fmt(r.tuned)} | "
            + (
                f"±{100 * r.tolerance:g} % ({r.unit.removeprefix('relative: ')}) "
                if r.relative
                else f"±{r.tolerance:g} {r.unit} "
            )
            + f"| {'yes' if r.ok else 'NO'} |"
        )
    return lines


@dataclass(frozen=True)
class CardCheck:
    """One simulated card: its configured options beside what ``hilsim tune --convention
    gpgpusim`` recovered from the microbenchmarks run on it."""

    config: str
    microbench: str
    rows: list[Row]

    @property
    def ok(self) -> bool:
        """Every measured quantity recovered within its tolerance (rows read from the
        device or the preset are shown, not counted)."""
        return all(r.ok for r in self.rows if r.category == "measured")

    @property
    def heading(self) -> str:
        return (
            f"{Path(self.config).name} vs "
            f"`hilsim tune --convention gpgpusim {Path(self.microbench).name}`"
        )


def check_card(config: str, microbench: str) -> CardCheck:
    """Tune on ``microbench`` (a simulated card's ``microbench.json``) and compare the
    recovered options with ``config`` (the card's name or ``gpgpusim.config``)."""
    result = tune_simulated(microbench)
    options = {o.name: o.value for o in result.options if o.file == "gpgpusim.config"}
    card = card_config(config).options()
    rows = compare(card, options, measured_values(microbench)) + preset_rows(card, result)
    return CardCheck(config, microbench, rows)


if __name__ == "__main__":
    raise SystemExit(
        "closedloop: run `hilsim gpgpusim closed-loop CONFIG MICROBENCH [CONFIG MICROBENCH ...]`"
    )
