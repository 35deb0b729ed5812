"""Shared fixtures: small real and synthetic launch tables."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hilsim.analyzer.examples import EXAMPLES

from hilsim.core.bundle import Bundle
from hilsim.core.schema import normalize_launches

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def casio_bundle() -> Bundle:
    """The shipped real CASIO durations (STEM Fig. 1), interleaved into launch order."""
    example = EXAMPLES[0]
    table = pd.read_csv(example.path(example.profile), encoding="utf-8-sig")
    values = table.to_numpy(dtype=float)
    rows, cols = np.nonzero(~np.isnan(values))
    frame = pd.DataFrame(
        {"name": np.asarray(table.columns)[cols], "duration_ns": values[rows, cols]}
    )
    return Bundle(normalize_launches(frame, "casio"))


def mixture_bundle(
    peaks: list[tuple[str, float, float, int]], seed: int = 0, shuffle: bool = True
) -> Bundle:
    """Synthetic launches from a known mixture: (kernel, mean ns, std ns, count) per peak."""
    rng = np.random.default_rng(seed)
    names, durations = [], []
    for kernel, mean, std, count in peaks:
        names.extend([kernel] * count)
        durations.append(np.maximum(1, rng.normal(mean, std, count)).round())
    frame = pd.DataFrame({"name": names, "duration_ns": np.concatenate(durations)})
    if shuffle:
        frame = frame.sample(frac=1.0, random_state=seed).reset_index(drop=True)
    return Bundle(normalize_launches(frame, "mixture"))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The simulator, fuzz and NVRTC/SASS tiers are slow by nature: ``-m "not slow"`` (the
    fast subset in the README) leaves them out without naming every tier."""
    sass_tier = {"test_microbench_sass.py", "test_microbench_nvrtc.py"}
    for item in items:
        tier = item.get_closest_marker("gpgpusim") or item.get_closest_marker("fuzz")
        if tier or item.path.name in sass_tier:
            item.add_marker(pytest.mark.slow)
