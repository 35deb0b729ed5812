"""Long-latency instruction counts from GPGPU-Sim's PTX line statistics."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hilsim.simmodel.gpgpusim import ptxlines as pl

from hilsim.core.errors import HilsimError

DATA = Path(__file__).parent / "data"
PTX = DATA / "ptxlines" / "ts.1.sm_70.ptx"
LINES = DATA / "ptxlines" / "transformer_step.lines.txt"
SETS = DATA / "model-correlation"


@pytest.mark.parametrize(("op", "cls"), [
    ("rem.s32", pl.INT_DIV), ("div.u64", pl.INT_DIV), ("sin.approx.f32", pl.SFU),
    ("ex2.approx.ftz.f32", pl.SFU), ("rsqrt.approx.f32", pl.SFU), ("div.rn.f32", pl.FP32_DIV),
    ("add.f32", None), ("sqrt.rn.f64", None), ("div.rn.f64", None), ("ld.global.f32", None),
])
def test_classify(op: str, cls: str | None) -> None:
    assert pl.classify(op) == cls


def test_kernel_totals_of_a_real_run() -> None:
    t = pl.kernel_totals(PTX, LINES)
    assert len(t) == 10  # the ten transformer_step kernels
    # every thread of mean_pool runs one div.rn.f32 (the mean), outside any loop
    mp = t.loc["_Z9mean_poolPKfPfi"]
    assert mp[f"{pl.FP32_DIV}:once"] == mp["entry"] == 64
    # softmax_rows: ex2 per element (MUFU), gelu: tanh's ex2 + rcp
    assert t.loc["_Z12softmax_rowsPKfPfii", f"{pl.SFU}:once"] == 3072
    assert t.loc["_Z4geluPKfPfi", f"{pl.SFU}:once"] == 6572
    # GEMM has no long-latency instruction
    g = t.loc["_Z9gemm_biasILi16EEvPKfS1_S1_Pfiii"]
    assert g[[f"{c}:{k}" for c in pl.CLASSES for k in ("once", "loop")]].sum() == 0


def test_correlation_set_columns_are_what_the_module_computes() -> None:
    df = pd.read_csv(SETS / "SM7_QV100.csv")
    ts = df[df["program"] == "transformer_step"]
    got = pl.add_long_latency(ts, PTX, LINES)
    for c in pl.CLASSES:
        assert got[c].to_numpy() == pytest.approx(ts[c].to_numpy())
    # the counts are functional (same PTX, same launches): both cards' tables agree
    other = pd.read_csv(SETS / "SM86_RTX3070.csv")
    merged = df.merge(other, on=["program", "launch_id"], suffixes=("", "_b"))
    for c in pl.CLASSES:
        assert (merged[c] == merged[f"{c}_b"]).all()


def test_one_rem_per_thread_in_chase_k() -> None:
    # chase_k computes its start index with one `%` per thread: one per warp
    df = pd.read_csv(SETS / "SM7_QV100.csv")
    ch = df[df["kernel"] == "chase_k"]
    warps = ch["grid_x"] * np.ceil(ch["block_x"] / 32)
    assert ch[pl.INT_DIV].to_numpy() == pytest.approx(warps.to_numpy(), abs=0.05)
    assert (ch[pl.SFU] == 0).all()


def test_bad_line_stats_file(tmp_path: Path) -> None:
    bad = tmp_path / "lines.txt"
    bad.write_text("kernel line : count\nts.1.sm_70.ptx x : 5\n")
    with pytest.raises(HilsimError, match=r"lines.txt: row 2"):
        pl.kernel_totals(PTX, bad)


def test_kernel_not_in_ptx() -> None:
    df = pd.read_csv(SETS / "SM7_QV100.csv")
    calib = df[df["program"] == "calib_kernels"].head(3)
    with pytest.raises(HilsimError, match="no .entry for kernel"):
        pl.add_long_latency(calib, PTX, LINES)


def test_device_function_lines_belong_to_no_kernel() -> None:
    ptx = (".entry k1(\n.param .u32 a\n)\n{\nrem.s32 %r1, %r2, %r3;\nret;\n}\n"
           ".func (.param .b32 r) f(\n.param .b32 x\n)\n{\nsin.approx.f32 %f1, %f2;\n}\n")
    got = pl.ptx_lines(ptx)
    assert list(got["kernel"]) == ["k1", "k1"]
    assert got["cls"].iat[0] == pl.INT_DIV and got["cls"].isna().iat[1]


def test_missing_file_is_one_error(tmp_path: Path) -> None:
    with pytest.raises(HilsimError, match="cannot read .*nope.txt"):
        pl.kernel_totals(PTX, tmp_path / "nope.txt")
