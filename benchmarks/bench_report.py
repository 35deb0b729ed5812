"""Time ``hilsim validate`` report generation on a 1M-launch bundle.

The bundle tiles the real CASIO launch pattern (``casio_scaled.scaled_bundle``) to
1M launches and adds synthetic per-launch metrics (``gpu__cycles_elapsed.max`` and
DRAM/L2 sector counts derived from the durations with seeded noise) for every
launch, the worst case for the per-metric and correlation sections. Simulated cycles
come from a stand-in "model" (silicon cycles x seeded log-normal noise) on every
launch, so the full-simulation, sampling and scatter paths all run. Two plans (STEM
and random), read back from JSON as ``hilsim validate`` reads them, exercise the
Pareto plot and the recovery of cluster members (the methods re-run).

Run: ``python benchmarks/bench_report.py [N]``; budget: <= 30 s at 1M launches.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hilsim.analyzer import methods  # noqa: E402
from hilsim.analyzer.validate import (  # noqa: E402
    SimResults,
    silicon_cycles,
    validate,
    write_report,
)

from benchmarks.casio_scaled import scaled_bundle  # noqa: E402
from hilsim.core.plan import load_plan  # noqa: E402


def main(n: int = 1_000_000) -> float:
    bundle = scaled_bundle(n, jitter_ns=50)
    bundle.manifest = {"device": {"name": "synthetic A100 <CASIO x>", "max_sm_clock_mhz": 1410.0}}
    rng = np.random.default_rng(0)
    durations = bundle.launches["duration_ns"].to_numpy(np.float64)
    bundle.metrics = pd.DataFrame({
        "launch_id": np.arange(n),
        "dram__sectors_read.sum": durations * 3.0 * rng.lognormal(0, 0.2, n),
        "dram__sectors_write.sum": durations * 1.0 * rng.lognormal(0, 0.2, n),
        "lts__t_sectors_srcunit_tex_op_read.sum": durations * 8.0 * rng.lognormal(0, 0.1, n),
    })
    plans = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("stem", "random"):
            plan = methods.create(name).plan(bundle).attach_names(bundle.launches["name"])
            # read back from JSON as `hilsim validate` does: cluster members are then
            # recovered by re-running the method, which this timing includes
            plans.append((name, load_plan(plan.save(Path(tmp) / f"{name}.json"))))
    silicon, _ = silicon_cycles(bundle, 1410.0)
    counters = pd.DataFrame({
        "dram_reads": bundle.metrics["dram__sectors_read.sum"] * rng.lognormal(0, 0.1, n),
        "l2_global_read_accesses": bundle.metrics["lts__t_sectors_srcunit_tex_op_read.sum"],
    })
    sim = SimResults(silicon * rng.lognormal(0.05, 0.1, n), counters, "stand-in model")
    t0 = time.perf_counter()
    report, images = validate(bundle, plans, lambda p: sim, 1410.0)
    with tempfile.TemporaryDirectory() as tmp:
        html_path, _ = write_report(report, images, Path(tmp) / "report")
        size = html_path.stat().st_size
    seconds = time.perf_counter() - t0
    print(f"{n} launches, {len(plans)} plans: report in {seconds:.2f} s ({size / 1e6:.1f} MB HTML)")
    return seconds


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)
