"""The analytical model vs 25 real Volta kernels (AccelWattch ``hw_perf.csv``).

Usage::

    python benchmarks/model_vs_accelwattch.py [--csv tests/data/accelwattch/hw_perf.csv]
        [--preset QV100]

Prints predicted vs measured cycles per kernel, the binding limit, the cycle MAE
(mean |pred - true| / true, the Accel-Sim paper's definition) and Pearson r. No
constant is fitted to these points; see docs/timing-model.md for what limits accuracy.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd
from hilsim.simmodel.accelwattch import model_accuracy
from hilsim.simmodel.presets import load_preset

CSV = Path(__file__).resolve().parent.parent / "tests" / "data" / "accelwattch" / "hw_perf.csv"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", type=Path, default=CSV)
    parser.add_argument("--preset", default="QV100")
    args = parser.parse_args()
    v = model_accuracy(load_preset(args.preset).timing, pd.read_csv(args.csv))
    t = v.table.copy()
    t["kernel"] = t["kernel"].str.slice(0, 40)
    t["rel_error"] = (100 * t["rel_error"]).map("{:+.1f}%".format)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(t.to_string(index=False, float_format="{:,.0f}".format))
    print(f"\n{len(t)} kernels: cycle MAE {100 * v.mae:.1f}%, Pearson r {v.pearson_r:.3f}")


if __name__ == "__main__":
    main()
