"""Not a benchmark: how the held-out fixtures got their unit-probe rows (kept reproducible).

    python benchmarks/add_unit_probes.py CARD FILE [OUT]

Runs the suite's unit probes (:func:`hilsim.microbench.unit_ops.simulated`: MAX, DIV,
SHFL, SFU and FP64 ADD/MUL/MAX latency and initiation, one program on one SM and one
memory channel, as ``hilsim agent microbench --backend gpgpusim`` runs them) on the
GPGPU-Sim card ``CARD`` and writes ``FILE`` (a ``microbench.json``) to ``OUT`` (default:
``FILE`` itself) with the probe rows it lacks appended and the probe program's run
added to ``device.simulation.runs``; every other row stays as it was.
``tests/data/microbench/gpgpusim/README.md`` (``heldout/``) names the run that made the
committed files. Needs a GPGPU-Sim build (``hilsim gpgpusim setup``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from hilsim.microbench import unit_ops
from hilsim.simmodel.gpgpusim.build import find_build
from hilsim.simmodel.gpgpusim.cards import card_config
from hilsim.simmodel.gpgpusim.simdevice import GpgpusimDevice

from hilsim.core.measurement import read_microbench_json, write_microbench_json


def with_unit_probes(card_name: str, microbench: Path, out: Path) -> Path:
    """``microbench`` plus the unit-probe rows it lacks, measured on ``card_name``."""
    build = find_build()
    if build is None:
        raise SystemExit("no GPGPU-Sim build found (run `hilsim gpgpusim setup`)")
    rows, facts = read_microbench_json(microbench)
    have = {m.name for m in rows}
    device = GpgpusimDevice(card_config(card_name, build), build=build)
    added = [m for m in unit_ops.simulated(device) if m.name not in have]
    rows.extend(added)
    if added:  # the probe program's run joins the file's record of simulator runs
        sim = facts.setdefault("simulation", {})
        sim.setdefault("runs", []).extend(device.runs)
    return write_microbench_json(out, rows, facts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("card", help="a GPGPU-Sim card name or gpgpusim.config path")
    parser.add_argument("microbench", type=Path, help="the microbench.json to extend")
    parser.add_argument("out", type=Path, nargs="?", help="where to write [MICROBENCH]")
    args = parser.parse_args()
    path = with_unit_probes(args.card, args.microbench, args.out or args.microbench)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
