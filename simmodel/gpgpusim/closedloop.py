"""Closed loop: the tuner on a simulated card's microbenchmarks recovers the card's config.

(Issue 12, part 3; Accel-Sim paper, Section II-C: microbenchmarks -> tuner -> config.)
A card is simulated from a known ``gpgpusim.config``; the suite runs on it
(``hilsim agent microbench --backend gpgpusim``); ``hilsim tune --convention gpgpusim``
turns the measurements and the device facts into options; :func:`compare` puts every
recovered option beside the configured one with the tolerance :data:`TOLERANCE` states.

Convention of the latency options (``gpgpusim``): the option values that make GPGPU-Sim
reproduce the measured load-to-use latencies, through the map measured on the simulator
(:mod:`hilsim.simmodel.gpgpusim.calibration`), rounded to an integer.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hilsim.simmodel.tuner import _geometry

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
}
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
)


def _num(value: str) -> float:
    return float(str(value).split()[0].split(",")[0])


def values_of(options: dict[str, str]) -> dict[str, float]:
    """The compared quantities from a flat option dict (a card config or tuned output)."""
    out: dict[str, float] = {}
    for name in _INT_OPTIONS:
        if name in options:
            out[name] = _num(options[name])
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
        sets, line, assoc = _geometry(options["-gpgpu_cache:dl2"])
        banks = _num(options["-gpgpu_n_mem"]) * _num(
            options.get("-gpgpu_n_sub_partition_per_mchannel", "1")
        )
        out["l2_bytes"] = sets * line * assoc * banks
    return out


@dataclass(frozen=True)
class Row:
    """One compared quantity."""

    quantity: str
    configured: float | None
    tuned: float | None
    tolerance: float
    unit: str

    @property
    def ok(self) -> bool:
        """Recovered within the tolerance."""
        return (
            self.configured is not None
            and self.tuned is not None
            and abs(self.tuned - self.configured) <= self.tolerance
        )


def tune_simulated(microbench: str | os.PathLike[str], convention: str = "gpgpusim") -> Any:
    """``hilsim tune`` on a simulated card's ``microbench.json`` (a :class:`TuneResult`)."""
    from hilsim.simmodel.tuner import read_microbench, tune  # noqa: PLC0415

    rows, facts = read_microbench(microbench)
    return tune(
        measurements=rows, facts=facts, facts_where=Path(microbench).name, convention=convention
    )


def compare(card_options: dict[str, str], tuned_options: dict[str, str]) -> list[Row]:
    """Configured vs tuned for every quantity of :data:`TOLERANCE`."""
    want, got = values_of(card_options), values_of(tuned_options)
    return [Row(q, want.get(q), got.get(q), tol, unit) for q, (tol, unit) in TOLERANCE.items()]


def markdown_table(rows: list[Row]) -> str:
    """The docs table: quantity | configured | tuned | tolerance | ok."""
    lines = ["| quantity | configured | tuned | tolerance | ok |", "|---|---:|---:|---|---|"]
    for r in rows:

        def fmt(v: float | None) -> str:
            return "-" if v is None else f"{v:g}"

        lines.append(
            f"| `{r.quantity}` | {fmt(r.configured)} | {fmt(r.tuned)} | "
            f"±{r.tolerance:g} {r.unit} | {'yes' if r.ok else 'NO'} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """``python -m hilsim.simmodel.gpgpusim.closedloop CONFIG MICROBENCH [...]``: tables."""
    import sys  # noqa: PLC0415

    from hilsim.simmodel.gpgpusim.cards import card_config  # noqa: PLC0415

    args = list(sys.argv[1:] if argv is None else argv)
    if not args or len(args) % 2:
        print("usage: closedloop CONFIG MICROBENCH [CONFIG MICROBENCH ...]", file=sys.stderr)
        return 2
    bad = 0
    for config, bench in zip(args[::2], args[1::2], strict=True):
        result = tune_simulated(bench)
        options = {o.name: o.value for o in result.options if o.file == "gpgpusim.config"}
        rows = compare(card_config(config).options(), options)
        bad += sum(not r.ok for r in rows)
        print(
            f"\n### {Path(config).name} vs `hilsim tune --convention gpgpusim {Path(bench).name}`\n"
        )
        print(markdown_table(rows))
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
