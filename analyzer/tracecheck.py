"""Warnings about sampling a trace with a method (plan time), one line each.

* **very few launches** for the method asked: sampling cannot save much; STEM's CLT
  argument (section 3.2) wants 30+ launches per cluster.

With them go the trace's own warnings (communication kernels, overlap, a µs timer, a
made-up launch order: :mod:`hilsim.formats.tracewarnings`), recorded in the manifest at
import (:func:`bundle_warnings`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from hilsim.formats.tracewarnings import trace_warnings

#: fewer launches than this: sampling saves little whatever the method
FEW_LAUNCHES = 5_000
#: STEM section 3.2: the CLT rule of thumb, m >= 30 per cluster
CLT_MIN = 30


def method_warnings(launches: pd.DataFrame, method: str) -> list[str]:
    """Warnings about using ``method`` on this trace (plan time), one line each."""
    n = len(launches)
    warnings: list[str] = []
    if 0 < n < FEW_LAUNCHES:
        line = f"only {n:,} launches for {method}: sampling saves little on a trace this short"
        if method == "stem":
            codes = launches["name"].astype("category").cat.codes.to_numpy()
            counts = np.bincount(codes[codes >= 0])
            durations = launches["duration_ns"].to_numpy()
            time = np.bincount(codes[codes >= 0], weights=durations[codes >= 0])
            small = float(time[counts < CLT_MIN].sum() / time.sum()) if time.sum() else 0.0
            line += (
                f"; {small:.0%} of the time is in kernels with fewer than {CLT_MIN} launches "
                "(STEM's CLT rule of thumb, section 3.2): their error bounds rest on few "
                "samples (a cluster is simulated whole only when its draws reach its size)"
            )
        warnings.append(line)
    return warnings


def bundle_warnings(bundle: Any) -> list[str]:
    """The trace warnings of a bundle: those its manifest recorded at import, else
    computed now (bundles imported by older versions)."""
    manifest = bundle.manifest or {}
    recorded = manifest.get("warnings")
    if isinstance(recorded, list) and manifest.get("n_launches") in (None, bundle.n_launches):
        return [str(w) for w in recorded]
    return trace_warnings(bundle.launches, manifest)
