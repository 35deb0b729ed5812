"""Measured vs configured unit latencies and initiation intervals on simulated cards: the
one-warp probes of ``hilsim.microbench.unit_ops`` (SFU, DIV, MAX, SHFL) and the suite's
``lat_fp32`` / ``lat_int32`` (MAD), per entry of GPGPU-Sim's
``-ptx_opcode_latency_{int,fp,sfu}`` / ``-ptx_opcode_initiation_{int,sfu}``.

    python benchmarks/unit_probe_table.py                        # SM7_QV100, SM75_RTX2060
    python benchmarks/unit_probe_table.py --cards SM86_RTX3070 --sweep

Prints a markdown table per card (the one in docs/microbench.md) and the wall time.
``--sweep`` also moves each probed entry by +4 / +12 (latency) and +1 / +3 (initiation)
and prints the measured change: how each probe follows its entry (the slope the
simulator-in-the-loop tuner relies on). Needs a GPGPU-Sim build (``hilsim gpgpusim setup``);
short integer lists are completed from GPGPU-Sim's defaults as every run completes them
(``simmodel/gpgpusim/cards.py``).
"""

from __future__ import annotations

import argparse
import time

from hilsim.microbench import compute, unit_ops
from hilsim.simmodel.gpgpusim.build import find_build
from hilsim.simmodel.gpgpusim.cards import card_config, completed_int_options
from hilsim.simmodel.gpgpusim.simdevice import GpgpusimDevice

from hilsim.core import measurement_names as mn

INT = ("ADD", "MAX", "MUL", "MAD", "DIV", "SHFL")
FP = ("ADD", "MAX", "MUL", "MAD", "DIV")
#: (option, entry) -> the measurement that probes it
PROBES = {
    ("-ptx_opcode_latency_int", "MAX"): mn.INT_MAX_LATENCY,
    ("-ptx_opcode_latency_int", "MAD"): mn.INT32_LATENCY,
    ("-ptx_opcode_latency_int", "DIV"): mn.INT_DIV_LATENCY,
    ("-ptx_opcode_latency_int", "SHFL"): mn.SHFL_LATENCY,
    ("-ptx_opcode_latency_fp", "MAX"): mn.FP_MAX_LATENCY,
    ("-ptx_opcode_latency_fp", "MAD"): mn.FP32_LATENCY,
    ("-ptx_opcode_latency_fp", "DIV"): mn.FP_DIV_LATENCY,
    ("-ptx_opcode_latency_sfu", "SFU"): mn.SFU_LATENCY,
    ("-ptx_opcode_initiation_int", "DIV"): mn.INT_DIV_INITIATION,
    ("-ptx_opcode_initiation_int", "SHFL"): mn.SHFL_INITIATION,
    ("-ptx_opcode_initiation_sfu", "SFU"): mn.SFU_INITIATION,
}


def entries(option: str) -> tuple[str, ...]:
    """The names of an option's list entries."""
    if option.endswith("_sfu"):
        return ("SFU",)
    return INT if option.endswith("_int") else FP


def configured(card, option: str) -> dict[str, int]:
    """Entry -> value as the simulator reads it (a short int list completed)."""
    value = {**card.options(), **completed_int_options(card.options())}[option]
    return dict(zip(entries(option), (int(float(v)) for v in value.split(",")), strict=False))


def measure(build, card_name: str, options: dict[str, str] | None = None) -> dict[str, float]:
    """Every probed entry's measurement on the card (two simulator runs)."""
    card = card_config(card_name, build, options=options)
    device = GpgpusimDevice(card, build=build)
    got = {m.name: float(m.value) for m in unit_ops.simulated(device) if m.value is not None}
    for key in ("fp32", "int32"):
        m = compute.latency(device, key)
        got[m.name] = float(m.value)
    return got


def table(build, card_name: str) -> None:
    """The markdown table of one card."""
    card = card_config(card_name, build)
    t0 = time.monotonic()
    got = measure(build, card_name)
    wall = time.monotonic() - t0
    print(f"\n{card_name} (core clock {card.option('-gpgpu_clock_domains').split(':')[0]} MHz; "
          f"{wall:.0f} s wall)\n")
    print("| option | entry | configured | measured | measured - configured |")
    print("|---|---|---|---|---|")
    for option in ("-ptx_opcode_latency_int", "-ptx_opcode_latency_fp",
                   "-ptx_opcode_latency_sfu", "-ptx_opcode_initiation_int",
                   "-ptx_opcode_initiation_sfu"):
        for entry, value in configured(card, option).items():
            name = PROBES.get((option, entry))
            if name is None:
                print(f"| `{option}` | {entry} | {value} | no probe | |")
                continue
            m = got[name]
            print(f"| `{option}` | {entry} | {value} | {m:.2f} (`{name}`) | {m - value:+.2f} |")


def sweep(build, card_name: str) -> None:
    """Each probed entry moved by two amounts: the measured change."""
    card = card_config(card_name, build)
    base = measure(build, card_name)
    print(f"\n{card_name}: measured change when one entry moves\n")
    print("| option | entry | moved by | measured change |")
    print("|---|---|---|---|")
    for steps in ((4, 1), (12, 3)):
        options: dict[str, list[int]] = {}
        for (option, entry) in PROBES:
            values = options.setdefault(option, list(configured(card, option).values()))
            values[entries(option).index(entry)] += steps[0] if "latency" in option else steps[1]
        got = measure(build, card_name, {o: ",".join(map(str, v)) for o, v in options.items()})
        for (option, entry), name in PROBES.items():
            step = steps[0] if "latency" in option else steps[1]
            print(f"| `{option}` | {entry} | +{step} | {got[name] - base[name]:+.2f} |")


def main(argv: list[str] | None = None) -> int:
    """Command line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cards", default="SM7_QV100,SM75_RTX2060")
    ap.add_argument("--sweep", action="store_true", help="also move every probed entry")
    args = ap.parse_args(argv)
    build = find_build()
    if build is None:
        raise SystemExit("no GPGPU-Sim build: run `hilsim gpgpusim setup`")
    for name in args.cards.split(","):
        table(build, name)
        if args.sweep:
            sweep(build, name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
