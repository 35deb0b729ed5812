"""The memory slice's bandwidth per channel against the slice's size (what
``hilsim tune --on-simulator`` runs its L2 and DRAM bandwidth evaluators on).

    python benchmarks/memory_slice.py CARD [CHANNELS:SMS ...] [--what l2,dram]

Runs the suite's simulated L2 bandwidth (:func:`hilsim.microbench.bandwidth.l2`) and
DRAM read (:func:`~hilsim.microbench.bandwidth.dram_read_slice`) on the GPGPU-Sim card
``CARD`` over slices of ``CHANNELS`` memory channels and ``SMS`` SMs (default: the old
one-channel slice of round(SMs / channels) SMs, the slice
:func:`hilsim.simmodel.tuner.memslice.choose_slice` takes, and the whole card), and
prints each slice's whole-card figure (bandwidth per channel x the card's channels), its
SMs per channel against the card's, the simulated cycles and the wall time. Needs a
GPGPU-Sim build (``hilsim gpgpusim setup``).
"""

from __future__ import annotations

import argparse
import time

from hilsim.microbench import bandwidth
from hilsim.simmodel.gpgpusim.build import find_build
from hilsim.simmodel.gpgpusim.cards import card_config
from hilsim.simmodel.gpgpusim.simdevice import GpgpusimDevice
from hilsim.simmodel.tuner.memslice import choose_slice


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("card")
    ap.add_argument("slices", nargs="*", help="CHANNELS:SMS (default: old, chosen, whole)")
    ap.add_argument("--what", default="l2,dram")
    args = ap.parse_args()
    build = find_build()
    if build is None:
        raise SystemExit("no GPGPU-Sim build found (run `hilsim gpgpusim setup`)")
    card = card_config(args.card, build)
    channels = int(float(card.option("-gpgpu_n_mem")))
    per = int(float(card.option("-gpgpu_n_cores_per_cluster", "1")))
    sms = card.sm_count
    if args.slices:
        slices = [tuple(int(x) for x in s.split(":")) for s in args.slices]
    else:
        chosen = choose_slice(sms, channels, per)
        slices = [(1, max(1, round(sms / channels))), (chosen.channels, chosen.sms),
                  (channels, sms)]
    print(f"{card.name}: {sms} SMs ({per} per cluster), {channels} channels, "
          f"{sms / channels:.3g} SMs per channel")
    for k, n in slices:
        device = GpgpusimDevice(card, build=build, throughput_sms=n, memory_slice_channels=k)
        for what in args.what.split(","):
            t0 = time.monotonic()
            m = bandwidth.l2(device)[0] if what == "l2" else bandwidth.dram_read_slice(device)
            ratio = device.active_sms / k
            print(f"  {what:4s} slice {k:3d} ch {device.active_sms:4d} SMs "
                  f"({ratio:.3g}/ch, {ratio / (sms / channels) - 1:+.1%}): "
                  f"{m.value:9.1f} {m.unit} (valid {m.valid}), "
                  f"{m.params['slice_cycles']} cycles, {time.monotonic() - t0:.0f} s wall",
                  flush=True)


if __name__ == "__main__":
    main()
