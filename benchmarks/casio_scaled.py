"""Launch tables of any size built from the real CASIO duration distributions.

The shipped CASIO table (STEM Fig. 1) is interleaved into launch order and then
repeated until ``n`` launches: the distributions (wide, narrow, multi-peak) are
real; only the workload length is scaled.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from hilsim.analyzer.examples import EXAMPLES

from hilsim.core.bundle import Bundle
from hilsim.core.schema import LAUNCH_COLUMNS, missing_int_column


def casio_launch_pattern() -> tuple[np.ndarray, np.ndarray]:
    """(kernel codes, durations ns) of the interleaved CASIO table, and the names."""
    example = EXAMPLES[0]
    table = pd.read_csv(example.path(example.profile), encoding="utf-8-sig")
    values = table.to_numpy(dtype=float)
    rows, cols = np.nonzero(~np.isnan(values))  # row-major = round-robin interleave
    return cols.astype(np.int64), values[rows, cols].astype(np.int64), list(table.columns)


def scaled_bundle(n: int, jitter_ns: int = 0, seed: int = 0) -> Bundle:
    """A bundle of ``n`` launches repeating the CASIO pattern (built vectorised).

    ``jitter_ns`` adds uniform integer noise in [0, jitter_ns) to every duration, so
    that most durations are distinct (the worst case for STEM's distinct-value
    compression); 0 keeps the real values.
    """
    codes, durations, names = casio_launch_pattern()
    reps = -(-n // len(codes))
    codes = np.tile(codes, reps)[:n]
    durations = np.tile(durations, reps)[:n]
    if jitter_ns:
        rng = np.random.default_rng(seed)
        durations = durations + rng.integers(0, jitter_ns, size=n)
    launches = pd.DataFrame(
        {
            "launch_id": np.arange(n, dtype=np.int64),
            "name": pd.Categorical.from_codes(codes, categories=pd.Index(names, dtype=object)),
            "duration_ns": durations,
        }
    )
    launches["kernel"] = launches["name"]
    for column in LAUNCH_COLUMNS:
        if column not in launches.columns:
            launches[column] = missing_int_column(n)
    launches["region"] = pd.Categorical.from_codes(np.full(n, -1), categories=[])
    return Bundle(launches=launches[list(LAUNCH_COLUMNS)])
