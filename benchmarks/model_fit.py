"""Fit the timing model's five global constants on the training kernels.

Usage::

    python benchmarks/model_fit.py [--data tests/data/model-correlation] [--card SM7_QV100]
        [--program calib_kernels]

Least squares on sqrt(|predicted / simulated - 1|), i.e. minimum cycle MAE (scipy
``least_squares``, bounded)
over the ``--program`` launches of the ``--card`` table only; prints the constants to put
in :data:`hilsim.simmodel.model.FIT` and the Accel-Sim correlator figures on the training
launches, on the other program's launches of that card (held-out kernels) and on every
other card's table (held-out card).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from hilsim.simmodel import correlation as corr
from hilsim.simmodel import model
from scipy.optimize import least_squares

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "model-correlation"
NAMES = ("kernel_overhead", "dep_issue_cycles", "issue_efficiency", "fp32_mix", "warp_mlp")
LOWER = (0.0, 0.5, 0.2, 0.0, 1.0)
UPPER = (5000.0, 20.0, 1.0, 1.0, 8.0)


def _predict(df, values) -> np.ndarray:
    model.FIT.update(dict(zip(NAMES, values, strict=True)))
    cfg = corr.card_timing(str(df["card"].iat[0]), int(df["sm_count"].iat[0]), 0.0)
    return model.predict_cycles(cfg, corr.model_input_from_sim(df))[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--card", default="SM7_QV100")
    parser.add_argument("--program", default="calib_kernels")
    args = parser.parse_args()
    tables = {p.stem: corr.load_set(str(p)) for p in sorted(args.data.glob("*.csv"))}
    full = tables[args.card]
    train = full[full["program"] == args.program].reset_index(drop=True)
    y = np.log(train["cycles"].to_numpy(float))
    start = np.array([model.FIT[k] for k in NAMES])
    # residual sqrt(|pred / sim - 1|): the least-squares optimum minimises the cycle MAE
    fit = least_squares(lambda v: np.sqrt(np.abs(np.exp(np.log(_predict(train, v)) - y) - 1)
                                          + 1e-12), start, bounds=(LOWER, UPPER))
    values = dict(zip(NAMES, (float(round(v, 3)) for v in fit.x), strict=True))
    print("FIT =", values)
    print(f"train  {args.card} {args.program}: "
          f"{corr.scores(_predict(train, fit.x), train['cycles']).line()}")
    rest = full[full["program"] != args.program].reset_index(drop=True)
    if len(rest):
        print(f"held-out kernels {args.card}: "
              f"{corr.scores(_predict(rest, fit.x), rest['cycles']).line()}")
    for card, df in tables.items():
        if card != args.card:
            print(f"held-out card {card} (all): "
                  f"{corr.scores(_predict(df, fit.x), df['cycles']).line()}")
            for prog, sub in df.groupby("program"):
                sub = sub.reset_index(drop=True)
                print(f"  {prog}: {corr.scores(_predict(sub, fit.x), sub['cycles']).line()}")


if __name__ == "__main__":
    main()
