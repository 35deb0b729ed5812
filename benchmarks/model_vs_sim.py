"""The analytical model vs the cycle-level simulator, per card, and vs 25 Volta kernels.

Usage::

    python benchmarks/model_vs_sim.py [--data tests/data/model-correlation] [--worst 10]

For each ``<card>.csv`` of the correlation set (``benchmarks/model_correlation_set.py``)
the model (:mod:`hilsim.simmodel.model`) gets the card's preset with the simulated SM
count and launch latency (:func:`hilsim.simmodel.correlation.card_timing`) and the
launches' counters; printed: the Accel-Sim correlator figures of cycles (MAE, NRMSE,
Pearson r) over all launches and per program (``calib_kernels`` is the set the model's
constants were chosen on; ``transformer_step`` kernels and the RTX 3070 were never used
for that: held out), then the worst kernels with the model's binding term and what the
counters say. Then the same for the 25 real Volta kernels
(``benchmarks/model_vs_accelwattch.py``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
from hilsim.simmodel import correlation as corr
from hilsim.simmodel.accelwattch import model_accuracy
from hilsim.simmodel.model import predict
from hilsim.simmodel.presets import load_preset

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "model-correlation"
VOLTA = ROOT / "tests" / "data" / "accelwattch" / "hw_perf.csv"


def predict_set(df: pd.DataFrame) -> pd.DataFrame:
    """Model predictions for one card's table (its SM count, no launch latency)."""
    card = str(df["card"].iat[0])
    cfg = corr.card_timing(card, int(df["sm_count"].iat[0]), 0.0)
    return predict(cfg, corr.model_input_from_sim(df))


def why(df: pd.DataFrame) -> pd.Series:
    """What the simulator's counters say bound a launch: IPC, L2 hit, DRAM B/clk, SIMT use."""
    cyc = df["cycles"].to_numpy(float)
    ipc = df["smsp__inst_executed.sum"].to_numpy(float) / cyc / df["sm_count"].to_numpy(float)
    dram = (df["dram__bytes_read.sum"].fillna(0) + df["dram__bytes_write.sum"].fillna(0)) / cyc
    simt = df["smsp__thread_inst_executed_per_inst_executed.ratio"].to_numpy(float)
    hit = df["lts__t_sector_hit_rate.pct"].to_numpy(float)
    return pd.Series([f"IPC/SM {a:.2f}, DRAM {b:.0f} B/clk, L2 hit {c:.0f}%, {d:.0f} thr/warp"
                      for a, b, c, d in zip(ipc, dram, hit, simt, strict=True)], index=df.index)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--worst", type=int, default=10)
    args = parser.parse_args()
    for path in sorted(args.data.glob("*.csv")):
        df = corr.load_set(str(path))
        pred = predict_set(df)
        card = df["card"].iat[0]
        print(f"== {card} ({int(df['sm_count'].iat[0])} SMs): {len(df)} launches")
        print(f"  all:              {corr.scores(pred['cycles'], df['cycles']).line()}")
        for prog, idx in df.groupby("program").groups.items():
            s = corr.scores(pred.loc[idx, "cycles"], df.loc[idx, "cycles"])
            print(f"  {prog:17s} {s.line()}")
        err = (pred["cycles"] - df["cycles"]) / df["cycles"]
        worst = err.abs().sort_values(ascending=False).index[: args.worst]
        t = pd.DataFrame({
            "kernel": df.loc[worst, "kernel"].astype(str).str.slice(0, 16),
            "grid": df.loc[worst, "grid_x"], "block": df.loc[worst, "block_x"],
            "sim": df.loc[worst, "cycles"], "model": pred.loc[worst, "cycles"].round(),
            "err": (100 * err[worst]).map("{:+.0f}%".format),
            "model bound by": pred.loc[worst, "binding"].astype(str),
            "counters say": why(df.loc[worst]),
        })
        print(f"  worst {args.worst}:")
        with pd.option_context("display.width", 220, "display.max_colwidth", 60):
            print("    " + t.to_string(index=False).replace("\n", "\n    "))
        under = float(np.mean(err < 0))
        print(f"  under-predicted: {100 * under:.0f}% of launches\n")
    v = model_accuracy(load_preset("QV100").timing, pd.read_csv(VOLTA))
    print(f"== 25 real Volta kernels (AccelWattch hw_perf.csv, QV100 preset): "
          f"{len(v.table)} kernels: cycle MAE {100 * v.mae:.1f}%, Pearson r {v.pearson_r:.3f}")


if __name__ == "__main__":
    main()
