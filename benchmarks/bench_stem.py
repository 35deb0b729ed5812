"""Time STEM+ROOT planning on 1M and 10M launches built from the CASIO distributions.

Usage: python benchmarks/bench_stem.py [--jitter NS] [N ...]   (default: 1000000 10000000)

``--jitter NS`` adds uniform noise to every duration so most are distinct: the
worst case for ROOT, whose work is proportional to the number of distinct
(kernel, duration) values.

Each size runs in a fresh subprocess so the peak resident memory it prints
(``ru_maxrss``) belongs to that size alone; ``plan peak`` is the extra memory the
plan call allocated (tracemalloc sees numpy's buffers).
Targets: 1M <= 1 s, 10M <= 15 s, peak memory <= 4 GB at 10M.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def run_one(n: int, jitter: int) -> dict[str, float]:
    from casio_scaled import scaled_bundle
    from hilsim.analyzer.methods.stem import STEM

    t0 = time.perf_counter()
    bundle = scaled_bundle(n, jitter_ns=jitter)
    build = time.perf_counter() - t0
    tracemalloc.start()
    t0 = time.perf_counter()
    plan = STEM(epsilon=0.05, seed=0).plan(bundle)
    seconds = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {
        "launches": n,
        "build_s": build,
        "plan_s": seconds,
        "plan_peak_bytes": peak,
        "process_peak_rss_bytes": rss,
        "clusters": len(plan.clusters),
        "samples": plan.n_samples,
    }


def main() -> None:
    args = sys.argv[1:]
    if args and args[0] == "--one":
        print(json.dumps(run_one(int(args[1]), int(args[2]))))
        return
    jitter = 0
    if args and args[0] == "--jitter":
        jitter, args = int(args[1]), args[2:]
    sizes = [int(x) for x in args] or [1_000_000, 10_000_000]
    print(f"durations: {'real CASIO values' if not jitter else f'CASIO + U[0,{jitter}) ns'}")
    print(
        f"{'launches':>12} {'plan s':>8} {'plan peak GB':>13} {'process RSS GB':>15} "
        f"{'clusters':>9} {'samples':>8}"
    )
    for n in sizes:
        proc = subprocess.run(
            [sys.executable, __file__, "--one", str(n), str(jitter)],
            capture_output=True,
            text=True,
            check=True,
        )
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        print(
            f"{r['launches']:>12,} {r['plan_s']:>8.2f} {r['plan_peak_bytes'] / 1e9:>13.2f} "
            f"{r['process_peak_rss_bytes'] / 1e9:>15.2f} {r['clusters']:>9} {r['samples']:>8}"
        )


if __name__ == "__main__":
    main()
