"""Wall time of ``hilsim sweep`` on the embedded LocalCluster with 1 and 2 workers.

Usage: python benchmarks/bench_sweep.py [--seeds 10] [--workers 1,2]

The sweep: both shipped examples (CASIO durations, 85,217 launches; CASIO NeRF A100
SQLite, 1,106 launches) x STEM (epsilon 0.01, 0.02, 0.05, 0.1) and random (fraction
0.001, 0.01) x seeds, plus first-n. Each run is the whole command (cluster start, worker
imports, tasks, summaries and plots) into a fresh folder; the line printed by the sweep
says how long the tasks took on the cluster.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SPEC = """
seeds = {seeds}
[[workloads]]
example = "casio-durations"
[[workloads]]
example = "casio-nerf-a100"
[[methods]]
name = "stem"
params = {{ epsilon = [0.01, 0.02, 0.05, 0.1] }}
[[methods]]
name = "random"
params = {{ fraction = [0.001, 0.01] }}
[[methods]]
name = "first-n"
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--workers", default="1,2")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "sweep.toml"
        spec.write_text(SPEC.format(seeds=args.seeds))
        print(f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
        for workers in [int(w) for w in args.workers.split(",")]:
            out = Path(tmp) / f"out-{workers}"
            argv = [
                sys.executable,
                "-m",
                "hilsim.cli.main",
                "sweep",
                str(spec),
                "-o",
                str(out),
                "--workers",
                str(workers),
            ]
            t0 = time.perf_counter()
            done = subprocess.run(argv, capture_output=True, text=True, check=False)
            wall = time.perf_counter() - t0
            line = [ln for ln in done.stdout.splitlines() if ln.startswith("sweep:")]
            print(
                f"--workers {workers}: {wall:.1f} s whole command, exit {done.returncode}; "
                f"{line[0] if line else done.stderr.strip()[-200:]}",
                flush=True,
            )


if __name__ == "__main__":
    main()
