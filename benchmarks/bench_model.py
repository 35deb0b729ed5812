"""Benchmark: ``hilsim.simmodel.model.predict`` on 1M launches (seeded synthetic counters).

Usage::

    python benchmarks/bench_model.py [--launches 1000000] [--preset QV100] [--seed 0]

Prints the time of one ``predict`` call (best of ``--repeat``) and the binding-limit mix.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from hilsim.simmodel import model
from hilsim.simmodel.presets import load_preset


def synthetic_counters(n: int, seed: int = 0) -> pd.DataFrame:
    """``n`` launches with varied launch configurations and counters (all columns)."""
    rng = np.random.default_rng(seed)
    ctas = rng.integers(1, 20000, n)
    block = rng.choice([32, 64, 128, 256, 512, 1024], n)
    inst = ctas * block / 32 * rng.lognormal(5, 1, n)
    l1 = inst * rng.uniform(0, 0.5, n)
    l2 = l1 * rng.uniform(0, 1, n)
    frame = pd.DataFrame({
        "grid_x": ctas, "grid_y": 1, "grid_z": 1, "block_x": block, "block_y": 1,
        "block_z": 1, "regs": np.minimum(rng.choice([16, 32, 40, 64, 96, 128], n),
                                           65536 // block),
        "smem_static": rng.choice([0, 1024, 8192, 16384, 32768], n), "smem_dynamic": 0,
        model.INST: inst, model.FP32_OPS[0]: inst * 32 * rng.uniform(0, 0.5, n),
        model.FP64_OPS[0]: inst * 32 * rng.uniform(0, 0.05, n),
        model.GLD_INST: l1 / 4, model.L1_LD: l1, model.L1_ST: l1 * 0.2,
        model.SHLD_INST: inst * rng.uniform(0, 0.1, n),
        model.L2_RD: l2, model.L2_WR: l1 * 0.2,
        model.DRAM_RD: l2 * 32 * rng.uniform(0, 1, n), model.DRAM_WR: l1 * 0.2 * 32,
    })
    return frame


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=1_000_000)
    parser.add_argument("--preset", default="QV100")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    config = load_preset(args.preset).timing
    counters = synthetic_counters(args.launches, args.seed)
    best = float("inf")
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        pred = model.predict(config, counters)
        best = min(best, time.perf_counter() - t0)
    print(f"predict: {args.launches:,} launches on {config.name}: {best:.3f} s "
          f"(best of {args.repeat})")
    mix = pred["binding"].value_counts(normalize=True)
    print("binding:", ", ".join(f"{k} {v:.1%}" for k, v in mix.items() if v))


if __name__ == "__main__":
    main()
