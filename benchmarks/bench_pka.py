"""Benchmark: PKA Principal Kernel Selection on 1M launches x 12 Table 2 metrics.

Builds a seeded synthetic mixture (``--groups`` kernel families, each with its
own metric vector, lognormal within-family spread, kernel names and duration
scale), then times ``PKA().plan(bundle)`` and reports the peak memory.

Usage::

    python benchmarks/bench_pka.py [--launches 1000000] [--groups 12] [--seed 0]
        [--two-level J] [--classifier sgd|gnb|mlp] [--target-error E] [--k-max K]

``--target-error 1e-9`` forces the worst case (every K up to ``--k-max`` tried).

The plan time is measured without tracemalloc (tracing every allocation slows
scikit-learn's mini-batch loop several-fold). Peak memory is the process peak
RSS from ``resource.getrusage`` after the plan, with the peak before it (the
synthetic bundle) for comparison; ``--tracemalloc`` plans a second time under
``tracemalloc`` and prints the traced peak (numpy buffers included).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
import tracemalloc

import numpy as np
import pandas as pd
from hilsim.analyzer.methods.pka import PKA

from hilsim.core.bundle import Bundle
from hilsim.core.metric_names import TABLE2_METRICS
from hilsim.core.schema import normalize_launches


def synthetic_bundle(n: int, groups: int, seed: int) -> Bundle:
    """``n`` launches from ``groups`` kernel families with all 12 Table 2 metrics."""
    rng = np.random.default_rng(seed)
    weights = rng.dirichlet(np.full(groups, 2.0))
    family = rng.choice(groups, size=n, p=weights)
    centres = rng.lognormal(mean=9.0, sigma=2.0, size=(groups, len(TABLE2_METRICS)))
    centres[:, 10] = rng.uniform(4.0, 32.0, groups)  # divergence efficiency (ratio)
    spread = rng.lognormal(0.0, 0.05, size=(n, len(TABLE2_METRICS)))
    metrics = pd.DataFrame(centres[family] * spread, columns=list(TABLE2_METRICS))
    metrics["launch__grid_size"] = np.round(metrics["launch__grid_size"])
    metrics.insert(0, "launch_id", np.arange(n, dtype=np.int64))
    base_ns = rng.lognormal(mean=10.0, sigma=1.5, size=groups)
    durations = base_ns[family] * rng.lognormal(0.0, 0.05, n)
    names = pd.Categorical.from_codes(
        family * 3 + rng.integers(0, 3, n), categories=[f"kernel_{i}" for i in range(groups * 3)]
    )
    grid = np.maximum(1, (centres[family, 11] // 1).astype(np.int64))
    frame = pd.DataFrame(
        {
            "name": names,
            "duration_ns": np.round(durations).astype(np.int64),
            "grid_x": grid,
            "grid_y": 1,
            "grid_z": 1,
            "block_x": 128 * (1 + family % 4),
            "block_y": 1,
            "block_z": 1,
            "regs": 32 + 8 * (family % 5),
        }
    )
    return Bundle(launches=normalize_launches(frame, "synthetic"), metrics=metrics)


def _peak_rss_mib() -> float:
    """Process peak resident set size so far (ru_maxrss: KiB on Linux, bytes on macOS)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / 2**20 if sys.platform == "darwin" else rss / 2**10


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=int, default=1_000_000)
    parser.add_argument("--groups", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--two-level", type=int, default=None, metavar="J")
    parser.add_argument("--classifier", default="sgd", choices=["sgd", "gnb", "mlp"])
    parser.add_argument("--target-error", type=float, default=0.05)
    parser.add_argument("--k-max", type=int, default=20)
    parser.add_argument(
        "--tracemalloc",
        action="store_true",
        help="plan a second time under tracemalloc to report the traced peak (slow)",
    )
    args = parser.parse_args(argv)

    start = time.perf_counter()
    bundle = synthetic_bundle(args.launches, args.groups, args.seed)
    if args.two_level is not None:
        assert bundle.metrics is not None
        bundle.metrics = bundle.metrics.iloc[: args.two_level].reset_index(drop=True)
    built = time.perf_counter() - start
    method = PKA(
        target_error=args.target_error,
        k_max=args.k_max,
        seed=args.seed,
        detailed_first=args.two_level,
        classifier=args.classifier,
    )

    rss_before = _peak_rss_mib()
    start = time.perf_counter()
    plan = method.plan(bundle)
    elapsed = time.perf_counter() - start
    rss_after = _peak_rss_mib()
    traced = None
    if args.tracemalloc:
        tracemalloc.start()
        method.plan(bundle)
        traced = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()

    diag = plan.diagnostics
    print(f"cpus            {os.cpu_count()}")
    size = f"{args.launches:,} x {len(TABLE2_METRICS)} metrics"
    print(f"launches        {size} (built in {built:.1f} s)")
    kmeans = f"{diag['kmeans']}, fit rows {diag['kmeans_fit_rows']:,}"
    print(f"mode            {diag['mode']} ({kmeans})")
    pca = f"{diag['pca_components']} components, variance {diag['explained_variance']:.3f}"
    print(f"pca             {pca}")
    print(f"K tried         {[row['k'] for row in diag['error_by_k']]}")
    print(f"chosen K        {diag['chosen_k']} (target met: {diag['target_met']})")
    print(f"projected error {diag['projected_error']:.4f}")
    if "classifier" in diag:
        info = diag["classifier"]
        print(f"classifier      {info['name']} accuracy {info.get('accuracy')}")
        print(f"all-N error     {diag['all_launches_error']:.4f}")
    print(f"plan time       {elapsed:.2f} s (first call, sklearn import included)")
    print(f"peak RSS        {rss_after:.0f} MiB (getrusage; {rss_before:.0f} MiB before plan)")
    if traced is not None:
        print(f"peak traced     {traced:.0f} MiB (tracemalloc, second plan call)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
