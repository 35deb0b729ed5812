"""Wall time of the whole microbenchmark suite on a simulated card, per family, with and
without ``--quick``: the user's command (``hilsim agent microbench --backend gpgpusim``)
run from disk, its JSON read back.

    python benchmarks/sim_suite_time.py                       # SM7_QV100, full and --quick
    python benchmarks/sim_suite_time.py --card SM86_RTX3070 --h100-like --modes quick

``--h100-like`` runs the card the sampled-simulation issue tried as a new user would: the
given card with 80 memory channels (linear partition indexing: GPGPU-Sim's IPOLY hash
needs 16/32/64 banks), compute capability 9.0 and the interconnect and L2 at twice the
core clock (``-gpgpu_clock_domains 1980:3960:3960:3106``), written to a folder and passed
as ``--card DIR``. Wall times depend on the machine's load: the script prints the load
average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import tempfile
import time
from pathlib import Path

H100_LIKE = {
    "-gpgpu_n_mem": "80",
    "-gpgpu_memory_partition_indexing": "0",
    "-gpgpu_clock_domains": "1980:3960:3960:3106",
    "-gpgpu_compute_capability_major": "9",
    "-gpgpu_compute_capability_minor": "0",
}


def card_argument(name: str, h100_like: bool, folder: Path) -> str:
    """The ``--card`` argument: the shipped name, or a written folder with the overrides."""
    if not h100_like:
        return name
    from hilsim.simmodel.gpgpusim.build import find_build  # noqa: PLC0415
    from hilsim.simmodel.gpgpusim.cards import card_config  # noqa: PLC0415

    card = card_config(name, find_build(), options=H100_LIKE)
    card.write(folder)
    return str(folder)


def run(card: str, quick: bool, out: Path) -> dict:
    """One ``hilsim agent microbench`` run: wall and CPU seconds (the command and its
    simulator processes), the JSON."""
    cmd = ["hilsim", "agent", "microbench", "--backend", "gpgpusim", "--card", card,
           "-o", str(out)] + (["--quick"] if quick else [])
    t0, before = time.monotonic(), resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall, after = time.monotonic() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return {"wall_s": wall, "cpu_s": cpu, "doc": json.loads(out.read_text())}


def main(argv: list[str] | None = None) -> int:
    """Command line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--card", default="SM7_QV100")
    ap.add_argument("--h100-like", action="store_true")
    ap.add_argument("--modes", default="full,quick")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        card = card_argument(args.card, args.h100_like, Path(tmp) / "card")
        label = f"{args.card}{' (80 channels, 2x L2 clock, cc 9.0)' if args.h100_like else ''}"
        for mode in args.modes.split(","):
            load = os.getloadavg()[0]
            got = run(card, mode == "quick", Path(tmp) / f"{mode}.json")
            sim = got["doc"]["device"]["simulation"]
            cpu = sim.get("families_cpu_s", {})
            families = ", ".join(f"{f} {s:.0f} s ({cpu.get(f, 0):.0f} s CPU)"
                                 for f, s in sim["families"].items())
            skipped = [m["name"] for m in got["doc"]["measurements"]
                       if str(m.get("note", "")).startswith("skipped: not run")]
            print(f"{label} {mode}: {got['wall_s']:.0f} s command wall ({got['cpu_s']:.0f} s "
                  f"CPU), {sim['wall_s']:.0f} s "
                  f"suite, {sim['sim_cycles']:,.0f} simulated cycles in {len(sim['runs'])} "
                  f"runs; load {load:.1f} -> {os.getloadavg()[0]:.1f}")
            print(f"  per family: {families}")
            if skipped:
                print(f"  not run: {', '.join(skipped)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
