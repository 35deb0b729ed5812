"""Whether `hilsim tune --on-simulator` recovers a card's L2 clock from a whole GPU's L2
bandwidth (prints the figures; not a test; docs/tuner.md's "L2 clock" table).

    python benchmarks/l2_clock_ratio.py [--structures SM7_QV100,SM7_TITANV] [--factor 2]
        [--workers 2] [--out DIR]

For each GPGPU-Sim card named, the "true" card is that card with its interconnect and L2
clocks at ``--factor`` x its own (core and DRAM clocks kept). Its L2 bandwidth is
measured on the whole card (every SM and channel, its own partition indexing: a whole
GPU's figure, as on silicon) and written with the card's device facts (which hold no L2
clock); the tuner, starting from the unmodified card, searches the L2 clock alone
(``only=("l2_clock",)``) on its memory slice. Printed per card: the true, base and
tuned L2 clocks, and the whole card's L2 bandwidth on the true card, on the base (the
base's ratio kept) and on the tuned card. Needs a GPGPU-Sim build.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from hilsim.microbench import bandwidth
from hilsim.simmodel.gpgpusim.build import find_build
from hilsim.simmodel.gpgpusim.cards import CardConfig, card_config
from hilsim.simmodel.gpgpusim.simdevice import card_device_facts
from hilsim.simmodel.tuner import report as tunereport
from hilsim.simmodel.tuner.card import write_card
from hilsim.simmodel.tuner.cardcheck import whole_card_device
from hilsim.simmodel.tuner.search import tune_on_simulator

from hilsim.core.measurement import write_microbench_json


def card_folder(card: CardConfig, folder: Path) -> CardConfig:
    """``card`` written as a folder (:func:`hilsim.simmodel.tuner.card.write_card`), read
    back."""
    folder.mkdir(parents=True, exist_ok=True)
    write_card(folder, card, card.config_text(), None)
    return card_config(folder)


def whole_l2(card: CardConfig, build: Any) -> tuple[Any, float]:
    """The suite's L2 bandwidth on every SM and channel of ``card`` (its own indexing)."""
    device = whole_card_device(card, build)
    t0 = time.monotonic()
    m = bandwidth.l2(device)[0]
    return m, time.monotonic() - t0


def one(name: str, factor: float, build: Any, workers: int, out: Path) -> dict[str, Any]:
    base = card_config(name, build)
    core, icnt, l2, dram = base.clock_domains_mhz
    true = card_folder(base.with_options(
        {"-gpgpu_clock_domains": f"{core:g}:{icnt * factor:g}:{l2 * factor:g}:{dram:g}"}),
        out / f"true-{name}")
    m, wall_true = whole_l2(true, build)
    for key in ("sms_simulated", "mem_channels_simulated"):  # a whole GPU's measurement
        m.params.pop(key, None)
    measured = write_microbench_json(out / f"{name}.microbench.json", [m],
                                     card_device_facts(true))
    shutil.rmtree(true.path.parent)  # the tuner never sees the true card
    result = tune_on_simulator(measured, base=name, build=build, workers=workers, say=print,
                               only=("l2_clock",))
    tuned = card_config(tunereport.write(result, out / f"tuned-{name}", overwrite=True))
    t_l2 = tuned.clock_domains_mhz[2]
    mt, wall_tuned = whole_l2(tuned, build)
    mb, wall_base = whole_l2(base, build)
    row = {
        "card": name, "core_mhz": core, "true_l2_mhz": l2 * factor, "base_l2_mhz": l2,
        "tuned_l2_mhz": t_l2, "whole_l2_true": m.value, "whole_l2_base": mb.value,
        "whole_l2_tuned": mt.value, "runs": len(result.runs),
        "cpu_min": round(result.cpu_s / 60, 2),
        "slice": result.memory_slice.as_dict(),
        "wall_s": {"true": round(wall_true), "tuned": round(wall_tuned),
                   "base": round(wall_base)},
        "target_row": next(t for t in tunereport.report(result)["targets"]
                           if t["knob"] == "l2_clock"),
    }
    print(json.dumps(row, indent=1, default=str))
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--structures", default="SM7_QV100,SM7_TITANV")
    ap.add_argument("--factor", type=float, default=2.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    build = find_build()
    if build is None:
        raise SystemExit("no GPGPU-Sim build found (run `hilsim gpgpusim setup`)")
    out = args.out or Path(tempfile.mkdtemp(prefix="l2-clock-"))
    out.mkdir(parents=True, exist_ok=True)
    rows = [one(name, args.factor, build, args.workers, out)
            for name in args.structures.split(",")]
    print("\n| card | core MHz | L2 MHz: true / base / tuned | whole-card L2 bytes/clk: true / "
          "base ratio kept / tuned | tuned vs true | slice | runs | CPU-min |")
    print("|---|---:|---|---|---:|---|---:|---:|")
    for r in rows:
        s = r["slice"]
        print(f"| {r['card']} | {r['core_mhz']:g} | {r['true_l2_mhz']:g} / {r['base_l2_mhz']:g} "
              f"/ {r['tuned_l2_mhz']:g} | {r['whole_l2_true']:.1f} / {r['whole_l2_base']:.1f} "
              f"/ {r['whole_l2_tuned']:.1f} | "
              f"{100 * (r['whole_l2_tuned'] / r['whole_l2_true'] - 1):+.1f}% | "
              f"{s['channels']} ch, {s['sms']} SMs | {r['runs']} | {r['cpu_min']} |")
    (out / "results.json").write_text(json.dumps(rows, indent=1, default=str) + "\n")


if __name__ == "__main__":
    main()
