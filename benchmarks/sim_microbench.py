"""Simulation wall time of the microbenchmark suite per family and per card.

    python benchmarks/sim_microbench.py                      # the committed runs
    python benchmarks/sim_microbench.py FILE.microbench.json ...
    python benchmarks/sim_microbench.py --run SM7_QV100 --only latency,launch
    python benchmarks/sim_microbench.py --runs          # also every simulated program

Every ``hilsim agent microbench --backend gpgpusim`` file records each simulator run
(benchmark, options, simulated cycles, wall seconds) under ``device.simulation.runs``;
this prints them grouped by family, with the simulation rate. ``--run`` runs the suite
first (needs a GPGPU-Sim build), writing ``<card>.microbench.json`` in the current folder.
Wall times depend on the machine's load: the committed files say where they were made.
Throughput families (bandwidth, compute, atomics) run on a 2-SM slice, L2/DRAM bandwidth
on a one-channel slice (the GPGPU-Sim device, ``simmodel/gpgpusim/simdevice.py``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

COMMITTED = Path(__file__).resolve().parents[1] / "tests" / "data" / "microbench" / "gpgpusim"
FAMILY_OF = {
    "latency.chase": "latency",
    "shared_latency": "latency",
    "latency_footprint_sweep": "latency",
    "launch_latency": "launch",
}


SLICE_OPTIONS = ("-gpgpu_n_clusters", "-gpgpu_n_mem")


def family(bench: str) -> str:
    """The suite family a simulated run belongs to."""
    return FAMILY_OF.get(bench, bench.split(".")[0])


def report(path: Path, runs_too: bool = False) -> float:
    """Print one file's table (and every run with ``runs_too``); return its wall seconds."""
    doc = json.loads(path.read_text())
    sim = doc["device"].get("simulation") or {}
    runs = sim.get("runs") or []
    by_family: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for r in runs:
        row = by_family[family(r["benchmark"])]
        row[0] += r["wall_s"]
        row[1] += r["sim_cycles"]
        row[2] += 1
    card = doc["device"].get("card", path.name)
    families = sim.get("families")  # the suite's own wall time per family, when recorded
    print(f"\n{card}  ({path.name}; build {sim.get('build')}; host {doc.get('host')})")
    print(f"  {'family':<12} {'runs':>4} {'sim cycles':>12} {'wall s':>8} {'cycles/s':>9}")
    total = 0.0
    for fam, (wall, cycles, n) in sorted(by_family.items()):
        total += wall
        print(f"  {fam:<12} {n:>4} {cycles:>12,.0f} {wall:>8.1f} {cycles / max(wall, 1e-9):>9,.0f}")
    print(
        f"  {'total':<12} {len(runs):>4} {sum(r['sim_cycles'] for r in runs):>12,.0f} "
        f"{total:>8.1f}   (suite wall {sim.get('wall_s')} s incl. compiles)"
    )
    if families:
        shown = ", ".join(f"{f} {t:.0f} s" for f, t in families.items())
        print(f"  per family incl. compiles and host work: {shown}")
    rates(doc)
    if runs_too:
        for r in runs:
            opts = " ".join(
                f"{k}={v}" for k, v in r.get("options", {}).items() if k in SLICE_OPTIONS
            )
            print(f"    {r['benchmark']:<28} {r['sim_cycles']:>12,.0f} {r['wall_s']:>8.1f}  {opts}")
    skipped = [
        m["name"] for m in doc["measurements"] if str(m.get("note", "")).startswith("skipped")
    ]
    if skipped:
        print(f"  skipped: {', '.join(skipped)}")
    return total


def rates(doc: dict) -> None:
    """Measured throughput/bandwidth vs what the card's config implies (closedloop)."""
    from hilsim.simmodel.gpgpusim.build import find_build
    from hilsim.simmodel.gpgpusim.cards import card_config
    from hilsim.simmodel.tuner.closedloop import RATES, configured_rates

    device = doc["device"]
    config = Path(device.get("config") or "")
    build = find_build() if str(device.get("config_source", "")).startswith("build") else None
    if build is not None:  # a shipped card: named relative to the build's configs
        config = Path(build.configs_dir) / config
    if not config.is_file():  # else the test data's copy
        config = COMMITTED.parents[1] / "accelsim" / f"{device.get('card')}.gpgpusim.config"
        if not config.is_file():
            return
    want = configured_rates(card_config(config).options())
    got = {m["name"]: m for m in doc["measurements"]}
    print(f"  {'measured vs configured':<26} {'measured':>10} {'configured':>10} {'ratio':>6}")
    for name, unit in RATES.items():
        m = got.get(name)
        if m is None or m.get("value") is None or name not in want:
            continue
        print(
            f"  {name:<26} {m['value']:>10.2f} {want[name]:>10.2f} "
            f"{m['value'] / want[name]:>6.3f}  {unit}"
        )
    for name in (
        "dram_write_bandwidth",
        "dram_copy_bandwidth",
        "l1_bandwidth",
        "l2_bandwidth",
        "atomic_throughput_distinct",
        "atomic_throughput_same",
    ):
        m = got.get(name)
        if m is not None and m.get("value") is not None:
            extra = m["params"].get("atomics_per_clk")
            shown = f"{extra:.3f} per clk" if extra is not None else f"{m['value']:.2f} {m['unit']}"
            frac = m["params"].get("achieved_fraction")
            if frac is not None:
                shown += f" ({frac:.3f} of the configured peak)"
            print(f"  {name:<26} {shown}")


def main(argv: list[str] | None = None) -> int:
    """Command line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--run", metavar="CARD", action="append", default=[])
    ap.add_argument("--only", default="clock,launch,latency,bandwidth,compute,atomics")
    ap.add_argument("--runs", action="store_true", help="also list every simulated program")
    args = ap.parse_args(argv)
    files = list(args.files)
    for card in args.run:
        out = Path(f"{card}.microbench.json")
        subprocess.run(
            [
                "hilsim",
                "agent",
                "microbench",
                "--backend",
                "gpgpusim",
                "--card",
                card,
                "--only",
                args.only,
                "-o",
                str(out),
            ],
            check=True,
        )
        files.append(out)
    if not files:
        files = sorted(COMMITTED.glob("*.microbench.json"))
    grand = sum(report(f, args.runs) for f in files)
    print(f"\nall cards: {grand:.1f} s of simulator wall time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
