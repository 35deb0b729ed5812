"""Not a benchmark: how the held-out fixtures got their unit-probe rows (kept reproducible).

    python benchmarks/add_unit_probes.py CARD FILE [OUT] [--replace]

Runs the suite's unit probes (:func:`hilsim.microbench.unit_ops.simulated`: MAX, DIV,
SHFL, SFU and FP64 ADD/MUL/MAX latency and initiation, one program on one SM and one
memory channel, as ``hilsim agent microbench --backend gpgpusim`` runs them) on the
GPGPU-Sim card ``CARD`` and writes ``FILE`` (a ``microbench.json``) to ``OUT`` (default:
``FILE`` itself) with the probe rows it lacks appended and the probe program's run
added to ``device.simulation.runs``; every other row stays as it was. With ``--replace``
the probe rows FILE has are measured again too (the probe kernels changed), in place.
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


def with_unit_probes(card_name: str, microbench: Path, out: Path, replace: bool = False) -> Path:
    """``microbench`` plus the unit-probe rows it lacks (every unit-probe row with
    ``replace``), measured on ``card_name``."""
    build = find_build()
    if build is None:
        raise SystemExit("no GPGPU-Sim build found (run `hilsim gpgpusim setup`)")
    rows, facts = read_microbench_json(microbench)
    have = {m.name for m in rows}
    device = GpgpusimDevice(card_config(card_name, build), build=build)
    measured = {m.name: m for m in unit_ops.simulated(device)}
    if replace:
        rows = [measured.pop(m.name, m) for m in rows]
    added = [m for name, m in measured.items() if name not in have]
    rows.extend(added)
    if added or replace:  # the probe program's run joins the file's record of simulator runs
        sim = facts.setdefault("simulation", {})
        runs = sim.setdefault("runs", [])
        if replace:
            runs[:] = [r for r in runs if r.get("module") != "compute.ops"]
        runs.extend(device.runs)
    return write_microbench_json(out, rows, facts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("card", help="a GPGPU-Sim card name or gpgpusim.config path")
    parser.add_argument("microbench", type=Path, help="the microbench.json to extend")
    parser.add_argument("out", type=Path, nargs="?", help="where to write [MICROBENCH]")
    parser.add_argument("--replace", action="store_true",
                        help="measure the probe rows the file has again as well")
    args = parser.parse_args()
    path = with_unit_probes(args.card, args.microbench, args.out or args.microbench,
                            args.replace)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
