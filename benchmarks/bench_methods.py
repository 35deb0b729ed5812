"""Plan time of every registered method on one large launch table.

Usage: python benchmarks/bench_methods.py [--launches 1000000] [--iteration 1000]

The launches repeat the real CASIO duration pattern (``casio_scaled.py``); each
kernel gets a seeded metric vector (the 12 PKA Table 2 metrics, 4 instruction-mix
counters) scaled with its duration, and every ``--iteration`` launches form one
NVTX region ("step"), so every method has the data it needs. Methods that refuse
the size say so (and at what size they stop), which is what this prints.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from casio_scaled import scaled_bundle  # noqa: E402
from hilsim.analyzer import methods  # noqa: E402

from hilsim.core.errors import HilsimError  # noqa: E402
from hilsim.core.metric_names import TABLE2_METRICS  # noqa: E402

MIX = [
    "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_hfma_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum",
]


def full_bundle(n: int, iteration: int, seed: int = 0):
    """CASIO-shaped launches with metrics for every launch and NVTX iterations."""
    bundle = scaled_bundle(n)
    launches = bundle.launches
    rng = np.random.default_rng(seed)
    codes = launches["name"].cat.codes.to_numpy()
    duration = launches["duration_ns"].to_numpy(dtype=float)
    columns = [*TABLE2_METRICS, *MIX]
    base = rng.uniform(1e3, 1e6, size=(codes.max() + 1, len(columns)))
    scale = duration / np.bincount(codes, weights=duration)[codes] * np.bincount(codes)[codes]
    values = base[codes] * scale[:, None] * rng.lognormal(0.0, 0.02, size=(n, len(columns)))
    metrics = pd.DataFrame(values, columns=columns)
    metrics.insert(0, "launch_id", np.arange(n, dtype=np.int64))
    bundle.metrics = metrics
    start = np.concatenate(([0], np.cumsum(duration + 1000)[:-1])).astype(np.int64)
    launches["start_ns"] = pd.array(start, dtype="Int64")
    step = np.arange(n) // iteration
    first = np.flatnonzero(np.r_[True, np.diff(step) != 0])
    last = np.r_[first[1:] - 1, n - 1]
    bundle.regions = pd.DataFrame(
        {
            "region_id": np.arange(len(first), dtype=np.int64),
            "name": "step",
            "path": "step",
            "depth": np.zeros(len(first), dtype=np.int64),
            "start_ns": start[first] - 1,
            "end_ns": start[last] + duration[last].astype(np.int64) + 1,
        }
    )
    launches["region"] = pd.Categorical(np.full(n, "step"))
    return bundle


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--launches", type=int, default=1_000_000)
    parser.add_argument("--iteration", type=int, default=1000)
    args = parser.parse_args()
    t0 = time.perf_counter()
    bundle = full_bundle(args.launches, args.iteration)
    print(
        f"{args.launches:,} launches, {len(bundle.regions):,} regions, "
        f"{bundle.metrics.shape[1] - 1} metrics (built in {time.perf_counter() - t0:.1f} s)"
    )
    print(f"{'method':<10} {'plan s':>8} {'samples':>9}  note")
    for name in methods.available():
        method = methods.create(name)
        t0 = time.perf_counter()
        try:
            plan = method.plan(bundle)
        except HilsimError as exc:
            print(f"{name:<10} {'refused':>8} {'':>9}  {exc}")
            continue
        seconds = time.perf_counter() - t0
        print(f"{name:<10} {seconds:>8.2f} {plan.n_samples:>9,}")


if __name__ == "__main__":
    main()
