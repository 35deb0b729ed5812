"""Launch latency is measured on the GPU and lands in a sane cycle range."""

from __future__ import annotations

import numpy as np
import pytest
from hilsim.microbench.launch import start_to_start_us
from hilsim.simmodel.tuner import tune

from hilsim.core import measurement_names as mn
from hilsim.core.measurement import Measurement


def test_start_to_start_from_globaltimer_stamps() -> None:
    starts = 1_000_000 + np.arange(200) * 3_200  # 3.2 us apart
    stamps = np.stack([starts, starts + 600], axis=1).ravel()
    us, ok = start_to_start_us(stamps, spin_end_ns=999_000)
    assert ok and us == pytest.approx(3.2)


@pytest.mark.parametrize("broken", ["missing", "before_spin", "out_of_order"])
def test_bad_stamps_are_invalid(broken: str) -> None:
    starts = 1_000_000 + np.arange(10) * 3_000
    if broken == "out_of_order":
        starts[4], starts[5] = starts[5], starts[4]
    stamps = np.stack([starts, starts + 500], axis=1).ravel()
    if broken == "missing":
        stamps[6] = 0
    spin_end = 2_000_000 if broken == "before_spin" else 0
    assert not start_to_start_us(stamps, spin_end)[1]


def _option(result, name):
    return next(o for o in result.options if o.name == name)


def test_gpu_side_launch_latency_lands_in_the_accelsim_range() -> None:
    rows = [Measurement(mn.LAUNCH_LATENCY_US, 3.2, "us"),
            Measurement(mn.SM_CLOCK_MHZ, 1755.0, "MHz")]
    result = tune(measurements=rows, preset_name="H100-SXM")
    value = float(_option(result, "-gpgpu_kernel_launch_latency").value)
    assert 1000 <= value <= 20000 and value == pytest.approx(3.2 * 1755, abs=1)


def test_a_host_round_trip_is_not_taken_as_launch_latency() -> None:
    """25 us (a Python launch + synchronize) would be 44k cycles: noted, not emitted."""
    rows = [Measurement(mn.LAUNCH_LATENCY_US, 25.0, "us"),
            Measurement(mn.SM_CLOCK_MHZ, 1755.0, "MHz")]
    result = tune(measurements=rows, preset_name="H100-SXM")
    value = float(_option(result, "-gpgpu_kernel_launch_latency").value)
    assert 500 <= value <= 20000
    assert any("launch latency" in n for n in result.notes)
