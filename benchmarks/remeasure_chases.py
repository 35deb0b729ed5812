"""Not a benchmark: how the simulated fixtures got their pointer-chase rows again (kept
reproducible).

    python benchmarks/remeasure_chases.py CARD FILE [OUT]

Runs the suite's latency chases and shared chase (:func:`hilsim.microbench.latency.
chase_latencies`, :func:`~hilsim.microbench.latency.shared_latency`: the slope of two
step counts) on the GPGPU-Sim card ``CARD`` and writes ``FILE`` (a ``microbench.json``)
to ``OUT`` (default: ``FILE`` itself) with those four rows replaced and their runs in
``device.simulation.runs`` replaced; every other row stays as it was.
``tests/data/microbench/gpgpusim/README.md`` names the run that made the committed
files. Needs a GPGPU-Sim build (``hilsim gpgpusim setup``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from hilsim.microbench import latency
from hilsim.simmodel.gpgpusim.build import find_build
from hilsim.simmodel.gpgpusim.cards import card_config
from hilsim.simmodel.gpgpusim.simdevice import GpgpusimDevice

from hilsim.core import measurement_names as mn
from hilsim.core.measurement import read_microbench_json, write_microbench_json

#: the runs of ``device.simulation.runs`` the chases made (the footprint sweep's stay)
_BENCHES = ("latency.chase", "shared_latency")


def with_chases(card_name: str, microbench: Path, out: Path) -> Path:
    """``microbench`` with its chase rows measured again on ``card_name``."""
    build = find_build()
    if build is None:
        raise SystemExit("no GPGPU-Sim build found (run `hilsim gpgpusim setup`)")
    rows, facts = read_microbench_json(microbench)
    device = GpgpusimDevice(card_config(card_name, build), build=build)
    fresh = {m.name: m for m in latency.chase_latencies(device)}
    fresh[mn.SHARED_LATENCY] = latency.shared_latency(device)
    missing = set(fresh) - {m.name for m in rows}
    if missing:
        raise SystemExit(f"{microbench}: no {', '.join(sorted(missing))} row to replace")
    rows = [fresh.get(m.name, m) for m in rows]
    runs = facts.setdefault("simulation", {}).setdefault("runs", [])
    runs[:] = [r for r in runs if r.get("benchmark") not in _BENCHES] + device.runs
    return write_microbench_json(out, rows, facts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("card", help="a GPGPU-Sim card name or gpgpusim.config path")
    parser.add_argument("microbench", type=Path, help="the microbench.json to update")
    parser.add_argument("out", type=Path, nargs="?", help="where to write [MICROBENCH]")
    args = parser.parse_args()
    print(f"wrote {with_chases(args.card, args.microbench, args.out or args.microbench)}")


if __name__ == "__main__":
    main()
