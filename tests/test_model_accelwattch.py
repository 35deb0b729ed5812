"""The model on 25 real Volta kernels (AccelWattch hw_perf.csv; tests/data/accelwattch).

Records the cycle MAE (Accel-Sim's definition) and Pearson r; asserts only sanity
bounds — the inputs lack instruction counts and launch configurations, and the model
is deliberately not tuned to these points (see docs/timing-model.md for the numbers).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hilsim.simmodel.accelwattch import counters_from_accelwattch, model_accuracy
from hilsim.simmodel.presets import load_preset

from hilsim.core.errors import HilsimError

CSV = Path(__file__).parent / "data" / "accelwattch" / "hw_perf.csv"


@pytest.fixture(scope="module")
def hw() -> pd.DataFrame:
    return pd.read_csv(CSV)


def test_adapter_units(hw: pd.DataFrame) -> None:
    cfg = load_preset("QV100").timing
    c = counters_from_accelwattch(hw, cfg)
    assert len(c) == 25
    row = hw.iloc[0]
    assert c["dram__bytes_read.sum"].iat[0] == row["DRAM_Rd"] * 32  # sectors -> bytes
    assert c["lts__t_sectors_op_read.sum"].iat[0] == row["L2_RH"] + row["L2_RM"]
    assert c["grid_x"].iat[0] == 80 * 8  # one full wave of 256-thread CTAs


def test_model_on_real_volta_kernels(hw: pd.DataFrame, record_property) -> None:
    v = model_accuracy(load_preset("QV100").timing, hw)
    print(v.table.to_string())
    print(f"cycle MAE {v.mae:.3f}, Pearson r {v.pearson_r:.3f} over {len(v.table)} kernels")
    record_property("accelwattch_cycle_mae", v.mae)
    record_property("accelwattch_pearson_r", v.pearson_r)
    assert np.isfinite(v.table["pred_cycles"]).all() and (v.table["pred_cycles"] > 0).all()
    assert np.isfinite(v.mae) and v.pearson_r > 0


def test_adapter_names_missing_columns(hw: pd.DataFrame) -> None:
    with pytest.raises(HilsimError, match="DRAM_Rd"):
        counters_from_accelwattch(hw.drop(columns=["DRAM_Rd"]), load_preset("QV100").timing)
