"""The chase-checksum fix (the checksum add moved out of the timed loop) seen on the
simulated card.

Runs the suite's latency chases (L1, L2, DRAM, shared) on simulated SM7_QV100 (one SM)
twice: with the kernel text as it is now (timed loop = the chain only) and with the text
of commit 469b3c9 (``sum += p`` inside the timed loop), read from git history so that no
second copy of any kernel lives in the tree. Prints cycles per load for both and the
difference. The old kernels' checksum covers the timed lap, so the suite's check (which
expects the warm lap) marks them invalid; their cycle counts are still what they measure.

    python benchmarks/sim_chase_checksum.py [--card SM7_QV100] [--commit 469b3c9]

Needs a GPGPU-Sim build (``hilsim gpgpusim setup``) and a git checkout with that commit.
"""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def old_sources(commit: str) -> dict[str, str]:
    """``latency.SOURCES`` as they were at ``commit`` (executed from git, not copied)."""
    src = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{commit}:microbench/latency.py"],
        capture_output=True, text=True, check=True,
    ).stdout
    start = src.index('_CHASE_TEMPLATE = r"""')
    end = src.index("SOURCES: dict[str, str]")
    ns: dict[str, str] = {}
    exec(src[start:end], ns)  # noqa: S102 - two string constants from our own history
    template = ns["_CHASE_TEMPLATE"]
    return {
        "chase": template.format(op="ca") + template.format(op="cg"),
        "shared_chase": ns["SHARED_CHASE"],
    }


def measure(card_name: str) -> dict[str, float]:
    from hilsim.microbench.latency import chase_latencies, shared_latency
    from hilsim.simmodel.gpgpusim.build import find_build
    from hilsim.simmodel.gpgpusim.cards import card_config
    from hilsim.simmodel.gpgpusim.simdevice import GpgpusimDevice

    build = find_build()
    if build is None:
        raise SystemExit("no GPGPU-Sim build: run `hilsim gpgpusim setup` first")
    device = GpgpusimDevice(card_config(card_name, build), build=build)
    return {m.name: float(m.value) for m in chase_latencies(device) + [shared_latency(device)]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--card", default="SM7_QV100")
    parser.add_argument("--commit", default="469b3c9")
    args = parser.parse_args()
    from hilsim.microbench import latency

    now = measure(args.card)
    current = dict(latency.SOURCES)
    latency.SOURCES.update(old_sources(args.commit))
    try:
        before = measure(args.card)
    finally:
        latency.SOURCES.update(current)
    print(f"{args.card}, cycles per load: checksum in the timed loop ({args.commit}) -> pure chain")
    for name in now:
        delta = before[name] - now[name]
        print(f"  {name:16s} {before[name]:8.2f} -> {now[name]:8.2f}  ({delta:+.2f})")


if __name__ == "__main__":
    main()
