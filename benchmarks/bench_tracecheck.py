"""Time the trace warnings on 10M synthetic launches (hilsim/formats/tracewarnings.py and
analyzer/tracecheck.py).

    python benchmarks/bench_tracecheck.py [--launches 10000000]

Prints the seconds of trace_warnings (NCCL share, busy time over streams, µs timer)
and method_warnings (STEM's per-kernel counts) on CASIO-shaped launches with two
streams and an NCCL kernel.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from hilsim.analyzer.tracecheck import method_warnings

from hilsim.formats.tracewarnings import trace_warnings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--launches", type=int, default=10_000_000)
    n = parser.parse_args().launches
    rng = np.random.default_rng(0)
    names = np.array(["gemm", "elementwise", "ncclDevKernel_AllReduce", "softmax"])
    codes = rng.integers(0, len(names), n)
    durations = rng.integers(1_000, 50_000, n)
    starts = np.cumsum(rng.integers(500, 40_000, n))
    launches = pd.DataFrame(
        {
            "name": pd.Categorical.from_codes(codes, categories=names),
            "duration_ns": durations,
            "start_ns": starts,
            "stream": codes % 2,
        }
    )
    t0 = time.perf_counter()
    warnings = trace_warnings(launches)
    t1 = time.perf_counter()
    few = method_warnings(launches, "stem")
    t2 = time.perf_counter()
    print(f"{n:,} launches: trace_warnings {t1 - t0:.2f} s, method_warnings {t2 - t1:.3f} s")
    for line in warnings + few:
        print(f"  {line}")


if __name__ == "__main__":
    main()
