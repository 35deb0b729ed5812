"""Evidence for the simulator-in-the-loop tuner on cards it never saw: GPGPU-Sim's own
cards no calibration used, and cards drawn from a seed.

Accel-Sim (Khairy et al., ISCA 2020), Section IV: a tuned configuration is judged
against the card it describes. Here the card is a GPGPU-Sim config whose values are
known to the test and never to the tuner: the suite's kernels measure it
(:func:`measure`), the tuner sees only that file (``hilsim tune --on-simulator``), and
:func:`recovery` puts each recovered option beside the card's own. Two checks per card:

* the options the measurements set: the four memory latencies within 2 cycles or 3 %,
  every initiation interval exactly;
* every entry of every latency list, re-simulated with a one-warp probe
  (:mod:`hilsim.simmodel.gpgpusim.unitprobe`) on the true and the tuned card: within 2
  cycles or 3 % (:func:`probe_check`); entries no microbenchmark measures are the base
  card's and show here as what they are.

:data:`HELD_OUT` are the build's cards no calibration used; :func:`draw_card` writes a
card from a seed with other latencies, core and DRAM clocks, SM counts and initiation
intervals (3 and 6 among them) on a base card's structure.
"""

from __future__ import annotations

import math
import os
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from hilsim.simmodel.gpgpusim.cards import CONFIG_NAME, CardConfig
from hilsim.simmodel.gpgpusim.simdevice import GpgpusimDevice, card_device_facts
from hilsim.simmodel.gpgpusim.unitprobe import ENTRY_NAMES, PROBES, probe_measurements
from hilsim.simmodel.tuner.card import list_entries
from hilsim.simmodel.tuner.evaluators import EVALUATORS

from hilsim.core.measurement import write_microbench_json

#: GPGPU-Sim's cards no calibration or base used
HELD_OUT: tuple[str, ...] = ("SM7_GV100", "SM7_TITANV", "SM75_RTX2060_S")
LATENCIES = ("-gpgpu_l1_latency", "-gpgpu_smem_latency", "-gpgpu_l2_rop_latency",
             "-dram_latency")
INITIATIONS = ("-ptx_opcode_initiation_fp", "-ptx_opcode_initiation_dp",
               "-ptx_opcode_initiation_int")
#: the evaluators the latency and initiation knobs use (the bounded measurement)
LATENCY_EVALUATORS = ("chase", "shared", "launch", "lat.fp32", "lat.fp64", "lat.int32",
                      "tput.fp32", "tput.fp64", "tput.int32")


def within(true: float, tuned: float, cycles: float = 2.0, fraction: float = 0.03) -> bool:
    """``|tuned - true|`` within ``cycles`` or ``fraction`` of ``true``."""
    return abs(tuned - true) <= max(cycles, fraction * abs(true)) + 1e-9


@dataclass(frozen=True)
class Row:
    """One compared option (or list entry)."""

    option: str
    entry: str
    true: float
    tuned: float
    rule: str
    ok: bool


def _entry(card_options: dict[str, str], option: str, i: int) -> float:
    parts = [p for p in card_options[option].split(",") if p.strip()]
    return float(parts[i])


def recovery(true: CardConfig, tuned: CardConfig) -> list[Row]:
    """The four latencies (2 cycles or 3 %) and the MAD initiation intervals (exact)."""
    rows = []
    for option in LATENCIES:
        a, b = float(true.option(option)), float(tuned.option(option))
        rows.append(Row(option, "", a, b, "2 cycles or 3 %", within(a, b)))
    for option in INITIATIONS:
        a = float(list_entries(true, option)[3])
        b = float(list_entries(tuned, option)[3])
        rows.append(Row(option, "MAD", a, b, "exact", a == b))
    return rows


def probe_check(
    true: CardConfig, tuned: CardConfig, build: Any, keys: Sequence[str] | None = None
) -> list[Row]:
    """Every probed list entry simulated on both cards (one warp, one SM): the tuned
    card's cycles within 2 or 3 % of the true card's."""
    keys = list(keys or [p.key for p in PROBES])
    got = {}
    for name, card in (("true", true), ("tuned", tuned)):
        device = GpgpusimDevice(card, build=build)
        got[name] = {m.name: m for m in probe_measurements(device, keys, what=("latency",))}
    rows = []
    for name, m in got["true"].items():
        t = got["tuned"][name]
        entry = m.params["entry_name"]
        ok = m.value is not None and t.value is not None and within(m.value, t.value)
        rows.append(Row(m.params["option"], entry, float(m.value or math.nan),
                        float(t.value or math.nan), "2 cycles or 3 %", ok))
    return rows


def measure(
    card: CardConfig, build: Any, out: str | os.PathLike[str],
    evaluators: Iterable[str] = LATENCY_EVALUATORS,
) -> Path:
    """Run the suite's kernels of ``evaluators`` on ``card`` (as ``hilsim agent
    microbench --backend gpgpusim`` runs them) and write ``microbench.json`` with the
    card's device facts."""
    device = GpgpusimDevice(card, build=build)
    results = []
    for ev in evaluators:
        results.extend(EVALUATORS[ev](device))
    facts = card_device_facts(card)
    facts["simulation"] = {"runs": device.runs}
    return write_microbench_json(out, results, facts)


@dataclass(frozen=True)
class DrawnCard:
    """A card written from a seed, and the values drawn."""

    folder: Path
    drawn: dict[str, str]


def draw_card(seed: int, base: CardConfig, folder: str | os.PathLike[str]) -> DrawnCard:
    """A card on ``base``'s structure with latencies, clocks, SM count, unit latencies
    and initiation intervals drawn from ``seed`` (intervals from 1-8 with 3 and 6 among
    the three units'); written as ``folder/gpgpusim.config`` plus the files it names."""
    rng = np.random.default_rng(seed)
    core = int(rng.integers(90, 190)) * 10
    dram = float(base.clock_domains_mhz[3]) * float(rng.uniform(0.8, 1.25))
    b_core, b_icnt, b_l2, _ = base.clock_domains_mhz
    inits = [3, 6, int(rng.integers(1, 9))]
    rng.shuffle(inits)
    drawn: dict[str, str] = {
        "-gpgpu_l1_latency": str(int(rng.integers(18, 48))),
        "-gpgpu_smem_latency": str(int(rng.integers(14, 36))),
        "-gpgpu_l2_rop_latency": str(int(rng.integers(90, 260))),
        "-dram_latency": str(int(rng.integers(60, 260))),
        "-gpgpu_kernel_launch_latency": str(int(rng.integers(2000, 9000))),
        "-gpgpu_clock_domains": ":".join(
            f"{x:g}" for x in (core, round(core * b_icnt / b_core), round(core * b_l2 / b_core),
                               round(dram, 1))
        ),
        "-gpgpu_n_clusters": str(int(rng.integers(20, 120))),
    }
    for i, lst in enumerate(("fp", "dp", "int")):
        lat = list_entries(base, f"-ptx_opcode_latency_{lst}")
        init = list_entries(base, f"-ptx_opcode_initiation_{lst}")
        # an interval above its latency crashes GPGPU-Sim (measured: SIGSEGV, int MAD
        # latency 5 with interval 6): no card has one
        mad = max(int(rng.integers(3, 12)), inits[i])
        lat[3] = str(mad)
        lat[1] = str(max(int(lat[1]), mad))  # the unit's pipeline depth (MAX) covers it
        init[3] = str(inits[i])
        drawn[f"-ptx_opcode_latency_{lst}"] = ",".join(lat)
        drawn[f"-ptx_opcode_initiation_{lst}"] = ",".join(init)
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    card = base.with_options(drawn)
    (out / CONFIG_NAME).write_text(card.config_text(), encoding="utf-8")
    for src in card.referenced_files().values():
        shutil.copyfile(src, out / src.name)
    return DrawnCard(out, drawn)


def entry_name(option: str, i: int | None) -> str:
    """``ADD``..``SHFL`` for a list entry."""
    return "" if i is None else ENTRY_NAMES[i]
