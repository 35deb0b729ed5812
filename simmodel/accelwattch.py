"""Adapter from AccelWattch's ``hw_perf.csv`` (real Volta counters) to the model's inputs.

``hw_perf.csv`` (accel-sim-framework ``util/accelwattch/accelwattch_hw_profiler``,
written by ``gen_hw_perf_csv.py``) has, per kernel, the mean per launch of Nsight
Compute counters on a Quadro GV100; units are in ``tests/data/accelwattch/README.md``:
L1/L2/DRAM columns are **32 B sectors**, ``SHRD_ACC`` is **warp instructions**
(``sm__sass_inst_executed_op_shared_{ld,st}``), ``Elapsed_Cycles`` is
``sm__cycles_elapsed.sum / 80`` (cycles per launch).

It has no instruction counts and no launch configuration. The adapter therefore

* sets no ``smsp__inst_executed.sum`` (the model's issue bound falls back to the known
  memory instructions, a lower bound) and no FP pipe counts;
* assumes one full wave at full occupancy: 256 threads per CTA, 32 registers, no shared
  memory, ``grid = SMs x CTAs per SM`` (the most latency-hiding parallelism the GPU
  offers) — a documented assumption, not fitted;
* does not use ``Pipeline_Duty`` or ``Num_Idle_SMs``: both are normalised by the
  measured elapsed cycles, so using them would leak the quantity being predicted.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from hilsim.simmodel import model
from hilsim.simmodel.config import TimingConfig

from hilsim.core.errors import HilsimError

AW_COLUMNS: tuple[str, ...] = (
    "Benchmark", "Kernel", "L1_RH", "L1_RM", "L1_WH", "L1_WM", "SHRD_ACC", "DRAM_Rd",
    "DRAM_Wr", "L2_RH", "L2_RM", "L2_WH", "L2_WM", "Elapsed_Cycles",
)
#: assumed launch configuration (see module docstring).
ASSUMED_BLOCK = 256
ASSUMED_REGS = 32


def counters_from_accelwattch(df: pd.DataFrame, config: TimingConfig) -> pd.DataFrame:
    """Model inputs (Nsight Compute names + launch configuration) from ``hw_perf.csv`` rows.

    Sector columns map to sector counters; DRAM sectors become bytes (x 32); the launch
    configuration is the one-full-wave assumption of the module docstring, computed for
    ``config`` with the occupancy calculator.
    """
    missing = [c for c in AW_COLUMNS if c not in df.columns]
    if missing:
        raise HilsimError(f"AccelWattch table: missing column(s) {', '.join(missing)}")
    p = model.model_params(config)
    one = np.ones(1)
    cpsm = model.occupancy_limits(p, one * ASSUMED_BLOCK, one * ASSUMED_REGS,
                                  one * 0)["ctas_per_sm"][0]
    grid = int(cpsm * p.sm_count.value)
    n = len(df)
    f = df[list(AW_COLUMNS[2:])].astype(float)
    return pd.DataFrame(
        {
            "grid_x": np.full(n, grid), "grid_y": 1, "grid_z": 1,
            "block_x": np.full(n, ASSUMED_BLOCK), "block_y": 1, "block_z": 1,
            "regs": ASSUMED_REGS, "smem_static": 0, "smem_dynamic": 0,
            model.L1_LD: (f["L1_RH"] + f["L1_RM"]).to_numpy(),
            model.L1_ST: (f["L1_WH"] + f["L1_WM"]).to_numpy(),
            model.SHLD_INST: f["SHRD_ACC"].to_numpy(),  # loads + stores together
            model.L2_RD: (f["L2_RH"] + f["L2_RM"]).to_numpy(),
            model.L2_WR: (f["L2_WH"] + f["L2_WM"]).to_numpy(),
            model.DRAM_RD: f["DRAM_Rd"].to_numpy() * model.SECTOR_BYTES,
            model.DRAM_WR: f["DRAM_Wr"].to_numpy() * model.SECTOR_BYTES,
        },
        index=df.index,
    )


@dataclass
class ModelAccuracy:
    """Model vs measured cycles: per-kernel table, MAE (Accel-Sim's), Pearson r."""

    table: pd.DataFrame
    mae: float
    pearson_r: float


def model_accuracy(config: TimingConfig, df: pd.DataFrame) -> ModelAccuracy:
    """Predict every row of ``hw_perf.csv`` and compare to ``Elapsed_Cycles``.

    MAE = mean(|pred - true| / true) (Accel-Sim paper, Section V: cycle mean absolute
    error); r = Pearson correlation of predicted and measured cycles.
    """
    pred = model.predict(config, counters_from_accelwattch(df, config))
    true = df["Elapsed_Cycles"].astype(float).to_numpy()
    cyc = pred["cycles"].to_numpy()
    table = pd.DataFrame({
        "benchmark": df["Benchmark"].to_numpy(), "kernel": df["Kernel"].to_numpy(),
        "true_cycles": true, "pred_cycles": cyc, "binding": pred["binding"].to_numpy(),
        "rel_error": (cyc - true) / true,
    })
    mae = float(np.mean(np.abs(cyc - true) / true))
    r = float(np.corrcoef(cyc, true)[0, 1])
    return ModelAccuracy(table, mae, r)
