import numpy as np
import pandas as pd
import pytest

from hilsim.core.errors import HilsimError
from hilsim.core.schema import (
    checked_int64,
    kernel_base_name,
    launch_config_key,
    normalize_launches,
)


@pytest.mark.parametrize(
    ("full", "short"),
    [
        ("sgemm_128x64_nn", "sgemm_128x64_nn"),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
            "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, "
            "at::detail::Array<char*, 1>)",
            "vectorized_elementwise_kernel",
        ),
        (
            "void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel"
            "<float, 4>(at::TensorIteratorBase&, int)",
            "distribution_elementwise_grid_stride_kernel",
        ),
        (
            "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4>(Params)",
            "Kernel",
        ),
        ("volta_sgemm_128x64_nn", "volta_sgemm_128x64_nn"),
    ],
)
def test_kernel_base_name(full: str, short: str) -> None:
    assert kernel_base_name(full) == short


def test_normalize_orders_by_start_and_assigns_ids() -> None:
    frame = pd.DataFrame(
        {"name": ["b", "a", "c"], "duration_ns": [5, 6, 7], "start_ns": [30, 10, 20]}
    )
    out = normalize_launches(frame, "f.csv")
    assert out["name"].astype(str).tolist() == ["a", "c", "b"]
    assert out["launch_id"].tolist() == [0, 1, 2]
    assert str(out["grid_x"].dtype) == "Int64" and out["grid_x"].isna().all()


def test_normalize_rejects_negative_duration_naming_row() -> None:
    frame = pd.DataFrame({"name": ["a", "b"], "duration_ns": [5, -1]})
    with pytest.raises(HilsimError, match=r"f\.csv: row 1: duration_ns"):
        normalize_launches(frame, "f.csv")


def test_normalize_rejects_empty_and_missing_columns() -> None:
    with pytest.raises(HilsimError, match="empty profile"):
        normalize_launches(pd.DataFrame({"name": [], "duration_ns": []}), "e.csv")
    with pytest.raises(HilsimError, match="missing column 'duration_ns'"):
        normalize_launches(pd.DataFrame({"name": ["a"]}), "m.csv")


def test_config_key_separates_launch_configurations() -> None:
    frame = pd.DataFrame(
        {"name": ["k", "k", "k", "j"], "duration_ns": [1, 2, 3, 4], "grid_x": [1, 2, 1, 1]}
    )
    out = normalize_launches(frame, "x")
    keys = launch_config_key(out, by_config=True)
    assert keys[0] == keys[2] != keys[1] and keys[3] not in (keys[0], keys[1])
    assert len(set(launch_config_key(out, by_config=False))) == 2


def test_missing_region_is_an_all_null_categorical_without_categories() -> None:
    frame = pd.DataFrame({"name": ["a", "b", "a"], "duration_ns": [5, 6, 7]})
    region = normalize_launches(frame, "f.csv")["region"]
    expected = pd.Series(pd.Categorical([None] * 3, categories=[]), name="region")
    pd.testing.assert_series_equal(region, expected)


def _config_key_by_groupby(launches: pd.DataFrame, by_config: bool) -> np.ndarray:
    """The definition: (name, grid, block) tuples numbered in order of first appearance."""
    from hilsim.core.schema import LAUNCH_CONFIG_COLUMNS

    parts = {"name": launches["name"].cat.codes.to_numpy(dtype=np.int64)}
    if by_config:
        for column in LAUNCH_CONFIG_COLUMNS:
            if launches[column].notna().any():
                parts[column] = launches[column].fillna(-1).to_numpy(dtype=np.int64)
    frame = pd.DataFrame(parts)
    return frame.groupby(list(frame.columns), sort=False).ngroup().to_numpy(dtype=np.int64)


@pytest.mark.parametrize("seed", range(12))
def test_config_key_is_the_groupby_numbering(seed: int) -> None:
    """Folded key (radix / factorized, constant and null columns skipped) == group-by."""
    from hilsim.core.schema import LAUNCH_CONFIG_COLUMNS

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 4000))
    frame = pd.DataFrame(
        {"name": pd.Categorical.from_codes(rng.integers(0, 5, n), categories=list("abcde"))}
    )
    for column in LAUNCH_CONFIG_COLUMNS:
        kind = rng.integers(0, 4)
        if kind == 0:  # all null
            values = pd.array(np.zeros(n, dtype=np.int64), dtype="Int64")
            values[:] = pd.NA
        elif kind == 1:  # constant
            values = pd.array(np.full(n, 7), dtype="Int64")
        elif kind == 2:  # few values, some null
            values = pd.array(rng.integers(0, 4, n), dtype="Int64")
            values[rng.random(n) < 0.2] = pd.NA
        else:  # a wide range (factorized, not radix)
            values = pd.array(rng.integers(0, 1 << 40, n) * rng.integers(0, 2, n), dtype="Int64")
        frame[column] = values
    for by_config in (True, False):
        expected = _config_key_by_groupby(frame, by_config)
        assert np.array_equal(launch_config_key(frame, by_config), expected)


def test_int64_columns_are_checked_without_a_float_round_trip() -> None:
    # int64 input (what the columnar readers give) keeps values past 2^53 exact, and the
    # non-negative and required checks still name the row
    big = np.array([2**53 + 1, 5], dtype=np.int64)
    assert checked_int64(big, "f", "start_ns", required=True).tolist() == [2**53 + 1, 5]
    nullable = pd.arrays.IntegerArray(np.array([3, 0, 4]), np.array([False, True, False]))
    out = checked_int64(nullable, "f", "grid_x")
    assert out.tolist() == [3, pd.NA, 4]
    with pytest.raises(HilsimError, match=r"^f: row 1: duration_ns must be a non-negative"):
        checked_int64(np.array([1, -2], dtype=np.int64), "f", "duration_ns", nonnegative=True)
    with pytest.raises(HilsimError, match=r"^f: row 1: start_ns must be a number, got <NA>"):
        checked_int64(nullable, "f", "start_ns", required=True)
    # the same messages as the general path gives for the same values as floats
    with pytest.raises(HilsimError, match=r"^f: row 1: start_ns must be a number, got nan"):
        checked_int64(np.array([3.0, np.nan]), "f", "start_ns", required=True)
