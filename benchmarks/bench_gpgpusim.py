"""GPGPU-Sim setup and run wall times (prints figures; not a test).

    python benchmarks/bench_gpgpusim.py [--source TARBALL] [--cards SM7_QV100,...] [--n 1024]

1. `ensure_build` of an already built key (the idempotent `hilsim gpgpusim setup`);
2. tests/data/gpgpusim/vecadd_chase.cu compiled with nvcc 11.x (`compile_cuda`);
3. that program on each card with 1 SM (`-gpgpu_n_clusters 1`) and with all SMs: wall
   time, simulated cycles per kernel, simulated cycles per wall second.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from hilsim.simmodel.gpgpusim.build import ensure_build, find_build
from hilsim.simmodel.gpgpusim.compile import compile_cuda
from hilsim.simmodel.gpgpusim.run import run_program

ROOT = Path(__file__).resolve().parent.parent
TARBALL = ROOT.parent / "shared" / "vendor" / "gpgpu-sim_distribution-667834c.tar.gz"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, default=TARBALL if TARBALL.is_file() else None)
    ap.add_argument("--cards", default="SM7_QV100,SM75_RTX2060,SM86_RTX3070")
    ap.add_argument("--n", type=int, default=1024, help="vector length")
    ap.add_argument("--full", action="store_true", help="also run with every SM of the card")
    args = ap.parse_args()
    if args.source is not None:
        t = time.monotonic()
        build = ensure_build(source=args.source)
        print(f"setup (idempotent, key {build.key}): {time.monotonic() - t:.2f} s")
    else:
        build = find_build()
        if build is None:
            raise SystemExit("no GPGPU-Sim build: run `hilsim gpgpusim setup`")
    with tempfile.TemporaryDirectory(prefix="bench-gpgpusim-") as tmp:
        t = time.monotonic()
        exe = compile_cuda(ROOT / "tests/data/gpgpusim/vecadd_chase.cu", Path(tmp) / "vc")
        print(f"compile vecadd_chase.cu (nvcc 11.x): {time.monotonic() - t:.1f} s")
        for card in args.cards.split(","):
            for label, opts in (("1 SM", {"-gpgpu_n_clusters": "1"}), ("all SMs", {})):
                if label == "all SMs" and not args.full:
                    continue
                opts = {**opts, "-gpgpu_perf_sim_memcpy": "0"}
                run = run_program([exe, str(args.n)], card, Path(tmp) / f"{card}-{label[0]}",
                                  options=opts, build=build)
                cycles = run.kernel_cycles()
                total = sum(c for _, c in cycles)
                per = " + ".join(f"{c:,}" for _, c in cycles)
                print(f"{card:<14} {label:<7} wall {run.wall_s:6.1f} s  cycles {per} = "
                      f"{total:,}  ({total / run.wall_s:,.0f} cycles/s)")


if __name__ == "__main__":
    main()
