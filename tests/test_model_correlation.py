"""The timing model vs the cycle-level simulator on the committed correlation set.

``tests/data/model-correlation/<card>.csv``: real GPGPU-Sim runs (provenance in that
folder's README). The model's constants were fitted on the SM7_QV100 ``calib_kernels``
launches only (``benchmarks/model_fit.py``); the bounds below are the held-out figures
measured with ``benchmarks/model_vs_sim.py`` plus a small margin, so a change to the model
that makes it worse on kernels or a card it never saw fails here.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hilsim.simmodel import correlation as corr
from hilsim.simmodel.model import predict_cycles

from hilsim.core.errors import HilsimError

DATA = Path(__file__).parent / "data" / "model-correlation"

#: (card, program or None for all) -> (max MAE, max NRMSE, min Pearson r): measured + margin
#: (benchmarks/model_vs_sim.py, model.FIT as committed, latencies measured on each card,
#: long-latency instruction counts charged at the card's DIV/SFU latencies):
#: QV100 transformer_step (held-out kernels) MAE 19.9%, NRMSE 35.1%, r 0.983; RTX 3070 all
#: (held-out card) 24.3%, 108.5%, 0.907; RTX 3070 transformer_step 17.9%, 31.7%, 0.981;
#: QV100 calib_kernels (training) 20.2%, 69.1%, 0.946 (with the latencies of the two-count
#: chases; model.FIT was fitted with the one-count ones: 20.3%, 67.1%, 0.949 then)
BOUNDS: dict[tuple[str, str | None], tuple[float, float, float]] = {
    ("SM7_QV100", "transformer_step"): (0.21, 0.37, 0.97),
    ("SM86_RTX3070", None): (0.26, 1.10, 0.89),
    ("SM86_RTX3070", "transformer_step"): (0.19, 0.33, 0.97),
    ("SM7_QV100", "calib_kernels"): (0.22, 0.71, 0.94),
}


def _scores(card: str, program: str | None) -> corr.Scores:
    df = corr.load_set(str(DATA / f"{card}.csv"))
    if program is not None:
        df = df[df["program"] == program].reset_index(drop=True)
    cfg = corr.card_timing(card, int(df["sm_count"].iat[0]), 0.0)
    cycles, _ = predict_cycles(cfg, corr.model_input_from_sim(df))
    return corr.scores(cycles, df["cycles"].to_numpy(float))


def test_correlation_set_is_large_and_real() -> None:
    total = 0
    for card in ("SM7_QV100", "SM86_RTX3070"):
        df = corr.load_set(str(DATA / f"{card}.csv"))
        assert (df["card"] == card).all() and (df["sm_count"] == 4).all()
        assert df["cycles"].gt(0).all() and df["smsp__inst_executed.sum"].gt(0).all()
        total += len(df)
        assert len(df) >= 300
        assert df["kernel"].nunique() >= 23  # 13 calibration kernels + transformer's 10
    assert total >= 600


@pytest.mark.parametrize("key", sorted(BOUNDS, key=str))
def test_model_within_measured_bounds(key: tuple[str, str | None]) -> None:
    mae, nrmse, r = BOUNDS[key]
    s = _scores(*key)
    assert s.mae <= mae, s.line()
    assert s.nrmse <= nrmse, s.line()
    assert s.pearson_r >= r, s.line()


def test_scores_match_hand_computed() -> None:
    s = corr.scores(np.array([110.0, 90.0, 300.0]), np.array([100.0, 100.0, 200.0]))
    assert s.mae == pytest.approx((0.1 + 0.1 + 0.5) / 3)
    assert s.nrmse == pytest.approx(np.sqrt((100 + 100 + 10000) / 3) / (400 / 3))
    assert s.pearson_r == pytest.approx(np.corrcoef([110, 90, 300], [100, 100, 200])[0, 1])


def test_bad_table_is_one_line_error(tmp_path: Path) -> None:
    bad = tmp_path / "x.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(HilsimError, match="not a correlation table"):
        corr.load_set(str(bad))
    with pytest.raises(HilsimError, match="no such correlation table"):
        corr.load_set(str(tmp_path / "missing.csv"))
    with pytest.raises(HilsimError, match="no preset for card"):
        corr.card_timing("SM_NOPE")


def test_card_timing_has_the_cards_measured_latencies() -> None:
    """The model gets each card's microbenchmark latencies (latency_calibration.json), not
    the Volta fallbacks: the RTX 3070's DRAM is ~150 cycles further than the QV100's."""
    from hilsim.simmodel.model import model_params

    q = model_params(corr.card_timing("SM7_QV100", 4, 0.0))
    r = model_params(corr.card_timing("SM86_RTX3070", 4, 0.0))
    assert q.l1_latency.value == pytest.approx(24.0, abs=0.01)
    assert "measured" in q.l1_latency.source and "SM7_QV100" in q.l1_latency.source
    assert q.l1_latency.value < q.l2_latency.value < q.dram_latency.value
    assert r.dram_latency.value - q.dram_latency.value > 100
    assert r.shared_latency.value > q.shared_latency.value
    # a latency option override moves the measured latency it feeds
    slow = corr.card_latencies("SM7_QV100", {"-gpgpu_l1_latency": "30"})
    assert slow["l1.hit_latency_cycles"] > q.l1_latency.value + 5
    assert corr.card_latencies("SM_NOPE") == {}
