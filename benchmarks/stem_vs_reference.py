"""hilsim `stem` against the STEM-AE reference implementation, side by side.

Usage:
    python benchmarks/stem_vs_reference.py [--reference DIR] [--seeds 100] [--ablation]
                                           [--epsilon 0.05] [PROFILE ...]

PROFILE: any file or bundle ``hilsim import`` reads; default: every real profile the
project ships (the CASIO durations of the quickstart, the NeRF A100 Nsight Systems
SQLite, the V100 Kineto trace of ``tests/data/kineto``).

The reference is *not* vendored. Get it with ``git clone
https://github.com/ejchung0406/STEM-AE`` (any checkout holding
``figure7/sampling_methods/stem.py``) and pass the folder as ``--reference DIR`` or
``STEM_AE_REF=DIR``. Without it only our own figures are printed. The reference runs
unmodified: the launches are written as the ``nsys stats cuda_kern_exec_trace`` CSV it
reads (``results_ncu-example/<name>/default/nsys_<name>.csv`` in a temporary folder),
and its ``parse_stem`` is called once per seed with Python's ``random`` and numpy's
global state seeded (its ``KMeans(n_clusters=2)`` takes no seed: it draws its k-means++
start from numpy's global state, so an unseeded run changes its clusters from run to
run; seeding per seed makes the table reproducible). Its cluster count is read by
wrapping its ``cluster_recursive``.

Columns: clusters (mean over seeds), mean / max error, harmonic-mean speedup, and for
our plans the share of seeds where the plan's predicted 95% bound
(``predicted_error_bound``) and evaluate's 95% interval cover the truth.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import os
import random
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Any

import numpy as np
from hilsim.analyzer.compare import format_speedup

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PROFILES = [
    ROOT / "analyzer/examples/casio-kernel-durations.csv",
    ROOT / "analyzer/examples/casio-nerf-a100.nsys.sqlite",
    ROOT / "tests/data/kineto/hta-v100-ns-resolution.trace.json.gz",
]

#: the ablation rows: each changes one thing from the reference-like base
ABLATION: list[tuple[str, dict[str, Any]]] = [
    ("ROOT as printed: eq. (7) stop, no refine", {"stop": "eq7", "refine": "none"}),
    ("+ reference stop rule (parent allocation)", {"stop": "allocation", "refine": "none"}),
    ("  ... eq. (6) as printed (sqrt outside sum)", {"refine": "none", "eq6": "printed"}),
    ("  ... no at-least-one draw", {"refine": "none", "min_draw": False}),
    ("  ... no census (draw m >= N with repl.)", {"refine": "none", "census": False}),
    ("  ... without replacement + FPC sizes", {"refine": "none", "replacement": False}),
    ("  ... not split by launch config", {"refine": "none", "by_config": False}),
    ("+ balanced refine (default)", {}),
]


def load(path: Path):
    from hilsim.formats.read import load_profile

    return load_profile(path)


def ours(bundle, seeds: int, params: dict[str, Any]) -> dict[str, Any]:
    """Our method over seeds, scored with :func:`hilsim.analyzer.evaluate.score_plan`."""
    from hilsim.analyzer.evaluate import score_plan
    from hilsim.analyzer.methods.stem import STEM
    from hilsim.analyzer.tablecache import TableCache

    errors, speedups, clusters, bound_cov, interval_cov = [], [], [], [], []
    t0 = time.perf_counter()
    with TableCache():
        for seed in range(seeds):
            plan = STEM(**params, seed=seed).plan(bundle)
            score = score_plan(plan, bundle)
            errors.append(score.error)
            speedups.append(score.speedup)
            clusters.append(score.n_clusters)
            bound_cov.append(score.error <= plan.diagnostics["predicted_error_bound"])
            if score.interval_ns is not None:
                lo, hi = score.interval_ns
                interval_cov.append(lo <= score.truth_ns <= hi)
    return summarise(errors, speedups, clusters, time.perf_counter() - t0) | {
        "bound_coverage": float(np.mean(bound_cov)),
        "interval_coverage": float(np.mean(interval_cov)) if interval_cov else None,
        "predicted_bound": float(plan.diagnostics["predicted_error_bound"]),
    }


def summarise(errors, speedups, clusters, seconds) -> dict[str, Any]:
    s = np.asarray(speedups, dtype=float)
    return {
        "clusters": float(np.mean(clusters)),
        "clusters_range": (int(np.min(clusters)), int(np.max(clusters))),
        "mean_error": float(np.mean(errors)),
        "max_error": float(np.max(errors)),
        "hmean_speedup": float(len(s) / np.sum(1.0 / s)),
        "seconds": seconds,
    }


def reference_module(folder: Path):
    """Import STEM-AE's ``figure7/sampling_methods/stem.py`` without its package
    ``__init__`` (which imports every other method and their dependencies)."""
    methods_dir = folder / "figure7" / "sampling_methods"
    if not (methods_dir / "stem.py").is_file():
        raise SystemExit(f"{folder}: no figure7/sampling_methods/stem.py (not a STEM-AE checkout)")
    package = types.ModuleType("sampling_methods")
    package.__path__ = [str(methods_dir)]
    sys.modules["sampling_methods"] = package
    return importlib.import_module("sampling_methods.stem")


def reference(module, bundle, seeds: int, epsilon: float) -> dict[str, Any]:
    """The reference's ``parse_stem`` on ``bundle``'s launches, once per seed."""
    launches = bundle.launches
    names = launches["name"].astype(str).str.replace('"', "'", regex=False).to_numpy()
    durations = launches["duration_ns"].to_numpy()
    errors, speedups, clusters = [], [], []
    original = module.cluster_recursive
    seen: dict[str, Any] = {}

    def spy(key, values, c, kernel_info, *args, **kwargs):
        seen["kernel_info"] = kernel_info
        return original(key, values, c, kernel_info, *args, **kwargs)

    here = os.getcwd()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp, "results_ncu-example", "w", "default")
        folder.mkdir(parents=True)
        with open(folder / "nsys_w.csv", "w") as handle:
            handle.write(
                "API Start (ns),API Dur (ns),Queue Start (ns),Queue Dur (ns),Kernel Start (ns),"
                "Kernel Dur (ns),Total Dur (ns),PID,TID,DevId,API Function,GridXYZ,BlockXYZ,"
                "Kernel Name\n"
            )
            handle.writelines(
                f'0,0,0,0,0,{d},0,0,0,0,cudaLaunchKernel,1 1 1,1 1 1,"{n}"\n'
                for n, d in zip(names, durations, strict=True)
            )
        module.cluster_recursive = spy
        try:
            os.chdir(tmp)
            for seed in range(seeds):
                random.seed(seed)
                np.random.seed(seed)
                with contextlib.redirect_stdout(io.StringIO()):
                    speedup, error = module.parse_stem("suite", "w", "default", epsilon, True)
                errors.append(error)
                speedups.append(speedup)
                clusters.append(len(seen["kernel_info"]))
        finally:
            os.chdir(here)
            module.cluster_recursive = original
    return summarise(errors, speedups, clusters, time.perf_counter() - t0)


def row(label: str, r: dict[str, Any]) -> str:
    lo, hi = r["clusters_range"]
    clusters = f"{r['clusters']:.1f}" + (f" ({lo}–{hi})" if lo != hi else "")
    cov = (
        f"{100 * r['bound_coverage']:.0f}% / {100 * r['interval_coverage']:.0f}%"
        if r.get("interval_coverage") is not None
        else "–"
    )
    bound = f"{100 * r['predicted_bound']:.2f}%" if "predicted_bound" in r else "–"
    return (
        f"| {label} | {clusters} | {100 * r['mean_error']:.3f}% | {100 * r['max_error']:.3f}% "
        f"| {format_speedup(r['hmean_speedup']).replace('x', '×')} | {bound} | {cov} |"
    )


HEADER = (
    "| run | clusters | mean error | max error | hmean speedup | predicted bound "
    "| covered (bound / interval) |\n|---|---|---|---|---|---|---|"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profiles", nargs="*", type=Path)
    parser.add_argument("--reference", type=Path, default=os.environ.get("STEM_AE_REF"))
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument("--epsilon", type=float, default=0.05)
    parser.add_argument("--ablation", action="store_true", help="ablation rows per profile")
    parser.add_argument("--no-reference", action="store_true", help="skip the reference")
    args = parser.parse_args()
    module = None
    if args.reference and not args.no_reference:
        module = reference_module(Path(args.reference))
    else:
        print("reference: not run (pass --reference DIR or set STEM_AE_REF)")
    for path in args.profiles or DEFAULT_PROFILES:
        bundle = load(path)
        print(f"\n### {path.name}: {bundle.n_launches:,} launches, "
              f"{bundle.launches['name'].nunique()} kernels, eps {args.epsilon:g}, "
              f"{args.seeds} seeds\n")
        print(HEADER)
        if module is not None:
            print(row("STEM-AE reference", reference(module, bundle, args.seeds, args.epsilon)),
                  flush=True)
        rows = ABLATION if args.ablation else ABLATION[-1:]
        for label, params in rows:
            print(row(f"hilsim stem: {label}",
                      ours(bundle, args.seeds, {"epsilon": args.epsilon, **params})), flush=True)


if __name__ == "__main__":
    main()
